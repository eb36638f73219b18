/* f16 weights against a few rows of X (the decoder's steps: one row when
 * greedy, one per beam, one per stream batched by the scheduler), written
 * once over a vector of VL floats and compiled per ISA: kernels-avx2.c
 * and kernels-avx512.c include this file after kernels-simd.h's names and
 * these of their own:
 *
 *   v_load_f16 (p)               VL halves at p as floats
 *   v_prefetch (p)               prefetch the line at p
 *   F16_GROUP                    rows of X that share a converted vector
 *                                (as many as the registers hold)
 *   f16_tile_store (acc, bias, flags, y)
 *                                y[r] = sum of acc[r]'s lanes, r < 8,
 *                                through the epilogue (bias, GELU, add)
 *   f16_tail (W, bias, X, 1, ldx, Y, ldy, j0, j1, flags)
 *                                a row's outputs short of a whole tile
 *
 * Weight rows come 8 to a tile, each read start to end, so the tile is
 * one sequential stream, prefetched F16_PF bytes ahead. Every row of X
 * takes each weight row in turn: the first group of rows converts it
 * from memory, later groups from L1, so the weights are read from memory
 * once whatever n. A row's sum is formed the same way for any n and any
 * group (32 columns a step in 32 / VL accumulators, added pairwise), so a
 * beam's result has the bits of the one-row product (test-kernels). */
#ifndef WK_KERNELS_F16_H
#define WK_KERNELS_F16_H

#define F16_TILE 8              /* weight rows per tile */
#define F16_PF 8192             /* prefetch distance (bytes) */
#define F16_NA (32 / VL)        /* accumulators per row of X */

/* acc[r] = the lanes of x[r] (r < g) times the k halves at h, before the
 * horizontal sum; the caller's constant g unrolls it. */
static inline WK_ALWAYS_INLINE void
f16_row_dots (const uint16_t * h, int64_t k, const float *const *x, int g,
    int prefetch, VF * acc)
{
  VF a[F16_GROUP][F16_NA];
  int64_t l;
  int r, u;

#pragma GCC unroll 8
  for (r = 0; r < g; r++)
#pragma GCC unroll 4
    for (u = 0; u < F16_NA; u++)
      a[r][u] = v_zero ();
  for (l = 0; l < k; l += 32) {
    if (prefetch)
      v_prefetch ((const char *) (h + l) + F16_PF);
#pragma GCC unroll 4
    for (u = 0; u < F16_NA; u++) {
      const VF w = v_load_f16 (h + l + u * VL);
#pragma GCC unroll 8
      for (r = 0; r < g; r++)
        a[r][u] = v_fma (w, v_loadu (x[r] + l + u * VL), a[r][u]);
    }
  }
#pragma GCC unroll 8
  for (r = 0; r < g; r++)
    acc[r] = F16_NA == 4 ? v_add (v_add (a[r][0], a[r][1]),
        v_add (a[r][2], a[r][3])) : v_add (a[r][0], a[r][F16_NA - 1]);
}

#if F16_GROUP != 3 && F16_GROUP != 7
#error "f16_group has cases for groups of 3 and 7 rows"
#endif

/* f16_row_dots for g rows, its loops unrolled for each g */
static inline WK_ALWAYS_INLINE void
f16_group (const uint16_t * h, int64_t k, const float *const *x, int g,
    int prefetch, VF * acc)
{
  switch (g) {
    case 1:
      f16_row_dots (h, k, x, 1, prefetch, acc);
      break;
    case 2:
      f16_row_dots (h, k, x, 2, prefetch, acc);
      break;
    case 3:
      f16_row_dots (h, k, x, 3, prefetch, acc);
      break;
#if F16_GROUP == 7
    case 4:
      f16_row_dots (h, k, x, 4, prefetch, acc);
      break;
    case 5:
      f16_row_dots (h, k, x, 5, prefetch, acc);
      break;
    case 6:
      f16_row_dots (h, k, x, 6, prefetch, acc);
      break;
    case 7:
      f16_row_dots (h, k, x, 7, prefetch, acc);
      break;
#endif
    default:
      break;
  }
}

/* Y[i][j0..j1) = X[i] W^T (+ bias, GELU, add) for i < n < 8; W f16 with
 * k a multiple of 32. */
static void
gemv_f16 (const wk_tensor * W, const float *bias, const float *X, int64_t n,
    int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1, unsigned flags)
{
  const int64_t k = W->ne[0];
  const size_t rb = (size_t) k * sizeof (uint16_t);
  const unsigned char *data = W->data;
  const float *x[WK_LINEAR_GEMM_ROWS];
  int64_t j = j0, i;

  for (i = 0; i < n; i++)
    x[i] = X + i * ldx;
  for (; j + F16_TILE <= j1; j += F16_TILE) {
    VF acc[WK_LINEAR_GEMM_ROWS][F16_TILE], s[F16_GROUP];
    int r, g, t;

    for (r = 0; r < F16_TILE; r++) {
      const uint16_t *h = (const uint16_t *) (data + (size_t) (j + r) * rb);
      for (i = 0; i < n; i += g) {
        g = n - i < F16_GROUP ? (int) (n - i) : F16_GROUP;
        f16_group (h, k, x + i, g, i == 0, s);
        for (t = 0; t < g; t++)
          acc[i + t][r] = s[t];
      }
    }
    for (i = 0; i < n; i++)
      f16_tile_store (acc[i], bias ? bias + j : NULL, flags, Y + i * ldy + j);
  }
  /* one row at a time, so that the tail keeps the one-row bits too */
  for (i = 0; j < j1 && i < n; i++)
    f16_tail (W, bias, X + i * ldx, 1, ldx, Y + i * ldy, ldy, j, j1, flags);
}

#endif
