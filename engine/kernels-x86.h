/* Helpers of the AVX2 and AVX-512 kernel files (both compiled with AVX2
 * at least): one copy of what both use. */
#ifndef WK_KERNELS_X86_H
#define WK_KERNELS_X86_H

#ifdef __wasm__
#include "x86-on-wasm.h"
#else
#include <immintrin.h>
#endif
#include <stdint.h>

/* the sum of v's 8 lanes: the low and high halves, then pairs */
static inline float
hsum256 (__m256 v)
{
  __m128 s = _mm_add_ps (_mm256_castps256_ps128 (v),
      _mm256_extractf128_ps (v, 1));
  s = _mm_add_ps (s, _mm_movehl_ps (s, s));
  s = _mm_add_ss (s, _mm_movehdup_ps (s));
  return _mm_cvtss_f32 (s);
}

/* d[c * ld + r] = s[r * ls + c] for r, c < 8: an 8 x 8 transpose in
 * registers (unpack pairs of rows, shuffle pairs of pairs, swap halves) */
static inline void
transpose8x8 (const float *s, int64_t ls, float *d, int64_t ld)
{
  __m256 r[8], t[8], u[8];
  int i;

  for (i = 0; i < 8; i++)
    r[i] = _mm256_loadu_ps (s + i * ls);
  for (i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps (r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps (r[i], r[i + 1]);
  }
  for (i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps (t[i], t[i + 2], _MM_SHUFFLE (1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps (t[i], t[i + 2], _MM_SHUFFLE (3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps (t[i + 1], t[i + 3], _MM_SHUFFLE (1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps (t[i + 1], t[i + 3], _MM_SHUFFLE (3, 2, 3, 2));
  }
  for (i = 0; i < 4; i++) {
    _mm256_storeu_ps (d + i * ld, _mm256_permute2f128_ps (u[i], u[i + 4],
            0x20));
    _mm256_storeu_ps (d + (i + 4) * ld, _mm256_permute2f128_ps (u[i],
            u[i + 4], 0x31));
  }
}

#endif /* WK_KERNELS_X86_H */
