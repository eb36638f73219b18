/* Whisper's log-mel front end: Hann window of 400, hop 160, power spectrum
 * of a 400-point real FFT (201 bins), the model's mel filterbank, log10. */
#ifndef WK_MEL_H
#define WK_MEL_H

#include <stddef.h>
#include <stdint.h>

#include "whisperknot.h"

#define WK_N_FFT 400
#define WK_HOP 160
#define WK_N_BINS 201           /* WK_N_FFT / 2 + 1 */

typedef struct wk_mel wk_mel;

/* Builds the window, FFT plan and a copy of the filterbank (filters is
 * [n_mels][WK_N_BINS]) once per model. */
wk_status wk_mel_new (int n_mels, const float *filters, wk_mel ** out);
void wk_mel_free (wk_mel * mel);

/* Computes log10(max(mel power, 1e-10)) for frames first .. first+n-1 of
 * the signal audio[0 .. n_audio-1], frame f centred on sample f * WK_HOP
 * as torch.stft(center=True) does: reflected at the start of the signal,
 * zero past its end (Whisper pads its audio with zeros). out is
 * [n_mels][ld] with frames along each row, ld >= n. Thread-safe for
 * distinct out buffers; scratch is on the stack (about 70 KB). Cost is
 * per frame: calls of any size are fine. */
void wk_mel_log_frames (const wk_mel * mel, const float *audio,
    size_t n_audio, int64_t first, int n, float *out, int ld);

/* Whisper's normalisation of a window: clamp each value to at least
 * (max over the window - 8), then (x + 4) / 4. Returns the largest
 * normalised value, (max + 4) / 4 (-INFINITY when there is nothing to
 * normalise). */
float wk_mel_normalize (float *mel, int n_mels, int n, int ld);

#endif
