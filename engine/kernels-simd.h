/* The f32 micro-kernels, their GEMM glue and the many-query attention,
 * written once over a vector of VL floats (as ggml's simd-mappings.h
 * does) and compiled per ISA: kernels-avx2.c (VL 8) and kernels-avx512.c
 * (VL 16) include this file after defining, in their own intrinsics:
 *
 *   MR, NR (= 2 VL), NC, KC      tile sizes (see wk_gemm_ukernel)
 *   SIMD_ALIGN                   bytes of a vector
 *   VF, VMASK                    a vector of VL floats, a lane mask
 *   v_zero () v_set1 (x) v_iota ()   0, x in every lane, 0 .. VL-1
 *   v_load (p) v_store (p, v)    aligned; v_loadu (p) unaligned
 *   v_mask (n)                   the first n lanes (n clamped to 0 .. VL)
 *   v_load_part (p, m, full)     lanes m of p, the rest 0 (full: all)
 *   v_store_part (p, m, full, v) lanes m of v to p (full: all)
 *   v_add v_sub v_mul v_max (a, b), v_fma (a, b, c) = a b + c
 *   v_exp (x) v_gelu (x)
 *   v_sel_lt (a, b, s, x)        lanes with a < b from x, the rest from s
 *   v_sel_eq (a, b, s, x)        lanes with a == b from x, the rest from s
 *   v_transpose (s, ls, d, ld)   d[c ld + r] = s[r ls + c], r, c < VL
 *   row_seg_to_f32 ()            a weight row's segment as f32
 *
 * Each ISA's results are what its own copy of this code computed before
 * it was shared: every output is the same sequence of operations. */
#ifndef WK_KERNELS_SIMD_H
#define WK_KERNELS_SIMD_H

#include <math.h>
#include <string.h>

#if NR != 2 * VL
#error "the micro-kernel's panel is two vectors wide"
#endif

/* ---- the f32 micro-kernel ---- */

/* c[2r + h] = sum_kk a[r][kk * sa] * b[kk * ldb + VL h ..] for r < MR,
 * with b's NR columns read in place (its first nr). */
static inline WK_ALWAYS_INLINE void
ukernel (int kc, const float *const *a, int64_t sa, const float *b,
    int64_t ldb, int nr, VF c[2 * MR])
{
  const VMASK m0 = v_mask (nr), m1 = v_mask (nr - VL);
  const int full = nr >= NR;
  VF acc[2 * MR];
  int kk, r;

#pragma GCC unroll 16
  for (r = 0; r < 2 * MR; r++)
    acc[r] = v_zero ();
  for (kk = 0; kk < kc; kk++) {
    const VF b0 = v_load_part (b + kk * ldb, m0, full);
    const VF b1 = v_load_part (b + kk * ldb + VL, m1, full);
#pragma GCC unroll 8
    for (r = 0; r < MR; r++) {
      const VF x = v_set1 (a[r][kk * sa]);
      acc[2 * r] = v_fma (x, b0, acc[2 * r]);
      acc[2 * r + 1] = v_fma (x, b1, acc[2 * r + 1]);
    }
  }
#pragma GCC unroll 16
  for (r = 0; r < 2 * MR; r++)
    c[r] = acc[r];
}

/* Stores a tile of mr x nr sums c (two vectors a row) at Y (row stride
 * ldy), columns starting at output j, through the epilogue. */
static inline WK_ALWAYS_INLINE void
store_tile (const VF * c, int mr, int nr, float *Y, int64_t ldy, int64_t j,
    int first, int last, const wk_gemm_epi * epi)
{
  const VMASK m0 = v_mask (nr), m1 = v_mask (nr - VL);
  const int full = nr >= NR;
  const VF alpha = v_set1 (epi->alpha);
  const int accumulate = !first || (epi->flags & WK_LINEAR_ADD);
  const int gelu = last && (epi->flags & WK_LINEAR_GELU);
  VF bias0 = v_zero (), bias1 = v_zero ();
  int r;

  if (last && epi->bias) {
    bias0 = v_load_part (epi->bias + j, m0, 0);
    bias1 = v_load_part (epi->bias + j + VL, m1, 0);
  }
  for (r = 0; r < mr; r++) {
    float *y = Y + r * ldy + j;
    VF v0 = v_mul (c[2 * r], alpha);
    VF v1 = v_mul (c[2 * r + 1], alpha);
    if (accumulate) {
      v0 = v_add (v0, v_load_part (y, m0, 0));
      v1 = v_add (v1, v_load_part (y + VL, m1, 0));
    }
    v0 = v_add (v0, bias0);
    v1 = v_add (v1, bias1);
    if (gelu) {
      v0 = v_gelu (v0);
      v1 = v_gelu (v1);
    }
    v_store_part (y, m0, full, v0);
    v_store_part (y + VL, m1, full, v1);
  }
}

/* ---- f32 panels for wk_gemm_blocked ---- */

/* Where the panels' outputs come from. */
typedef struct
{
  int kind;                     /* 0 weight rows, 1 f32 rows, 2 f32 columns */
  wk_type type;
  const unsigned char *data;    /* kind 0 */
  size_t row_bytes;
  const float *B;               /* kind 1: B[j*ldb + l]; 2: B[l*ldb + j] */
  int64_t ldb;
} gemm_src;

/* The f32 rows of X. */
typedef struct
{
  const float *X;
  int64_t ldx;
} gemm_rows;

/* wk_gemm_ukernel.pack: panel[kk * NR + jj] (f32). Rows of weights or
 * of B are converted VL at a time, then transposed VL x VL in registers
 * (element by element, the strided stores took most of the packing). */
static void
pack_panel (const void *src, int64_t j, int nr, int64_t l0, int kc, void *panel)
{
  const gemm_src *s = src;
  float *bp = panel;
  float tmp[VL][KC] __attribute__((aligned (SIMD_ALIGN)));
  int jj, kk, h, r;

  if (s->kind == 2) {
    const VMASK m0 = v_mask (nr), m1 = v_mask (nr - VL);
    for (kk = 0; kk < kc; kk++) {
      const float *b = s->B + (l0 + kk) * s->ldb + j;
      v_store (bp + kk * NR, v_load_part (b, m0, nr >= NR));
      v_store (bp + kk * NR + VL, v_load_part (b + VL, m1, nr >= NR));
    }
    return;
  }
  for (h = 0; h < NR / VL; h++) {
    for (r = 0; r < VL; r++) {
      jj = h * VL + r;
      if (jj >= nr)
        memset (tmp[r], 0, (size_t) kc * sizeof (float));
      else if (s->kind == 1)
        memcpy (tmp[r], s->B + (j + jj) * s->ldb + l0,
            (size_t) kc * sizeof (float));
      else
        row_seg_to_f32 (s->type, s->data + (size_t) (j + jj) * s->row_bytes,
            l0, kc, tmp[r]);
    }
    for (kk = 0; kk + VL <= kc; kk += VL)
      v_transpose (&tmp[0][kk], KC, bp + kk * NR + h * VL, NR);
    for (; kk < kc; kk++)
      for (r = 0; r < VL; r++)
        bp[kk * NR + h * VL + r] = tmp[r][kk];
  }
}

/* wk_gemm_ukernel.tile over f32 panels */
static void
f32_tile (const void *a, const int64_t * rows, int mr, int64_t l0, int kc,
    const void *panel, int nr, float *Y, int64_t ldy, int64_t j, int first,
    int last, const wk_gemm_epi * epi)
{
  const gemm_rows *x = a;
  const float *ar[MR];
  VF c[2 * MR];
  int r;

  for (r = 0; r < MR; r++)
    ar[r] = x->X + rows[r] * x->ldx + l0;
  ukernel (kc, ar, 1, panel, NR, NR, c);
  store_tile (c, mr, nr, Y, ldy, j, first, last, epi);
}

static const wk_gemm_ukernel f32_panels = {
  MR, NR, NC, KC, KC * NR * sizeof (float), pack_panel, f32_tile
};

/* Y = epilogue (X src) for outputs j0 .. j1-1 of depth k. */
static void
gemm_f32_panels (const gemm_src * s, const float *X, int64_t n, int64_t ldx,
    float *Y, int64_t ldy, int64_t j0, int64_t j1, int64_t k,
    const wk_gemm_epi * epi)
{
  float bp[NC / NR][KC * NR] __attribute__((aligned (SIMD_ALIGN)));
  gemm_rows x = { X, ldx };

  wk_gemm_blocked (&f32_panels, &x, s, n, Y, ldy, j0, j1, k, epi, bp);
}

/* wk_linear_ex's many-row products: the weights converted to f32 panels. */
static void
linear_f32_panels (const wk_tensor * W, const float *bias, const float *X,
    int64_t n, int64_t ldx, float *Y, int64_t ldy, int64_t j0, int64_t j1,
    unsigned flags)
{
  gemm_src s = { 0, W->type, W->data, wk_type_row_bytes (W->type, W->ne[0]),
    NULL, 0
  };
  wk_gemm_epi epi = { bias, flags, 1.0f };

  gemm_f32_panels (&s, X, n, ldx, Y, ldy, j0, j1, W->ne[0], &epi);
}

/* wk_kernel_set.gemm_f32 */
static void
simd_gemm_f32 (int b_trans, int64_t i0, int64_t i1, int64_t j0, int64_t j1,
    int64_t k, float alpha, const float *A, int64_t lda, const float *B,
    int64_t ldb, float *C, int64_t ldc)
{
  gemm_src s = { b_trans ? 1 : 2, WK_TYPE_F32, NULL, 0, B, ldb };
  wk_gemm_epi epi = { NULL, 0, alpha };
  int64_t i;

  if (k <= 0) {
    for (i = i0; i < i1; i++)
      memset (C + i * ldc + j0, 0, (size_t) (j1 - j0) * sizeof (float));
    return;
  }
  gemm_f32_panels (&s, A + i0 * lda, i1 - i0, lda, C + i0 * ldc, ldc, j0, j1,
      k, &epi);
}

/* ---- attention over blocks of queries ---- */

#define AQ NR                   /* queries per block: two vectors of lanes */
#define AK 96                   /* keys per chunk (a multiple of MR) */

/* Up to AQ queries at once (d_head <= 256), keys in chunks of AK with a
 * running softmax. Scores are kept transposed, S^T[key][query], so that
 * the softmax runs across the queries in two vectors: S^T = K (scale Q)^T
 * with the queries packed once as the micro-kernel's panel, then
 * O^T += V^T P^T with P^T as the panel and the value rows read in place,
 * MR columns of V at a time (d_head 64 takes 11 stripes of 6 with AVX2,
 * where P V took 12: 16 queries in stripes of 6, 6 and 4), and the
 * rescale by the running maximum is one vector per row of O^T. Each sum
 * is the one P V computed: the same products in the same order. */
static void
attention_block (int64_t d_head, int64_t q0, int nq, int64_t n_q,
    int64_t n_kv, const float *Q, int64_t ldq, const float *K, int64_t ldk,
    const float *V, int64_t ldv, float scale, int causal, float *O, int64_t ldo)
{
  float qt[256 * AQ] __attribute__((aligned (SIMD_ALIGN)));
  float pt[AK * AQ] __attribute__((aligned (SIMD_ALIGN)));
  float acc[256 * AQ] __attribute__((aligned (SIMD_ALIGN)));    /* O^T */
  float rr[AQ] __attribute__((aligned (SIMD_ALIGN)));
  const int64_t dpad = (d_head + NR - 1) & ~(int64_t) (NR - 1);
  const VF ninf = v_set1 (-INFINITY), zero = v_zero ();
  const VF iota0 = v_iota ();
  const VF iota1 = v_add (iota0, v_set1 ((float) VL));
  /* query q0 + i sees keys t <= base + i (causal) */
  const int64_t base = n_kv - n_q + q0;
  int64_t last_all = wk_attention_last_key (q0 + nq - 1, n_q, n_kv, causal);
  VF mx0 = ninf, mx1 = ninf, sm0 = v_zero (), sm1 = v_zero ();
  int64_t t0, l;
  int i;

  for (l = 0; l < d_head; l++)
    for (i = 0; i < AQ; i++)
      qt[l * AQ + i] = i < nq ? Q[(q0 + i) * ldq + l] * scale : 0.0f;
  memset (acc, 0, sizeof (float) * (size_t) (dpad * AQ));

  for (t0 = 0; t0 <= last_all; t0 += AK) {
    int kn = (int) (last_all + 1 - t0 < AK ? last_all + 1 - t0 : AK);
    VF n0 = mx0, n1 = mx1, r0, r1, z0, z1, ps0, ps1;
    int t;

    /* S^T for keys t0 .. t0+kn-1 */
    for (t = 0; t < kn; t += MR) {
      int mr = kn - t < MR ? kn - t : MR, r;
      const float *a[MR];
      VF c[2 * MR];
      for (r = 0; r < MR; r++)
        a[r] = K + (t0 + t + (r < mr ? r : mr - 1)) * ldk;
      ukernel ((int) d_head, a, 1, qt, AQ, NR, c);
      for (r = 0; r < mr; r++) {
        VF s0 = c[2 * r], s1 = c[2 * r + 1];
        if (causal) {
          /* lanes i < t0 + t + r - base are in the future */
          const VF thr = v_set1 ((float) (t0 + t + r - base));
          s0 = v_sel_lt (iota0, thr, s0, ninf);
          s1 = v_sel_lt (iota1, thr, s1, ninf);
        }
        v_store (pt + (t + r) * AQ, s0);
        v_store (pt + (t + r) * AQ + VL, s1);
        n0 = v_max (n0, s0);
        n1 = v_max (n1, s1);
      }
    }
    /* running softmax across the query lanes; lanes that have seen no
     * key yet keep a max of -inf and get zero weights */
    z0 = v_sel_eq (n0, ninf, n0, zero);
    z1 = v_sel_eq (n1, ninf, n1, zero);
    r0 = v_exp (v_sub (mx0, z0));
    r1 = v_exp (v_sub (mx1, z1));
    mx0 = n0;
    mx1 = n1;
    ps0 = v_zero ();
    ps1 = v_zero ();
    for (t = 0; t < kn; t++) {
      VF p0 = v_exp (v_sub (v_load (pt + t * AQ), z0));
      VF p1 = v_exp (v_sub (v_load (pt + t * AQ + VL), z1));
      v_store (pt + t * AQ, p0);
      v_store (pt + t * AQ + VL, p1);
      ps0 = v_add (ps0, p0);
      ps1 = v_add (ps1, p1);
    }
    sm0 = v_fma (sm0, r0, ps0);
    sm1 = v_fma (sm1, r1, ps1);

    /* O^T = r O^T + V^T P^T, MR value columns at a time */
    for (l = 0; l < d_head; l += MR) {
      int mr = (int) (d_head - l < MR ? d_head - l : MR), r;
      const float *a[MR];
      VF c[2 * MR];
      for (r = 0; r < MR; r++)
        a[r] = V + t0 * ldv + l + (r < mr ? r : mr - 1);
      ukernel (kn, a, ldv, pt, AQ, NR, c);
      for (r = 0; r < mr; r++) {
        float *o = acc + (l + r) * AQ;
        v_store (o, v_fma (v_load (o), r0, c[2 * r]));
        v_store (o + VL, v_fma (v_load (o + VL), r1, c[2 * r + 1]));
      }
    }
  }

  v_store (rr, sm0);
  v_store (rr + VL, sm1);
  for (i = 0; i < nq; i++) {
    float inv = rr[i] > 0.0f ? 1.0f / rr[i] : 0.0f;
    for (l = 0; l < d_head; l++)
      O[(q0 + i) * ldo + l] = acc[l * AQ + i] * inv;
  }
}

#endif
