/* Matrix kernels over f32 activations and f32/f16/q8_0/q4_0 weights.
 *
 * Each kernel has a portable C reference (kernels-ref.c) that defines the
 * result, and SIMD variants (kernels-avx2.c, kernels-avx512.c) held to it
 * by tests. The variant is chosen once, at the first call, from the CPU's
 * features (the widest usable); WK_KERNELS=ref in the environment forces
 * the reference, WK_KERNELS=avx2 or avx512 a SIMD set (when usable). */
#ifndef WK_KERNELS_H
#define WK_KERNELS_H

#include <stdint.h>

#include "pool.h"
#include "wk-types.h"

/* Y[n][m] = X[n][k] . W^T (+ bias[m]), with W a 2-D tensor ne = {k, m}
 * (rows of W contiguous) of any type, bias f32 [m] or NULL. X and Y are
 * row-major with the given row strides in floats (ldx >= k, ldy >= m).
 * Work is split over the pool's threads. */
void wk_linear (wk_pool * pool, const wk_tensor * W, const float *bias,
    const float *X, int64_t n, int64_t ldx, float *Y, int64_t ldy);

/* Dequantizes row r of a 2-D tensor (an embedding lookup) into out
 * [ne[0]]. */
void wk_tensor_get_row (const wk_tensor * W, int64_t r, float *out);

/* Name of the kernel set in use ("avx512", "avx2", "ref"). */
const char *wk_kernels_name (void);

/* ---- Additions for the encoder and decoder (kernels helper) ----
 *
 * Results (defined by kernels-ref.c; SIMD variants differ only by f32
 * rounding, tests: |err| <= 1e-5 * sum_k |x_k w_k| + 1e-6):
 * - f32 / f16 weights: the dot product of X with the exact f32 weights.
 * - q8_0 / q4_0 weights with n >= 8 rows of X (the encoder): the same,
 *   with the exactly dequantized weights (d * q).
 * - q8_0 / q4_0 weights with n < 8 rows (the decoder, beams), k <= 16384:
 *   each row of X is quantized per block of 32 (f32 scale max|x|/127,
 *   values rounded to nearest-even), as ggml does, and the blocks' integer
 *   dot products are scaled: y = sum_b d_w,b d_x,b sum q_w q_x. This
 *   differs from the f32-activation value by at most
 *   sum_k |w_k| max|x in k's block| / 254. WK_INT8=0 in the environment
 *   turns this off (the f32-activation value, as with n >= 8 rows).
 * The result never depends on the thread count. */

/* Flags of wk_linear_ex. */
enum
{
  /* Y = gelu (X W^T + b): Whisper's exact (erf) GELU, see wk_gelu. */
  WK_LINEAR_GELU = 1 << 0,
  /* Y += X W^T + b (a residual connection). Not together with GELU. */
  WK_LINEAR_ADD = 1 << 1,
  /* wk_linear_work only: the integer products (below) even where the
   * kernel set or WK_INT8=dec leaves the encoder's to the f32 panels;
   * WK_INT8=0 still turns them off. The live policy asks for them when its
   * runs are too slow for the deadlines. */
  WK_LINEAR_INT8 = 1 << 2,
  /* wk_linear_work only: X (pointer, rows, stride and every value) is
   * that of the previous call with this work buffer, so the rows that
   * call quantized are taken again where they serve (the same depth and
   * weight type; else they are quantized anew), as for the q, k and v
   * products of one normed input. */
  WK_LINEAR_REUSE_X = 1 << 3,
};

/* wk_linear with an epilogue fused into the store (flags above). */
void wk_linear_ex (wk_pool * pool, const wk_tensor * W, const float *bias,
    const float *X, int64_t n, int64_t ldx, float *Y, int64_t ldy,
    unsigned flags);

/* Rows of X from which a product is a blocked GEMM (weight panels
 * converted to f32); fewer rows stream the weights (GEMV). */
#define WK_LINEAR_GEMM_ROWS 8

/* The encoder's products with a scratch for quantized activations:
 * wk_linear_ex, except that q8_0 / q4_0 weights with n >=
 * WK_LINEAR_GEMM_ROWS rows of X may take the integer result of the few-row
 * products (each row of X quantized per block of 32, see above) where the
 * kernel set has integer matrix products: by default for q8_0 weights
 * where they pay (AVX-512 VNNI and AVX-VNNI, 2-3x the f32 panels), with
 * WK_INT8=all for both types wherever the set has them (AVX2 maddubs
 * too), never with WK_INT8=dec or 0. work holds wk_linear_work_size (n,
 * W->ne[0]) bytes (or is NULL: wk_linear_ex). The result never depends on
 * the thread count. */
size_t wk_linear_work_size (int64_t n, int64_t k);
/* Whether wk_linear_work with these flags (0 or WK_LINEAR_INT8) can take
 * integer products for weights of this type with the kernel set chosen
 * and WK_INT8: a caller needs its work buffer only then. */
int wk_linear_work_used (wk_type type, unsigned flags);
void wk_linear_work (wk_pool * pool, const wk_tensor * W, const float *bias,
    const float *X, int64_t n, int64_t ldx, float *Y, int64_t ldy,
    unsigned flags, void *work);

/* Several independent groups of rows of X through one weight, as
 * wk_linear_ex would take each alone (the decoder steps of several
 * streams): group g is X = groups[g].X [n][ldx] -> Y = groups[g].Y
 * [n][ldy], n < WK_LINEAR_GEMM_ROWS (0: skipped). Each group's result is
 * bit-for-bit
 * wk_linear_ex's on it alone (the same kernel on the same rows; no
 * kernel's result depends on where its piece of outputs starts), but
 * the weights are read from memory once for all of them: every group
 * passes over a block of weight rows while it is in cache. */
typedef struct
{
  const float *X;
  float *Y;
  int n;
} wk_rows;

void wk_linear_batch (wk_pool * pool, const wk_tensor * W, const float *bias,
    const wk_rows * groups, int n_groups, int64_t ldx, int64_t ldy,
    unsigned flags);

/* General f32 product C = alpha * A . op(B), A [n][k] (row stride lda),
 * C [n][m] (stride ldc). b_trans != 0: B is [m][k] (stride ldb) and
 * op(B) = B^T (Q . K^T); b_trans == 0: B is [k][m] (P . V). C must not
 * overlap A or B. Split over the pool's threads. */
void wk_gemm_f32 (wk_pool * pool, int b_trans, int64_t n, int64_t m,
    int64_t k, float alpha, const float *A, int64_t lda, const float *B,
    int64_t ldb, float *C, int64_t ldc);

/* Multi-head scaled dot-product attention, one call for all heads:
 * for each head h (columns h*d_head .. (h+1)*d_head-1 of Q, K, V and O)
 *   O_h = softmax (scale * Q_h K_h^T (+ causal mask)) V_h
 * Q [n_q][ldq], K [n_kv][ldk], V [n_kv][ldv], O [n_q][ldo] (O must not
 * overlap Q, K or V). causal != 0: query i sees keys 0 .. n_kv - n_q + i
 * (the decoder's self-attention over a key cache whose last n_q entries
 * are the queries' own); otherwise every key. Needs no scratch (keys are
 * taken in chunks with a running softmax); split over heads and query
 * blocks. d_head <= 256. */
void wk_attention (wk_pool * pool, int n_head, int64_t d_head, int64_t n_q,
    int64_t n_kv, const float *Q, int64_t ldq, const float *K, int64_t ldk,
    const float *V, int64_t ldv, float scale, int causal, float *O,
    int64_t ldo);

/* wk_attention, with work for many queries (64 or more) against f32 keys
 * and values whose rows hold several heads (strides above d_head, as
 * the encoder's d_model): each thread copies the keys and values of the
 * head it is on into rows of their own once, 2 n_kv d_head floats of
 * work per thread, and reads those (threads past the room read in place).
 * The rows of several heads fall on few cache sets (Whisper-tiny's
 * 1536-byte stride puts a 96-key chunk of one head's values on 8 of L1's
 * 64 sets, 12 lines each). The results are wk_attention's, bit for bit. */
void wk_attention_work (wk_pool * pool, int n_head, int64_t d_head,
    int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq, const float *K,
    int64_t ldk, const float *V, int64_t ldv, float scale, int causal,
    float *O, int64_t ldo, float *work, size_t work_floats);

/* wk_attention with K and V stored as IEEE half floats (strides in
 * elements), e.g. the decoder's cross-attention keys and values converted
 * once per window with wk_f32_to_f16: half the memory read per token, which
 * is what bounds the decoder. The result is wk_attention's on the f32
 * values of K and V. Meant for few queries (decoder steps, beams). */
void wk_attention_f16kv (wk_pool * pool, int n_head, int64_t d_head,
    int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq,
    const uint16_t * K, int64_t ldk, const uint16_t * V, int64_t ldv,
    float scale, int causal, float *O, int64_t ldo);

/* y[i] = x[i] rounded to half (nearest even; wk_fp32_to_fp16's bits). */
void wk_f32_to_f16 (const float *x, uint16_t * y, int64_t n);

/* Whether the chosen kernel set converts halves in software (wasm), where
 * a cache read at every decoder step is better kept in f32 (holding the
 * f16-rounded values: wk_round_f16), whatever the memory. */
int wk_kernels_f16kv_slow (void);

/* wk_attention over keys and values that hold halves in f32 (rounded by
 * wk_round_f16): where the kernels say so (f16kv_exact), the same bits
 * as wk_attention_f16kv on the halves, else wk_attention's. */
void wk_attention_halves (wk_pool * pool, int n_head, int64_t d_head,
    int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq, const float *K,
    int64_t ldk, const float *V, int64_t ldv, float scale, int causal,
    float *O, int64_t ldo);

/* x[i] = x[i] rounded to half and back (wk_f32_to_f16's bits as f32). */
void wk_round_f16 (float *x, int64_t n);

/* Layer normalisation of n rows of d values: Y = (X - mean) / sqrt (var +
 * eps) * gamma + beta (gamma, beta [d], either may be NULL for 1 / 0). Y
 * may be X (ldy == ldx). */
void wk_layer_norm (wk_pool * pool, const float *X, int64_t n, int64_t d,
    int64_t ldx, const float *gamma, const float *beta, float eps, float *Y,
    int64_t ldy);

/* In place: x = 0.5 x (1 + erf (x / sqrt 2)) (PyTorch's default GELU,
 * which Whisper uses), to about 1e-6 absolute. */
void wk_gelu (float *x, int64_t n);

/* In place softmax of n values (max subtracted first). */
void wk_softmax (float *x, int64_t n);

/* y[i] += x[i]. */
void wk_add (float *y, const float *x, int64_t n);

/* Index of the largest value (the first one on ties); -1 when n <= 0. */
int64_t wk_argmax (const float *x, int64_t n);

/* Index of the first x[i] > t (a NaN never is), or n. */
int64_t wk_find_gt (const float *x, int64_t n, float t);

/* The indices of the k largest values (k <= WK_TOP_K_MAX) in idx, largest
 * first, the lower index first on ties, leaving out -INFINITY and NaN;
 * returns how many there are (at most k). The same indices, in the same
 * order, as k rounds of wk_argmax that each set the value found to
 * -INFINITY and stop at one that is -INFINITY, in one pass over x (beam
 * search takes its candidates over the vocabulary so). */
#define WK_TOP_K_MAX 32
int wk_top_k (const float *x, int64_t n, int k, int64_t * idx);

/* Whisper's convolution stems: kernel 3, padding 1, stride 1 or 2.
 *   Y[t][j] = bias[j] + sum_c sum_u W[j][c][u] * x (c, stride * t + u - 1)
 * W ne = {3, c_in, c_out} (f32 or f16; any type wk_linear takes), bias
 * [c_out] or NULL, x (c, t) = 0 outside 0 <= t < n_in. The input is
 * channel-major, X[c * ldx + t] (the mel spectrogram), when x_time_major
 * is 0, else time-major, X[t * ldx + c] (conv1's output). The output is
 * time-major, Y [n_out][ldy] with n_out = (n_in - 1) / stride + 1.
 * flags as wk_linear_ex (conv1 and conv2 use WK_LINEAR_GELU). work holds
 * wk_conv1d_k3_work_size floats (the unfolded input). */
int64_t wk_conv1d_k3_work_size (int64_t c_in, int64_t n_in, int stride);
void wk_conv1d_k3 (wk_pool * pool, const wk_tensor * W, const float *bias,
    const float *X, int64_t c_in, int64_t n_in, int64_t ldx,
    int x_time_major, int stride, float *Y, int64_t ldy, unsigned flags,
    float *work);

#endif
