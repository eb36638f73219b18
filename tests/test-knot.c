/* Knot reader: a knot written by the writer reads back exactly, and every
 * kind of damage (truncation, flipped header bytes, huge counts and
 * offsets, misalignment, unknown types, duplicates, nesting) is an error
 * message, never a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "knot.h"
#include "knot-writer.h"
#include "whisperknot.h"
#include "wk-test.h"
#include "wk-time.h"

static float w_q[64 * 4];
static uint8_t w_q8[4 * 2 * 34];
static float bias[5] = { 1, 2, 3, 4, 5 };

/* A small valid knot: metadata of each kind we use, three tensors. */
static void *
make_knot (size_t *size, bool dup_name)
{
  wk_knot_writer *w = wk_knot_writer_new (64);
  static const char *toks[] = { "hello", "", "\xff\x00z" };
  static const size_t lens[] = { 5, 0, 3 };
  float filt[6] = { 0.5f, -1, 2, 3, 4, 1e-7f };
  int64_t ne2[2] = { 64, 4 }, ne1[1] = { 5 };
  void *data;
  char err[256];

  for (int i = 0; i < 64 * 4; i++)
    w_q[i] = (float) (i % 17) * 0.25f - 2.0f;
  wk_quantize_row_q8_0 (w_q, (wk_block_q8_0 *) w_q8, 64 * 4);

  wk_knot_writer_set_str (w, "general.architecture", "whisper", 7);
  wk_knot_writer_set_u32 (w, "whisper.n_mels", 80);
  wk_knot_writer_set_f32_array (w, "whisper.mel_filters", filt, 6);
  wk_knot_writer_set_str_array (w, "tokenizer.ggml.tokens", toks, lens, 3);
  wk_knot_writer_add_tensor (w, "a.weight", WK_TYPE_F32, 2, ne2, w_q,
      sizeof w_q, false, err, sizeof err);
  wk_knot_writer_add_tensor (w, dup_name ? "a.weight" : "a.bias",
      WK_TYPE_F32, 1, ne1, bias, sizeof bias, false, err, sizeof err);
  wk_knot_writer_add_tensor (w, "q.weight", WK_TYPE_Q8_0, 2, ne2, w_q8,
      sizeof w_q8, false, err, sizeof err);
  CHECK (wk_knot_writer_write_memory (w, &data, size, err,
          sizeof err) == WK_OK);
  CHECK (*size == wk_knot_writer_file_size (w));
  wk_knot_writer_free (w);
  return data;
}

static void
test_valid_knot_reads_back (void)
{
  size_t size;
  uint8_t *data = make_knot (&size, false);
  wk_knot *k = NULL;
  char err[256] = "";
  uint32_t u;
  const char *s;
  size_t len, n;
  float f[6];
  const wk_tensor *t;

  CHECK_MSG (wk_knot_open_memory (data, size, &k, err, sizeof err) == WK_OK,
      "%s", err);
  if (!k) {
    free (data);
    return;
  }
  CHECK (wk_knot_size (k) == size);
  CHECK (wk_knot_n_tensors (k) == 3);
  CHECK (wk_knot_get_u32 (k, "general.alignment", &u) && u == 64);
  CHECK (wk_knot_get_u32 (k, "whisper.n_mels", &u) && u == 80);
  CHECK (!wk_knot_get_u32 (k, "whisper.n_vocab", &u));
  CHECK (!wk_knot_get_u32 (k, "general.architecture", &u));
  CHECK (wk_knot_get_str (k, "general.architecture", &s, &len) && len == 7
      && memcmp (s, "whisper", 7) == 0);
  CHECK (wk_knot_get_arr_len (k, "whisper.mel_filters", &n) && n == 6);
  CHECK (wk_knot_copy_f32_arr (k, "whisper.mel_filters", f, 6)
      && f[0] == 0.5f && f[5] == 1e-7f);
  CHECK (!wk_knot_copy_f32_arr (k, "whisper.mel_filters", f, 7));
  CHECK (!wk_knot_copy_f32_arr (k, "tokenizer.ggml.tokens", f, 1));
  CHECK (wk_knot_get_arr_len (k, "tokenizer.ggml.tokens", &n) && n == 3);
  CHECK (wk_knot_get_str_at (k, "tokenizer.ggml.tokens", 0, &s, &len)
      && len == 5 && memcmp (s, "hello", 5) == 0);
  CHECK (wk_knot_get_str_at (k, "tokenizer.ggml.tokens", 1, &s, &len)
      && len == 0);
  CHECK (wk_knot_get_str_at (k, "tokenizer.ggml.tokens", 2, &s, &len)
      && len == 3 && memcmp (s, "\xff\x00z", 3) == 0);
  CHECK (!wk_knot_get_str_at (k, "tokenizer.ggml.tokens", 3, &s, &len));

  t = wk_knot_find (k, "a.weight");
  CHECK (t && t->type == WK_TYPE_F32 && t->n_dims == 2 && t->ne[0] == 64
      && t->ne[1] == 4 && t->ne[2] == 1 && t->nbytes == sizeof w_q
      && memcmp (t->data, w_q, sizeof w_q) == 0
      && ((const uint8_t *) t->data - data) % 64 == 0);
  t = wk_knot_find (k, "a.bias");
  CHECK (t && t->n_dims == 1 && t->ne[0] == 5
      && memcmp (t->data, bias, sizeof bias) == 0);
  t = wk_knot_find (k, "q.weight");
  CHECK (t && t->type == WK_TYPE_Q8_0 && t->nbytes == sizeof w_q8
      && memcmp (t->data, w_q8, sizeof w_q8) == 0);
  CHECK (wk_knot_find (k, "q.weigh") == NULL);
  CHECK (wk_knot_tensor_at (k, 2) == t);
  CHECK (wk_knot_tensor_at (k, 3) == NULL);
  CHECK (wk_knot_tensor_at (k, -1) == NULL);
  wk_knot_close (k);
  free (data);
}

/* Must fail with a message (and must not crash, which ASan checks). */
static int
expect_error (const uint8_t * data, size_t size, const char *want)
{
  wk_knot *k = NULL;
  char err[512] = "";
  wk_status st = wk_knot_open_memory (data, size, &k, err, sizeof err);

  if (st == WK_OK) {
    wk_knot_close (k);
    return 0;
  }
  if (k != NULL || err[0] == '\0')
    return 0;
  if (want && !strstr (err, want)) {
    fprintf (stderr, "  error \"%s\" lacks \"%s\"\n", err, want);
    return 0;
  }
  return 1;
}

static void
test_every_truncation_is_an_error (void)
{
  size_t size;
  uint8_t *data = make_knot (&size, false);
  int bad = 0;

  for (size_t len = 0; len < size; len++) {
    /* a private copy of exactly len bytes so ASan sees overreads */
    uint8_t *cut = malloc (len ? len : 1);
    memcpy (cut, data, len);
    if (!expect_error (cut, len, NULL) && bad++ < 3)
      CHECK_MSG (0, "truncation to %zu of %zu bytes was accepted", len, size);
    free (cut);
  }
  CHECK (bad == 0);
  free (data);
}

static uint8_t *
find_bytes (uint8_t * hay, size_t n, const char *needle)
{
  return memmem (hay, n, needle, strlen (needle));
}

static void
put64 (uint8_t * p, uint64_t v)
{
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t) (v >> (8 * i));
}

static void
put32 (uint8_t * p, uint32_t v)
{
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t) (v >> (8 * i));
}

/* Tensor info of "q.weight": n_dims at +0, ne at +4, type, offset. */
static uint8_t *
info_of (uint8_t * data, size_t size, const char *name)
{
  /* the name bytes in the info table (the first occurrence) */
  uint8_t *p = find_bytes (data, size, name);
  return p ? p + strlen (name) : NULL;
}

static void
test_corrupt_fields_are_errors (void)
{
  size_t size;
  uint8_t *orig = make_knot (&size, false), *d = malloc (size);
  uint8_t *info;

#define FRESH() memcpy (d, orig, size)
  FRESH ();
  d[0] = 'X';
  CHECK (expect_error (d, size, "magic"));
  FRESH ();
  put32 (d + 4, 2);
  CHECK (expect_error (d, size, "version"));
  FRESH ();
  put64 (d + 8, UINT64_MAX);
  CHECK (expect_error (d, size, "tensors cannot fit"));
  FRESH ();
  put64 (d + 8, 1ull << 62);
  CHECK (expect_error (d, size, "cannot fit"));
  FRESH ();
  put64 (d + 16, UINT64_MAX);
  CHECK (expect_error (d, size, "metadata entries"));
  FRESH ();
  put64 (d + 8, 4);             /* one tensor more than present */
  CHECK (expect_error (d, size, NULL));
  FRESH ();
  put64 (d + 16, 6);            /* one key more than present */
  CHECK (expect_error (d, size, NULL));

  /* first key's string length */
  FRESH ();
  put64 (d + 24, UINT64_MAX - 3);
  CHECK (expect_error (d, size, "past the end"));
  FRESH ();
  put64 (d + 24, 0);
  CHECK (expect_error (d, size, "empty"));

  /* the value type of general.alignment (u32 = 4) */
  FRESH ();
  put32 (d + 24 + 8 + 17, 13);
  CHECK (expect_error (d, size, "unknown value type"));
  FRESH ();
  put32 (d + 24 + 8 + 17 + 4, 48);      /* alignment not a power of 2 */
  CHECK (expect_error (d, size, "power of two"));
  FRESH ();
  put32 (d + 24 + 8 + 17 + 4, 0);
  CHECK (expect_error (d, size, "power of two"));

  /* string array length: huge */
  FRESH ();
  {
    uint8_t *p = find_bytes (d, size, "tokenizer.ggml.tokens");
    CHECK (p != NULL);
    if (p) {
      p += strlen ("tokenizer.ggml.tokens");
      CHECK (p[0] == 9 && p[4] == 8);   /* ARRAY of STRING */
      put64 (p + 8, UINT64_MAX / 2);
      CHECK (expect_error (d, size, "cannot fit"));
      FRESH ();
      put32 (p + 4, 9);         /* array of arrays */
      CHECK (expect_error (d, size, "nested"));
      FRESH ();
      put32 (p + 4, 77);
      CHECK (expect_error (d, size, "unknown type"));
      FRESH ();
      put64 (p + 16, 1ull << 40);       /* first string's length */
      CHECK (expect_error (d, size, "past the end"));
    }
  }
  /* f32 array count past the end */
  FRESH ();
  {
    uint8_t *p = find_bytes (d, size, "whisper.mel_filters");
    if (p) {
      p += strlen ("whisper.mel_filters");
      put64 (p + 8, 1ull << 61);
      CHECK (expect_error (d, size, "past the end"));
    }
  }
  /* tensor infos */
  FRESH ();
  info = info_of (d, size, "q.weight");
  CHECK (info != NULL);
  if (info) {
    size_t o = (size_t) (info - d);
    put32 (d + o, 0);
    CHECK (expect_error (d, size, "dimensions"));
    FRESH ();
    put32 (d + o, 5);
    CHECK (expect_error (d, size, "dimensions"));
    FRESH ();
    put64 (d + o + 4, 0);
    CHECK (expect_error (d, size, "must be >= 1"));
    FRESH ();
    put64 (d + o + 4, 33);      /* not whole q8_0 blocks */
    CHECK (expect_error (d, size, "whole number"));
    FRESH ();
    put64 (d + o + 4, 1ull << 63);
    CHECK (expect_error (d, size, NULL));
    FRESH ();
    put64 (d + o + 4, 1ull << 40);
    put64 (d + o + 12, 1ull << 40);
    CHECK (expect_error (d, size, NULL));
    FRESH ();
    put64 (d + o + 12, (1ull << 62) + 1);       /* elements overflow */
    CHECK (expect_error (d, size, NULL));
    FRESH ();
    put32 (d + o + 20, 3);      /* q4_1: not a knot type */
    CHECK (expect_error (d, size, "type 3"));
    FRESH ();
    put32 (d + o + 20, 0xffffffffu);
    CHECK (expect_error (d, size, "type"));
    FRESH ();
    put32 (d + o + 20, WK_TYPE_F32);    /* f32 of the same shape: too big */
    CHECK (expect_error (d, size, "extends past end of file"));
    FRESH ();
    put64 (d + o + 24, 1);      /* misaligned */
    CHECK (expect_error (d, size, "alignment"));
    FRESH ();
    put64 (d + o + 24, UINT64_MAX - 63);
    CHECK (expect_error (d, size, "extends past end of file"));
    FRESH ();
    put64 (d + o + 24, 1ull << 62);
    CHECK (expect_error (d, size, "extends past end of file"));
    FRESH ();
    put64 (d + o - 8 - 8, UINT64_MAX);  /* the name's length */
    CHECK (expect_error (d, size, NULL));
    FRESH ();
    put64 (d + o - 8 - 8, 300);
    CHECK (expect_error (d, size, NULL));
    FRESH ();
    d[o - 3] = 0;               /* NUL inside the name */
    CHECK (expect_error (d, size, "NUL"));
  }
  /* a data offset pointing at the previous tensor is allowed (overlap is
   * not an error), as long as it stays inside the file */
  FRESH ();
  info = info_of (d, size, "q.weight");
  if (info) {
    put64 (info + 24, 0);
    CHECK (expect_error (d, size, NULL) == 0);
  }

  /* flipping any header byte must never crash (many are errors) */
  {
    wk_knot *k;
    size_t header = size - sizeof w_q8;
    for (size_t i = 0; i < header; i++) {
      for (int bit = 0; bit < 8; bit += 3) {
        FRESH ();
        d[i] ^= (uint8_t) (1u << bit);
        if (wk_knot_open_memory (d, size, &k, NULL, 0) == WK_OK)
          wk_knot_close (k);
      }
    }
  }
  free (d);
  free (orig);
#undef FRESH
}

static void
test_duplicate_tensor_names_rejected (void)
{
  size_t size;
  uint8_t *data = make_knot (&size, true);
  CHECK (expect_error (data, size, "appears twice"));
  free (data);
}

static void
test_duplicate_key_rejected (void)
{
  wk_knot_writer *w = wk_knot_writer_new (64);
  void *data;
  size_t size;
  char err[256];

  wk_knot_writer_set_u32 (w, "whisper.n_mels", 80);
  wk_knot_writer_set_str (w, "whisper.n_mels", "x", 1);
  CHECK (wk_knot_writer_write_memory (w, &data, &size, err,
          sizeof err) == WK_OK);
  CHECK (expect_error (data, size, "appears twice"));
  free (data);
  wk_knot_writer_free (w);
}

static void
test_zero_tensors_and_empty (void)
{
  wk_knot_writer *w = wk_knot_writer_new (64);
  void *data;
  size_t size;
  wk_knot *k = NULL;
  char err[256];

  wk_knot_writer_set_u32 (w, "x", 1);
  CHECK (wk_knot_writer_write_memory (w, &data, &size, err,
          sizeof err) == WK_OK);
  CHECK (wk_knot_open_memory (data, size, &k, err, sizeof err) == WK_OK);
  CHECK (k && wk_knot_n_tensors (k) == 0);
  wk_knot_close (k);
  free (data);
  wk_knot_writer_free (w);
  CHECK (expect_error ((const uint8_t *) "", 0, "magic"));
  CHECK (expect_error ((const uint8_t *) "GGUF", 4, "truncated"));
}

/* An owned tensor the writer refuses is freed there (the leak checker of
 * the ASan build sees it otherwise); the caller never frees it. */
static void
test_writer_frees_refused_owned_data (void)
{
  wk_knot_writer *w = wk_knot_writer_new (64);
  int64_t ne[2] = { 4, 1 }, bad[2] = { 0, 1 };
  char err[256];

  CHECK (w != NULL);
  CHECK (wk_knot_writer_add_tensor (w, "a", WK_TYPE_F32, 1, ne,
          malloc (16), 12, true, err, sizeof err) == WK_ERR_ARG);
  CHECK (wk_knot_writer_add_tensor (w, "", WK_TYPE_F32, 1, ne,
          malloc (16), 16, true, err, sizeof err) == WK_ERR_ARG);
  CHECK (wk_knot_writer_add_tensor (w, "a", WK_TYPE_F32, 1, bad,
          malloc (16), 16, true, err, sizeof err) == WK_ERR_ARG);
  CHECK (wk_knot_writer_add_tensor (w, "a", (wk_type) 99, 1, ne,
          malloc (16), 16, true, err, sizeof err) == WK_ERR_ARG);
  CHECK (wk_knot_writer_add_tensor (w, "a", WK_TYPE_F32, 1, ne,
          malloc (16), 16, true, err, sizeof err) == WK_OK);
  wk_knot_writer_free (w);
}

/* The files whisperknot-convert reads, given as a knot, are named with
 * what to do; other bytes get the magic error. */
static void
test_foreign_files_are_named (void)
{
  static const uint8_t zip[] = { 'P', 'K', 3, 4, 20, 0, 0, 0, 0, 0 };
  static const uint8_t pickle[] = { 0x80, 2, 0x8a, 10, 0x6c, 0xfc, 0x9c };
  static const uint8_t st[] = { 4, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ' };
  uint8_t big[sizeof st], st640[8 + 640];

  CHECK (expect_error ((const uint8_t *) "lmgg\1\0\0\0", 8, "whisper.cpp"));
  CHECK (expect_error (zip, sizeof zip, "PyTorch checkpoint"));
  CHECK (expect_error (pickle, sizeof pickle, "before PyTorch 1.6"));
  CHECK (expect_error (st, sizeof st, "safetensors"));
  /* a header longer than the file, a pickle of protocol 1: the magic */
  memcpy (big, st, sizeof st);
  big[0] = 5;
  CHECK (expect_error (big, sizeof big, "magic is not"));
  CHECK (expect_error ((const uint8_t *) "\x80\x01K\x01.", 5, "magic is not"));
  /* a safetensors header of 640 bytes starts as a pickle would (0x80 2) */
  memset (st640, ' ', sizeof st640);
  memset (st640, 0, 8);
  st640[0] = 0x80;
  st640[1] = 2;
  st640[8] = '{';
  st640[sizeof st640 - 1] = '}';
  CHECK (expect_error (st640, sizeof st640, "safetensors file"));
}

static void
test_open_file (void)
{
  const char *tmp = getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp";
  char path[4096], err[512] = "";
  size_t size;
  uint8_t *data = make_knot (&size, false);
  wk_knot *k = NULL;
  FILE *f;

  snprintf (path, sizeof path, "%s/test-knot-%ld.knot", tmp, (long) getpid ());
  f = fopen (path, "wb");
  CHECK (f != NULL);
  if (!f)
    return;
  fwrite (data, 1, size, f);
  fclose (f);
  CHECK_MSG (wk_knot_open (path, &k, err, sizeof err) == WK_OK, "%s", err);
  CHECK (k && wk_knot_find (k, "q.weight") != NULL);
  wk_knot_close (k);

  /* truncated on disk: the message names the file */
  CHECK (truncate (path, (off_t) size - 1) == 0);
  CHECK (wk_knot_open (path, &k, err, sizeof err) == WK_ERR_FORMAT);
  CHECK_MSG (strstr (err, path) && strstr (err, "q.weight"), "%s", err);
  CHECK (truncate (path, 0) == 0);
  CHECK (wk_knot_open (path, &k, err, sizeof err) != WK_OK && k == NULL);
  unlink (path);
  CHECK (wk_knot_open (path, &k, err, sizeof err) == WK_ERR_IO);
  CHECK (wk_knot_open (tmp, &k, err, sizeof err) == WK_ERR_IO);
  free (data);
}

/* Opens path as a knot and as a model in a child process (a reader that
 * blocks would hang the test); true when both failed with a message
 * naming the file within a second. */
static bool
fails_fast (const char *path)
{
  double t0 = wk_now_s ();
  pid_t pid;
  int status = 0;

  fflush (stdout);
  fflush (stderr);
  pid = fork ();
  if (pid == 0) {
    char err[512] = "";
    wk_knot *k = NULL;
    wk_model *m = NULL;
    bool ok = wk_knot_open (path, &k, err, sizeof err) == WK_ERR_IO
        && strstr (err, path) != NULL;
    if (!ok)
      fprintf (stderr, "knot: %s\n", err);
    err[0] = '\0';
    if (wk_model_load (path, NULL, &m, err, sizeof err) != WK_ERR_IO
        || !strstr (err, path)) {
      fprintf (stderr, "model: %s\n", err);
      ok = false;
    }
    _exit (ok ? 0 : 1);
  }
  if (pid < 0)
    return false;
  while (waitpid (pid, &status, WNOHANG) == 0) {
    if (wk_now_s () - t0 > 1.0) {
      kill (pid, SIGKILL);
      waitpid (pid, &status, 0);
      fprintf (stderr, "%s: no answer within a second\n", path);
      return false;
    }
    usleep (5000);
  }
  return WIFEXITED (status) && WEXITSTATUS (status) == 0;
}

/* A FIFO (opening it would wait for a writer), a directory and a device
 * (/dev/zero: endless, and not mappable as a file) are errors at once. */
static void
test_special_files_fail_fast (void)
{
  const char *tmp = getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp";
  char fifo[4096];

  snprintf (fifo, sizeof fifo, "%s/test-knot-%ld.fifo", tmp, (long) getpid ());
  unlink (fifo);
  CHECK (mkfifo (fifo, 0600) == 0);
  CHECK (fails_fast (fifo));
  unlink (fifo);
  CHECK (fails_fast (tmp));
  if (access ("/dev/zero", R_OK) == 0)
    CHECK (fails_fast ("/dev/zero"));
}

/* wk_knot_check_file: a mapped file that shrank or was rewritten in place
 * is an error naming it (its weights would raise SIGBUS or no longer
 * match); one replaced by rename keeps the mapped inode and passes; a
 * knot in memory always passes. */
static void
test_check_file_after_open (void)
{
  const char *tmp = getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp";
  char path[4096], other[4200], err[1024] = "";
  size_t size;
  uint8_t *data = make_knot (&size, false);
  wk_knot *k = NULL, *km = NULL;
  wk_file_id id;
  struct stat sb;
  FILE *f;

  snprintf (path, sizeof path, "%s/test-knot-check-%ld.knot", tmp,
      (long) getpid ());
  snprintf (other, sizeof other, "%s.new", path);
  f = fopen (path, "wb");
  CHECK (f && fwrite (data, 1, size, f) == size);
  if (f)
    fclose (f);
  CHECK (wk_knot_open_memory (data, size, &km, err, sizeof err) == WK_OK);
  CHECK (wk_knot_check_file (km, "mem", err, sizeof err) == WK_OK);
  CHECK (!wk_knot_file_id (km, &id));
  wk_knot_close (km);

  CHECK_MSG (wk_knot_open (path, &k, err, sizeof err) == WK_OK, "%s", err);
  if (!k)
    goto out;
  CHECK (wk_knot_file_id (k, &id) && id.size == (int64_t) size
      && stat (path, &sb) == 0 && id.ino == (uint64_t) sb.st_ino);
  CHECK (wk_knot_check_file (k, path, err, sizeof err) == WK_OK);
  /* replaced by rename: the mapped file is untouched */
  f = fopen (other, "wb");
  CHECK (f && fwrite (data, 1, size / 2, f) == size / 2);
  if (f)
    fclose (f);
  CHECK (rename (other, path) == 0);
  CHECK (wk_knot_check_file (k, path, err, sizeof err) == WK_OK);
  CHECK (wk_knot_find (k, "q.weight") != NULL);
  wk_knot_close (k);
  k = NULL;

  /* truncated in place */
  f = fopen (path, "wb");
  CHECK (f && fwrite (data, 1, size, f) == size);
  if (f)
    fclose (f);
  CHECK (wk_knot_open (path, &k, err, sizeof err) == WK_OK);
  CHECK (truncate (path, (off_t) size - 64) == 0);
  CHECK (k && wk_knot_check_file (k, path, err, sizeof err) == WK_ERR_IO);
  CHECK_MSG (strstr (err, path) && strstr (err, "shrank"), "%s", err);
  /* grown back to its size with a new time: rewritten in place */
  CHECK (truncate (path, (off_t) size) == 0);
  {
    struct timespec t[2] = { {0, UTIME_OMIT}, {0, 0} };
    CHECK (stat (path, &sb) == 0);
    t[1].tv_sec = sb.st_mtim.tv_sec + 5;
    CHECK (utimensat (AT_FDCWD, path, t, 0) == 0);
  }
  CHECK (k && wk_knot_check_file (k, path, err, sizeof err) == WK_ERR_IO);
  CHECK_MSG (strstr (err, "rewritten in place"), "%s", err);
out:
  wk_knot_close (k);
  unlink (path);
  unlink (other);
  free (data);
}

int
main (void)
{
  RUN (test_valid_knot_reads_back);
  RUN (test_every_truncation_is_an_error);
  RUN (test_corrupt_fields_are_errors);
  RUN (test_duplicate_tensor_names_rejected);
  RUN (test_duplicate_key_rejected);
  RUN (test_zero_tensors_and_empty);
  RUN (test_writer_frees_refused_owned_data);
  RUN (test_foreign_files_are_named);
  RUN (test_open_file);
  RUN (test_special_files_fail_fast);
  RUN (test_check_file_after_open);
  return TEST_EXIT ();
}
