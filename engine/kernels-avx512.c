/* AVX-512 (F, BW, VL, DQ) kernels for the encoder's matrix products and
 * attention; built with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma
 * -mf16c and only called after a run-time CPU check. CPUs with a full
 * 512-bit datapath (AMD Zen 5, Intel server cores) do twice the AVX2
 * kernels' multiply-adds per cycle here. The decoder's products with one
 * row of X (f16, and q8_0/q4_0 with AVX512_VNNI, checked at init) and its
 * few-query attention are here too, with software prefetch: a decoder
 * step streams its weights from memory once. Everything else (beams,
 * element-wise kernels) is the AVX2 set's: see wk_kernels_avx512_init.
 * Held to kernels-ref.c by tests/test-kernels.c.
 *
 * The blocked products and the many-query attention are kernels-simd.h's,
 * as for kernels-avx2.c, over 16 lanes: weight panels of 32 outputs
 * converted to f32 once per depth block, an 8x32 register-blocked
 * micro-kernel (16 accumulators), attention over blocks of 32 queries. */
#include "kernels-impl.h"

/* GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own
 * _mm512_undefined_* pass-through operands. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels-x86.h"

#define MR 8                    /* rows of X per micro-kernel */
#define NR 32                   /* weight rows (outputs) per panel */
#define NC 64                   /* outputs per packed block (2 panels) */
/* depth per packed block (a multiple of 32): Whisper-tiny's 384 in one
 * pass, so the output is written once */
#define KC 384

/* the AVX2 set's entries this one falls back to */
static wk_kernel_set avx2_set;

/* ---- vector math ---- */

static inline float
f16 (uint16_t h)
{
  return _cvtsh_ss (h);
}

/* e^x as kernels-avx2.c's exp256 */
static inline __m512
exp512 (__m512 x)
{
  const __m512 hi = _mm512_set1_ps (88.3762626647949f);
  const __m512 lo = _mm512_set1_ps (-87.3365447504f);
  __mmask16 under = _mm512_cmp_ps_mask (x, lo, _CMP_LT_OQ);
  __m512 n, r, y, r2;
  __m512i e;

  x = _mm512_min_ps (x, hi);
  x = _mm512_max_ps (x, lo);
  n = _mm512_roundscale_ps (_mm512_mul_ps (x,
          _mm512_set1_ps (1.44269504088896341f)),
      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  r = _mm512_fnmadd_ps (n, _mm512_set1_ps (0.693359375f), x);
  r = _mm512_fnmadd_ps (n, _mm512_set1_ps (-2.12194440e-4f), r);
  y = _mm512_set1_ps (1.9875691500E-4f);
  y = _mm512_fmadd_ps (y, r, _mm512_set1_ps (1.3981999507E-3f));
  y = _mm512_fmadd_ps (y, r, _mm512_set1_ps (8.3334519073E-3f));
  y = _mm512_fmadd_ps (y, r, _mm512_set1_ps (4.1665795894E-2f));
  y = _mm512_fmadd_ps (y, r, _mm512_set1_ps (1.6666665459E-1f));
  y = _mm512_fmadd_ps (y, r, _mm512_set1_ps (5.0000001201E-1f));
  r2 = _mm512_mul_ps (r, r);
  y = _mm512_fmadd_ps (y, r2, _mm512_add_ps (r, _mm512_set1_ps (1.0f)));
  e = _mm512_slli_epi32 (_mm512_add_epi32 (_mm512_cvtps_epi32 (n),
          _mm512_set1_epi32 (127)), 23);
  y = _mm512_mul_ps (y, _mm512_castsi512_ps (e));
  return _mm512_maskz_mov_ps ((__mmask16) (~under), y);
}

/* GELU as kernels-avx2.c's gelu256 */
static inline __m512
gelu512 (__m512 x)
{
  const __m512i sign_mask = _mm512_set1_epi32 ((int) 0x80000000u);
  __m512 z = _mm512_mul_ps (x, _mm512_set1_ps (0.70710678118654752f));
  __m512 az = _mm512_castsi512_ps (_mm512_andnot_si512 (sign_mask,
          _mm512_castps_si512 (z)));
  __m512 t = _mm512_div_ps (_mm512_set1_ps (1.0f),
      _mm512_fmadd_ps (az, _mm512_set1_ps (0.3275911f),
          _mm512_set1_ps (1.0f)));
  __m512 p = _mm512_set1_ps (1.061405429f);
  __m512 e, erf_abs, erf_v;

  p = _mm512_fmadd_ps (p, t, _mm512_set1_ps (-1.453152027f));
  p = _mm512_fmadd_ps (p, t, _mm512_set1_ps (1.421413741f));
  p = _mm512_fmadd_ps (p, t, _mm512_set1_ps (-0.284496736f));
  p = _mm512_fmadd_ps (p, t, _mm512_set1_ps (0.254829592f));
  p = _mm512_mul_ps (p, t);
  e = exp512 (_mm512_mul_ps (_mm512_sub_ps (_mm512_setzero_ps (), az), az));
  erf_abs = _mm512_fnmadd_ps (p, e, _mm512_set1_ps (1.0f));
  erf_v = _mm512_castsi512_ps (_mm512_or_si512 (_mm512_castps_si512
          (erf_abs), _mm512_and_si512 (_mm512_castps_si512 (z), sign_mask)));
  return _mm512_mul_ps (_mm512_mul_ps (_mm512_set1_ps (0.5f), x),
      _mm512_add_ps (_mm512_set1_ps (1.0f), erf_v));
}

static inline __mmask16
first_lanes (int n)
{
  return n >= 16 ? (__mmask16) 0xffff : n <= 0 ? (__mmask16) 0 :
      (__mmask16) ((1u << n) - 1u);
}

/* ---- weight rows to f32 ---- */

static void
row_seg_to_f32 (wk_type type, const unsigned char *row, int64_t l0,
    int64_t len, float *out)
{
  int64_t l = 0, b;

  switch (type) {
    case WK_TYPE_F32:
      memcpy (out, (const float *) row + l0, (size_t) len * sizeof (float));
      break;
    case WK_TYPE_F16:{
      const uint16_t *h = (const uint16_t *) row + l0;
      for (; l + 16 <= len; l += 16)
        _mm512_storeu_ps (out + l,
            _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) (h + l))));
      for (; l < len; l++)
        out[l] = f16 (h[l]);
      break;
    }
    case WK_TYPE_Q8_0:{
      const wk_block_q8_0 *blk = (const wk_block_q8_0 *) row + l0 / WK_QK;
      for (b = 0; b < len / WK_QK; b++) {
        __m512 d = _mm512_set1_ps (f16 (blk[b].d));
        __m128i q0 = _mm_loadu_si128 ((const __m128i *) blk[b].qs);
        __m128i q1 = _mm_loadu_si128 ((const __m128i *) (blk[b].qs + 16));
        _mm512_storeu_ps (out + b * 32, _mm512_mul_ps (d,
                _mm512_cvtepi32_ps (_mm512_cvtepi8_epi32 (q0))));
        _mm512_storeu_ps (out + b * 32 + 16, _mm512_mul_ps (d,
                _mm512_cvtepi32_ps (_mm512_cvtepi8_epi32 (q1))));
      }
      break;
    }
    case WK_TYPE_Q4_0:{
      const wk_block_q4_0 *blk = (const wk_block_q4_0 *) row + l0 / WK_QK;
      const __m128i m4 = _mm_set1_epi8 (0x0f);
      for (b = 0; b < len / WK_QK; b++) {
        float df = f16 (blk[b].d);
        __m512 d = _mm512_set1_ps (df), off = _mm512_set1_ps (-8.0f * df);
        __m128i q = _mm_loadu_si128 ((const __m128i *) blk[b].qs);
        __m128i lo = _mm_and_si128 (q, m4);
        __m128i hi = _mm_and_si128 (_mm_srli_epi16 (q, 4), m4);
        /* (q - 8) d with one rounding, as d q - 8 d */
        _mm512_storeu_ps (out + b * 32, _mm512_fmadd_ps (_mm512_cvtepi32_ps
                (_mm512_cvtepu8_epi32 (lo)), d, off));
        _mm512_storeu_ps (out + b * 32 + 16,
            _mm512_fmadd_ps (_mm512_cvtepi32_ps (_mm512_cvtepu8_epi32 (hi)),
                d, off));
      }
      break;
    }
    default:
      memset (out, 0, (size_t) len * sizeof (float));
      break;
  }
}

/* 16 x 16 as four 8 x 8 */
static inline void
transpose16x16 (const float *s, int64_t ls, float *d, int64_t ld)
{
  transpose8x8 (s, ls, d, ld);
  transpose8x8 (s + 8, ls, d + 8 * ld, ld);
  transpose8x8 (s + 8 * ls, ls, d + 8, ld);
  transpose8x8 (s + 8 * ls + 8, ls, d + 8 * ld + 8, ld);
}

/* ---- the shared f32 micro-kernels (kernels-simd.h) over 16 lanes ---- */

#define SIMD_ALIGN 64
#define VL 16
#define VF __m512
#define VMASK __mmask16
#define v_zero() _mm512_setzero_ps ()
#define v_set1(x) _mm512_set1_ps (x)
#define v_iota() \
  _mm512_setr_ps (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#define v_load(p) _mm512_load_ps (p)
#define v_store(p, v) _mm512_store_ps ((p), (v))
#define v_mask(n) first_lanes (n)
/* masked whether full or not: as fast here */
#define v_load_part(p, m, full) \
  ((void) (full), _mm512_maskz_loadu_ps ((m), (p)))
#define v_store_part(p, m, full, v) \
  ((void) (full), _mm512_mask_storeu_ps ((p), (m), (v)))
#define v_add(a, b) _mm512_add_ps ((a), (b))
#define v_sub(a, b) _mm512_sub_ps ((a), (b))
#define v_mul(a, b) _mm512_mul_ps ((a), (b))
#define v_max(a, b) _mm512_max_ps ((a), (b))
#define v_fma(a, b, c) _mm512_fmadd_ps ((a), (b), (c))
#define v_exp(x) exp512 (x)
#define v_gelu(x) gelu512 (x)
#define v_sel_lt(a, b, s, x) \
  _mm512_mask_mov_ps ((s), _mm512_cmp_ps_mask ((a), (b), _CMP_LT_OQ), (x))
#define v_sel_eq(a, b, s, x) \
  _mm512_mask_mov_ps ((s), _mm512_cmp_ps_mask ((a), (b), _CMP_EQ_OQ), (x))
#define v_transpose(s, ls, d, ld) transpose16x16 ((s), (ls), (d), (ld))

#include "kernels-simd.h"

/* Eight 16-lane partial sums reduced into one vector of 8 sums. */
static inline __m256
hsum8x16 (const __m512 a[8])
{
  __m256 h[8], h01, h23, h45, h67, h0123, h4567;
  int u;

  for (u = 0; u < 8; u++)
    h[u] = _mm256_add_ps (_mm512_castps512_ps256 (a[u]),
        _mm512_extractf32x8_ps (a[u], 1));
  h01 = _mm256_hadd_ps (h[0], h[1]);
  h23 = _mm256_hadd_ps (h[2], h[3]);
  h45 = _mm256_hadd_ps (h[4], h[5]);
  h67 = _mm256_hadd_ps (h[6], h[7]);
  h0123 = _mm256_hadd_ps (h01, h23);
  h4567 = _mm256_hadd_ps (h45, h67);
  return _mm256_add_ps (_mm256_permute2f128_ps (h0123, h4567, 0x20),
      _mm256_permute2f128_ps (h0123, h4567, 0x31));
}

/* ---- decoder products with VNNI: one row of X, 16 weight rows a tile ----
 *
 * q8_0 / q4_0 weights against the quantized activation (wk_quantize_act):
 * each weight row is one lane. Per block, the integer dot products of 16
 * rows come from vpdpbusd (unsigned weights: q8_0 + 128, or q4_0's
 * nibbles, times the signed activation; the offset, -128 or -8 times the
 * activation's block sum, is added after), are reduced to one sum per
 * lane, and only then scaled in f32 by d_w (the 16 rows' scales gathered
 * at once) and d_x: about a third of the instructions per block and row
 * of the AVX2 kernel, whose per-block scaling of each row bounds the
 * q4_0 logits product. */

#define VT 16                   /* weight rows per tile */
/* software prefetch distance in the weight stream (bytes) */
#define VPF 16384
/* the VNNI kernels' attribute, as one word (see WK_ALWAYS_INLINE) */
#define TARGET_VNNI __attribute__ ((target ("avx512vnni")))

#define VX 7                    /* rows of X per pass, at most (beams) */
/* quantized activations held at once: 4 rows of the longest k, 7 of the
 * decoder's (k <= 9362), so that 5 beams read the weights once */
#define VACT (4 * WK_LINEAR_QMAX_K)

typedef struct
{
  int8_t q[VACT];               /* row x at q + x k */
  float d[VACT / WK_QK];        /* d_x per block, row x at d + x nb */
  float c[VACT / WK_QK];        /* -128 or -8 times sum q_x, the same */
} vnni_act;

static int have_vnni;

/* one sum per lane: z[a]'s 128-bit lane k holds 4 partial sums of row
 * 4 k + a */
static inline WK_ALWAYS_INLINE TARGET_VNNI __m512i
reduce4x4 (const __m512i z[4])
{
  __m512i t0 = _mm512_add_epi32 (_mm512_unpacklo_epi32 (z[0], z[1]),
      _mm512_unpackhi_epi32 (z[0], z[1]));
  __m512i t1 = _mm512_add_epi32 (_mm512_unpacklo_epi32 (z[2], z[3]),
      _mm512_unpackhi_epi32 (z[2], z[3]));
  return _mm512_add_epi32 (_mm512_unpacklo_epi64 (t0, t1),
      _mm512_unpackhi_epi64 (t0, t1));
}

/* 16 rows' scales d (the first two bytes of each row's block at w) */
static inline WK_ALWAYS_INLINE TARGET_VNNI __m512
gather_d (const unsigned char *w, __m512i roff)
{
  return _mm512_cvtph_ps (_mm512_cvtepi32_epi16 (_mm512_i32gather_epi32
          (roff, (const void *) w, 1)));
}

/* Sums over the blocks of 16 q8_0 rows starting at w (rb bytes apart)
 * for NX rows of X: acc[x] lane r = row r against row x. The weights are
 * loaded once per block for all rows of X. */
static inline WK_ALWAYS_INLINE TARGET_VNNI void
tile_q8_0 (const int NX, const unsigned char *w, size_t rb, int64_t nb,
    const vnni_act * a, __m512i roff, __m512 * acc)
{
  const __m512i flip = _mm512_set1_epi8 ((char) 0x80);
  int64_t b;
  int i, x;

  for (x = 0; x < NX; x++)
    acc[x] = _mm512_setzero_ps ();
  for (b = 0; b < nb; b++) {
    const unsigned char *wb = w + b * sizeof (wk_block_q8_0);
    const unsigned char *qs = wb + 2;
    __m512i v[8];
    __m512 dw;

    for (i = 0; i < 9; i++)
      _mm_prefetch ((const char *) w + VPF + b * VT * sizeof (wk_block_q8_0)
          + i * 64, _MM_HINT_T0);
    /* v[i]: rows r and r + 4 in its halves, r = i (i < 4) or i + 4, so
     * that the reduction below leaves row r in lane r */
#pragma GCC unroll 8
    for (i = 0; i < 8; i++) {
      size_t r = (size_t) (i < 4 ? i : i + 4);
      v[i] = _mm512_xor_si512 (_mm512_inserti64x4 (_mm512_castsi256_si512
              (_mm256_loadu_si256 ((const __m256i *) (qs + r * rb))),
              _mm256_loadu_si256 ((const __m256i *) (qs + (r + 4) * rb)), 1),
          flip);
    }
    dw = gather_d (wb, roff);
#pragma GCC unroll 4
    for (x = 0; x < NX; x++) {
      const __m512i xv = _mm512_broadcast_i64x4 (_mm256_loadu_si256
          ((const __m256i *) (a->q + x * nb * WK_QK + b * WK_QK)));
      __m512i z[8], t[4], u0, u1, s;
      __m512 f;
#pragma GCC unroll 8
      for (i = 0; i < 8; i++)
        z[i] = _mm512_dpbusd_epi32 (_mm512_setzero_si512 (), v[i], xv);
#pragma GCC unroll 4
      for (i = 0; i < 4; i++)
        t[i] = _mm512_add_epi32 (_mm512_unpacklo_epi32 (z[2 * i],
                z[2 * i + 1]), _mm512_unpackhi_epi32 (z[2 * i], z[2 * i + 1]));
      u0 = _mm512_add_epi32 (_mm512_unpacklo_epi64 (t[0], t[1]),
          _mm512_unpackhi_epi64 (t[0], t[1]));
      u1 = _mm512_add_epi32 (_mm512_unpacklo_epi64 (t[2], t[3]),
          _mm512_unpackhi_epi64 (t[2], t[3]));
      s = _mm512_add_epi32 (_mm512_shuffle_i32x4 (u0, u1, _MM_SHUFFLE (2, 0,
                  2, 0)), _mm512_shuffle_i32x4 (u0, u1, _MM_SHUFFLE (3, 1, 3,
                  1)));
      f = _mm512_add_ps (_mm512_cvtepi32_ps (s),
          _mm512_set1_ps (a->c[x * nb + b]));
      acc[x] =
          _mm512_fmadd_ps (_mm512_mul_ps (f, dw),
          _mm512_set1_ps (a->d[x * nb + b]), acc[x]);
    }
  }
}

/* The same for q4_0 rows. */
static inline WK_ALWAYS_INLINE TARGET_VNNI void
tile_q4_0 (const int NX, const unsigned char *w, size_t rb, int64_t nb,
    const vnni_act * a, __m512i roff, __m512 * acc)
{
  const __m512i m4 = _mm512_set1_epi8 (0x0f);
  int64_t b;
  int i, x;

  for (x = 0; x < NX; x++)
    acc[x] = _mm512_setzero_ps ();
  for (b = 0; b < nb; b++) {
    const unsigned char *wb = w + b * sizeof (wk_block_q4_0);
    const unsigned char *qs = wb + 2;
    __m512i lo[4], hi[4];
    __m512 dw;

    for (i = 0; i < 5; i++)
      _mm_prefetch ((const char *) w + VPF + b * VT * sizeof (wk_block_q4_0)
          + i * 64, _MM_HINT_T0);
    /* lo[i], hi[i]: rows i, i + 4, i + 8, i + 12 in its 128-bit lanes */
#pragma GCC unroll 4
    for (i = 0; i < 4; i++) {
      __m512i v = _mm512_castsi128_si512 (_mm_loadu_si128 ((const __m128i *)
              (qs + (size_t) i * rb)));
      v = _mm512_inserti32x4 (v, _mm_loadu_si128 ((const __m128i *) (qs +
                  (size_t) (i + 4) * rb)), 1);
      v = _mm512_inserti32x4 (v, _mm_loadu_si128 ((const __m128i *) (qs +
                  (size_t) (i + 8) * rb)), 2);
      v = _mm512_inserti32x4 (v, _mm_loadu_si128 ((const __m128i *) (qs +
                  (size_t) (i + 12) * rb)), 3);
      lo[i] = _mm512_and_si512 (v, m4);
      hi[i] = _mm512_and_si512 (_mm512_srli_epi16 (v, 4), m4);
    }
    dw = gather_d (wb, roff);
#pragma GCC unroll 4
    for (x = 0; x < NX; x++) {
      const __m512i xl = _mm512_broadcast_i32x4 (_mm_loadu_si128
          ((const __m128i *) (a->q + x * nb * WK_QK + b * WK_QK)));
      const __m512i xh = _mm512_broadcast_i32x4 (_mm_loadu_si128
          ((const __m128i *) (a->q + x * nb * WK_QK + b * WK_QK + 16)));
      __m512i z[4];
      __m512 f;
#pragma GCC unroll 4
      for (i = 0; i < 4; i++)
        z[i] = _mm512_dpbusd_epi32 (_mm512_dpbusd_epi32 (_mm512_setzero_si512
                (), lo[i], xl), hi[i], xh);
      f = _mm512_add_ps (_mm512_cvtepi32_ps (reduce4x4 (z)),
          _mm512_set1_ps (a->c[x * nb + b]));
      acc[x] = _mm512_fmadd_ps (_mm512_mul_ps (f, dw),
          _mm512_set1_ps (a->d[x * nb + b]), acc[x]);
    }
  }
}

#define VNNI_CASE(NX) \
  case NX: \
    if (q8) \
      tile_q8_0 (NX, w, rb, nb, a, roff, acc); \
    else \
      tile_q4_0 (NX, w, rb, nb, a, roff, acc); \
    break

/* one tile for nx (1 .. VX) rows of X */
static TARGET_VNNI void
tile_q (int q8, int nx, const unsigned char *w, size_t rb, int64_t nb,
    const vnni_act * a, __m512i roff, __m512 * acc)
{
  switch (nx) {
      VNNI_CASE (1);
      VNNI_CASE (2);
      VNNI_CASE (3);
      VNNI_CASE (4);
      VNNI_CASE (5);
      VNNI_CASE (6);
    default:
      if (q8)
        tile_q8_0 (VX, w, rb, nb, a, roff, acc);
      else
        tile_q4_0 (VX, w, rb, nb, a, roff, acc);
      break;
  }
}

/* wk_linear_ex for act_q8 products (up to 7 rows of X, as many at a time
 * as vnni_act holds): whole tiles here, the rest (< 16 outputs) by the
 * AVX2 kernels. */
static TARGET_VNNI void
gemv_q_vnni (const wk_tensor * W, const float *bias, const float *X,
    int64_t n, int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1,
    unsigned flags)
{
  /* 80 KiB */
  vnni_act a;
  const int64_t k = W->ne[0], nb = k / WK_QK;
  const int64_t px = VACT / k < VX ? VACT / k : VX;
  const size_t rb = wk_type_row_bytes (W->type, k);
  const unsigned char *data = W->data;
  const int q8 = W->type == WK_TYPE_Q8_0;
  const float off = q8 ? -128.0f : -8.0f;
  const __m512i roff = _mm512_mullo_epi32 (_mm512_setr_epi32 (0, 1, 2, 3, 4,
          5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32 ((int)
          rb));
  const int64_t jt = j0 + (j1 - j0) / VT * VT;
  int64_t b, j, i0;
  int x;

  for (i0 = 0; i0 < n; i0 += px) {
    int nx = (int) (n - i0 < px ? n - i0 : px);
    for (x = 0; x < nx; x++) {
      int8_t *q = a.q + x * k;
      avx2_set.quantize_act (X + (i0 + x) * ldx, k, q, a.d + x * nb);
      for (b = 0; b < nb; b++)
        a.c[x * nb + b] = off * (float) wk_block_sum_i8 (q + b * WK_QK);
    }
    for (j = j0; j < jt; j += VT) {
      __m512 acc[VX];
      tile_q (q8, nx, data + (size_t) j * rb, rb, nb, &a, roff, acc);
      for (x = 0; x < nx; x++) {
        float *yx = Y + (i0 + x) * ldy + j;
        __m512 y = acc[x];
        if (bias)
          y = _mm512_add_ps (y, _mm512_loadu_ps (bias + j));
        if (flags & WK_LINEAR_GELU)
          y = gelu512 (y);
        if (flags & WK_LINEAR_ADD)
          y = _mm512_add_ps (y, _mm512_loadu_ps (yx));
        _mm512_storeu_ps (yx, y);
      }
    }
    if (jt < j1)
      avx2_set.linear (W, bias, X + i0 * ldx, nx, ldx, Y + i0 * ldy, ldy, jt,
          j1, flags, 1);
  }
}

/* ---- encoder products with VNNI: quantized rows of X ----
 *
 * wk_linear_work's integer products, driven by wk_gemm_blocked: weight panels
 * of 32 outputs packed once per depth block, as unsigned bytes (q8_0 +
 * 128, or q4_0's nibbles) in groups of 4 depths per output, so that one
 * 64-byte load is 16 outputs x 4 depths, vpdpbusd's unsigned operand; the
 * signed operand is 4 bytes of a quantized row of X broadcast. A 6 x 32
 * tile keeps 12 integer block sums (started at the row's offset, -128 or
 * -8 times the block's sum of q_x, so that they are sum q_w q_x exactly)
 * and 12 f32 sums, to which each block adds (sum * d_w) * d_x, as
 * tile_q8_0 does: each output's value is the same sequence of operations
 * whatever tile, piece or thread it falls in. */

#define QMR 6                   /* rows of X per tile */
#define QNR 32                  /* outputs per panel */
#define QNC 64                  /* outputs per packed block */
#define QKC 1024                /* depth per packed block (32 blocks) */

typedef struct
{
  uint8_t w[QKC / 4][QNR][4];   /* [depth / 4][output][depth % 4] */
  float d[QKC / WK_QK][QNR];    /* d_w per block and output */
} qpanel;

/* Packs outputs j .. j+nr-1 (the rest zero) at depth l0 .. l0+kc-1:
 * 4 bytes of 16 rows at a time by one gather (a 16 x 4-byte transpose). */
static TARGET_VNNI void
pack_qpanel (const wk_tensor * W, size_t rb, int64_t j, int nr, int64_t l0,
    int kc, qpanel * p)
{
  const unsigned char *data = W->data;
  const int q8 = W->type == WK_TYPE_Q8_0;
  const size_t bb = q8 ? sizeof (wk_block_q8_0) : sizeof (wk_block_q4_0);
  const int nbk = kc / WK_QK;
  const __m512i roff = _mm512_mullo_epi32 (_mm512_setr_epi32 (0, 1, 2, 3, 4,
          5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32 ((int)
          rb));
  const __m512i flip = _mm512_set1_epi8 ((char) 0x80);
  const __m512i m4 = _mm512_set1_epi8 (0x0f);
  int h, b, g;

  for (h = 0; h < QNR / 16; h++) {
    const __mmask16 m = first_lanes (nr - 16 * h);
    const unsigned char *base = data + (size_t) (j + 16 * h) * rb
        + (size_t) (l0 / WK_QK) * bb;
    for (b = 0; b < nbk; b++) {
      const unsigned char *wb = base + (size_t) b * bb;
      __m512 d;
      if (m == 0) {
        for (g = 0; g < WK_QK / 4; g++)
          _mm512_store_si512 ((void *) p->w[b * (WK_QK / 4) + g][16 * h],
              _mm512_setzero_si512 ());
        _mm512_store_ps (p->d[b] + 16 * h, _mm512_setzero_ps ());
        continue;
      }
      d = _mm512_cvtph_ps (_mm512_cvtepi32_epi16 (_mm512_mask_i32gather_epi32
              (_mm512_setzero_si512 (), m, roff, (const void *) wb, 1)));
      _mm512_store_ps (p->d[b] + 16 * h, d);
      if (q8) {
        for (g = 0; g < WK_QK / 4; g++) {
          __m512i v = _mm512_mask_i32gather_epi32 (_mm512_setzero_si512 (), m,
              roff, (const void *) (wb + 2 + 4 * g), 1);
          /* + 128 (lanes of missing rows stay 0) */
          v = _mm512_maskz_mov_epi32 (m, _mm512_xor_si512 (v, flip));
          _mm512_store_si512 ((void *) p->w[b * (WK_QK / 4) + g][16 * h], v);
        }
      } else {
        for (g = 0; g < WK_QK / 8; g++) {
          __m512i v = _mm512_mask_i32gather_epi32 (_mm512_setzero_si512 (), m,
              roff, (const void *) (wb + 2 + 4 * g), 1);
          _mm512_store_si512 ((void *) p->w[b * (WK_QK / 4) + g][16 * h],
              _mm512_and_si512 (v, m4));
          _mm512_store_si512 ((void *) p->w[b * (WK_QK / 4) + g +
                  WK_QK / 8][16 * h], _mm512_and_si512 (_mm512_srli_epi16 (v,
                      4), m4));
        }
      }
    }
  }
}

/* c[2r + h] = sum over the nbk blocks of rows r < 6 (q, d, c at the depth
 * block's first block) against the panel's outputs 16h .. 16h+15. */
static inline WK_ALWAYS_INLINE TARGET_VNNI void
qkernel_6x32 (int nbk, const int8_t * const *q, const float *const *d,
    const int32_t * const *cx, const qpanel * p, __m512 c[12])
{
  __m512 acc[12];
  int b, g, r;

  for (r = 0; r < 12; r++)
    acc[r] = _mm512_setzero_ps ();
  for (b = 0; b < nbk; b++) {
    __m512i s[12];
    __m512 d0, d1;
#pragma GCC unroll 6
    for (r = 0; r < QMR; r++) {
      s[2 * r] = _mm512_set1_epi32 (cx[r][b]);
      s[2 * r + 1] = s[2 * r];
    }
#pragma GCC unroll 8
    for (g = 0; g < WK_QK / 4; g++) {
      const __m512i w0 = _mm512_load_si512 ((const void *)
          p->w[b * (WK_QK / 4) + g][0]);
      const __m512i w1 = _mm512_load_si512 ((const void *)
          p->w[b * (WK_QK / 4) + g][16]);
#pragma GCC unroll 6
      for (r = 0; r < QMR; r++) {
        int32_t x4;
        __m512i xv;
        memcpy (&x4, q[r] + b * WK_QK + g * 4, 4);
        xv = _mm512_set1_epi32 (x4);
        s[2 * r] = _mm512_dpbusd_epi32 (s[2 * r], w0, xv);
        s[2 * r + 1] = _mm512_dpbusd_epi32 (s[2 * r + 1], w1, xv);
      }
    }
    d0 = _mm512_load_ps (p->d[b]);
    d1 = _mm512_load_ps (p->d[b] + 16);
#pragma GCC unroll 6
    for (r = 0; r < QMR; r++) {
      const __m512 dx = _mm512_set1_ps (d[r][b]);
      acc[2 * r] = _mm512_fmadd_ps (_mm512_mul_ps (_mm512_cvtepi32_ps (s[2 *
                      r]), d0), dx, acc[2 * r]);
      acc[2 * r + 1] = _mm512_fmadd_ps (_mm512_mul_ps (_mm512_cvtepi32_ps (s[2
                      * r + 1]), d1), dx, acc[2 * r + 1]);
    }
  }
  for (r = 0; r < 12; r++)
    c[r] = acc[r];
}

/* The weights as wk_gemm_blocked's operand b. */
typedef struct
{
  const wk_tensor *W;
  size_t rb;
} qweights;

/* wk_gemm_ukernel.pack */
static void
q_pack (const void *b, int64_t j, int nr, int64_t l0, int kc, void *panel)
{
  const qweights *w = b;

  pack_qpanel (w->W, w->rb, j, nr, l0, kc, panel);
}

/* wk_gemm_ukernel.tile */
static TARGET_VNNI void
q_tile (const void *a, const int64_t * rows, int mr, int64_t l0, int kc,
    const void *panel, int nr, float *Y, int64_t ldy, int64_t j, int first,
    int last, const wk_gemm_epi * epi)
{
  const int8_t *qr[QMR];
  const float *dr[QMR];
  const int32_t *cr[QMR];
  __m512 t[12];

  wk_gemm_qrows_at (a, rows, QMR, l0, qr, dr, cr);
  qkernel_6x32 (kc / WK_QK, qr, dr, cr, panel, t);
  store_tile (t, mr, nr, Y, ldy, j, first, last, epi);
}

static const wk_gemm_ukernel q_panels = {
  QMR, QNR, QNC, QKC, sizeof (qpanel), q_pack, q_tile
};

static void
avx512_linear_q (const wk_tensor * W, const float *bias, const int8_t * q,
    const float *d, const int32_t * c, int64_t n, float *Y, int64_t ldy,
    int64_t j0, int64_t j1, unsigned flags)
{
  qpanel bp[QNC / QNR] __attribute__((aligned (64)));
  const wk_gemm_qrows x = { q, d, c, W->ne[0] };
  const qweights w = { W, wk_type_row_bytes (W->type, W->ne[0]) };
  const wk_gemm_epi epi = { bias, flags, 1.0f };

  wk_gemm_blocked (&q_panels, &x, &w, n, Y, ldy, j0, j1, W->ne[0], &epi, bp);
}

/* ---- f16 decoder products (kernels-f16.h) over 16 lanes ---- */

static inline WK_ALWAYS_INLINE void
f16_tile_store (const __m512 acc[8], const float *bias, unsigned flags,
    float *y)
{
  __m256 v = hsum8x16 (acc);

  if (bias)
    v = _mm256_add_ps (v, _mm256_loadu_ps (bias));
  if (flags & WK_LINEAR_GELU)
    v = _mm512_castps512_ps256 (gelu512 (_mm512_castps256_ps512 (v)));
  if (flags & WK_LINEAR_ADD)
    v = _mm256_add_ps (v, _mm256_loadu_ps (y));
  _mm256_storeu_ps (y, v);
}

static inline void
f16_tail (const wk_tensor * W, const float *bias, const float *X, int64_t n,
    int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1, unsigned flags)
{
  avx2_set.linear (W, bias, X, n, ldx, Y, ldy, j0, j1, flags, 0);
}

#define v_loadu(p) _mm512_loadu_ps (p)
#define v_load_f16(p) \
  _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *) (p)))
#define v_prefetch(p) _mm_prefetch ((p), _MM_HINT_T0)
#define F16_GROUP 7             /* 14 accumulators */

#include "kernels-f16.h"

static void
avx512_linear (const wk_tensor * W, const float *bias, const float *X,
    int64_t n, int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1,
    unsigned flags, int act_q8)
{
  if (act_q8 && have_vnni) {
    gemv_q_vnni (W, bias, X, n, ldx, Y, ldy, j0, j1, flags);
    return;
  }
  if (n < WK_LINEAR_GEMM_ROWS && W->type == WK_TYPE_F16 && W->ne[0] % 32 == 0) {
    gemv_f16 (W, bias, X, n, ldx, Y, ldy, j0, j1, flags);
    return;
  }
  if (act_q8 || n < WK_LINEAR_GEMM_ROWS) {
    avx2_set.linear (W, bias, X, n, ldx, Y, ldy, j0, j1, flags, act_q8);
    return;
  }
  linear_f32_panels (W, bias, X, n, ldx, Y, ldy, j0, j1, flags);
}

/* ---- attention (attention_block: kernels-simd.h) ---- */

/* ---- one-query attention (the decoder) ---- */

static inline __m512
kv_load16 (const void *p, int64_t i, int kv16)
{
  if (kv16)
    return _mm512_cvtph_ps (_mm256_loadu_si256 ((const __m256i *)
            ((const uint16_t *) p + i)));
  return _mm512_loadu_ps ((const float *) p + i);
}

/* ---- a few queries, several 64-wide heads at once (the decoder) ---- */

#define AG_MAX 6                /* heads per pass: 24 accumulators */
#define AGK AK                  /* keys per chunk, as kernels-avx2.c */
_Static_assert (AGK % 16 == 0, "a chunk's scores are read 16 at a time");
#define AGPF 16                 /* rows prefetched ahead */

/* kernels-avx2.c's attention_heads for 64-wide heads, with its results
 * bit for bit (so that the AVX2 and AVX-512 sets decode alike: their
 * decoders part on near-ties otherwise), and 16-lane vectors where that
 * order allows: heads 0 .. G-1 of nq rows of queries (G * 64 values
 * each), with the key loop outside the head loop: each pass reads the
 * keys' and values' rows whole (G * 64 values) in order rather than a
 * 64-value slice of every row per head, which the memory system streams
 * about twice as fast; and chunk by chunk of AGK keys for every query, so
 * that the beams of a step, which share the cross-attention's keys and
 * values, read them from memory once (a chunk stays in L2 for the next
 * query). Each query's running softmax goes through the same chunks in
 * the same order whatever nq: a beam's result has the bits of the
 * one-query pass. The AVX2 order: a score is 8 lanes of multiply-adds
 * over the 64 values in steps of 8, summed in hsum8x8's tree (here two
 * keys a register, kv_load8x2 and hsum8x2x4); the chunk's exponentials
 * add up in 8 lanes, summed by hsum256; the values' sums are lane-wise,
 * the same at any width; the output is divided by the sum. */

#define AG_QMAX 8               /* queries per pass */

/* the 64 values (f16 or f32) at p into L1 */
static inline void
prefetch64 (const char *p, int kv16)
{
  _mm_prefetch (p, _MM_HINT_T0);
  _mm_prefetch (p + 64, _MM_HINT_T0);
  if (!kv16) {
    _mm_prefetch (p + 128, _MM_HINT_T0);
    _mm_prefetch (p + 192, _MM_HINT_T0);
  }
}

/* values i0 .. i0 + 7 and i1 .. i1 + 7 (f32 or f16), a register */
static inline __m512
kv_load8x2 (const void *p, int64_t i0, int64_t i1, int kv16)
{
  if (kv16)
    return _mm512_cvtph_ps (_mm256_inserti128_si256 (_mm256_castsi128_si256
            (_mm_loadu_si128 ((const __m128i *) ((const uint16_t *) p +
                        i0))), _mm_loadu_si128 ((const __m128i *) ((const
                        uint16_t *) p + i1)), 1));
  return _mm512_insertf32x8 (_mm512_castps256_ps512 (_mm256_loadu_ps ((const
                  float *) p + i0)), _mm256_loadu_ps ((const float *) p + i1),
      1);
}

/* per 128-bit lane a0 + a1, a2 + a3, b0 + b1, b2 + b3: _mm256_hadd_ps's
 * sums */
static inline __m512
hadd512 (__m512 a, __m512 b)
{
  return _mm512_add_ps (_mm512_shuffle_ps (a, b, _MM_SHUFFLE (2, 0, 2, 0)),
      _mm512_shuffle_ps (a, b, _MM_SHUFFLE (3, 1, 3, 1)));
}

/* The sums of 8 keys' 8 lanes, z[u] holding keys 2u and 2u + 1 in its
 * halves, added as kernels-avx2.c's hsum8x8 adds them (pairs, pairs of
 * pairs, then the two 4-lane halves), in key order. */
static inline __m256
hsum8x2x4 (const __m512 z[4])
{
  __m512 c = hadd512 (hadd512 (z[0], z[1]), hadd512 (z[2], z[3]));
  /* 128-bit lane 0: keys 0 2 4 6 of lanes 0-3, 1: of lanes 4-7; 2 and 3
   * the same for keys 1 3 5 7 */
  __m512 d = _mm512_add_ps (c, _mm512_shuffle_f32x4 (c, c, _MM_SHUFFLE (2, 3,
              0, 1)));
  __m128 e = _mm512_castps512_ps128 (d), o = _mm512_extractf32x4_ps (d, 2);
  return _mm256_set_m128 (_mm_unpackhi_ps (e, o), _mm_unpacklo_ps (e, o));
}

typedef struct
{
  __m512 acc[AG_MAX][4];
  float mx[AG_MAX], sum[AG_MAX];
} ag_state;

/* keys t0 .. t0 + kn - 1 into the running softmax st of the query q */
static inline WK_ALWAYS_INLINE void
ag_chunk (const int G, const float *q, int64_t t0, int kn, const void *K,
    int64_t ldk, const void *V, int64_t ldv, float scale, int kv16,
    ag_state * st)
{
  float s[AG_MAX][AGK] __attribute__((aligned (64)));
  __m512 acc[AG_MAX][4];
  int t, h, c;

#pragma GCC unroll 6
  for (h = 0; h < G; h++)
#pragma GCC unroll 4
    for (c = 0; c < 4; c++)
      acc[h][c] = st->acc[h][c];
  /* scores, eight keys at a time for every head */
  for (t = 0; t < kn; t += 8) {
#pragma GCC unroll 6
    for (h = 0; h < G; h++) {
      const float *qh = q + h * 64;
      __m512 z[4];
      int u, l;
#pragma GCC unroll 4
      for (u = 0; u < 4; u++) {
        int64_t kr[2];
        __m512 d = _mm512_setzero_ps ();
        int v;
        for (v = 0; v < 2; v++) {
          kr[v] = (t0 + t + (t + 2 * u + v < kn ? 2 * u + v : 0)) * ldk
              + h * 64;
          prefetch64 ((const char *) K + (kr[v] + AGPF * ldk) * (kv16 ? 2 :
                  4), kv16);
        }
#pragma GCC unroll 8
        for (l = 0; l < 64; l += 8)
          d = _mm512_fmadd_ps (_mm512_broadcast_f32x8 (_mm256_loadu_ps (qh +
                      l)), kv_load8x2 (K, kr[0] + l, kr[1] + l, kv16), d);
        /* as the AVX2 kernel: its (zero) scalar tail added */
        z[u] = _mm512_add_ps (d, _mm512_setzero_ps ());
      }
      _mm256_store_ps (s[h] + t, _mm256_mul_ps (hsum8x2x4 (z),
              _mm256_set1_ps (scale)));
    }
  }

  /* running softmax per head; lanes past kn (at most 7) never count */
#pragma GCC unroll 6
  for (h = 0; h < G; h++) {
    __m512 vmax = _mm512_set1_ps (-INFINITY), vm, vr;
    __m256 vs = _mm256_setzero_ps ();
    float m_new, r;

    for (t = 0; t < kn; t += 16)
      vmax = _mm512_mask_max_ps (vmax, first_lanes (kn - t), vmax,
          _mm512_load_ps (s[h] + t));
    m_new = _mm512_reduce_max_ps (vmax);
    if (m_new < st->mx[h])
      m_new = st->mx[h];
    r = expf (st->mx[h] - m_new);
    vm = _mm512_set1_ps (m_new);
    for (t = 0; t < kn; t += 16) {
      __m512 p = _mm512_maskz_mov_ps (first_lanes (kn - t),
          exp512 (_mm512_sub_ps (_mm512_load_ps (s[h] + t), vm)));
      _mm512_store_ps (s[h] + t, p);
      /* 8 lanes, 8 keys at a time (a block of zeros past kn adds 0) */
      vs = _mm256_add_ps (vs, _mm512_castps512_ps256 (p));
      vs = _mm256_add_ps (vs, _mm512_extractf32x8_ps (p, 1));
    }
    st->sum[h] = st->sum[h] * r + hsum256 (vs);
    st->mx[h] = m_new;
    vr = _mm512_set1_ps (r);
#pragma GCC unroll 4
    for (c = 0; c < 4; c++)
      acc[h][c] = _mm512_mul_ps (acc[h][c], vr);
  }

  /* values: one row per round, G * 4 independent chains */
  for (t = 0; t < kn; t++) {
    int64_t vrow = (t0 + t) * ldv;
#pragma GCC unroll 6
    for (h = 0; h < G; h++) {
      __m512 p = _mm512_set1_ps (s[h][t]);
      prefetch64 ((const char *) V + (vrow + AGPF * ldv + h * 64) * (kv16 ?
              2 : 4), kv16);
#pragma GCC unroll 4
      for (c = 0; c < 4; c++)
        acc[h][c] = _mm512_fmadd_ps (p, kv_load16 (V, vrow + h * 64 + c
                * 16, kv16), acc[h][c]);
    }
  }
#pragma GCC unroll 6
  for (h = 0; h < G; h++)
#pragma GCC unroll 4
    for (c = 0; c < 4; c++)
      st->acc[h][c] = acc[h][c];
}

/* O[i] for queries i < nq, each over keys 0 .. last[i] (none when < 0) */
static inline WK_ALWAYS_INLINE void
attention_group64 (const int G, int nq, const float *Q, int64_t ldq,
    const int64_t * last, const void *K, int64_t ldk, const void *V,
    int64_t ldv, float scale, float *O, int64_t ldo, int kv16)
{
  ag_state st[AG_QMAX];
  int64_t t0, lmax = -1;
  int i, h, c;

  for (i = 0; i < nq; i++) {
    lmax = last[i] > lmax ? last[i] : lmax;
#pragma GCC unroll 6
    for (h = 0; h < G; h++) {
      st[i].mx[h] = -INFINITY;
      st[i].sum[h] = 0.0f;
#pragma GCC unroll 4
      for (c = 0; c < 4; c++)
        st[i].acc[h][c] = _mm512_setzero_ps ();
    }
  }
  for (t0 = 0; t0 <= lmax; t0 += AGK)
    for (i = 0; i < nq; i++)
      if (t0 <= last[i])
        ag_chunk (G, Q + i * ldq, t0, (int) (last[i] + 1 - t0 < AGK ?
                last[i] + 1 - t0 : AGK), K, ldk, V, ldv, scale, kv16, &st[i]);
  for (i = 0; i < nq; i++) {
    float *o = O + i * ldo;
    if (last[i] < 0) {
      memset (o, 0, (size_t) G * 64 * sizeof (float));
      continue;
    }
#pragma GCC unroll 6
    for (h = 0; h < G; h++) {
      float sum = st[i].sum[h];
#pragma GCC unroll 4
      for (c = 0; c < 4; c++)
        _mm512_storeu_ps (o + h * 64 + c * 16, sum > 0.0f ?
            _mm512_div_ps (st[i].acc[h][c], _mm512_set1_ps (sum)) :
            _mm512_setzero_ps ());
    }
  }
}

#define AG_CASE(G) \
  case G: \
    if (kv16) \
      attention_group64 (G, nq, Q, ldq, last, K, ldk, V, ldv, scale, O, ldo, \
          1); \
    else \
      attention_group64 (G, nq, Q, ldq, last, K, ldk, V, ldv, scale, O, ldo, \
          0); \
    break

static void
attention_group (int g, int nq, const float *Q, int64_t ldq,
    const int64_t * last, const void *K, int64_t ldk, const void *V,
    int64_t ldv, float scale, float *O, int64_t ldo, int kv16)
{
  switch (g) {
      AG_CASE (1);
      AG_CASE (2);
      AG_CASE (3);
      AG_CASE (4);
      AG_CASE (5);
    default:
      AG_CASE (6);
  }
}

#undef AG_CASE

static void avx512_attention_head_f16kv (int64_t d_head, int64_t q0,
    int64_t q1, int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq,
    const uint16_t * K, int64_t ldk, const uint16_t * V, int64_t ldv,
    float scale, int causal, float *O, int64_t ldo);
static void avx512_attention_head (int64_t d_head, int64_t q0, int64_t q1,
    int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq, const float *K,
    int64_t ldk, const float *V, int64_t ldv, float scale, int causal,
    float *O, int64_t ldo);

static int
avx512_attention_heads (int h0, int h1, int64_t d_head, int64_t q0,
    int64_t q1, int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq,
    const void *K, int64_t ldk, const void *V, int64_t ldv, float scale,
    int causal, float *O, int64_t ldo, int kv16)
{
  const size_t es = kv16 ? sizeof (uint16_t) : sizeof (float);
  const int64_t off = (int64_t) h0 * 64;
  int64_t i;

  /* other widths, and 4 or more f32 queries (attention_block's): the
   * caller's, head by head, as kernels-avx2.c leaves them */
  if (d_head != 64 || (!kv16 && q1 - q0 >= 4))
    return 0;
  /* More heads than a pass holds in registers (base's 8, small's 12):
   * passes of AG_MAX heads would each read a slice of every key and value
   * row, which streams from memory at about two thirds of the speed of
   * whole rows; kernels-avx2.c takes up to 24 heads a pass, whole rows,
   * with the same bits (test_x86_attention_sets_agree). Small q8_0
   * step, one thread: 7.3-12.4 ms against 10.1-17.0 ms. */
  if (h1 <= h0)
    return 1;
  if (h1 - h0 > AG_MAX)
    return avx2_set.attention_heads (h0, h1, d_head, q0, q1, n_q, n_kv, Q,
        ldq, K, ldk, V, ldv, scale, causal, O, ldo, kv16);
  for (i = q0; i < q1; i += AG_QMAX) {
    int nq = q1 - i < AG_QMAX ? (int) (q1 - i) : AG_QMAX, x;
    int64_t last[AG_QMAX];
    for (x = 0; x < nq; x++)
      last[x] = wk_attention_last_key (i + x, n_q, n_kv, causal);
    attention_group (h1 - h0, nq, Q + i * ldq + off, ldq, last,
        (const char *) K + off * es, ldk, (const char *) V + off * es, ldv,
        scale, O + i * ldo + off, ldo, kv16);
  }
  return 1;
}

static void
avx512_attention_head_f16kv (int64_t d_head, int64_t q0, int64_t q1,
    int64_t n_q, int64_t n_kv, const float *Q, int64_t ldq,
    const uint16_t * K, int64_t ldk, const uint16_t * V, int64_t ldv,
    float scale, int causal, float *O, int64_t ldo)
{
  if (d_head != 64) {
    avx2_set.attention_head_f16kv (d_head, q0, q1, n_q, n_kv, Q, ldq, K, ldk,
        V, ldv, scale, causal, O, ldo);
    return;
  }
  /* one head of the several-head kernel: kernels-avx2.c's one-query bits */
  avx512_attention_heads (0, 1, 64, q0, q1, n_q, n_kv, Q, ldq, K, ldk, V, ldv,
      scale, causal, O, ldo, 1);
}

static void
avx512_attention_head (int64_t d_head, int64_t q0, int64_t q1, int64_t n_q,
    int64_t n_kv, const float *Q, int64_t ldq, const float *K, int64_t ldk,
    const float *V, int64_t ldv, float scale, int causal, float *O, int64_t ldo)
{
  int64_t i;

  /* a few queries, as kernels-avx2.c splits them (its one-query pass
   * below 4, the blocks from 4 on), so that both give the same bits */
  if (q1 - q0 < 4) {
    if (d_head == 64)
      avx512_attention_heads (0, 1, 64, q0, q1, n_q, n_kv, Q, ldq, K, ldk, V,
          ldv, scale, causal, O, ldo, 0);
    else
      avx2_set.attention_head (d_head, q0, q1, n_q, n_kv, Q, ldq, K, ldk, V,
          ldv, scale, causal, O, ldo);
    return;
  }
  for (i = q0; i < q1; i += AQ) {
    int nq = (int) (q1 - i < AQ ? q1 - i : AQ);
    attention_block (d_head, i, nq, n_q, n_kv, Q, ldq, K, ldk, V, ldv, scale,
        causal, O, ldo);
  }
}

static void
avx512_gelu (float *x, int64_t n)
{
  int64_t i = 0;

  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps (x + i, gelu512 (_mm512_loadu_ps (x + i)));
  if (i < n) {
    __mmask16 m = first_lanes ((int) (n - i));
    _mm512_mask_storeu_ps (x + i, m, gelu512 (_mm512_maskz_loadu_ps (m,
                x + i)));
  }
}

void
wk_kernels_avx512_init (wk_kernel_set * ks)
{
  avx2_set = wk_kernels_avx2;
  *ks = wk_kernels_avx2;
  ks->name = "avx512";
  ks->linear = avx512_linear;
  ks->gemm_f32 = simd_gemm_f32;
  ks->attention_head = avx512_attention_head;
  ks->attention_head_f16kv = avx512_attention_head_f16kv;
  ks->gelu = avx512_gelu;
  ks->attention_heads = avx512_attention_heads;
  {
    /* AVX512_VNNI: CPUID leaf 7, ECX bit 11 */
    unsigned a, b, c, d;
    have_vnni = __get_cpuid_count (7, 0, &a, &b, &c, &d) && (c & (1u << 11));
  }
  if (have_vnni) {
    ks->linear_q = avx512_linear_q;
    ks->linear_q_min_rows = WK_LINEAR_GEMM_ROWS;
    ks->linear_q_default = 1;
  }
}
