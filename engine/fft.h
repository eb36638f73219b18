/* A portable mixed-radix FFT for the mel front end, in every build (the
 * WebAssembly engine and native ones compute the same log-mel). The plan is read-only once made, so
 * any number of callers share it; each brings its own work memory. */
#ifndef WK_FFT_H
#define WK_FFT_H

#include "whisperknot.h"

typedef struct wk_fft wk_fft;

/* A plan for length n (2 <= n <= 65536) whose prime factors are all at
 * most WK_FFT_MAX_RADIX (Whisper's 400 = 4 * 4 * 5 * 5). */
#define WK_FFT_MAX_RADIX 64
wk_status wk_fft_new (int n, wk_fft ** out);
void wk_fft_free (wk_fft * fft);

/* Floats of work memory wk_fft_real and wk_fft_real4 need for a plan of
 * length n. */
#define WK_FFT_WORK_FLOATS(n) (16 * (n))

/* The DFT of n real samples, bins 0 .. n/2: spec[2k] + i spec[2k + 1] =
 * sum_t in[t] exp (-2 pi i k t / n) (kiss_fftr's layout and sign). work
 * holds WK_FFT_WORK_FLOATS (n) floats. */
void wk_fft_real (const wk_fft * fft, const float *in, float *spec,
    float *work);

/* Up to four of them in one pass (vectors of four lanes), each with the
 * bits wk_fft_real gives it alone; in[l] NULL: no transform l (spec[l] is
 * not written and may be NULL). */
#define WK_FFT_LANES 4
void wk_fft_real4 (const wk_fft * fft, const float *const in[WK_FFT_LANES],
    float *const spec[WK_FFT_LANES], float *work);

#endif
