/* Mixed-radix decimation in time: a length n = p * m transform is p
 * transforms of length m over the inputs taken every p-th, then one pass
 * of radix-p butterflies with the twiddles exp (-2 pi i j / n). Radix 4 is
 * peeled first (fewest multiplies), then 2, 3, 5 and any larger prime with
 * the general butterfly. Twiddles of the full length serve every stage
 * (a stage of length n' uses every (N / n')-th). */
#include "fft.h"

#include <math.h>
#include <stdlib.h>

#define WK_FFT_MAX_FACTORS 32

struct wk_fft
{
  int n;
  int n_factors;
  int factors[WK_FFT_MAX_FACTORS];
  /* tw[2j], tw[2j + 1] = cos, -sin (2 pi j / n), j < n */
  float *tw;
};

wk_status
wk_fft_new (int n, wk_fft ** out)
{
  wk_fft *f;
  int rest, p, j;

  if (!out)
    return WK_ERR_ARG;
  *out = NULL;
  if (n < 2 || n > 65536)
    return WK_ERR_ARG;
  f = calloc (1, sizeof *f);
  if (!f)
    return WK_ERR_NOMEM;
  f->n = n;
  rest = n;
  while (rest > 1) {
    if (rest % 4 == 0)
      p = 4;
    else if (rest % 2 == 0)
      p = 2;
    else
      for (p = 3; rest % p != 0; p += 2);
    if (p > WK_FFT_MAX_RADIX || f->n_factors == WK_FFT_MAX_FACTORS) {
      free (f);
      return WK_ERR_ARG;
    }
    f->factors[f->n_factors++] = p;
    rest /= p;
  }
  f->tw = malloc ((size_t) n * 2 * sizeof (float));
  if (!f->tw) {
    free (f);
    return WK_ERR_NOMEM;
  }
  for (j = 0; j < n; j++) {
    double a = 2.0 * M_PI * j / n;
    f->tw[2 * j] = (float) cos (a);
    f->tw[2 * j + 1] = (float) -sin (a);
  }
  *out = f;
  return WK_OK;
}

void
wk_fft_free (wk_fft * fft)
{
  if (!fft)
    return;
  free (fft->tw);
  free (fft);
}

/* Four transforms at once, one per lane, each lane's arithmetic exactly
 * the one-transform sequence (a vector product or sum rounds each lane as
 * the scalar one would, and nothing is fused), so a lane's bits do not
 * depend on its neighbours. GCC and clang vector extensions; aligned (4):
 * the work memory is a caller's float array. */
typedef float v4 __attribute__((vector_size (16), aligned (4)));

/* out[0 .. n) (complex, re and im vectors) = DFT of x[0], x[stride], ...
 * for the stage lengths factors[fi ..]; tw_step = N / n. */
static void
fft_stage (const wk_fft * f, const v4 * x, int stride, v4 * out, int n,
    int fi, int tw_step)
{
  const int p = f->factors[fi], m = n / p;
  v4 tmp[2 * WK_FFT_MAX_RADIX];
  int q, k, u;

  if (m == 1) {
    for (q = 0; q < p; q++) {
      out[2 * q] = x[2 * q * stride];
      out[2 * q + 1] = x[2 * q * stride + 1];
    }
  } else {
    for (q = 0; q < p; q++)
      fft_stage (f, x + 2 * q * stride, stride * p, out + 2 * q * m, m,
          fi + 1, tw_step * p);
  }

  /* sub-transform q holds out[q * m + k]; output k + u * m is
   * sum_q W_n^(q (k + u m)) sub_q[k] */
  for (k = 0; k < m; k++) {
    /* twiddled inputs t_q = W_n^(q k) sub_q[k]; q k tw_step < p m tw_step
     * = N, so the index needs no reduction */
    const int dk = k * tw_step;
    for (q = 0; q < p; q++) {
      const v4 *s = out + 2 * (q * m + k);
      const float *w = f->tw + 2 * q * dk;
      tmp[2 * q] = s[0] * w[0] - s[1] * w[1];
      tmp[2 * q + 1] = s[0] * w[1] + s[1] * w[0];
    }
    if (p == 2) {
      v4 *a = out + 2 * k, *b = out + 2 * (k + m);
      a[0] = tmp[0] + tmp[2];
      a[1] = tmp[1] + tmp[3];
      b[0] = tmp[0] - tmp[2];
      b[1] = tmp[1] - tmp[3];
    } else if (p == 4) {
      /* W_4 = -i */
      v4 s02r = tmp[0] + tmp[4], s02i = tmp[1] + tmp[5];
      v4 d02r = tmp[0] - tmp[4], d02i = tmp[1] - tmp[5];
      v4 s13r = tmp[2] + tmp[6], s13i = tmp[3] + tmp[7];
      v4 d13r = tmp[2] - tmp[6], d13i = tmp[3] - tmp[7];
      out[2 * k] = s02r + s13r;
      out[2 * k + 1] = s02i + s13i;
      out[2 * (k + m)] = d02r + d13i;
      out[2 * (k + m) + 1] = d02i - d13r;
      out[2 * (k + 2 * m)] = s02r - s13r;
      out[2 * (k + 2 * m) + 1] = s02i - s13i;
      out[2 * (k + 3 * m)] = d02r - d13i;
      out[2 * (k + 3 * m) + 1] = d02i + d13r;
    } else {
      /* general: W_p^(q u) = W_N^(((q u) mod p) N / p), the exponent
       * (q u) mod p stepped by u with one wrap per q */
      const int step = f->n / p;
      for (u = 0; u < p; u++) {
        v4 re = { 0.0f, 0.0f, 0.0f, 0.0f }, im = re;
        int e = 0;
        for (q = 0; q < p; q++) {
          const float *w = f->tw + 2 * e * step;
          re += tmp[2 * q] * w[0] - tmp[2 * q + 1] * w[1];
          im += tmp[2 * q] * w[1] + tmp[2 * q + 1] * w[0];
          e += u;
          if (e >= p)
            e -= p;
        }
        out[2 * (k + u * m)] = re;
        out[2 * (k + u * m) + 1] = im;
      }
    }
  }
}

void
wk_fft_real4 (const wk_fft * fft, const float *const in[WK_FFT_LANES],
    float *const spec[WK_FFT_LANES], float *work)
{
  const v4 zero = { 0.0f, 0.0f, 0.0f, 0.0f };
  v4 *x = (v4 *) work, *y = x + 2 * fft->n;
  int t, l;

  for (t = 0; t < 2 * fft->n; t++)
    x[t] = zero;
  for (l = 0; l < WK_FFT_LANES; l++)
    if (in[l])
      for (t = 0; t < fft->n; t++)
        x[2 * t][l] = in[l][t];
  fft_stage (fft, x, 1, y, fft->n, 0, 1);
  for (l = 0; l < WK_FFT_LANES; l++)
    if (spec[l])
      for (t = 0; t <= fft->n / 2; t++) {
        spec[l][2 * t] = y[2 * t][l];
        spec[l][2 * t + 1] = y[2 * t + 1][l];
      }
}

void
wk_fft_real (const wk_fft * fft, const float *in, float *spec, float *work)
{
  const float *const ins[WK_FFT_LANES] = { in };
  float *const specs[WK_FFT_LANES] = { spec };

  wk_fft_real4 (fft, ins, specs, work);
}
