/* The blocked matrix-product driver, written once for every SIMD kernel
 * set (kernels-simd.h's f32 panels for AVX2 and AVX-512, the AVX-512
 * VNNI and AVX2 integer panels): cache blocking over outputs (nc) and
 * depth (kc), one packing of each panel per block, and the walk of
 * mr-row stripes of X over the packed panels. What differs per ISA (the
 * panel layout, the register tile and its epilogue) comes in
 * wk_gemm_ukernel; the split over threads is the caller's (kernels.c
 * gives each thread a range of outputs). Plain C: compiled without ISA
 * flags, it only calls the set's functions. */
#include "kernels-impl.h"

void
wk_gemm_blocked (const wk_gemm_ukernel * uk, const void *a, const void *b,
    int64_t n, float *Y, int64_t ldy, int64_t j0, int64_t j1, int64_t k,
    const wk_gemm_epi * epi, void *panels)
{
  unsigned char *pb = panels;
  int64_t jc, pc, i;

  for (jc = j0; jc < j1; jc += uk->nc) {
    int64_t jn = j1 - jc < uk->nc ? j1 - jc : uk->nc;
    int np = (int) ((jn + uk->nr - 1) / uk->nr);

    for (pc = 0; pc < k; pc += uk->kc) {
      int kc = (int) (k - pc < uk->kc ? k - pc : uk->kc);
      int first = pc == 0, last = pc + kc >= k;
      int p;

      for (p = 0; p < np; p++) {
        int64_t jp = jc + (int64_t) p * uk->nr;
        int nr = (int) (j1 - jp < uk->nr ? j1 - jp : uk->nr);
        uk->pack (b, jp, nr, pc, kc, pb + (size_t) p * uk->panel_bytes);
      }
      for (i = 0; i < n; i += uk->mr) {
        int mr = (int) (n - i < uk->mr ? n - i : uk->mr);
        int64_t rows[WK_GEMM_MAX_MR];
        int r;
        /* short stripes repeat their last row; the extra sums are not
         * stored */
        for (r = 0; r < uk->mr; r++)
          rows[r] = i + (r < mr ? r : mr - 1);
        for (p = 0; p < np; p++) {
          int64_t jp = jc + (int64_t) p * uk->nr;
          int nr = (int) (j1 - jp < uk->nr ? j1 - jp : uk->nr);
          uk->tile (a, rows, mr, pc, kc, pb + (size_t) p * uk->panel_bytes,
              nr, Y + i * ldy, ldy, jp, first, last, epi);
        }
      }
    }
  }
}
