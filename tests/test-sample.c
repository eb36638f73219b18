/* The temperature fallback's sampler (wk_sample_race, engine/decode.c):
 * its draws follow the distribution, never pick a token of probability
 * 0, and do not change when the probabilities move by f32 rounding (the
 * difference between kernel sets), where inverse-CDF sampling over the
 * vocabulary did. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "wk-test.h"

#define N_VOCAB 51865

static uint64_t
next_u64 (uint64_t * s)
{
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* uniform in [0, 1) */
static double
next_unit (uint64_t * s)
{
  return (double) (next_u64 (s) >> 11) * (1.0 / 9007199254740992.0);
}

static void
normalize (float *p, int n)
{
  double sum = 0.0;
  int i;

  for (i = 0; i < n; i++)
    sum += p[i];
  for (i = 0; i < n; i++)
    p[i] = (float) (p[i] / sum);
}

/* Pearson's chi-square of 400000 draws over 8 tokens (one of them with
 * p = 0) against the expected counts: 6 degrees of freedom, whose 99.99%
 * quantile is 27.9; a draw of the zero token fails outright. */
static void
test_frequencies_follow_p (void)
{
  float p[8] = { 0.30f, 0.20f, 0.15f, 0.0f, 0.12f, 0.10f, 0.08f, 0.05f };
  long count[8] = { 0 };
  const long n = 400000;
  uint64_t s = 42;
  double chi2 = 0.0;
  long k;
  int i;

  normalize (p, 8);
  for (k = 0; k < n; k++) {
    int t = wk_sample_race (p, 8, next_u64 (&s));
    CHECK (t >= 0 && t < 8);
    if (t >= 0 && t < 8)
      count[t]++;
  }
  CHECK_MSG (count[3] == 0, "the zero-probability token drawn %ld times",
      count[3]);
  for (i = 0; i < 8; i++) {
    double e = (double) n * p[i];
    if (e > 0.0)
      chi2 += (count[i] - e) * (count[i] - e) / e;
  }
  printf ("# chi-square %.2f (6 degrees of freedom)\n", chi2);
  CHECK_MSG (chi2 < 27.9, "chi-square %.2f", chi2);
}

/* A distribution like the decoder's at temperature 1.0 on a model unsure
 * of the audio: a few likely tokens and 30% of the mass spread over the
 * rest of the vocabulary. */
static void
unsure_distribution (float *p, uint64_t * s)
{
  static const int top[5] = { 257, 1002, 13, 50379, 318 };
  static const float top_p[5] = { 0.25f, 0.20f, 0.12f, 0.08f, 0.05f };
  int i;

  for (i = 0; i < N_VOCAB; i++)
    p[i] = (float) (0.3 / N_VOCAB * 2.0 * next_unit (s));
  for (i = 0; i < 5; i++)
    p[top[i]] = top_p[i];
  normalize (p, N_VOCAB);
}

/* Inverse-CDF sampling as decode.c did it before, for the comparison */
static int
inverse_cdf (const float *p, int n, uint64_t key)
{
  double r = (double) (key >> 11) * (1.0 / 9007199254740992.0), acc = 0.0;
  int i, last = 0;

  for (i = 0; i < n; i++) {
    if (p[i] <= 0.0f)
      continue;
    acc += p[i];
    last = i;
    if (acc > r)
      return i;
  }
  return last;
}

/* The probabilities as another kernel set gives them: each moved by up
 * to 1e-4 relative (the default model's logits differ by about 1e-4
 * between kernel sets with f32 activations) and all scaled by 1 + 1e-5
 * (the softmax's sum rounded otherwise). Of 2000 draws with the same
 * keys the race should change about 2000 * 2e-4 = 0.4; 3 allowed.
 * Inverse-CDF sampling, printed for comparison, changes most draws that
 * fall in the tail (30% of the mass), whose tokens are narrower than the
 * shift of the running sum. */
static void
test_draws_survive_rounding (void)
{
  float *p = malloc (N_VOCAB * sizeof *p), *q = malloc (N_VOCAB * sizeof *q);
  uint64_t s = 7, keys = 11;
  int k, i, changed = 0, changed_cdf = 0;

  CHECK (p && q);
  if (!p || !q)
    goto done;
  unsure_distribution (p, &s);
  for (i = 0; i < N_VOCAB; i++)
    q[i] = (float) (p[i] * (1.0 + 1e-5) * (1.0 + 1e-4 * (2.0 * next_unit (&s)
                - 1.0)));
  for (k = 0; k < 2000; k++) {
    uint64_t key = next_u64 (&keys);
    int a = wk_sample_race (p, N_VOCAB, key);
    int b = wk_sample_race (q, N_VOCAB, key);
    CHECK (a >= 0 && a < N_VOCAB);
    changed += a != b;
    changed_cdf += inverse_cdf (p, N_VOCAB, key) != inverse_cdf (q, N_VOCAB,
        key);
  }
  printf ("# perturbed: race %d of 2000 draws changed, inverse CDF %d\n",
      changed, changed_cdf);
  CHECK_MSG (changed <= 3, "%d of 2000 draws changed", changed);
done:
  free (p);
  free (q);
}

static void
test_edge_cases (void)
{
  float zero[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
  float one[4] = { 0.0f, 0.0f, 1.0f, 0.0f };
  float nan_p[3] = { NAN, 0.5f, 0.5f };
  uint64_t s = 3;
  int k;

  CHECK (wk_sample_race (zero, 4, 1) == -1);
  CHECK (wk_sample_race (NULL, 4, 1) == -1);
  CHECK (wk_sample_race (one, 0, 1) == -1);
  for (k = 0; k < 1000; k++) {
    uint64_t key = next_u64 (&s);
    int t = wk_sample_race (nan_p, 3, key);
    CHECK (wk_sample_race (one, 4, key) == 2);
    CHECK (t == 1 || t == 2);
    /* a key always gives the same token */
    CHECK (wk_sample_race (nan_p, 3, key) == t);
  }
}

int
main (void)
{
  RUN (test_frequencies_follow_p);
  RUN (test_draws_survive_rounding);
  RUN (test_edge_cases);
  return TEST_EXIT ();
}
