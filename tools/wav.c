/* A RIFF/WAVE reader for the tools and tests.
 *
 * Chunks are walked in any order, each size checked against what is left
 * (odd sizes are followed by a pad byte). Supported: PCM unsigned 8-bit and
 * signed 16/24/32-bit, IEEE float 32/64-bit, plain or as
 * WAVE_FORMAT_EXTENSIBLE; any number of channels, averaged to mono.
 *
 * Truncation: a file cut inside its headers (RIFF header, fmt chunk, or any
 * chunk before the data chunk is found) is an error. A data chunk whose
 * size runs past the end of the file (a recording cut short, or a writer
 * that streamed and never went back to fill in the size) gives the whole
 * frames that are there, without a warning. So does a data chunk of size 0
 * followed by bytes that are not chunks (a writer that streamed and left
 * the size at 0; the RIFF size, often left at the header's, is not
 * believed then): the audio runs to the end of the file, as ffmpeg reads
 * it, rather than giving no audio. Non-finite float samples become 0.
 */
#include "wav.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
 * trailing bytes. */
static int
chunks_fit (const unsigned char *d, size_t pos, size_t end)
{
  while (end - pos >= 8) {
    size_t csize = rd32 (d + pos + 4);
    int i;
    for (i = 0; i < 4; i++)
      if (d[pos + i] < 0x20 || d[pos + i] > 0x7e)
        return 0;
    if (csize > end - pos - 8)
      return 0;
    pos += 8 + csize;
    if ((csize & 1) && pos < end)
      pos++;
  }
  return 1;
}

wk_status
wk_wav_parse (const void *data, size_t size, wk_wav * wav, char *err,
    size_t err_size)
{
  static const unsigned char guid_tail[14] = { 0x00, 0x00, 0x00, 0x00, 0x10,
    0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71
  };
  const unsigned char *d = data;
  const unsigned char *fmt = NULL, *pcm = NULL;
  size_t end, pos, fmt_size = 0, pcm_size = 0, n_frames, i;
  unsigned format, channels, block_align, bits;
  uint32_t riff_size, rate;
  int is_float, bytes;

  if (!wav)
    return fail (err, err_size, WK_ERR_ARG, "no output");
  memset (wav, 0, sizeof *wav);
  if (!data && size)
    return fail (err, err_size, WK_ERR_ARG, "no data");

  if (size < 12 || memcmp (d, "RIFF", 4) != 0 || memcmp (d + 8, "WAVE", 4) != 0) {
    if (size >= 4 && (memcmp (d, "RF64", 4) == 0 || memcmp (d, "RIFX", 4) == 0))
      return fail (err, err_size, WK_ERR_UNSUPPORTED,
          "%.4s files are not supported (only little-endian RIFF WAVE)",
          (const char *) d);
    return fail (err, err_size, WK_ERR_FORMAT, "not a RIFF/WAVE file");
  }
  /* Chunks end where the RIFF size says, unless it points past the file
   * (then at the end of the file). */
  riff_size = rd32 (d + 4);
  end = size;
  if (riff_size >= 4 && (uint64_t) riff_size + 8 < size)
    end = (size_t) riff_size + 8;

  for (pos = 12; pos < end;) {
    const unsigned char *id;
    size_t body, csize;

    if (end - pos < 8) {
      if (pcm && fmt)
        break;                  /* trailing bytes after the data: ignore */
      return fail (err, err_size, WK_ERR_FORMAT,
          "truncated chunk header at byte %zu", pos);
    }
    id = d + pos;
    csize = rd32 (d + pos + 4);
    body = pos + 8;
    if (csize > end - body) {
      if (memcmp (id, "data", 4) == 0 && !pcm) {
        /* data cut short (or size never filled in): keep what is there */
        pcm = d + body;
        pcm_size = end - body;
        break;
      }
      if (pcm && fmt)
        break;                  /* a broken chunk after everything we need */
      return fail (err, err_size, WK_ERR_FORMAT,
          "chunk '%.4s' at byte %zu claims %zu bytes, %zu are left",
          (const char *) id, pos, csize, end - body);
    }
    if (memcmp (id, "fmt ", 4) == 0 && !fmt) {
      fmt = d + body;
      fmt_size = csize;
    } else if (memcmp (id, "data", 4) == 0 && !pcm) {
      pcm = d + body;
      pcm_size = csize;
      if (csize == 0 && !chunks_fit (d, body, size)) {
        /* size left at 0 by a streaming writer: audio to the end */
        pcm_size = size - body;
        break;
      }
    }
    /* next chunk, after the pad byte of an odd-sized one */
    pos = body + csize;
    if ((csize & 1) && pos < end)
      pos++;
  }

  if (!fmt)
    return fail (err, err_size, WK_ERR_FORMAT, "no 'fmt ' chunk");
  if (!pcm)
    return fail (err, err_size, WK_ERR_FORMAT, "no 'data' chunk");
  if (fmt_size < 16)
    return fail (err, err_size, WK_ERR_FORMAT,
        "'fmt ' chunk of %zu bytes (at least 16 expected)", fmt_size);

  format = rd16 (fmt);
  channels = rd16 (fmt + 2);
  rate = rd32 (fmt + 4);
  block_align = rd16 (fmt + 12);
  bits = rd16 (fmt + 14);
  if (format == WAVE_FORMAT_EXTENSIBLE) {
    if (fmt_size < 40 || rd16 (fmt + 16) < 22)
      return fail (err, err_size, WK_ERR_FORMAT,
          "WAVE_FORMAT_EXTENSIBLE 'fmt ' chunk too short");
    if (memcmp (fmt + 26, guid_tail, sizeof guid_tail) != 0)
      return fail (err, err_size, WK_ERR_UNSUPPORTED,
          "WAVE_FORMAT_EXTENSIBLE with an unknown sub-format");
    format = rd16 (fmt + 24);
  }

  if (format == WAVE_FORMAT_PCM && (bits == 8 || bits == 16 || bits == 24
          || bits == 32))
    is_float = 0;
  else if (format == WAVE_FORMAT_IEEE_FLOAT && (bits == 32 || bits == 64))
    is_float = 1;
  else
    return fail (err, err_size, WK_ERR_UNSUPPORTED,
        "WAV encoding %#x with %u bits per sample is not supported (PCM 8, "
        "16, 24, 32 bits or IEEE float 32, 64 bits are)", format, bits);
  bytes = (int) bits / 8;
  if (channels == 0 || channels > 256)
    return fail (err, err_size, WK_ERR_FORMAT, "%u channels", channels);
  if (rate == 0 || rate > 1000000)
    return fail (err, err_size, WK_ERR_FORMAT, "sample rate %u", rate);
  if (block_align != channels * (unsigned) bytes)
    return fail (err, err_size, WK_ERR_FORMAT,
        "block align %u for %u channels of %u bits", block_align, channels,
        bits);

  n_frames = pcm_size / block_align;
  wav->samples = malloc ((n_frames ? n_frames : 1) * sizeof (float));
  if (!wav->samples)
    return fail (err, err_size, WK_ERR_NOMEM,
        "out of memory for %zu samples", n_frames);
  for (i = 0; i < n_frames; i++) {
    const unsigned char *frame = pcm + i * block_align;
    double acc = 0.0;
    unsigned c;
    for (c = 0; c < channels; c++)
      acc += sample_at (frame + c * (unsigned) bytes, is_float, bytes);
    wav->samples[i] = (float) (acc / channels);
  }
  wav->n_samples = n_frames;
  wav->rate = (int) rate;
  wav->channels = (int) channels;
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
  if (status != WK_OK && err && err_size) {
    char msg[256];
    snprintf (msg, sizeof msg, "%s", err);
    snprintf (err, err_size, "%s: %s", path, msg);
  }
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
