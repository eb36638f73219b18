/* Internal: the per-ISA kernel table behind kernels.h. kernels.c splits
 * the work over the pool's threads and calls one table's entries on
 * sub-ranges; kernels-ref.c defines the results, kernels-avx2.c is held to
 * it by tests/test-kernels.c. */
#ifndef WK_KERNELS_IMPL_H
#define WK_KERNELS_IMPL_H

#include <stdint.h>

#include "kernels.h"

/* Function attributes as one word, so that GNU indent (tools/gst-indent)
 * still sees the return type and name of the function they qualify. */
#define WK_ALWAYS_INLINE __attribute__ ((always_inline))

/* wk_kernel_set.find_gt (a typedef, which GNU indent formats) */
typedef int64_t wk_find_gt_fn (const float *x, int64_t n, float t);

typedef struct
{
  const char *name;

  /* wk_linear_ex for all n rows of X and the outputs (rows of W)
   * j0 .. j1-1. act_q8: the rows of X are quantized (wk_linear_act_q8 of
   * the whole call, so that the result does not depend on how the rows
   * were split over threads). */
  void (*linear) (const wk_tensor * W, const float *bias, const float *X,
      int64_t n, int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1,
      unsigned flags, int act_q8);

  /* wk_gemm_f32 for rows i0 .. i1-1 and columns j0 .. j1-1 of C. */
  void (*gemm_f32) (int b_trans, int64_t i0, int64_t i1, int64_t j0,
      int64_t j1, int64_t k, float alpha, const float *A, int64_t lda,
      const float *B, int64_t ldb, float *C, int64_t ldc);

  /* wk_attention for one head (pointers already offset to its columns)
   * and query rows q0 .. q1-1 out of n_q. */
  void (*attention_head) (int64_t d_head, int64_t q0, int64_t q1,
      int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq,
      const float *K, int64_t ldk, const float *V, int64_t ldv, float scale,
      int causal, float *O, int64_t ldo);

  /* The same with K and V in f16. */
  void (*attention_head_f16kv) (int64_t d_head, int64_t q0, int64_t q1,
      int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq,
      const uint16_t * K, int64_t ldk, const uint16_t * V, int64_t ldv,
      float scale, int causal, float *O, int64_t ldo);

  /* wk_f32_to_f16 */
  void (*f32_to_f16) (const float *x, uint16_t * y, int64_t n);

  /* Optional (NULL: f32_to_f16 and back): wk_round_f16, bit for bit. */
  void (*round_f16) (float *x, int64_t n);

  /* Optional (NULL: wk_fp16_to_fp32 per half): halves to floats, bit for
   * bit wk_fp16_to_fp32's (NaN payloads kept); wk_tensor_get_row's f16
   * rows (positional embeddings, every decoder step and encode). */
  void (*f16_to_f32) (const uint16_t * x, float *y, int64_t n);

  /* wk_layer_norm for one row. */
  void (*layer_norm_row) (const float *x, int64_t d, const float *gamma,
      const float *beta, float eps, float *y);

  /* Optional (NULL: the encoder's q8_0 / q4_0 products take f32 weight
   * panels): wk_linear_work's integer result for outputs j0 .. j1-1 of
   * n rows of X already quantized (by wk_linear_work): q [n][k]
   * int8, d [n][k / 32] the blocks' scales, c [n][k / 32] each block's sum
   * of q times -128 (q8_0 weights) or -8 (q4_0), k = W->ne[0] (a multiple
   * of 32, at most WK_LINEAR_QMAX_K). The result of an output never
   * depends on which rows or outputs the call was given. */
  void (*linear_q) (const wk_tensor * W, const float *bias, const int8_t * q,
      const float *d, const int32_t * c, int64_t n, float *Y, int64_t ldy,
      int64_t j0, int64_t j1, unsigned flags);
  /* Fewest rows of X for which linear_q is used (below it linear's f32
   * panels are faster or as fast; measured by tools/bench-kernels). */
  int linear_q_min_rows;
  /* 1: the encoder's products on q8_0 weights take linear_q by default
   * (WK_INT8 unset), where they are much faster than the f32 panels at
   * every encoder shape and kept the default model's development-set WER
   * within 0.3 points (AVX-512 VNNI and AVX-VNNI; BENCHMARKS.md,
   * 2026-12-07; q4_0 moved one set by 0.4 and stays opt-in). 0, and
   * q4_0: only with WK_INT8=all or WK_LINEAR_INT8. */
  int linear_q_default;

  /* wk_quantize_act, bit for bit */
  void (*quantize_act) (const float *x, int64_t k, int8_t * q, float *d);

  void (*gelu) (float *x, int64_t n);
  void (*softmax) (float *x, int64_t n);
  void (*add) (float *y, const float *x, int64_t n);

  /* Optional (NULL: a scalar loop): wk_find_gt, n > 0, the same index
   * (wk_argmax and wk_top_k run on it). */
  wk_find_gt_fn *find_gt;

  /* Optional (NULL: attention_head / attention_head_f16kv per head serve):
   * wk_attention for a few queries q0 .. q1-1 and heads h0 .. h1-1 at
   * once (Q, K, V, O not offset to a head), K and V f32 or f16 (kv16), so
   * that each key's row is read whole by one pass rather than a slice of
   * it by one pass per head. Returns 0, having done nothing, for a case
   * it does not take (widths, query counts: each set says which); the
   * caller then runs the per-head entries. */
  int (*attention_heads) (int h0, int h1, int64_t d_head, int64_t q0,
      int64_t q1, int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq,
      const void *K, int64_t ldk, const void *V, int64_t ldv, float scale,
      int causal, float *O, int64_t ldo, int kv16);

  /* Nonzero where halves are converted in software (wasm: no F16C), so
   * that f16 keys and values read at every decoder step cost more to
   * convert than twice their memory: wk_kernels_f16kv_slow. */
  int f16kv_slow;
  /* Nonzero (with f16kv_slow): attention over f32 keys and values that
   * hold halves, called with kv16 = 2, computes what the f16 entries
   * compute on the halves, bit for bit (wk_attention_halves). */
  int f16kv_exact;
} wk_kernel_set;

/* ---- the blocked matrix-product driver (kernels-gemm.c) ---- */

/* What a tile does with its sums before they are stored. */
typedef struct
{
  const float *bias;            /* added on the last depth block */
  unsigned flags;               /* WK_LINEAR_GELU / WK_LINEAR_ADD */
  float alpha;                  /* the sums' factor */
} wk_gemm_epi;

/* Most rows of X in one tile, over every kernel set. */
#define WK_GEMM_MAX_MR 8

/* One ISA's micro-kernels for wk_gemm_blocked: tile sizes, the packing of
 * a panel and the register tile over it. */
typedef struct
{
  int mr;                       /* rows of X per tile (<= WK_GEMM_MAX_MR) */
  int nr;                       /* outputs per panel */
  int nc;                       /* outputs per packed block (nr multiple) */
  int kc;                       /* depth per packed block (32 multiple) */
  size_t panel_bytes;           /* one packed panel (keeps its alignment) */
  /* Packs outputs j .. j+nr-1 (nr <= the set's nr; the rest zero) at
   * depth l0 .. l0+kc-1 of operand b into panel. */
  void (*pack) (const void *b, int64_t j, int nr, int64_t l0, int kc,
      void *panel);
  /* Y[r][j .. j+nr-1], r < mr = epilogue (sum over depth l0 .. l0+kc-1
   * of operand a's rows rows[0 .. mr-1] with the panel), the set's mr
   * rows given (short stripes repeat their last row): first / last say
   * whether this is the first / last depth block (before it, Y holds the
   * partial sums). */
  void (*tile) (const void *a, const int64_t * rows, int mr, int64_t l0,
      int kc, const void *panel, int nr, float *Y, int64_t ldy, int64_t j,
      int first, int last, const wk_gemm_epi * epi);
} wk_gemm_ukernel;

/* Y[i][j] (i < n, j0 <= j < j1) = epilogue (sum_l a[i][l] b[l][j]), l <
 * k, blocked as uk says; panels: uk->nc / uk->nr panels of
 * uk->panel_bytes, aligned as uk's tiles need. */
void wk_gemm_blocked (const wk_gemm_ukernel * uk, const void *a,
    const void *b, int64_t n, float *Y, int64_t ldy, int64_t j0, int64_t j1,
    int64_t k, const wk_gemm_epi * epi, void *panels);

/* The quantized rows of X (wk_kernel_set.linear_q's q, d, c; depth k) as
 * wk_gemm_blocked's operand a for the integer tiles. */
typedef struct
{
  const int8_t *q;
  const float *d;
  const int32_t *c;
  int64_t k;
} wk_gemm_qrows;

/* A tile's row pointers into x: rows rows[0 .. mr-1] at depth l0. */
static inline void
wk_gemm_qrows_at (const wk_gemm_qrows * x, const int64_t * rows, int mr,
    int64_t l0, const int8_t ** q, const float **d, const int32_t ** c)
{
  const int64_t nb = x->k / WK_QK;
  int r;

  for (r = 0; r < mr; r++) {
    q[r] = x->q + rows[r] * x->k + l0;
    d[r] = x->d + rows[r] * nb + l0 / WK_QK;
    c[r] = x->c + rows[r] * nb + l0 / WK_QK;
  }
}

extern const wk_kernel_set wk_kernels_ref;
#ifdef __wasm__
/* linked into the relaxed module only (NULL elsewhere) */
extern const wk_kernel_set wk_kernels_avx2 __attribute__((weak));
#endif
#ifdef WK_HAVE_AVX2_KERNELS
extern const wk_kernel_set wk_kernels_avx2;
/* wk_kernels_avx2 with AVX-VNNI integer products (decoder q8_0/q4_0) */
extern const wk_kernel_set wk_kernels_avx2vnni;
#endif
#ifdef WK_HAVE_WASM_KERNELS
extern const wk_kernel_set wk_kernels_wasm;
#endif
#ifdef WK_HAVE_AVX512_KERNELS
/* Fills *ks: the AVX2 set with the AVX-512 matrix products. */
void wk_kernels_avx512_init (wk_kernel_set * ks);
#endif

/* 1 when the CPU and OS run wk_kernels_avx2 (AVX2, FMA, F16C). */
int wk_kernels_avx2_usable (void);
/* 1 when they also run wk_kernels_avx2vnni (AVX-VNNI). */
int wk_kernels_avx2vnni_usable (void);

/* The SIMD kernel sets built in and usable on this CPU (at most max),
 * widest last; returns their number. For the tests and the benchmark. */
int wk_kernels_simd_sets (const wk_kernel_set ** sets, int max);

/* Test hooks (tests/test-kernels.c): the table in use, and a way to
 * force one (NULL restores the run-time choice). */
const wk_kernel_set *wk_kernels_get (void);
void wk_kernels_set (const wk_kernel_set * set);

/* Largest depth for which quantized activations are used. */
#define WK_LINEAR_QMAX_K 16384

/* From WK_INT8 in the environment (read once). */
enum
{
  /* WK_INT8=0 (or off): every product takes f32 activations, for A/B
   * comparisons of the integer path */
  WK_INT8_OFF = 0,
  /* WK_INT8=all: the encoder's products (wk_linear_work) take integer ones
   * too */
  WK_INT8_ALL,
  /* WK_INT8=dec: only the decoder's (few-row) products take integer ones,
   * the encoder's f32 weight panels */
  WK_INT8_DEC,
  /* otherwise (the default): as WK_INT8_DEC, except that the encoder's
   * q8_0 products are integer ones where the kernel set's
   * linear_q_default says so */
  WK_INT8_AUTO,
};
int wk_kernels_int8 (void);

/* Whether wk_linear_work (flags: 0 or WK_LINEAR_INT8) takes kernel set
 * ks's integer products for n rows of X through W (the rule the tests
 * check against). */
int wk_linear_work_takes_q (const wk_kernel_set * ks, const wk_tensor * W,
    int64_t n, unsigned flags);

/* The rule of kernels.h: q8_0 / q4_0 weights with fewer than
 * WK_LINEAR_GEMM_ROWS rows of X take integer block dot products against
 * activations quantized by wk_quantize_act (unless WK_INT8=0). */
static inline int
wk_linear_act_q8 (const wk_tensor * W, int64_t n)
{
  return (W->type == WK_TYPE_Q8_0 || W->type == WK_TYPE_Q4_0)
      && n < WK_LINEAR_GEMM_ROWS && W->ne[0] <= WK_LINEAR_QMAX_K
      && wk_kernels_int8 () != WK_INT8_OFF;
}

/* Activation quantization (k a multiple of WK_QK): per block of 32,
 * d = max |x| / 127 (f32, not rounded to f16), q = x / d rounded to
 * nearest, ties to even (via x * (1 / d), as the SIMD variants compute
 * it), clamped to [-127, 127]; NaN gives -127. The SIMD variants produce
 * the same bits. */
static inline void
wk_quantize_act (const float *x, int64_t k, int8_t * q, float *d)
{
  int64_t b, l;

  for (b = 0; b < k / WK_QK; b++) {
    const float *xb = x + b * WK_QK;
    float amax = 0.0f, db, id;
    for (l = 0; l < WK_QK; l++) {
      float a = xb[l] < 0 ? -xb[l] : xb[l];
      amax = a > amax ? a : amax;
    }
    db = amax / 127.0f;
    id = db != 0.0f ? 1.0f / db : 0.0f;
    for (l = 0; l < WK_QK; l++) {
      float v = xb[l] * id;
      if (!(v >= -127.0f))
        v = -127.0f;
      if (v > 127.0f)
        v = 127.0f;
      q[b * WK_QK + l] = (int8_t) __builtin_rintf (v);
    }
    d[b] = db;
  }
}

/* The sum of one block of quantized activations: the integer products take
 * the weights' offset (-128 for q8_0 as unsigned bytes, -8 for q4_0) out as
 * offset x this sum. */
static inline int32_t
wk_block_sum_i8 (const int8_t * q)
{
  int32_t sum = 0;
  int l;

  for (l = 0; l < WK_QK; l++)
    sum += q[l];
  return sum;
}

/* Last key query i of n_q may see (causal attention over n_kv keys). */
static inline int64_t
wk_attention_last_key (int64_t i, int64_t n_q, int64_t n_kv, int causal)
{
  int64_t last;
  if (!causal)
    return n_kv - 1;
  last = n_kv - n_q + i;
  return last < n_kv - 1 ? last : n_kv - 1;
}

#ifdef __wasm__
/* the wasm set's wk_round_f16 (bit for bit), which the AVX2 set built
 * for wasm shares */
void wasm_round_f16 (float *x, int64_t n);
#endif

#endif
