/* AVX2 + FMA + F16C kernels (built with -mavx2 -mfma -mf16c, only called
 * after a run-time CPU check). Held to kernels-ref.c by
 * tests/test-kernels.c.
 *
 * Products with many rows of X are blocked GEMMs (wk_gemm_blocked over
 * kernels-simd.h's f32 panels): a panel of 16 weight rows by up to KC
 * depth is converted once to f32 ([depth][16], on the stack) and a 6x16
 * register-blocked FMA micro-kernel runs over every 6-row stripe of X.
 * Products with few rows (the decoder) stream each weight row once,
 * dequantizing blocks in registers. */
#include "kernels-impl.h"

#ifdef __wasm__
#include "x86-on-wasm.h"
#include "kernels-wasm-int.h"
#else
#include <immintrin.h>
#endif
#include <math.h>
#include <string.h>

#include "kernels-x86.h"

#ifdef __wasm__
/* x86-on-wasm.h: 8 of SIMD128's 16 registers (any MR gives each output
 * the same sums) */
#define MR 2
#else
#define MR 6                    /* rows of X per micro-kernel */
#endif
#define NR 16                   /* weight rows (outputs) per panel */
#define NC 64                   /* outputs per packed block (4 panels) */
/* depth per packed block (a multiple of 32): Whisper-tiny's 384 in one
 * pass, so the output is written once; a panel is 24 KiB, in L1 beside
 * a 6-row stripe of X */
#define KC 384

/* ---- vector math ---- */

static inline float
hmax256 (__m256 v)
{
  __m128 s = _mm_max_ps (_mm256_castps256_ps128 (v),
      _mm256_extractf128_ps (v, 1));
  s = _mm_max_ps (s, _mm_movehl_ps (s, s));
  s = _mm_max_ss (s, _mm_movehdup_ps (s));
  return _mm_cvtss_f32 (s);
}

/* e^x, relative error about 2e-7 over the float range; 0 below -87. */
static inline __m256
exp256 (__m256 x)
{
  const __m256 hi = _mm256_set1_ps (88.3762626647949f);
  const __m256 lo = _mm256_set1_ps (-87.3365447504f);
  __m256 under = _mm256_cmp_ps (x, lo, _CMP_LT_OQ);
  __m256 n, r, y, r2;
  __m256i e;

  x = _mm256_min_ps (x, hi);
  x = _mm256_max_ps (x, lo);
  n = _mm256_round_ps (_mm256_mul_ps (x, _mm256_set1_ps (1.44269504088896341f)),
      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  r = _mm256_fnmadd_ps (n, _mm256_set1_ps (0.693359375f), x);
  r = _mm256_fnmadd_ps (n, _mm256_set1_ps (-2.12194440e-4f), r);
  y = _mm256_set1_ps (1.9875691500E-4f);
  y = _mm256_fmadd_ps (y, r, _mm256_set1_ps (1.3981999507E-3f));
  y = _mm256_fmadd_ps (y, r, _mm256_set1_ps (8.3334519073E-3f));
  y = _mm256_fmadd_ps (y, r, _mm256_set1_ps (4.1665795894E-2f));
  y = _mm256_fmadd_ps (y, r, _mm256_set1_ps (1.6666665459E-1f));
  y = _mm256_fmadd_ps (y, r, _mm256_set1_ps (5.0000001201E-1f));
  r2 = _mm256_mul_ps (r, r);
  y = _mm256_fmadd_ps (y, r2, _mm256_add_ps (r, _mm256_set1_ps (1.0f)));
  e = _mm256_slli_epi32 (_mm256_add_epi32 (_mm256_cvtps_epi32 (n),
          _mm256_set1_epi32 (127)), 23);
  y = _mm256_mul_ps (y, _mm256_castsi256_ps (e));
  return _mm256_andnot_ps (under, y);
}

/* 0.5 x (1 + erf (x / sqrt 2)) with Abramowitz & Stegun 7.1.26 for erf
 * (absolute error below 1.5e-7). */
static inline __m256
gelu256 (__m256 x)
{
  const __m256 sign_mask = _mm256_set1_ps (-0.0f);
  __m256 z = _mm256_mul_ps (x, _mm256_set1_ps (0.70710678118654752f));
  __m256 az = _mm256_andnot_ps (sign_mask, z);
  __m256 t = _mm256_div_ps (_mm256_set1_ps (1.0f),
      _mm256_fmadd_ps (az, _mm256_set1_ps (0.3275911f),
          _mm256_set1_ps (1.0f)));
  __m256 p = _mm256_set1_ps (1.061405429f);
  __m256 e, erf_abs, erf_v;

  p = _mm256_fmadd_ps (p, t, _mm256_set1_ps (-1.453152027f));
  p = _mm256_fmadd_ps (p, t, _mm256_set1_ps (1.421413741f));
  p = _mm256_fmadd_ps (p, t, _mm256_set1_ps (-0.284496736f));
  p = _mm256_fmadd_ps (p, t, _mm256_set1_ps (0.254829592f));
  p = _mm256_mul_ps (p, t);
  e = exp256 (_mm256_mul_ps (_mm256_xor_ps (az, sign_mask), az));
  erf_abs = _mm256_fnmadd_ps (p, e, _mm256_set1_ps (1.0f));
  erf_v = _mm256_or_ps (erf_abs, _mm256_and_ps (z, sign_mask));
  return _mm256_mul_ps (_mm256_mul_ps (_mm256_set1_ps (0.5f), x),
      _mm256_add_ps (_mm256_set1_ps (1.0f), erf_v));
}

/* Mask of the first n (0..8) lanes. */
static inline __m256i
lane_mask (int n)
{
  static const int32_t m[16] = { -1, -1, -1, -1, -1, -1, -1, -1,
    0, 0, 0, 0, 0, 0, 0, 0
  };
  return _mm256_loadu_si256 ((const __m256i *) (m + 8 - n));
}

static void
avx2_gelu (float *x, int64_t n)
{
  int64_t i = 0;

  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps (x + i, gelu256 (_mm256_loadu_ps (x + i)));
  if (i < n) {
    __m256i m = lane_mask ((int) (n - i));
    _mm256_maskstore_ps (x + i, m, gelu256 (_mm256_maskload_ps (x + i, m)));
  }
}

/* ---- weight rows to f32 ---- */

static inline float
f16 (uint16_t h)
{
  return _cvtsh_ss (h);
}

static inline void
q8_0_block (const wk_block_q8_0 * b, __m256 w[4])
{
  __m256 d = _mm256_set1_ps (f16 (b->d));
  int u;
#pragma GCC unroll 4
  for (u = 0; u < 4; u++) {
    __m128i q = _mm_loadl_epi64 ((const __m128i *) (b->qs + 8 * u));
    w[u] = _mm256_mul_ps (_mm256_cvtepi32_ps (_mm256_cvtepi8_epi32 (q)), d);
  }
}

static inline void
q4_0_block (const wk_block_q4_0 * b, __m256 w[4])
{
  const __m128i m4 = _mm_set1_epi8 (0x0f);
  float df = f16 (b->d);
  __m256 d = _mm256_set1_ps (df);
  __m256 off = _mm256_set1_ps (-8.0f * df);
  __m128i q = _mm_loadu_si128 ((const __m128i *) b->qs);
  __m128i lo = _mm_and_si128 (q, m4);
  __m128i hi = _mm_and_si128 (_mm_srli_epi16 (q, 4), m4);

  w[0] = _mm256_fmadd_ps (_mm256_cvtepi32_ps (_mm256_cvtepu8_epi32 (lo)),
      d, off);
  w[1] = _mm256_fmadd_ps (_mm256_cvtepi32_ps (_mm256_cvtepu8_epi32
          (_mm_srli_si128 (lo, 8))), d, off);
  w[2] = _mm256_fmadd_ps (_mm256_cvtepi32_ps (_mm256_cvtepu8_epi32 (hi)),
      d, off);
  w[3] = _mm256_fmadd_ps (_mm256_cvtepi32_ps (_mm256_cvtepu8_epi32
          (_mm_srli_si128 (hi, 8))), d, off);
}

/* out[0 .. len-1] = row elements l0 .. l0+len-1 as f32; l0 (and len,
 * unless it reaches the row's end) are multiples of WK_QK for q8_0/q4_0. */
static void
row_seg_to_f32 (wk_type type, const unsigned char *row, int64_t l0,
    int64_t len, float *out)
{
  int64_t l = 0, b;
  __m256 w[4];

  switch (type) {
    case WK_TYPE_F32:
      memcpy (out, (const float *) row + l0, (size_t) len * sizeof (float));
      break;
    case WK_TYPE_F16:{
      const uint16_t *h = (const uint16_t *) row + l0;
      for (; l + 8 <= len; l += 8)
        _mm256_storeu_ps (out + l,
            _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) (h + l))));
      for (; l < len; l++)
        out[l] = f16 (h[l]);
      break;
    }
    case WK_TYPE_Q8_0:{
      const wk_block_q8_0 *blk = (const wk_block_q8_0 *) row + l0 / WK_QK;
      for (b = 0; b < len / WK_QK; b++) {
        q8_0_block (blk + b, w);
        _mm256_storeu_ps (out + b * 32, w[0]);
        _mm256_storeu_ps (out + b * 32 + 8, w[1]);
        _mm256_storeu_ps (out + b * 32 + 16, w[2]);
        _mm256_storeu_ps (out + b * 32 + 24, w[3]);
      }
      break;
    }
    case WK_TYPE_Q4_0:{
      const wk_block_q4_0 *blk = (const wk_block_q4_0 *) row + l0 / WK_QK;
      for (b = 0; b < len / WK_QK; b++) {
        q4_0_block (blk + b, w);
        _mm256_storeu_ps (out + b * 32, w[0]);
        _mm256_storeu_ps (out + b * 32 + 8, w[1]);
        _mm256_storeu_ps (out + b * 32 + 16, w[2]);
        _mm256_storeu_ps (out + b * 32 + 24, w[3]);
      }
      break;
    }
    default:
      memset (out, 0, (size_t) len * sizeof (float));
      break;
  }
}

/* ---- the shared f32 micro-kernels (kernels-simd.h) over 8 lanes ---- */

#define SIMD_ALIGN 32
#define VL 8
#define VF __m256
#define VMASK __m256i
#define v_zero() _mm256_setzero_ps ()
#define v_set1(x) _mm256_set1_ps (x)
#define v_iota() _mm256_setr_ps (0, 1, 2, 3, 4, 5, 6, 7)
#define v_load(p) _mm256_load_ps (p)
#define v_store(p, v) _mm256_store_ps ((p), (v))
#define v_mask(n) lane_mask ((n) < 0 ? 0 : (n) > 8 ? 8 : (n))
#define v_load_part(p, m, full) \
  ((full) ? _mm256_loadu_ps (p) : _mm256_maskload_ps ((p), (m)))
#define v_store_part(p, m, full, v) \
  do { \
    if (full) \
      _mm256_storeu_ps ((p), (v)); \
    else \
      _mm256_maskstore_ps ((p), (m), (v)); \
  } while (0)
#define v_add(a, b) _mm256_add_ps ((a), (b))
#define v_sub(a, b) _mm256_sub_ps ((a), (b))
#define v_mul(a, b) _mm256_mul_ps ((a), (b))
#define v_max(a, b) _mm256_max_ps ((a), (b))
#define v_fma(a, b, c) _mm256_fmadd_ps ((a), (b), (c))
#define v_exp(x) exp256 (x)
#define v_gelu(x) gelu256 (x)
#define v_sel_lt(a, b, s, x) \
  _mm256_blendv_ps ((s), (x), _mm256_cmp_ps ((a), (b), _CMP_LT_OQ))
#define v_sel_eq(a, b, s, x) \
  _mm256_blendv_ps ((s), (x), _mm256_cmp_ps ((a), (b), _CMP_EQ_OQ))
#define v_transpose(s, ls, d, ld) transpose8x8 ((s), (ls), (d), (ld))

#include "kernels-simd.h"

/* ---- streamed products for a few rows of X (decoder) ---- */

/* Dot products of one weight row with nx (1..4) rows of X. */
#define GEMV_BODY(NX, NA) \
  do { \
    __m256 acc[NX][NA]; \
    float tail[NX]; \
    int64_t l = 0; \
    int r_, u_; \
    _Pragma ("GCC unroll 4") for (r_ = 0; r_ < NX; r_++) { \
      tail[r_] = 0.0f; \
      _Pragma ("GCC unroll 4") for (u_ = 0; u_ < NA; u_++) \
        acc[r_][u_] = _mm256_setzero_ps (); \
    } \
    switch (type) { \
      case WK_TYPE_Q8_0: \
      case WK_TYPE_Q4_0: \
        for (l = 0; l < k; l += 32) { \
          __m256 w[4]; \
          if (type == WK_TYPE_Q8_0) \
            q8_0_block ((const wk_block_q8_0 *) wrow + l / 32, w); \
          else \
            q4_0_block ((const wk_block_q4_0 *) wrow + l / 32, w); \
          _Pragma ("GCC unroll 4") for (r_ = 0; r_ < NX; r_++) \
            _Pragma ("GCC unroll 4") for (u_ = 0; u_ < 4; u_++) \
              acc[r_][u_ % NA] = _mm256_fmadd_ps (w[u_], \
                  _mm256_loadu_ps (x[r_] + l + 8 * u_), acc[r_][u_ % NA]); \
        } \
        break; \
      case WK_TYPE_F16: { \
        const uint16_t *h = (const uint16_t *) wrow; \
        for (; l + 32 <= k; l += 32) \
          _Pragma ("GCC unroll 4") for (u_ = 0; u_ < 4; u_++) { \
            __m256 w = _mm256_cvtph_ps (_mm_loadu_si128 \
                ((const __m128i *) (h + l + 8 * u_))); \
            _Pragma ("GCC unroll 4") for (r_ = 0; r_ < NX; r_++) \
              acc[r_][u_ % NA] = _mm256_fmadd_ps (w, \
                  _mm256_loadu_ps (x[r_] + l + 8 * u_), acc[r_][u_ % NA]); \
          } \
        for (; l + 8 <= k; l += 8) { \
          __m256 w = _mm256_cvtph_ps (_mm_loadu_si128 \
              ((const __m128i *) (h + l))); \
          _Pragma ("GCC unroll 4") for (r_ = 0; r_ < NX; r_++) \
            acc[r_][0] = _mm256_fmadd_ps (w, _mm256_loadu_ps (x[r_] + l), \
                acc[r_][0]); \
        } \
        for (; l < k; l++) \
          _Pragma ("GCC unroll 4") for (r_ = 0; r_ < NX; r_++) \
            tail[r_] += x[r_][l] * f16 (h[l]); \
        break; \
      } \
      default: { \
        const float *f = (const float *) wrow; \
        for (; l + 32 <= k; l += 32) \
          _Pragma ("GCC unroll 4") for (u_ = 0; u_ < 4; u_++) { \
            __m256 w = _mm256_loadu_ps (f + l + 8 * u_); \
            _Pragma ("GCC unroll 4") for (r_ = 0; r_ < NX; r_++) \
              acc[r_][u_ % NA] = _mm256_fmadd_ps (w, \
                  _mm256_loadu_ps (x[r_] + l + 8 * u_), acc[r_][u_ % NA]); \
          } \
        for (; l + 8 <= k; l += 8) { \
          __m256 w = _mm256_loadu_ps (f + l); \
          _Pragma ("GCC unroll 4") for (r_ = 0; r_ < NX; r_++) \
            acc[r_][0] = _mm256_fmadd_ps (w, _mm256_loadu_ps (x[r_] + l), \
                acc[r_][0]); \
        } \
        for (; l < k; l++) \
          _Pragma ("GCC unroll 4") for (r_ = 0; r_ < NX; r_++) \
            tail[r_] += x[r_][l] * f[l]; \
        break; \
      } \
    } \
    _Pragma ("GCC unroll 4") for (r_ = 0; r_ < NX; r_++) { \
      _Pragma ("GCC unroll 4") for (u_ = 1; u_ < NA; u_++) \
        acc[r_][0] = _mm256_add_ps (acc[r_][0], acc[r_][u_]); \
      out[r_] = hsum256 (acc[r_][0]) + tail[r_]; \
    } \
  } while (0)

static void
gemv_row_1 (wk_type type, const unsigned char *wrow, int64_t k,
    const float *const *x, float *out)
{
  GEMV_BODY (1, 4);
}

static void
gemv_row_2 (wk_type type, const unsigned char *wrow, int64_t k,
    const float *const *x, float *out)
{
  GEMV_BODY (2, 4);
}

static void
gemv_row_3 (wk_type type, const unsigned char *wrow, int64_t k,
    const float *const *x, float *out)
{
  GEMV_BODY (3, 2);
}

static void
gemv_row_4 (wk_type type, const unsigned char *wrow, int64_t k,
    const float *const *x, float *out)
{
  GEMV_BODY (4, 2);
}

static void
gemv (const wk_tensor * W, const float *bias, const float *X, int64_t n,
    int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1, unsigned flags)
{
  const int64_t k = W->ne[0];
  const size_t row_bytes = wk_type_row_bytes (W->type, k);
  const unsigned char *data = W->data;
  int64_t i0, j;

  for (i0 = 0; i0 < n; i0 += 4) {
    int nx = (int) (n - i0 < 4 ? n - i0 : 4);
    const float *x[4];
    float out[4];
    int r;

    for (r = 0; r < 4; r++)
      x[r] = X + (i0 + (r < nx ? r : 0)) * ldx;
    for (j = j0; j < j1; j++) {
      const unsigned char *wrow = data + (size_t) j * row_bytes;
      switch (nx) {
        case 1:
          gemv_row_1 (W->type, wrow, k, x, out);
          break;
        case 2:
          gemv_row_2 (W->type, wrow, k, x, out);
          break;
        case 3:
          gemv_row_3 (W->type, wrow, k, x, out);
          break;
        default:
          gemv_row_4 (W->type, wrow, k, x, out);
          break;
      }
      for (r = 0; r < nx; r++) {
        float v = out[r] + (bias ? bias[j] : 0.0f);
        float *y = Y + (i0 + r) * ldy + j;
        if (flags & WK_LINEAR_ADD)
          *y += v;
        else
          *y = v;
      }
    }
    if (flags & WK_LINEAR_GELU)
      for (r = 0; r < nx; r++)
        avx2_gelu (Y + (i0 + r) * ldy + j0, j1 - j0);
  }
}

/* ---- integer block dot products (quantized activations, decoder) ---- */

/* wk_quantize_act with the same bits. */
static void
quantize_act (const float *x, int64_t k, int8_t * q, float *d)
{
  const __m256 sign_mask = _mm256_set1_ps (-0.0f);
  const __m256 lo = _mm256_set1_ps (-127.0f), hi = _mm256_set1_ps (127.0f);
  int64_t b;

  for (b = 0; b < k / WK_QK; b++) {
    const float *xb = x + b * WK_QK;
    __m256 v0 = _mm256_loadu_ps (xb), v1 = _mm256_loadu_ps (xb + 8);
    __m256 v2 = _mm256_loadu_ps (xb + 16), v3 = _mm256_loadu_ps (xb + 24);
    __m256 am = _mm256_max_ps (_mm256_max_ps (_mm256_andnot_ps (sign_mask,
                v0), _mm256_andnot_ps (sign_mask, v1)),
        _mm256_max_ps (_mm256_andnot_ps (sign_mask, v2),
            _mm256_andnot_ps (sign_mask, v3)));
    float amax = hmax256 (am), db, id;
    __m256 vid;
    __m256i i0, i1, i2, i3, p01, p23, p;

    /* hmax ignores NaN lanes in the same way as the reference's loop */
    db = amax / 127.0f;
    id = db != 0.0f ? 1.0f / db : 0.0f;
    vid = _mm256_set1_ps (id);
#define QA_LANE(v) _mm256_cvtps_epi32 (_mm256_round_ps (_mm256_min_ps ( \
        _mm256_max_ps (_mm256_mul_ps (v, vid), lo), hi), \
        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
    i0 = QA_LANE (v0);
    i1 = QA_LANE (v1);
    i2 = QA_LANE (v2);
    i3 = QA_LANE (v3);
#undef QA_LANE
    /* pack 4 x 8 int32 to 32 int8 in order (packs work per 128-bit lane) */
    p01 = _mm256_packs_epi32 (i0, i1);
    p23 = _mm256_packs_epi32 (i2, i3);
    p = _mm256_packs_epi16 (p01, p23);
    p = _mm256_permutevar8x32_epi32 (p, _mm256_setr_epi32 (0, 4, 1, 5, 2, 6,
            3, 7));
    _mm256_storeu_si256 ((__m256i *) (q + b * WK_QK), p);
    d[b] = db;
  }
}

/* 8 int32 partial sums of the products of 32 int8 pairs (|w| * sign(x, w)
 * keeps maddubs within int16: at most 2 * 128 * 127). */
static inline __m256
dot_i8 (__m256i aw, __m256i w, __m256i x)
{
  __m256i p16 = _mm256_maddubs_epi16 (aw, _mm256_sign_epi8 (x, w));
  return _mm256_cvtepi32_ps (_mm256_madd_epi16 (p16, _mm256_set1_epi16 (1)));
}

/* q8_0: sum q_w q_x as |w| * sign (x, w). q4_0: the unsigned nibbles
 * times x directly, and the offset, -8 sum q_x, spread over the 8 lanes
 * (xs holds -sum q_x of each block). */
#define GEMVQ_BLOCK(NX, ACC, B) \
  do { \
    __m256i xv_; \
    if (type == WK_TYPE_Q8_0) { \
      const wk_block_q8_0 *blk_ = (const wk_block_q8_0 *) wrow + (B); \
      __m256i w_ = _mm256_loadu_si256 ((const __m256i *) blk_->qs); \
      __m256i aw_ = _mm256_sign_epi8 (w_, w_); \
      float dw_ = f16 (blk_->d); \
      _Pragma ("GCC unroll 4") for (r_ = 0; r_ < NX; r_++) { \
        xv_ = _mm256_loadu_si256 ((const __m256i *) (xq[r_] + (B) * WK_QK)); \
        ACC[r_] = _mm256_fmadd_ps (dot_i8 (aw_, w_, xv_), \
            _mm256_set1_ps (dw_ * xd[r_][B]), ACC[r_]); \
      } \
    } else { \
      const wk_block_q4_0 *blk_ = (const wk_block_q4_0 *) wrow + (B); \
      __m128i q_ = _mm_loadu_si128 ((const __m128i *) blk_->qs); \
      __m256i w_ = _mm256_and_si256 (_mm256_set_m128i (_mm_srli_epi16 (q_, \
                  4), q_), _mm256_set1_epi8 (0x0f)); \
      float dw_ = f16 (blk_->d); \
      _Pragma ("GCC unroll 4") for (r_ = 0; r_ < NX; r_++) { \
        __m256 l_; \
        xv_ = _mm256_loadu_si256 ((const __m256i *) (xq[r_] + (B) * WK_QK)); \
        l_ = _mm256_cvtepi32_ps (_mm256_madd_epi16 (_mm256_maddubs_epi16 ( \
                    w_, xv_), _mm256_set1_epi16 (1))); \
        l_ = _mm256_add_ps (l_, _mm256_broadcast_ss (&xs[r_][B])); \
        ACC[r_] = _mm256_fmadd_ps (l_, _mm256_set1_ps (dw_ * xd[r_][B]), \
            ACC[r_]); \
      } \
    } \
  } while (0)

#define GEMVQ_BODY(NX) \
  do { \
    __m256 acc0[NX], acc1[NX]; \
    int64_t b = 0, nb = k / WK_QK; \
    int r_; \
    _Pragma ("GCC unroll 4") for (r_ = 0; r_ < NX; r_++) { \
      acc0[r_] = _mm256_setzero_ps (); \
      acc1[r_] = _mm256_setzero_ps (); \
    } \
    for (; b + 2 <= nb; b += 2) { \
      GEMVQ_BLOCK (NX, acc0, b); \
      GEMVQ_BLOCK (NX, acc1, b + 1); \
    } \
    if (b < nb) \
      GEMVQ_BLOCK (NX, acc0, b); \
    _Pragma ("GCC unroll 4") for (r_ = 0; r_ < NX; r_++) \
      out[r_] = hsum256 (_mm256_add_ps (acc0[r_], acc1[r_])); \
  } while (0)

typedef int8_t act_q[WK_LINEAR_QMAX_K];
typedef float act_d[WK_LINEAR_QMAX_K / WK_QK];

static void
gemvq_row_1 (wk_type type, const unsigned char *wrow, int64_t k,
    const act_q * xq, const act_d * xd, const act_d * xs, float *out)
{
  GEMVQ_BODY (1);
}

static void
gemvq_row_2 (wk_type type, const unsigned char *wrow, int64_t k,
    const act_q * xq, const act_d * xd, const act_d * xs, float *out)
{
  GEMVQ_BODY (2);
}

static void
gemvq_row_3 (wk_type type, const unsigned char *wrow, int64_t k,
    const act_q * xq, const act_d * xd, const act_d * xs, float *out)
{
  GEMVQ_BODY (3);
}

static void
gemvq_row_4 (wk_type type, const unsigned char *wrow, int64_t k,
    const act_q * xq, const act_d * xd, const act_d * xs, float *out)
{
  GEMVQ_BODY (4);
}

/* One row of X against two weight rows (greedy decoding's common case):
 * the activation block is loaded once for both and the two chains of
 * multiply-adds overlap. */
#define Q8_2X1_STEP(B, A0, A1) \
  do { \
    __m256i x_ = _mm256_loadu_si256 ((const __m256i *) (xq + (B) * WK_QK)); \
    __m256i q0_ = _mm256_loadu_si256 ((const __m256i *) p0[B].qs); \
    __m256i q1_ = _mm256_loadu_si256 ((const __m256i *) p1[B].qs); \
    float dx_ = xd[B]; \
    A0 = _mm256_fmadd_ps (dot_i8 (_mm256_sign_epi8 (q0_, q0_), q0_, x_), \
        _mm256_set1_ps (f16 (p0[B].d) * dx_), A0); \
    A1 = _mm256_fmadd_ps (dot_i8 (_mm256_sign_epi8 (q1_, q1_), q1_, x_), \
        _mm256_set1_ps (f16 (p1[B].d) * dx_), A1); \
  } while (0)

#define Q4_2X1_STEP(B, A0, A1) \
  do { \
    __m256i x_ = _mm256_loadu_si256 ((const __m256i *) (xq + (B) * WK_QK)); \
    __m128i q0_ = _mm_loadu_si128 ((const __m128i *) p0[B].qs); \
    __m128i q1_ = _mm_loadu_si128 ((const __m128i *) p1[B].qs); \
    __m256i u0_ = _mm256_and_si256 (_mm256_set_m128i (_mm_srli_epi16 (q0_, \
                4), q0_), m4); \
    __m256i u1_ = _mm256_and_si256 (_mm256_set_m128i (_mm_srli_epi16 (q1_, \
                4), q1_), m4); \
    __m256 off_ = _mm256_broadcast_ss (xs + (B)); \
    float dx_ = xd[B]; \
    A0 = _mm256_fmadd_ps (_mm256_add_ps (_mm256_cvtepi32_ps ( \
            _mm256_madd_epi16 (_mm256_maddubs_epi16 (u0_, x_), ones)), off_), \
        _mm256_set1_ps (f16 (p0[B].d) * dx_), A0); \
    A1 = _mm256_fmadd_ps (_mm256_add_ps (_mm256_cvtepi32_ps ( \
            _mm256_madd_epi16 (_mm256_maddubs_epi16 (u1_, x_), ones)), off_), \
        _mm256_set1_ps (f16 (p1[B].d) * dx_), A1); \
  } while (0)

/* One row of X against two weight rows (greedy decoding's common case):
 * the activation block is loaded once for both, two blocks per round. */
static void
gemvq_2x1 (wk_type type, const unsigned char *w0, const unsigned char *w1,
    int64_t k, const int8_t * xq, const float *xd, const float *xs,
    float out[2])
{
  const int64_t nb = k / WK_QK;
  __m256 a0 = _mm256_setzero_ps (), a1 = _mm256_setzero_ps ();
  __m256 c0 = _mm256_setzero_ps (), c1 = _mm256_setzero_ps ();
  __m256 h;
  __m128 r;
  int64_t b = 0;

  if (type == WK_TYPE_Q8_0) {
    const wk_block_q8_0 *p0 = (const wk_block_q8_0 *) w0;
    const wk_block_q8_0 *p1 = (const wk_block_q8_0 *) w1;
    for (; b + 2 <= nb; b += 2) {
      Q8_2X1_STEP (b, a0, a1);
      Q8_2X1_STEP (b + 1, c0, c1);
    }
    if (b < nb)
      Q8_2X1_STEP (b, a0, a1);
  } else {
    const wk_block_q4_0 *p0 = (const wk_block_q4_0 *) w0;
    const wk_block_q4_0 *p1 = (const wk_block_q4_0 *) w1;
    const __m256i m4 = _mm256_set1_epi8 (0x0f);
    const __m256i ones = _mm256_set1_epi16 (1);
    for (; b + 2 <= nb; b += 2) {
      Q4_2X1_STEP (b, a0, a1);
      Q4_2X1_STEP (b + 1, c0, c1);
    }
    if (b < nb)
      Q4_2X1_STEP (b, a0, a1);
  }
  /* both horizontal sums at once */
  h = _mm256_hadd_ps (_mm256_add_ps (a0, c0), _mm256_add_ps (a1, c1));
  r = _mm_add_ps (_mm256_castps256_ps128 (h), _mm256_extractf128_ps (h, 1));
  r = _mm_hadd_ps (r, r);
  out[0] = _mm_cvtss_f32 (r);
  out[1] = _mm_cvtss_f32 (_mm_shuffle_ps (r, r, 1));
}

static void
gemv_q8 (const wk_tensor * W, const float *bias, const float *X, int64_t n,
    int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1, unsigned flags)
{
  /* 80 KiB on the stack */
  act_q xq[4];
  act_d xd[4], xs[4];
  const int64_t k = W->ne[0];
  const size_t row_bytes = wk_type_row_bytes (W->type, k);
  const unsigned char *data = W->data;
  int64_t i0, j;

  for (i0 = 0; i0 < n; i0 += 4) {
    int nx = (int) (n - i0 < 4 ? n - i0 : 4);
    float out[4];
    int r;

    for (r = 0; r < nx; r++) {
      quantize_act (X + (i0 + r) * ldx, k, xq[r], xd[r]);
      if (W->type == WK_TYPE_Q4_0) {
        int64_t b;
        for (b = 0; b < k / WK_QK; b++)
          /* -8 sum q_x over 8 lanes */
          xs[r][b] = (float) -wk_block_sum_i8 (xq[r] + b * WK_QK);
      }
    }
    j = j0;
    if (nx == 1) {
      for (; j + 2 <= j1; j += 2) {
        float *y = Y + i0 * ldy + j;
        gemvq_2x1 (W->type, data + (size_t) j * row_bytes,
            data + (size_t) (j + 1) * row_bytes, k, xq[0], xd[0], xs[0], out);
        out[0] += bias ? bias[j] : 0.0f;
        out[1] += bias ? bias[j + 1] : 0.0f;
        if (flags & WK_LINEAR_ADD) {
          y[0] += out[0];
          y[1] += out[1];
        } else {
          y[0] = out[0];
          y[1] = out[1];
        }
      }
    }
    for (; j < j1; j++) {
      const unsigned char *wrow = data + (size_t) j * row_bytes;
      switch (nx) {
        case 1:
          gemvq_row_1 (W->type, wrow, k, xq, xd, xs, out);
          break;
        case 2:
          gemvq_row_2 (W->type, wrow, k, xq, xd, xs, out);
          break;
        case 3:
          gemvq_row_3 (W->type, wrow, k, xq, xd, xs, out);
          break;
        default:
          gemvq_row_4 (W->type, wrow, k, xq, xd, xs, out);
          break;
      }
      for (r = 0; r < nx; r++) {
        float v = out[r] + (bias ? bias[j] : 0.0f);
        float *y = Y + (i0 + r) * ldy + j;
        if (flags & WK_LINEAR_ADD)
          *y += v;
        else
          *y = v;
      }
    }
    if (flags & WK_LINEAR_GELU)
      for (r = 0; r < nx; r++)
        avx2_gelu (Y + (i0 + r) * ldy + j0, j1 - j0);
  }
}

/* ---- decoder products as tiles of 8 weight rows, one lane per row ----
 *
 * q8_0 / q4_0 weights against activations quantized per block
 * (wk_quantize_act), as the AVX-512 VNNI kernels do it: per block, the
 * integer products of 8 weight rows with the activation's block are
 * summed into one int32 lane per row, and only that vector is scaled in
 * f32 (the 8 rows' d_w gathered at once, times d_x), where gemvq_* above
 * scale each row's 8 partial sums on their own. The integer products are
 * vpdpbusd with AVX-VNNI (Intel cores since Alder Lake, AMD Zen 5:
 * unsigned weights, q8_0 + 128 or q4_0's nibbles, times the signed
 * activation; the offset, -128 or -8 times the activation's block sum, is
 * added after) or maddubs + madd without it (q8_0 as |w| * sign (x, w),
 * which keeps maddubs within int16, so no offset). Up to QX rows of X
 * share each tile's weight loads (beams). The weights of a tile are
 * contiguous (8 rows); they are prefetched QPF bytes ahead of the block
 * being read, so the prefetch runs on into the next tile. */

#define QT 8                    /* weight rows per tile */
#define QX 4                    /* rows of X per pass */
#define QPF 8192                /* prefetch distance (bytes) */
/* the AVX-VNNI kernels' attribute, as one word (see WK_ALWAYS_INLINE) */
#ifdef __wasm__
#define TARGET_AVXVNNI
#else
#define TARGET_AVXVNNI __attribute__ ((target ("avxvnni")))
#endif

typedef struct
{
  int8_t q[QX][WK_LINEAR_QMAX_K];
  float d[QX][WK_LINEAR_QMAX_K / WK_QK];        /* d_x per block */
  float c[QX][WK_LINEAR_QMAX_K / WK_QK];        /* offset per block */
} qtile_act;

/* lane r = the sum of z[r]'s 8 lanes */
static inline WK_ALWAYS_INLINE __m256i
sum8x8_epi32 (const __m256i z[8])
{
  __m256i t0 = _mm256_hadd_epi32 (z[0], z[1]);
  __m256i t1 = _mm256_hadd_epi32 (z[2], z[3]);
  __m256i t2 = _mm256_hadd_epi32 (z[4], z[5]);
  __m256i t3 = _mm256_hadd_epi32 (z[6], z[7]);

  /* 128-bit lane 0: rows' sums of their low halves, lane 1: high */
  t0 = _mm256_hadd_epi32 (t0, t1);
  t2 = _mm256_hadd_epi32 (t2, t3);
  return _mm256_add_epi32 (_mm256_permute2x128_si256 (t0, t2, 0x20),
      _mm256_permute2x128_si256 (t0, t2, 0x31));
}

/* the 8 rows' scales d (the first two bytes of each row's block at w,
 * rows rb bytes apart): loads and unpacks (a gather is many more
 * micro-ops on AMD's cores) */
static inline WK_ALWAYS_INLINE __m256
load_d8 (const unsigned char *w, size_t rb)
{
  __m128i h[8], a, b, c, d;
  int r;

#pragma GCC unroll 8
  for (r = 0; r < 8; r++)
    h[r] = _mm_cvtsi32_si128 (*(const uint16_t *) (w + (size_t) r * rb));
  a = _mm_unpacklo_epi16 (h[0], h[1]);
  b = _mm_unpacklo_epi16 (h[2], h[3]);
  c = _mm_unpacklo_epi16 (h[4], h[5]);
  d = _mm_unpacklo_epi16 (h[6], h[7]);
  return _mm256_cvtph_ps (_mm_unpacklo_epi64 (_mm_unpacklo_epi32 (a, b),
          _mm_unpacklo_epi32 (c, d)));
}

/* int32 sums of 4 products of u8 u and s8 s per lane */
static inline WK_ALWAYS_INLINE TARGET_AVXVNNI __m256i
dot_u8s8_vnni (__m256i u, __m256i s)
{
  return _mm256_dpbusd_avx_epi32 (_mm256_setzero_si256 (), u, s);
}

static inline WK_ALWAYS_INLINE __m256i
dot_u8s8_plain (__m256i u, __m256i s)
{
  return _mm256_madd_epi16 (_mm256_maddubs_epi16 (u, s), _mm256_set1_epi16 (1));
}

/* q8_0: VNNI takes w + 128 (the offset is in the activation's c), plain
 * AVX2 |w| * sign (x, w) */
static inline WK_ALWAYS_INLINE TARGET_AVXVNNI __m256i
dot_q8_vnni (__m256i w, __m256i x)
{
  return dot_u8s8_vnni (_mm256_xor_si256 (w, _mm256_set1_epi8 ((char) 0x80)),
      x);
}

static inline WK_ALWAYS_INLINE __m256i
dot_q8_plain (__m256i w, __m256i x)
{
  return dot_u8s8_plain (_mm256_sign_epi8 (w, w), _mm256_sign_epi8 (x, w));
}

/* One block b of a tile for NX rows of X: acc[x] lane r += row r's
 * block dot product with row x of X, scaled. W8 (1 for q8_0) and the dot
 * products are the variant's. */
#define QTILE_BLOCK(NX, Q8, DOT_Q8, DOT_Q4) \
  do { \
    const size_t bs_ = Q8 ? sizeof (wk_block_q8_0) : sizeof (wk_block_q4_0); \
    const unsigned char *wb_ = w + b * bs_; \
    __m256i v_[QT], z_[QT]; \
    __m256 dw_; \
    int r_, x_, i_; \
    for (i_ = 0; i_ < (int) (QT * bs_ + 63) / 64; i_++) \
      _mm_prefetch ((const char *) w + QPF + b * QT * bs_ + i_ * 64, \
          _MM_HINT_T0); \
    _Pragma ("GCC unroll 8") for (r_ = 0; r_ < QT; r_++) { \
      if (Q8) { \
        v_[r_] = _mm256_loadu_si256 ((const __m256i *) (wb_ + 2 + \
                (size_t) r_ * rb)); \
      } else { \
        __m128i q_ = _mm_loadu_si128 ((const __m128i *) (wb_ + 2 + \
                (size_t) r_ * rb)); \
        v_[r_] = _mm256_and_si256 (_mm256_set_m128i (_mm_srli_epi16 (q_, \
                    4), q_), _mm256_set1_epi8 (0x0f)); \
      } \
    } \
    dw_ = load_d8 (wb_, rb); \
    _Pragma ("GCC unroll 4") for (x_ = 0; x_ < NX; x_++) { \
      __m256i xv_ = _mm256_loadu_si256 ((const __m256i *) (a->q[x_] + \
              b * WK_QK)); \
      __m256 f_; \
      _Pragma ("GCC unroll 8") for (r_ = 0; r_ < QT; r_++) \
        z_[r_] = Q8 ? DOT_Q8 (v_[r_], xv_) : DOT_Q4 (v_[r_], xv_); \
      f_ = _mm256_add_ps (_mm256_cvtepi32_ps (sum8x8_epi32 (z_)), \
          _mm256_set1_ps (a->c[x_][b])); \
      acc[x_] = _mm256_fmadd_ps (_mm256_mul_ps (f_, dw_), \
          _mm256_set1_ps (a->d[x_][b]), acc[x_]); \
    } \
  } while (0)

#define QTILE_CASE(NX, Q8, DOT_Q8, DOT_Q4) \
  case NX: \
    for (b = 0; b < nb; b++) \
      QTILE_BLOCK (NX, Q8, DOT_Q8, DOT_Q4); \
    break

/* acc[0 .. nx-1] = the 8 rows' sums over all blocks for each row of X */
#define QTILE_DEFINE(NAME, ATTR, DOT_Q8, DOT_Q4) \
  static ATTR void \
  NAME (int q8, const unsigned char *w, size_t rb, int64_t nb, \
      const qtile_act * a, int nx, __m256 * acc) \
  { \
    int64_t b; \
    int x; \
    for (x = 0; x < nx; x++) \
      acc[x] = _mm256_setzero_ps (); \
    if (q8) { \
      switch (nx) { \
        QTILE_CASE (1, 1, DOT_Q8, DOT_Q4); \
        QTILE_CASE (2, 1, DOT_Q8, DOT_Q4); \
        QTILE_CASE (3, 1, DOT_Q8, DOT_Q4); \
        default: \
          for (b = 0; b < nb; b++) \
            QTILE_BLOCK (QX, 1, DOT_Q8, DOT_Q4); \
      } \
    } else { \
      switch (nx) { \
        QTILE_CASE (1, 0, DOT_Q8, DOT_Q4); \
        QTILE_CASE (2, 0, DOT_Q8, DOT_Q4); \
        QTILE_CASE (3, 0, DOT_Q8, DOT_Q4); \
        default: \
          for (b = 0; b < nb; b++) \
            QTILE_BLOCK (QX, 0, DOT_Q8, DOT_Q4); \
      } \
    } \
  }

/* GNU indent cannot parse a function defined by a macro. */
/* *INDENT-OFF* */
QTILE_DEFINE (qtile_vnni, TARGET_AVXVNNI, dot_q8_vnni, dot_u8s8_vnni)
#ifndef __wasm__
QTILE_DEFINE (qtile_plain, , dot_q8_plain, dot_u8s8_plain)
#endif
/* *INDENT-ON* */

#ifdef __wasm__
/* The scales of block b of four rows (rb bytes apart, from w) as f32:
 * each half in the top of a lane, shifted, masked and multiplied by
 * 2^112 (exact for normal and subnormal halves); a lane that is infinite
 * or NaN (exponent bits all ones) takes wk_half4_to_f32's full conversion. */
static inline v128_t
wq_scales4 (const unsigned char *w, size_t rb, size_t off)
{
  v128_t h = wasm_i32x4_splat (0), f;

  h = wasm_v128_load16_lane (w + off, h, 1);
  h = wasm_v128_load16_lane (w + rb + off, h, 3);
  h = wasm_v128_load16_lane (w + 2 * rb + off, h, 5);
  h = wasm_v128_load16_lane (w + 3 * rb + off, h, 7);
  f = wasm_f32x4_mul (wasm_v128_and (wasm_i32x4_shr (h, 3),
          wasm_i32x4_splat ((int32_t) 0x8fffe000u)),
      wasm_i32x4_splat (0x77800000));
  if (wasm_v128_any_true (wasm_i32x4_eq (wasm_v128_and (h,
                  wasm_i32x4_splat (0x7c000000)), wasm_i32x4_splat
              (0x7c000000))))
    f = wk_half4_to_f32 (wasm_u32x4_shr (h, 16));
  return f;
}

/* qtile_plain in SIMD128: each row's block sums are the same integers,
 * and each block adds (float (sum) + c) d_w, times d_x, to the row's sum
 * with one fused multiply-add, as QTILE_BLOCK does: the same bits. */
static void
qtile_plain (int q8, const unsigned char *w, size_t rb, int64_t nb,
    const qtile_act * a, int nx, __m256 * acc)
{
  const size_t bs = q8 ? sizeof (wk_block_q8_0) : sizeof (wk_block_q4_0);
  int x, h, r;
  int64_t b;

  for (x = 0; x < nx; x++) {
    simde__m256_private out;
    v128_t sum[2] = { wasm_f32x4_splat (0.0f), wasm_f32x4_splat (0.0f) };
    for (b = 0; b < nb; b++) {
      const int8_t *xq = a->q[x] + b * WK_QK;
      const v128_t xa = wasm_v128_load (xq), xb = wasm_v128_load (xq + 16);
      const v128_t cx = wasm_f32x4_splat (a->c[x][b]);
      const v128_t dx = wasm_f32x4_splat (a->d[x][b]);
      v128_t xs[4];
      xs[0] = wasm_i16x8_extend_low_i8x16 (xa);
      xs[1] = wasm_i16x8_extend_high_i8x16 (xa);
      xs[2] = wasm_i16x8_extend_low_i8x16 (xb);
      xs[3] = wasm_i16x8_extend_high_i8x16 (xb);
      for (h = 0; h < 2; h++) {
        const unsigned char *w4 = w + (size_t) (4 * h) * rb + b * bs;
        v128_t s[4], f;
        for (r = 0; r < 4; r++) {
          const unsigned char *blk = w4 + (size_t) r * rb;
          if (q8)
            s[r] = dot_i8x32 (wasm_v128_load (blk + 2), wasm_v128_load (blk +
                    18), xs);
          else {
            v128_t q = wasm_v128_load (blk + 2), m = wasm_i8x16_splat (0x0f);
            s[r] = dot_i8x32 (wasm_v128_and (q, m), wasm_v128_and
                (wasm_u8x16_shr (q, 4), m), xs);
          }
        }
        f = wasm_f32x4_add (wasm_f32x4_convert_i32x4 (sum_lanes4 (s[0], s[1],
                    s[2], s[3])), cx);
        sum[h] = wasm_f32x4_relaxed_madd (wasm_f32x4_mul (f,
                wq_scales4 (w4, rb, 0)), dx, sum[h]);
      }
    }
    out.m128_private[0].wasm_v128 = sum[0];
    out.m128_private[1].wasm_v128 = sum[1];
    acc[x] = simde__m256_from_private (out);
  }
}
#endif

/* wk_linear_ex for act_q8 products: rows of X QX at a time, whole tiles
 * of outputs here, the rest (< 8 outputs) by gemv_q8. */
static void
gemv_q8_tiles (const wk_tensor * W, const float *bias, const float *X,
    int64_t n, int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1,
    unsigned flags, int vnni)
{
  /* 80 KiB */
  qtile_act a;
  const int64_t k = W->ne[0], nb = k / WK_QK;
  const size_t rb = wk_type_row_bytes (W->type, k);
  const unsigned char *data = W->data;
  const int q8 = W->type == WK_TYPE_Q8_0;
  /* what the integer sums need added: q8_0's + 128 (VNNI), q4_0's + 8 */
  const float off = q8 ? (vnni ? -128.0f : 0.0f) : -8.0f;
  int64_t i0, j, bb;

  for (i0 = 0; i0 < n; i0 += QX) {
    int nx = (int) (n - i0 < QX ? n - i0 : QX), x;
    const int64_t jt = j0 + (j1 - j0) / QT * QT;

    for (x = 0; x < nx; x++) {
      quantize_act (X + (i0 + x) * ldx, k, a.q[x], a.d[x]);
      for (bb = 0; bb < nb; bb++)
        a.c[x][bb] = off * (float) wk_block_sum_i8 (a.q[x] + bb * WK_QK);
    }
    for (j = j0; j < jt; j += QT) {
      __m256 acc[QX];
      if (vnni)
        qtile_vnni (q8, data + (size_t) j * rb, rb, nb, &a, nx, acc);
      else
        qtile_plain (q8, data + (size_t) j * rb, rb, nb, &a, nx, acc);
      for (x = 0; x < nx; x++) {
        float *y = Y + (i0 + x) * ldy + j;
        __m256 v = acc[x];
        if (bias)
          v = _mm256_add_ps (v, _mm256_loadu_ps (bias + j));
        if (flags & WK_LINEAR_GELU)
          v = gelu256 (v);
        if (flags & WK_LINEAR_ADD)
          v = _mm256_add_ps (v, _mm256_loadu_ps (y));
        _mm256_storeu_ps (y, v);
      }
    }
    /* one row at a time, so that a row's tail has its one-row bits */
    for (x = 0; jt < j1 && x < nx; x++)
      gemv_q8 (W, bias, X + (i0 + x) * ldx, 1, ldx, Y + (i0 + x) * ldy, ldy,
          jt, j1, flags);
  }
}

/* ---- f16 decoder products (kernels-f16.h) over 8 lanes ---- */

/* lane r = the sum of a[r]'s 8 lanes */
static inline WK_ALWAYS_INLINE __m256
sum8x8_ps (const __m256 a[8])
{
  __m256 t0 = _mm256_hadd_ps (a[0], a[1]), t1 = _mm256_hadd_ps (a[2], a[3]);
  __m256 t2 = _mm256_hadd_ps (a[4], a[5]), t3 = _mm256_hadd_ps (a[6], a[7]);

  t0 = _mm256_hadd_ps (t0, t1);
  t2 = _mm256_hadd_ps (t2, t3);
  return _mm256_add_ps (_mm256_permute2f128_ps (t0, t2, 0x20),
      _mm256_permute2f128_ps (t0, t2, 0x31));
}

static inline WK_ALWAYS_INLINE void
f16_tile_store (const __m256 acc[8], const float *bias, unsigned flags,
    float *y)
{
  __m256 v = sum8x8_ps (acc);

  if (bias)
    v = _mm256_add_ps (v, _mm256_loadu_ps (bias));
  if (flags & WK_LINEAR_GELU)
    v = gelu256 (v);
  if (flags & WK_LINEAR_ADD)
    v = _mm256_add_ps (v, _mm256_loadu_ps (y));
  _mm256_storeu_ps (y, v);
}

#define v_loadu(p) _mm256_loadu_ps (p)
#define v_load_f16(p) _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *) (p)))
#define v_prefetch(p) _mm_prefetch ((p), _MM_HINT_T0)
#define F16_GROUP 3             /* 12 accumulators */
#define f16_tail gemv

#include "kernels-f16.h"

/* ---- encoder products with maddubs: quantized rows of X ----
 *
 * wk_linear_work's integer products without VNNI, driven by
 * wk_gemm_blocked like the AVX-512 VNNI ones (kernels-avx512.c's
 * qkernel_6x32): weight panels of 16 outputs packed once per depth block
 * as bytes in groups of 4 depths per output (one 32-byte load is 8
 * outputs x 4 depths), against 4 bytes of a quantized row of X broadcast.
 * maddubs multiplies unsigned by signed bytes and adds pairs into int16
 * with saturation, so:
 * - q4_0: the nibbles (0 .. 15) are the unsigned operand; a pair is at
 *   most 2 * 15 * 127 = 3810, so the 8 groups of a block add up in int16
 *   (at most 30480) before one madd widens them; the sum starts at the
 *   row's offset c (-8 times the block's sum of q_x).
 * - q8_0: |q_w| (0 .. 128) is the unsigned operand and q_x with q_w's sign
 *   the signed one (|q_x| <= 127 negates safely); a pair is at most
 *   2 * 128 * 127 = 32512, each widened by madd at once.
 * Both block sums are sum q_w q_x exactly, and each block adds
 * (sum * d_w) * d_x to an f32 sum as the VNNI kernels do, so the result
 * has their bits (up to the epilogue's GELU). */

#define QMR 4                   /* rows of X per tile */
#define QNR 16                  /* outputs per panel */
#define QNC 64                  /* outputs per packed block */
#define QKC 1024                /* depth per packed block (32 blocks) */

typedef struct
{
  int8_t w[QKC / 4][QNR][4];    /* [depth / 4][output][depth % 4] */
  float d[QKC / WK_QK][QNR];    /* d_w per block and output */
} qpanel;

/* v[i] (8 int32 lanes each) transposed in place: lane i of v[g] is
 * lane g of the v[i] given. */
static inline WK_ALWAYS_INLINE void
transpose8_epi32 (__m256i v[8])
{
  __m256i a[8], b[8];
  int i;

#pragma GCC unroll 4
  for (i = 0; i < 8; i += 2) {
    a[i] = _mm256_unpacklo_epi32 (v[i], v[i + 1]);
    a[i + 1] = _mm256_unpackhi_epi32 (v[i], v[i + 1]);
  }
  /* a[2h + u]: lanes 2u, 2u+1 (and 4 + those) of v[2h], v[2h+1]
   * interleaved */
#pragma GCC unroll 2
  for (i = 0; i < 8; i += 4) {
    b[i] = _mm256_unpacklo_epi64 (a[i], a[i + 2]);
    b[i + 1] = _mm256_unpackhi_epi64 (a[i], a[i + 2]);
    b[i + 2] = _mm256_unpacklo_epi64 (a[i + 1], a[i + 3]);
    b[i + 3] = _mm256_unpackhi_epi64 (a[i + 1], a[i + 3]);
  }
  /* b[4h + g]: lanes g and 4 + g of v[4h .. 4h+3] */
#pragma GCC unroll 4
  for (i = 0; i < 4; i++) {
    v[i] = _mm256_permute2x128_si256 (b[i], b[4 + i], 0x20);
    v[4 + i] = _mm256_permute2x128_si256 (b[i], b[4 + i], 0x31);
  }
}

/* wk_gemm_ukernel.pack: operand b is the weight tensor. Each block of
 * each output becomes 32 bytes (q8_0's as they are; q4_0's low nibbles,
 * depths 0 .. 15, then its high ones), 8 groups of 4 depths, and 8
 * outputs' blocks are transposed as 8 x 8 int32 so that a group's 4
 * bytes of 8 outputs are one row of the panel. */
static void
q_pack (const void *b, int64_t j, int nr, int64_t l0, int kc, void *panel)
{
  const wk_tensor *W = b;
  const size_t rb = wk_type_row_bytes (W->type, W->ne[0]);
  const int q8 = W->type == WK_TYPE_Q8_0;
  const size_t bs = q8 ? sizeof (wk_block_q8_0) : sizeof (wk_block_q4_0);
  const int nbk = kc / WK_QK;
  const unsigned char *base = (const unsigned char *) W->data + (size_t) j
      * rb + (size_t) (l0 / WK_QK) * bs;
  qpanel *p = panel;
  int bk, h, i, g;

  for (bk = 0; bk < nbk; bk++) {
    for (h = 0; h < QNR / 8; h++) {
      __m256i v[8];
      for (i = 0; i < 8; i++) {
        const int jj = 8 * h + i;
        const unsigned char *blk = base + (size_t) jj * rb + (size_t) bk * bs;
        if (jj >= nr) {
          v[i] = _mm256_setzero_si256 ();
          p->d[bk][jj] = 0.0f;
        } else if (q8) {
          v[i] = _mm256_loadu_si256 ((const __m256i *) (blk + 2));
          p->d[bk][jj] = f16 (((const wk_block_q8_0 *) blk)->d);
        } else {
          const __m128i q = _mm_loadu_si128 ((const __m128i *) (blk + 2));
          const __m128i m = _mm_set1_epi8 (0x0f);
          v[i] = _mm256_set_m128i (_mm_and_si128 (_mm_srli_epi16 (q, 4), m),
              _mm_and_si128 (q, m));
          p->d[bk][jj] = f16 (((const wk_block_q4_0 *) blk)->d);
        }
      }
      transpose8_epi32 (v);
      for (g = 0; g < WK_QK / 4; g++)
        _mm256_storeu_si256 ((__m256i *) p->w[bk * (WK_QK / 4) + g][8 * h],
            v[g]);
    }
  }
}

/* Row r's block sums s0, s1 (outputs 0-7, 8-15, exact) into its f32
 * sums: acc += (s * d_w) * d_x, the step every integer tile shares so
 * that they give the same bits. */
static inline WK_ALWAYS_INLINE void
q_block_add (float acc[QMR][QNR], int r, __m256i s0, __m256i s1, __m256 d0,
    __m256 d1, float dx)
{
  const __m256 vx = _mm256_set1_ps (dx);

  _mm256_store_ps (acc[r], _mm256_fmadd_ps (_mm256_mul_ps (_mm256_cvtepi32_ps
              (s0), d0), vx, _mm256_load_ps (acc[r])));
  _mm256_store_ps (acc[r] + 8, _mm256_fmadd_ps (_mm256_mul_ps
          (_mm256_cvtepi32_ps (s1), d1), vx, _mm256_load_ps (acc[r] + 8)));
}

/* acc[r][0 .. QNR-1] += per block (sum q_w q_x * d_w) * d_x, rows
 * r < QMR. The sums are kept in memory (an L1 line each) rather than in
 * registers: AVX2 has 16, which the block's 8 int16 or int32 sums, the
 * weights and the broadcast row already nearly fill, and letting the
 * compiler hold all of it spilled the block's sums instead (the tile ran
 * at 1.3x the f32 panels' speed where its instructions allow about 2x).
 * q4_0 adds a block's 8 groups of pairs in int16 and widens them once;
 * q8_0 multiplies |q_w| by q_x with q_w's sign and widens each group's
 * pairs at once (two would overflow int16). q8 is a constant where this
 * is inlined. */
static inline WK_ALWAYS_INLINE void
qkernel_4x16 (const int q8, int nbk, const int8_t * const *q,
    const float *const *d, const int32_t * const *cx, const qpanel * p,
    float acc[QMR][QNR])
{
  const __m256i ones = _mm256_set1_epi16 (1);
  int b, g, r;

  for (b = 0; b < nbk; b++) {
    const int8_t (*wb)[QNR][4] = p->w + b * (WK_QK / 4);
    /* q4_0: int16 pair sums, 8 groups' worth; q8_0: int32 block sums */
    __m256i t[2 * QMR];
    __m256 d0, d1;

#pragma GCC unroll 8
    for (r = 0; r < 2 * QMR; r++)
      t[r] = _mm256_setzero_si256 ();
#pragma GCC unroll 2
    for (g = 0; g < WK_QK / 4; g++) {
      const __m256i w0 = _mm256_load_si256 ((const __m256i *) wb[g][0]);
      const __m256i w1 = _mm256_load_si256 ((const __m256i *) wb[g][8]);
      /* the unsigned operands */
      const __m256i u0 = q8 ? _mm256_abs_epi8 (w0) : w0;
      const __m256i u1 = q8 ? _mm256_abs_epi8 (w1) : w1;
#pragma GCC unroll 4
      for (r = 0; r < QMR; r++) {
        int32_t x4;
        __m256i xv;
        memcpy (&x4, q[r] + b * WK_QK + g * 4, 4);
        xv = _mm256_set1_epi32 (x4);
        if (q8) {
          t[2 * r] = _mm256_add_epi32 (_mm256_madd_epi16
              (_mm256_maddubs_epi16 (u0, _mm256_sign_epi8 (xv, w0)), ones),
              t[2 * r]);
          t[2 * r + 1] = _mm256_add_epi32 (_mm256_madd_epi16
              (_mm256_maddubs_epi16 (u1, _mm256_sign_epi8 (xv, w1)), ones),
              t[2 * r + 1]);
        } else {
          t[2 * r] = _mm256_add_epi16 (_mm256_maddubs_epi16 (u0, xv), t[2 * r]);
          t[2 * r + 1] = _mm256_add_epi16 (_mm256_maddubs_epi16 (u1, xv),
              t[2 * r + 1]);
        }
      }
    }
    d0 = _mm256_load_ps (p->d[b]);
    d1 = _mm256_load_ps (p->d[b] + 8);
#pragma GCC unroll 4
    for (r = 0; r < QMR; r++) {
      __m256i s0 = t[2 * r], s1 = t[2 * r + 1];
      if (!q8) {
        const __m256i c = _mm256_set1_epi32 (cx[r][b]);
        s0 = _mm256_add_epi32 (c, _mm256_madd_epi16 (s0, ones));
        s1 = _mm256_add_epi32 (c, _mm256_madd_epi16 (s1, ones));
      }
      q_block_add (acc, r, s0, s1, d0, d1, d[r][b]);
    }
  }
}

/* qkernel_4x16 with AVX-VNNI: vpdpbusd multiplies and adds a group's 4
 * depths into the int32 block sums in one instruction, for both types:
 * q8_0's weights made unsigned (+ 128, the xor of their sign bit) and
 * q4_0's nibbles as they are, times q_x; each row's block then adds its
 * offset c (-128 or -8 times its block sum of q_x) and the same f32
 * steps, so the result has the other tiles' bits. */
static inline WK_ALWAYS_INLINE TARGET_AVXVNNI void
qkernel_vnni_4x16 (const int q8, int nbk, const int8_t * const *q,
    const float *const *d, const int32_t * const *cx, const qpanel * p,
    float acc[QMR][QNR])
{
  const __m256i sign = _mm256_set1_epi8 ((char) 0x80);
  int b, g, r;

  for (b = 0; b < nbk; b++) {
    const int8_t (*wb)[QNR][4] = p->w + b * (WK_QK / 4);
    __m256i t[2 * QMR];         /* int32 block sums */
    __m256 d0, d1;

#pragma GCC unroll 8
    for (r = 0; r < 2 * QMR; r++)
      t[r] = _mm256_setzero_si256 ();
#pragma GCC unroll 2
    for (g = 0; g < WK_QK / 4; g++) {
      __m256i u0 = _mm256_load_si256 ((const __m256i *) wb[g][0]);
      __m256i u1 = _mm256_load_si256 ((const __m256i *) wb[g][8]);
      if (q8) {
        u0 = _mm256_xor_si256 (u0, sign);
        u1 = _mm256_xor_si256 (u1, sign);
      }
#pragma GCC unroll 4
      for (r = 0; r < QMR; r++) {
        int32_t x4;
        __m256i xv;
        memcpy (&x4, q[r] + b * WK_QK + g * 4, 4);
        xv = _mm256_set1_epi32 (x4);
        t[2 * r] = _mm256_dpbusd_avx_epi32 (t[2 * r], u0, xv);
        t[2 * r + 1] = _mm256_dpbusd_avx_epi32 (t[2 * r + 1], u1, xv);
      }
    }
    d0 = _mm256_load_ps (p->d[b]);
    d1 = _mm256_load_ps (p->d[b] + 8);
#pragma GCC unroll 4
    for (r = 0; r < QMR; r++) {
      const __m256i c = _mm256_set1_epi32 (cx[r][b]);
      q_block_add (acc, r, _mm256_add_epi32 (c, t[2 * r]),
          _mm256_add_epi32 (c, t[2 * r + 1]), d0, d1, d[r][b]);
    }
  }
}

/* The tile's f32 sums through the epilogue (q_tile's end). */
static inline WK_ALWAYS_INLINE void
q_store (float acc[QMR][QNR], int mr, int nr, float *Y, int64_t ldy,
    int64_t j, int first, int last, const wk_gemm_epi * epi)
{
  __m256 t[2 * QMR];
  int r;

  for (r = 0; r < QMR; r++) {
    t[2 * r] = _mm256_load_ps (acc[r]);
    t[2 * r + 1] = _mm256_load_ps (acc[r] + 8);
  }
  store_tile (t, mr, nr, Y, ldy, j, first, last, epi);
}

/* The four wk_gemm_ukernel.tile functions: q8_0 or q4_0, maddubs or
 * AVX-VNNI (only the latter may use it: the kernel a function inlines
 * cannot have more of the ISA than the function). */
#define Q_TILE_DEFINE(NAME, ATTR, KERNEL, Q8) \
  static ATTR void \
  NAME (const void *a, const int64_t * rows, int mr, int64_t l0, int kc, \
      const void *panel, int nr, float *Y, int64_t ldy, int64_t j, \
      int first, int last, const wk_gemm_epi * epi) \
  { \
    const int8_t *qr[QMR]; \
    const float *dr[QMR]; \
    const int32_t *cr[QMR]; \
    float acc[QMR][QNR] __attribute__((aligned (32))) = { {0} }; \
    wk_gemm_qrows_at (a, rows, QMR, l0, qr, dr, cr); \
    KERNEL (Q8, kc / WK_QK, qr, dr, cr, panel, acc); \
    q_store (acc, mr, nr, Y, ldy, j, first, last, epi); \
  }

/* *INDENT-OFF* */
Q_TILE_DEFINE (q8_tile, , qkernel_4x16, 1)
Q_TILE_DEFINE (q4_tile, , qkernel_4x16, 0)
Q_TILE_DEFINE (q8_tile_vnni, TARGET_AVXVNNI, qkernel_vnni_4x16, 1)
Q_TILE_DEFINE (q4_tile_vnni, TARGET_AVXVNNI, qkernel_vnni_4x16, 0)
/* *INDENT-ON* */

static const wk_gemm_ukernel q8_panels = {
  QMR, QNR, QNC, QKC, sizeof (qpanel), q_pack, q8_tile
};

static const wk_gemm_ukernel q4_panels = {
  QMR, QNR, QNC, QKC, sizeof (qpanel), q_pack, q4_tile
};

static const wk_gemm_ukernel q8_panels_vnni = {
  QMR, QNR, QNC, QKC, sizeof (qpanel), q_pack, q8_tile_vnni
};

static const wk_gemm_ukernel q4_panels_vnni = {
  QMR, QNR, QNC, QKC, sizeof (qpanel), q_pack, q4_tile_vnni
};

/* The integer products over the panels of q8 (q8_0) or q4 (q4_0). */
static void
linear_q_panels (const wk_gemm_ukernel * q8, const wk_gemm_ukernel * q4,
    const wk_tensor * W, const float *bias, const int8_t * q, const float *d,
    const int32_t * c, int64_t n, float *Y, int64_t ldy, int64_t j0,
    int64_t j1, unsigned flags)
{
  qpanel bp[QNC / QNR] __attribute__((aligned (32)));
  const wk_gemm_qrows x = { q, d, c, W->ne[0] };
  const wk_gemm_epi epi = { bias, flags, 1.0f };

  wk_gemm_blocked (W->type == WK_TYPE_Q8_0 ? q8 : q4, &x, W, n, Y, ldy, j0,
      j1, W->ne[0], &epi, bp);
}

/* wk_kernel_set.linear_q */
static void
avx2_linear_q (const wk_tensor * W, const float *bias, const int8_t * q,
    const float *d, const int32_t * c, int64_t n, float *Y, int64_t ldy,
    int64_t j0, int64_t j1, unsigned flags)
{
  linear_q_panels (&q8_panels, &q4_panels, W, bias, q, d, c, n, Y, ldy, j0,
      j1, flags);
}

/* wk_kernel_set.linear_q with AVX-VNNI */
static void
avx2vnni_linear_q (const wk_tensor * W, const float *bias, const int8_t * q,
    const float *d, const int32_t * c, int64_t n, float *Y, int64_t ldy,
    int64_t j0, int64_t j1, unsigned flags)
{
  linear_q_panels (&q8_panels_vnni, &q4_panels_vnni, W, bias, q, d, c, n, Y,
      ldy, j0, j1, flags);
}

static void
linear_any (const wk_tensor * W, const float *bias, const float *X,
    int64_t n, int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1,
    unsigned flags, int act_q8, int vnni)
{
  /* q8_0 / q4_0 against few rows of X, with or without VNNI: the tiles
   * (one row of X against the two-row gemvq_2x1, which has no prefetch,
   * streamed whisper-small's step at 10 GB/s; the tiles at 16-19 on the
   * same machine, wk-bench-kernels -s step) */
  if (act_q8) {
    gemv_q8_tiles (W, bias, X, n, ldx, Y, ldy, j0, j1, flags, vnni);
    return;
  }
  if (n < WK_LINEAR_GEMM_ROWS && W->type == WK_TYPE_F16 && W->ne[0] % 32 == 0) {
    gemv_f16 (W, bias, X, n, ldx, Y, ldy, j0, j1, flags);
    return;
  }
  if (n < WK_LINEAR_GEMM_ROWS) {
    gemv (W, bias, X, n, ldx, Y, ldy, j0, j1, flags);
    return;
  }
  linear_f32_panels (W, bias, X, n, ldx, Y, ldy, j0, j1, flags);
}

static void
avx2_linear (const wk_tensor * W, const float *bias, const float *X,
    int64_t n, int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1,
    unsigned flags, int act_q8)
{
  linear_any (W, bias, X, n, ldx, Y, ldy, j0, j1, flags, act_q8, 0);
}

/* The same with AVX-VNNI's integer products (wk_kernels_avx2vnni). */
static void
avx2vnni_linear (const wk_tensor * W, const float *bias, const float *X,
    int64_t n, int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1,
    unsigned flags, int act_q8)
{
  linear_any (W, bias, X, n, ldx, Y, ldy, j0, j1, flags, act_q8, 1);
}

/* ---- attention (attention_block: kernels-simd.h) ---- */

/* Eight dot products of 8-lane partial sums, reduced into one vector. */
static inline __m256
hsum8x8 (__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5,
    __m256 a6, __m256 a7)
{
  __m256 h01 = _mm256_hadd_ps (a0, a1), h23 = _mm256_hadd_ps (a2, a3);
  __m256 h45 = _mm256_hadd_ps (a4, a5), h67 = _mm256_hadd_ps (a6, a7);
  __m256 h0123 = _mm256_hadd_ps (h01, h23), h4567 = _mm256_hadd_ps (h45, h67);
  /* h0123 = [s0 s1 s2 s3 | s0' s1' s2' s3'] halves of each sum */
  __m256 lo = _mm256_permute2f128_ps (h0123, h4567, 0x20);
  __m256 hi = _mm256_permute2f128_ps (h0123, h4567, 0x31);
  return _mm256_add_ps (lo, hi);
}

/* 8 keys or values from f32 or f16 storage. */
static inline __m256
load8 (const void *p, int64_t i, int kv16)
{
  if (kv16)
    return _mm256_cvtph_ps (_mm_loadu_si128 ((const __m128i *)
            ((const uint16_t *) p + i)));
  return _mm256_loadu_ps ((const float *) p + i);
}

static inline float
load1 (const void *p, int64_t i, int kv16)
{
  return kv16 ? f16 (((const uint16_t *) p)[i]) : ((const float *) p)[i];
}

/* The first n (< 8) of 8 values, the rest 0. */
static inline __m256
load_part (const void *p, int64_t i, int n, int kv16)
{
  float t[8] = { 0 };
  int u;
  for (u = 0; u < n; u++)
    t[u] = load1 (p, i + u, kv16);
  return _mm256_loadu_ps (t);
}

/* One query (the decoder): scores for a chunk of keys eight at a time,
 * a vector exp, then the weighted sum of value rows. K and V are f32, or
 * f16 when kv16 (strides in elements). */
static inline WK_ALWAYS_INLINE void
attention_one_t (int64_t d_head, const float *q, int64_t last,
    const void *K, int64_t ldk, const void *V, int64_t ldv, float scale,
    float *o, int kv16)
{
  float s[AK + 8] __attribute__((aligned (32)));
  float acc[256 + 8] __attribute__((aligned (32)));
  const int64_t n8 = d_head & ~(int64_t) 7;
  float mx = -INFINITY, sum = 0.0f;
  int64_t t0, t, l;

  memset (acc, 0, sizeof acc);
  for (t0 = 0; t0 <= last; t0 += AK) {
    int kn = (int) (last + 1 - t0 < AK ? last + 1 - t0 : AK);
    __m256 vmax = _mm256_set1_ps (-INFINITY), vs = _mm256_setzero_ps (), vm;
    float m_new, r;

    for (t = 0; t < kn; t += 8) {
      __m256 a[8];
      int u;
#pragma GCC unroll 8
      for (u = 0; u < 8; u++) {
        int64_t kr = (t0 + t + (t + u < kn ? u : 0)) * ldk;
        __m256 d = _mm256_setzero_ps ();
        float tail = 0.0f;
#pragma GCC unroll 4
        for (l = 0; l < n8; l += 8)
          d = _mm256_fmadd_ps (_mm256_loadu_ps (q + l), load8 (K, kr + l,
                  kv16), d);
        for (; l < d_head; l++)
          tail += q[l] * load1 (K, kr + l, kv16);
        /* the scalar tail goes into lane 0 */
        a[u] = _mm256_add_ps (d, _mm256_setr_ps (tail, 0, 0, 0, 0, 0, 0, 0));
      }
      _mm256_store_ps (s + t, _mm256_mul_ps (hsum8x8 (a[0], a[1], a[2], a[3],
                  a[4], a[5], a[6], a[7]), _mm256_set1_ps (scale)));
    }
    for (t = kn; t < ((kn + 7) & ~7); t++)
      s[t] = -INFINITY;
    for (t = 0; t < kn; t += 8)
      vmax = _mm256_max_ps (vmax, _mm256_load_ps (s + t));
    m_new = hmax256 (vmax);
    if (m_new < mx)
      m_new = mx;
    r = expf (mx - m_new);
    vm = _mm256_set1_ps (m_new);
    for (t = 0; t < kn; t += 8) {
      __m256 p = exp256 (_mm256_sub_ps (_mm256_load_ps (s + t), vm));
      _mm256_store_ps (s + t, p);
      vs = _mm256_add_ps (vs, p);
    }
    sum = sum * r + hsum256 (vs);
    mx = m_new;
    /* acc = r acc + sum_t p_t V[t], 64 dimensions at a time in registers
     * (Whisper's heads are 64 wide) */
    for (l = 0; l + 64 <= d_head; l += 64) {
      __m256 a[8], vr = _mm256_set1_ps (r);
      int u;
#pragma GCC unroll 8
      for (u = 0; u < 8; u++)
        a[u] = _mm256_mul_ps (_mm256_load_ps (acc + l + 8 * u), vr);
      for (t = 0; t < kn; t++) {
        __m256 p = _mm256_broadcast_ss (s + t);
        int64_t vrow = (t0 + t) * ldv + l;
#pragma GCC unroll 8
        for (u = 0; u < 8; u++)
          a[u] = _mm256_fmadd_ps (p, load8 (V, vrow + 8 * u, kv16), a[u]);
      }
#pragma GCC unroll 8
      for (u = 0; u < 8; u++)
        _mm256_store_ps (acc + l + 8 * u, a[u]);
    }
    for (; l < d_head; l += 8) {
      int nl = (int) (d_head - l < 8 ? d_head - l : 8);
      __m256 a0 = _mm256_mul_ps (_mm256_load_ps (acc + l), _mm256_set1_ps (r));
      for (t = 0; t < kn; t++) {
        int64_t vrow = (t0 + t) * ldv + l;
        a0 = _mm256_fmadd_ps (_mm256_set1_ps (s[t]), nl == 8 ?
            load8 (V, vrow, kv16) : load_part (V, vrow, nl, kv16), a0);
      }
      _mm256_store_ps (acc + l, a0);
    }
  }
  for (l = 0; l < d_head; l++)
    o[l] = sum > 0.0f ? acc[l] / sum : 0.0f;
}

static void
attention_one (int64_t d_head, const float *q, int64_t last, const float *K,
    int64_t ldk, const float *V, int64_t ldv, float scale, float *o)
{
  attention_one_t (d_head, q, last, K, ldk, V, ldv, scale, o, 0);
}

/* wk_attention_f16kv for one head: one query at a time. */
static void
avx2_attention_head_f16kv (int64_t d_head, int64_t q0, int64_t q1,
    int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq,
    const uint16_t * K, int64_t ldk, const uint16_t * V, int64_t ldv,
    float scale, int causal, float *O, int64_t ldo)
{
  int64_t i;

  for (i = q0; i < q1; i++) {
    int64_t last = wk_attention_last_key (i, n_q, n_kv, causal);
    if (last < 0) {
      memset (O + i * ldo, 0, (size_t) d_head * sizeof (float));
      continue;
    }
    attention_one_t (d_head, Q + i * ldq, last, K, ldk, V, ldv, scale,
        O + i * ldo, 1);
  }
}

static void
avx2_f32_to_f16 (const float *x, uint16_t * y, int64_t n)
{
  int64_t i = 0;

  /* (in wasm the scalar loop alone: wk_fp32_to_fp16 is F16C's rounding
   * by definition and held to it, SIMDe's cvtps_ph is not) */
#ifndef __wasm__
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128 ((__m128i *) (y + i),
        _mm256_cvtps_ph (_mm256_loadu_ps (x + i),
            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; i++)
    y[i] = wk_fp32_to_fp16 (x[i]);
}

static void
avx2_f16_to_f32 (const uint16_t * x, float *y, int64_t n)
{
  int64_t i = 0;

#ifndef __wasm__
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128 ((const __m128i *) (x + i));
    const __m256i w = _mm256_cvtepu16_epi32 (h);
    /* NaNs (|h| > 0x7c00): F16C quiets them, the reference keeps the
     * payload, sign | 0x7f800000 | mantissa << 13 */
    const __m256i nan = _mm256_cmpgt_epi32 (_mm256_and_si256 (w,
            _mm256_set1_epi32 (0x7fff)), _mm256_set1_epi32 (0x7c00));
    __m256 f = _mm256_cvtph_ps (h);
    if (!_mm256_testz_si256 (nan, nan)) {
      const __m256i bits = _mm256_or_si256 (_mm256_slli_epi32
          (_mm256_and_si256 (w, _mm256_set1_epi32 (0x8000)), 16),
          _mm256_or_si256 (_mm256_set1_epi32 (0x7f800000),
              _mm256_slli_epi32 (_mm256_and_si256 (w,
                      _mm256_set1_epi32 (0x3ff)), 13)));
      f = _mm256_blendv_ps (f, _mm256_castsi256_ps (bits),
          _mm256_castsi256_ps (nan));
    }
    _mm256_storeu_ps (y + i, f);
  }
#endif
  for (; i < n; i++)
    y[i] = wk_fp16_to_fp32 (x[i]);
}

static void
avx2_attention_head (int64_t d_head, int64_t q0, int64_t q1, int64_t n_q,
    int64_t n_kv, const float *Q, int64_t ldq, const float *K, int64_t ldk,
    const float *V, int64_t ldv, float scale, int causal, float *O, int64_t ldo)
{
  int64_t i;

  if (q1 - q0 < 4) {
    for (i = q0; i < q1; i++) {
      int64_t last = wk_attention_last_key (i, n_q, n_kv, causal);
      if (last < 0) {
        memset (O + i * ldo, 0, (size_t) d_head * sizeof (float));
        continue;
      }
      attention_one (d_head, Q + i * ldq, last, K, ldk, V, ldv, scale,
          O + i * ldo);
    }
    return;
  }
  for (i = q0; i < q1; i += AQ) {
    int nq = (int) (q1 - i < AQ ? q1 - i : AQ);
    attention_block (d_head, i, nq, n_q, n_kv, Q, ldq, K, ldk, V, ldv, scale,
        causal, O, ldo);
  }
}

/* ---- a few queries, several heads at once (the decoder) ----
 *
 * attention_one_t for heads 0 .. G-1 of a query row with the key loop
 * outside the head loop: each pass reads the keys' and values' rows whole
 * (G heads wide) in order, where one head at a time reads a d_head slice
 * of every row (128 bytes of f16 every 1536 for whisper-small's
 * cross-attention), which the memory system streams slower. Each head's
 * arithmetic is attention_one_t's, in the same order, so the results are
 * the same bits: the values' sums stay in memory (acc) between blocks of
 * AHT rows, which a head passes over with its sums in registers while the
 * block's rows are in L1. */

#define AH_HEADS 24             /* most heads per pass */
#define AH_D 1536               /* most columns (heads x d_head) per pass */
#ifdef __wasm__
/* value rows per block: wasm has no prefetch, and a block of 4 rows read
 * head by head stays near address order for the CPU's own prefetcher
 * (16 rows, in 128-byte pieces per head, made the decoder's cross-
 * attention 1.4x slower); the sums are the same at any AHT */
#define AHT 4
#else
#define AHT 16                  /* value rows per block */
#endif
#define AHPF 16                 /* rows prefetched ahead */
#define AH_QMAX 8               /* queries per pass */
/* value sums per pass over a block's rows (vectors of 8 columns): the
 * order of each column's sum is the same at any AHU */
#ifdef __wasm__
#define AHU 4                   /* 8 of SIMD128's 16 registers */
#else
#define AHU 8
#endif

/* one query's running softmax for G heads between chunks of keys */
typedef struct
{
  float acc[AH_D] __attribute__((aligned (32)));
  float mx[AH_HEADS], sum[AH_HEADS];
} ah_state;

/* keys t0 .. t0 + kn - 1 into the running softmax st of the query q */
static inline WK_ALWAYS_INLINE void
ah_chunk (int G, int64_t d_head, const float *q, int64_t t0, int kn,
    const void *K, int64_t ldk, const void *V, int64_t ldv, float scale,
    int kv16, ah_state * st)
{
  float s[AH_HEADS][AK + 8] __attribute__((aligned (32)));
  float rs[AH_HEADS];
  const size_t es = kv16 ? sizeof (uint16_t) : sizeof (float);
  int64_t t, l;
  int h, tb;

  /* scores, eight keys of every head at a time */
  for (t = 0; t < kn; t += 8) {
#ifdef __wasm__
    /* four keys per pass over q (SIMD128 has no load in its multiply-
     * adds, so q is loaded once for the four), over every head before
     * the next four keys, each key's sums the FMA chain below and
     * hsum8x8's pairs as soon as they are there: the same operations on
     * every key */
    __m256 a[2][AH_HEADS];
    int g;
    for (g = 0; g < 2; g++) {
      int64_t kr[4];
      int u;
      for (u = 0; u < 4; u++)
        kr[u] = (t0 + t + (t + 4 * g + u < kn ? 4 * g + u : 0)) * ldk;
      for (h = 0; h < G; h++) {
        const float *qh = q + h * d_head;
        const int64_t k0 = kr[0] + h * d_head, k1 = kr[1] + h * d_head;
        const int64_t k2 = kr[2] + h * d_head, k3 = kr[3] + h * d_head;
        __m256 d0 = _mm256_setzero_ps (), d1 = d0, d2 = d0, d3 = d0;
        for (l = 0; l < d_head; l += 8) {
          __m256 qv = _mm256_loadu_ps (qh + l);
          d0 = _mm256_fmadd_ps (qv, load8 (K, k0 + l, kv16), d0);
          d1 = _mm256_fmadd_ps (qv, load8 (K, k1 + l, kv16), d1);
          d2 = _mm256_fmadd_ps (qv, load8 (K, k2 + l, kv16), d2);
          d3 = _mm256_fmadd_ps (qv, load8 (K, k3 + l, kv16), d3);
        }
        d0 = _mm256_add_ps (d0, _mm256_setzero_ps ());
        d1 = _mm256_add_ps (d1, _mm256_setzero_ps ());
        d2 = _mm256_add_ps (d2, _mm256_setzero_ps ());
        d3 = _mm256_add_ps (d3, _mm256_setzero_ps ());
        a[g][h] = _mm256_hadd_ps (_mm256_hadd_ps (d0, d1),
            _mm256_hadd_ps (d2, d3));
      }
    }
    for (h = 0; h < G; h++)
      _mm256_store_ps (s[h] + t, _mm256_mul_ps (_mm256_add_ps
              (_mm256_permute2f128_ps (a[0][h], a[1][h], 0x20),
                  _mm256_permute2f128_ps (a[0][h], a[1][h], 0x31)),
              _mm256_set1_ps (scale)));
#else
    const size_t slice = (size_t) d_head * es;
    for (h = 0; h < G; h++) {
      const float *qh = q + h * d_head;
      __m256 a[8];
      int u;
#pragma GCC unroll 8
      for (u = 0; u < 8; u++) {
        int64_t kr = (t0 + t + (t + u < kn ? u : 0)) * ldk + h * d_head;
        const char *pk = (const char *) K + (kr + AHPF * ldk) * es;
        __m256 d = _mm256_setzero_ps ();
        size_t b;
        for (b = 0; b < slice; b += 64)
          _mm_prefetch (pk + b, _MM_HINT_T0);
#pragma GCC unroll 4
        for (l = 0; l < d_head; l += 8)
          d = _mm256_fmadd_ps (_mm256_loadu_ps (qh + l), load8 (K, kr + l,
                  kv16), d);
        /* as attention_one_t: its (zero) scalar tail added */
        a[u] = _mm256_add_ps (d, _mm256_setzero_ps ());
      }
      _mm256_store_ps (s[h] + t, _mm256_mul_ps (hsum8x8 (a[0], a[1], a[2],
                  a[3], a[4], a[5], a[6], a[7]), _mm256_set1_ps (scale)));
    }
#endif
  }
  /* the running softmax of each head */
  for (h = 0; h < G; h++) {
    __m256 vmax = _mm256_set1_ps (-INFINITY), vs = _mm256_setzero_ps (), vm;
    float m_new;
    for (t = kn; t < ((kn + 7) & ~7); t++)
      s[h][t] = -INFINITY;
    for (t = 0; t < kn; t += 8)
      vmax = _mm256_max_ps (vmax, _mm256_load_ps (s[h] + t));
    m_new = hmax256 (vmax);
    if (m_new < st->mx[h])
      m_new = st->mx[h];
    rs[h] = expf (st->mx[h] - m_new);
    vm = _mm256_set1_ps (m_new);
    for (t = 0; t < kn; t += 8) {
      __m256 p = exp256 (_mm256_sub_ps (_mm256_load_ps (s[h] + t), vm));
      _mm256_store_ps (s[h] + t, p);
      vs = _mm256_add_ps (vs, p);
    }
    st->sum[h] = st->sum[h] * rs[h] + hsum256 (vs);
    st->mx[h] = m_new;
  }
  /* acc = r acc + sum_t p_t V[t], a block of rows for every head */
  for (tb = 0; tb < kn; tb += AHT) {
    int te = tb + AHT < kn ? tb + AHT : kn;
    for (h = 0; h < G; h++) {
      float *ah = st->acc + h * d_head;
      __m256 vr = _mm256_set1_ps (rs[h]);
      for (l = 0; l + 8 * AHU <= d_head; l += 8 * AHU) {
        __m256 a[AHU];
        int u;
#pragma GCC unroll 8
        for (u = 0; u < AHU; u++) {
          a[u] = _mm256_load_ps (ah + l + 8 * u);
          if (tb == 0)
            a[u] = _mm256_mul_ps (a[u], vr);
        }
        for (t = tb; t < te; t++) {
          __m256 p = _mm256_broadcast_ss (s[h] + t);
          int64_t vrow = (t0 + t) * ldv + h * d_head + l;
          const char *pv = (const char *) V + (vrow + AHPF * ldv) * es;
          size_t b;
          for (b = 0; b < 8 * AHU * es; b += 64)
            _mm_prefetch (pv + b, _MM_HINT_T0);
#pragma GCC unroll 8
          for (u = 0; u < AHU; u++)
            a[u] = _mm256_fmadd_ps (p, load8 (V, vrow + 8 * u, kv16), a[u]);
        }
#pragma GCC unroll 8
        for (u = 0; u < AHU; u++)
          _mm256_store_ps (ah + l + 8 * u, a[u]);
      }
      for (; l < d_head; l += 8) {
        __m256 a0 = _mm256_load_ps (ah + l);
        if (tb == 0)
          a0 = _mm256_mul_ps (a0, vr);
        for (t = tb; t < te; t++)
          a0 = _mm256_fmadd_ps (_mm256_set1_ps (s[h][t]), load8 (V,
                  (t0 + t) * ldv + h * d_head + l, kv16), a0);
        _mm256_store_ps (ah + l, a0);
      }
    }
  }
}

/* O[i] for queries i < nq (at most AH_QMAX), each over keys 0 .. last[i]
 * (none when < 0): chunk by chunk of AK keys for every query, so that the
 * beams of a step, which share the cross-attention's keys and values,
 * read a chunk from memory once and from L2 after. Each query sees the
 * same chunks in the same order as alone: the same bits. */
static inline WK_ALWAYS_INLINE void
attention_heads_q (int G, int64_t d_head, int nq, const float *Q,
    int64_t ldq, const int64_t * last, const void *K, int64_t ldk,
    const void *V, int64_t ldv, float scale, float *O, int64_t ldo, int kv16)
{
  ah_state st[AH_QMAX];
  int64_t t0, lmax = -1, l;
  int i, h;

  for (i = 0; i < nq; i++) {
    lmax = last[i] > lmax ? last[i] : lmax;
    memset (st[i].acc, 0, (size_t) G * d_head * sizeof (float));
    for (h = 0; h < G; h++) {
      st[i].mx[h] = -INFINITY;
      st[i].sum[h] = 0.0f;
    }
  }
  for (t0 = 0; t0 <= lmax; t0 += AK)
    for (i = 0; i < nq; i++)
      if (t0 <= last[i])
        ah_chunk (G, d_head, Q + i * ldq, t0, (int) (last[i] + 1 - t0 < AK ?
                last[i] + 1 - t0 : AK), K, ldk, V, ldv, scale, kv16, &st[i]);
  for (i = 0; i < nq; i++) {
    float *o = O + i * ldo;
    const ah_state *a = &st[i];
    if (last[i] < 0) {
      memset (o, 0, (size_t) G * d_head * sizeof (float));
      continue;
    }
    for (h = 0; h < G; h++)
      for (l = 0; l < d_head; l++)
        o[h * d_head + l] = a->sum[h] > 0.0f ?
            a->acc[h * d_head + l] / a->sum[h] : 0.0f;
  }
}

static int
avx2_attention_heads (int h0, int h1, int64_t d_head, int64_t q0,
    int64_t q1, int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq,
    const void *K, int64_t ldk, const void *V, int64_t ldv, float scale,
    int causal, float *O, int64_t ldo, int kv16)
{
  /* kv16 2: halves held in f32, attention_heads_q's f16 order */
  const size_t es = kv16 == 1 ? sizeof (uint16_t) : sizeof (float);
  int gmax = (int) (AH_D / (d_head > 0 ? d_head : 1));
  int64_t i;
  int h;

  if (gmax > AH_HEADS)
    gmax = AH_HEADS;
  /* other widths, and 4 or more f32 queries (attention_block's): the
   * caller's, head by head */
  if (d_head % 8 != 0 || d_head > 256 || (!kv16 && q1 - q0 >= 4))
    return 0;
  for (i = q0; i < q1; i += AH_QMAX) {
    int nq = q1 - i < AH_QMAX ? (int) (q1 - i) : AH_QMAX, x;
    int64_t last[AH_QMAX];
    for (x = 0; x < nq; x++)
      last[x] = wk_attention_last_key (i + x, n_q, n_kv, causal);
    for (h = h0; h < h1; h += gmax) {
      int g = h1 - h < gmax ? h1 - h : gmax;
      int64_t off = (int64_t) h * d_head;
      const char *k = (const char *) K + off * es;
      const char *v = (const char *) V + off * es;
      if (kv16 == 1)
        attention_heads_q (g, d_head, nq, Q + i * ldq + off, ldq, last, k,
            ldk, v, ldv, scale, O + i * ldo + off, ldo, 1);
      else
        attention_heads_q (g, d_head, nq, Q + i * ldq + off, ldq, last, k,
            ldk, v, ldv, scale, O + i * ldo + off, ldo, 0);
    }
  }
  return 1;
}

/* ---- rows ---- */

static void
avx2_layer_norm_row (const float *x, int64_t d, const float *gamma,
    const float *beta, float eps, float *y)
{
  __m256 s0 = _mm256_setzero_ps (), s1 = _mm256_setzero_ps ();
  float mean, var, inv, tail = 0.0f;
  __m256 vm, vi;
  int64_t l;

  for (l = 0; l + 8 <= d; l += 8)
    s0 = _mm256_add_ps (s0, _mm256_loadu_ps (x + l));
  for (; l < d; l++)
    tail += x[l];
  mean = (hsum256 (s0) + tail) / (float) d;
  vm = _mm256_set1_ps (mean);
  tail = 0.0f;
  for (l = 0; l + 8 <= d; l += 8) {
    __m256 c = _mm256_sub_ps (_mm256_loadu_ps (x + l), vm);
    s1 = _mm256_fmadd_ps (c, c, s1);
  }
  for (; l < d; l++)
    tail += (x[l] - mean) * (x[l] - mean);
  var = (hsum256 (s1) + tail) / (float) d;
  inv = 1.0f / sqrtf (var + eps);
  vi = _mm256_set1_ps (inv);
  for (l = 0; l + 8 <= d; l += 8) {
    __m256 v = _mm256_mul_ps (_mm256_sub_ps (_mm256_loadu_ps (x + l), vm),
        vi);
    if (gamma)
      v = _mm256_mul_ps (v, _mm256_loadu_ps (gamma + l));
    if (beta)
      v = _mm256_add_ps (v, _mm256_loadu_ps (beta + l));
    _mm256_storeu_ps (y + l, v);
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
avx2_softmax (float *x, int64_t n)
{
  __m256 vmax = _mm256_set1_ps (-INFINITY), vsum = _mm256_setzero_ps (), vm;
  float mx, sum = 0.0f, inv;
  int64_t i;

  for (i = 0; i + 8 <= n; i += 8)
    vmax = _mm256_max_ps (vmax, _mm256_loadu_ps (x + i));
  mx = hmax256 (vmax);
  for (; i < n; i++)
    mx = x[i] > mx ? x[i] : mx;
  vm = _mm256_set1_ps (mx);
  for (i = 0; i + 8 <= n; i += 8) {
    __m256 p = exp256 (_mm256_sub_ps (_mm256_loadu_ps (x + i), vm));
    _mm256_storeu_ps (x + i, p);
    vsum = _mm256_add_ps (vsum, p);
  }
  for (; i < n; i++) {
    x[i] = expf (x[i] - mx);
    sum += x[i];
  }
  sum += hsum256 (vsum);
  inv = 1.0f / sum;
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps (x + i, _mm256_mul_ps (_mm256_loadu_ps (x + i),
            _mm256_set1_ps (inv)));
  for (; i < n; i++)
    x[i] *= inv;
}

static void
avx2_add (float *y, const float *x, int64_t n)
{
  int64_t i;

  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps (y + i, _mm256_add_ps (_mm256_loadu_ps (y + i),
            _mm256_loadu_ps (x + i)));
  for (; i < n; i++)
    y[i] += x[i];
}

/* wk_find_gt: 32 values per test, then the first of them */
static int64_t
avx2_find_gt (const float *x, int64_t n, float t)
{
  __m256 tv = _mm256_set1_ps (t);
  int64_t i;

  for (i = 0; i + 32 <= n; i += 32) {
    __m256 a = _mm256_cmp_ps (_mm256_loadu_ps (x + i), tv, _CMP_GT_OQ);
    __m256 b = _mm256_cmp_ps (_mm256_loadu_ps (x + i + 8), tv, _CMP_GT_OQ);
    __m256 c = _mm256_cmp_ps (_mm256_loadu_ps (x + i + 16), tv, _CMP_GT_OQ);
    __m256 d = _mm256_cmp_ps (_mm256_loadu_ps (x + i + 24), tv, _CMP_GT_OQ);
    if (_mm256_movemask_ps (_mm256_or_ps (_mm256_or_ps (a, b),
                _mm256_or_ps (c, d))))
      break;
  }
  for (; i + 8 <= n; i += 8) {
    int bits = _mm256_movemask_ps (_mm256_cmp_ps (_mm256_loadu_ps (x + i), tv,
            _CMP_GT_OQ));
    if (bits)
      return i + __builtin_ctz ((unsigned) bits);
  }
  for (; i < n; i++)
    if (x[i] > t)
      break;
  return i;
}

const wk_kernel_set wk_kernels_avx2 = {
#ifdef __wasm__
  .round_f16 = wasm_round_f16,
  /* this file in SIMD128 + relaxed SIMD (engine/x86-on-wasm.h): f16 keys
   * and values kept as halves in f32, read in the f16 order */
  .name = "wasm-avx2",
  .f16kv_slow = 1,
  .f16kv_exact = 1,
#else
  .name = "avx2",
#endif
  .linear = avx2_linear,
  .gemm_f32 = simd_gemm_f32,
  .attention_head = avx2_attention_head,
  .attention_head_f16kv = avx2_attention_head_f16kv,
  .f32_to_f16 = avx2_f32_to_f16,
  .f16_to_f32 = avx2_f16_to_f32,
  .layer_norm_row = avx2_layer_norm_row,
  .quantize_act = quantize_act,
  .linear_q = avx2_linear_q,
  .linear_q_min_rows = WK_LINEAR_GEMM_ROWS,
  .gelu = avx2_gelu,
  .softmax = avx2_softmax,
  .add = avx2_add,
  .find_gt = avx2_find_gt,
  .attention_heads = avx2_attention_heads,
};

/* AVX2 with AVX-VNNI: the same set but for the integer products
 * (vpdpbusd), which the encoder takes by default for q8_0 weights as with
 * AVX-512 VNNI. Only chosen when the CPU has AVX-VNNI. */
const wk_kernel_set wk_kernels_avx2vnni = {
  .name = "avx2vnni",
  .linear = avx2vnni_linear,
  .gemm_f32 = simd_gemm_f32,
  .attention_head = avx2_attention_head,
  .attention_head_f16kv = avx2_attention_head_f16kv,
  .f32_to_f16 = avx2_f32_to_f16,
  .f16_to_f32 = avx2_f16_to_f32,
  .layer_norm_row = avx2_layer_norm_row,
  .quantize_act = quantize_act,
  .linear_q = avx2vnni_linear_q,
  .linear_q_min_rows = WK_LINEAR_GEMM_ROWS,
  /* vpdpbusd tiles: about 2x the f32 panels, as AVX-512 VNNI's are */
  .linear_q_default = 1,
  .gelu = avx2_gelu,
  .softmax = avx2_softmax,
  .add = avx2_add,
  .find_gt = avx2_find_gt,
  .attention_heads = avx2_attention_heads,
};
