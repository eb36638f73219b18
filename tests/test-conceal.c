/* engine/conceal.c, the sound that fills lost packets: a periodic signal
 * is continued across a hole from both sides, from one side with a fade
 * to silence, never from silence or from too little audio; and the feed
 * queue fills announced holes with it, keeping the timeline. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conceal.h"
#include "whisperknot.h"
#include "wk-test.h"

#define N 4000

/* A voiced-like test signal: a 130 Hz fundamental (a period of 123.1
 * samples, not a whole number) and two harmonics with their own phases,
 * so that it is not symmetric in time (a side repeated backwards the
 * wrong way round does not match). */
static float
voice (int t)
{
  const double w = 2.0 * M_PI * 130.0 / WK_SAMPLE_RATE;
  return (float) (0.5 * sin (w * t) + 0.25 * sin (2.0 * w * t + 1.0)
      + 0.125 * sin (3.0 * w * t + 2.5));
}

/* RMS of x[0 .. n) - voice (t0 + i), relative to voice's own RMS there. */
static double
rel_error (const float *x, int t0, int n)
{
  double e = 0.0, s = 0.0;
  int i;

  for (i = 0; i < n; i++) {
    double v = voice (t0 + i);
    e += (x[i] - v) * (x[i] - v);
    s += v * v;
  }
  return sqrt (e / s);
}

/* A 20 ms hole with audio on both sides is filled with close to the
 * signal that was lost (silence would be 100% off). */
static void
test_both_sides (void)
{
  static float x[N], out[320];
  wk_conceal c;
  int t, a = 1600, len = 320;

  for (t = 0; t < N; t++)
    x[t] = voice (t);
  wk_conceal_plan (&c, x, (size_t) a, x + a + len, (size_t) (N - a - len),
      (uint64_t) len);
  /* whole, and in two pieces: the same samples */
  wk_conceal_fill (&c, 0, out, (size_t) len);
  CHECK_MSG (rel_error (out, a, len) < 0.1, "error %.3f",
      rel_error (out, a, len));
  {
    float part[320];
    wk_conceal_fill (&c, 0, part, 100);
    wk_conceal_fill (&c, 100, part + 100, 220);
    CHECK (memcmp (part, out, sizeof part) == 0);
  }
  /* each side alone continues the signal near its edge */
  wk_conceal_plan (&c, x, (size_t) a, NULL, 0, (uint64_t) len);
  wk_conceal_fill (&c, 0, out, (size_t) len);
  CHECK_MSG (rel_error (out, a, 120) < 0.1, "before: %.3f",
      rel_error (out, a, 120));
  wk_conceal_plan (&c, NULL, 0, x + a + len, (size_t) (N - a - len),
      (uint64_t) len);
  wk_conceal_fill (&c, 0, out, (size_t) len);
  CHECK_MSG (rel_error (out + len - 120, a + len - 120, 120) < 0.1,
      "after: %.3f", rel_error (out + len - 120, a + len - 120, 120));
}

/* A long hole: each side holds 10 ms, fades out by 60 ms from its edge;
 * the middle is silence, not a buzz. */
static void
test_long_hole_fades (void)
{
  static float x[N], out[2400];
  wk_conceal c;
  int t, i, len = 2400;
  double early = 0.0, late = 0.0;

  for (t = 0; t < N; t++)
    x[t] = voice (t);
  wk_conceal_plan (&c, x, 800, x + 800, 800, (uint64_t) len);
  wk_conceal_fill (&c, 0, out, (size_t) len);
  for (i = 0; i < 160; i++) {
    early += fabsf (out[i]);
    late += fabsf (out[len - 1 - i]);
  }
  CHECK (early > 10.0 && late > 10.0);
  for (i = 960; i < len - 960; i++)
    CHECK_MSG (out[i] == 0.0f, "sample %d: %g", i, out[i]);
}

/* Nothing to continue: no side, sides too short to hold a period and the
 * 10 ms compared, or silent ones, give silence. */
static void
test_no_context (void)
{
  static float x[N], zeros[N], out[320];
  wk_conceal c;
  int t, i, bad = 0;

  for (t = 0; t < N; t++)
    x[t] = voice (t);
  wk_conceal_plan (&c, NULL, 0, NULL, 0, 320);
  wk_conceal_fill (&c, 0, out, 320);
  for (i = 0; i < 320; i++)
    bad += out[i] != 0.0f;
  wk_conceal_plan (&c, x, 150, x + 1000, 150, 320);
  wk_conceal_fill (&c, 0, out, 320);
  for (i = 0; i < 320; i++)
    bad += out[i] != 0.0f;
  wk_conceal_plan (&c, zeros, N, zeros, N, 320);
  wk_conceal_fill (&c, 0, out, 320);
  for (i = 0; i < 320; i++)
    bad += out[i] != 0.0f;
  CHECK_MSG (bad == 0, "%d samples not silent", bad);
}

/* The queue: a hole announced between two writes takes exactly its
 * samples in the timeline (what the stream is fed adds up), the samples
 * after it wait for it; a mark or wk_queue_end_hole ends a hole; a
 * clear drops one; a stopped queue refuses. */
static void
test_queue_holes (void)
{
  static float x[N];
  wk_stream_params p = wk_stream_default_params ();
  wk_model *m = NULL;
  wk_stream *s = NULL;
  wk_queue *q = NULL;
  char err[256];
  int mark = 1, t;
  void *got;
  size_t n, total = 0;
  wk_stream_stats st;

  for (t = 0; t < N; t++)
    x[t] = voice (t);
  /* offline, a stream runs its model on whole windows: never here */
  CHECK_MSG (wk_model_load (wk_default_model_path (), NULL, &m, err,
          sizeof err) == WK_OK, "%s", err);
  p.n_threads = 1;
  if (!m || wk_stream_new (m, &p, &s, err, sizeof err) != WK_OK) {
    CHECK_MSG (0, "%s", err);
    wk_model_unref (m);
    return;
  }
  CHECK (wk_queue_new (16000, NULL, &q) == WK_OK);
  CHECK (wk_queue_write_missing (q, 10) == WK_ERR_STATE);       /* stopped */
  wk_queue_start (q);
  CHECK (wk_queue_write (q, x, WK_SAMPLE_F32LE, 1000) == WK_OK);
  CHECK (wk_queue_write_missing (q, 320) == WK_OK);
  CHECK (wk_queue_write_missing (q, 320) == WK_OK);     /* one hole */
  /* 100 samples after it: held back, the worker sees only the 1000 */
  CHECK (wk_queue_write (q, x + 1640, WK_SAMPLE_F32LE, 100) == WK_OK);
  CHECK (wk_queue_next (q, s, N, NULL, NULL, &got, &n) == WK_OK && !got);
  CHECK_MSG (n == 1000, "fed %zu", n);
  total += n;
  /* a second hole ends the first (its samples and the 100 after it) */
  CHECK (wk_queue_write_missing (q, 160) == WK_OK);
  CHECK (wk_queue_write (q, x + 1900, WK_SAMPLE_F32LE, 1000) == WK_OK);
  CHECK (wk_queue_write_missing (q, 50) == WK_OK);
  CHECK (wk_queue_mark (q, &mark) == WK_OK);    /* ends the third */
  for (;;) {
    CHECK (wk_queue_next (q, s, N, NULL, NULL, &got, &n) == WK_OK);
    if (got || n == 0)
      break;
    total += n;
  }
  CHECK (got == &mark);
  CHECK_MSG (total == 1000 + 640 + 100 + 160 + 1000 + 50, "fed %zu", total);
  wk_stream_get_stats (s, &st);
  CHECK (st.n_zeroed == 0 && st.n_clipped == 0);
  /* a clear drops a hole and what waits behind it */
  CHECK (wk_queue_write_missing (q, 320) == WK_OK);
  CHECK (wk_queue_write (q, x, WK_SAMPLE_F32LE, 10) == WK_OK);
  wk_queue_clear (q, NULL, NULL);
  CHECK (wk_queue_write (q, x, WK_SAMPLE_F32LE, 10) == WK_OK);
  CHECK (wk_queue_next (q, s, N, NULL, NULL, &got, &n) == WK_OK && n == 10);
  /* wk_queue_end_hole ends one at once (what a mark does first) */
  CHECK (wk_queue_write (q, x, WK_SAMPLE_F32LE, 500) == WK_OK);
  CHECK (wk_queue_write_missing (q, 320) == WK_OK);
  CHECK (wk_queue_write (q, x + 820, WK_SAMPLE_F32LE, 100) == WK_OK);
  CHECK (wk_queue_end_hole (q) == WK_OK);
  CHECK (wk_queue_end_hole (q) == WK_OK);       /* none: nothing */
  CHECK (wk_queue_next (q, s, N, NULL, NULL, &got, &n) == WK_OK && !got);
  CHECK_MSG (n == 920, "fed %zu", n);
  CHECK (wk_queue_end_hole (NULL) == WK_ERR_ARG);
  CHECK (wk_queue_write_missing (NULL, 1) == WK_ERR_ARG);
  wk_queue_free (q);
  wk_stream_free (s);
  wk_model_unref (m);
}

int
main (void)
{
  RUN (test_both_sides);
  RUN (test_long_hole_fades);
  RUN (test_no_context);
  RUN (test_queue_holes);
  return TEST_EXIT ();
}
