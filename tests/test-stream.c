/* The stream API on random-weight models: model sharing and errors, feed
 * mechanics (chunking, finish, reset, bounded memory without allocation),
 * timestamps, decoding options, and a whisper-tiny-sized model in q8_0 and
 * f16 with stage timings.
 *
 * Models come from $WK_MAKE_TEST_MODEL (vocabularies from
 * $WK_SHARED_DATA) converted with $WK_CONVERT. Random weights produce
 * arbitrary tokens: these tests check mechanics, not text (the parity
 * test checks the numbers).
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ggml-bin.h"
#include "kernels.h"
#include "knot-writer.h"
#include "model.h"
#include "whisperknot.h"
#include "wk-test.h"
#include "wk-test-model.h"

/* ---- fixtures ---------------------------------------------------------- */

static char tmpdir[256];
static char small_knot[512], multi_knot[512], tiny_q8_knot[512],
    tiny_f16_knot[512], small_bin[512];

/* Test audio: jfk.wav (11 s) repeated with a little deterministic noise
 * in between, to any length. */
static float *jfk;
static size_t jfk_n;

static int
load_jfk (void)
{
  const char *path = wk_test_shared_path ("jfk.wav");
  FILE *f;
  int16_t *pcm;
  size_t i;

  if (!path || !(f = fopen (path, "rb")))
    return -1;
  /* PCM s16 mono 16 kHz; payload at byte 78 (see the data README) */
  jfk_n = 176000;
  pcm = malloc (jfk_n * sizeof *pcm);
  jfk = malloc (jfk_n * sizeof *jfk);
  if (!pcm || !jfk || fseek (f, 78, SEEK_SET) != 0
      || fread (pcm, sizeof *pcm, jfk_n, f) != jfk_n) {
    fclose (f);
    free (pcm);
    return -1;
  }
  fclose (f);
  for (i = 0; i < jfk_n; i++)
    jfk[i] = pcm[i] / 32768.0f;
  free (pcm);
  return 0;
}

static float *
make_audio (size_t n)
{
  float *a = malloc (n * sizeof *a);
  uint32_t x = 12345;
  size_t i;

  for (i = 0; i < n; i++) {
    size_t k = i % (jfk_n + 8000);
    x = x * 1664525u + 1013904223u;
    a[i] = k < jfk_n ? jfk[k] : ((int32_t) (x >> 8) - (1 << 23)) * 1e-9f;
  }
  return a;
}

static wk_stream_params
fast_params (void)
{
  wk_stream_params p = wk_stream_default_params ();
  p.n_threads = 2;
  p.temperature_inc = 0.0f;     /* random weights would always fall back */
  p.beam_size = 1;              /* greedy: random weights run to the token
                                 * limit; the beam test below sets its own */
  return p;
}

/* ---- collected results ------------------------------------------------- */

typedef struct
{
  int n;
  int64_t start[512], end[512];
  char text[512][256];
  int n_tokens[512];
  int64_t settled;              /* wk_stream_settled after the last take */
} results;

static void
collect (wk_stream * s, results * r)
{
  const wk_segment *segs;
  size_t n = wk_stream_take (s, &segs), i;
  int64_t settled;

  for (i = 0; i < n && r->n < 512; i++) {
    int j;
    /* nothing comes before what was called settled */
    CHECK_MSG (segs[i].start >= r->settled, "segment at %lld before the "
        "settled %lld", (long long) segs[i].start, (long long) r->settled);
    r->start[r->n] = segs[i].start;
    r->end[r->n] = segs[i].end;
    snprintf (r->text[r->n], sizeof r->text[0], "%s", segs[i].text);
    r->n_tokens[r->n] = segs[i].n_tokens;
    /* tokens inside their segment, in order */
    for (j = 0; j < segs[i].n_tokens; j++) {
      const wk_token *t = &segs[i].tokens[j];
      CHECK (t->start >= segs[i].start && t->end <= segs[i].end);
      CHECK (t->start <= t->end);
      CHECK (j == 0 || t->start >= segs[i].tokens[j - 1].end);
      CHECK (t->text != NULL);
      CHECK (t->p >= 0.0f && t->p <= 1.0f);
    }
    r->n++;
  }
  settled = wk_stream_settled (s);
  CHECK_MSG (settled >= r->settled, "settled went back from %lld to %lld",
      (long long) r->settled, (long long) settled);
  r->settled = settled;
}

static void
check_timestamps (const results * r, int64_t n_samples)
{
  int i;
  for (i = 0; i < r->n; i++) {
    CHECK_MSG (r->start[i] >= 0 && r->start[i] < r->end[i]
        && r->end[i] <= n_samples, "segment %d: [%lld, %lld) of %lld", i,
        (long long) r->start[i], (long long) r->end[i], (long long) n_samples);
    CHECK_MSG (i == 0 || r->start[i] >= r->end[i - 1],
        "segment %d starts at %lld before the previous end %lld", i,
        (long long) r->start[i], (long long) r->end[i - 1]);
  }
}

static bool
same_results (const results * a, const results * b)
{
  int i;
  if (a->n != b->n)
    return false;
  for (i = 0; i < a->n; i++)
    if (a->start[i] != b->start[i] || a->end[i] != b->end[i]
        || strcmp (a->text[i], b->text[i]) != 0
        || a->n_tokens[i] != b->n_tokens[i])
      return false;
  return true;
}

static wk_model *
load_ok (const char *path)
{
  char err[512];
  wk_model *m = NULL;
  wk_status st = wk_model_load (path, NULL, &m, err, sizeof err);
  CHECK_MSG (st == WK_OK && m, "load %s: %s", path, err);
  return m;
}

/* ---- tests ----------------------------------------------------------- */

static void
test_model_sharing (void)
{
  wk_model *a, *b, *c;
  wk_model_info info;
  char link[600];

  a = load_ok (small_knot);
  b = load_ok (small_knot);
  if (!a || !b)
    return;
  CHECK (a == b);               /* one mapping per file */
  CHECK (a->base.refcount == 2);
  /* the same file through another name is the same model */
  snprintf (link, sizeof link, "%s/link.knot", tmpdir);
  unlink (link);
  CHECK (symlink (small_knot, link) == 0);
  c = load_ok (link);
  CHECK (c == a);
  CHECK (a->base.refcount == 3);
  wk_model_get_info (a, &info);
  CHECK (info.n_vocab == 51864 && info.n_mels == 80);
  CHECK (info.n_audio_ctx == 1500 && info.n_audio_state == 64);
  CHECK (info.n_text_ctx == 64 && info.n_text_layer == 2);
  CHECK (!info.multilingual);
  CHECK (info.n_params > 0 && info.file_bytes > info.n_params * 4 / 2);
  CHECK (wk_model_ref (a) == a && a->base.refcount == 4);
  wk_model_unref (a);
  wk_model_unref (c);
  wk_model_unref (b);
  CHECK (a->base.refcount == 1);
  {
    /* a stream holds its own reference */
    wk_stream_params p = fast_params ();
    wk_stream *s = NULL;
    char err[256];
    CHECK (wk_stream_new (a, &p, &s, err, sizeof err) == WK_OK);
    CHECK (a->base.refcount == 2);
    wk_model_unref (a);         /* the stream keeps it alive */
    CHECK (a->base.refcount == 1);
    CHECK (s && wk_stream_feed (s, jfk, 16000) == WK_OK);
    wk_stream_free (s);
  }
  /* all references gone: a new load maps the file afresh */
  a = load_ok (small_knot);
  if (a) {
    CHECK (a->base.refcount == 1);
    wk_model_unref (a);
  }
  unlink (link);
}

static void *
load_thread (void *arg)
{
  wk_model **out = arg;
  char err[256];
  if (wk_model_load (small_knot, NULL, out, err, sizeof err) != WK_OK)
    *out = NULL;
  return NULL;
}

/* Threads loading one file at once share one model. */
static void
test_concurrent_load (void)
{
  pthread_t th[4];
  wk_model *m[4] = { NULL };
  int i;

  for (i = 0; i < 4; i++)
    CHECK (pthread_create (&th[i], NULL, load_thread, &m[i]) == 0);
  for (i = 0; i < 4; i++)
    pthread_join (th[i], NULL);
  for (i = 0; i < 4; i++)
    CHECK (m[i] != NULL && m[i] == m[0]);
  if (m[0])
    CHECK (m[0]->base.refcount == 4);
  for (i = 0; i < 4; i++)
    wk_model_unref (m[i]);
}

static void
expect_load_error (const char *path, wk_status want, const char *needle)
{
  char err[512] = "";
  wk_model *m = (wk_model *) 1;
  wk_status st = wk_model_load (path, NULL, &m, err, sizeof err);

  CHECK_MSG (st != WK_OK, "%s loaded", path);
  CHECK (m == NULL);
  CHECK_MSG (want == WK_OK || st == want, "%s: status %s, wanted %s", path,
      wk_status_str (st), wk_status_str (want));
  CHECK_MSG (err[0] != '\0', "%s: no message", path);
  CHECK_MSG (!needle || strstr (err, needle), "%s: message '%s' lacks '%s'",
      path, err, needle);
}

static int
write_file (const char *path, const void *data, size_t n)
{
  FILE *f = fopen (path, "wb");
  if (!f)
    return -1;
  if (fwrite (data, 1, n, f) != n) {
    fclose (f);
    return -1;
  }
  return fclose (f);
}

static void
test_bad_models (void)
{
  char path[600];
  FILE *f;
  unsigned char *buf;
  long size;
  size_t i;

  snprintf (path, sizeof path, "%s/does-not-exist.knot", tmpdir);
  expect_load_error (path, WK_ERR_IO, "does-not-exist.knot");
  expect_load_error ("", WK_ERR_ARG, NULL);

  /* a whisper.cpp .bin is not a knot */
  expect_load_error (small_bin, WK_OK, NULL);

  f = fopen (small_knot, "rb");
  CHECK (f != NULL);
  if (!f)
    return;
  fseek (f, 0, SEEK_END);
  size = ftell (f);
  fseek (f, 0, SEEK_SET);
  buf = malloc ((size_t) size);
  CHECK (buf && fread (buf, 1, (size_t) size, f) == (size_t) size);
  fclose (f);

  /* truncated: header only, and cut inside the tensor data */
  snprintf (path, sizeof path, "%s/truncated.knot", tmpdir);
  CHECK (write_file (path, buf, 4096) == 0);
  expect_load_error (path, WK_OK, NULL);
  CHECK (write_file (path, buf, (size_t) size - 1000) == 0);
  expect_load_error (path, WK_OK, NULL);
  unlink (path);

  /* garbage */
  snprintf (path, sizeof path, "%s/garbage.knot", tmpdir);
  for (i = 0; i < 4096; i++)
    buf[i] = (unsigned char) (i * 2654435761u >> 13);
  CHECK (write_file (path, buf, 4096) == 0);
  expect_load_error (path, WK_OK, NULL);
  CHECK (write_file (path, buf, 0) == 0);
  expect_load_error (path, WK_OK, NULL);
  unlink (path);
  free (buf);
}

/* Writes the small model as a knot with n_text_ctx replaced and one
 * tensor left out (skip: NULL for none): a file the converter would never
 * write, so the loader's own checks are what is tested. */
static int
write_odd_knot (const char *out, uint32_t n_text_ctx, const char *skip)
{
  static const char *const keys[10] = { "whisper.n_vocab",
    "whisper.n_audio_ctx", "whisper.n_audio_state", "whisper.n_audio_head",
    "whisper.n_audio_layer", "whisper.n_text_ctx", "whisper.n_text_state",
    "whisper.n_text_head", "whisper.n_text_layer", "whisper.n_mels"
  };
  wk_ggml_bin *b = NULL;
  wk_knot_writer *w;
  char err[512];
  size_t *lens;
  int32_t i;
  int64_t t;
  int rc = -1;

  if (wk_ggml_bin_open (small_bin, &b, err, sizeof err) != WK_OK)
    return -1;
  w = wk_knot_writer_new (64);
  lens = calloc ((size_t) b->n_tokens, sizeof *lens);
  if (!w || !lens)
    goto done;
  wk_knot_writer_set_str (w, "general.architecture", "whisper", 7);
  for (i = 0; i < 10; i++) {
    const int32_t *hp = &b->hp.n_vocab;
    wk_knot_writer_set_u32 (w, keys[i], i == 5 ? n_text_ctx : (uint32_t) hp[i]);
  }
  wk_knot_writer_set_f32_array (w, "whisper.mel_filters", b->mel_filters,
      (size_t) b->n_mel * b->n_fft);
  wk_knot_writer_set_str (w, "tokenizer.ggml.model", "gpt2", 4);
  for (i = 0; i < b->n_tokens; i++)
    lens[i] = b->token_lens[i];
  wk_knot_writer_set_str_array (w, "tokenizer.ggml.tokens", b->tokens, lens,
      (size_t) b->n_tokens);
  for (t = 0; t < b->n_tensors; t++) {
    const wk_ggml_tensor *x = &b->tensors[t];
    int64_t ne[4] = { x->ne[0], x->ne[1], x->ne[2], x->ne[3] };
    int nd = x->n_dims;
    if (skip && strcmp (x->name, skip) == 0)
      continue;
    if (strstr (x->name, "conv") && strstr (x->name, "bias")) {
      ne[0] *= ne[1];           /* {1, d} -> {d} */
      ne[1] = 1;
      nd = 1;
    }
    if (wk_knot_writer_add_tensor (w, x->name, (wk_type) x->type, nd, ne,
            x->data, x->nbytes, false, err, sizeof err) != WK_OK)
      goto done;
  }
  if (wk_knot_writer_write_file (w, out, err, sizeof err) == WK_OK)
    rc = 0;
done:
  if (rc != 0)
    fprintf (stderr, "write_odd_knot: %s\n", err);
  free (lens);
  wk_knot_writer_free (w);
  wk_ggml_bin_free (b);
  return rc;
}

/* Knots whose header disagrees with their tensors: the loader names the
 * tensor and both shapes; a missing tensor is named too. */
static void
test_shape_mismatch (void)
{
  char knot[600], err[512] = "";
  wk_model *m = NULL;

  snprintf (knot, sizeof knot, "%s/odd.knot", tmpdir);
  /* control: the same writer with nothing changed loads */
  CHECK (write_odd_knot (knot, 64, NULL) == 0);
  m = load_ok (knot);
  wk_model_unref (m);

  CHECK (write_odd_knot (knot, 32, NULL) == 0);
  expect_load_error (knot, WK_ERR_FORMAT, "decoder.positional_embedding");
  m = NULL;
  wk_model_load (knot, NULL, &m, err, sizeof err);
  CHECK_MSG (strstr (err, "has shape [64, 64]")
      && strstr (err, "header says [64, 32]"), "message: %s", err);

  CHECK (write_odd_knot (knot, 64, "decoder.blocks.1.mlp.2.bias") == 0);
  expect_load_error (knot, WK_ERR_FORMAT, "decoder.blocks.1.mlp.2.bias");
  unlink (knot);
}

static void
run_all_at_once (wk_model * m, const float *a, size_t n, results * r)
{
  wk_stream_params p = fast_params ();
  wk_stream *s = NULL;
  char err[256];

  memset (r, 0, sizeof *r);
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  if (!s)
    return;
  CHECK (wk_stream_feed (s, a, n) == WK_OK);
  collect (s, r);
  CHECK (wk_stream_finish (s) == WK_OK);
  collect (s, r);
  wk_stream_free (s);
}

static void
test_chunking (void)
{
  wk_model *m = load_ok (small_knot);
  size_t n = 45 * WK_SAMPLE_RATE, off = 0, k = 0;
  static const size_t sizes[] = { 1, 7, 160, 1601, 12345, 3, 48000, 999 };
  float *a;
  results once, chunked;
  wk_stream_params p = fast_params ();
  wk_stream *s = NULL;
  char err[256];

  if (!m)
    return;
  a = make_audio (n);
  run_all_at_once (m, a, n, &once);
  CHECK (once.n > 0);
  check_timestamps (&once, (int64_t) n);

  memset (&chunked, 0, sizeof chunked);
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  while (s && off < n) {
    size_t c = sizes[k++ % 8];
    if (c > n - off)
      c = n - off;
    CHECK (wk_stream_feed (s, a + off, c) == WK_OK);
    collect (s, &chunked);
    off += c;
    CHECK (chunked.settled <= (int64_t) off);
  }
  /* it follows the windows: 45 s hold one full window */
  CHECK_MSG (chunked.settled >= 20 * WK_SAMPLE_RATE, "settled at %lld",
      (long long) chunked.settled);
  CHECK (wk_stream_finish (s) == WK_OK);
  collect (s, &chunked);
  CHECK (chunked.settled == (int64_t) n);
  CHECK_MSG (same_results (&once, &chunked), "%d segments at once, %d in "
      "chunks", once.n, chunked.n);

  /* after finish: feeding is refused, flush/finish are no-ops */
  CHECK (wk_stream_feed (s, a, 100) == WK_ERR_STATE);
  CHECK (wk_stream_finish (s) == WK_OK);
  CHECK (wk_stream_take (s, NULL) == 0);

  /* reset: a fresh start gives the same results again */
  wk_stream_reset (s);
  memset (&chunked, 0, sizeof chunked);
  CHECK (wk_stream_feed (s, a, n) == WK_OK);
  collect (s, &chunked);
  CHECK (wk_stream_finish (s) == WK_OK);
  collect (s, &chunked);
  CHECK (same_results (&once, &chunked));

  /* s16 input is the same audio scaled by 1/32768 */
  {
    int16_t *pcm = malloc (n * sizeof *pcm);
    size_t i;
    results r16 = { 0 };
    for (i = 0; i < n; i++)
      pcm[i] = (int16_t) (a[i] * 32768.0f);
    wk_stream_reset (s);
    CHECK (wk_stream_feed_s16 (s, pcm, n) == WK_OK);
    CHECK (wk_stream_finish (s) == WK_OK);
    collect (s, &r16);
    check_timestamps (&r16, (int64_t) n);
    free (pcm);
  }

  /* non-finite samples are taken as silence, not a poisoned window */
  {
    float bad[4000];
    size_t i;
    results rb = { 0 };
    for (i = 0; i < 4000; i++)
      bad[i] = i % 3 == 0 ? NAN : (i % 3 == 1 ? INFINITY : -INFINITY);
    wk_stream_reset (s);
    CHECK (wk_stream_feed (s, a, 32000) == WK_OK);
    CHECK (wk_stream_feed (s, bad, 4000) == WK_OK);
    CHECK (wk_stream_finish (s) == WK_OK);
    collect (s, &rb);
    check_timestamps (&rb, 36000);
  }

  /* argument checks */
  CHECK (wk_stream_feed (NULL, a, 1) == WK_ERR_ARG);
  CHECK (wk_stream_feed (s, NULL, 1) == WK_ERR_ARG);
  wk_stream_reset (s);
  CHECK (wk_stream_feed (s, NULL, 0) == WK_OK);
  wk_stream_free (s);
  free (a);
  wk_model_unref (m);
}

typedef struct
{
  wk_model *m;
  const float *a;
  size_t n;
  results r;
} stream_job;

static void *
stream_thread (void *arg)
{
  stream_job *j = arg;
  run_all_at_once (j->m, j->a, j->n, &j->r);
  return NULL;
}

/* Streams on one model share the encoder's scratch: streams on several
 * threads at once give what one stream alone gives. */
static void
test_streams_in_threads (void)
{
  wk_model *m = load_ok (small_knot);
  size_t n = 35 * WK_SAMPLE_RATE;
  float *a;
  results alone;
  stream_job jobs[3];
  pthread_t th[3];
  int i;

  if (!m)
    return;
  a = make_audio (n);
  run_all_at_once (m, a, n, &alone);
  for (i = 0; i < 3; i++) {
    jobs[i].m = m;
    jobs[i].a = a;
    jobs[i].n = n;
    CHECK (pthread_create (&th[i], NULL, stream_thread, &jobs[i]) == 0);
  }
  for (i = 0; i < 3; i++) {
    pthread_join (th[i], NULL);
    CHECK_MSG (same_results (&alone, &jobs[i].r), "thread %d: %d segments, "
        "alone %d", i, jobs[i].r.n, alone.n);
  }
  free (a);
  wk_model_unref (m);
}

static void
test_long_audio_bounded (void)
{
  wk_model *m = load_ok (small_knot);
  size_t n = 70 * WK_SAMPLE_RATE, off = 0;
  float *a;
  results r;
  wk_stream_params p = fast_params ();
  wk_stream *s = NULL;
  wk_stream_stats st0, st1;
  char err[256];
  long allocs;

  if (!m)
    return;
  a = make_audio (n);
  memset (&r, 0, sizeof r);
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  if (!s)
    return;
  wk_stream_get_stats (s, &st0);
  atomic_store (&n_allocs, 0);
  atomic_store (&counting, 1);
  while (off < n) {
    size_t c = n - off < 3200 ? n - off : 3200; /* 200 ms */
    CHECK (wk_stream_feed (s, a + off, c) == WK_OK);
    off += c;
  }
  CHECK (wk_stream_finish (s) == WK_OK);
  atomic_store (&counting, 0);
  allocs = atomic_load (&n_allocs);
  if (WK_COUNT_ALLOCS)
    CHECK_MSG (allocs == 0, "%ld allocations while feeding", allocs);
  collect (s, &r);
  wk_stream_get_stats (s, &st1);
  CHECK_MSG (st1.n_windows >= 3, "%lld windows", (long long) st1.n_windows);
  CHECK (st1.state_bytes == st0.state_bytes);   /* nothing grew */
  CHECK (st1.audio_seconds > 69.9 && st1.audio_seconds < 70.1);
  CHECK (st1.encoder_seconds > 0 && st1.decoder_seconds > 0
      && st1.mel_seconds > 0);
  CHECK (st1.n_tokens > 0);
  CHECK (r.n > 0);
  check_timestamps (&r, (int64_t) n);
  printf ("# 70 s: %lld windows, %d segments, %.1f MB state, "
      "mel %.2f s enc %.2f s dec %.2f s\n", (long long) st1.n_windows, r.n,
      st1.state_bytes / 1e6, st1.mel_seconds, st1.encoder_seconds,
      st1.decoder_seconds);
  wk_stream_free (s);
  free (a);
  wk_model_unref (m);
}

static void
test_options (void)
{
  wk_model *m = load_ok (small_knot);
  size_t n = 12 * WK_SAMPLE_RATE;
  float *a;
  wk_stream_params p;
  wk_stream *s = NULL;
  char err[256];
  results r;

  if (!m)
    return;
  a = make_audio (n);

  /* beam search */
  p = fast_params ();
  p.beam_size = 3;
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  memset (&r, 0, sizeof r);
  CHECK (wk_stream_feed (s, a, n) == WK_OK);
  CHECK (wk_stream_finish (s) == WK_OK);
  collect (s, &r);
  check_timestamps (&r, (int64_t) n);
  CHECK (strcmp (wk_stream_language (s), "en") == 0);
  wk_stream_free (s);

  /* no timestamps: one segment per window */
  p = fast_params ();
  p.no_timestamps = true;
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  memset (&r, 0, sizeof r);
  CHECK (wk_stream_feed (s, a, n) == WK_OK);
  CHECK (wk_stream_finish (s) == WK_OK);
  collect (s, &r);
  CHECK (r.n <= 1);
  check_timestamps (&r, (int64_t) n);
  wk_stream_free (s);

  /* temperature fallback with sampling is deterministic for a seed */
  {
    results r1, r2;
    int k;
    for (k = 0; k < 2; k++) {
      results *rr = k ? &r2 : &r1;
      p = fast_params ();
      p.temperature_inc = 0.5f;
      p.seed = 42;
      memset (rr, 0, sizeof *rr);
      CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
      CHECK (wk_stream_feed (s, a, n) == WK_OK);
      CHECK (wk_stream_finish (s) == WK_OK);
      collect (s, rr);
      check_timestamps (rr, (int64_t) n);
      wk_stream_free (s);
    }
    CHECK (same_results (&r1, &r2));
  }

  /* bad parameters */
  p = fast_params ();
  p.beam_size = 100;
  s = (wk_stream *) 1;
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_ERR_ARG);
  CHECK (s == NULL && err[0]);
  p.beam_size = -1;
  s = (wk_stream *) 1;
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_ERR_ARG);
  CHECK (s == NULL && err[0]);
  CHECK (wk_stream_new (NULL, &p, &s, err, sizeof err) == WK_ERR_ARG);
  /* languages on an English-only model: English and auto are fine, any
   * other (known or not) is refused with a reason */
  p = fast_params ();
  p.language = "en";
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  wk_stream_free (s);
  p.language = "auto";
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  wk_stream_free (s);
  p.language = "de";
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_ERR_ARG);
  CHECK (s == NULL && strstr (err, "English-only"));
  p.language = "xx";
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_ERR_ARG);
  CHECK (s == NULL && strstr (err, "unknown language"));
  free (a);
  wk_model_unref (m);
}

/* The tokens the last window's decoder read before <|startoftranscript|>
 * equal <|startofprev|> followed by want[0..n-1]. */
static bool
context_is (wk_stream * s, const int32_t * want, int n)
{
  wk_ctx *c = wk_stream_ctx (s);

  if (n == 0)
    return c->n_context == 0;
  return c->n_context == n + 1 && c->seq[0] == c->model->sp.prev
      && !memcmp (c->seq + 1, want, (size_t) n * sizeof *want);
}

/* wk_stream_params.initial_prompt: tokenized as openai does (" " + the
 * stripped text), read after <|startofprev|> by the first offline window
 * and by every live run, cut to its last n_text_ctx / 2 - 1 tokens when
 * longer, refused when it is not UTF-8; segments carry the mean
 * probability of their tokens. */
static void
test_initial_prompt (void)
{
  wk_model *m = load_ok (small_knot);
  const int room = m ? m->hp.n_text_ctx / 2 - 1 : 0;
  size_t n = 4 * WK_SAMPLE_RATE;
  wk_stream_params p;
  wk_stream *s = NULL;
  char err[256], *longp;
  int32_t want[4096];
  int n_want, i, k;
  const wk_segment *segs;
  size_t n_segs, j;

  if (!m)
    return;
  n_want = wk_tokenizer_encode (m->tok, " Nakamura spoke in Kyoto.", 25,
      want, 4096);
  CHECK (n_want > 3);

  /* offline: the first window reads it, surrounding blanks stripped; and
   * again after a reset */
  p = fast_params ();
  p.initial_prompt = " \tNakamura spoke in Kyoto.\n";
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  for (k = 0; k < 2; k++) {
    CHECK (wk_stream_feed (s, jfk, n) == WK_OK);
    CHECK (wk_stream_finish (s) == WK_OK);
    CHECK_MSG (context_is (s, want, n_want), "run %d: %d context tokens",
        k, wk_stream_ctx (s)->n_context);
    n_segs = wk_stream_take (s, &segs);
    for (j = 0; j < n_segs; j++) {
      float sum = 0.0f;
      for (i = 0; i < segs[j].n_tokens; i++)
        sum += segs[j].tokens[i].p;
      CHECK (segs[j].n_tokens > 0 && segs[j].p > 0.0f && segs[j].p <= 1.0f
          && fabsf (segs[j].p - sum / segs[j].n_tokens) < 1e-5f);
    }
    wk_stream_reset (s);
  }
  wk_stream_free (s);

  /* without one, or blank: no context */
  p.initial_prompt = " \n ";
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  CHECK (wk_stream_feed (s, jfk, n) == WK_OK);
  CHECK (wk_stream_finish (s) == WK_OK);
  CHECK (context_is (s, NULL, 0));
  wk_stream_free (s);

  /* live: every run reads it first (the caller's string is not kept) */
  {
    char text[64];
    snprintf (text, sizeof text, "Nakamura spoke in Kyoto.");
    p = fast_params ();
    p.latency_ms = 1000;
    p.use_vad = false;
    p.initial_prompt = text;
    CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
    memset (text, 'x', sizeof text - 1);
    /* committed words may follow it (earlier text), never precede it */
    for (k = 0; k < 3; k++) {
      wk_ctx *c = wk_stream_ctx (s);
      CHECK (wk_stream_feed (s, jfk + k * WK_SAMPLE_RATE, WK_SAMPLE_RATE)
          == WK_OK);
      CHECK_MSG (c->n_context >= n_want + 1 && c->seq[0] == m->sp.prev
          && !memcmp (c->seq + 1, want, (size_t) n_want * sizeof *want),
          "live, second %d: %d context tokens", k, c->n_context);
    }
    CHECK (wk_stream_finish (s) == WK_OK);
    wk_stream_free (s);
  }

  /* too long: its last tokens, not an error */
  longp = malloc (40000);
  for (i = 0, k = 0; i < 1000; i++)
    k += snprintf (longp + k, 40000 - (size_t) k, "word%d ", i);
  {
    /* " " + the text without its trailing blank, as the stream does */
    char *sp = malloc (strlen (longp) + 2);
    sp[0] = ' ';
    strcpy (sp + 1, longp);
    sp[strlen (sp) - 1] = '\0';
    n_want = wk_tokenizer_encode (m->tok, sp, strlen (sp), want, 4096);
    free (sp);
  }
  CHECK (n_want > room);
  p = fast_params ();
  p.initial_prompt = longp;
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  CHECK (wk_stream_feed (s, jfk, n) == WK_OK);
  CHECK (wk_stream_finish (s) == WK_OK);
  CHECK_MSG (context_is (s, want + n_want - room, room),
      "long prompt: %d context tokens, %d expected",
      wk_stream_ctx (s)->n_context, room + 1);
  wk_stream_free (s);
  free (longp);

  /* a model never trained with a prompt reads none (whisperknot's own,
   * whisperknot.max_text_ctx = 0, wrote no text with one) */
  {
    wk_model_info info;
    int saved = m->max_text_ctx;

    wk_model_get_info (m, &info);
    CHECK (info.max_prompt_tokens == room);
    m->max_text_ctx = 0;
    wk_model_get_info (m, &info);
    CHECK (info.max_prompt_tokens == 0);
    p = fast_params ();
    p.initial_prompt = "Nakamura spoke in Kyoto.";
    CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
    /* which the stream says, for its caller to warn */
    CHECK (wk_stream_prompt_ignored (s));
    CHECK (wk_stream_feed (s, jfk, n) == WK_OK);
    CHECK (wk_stream_finish (s) == WK_OK);
    CHECK (context_is (s, NULL, 0));
    wk_stream_free (s);
    /* no prompt (NULL or ""), nothing ignored */
    p.initial_prompt = "";
    CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
    CHECK (!wk_stream_prompt_ignored (s));
    wk_stream_free (s);
    p.initial_prompt = NULL;
    CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
    CHECK (!wk_stream_prompt_ignored (s));
    wk_stream_free (s);
    m->max_text_ctx = saved;
  }
  /* a model trained with prompts reads the one it is given */
  p = fast_params ();
  p.initial_prompt = "Nakamura spoke in Kyoto.";
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  CHECK (!wk_stream_prompt_ignored (s));
  wk_stream_free (s);
  CHECK (!wk_stream_prompt_ignored (NULL));

  /* not UTF-8: refused, saying where */
  p.initial_prompt = "Caf\xc3 au lait";
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_ERR_ARG && !s);
  CHECK_MSG (strstr (err, "UTF-8") && strstr (err, "byte 3"), "%s", err);
  p.initial_prompt = "\xed\xa0\x80";    /* a surrogate */
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_ERR_ARG);
  wk_model_unref (m);
}

static void
test_multilingual (void)
{
  wk_model *m = load_ok (multi_knot);
  wk_stream_params p;
  wk_stream *s = NULL;
  char err[256];
  results r;
  const char *lang;

  if (!m)
    return;
  CHECK (m->multilingual);

  p = fast_params ();
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  CHECK (wk_stream_language (s) == NULL);       /* not detected yet */
  memset (&r, 0, sizeof r);
  CHECK (wk_stream_feed (s, jfk, jfk_n) == WK_OK);
  CHECK (wk_stream_finish (s) == WK_OK);
  collect (s, &r);
  check_timestamps (&r, (int64_t) jfk_n);
  lang = wk_stream_language (s);
  CHECK (lang != NULL && strlen (lang) >= 2);
  {
    /* the detection's distribution, most likely first: its first entry
     * is the language chosen */
    wk_language_prob lp[5];
    size_t k, n_lp = wk_stream_language_probs (s, lp, 5);
    float sum = 0.0f;
    CHECK_MSG (n_lp == 5, "%zu language probabilities", n_lp);
    CHECK (n_lp > 0 && lang && strcmp (lp[0].code, lang) == 0);
    for (k = 0; k < n_lp; k++) {
      CHECK (lp[k].p >= 0.0f && lp[k].p <= 1.0f);
      CHECK (k == 0 || lp[k].p <= lp[k - 1].p);
      sum += lp[k].p;
    }
    CHECK (sum <= 1.0001f);
    wk_stream_reset (s);
    CHECK (wk_stream_language_probs (s, lp, 5) == 0);
  }
  wk_stream_free (s);

  p = fast_params ();
  p.language = "de";
  p.translate = true;
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  CHECK (s && strcmp (wk_stream_language (s), "de") == 0);
  {
    wk_language_prob lp[3];
    CHECK (wk_stream_language_probs (s, lp, 3) == 1);
    CHECK (strcmp (lp[0].code, "de") == 0 && lp[0].p == 1.0f);
  }
  CHECK (wk_stream_feed (s, jfk, jfk_n) == WK_OK);
  CHECK (wk_stream_finish (s) == WK_OK);
  wk_stream_free (s);

  p.language = "xx-nonsense";
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_ERR_ARG);
  CHECK (strstr (err, "xx-nonsense") != NULL);
  wk_model_unref (m);
}

/* A whisper-tiny-sized model runs, in q8_0 and f16; prints the stage
 * timings (figures, not assertions). */
static void
tiny_model (const char *path, const char *label)
{
  wk_model *m = load_ok (path);
  wk_stream_params p = fast_params ();
  wk_stream *s = NULL;
  wk_stream_stats st;
  char err[256];
  results r;
  double t0;

  if (!m)
    return;
  CHECK (m->hp.n_audio_state == 384 && m->hp.n_text_layer == 4);
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  if (!s) {
    wk_model_unref (m);
    return;
  }
  memset (&r, 0, sizeof r);
  t0 = wk_test_now_s ();
  CHECK (wk_stream_feed (s, jfk, jfk_n) == WK_OK);
  CHECK (wk_stream_finish (s) == WK_OK);
  collect (s, &r);
  check_timestamps (&r, (int64_t) jfk_n);
  wk_stream_get_stats (s, &st);
  CHECK (st.n_windows >= 1 && st.n_tokens > 0);
  printf ("# tiny %s (%s kernels, 2 threads): 11 s in %.2f s: mel %.3f s, "
      "encoder %.3f s/window, decoder %.2f ms/token (%lld tokens), "
      "state %.1f MB\n", label, wk_kernels_name (), wk_test_now_s () - t0,
      st.mel_seconds, st.encoder_seconds / (double) st.n_windows,
      1e3 * st.decoder_seconds / (double) st.n_tokens,
      (long long) st.n_tokens, st.state_bytes / 1e6);
  wk_stream_free (s);
  wk_model_unref (m);
}

static void
test_tiny_q8_0 (void)
{
  tiny_model (tiny_q8_knot, "q8_0");
}

static void
test_tiny_f16 (void)
{
  tiny_model (tiny_f16_knot, "f16");
}

/* Beam search's batched step gives what one step per beam gives. */
static void
test_beam_batch (void)
{
  wk_model *m = load_ok (small_knot);
  wk_ctx *c = NULL;
  char err[256];
  const int32_t prompt[3] = { 50257, 50362, 400 };
  const int32_t next[3] = { 11, 262, 50363 };
  const int slots[3] = { 2, 0, 1 };
  float *mel, *batch, *single, diff = 0.0f;
  size_t V, i;
  int b;

  if (!m)
    return;
  V = (size_t) m->hp.n_vocab;
  CHECK (wk_ctx_new (m, 2, 3, &c, err, sizeof err) == WK_OK);
  mel = calloc ((size_t) m->hp.n_mels * 2 * m->hp.n_audio_ctx, sizeof *mel);
  batch = malloc (3 * V * sizeof *batch);
  single = malloc (3 * V * sizeof *single);
  wk_model_window_mel (m, jfk, jfk_n, 0, 1100, mel);
  CHECK (wk_encode (c, mel, 2 * m->hp.n_audio_ctx) == WK_OK);
  for (b = 0; b < 3; b++)
    CHECK (wk_decoder_eval (c, b, prompt, 3, 0, NULL, 1) == WK_OK);
  CHECK (wk_decoder_eval_beams (c, 3, slots, next, 3, batch) == WK_OK);
  for (b = 0; b < 3; b++) {
    CHECK (wk_decoder_eval (c, slots[b], prompt, 3, 0, NULL, 1) == WK_OK);
    CHECK (wk_decoder_eval (c, slots[b], &next[b], 1, 3, single + b * V, 1)
        == WK_OK);
  }
  for (i = 0; i < 3 * V; i++)
    if (fabsf (batch[i] - single[i]) > diff)
      diff = fabsf (batch[i] - single[i]);
  CHECK_MSG (diff < 1e-4f, "batched beams differ by %g", diff);
  CHECK (wk_decoder_eval_beams (c, 4, slots, next, 3, batch) == WK_ERR_ARG);
  free (mel);
  free (batch);
  free (single);
  wk_ctx_free (c);
  wk_model_unref (m);
}

/* A forced prefix (wk_decode_window's, as the live policy gives it) is
 * decoded as if sampled: prefixing the first k tokens of a greedy result
 * gives the rest of that result; a beam continues it too (not always
 * with the same tokens: the prefix's own scores no longer count); bad
 * prefixes are refused. */
static void
test_decode_prefix (void)
{
  wk_model *m = load_ok (small_knot);
  wk_ctx *c = NULL;
  char err[256];
  float *mel;
  int32_t full[224], bad[2];
  int n_full, k, beam;

  if (!m)
    return;
  CHECK (wk_ctx_new (m, 2, 3, &c, err, sizeof err) == WK_OK);
  mel = calloc ((size_t) m->hp.n_mels * 2 * m->hp.n_audio_ctx, sizeof *mel);
  wk_model_window_mel (m, jfk, jfk_n, 0, 1100, mel);
  CHECK (wk_encode (c, mel, 2 * m->hp.n_audio_ctx) == WK_OK);
  for (beam = 1; beam <= 3; beam += 2) {
    wk_stream_params p = fast_params ();
    const wk_window_result *r = NULL;
    p.beam_size = beam;
    c->max_tokens = 24;
    CHECK (wk_decode_window (c, &p, 0, NULL, NULL, 0, &r) == WK_OK);
    n_full = r ? r->n_tokens : 0;
    CHECK_MSG (n_full >= 6, "beam %d: only %d tokens", beam, n_full);
    memcpy (full, r->tokens, (size_t) n_full * sizeof *full);
    for (k = 1; k < n_full; k += 2) {
      /* the prefix uses up k of the 24 tokens */
      c->max_tokens = 24 - k;
      CHECK (wk_decode_window (c, &p, 0, NULL, full, k, &r) == WK_OK);
      if (beam == 1)
        CHECK_MSG (r && r->n_tokens == n_full - k && !memcmp (r->tokens,
                full + k, (size_t) (n_full - k) * sizeof *full),
            "prefix of %d: %d tokens, %d expected", k,
            r ? r->n_tokens : -1, n_full - k);
      else
        CHECK (r && r->n_tokens > 0 && r->n_tokens <= 24 - k);
    }
  }
  c->max_tokens = 0;
  {
    wk_stream_params p = fast_params ();
    const wk_window_result *r = NULL;
    bad[0] = m->sp.eot;
    bad[1] = m->hp.n_vocab;
    CHECK (wk_decode_window (c, &p, 0, NULL, bad, 1, &r) == WK_ERR_ARG);
    CHECK (wk_decode_window (c, &p, 0, NULL, bad + 1, 1, &r)
        == WK_ERR_ARG);
    CHECK (wk_decode_window (c, &p, 0, NULL, NULL, 1, &r) == WK_ERR_ARG);
    CHECK (wk_decode_window (c, &p, 0, NULL, full, m->hp.n_text_ctx,
            &r) == WK_ERR_ARG);
  }
  free (mel);
  wk_ctx_free (c);
  wk_model_unref (m);
}

/* Whisper's logit filters on crafted sequences (decoding.py's rules). */
static void
test_logit_filters (void)
{
  wk_model *m = load_ok (small_knot);
  const wk_special_tokens *sp;
  float *x;
  int V, tb, eot, i;
  int32_t seq[8];

  if (!m)
    return;
  sp = &m->sp;
  V = m->hp.n_vocab;
  tb = sp->timestamp_begin;
  eot = sp->eot;
  x = malloc ((size_t) V * sizeof *x);
#define RESET() do { for (i = 0; i < V; i++) x[i] = 0.0f; x[400] = 50.0f; \
  } while (0)
#define SUPPRESSED(t) (x[t] == -INFINITY)

  seq[0] = sp->sot;
  /* first sampled token: a timestamp in <|0.00|> .. <|1.00|> */
  RESET ();
  wk_logit_filters_apply (m, 1, true, true, x, seq, 1);
  CHECK (SUPPRESSED (400) && SUPPRESSED (eot) && SUPPRESSED (220));
  CHECK (!SUPPRESSED (tb) && !SUPPRESSED (tb + 50) && SUPPRESSED (tb + 51));
  CHECK (SUPPRESSED (sp->no_timestamps) && SUPPRESSED (sp->sot)
      && SUPPRESSED (sp->nosp) && SUPPRESSED (sp->prev));
  for (i = 0; i < m->n_suppress; i++)
    CHECK (SUPPRESSED (m->suppress[i]));
  /* openai's list for the GPT-2 vocabulary starts 1 2 7 8 9 10 14 25 */
  CHECK (m->n_suppress > 80 && m->suppress[0] == 1 && m->suppress[1] == 2
      && m->suppress[2] == 7 && m->suppress[7] == 25);

  /* after the first timestamp: text must follow */
  seq[1] = tb + 10;
  RESET ();
  wk_logit_filters_apply (m, 1, true, true, x, seq, 2);
  CHECK (!SUPPRESSED (400) && !SUPPRESSED (eot));
  CHECK (SUPPRESSED (tb) && SUPPRESSED (tb + 10) && SUPPRESSED (V - 1));

  /* after text: timestamps only later than the last one */
  seq[2] = 400;
  RESET ();
  wk_logit_filters_apply (m, 1, true, true, x, seq, 3);
  CHECK (!SUPPRESSED (400) && !SUPPRESSED (eot));
  CHECK (SUPPRESSED (tb + 10) && !SUPPRESSED (tb + 11));

  /* ... and when the timestamps together are likelier than any text
   * token, a timestamp is forced */
  RESET ();
  x[400] = 1.0f;
  wk_logit_filters_apply (m, 1, true, true, x, seq, 3);
  CHECK (SUPPRESSED (400) && SUPPRESSED (eot) && !SUPPRESSED (tb + 11));

  /* a closing timestamp: then another timestamp (the next start, not
   * earlier) or the end, no text */
  seq[3] = tb + 20;
  RESET ();
  x[eot] = 50.0f;               /* else the timestamps' mass wins */
  wk_logit_filters_apply (m, 1, true, true, x, seq, 4);
  CHECK (SUPPRESSED (400) && !SUPPRESSED (eot));
  CHECK (SUPPRESSED (tb + 19) && !SUPPRESSED (tb + 20));

  /* a pair: text must follow */
  seq[4] = tb + 20;
  RESET ();
  wk_logit_filters_apply (m, 1, true, true, x, seq, 5);
  CHECK (!SUPPRESSED (400) && SUPPRESSED (tb + 20) && SUPPRESSED (V - 1));

  /* without timestamps only the suppression lists apply */
  seq[1] = sp->no_timestamps;
  RESET ();
  wk_logit_filters_apply (m, 2, true, false, x, seq, 2);
  CHECK (SUPPRESSED (eot) && SUPPRESSED (220) && !SUPPRESSED (400));
  CHECK (!SUPPRESSED (tb + 100));
  RESET ();
  wk_logit_filters_apply (m, 2, false, false, x, seq, 2);
  CHECK (!SUPPRESSED (eot) && !SUPPRESSED (220));
#undef RESET
#undef SUPPRESSED
  free (x);
  wk_model_unref (m);
}

/* ---- cancellation ------------------------------------------------------ */

typedef struct
{
  wk_stream *s;
  const float *a;
  size_t n;
  wk_status st;
  atomic_int done;
  double t_end;
} cancel_job;

static void *
cancel_feed_thread (void *arg)
{
  cancel_job *j = arg;

  j->st = wk_stream_feed (j->s, j->a, j->n);
  j->t_end = wk_test_now_s ();
  atomic_store (&j->done, 1);
  return NULL;
}

static void
sleep_until (double t)
{
  double left = t - wk_test_now_s ();

  if (left > 0)
    usleep ((useconds_t) (left * 1e6));
}

/* Longest a cancelled run may take to return: half a second, sixteen
 * times that under the sanitizers or with the portable kernels
 * (WK_KERNELS=ref). A run stops at the next cancel point, between two of
 * the encoder's stages, and the stages of both streams share the model's
 * worker pool, so a cancelled stream may first wait for the other
 * stream's stage: under AddressSanitizer at load 6 on two cores one stage
 * took 2.58 s (alone: 0.03 s), and on a slower 2-core Xeon, with the
 * suite running beside it, a cancel took 4.12 s; with the portable
 * kernels at load 4 a cancel took 0.63 s. A cancel that does not work
 * waits for the whole run, encoding and decoding to the token limit: tens
 * of seconds there. */
static double
cancel_bound (void)
{
  const char *k = getenv ("WK_KERNELS");
  bool slow = WK_TEST_SANITIZED || (k && !strcmp (k, "ref"));
  return slow ? 8.0 : 0.5;
}

/* wk_stream_cancel from another thread stops a model run in progress:
 * on a tiny-sized random model a 30 s window with beam 5 takes many
 * seconds (random weights decode to the token limit), and a cancel made
 * while it encodes, while it decodes, or while a second stream waits for
 * the first one's encoder returns from wk_stream_feed within
 * cancel_bound (), with WK_ERR_STATE, as do later calls until a reset. */
static void
test_cancel (void)
{
  wk_model *m = load_ok (tiny_q8_knot);
  /* three windows and a bit: with per-stream scratch and batched decoder
   * steps two streams no longer wait for each other, and one window's
   * run could end before the last cancel at 6 s (WK_KERNELS=avx2) */
  size_t n = 91 * WK_SAMPLE_RATE;
  const double delays[] = { 0.3, 3.0 };
  wk_stream_params p = wk_stream_default_params ();
  float *a;
  size_t d;
  int i;

  if (!m)
    return;
  a = make_audio (n);
  p.n_threads = 2;
  for (d = 0; d < 2; d++) {
    /* two streams: the second starts while the first encodes, so it
     * waits for the model's encoder; it is cancelled first */
    cancel_job jobs[2];
    pthread_t th[2];
    double t0 = wk_test_now_s (), t_cancel;
    char err[256];

    memset (jobs, 0, sizeof jobs);
    for (i = 0; i < 2; i++) {
      CHECK (wk_stream_new (m, &p, &jobs[i].s, err, sizeof err) == WK_OK);
      if (!jobs[i].s)
        goto out;
      jobs[i].a = a;
      jobs[i].n = n;
    }
    for (i = 0; i < 2; i++) {
      CHECK (pthread_create (&th[i], NULL, cancel_feed_thread, &jobs[i]) == 0);
      usleep (50 * 1000);
    }
    for (i = 1; i >= 0; i--) {
      sleep_until (t0 + delays[d] * (2 - i));
      CHECK_MSG (!atomic_load (&jobs[i].done), "stream %d: the run ended "
          "before the cancel (%.2f s): nothing was tested", i,
          wk_test_now_s () - t0);
      t_cancel = wk_test_now_s ();
      wk_stream_cancel (jobs[i].s);
      pthread_join (th[i], NULL);
      printf ("# cancel after %.2f s, stream %d: returned in %.3f s\n",
          t_cancel - t0, i, jobs[i].t_end - t_cancel);
      CHECK_MSG (jobs[i].t_end - t_cancel < cancel_bound (), "stream %d took "
          "%.3f s to stop", i, jobs[i].t_end - t_cancel);
      CHECK (jobs[i].st == WK_ERR_STATE);
    }
    for (i = 0; i < 2; i++) {
      double t = wk_test_now_s ();

      /* cancelled until a reset, at once */
      CHECK (wk_stream_feed (jobs[i].s, a, n) == WK_ERR_STATE);
      CHECK (wk_stream_flush (jobs[i].s) == WK_ERR_STATE);
      CHECK (wk_stream_finish (jobs[i].s) == WK_ERR_STATE);
      CHECK (wk_test_now_s () - t < 0.1);
      wk_stream_reset (jobs[i].s);
      CHECK (wk_stream_feed (jobs[i].s, a, WK_SAMPLE_RATE) == WK_OK);
    }
  out:
    for (i = 0; i < 2; i++)
      wk_stream_free (jobs[i].s);
  }
  free (a);
  wk_model_unref (m);
}

/* A model file truncated under a stream that already exists: the next
 * window fails with WK_ERR_IO before it reads a weight (before the check
 * in wk_encode, the encoder raised SIGBUS). */
static void
test_file_truncated_under_stream (void)
{
  char path[600], err[256];
  FILE *in, *out;
  char buf[1 << 16];
  size_t k, n = 31 * WK_SAMPLE_RATE;
  long size;
  wk_model *m;
  wk_stream *s = NULL;
  wk_stream_params p = wk_stream_default_params ();
  float *a;

  snprintf (path, sizeof path, "%s/truncated.knot", tmpdir);
  in = fopen (small_knot, "rb");
  out = fopen (path, "wb");
  CHECK (in && out);
  if (!in || !out)
    goto done_files;
  while ((k = fread (buf, 1, sizeof buf, in)) > 0)
    CHECK (fwrite (buf, 1, k, out) == k);
done_files:
  if (in)
    fclose (in);
  if (out)
    fclose (out);
  m = load_ok (path);
  if (!m)
    return;
  p.beam_size = 1;
  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  a = make_audio (n);
  if (s && a) {
    struct stat stt;
    size = stat (path, &stt) == 0 ? (long) stt.st_size : 0;
    CHECK (truncate (path, size / 2) == 0);
    CHECK (wk_stream_feed (s, a, n) == WK_ERR_IO);
  }
  free (a);
  wk_stream_free (s);
  wk_model_unref (m);
  unlink (path);
}

/* The text of one second of `lead` samples followed by jfk.wav, fed in
 * 20 ms pieces, with the default policy (the engine's beam) or the live
 * one; all segments' text in one string. */
static void
transcribe_after (wk_model * m, int latency_ms, float (*lead) (size_t),
    char *text, size_t text_size, wk_stream_stats * stats)
{
  wk_stream_params p = wk_stream_default_params ();
  size_t n = WK_SAMPLE_RATE + jfk_n, i, len = 0;
  wk_stream *s = NULL;
  float *a = malloc (n * sizeof *a);
  char err[256];

  text[0] = '\0';
  p.latency_ms = latency_ms;
  CHECK (a && wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  if (!a || !s) {
    free (a);
    return;
  }
  for (i = 0; i < WK_SAMPLE_RATE; i++)
    a[i] = lead (i);
  memcpy (a + WK_SAMPLE_RATE, jfk, jfk_n * sizeof *a);
  for (i = 0; i < n; i += 320)
    CHECK (wk_stream_feed (s, a + i, n - i < 320 ? n - i : 320) == WK_OK);
  CHECK (wk_stream_finish (s) == WK_OK);
  {
    const wk_segment *segs;
    size_t k = wk_stream_take (s, &segs), j;

    for (j = 0; j < k; j++)
      len += (size_t) snprintf (text + len, len < text_size ?
          text_size - len : 0, "%s", segs[j].text);
  }
  wk_stream_get_stats (s, stats);
  wk_stream_free (s);
  free (a);
}

static float
lead_silence (size_t i)
{
  (void) i;
  return 0.0f;
}

static float
lead_huge (size_t i)
{
  return i & 1 ? 1e30f : -1e30f;
}

static float
lead_inf (size_t i)
{
  return i & 1 ? INFINITY : -INFINITY;
}

static float
lead_nan (size_t i)
{
  (void) i;
  return NAN;
}

static float
lead_hot (size_t i)
{
  /* 0.3 over full scale: clipped, not dropped */
  return i & 1 ? 1.3f : -1.3f;
}

/* A second of +-1e30, of infinities or of NaN before speech is fed as
 * silence: the speech's text is the same as after a second of silence,
 * offline on the default model (real speech gives it real text; with a
 * random model the comparison would prove less) and live on the random
 * one (whose runs are too short to make the live policy stretch its
 * step, which depends on wall time). Samples beyond full scale are
 * clipped; all are counted in the stats. */
static void
test_hostile_samples (void)
{
  static char ref[8192], got[8192];
  float (*const leads[]) (size_t) = { lead_huge, lead_inf, lead_nan };
  const int latencies[] = { 0, 1000 };
  wk_model *models[2];
  wk_stream_stats st;
  char err[512];
  size_t i, j;

  models[1] = load_ok (small_knot);
  if (wk_model_load (wk_default_model_path (), NULL, &models[0], err,
          sizeof err) != WK_OK) {
    fprintf (stderr, "no default model (%s): the random one\n", err);
    models[0] = models[1] ? wk_model_ref (models[1]) : NULL;
  }
  for (j = 0; j < 2; j++) {
    if (!models[j])
      continue;
    transcribe_after (models[j], latencies[j], lead_silence, ref, sizeof ref,
        &st);
    CHECK (st.n_clipped == 0 && st.n_zeroed == 0);
    CHECK_MSG (ref[0] != '\0', "no text for jfk.wav (latency %d)",
        latencies[j]);
    for (i = 0; i < 3; i++) {
      transcribe_after (models[j], latencies[j], leads[i], got, sizeof got,
          &st);
      CHECK_MSG (strcmp (ref, got) == 0, "latency %d, lead %zu:\n"
          "  after silence: %s\n  after garbage: %s", latencies[j], i, ref,
          got);
      CHECK (st.n_clipped == 0);
      CHECK (st.n_zeroed == WK_SAMPLE_RATE);
    }
    transcribe_after (models[j], latencies[j], lead_hot, got, sizeof got, &st);
    CHECK (st.n_clipped == WK_SAMPLE_RATE && st.n_zeroed == 0);
    wk_model_unref (models[j]);
  }
}

/* wk_model_resolve_path: what a model= value names */
static void
check_resolved (const char *value, const char *want)
{
  char *got = wk_model_resolve_path (value);

  CHECK_MSG (got && strcmp (got, want) == 0, "'%s': '%s', expected '%s'",
      value ? value : "(null)", got ? got : "(null)", want);
  free (got);
}

static void
test_resolve_path (void)
{
  const char *old_dir = getenv ("WHISPERKNOT_MODEL_DIR");
  char *saved_dir = old_dir ? strdup (old_dir) : NULL;
  char dir[] = "/tmp/wk-resolve-XXXXXX";
  char knot[64];
  FILE *f;

  CHECK (mkdtemp (dir) != NULL);
  snprintf (knot, sizeof knot, "%s/small.knot", dir);
  f = fopen (knot, "w");
  CHECK (f != NULL);
  if (f)
    fclose (f);
  setenv ("WHISPERKNOT_MODEL_DIR", dir, 1);
  /* no value: the default model */
  check_resolved (NULL, wk_default_model_path ());
  /* a path as it is, found or not */
  check_resolved ("models/small", "models/small");
  check_resolved (knot, knot);
  /* a name: the installed knot of that name, when there is one */
  check_resolved ("small", knot);
  check_resolved ("large", "large");
  check_resolved ("", "");
  unlink (knot);
  rmdir (dir);
  if (saved_dir) {
    setenv ("WHISPERKNOT_MODEL_DIR", saved_dir, 1);
    free (saved_dir);
  } else {
    unsetenv ("WHISPERKNOT_MODEL_DIR");
  }
}

static void
test_misc_api (void)
{
  const char *old = getenv ("WHISPERKNOT_MODEL");
  char *saved = old ? strdup (old) : NULL;

  CHECK (strcmp (wk_status_str (WK_OK), "success") == 0);
  CHECK (wk_status_str ((wk_status) 1234) != NULL);
  setenv ("WHISPERKNOT_MODEL", "/some/where.knot", 1);
  CHECK (strcmp (wk_default_model_path (), "/some/where.knot") == 0);
  unsetenv ("WHISPERKNOT_MODEL");
  CHECK (wk_default_model_path () != NULL);
  if (saved) {
    setenv ("WHISPERKNOT_MODEL", saved, 1);
    free (saved);
  }
  test_resolve_path ();
  wk_stream_free (NULL);
  wk_model_unref (NULL);
  CHECK (wk_stream_take (NULL, NULL) == 0);
}

typedef struct
{
  int calls;
  const wk_model *model;
  wk_status status;
  double seconds;
} loaded_seen;

static void
on_loaded (const wk_model * model, wk_status status, double seconds,
    void *user_data)
{
  loaded_seen *seen = user_data;

  seen->calls++;
  seen->model = model;
  seen->status = status;
  seen->seconds = seconds;
}

/* wk_model_load_start/_finish: what needs no reading fails at once with
 * WK_ERR_IO (a FIFO without blocking); a good file gives the model
 * wk_model_load shares; a bad one fails at finish with the loader's
 * message. */
static void
test_model_loader (void)
{
  char path[600], err[256];
  wk_model_loader *l = (wk_model_loader *) 1;
  wk_model *m = NULL, *shared = NULL;
  double seconds = -1.0;
  loaded_seen seen = { 0 };

  snprintf (path, sizeof path, "%s/does-not-exist.knot", tmpdir);
  CHECK (wk_model_load_start (path, NULL, NULL, NULL, &l, err,
          sizeof err) == WK_ERR_IO);
  CHECK (l == NULL && strstr (err, "does not exist") != NULL);
  CHECK (wk_model_load_start (tmpdir, NULL, NULL, NULL, &l, err, sizeof err)
      == WK_ERR_IO);
  CHECK_MSG (l == NULL && strstr (err, "not a regular file") != NULL, "%s",
      err);
  snprintf (path, sizeof path, "%s/fifo.knot", tmpdir);
  CHECK (mkfifo (path, 0600) == 0);
  CHECK (wk_model_load_start (path, NULL, NULL, NULL, &l, err,
          sizeof err) == WK_ERR_IO);
  CHECK (l == NULL && strstr (err, "not a regular file") != NULL);
  unlink (path);
  CHECK (wk_model_load_start ("", NULL, NULL, NULL, &l, err,
          sizeof err) == WK_ERR_ARG);
  CHECK (wk_model_load_start (small_knot, NULL, NULL, NULL, NULL, err,
          sizeof err)
      == WK_ERR_ARG);
  CHECK (wk_model_load_finish (NULL, &m, NULL, err, sizeof err)
      == WK_ERR_ARG && m == NULL);

  CHECK (wk_model_load (small_knot, NULL, &shared, NULL, 0) == WK_OK);
  CHECK (wk_model_load_start (small_knot, NULL, on_loaded, &seen, &l, err,
          sizeof err) == WK_OK && l != NULL);
  CHECK (wk_model_load_finish (l, &m, &seconds, err, sizeof err) == WK_OK);
  CHECK (m != NULL && m == shared && seconds >= 0.0 && err[0] == '\0');
  /* the callback ran once, before finish returned, with what it gave */
  CHECK (seen.calls == 1 && seen.model == m && seen.status == WK_OK
      && seen.seconds == seconds);
  wk_model_unref (m);
  /* finished without taking the model: the loader releases it */
  CHECK (wk_model_load_start (small_knot, NULL, NULL, NULL, &l, NULL, 0)
      == WK_OK);
  CHECK (wk_model_load_finish (l, NULL, NULL, NULL, 0) == WK_OK);
  wk_model_unref (shared);

  /* a whisper.cpp .bin exists and is readable: it fails in the thread */
  memset (&seen, 0, sizeof seen);
  CHECK (wk_model_load_start (small_bin, NULL, on_loaded, &seen, &l, err,
          sizeof err) == WK_OK);
  m = (wk_model *) 1;
  CHECK (wk_model_load_finish (l, &m, &seconds, err, sizeof err) != WK_OK);
  CHECK_MSG (m == NULL && err[0] != '\0', "%s", err);
  CHECK (seen.calls == 1 && seen.model == NULL && seen.status != WK_OK);
}

/* wk_stream_stats_list: every field of wk_stream_stats once, under a
 * unique name, with its value and kind; the real-time factor computed;
 * a short out array gets a prefix. */
static void
test_stats_list (void)
{
  wk_stream_stats st;
  wk_stat list[64], few[3];
  size_t n, i, j;
  double seen = 0.0;

  memset (&st, 0, sizeof st);
  /* distinct values: 1, 2, 4 ... so the sum says which fields appear */
  st.audio_seconds = 2.0;       /* the ratio's denominator: 2^1 */
  st.mel_seconds = 4.0;
  st.encoder_seconds = 8.0;
  st.decoder_seconds = 16.0;
  st.n_windows = 32;
  st.n_tokens = 64;
  st.state_bytes = 128;
  st.n_runs = 256;
  st.vad_seconds = 512.0;
  st.speech_seconds = 1024.0;
  st.step_seconds = 2048.0;
  st.last_run_seconds = 4096.0;
  st.max_run_seconds = 8192.0;
  st.last_delay_seconds = 16384.0;
  st.max_delay_seconds = 32768.0;
  st.n_committed = 65536;
  st.n_utterances = 131072;
  st.n_clipped = 262144;
  st.n_zeroed = 524288;
  st.n_deadline_commits = 1048576;
  st.n_late = 2097152;
  st.max_late_seconds = 4194304.0;
  st.run_estimate_seconds = 8388608.0;
  st.align_seconds = 16777216.0;
  st.n_aligned = 33554432;
  st.n_shared_steps = 67108864;
  st.n_slow_runs = 134217728;
  st.n_withheld = 268435456;

  n = wk_stream_stats_list (&st, list, 64);
  CHECK (n == 29);
  CHECK (wk_stream_stats_list (&st, NULL, 0) == n);
  for (i = 0; i < n && i < 64; i++) {
    for (j = 0; j < i; j++)
      CHECK_MSG (strcmp (list[i].name, list[j].name) != 0, "%s twice",
          list[i].name);
    if (strcmp (list[i].name, "real-time-factor") == 0) {
      CHECK_NEAR (list[i].value, (4.0 + 8 + 16 + 512) / 2.0, 1e-9);
      CHECK (!list[i].is_count);
      continue;
    }
    seen += list[i].value;
    /* counts are the powers of two from 32 that are integers above */
    CHECK_MSG (list[i].is_count == (strstr (list[i].name, "seconds") == NULL
            && strstr (list[i].name, "delay") == NULL
            && strstr (list[i].name, "lateness") == NULL
            && strstr (list[i].name, "estimate") == NULL), "%s", list[i].name);
  }
  /* every field exactly once: 2 + 4 + ... + 2^28 */
  CHECK_NEAR (seen, 536870910.0, 0.5);
  CHECK (strcmp (list[0].name, "audio-seconds") == 0 && list[0].value == 2.0);
  for (i = 0; i < n; i++)
    if (strcmp (list[i].name, "words") == 0)
      CHECK (list[i].is_count && list[i].value == 65536.0);

  memset (few, 0, sizeof few);
  CHECK (wk_stream_stats_list (&st, few, 2) == n);
  CHECK (strcmp (few[1].name, list[1].name) == 0 && few[2].name == NULL);

  memset (&st, 0, sizeof st);
  wk_stream_stats_list (&st, list, 64);
  for (i = 0; i < n; i++)
    CHECK (list[i].value == 0.0);
}

int
main (void)
{
  if (!wk_test_have_model_tools ())
    return 77;
  if (wk_test_make_tmpdir (tmpdir, sizeof tmpdir, "test-stream") != 0)
    return 1;
  if (load_jfk () != 0
      || wk_test_make_model (tmpdir, "small-test", "f32",
          "for-tests-ggml-tiny.en.bin", NULL, "small", small_knot,
          sizeof small_knot, small_bin, sizeof small_bin) != 0
      || wk_test_make_model (tmpdir, "51865,1500,64,2,2,64,64,2,2,80", "f16",
          "for-tests-ggml-tiny.bin", NULL, "multi", multi_knot,
          sizeof multi_knot, NULL, 0) != 0
      || wk_test_make_model (tmpdir, "tiny", "f16",
          "for-tests-ggml-tiny.en.bin", "q8_0", "tiny-q8_0", tiny_q8_knot,
          sizeof tiny_q8_knot, NULL, 0) != 0
      || wk_test_make_model (tmpdir, "tiny", "f16",
          "for-tests-ggml-tiny.en.bin", NULL, "tiny-f16", tiny_f16_knot,
          sizeof tiny_f16_knot, NULL, 0) != 0) {
    fprintf (stderr, "cannot prepare the test models\n");
    wk_test_remove_tmpdir (tmpdir);
    return 1;
  }

  RUN (test_misc_api);
  RUN (test_stats_list);
  RUN (test_model_loader);
  RUN (test_model_sharing);
  RUN (test_concurrent_load);
  RUN (test_bad_models);
  RUN (test_shape_mismatch);
  RUN (test_chunking);
  RUN (test_long_audio_bounded);
  RUN (test_streams_in_threads);
  RUN (test_options);
  RUN (test_beam_batch);
  RUN (test_decode_prefix);
  RUN (test_logit_filters);
  RUN (test_initial_prompt);
  RUN (test_multilingual);
  RUN (test_tiny_q8_0);
  RUN (test_tiny_f16);
  RUN (test_hostile_samples);
  RUN (test_cancel);
  RUN (test_file_truncated_under_stream);

  wk_test_remove_tmpdir (tmpdir);
  free (jfk);
  return TEST_EXIT ();
}
