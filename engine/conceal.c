/* Packet-loss concealment: see conceal.h. */
#include "conceal.h"

#include <math.h>
#include <string.h>

#include "whisperknot.h"

#define PERIOD_MIN (WK_SAMPLE_RATE / 400)       /* 2.5 ms: 400 Hz */
#define PERIOD_MAX (WK_SAMPLE_RATE / 50)        /* 20 ms: 50 Hz */
#define MATCH (WK_SAMPLE_RATE / 100)    /* 10 ms compared */
#define HOLD (WK_SAMPLE_RATE / 100)     /* 10 ms at full level */
#define FADE (WK_SAMPLE_RATE / 20)      /* then 50 ms down to silence */

#if PERIOD_MAX + MATCH > WK_CONCEAL_CONTEXT
#error "a side's context holds the longest period and the samples compared"
#endif

/* The lag in [PERIOD_MIN, PERIOD_MAX] at which x's last MATCH samples
 * best match those one lag earlier (normalised cross-correlation); 0
 * when x is too short or silent there. */
static int
best_period (const float *x, size_t n)
{
  const float *w;
  double ww = 0.0, best = -2.0;
  int lag_max = PERIOD_MAX, lag, best_lag = 0;
  size_t i;

  if (n < PERIOD_MIN + MATCH)
    return 0;
  if ((size_t) lag_max > n - MATCH)
    lag_max = (int) (n - MATCH);
  w = x + n - MATCH;
  for (i = 0; i < MATCH; i++)
    ww += (double) w[i] * w[i];
  if (ww < 1e-12)
    return 0;
  for (lag = PERIOD_MIN; lag <= lag_max; lag++) {
    const float *a = w - lag;
    double aw = 0.0, aa = 0.0, r;
    for (i = 0; i < MATCH; i++) {
      aw += (double) a[i] * w[i];
      aa += (double) a[i] * a[i];
    }
    r = aa > 0.0 ? aw / sqrt (aa * ww) : -1.0;
    if (r > best) {
      best = r;
      best_lag = lag;
    }
  }
  return best_lag;
}

void
wk_conceal_plan (wk_conceal * c, const float *before, size_t n_before,
    const float *after, size_t n_after, uint64_t len)
{
  size_t i;

  memset (c, 0, sizeof *c);
  c->len = len;
  if (n_before > WK_CONCEAL_CONTEXT) {
    before += n_before - WK_CONCEAL_CONTEXT;
    n_before = WK_CONCEAL_CONTEXT;
  }
  if (n_after > WK_CONCEAL_CONTEXT)
    n_after = WK_CONCEAL_CONTEXT;
  if (before)
    memcpy (c->side[0], before, n_before * sizeof *before);
  c->n[0] = before ? n_before : 0;
  for (i = 0; after && i < n_after; i++)
    c->side[1][n_after - 1 - i] = after[i];
  c->n[1] = after ? n_after : 0;
  c->period[0] = best_period (c->side[0], c->n[0]);
  c->period[1] = best_period (c->side[1], c->n[1]);
}

/* A side's level k samples from its edge of the hole. */
static float
level (uint64_t k)
{
  if (k < HOLD)
    return 1.0f;
  if (k >= HOLD + FADE)
    return 0.0f;
  return 1.0f - (float) (k - HOLD) / FADE;
}

/* Side s's sound k samples into the hole from its edge: its last period
 * repeated (the sample one period before the edge comes first). */
static float
repeat (const wk_conceal * c, int s, uint64_t k)
{
  const int p = c->period[s];

  return c->side[s][c->n[s] - (size_t) p + (size_t) (k % (uint64_t) p)];
}

void
wk_conceal_fill (const wk_conceal * c, uint64_t j0, float *out, size_t m)
{
  size_t i;

  for (i = 0; i < m; i++) {
    const uint64_t j = j0 + i, from_end = c->len - 1 - j;
    /* the share of the side after: 0 at the hole's start, 1 at its end */
    const float u = (float) (((double) j + 0.5) / (double) c->len);
    const float lb = level (j), la = level (from_end);
    float v = 0.0f;

    if (c->period[0] > 0 && lb > 0.0f)
      v += (c->period[1] > 0 ? 1.0f - u : 1.0f) * lb * repeat (c, 0, j);
    if (c->period[1] > 0 && la > 0.0f)
      v += (c->period[0] > 0 ? u : 1.0f) * la * repeat (c, 1, from_end);
    out[i] = v;
  }
}
