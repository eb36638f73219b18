/* A WAV reader for the command-line tools and tests: RIFF/WAVE PCM s16,
 * s24, s32 or IEEE float, any channel count (mixed down to mono), any
 * chunk order. Sizes are checked before use; the rate must be 16000 (the
 * tools say so otherwise). */
#ifndef WK_WAV_H
#define WK_WAV_H

#include <stddef.h>

#include "whisperknot.h"

typedef struct
{
  float *samples;               /* mono, [-1, 1], malloc'd */
  size_t n_samples;
  int rate;
  int channels;                 /* in the file */
} wk_wav;

/* Reads path (a pipe works too). Error messages start with "<path>: ",
 * so callers print them as they are. */
wk_status wk_wav_read (const char *path, wk_wav * wav, char *err,
    size_t err_size);
wk_status wk_wav_parse (const void *data, size_t size, wk_wav * wav,
    char *err, size_t err_size);
void wk_wav_clear (wk_wav * wav);

#endif
