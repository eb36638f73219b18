/* A WAV reader for the command-line tools and tests: RIFF/WAVE PCM s16,
 * s24, s32 or IEEE float, any channel count (mixed down to mono), any
 * chunk order. Sizes are checked before use; the rate must be 16000 (the
 * tools say so otherwise). */
#ifndef WK_WAV_H
#define WK_WAV_H

#include <stddef.h>
#include <stdint.h>

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

/* A WAV file read a piece at a time, so that memory does not grow with
 * its length: the samples wk_wav_read gives, in order. */
typedef struct wk_wav_reader wk_wav_reader;
/* Opens path (a pipe works too) and reads its headers. Error messages
 * start with "<path>: ". */
wk_status wk_wav_open (const char *path, wk_wav_reader ** out, char *err,
    size_t err_size);
int wk_wav_reader_rate (const wk_wav_reader * r);
int wk_wav_reader_channels (const wk_wav_reader * r);
/* The samples the file holds, or -1 where that is known only at its end
 * (a pipe). */
int64_t wk_wav_reader_length (const wk_wav_reader * r);
/* As wk_wav_open for a file already open (standard input, say), read
 * from fd and not closed; name starts the error messages. On a failure,
 * where head is given, *head (malloc'd) and *head_len are the bytes read
 * from fd, for a caller that decodes them some other way. */
wk_status wk_wav_open_fd (int fd, const char *name, wk_wav_reader ** out,
    unsigned char **head, size_t *head_len, char *err, size_t err_size);
/* Up to n mono samples into out: fewer only at the end of the audio (then
 * 0 from there on) or, from a pipe, when no more have come yet (at least
 * one is waited for). WK_ERR_IO when the file cannot be read. */
wk_status wk_wav_reader_read (wk_wav_reader * r, float *out, size_t n,
    size_t *got, char *err, size_t err_size);
void wk_wav_close (wk_wav_reader * r);
/* wk_wav_close, handing back the bytes read from the start of the file
 * (*bytes malloc'd, *n) where no sample has been read yet, else none. */
void wk_wav_close_keep (wk_wav_reader * r, unsigned char **bytes, size_t *n);

#endif
