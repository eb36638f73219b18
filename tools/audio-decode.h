/* Any audio file GStreamer can decode (FLAC, MP3, Opus, WAV at any rate,
 * the audio of a video), as mono 16 kHz samples for the command-line
 * transcriber: filesrc (or appsrc) ! decodebin ! audioconvert !
 * audioresample ! F32 16 kHz mono ! fakesink, the samples gathered in
 * memory. */
#ifndef WK_AUDIO_DECODE_H
#define WK_AUDIO_DECODE_H

#include <stddef.h>

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

/* Releases what GStreamer holds (its registry, plugins) once decoding is
 * over for good; nothing when wk_audio_decode never ran. */
void wk_audio_decode_end (void);

#endif
