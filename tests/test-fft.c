/* engine/fft.c, the mel front end's FFT in every build: against a direct DFT in double for Whisper's 400
 * and other lengths (every radix path), four at a time against one at a
 * time, and its refusals. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fft.h"
#include "wk-test.h"

/* The worst |error| over all bins, relative to the spectrum's largest
 * magnitude. */
static double
fft_error (int n)
{
  float *in = malloc (n * sizeof (float));
  float *spec = malloc ((n + 2) * sizeof (float));
  float *work = malloc (WK_FFT_WORK_FLOATS (n) * sizeof (float));
  double worst = 0.0, scale = 0.0;
  uint32_t r = 12345u + (uint32_t) n;
  wk_fft *f = NULL;
  int t, k;

  CHECK (wk_fft_new (n, &f) == WK_OK && f);
  if (!f || !in || !spec || !work)
    return INFINITY;
  for (t = 0; t < n; t++) {
    r = r * 1664525u + 1013904223u;
    in[t] = (float) sin (0.37 * t) + (float) (r >> 8) / 16777216.0f - 0.5f;
  }
  wk_fft_real (f, in, spec, work);
  for (k = 0; k <= n / 2; k++) {
    double re = 0.0, im = 0.0;
    for (t = 0; t < n; t++) {
      double a = 2.0 * M_PI * (double) k * t / n;
      re += in[t] * cos (a);
      im -= in[t] * sin (a);
    }
    scale = fmax (scale, hypot (re, im));
    worst = fmax (worst, fmax (fabs (re - spec[2 * k]),
            fabs (im - spec[2 * k + 1])));
  }
  wk_fft_free (f);
  free (in);
  free (spec);
  free (work);
  return worst / (scale > 0 ? scale : 1.0);
}

static void
test_fft_matches_dft (void)
{
  static const int lengths[] = { 400, 2, 4, 8, 6, 15, 49, 200, 512, 98 };
  size_t i;

  for (i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
    double e = fft_error (lengths[i]);
    CHECK_MSG (e < 1e-6, "n = %d: relative error %g", lengths[i], e);
  }
}

/* Four transforms in one wk_fft_real4 pass (and three, two, one) give
 * each the bits wk_fft_real gives it alone: the mel front end takes its
 * frames four at a time. */
static void
test_fft_lanes_match_one (void)
{
  static const int lengths[] = { 400, 2, 6, 15, 49, 512 };
  size_t i;
  int l, t, nl;

  for (i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
    const int n = lengths[i];
    float *in[WK_FFT_LANES], *spec[WK_FFT_LANES];
    float *one = malloc ((n + 2) * sizeof (float));
    float *work = malloc (WK_FFT_WORK_FLOATS (n) * sizeof (float));
    uint32_t r = 777u + (uint32_t) n;
    wk_fft *f = NULL;

    CHECK (wk_fft_new (n, &f) == WK_OK && f);
    for (l = 0; l < WK_FFT_LANES; l++) {
      in[l] = malloc (n * sizeof (float));
      spec[l] = malloc ((n + 2) * sizeof (float));
      for (t = 0; t < n; t++) {
        r = r * 1664525u + 1013904223u;
        in[l][t] = (float) (int32_t) r / 2147483648.0f * (float) (l + 1);
      }
    }
    for (nl = 1; nl <= WK_FFT_LANES; nl++) {
      const float *ins[WK_FFT_LANES] = { NULL };
      float *specs[WK_FFT_LANES] = { NULL };
      for (l = 0; l < nl; l++) {
        ins[l] = in[l];
        specs[l] = spec[l];
      }
      wk_fft_real4 (f, ins, specs, work);
      for (l = 0; l < nl; l++) {
        wk_fft_real (f, in[l], one, work);
        CHECK_MSG (memcmp (one, spec[l], (size_t) (n / 2 + 1) * 2 *
                sizeof (float)) == 0, "n = %d, lane %d of %d", n, l, nl);
      }
    }
    for (l = 0; l < WK_FFT_LANES; l++) {
      free (in[l]);
      free (spec[l]);
    }
    wk_fft_free (f);
    free (one);
    free (work);
  }
}

static void
test_fft_rejects (void)
{
  wk_fft *f = (wk_fft *) 1;

  CHECK (wk_fft_new (1, &f) == WK_ERR_ARG && f == NULL);
  CHECK (wk_fft_new (67 * 2, &f) == WK_ERR_ARG && f == NULL);   /* prime 67 */
  CHECK (wk_fft_new (400, NULL) == WK_ERR_ARG);
  wk_fft_free (NULL);
}

int
main (void)
{
  RUN (test_fft_matches_dft);
  RUN (test_fft_lanes_match_one);
  RUN (test_fft_rejects);
  return TEST_EXIT ();
}
