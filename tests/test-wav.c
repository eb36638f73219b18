/* The WAV reader: jfk.wav (data chunk at byte 78, not 44), every supported
 * encoding and channel mix against known values, chunk order and padding,
 * WAVE_FORMAT_EXTENSIBLE, truncated and hostile files (errors, never a
 * crash: every prefix of a file and random corruptions are parsed). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wav.h"
#include "wk-test.h"

/* ---- a little WAV builder -------------------------------------------- */

typedef struct
{
  unsigned char b[65536];
  size_t n;
} buf;

static void
put (buf * w, const void *p, size_t n)
{
  memcpy (w->b + w->n, p, n);
  w->n += n;
}

static void
put16 (buf * w, unsigned v)
{
  unsigned char p[2] = { (unsigned char) v, (unsigned char) (v >> 8) };
  put (w, p, 2);
}

static void
put32 (buf * w, uint32_t v)
{
  unsigned char p[4] = { (unsigned char) v, (unsigned char) (v >> 8),
    (unsigned char) (v >> 16), (unsigned char) (v >> 24)
  };
  put (w, p, 4);
}

static void
begin_riff (buf * w)
{
  w->n = 0;
  put (w, "RIFF", 4);
  put32 (w, 0);                 /* filled by end_riff */
  put (w, "WAVE", 4);
}

static void
end_riff (buf * w)
{
  uint32_t v = (uint32_t) (w->n - 8);
  w->b[4] = (unsigned char) v;
  w->b[5] = (unsigned char) (v >> 8);
  w->b[6] = (unsigned char) (v >> 16);
  w->b[7] = (unsigned char) (v >> 24);
}

static void
put_fmt (buf * w, unsigned format, unsigned channels, uint32_t rate,
    unsigned bits)
{
  unsigned align = channels * bits / 8;
  put (w, "fmt ", 4);
  put32 (w, 16);
  put16 (w, format);
  put16 (w, channels);
  put32 (w, rate);
  put32 (w, rate * align);
  put16 (w, align);
  put16 (w, bits);
}

static void
put_fmt_extensible (buf * w, unsigned sub, unsigned channels, unsigned bits)
{
  static const unsigned char tail[14] = { 0x00, 0x00, 0x00, 0x00, 0x10, 0x00,
    0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71
  };
  unsigned align = channels * bits / 8;
  put (w, "fmt ", 4);
  put32 (w, 40);
  put16 (w, 0xFFFE);
  put16 (w, channels);
  put32 (w, 16000);
  put32 (w, 16000 * align);
  put16 (w, align);
  put16 (w, bits);
  put16 (w, 22);                /* cbSize */
  put16 (w, bits);              /* valid bits */
  put32 (w, channels == 2 ? 3 : 4);     /* channel mask */
  put16 (w, sub);
  put (w, tail, sizeof tail);
}

static void
put_chunk (buf * w, const char *id, const void *p, uint32_t n)
{
  put (w, id, 4);
  put32 (w, n);
  put (w, p, n);
  if (n & 1)
    w->b[w->n++] = 0;
}

/* wk_wav_parse, and the same bytes as a file through wk_wav_reader (read
 * in pieces of 1 to 7 samples): the same status, length and samples. */
static wk_status
parse_both (const void *data, size_t size, wk_wav * wav, char *err,
    size_t err_size)
{
  wk_status st = wk_wav_parse (data, size, wav, err, err_size), st2;
  char path[] = "/tmp/wk-test-wav-XXXXXX", err2[256];
  wk_wav_reader *r = NULL;
  int fd = mkstemp (path);

  CHECK (fd >= 0);
  if (fd < 0)
    return st;
  CHECK (size == 0 || write (fd, data, size) == (ssize_t) size);
  close (fd);
  st2 = wk_wav_open (path, &r, err2, sizeof err2);
  CHECK_MSG (st2 == st, "reader %s, parser %s (%s)", wk_status_str (st2),
      wk_status_str (st), err2);
  if (st == WK_OK && st2 == WK_OK) {
    const size_t cap = wav->n_samples + 8;
    float *s = malloc (cap * sizeof (float));
    size_t total = 0, piece = 1, got;
    CHECK (wk_wav_reader_length (r) == (int64_t) wav->n_samples);
    CHECK (wk_wav_reader_rate (r) == wav->rate
        && wk_wav_reader_channels (r) == wav->channels);
    while (total < cap && wk_wav_reader_read (r, s + total,
            piece < cap - total ? piece : cap - total, &got, err2,
            sizeof err2) == WK_OK && got > 0) {
      total += got;
      piece = piece % 7 + 1;
    }
    CHECK_MSG (total == wav->n_samples && (total == 0
            || memcmp (s, wav->samples, total * sizeof (float)) == 0),
        "reader: %zu samples, parser %zu", total, wav->n_samples);
    free (s);
  } else if (st2 != WK_OK) {
    CHECK_MSG (strstr (err2, path) != NULL, "%s", err2);
  }
  wk_wav_close (r);
  unlink (path);
  return st;
}

static wk_status
parse (const buf * w, wk_wav * wav)
{
  char err[256];
  return parse_both (w->b, w->n, wav, err, sizeof err);
}

/* ---- tests ----------------------------------------------------------- */

/* The piecewise reader past its first read (64 KiB): headers larger than
 * that (a big LIST chunk before the data, a 'fmt ' chunk after a long
 * data chunk), a data size near 4 GiB with the RIFF size left at the
 * header's, and a pipe (the length known only at its end). */
static void
test_reader_large_and_piped (void)
{
  const size_t n = 60000;       /* samples: 120000 bytes of data */
  unsigned char *big = malloc (300000);
  int16_t *s = malloc (n * sizeof *s);
  char err[256], fifo[64] = "/tmp/wk-test-wav-fifo-XXXXXX";
  wk_wav wav;
  wk_wav_reader *r;
  size_t i, k, len = 0, got, total;
  float *x;
  pid_t pid;
  int sync[2], wst = 0;

  for (i = 0; i < n; i++)
    s[i] = (int16_t) ((i * 7919) % 65536 - 32768);
#define PUT(p, m) (memcpy (big + len, (p), (m)), len += (m))
#define PUT32(v) do { uint32_t v_ = (v); unsigned char b_[4] = { \
      (unsigned char) v_, (unsigned char) (v_ >> 8), \
      (unsigned char) (v_ >> 16), (unsigned char) (v_ >> 24) }; \
      PUT (b_, 4); } while (0)
  /* a 100000-byte LIST, then fmt, then data */
  for (k = 0; k < 3; k++) {
    len = 0;
    PUT ("RIFF", 4);
    PUT32 (0);
    PUT ("WAVE", 4);
    if (k == 0) {
      PUT ("LIST", 4);
      PUT32 (100000);
      memset (big + len, 'x', 100000);
      len += 100000;
    }
    if (k != 1) {
      PUT ("fmt ", 4);
      PUT32 (16);
      PUT ("\x01\x00\x01\x00\x80\x3e\x00\x00\x00\x7d\x00\x00\x02\x00"
          "\x10\x00", 16);
    }
    PUT ("data", 4);
    PUT32 (k == 2 ? 0xFFFFFFFFu : (uint32_t) (n * 2));
    PUT (s, n * 2);
    if (k == 1) {               /* fmt after the data */
      PUT ("fmt ", 4);
      PUT32 (16);
      PUT ("\x01\x00\x01\x00\x80\x3e\x00\x00\x00\x7d\x00\x00\x02\x00"
          "\x10\x00", 16);
    }
    /* the RIFF size: right, or left at the header's (36) */
    {
      uint32_t v = k == 2 ? 36u : (uint32_t) (len - 8);
      big[4] = (unsigned char) v;
      big[5] = (unsigned char) (v >> 8);
      big[6] = (unsigned char) (v >> 16);
      big[7] = (unsigned char) (v >> 24);
    }
    CHECK_MSG (parse_both (big, len, &wav, err, sizeof err) == WK_OK, "%s",
        err);
    CHECK_MSG (wav.n_samples == n && wav.samples[n - 1]
        == (float) s[n - 1] / 32768.0f, "case %zu: %zu samples", k,
        wav.n_samples);
    wk_wav_clear (&wav);
  }
#undef PUT
#undef PUT32

  /* the last file through a named pipe, written in two parts: the
   * headers and 100 samples, then (once the reader has those) the rest.
   * A read returns the samples that have come, not waiting for all it
   * asked (a live source's text must not wait for 60000 samples). */
  CHECK (mkdtemp (fifo) != NULL);
  strcat (fifo, "/p");
  CHECK (mkfifo (fifo, 0600) == 0 && pipe (sync) == 0);
  alarm (20);                   /* a reader that waits fails, not hangs */
  pid = fork ();
  if (pid == 0) {
    int fd = open (fifo, O_WRONLY);
    const size_t part = 44 + 200;
    char c;
    _exit (fd >= 0 && write (fd, big, part) == (ssize_t) part
        && read (sync[0], &c, 1) == 1
        && write (fd, big + part, len - part) == (ssize_t) (len - part)
        && close (fd) == 0 ? 0 : 1);
  }
  CHECK_MSG (wk_wav_open (fifo, &r, err, sizeof err) == WK_OK, "%s", err);
  CHECK (wk_wav_reader_length (r) == -1);
  x = malloc (n * sizeof *x + 1);
  CHECK (wk_wav_reader_read (r, x, n, &got, err, sizeof err) == WK_OK
      && got == 100 && x[99] == (float) s[99] / 32768.0f);
  CHECK (write (sync[1], "g", 1) == 1);
  total = got;
  while (total < n && wk_wav_reader_read (r, x + total, n - total, &got, err,
          sizeof err) == WK_OK && got > 0)
    total += got;
  CHECK (total == n && x[n - 1] == (float) s[n - 1] / 32768.0f);
  CHECK (wk_wav_reader_read (r, x, 1, &got, err, sizeof err) == WK_OK
      && got == 0);
  wk_wav_close (r);
  CHECK (waitpid (pid, &wst, 0) == pid && WIFEXITED (wst)
      && WEXITSTATUS (wst) == 0);
  alarm (0);
  close (sync[0]);
  close (sync[1]);

  /* not a WAV file from a descriptor: the bytes read come back, to be
   * decoded some other way; a WAV file closed before its samples are
   * read gives back its start */
  {
    int p[2];
    unsigned char *head = NULL, rest[128];
    size_t head_len = 0;
    CHECK (pipe (p) == 0);
    CHECK (write (p[1], "ID3 not a wav file", 18) == 18);
    close (p[1]);
    CHECK (wk_wav_open_fd (p[0], "standard input", &r, &head, &head_len, err,
            sizeof err) == WK_ERR_FORMAT && r == NULL);
    CHECK (head_len <= 18 && head && head_len + (size_t) read (p[0], rest,
            sizeof rest) == 18 && memcmp (head, "ID3 not a wav file",
            head_len) == 0);
    CHECK (strncmp (err, "standard input: ", 16) == 0);
    close (p[0]);
    free (head);
    CHECK (pipe (p) == 0);
    CHECK (write (p[1], big, 44 + 64) == 44 + 64);
    close (p[1]);
    CHECK (wk_wav_open_fd (p[0], "standard input", &r, &head, &head_len, err,
            sizeof err) == WK_OK);
    wk_wav_close_keep (r, &head, &head_len);
    CHECK (head_len >= 44 && head_len <= 44 + 64 && head && head_len
        + (size_t) read (p[0], rest, sizeof rest) == 44 + 64
        && memcmp (head, big, head_len) == 0);
    close (p[0]);
    free (head);
  }
  unlink (fifo);
  fifo[strlen (fifo) - 2] = '\0';
  rmdir (fifo);
  free (x);
  free (s);
  free (big);
}

static void
test_jfk_wav (void)
{
  const char *path = wk_test_shared_path ("jfk.wav");
  char err[256] = "";
  wk_wav wav;
  FILE *f;
  unsigned char raw[78 + 20];
  int i;

  CHECK (path != NULL);
  if (!path)
    return;
  CHECK_MSG (wk_wav_read (path, &wav, err, sizeof err) == WK_OK, "%s", err);
  CHECK (wav.rate == 16000 && wav.channels == 1 && wav.n_samples == 176000);
  f = fopen (path, "rb");
  CHECK (f && fread (raw, 1, sizeof raw, f) == sizeof raw);
  if (f)
    fclose (f);
  /* samples start at byte 78, after a LIST chunk */
  for (i = 0; i < 10 && wav.samples; i++)
    CHECK (wav.samples[i] == (float) (int16_t) (raw[78 + 2 * i] |
            raw[79 + 2 * i] << 8) / 32768.0f);
  wk_wav_clear (&wav);
  CHECK (wav.samples == NULL && wav.n_samples == 0);
}

static void
test_encodings_and_mixdown (void)
{
  buf *w = malloc (sizeof *w);
  wk_wav wav;
  unsigned char d[64];
  float fl[4] = { 0.5f, -0.25f, 1.0f, 0.0f };

  /* s16 stereo: (16384 + -16384) / 2, (32767 + 32767) / 2 */
  begin_riff (w);
  put_fmt (w, 1, 2, 16000, 16);
  {
    int16_t s[4] = { 16384, -16384, 32767, 32767 };
    put_chunk (w, "data", s, sizeof s);
  }
  end_riff (w);
  CHECK (parse (w, &wav) == WK_OK);
  CHECK (wav.n_samples == 2 && wav.channels == 2 && wav.rate == 16000);
  if (wav.samples) {
    CHECK (wav.samples[0] == 0.0f);
    CHECK (wav.samples[1] == 32767.0f / 32768.0f);
  }
  wk_wav_clear (&wav);

  /* s24 mono: 0x400000 = 0.5, 0x800000 = -1 */
  begin_riff (w);
  put_fmt (w, 1, 1, 16000, 24);
  d[0] = 0x00;
  d[1] = 0x00;
  d[2] = 0x40;
  d[3] = 0x00;
  d[4] = 0x00;
  d[5] = 0x80;
  d[6] = 0xff;
  d[7] = 0xff;
  d[8] = 0xff;
  put_chunk (w, "data", d, 9);  /* odd: padded */
  end_riff (w);
  CHECK (parse (w, &wav) == WK_OK && wav.n_samples == 3);
  if (wav.samples) {
    CHECK (wav.samples[0] == 0.5f);
    CHECK (wav.samples[1] == -1.0f);
    CHECK (wav.samples[2] == -1.0f / 8388608.0f);
  }
  wk_wav_clear (&wav);

  /* s32 mono */
  begin_riff (w);
  put_fmt (w, 1, 1, 16000, 32);
  {
    int32_t s[2] = { INT32_MIN, 1 << 30 };
    put_chunk (w, "data", s, sizeof s);
  }
  end_riff (w);
  CHECK (parse (w, &wav) == WK_OK && wav.n_samples == 2);
  if (wav.samples)
    CHECK (wav.samples[0] == -1.0f && wav.samples[1] == 0.5f);
  wk_wav_clear (&wav);

  /* u8 mono */
  begin_riff (w);
  put_fmt (w, 1, 1, 8000, 8);
  d[0] = 128;
  d[1] = 0;
  d[2] = 192;
  put_chunk (w, "data", d, 3);
  end_riff (w);
  CHECK (parse (w, &wav) == WK_OK && wav.n_samples == 3 && wav.rate == 8000);
  if (wav.samples)
    CHECK (wav.samples[0] == 0.0f && wav.samples[1] == -1.0f
        && wav.samples[2] == 0.5f);
  wk_wav_clear (&wav);

  /* float32 4 channels, one frame: mean 0.3125 */
  begin_riff (w);
  put_fmt (w, 3, 4, 16000, 32);
  put_chunk (w, "data", fl, sizeof fl);
  end_riff (w);
  CHECK (parse (w, &wav) == WK_OK && wav.n_samples == 1 && wav.channels == 4);
  if (wav.samples)
    CHECK (wav.samples[0] == 0.3125f);
  wk_wav_clear (&wav);

  /* float64 mono with a NaN: 0 */
  begin_riff (w);
  put_fmt (w, 3, 1, 16000, 64);
  {
    double v[2] = { -0.75, NAN };
    put_chunk (w, "data", v, sizeof v);
  }
  end_riff (w);
  CHECK (parse (w, &wav) == WK_OK && wav.n_samples == 2);
  if (wav.samples)
    CHECK (wav.samples[0] == -0.75f && wav.samples[1] == 0.0f);
  wk_wav_clear (&wav);

  /* WAVE_FORMAT_EXTENSIBLE: PCM s16 stereo and float mono */
  begin_riff (w);
  put_fmt_extensible (w, 1, 2, 16);
  {
    int16_t s[2] = { 8192, 8192 };
    put_chunk (w, "data", s, sizeof s);
  }
  end_riff (w);
  CHECK (parse (w, &wav) == WK_OK && wav.n_samples == 1);
  if (wav.samples)
    CHECK (wav.samples[0] == 0.25f);
  wk_wav_clear (&wav);
  begin_riff (w);
  put_fmt_extensible (w, 3, 1, 32);
  put_chunk (w, "data", fl, 8);
  end_riff (w);
  CHECK (parse (w, &wav) == WK_OK && wav.n_samples == 2);
  if (wav.samples)
    CHECK (wav.samples[1] == -0.25f);
  wk_wav_clear (&wav);
  free (w);
}

static void
test_chunk_order_and_padding (void)
{
  buf *w = malloc (sizeof *w);
  wk_wav wav;
  int16_t s[3] = { 100, 200, 300 };

  /* odd LIST chunk (padded), data before fmt, junk chunk between */
  begin_riff (w);
  put_chunk (w, "LIST", "INFOabc", 7);
  put_chunk (w, "data", s, sizeof s);
  put_chunk (w, "junk", "x", 1);
  put_fmt (w, 1, 1, 16000, 16);
  end_riff (w);
  CHECK (parse (w, &wav) == WK_OK && wav.n_samples == 3);
  if (wav.samples)
    CHECK (wav.samples[2] == 300.0f / 32768.0f);
  wk_wav_clear (&wav);
  free (w);
}

static void
test_truncated_and_broken_files (void)
{
  buf *w = malloc (sizeof *w), *c = malloc (sizeof *c);
  char err[256];
  wk_wav wav;
  int16_t s[100];
  size_t cut, i;
  uint32_t seed = 1;
  int n_ok = 0;

  for (i = 0; i < 100; i++)
    s[i] = (int16_t) (i * 300);
  begin_riff (w);
  put_fmt (w, 1, 1, 16000, 16);
  put_chunk (w, "LIST", "INFOxy", 6);
  put_chunk (w, "data", s, sizeof s);
  end_riff (w);

  /* data cut short: the whole frames that are there */
  CHECK (parse_both (w->b, w->n - 51, &wav, err, sizeof err) == WK_OK);
  CHECK (wav.n_samples == 74);
  wk_wav_clear (&wav);

  /* a data size left at 0 by a streaming writer, with the RIFF size
   * right or left at the header's: the audio to the end of the file;
   * a real empty data chunk, alone or before another chunk: no audio */
  begin_riff (c);
  put_fmt (c, 1, 1, 16000, 16);
  put_chunk (c, "data", s, 0);
  put (c, s, sizeof s);
  end_riff (c);
  CHECK (parse_both (c->b, c->n, &wav, err, sizeof err) == WK_OK);
  CHECK (wav.n_samples == 100 && wav.samples[99] == 29700.0f / 32768.0f);
  wk_wav_clear (&wav);
  c->b[4] = 36;
  c->b[5] = c->b[6] = c->b[7] = 0;
  CHECK (parse_both (c->b, c->n, &wav, err, sizeof err) == WK_OK);
  CHECK (wav.n_samples == 100);
  wk_wav_clear (&wav);
  /* the same with its samples at byte 60: four of them in the piecewise
   * reader's first 64 bytes (wav-pieces), too few to tell them from a
   * chunk */
  begin_riff (c);
  put_fmt (c, 1, 1, 16000, 16);
  put_chunk (c, "LIST", "INFOabcd", 8);
  put_chunk (c, "data", s, 0);
  put (c, s, sizeof s);
  end_riff (c);
  CHECK (parse_both (c->b, c->n, &wav, err, sizeof err) == WK_OK);
  CHECK (wav.n_samples == 100);
  wk_wav_clear (&wav);
  begin_riff (c);
  put_fmt (c, 1, 1, 16000, 16);
  put_chunk (c, "data", s, 0);
  end_riff (c);
  CHECK (parse_both (c->b, c->n, &wav, err, sizeof err) == WK_OK);
  CHECK (wav.n_samples == 0);
  wk_wav_clear (&wav);
  put_chunk (c, "LIST", "INFOxy", 6);
  end_riff (c);
  CHECK (parse_both (c->b, c->n, &wav, err, sizeof err) == WK_OK);
  CHECK (wav.n_samples == 0);
  wk_wav_clear (&wav);

  /* cut inside the headers: an error with a message */
  err[0] = '\0';
  CHECK (parse_both (w->b, 30, &wav, err, sizeof err) == WK_ERR_FORMAT);
  CHECK (err[0] != '\0' && wav.samples == NULL);
  CHECK (parse_both (w->b, 11, &wav, err, sizeof err) == WK_ERR_FORMAT);
  CHECK (parse_both (NULL, 0, &wav, err, sizeof err) == WK_ERR_FORMAT);

  /* every prefix parses without crashing (ASan watches) */
  for (cut = 0; cut <= w->n; cut++) {
    memcpy (c->b, w->b, cut);
    if (parse_both (c->b, cut, &wav, err, sizeof err) == WK_OK) {
      n_ok++;
      CHECK (wav.n_samples <= 100);
    }
    wk_wav_clear (&wav);
  }
  CHECK (n_ok > 0);

  /* random corruptions of the header bytes */
  for (i = 0; i < 20000; i++) {
    size_t k;
    memcpy (c->b, w->b, w->n);
    for (k = 0; k < 3; k++) {
      seed = seed * 1664525u + 1013904223u;
      c->b[(seed >> 8) % 80] = (unsigned char) (seed >> 24);
    }
    if (parse_both (c->b, w->n, &wav, err, sizeof err) == WK_OK)
      CHECK (wav.n_samples <= w->n && wav.samples != NULL);
    wk_wav_clear (&wav);
  }

  /* a chunk size near 4 GiB before the data: an error */
  begin_riff (c);
  put_fmt (c, 1, 1, 16000, 16);
  put (c, "LIST", 4);
  put32 (c, 0xFFFFFFF0u);
  put_chunk (c, "data", s, sizeof s);
  end_riff (c);
  CHECK (parse_both (c->b, c->n, &wav, err, sizeof err) == WK_ERR_FORMAT);

  /* no fmt, no data, bad block align, unsupported encodings */
  begin_riff (c);
  put_chunk (c, "data", s, sizeof s);
  end_riff (c);
  CHECK (parse_both (c->b, c->n, &wav, err, sizeof err) == WK_ERR_FORMAT);
  CHECK (strstr (err, "fmt") != NULL);
  begin_riff (c);
  put_fmt (c, 1, 1, 16000, 16);
  end_riff (c);
  CHECK (parse_both (c->b, c->n, &wav, err, sizeof err) == WK_ERR_FORMAT);
  CHECK (strstr (err, "data") != NULL);
  begin_riff (c);
  put_fmt (c, 1, 2, 16000, 16);
  c->b[12 + 8 + 12] = 3;        /* block align 3 for 2 x 16 bits */
  put_chunk (c, "data", s, sizeof s);
  end_riff (c);
  CHECK (parse_both (c->b, c->n, &wav, err, sizeof err) == WK_ERR_FORMAT);
  begin_riff (c);
  put_fmt (c, 2, 1, 16000, 4);  /* ADPCM */
  put_chunk (c, "data", s, sizeof s);
  end_riff (c);
  CHECK (parse_both (c->b, c->n, &wav, err, sizeof err)
      == WK_ERR_UNSUPPORTED);
  begin_riff (c);
  put_fmt (c, 1, 1, 16000, 12);
  put_chunk (c, "data", s, sizeof s);
  end_riff (c);
  CHECK (parse_both (c->b, c->n, &wav, err, sizeof err)
      == WK_ERR_UNSUPPORTED);
  memcpy (c->b, "RF64", 4);
  CHECK (parse_both (c->b, c->n, &wav, err, sizeof err)
      == WK_ERR_UNSUPPORTED);

  CHECK (wk_wav_read ("/nonexistent/x.wav", &wav, err, sizeof err)
      == WK_ERR_IO);
  CHECK (strstr (err, "/nonexistent/x.wav") != NULL);
  free (w);
  free (c);
}

/* Occurrences of needle in hay. */
static int
count_in (const char *hay, const char *needle)
{
  int n = 0;
  for (const char *p = hay; (p = strstr (p, needle)); p += strlen (needle))
    n++;
  return n;
}

/* The transcriber's stderr for "-m model path" (popen: no shell
 * characters in the arguments). */
static void
transcriber_stderr (const char *tr, const char *model, const char *path,
    char *out, size_t out_size)
{
  char cmd[8192];
  FILE *p;
  size_t n = 0;

  snprintf (cmd, sizeof cmd, "%s -m %s %s 2>&1 >/dev/null", tr, model, path);
  out[0] = '\0';
  p = popen (cmd, "r");
  if (!p)
    return;
  n = fread (out, 1, out_size - 1, p);
  out[n] = '\0';
  pclose (p);
}

/* Errors name the file once: the reader's message carries the path, so
 * the transcriber does not repeat it (it printed "x.wav: x.wav: ..."),
 * and likewise for a model whose loader already named it. */
static void
test_errors_name_the_file_once (void)
{
  const char *tmp = getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp";
  const char *tr = getenv ("WK_TRANSCRIBE");
  char path[4096], out[8192], err[512];
  wk_wav wav;
  FILE *f;

  snprintf (path, sizeof path, "%s/test-wav-%ld.wav", tmp, (long) getpid ());
  f = fopen (path, "wb");
  CHECK (f != NULL);
  if (!f)
    return;
  fputs ("RIFF\x04\0\0\0WAVX not a wave file", f);
  fclose (f);
  CHECK (wk_wav_read (path, &wav, err, sizeof err) != WK_OK);
  CHECK_MSG (count_in (err, path) == 1, "%s", err);
  if (tr) {
    /* a model that loads (the transcriber loads it before the audio) */
    char model[4096];
    const char *root = getenv ("WK_BUILD_ROOT");
    snprintf (model, sizeof model, "%s/knots/model/default.knot",
        root ? root : ".");
    transcriber_stderr (tr, model, path, out, sizeof out);
    CHECK_MSG (count_in (out, path) == 1, "%s", out);
    unlink (path);
    transcriber_stderr (tr, model, path, out, sizeof out);
    CHECK_MSG (count_in (out, path) == 1, "%s", out);

    /* a directory as the model, with a WAV that reads */
    {
      char *jfk = getenv ("WK_SHARED_DATA");
      char wavp[4096];
      snprintf (wavp, sizeof wavp, "%s/jfk.wav", jfk ? jfk : ".");
      /* a model that is not there, with a WAV that reads */
      transcriber_stderr (tr, "/nonexistent.knot", wavp, out, sizeof out);
      CHECK_MSG (count_in (out, "/nonexistent.knot") == 1, "%s", out);
      transcriber_stderr (tr, tmp, wavp, out, sizeof out);
      CHECK_MSG (count_in (out, "directory") == 1, "%s", out);
      snprintf (err, sizeof err, "%s: a directory", tmp);
      CHECK_MSG (count_in (out, err) == 1 && count_in (out, "'") == 0, "%s",
          out);
    }
  }
  unlink (path);
}

int
main (void)
{
  RUN (test_jfk_wav);
  RUN (test_encodings_and_mixdown);
  RUN (test_chunk_order_and_padding);
  RUN (test_truncated_and_broken_files);
  RUN (test_reader_large_and_piped);
  RUN (test_errors_name_the_file_once);
  return TEST_EXIT ();
}
