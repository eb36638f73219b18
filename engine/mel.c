/* Whisper's log-mel front end.
 *
 * Per frame: 400 samples centred on f * 160 (reflected at the start of the
 * signal, zero past its end, as torch.stft(center=True, pad_mode='reflect')
 * sees Whisper's zero-padded audio), times a periodic Hann window, a real
 * FFT (engine/fft.c, four frames at a time; the same in every build, the
 * WebAssembly one too), the power of the 201 bins. Frames are handled in
 * blocks: the power spectra of a block are stored bin-major so that the mel
 * filterbank becomes, for each non-zero filter weight, one multiply-add
 * along the block's frames straight into the output row (ORC loops). Each
 * mel row only touches its non-zero range of bins (about 10 of 201).
 */
#include "mel.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fft.h"

#include "mel-orc.h"

/* Frames per block: the bin-major power scratch is WK_N_BINS * this many
 * floats on the stack (51 KB; about 70 KB of stack in all). Larger blocks
 * mean fewer, longer ORC calls in the filterbank. */
#define MEL_BLOCK 64

struct wk_mel
{
  int n_mels;
  float window[WK_N_FFT];       /* periodic Hann */
  /* Non-zero range of each filter row: bins [lo[m], hi[m]); the weights of
   * row m are weights[off[m] .. off[m] + hi[m] - lo[m] - 1]. */
  int *lo, *hi;
  size_t *off;
  float *weights;
  wk_fft *fft;                  /* read-only: shared by every caller */
};

/* orcc's generated functions test their `static volatile int p_inited`
 * unlocked while a first caller sets it under orc_once_mutex: a data race
 * when two streaming threads make the first call. One tiny call of each
 * loop inside a pthread_once, at model load, sets the flags before any
 * stream runs (engine/kernels.c does the same for the dequant kernels).
 * With -Dorc=disabled these are one-element C loops. */
static pthread_once_t wk_mel_orc_once = PTHREAD_ONCE_INIT;

static void
wk_mel_orc_warm (void)
{
  float d[1] = { 0.0f }, a[1] = { 0.0f }, b[1] = { 0.0f };
  uint64_t bin[1] = { 0 };

  wk_orc_mel_window (d, a, b, 1);
  wk_orc_mel_power (d, (const void *) bin, 1);
  wk_orc_mel_scale (d, a, 1.0f, 1);
  wk_orc_mel_madd (d, a, 1.0f, 1);
  wk_orc_mel_norm (d, 0.0f, 4.0f, 0.25f, 1);
}

wk_status
wk_mel_new (int n_mels, const float *filters, wk_mel ** out)
{
  wk_mel *mel;
  size_t n_weights = 0;
  int m, k, i;

  pthread_once (&wk_mel_orc_once, wk_mel_orc_warm);
  if (!out)
    return WK_ERR_ARG;
  *out = NULL;
  if (n_mels <= 0 || n_mels > 1024 || !filters)
    return WK_ERR_ARG;

  mel = calloc (1, sizeof *mel);
  if (!mel)
    return WK_ERR_NOMEM;
  mel->n_mels = n_mels;
  mel->lo = calloc ((size_t) n_mels, sizeof *mel->lo);
  mel->hi = calloc ((size_t) n_mels, sizeof *mel->hi);
  mel->off = calloc ((size_t) n_mels, sizeof *mel->off);
  if (!mel->lo || !mel->hi || !mel->off)
    goto nomem;

  /* torch.hann_window(400) is periodic: 0.5 - 0.5 cos (2 pi n / 400). */
  for (i = 0; i < WK_N_FFT; i++)
    mel->window[i] = (float) (0.5 - 0.5 * cos (2.0 * M_PI * i / WK_N_FFT));

  for (m = 0; m < n_mels; m++) {
    const float *row = filters + (size_t) m * WK_N_BINS;
    int lo = WK_N_BINS, hi = 0;
    for (k = 0; k < WK_N_BINS; k++) {
      if (row[k] != 0.0f) {
        if (k < lo)
          lo = k;
        hi = k + 1;
      }
    }
    if (hi == 0)
      lo = 0;                   /* an all-zero row: log10 (1e-10) */
    mel->lo[m] = lo;
    mel->hi[m] = hi;
    mel->off[m] = n_weights;
    n_weights += (size_t) (hi - lo);
  }
  mel->weights = malloc ((n_weights ? n_weights : 1) * sizeof (float));
  if (!mel->weights)
    goto nomem;
  for (m = 0; m < n_mels; m++)
    memcpy (mel->weights + mel->off[m],
        filters + (size_t) m * WK_N_BINS + mel->lo[m],
        (size_t) (mel->hi[m] - mel->lo[m]) * sizeof (float));

  if (wk_fft_new (WK_N_FFT, &mel->fft) != WK_OK) {
    wk_mel_free (mel);
    return WK_ERR_NOMEM;
  }

  *out = mel;
  return WK_OK;

nomem:
  wk_mel_free (mel);
  return WK_ERR_NOMEM;
}

void
wk_mel_free (wk_mel * mel)
{
  if (!mel)
    return;
  wk_fft_free (mel->fft);
  free (mel->lo);
  free (mel->hi);
  free (mel->off);
  free (mel->weights);
  free (mel);
}

/* The 400 samples of frame f: in place when the frame lies inside the
 * signal, else copied into buf (reflected at the start, zeros past the
 * end). */
static const float *
mel_frame_samples (const float *audio, size_t n_audio, int64_t f, float *buf)
{
  int64_t start;
  int k;

  /* Frames far past the end (or before the start) are all zeros; this
   * test also keeps f * WK_HOP from overflowing. */
  if (f < -2 || f > (int64_t) (n_audio / WK_HOP) + 4) {
    memset (buf, 0, WK_N_FFT * sizeof (float));
    return buf;
  }
  start = f * WK_HOP - WK_N_FFT / 2;
  if (start >= 0 && (uint64_t) start + WK_N_FFT <= n_audio)
    return audio + start;
  for (k = 0; k < WK_N_FFT; k++) {
    int64_t idx = start + k;
    if (idx < 0)
      idx = -idx;               /* reflect without repeating sample 0 */
    buf[k] = (uint64_t) idx < n_audio ? audio[idx] : 0.0f;
  }
  return buf;
}

/* Frame f's samples times the window into windowed (frame: scratch for a
 * frame at an edge). */
static void
mel_window_frame (const wk_mel * mel, const float *audio, size_t n_audio,
    int64_t f, float *frame, float *windowed)
{
  wk_orc_mel_window (windowed, mel_frame_samples (audio, n_audio, f, frame),
      mel->window, WK_N_FFT);
}

void
wk_mel_log_frames (const wk_mel * mel, const float *audio, size_t n_audio,
    int64_t first, int n, float *out, int ld)
{
  /* (re, im) of each bin, the windowed frames: WK_FFT_LANES at a time */
  float spec[WK_FFT_LANES][2 * WK_N_BINS];
  float windowed[WK_FFT_LANES][WK_N_FFT];
  _Alignas (16) float fft_work[WK_FFT_WORK_FLOATS (WK_N_FFT)];
  float power_t[WK_N_BINS][MEL_BLOCK];  /* bin-major powers of a block */
  float frame[WK_N_FFT], power[WK_N_BINS];
  int b0, m;

  if (!mel || !out || n <= 0 || ld < n)
    return;
  if (!audio)
    n_audio = 0;

  for (b0 = 0; b0 < n; b0 += MEL_BLOCK) {
    int nb = n - b0 < MEL_BLOCK ? n - b0 : MEL_BLOCK;
    int b, k;

    for (b = 0; b < nb; b += WK_FFT_LANES) {
      const float *ins[WK_FFT_LANES] = { NULL };
      float *specs[WK_FFT_LANES] = { NULL };
      int l, nl = nb - b < WK_FFT_LANES ? nb - b : WK_FFT_LANES;

      for (l = 0; l < nl; l++) {
        mel_window_frame (mel, audio, n_audio, first + b0 + b + l, frame,
            windowed[l]);
        ins[l] = windowed[l];
        specs[l] = spec[l];
      }
      /* the same bits as one frame at a time */
      wk_fft_real4 (mel->fft, ins, specs, fft_work);
      for (l = 0; l < nl; l++) {
        wk_orc_mel_power (power, (const void *) spec[l], WK_N_BINS);
        for (k = 0; k < WK_N_BINS; k++)
          power_t[k][b + l] = power[k];
      }
    }

    for (m = 0; m < mel->n_mels; m++) {
      float *dst = out + (size_t) m * ld + b0;
      const float *w = mel->weights + mel->off[m];
      int lo = mel->lo[m], hi = mel->hi[m];

      if (hi <= lo) {
        memset (dst, 0, (size_t) nb * sizeof (float));
      } else {
        wk_orc_mel_scale (dst, power_t[lo], w[0], nb);
        for (k = lo + 1; k < hi; k++)
          if (w[k - lo] != 0.0f)
            wk_orc_mel_madd (dst, power_t[k], w[k - lo], nb);
      }
      /* log10 as ln * (1 / ln 10): glibc's logf is several times faster
       * than its log10f; the results differ by an ulp or two. */
      for (b = 0; b < nb; b++)
        dst[b] = logf (dst[b] > 1e-10f ? dst[b] : 1e-10f) * 0.4342944819f;
    }
  }

}

float
wk_mel_normalize (float *mel, int n_mels, int n, int ld)
{
  float max = -INFINITY;
  int m, i;

  if (!mel || n_mels <= 0 || n <= 0 || ld < n)
    return -INFINITY;
  for (m = 0; m < n_mels; m++)
    for (i = 0; i < n; i++)
      if (mel[(size_t) m * ld + i] > max)
        max = mel[(size_t) m * ld + i];
  /* Callable without a wk_mel; cheap once done. */
  pthread_once (&wk_mel_orc_once, wk_mel_orc_warm);
  for (m = 0; m < n_mels; m++)
    wk_orc_mel_norm (mel + (size_t) m * ld, max - 8.0f, 4.0f, 0.25f, n);
  return (max + 4.0f) * 0.25f;  /* what the loop made of max itself */
}
