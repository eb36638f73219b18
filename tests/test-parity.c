/* Parity of the engine with the Python reference of Whisper.
 *
 * For each model configuration in tests/data/golden (written by
 * knots/golden.py): re-create the same random-weight model with
 * $WK_MAKE_TEST_MODEL (same dims and seed, so no weights are committed),
 * convert it with $WK_CONVERT, load the knot, and compare stage by stage:
 *
 *   mel      wk_mel on jfk.wav against Whisper's log-mel (jfk-mel.gold)
 *   encoder  the encoder on the golden mel: kept rows in full, every row's
 *            sum and sum of squares
 *   logits   the decoder on a fixed teacher-forced token sequence, through
 *            the KV cache one token at a time: three positions in full,
 *            every 7th logit of all positions, sums, the top 16
 *   greedy   raw argmax decoding (no suppression, no timestamp rules) for
 *            a fixed number of steps
 *
 * Each stage prints its max abs / rel diffs; the tolerances are below with
 * the reasons. Configurations whose golden file is missing are skipped; a
 * golden that no longer matches the generator's output is a failure that
 * says to regenerate it.
 */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels-impl.h"
#include "mel.h"
#include "model.h"
#include "wav.h"
#include "wk-test.h"
#include "wk-time.h"


/* ---- tolerances ----------------------------------------------------------
 *
 * Max abs differences, engine vs the float32 torch reference. The golden
 * values' own error (knots/golden.py compares them with a float64 forward
 * pass: ref_err_*) is about 2e-5 for the mel and 3e-6 for the encoder and
 * logits, so these bounds are the engine's budget:
 *
 * mel: values in about [-1.5, 2]; float32 FFTs (engine/fft.c here, pocketfft in
 * torch) differ by up to ~2e-5 where the log of a small power is taken.
 * encoder: layer-normed output (|x| up to ~4), float32 sums over 64..1536
 * terms in another order through 2..4 layers: measured ~2e-6.
 * logits: the bound for f32 models is 1e-3; measured ~4e-6, so a
 * bound 5x tighter than the still leaves a 50x margin while
 * catching approximations (a tanh GELU, an f16 activation) that the
 * looser bound would let through.
 * f16 / q8_0 / q4_0 models are compared with a reference run on the same
 * weights dequantized (ggml's block formulas, implemented independently in
 * knots/golden.py). The engine dequantizes exactly and accumulates in
 * float32 for f16 everywhere and for q8_0 / q4_0 in the encoder and in
 * multi-token decoder calls (measured ~4e-6 as for f32). Single-token
 * decoder steps on q8_0 / q4_0 weights quantize the activations to q8_0
 * blocks and use integer block dots, as ggml does: measured logit
 * differences ~5e-2 (|logits| <= ~4.5), so those configurations allow
 * TOL_LOGITS_QDOT there, and the greedy check treats reference margins
 * below twice that as near ties. Where the encoder takes integer matrix
 * products (by default with AVX-512 VNNI; WK_INT8=all), it quantizes
 * its activations the same way: measured encoder differences 0.031 (q8_0)
 * and 0.025 (q4_0), row sums 1.4e-3 relative, multi-token logits 2e-3, so
 * those stages allow TOL_LOGITS_QDOT too.
 * Sums (encoder rows, logits per position) and sums of squares: the same
 * bound, relative to max(|sum|, sqrt(terms)) since n independent errors
 * of up to tol add up to about sqrt(n) tol.
 */
#define TOL_MEL 1e-4
#define TOL_ENC 2e-4
#define TOL_LOGITS 2e-4
#define TOL_LOGITS_QDOT 0.1

/* ---- golden files (format in knots/golden.py) --------------------------- */

enum
{ GD_F32 = 0, GD_I32 = 1, GD_U8 = 2 };

#define GD_NAME_LEN 48

typedef struct
{
  char name[GD_NAME_LEN + 1];
  int dtype;
  int n_dims;
  int64_t shape[4];
  int64_t count;
  const void *data;
} gd_array;

typedef struct
{
  unsigned char *buf;
  size_t size;
  gd_array *arrays;
  int n_arrays;
} gd_file;

static uint32_t
rd_u32 (const unsigned char *p)
{
  return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 |
      (uint32_t) p[3] << 24;
}

static unsigned char *
read_file (const char *path, size_t *size)
{
  FILE *f = fopen (path, "rb");
  unsigned char *buf = NULL;
  long n;

  if (!f)
    return NULL;
  if (fseek (f, 0, SEEK_END) == 0 && (n = ftell (f)) >= 0 &&
      fseek (f, 0, SEEK_SET) == 0) {
    buf = malloc ((size_t) n + 1);
    if (buf && fread (buf, 1, (size_t) n, f) != (size_t) n) {
      free (buf);
      buf = NULL;
    }
    *size = (size_t) n;
  }
  fclose (f);
  return buf;
}

static void
gd_free (gd_file * g)
{
  free (g->buf);
  free (g->arrays);
  memset (g, 0, sizeof *g);
}

/* Parses a golden file; returns 0 on success. Sizes are checked, though
 * the files are our own. */
static int
gd_load (const char *path, gd_file * g)
{
  size_t off = 16;
  uint32_t n, i;

  memset (g, 0, sizeof *g);
  g->buf = read_file (path, &g->size);
  if (!g->buf)
    return -1;
  if (g->size < 16 || memcmp (g->buf, "WKGD", 4) || rd_u32 (g->buf + 4) != 1)
    goto bad;
  n = rd_u32 (g->buf + 8);
  if (n > 1000)
    goto bad;
  g->arrays = calloc (n ? n : 1, sizeof *g->arrays);
  if (!g->arrays)
    goto bad;
  for (i = 0; i < n; i++) {
    gd_array *a = &g->arrays[i];
    uint64_t count = 1, bytes;
    int d;

    if (g->size - off < GD_NAME_LEN + 24)
      goto bad;
    memcpy (a->name, g->buf + off, GD_NAME_LEN);
    a->dtype = (int) rd_u32 (g->buf + off + GD_NAME_LEN);
    a->n_dims = (int) rd_u32 (g->buf + off + GD_NAME_LEN + 4);
    if (a->dtype < 0 || a->dtype > GD_U8 || a->n_dims < 1 || a->n_dims > 4)
      goto bad;
    for (d = 0; d < 4; d++) {
      a->shape[d] = rd_u32 (g->buf + off + GD_NAME_LEN + 8 + 4 * d);
      if (a->shape[d] > (1 << 28))
        goto bad;
      count *= (uint64_t) a->shape[d];
    }
    off += GD_NAME_LEN + 24;
    bytes = count * (a->dtype == GD_U8 ? 1 : 4);
    if (count > (1u << 30) || bytes > g->size - off)
      goto bad;
    a->count = (int64_t) count;
    a->data = g->buf + off;
    off += (size_t) ((bytes + 3) & ~(uint64_t) 3);
    if (off > g->size)
      goto bad;
  }
  g->n_arrays = (int) n;
  return 0;
bad:
  fprintf (stderr, "%s: not a valid golden file\n", path);
  gd_free (g);
  return -1;
}

static const gd_array *
gd_get (const gd_file * g, const char *name, int dtype)
{
  int i;

  for (i = 0; i < g->n_arrays; i++)
    if (!strcmp (g->arrays[i].name, name)) {
      if (g->arrays[i].dtype != dtype)
        break;
      return &g->arrays[i];
    }
  fprintf (stderr, "golden array '%s' missing or of another type\n", name);
  wk_test_failures++;
  return NULL;
}

static const float *
gd_f32 (const gd_file * g, const char *name, int64_t count)
{
  const gd_array *a = gd_get (g, name, GD_F32);
  if (!a || (count >= 0 && a->count != count)) {
    if (a) {
      fprintf (stderr, "golden array '%s' has %lld values, expected %lld\n",
          name, (long long) a->count, (long long) count);
      wk_test_failures++;
    }
    return NULL;
  }
  return a->data;
}

static const int32_t *
gd_i32 (const gd_file * g, const char *name, int64_t * count)
{
  const gd_array *a = gd_get (g, name, GD_I32);
  if (!a)
    return NULL;
  if (count)
    *count = a->count;
  return a->data;
}

/* A u8 array as a NUL-terminated string in buf. */
static const char *
gd_str (const gd_file * g, const char *name, char *buf, size_t size)
{
  const gd_array *a = gd_get (g, name, GD_U8);
  if (!a || (size_t) a->count >= size)
    return NULL;
  memcpy (buf, a->data, (size_t) a->count);
  buf[a->count] = '\0';
  return buf;
}

/* ---- comparisons ------------------------------------------------------- */

typedef struct
{
  double max_abs;               /* max |got - ref| */
  double max_ref;               /* max |ref| */
  double max_rel;               /* max |got - ref| / max(|ref|, 1e-2) */
  int64_t worst;                /* index of max_abs */
  int64_t n;
} diff_stats;

static void
diff_add (diff_stats * s, const float *got, const float *ref, int64_t n,
    int64_t stride_got, int64_t stride_ref)
{
  int64_t i;

  for (i = 0; i < n; i++) {
    double g = got[i * stride_got], r = ref[i * stride_ref];
    double d = fabs (g - r);
    double rel = d / fmax (fabs (r), 1e-2);
    if (!(d <= s->max_abs)) {   /* NaN counts as the worst */
      s->max_abs = isnan (d) ? INFINITY : d;
      s->worst = s->n + i;
    }
    if (rel > s->max_rel)
      s->max_rel = rel;
    if (fabs (r) > s->max_ref)
      s->max_ref = fabs (r);
  }
  s->n += n;
}

static void
diff_report (const char *config, const char *stage, const diff_stats * s,
    double tol)
{
  printf ("# %-12s %-22s max abs %.3g  max rel %.3g  (|ref| <= %.3g, %lld "
      "values, tol %.3g)\n", config, stage, s->max_abs, s->max_rel,
      s->max_ref, (long long) s->n, tol);
  CHECK_MSG (s->max_abs <= tol, "%s %s: max abs diff %.3g at value %lld > %g",
      config, stage, s->max_abs, (long long) s->worst, tol);
}

/* Sums of `terms` values each: relative to max(|sum|, sqrt(terms)). */
static void
check_sums (const char *config, const char *stage, const double *got,
    const float *ref, int64_t n, int64_t terms, double tol)
{
  diff_stats s = { 0 };
  double floor_ = sqrt ((double) terms);
  int64_t i;

  for (i = 0; i < n; i++) {
    double d = fabs (got[i] - ref[i]);
    double rel = d / fmax (fabs (ref[i]), floor_);
    if (!(d <= s.max_abs))
      s.max_abs = isnan (d) ? INFINITY : d;
    if (!(rel <= s.max_rel)) {
      s.max_rel = isnan (rel) ? INFINITY : rel;
      s.worst = i;
    }
    if (fabs (ref[i]) > s.max_ref)
      s.max_ref = fabs (ref[i]);
  }
  s.n = n;
  printf ("# %-12s %-22s max abs %.3g  max rel %.3g  (|ref| <= %.3g, %lld "
      "sums, tol rel %.3g)\n", config, stage, s.max_abs, s.max_rel, s.max_ref,
      (long long) n, tol);
  CHECK_MSG (s.max_rel <= tol, "%s %s: sum %lld differs by rel %.3g",
      config, stage, (long long) s.worst, s.max_rel);
}

/* ---- helpers ------------------------------------------------------------ */

static int
run_cmd (const char *const argv[])
{
  posix_spawn_file_actions_t fa;
  pid_t pid;
  int status, i, rc;

  printf ("# run:");
  for (i = 0; argv[i]; i++)
    printf (" %s", argv[i]);
  printf ("\n");
  fflush (stdout);
  /* The child's stdout goes to our stderr: stdout is the TAP stream. */
  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_adddup2 (&fa, 2, 1);
  /* posix_spawn does not write to argv; its prototype predates const. */
  rc = posix_spawn (&pid, argv[0], &fa, NULL, (char *const *) argv, environ);
  posix_spawn_file_actions_destroy (&fa);
  if (rc != 0) {
    errno = rc;
    fprintf (stderr, "cannot run %s: %s\n", argv[0], strerror (errno));
    return -1;
  }
  if (waitpid (pid, &status, 0) < 0)
    return -1;
  return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

/* The generator's output checksums (knots/golden.py file_checksum). */
static int
file_checksum (const char *path, uint64_t * size, uint64_t * s1, uint64_t * s2)
{
  FILE *f = fopen (path, "rb");
  unsigned char buf[1 << 16];
  uint64_t i = 0, a = 0, b = 0, total = 0;
  size_t n;

  if (!f)
    return -1;
  while ((n = fread (buf, 1, sizeof buf, f)) > 0) {
    size_t j;
    total += n;
    if (n % 4)                  /* only at the end of the file */
      memset (buf + n, 0, 4 - n % 4), n += 4 - n % 4;
    for (j = 0; j < n; j += 4) {
      uint64_t w = rd_u32 (buf + j);
      i++;
      a += w;
      b += i * w;
    }
  }
  fclose (f);
  *size = total;
  *s1 = a;
  *s2 = b;
  return 0;
}

static uint64_t
u64_from (const int32_t * p)
{
  return (uint64_t) (uint32_t) p[0] | (uint64_t) (uint32_t) p[1] << 32;
}

static char work_dir[4096];

static const char *
work_path (const char *name)
{
  static char buf[2][4352];
  static int k;
  k ^= 1;
  snprintf (buf[k], sizeof buf[k], "%s/%s", work_dir, name);
  return buf[k];
}

/* ---- one configuration -------------------------------------------------- */

typedef struct
{
  const char *stem;             /* tests/data/golden/<stem>.gold */
  bool required;                /* missing golden file is a failure */
  double tol_logits;            /* of single-token decoder steps */
} parity_config;

static const parity_config configs[] = {
  {"small-test", true, TOL_LOGITS},
  {"tiny", true, TOL_LOGITS},
  {"tiny-f16", false, TOL_LOGITS},
  {"tiny-q8_0", false, TOL_LOGITS_QDOT},
  {"small-test-q4_0", false, TOL_LOGITS_QDOT},
};

/* jfk.wav's mel (jfk-mel.gold), [n_mels][WK_N_FRAMES]: the audio's frames
 * then 0.0, as the encoder input. */
static float *golden_window;
static int golden_mel_frames;
static float golden_pad_value;
static wk_wav jfk;

static int
load_mel_golden (void)
{
  gd_file g;
  char path[4096], err[256];
  const char *dir = getenv ("WK_TEST_DATA");
  const int32_t *ns;
  const float *mel, *pad;
  int64_t count;
  int m, n_mels = 80;
  size_t n_samples;

  snprintf (path, sizeof path, "%s/golden/jfk-mel.gold", dir ? dir : ".");
  if (gd_load (path, &g) != 0) {
    CHECK_MSG (0, "cannot read %s", path);
    return -1;
  }
  ns = gd_i32 (&g, "mel_n_samples", NULL);
  mel = gd_f32 (&g, "mel", -1);
  pad = gd_f32 (&g, "mel_pad_value", 1);
  if (!ns || !mel || !pad) {
    gd_free (&g);
    return -1;
  }
  count = gd_get (&g, "mel", GD_F32)->count;
  n_samples = (size_t) ns[0];
  golden_mel_frames = (int) (count / n_mels);
  golden_pad_value = pad[0];
  if (count % n_mels || golden_mel_frames != ns[0] / WK_HOP
      || golden_mel_frames > WK_N_FRAMES) {
    CHECK_MSG (0, "jfk-mel.gold: %lld values for %d samples", (long long) count,
        ns[0]);
    gd_free (&g);
    return -1;
  }
  golden_window = calloc ((size_t) n_mels * WK_N_FRAMES, sizeof (float));
  for (m = 0; m < n_mels; m++)
    memcpy (golden_window + (size_t) m * WK_N_FRAMES,
        mel + (size_t) m * golden_mel_frames,
        sizeof (float) * golden_mel_frames);
  gd_free (&g);

  if (wk_wav_read (wk_test_shared_path ("jfk.wav"), &jfk, err,
          sizeof err) != WK_OK) {
    CHECK_MSG (0, "jfk.wav: %s", err);
    return -1;
  }
  CHECK (jfk.n_samples == n_samples);
  return 0;
}

/* The front end of this model on jfk.wav against the golden mel, both as
 * the stream builds its window and as decode() would (audio cut/padded to
 * 30 s before the log-mel). */
static void
stage_mel (const char *stem, wk_model * model)
{
  const wk_hparams *hp = &model->hp;
  int n_mels = hp->n_mels, nf = golden_mel_frames, m, f;
  int ld = 2 * hp->n_audio_ctx;
  float *win, *raw;
  diff_stats s = { 0 }, z = { 0 }, p = { 0 };

  if (n_mels != 80) {
    CHECK_MSG (0, "%s: golden mel is for 80 bins, model has %d", stem, n_mels);
    return;
  }
  raw = malloc (sizeof (float) * n_mels * WK_N_FRAMES);
  wk_mel_log_frames (model->mel, jfk.samples, jfk.n_samples, 0, WK_N_FRAMES,
      raw, WK_N_FRAMES);
  wk_mel_normalize (raw, n_mels, WK_N_FRAMES, WK_N_FRAMES);
  for (m = 0; m < n_mels; m++) {
    diff_add (&s, raw + (size_t) m * WK_N_FRAMES,
        golden_window + (size_t) m * WK_N_FRAMES, nf, 1, 1);
    /* Frames nf, nf + 1 still see the audio's last samples (a frame
     * spans f * 160 +- 200); from there on only the zeros. */
    for (f = (int) ((jfk.n_samples + WK_N_FFT / 2 + WK_HOP - 1) / WK_HOP);
        f < WK_N_FRAMES; f++)
      diff_add (&p, raw + (size_t) m * WK_N_FRAMES + f, &golden_pad_value, 1,
          1, 0);
  }
  diff_report (stem, "mel (wk_mel)", &s, TOL_MEL);
  diff_report (stem, "mel silence frames", &p, TOL_MEL);

  /* The stream's window: only when the audio fits the encoder's input. */
  if (ld >= nf && ld <= WK_N_FRAMES) {
    memset (&s, 0, sizeof s);
    win = malloc (sizeof (float) * n_mels * ld);
    wk_model_window_mel (model, jfk.samples, jfk.n_samples, 0, nf, win);
    for (m = 0; m < n_mels; m++) {
      diff_add (&s, win + (size_t) m * ld,
          golden_window + (size_t) m * WK_N_FRAMES, nf, 1, 1);
      diff_add (&z, win + (size_t) m * ld + nf,
          golden_window + (size_t) m * WK_N_FRAMES + nf, ld - nf, 1, 1);
    }
    diff_report (stem, "mel (window)", &s, TOL_MEL);
    diff_report (stem, "mel window padding", &z, 0.0);
    free (win);
  }
  free (raw);
}

static void
stage_encoder (const char *stem, const gd_file * g, wk_ctx * ctx,
    const wk_hparams * hp, double tol)
{
  int64_t n_rows, r, c;
  const int32_t *rows = gd_i32 (g, "enc_rows", &n_rows);
  const float *ref, *row_sum, *row_sumsq;
  const float *enc;
  int d = hp->n_audio_state, n_ctx = hp->n_audio_ctx;
  double *sum, *sumsq, t0;
  diff_stats s = { 0 };
  wk_status st;

  ref = rows ? gd_f32 (g, "enc", n_rows * d) : NULL;
  row_sum = gd_f32 (g, "enc_row_sum", n_ctx);
  row_sumsq = gd_f32 (g, "enc_row_sumsq", n_ctx);
  if (!ref || !row_sum || !row_sumsq)
    return;
  t0 = wk_now_s ();
  st = wk_encode (ctx, golden_window, WK_N_FRAMES);
  printf ("# %-12s encoder ran in %.2f s\n", stem, wk_now_s () - t0);
  CHECK_MSG (st == WK_OK, "wk_encode: %s", wk_status_str (st));
  if (st != WK_OK)
    return;
  enc = wk_ctx_encoder_output (ctx);
  for (r = 0; r < n_rows; r++) {
    if (rows[r] < 0 || rows[r] >= n_ctx) {
      CHECK_MSG (0, "bad golden row %d", rows[r]);
      return;
    }
    diff_add (&s, enc + (size_t) rows[r] * d, ref + r * d, d, 1, 1);
  }
  diff_report (stem, "encoder rows", &s, tol);
  sum = calloc ((size_t) n_ctx, sizeof *sum);
  sumsq = calloc ((size_t) n_ctx, sizeof *sumsq);
  for (r = 0; r < n_ctx; r++)
    for (c = 0; c < d; c++) {
      double v = enc[(size_t) r * d + c];
      sum[r] += v;
      sumsq[r] += v * v;
    }
  check_sums (stem, "encoder row sums", sum, row_sum, n_ctx, d, tol);
  check_sums (stem, "encoder row sum sq", sumsq, row_sumsq, n_ctx, d, tol);
  free (sum);
  free (sumsq);
}

/* Index of the largest value and the gap to the second. */
static int
argmax2 (const float *v, int n, double *gap)
{
  int i, best = 0;
  double b1 = -INFINITY, b2 = -INFINITY;

  for (i = 0; i < n; i++) {
    if (v[i] > b1) {
      b2 = b1;
      b1 = v[i];
      best = i;
    } else if (v[i] > b2)
      b2 = v[i];
  }
  if (gap)
    *gap = b1 - b2;
  return best;
}

static void
compare_logits (const char *stem, const char *how, const gd_file * g,
    const float *logits, int T, int n_vocab, double tol)
{
  const float *full, *sub, *sums, *sumsqs, *top_val;
  const int32_t *top_id, *stride;
  int64_t n_full, n_top;
  int t, i, n_sub;
  char name[96];
  diff_stats s = { 0 }, ss = { 0 };
  double *sum, *sumsq;
  const gd_array *a = gd_get (g, "tf_full", GD_F32);

  stride = gd_i32 (g, "tf_stride", NULL);
  top_id = gd_i32 (g, "tf_top_id", &n_top);
  if (!a || !stride || !top_id || stride[0] <= 0)
    return;
  n_full = a->count / n_vocab;
  full = a->data;
  n_sub = (n_vocab + stride[0] - 1) / stride[0];
  sub = gd_f32 (g, "tf_sub", (int64_t) T * n_sub);
  sums = gd_f32 (g, "tf_sum", T);
  sumsqs = gd_f32 (g, "tf_sumsq", T);
  top_val = gd_f32 (g, "tf_top_val", n_top);
  if (!sub || !sums || !sumsqs || !top_val || n_full > T || n_top % T)
    return;

  diff_add (&s, logits, full, n_full * n_vocab, 1, 1);
  snprintf (name, sizeof name, "logits 0..%d %s", (int) n_full - 1, how);
  diff_report (stem, name, &s, tol);

  sum = calloc ((size_t) T, sizeof *sum);
  sumsq = calloc ((size_t) T, sizeof *sumsq);
  for (t = 0; t < T; t++) {
    const float *l = logits + (size_t) t * n_vocab;
    int k = (int) (n_top / T);
    double gap;
    int best = argmax2 (l, n_vocab, &gap);

    diff_add (&ss, l, sub + (size_t) t * n_sub, n_sub, stride[0], 1);
    for (i = 0; i < n_vocab; i++) {
      sum[t] += l[i];
      sumsq[t] += (double) l[i] * l[i];
    }
    /* The top token agrees unless the reference's top two are a near tie. */
    if (k >= 2 && top_val[t * k] - top_val[t * k + 1] > 2 * tol)
      CHECK_MSG (best == top_id[t * k], "%s %s: position %d argmax %d, "
          "reference %d", stem, how, t, best, top_id[t * k]);
    for (i = 0; i < k; i++) {
      int id = top_id[t * k + i];
      if (id >= 0 && id < n_vocab)
        diff_add (&ss, l + id, top_val + t * k + i, 1, 1, 1);
    }
  }
  snprintf (name, sizeof name, "logits sub+top %s", how);
  diff_report (stem, name, &ss, tol);
  snprintf (name, sizeof name, "logit sums %s", how);
  check_sums (stem, name, sum, sums, T, n_vocab, tol);
  snprintf (name, sizeof name, "logit sum sq %s", how);
  check_sums (stem, name, sumsq, sumsqs, T, n_vocab, tol);
  free (sum);
  free (sumsq);
}

/* tol_step bounds single-token calls, tol_batch multi-token ones. */
static void
stage_decoder (const char *stem, const gd_file * g, wk_ctx * ctx,
    const wk_hparams * hp, double tol_step, double tol_batch)
{
  int64_t T;
  const int32_t *tokens = gd_i32 (g, "tf_tokens", &T);
  int n_vocab = hp->n_vocab, t;
  float *step, *batch;
  double t0;
  diff_stats s = { 0 };
  wk_status st = WK_OK;

  if (!tokens || T < 1 || T > hp->n_text_ctx)
    return;
  step = malloc (sizeof (float) * T * n_vocab);
  batch = malloc (sizeof (float) * T * n_vocab);

  /* One token at a time through the self-attention KV cache, as decoding
   * runs it. */
  t0 = wk_now_s ();
  for (t = 0; t < T && st == WK_OK; t++)
    st = wk_decoder_eval (ctx, 0, tokens + t, 1, t,
        step + (size_t) t * n_vocab, 1);
  printf ("# %-12s decoder: %d single-token steps in %.2f s\n", stem, (int) T,
      wk_now_s () - t0);
  CHECK_MSG (st == WK_OK, "wk_decoder_eval: %s", wk_status_str (st));
  if (st == WK_OK)
    compare_logits (stem, "(cached)", g, step, (int) T, n_vocab, tol_step);

  /* The whole sequence in one call (prompt processing). */
  st = wk_decoder_eval (ctx, 0, tokens, (int) T, 0, batch, (int) T);
  CHECK_MSG (st == WK_OK, "wk_decoder_eval (batch): %s", wk_status_str (st));
  if (st == WK_OK) {
    compare_logits (stem, "(batch)", g, batch, (int) T, n_vocab, tol_batch);
    diff_add (&s, step, batch, T * n_vocab, 1, 1);
    diff_report (stem, "cached vs batch", &s, tol_step);
  }
  free (step);
  free (batch);
}

static void
stage_greedy (const char *stem, const gd_file * g, wk_ctx * ctx, double tol)
{
  int64_t n_prompt = 0, n_ref = 0, n_margin;
  const int32_t *prompt = gd_i32 (g, "greedy_prompt", &n_prompt);
  const int32_t *ref = gd_i32 (g, "greedy_tokens", &n_ref);
  const float *margin;
  int32_t *out;
  int n, i, eot = 50256;
  const gd_array *a = gd_get (g, "greedy_margin", GD_F32);

  if (!prompt || !ref || !a)
    return;
  margin = a->data;
  n_margin = a->count;
  if (n_margin != n_ref)
    return;
  out = calloc ((size_t) n_ref + 1, sizeof *out);
  n = wk_greedy_raw (ctx, prompt, (int) n_prompt, (int) n_ref, out);
  CHECK_MSG (n >= 0, "wk_greedy_raw failed");
  /* The reference does not stop at <|endoftext|>; the engine does. */
  for (i = 0; i < n_ref; i++)
    if (ref[i] == eot) {
      n_ref = i + 1;
      break;
    }
  printf ("# %-12s greedy: %d tokens, reference %d:", stem, n, (int) n_ref);
  for (i = 0; i < n && i < 12; i++)
    printf (" %d", out[i]);
  printf ("%s\n", n > 12 ? " ..." : "");
  for (i = 0; i < n && i < n_ref; i++) {
    if (out[i] != ref[i]) {
      /* A near tie in the reference may go either way; after it the
       * sequences are different inputs, so stop comparing. */
      CHECK_MSG (margin[i] <= 2 * tol, "%s greedy step %d: %d, reference "
          "%d (margin %.3g)", stem, i, out[i], ref[i], margin[i]);
      printf ("# %-12s greedy: near tie at step %d (margin %.3g)\n", stem, i,
          margin[i]);
      break;
    }
  }
  if (i == n || i == n_ref)
    CHECK_MSG (n == n_ref, "%s greedy: %d tokens, reference %d", stem, n,
        (int) n_ref);
  free (out);
}

static void
run_config (const parity_config * pc, const char *build_root)
{
  gd_file g;
  char path[4096], err[512], gen_dims[64], gen_type[16], conv_type[16];
  char seed[32];
  const char *dir = getenv ("WK_TEST_DATA");
  const char *gen = getenv ("WK_MAKE_TEST_MODEL");
  const char *conv = getenv ("WK_CONVERT");
  const char *vocab = wk_test_shared_path ("for-tests-ggml-tiny.en.bin");
  const int32_t *gseed, *dims, *bsize, *bsum;
  uint64_t size = 0, s1 = 0, s2 = 0;
  wk_model *model = NULL;
  wk_ctx *ctx = NULL;
  wk_model_params mp = wk_model_default_params ();
  wk_model_info info;
  char bin[4352] = "", knot[4352] = "";
  int rc;

  snprintf (path, sizeof path, "%s/golden/%s.gold", dir ? dir : ".", pc->stem);
  if (access (path, R_OK) != 0 && !pc->required) {
    printf ("# %s: no golden file, skipped\n", pc->stem);
    return;
  }
  if (gd_load (path, &g) != 0) {
    CHECK_MSG (0, "cannot read %s", path);
    return;
  }
  gseed = gd_i32 (&g, "gen_seed", NULL);
  dims = gd_i32 (&g, "dims", NULL);
  bsize = gd_i32 (&g, "bin_size", NULL);
  bsum = gd_i32 (&g, "bin_sum", NULL);
  if (!gseed || !dims || !bsize || !bsum
      || !gd_str (&g, "gen_dims", gen_dims, sizeof gen_dims)
      || !gd_str (&g, "gen_type", gen_type, sizeof gen_type)
      || !gd_str (&g, "conv_type", conv_type, sizeof conv_type))
    goto done;
  snprintf (seed, sizeof seed, "%d", gseed[0]);
  snprintf (bin, sizeof bin, "%s", work_path ("model.bin"));
  snprintf (knot, sizeof knot, "%s", work_path ("model.knot"));

  {
    const char *argv[] = { gen, "--dims", gen_dims, "--type", gen_type,
      "--seed", seed, "--vocab", vocab, bin, NULL
    };
    rc = run_cmd (argv);
    CHECK_MSG (rc == 0, "%s failed (%d)", gen, rc);
    if (rc != 0)
      goto done;
  }
  CHECK (file_checksum (bin, &size, &s1, &s2) == 0);
  if (size != u64_from (bsize) || s1 != u64_from (bsum)
      || s2 != u64_from (bsum + 2)) {
    CHECK_MSG (0, "%s: the generator's model no longer matches the golden "
        "file (size %llu, golden %llu): regenerate with /usr/bin/python3 "
        "knots/golden.py --builddir %s", pc->stem, (unsigned long long) size,
        (unsigned long long) u64_from (bsize), build_root);
    goto done;
  }
  if (!strcmp (conv_type, "keep")) {
    const char *argv[] = { conv, bin, knot, NULL };
    rc = run_cmd (argv);
  } else {
    const char *argv[] = { conv, "--type", conv_type, bin, knot, NULL };
    rc = run_cmd (argv);
  }
  unlink (bin);
  CHECK_MSG (rc == 0, "%s failed (%d)", conv, rc);
  if (rc != 0)
    goto done;

  if (wk_model_load (knot, &mp, &model, err, sizeof err) != WK_OK) {
    CHECK_MSG (0, "%s: %s", pc->stem, err);
    goto done;
  }
  wk_model_get_info (model, &info);
  CHECK (info.n_vocab == dims[0] && info.n_audio_ctx == dims[1]
      && info.n_audio_state == dims[2] && info.n_audio_head == dims[3]
      && info.n_audio_layer == dims[4] && info.n_text_ctx == dims[5]
      && info.n_text_state == dims[6] && info.n_text_head == dims[7]
      && info.n_text_layer == dims[8] && info.n_mels == dims[9]);
  printf ("# %s: %s weights, %d layers x %d wide, %d heads, %d audio "
      "positions, vocab %d (kernels: %s)\n", pc->stem, gen_type,
      info.n_audio_layer, info.n_audio_state, info.n_audio_head,
      info.n_audio_ctx, info.n_vocab, wk_kernels_name ());
  if (wk_ctx_new (model, 2, 1, &ctx, err, sizeof err) != WK_OK) {
    CHECK_MSG (0, "wk_ctx_new: %s", err);
    goto done;
  }

  stage_mel (pc->stem, model);
  {
    /* quantized weights through the encoder's integer products */
    bool enc_q = pc->tol_logits == TOL_LOGITS_QDOT
        && wk_linear_work_used (model->enc[0].attn_q->type, 0);
    double tol_enc = enc_q ? TOL_LOGITS_QDOT : TOL_ENC;
    printf ("# %s: encoder products %s\n", pc->stem, enc_q ? "integer" : "f32");
    stage_encoder (pc->stem, &g, ctx, &model->hp, tol_enc);
    stage_decoder (pc->stem, &g, ctx, &model->hp, pc->tol_logits,
        enc_q ? TOL_LOGITS_QDOT : TOL_LOGITS);
  }
  stage_greedy (pc->stem, &g, ctx, pc->tol_logits);

done:
  if (ctx)
    wk_ctx_free (ctx);
  if (model)
    wk_model_unref (model);
  if (bin[0])
    unlink (bin);
  if (knot[0])
    unlink (knot);
  gd_free (&g);
}

static void
test_parity (void)
{
  const char *root = getenv ("WK_BUILD_ROOT");
  size_t i;

  if (!getenv ("WK_MAKE_TEST_MODEL") || !getenv ("WK_CONVERT")
      || !getenv ("WK_SHARED_DATA")) {
    CHECK_MSG (0, "run from meson test (WK_* environment missing)");
    return;
  }
  snprintf (work_dir, sizeof work_dir, "%s/parity-XXXXXX", root ? root : ".");
  if (!mkdtemp (work_dir)) {
    CHECK_MSG (0, "mkdtemp %s: %s", work_dir, strerror (errno));
    return;
  }
  if (load_mel_golden () == 0)
    for (i = 0; i < sizeof configs / sizeof configs[0]; i++)
      run_config (&configs[i], root ? root : "build");
  rmdir (work_dir);
  free (golden_window);
  wk_wav_clear (&jfk);
}

int
main (void)
{
  RUN (test_parity);
  return TEST_EXIT ();
}
