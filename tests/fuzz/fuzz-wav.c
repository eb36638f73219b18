/* libFuzzer target for the WAV reader: any input is parsed without a
 * crash, leak or undefined behaviour, a success is consistent, and the
 * piecewise reader (wk_wav_open, built here with a first read of a few
 * bytes) gives the parser's status and samples for the same bytes. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wav.h"

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  wk_wav wav;
  wk_wav_reader *r = NULL;
  char err[256], path[] = "/tmp/wk-fuzz-wav-XXXXXX";
  wk_status st = wk_wav_parse (data, size, &wav, err, sizeof err), st2;
  int fd;

  if (st == WK_OK) {
    volatile float sink = 0.0f;
    size_t i;
    if (!wav.samples || wav.n_samples > size || wav.channels <= 0
        || wav.rate <= 0)
      abort ();
    for (i = 0; i < wav.n_samples; i++)
      sink += wav.samples[i];
    (void) sink;
  }
  fd = mkstemp (path);
  if (fd < 0)
    abort ();
  if (size && write (fd, data, size) != (ssize_t) size)
    abort ();
  close (fd);
  st2 = wk_wav_open (path, &r, err, sizeof err);
  unlink (path);
  if (st2 != st)
    abort ();
  if (st == WK_OK) {
    float buf[5];
    size_t n = 0, got;
    if (wk_wav_reader_length (r) != (int64_t) wav.n_samples)
      abort ();
    while (wk_wav_reader_read (r, buf, 5, &got, err, sizeof err) == WK_OK
        && got > 0) {
      if (n + got > wav.n_samples || memcmp (buf, wav.samples + n,
              got * sizeof (float)) != 0)
        abort ();
      n += got;
    }
    if (n != wav.n_samples)
      abort ();
  }
  wk_wav_close (r);
  wk_wav_clear (&wav);
  return 0;
}
