/* Voice activity detection inside the engine (internal header).
 *
 * The public API (wk_vad_model_*, wk_vad_*) is declared and documented in
 * whisperknot.h; this header adds what only the engine, its tests and the
 * fuzz targets need.
 *
 * For the live streaming policy (stream.c), the intended use is:
 *
 *   - one wk_vad per wk_stream, created with the stream (it allocates
 *     everything up front, about 12 KB, and never allocates afterwards);
 *   - every buffer given to wk_stream_feed() is also given to wk_vad_feed()
 *     (loop until all of it is taken, popping events in between);
 *   - WK_VAD_EVENT_SPEECH_START at sample S: the utterance starts at S (a
 *     position already fed; the stream keeps audio from there on);
 *   - WK_VAD_EVENT_SPEECH_END at sample E: the utterance is over at E;
 *     transcribe [S, E) now instead of waiting for the window to fill;
 *   - while wk_vad_in_speech() is false and no START is pending, the
 *     audio is silence or noise: do not run the encoder or the decoder on
 *     it (that is where hallucinated text on silence comes from). A 32 ms
 *     chunk costs the VAD network under 0.1 ms of one core (about 0.25%
 *     of a core in real time; digital silence about a third of that), see
 *     test-vad's "cost" lines;
 *   - the defaults report START about 0.25 s after speech begins (the
 *     burst must outlast min_speech_duration_ms) and END about 0.22 s
 *     after it ends (merge_gap_ms); lower them for a snappier policy, at
 *     the price of more, shorter segments;
 *   - the same samples fed from the same reset give the same positions to
 *     the stream and the VAD, so event samples are stream samples.
 *
 * The chunk grid is absolute (chunk i covers samples [512 i, 512 (i + 1)))
 * so the way audio is split into buffers never changes the results. */
#ifndef WK_VAD_H
#define WK_VAD_H

#include <stddef.h>

#include "whisperknot.h"

/* How the 512 samples of a chunk are framed for the STFT.
 * SILERO: the 64 last samples of the previous chunk come first (zeros at
 *   the start) and 64 samples are reflected on the right, as the Silero
 *   VAD models run in silero-vad's own code (ONNX/JIT/tinygrad). The
 *   default.
 * WHISPERCPP: no context; 64 samples reflected on each side, as
 *   whisper.cpp's whisper_vad_detect_speech() does. For comparing with
 *   whisper.cpp's probabilities. */
typedef enum
{
  WK_VAD_FRAMING_SILERO = 0,
  WK_VAD_FRAMING_WHISPERCPP
} wk_vad_framing;

/* Selects the framing; resets the detector. */
void wk_vad_set_framing (wk_vad * vad, wk_vad_framing framing);

/* Parses a model from memory (the bytes are copied: data may be released
 * afterwards). Not shared with other loads. Used by the fuzz target. */
wk_status wk_vad_model_load_memory (const void *data, size_t size,
    wk_vad_model ** out, char *err, size_t err_size);

/* The model's type string ("silero-16k") and version from the file. */
const char *wk_vad_model_type (const wk_vad_model * model);
void wk_vad_model_version (const wk_vad_model * model, int version[3]);

/* Runs the network on one chunk of WK_VAD_CHUNK samples, advancing the
 * network state (LSTM, context) but not the segmenter. Returns the
 * speech probability. */
float wk_vad_run_chunk (wk_vad * vad, const float *chunk);

/* Advances the detector by one chunk whose speech probability is p,
 * without running the network (the samples count as fed): for testing the
 * segmenter, and policies built on it, with scripted probabilities. Events
 * are queued as wk_vad_feed() would queue them; pop them after each call. */
void wk_vad_step_prob (wk_vad * vad, float p);

#endif /* WK_VAD_H */
