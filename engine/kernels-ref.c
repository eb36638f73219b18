/* Portable reference kernels: they define the results the SIMD variants
 * are held to. Sums are taken in double, each weight is its exact f32
 * value (dequantized d * q for q8_0/q4_0), and only the final value is
 * rounded to f32. */
#include "kernels-impl.h"

#include <math.h>
#include <stddef.h>

/* Weights dequantized per chunk on the stack (a multiple of WK_QK). */
#define REF_CHUNK 1024

static float
ref_gelu1 (float v)
{
  double x = v;
  return (float) (0.5 * x * (1.0 + erf (x * 0.70710678118654752440)));
}

static void
ref_store (float *y, double acc, const float *bias, int64_t j, unsigned flags)
{
  float v;

  if (bias)
    acc += bias[j];
  v = (float) acc;
  if (flags & WK_LINEAR_GELU)
    v = ref_gelu1 (v);
  if (flags & WK_LINEAR_ADD)
    *y += v;
  else
    *y = v;
}

/* Integer block dot product of weight row w (q8_0 / q4_0) with quantized
 * activations. */
static double
ref_dot_q8 (wk_type type, const unsigned char *w, const int8_t * xq,
    const float *xd, int64_t k)
{
  double acc = 0.0;
  int64_t b;
  int l;

  for (b = 0; b < k / WK_QK; b++) {
    const int8_t *x = xq + b * WK_QK;
    int32_t isum = 0;
    float dw;
    if (type == WK_TYPE_Q8_0) {
      const wk_block_q8_0 *blk = (const wk_block_q8_0 *) w + b;
      for (l = 0; l < WK_QK; l++)
        isum += (int32_t) blk->qs[l] * x[l];
      dw = wk_fp16_to_fp32 (blk->d);
    } else {
      const wk_block_q4_0 *blk = (const wk_block_q4_0 *) w + b;
      for (l = 0; l < WK_QK / 2; l++) {
        isum += ((int32_t) (blk->qs[l] & 15) - 8) * x[l];
        isum += ((int32_t) (blk->qs[l] >> 4) - 8) * x[l + WK_QK / 2];
      }
      dw = wk_fp16_to_fp32 (blk->d);
    }
    acc += ((double) dw) * xd[b] * isum;
  }
  return acc;
}

static void
ref_linear_q8 (const wk_tensor * W, const float *bias, const float *X,
    int64_t n, int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1,
    unsigned flags)
{
  /* 72 KiB on the stack */
  int8_t xq[4][WK_LINEAR_QMAX_K];
  float xd[4][WK_LINEAR_QMAX_K / WK_QK];
  const int64_t k = W->ne[0];
  const size_t row_bytes = wk_type_row_bytes (W->type, k);
  const unsigned char *data = W->data;
  int64_t i0, j;
  int r;

  for (i0 = 0; i0 < n; i0 += 4) {
    int nx = (int) (n - i0 < 4 ? n - i0 : 4);
    for (r = 0; r < nx; r++)
      wk_quantize_act (X + (i0 + r) * ldx, k, xq[r], xd[r]);
    for (j = j0; j < j1; j++)
      for (r = 0; r < nx; r++)
        ref_store (Y + (i0 + r) * ldy + j, ref_dot_q8 (W->type,
                data + (size_t) j * row_bytes, xq[r], xd[r], k), bias, j,
            flags);
  }
}

static void
ref_linear (const wk_tensor * W, const float *bias, const float *X,
    int64_t n, int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1,
    unsigned flags, int act_q8)
{
  const int64_t k = W->ne[0];
  const size_t row_bytes = wk_type_row_bytes (W->type, k);
  const unsigned char *data = W->data;
  float wbuf[REF_CHUNK];
  int64_t i, j, c, l;

  if (row_bytes == 0)
    return;
  if (act_q8) {
    ref_linear_q8 (W, bias, X, n, ldx, Y, ldy, j0, j1, flags);
    return;
  }
  for (j = j0; j < j1; j++) {
    const unsigned char *wrow = data + (size_t) j * row_bytes;

    if (k <= REF_CHUNK) {
      wk_row_to_f32 (W->type, wrow, wbuf, k);
      for (i = 0; i < n; i++) {
        const float *x = X + i * ldx;
        double acc = 0.0;
        for (l = 0; l < k; l++)
          acc += (double) x[l] * wbuf[l];
        ref_store (Y + i * ldy + j, acc, bias, j, flags);
      }
      continue;
    }
    for (i = 0; i < n; i++) {
      const float *x = X + i * ldx;
      double acc = 0.0;
      for (c = 0; c < k; c += REF_CHUNK) {
        int64_t len = k - c < REF_CHUNK ? k - c : REF_CHUNK;
        wk_row_to_f32 (W->type, wrow + wk_type_row_bytes (W->type, c),
            wbuf, len);
        for (l = 0; l < len; l++)
          acc += (double) x[c + l] * wbuf[l];
      }
      ref_store (Y + i * ldy + j, acc, bias, j, flags);
    }
  }
}

static void
ref_gemm_f32 (int b_trans, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
    int64_t k, float alpha, const float *A, int64_t lda, const float *B,
    int64_t ldb, float *C, int64_t ldc)
{
  int64_t i, j, l;

  for (i = i0; i < i1; i++) {
    const float *a = A + i * lda;
    for (j = j0; j < j1; j++) {
      double acc = 0.0;
      if (b_trans) {
        const float *b = B + j * ldb;
        for (l = 0; l < k; l++)
          acc += (double) a[l] * b[l];
      } else {
        for (l = 0; l < k; l++)
          acc += (double) a[l] * B[l * ldb + j];
      }
      C[i * ldc + j] = (float) (acc * alpha);
    }
  }
}

static inline double
ref_kv (const void *p, int64_t i, int kv16)
{
  return kv16 ? wk_fp16_to_fp32 (((const uint16_t *) p)[i]) :
      ((const float *) p)[i];
}

/* One query at a time with a running (online) softmax in double. */
static void
ref_attention_any (int64_t d_head, int64_t q0, int64_t q1, int64_t n_q,
    int64_t n_kv, const float *Q, int64_t ldq, const void *K, int64_t ldk,
    const void *V, int64_t ldv, float scale, int causal, float *O,
    int64_t ldo, int kv16)
{
  double acc[256];
  int64_t i, t, l;

  for (i = q0; i < q1; i++) {
    const float *q = Q + i * ldq;
    int64_t last = wk_attention_last_key (i, n_q, n_kv, causal);
    double mx = -INFINITY, sum = 0.0;

    for (l = 0; l < d_head; l++)
      acc[l] = 0.0;
    for (t = 0; t <= last; t++) {
      double s = 0.0, p;
      for (l = 0; l < d_head; l++)
        s += (double) q[l] * ref_kv (K, t * ldk + l, kv16);
      s *= scale;
      if (s > mx) {
        double r = exp (mx - s);
        for (l = 0; l < d_head; l++)
          acc[l] *= r;
        sum *= r;
        mx = s;
      }
      p = exp (s - mx);
      sum += p;
      for (l = 0; l < d_head; l++)
        acc[l] += p * ref_kv (V, t * ldv + l, kv16);
    }
    for (l = 0; l < d_head; l++)
      O[i * ldo + l] = sum > 0.0 ? (float) (acc[l] / sum) : 0.0f;
  }
}

static void
ref_attention_head (int64_t d_head, int64_t q0, int64_t q1, int64_t n_q,
    int64_t n_kv, const float *Q, int64_t ldq, const float *K, int64_t ldk,
    const float *V, int64_t ldv, float scale, int causal, float *O, int64_t ldo)
{
  ref_attention_any (d_head, q0, q1, n_q, n_kv, Q, ldq, K, ldk, V, ldv,
      scale, causal, O, ldo, 0);
}

static void
ref_attention_head_f16kv (int64_t d_head, int64_t q0, int64_t q1,
    int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq,
    const uint16_t * K, int64_t ldk, const uint16_t * V, int64_t ldv,
    float scale, int causal, float *O, int64_t ldo)
{
  ref_attention_any (d_head, q0, q1, n_q, n_kv, Q, ldq, K, ldk, V, ldv,
      scale, causal, O, ldo, 1);
}

static void
ref_f32_to_f16 (const float *x, uint16_t * y, int64_t n)
{
  int64_t i;
  for (i = 0; i < n; i++)
    y[i] = wk_fp32_to_fp16 (x[i]);
}

static void
ref_layer_norm_row (const float *x, int64_t d, const float *gamma,
    const float *beta, float eps, float *y)
{
  double mean = 0.0, var = 0.0, inv;
  int64_t l;

  for (l = 0; l < d; l++)
    mean += x[l];
  mean /= (double) d;
  for (l = 0; l < d; l++)
    var += ((double) x[l] - mean) * ((double) x[l] - mean);
  var /= (double) d;
  inv = 1.0 / sqrt (var + eps);
  for (l = 0; l < d; l++) {
    double v = ((double) x[l] - mean) * inv;
    if (gamma)
      v *= gamma[l];
    if (beta)
      v += beta[l];
    y[l] = (float) v;
  }
}

static void
ref_gelu (float *x, int64_t n)
{
  int64_t i;
  for (i = 0; i < n; i++)
    x[i] = ref_gelu1 (x[i]);
}

static void
ref_softmax (float *x, int64_t n)
{
  double mx = -INFINITY, sum = 0.0;
  int64_t i;

  for (i = 0; i < n; i++)
    if (x[i] > mx)
      mx = x[i];
  for (i = 0; i < n; i++)
    sum += exp ((double) x[i] - mx);
  for (i = 0; i < n; i++)
    x[i] = (float) (exp ((double) x[i] - mx) / sum);
}

static void
ref_add (float *y, const float *x, int64_t n)
{
  int64_t i;
  for (i = 0; i < n; i++)
    y[i] += x[i];
}

const wk_kernel_set wk_kernels_ref = {
  .name = "ref",
  .linear = ref_linear,
  .gemm_f32 = ref_gemm_f32,
  .attention_head = ref_attention_head,
  .attention_head_f16kv = ref_attention_head_f16kv,
  .f32_to_f16 = ref_f32_to_f16,
  .layer_norm_row = ref_layer_norm_row,
  .quantize_act = wk_quantize_act,
  .gelu = ref_gelu,
  .softmax = ref_softmax,
  .add = ref_add,
};
