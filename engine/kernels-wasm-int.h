/* The SIMD128 integer block products of the decoder's q8_0 / q4_0 steps,
 * shared by kernels-wasm.c and kernels-avx2.c's wasm build (the relaxed
 * module): exact integers, so each kernel's float steps after them decide
 * its results. */
#ifndef WK_KERNELS_WASM_INT_H
#define WK_KERNELS_WASM_INT_H

#include <wasm_simd128.h>

/* sum over a 32-block of w * x, i8 x i8 -> i32 lanes: the weights widened
 * to i16, eight products and their pairwise sums per i32x4.dot_i16x8_s,
 * against xs, the block's activations widened (xs[0] values 0-7, xs[1]
 * 8-15, xs[2] 16-23, xs[3] 24-31). Lane i holds the values 2i, 2i+1,
 * 2i+8, 2i+9 and the same 16 later (exact integers), so the float sums
 * that follow do not depend on how they were formed. q4_0's nibbles
 * (0 .. 15) are the same values as i8. */
static inline v128_t
dot_i8x32 (v128_t w0, v128_t w1, const v128_t xs[4])
{
  v128_t a = wasm_i32x4_dot_i16x8 (wasm_i16x8_extend_low_i8x16 (w0), xs[0]);
  v128_t b = wasm_i32x4_dot_i16x8 (wasm_i16x8_extend_high_i8x16 (w0), xs[1]);
  v128_t c = wasm_i32x4_dot_i16x8 (wasm_i16x8_extend_low_i8x16 (w1), xs[2]);
  v128_t d = wasm_i32x4_dot_i16x8 (wasm_i16x8_extend_high_i8x16 (w1), xs[3]);
  return wasm_i32x4_add (wasm_i32x4_add (a, b), wasm_i32x4_add (c, d));
}

/* Lane q of the result: the sum of s_q's four lanes (four rows' block
 * sums reduced across lanes at once, exact integers). */
static inline v128_t
sum_lanes4 (v128_t s0, v128_t s1, v128_t s2, v128_t s3)
{
  v128_t t01 = wasm_i32x4_add (wasm_i32x4_shuffle (s0, s1, 0, 1, 4, 5),
      wasm_i32x4_shuffle (s0, s1, 2, 3, 6, 7));
  v128_t t23 = wasm_i32x4_add (wasm_i32x4_shuffle (s2, s3, 0, 1, 4, 5),
      wasm_i32x4_shuffle (s2, s3, 2, 3, 6, 7));
  return wasm_i32x4_add (wasm_i32x4_shuffle (t01, t23, 0, 2, 4, 6),
      wasm_i32x4_shuffle (t01, t23, 1, 3, 5, 7));
}

#endif /* WK_KERNELS_WASM_INT_H */
