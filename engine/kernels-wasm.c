/* WebAssembly SIMD128 kernels, held to kernels-ref.c by tests/test-kernels.c
 * (built for wasm32 and run under Node.js, web/tests).
 *
 * wasm has 128-bit vectors and no fused multiply-add (clang 14 has no
 * relaxed SIMD), so every product is a multiply then an add. The engine
 * runs single-threaded in the browser: nothing here depends on threads,
 * but nothing shares state between calls either, except the GEMM's packed
 * weight panel, which is per call and on the stack.
 *
 * - linear, n >= 8 rows (the encoder): a panel of 8 outputs is converted
 *   to f32 and laid out depth-major, [l][8], in chunks of KC; a 4 x 8
 *   micro-kernel broadcasts x and adds into 8 accumulators.
 * - linear, n < 8 rows with q8_0 / q4_0 (the decoder): activations
 *   quantized per block (wk_quantize_act, bit for bit), then integer
 *   block dot products: weights and activations widened to i16, eight
 *   products summed pairwise into i32 lanes per i32x4.dot_i16x8_s.
 * - linear, n < 8 rows otherwise: weight rows converted on the fly and
 *   dotted with up to 4 rows of X.
 * - attention: 4 queries at a time against chunks of keys, a running
 *   softmax with a vector exp. */
#include "kernels-impl.h"

#include <math.h>
#include <stddef.h>
#include <string.h>
#include <wasm_simd128.h>

#include "kernels-wasm-int.h"

#define MR 4                    /* rows of X per micro-kernel */
#define NR 8                    /* outputs per panel */
#define KC 512                  /* depth per converted chunk (GEMV; multiple
                                 * of 32) */

static inline float
hsum (v128_t v)
{
  v128_t s = wasm_f32x4_add (v, wasm_i32x4_shuffle (v, v, 2, 3, 0, 1));
  s = wasm_f32x4_add (s, wasm_i32x4_shuffle (s, s, 1, 0, 3, 2));
  return wasm_f32x4_extract_lane (s, 0);
}

static inline float
hmax (v128_t v)
{
  v128_t s = wasm_f32x4_max (v, wasm_i32x4_shuffle (v, v, 2, 3, 0, 1));
  s = wasm_f32x4_max (s, wasm_i32x4_shuffle (s, s, 1, 0, 3, 2));
  return wasm_f32x4_extract_lane (s, 0);
}

/* e^x: Cody-Waite reduction by ln 2 and a degree-6 polynomial, relative
 * error about 2e-7; 0 below -87.3, clamped above 88.4. The clamps are
 * pmin/pmax (one instruction each where wasm's min/max take seven for
 * their NaN and signed-zero rules; a NaN still comes out NaN), and n is
 * rounded to an integer by adding 1.5 * 2^23, whose low bits are then n
 * itself (the same round-to-nearest-even as f32x4.nearest, without the
 * float-to-int conversion's saturation fix-ups). exp4_le0 is the part
 * below the upper clamp, for x <= 88.38 (the softmax's x <= 0), with the
 * same bits. */
static inline v128_t
exp4_le0 (v128_t x)
{
  const v128_t lo = wasm_f32x4_splat (-87.3365447504f);
  const v128_t magic = wasm_f32x4_splat (12582912.0f);
  v128_t under = wasm_f32x4_lt (x, lo);
  v128_t n, nm, r, y;
  v128_t e;

  x = wasm_f32x4_pmax (x, lo);
  nm = wasm_f32x4_add (wasm_f32x4_mul (x,
          wasm_f32x4_splat (1.44269504088896341f)), magic);
  n = wasm_f32x4_sub (nm, magic);
  r = wasm_f32x4_sub (x, wasm_f32x4_mul (n, wasm_f32x4_splat (0.693359375f)));
  r = wasm_f32x4_sub (r, wasm_f32x4_mul (n,
          wasm_f32x4_splat (-2.12194440e-4f)));
  y = wasm_f32x4_splat (1.9875691500E-4f);
  y = wasm_f32x4_add (wasm_f32x4_mul (y, r),
      wasm_f32x4_splat (1.3981999507E-3f));
  y = wasm_f32x4_add (wasm_f32x4_mul (y, r),
      wasm_f32x4_splat (8.3334519073E-3f));
  y = wasm_f32x4_add (wasm_f32x4_mul (y, r),
      wasm_f32x4_splat (4.1665795894E-2f));
  y = wasm_f32x4_add (wasm_f32x4_mul (y, r),
      wasm_f32x4_splat (1.6666665459E-1f));
  y = wasm_f32x4_add (wasm_f32x4_mul (y, r),
      wasm_f32x4_splat (5.0000001201E-1f));
  y = wasm_f32x4_add (wasm_f32x4_mul (y, wasm_f32x4_mul (r, r)),
      wasm_f32x4_add (r, wasm_f32x4_splat (1.0f)));
  /* (bits (nm) + 127) << 23: the magic's own bits shift out */
  e = wasm_i32x4_shl (wasm_i32x4_add (nm, wasm_i32x4_splat (127)), 23);
  y = wasm_f32x4_mul (y, e);
  return wasm_v128_andnot (y, under);
}

static inline v128_t
exp4 (v128_t x)
{
  return exp4_le0 (wasm_f32x4_pmin (x, wasm_f32x4_splat (88.3762626647949f)));
}

/* 0.5 x (1 + erf (x / sqrt 2)), erf by Abramowitz & Stegun 7.1.26
 * (absolute error below 1.5e-7). */
static inline v128_t
gelu4 (v128_t x)
{
  const v128_t sign = wasm_f32x4_splat (-0.0f);
  const v128_t one = wasm_f32x4_splat (1.0f);
  v128_t z = wasm_f32x4_mul (x, wasm_f32x4_splat (0.70710678118654752f));
  v128_t az = wasm_f32x4_abs (z);
  v128_t t = wasm_f32x4_div (one, wasm_f32x4_add (wasm_f32x4_mul (az,
              wasm_f32x4_splat (0.3275911f)), one));
  v128_t p = wasm_f32x4_splat (1.061405429f);
  v128_t erf_abs;

  p = wasm_f32x4_add (wasm_f32x4_mul (p, t), wasm_f32x4_splat (-1.453152027f));
  p = wasm_f32x4_add (wasm_f32x4_mul (p, t), wasm_f32x4_splat (1.421413741f));
  p = wasm_f32x4_add (wasm_f32x4_mul (p, t), wasm_f32x4_splat (-0.284496736f));
  p = wasm_f32x4_add (wasm_f32x4_mul (p, t), wasm_f32x4_splat (0.254829592f));
  p = wasm_f32x4_mul (p, t);
  erf_abs = wasm_f32x4_sub (one, wasm_f32x4_mul (p,
          exp4_le0 (wasm_f32x4_neg (wasm_f32x4_mul (az, az)))));
  return wasm_f32x4_mul (wasm_f32x4_mul (wasm_f32x4_splat (0.5f), x),
      wasm_f32x4_add (one, wasm_v128_or (erf_abs, wasm_v128_and (z, sign))));
}

/* Eight IEEE halves to f32, exactly: the magnitude's bits moved into
 * place are a float 2^-112 times too small (subnormal halves included),
 * so one multiply rebiases; infinities and NaNs get the full exponent. */
static inline v128_t
f16x4_to_f32 (v128_t h32)
{
  v128_t mag = wasm_i32x4_shl (wasm_v128_and (h32, wasm_i32x4_splat (0x7fff)),
      13);
  v128_t f = wasm_f32x4_mul (mag, wasm_i32x4_splat (0x77800000));       /* 2^112 */
  v128_t infnan = wasm_i32x4_ge (mag, wasm_i32x4_splat (0x7c00 << 13));
  f = wasm_v128_or (f, wasm_v128_and (infnan, wasm_i32x4_splat (0x7f800000)));
  return wasm_v128_or (f, wasm_i32x4_shl (wasm_v128_and (h32,
              wasm_i32x4_splat (0x8000)), 16));
}

static inline void
f16x8_to_f32 (const uint16_t * h, float *out)
{
  v128_t v = wasm_v128_load (h);
  wasm_v128_store (out, f16x4_to_f32 (wasm_u32x4_extend_low_u16x8 (v)));
  wasm_v128_store (out + 4, f16x4_to_f32 (wasm_u32x4_extend_high_u16x8 (v)));
}

/* Eight finite IEEE halves to f32, exactly, in fewer instructions than
 * f16x8_to_f32 (the weights' hot path): each half moved to the top of a
 * 32-bit lane and shifted right arithmetically by 3 has its sign in bit
 * 31 (smeared over bits 30-28, which the mask clears) and its exponent
 * and mantissa where an f32's are, 2^-112 times too small (subnormal
 * halves included), so one multiply rebiases. Infinities and NaNs would
 * come out as 2^16 or more instead: *nonfinite gets the lanes whose
 * exponent bits are all ones, and the caller converts those again. */
static inline void
f16x8_to_f32_finite (const uint16_t * h, float *out, v128_t * nonfinite)
{
  const v128_t zero = wasm_i32x4_splat (0);
  const v128_t mask = wasm_i32x4_splat ((int32_t) 0x8fffe000u);
  const v128_t rebias = wasm_i32x4_splat (0x77800000);  /* 2^112 */
  v128_t v = wasm_v128_load (h);
  v128_t exp = wasm_v128_and (v, wasm_i16x8_splat (0x7c00));
  v128_t lo = wasm_i16x8_shuffle (zero, v, 0, 8, 1, 9, 2, 10, 3, 11);
  v128_t hi = wasm_i16x8_shuffle (zero, v, 4, 12, 5, 13, 6, 14, 7, 15);

  *nonfinite = wasm_v128_or (*nonfinite, wasm_i16x8_eq (exp,
          wasm_i16x8_splat (0x7c00)));
  wasm_v128_store (out, wasm_f32x4_mul (wasm_v128_and (wasm_i32x4_shr (lo,
                  3), mask), rebias));
  wasm_v128_store (out + 4, wasm_f32x4_mul (wasm_v128_and (wasm_i32x4_shr (hi,
                  3), mask), rebias));
}

/* An IEEE half as f32, inline (the block scales of every q8_0 / q4_0
 * block): the same trick as f16x4_to_f32, exact. */
static inline float
h2f (uint16_t h)
{
  union
  {
    uint32_t u;
    float f;
  } m, r;
  uint32_t mag = (uint32_t) (h & 0x7fff) << 13;

  m.u = mag;
  r.u = 0x77800000u;            /* 2^112 */
  r.f = m.f * r.f;
  if (mag >= (0x7c00u << 13))
    r.u |= 0x7f800000u;
  r.u |= (uint32_t) (h & 0x8000) << 16;
  return r.f;
}

/* i8 lanes to four f32 vectors. */
static inline void
i8x16_to_f32 (v128_t q, v128_t scale, float *out)
{
  v128_t lo = wasm_i16x8_extend_low_i8x16 (q);
  v128_t hi = wasm_i16x8_extend_high_i8x16 (q);
  wasm_v128_store (out, wasm_f32x4_mul (scale,
          wasm_f32x4_convert_i32x4 (wasm_i32x4_extend_low_i16x8 (lo))));
  wasm_v128_store (out + 4, wasm_f32x4_mul (scale,
          wasm_f32x4_convert_i32x4 (wasm_i32x4_extend_high_i16x8 (lo))));
  wasm_v128_store (out + 8, wasm_f32x4_mul (scale,
          wasm_f32x4_convert_i32x4 (wasm_i32x4_extend_low_i16x8 (hi))));
  wasm_v128_store (out + 12, wasm_f32x4_mul (scale,
          wasm_f32x4_convert_i32x4 (wasm_i32x4_extend_high_i16x8 (hi))));
}

/* The q4_0 block's 32 values as i8: low nibbles first, then high. */
static inline void
q4_unpack (const uint8_t * qs, v128_t * lo, v128_t * hi)
{
  v128_t b = wasm_v128_load (qs);
  v128_t eight = wasm_i8x16_splat (8);
  *lo = wasm_i8x16_sub (wasm_v128_and (b, wasm_i8x16_splat (15)), eight);
  *hi = wasm_i8x16_sub (wasm_u8x16_shr (b, 4), eight);
}

/* Weights [l0, l0 + len) of a row (len and l0 multiples of WK_QK for the
 * block types, of 8 for f16) as exact f32. */
static void
row_seg_to_f32 (wk_type type, const unsigned char *row, int64_t l0,
    int64_t len, float *out)
{
  int64_t l, b;

  switch (type) {
    case WK_TYPE_F32:
      memcpy (out, (const float *) row + l0, (size_t) len * sizeof (float));
      break;
    case WK_TYPE_F16:{
      const uint16_t *h = (const uint16_t *) row + l0;
      v128_t nonfinite = wasm_i32x4_splat (0);
      for (l = 0; l + 8 <= len; l += 8)
        f16x8_to_f32_finite (h + l, out + l, &nonfinite);
      if (wasm_v128_any_true (nonfinite))       /* a damaged weight: exact */
        for (l = 0; l + 8 <= len; l += 8)
          f16x8_to_f32 (h + l, out + l);
      for (; l < len; l++)
        out[l] = wk_fp16_to_fp32 (h[l]);
      break;
    }
    case WK_TYPE_Q8_0:
      for (b = 0; b < len / WK_QK; b++) {
        const wk_block_q8_0 *blk = (const wk_block_q8_0 *) row + l0 / WK_QK + b;
        v128_t d = wasm_f32x4_splat (h2f (blk->d));
        i8x16_to_f32 (wasm_v128_load (blk->qs), d, out + b * WK_QK);
        i8x16_to_f32 (wasm_v128_load (blk->qs + 16), d, out + b * WK_QK + 16);
      }
      break;
    case WK_TYPE_Q4_0:
      for (b = 0; b < len / WK_QK; b++) {
        const wk_block_q4_0 *blk = (const wk_block_q4_0 *) row + l0 / WK_QK + b;
        v128_t d = wasm_f32x4_splat (h2f (blk->d));
        v128_t lo, hi;
        q4_unpack (blk->qs, &lo, &hi);
        i8x16_to_f32 (lo, d, out + b * WK_QK);
        i8x16_to_f32 (hi, d, out + b * WK_QK + 16);
      }
      break;
    default:
      wk_row_to_f32 (type, row + wk_type_row_bytes (type, l0), out, len);
      break;
  }
}

/* The epilogue of one output vector (4 outputs j .. j + 3, nj of them
 * valid). */
static inline void
store4 (float *y, v128_t acc, const float *bias, int64_t j, int nj,
    unsigned flags)
{
  float v[4];
  int c;

  if (bias) {
    if (nj == 4) {
      acc = wasm_f32x4_add (acc, wasm_v128_load (bias + j));
    } else {
      float b[4] = { 0 };
      memcpy (b, bias + j, (size_t) nj * sizeof (float));
      acc = wasm_f32x4_add (acc, wasm_v128_load (b));
    }
  }
  if (flags & WK_LINEAR_GELU)
    acc = gelu4 (acc);
  if (nj == 4) {
    if (flags & WK_LINEAR_ADD)
      acc = wasm_f32x4_add (acc, wasm_v128_load (y));
    wasm_v128_store (y, acc);
    return;
  }
  wasm_v128_store (v, acc);
  for (c = 0; c < nj; c++) {
    float r = v[c];
    if (flags & WK_LINEAR_ADD)
      y[c] += r;
    else
      y[c] = r;
  }
}

/* ---- GEMM (n >= 8) ---- */

/* Rows of X per block: with a depth chunk of GEMM_KC they stay in the
 * cache (96 KiB) while the packed panels pass over them. */
#define GEMM_ROWS 96
#define GEMM_KC 256
/* Outputs per packed block: GEMM_NC / NR panels of GEMM_KC x NR f32
 * (128 KiB), converted once and used by every row of X. */
#define GEMM_NC 128

/* C [4][8] (rows ldc apart) += x[r][0 .. kc) . P [kc][8] for r < mr;
 * first: C starts from 0 instead of its contents. On the last depth
 * chunk the epilogue comes before the store, in registers, in
 * gemm_epilogue's order: + bias[0 .. 8) (bias non-NULL), then GELU. */
static inline void
gemm_tile (int kc, const float *P, const float *x0, int64_t ldx, int mr,
    float *C, int64_t ldc, int first, const float *bias, int gelu)
{
  const float *x1 = mr > 1 ? x0 + ldx : x0;
  const float *x2 = mr > 2 ? x0 + 2 * ldx : x0;
  const float *x3 = mr > 3 ? x0 + 3 * ldx : x0;
  v128_t c00, c01, c10, c11, c20, c21, c30, c31;
  int l;

  if (first) {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = wasm_f32x4_splat (0.0f);
  } else {
    c00 = wasm_v128_load (C), c01 = wasm_v128_load (C + 4);
    c10 = c00, c11 = c01, c20 = c00, c21 = c01, c30 = c00, c31 = c01;
    if (mr > 1)
      c10 = wasm_v128_load (C + ldc), c11 = wasm_v128_load (C + ldc + 4);
    if (mr > 2)
      c20 = wasm_v128_load (C + 2 * ldc), c21 = wasm_v128_load (C + 2 * ldc
          + 4);
    if (mr > 3)
      c30 = wasm_v128_load (C + 3 * ldc), c31 = wasm_v128_load (C + 3 * ldc
          + 4);
  }
  for (l = 0; l < kc; l++) {
    v128_t w0 = wasm_v128_load (P + l * NR);
    v128_t w1 = wasm_v128_load (P + l * NR + 4);
    v128_t b0 = wasm_v128_load32_splat (x0 + l);
    v128_t b1 = wasm_v128_load32_splat (x1 + l);
    v128_t b2 = wasm_v128_load32_splat (x2 + l);
    v128_t b3 = wasm_v128_load32_splat (x3 + l);
    c00 = wasm_f32x4_add (c00, wasm_f32x4_mul (b0, w0));
    c01 = wasm_f32x4_add (c01, wasm_f32x4_mul (b0, w1));
    c10 = wasm_f32x4_add (c10, wasm_f32x4_mul (b1, w0));
    c11 = wasm_f32x4_add (c11, wasm_f32x4_mul (b1, w1));
    c20 = wasm_f32x4_add (c20, wasm_f32x4_mul (b2, w0));
    c21 = wasm_f32x4_add (c21, wasm_f32x4_mul (b2, w1));
    c30 = wasm_f32x4_add (c30, wasm_f32x4_mul (b3, w0));
    c31 = wasm_f32x4_add (c31, wasm_f32x4_mul (b3, w1));
  }
  if (bias) {
    v128_t bb0 = wasm_v128_load (bias), bb1 = wasm_v128_load (bias + 4);
    c00 = wasm_f32x4_add (c00, bb0), c01 = wasm_f32x4_add (c01, bb1);
    c10 = wasm_f32x4_add (c10, bb0), c11 = wasm_f32x4_add (c11, bb1);
    c20 = wasm_f32x4_add (c20, bb0), c21 = wasm_f32x4_add (c21, bb1);
    c30 = wasm_f32x4_add (c30, bb0), c31 = wasm_f32x4_add (c31, bb1);
  }
  if (gelu) {
    c00 = gelu4 (c00), c01 = gelu4 (c01), c10 = gelu4 (c10);
    c11 = gelu4 (c11), c20 = gelu4 (c20), c21 = gelu4 (c21);
    c30 = gelu4 (c30), c31 = gelu4 (c31);
  }
  wasm_v128_store (C, c00);
  wasm_v128_store (C + 4, c01);
  if (mr > 1)
    wasm_v128_store (C + ldc, c10), wasm_v128_store (C + ldc + 4, c11);
  if (mr > 2)
    wasm_v128_store (C + 2 * ldc, c20), wasm_v128_store (C + 2 * ldc + 4, c21);
  if (mr > 3)
    wasm_v128_store (C + 3 * ldc, c30), wasm_v128_store (C + 3 * ldc + 4, c31);
}

/* Weights [l0, l0 + kc) of rows j .. j + nj (nj <= 8; the others zeros)
 * as the panel P [kc][8]: each row converted, then 4 x 4 transposes. */
static void
pack_panel (const wk_tensor * W, size_t row_bytes, int64_t j, int nj,
    int64_t l0, int kc, float *P)
{
  float rows[NR][GEMM_KC];
  int c, l;

  for (c = 0; c < NR; c++) {
    if (c < nj)
      row_seg_to_f32 (W->type, (const unsigned char *) W->data + (size_t) (j
              + c) * row_bytes, l0, kc, rows[c]);
    else
      memset (rows[c], 0, sizeof rows[c]);
  }
  for (l = 0; l + 4 <= kc; l += 4)
    for (c = 0; c < NR; c += 4) {
      v128_t a = wasm_v128_load (rows[c] + l), b = wasm_v128_load (rows[c +
              1] + l);
      v128_t e = wasm_v128_load (rows[c + 2] + l), f =
          wasm_v128_load (rows[c + 3] + l);
      v128_t ab_lo = wasm_i32x4_shuffle (a, b, 0, 4, 1, 5);
      v128_t ab_hi = wasm_i32x4_shuffle (a, b, 2, 6, 3, 7);
      v128_t ef_lo = wasm_i32x4_shuffle (e, f, 0, 4, 1, 5);
      v128_t ef_hi = wasm_i32x4_shuffle (e, f, 2, 6, 3, 7);
      wasm_v128_store (P + l * NR + c, wasm_i32x4_shuffle (ab_lo, ef_lo, 0,
              1, 4, 5));
      wasm_v128_store (P + (l + 1) * NR + c, wasm_i32x4_shuffle (ab_lo, ef_lo,
              2, 3, 6, 7));
      wasm_v128_store (P + (l + 2) * NR + c, wasm_i32x4_shuffle (ab_hi, ef_hi,
              0, 1, 4, 5));
      wasm_v128_store (P + (l + 3) * NR + c, wasm_i32x4_shuffle (ab_hi, ef_hi,
              2, 3, 6, 7));
    }
  for (; l < kc; l++)
    for (c = 0; c < NR; c++)
      P[l * NR + c] = rows[c][l];
}

/* The epilogue of rows i0 .. i0 + ni, outputs j0 .. j1 (a ragged
 * panel's): Y = f (sum + bias); with ADD the sum already holds Y's old
 * value. */
static void
gemm_epilogue (const float *bias, float *Y, int64_t ldy, int64_t i0, int ni,
    int64_t j0, int64_t j1, unsigned flags)
{
  int64_t i, j;

  if (!bias && !(flags & WK_LINEAR_GELU))
    return;
  for (i = 0; i < ni; i++) {
    float *y = Y + (i0 + i) * ldy;
    for (j = j0; j + 4 <= j1; j += 4) {
      v128_t v = wasm_v128_load (y + j);
      if (bias)
        v = wasm_f32x4_add (v, wasm_v128_load (bias + j));
      if (flags & WK_LINEAR_GELU)
        v = gelu4 (v);
      wasm_v128_store (y + j, v);
    }
    for (; j < j1; j++) {
      float t[4] = { y[j] + (bias ? bias[j] : 0.0f), 0, 0, 0 };
      if (flags & WK_LINEAR_GELU)
        wasm_v128_store (t, gelu4 (wasm_v128_load (t)));
      y[j] = t[0];
    }
  }
}

/* Blocks of GEMM_NC outputs and GEMM_KC of depth: their panels of 8
 * outputs are converted to f32, depth-major, once, then every block of
 * GEMM_ROWS rows of X passes over them in 4 x 8 tiles that add into Y
 * itself (a ragged last panel into a side buffer). The bias and GELU
 * come with a block's last depth chunk, in the tiles' registers (a
 * ragged panel's in a pass over Y after it); the residual is where the
 * sums start. */
static void
gemm (const wk_tensor * W, const float *bias, const float *X, int64_t n,
    int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1, unsigned flags)
{
  const int64_t k = W->ne[0];
  const size_t row_bytes = wk_type_row_bytes (W->type, k);
  /* the residual: the sums start from Y's contents */
  const int add = (flags & WK_LINEAR_ADD) != 0;
  float panels[GEMM_NC / NR][GEMM_KC * NR];
  float edge[GEMM_ROWS][NR];    /* the ragged panel's sums */
  int64_t jb, l0, i0, i;
  int c;

  for (jb = j0; jb < j1; jb += GEMM_NC) {
    const int64_t jb1 = j1 - jb < GEMM_NC ? j1 : jb + GEMM_NC;
    const int np = (int) ((jb1 - jb + NR - 1) / NR);

    for (l0 = 0; l0 < k; l0 += GEMM_KC) {
      const int kc = (int) (k - l0 < GEMM_KC ? k - l0 : GEMM_KC);
      const int first = l0 == 0 && !add;
      const int last = l0 + kc >= k;
      int p;

      for (p = 0; p < np; p++) {
        const int64_t j = jb + (int64_t) p * NR;
        pack_panel (W, row_bytes, j, (int) (jb1 - j < NR ? jb1 - j : NR), l0,
            kc, panels[p]);
      }
      for (i0 = 0; i0 < n; i0 += GEMM_ROWS) {
        const int ni = (int) (n - i0 < GEMM_ROWS ? n - i0 : GEMM_ROWS);
        for (p = 0; p < np; p++) {
          const int64_t j = jb + (int64_t) p * NR;
          const int nj = (int) (jb1 - j < NR ? jb1 - j : NR);
          if (nj == NR) {
            const float *bj = last && bias ? bias + j : NULL;
            const int gelu = last && (flags & WK_LINEAR_GELU);
            for (i = 0; i < ni; i += MR)
              gemm_tile (kc, panels[p], X + (i0 + i) * ldx + l0, ldx,
                  ni - i < MR ? (int) (ni - i) : MR, Y + (i0 + i) * ldy + j,
                  ldy, first, bj, gelu);
          } else {
            /* the ragged panel: its sums so far from Y (or 0), the tiles
             * into edge, back into Y */
            for (i = 0; i < ni; i++)
              for (c = 0; c < NR; c++)
                edge[i][c] = !first && c < nj ? Y[(i0 + i) * ldy + j + c] :
                    0.0f;
            for (i = 0; i < ni; i += MR)
              gemm_tile (kc, panels[p], X + (i0 + i) * ldx + l0, ldx,
                  ni - i < MR ? (int) (ni - i) : MR, edge[i], NR, 0, NULL, 0);
            for (i = 0; i < ni; i++)
              for (c = 0; c < nj; c++)
                Y[(i0 + i) * ldy + j + c] = edge[i][c];
            if (last)
              gemm_epilogue (bias, Y, ldy, i0, ni, j, j + nj, flags);
          }
        }
      }
    }
  }
}

/* ---- GEMV (n < 8) ---- */

static void
gemv (const wk_tensor * W, const float *bias, const float *X, int64_t n,
    int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1, unsigned flags)
{
  const int64_t k = W->ne[0];
  const size_t row_bytes = wk_type_row_bytes (W->type, k);
  const unsigned char *data = W->data;
  float row[KC];
  int64_t j, i0, l0;

  for (j = j0; j < j1; j++) {
    const unsigned char *wrow = data + (size_t) j * row_bytes;
    for (i0 = 0; i0 < n; i0 += MR) {
      int nx = (int) (n - i0 < MR ? n - i0 : MR), r;
      v128_t acc[MR];
      float tail[MR] = { 0 };
      for (r = 0; r < MR; r++)
        acc[r] = wasm_f32x4_splat (0.0f);
      for (l0 = 0; l0 < k; l0 += KC) {
        int kc = (int) (k - l0 < KC ? k - l0 : KC), l;
        row_seg_to_f32 (W->type, wrow, l0, kc, row);
        for (l = 0; l + 4 <= kc; l += 4) {
          v128_t w = wasm_v128_load (row + l);
          for (r = 0; r < nx; r++)
            acc[r] = wasm_f32x4_add (acc[r], wasm_f32x4_mul (w,
                    wasm_v128_load (X + (i0 + r) * ldx + l0 + l)));
        }
        for (; l < kc; l++)
          for (r = 0; r < nx; r++)
            tail[r] += row[l] * X[(i0 + r) * ldx + l0 + l];
      }
      for (r = 0; r < nx; r++) {
        v128_t v = wasm_f32x4_make (hsum (acc[r]) + tail[r], 0, 0, 0);
        store4 (Y + (i0 + r) * ldy + j, v, bias, j, 1, flags);
      }
    }
  }
}

/* An activation row's i8 values widened to i16, once per call for every
 * weight row they meet; a block's four vectors then load from xw + 32 b:
 * xs[0] values 0-7, xs[1] 8-15, xs[2] 16-23, xs[3] 24-31. */
static void
widen_row (const int8_t * x, int64_t k, int16_t * xw)
{
  int64_t l;

  for (l = 0; l < k; l += 16) {
    v128_t v = wasm_v128_load (x + l);
    wasm_v128_store (xw + l, wasm_i16x8_extend_low_i8x16 (v));
    wasm_v128_store (xw + l + 8, wasm_i16x8_extend_high_i8x16 (v));
  }
}

static inline void
load_x32 (const int16_t * xw, v128_t xs[4])
{
  xs[0] = wasm_v128_load (xw);
  xs[1] = wasm_v128_load (xw + 8);
  xs[2] = wasm_v128_load (xw + 16);
  xs[3] = wasm_v128_load (xw + 24);
}

/* The 32 weights of block b of a q8_0 / q4_0 row as i8, and its scale. */
static inline float
block_i8 (wk_type type, const unsigned char *wrow, int64_t b, v128_t * w0,
    v128_t * w1)
{
  if (type == WK_TYPE_Q8_0) {
    const wk_block_q8_0 *blk = (const wk_block_q8_0 *) wrow + b;
    *w0 = wasm_v128_load (blk->qs);
    *w1 = wasm_v128_load (blk->qs + 16);
    return h2f (blk->d);
  } else {
    const wk_block_q4_0 *blk = (const wk_block_q4_0 *) wrow + b;
    q4_unpack (blk->qs, w0, w1);
    return h2f (blk->d);
  }
}

/* The 32 weights of block b of a q8_0 / q4_0 row as i8 (the scale is
 * read by the caller). */
static inline void
block_qs (wk_type type, const unsigned char *wrow, int64_t b, v128_t * w0,
    v128_t * w1)
{
  if (type == WK_TYPE_Q8_0) {
    const wk_block_q8_0 *blk = (const wk_block_q8_0 *) wrow + b;
    *w0 = wasm_v128_load (blk->qs);
    *w1 = wasm_v128_load (blk->qs + 16);
  } else
    q4_unpack (((const wk_block_q4_0 *) wrow + b)->qs, w0, w1);
}

/* The scales of block b of four rows (step bytes apart) as f32: each half
 * read into the top of a 32-bit lane, then f16x8_to_f32_finite's shift,
 * mask and multiply (exact for normal and subnormal halves). A lane whose
 * exponent bits are all ones (infinity, NaN) raises *nonfinite's lane to
 * 0x7c000000, and the caller converts again with f16x4_to_f32. */
static inline v128_t
scales4_finite (wk_type type, const unsigned char *wrow, size_t step,
    int64_t b, v128_t * nonfinite)
{
  const size_t bb = (size_t) b * (type == WK_TYPE_Q8_0 ?
      sizeof (wk_block_q8_0) : sizeof (wk_block_q4_0));
  v128_t h = wasm_i32x4_splat (0);

  /* the scale d is a block's first member in both types */
  h = wasm_v128_load16_lane (wrow + bb, h, 1);
  h = wasm_v128_load16_lane (wrow + step + bb, h, 3);
  h = wasm_v128_load16_lane (wrow + 2 * step + bb, h, 5);
  h = wasm_v128_load16_lane (wrow + 3 * step + bb, h, 7);
  *nonfinite = wasm_u32x4_max (*nonfinite, wasm_v128_and (h,
          wasm_i32x4_splat (0x7c000000)));
  return wasm_f32x4_mul (wasm_v128_and (wasm_i32x4_shr (h, 3),
          wasm_i32x4_splat ((int32_t) 0x8fffe000u)),
      wasm_i32x4_splat (0x77800000));
}

/* The same scales by f16x4_to_f32 (infinities and NaNs too). */
static inline v128_t
scales4 (wk_type type, const unsigned char *wrow, size_t step, int64_t b)
{
  const size_t bb = (size_t) b * (type == WK_TYPE_Q8_0 ?
      sizeof (wk_block_q8_0) : sizeof (wk_block_q4_0));
  uint16_t h[4];
  int q;

  for (q = 0; q < 4; q++)
    memcpy (&h[q], wrow + q * step + bb, sizeof h[q]);
  return f16x4_to_f32 (wasm_i32x4_make (h[0], h[1], h[2], h[3]));
}

/* Weight rows per pass: independent sums for the adder's latency, and
 * each activation block loaded once for all of them. */
#define QROWS 4

/* gemv_q8's four weight rows j .. j + 3 against one row of X (a greedy
 * step), the same arithmetic as the many-row loop with the sum in a
 * register and each weight row's products formed right after its weights
 * load: in the many-row loop V8 keeps the sixteen widened weight vectors
 * of a quad on the stack for every block. */
static inline void
gemv_q8_quad (wk_type type, const unsigned char *r0, size_t row_bytes,
    int64_t nb, const int16_t * xw, const float *xd, float *y,
    const float *bias, int64_t j, unsigned flags)
{
  v128_t acc = wasm_f32x4_splat (0.0f), nonfinite = wasm_i32x4_splat (0);
  int64_t b;
  int pass;

  for (pass = 0; pass < 2; pass++) {
    acc = wasm_f32x4_splat (0.0f);
    for (b = 0; b < nb; b++) {
      v128_t xs[4], s[4], w0, w1, d4, x;
      int q;
      load_x32 (xw + b * WK_QK, xs);
      for (q = 0; q < 4; q++) {
        block_qs (type, r0 + (size_t) q * row_bytes, b, &w0, &w1);
        s[q] = dot_i8x32 (w0, w1, xs);
      }
      x = sum_lanes4 (s[0], s[1], s[2], s[3]);
      d4 = pass == 0 ? scales4_finite (type, r0, row_bytes, b, &nonfinite) :
          scales4 (type, r0, row_bytes, b);
      acc = wasm_f32x4_add (acc, wasm_f32x4_mul (wasm_f32x4_convert_i32x4
              (x), wasm_f32x4_mul (d4, wasm_f32x4_splat (xd[b]))));
    }
    if (wasm_i32x4_all_true (wasm_i32x4_ne (nonfinite,
                wasm_i32x4_splat (0x7c000000))))
      break;
  }
  store4 (y + j, acc, bias, j, 4, flags);
}

/* rows of X per pass over the weights: every step of a beam search up
 * to 7 wide (the quantized path's rows, below WK_LINEAR_GEMM_ROWS) */
#define GMR 8

static void
gemv_q8 (const wk_tensor * W, const float *bias, const float *X, int64_t n,
    int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1, unsigned flags)
{
  /* 400 KiB on the stack (web/meson.build gives the module 8 MiB) */
  int8_t xq[GMR][WK_LINEAR_QMAX_K];
  int16_t xw[GMR][WK_LINEAR_QMAX_K];
  float xd[GMR][WK_LINEAR_QMAX_K / WK_QK];
  const int64_t k = W->ne[0], nb = k / WK_QK;
  const size_t row_bytes = wk_type_row_bytes (W->type, k);
  const unsigned char *data = W->data;
  int64_t i0, j, b;
  int r, q;

  for (i0 = 0; i0 < n; i0 += GMR) {
    int nx = (int) (n - i0 < GMR ? n - i0 : GMR);
    for (r = 0; r < nx; r++) {
      wk_quantize_act (X + (i0 + r) * ldx, k, xq[r], xd[r]);
      widen_row (xq[r], k, xw[r]);
    }
    j = j0;
    /* four weight rows at once, each block's four integer sums of a row
     * of X reduced across lanes into one vector (lane q: row j + q) and
     * scaled by the four rows' block scales converted together, so that
     * the per-block float work is shared by the four rows; the weights
     * are loaded once for all the rows of X, and each row's arithmetic is
     * what it would be alone (test_few_rows_match_one_row). The scales
     * take the short conversion; where one is not finite, the four rows
     * again with the full one. One row of X: gemv_q8_quad, inlined with
     * the type a constant. */
    for (; nx == 1 && j + 4 <= j1; j += 4) {
      const unsigned char *r0 = data + (size_t) j * row_bytes;
      if (W->type == WK_TYPE_Q8_0)
        gemv_q8_quad (WK_TYPE_Q8_0, r0, row_bytes, nb, xw[0], xd[0],
            Y + i0 * ldy, bias, j, flags);
      else
        gemv_q8_quad (WK_TYPE_Q4_0, r0, row_bytes, nb, xw[0], xd[0],
            Y + i0 * ldy, bias, j, flags);
    }
    for (; j + 4 <= j1; j += 4) {
      const unsigned char *r0 = data + (size_t) j * row_bytes;
      v128_t acc[GMR], nonfinite = wasm_i32x4_splat (0);
      int pass;
      for (pass = 0; pass < 2; pass++) {
        for (r = 0; r < nx; r++)
          acc[r] = wasm_f32x4_splat (0.0f);
        for (b = 0; b < nb; b++) {
          v128_t w0[4], w1[4], d4;
          for (q = 0; q < 4; q++)
            block_qs (W->type, r0 + (size_t) q * row_bytes, b, &w0[q], &w1[q]);
          d4 = pass == 0 ? scales4_finite (W->type, r0, row_bytes, b,
              &nonfinite) : scales4 (W->type, r0, row_bytes, b);
          for (r = 0; r < nx; r++) {
            v128_t xs[4], s0;
            load_x32 (xw[r] + b * WK_QK, xs);
            s0 = sum_lanes4 (dot_i8x32 (w0[0], w1[0], xs),
                dot_i8x32 (w0[1], w1[1], xs), dot_i8x32 (w0[2], w1[2], xs),
                dot_i8x32 (w0[3], w1[3], xs));
            acc[r] = wasm_f32x4_add (acc[r], wasm_f32x4_mul
                (wasm_f32x4_convert_i32x4 (s0), wasm_f32x4_mul (d4,
                        wasm_f32x4_splat (xd[r][b]))));
          }
        }
        if (wasm_i32x4_all_true (wasm_i32x4_ne (nonfinite,
                    wasm_i32x4_splat (0x7c000000))))
          break;
      }
      for (r = 0; r < nx; r++)
        store4 (Y + (i0 + r) * ldy + j, acc[r], bias, j, 4, flags);
    }
    for (; j < j1; j += QROWS) {
      int nj = (int) (j1 - j < QROWS ? j1 - j : QROWS);
      v128_t acc[QROWS][GMR];
      for (q = 0; q < QROWS; q++)
        for (r = 0; r < GMR; r++)
          acc[q][r] = wasm_f32x4_splat (0.0f);
      for (b = 0; b < nb; b++) {
        v128_t w0[QROWS], w1[QROWS];
        float dw[QROWS];
        for (q = 0; q < nj; q++)
          dw[q] = block_i8 (W->type, data + (size_t) (j + q) * row_bytes, b,
              &w0[q], &w1[q]);
        for (r = 0; r < nx; r++) {
          v128_t xs[4];
          load_x32 (xw[r] + b * WK_QK, xs);
          for (q = 0; q < nj; q++)
            acc[q][r] =
                wasm_f32x4_add (acc[q][r],
                wasm_f32x4_mul (wasm_f32x4_convert_i32x4 (dot_i8x32 (w0[q],
                            w1[q], xs)), wasm_f32x4_splat (dw[q] * xd[r][b])));
        }
      }
      for (q = 0; q < nj; q++)
        for (r = 0; r < nx; r++) {
          v128_t v = wasm_f32x4_make (hsum (acc[q][r]), 0, 0, 0);
          store4 (Y + (i0 + r) * ldy + j + q, v, bias, j + q, 1, flags);
        }
    }
  }
}

static void
wasm_linear (const wk_tensor * W, const float *bias, const float *X,
    int64_t n, int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1,
    unsigned flags, int act_q8)
{
  const int64_t k = W->ne[0];
  int block = W->type == WK_TYPE_Q8_0 || W->type == WK_TYPE_Q4_0;

  if (wk_type_row_bytes (W->type, k) == 0 || j0 >= j1)
    return;
  /* types this file does not convert, and ragged f16 depths inside a
   * chunk, take the reference */
  if (W->type != WK_TYPE_F32 && W->type != WK_TYPE_F16 && !block) {
    wk_kernels_ref.linear (W, bias, X, n, ldx, Y, ldy, j0, j1, flags, act_q8);
    return;
  }
  if (act_q8)
    gemv_q8 (W, bias, X, n, ldx, Y, ldy, j0, j1, flags);
  else if (n >= WK_LINEAR_GEMM_ROWS)
    gemm (W, bias, X, n, ldx, Y, ldy, j0, j1, flags);
  else
    gemv (W, bias, X, n, ldx, Y, ldy, j0, j1, flags);
}

/* ---- f32 products ---- */

static void
wasm_gemm_f32 (int b_trans, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
    int64_t k, float alpha, const float *A, int64_t lda, const float *B,
    int64_t ldb, float *C, int64_t ldc)
{
  int64_t i, j, l;

  for (i = i0; i < i1; i++) {
    const float *a = A + i * lda;
    float *c = C + i * ldc;
    if (b_trans) {
      for (j = j0; j < j1; j++) {
        const float *b = B + j * ldb;
        v128_t acc = wasm_f32x4_splat (0.0f);
        float s;
        for (l = 0; l + 4 <= k; l += 4)
          acc = wasm_f32x4_add (acc, wasm_f32x4_mul (wasm_v128_load (a + l),
                  wasm_v128_load (b + l)));
        s = hsum (acc);
        for (; l < k; l++)
          s += a[l] * b[l];
        c[j] = s * alpha;
      }
    } else {
      for (j = j0; j + 4 <= j1; j += 4) {
        v128_t acc = wasm_f32x4_splat (0.0f);
        for (l = 0; l < k; l++)
          acc = wasm_f32x4_add (acc, wasm_f32x4_mul (wasm_f32x4_splat (a[l]),
                  wasm_v128_load (B + l * ldb + j)));
        wasm_v128_store (c + j, wasm_f32x4_mul (acc, wasm_f32x4_splat (alpha)));
      }
      for (; j < j1; j++) {
        float s = 0.0f;
        for (l = 0; l < k; l++)
          s += a[l] * B[l * ldb + j];
        c[j] = s * alpha;
      }
    }
  }
}

/* ---- attention ---- */

#define AQ 4                    /* queries per pass over the keys */
#define AK 64                   /* keys per chunk */

/* Row t of K or V as f32 (d_head a multiple of 4; f16 rows converted
 * into buf). */
static inline const float *
kv_row (const void *p, int64_t t, int64_t ld, int64_t d, int kv16, float *buf)
{
  int64_t l;

  if (!kv16)
    return (const float *) p + t * ld;
  {
    const uint16_t *h = (const uint16_t *) p + t * ld;
    for (l = 0; l + 8 <= d; l += 8)
      f16x8_to_f32 (h + l, buf + l);
    for (; l < d; l++)
      buf[l] = wk_fp16_to_fp32 (h[l]);
  }
  return buf;
}

/* Eight K or V values of row t from column l as two f32 vectors (f16
 * converted in registers). */
static inline void
kv_load8 (const void *p, int64_t off, int kv16, v128_t * lo, v128_t * hi)
{
  if (kv16) {
    v128_t h = wasm_v128_load ((const uint16_t *) p + off);
    *lo = f16x4_to_f32 (wasm_u32x4_extend_low_u16x8 (h));
    *hi = f16x4_to_f32 (wasm_u32x4_extend_high_u16x8 (h));
  } else {
    *lo = wasm_v128_load ((const float *) p + off);
    *hi = wasm_v128_load ((const float *) p + off + 4);
  }
}

/* Eight K or V values as kv_load8, f16 by f16x8_to_f32_finite's shifts
 * (four instructions per four values against nine): the lanes holding an
 * infinity or NaN are added to *nonfinite, and the caller does its work
 * again with kv_load8. */
static inline void
kv_load8_fast (const void *p, int64_t off, int kv16, v128_t * lo,
    v128_t * hi, v128_t * nonfinite)
{
  if (kv16) {
    const v128_t zero = wasm_i32x4_splat (0);
    const v128_t mask = wasm_i32x4_splat ((int32_t) 0x8fffe000u);
    const v128_t rebias = wasm_i32x4_splat (0x77800000);        /* 2^112 */
    v128_t v = wasm_v128_load ((const uint16_t *) p + off);
    v128_t l = wasm_i16x8_shuffle (zero, v, 0, 8, 1, 9, 2, 10, 3, 11);
    v128_t h = wasm_i16x8_shuffle (zero, v, 4, 12, 5, 13, 6, 14, 7, 15);
    *nonfinite = wasm_v128_or (*nonfinite,
        wasm_i16x8_eq (wasm_v128_and (v, wasm_i16x8_splat (0x7c00)),
            wasm_i16x8_splat (0x7c00)));
    *lo = wasm_f32x4_mul (wasm_v128_and (wasm_i32x4_shr (l, 3), mask), rebias);
    *hi = wasm_f32x4_mul (wasm_v128_and (wasm_i32x4_shr (h, 3), mask), rebias);
  } else {
    *lo = wasm_v128_load ((const float *) p + off);
    *hi = wasm_v128_load ((const float *) p + off + 4);
  }
}

/* One chunk of nk scores s of an online softmax (cmax: their largest):
 * the accumulator acc (d_head floats) and the running sum rescaled to a
 * new maximum mx, then s turned into exp (s - mx) and added to the sum. */
static inline void
softmax_chunk (float *s, int nk, float cmax, float *acc, int64_t d_head,
    float *mx, float *sum)
{
  v128_t m4, ps = wasm_f32x4_splat (0.0f);
  int64_t l;
  int c;

  if (cmax > *mx) {
    float rs = *mx == -INFINITY ? 0.0f : expf (*mx - cmax);
    for (l = 0; l < d_head; l += 4)
      wasm_v128_store (acc + l, wasm_f32x4_mul (wasm_v128_load (acc + l),
              wasm_f32x4_splat (rs)));
    *sum *= rs;
    *mx = cmax;
  }
  m4 = wasm_f32x4_splat (*mx);
  for (c = 0; c + 4 <= nk; c += 4) {
    v128_t p = exp4 (wasm_f32x4_sub (wasm_v128_load (s + c), m4));
    wasm_v128_store (s + c, p);
    ps = wasm_f32x4_add (ps, p);
  }
  *sum += hsum (ps);
  for (; c < nk; c++) {
    s[c] = expf (s[c] - *mx);
    *sum += s[c];
  }
}

/* One query (a greedy decoder step), d_head a multiple of 8: f16 keys and
 * values converted as they are used (by the shifts of kv_load8_fast; when
 * a key or value is not finite, everything again with kv_load8), two
 * keys per pass over the sums. */
static inline void
attention_one_pass (int64_t d_head, int64_t i, int64_t n_q, int64_t n_kv,
    const float *Q, int64_t ldq, const void *K, int64_t ldk, const void *V,
    int64_t ldv, float scale, int causal, float *O, int64_t ldo, int kv16,
    int fast, v128_t * nonfinite)
{
  float acc[256];
  float s[AK];
  const float *q = Q + i * ldq;
  const int64_t last = wk_attention_last_key (i, n_q, n_kv, causal);
  float mx = -INFINITY, sum = 0.0f;
  int64_t t0, l;

  memset (acc, 0, (size_t) d_head * sizeof (float));
  for (t0 = 0; t0 <= last; t0 += AK) {
    int nk = (int) (last + 1 - t0 < AK ? last + 1 - t0 : AK), c;
    float cmax = -INFINITY;

    for (c = 0; c < nk; c++) {
      v128_t a0 = wasm_f32x4_splat (0.0f), a1 = a0, k0, k1;
      for (l = 0; l < d_head; l += 8) {
        if (fast)
          kv_load8_fast (K, (t0 + c) * ldk + l, kv16, &k0, &k1, nonfinite);
        else
          kv_load8 (K, (t0 + c) * ldk + l, kv16, &k0, &k1);
        a0 = wasm_f32x4_add (a0, wasm_f32x4_mul (k0, wasm_v128_load (q + l)));
        a1 = wasm_f32x4_add (a1, wasm_f32x4_mul (k1, wasm_v128_load (q + l +
                    4)));
      }
      s[c] = hsum (wasm_f32x4_add (a0, a1)) * scale;
      cmax = s[c] > cmax ? s[c] : cmax;
    }
    softmax_chunk (s, nk, cmax, acc, d_head, &mx, &sum);

    for (c = 0; c < nk; c += 2) {
      v128_t p0 = wasm_f32x4_splat (s[c]);
      v128_t p1 = wasm_f32x4_splat (c + 1 < nk ? s[c + 1] : 0.0f);
      int64_t t1 = c + 1 < nk ? t0 + c + 1 : t0 + c;
      for (l = 0; l < d_head; l += 8) {
        v128_t u0, u1, w0, w1;
        if (fast) {
          kv_load8_fast (V, (t0 + c) * ldv + l, kv16, &u0, &u1, nonfinite);
          kv_load8_fast (V, t1 * ldv + l, kv16, &w0, &w1, nonfinite);
        } else {
          kv_load8 (V, (t0 + c) * ldv + l, kv16, &u0, &u1);
          kv_load8 (V, t1 * ldv + l, kv16, &w0, &w1);
        }
        wasm_v128_store (acc + l, wasm_f32x4_add (wasm_v128_load (acc + l),
                wasm_f32x4_add (wasm_f32x4_mul (p0, u0), wasm_f32x4_mul (p1,
                        w0))));
        wasm_v128_store (acc + l + 4, wasm_f32x4_add (wasm_v128_load (acc + l
                    + 4), wasm_f32x4_add (wasm_f32x4_mul (p0, u1),
                    wasm_f32x4_mul (p1, w1))));
      }
    }
  }
  {
    float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (l = 0; l < d_head; l++)
      O[i * ldo + l] = acc[l] * inv;
  }
}

/* Heads per pass of attention_heads_one_f32, and their columns. */
#define AH_HEADS 24
#define AH_D 1536

/* One query over f32 keys and values (the decoder's steps: its
 * self-attention cache, and the cross-attention cache where halves are
 * slow, f16kv_slow) for G heads side by side (head h's columns at
 * h d_head in Q, K, V and O; G d_head <= AH_D), d_head a multiple of 8:
 * chunk by chunk of AK keys, the scores of four keys at a time for each
 * head (each slice of q loaded once for the four, their sums reduced
 * across lanes into one vector), each head's running softmax, then p V
 * four keys at a time for each head. Each pass reads four key or value
 * rows whole across the heads rather than a slice of every row per head
 * (as the x86 sets do; in the wasm engine's decoder step the gain was
 * within the noise); every head's arithmetic is the same, in the same
 * order, as with G = 1. */
static void
attention_heads_one_f32 (int G, int64_t d_head, int64_t i, int64_t n_q,
    int64_t n_kv, const float *Q, int64_t ldq, const float *K, int64_t ldk,
    const float *V, int64_t ldv, float scale, int causal, float *O, int64_t ldo)
{
  float acc[AH_D];
  float s[AH_HEADS][AK];
  float mx[AH_HEADS], sum[AH_HEADS];
  const float *q = Q + i * ldq;
  const int64_t last = wk_attention_last_key (i, n_q, n_kv, causal);
  int64_t t0, l;
  int h;

  memset (acc, 0, (size_t) G * d_head * sizeof (float));
  for (h = 0; h < G; h++) {
    mx[h] = -INFINITY;
    sum[h] = 0.0f;
  }
  for (t0 = 0; t0 <= last; t0 += AK) {
    int nk = (int) (last + 1 - t0 < AK ? last + 1 - t0 : AK), c;

    for (c = 0; c + 4 <= nk; c += 4)
      for (h = 0; h < G; h++) {
        const float *qh = q + h * d_head;
        const float *k0 = K + (t0 + c) * ldk + h * d_head, *k1 = k0 + ldk,
            *k2 = k1 + ldk, *k3 = k2 + ldk;
        v128_t a0 = wasm_f32x4_splat (0.0f), a1 = a0, a2 = a0, a3 = a0;
        v128_t t01, t23, sc;
        for (l = 0; l < d_head; l += 4) {
          v128_t qv = wasm_v128_load (qh + l);
          a0 = wasm_f32x4_add (a0, wasm_f32x4_mul (wasm_v128_load (k0 + l),
                  qv));
          a1 = wasm_f32x4_add (a1, wasm_f32x4_mul (wasm_v128_load (k1 + l),
                  qv));
          a2 = wasm_f32x4_add (a2, wasm_f32x4_mul (wasm_v128_load (k2 + l),
                  qv));
          a3 = wasm_f32x4_add (a3, wasm_f32x4_mul (wasm_v128_load (k3 + l),
                  qv));
        }
        t01 = wasm_f32x4_add (wasm_i32x4_shuffle (a0, a1, 0, 1, 4, 5),
            wasm_i32x4_shuffle (a0, a1, 2, 3, 6, 7));
        t23 = wasm_f32x4_add (wasm_i32x4_shuffle (a2, a3, 0, 1, 4, 5),
            wasm_i32x4_shuffle (a2, a3, 2, 3, 6, 7));
        sc = wasm_f32x4_mul (wasm_f32x4_add (wasm_i32x4_shuffle (t01, t23, 0,
                    2, 4, 6), wasm_i32x4_shuffle (t01, t23, 1, 3, 5, 7)),
            wasm_f32x4_splat (scale));
        wasm_v128_store (s[h] + c, sc);
      }
    for (; c < nk; c++)
      for (h = 0; h < G; h++) {
        const float *kr = K + (t0 + c) * ldk + h * d_head;
        v128_t a0 = wasm_f32x4_splat (0.0f);
        for (l = 0; l < d_head; l += 4)
          a0 = wasm_f32x4_add (a0, wasm_f32x4_mul (wasm_v128_load (kr + l),
                  wasm_v128_load (q + h * d_head + l)));
        s[h][c] = hsum (a0) * scale;
      }
    for (h = 0; h < G; h++) {
      float cmax = -INFINITY;
      for (c = 0; c < nk; c++)
        cmax = s[h][c] > cmax ? s[h][c] : cmax;
      softmax_chunk (s[h], nk, cmax, acc + h * d_head, d_head, &mx[h], &sum[h]);
    }

    for (c = 0; c + 4 <= nk; c += 4)
      for (h = 0; h < G; h++) {
        const float *v0 = V + (t0 + c) * ldv + h * d_head, *v1 = v0 + ldv,
            *v2 = v1 + ldv, *v3 = v2 + ldv;
        float *ah = acc + h * d_head;
        v128_t p0 = wasm_f32x4_splat (s[h][c]);
        v128_t p1 = wasm_f32x4_splat (s[h][c + 1]);
        v128_t p2 = wasm_f32x4_splat (s[h][c + 2]);
        v128_t p3 = wasm_f32x4_splat (s[h][c + 3]);
        for (l = 0; l < d_head; l += 4) {
          v128_t o = wasm_v128_load (ah + l);
          o = wasm_f32x4_add (o, wasm_f32x4_add (wasm_f32x4_mul (p0,
                      wasm_v128_load (v0 + l)), wasm_f32x4_mul (p1,
                      wasm_v128_load (v1 + l))));
          o = wasm_f32x4_add (o, wasm_f32x4_add (wasm_f32x4_mul (p2,
                      wasm_v128_load (v2 + l)), wasm_f32x4_mul (p3,
                      wasm_v128_load (v3 + l))));
          wasm_v128_store (ah + l, o);
        }
      }
    for (; c < nk; c++)
      for (h = 0; h < G; h++) {
        const float *vr = V + (t0 + c) * ldv + h * d_head;
        float *ah = acc + h * d_head;
        v128_t p0 = wasm_f32x4_splat (s[h][c]);
        for (l = 0; l < d_head; l += 4)
          wasm_v128_store (ah + l, wasm_f32x4_add (wasm_v128_load (ah + l),
                  wasm_f32x4_mul (p0, wasm_v128_load (vr + l))));
      }
  }
  for (h = 0; h < G; h++) {
    float inv = sum[h] > 0.0f ? 1.0f / sum[h] : 0.0f;
    for (l = 0; l < d_head; l++)
      O[i * ldo + h * d_head + l] = acc[h * d_head + l] * inv;
  }
}

static void
attention_one (int64_t d_head, int64_t i, int64_t n_q, int64_t n_kv,
    const float *Q, int64_t ldq, const void *K, int64_t ldk, const void *V,
    int64_t ldv, float scale, int causal, float *O, int64_t ldo, int kv16)
{
  v128_t nonfinite = wasm_i32x4_splat (0);

  if (!kv16) {
    attention_heads_one_f32 (1, d_head, i, n_q, n_kv, Q, ldq, K, ldk, V, ldv,
        scale, causal, O, ldo);
    return;
  }
  attention_one_pass (d_head, i, n_q, n_kv, Q, ldq, K, ldk, V, ldv, scale,
      causal, O, ldo, kv16, 1, &nonfinite);
  if (kv16 && wasm_v128_any_true (nonfinite))
    attention_one_pass (d_head, i, n_q, n_kv, Q, ldq, K, ldk, V, ldv, scale,
        causal, O, ldo, kv16, 0, &nonfinite);
}

static void
attention_block (int64_t d_head, int64_t q0, int nq, int64_t n_q,
    int64_t n_kv, const float *Q, int64_t ldq, const void *K, int64_t ldk,
    const void *V, int64_t ldv, float scale, int causal, float *O,
    int64_t ldo, int kv16)
{
  float acc[AQ][256];
  float s[AQ][AK];
  float kbuf[256];
  float mx[AQ], sum[AQ];
  int64_t last[AQ], max_last = -1, t0, l;
  int r;

  for (r = 0; r < nq; r++) {
    last[r] = wk_attention_last_key (q0 + r, n_q, n_kv, causal);
    if (last[r] > max_last)
      max_last = last[r];
    mx[r] = -INFINITY;
    sum[r] = 0.0f;
    memset (acc[r], 0, (size_t) d_head * sizeof (float));
  }

  for (t0 = 0; t0 <= max_last; t0 += AK) {
    int nk = (int) (max_last + 1 - t0 < AK ? max_last + 1 - t0 : AK), c;

    /* scores */
    for (c = 0; c < nk; c++) {
      const float *kr = kv_row (K, t0 + c, ldk, d_head, kv16, kbuf);
      v128_t a[AQ];
      for (r = 0; r < AQ; r++)
        a[r] = wasm_f32x4_splat (0.0f);
      for (l = 0; l < d_head; l += 4) {
        v128_t kv = wasm_v128_load (kr + l);
        for (r = 0; r < nq; r++)
          a[r] = wasm_f32x4_add (a[r], wasm_f32x4_mul (kv,
                  wasm_v128_load (Q + (q0 + r) * ldq + l)));
      }
      for (r = 0; r < nq; r++)
        s[r][c] = t0 + c <= last[r] ? hsum (a[r]) * scale : -INFINITY;
    }

    /* running softmax: rescale by the new maximum, p = exp (s - max) */
    for (r = 0; r < nq; r++) {
      float cmax = -INFINITY, rs;
      v128_t m4, ps = wasm_f32x4_splat (0.0f);
      for (c = 0; c < nk; c++)
        cmax = s[r][c] > cmax ? s[r][c] : cmax;
      if (cmax == -INFINITY) {
        /* no key of this chunk is visible to this query */
        for (c = 0; c < nk; c++)
          s[r][c] = 0.0f;
        continue;
      }
      if (cmax > mx[r]) {
        rs = mx[r] == -INFINITY ? 0.0f : expf (mx[r] - cmax);
        for (l = 0; l < d_head; l += 4)
          wasm_v128_store (acc[r] + l, wasm_f32x4_mul (wasm_v128_load (acc[r]
                      + l), wasm_f32x4_splat (rs)));
        sum[r] *= rs;
        mx[r] = cmax;
      }
      m4 = wasm_f32x4_splat (mx[r]);
      for (c = 0; c + 4 <= nk; c += 4) {
        v128_t p = exp4 (wasm_f32x4_sub (wasm_v128_load (s[r] + c), m4));
        wasm_v128_store (s[r] + c, p);
        ps = wasm_f32x4_add (ps, p);
      }
      sum[r] += hsum (ps);
      for (; c < nk; c++) {
        s[r][c] = s[r][c] == -INFINITY ? 0.0f : expf (s[r][c] - mx[r]);
        sum[r] += s[r][c];
      }
    }

    /* acc += p V */
    for (c = 0; c < nk; c++) {
      const float *vr = kv_row (V, t0 + c, ldv, d_head, kv16, kbuf);
      for (r = 0; r < nq; r++) {
        v128_t p;
        if (s[r][c] == 0.0f)
          continue;
        p = wasm_f32x4_splat (s[r][c]);
        for (l = 0; l < d_head; l += 4)
          wasm_v128_store (acc[r] + l, wasm_f32x4_add (wasm_v128_load (acc[r]
                      + l), wasm_f32x4_mul (p, wasm_v128_load (vr + l))));
      }
    }
  }

  for (r = 0; r < nq; r++) {
    float inv = sum[r] > 0.0f ? 1.0f / sum[r] : 0.0f;
    for (l = 0; l < d_head; l++)
      O[(q0 + r) * ldo + l] = acc[r][l] * inv;
  }
}

/* C [4][8] = (first ? 0 : C) + sum_{t < kc} a_r[t * as] B [t][0 .. 8) for
 * r < 4, B rows ldb floats apart, C rows ldc apart (the attention's
 * products; as is a constant where it is inlined). */
static inline void
mk4x8 (int kc, const float *a0, const float *a1, const float *a2,
    const float *a3, int64_t as, const float *B, int64_t ldb, float *C,
    int64_t ldc, int first)
{
  v128_t c00, c01, c10, c11, c20, c21, c30, c31;
  int t;

  if (first) {
    c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = wasm_f32x4_splat (0.0f);
  } else {
    c00 = wasm_v128_load (C), c01 = wasm_v128_load (C + 4);
    c10 = wasm_v128_load (C + ldc), c11 = wasm_v128_load (C + ldc + 4);
    c20 = wasm_v128_load (C + 2 * ldc), c21 = wasm_v128_load (C + 2 * ldc + 4);
    c30 = wasm_v128_load (C + 3 * ldc), c31 = wasm_v128_load (C + 3 * ldc + 4);
  }
  for (t = 0; t < kc; t++) {
    v128_t b0 = wasm_v128_load (B + t * ldb);
    v128_t b1 = wasm_v128_load (B + t * ldb + 4);
    v128_t x0 = wasm_v128_load32_splat (a0 + t * as);
    v128_t x1 = wasm_v128_load32_splat (a1 + t * as);
    v128_t x2 = wasm_v128_load32_splat (a2 + t * as);
    v128_t x3 = wasm_v128_load32_splat (a3 + t * as);
    c00 = wasm_f32x4_add (c00, wasm_f32x4_mul (x0, b0));
    c01 = wasm_f32x4_add (c01, wasm_f32x4_mul (x0, b1));
    c10 = wasm_f32x4_add (c10, wasm_f32x4_mul (x1, b0));
    c11 = wasm_f32x4_add (c11, wasm_f32x4_mul (x1, b1));
    c20 = wasm_f32x4_add (c20, wasm_f32x4_mul (x2, b0));
    c21 = wasm_f32x4_add (c21, wasm_f32x4_mul (x2, b1));
    c30 = wasm_f32x4_add (c30, wasm_f32x4_mul (x3, b0));
    c31 = wasm_f32x4_add (c31, wasm_f32x4_mul (x3, b1));
  }
  wasm_v128_store (C, c00);
  wasm_v128_store (C + 4, c01);
  wasm_v128_store (C + ldc, c10);
  wasm_v128_store (C + ldc + 4, c11);
  wasm_v128_store (C + 2 * ldc, c20);
  wasm_v128_store (C + 2 * ldc + 4, c21);
  wasm_v128_store (C + 3 * ldc, c30);
  wasm_v128_store (C + 3 * ldc + 4, c31);
}

#define BQ 32                   /* queries per block (many-query case) */
#define BK 64                   /* keys per chunk */

/* Many queries (the encoder): per block of BQ queries and chunk of BK
 * keys, the scores are computed key-major, St [key][query] = K Q^T (the
 * block's queries transposed once, times the scale), so that the running
 * softmax works on four queries per vector (column maxima, exp, sums,
 * no horizontal reductions) and acc += P V takes its broadcasts straight
 * from St. Both products on the 4 x 8 kernel; d_head a multiple of 8, at
 * most 256. */
static void
attention_gemm_block (int64_t d_head, int64_t q0, int nq, int64_t n_q,
    int64_t n_kv, const float *Q, int64_t ldq, const void *K, int64_t ldk,
    const void *V, int64_t ldv, float scale, int causal, float *O,
    int64_t ldo, int kv16)
{
  float Qt[256][BQ];            /* scale Q^T; columns past nq zero */
  float St[BK][BQ];             /* scores, then probabilities */
  float acc[BQ][256];
  float Kb[BK][256];            /* f16 keys and values as f32 */
  float Vb[BK][256];
  static const float zeros[256];
  const float *krow[BK];
  v128_t mx[BQ / 4], sum[BQ / 4], lastv[BQ / 4];
  int32_t last[BQ];
  int64_t max_last = -1, min_last = INT64_MAX, t0;
  const int d = (int) d_head;
  const int nq8 = (nq + 7) & ~7, nq4 = (nq + 3) & ~3, nv = nq8 / 4;
  int r, c, j, v, l;

  for (r = 0; r < BQ; r++) {
    int64_t lk = r < nq ? wk_attention_last_key (q0 + r, n_q, n_kv,
        causal) : -1;
    last[r] = (int32_t) lk;
    if (r < nq && lk > max_last)
      max_last = lk;
    if (r < nq && lk < min_last)
      min_last = lk;
  }
  for (v = 0; v < nv; v++) {
    mx[v] = wasm_f32x4_splat (-INFINITY);
    sum[v] = wasm_f32x4_splat (0.0f);
    lastv[v] = wasm_v128_load (last + 4 * v);
  }
  for (l = 0; l < d; l++) {
    for (r = 0; r < nq; r++)
      Qt[l][r] = Q[(q0 + r) * ldq + l] * scale;
    for (; r < nq8; r++)
      Qt[l][r] = 0.0f;
  }
  for (r = 0; r < nq4; r++)
    memset (acc[r], 0, (size_t) d * sizeof (float));

  for (t0 = 0; t0 <= max_last; t0 += BK) {
    const int nk = (int) (max_last + 1 - t0 < BK ? max_last + 1 - t0 : BK);
    const int nk4 = (nk + 3) & ~3;
    const float *vsrc;
    int64_t vld;

    /* St = K Q^T (key rows past nk are zeros, never used) */
    for (c = 0; c < nk4; c++)
      krow[c] = c < nk ? kv_row (K, t0 + c, ldk, d_head, kv16, Kb[c]) : zeros;
    for (c = 0; c < nk4; c += 4)
      for (j = 0; j < nq8; j += 8)
        mk4x8 (d, krow[c], krow[c + 1], krow[c + 2], krow[c + 3], 1,
            &Qt[0][j], BQ, &St[c][j], BQ, 1);

    /* keys past a query's last one */
    if (t0 + nk - 1 > min_last)
      for (c = 0; c < nk; c++) {
        v128_t tv = wasm_i32x4_splat ((int32_t) (t0 + c));
        for (v = 0; v < nv; v++)
          wasm_v128_store (&St[c][4 * v],
              wasm_v128_bitselect (wasm_f32x4_splat (-INFINITY),
                  wasm_v128_load (&St[c][4 * v]), wasm_i32x4_gt (tv,
                      lastv[v])));
      }

    /* the running softmax, four queries per vector: rescale by the new
     * maximum (a query that has seen no key yet keeps -inf and
     * subtracts 0), p = exp (s - max) */
    for (v = 0; v < nv; v++) {
      v128_t cm = wasm_f32x4_splat (-INFINITY), mnew, msub, rs;
      v128_t ps = wasm_f32x4_splat (0.0f);
      for (c = 0; c < nk; c++)
        cm = wasm_f32x4_pmax (cm, wasm_v128_load (&St[c][4 * v]));
      mnew = wasm_f32x4_pmax (mx[v], cm);
      msub = wasm_v128_andnot (mnew, wasm_f32x4_eq (mnew,
              wasm_f32x4_splat (-INFINITY)));
      rs = exp4_le0 (wasm_f32x4_sub (mx[v], msub));
      if (!wasm_i32x4_all_true (wasm_f32x4_eq (rs, wasm_f32x4_splat (1.0f)))) {
        float f[4];
        wasm_v128_store (f, rs);
        for (r = 0; r < 4 && 4 * v + r < nq4; r++)
          for (l = 0; l < d; l += 4)
            wasm_v128_store (acc[4 * v + r] + l,
                wasm_f32x4_mul (wasm_v128_load (acc[4 * v + r] + l),
                    wasm_f32x4_splat (f[r])));
      }
      sum[v] = wasm_f32x4_mul (sum[v], rs);
      mx[v] = mnew;
      for (c = 0; c < nk; c++) {
        v128_t p = exp4_le0 (wasm_f32x4_sub (wasm_v128_load (&St[c][4 * v]),
                msub));
        wasm_v128_store (&St[c][4 * v], p);
        ps = wasm_f32x4_add (ps, p);
      }
      sum[v] = wasm_f32x4_add (sum[v], ps);
    }

    /* acc += P V */
    if (kv16) {
      for (c = 0; c < nk; c++)
        kv_row (V, t0 + c, ldv, d_head, kv16, Vb[c]);
      vsrc = &Vb[0][0];
      vld = 256;
    } else {
      vsrc = (const float *) V + t0 * ldv;
      vld = ldv;
    }
    for (r = 0; r < nq4; r += 4)
      for (l = 0; l < d; l += 8)
        mk4x8 (nk, &St[0][r], &St[0][r + 1], &St[0][r + 2], &St[0][r + 3],
            BQ, vsrc + l, vld, &acc[r][l], 256, 0);
  }

  for (v = 0; v < nv; v++) {
    float s[4];
    wasm_v128_store (s, sum[v]);
    for (r = 0; r < 4 && 4 * v + r < nq; r++) {
      float inv = s[r] > 0.0f ? 1.0f / s[r] : 0.0f;
      for (l = 0; l < d; l++)
        O[(q0 + 4 * v + r) * ldo + l] = acc[4 * v + r][l] * inv;
    }
  }
}

static void
attention_any (int64_t d_head, int64_t q0, int64_t q1, int64_t n_q,
    int64_t n_kv, const float *Q, int64_t ldq, const void *K, int64_t ldk,
    const void *V, int64_t ldv, float scale, int causal, float *O,
    int64_t ldo, int kv16)
{
  int64_t i;

  if (d_head % 8 == 0 && q1 - q0 == 1) {
    attention_one (d_head, q0, n_q, n_kv, Q, ldq, K, ldk, V, ldv, scale,
        causal, O, ldo, kv16);
    return;
  }
  if (d_head % 8 == 0 && q1 - q0 > AQ) {
    for (i = q0; i < q1; i += BQ)
      attention_gemm_block (d_head, i, (int) (q1 - i < BQ ? q1 - i : BQ),
          n_q, n_kv, Q, ldq, K, ldk, V, ldv, scale, causal, O, ldo, kv16);
    return;
  }
  for (i = q0; i < q1; i += AQ) {
    int nq = (int) (q1 - i < AQ ? q1 - i : AQ);
    attention_block (d_head, i, nq, n_q, n_kv, Q, ldq, K, ldk, V, ldv, scale,
        causal, O, ldo, kv16);
  }
}

static void
wasm_attention_head (int64_t d_head, int64_t q0, int64_t q1, int64_t n_q,
    int64_t n_kv, const float *Q, int64_t ldq, const float *K, int64_t ldk,
    const float *V, int64_t ldv, float scale, int causal, float *O, int64_t ldo)
{
  if (d_head % 4 != 0) {
    wk_kernels_ref.attention_head (d_head, q0, q1, n_q, n_kv, Q, ldq, K, ldk,
        V, ldv, scale, causal, O, ldo);
    return;
  }
  attention_any (d_head, q0, q1, n_q, n_kv, Q, ldq, K, ldk, V, ldv, scale,
      causal, O, ldo, 0);
}

static void
wasm_attention_head_f16kv (int64_t d_head, int64_t q0, int64_t q1,
    int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq,
    const uint16_t * K, int64_t ldk, const uint16_t * V, int64_t ldv,
    float scale, int causal, float *O, int64_t ldo)
{
  if (d_head % 4 != 0) {
    wk_kernels_ref.attention_head_f16kv (d_head, q0, q1, n_q, n_kv, Q, ldq,
        K, ldk, V, ldv, scale, causal, O, ldo);
    return;
  }
  attention_any (d_head, q0, q1, n_q, n_kv, Q, ldq, K, ldk, V, ldv, scale,
      causal, O, ldo, 1);
}

/* A step's few queries over several heads (wk_attention's few-query
 * entry): one query over f32 keys and values with d_head a multiple of 8
 * through attention_heads_one_f32, up to AH_HEADS heads a pass; anything
 * else is the caller's, head by head (2-4 queries in attention_block,
 * which reads each key once for all of them). */
static int
wasm_attention_heads (int h0, int h1, int64_t d_head, int64_t q0,
    int64_t q1, int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq,
    const void *K, int64_t ldk, const void *V, int64_t ldv, float scale,
    int causal, float *O, int64_t ldo, int kv16)
{
  int gmax = (int) (AH_D / (d_head > 0 ? d_head : 1)), h;
  int64_t i;

  if (gmax > AH_HEADS)
    gmax = AH_HEADS;
  if (kv16 || d_head % 8 != 0 || d_head > 256 || q1 - q0 > 1)
    return 0;
  for (i = q0; i < q1; i++)
    for (h = h0; h < h1; h += gmax) {
      int g = h1 - h < gmax ? h1 - h : gmax;
      int64_t off = (int64_t) h * d_head;
      attention_heads_one_f32 (g, d_head, i, n_q, n_kv, Q + off, ldq,
          (const float *) K + off, ldk, (const float *) V + off, ldv, scale,
          causal, O + off, ldo);
    }
  return 1;
}

/* ---- element-wise ---- */

/* |x| rounded to half precision and back, as f32 bits (wk_fp32_to_fp16
 * then wk_fp16_to_fp32, bit for bit), from ax = the bits of |x|:
 * - normal halves (|x| >= 2^-14): the low 13 mantissa bits rounded off
 *   to nearest even in the integer bits (a carry moves into the
 *   exponent, as the reference's does);
 * - subnormal halves: (|x| + 0.5) - 0.5 in f32, whose addition rounds to
 *   a multiple of 2^-24 (the halves' step there) to nearest even, and the
 *   subtraction is exact;
 * - 65520 and above (after rounding) become infinity; NaNs keep the top
 *   ten payload bits, 0x200 where those are zero (never infinity). */
static inline v128_t
round_f16_abs4 (v128_t ax)
{
  const v128_t inf = wasm_i32x4_splat (0x7f800000);
  v128_t odd = wasm_v128_and (wasm_u32x4_shr (ax, 13), wasm_i32x4_splat (1));
  v128_t rn = wasm_v128_and (wasm_i32x4_add (wasm_i32x4_add (ax,
              wasm_i32x4_splat (0xfff)), odd), wasm_i32x4_splat (~0x1fff));
  v128_t rs = wasm_f32x4_sub (wasm_f32x4_add (ax, wasm_f32x4_splat (0.5f)),
      wasm_f32x4_splat (0.5f));
  v128_t pay = wasm_v128_and (ax, wasm_i32x4_splat (0x7fe000));
  v128_t nan = wasm_v128_or (wasm_v128_or (inf, pay),
      wasm_v128_and (wasm_i32x4_eq (pay, wasm_i32x4_splat (0)),
          wasm_i32x4_splat (0x400000)));
  v128_t r = wasm_v128_bitselect (rs, rn, wasm_i32x4_lt (ax,
          wasm_i32x4_splat (0x38800000)));
  /* unsigned: ax + 0x1000 passes 2^31 for NaNs */
  r = wasm_v128_bitselect (inf, r, wasm_u32x4_ge (rn,
          wasm_i32x4_splat (0x47800000)));
  return wasm_v128_bitselect (nan, r, wasm_i32x4_gt (ax, inf));
}

/* Four f32 as IEEE halves (in the low 16 bits of i32 lanes), bit for bit
 * as wk_fp32_to_fp16: round_f16_abs4's value, whose half bits are its
 * exponent rebiased (normal), its multiple of 2^-24 (subnormal: the bits
 * of r + 0.5 past those of 0.5) or 0x7c00 and the payload. */
static inline v128_t
f32x4_to_f16x4 (v128_t x)
{
  v128_t sign = wasm_v128_and (x, wasm_i32x4_splat ((int32_t) 0x80000000u));
  v128_t r = round_f16_abs4 (wasm_v128_xor (x, sign));
  v128_t hn = wasm_i32x4_sub (wasm_u32x4_shr (r, 13),
      wasm_i32x4_splat (112 << 10));
  v128_t hs = wasm_i32x4_sub (wasm_f32x4_add (r, wasm_f32x4_splat (0.5f)),
      wasm_i32x4_splat (0x3f000000));
  v128_t hi = wasm_v128_or (wasm_i32x4_splat (0x7c00),
      wasm_v128_and (wasm_u32x4_shr (r, 13), wasm_i32x4_splat (0x3ff)));
  v128_t h = wasm_v128_bitselect (hs, hn, wasm_i32x4_lt (r,
          wasm_i32x4_splat (0x38800000)));
  h = wasm_v128_bitselect (hi, h, wasm_i32x4_ge (r,
          wasm_i32x4_splat (0x7f800000)));
  return wasm_v128_or (h, wasm_u32x4_shr (sign, 16));
}

static void
wasm_f32_to_f16 (const float *x, uint16_t * y, int64_t n)
{
  int64_t i;

  for (i = 0; i + 8 <= n; i += 8)
    wasm_v128_store (y + i,
        wasm_u16x8_narrow_i32x4 (f32x4_to_f16x4 (wasm_v128_load (x + i)),
            f32x4_to_f16x4 (wasm_v128_load (x + i + 4))));
  for (; i < n; i++)
    y[i] = wk_fp32_to_fp16 (x[i]);
}

/* The cross-attention cache rounded in place, once per window (about 5
 * million values on the default model). */
void
wasm_round_f16 (float *x, int64_t n)
{
  const v128_t sm = wasm_i32x4_splat ((int32_t) 0x80000000u);
  int64_t i;

  for (i = 0; i + 4 <= n; i += 4) {
    v128_t v = wasm_v128_load (x + i);
    v128_t sign = wasm_v128_and (v, sm);
    wasm_v128_store (x + i, wasm_v128_or (sign,
            round_f16_abs4 (wasm_v128_xor (v, sign))));
  }
  for (; i < n; i++)
    x[i] = wk_fp16_to_fp32 (wk_fp32_to_fp16 (x[i]));
}

/* wk_find_gt: 16 values per test, then the first of them */
static int64_t
wasm_find_gt (const float *x, int64_t n, float t)
{
  v128_t tv = wasm_f32x4_splat (t);
  int64_t i;

  for (i = 0; i + 16 <= n; i += 16)
    if (wasm_v128_any_true (wasm_v128_or (wasm_v128_or (wasm_f32x4_gt
                    (wasm_v128_load (x + i), tv), wasm_f32x4_gt (wasm_v128_load
                        (x + i + 4), tv)), wasm_v128_or (wasm_f32x4_gt
                    (wasm_v128_load (x + i + 8), tv),
                    wasm_f32x4_gt (wasm_v128_load (x + i + 12), tv)))))
      break;
  for (; i < n; i++)
    if (x[i] > t)
      break;
  return i;
}

static void
wasm_layer_norm_row (const float *x, int64_t d, const float *gamma,
    const float *beta, float eps, float *y)
{
  v128_t s4 = wasm_f32x4_splat (0.0f), v4 = wasm_f32x4_splat (0.0f), m4;
  float mean, var, inv;
  int64_t l;

  for (l = 0; l + 4 <= d; l += 4)
    s4 = wasm_f32x4_add (s4, wasm_v128_load (x + l));
  mean = hsum (s4);
  for (; l < d; l++)
    mean += x[l];
  mean /= (float) d;
  m4 = wasm_f32x4_splat (mean);
  for (l = 0; l + 4 <= d; l += 4) {
    v128_t c = wasm_f32x4_sub (wasm_v128_load (x + l), m4);
    v4 = wasm_f32x4_add (v4, wasm_f32x4_mul (c, c));
  }
  var = hsum (v4);
  for (; l < d; l++)
    var += (x[l] - mean) * (x[l] - mean);
  var /= (float) d;
  inv = 1.0f / sqrtf (var + eps);
  for (l = 0; l + 4 <= d; l += 4) {
    v128_t v = wasm_f32x4_mul (wasm_f32x4_sub (wasm_v128_load (x + l), m4),
        wasm_f32x4_splat (inv));
    if (gamma)
      v = wasm_f32x4_mul (v, wasm_v128_load (gamma + l));
    if (beta)
      v = wasm_f32x4_add (v, wasm_v128_load (beta + l));
    wasm_v128_store (y + l, v);
  }
  for (; l < d; l++) {
    float v = (x[l] - mean) * inv;
    if (gamma)
      v *= gamma[l];
    if (beta)
      v += beta[l];
    y[l] = v;
  }
}

static void
wasm_gelu (float *x, int64_t n)
{
  int64_t i;

  for (i = 0; i + 4 <= n; i += 4)
    wasm_v128_store (x + i, gelu4 (wasm_v128_load (x + i)));
  if (i < n) {
    float t[4] = { 0 };
    memcpy (t, x + i, (size_t) (n - i) * sizeof (float));
    wasm_v128_store (t, gelu4 (wasm_v128_load (t)));
    memcpy (x + i, t, (size_t) (n - i) * sizeof (float));
  }
}

static void
wasm_softmax (float *x, int64_t n)
{
  v128_t m4 = wasm_f32x4_splat (-INFINITY), s4 = wasm_f32x4_splat (0.0f);
  float mx, sum, inv;
  int64_t i;

  /* pmax: one instruction where max takes seven (the vocabulary's 51864
   * logits per token); a NaN it skips still makes every output NaN
   * through the sum */
  for (i = 0; i + 4 <= n; i += 4)
    m4 = wasm_f32x4_pmax (m4, wasm_v128_load (x + i));
  mx = hmax (m4);
  for (; i < n; i++)
    mx = x[i] > mx ? x[i] : mx;
  m4 = wasm_f32x4_splat (mx);
  for (i = 0; i + 4 <= n; i += 4) {
    v128_t e = exp4 (wasm_f32x4_sub (wasm_v128_load (x + i), m4));
    wasm_v128_store (x + i, e);
    s4 = wasm_f32x4_add (s4, e);
  }
  sum = hsum (s4);
  for (; i < n; i++) {
    x[i] = expf (x[i] - mx);
    sum += x[i];
  }
  inv = 1.0f / sum;
  for (i = 0; i + 4 <= n; i += 4)
    wasm_v128_store (x + i, wasm_f32x4_mul (wasm_v128_load (x + i),
            wasm_f32x4_splat (inv)));
  for (; i < n; i++)
    x[i] *= inv;
}

static void
wasm_add (float *y, const float *x, int64_t n)
{
  int64_t i;

  for (i = 0; i + 4 <= n; i += 4)
    wasm_v128_store (y + i, wasm_f32x4_add (wasm_v128_load (y + i),
            wasm_v128_load (x + i)));
  for (; i < n; i++)
    y[i] += x[i];
}

const wk_kernel_set wk_kernels_wasm = {
  .name = "wasm",
  .linear = wasm_linear,
  .gemm_f32 = wasm_gemm_f32,
  .attention_head = wasm_attention_head,
  .attention_head_f16kv = wasm_attention_head_f16kv,
  .attention_heads = wasm_attention_heads,
  .f32_to_f16 = wasm_f32_to_f16,
  .round_f16 = wasm_round_f16,
  .layer_norm_row = wasm_layer_norm_row,
  .quantize_act = wk_quantize_act,
  .gelu = wasm_gelu,
  .softmax = wasm_softmax,
  .add = wasm_add,
  .find_gt = wasm_find_gt,
  .f16kv_slow = 1,
};
