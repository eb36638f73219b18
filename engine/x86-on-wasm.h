/* The x86 intrinsics kernels-avx2.c uses, in WebAssembly SIMD128 with
 * relaxed SIMD's fused multiply-add, so that the wasm engine can run the
 * AVX2 kernels themselves and compute their bits (web/README.md,
 * "The relaxed module").
 *
 * SIMDe (libsimde-dev, MIT; https://github.com/simd-everywhere/simde)
 * supplies the intrinsics as exact lane-by-lane functions. Two kinds are
 * replaced here:
 * - the fused multiply-adds, which SIMDe 0.7 computes as a multiply and an
 *   add on wasm (two roundings): here f32x4.relaxed_madd / relaxed_nmadd,
 *   which V8 emits as vfmadd on a CPU with FMA (every CPU with AVX2) and
 *   as a multiply and an add elsewhere, where native AVX2 does not run
 *   either;
 * - the ones SIMDe emulates a lane at a time where one to four SIMD128
 *   instructions give the same result (horizontal adds, sign, maddubs,
 *   madd, the F16C conversion).
 * Everything here is exact: the same bits as the x86 instruction. */
#ifndef WK_X86_ON_WASM_H
#define WK_X86_ON_WASM_H

#ifndef __wasm_relaxed_simd__
#error "x86-on-wasm.h needs -mrelaxed-simd"
#endif

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx2.h>
#include <simde/x86/fma.h>
#include <simde/x86/f16c.h>
#include <wasm_simd128.h>

#ifndef _MM_FROUND_NO_EXC
#define _MM_FROUND_NO_EXC SIMDE_MM_FROUND_NO_EXC
#endif

/* a 256-bit vector's two halves as v128_t */
#define WK_LO(p) ((p).m128_private[0].wasm_v128)
#define WK_HI(p) ((p).m128_private[1].wasm_v128)
#define WK_ILO(p) ((p).m128i_private[0].wasm_v128)
#define WK_IHI(p) ((p).m128i_private[1].wasm_v128)

/* a b + c (NEG: -(a b) + c), c negated first with NEGC: one rounding */
#define WK_FMA256(NAME, OP, NEGC) \
  static inline simde__m256 \
  NAME (simde__m256 a, simde__m256 b, simde__m256 c) \
  { \
    simde__m256_private a_ = simde__m256_to_private (a), \
        b_ = simde__m256_to_private (b), c_ = simde__m256_to_private (c), \
        r_; \
    WK_LO (r_) = OP (WK_LO (a_), WK_LO (b_), \
        NEGC ? wasm_f32x4_neg (WK_LO (c_)) : WK_LO (c_)); \
    WK_HI (r_) = OP (WK_HI (a_), WK_HI (b_), \
        NEGC ? wasm_f32x4_neg (WK_HI (c_)) : WK_HI (c_)); \
    return simde__m256_from_private (r_); \
  }

/* *INDENT-OFF* */
WK_FMA256 (wk_mm256_fmadd_ps, wasm_f32x4_relaxed_madd, 0)
WK_FMA256 (wk_mm256_fnmadd_ps, wasm_f32x4_relaxed_nmadd, 0)
WK_FMA256 (wk_mm256_fmsub_ps, wasm_f32x4_relaxed_madd, 1)
WK_FMA256 (wk_mm256_fnmsub_ps, wasm_f32x4_relaxed_nmadd, 1)
/* *INDENT-ON* */

static inline simde__m128
wk_mm_fmadd_ps (simde__m128 a, simde__m128 b, simde__m128 c)
{
  simde__m128_private a_ = simde__m128_to_private (a),
      b_ = simde__m128_to_private (b), c_ = simde__m128_to_private (c), r_;

  r_.wasm_v128 = wasm_f32x4_relaxed_madd (a_.wasm_v128, b_.wasm_v128,
      c_.wasm_v128);
  return simde__m128_from_private (r_);
}

/* [a0 + a1, a2 + a3, b0 + b1, b2 + b3] per 128-bit half */
static inline simde__m256i
wk_mm256_hadd_epi32 (simde__m256i a, simde__m256i b)
{
  simde__m256i_private a_ = simde__m256i_to_private (a),
      b_ = simde__m256i_to_private (b), r_;

  WK_ILO (r_) = wasm_i32x4_add (wasm_i32x4_shuffle (WK_ILO (a_),
          WK_ILO (b_), 0, 2, 4, 6), wasm_i32x4_shuffle (WK_ILO (a_),
          WK_ILO (b_), 1, 3, 5, 7));
  WK_IHI (r_) = wasm_i32x4_add (wasm_i32x4_shuffle (WK_IHI (a_),
          WK_IHI (b_), 0, 2, 4, 6), wasm_i32x4_shuffle (WK_IHI (a_),
          WK_IHI (b_), 1, 3, 5, 7));
  return simde__m256i_from_private (r_);
}

static inline simde__m256
wk_mm256_hadd_ps (simde__m256 a, simde__m256 b)
{
  simde__m256_private a_ = simde__m256_to_private (a),
      b_ = simde__m256_to_private (b), r_;

  WK_LO (r_) = wasm_f32x4_add (wasm_i32x4_shuffle (WK_LO (a_), WK_LO (b_),
          0, 2, 4, 6), wasm_i32x4_shuffle (WK_LO (a_), WK_LO (b_), 1, 3, 5, 7));
  WK_HI (r_) = wasm_f32x4_add (wasm_i32x4_shuffle (WK_HI (a_), WK_HI (b_),
          0, 2, 4, 6), wasm_i32x4_shuffle (WK_HI (a_), WK_HI (b_), 1, 3, 5, 7));
  return simde__m256_from_private (r_);
}

/* a where b > 0, -a where b < 0 (wrapping: -(-128) = -128), 0 where 0 */
static inline v128_t
wk_sign8 (v128_t a, v128_t b)
{
  const v128_t z = wasm_i8x16_splat (0);

  return wasm_v128_andnot (wasm_v128_bitselect (wasm_i8x16_neg (a), a,
          wasm_i8x16_lt (b, z)), wasm_i8x16_eq (b, z));
}

static inline simde__m256i
wk_mm256_sign_epi8 (simde__m256i a, simde__m256i b)
{
  simde__m256i_private a_ = simde__m256i_to_private (a),
      b_ = simde__m256i_to_private (b), r_;

  WK_ILO (r_) = wk_sign8 (WK_ILO (a_), WK_ILO (b_));
  WK_IHI (r_) = wk_sign8 (WK_IHI (a_), WK_IHI (b_));
  return simde__m256i_from_private (r_);
}

/* unsigned a times signed b, adjacent pairs added with saturation (each
 * product, at most 255 x 128, fits in 16 bits) */
static inline v128_t
wk_maddubs8 (v128_t a, v128_t b)
{
  v128_t lo = wasm_i16x8_mul (wasm_u16x8_extend_low_u8x16 (a),
      wasm_i16x8_extend_low_i8x16 (b));
  v128_t hi = wasm_i16x8_mul (wasm_u16x8_extend_high_u8x16 (a),
      wasm_i16x8_extend_high_i8x16 (b));

  return wasm_i16x8_add_sat (wasm_i16x8_shuffle (lo, hi, 0, 2, 4, 6, 8, 10,
          12, 14), wasm_i16x8_shuffle (lo, hi, 1, 3, 5, 7, 9, 11, 13, 15));
}

static inline simde__m256i
wk_mm256_maddubs_epi16 (simde__m256i a, simde__m256i b)
{
  simde__m256i_private a_ = simde__m256i_to_private (a),
      b_ = simde__m256i_to_private (b), r_;

  WK_ILO (r_) = wk_maddubs8 (WK_ILO (a_), WK_ILO (b_));
  WK_IHI (r_) = wk_maddubs8 (WK_IHI (a_), WK_IHI (b_));
  return simde__m256i_from_private (r_);
}

static inline simde__m256i
wk_mm256_madd_epi16 (simde__m256i a, simde__m256i b)
{
  simde__m256i_private a_ = simde__m256i_to_private (a),
      b_ = simde__m256i_to_private (b), r_;

  WK_ILO (r_) = wasm_i32x4_dot_i16x8 (WK_ILO (a_), WK_ILO (b_));
  WK_IHI (r_) = wasm_i32x4_dot_i16x8 (WK_IHI (a_), WK_IHI (b_));
  return simde__m256i_from_private (r_);
}

/* four halves (the low 16 bits of each lane) as floats, as F16C converts
 * them: the magnitude shifted into a float's place and scaled by 2^112
 * (exact for normal and subnormal halves), infinities and NaNs rebuilt */
static inline v128_t
wk_half4_to_f32 (v128_t v)
{
  v128_t mag = wasm_v128_and (v, wasm_i32x4_splat (0x7fff));
  v128_t sign = wasm_i32x4_shl (wasm_v128_and (v, wasm_i32x4_splat (0x8000)),
      16);
  v128_t f = wasm_f32x4_mul (wasm_i32x4_shl (mag, 13),
      wasm_f32x4_splat (0x1p112f));
  v128_t special = wasm_i32x4_gt (mag, wasm_i32x4_splat (0x7bff));
  v128_t fs = wasm_v128_or (wasm_i32x4_shl (mag, 13),
      wasm_i32x4_splat (0x7f800000));

  return wasm_v128_or (wasm_v128_bitselect (fs, f, special), sign);
}

static inline simde__m256
wk_mm256_cvtph_ps (simde__m128i h)
{
  simde__m128i_private h_ = simde__m128i_to_private (h);
  simde__m256_private r_;

  WK_LO (r_) = wk_half4_to_f32 (wasm_u32x4_extend_low_u16x8 (h_.wasm_v128));
  WK_HI (r_) = wk_half4_to_f32 (wasm_u32x4_extend_high_u16x8 (h_.wasm_v128));
  return simde__m256_from_private (r_);
}

static inline float
wk_cvtsh_ss (unsigned short h)
{
  return wasm_f32x4_extract_lane (wk_half4_to_f32 (wasm_i32x4_splat (h)), 0);
}

/* AVX-VNNI's u8 x s8 dot products of 4, added to src (kernels-avx2.c's
 * VNNI set; the wasm module does not select it, but it compiles) */
static inline v128_t
wk_dpbusd4 (v128_t src, v128_t a, v128_t b)
{
  v128_t lo = wasm_i32x4_dot_i16x8 (wasm_u16x8_extend_low_u8x16 (a),
      wasm_i16x8_extend_low_i8x16 (b));
  v128_t hi = wasm_i32x4_dot_i16x8 (wasm_u16x8_extend_high_u8x16 (a),
      wasm_i16x8_extend_high_i8x16 (b));

  return wasm_i32x4_add (src, wasm_i32x4_add (wasm_i32x4_shuffle (lo, hi, 0,
              2, 4, 6), wasm_i32x4_shuffle (lo, hi, 1, 3, 5, 7)));
}

static inline simde__m256i
wk_mm256_dpbusd_avx_epi32 (simde__m256i src, simde__m256i a, simde__m256i b)
{
  simde__m256i_private s_ = simde__m256i_to_private (src),
      a_ = simde__m256i_to_private (a), b_ = simde__m256i_to_private (b), r_;

  WK_ILO (r_) = wk_dpbusd4 (WK_ILO (s_), WK_ILO (a_), WK_ILO (b_));
  WK_IHI (r_) = wk_dpbusd4 (WK_IHI (s_), WK_IHI (a_), WK_IHI (b_));
  return simde__m256i_from_private (r_);
}

#undef _mm256_fmadd_ps
#undef _mm256_fnmadd_ps
#undef _mm256_fmsub_ps
#undef _mm256_fnmsub_ps
#undef _mm_fmadd_ps
#undef _mm256_hadd_epi32
#undef _mm256_hadd_ps
#undef _mm256_sign_epi8
#undef _mm256_maddubs_epi16
#undef _mm256_madd_epi16
#undef _mm256_cvtph_ps
#define _mm256_fmadd_ps wk_mm256_fmadd_ps
#define _mm256_fnmadd_ps wk_mm256_fnmadd_ps
#define _mm256_fmsub_ps wk_mm256_fmsub_ps
#define _mm256_fnmsub_ps wk_mm256_fnmsub_ps
#define _mm_fmadd_ps wk_mm_fmadd_ps
#define _mm256_hadd_epi32 wk_mm256_hadd_epi32
#define _mm256_hadd_ps wk_mm256_hadd_ps
#define _mm256_sign_epi8 wk_mm256_sign_epi8
#define _mm256_maddubs_epi16 wk_mm256_maddubs_epi16
#define _mm256_madd_epi16 wk_mm256_madd_epi16
#define _mm256_cvtph_ps wk_mm256_cvtph_ps
#define _cvtsh_ss wk_cvtsh_ss
#define _mm256_dpbusd_avx_epi32 wk_mm256_dpbusd_avx_epi32

#endif /* WK_X86_ON_WASM_H */
