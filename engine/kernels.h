/* Matrix kernels over f32 activations and f32/f16/q8_0/q4_0 weights.
 *
 * Each kernel has a portable C reference (kernels-ref.c) that defines the
 * result, and SIMD variants (kernels-avx2.c, ...) held to it by tests. The
 * variant is chosen once, at the first call, from the CPU's features;
 * WK_KERNELS=ref in the environment forces the reference. */
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

/* Name of the kernel set in use ("avx2", "ref"). */
const char *wk_kernels_name (void);

#endif
