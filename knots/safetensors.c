/* Hugging Face Whisper checkpoints: safetensors, JSON side files, name
 * mapping, and Whisper's mel filterbank. */
#include "safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- mel filterbank ---------------------------------------------------- */

/* Slaney's mel scale: linear below 1 kHz, logarithmic above. */
#define MEL_F_SP (200.0 / 3.0)
#define MEL_MIN_LOG_HZ 1000.0
#define MEL_MIN_LOG_MEL (MEL_MIN_LOG_HZ / MEL_F_SP)

static double
mel_logstep (void)
{
  return log (6.4) / 27.0;
}

static double
hz_to_mel (double f)
{
  if (f >= MEL_MIN_LOG_HZ)
    return MEL_MIN_LOG_MEL + log (f / MEL_MIN_LOG_HZ) / mel_logstep ();
  return f / MEL_F_SP;
}

static double
mel_to_hz (double m)
{
  if (m >= MEL_MIN_LOG_MEL)
    return MEL_MIN_LOG_HZ * exp (mel_logstep () * (m - MEL_MIN_LOG_MEL));
  return MEL_F_SP * m;
}

void
wk_mel_filters_slaney (int n_mels, int n_fft, int sample_rate, float *out)
{
  int n_bins = n_fft / 2 + 1;
  double *mel_f = malloc ((size_t) (n_mels + 2) * sizeof (double));
  double *fft_f = malloc ((size_t) n_bins * sizeof (double));
  double max_mel, step, bin_hz;

  if (!mel_f || !fft_f) {
    free (mel_f);
    free (fft_f);
    memset (out, 0, (size_t) n_mels * (size_t) n_bins * sizeof (float));
    return;
  }
  /* numpy.fft.rfftfreq(n_fft, 1/sr), evaluated the same way */
  bin_hz = 1.0 / ((double) n_fft * (1.0 / (double) sample_rate));
  for (int k = 0; k < n_bins; k++)
    fft_f[k] = (double) k *bin_hz;
  /* n_mels + 2 points evenly spaced in mel from 0 to sr/2 (linspace) */
  max_mel = hz_to_mel ((double) sample_rate / 2.0);
  step = max_mel / (double) (n_mels + 1);
  for (int i = 0; i < n_mels + 2; i++)
    mel_f[i] = mel_to_hz (i == n_mels + 1 ? max_mel : (double) i * step);

  for (int i = 0; i < n_mels; i++) {
    double lo = mel_f[i + 1] - mel_f[i], hi = mel_f[i + 2] - mel_f[i + 1];
    /* Slaney normalisation: each triangle has unit area */
    double enorm = 2.0 / (mel_f[i + 2] - mel_f[i]);
    for (int k = 0; k < n_bins; k++) {
      double lower = -(mel_f[i] - fft_f[k]) / lo;
      double upper = (mel_f[i + 2] - fft_f[k]) / hi;
      double w = lower < upper ? lower : upper;
      /* librosa stores the triangle in float32, then scales it */
      float w32 = (float) (w > 0.0 ? w : 0.0);
      out[(size_t) i * n_bins + k] = (float) ((double) w32 * enorm);
    }
  }
  free (mel_f);
  free (fft_f);
}
