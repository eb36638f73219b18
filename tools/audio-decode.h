/* Any audio file GStreamer can decode (FLAC, MP3, Opus, WAV at any rate,
 * the audio of a video), as mono 16 kHz samples for the command-line
 * transcriber: filesrc (or appsrc) ! decodebin ! audioconvert !
 * audioresample ! F32 16 kHz mono ! appsink, the samples read as they are
 * decoded (wk_audio_decoder) or gathered in memory (wk_audio_decode). */
#ifndef WK_AUDIO_DECODE_H
#define WK_AUDIO_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "wav.h"

/* Decodes path into wav (rate 16000, channels as the decoder reported
 * them, samples malloc'd: wk_wav_clear () releases them). Error messages
 * start with "<path>: " and say what GStreamer could not do (a missing
 * decoder names the plugin set to install, as GStreamer reports it). */
wk_status wk_audio_decode (const char *path, wk_wav * wav, char *err,
    size_t err_size);

/* The same for a file already in memory (standard input, say): data[0..
 * size-1] goes to decodebin through an appsrc; name starts the error
 * messages. data must stay valid during the call. */
wk_status wk_audio_decode_bytes (const void *data, size_t size,
    const char *name, wk_wav * wav, char *err, size_t err_size);

/* A file decoded as it is read, a few buffers ahead, so that memory does
 * not grow with its length. Open returns once the first samples are
 * decoded, or with the error that stopped them (as wk_audio_decode's). */
typedef struct wk_audio_decoder wk_audio_decoder;
wk_status wk_audio_decoder_open (const char *path, wk_audio_decoder ** out,
    char *err, size_t err_size);
/* Up to n samples into out; *got < n only at the end of the audio. An
 * error while decoding further: its status, err saying why. */
wk_status wk_audio_decoder_read (wk_audio_decoder * d, float *out, size_t n,
    size_t *got, char *err, size_t err_size);
/* The samples the file holds as its container says (a progress bar's
 * length, not a bound), or -1 when it does not say. */
int64_t wk_audio_decoder_length (const wk_audio_decoder * d);
/* The channels of the decoded audio (mixed to mono by the decoder). */
int wk_audio_decoder_channels (const wk_audio_decoder * d);
void wk_audio_decoder_close (wk_audio_decoder * d);

/* Releases what GStreamer holds (its registry, plugins) once decoding is
 * over for good; nothing when wk_audio_decode never ran. */
void wk_audio_decode_end (void);

#endif
