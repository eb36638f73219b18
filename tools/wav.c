/* A RIFF/WAVE reader for the tools and tests.
 *
 * Chunks are walked in any order, each size checked against what is left
 * (odd sizes are followed by a pad byte). Supported: PCM unsigned 8-bit and
 * signed 16/24/32-bit, IEEE float 32/64-bit, plain or as
 * WAVE_FORMAT_EXTENSIBLE; any number of channels, averaged to mono.
 *
 * Truncation: a file cut inside its headers (RIFF header, fmt chunk, or any
 * chunk before the data chunk is found) is an error. A data chunk whose
 * size runs past the end of the file or of the RIFF size (a recording cut
 * short, or a writer that streamed and never went back to fill in the
 * sizes) gives the whole frames that are there, to the end of the file,
 * without a warning. So does a data chunk of size 0 followed by bytes
 * that are not chunks (a writer that streamed and left the size at 0):
 * the audio runs to the end of the file, as ffmpeg reads it, rather than
 * giving no audio. Non-finite float samples become 0.
 *
 * wk_wav_parse and wk_wav_read take the whole file; wk_wav_open reads the
 * headers (as many bytes as they need) and then the samples a piece at a
 * time, with the same result: one parser (parse_layout) serves both, told
 * how much of the file it has been given.
 */
#include "wav.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WAVE_FORMAT_PCM 0x0001
#define WAVE_FORMAT_IEEE_FLOAT 0x0003
#define WAVE_FORMAT_EXTENSIBLE 0xFFFE

static uint16_t
rd16 (const unsigned char *p)
{
  return (uint16_t) (p[0] | p[1] << 8);
}

static uint32_t
rd32 (const unsigned char *p)
{
  return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 |
      (uint32_t) p[3] << 24;
}

static wk_status fail (char *err, size_t err_size, wk_status status,
    const char *fmt, ...) __attribute__((format (printf, 4, 5)));

static wk_status
fail (char *err, size_t err_size, wk_status status, const char *fmt, ...)
{
  if (err && err_size) {
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (err, err_size, fmt, ap);
    va_end (ap);
  }
  return status;
}

/* err (a parser's message) now starts with "<name>: ". */
static void
prefix_name (const char *name, char *err, size_t err_size)
{
  if (err && err_size) {
    char msg[256];
    snprintf (msg, sizeof msg, "%s", err);
    snprintf (err, err_size, "%s: %s", name, msg);
  }
}

/* One sample of the given encoding at p, in [-1, 1]. */
static double
sample_at (const unsigned char *p, int is_float, int bytes)
{
  switch (bytes) {
    case 1:
      return ((double) p[0] - 128.0) / 128.0;
    case 2:
      return (double) (int16_t) rd16 (p) / 32768.0;
    case 3:{
      int32_t v = (int32_t) ((uint32_t) p[0] << 8 | (uint32_t) p[1] << 16 |
          (uint32_t) p[2] << 24);
      return (double) (v >> 8) / 8388608.0;
    }
    case 4:
      if (is_float) {
        union
        {
          uint32_t u;
          float f;
        } v;
        v.u = rd32 (p);
        return isfinite (v.f) ? v.f : 0.0;
      }
      return (double) (int32_t) rd32 (p) / 2147483648.0;
    default:{                  /* 8: float64 */
      union
      {
        uint64_t u;
        double d;
      } v;
      v.u = (uint64_t) rd32 (p) | (uint64_t) rd32 (p + 4) << 32;
      return isfinite (v.d) ? v.d : 0.0;
    }
  }
}

/* Whether d[pos .. end) is a run of whole chunks (ids of printable ASCII,
 * each size within what is left, odd ones padded), up to fewer than 8
 * trailing bytes: 1 or 0, or -1 when that depends on bytes past avail
 * (<= end), the ones read so far. */
static int
chunks_fit (const unsigned char *d, uint64_t pos, uint64_t avail, uint64_t end)
{
  for (;;) {
    uint64_t csize;
    int i;
    if (end - pos < 8)
      return 1;
    if (avail - pos < 8)
      return -1;
    for (i = 0; i < 4; i++)
      if (d[pos + i] < 0x20 || d[pos + i] > 0x7e)
        return 0;
    csize = rd32 (d + pos + 4);
    if (csize > end - pos - 8)
      return 0;
    pos += 8 + csize;
    if ((csize & 1) && pos < end)
      pos++;
    if (pos > avail)
      return -1;
  }
}

/* What the headers say: the encoding, and where the samples lie. */
typedef struct
{
  int is_float, bytes;
  unsigned channels, block_align;
  uint32_t rate;
  uint64_t pcm;                 /* offset of the first sample */
  uint64_t pcm_end;             /* offset after the last (the file's end
                                 * when it is not known: UINT64_MAX) */
} layout;

/* Parses the headers from d[0 .. avail), the start of a file of size bytes
 * (UINT64_MAX: not known, a pipe). Returns 1 when the headers need bytes
 * past avail (nothing else set), else the status, lay filled on WK_OK. */
static int
parse_layout (const unsigned char *d, uint64_t avail, uint64_t size,
    layout * lay, wk_status * status, char *err, size_t err_size)
{
  static const unsigned char guid_tail[14] = { 0x00, 0x00, 0x00, 0x00, 0x10,
    0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71
  };
  const unsigned char *fmt = NULL;
  uint64_t end, pos, fmt_size = 0, pcm = 0, pcm_end = 0;
  unsigned format, channels, block_align, bits;
  uint32_t riff_size, rate;
  int is_float, bytes, have_pcm = 0;

#define FAIL(...) \
  do { \
    *status = fail (err, err_size, __VA_ARGS__); \
    return 0; \
  } while (0)

  if (avail < 12 && avail < size)
    return 1;
  if (avail < 12 || memcmp (d, "RIFF", 4) != 0 || memcmp (d + 8, "WAVE",
          4) != 0) {
    if (avail >= 4 && (memcmp (d, "RF64", 4) == 0
            || memcmp (d, "RIFX", 4) == 0))
      FAIL (WK_ERR_UNSUPPORTED,
          "%.4s files are not supported (only little-endian RIFF WAVE)",
          (const char *) d);
    FAIL (WK_ERR_FORMAT, "not a RIFF/WAVE file");
  }
  /* Chunks end where the RIFF size says, unless it points past the file
   * (then at the end of the file). */
  riff_size = rd32 (d + 4);
  end = size;
  if (riff_size >= 4 && (uint64_t) riff_size + 8 < size)
    end = (uint64_t) riff_size + 8;

  for (pos = 12; pos < end && !(fmt && have_pcm);) {
    const unsigned char *id;
    uint64_t body, csize;

    if (end - pos < 8) {
      if (have_pcm && fmt)
        break;                  /* trailing bytes after the data: ignore */
      FAIL (WK_ERR_FORMAT, "truncated chunk header at byte %" PRIu64, pos);
    }
    if (pos > avail || avail - pos < 8)
      return 1;
    id = d + pos;
    csize = rd32 (d + pos + 4);
    body = pos + 8;
    if (csize > end - body) {
      if (memcmp (id, "data", 4) == 0 && !have_pcm) {
        /* data cut short (or size never filled in, the RIFF size
         * perhaps neither): what is there, to the end of the file */
        have_pcm = 1;
        pcm = body;
        pcm_end = size - body < csize ? size : body + csize;
        if (!fmt)
          break;
        continue;
      }
      if (have_pcm && fmt)
        break;                  /* a broken chunk after everything we need */
      FAIL (WK_ERR_FORMAT,
          "chunk '%.4s' at byte %" PRIu64 " claims %" PRIu64 " bytes, %"
          PRIu64 " are left", (const char *) id, pos, csize, end - body);
    }
    if (memcmp (id, "fmt ", 4) == 0 && !fmt) {
      if (avail - body < csize)
        return 1;
      fmt = d + body;
      fmt_size = csize;
    } else if (memcmp (id, "data", 4) == 0 && !have_pcm) {
      have_pcm = 1;
      pcm = body;
      pcm_end = body + csize;
      if (csize == 0) {
        int fit = chunks_fit (d, body, avail < size ? avail : size, size);
        if (fit < 0)
          return 1;
        if (!fit) {
          /* size left at 0 by a streaming writer: audio to the end */
          pcm_end = size;
          if (!fmt)
            break;
        }
      }
    }
    /* next chunk, after the pad byte of an odd-sized one */
    pos = body + csize;
    if ((csize & 1) && pos < end)
      pos++;
  }

  if (!fmt)
    FAIL (WK_ERR_FORMAT, "no 'fmt ' chunk");
  if (!have_pcm)
    FAIL (WK_ERR_FORMAT, "no 'data' chunk");
  if (fmt_size < 16)
    FAIL (WK_ERR_FORMAT, "'fmt ' chunk of %" PRIu64
        " bytes (at least 16 expected)", fmt_size);

  format = rd16 (fmt);
  channels = rd16 (fmt + 2);
  rate = rd32 (fmt + 4);
  block_align = rd16 (fmt + 12);
  bits = rd16 (fmt + 14);
  if (format == WAVE_FORMAT_EXTENSIBLE) {
    if (fmt_size < 40 || rd16 (fmt + 16) < 22)
      FAIL (WK_ERR_FORMAT, "WAVE_FORMAT_EXTENSIBLE 'fmt ' chunk too short");
    if (memcmp (fmt + 26, guid_tail, sizeof guid_tail) != 0)
      FAIL (WK_ERR_UNSUPPORTED,
          "WAVE_FORMAT_EXTENSIBLE with an unknown sub-format");
    format = rd16 (fmt + 24);
  }

  if (format == WAVE_FORMAT_PCM && (bits == 8 || bits == 16 || bits == 24
          || bits == 32))
    is_float = 0;
  else if (format == WAVE_FORMAT_IEEE_FLOAT && (bits == 32 || bits == 64))
    is_float = 1;
  else
    FAIL (WK_ERR_UNSUPPORTED,
        "WAV encoding %#x with %u bits per sample is not supported (PCM 8, "
        "16, 24, 32 bits or IEEE float 32, 64 bits are)", format, bits);
  bytes = (int) bits / 8;
  if (channels == 0 || channels > 256)
    FAIL (WK_ERR_FORMAT, "%u channels", channels);
  if (rate == 0 || rate > 1000000)
    FAIL (WK_ERR_FORMAT, "sample rate %u", rate);
  if (block_align != channels * (unsigned) bytes)
    FAIL (WK_ERR_FORMAT, "block align %u for %u channels of %u bits",
        block_align, channels, bits);
#undef FAIL

  lay->is_float = is_float;
  lay->bytes = bytes;
  lay->channels = channels;
  lay->block_align = block_align;
  lay->rate = rate;
  lay->pcm = pcm;
  lay->pcm_end = pcm_end;
  *status = WK_OK;
  return 0;
}

/* n frames at p, mixed to mono, into out. */
static void
convert_frames (const layout * lay, const unsigned char *p, size_t n,
    float *out)
{
  size_t i;

  for (i = 0; i < n; i++) {
    const unsigned char *frame = p + i * lay->block_align;
    double acc = 0.0;
    unsigned c;
    for (c = 0; c < lay->channels; c++)
      acc += sample_at (frame + c * (unsigned) lay->bytes, lay->is_float,
          lay->bytes);
    out[i] = (float) (acc / lay->channels);
  }
}

wk_status
wk_wav_parse (const void *data, size_t size, wk_wav * wav, char *err,
    size_t err_size)
{
  layout lay = { 0 };
  wk_status st = WK_ERR_FORMAT;
  size_t n_frames;

  if (!wav)
    return fail (err, err_size, WK_ERR_ARG, "no output");
  memset (wav, 0, sizeof *wav);
  if (!data && size)
    return fail (err, err_size, WK_ERR_ARG, "no data");
  /* the whole file is there: never asks for more */
  if (parse_layout (data, size, size, &lay, &st, err, err_size))
    return fail (err, err_size, WK_ERR_FORMAT, "truncated headers");
  if (st != WK_OK)
    return st;

  n_frames = (size_t) ((lay.pcm_end - lay.pcm) / lay.block_align);
  wav->samples = malloc ((n_frames ? n_frames : 1) * sizeof (float));
  if (!wav->samples)
    return fail (err, err_size, WK_ERR_NOMEM,
        "out of memory for %zu samples", n_frames);
  convert_frames (&lay, (const unsigned char *) data + lay.pcm, n_frames,
      wav->samples);
  wav->n_samples = n_frames;
  wav->rate = (int) lay.rate;
  wav->channels = (int) lay.channels;
  return WK_OK;
}

wk_status
wk_wav_read (const char *path, wk_wav * wav, char *err, size_t err_size)
{
  FILE *f;
  unsigned char *buf = NULL;
  size_t size = 0, cap = 0, got;
  wk_status status;

  if (!wav)
    return fail (err, err_size, WK_ERR_ARG, "no output");
  memset (wav, 0, sizeof *wav);
  if (!path)
    return fail (err, err_size, WK_ERR_ARG, "no path");
  f = fopen (path, "rb");
  if (!f)
    return fail (err, err_size, WK_ERR_IO, "%s: cannot open: %s", path,
        strerror (errno));
  /* read in growing steps: works for pipes too */
  for (;;) {
    if (size == cap) {
      unsigned char *nb;
      size_t ncap = cap ? cap * 2 : 1 << 20;
      if (ncap < cap) {
        free (buf);
        fclose (f);
        return fail (err, err_size, WK_ERR_NOMEM, "%s: too large", path);
      }
      nb = realloc (buf, ncap);
      if (!nb) {
        free (buf);
        fclose (f);
        return fail (err, err_size, WK_ERR_NOMEM, "%s: out of memory", path);
      }
      buf = nb;
      cap = ncap;
    }
    got = fread (buf + size, 1, cap - size, f);
    size += got;
    if (got == 0)
      break;
  }
  if (ferror (f)) {
    free (buf);
    fclose (f);
    return fail (err, err_size, WK_ERR_IO, "%s: cannot read: %s", path,
        strerror (errno));
  }
  fclose (f);

  status = wk_wav_parse (buf, size, wav, err, err_size);
  if (status != WK_OK)
    prefix_name (path, err, err_size);
  free (buf);
  return status;
}

void
wk_wav_clear (wk_wav * wav)
{
  if (!wav)
    return;
  free (wav->samples);
  memset (wav, 0, sizeof *wav);
}

struct wk_wav_reader
{
  int fd, own_fd;
  int regular;                  /* a file: every read is whole */
  char *path;                   /* or the name given */
  layout lay;
  uint64_t size;                /* the file's bytes, UINT64_MAX unknown */
  unsigned char *buf;
  size_t cap, lo, hi;           /* buf[lo .. hi): the file at pos_lo .. */
  uint64_t pos_lo;
};

/* headers larger than this are not read piecewise */
#define WAV_MAX_HEADERS (16u << 20)
/* wk_wav_open's first read buffer, doubled until the headers parse (a
 * test build makes it a few bytes, so that its files all take that
 * path) */
#ifndef WK_WAV_FIRST_READ
#define WK_WAV_FIRST_READ (1u << 16)
#endif

/* read(2) of up to n bytes, again after a signal: what came (0 at the
 * end), -1 on an error */
static ssize_t
read_some (int fd, void *p, size_t n)
{
  ssize_t rd;

  do
    rd = read (fd, p, n);
  while (rd < 0 && errno == EINTR);
  return rd;
}

/* The reader over fd: its headers read until they parse or fail. On a
 * failure the bytes read go to *head when head is given. */
static wk_status
reader_open (int fd, int own_fd, const char *name, wk_wav_reader ** out,
    unsigned char **head, size_t *head_len, char *err, size_t err_size)
{
  wk_wav_reader *r = calloc (1, sizeof *r);
  struct stat sb;
  size_t len = 0;
  wk_status st = WK_ERR_FORMAT;

  if (!r || !(r->path = strdup (name))) {
    free (r);
    if (own_fd)
      close (fd);
    return fail (err, err_size, WK_ERR_NOMEM, "%s: out of memory", name);
  }
  r->fd = fd;
  r->own_fd = own_fd;
  r->regular = fstat (fd, &sb) == 0 && S_ISREG (sb.st_mode);
  r->size = r->regular ? (uint64_t) sb.st_size : UINT64_MAX;
  r->cap = WK_WAV_FIRST_READ;
  r->buf = malloc (r->cap);
  if (!r->buf)
    st = fail (err, err_size, WK_ERR_NOMEM, "%s: out of memory", name);
  /* the headers: parse what has come, read more while they need it */
  while (r->buf) {
    ssize_t rd;
    if (!parse_layout (r->buf, len, r->size, &r->lay, &st, err, err_size)) {
      if (st != WK_OK)
        prefix_name (name, err, err_size);
      break;
    }
    if (len == r->cap) {
      unsigned char *nb;
      if (r->cap >= WAV_MAX_HEADERS) {
        st = fail (err, err_size, WK_ERR_UNSUPPORTED, "%s: the WAV headers "
            "before the samples take more than %u MiB", name,
            WAV_MAX_HEADERS >> 20);
        break;
      }
      nb = realloc (r->buf, r->cap * 2);
      if (!nb) {
        st = fail (err, err_size, WK_ERR_NOMEM, "%s: out of memory", name);
        break;
      }
      r->buf = nb;
      r->cap *= 2;
    }
    rd = read_some (fd, r->buf + len, r->cap - len);
    if (rd < 0) {
      st = fail (err, err_size, WK_ERR_IO, "%s: cannot read: %s", name,
          strerror (errno));
      break;
    }
    if (rd == 0)
      r->size = len;            /* the end, which a pipe says only now */
    len += (size_t) rd;
  }
  if (st == WK_OK && r->cap < 4 * (size_t) r->lay.block_align) {
    /* room for whole frames as wk_wav_reader_read refills it */
    unsigned char *nb = realloc (r->buf, 4 * (size_t) r->lay.block_align);
    if (nb) {
      r->buf = nb;
      r->cap = 4 * (size_t) r->lay.block_align;
    } else {
      st = fail (err, err_size, WK_ERR_NOMEM, "%s: out of memory", name);
    }
  }
  if (st != WK_OK) {
    if (head) {
      *head = r->buf;
      *head_len = len;
      r->buf = NULL;
    }
    wk_wav_close (r);
    return st;
  }
  r->lo = (size_t) r->lay.pcm;
  r->hi = len;
  r->pos_lo = r->lay.pcm;
  *out = r;
  return WK_OK;
}

wk_status
wk_wav_open (const char *path, wk_wav_reader ** out, char *err, size_t err_size)
{
  int fd;

  if (!out)
    return fail (err, err_size, WK_ERR_ARG, "no output");
  *out = NULL;
  if (!path)
    return fail (err, err_size, WK_ERR_ARG, "no path");
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return fail (err, err_size, WK_ERR_IO, "%s: cannot open: %s", path,
        strerror (errno));
  return reader_open (fd, 1, path, out, NULL, NULL, err, err_size);
}

wk_status
wk_wav_open_fd (int fd, const char *name, wk_wav_reader ** out,
    unsigned char **head, size_t *head_len, char *err, size_t err_size)
{
  if (head) {
    *head = NULL;
    *head_len = 0;
  }
  if (!out)
    return fail (err, err_size, WK_ERR_ARG, "no output");
  *out = NULL;
  if (fd < 0 || !name)
    return fail (err, err_size, WK_ERR_ARG, "no file");
  return reader_open (fd, 0, name, out, head, head_len, err, err_size);
}

int
wk_wav_reader_rate (const wk_wav_reader * r)
{
  return r ? (int) r->lay.rate : 0;
}

int
wk_wav_reader_channels (const wk_wav_reader * r)
{
  return r ? (int) r->lay.channels : 0;
}

int64_t
wk_wav_reader_length (const wk_wav_reader * r)
{
  uint64_t end;

  if (!r || r->size == UINT64_MAX)
    return -1;
  end = r->lay.pcm_end < r->size ? r->lay.pcm_end : r->size;
  return end > r->lay.pcm ? (int64_t) ((end - r->lay.pcm)
      / r->lay.block_align) : 0;
}

wk_status
wk_wav_reader_read (wk_wav_reader * r, float *out, size_t n, size_t *got,
    char *err, size_t err_size)
{
  const size_t fb = r ? r->lay.block_align : 1;
  size_t done = 0;

  if (got)
    *got = 0;
  if (!r || !got || (!out && n))
    return fail (err, err_size, WK_ERR_ARG, "no reader or output");
  while (done < n) {
    /* whole frames in the buffer, up to the end of the data */
    uint64_t left = r->lay.pcm_end - r->pos_lo;
    size_t have = r->hi - r->lo, take;
    if ((uint64_t) have > left)
      have = (size_t) left;
    have /= fb;
    if (have == 0) {
      ssize_t rd;
      if (left < fb)
        break;                  /* the data's end */
      if (done > 0 && !r->regular) {
        /* a pipe: what has come, without waiting for more */
        struct pollfd pfd = { r->fd, POLLIN, 0 };
        if (poll (&pfd, 1, 0) <= 0)
          break;
      }
      memmove (r->buf, r->buf + r->lo, r->hi - r->lo);
      r->hi -= r->lo;
      r->lo = 0;
      rd = read_some (r->fd, r->buf + r->hi, r->cap - r->hi);
      if (rd < 0)
        return fail (err, err_size, WK_ERR_IO, "%s: cannot read: %s",
            r->path, strerror (errno));
      if (rd == 0)
        break;                  /* the file's end (cut short) */
      r->hi += (size_t) rd;
      continue;
    }
    take = n - done < have ? n - done : have;
    convert_frames (&r->lay, r->buf + r->lo, take, out + done);
    r->lo += take * fb;
    r->pos_lo += take * fb;
    done += take;
  }
  *got = done;
  return WK_OK;
}

void
wk_wav_close_keep (wk_wav_reader * r, unsigned char **bytes, size_t *n)
{
  *bytes = NULL;
  *n = 0;
  if (r && r->pos_lo == r->lay.pcm && r->lo == r->lay.pcm) {
    /* nothing read since the headers: the buffer starts the file */
    *bytes = r->buf;
    *n = r->hi;
    r->buf = NULL;
  }
  wk_wav_close (r);
}

void
wk_wav_close (wk_wav_reader * r)
{
  if (!r)
    return;
  if (r->own_fd)
    close (r->fd);
  free (r->buf);
  free (r->path);
  free (r);
}
