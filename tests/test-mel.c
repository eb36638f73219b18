/* The log-mel front end: the real filterbank, log-mel against a
 * double-precision naive DFT reference, frame addressing (reflection at the
 * start, zeros past the end, any first/n/ld), thread safety, the ORC loops
 * against their -dist C backups, normalisation, and its speed (printed). */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mel.h"
#include "mel-orc.h"
#include "wk-test.h"
#include "test-ggml-header.h"

/* The -dist C backups of the ORC loops, under other names, to compare
 * with what the build uses (ORC-compiled code when ORC is enabled). */
#define DISABLE_ORC 1
#define wk_orc_mel_window dist_mel_window
#define wk_orc_mel_power dist_mel_power
#define wk_orc_mel_scale dist_mel_scale
#define wk_orc_mel_madd dist_mel_madd
#define wk_orc_mel_norm dist_mel_norm
#include "mel-orc-dist.c"
#undef wk_orc_mel_window
#undef wk_orc_mel_power
#undef wk_orc_mel_scale
#undef wk_orc_mel_madd
#undef wk_orc_mel_norm
#undef DISABLE_ORC

static float filters80[80 * WK_N_BINS];
static float filters128[128 * WK_N_BINS];
static int have_filters;

/* Reads tests/data/mel-filters.txt (made by gen-mel-filters.py from
 * openai/whisper's mel_filters.npz). */
static int
read_reference_filters (void)
{
  char path[4096];
  const char *dir = getenv ("WK_TEST_DATA");
  FILE *f;
  int sect;

  snprintf (path, sizeof path, "%s/mel-filters.txt", dir ? dir : "tests/data");
  f = fopen (path, "r");
  if (!f) {
    fprintf (stderr, "cannot open %s\n", path);
    return -1;
  }
  for (sect = 0; sect < 2; sect++) {
    int n_mels, m;
    float *dst;
    if (fscanf (f, " mel %d", &n_mels) != 1 || n_mels != (sect ? 128 : 80))
      goto bad;
    dst = sect ? filters128 : filters80;
    memset (dst, 0, (size_t) n_mels * WK_N_BINS * sizeof (float));
    for (m = 0; m < n_mels; m++) {
      int row, lo, hi, k;
      if (fscanf (f, "%d %d %d", &row, &lo, &hi) != 3 || row != m || lo < 0
          || hi > WK_N_BINS || lo > hi)
        goto bad;
      for (k = lo; k < hi; k++)
        if (fscanf (f, "%f", &dst[m * WK_N_BINS + k]) != 1)
          goto bad;
    }
  }
  fclose (f);
  return 0;
bad:
  fprintf (stderr, "%s: malformed\n", path);
  fclose (f);
  return -1;
}

static void
test_filterbank_of_ggml_file_equals_whisper_mel_80 (void)
{
  wk_test_ggml g;
  const char *path = wk_test_shared_path ("for-tests-ggml-tiny.en.bin");
  int i, n_diff = 0;

  CHECK (have_filters);
  CHECK (path != NULL);
  if (!path || !have_filters || wk_test_ggml_read (path, &g) != 0) {
    CHECK (!"ggml file readable");
    return;
  }
  CHECK (g.hparams[9] == 80);
  CHECK (g.n_mels == 80 && g.n_fft == WK_N_BINS);
  if (g.n_mels == 80 && g.n_fft == WK_N_BINS) {
    for (i = 0; i < 80 * WK_N_BINS; i++)
      if (memcmp (&g.filters[i], &filters80[i], sizeof (float)) != 0)
        n_diff++;
    CHECK_MSG (n_diff == 0, "%d of %d weights differ", n_diff, 80 * 201);
  }
  wk_test_ggml_clear (&g);
}

/* Double-precision reference: frame f as torch.stft(center=True,
 * pad_mode='reflect') sees the zero-padded signal, periodic Hann window,
 * naive DFT, power, filterbank, log10 (max (x, 1e-10)). */
static void
reference_log_mel (const float *filters, int n_mels, const float *audio,
    size_t n_audio, int64_t f, double *out)
{
  static double cos_t[WK_N_FFT], sin_t[WK_N_FFT];
  static int init;
  double x[WK_N_FFT], power[WK_N_BINS];
  int k, j, m;

  if (!init) {
    for (j = 0; j < WK_N_FFT; j++) {
      cos_t[j] = cos (2.0 * M_PI * j / WK_N_FFT);
      sin_t[j] = sin (2.0 * M_PI * j / WK_N_FFT);
    }
    init = 1;
  }
  for (j = 0; j < WK_N_FFT; j++) {
    int64_t idx = f * WK_HOP - WK_N_FFT / 2 + j;
    double s;
    if (idx < 0)
      idx = -idx;
    s = (uint64_t) idx < n_audio ? audio[idx] : 0.0;
    x[j] = s * (0.5 - 0.5 * cos_t[j]);
  }
  for (k = 0; k < WK_N_BINS; k++) {
    double re = 0, im = 0;
    for (j = 0; j < WK_N_FFT; j++) {
      int t = (k * j) % WK_N_FFT;
      re += x[j] * cos_t[t];
      im -= x[j] * sin_t[t];
    }
    power[k] = re * re + im * im;
  }
  for (m = 0; m < n_mels; m++) {
    double acc = 0;
    for (k = 0; k < WK_N_BINS; k++)
      acc += filters[m * WK_N_BINS + k] * power[k];
    out[m] = log10 (acc > 1e-10 ? acc : 1e-10);
  }
}

static float *
make_signal (size_t n, unsigned seed, int noise)
{
  float *a = malloc (n * sizeof (float));
  uint32_t s = seed;
  size_t i;
  for (i = 0; i < n; i++) {
    double t = (double) i / WK_SAMPLE_RATE;
    double v = 0.4 * sin (2 * M_PI * 440.0 * t) + 0.2 * sin (2 * M_PI *
        3150.0 * t + 0.3);
    if (noise) {
      s = s * 1664525u + 1013904223u;
      v = 0.3 * v + 0.5 * ((double) (s >> 8) / (1 << 24) - 0.5);
    }
    a[i] = (float) v;
  }
  return a;
}

/* Compares frames first .. first+n-1 with the reference: log-mel values
 * that survive Whisper's clamp (those above max - 8) within tol, and the
 * normalized window within tol_norm. Below the clamp the power is tiny and
 * float32 FFT rounding moves its log more; that is printed only. (A bin
 * 1e-8 below the peak power has an amplitude 1e-4 of the peak's, where
 * float32 FFT rounding of about 1e-7 of the peak is 1e-3 relative.) */
static void
compare_with_reference (const float *filters, int n_mels, const float *audio,
    size_t n_audio, int64_t first, int n, double tol, double tol_norm)
{
  wk_mel *mel = NULL;
  float *got = malloc ((size_t) n_mels * n * sizeof (float));
  double *ref = malloc ((size_t) n_mels * n * sizeof (double));
  double col[128], max_ref = -1e30, diff_all = 0, diff = 0, diff_norm = 0;
  int f, m, i;

  CHECK (wk_mel_new (n_mels, filters, &mel) == WK_OK);
  if (!mel)
    goto out;
  wk_mel_log_frames (mel, audio, n_audio, first, n, got, n);
  for (f = 0; f < n; f++) {
    reference_log_mel (filters, n_mels, audio, n_audio, first + f, col);
    for (m = 0; m < n_mels; m++) {
      ref[m * n + f] = col[m];
      if (col[m] > max_ref)
        max_ref = col[m];
    }
  }
  for (i = 0; i < n * n_mels; i++) {
    double d = fabs (ref[i] - got[i]);
    if (d > diff_all)
      diff_all = d;
    if (ref[i] >= max_ref - 8 && d > diff)
      diff = d;
  }
  CHECK_MSG (diff < tol, "max |log-mel - reference| = %g (n_mels %d)",
      diff, n_mels);
  wk_mel_normalize (got, n_mels, n, n);
  for (i = 0; i < n * n_mels; i++) {
    double r = ref[i] > max_ref - 8 ? ref[i] : max_ref - 8;
    double d = fabs ((r + 4) / 4 - got[i]);
    if (d > diff_norm)
      diff_norm = d;
  }
  CHECK_MSG (diff_norm < tol_norm, "max |normalized - reference| = %g",
      diff_norm);
  printf ("# n_mels %d frames %lld+%d: max diff log %.3g (above max-8: "
      "%.3g), normalized %.3g\n", n_mels, (long long) first, n, diff_all,
      diff, diff_norm);
out:
  wk_mel_free (mel);
  free (got);
  free (ref);
}

static void
test_log_mel_matches_double_dft_reference (void)
{
  size_t n_audio = 12345;       /* not a multiple of the hop */
  float *sine = make_signal (n_audio, 1, 0);
  float *noise = make_signal (n_audio, 7, 1);
  int n_frames = (int) (n_audio / WK_HOP) + 3;  /* runs past the end */

  if (!have_filters)
    return;
  /* Two pure tones: 8 decades of dynamic range inside the window. */
  compare_with_reference (filters80, 80, sine, n_audio, 0, n_frames, 1e-3,
      1e-4);
  compare_with_reference (filters80, 80, noise, n_audio, 0, n_frames, 2e-5,
      1e-5);
  compare_with_reference (filters128, 128, noise, n_audio, 0, n_frames, 2e-5,
      1e-5);
  /* Frames far past the end of the signal are silence: log10 (1e-10). */
  compare_with_reference (filters80, 80, noise, n_audio, 200, 5, 1e-6, 1e-6);
  free (sine);
  free (noise);
}

static void
test_short_and_empty_signals (void)
{
  float audio[150];
  float out[80 * 6];
  wk_mel *mel = NULL;
  int i;

  if (!have_filters)
    return;
  for (i = 0; i < 150; i++)
    audio[i] = (float) sin (i * 0.3) * 0.5f;
  /* Shorter than the 200-sample reflection: reflected indices past the
   * end read zeros, as in Whisper's zero-padded signal. */
  compare_with_reference (filters80, 80, audio, 150, 0, 6, 2e-5, 1e-5);
  compare_with_reference (filters80, 80, audio, 1, 0, 2, 2e-5, 1e-5);

  CHECK (wk_mel_new (80, filters80, &mel) == WK_OK);
  if (!mel)
    return;
  wk_mel_log_frames (mel, NULL, 0, 0, 6, out, 6);
  for (i = 0; i < 80 * 6; i++)
    CHECK (out[i] == -10.0f);
  /* Frame numbers whose sample offset would overflow are silence too. */
  wk_mel_log_frames (mel, audio, 150, INT64_MAX - 10, 6, out, 6);
  for (i = 0; i < 80 * 6; i++)
    CHECK (out[i] == -10.0f);
  wk_mel_free (mel);
}

static void
test_bad_arguments_are_refused (void)
{
  wk_mel *mel = (wk_mel *) 1;
  CHECK (wk_mel_new (0, filters80, &mel) == WK_ERR_ARG && mel == NULL);
  CHECK (wk_mel_new (80, NULL, &mel) == WK_ERR_ARG && mel == NULL);
  CHECK (wk_mel_new (80, filters80, NULL) == WK_ERR_ARG);
  wk_mel_free (NULL);
}

/* Any split of a range of frames into calls, with any ld, gives the same
 * bits as one call. */
static void
test_frame_ranges_and_stride_agree (void)
{
  size_t n_audio = 16000 * 3 + 77;
  float *audio = make_signal (n_audio, 3, 1);
  int n = 310, ld = 333, m, f;
  float *whole = malloc ((size_t) 80 * n * sizeof (float));
  float *parts = malloc ((size_t) 80 * ld * sizeof (float));
  wk_mel *mel = NULL;
  int splits[] = { 0, 1, 2, 33, 64, 65, 200, 299, 310 };
  size_t s;

  if (!have_filters)
    goto out;
  CHECK (wk_mel_new (80, filters80, &mel) == WK_OK);
  if (!mel)
    goto out;
  wk_mel_log_frames (mel, audio, n_audio, 0, n, whole, n);
  for (f = 0; f < 80 * ld; f++)
    parts[f] = 12345.0f;
  for (s = 0; s + 1 < sizeof splits / sizeof splits[0]; s++)
    wk_mel_log_frames (mel, audio, n_audio, splits[s],
        splits[s + 1] - splits[s], parts + splits[s], ld);
  for (m = 0; m < 80; m++) {
    CHECK (memcmp (whole + m * n, parts + m * ld, n * sizeof (float)) == 0);
    for (f = n; f < ld; f++)
      CHECK (parts[m * ld + f] == 12345.0f);    /* past n: untouched */
  }
out:
  wk_mel_free (mel);
  free (audio);
  free (whole);
  free (parts);
}

#ifndef __wasm__
typedef struct
{
  const wk_mel *mel;
  const float *audio;
  size_t n_audio;
  int n;
  float *out;
} mel_job;

static void *
mel_thread (void *data)
{
  mel_job *job = data;
  int rep;
  for (rep = 0; rep < 5; rep++)
    wk_mel_log_frames (job->mel, job->audio, job->n_audio, 0, job->n,
        job->out, job->n);
  return NULL;
}

/* More threads than the mel object keeps FFT plans for, all at once. */
static void
test_concurrent_calls_give_identical_results (void)
{
  enum
  { N_THREADS = 7 };
  size_t n_audio = 16000 * 4;
  float *audio = make_signal (n_audio, 11, 1);
  int n = 400, t;
  float *ref = malloc ((size_t) 80 * n * sizeof (float));
  float *outs[N_THREADS];
  pthread_t th[N_THREADS];
  mel_job jobs[N_THREADS];
  wk_mel *mel = NULL;

  if (!have_filters || wk_mel_new (80, filters80, &mel) != WK_OK) {
    CHECK (!have_filters);
    free (audio);
    free (ref);
    return;
  }
  wk_mel_log_frames (mel, audio, n_audio, 0, n, ref, n);
  for (t = 0; t < N_THREADS; t++) {
    outs[t] = malloc ((size_t) 80 * n * sizeof (float));
    jobs[t] = (mel_job) {
    mel, audio, n_audio, n, outs[t]};
    CHECK (pthread_create (&th[t], NULL, mel_thread, &jobs[t]) == 0);
  }
  for (t = 0; t < N_THREADS; t++) {
    pthread_join (th[t], NULL);
    CHECK (memcmp (ref, outs[t], (size_t) 80 * n * sizeof (float)) == 0);
    free (outs[t]);
  }
  wk_mel_free (mel);
  free (audio);
  free (ref);
}
#endif /* __wasm__: one thread */

static int
same_bits (const float *a, const float *b, int n)
{
  return memcmp (a, b, (size_t) n * sizeof (float)) == 0;
}

/* The build's ORC loops (compiled by ORC at run time when enabled) and the
 * checked-in -dist C backups compute the same bits. */
static void
test_orc_loops_match_dist_backups (void)
{
  enum
  { N = 1003 };
  static float a[2 * N], b[N], x[N], y[N];
  uint32_t s = 99;
  int i;

  for (i = 0; i < 2 * N; i++) {
    s = s * 1664525u + 1013904223u;
    a[i] = ((float) (s >> 8) / (1 << 24) - 0.5f) * 200.0f;
  }
  for (i = 0; i < N; i++)
    b[i] = a[i] * 0.01f + 0.5f;
  /* a few tiny values (ORC flushes denormals) */
  a[5] = 1e-39f;
  a[6] = -3e-42f;

  wk_orc_mel_window (x, a, b, N);
  dist_mel_window (y, a, b, N);
  CHECK (same_bits (x, y, N));

  wk_orc_mel_power (x, (const void *) a, N);
  dist_mel_power (y, (const void *) a, N);
  CHECK (same_bits (x, y, N));
  for (i = 0; i < N; i++)
    CHECK_NEAR (x[i], (double) a[2 * i] * a[2 * i] + (double) a[2 * i + 1]
        * a[2 * i + 1], 1e-5 * x[i] + 1e-30);

  wk_orc_mel_scale (x, a, 0.37f, N);
  dist_mel_scale (y, a, 0.37f, N);
  CHECK (same_bits (x, y, N));

  wk_orc_mel_madd (x, b, -1.25f, N);
  dist_mel_madd (y, b, -1.25f, N);
  CHECK (same_bits (x, y, N));
  CHECK_NEAR (x[10], a[10] * 0.37f + b[10] * -1.25f, 1e-4);

  memcpy (y, x, sizeof x);
  wk_orc_mel_norm (x, -3.0f, 4.0f, 0.25f, N);
  dist_mel_norm (y, -3.0f, 4.0f, 0.25f, N);
  CHECK (same_bits (x, y, N));
}

static void
test_normalize_clamps_to_max_minus_8 (void)
{
  /* 2 rows x 3 frames with ld 4; the fourth column must stay untouched */
  float m[8] = { -10.0f, 1.5f, -6.0f, 99.0f, -7.0f, -6.5f, 0.0f, 99.0f };
  wk_mel_normalize (m, 2, 3, 4);
  CHECK (m[0] == (-6.5f + 4.0f) / 4.0f);        /* clamped to 1.5 - 8 */
  CHECK (m[1] == (1.5f + 4.0f) / 4.0f);
  CHECK (m[2] == (-6.0f + 4.0f) / 4.0f);
  CHECK (m[3] == 99.0f);
  CHECK (m[4] == (-6.5f + 4.0f) / 4.0f);
  CHECK (m[5] == (-6.5f + 4.0f) / 4.0f);
  CHECK (m[6] == 1.0f);
  CHECK (m[7] == 99.0f);
}

static double
now_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Speed of a 30 s window (3000 frames): printed, never asserted. */
static void
test_speed_of_a_30_s_window (void)
{
  size_t n_audio = 16000 * 30;
  float *audio = make_signal (n_audio, 5, 1);
  float *out = malloc ((size_t) 80 * 3000 * sizeof (float));
  wk_mel *mel = NULL;
  double best = 1e30;
  int rep;

  if (have_filters && wk_mel_new (80, filters80, &mel) == WK_OK) {
    for (rep = 0; rep < 5; rep++) {
      double t0 = now_ms ();
      wk_mel_log_frames (mel, audio, n_audio, 0, 3000, out, 3000);
      wk_mel_normalize (out, 80, 3000, 3000);
      if (now_ms () - t0 < best)
        best = now_ms () - t0;
    }
    printf ("# 3000 frames x 80 mels (log + normalize): %.2f ms\n", best);
  }
  wk_mel_free (mel);
  free (audio);
  free (out);
}

int
main (void)
{
  have_filters = read_reference_filters () == 0;
  RUN (test_filterbank_of_ggml_file_equals_whisper_mel_80);
  RUN (test_log_mel_matches_double_dft_reference);
  RUN (test_short_and_empty_signals);
  RUN (test_bad_arguments_are_refused);
  RUN (test_frame_ranges_and_stride_agree);
#ifndef __wasm__
  RUN (test_concurrent_calls_give_identical_results);
#endif
  RUN (test_orc_loops_match_dist_backups);
  RUN (test_normalize_clamps_to_max_minus_8);
  RUN (test_speed_of_a_30_s_window);
  return TEST_EXIT ();
}
