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

/* The Silero VAD knot (knots/FORMAT.md, "Silero VAD knots"): the one
 * architecture the engine runs (Silero VAD v5 and v6, 16 kHz branch), its
 * metadata, and its tensors, all f32, in the layout the network computes
 * in (ggml ne order: ne[0] contiguous), so the engine uses them in place.
 * whisperknot-convert writes them from Silero's ggml file. */
#define WK_VAD_ARCH "silero-vad"
#define WK_VAD_KEY_VERSION "silero-vad.version" /* u32[3] */
#define WK_VAD_KEY_SAMPLE_RATE "silero-vad.sample_rate" /* 16000 */
#define WK_VAD_KEY_WINDOW "silero-vad.window"   /* WK_VAD_CHUNK */
#define WK_VAD_KEY_CONTEXT "silero-vad.context" /* WK_VAD_CONTEXT */

#define WK_VAD_CONTEXT 64       /* context samples (Silero framing) */
#define WK_VAD_NFFT 256         /* STFT taps */
#define WK_VAD_NSTFT 258        /* STFT filters: 129 re, then 129 im */
#define WK_VAD_NSTFT_PAD 264    /* rows padded to a multiple of 8 */
#define WK_VAD_HID 128          /* LSTM size */
#define WK_VAD_NGATES (4 * WK_VAD_HID)  /* gates i, f, g, o */
#define WK_VAD_N_ENC 4          /* encoder conv1d layers, kernel 3 */
#define WK_VAD_KSIZE 3

/* Tensor names; shapes are ne = {ne[0], ne[1]}:
 *   stft.basis         {NSTFT_PAD, NFFT}: row k holds tap k of every
 *                      filter; the 6 padding columns are zeros
 *   encoder.L.weight   {c_out, KSIZE c_in}: row ci KSIZE + k holds tap k
 *                      of input channel ci for every output channel
 *   encoder.L.bias     {c_out}
 *   lstm.weight_ih     {NGATES, HID}: row i holds input i's weight in
 *                      every gate; lstm.weight_hh the same for h
 *   lstm.bias          {NGATES}: bias_ih + bias_hh
 *   decoder.weight     {HID}; decoder.bias {1} */
#define WK_VAD_T_STFT "stft.basis"
#define WK_VAD_T_ENC_W "encoder.%d.weight"
#define WK_VAD_T_ENC_B "encoder.%d.bias"
#define WK_VAD_T_W_IH "lstm.weight_ih"
#define WK_VAD_T_W_HH "lstm.weight_hh"
#define WK_VAD_T_B "lstm.bias"
#define WK_VAD_T_OUT_W "decoder.weight"
#define WK_VAD_T_OUT_B "decoder.bias"

/* Input and output channels of encoder layer l. */
#define WK_VAD_ENC_IN(l) ((l) == 0 ? WK_VAD_NSTFT / 2 : (l) == 1 ? 128 : 64)
#define WK_VAD_ENC_OUT(l) ((l) == 1 || (l) == 2 ? 64 : 128)

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

/* Parses a VAD knot from memory (the bytes are copied: data may be
 * released afterwards). Not shared with other loads. Used by the fuzz
 * target and the tests. */
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
