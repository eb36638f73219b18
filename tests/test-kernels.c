/* Kernels: the reference against independently computed exact values, each
 * SIMD kernel set against the reference over many random (ragged) shapes,
 * single- and multi-threaded; the thread pool under many short jobs.
 *
 * Every kernel is held to the definition in kernels.h with the same
 * tolerance:
 *   |y - y_exact| <= 1e-5 * sum_k |x_k w_k| + 1e-6 (plus |y| * 1e-6 for the
 *   fused GELU's approximation),
 * where y_exact uses the exactly dequantized weights and, for q8_0 / q4_0
 * with fewer than 8 rows, the quantized activations. The error of that
 * activation quantization against f32 activations is checked against its
 * bound, sum_k |w_k| max|x in k's block| / 254, and reported. */
#include <math.h>
#ifndef __wasm__
#include <pthread.h>
#endif
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels-impl.h"
#include "pool.h"
#include "wk-test.h"
#include "wk-weight.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t
rng_u32 (void)
{
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t) (rng_state >> 16);
}

/* uniform in [-1, 1) */
static float
rng_f (void)
{
  return (float) ((double) rng_u32 () / 2147483648.0 - 1.0);
}

static float *
rand_floats (int64_t n, float scale)
{
  float *p = malloc ((size_t) (n > 0 ? n : 1) * sizeof (float));
  int64_t i;
  for (i = 0; i < n; i++)
    p[i] = rng_f () * scale;
  return p;
}

/* Extreme blocks (test_linear_extreme_blocks): when set, weight blocks of
 * 32 and activation blocks take scales from the tables below, so that
 * q8_0 / q4_0 scales are subnormal or zero, q4_0's up to near f16's
 * largest (65504 * 1.3 times the row's scale, with its outliers of 8x:
 * d = max |w| / 8 <= 55400), and
 * activations' blocks span 1e-20 .. 1e4 (and all-zero blocks). */
static int extreme_blocks;
static const float extreme_w[] = { 1.0f, 65504.0f * 1.3f, 1e-4f, 0.0f, 3e-6f,
  500.0f
};

static const float extreme_x[] = { 1.0f, 1e4f, 0.0f, 1e-20f, 127.0f, 3e-3f,
  -7.0f
};

static void
scale_blocks (float *v, int64_t k, int64_t salt, const float *scales,
    int n_scales)
{
  int64_t l;

  for (l = 0; l < k; l++)
    v[l] *= scales[(l / 32 + salt) % n_scales];
}

/* rows of different magnitudes, and an outlier now and then */
static void
fill_weight_row (float *row, int64_t k, int64_t j, void *user)
{
  float s = 0.05f + (float) (j % 7) * 0.1f;
  int64_t l;

  (void) user;
  for (l = 0; l < k; l++)
    row[l] = rng_f () * s * ((rng_u32 () % 97) == 0 ? 8.0f : 1.0f);
  if (extreme_blocks)
    scale_blocks (row, k, j, extreme_w, (int) (sizeof extreme_w /
            sizeof extreme_w[0]));
}

/* A random m x k weight of the given type (data malloc'ed). */
static wk_tensor
make_weight (wk_type type, int64_t k, int64_t m)
{
  return wk_weight_make (type, k, m, fill_weight_row, NULL);
}

static double
gelu_exact (double x)
{
  return 0.5 * x * (1.0 + erf (x / sqrt (2.0)));
}

/* kernel sets to hold to the reference */
static const wk_kernel_set *simd_sets[5];
static int n_simd_sets;

static double act_q8_worst_ratio;       /* error / bound, over all cases */

/* Exact values from an independent dequantization: the definition. */
static void
exact_linear (const wk_tensor * W, const float *bias, const float *X,
    int64_t n, int64_t ldx, double *Y, double *L1, int act_q8)
{
  int64_t k = W->ne[0], m = W->ne[1], i, j, l;
  size_t rb = wk_type_row_bytes (W->type, k);
  float *w = malloc ((size_t) k * sizeof (float));
  /* the activations the definition uses, and per element its block's
   * max |x| */
  double *xa = malloc ((size_t) (n * k) * sizeof (double));
  double *bmax = malloc ((size_t) (n * k) * sizeof (double));

  for (i = 0; i < n; i++) {
    if (act_q8) {
      int8_t *q = malloc ((size_t) k);
      float *d = malloc ((size_t) (k / 32) * sizeof (float));
      wk_quantize_act (X + i * ldx, k, q, d);
      for (l = 0; l < k; l++)
        xa[i * k + l] = (double) d[l / 32] * q[l];
      for (l = 0; l < k; l++)
        bmax[i * k + l] = d[l / 32] * 127.0;
      free (q);
      free (d);
    } else {
      for (l = 0; l < k; l++)
        xa[i * k + l] = X[i * ldx + l];
    }
  }
  for (j = 0; j < m; j++) {
    wk_row_to_f32 (W->type, (const unsigned char *) W->data + j * rb, w, k);
    for (i = 0; i < n; i++) {
      double acc = bias ? bias[j] : 0.0, mag = bias ? fabs (bias[j]) : 0.0;
      double f = 0.0, bound = 0.0;
      for (l = 0; l < k; l++) {
        acc += xa[i * k + l] * w[l];
        mag += fabs (xa[i * k + l] * w[l]);
      }
      Y[i * m + j] = acc;
      L1[i * m + j] = mag;
      if (act_q8) {
        /* the stated bound of the activation quantization */
        for (l = 0; l < k; l++) {
          f += (double) X[i * ldx + l] * w[l];
          bound += fabs (w[l]) * bmax[i * k + l] / 254.0;
        }
        f += bias ? bias[j] : 0.0;
        CHECK_MSG (fabs (acc - f) <= bound * (1 + 1e-6) + 1e-9,
            "act q8 error %g above its bound %g", fabs (acc - f), bound);
        if (bound > 0 && fabs (acc - f) / bound > act_q8_worst_ratio)
          act_q8_worst_ratio = fabs (acc - f) / bound;
      }
    }
  }
  free (w);
  free (xa);
  free (bmax);
}

static void
test_quantize_act_bits (void)
{
  float x[256];
  int8_t q0[256], q1[256];
  float d0[8], d1[8];
  int c, l, s;

  for (c = 0; c < 200; c++) {
    for (l = 0; l < 256; l++)
      x[l] = rng_f () * (float) (1 + c % 5) * (c % 7 == 0 ? 1e-30f : 1.0f);
    if (c % 3 == 0) {
      /* exact ties: amax 127 gives d = 1, id = 1, values k + 0.5 */
      for (l = 0; l < 32; l++)
        x[l] = (float) ((int) (l * 7 % 200) - 100) + 0.5f;
      x[5] = 127.0f;
    }
    if (c % 11 == 0)
      for (l = 64; l < 96; l++)
        x[l] = 0.0f;
    for (s = 0; s < n_simd_sets; s++) {
      wk_quantize_act (x, 256, q0, d0);
      simd_sets[s]->quantize_act (x, 256, q1, d1);
      CHECK_MSG (memcmp (q0, q1, sizeof q0) == 0 && memcmp (d0, d1,
              sizeof d0) == 0, "%s quantize_act differs (case %d)",
          simd_sets[s]->name, c);
    }
  }
  /* ties round to even */
  x[0] = 127.0f;
  for (l = 1; l < 32; l++)
    x[l] = l % 2 ? 2.5f : -3.5f;
  wk_quantize_act (x, 32, q0, d0);
  CHECK (d0[0] == 1.0f && q0[0] == 127 && q0[1] == 2 && q0[2] == -4);
}

static const wk_type all_types[] = { WK_TYPE_F32, WK_TYPE_F16, WK_TYPE_Q8_0,
  WK_TYPE_Q4_0
};


static void
find_simd_sets (void)
{
  int i;

  n_simd_sets = wk_kernels_simd_sets (simd_sets, 5);
  for (i = 0; i < n_simd_sets; i++)
    printf ("# testing kernel set %s against the reference\n",
        simd_sets[i]->name);
  if (n_simd_sets == 0)
    printf ("# no SIMD kernel set on this CPU / build: only the reference "
        "is tested\n");
}

/* When set, check_linear_case calls wk_linear_work (the encoder's
 * products, with a scratch for quantized activations). */
static int via_work;

/* Whether wk_linear_work takes a set's integer products (kernels.h's
 * rule): then each row of X is quantized, as with fewer rows. */
static int
work_takes_q (const wk_kernel_set * ks, const wk_tensor * W, int64_t n)
{
  return via_work && wk_linear_work_takes_q (ks, W, n, 0);
}

/* One linear case: reference vs exact, then every SIMD set vs exact on 1
 * and several threads. Returns the largest error / tolerance ratio. */
static double
check_linear_case (wk_pool ** pools, int n_pools, wk_type type, int64_t n,
    int64_t k, int64_t m, int with_bias, unsigned flags)
{
  wk_tensor W = make_weight (type, k, m);
  int64_t ldx = k + (rng_u32 () % 3), ldy = m + (rng_u32 () % 3);
  float *X = rand_floats (n * ldx, 1.0f);
  float *bias = with_bias ? rand_floats (m, 0.5f) : NULL;
  float *Y0 = rand_floats (n * ldy, 1.0f);
  float *Y = malloc ((size_t) (n * ldy) * sizeof (float));
  double *E = malloc ((size_t) (n * m) * sizeof (double));
  double *L1 = malloc ((size_t) (n * m) * sizeof (double));
  /* the definition with quantized rows (the integer products) */
  double *Eq = malloc ((size_t) (n * m) * sizeof (double));
  double *L1q = malloc ((size_t) (n * m) * sizeof (double));
  void *work = via_work ? malloc (wk_linear_work_size (n, k)) : NULL;
  double worst = 0.0;
  int s, p, fails = 0;

  if (extreme_blocks) {
    int64_t i;
    for (i = 0; i < n; i++)
      scale_blocks (X + i * ldx, k, i * 3, extreme_x, (int) (sizeof extreme_x
              / sizeof extreme_x[0]));
  }
  exact_linear (&W, bias, X, n, ldx, E, L1, wk_linear_act_q8 (&W, n));
  if (via_work && n >= WK_LINEAR_GEMM_ROWS && (type == WK_TYPE_Q8_0
          || type == WK_TYPE_Q4_0))
    exact_linear (&W, bias, X, n, ldx, Eq, L1q, 1);
  for (s = -1; s < n_simd_sets; s++) {
    const wk_kernel_set *ks = s < 0 ? &wk_kernels_ref : simd_sets[s];
    const int q = work_takes_q (ks, &W, n);
    wk_kernels_set (ks);
    for (p = 0; p < n_pools; p++) {
      int64_t i, j;
      if (s < 0 && p > 0)
        break;
      memcpy (Y, Y0, (size_t) (n * ldy) * sizeof (float));
      if (via_work)
        wk_linear_work (pools[p], &W, bias, X, n, ldx, Y, ldy, flags, work);
      else
        wk_linear_ex (pools[p], &W, bias, X, n, ldx, Y, ldy, flags);
      for (i = 0; i < n; i++) {
        for (j = 0; j < m; j++) {
          double want = q ? Eq[i * m + j] : E[i * m + j], tol;
          double got = Y[i * ldy + j];
          /* the reference rounds the sum once: 1e-7 relative */
          tol = (s < 0 ? 1e-7 : 1e-5) * (q ? L1q : L1)[i * m + j] + 1e-6;
          if (flags & WK_LINEAR_GELU) {
            want = gelu_exact (want);
            tol = tol * 1.2 + 1e-6 * (1.0 + fabs (want));
          }
          if (flags & WK_LINEAR_ADD) {
            want += Y0[i * ldy + j];
            tol += 1e-7 * fabs (want);
          }
          if (fabs (got - want) / tol > worst)
            worst = fabs (got - want) / tol;
          if (!(fabs (got - want) <= tol) && fails++ < 5)
            CHECK_MSG (0, "%s %s n=%ld k=%ld m=%ld bias=%d flags=%u "
                "threads=%d: Y[%ld][%ld] = %.9g, want %.9g (tol %.3g)",
                ks->name, wk_type_name (type), (long) n, (long) k, (long) m,
                with_bias, flags, wk_pool_size (pools[p]), (long) i, (long) j,
                got, want, tol);
        }
        /* padding between rows untouched */
        for (j = m; j < ldy; j++)
          if (Y[i * ldy + j] != Y0[i * ldy + j] && fails++ < 5)
            CHECK_MSG (0, "%s wrote past m at row %ld", ks->name, (long) i);
      }
    }
  }
  wk_kernels_set (NULL);
  free ((void *) W.data);
  free (X);
  free (bias);
  free (Y0);
  free (Y);
  free (E);
  free (L1);
  free (Eq);
  free (L1q);
  free (work);
  return worst;
}

static wk_pool *pools[4];
static int n_pools;

static void
test_linear_random_shapes (void)
{
  static const int64_t ns[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 31, 64, 101 };
  static const int64_t ms[] = { 1, 3, 15, 16, 17, 33, 64, 67, 130 };
  static const int64_t ks_q[] = { 32, 64, 96, 256, 288, 544 };
  static const int64_t ks_f[] = { 1, 5, 8, 17, 33, 100, 257, 300 };
  double worst[4] = { 0 };
  int t, c;

  for (t = 0; t < 4; t++) {
    wk_type type = all_types[t];
    int quant = type == WK_TYPE_Q8_0 || type == WK_TYPE_Q4_0;
    for (c = 0; c < 60; c++) {
      int64_t n = ns[rng_u32 () % (sizeof ns / sizeof ns[0])];
      int64_t m = ms[rng_u32 () % (sizeof ms / sizeof ms[0])];
      int64_t k = quant ? ks_q[rng_u32 () % 6] : (rng_u32 () % 2) ?
          ks_f[rng_u32 () % 8] : ks_q[rng_u32 () % 6];
      unsigned flags = c % 3 == 0 ? 0 : c % 3 == 1 ? WK_LINEAR_GELU :
          WK_LINEAR_ADD;
      double w = check_linear_case (pools, n_pools, type, n, k, m, c % 2,
          flags);
      if (w > worst[t])
        worst[t] = w;
    }
    printf ("# linear %s: worst error / tolerance %.3f\n",
        wk_type_name (type), worst[t]);
  }
  printf ("# activation quantization (q8_0/q4_0, n < 8): worst error vs f32 "
      "activations %.3f of its bound\n", act_q8_worst_ratio);
}

/* The encoder's and decoder's shapes (scaled down in n), including a
 * depth beyond one packed block. */
static void
test_linear_model_shapes (void)
{
  int t;
  for (t = 0; t < 4; t++) {
    check_linear_case (pools, n_pools, all_types[t], 50, 384, 384, 1, 0);
    check_linear_case (pools, n_pools, all_types[t], 20, 1536, 96, 1,
        WK_LINEAR_ADD);
    check_linear_case (pools, n_pools, all_types[t], 30, 384, 200, 1,
        WK_LINEAR_GELU);
    check_linear_case (pools, n_pools, all_types[t], 1, 384, 1000, 1, 0);
    check_linear_case (pools, n_pools, all_types[t], 5, 384, 300, 0, 0);
  }
}

/* q8_0 / q4_0 blocks with extreme scales against activation blocks of
 * extreme magnitudes, for the decoder's integer products (1 to 7 rows of
 * X: every tile width and row count of the SIMD kernels, with ragged
 * tails) and the encoder's f32 ones, at depths that are and are not
 * multiples of 256. */
static void
test_linear_extreme_blocks (void)
{
  static const int64_t ns[] = { 1, 2, 3, 4, 5, 7, 9 };
  static const int64_t ms[] = { 8, 16, 23, 33, 48 };
  static const int64_t ks[] = { 32, 96, 256, 288, 1536 };
  double worst = 0.0;
  int t, c;

  extreme_blocks = 1;
  for (t = 2; t < 4; t++)
    for (c = 0; c < 14; c++) {
      double w = check_linear_case (pools, n_pools, all_types[t],
          ns[c % 7], ks[c % 5], ms[c % 5], c % 2, c % 3 == 1 ?
          WK_LINEAR_ADD : 0);
      worst = w > worst ? w : worst;
    }
  extreme_blocks = 0;
  printf ("# extreme blocks: worst error / tolerance %.3f\n", worst);
}

/* f16 weights that are not plain normal numbers: signed zeros,
 * subnormals, the extremes, infinities and NaN. Row j holds one such
 * value among zeros, so with activations of 1 every kernel's output j is
 * that value exactly, whatever its order of summation (the wasm kernels
 * convert halves with a faster trick that needs finite values and take
 * the exact path for a row segment that has others). */
static const float f16_specials[] = { 0.0f, -0.0f, 0x1p-24f, -0x1p-24f,
  0x3ffp-24f, 0x1p-14f, -0x1.ff8p-15f, 1.0f, -1.0f, 65504.0f, -65504.0f,
  INFINITY, -INFINITY, NAN, 0x1.8p-20f
};

static void
fill_special_row (float *row, int64_t k, int64_t j, void *user)
{
  (void) user;
  memset (row, 0, (size_t) k * sizeof *row);
  row[(j * 37) % k] = f16_specials[j % (int64_t) (sizeof f16_specials /
          sizeof f16_specials[0])];
}

static void
test_linear_f16_special_values (void)
{
  const int64_t k = 136, m = 2 * (int64_t) (sizeof f16_specials /
      sizeof f16_specials[0]);
  static const int64_t ns[] = { 1, 3, 20 };
  wk_tensor W = wk_weight_make (WK_TYPE_F16, k, m, fill_special_row, NULL);
  float *X = malloc ((size_t) (20 * k) * sizeof (float));
  float *Y = malloc ((size_t) (20 * m) * sizeof (float));
  int64_t i, j, c;
  int s, fails = 0;

  for (i = 0; i < 20 * k; i++)
    X[i] = 1.0f;
  for (s = -1; s < n_simd_sets; s++) {
    const wk_kernel_set *ks = s < 0 ? &wk_kernels_ref : simd_sets[s];
    wk_kernels_set (ks);
    for (c = 0; c < 3; c++) {
      wk_linear (NULL, &W, NULL, X, ns[c], k, Y, m);
      for (i = 0; i < ns[c]; i++)
        for (j = 0; j < m; j++) {
          float want = f16_specials[j % (m / 2)], got = Y[i * m + j];
          /* (a sum with +0 makes -0 +0: zeros compare equal) */
          int ok = isnan (want) ? isnan (got) : got == want;
          if (!ok && fails++ < 5)
            CHECK_MSG (0, "%s f16 n=%ld: Y[%ld][%ld] = %a, want %a",
                ks->name, (long) ns[c], (long) i, (long) j, got, want);
        }
    }
  }
  wk_kernels_set (NULL);
  CHECK (fails == 0);
  free ((void *) W.data);
  free (X);
  free (Y);
}

/* q8_0 / q4_0 blocks whose scale is not finite (+-infinity, NaN) among
 * ordinary ones, through the few-row integer products: every set gives
 * an infinity or NaN where the reference does (the wasm set converts
 * four rows' scales with a shift that needs finite halves and must
 * notice the others), and finite outputs near the reference's. */
static void
test_linear_nonfinite_block_scales (void)
{
  static const uint16_t specials[] = { 0x7c00, 0xfc00, 0x7e00, 0x7c01 };
  static const wk_type types[] = { WK_TYPE_Q8_0, WK_TYPE_Q4_0 };
  static const int64_t ns[] = { 1, 3 };
  const int64_t k = 96, m = 22;
  float *X = rand_floats (3 * k, 1.0f);
  float *Yr = malloc ((size_t) (3 * m) * sizeof (float));
  float *Y = malloc ((size_t) (3 * m) * sizeof (float));
  int t, s, c, fails = 0, n_nonfinite = 0;
  int64_t i, j;

  for (t = 0; t < 2; t++) {
    wk_tensor W = make_weight (types[t], k, m);
    const size_t row_bytes = wk_type_row_bytes (types[t], k);
    const size_t bsize = types[t] == WK_TYPE_Q8_0 ? sizeof (wk_block_q8_0) :
        sizeof (wk_block_q4_0);
    /* rows 1, 5, 6, 13, 21: one block's scale (its first member) special */
    static const int64_t rows[] = { 1, 5, 6, 13, 21 };
    for (i = 0; i < 5; i++) {
      unsigned char *blk = (unsigned char *) W.data + (size_t) rows[i] *
          row_bytes + (size_t) (i % 3) * bsize;
      memcpy (blk, &specials[i % 4], sizeof specials[0]);
    }
    for (c = 0; c < 2; c++) {
      wk_kernels_set (&wk_kernels_ref);
      wk_linear (NULL, &W, NULL, X, ns[c], k, Yr, m);
      for (s = 0; s < n_simd_sets; s++) {
        wk_kernels_set (simd_sets[s]);
        wk_linear (NULL, &W, NULL, X, ns[c], k, Y, m);
        for (j = 0; j < ns[c] * m; j++) {
          float want = Yr[j], got = Y[j];
          /* not finite where the reference is not (the x86 sets scale
           * each lane's partial sum, so 0 * inf can make a NaN where
           * the reference's whole sum makes an infinity) */
          int ok = !isfinite (want) ? !isfinite (got) : isfinite (got)
              && fabsf (got - want) <= 1e-4f * (1.0f + fabsf (want));
          if (!isfinite (want) && s == 0)
            n_nonfinite++;
          if (!ok && fails++ < 5)
            CHECK_MSG (0, "%s %s n=%ld: Y[%ld] = %a, want %a",
                simd_sets[s]->name, wk_type_name (types[t]), (long) ns[c],
                (long) j, got, want);
        }
      }
    }
    free ((void *) W.data);
  }
  wk_kernels_set (NULL);
  /* the reference itself saw the specials (none hidden by a zero sum) */
  CHECK (n_nonfinite >= 2 * (5 + 3 * 5));
  CHECK (fails == 0);
  free (X);
  free (Yr);
  free (Y);
}

static void
test_linear_is_deterministic_across_threads (void)
{
  wk_tensor W = make_weight (WK_TYPE_Q8_0, 384, 200);
  float *X = rand_floats (40 * 384, 1.0f);
  float *Y1 = malloc (40 * 200 * sizeof (float));
  float *Y2 = malloc (40 * 200 * sizeof (float));
  int p;

  wk_linear (NULL, &W, NULL, X, 40, 384, Y1, 200);
  for (p = 0; p < n_pools; p++) {
    wk_linear (pools[p], &W, NULL, X, 40, 384, Y2, 200);
    CHECK (memcmp (Y1, Y2, 40 * 200 * sizeof (float)) == 0);
  }
  free ((void *) W.data);
  free (X);
  free (Y1);
  free (Y2);
}

/* The encoder's products through wk_linear_work: the integer products of
 * the sets that have them against the definition with quantized rows
 * (every other set against the f32 one), at odd sizes: rows not a
 * multiple of the tile's 6, outputs not of its 32, depths beyond one
 * packed block of 1024 and not a multiple of it; with extreme blocks. */
static void
test_linear_work (void)
{
  static const int64_t ns[] = { 8, 9, 13, 31, 64, 101 };
  static const int64_t ms[] = { 1, 15, 33, 64, 67, 130 };
  static const int64_t ks[] = { 32, 96, 384, 1056, 2080 };
  double worst = 0.0;
  int t, c;

  via_work = 1;
  for (t = 2; t < 4; t++)
    for (c = 0; c < 24; c++) {
      double w;
      extreme_blocks = c >= 16;
      w = check_linear_case (pools, n_pools, all_types[t], ns[c % 6],
          ks[c % 5], ms[(c / 2) % 6], c % 2, c % 3 == 0 ? 0 : c % 3 == 1 ?
          WK_LINEAR_GELU : WK_LINEAR_ADD);
      worst = w > worst ? w : worst;
    }
  extreme_blocks = 0;
  /* f32 and f16 weights pass through to the f32 products */
  check_linear_case (pools, n_pools, WK_TYPE_F16, 20, 384, 64, 1, 0);
  check_linear_case (pools, n_pools, WK_TYPE_F32, 20, 100, 40, 0, 0);
  via_work = 0;
  printf ("# linear_work (integer products): worst error / tolerance %.3f\n",
      worst);
}

/* The integer products' edges, exactly: weights at -128 (q8_0) and at
 * both ends of q4_0, activations at +-127 with unit scales, so that each
 * block's sum is an exact integer, added in f32 in the kernels' order:
 * the result is known to the bit. Saturating int16 pairs (maddubs) or
 * negating -128 would change it. Then the same with random weights and
 * activations. */
static void
test_linear_q_extremes (void)
{
  static const int8_t wq8[] = { -128, 127, -127, 0, 1, -128, 64, -1 };
  static const int8_t xs[] = { 127, -127, 127, 127, -127, -127, 0, 1 };
  const int64_t n = 9, k = 2080, m = 37, nb = k / WK_QK;
  int8_t *q = malloc ((size_t) (n * k));
  float *d = malloc ((size_t) (n * nb) * sizeof (float));
  int32_t *c = malloc ((size_t) (n * nb) * sizeof (int32_t));
  float *Y = malloc ((size_t) (n * m) * sizeof (float));
  int t, s, pass;

  for (t = 2; t < 4; t++) {
    const wk_type type = all_types[t];
    const int q8 = type == WK_TYPE_Q8_0;
    const size_t rb = wk_type_row_bytes (type, k);
    unsigned char *wd = calloc ((size_t) m, rb);
    wk_tensor W = { 0 };
    int64_t i, j, b, l;

    for (pass = 0; pass < 2; pass++) {
      /* w[j][l]: q8_0 from wq8, in equal pairs (maddubs adds pairs: -128
       * or 127 twice against 127 twice is the most it sees);
       * q4_0 nibbles 0 or 15 (-8 or 7). The second pass: every weight and
       * activation drawn at random (patterns as regular as the first
       * pass's can hide a kernel that gets some weights' signs wrong) */
      for (j = 0; j < m; j++)
        for (b = 0; b < nb; b++) {
          if (q8) {
            wk_block_q8_0 *blk = (wk_block_q8_0 *) (wd + j * rb) + b;
            blk->d = wk_fp32_to_fp16 (1.0f);
            for (l = 0; l < WK_QK; l++)
              blk->qs[l] = pass ? (int8_t) (rng_u32 () >> 24)
                  : wq8[((j + b) * 3 + l / 2) % 8];
          } else {
            wk_block_q4_0 *blk = (wk_block_q4_0 *) (wd + j * rb) + b;
            blk->d = wk_fp32_to_fp16 (1.0f);
            for (l = 0; l < WK_QK / 2; l++)
              blk->qs[l] = pass ? (uint8_t) (rng_u32 () >> 24)
                  : (uint8_t) (((j + l) % 4 ? 0x0f : 0x00)
                  | ((j + b + l) % 5 ? 0x00 : 0xf0));
          }
        }
      W.type = type;
      W.n_dims = 2;
      W.ne[0] = k;
      W.ne[1] = m;
      W.ne[2] = W.ne[3] = 1;
      W.data = wd;
      W.nbytes = rb * (size_t) m;
      /* rows of +-127 (and a few 0 and 1) */
      for (i = 0; i < n; i++)
        for (b = 0; b < nb; b++) {
          int32_t sum = 0;
          for (l = 0; l < WK_QK; l++) {
            int8_t v = (i + l) % 4 ? xs[(i + l) % 8] : (int8_t) 127;
            if (pass)
              v = (int8_t) ((int) (rng_u32 () >> 24) % 255 - 127);
            else if (b % 2)
              v = (int8_t) - v;
            q[i * k + b * WK_QK + l] = v;
            sum += v;
          }
          d[i * nb + b] = 1.0f;
          c[i * nb + b] = (q8 ? -128 : -8) * sum;
        }
      for (s = 0; s < n_simd_sets; s++) {
        const wk_kernel_set *ks = simd_sets[s];
        int fails = 0;
        if (!ks->linear_q)
          continue;
        ks->linear_q (&W, NULL, q, d, c, n, Y, m, 0, m, 0);
        for (i = 0; i < n; i++)
          for (j = 0; j < m; j++) {
            float want = 0.0f;
            int64_t exact = 0;
            for (b = 0; b < nb; b++) {
              int32_t dot = 0;
              for (l = 0; l < WK_QK; l++) {
                int w;
                if (q8) {
                  w = ((const wk_block_q8_0 *) (wd + j * rb))[b].qs[l];
                } else {
                  const wk_block_q4_0 *blk =
                      (const wk_block_q4_0 *) (wd + j * rb) + b;
                  w = (l < 16 ? blk->qs[l] & 0x0f : blk->qs[l - 16] >> 4) - 8;
                }
                dot += w * q[i * k + b * WK_QK + l];
              }
              want += (float) dot;
              /* every partial sum an exact float: the kernels' bits known */
              exact += dot;
              CHECK (exact > -(1 << 24) && exact < 1 << 24
                  && (float) exact == want);
            }
            if (Y[i * m + j] != want && fails++ < 3)
              CHECK_MSG (0, "%s %s: Y[%ld][%ld] = %.9g, want %.9g", ks->name,
                  wk_type_name (type), (long) i, (long) j, Y[i * m + j], want);
          }
        CHECK (fails == 0);
      }
    }
    free (wd);
  }
  free (q);
  free (d);
  free (c);
  free (Y);
}

/* The integer products give the same bits on any number of threads, for
 * an output split (m large) and a row split (m small, many rows). */
static void
test_linear_work_is_deterministic_across_threads (void)
{
  static const int64_t shapes[][3] = { {200, 1056, 400}, {1500, 384, 64} };
  int t, p, c;

  for (t = 2; t < 4; t++)
    for (c = 0; c < 2; c++) {
      int64_t n = shapes[c][0], k = shapes[c][1], m = shapes[c][2];
      wk_tensor W = make_weight (all_types[t], k, m);
      float *X = rand_floats (n * k, 1.0f);
      float *Y1 = malloc ((size_t) (n * m) * sizeof (float));
      float *Y2 = malloc ((size_t) (n * m) * sizeof (float));
      void *work = malloc (wk_linear_work_size (n, k));

      wk_linear_work (NULL, &W, NULL, X, n, k, Y1, m, WK_LINEAR_GELU, work);
      for (p = 0; p < n_pools; p++) {
        wk_linear_work (pools[p], &W, NULL, X, n, k, Y2, m, WK_LINEAR_GELU,
            work);
        CHECK_MSG (memcmp (Y1, Y2, (size_t) (n * m) * sizeof (float)) == 0,
            "%s n=%ld m=%ld threads=%d", wk_type_name (all_types[t]),
            (long) n, (long) m, wk_pool_size (pools[p]));
      }
      free ((void *) W.data);
      free (X);
      free (Y1);
      free (Y2);
      free (work);
    }
}

/* WK_LINEAR_REUSE_X: a product that takes the rows the previous call
 * quantized gives the bits of one that quantizes them itself; the rows
 * are quantized anew for another weight type or depth, and after a call
 * without the flag (here one that quantized nothing, so that the rows
 * left in the buffer are of X's old values). */
static void
test_linear_work_reuse_x (void)
{
  const int64_t n = 40, k = 96, k2 = 192, m = 48;
  wk_tensor w8 = make_weight (WK_TYPE_Q8_0, k, m);
  wk_tensor w4 = make_weight (WK_TYPE_Q4_0, k, m);
  wk_tensor w16 = make_weight (WK_TYPE_F16, k, m);
  wk_tensor wk2 = make_weight (WK_TYPE_Q8_0, k2, m);
  float *X = rand_floats (n * k2, 1.0f);
  float *Y0 = malloc ((size_t) (n * m) * sizeof (float));
  float *Y1 = malloc ((size_t) (n * m) * sizeof (float));
  void *work = malloc (wk_linear_work_size (n, k2));
  const unsigned f = WK_LINEAR_INT8, r = WK_LINEAR_INT8 | WK_LINEAR_REUSE_X;
  const size_t bytes = (size_t) (n * m) * sizeof (float);
  int s;
  int64_t i;

  for (s = 0; s < n_simd_sets; s++) {
    if (!simd_sets[s]->linear_q)
      continue;
    wk_kernels_set (simd_sets[s]);
    /* the same type: the rows of the q8_0 call */
    wk_linear_work (NULL, &w8, NULL, X, n, k, Y0, m, f, work);
    wk_linear_work (NULL, &w8, NULL, X, n, k, Y1, m, r, work);
    CHECK_MSG (memcmp (Y0, Y1, bytes) == 0, "%s reused", simd_sets[s]->name);
    /* another type (another offset) */
    wk_linear_work (NULL, &w4, NULL, X, n, k, Y0, m, f, work);
    wk_linear_work (NULL, &w8, NULL, X, n, k, Y1, m, f, work);
    wk_linear_work (NULL, &w4, NULL, X, n, k, Y1, m, r, work);
    CHECK_MSG (memcmp (Y0, Y1, bytes) == 0, "%s q4_0 after q8_0",
        simd_sets[s]->name);
    /* another depth (X read with stride k2) */
    wk_linear_work (NULL, &wk2, NULL, X, n, k2, Y0, m, f, work);
    wk_linear_work (NULL, &w8, NULL, X, n, k2, Y1, m, f, work);
    wk_linear_work (NULL, &wk2, NULL, X, n, k2, Y1, m, r, work);
    CHECK_MSG (memcmp (Y0, Y1, bytes) == 0, "%s depth 192 after 96",
        simd_sets[s]->name);
    /* an f16 product without the flag ends what the buffer held */
    wk_linear_work (NULL, &w8, NULL, X, n, k, Y1, m, f, work);
    wk_linear_work (NULL, &w16, NULL, X, n, k, Y1, m, f, work);
    for (i = 0; i < n * k; i++)
      X[i] = -X[i] * 0.5f;
    wk_linear_work (NULL, &w8, NULL, X, n, k, Y1, m, r, work);
    wk_linear_work (NULL, &w8, NULL, X, n, k, Y0, m, f, work);
    CHECK_MSG (memcmp (Y0, Y1, bytes) == 0, "%s after an f16 product",
        simd_sets[s]->name);
  }
  wk_kernels_set (NULL);
  free ((void *) w8.data);
  free ((void *) w4.data);
  free ((void *) w16.data);
  free ((void *) wk2.data);
  free (X);
  free (Y0);
  free (Y1);
  free (work);
}

/* The decoder's products (few rows, weights streamed) split over any
 * number of threads give the bits of one thread: each output tile is
 * computed whole by one piece. */
static void
test_gemv_is_deterministic_across_threads (void)
{
  int t, p;
  int64_t n;

  for (t = 0; t < 4; t++)
    for (n = 1; n < 8; n++) {
      /* large enough to be split, an m not a multiple of any tile */
      wk_tensor W = make_weight (all_types[t], 256, 4100);
      float *X = rand_floats (n * 256, 1.0f);
      float *Y1 = malloc ((size_t) (n * 4100) * sizeof (float));
      float *Y2 = malloc ((size_t) (n * 4100) * sizeof (float));

      wk_linear (NULL, &W, NULL, X, n, 256, Y1, 4100);
      for (p = 0; p < n_pools; p++) {
        wk_linear (pools[p], &W, NULL, X, n, 256, Y2, 4100);
        CHECK_MSG (memcmp (Y1, Y2, (size_t) (n * 4100) * sizeof (float))
            == 0, "%s n=%ld threads=%d", wk_type_name (all_types[t]),
            (long) n, wk_pool_size (pools[p]));
      }
      free ((void *) W.data);
      free (X);
      free (Y1);
      free (Y2);
    }
}

/* f16, q8_0 and q4_0 weights against a few rows of X (beams, batched
 * streams): each row gets the bits of the one-row product, whole tiles
 * and the tail alike, on every kernel set (kernels-f16.h; the integer
 * products quantize and scale each row alone). */
static void
test_few_rows_match_one_row (void)
{
  static const int64_t ks[] = { 384, 96, 1536 };
  static const wk_type types[] = { WK_TYPE_F16, WK_TYPE_Q8_0, WK_TYPE_Q4_0 };
  int s, c, t;
  int64_t n, i;

  for (s = -1; s < n_simd_sets; s++) {
    wk_kernels_set (s < 0 ? &wk_kernels_ref : simd_sets[s]);
    for (t = 0; t < 3; t++)
      for (c = 0; c < 3; c++) {
        const int64_t k = ks[c], m = 1030;
        wk_tensor W = make_weight (types[t], k, m);
        float *bias = rand_floats (m, 0.5f);
        float *X = rand_floats (7 * k, 1.0f);
        float *Y0 = rand_floats (7 * m, 1.0f);
        float *Yn = malloc ((size_t) (7 * m) * sizeof (float));
        float *Y1 = malloc ((size_t) m * sizeof (float));
        unsigned flags = c == 1 ? WK_LINEAR_GELU : WK_LINEAR_ADD;

        for (n = 2; n < WK_LINEAR_GEMM_ROWS; n++) {
          memcpy (Yn, Y0, (size_t) (n * m) * sizeof (float));
          wk_linear_ex (NULL, &W, bias, X, n, k, Yn, m, flags);
          for (i = 0; i < n; i++) {
            memcpy (Y1, Y0 + i * m, (size_t) m * sizeof (float));
            wk_linear_ex (NULL, &W, bias, X + i * k, 1, k, Y1, m, flags);
            CHECK_MSG (memcmp (Y1, Yn + i * m, (size_t) m * sizeof (float))
                == 0, "%s %s k=%ld n=%ld row %ld",
                s < 0 ? "ref" : simd_sets[s]->name, wk_type_name (types[t]),
                (long) k, (long) n, (long) i);
          }
        }
        free ((void *) W.data);
        free (bias);
        free (X);
        free (Y0);
        free (Yn);
        free (Y1);
      }
  }
  wk_kernels_set (NULL);
}

/* Groups of rows through one weight in one pass give each group the bits
 * wk_linear_ex gives it alone, whatever the threads. */
static void
test_linear_batch_matches_alone (void)
{
  /* chunks of whole groups of at most 7 rows: 1+3+0+1, 7, 2+1, 5; 20
   * rows of depth 256 gathered on the stack, of 768 on the heap */
  static const int sizes[] = { 1, 3, 0, 1, 7, 2, 1, 5 };
  const int n_groups = (int) (sizeof sizes / sizeof sizes[0]);
  int t, p, s;

  for (s = -1; s < n_simd_sets; s++)
    for (t = 0; t < 4; t++) {
      const int64_t k = t % 2 ? 256 : 768;
      wk_tensor W = make_weight (all_types[t], k, 4100);
      float *bias = rand_floats (4100, 0.5f);
      unsigned flags = t % 2 ? WK_LINEAR_ADD : WK_LINEAR_GELU;
      const char *set = s < 0 ? "ref" : simd_sets[s]->name;
      wk_rows groups[8];
      float *X[8], *want[8], *got[8];
      int g;

      wk_kernels_set (s < 0 ? &wk_kernels_ref : simd_sets[s]);
      for (g = 0; g < n_groups; g++) {
        size_t ny = (size_t) sizes[g] * 4100 + 1;
        X[g] = rand_floats (sizes[g] * k + 1, 1.0f);
        want[g] = rand_floats ((int64_t) ny, 1.0f);
        got[g] = malloc (ny * sizeof (float));
        memcpy (got[g], want[g], ny * sizeof (float));
        if (sizes[g] > 0)
          wk_linear_ex (NULL, &W, bias, X[g], sizes[g], k, want[g], 4100,
              flags);
        groups[g].X = X[g];
        groups[g].Y = got[g];
        groups[g].n = sizes[g];
      }
      for (p = 0; p < n_pools; p++) {
        float *keep[8];
        for (g = 0; g < n_groups; g++) {
          /* each pool starts from the same Y (WK_LINEAR_ADD adds to it) */
          size_t ny = (size_t) sizes[g] * 4100 + 1;
          keep[g] = malloc (ny * sizeof (float));
          memcpy (keep[g], got[g], ny * sizeof (float));
        }
        wk_linear_batch (pools[p], &W, bias, groups, n_groups, k, 4100, flags);
        for (g = 0; g < n_groups; g++) {
          size_t ny = (size_t) sizes[g] * 4100 + 1;
          CHECK_MSG (memcmp (got[g], want[g], ny * sizeof (float)) == 0,
              "%s %s group %d (%d rows) threads=%d", set,
              wk_type_name (all_types[t]), g, sizes[g],
              wk_pool_size (pools[p]));
          memcpy (got[g], keep[g], ny * sizeof (float));
          free (keep[g]);
        }
      }
      for (g = 0; g < n_groups; g++) {
        free (X[g]);
        free (want[g]);
        free (got[g]);
      }
      free (bias);
      free ((void *) W.data);
    }
  wk_kernels_set (NULL);
}

static void
test_get_row (void)
{
  int t;
  for (t = 0; t < 4; t++) {
    wk_tensor W = make_weight (all_types[t], 96, 5);
    size_t rb = wk_type_row_bytes (all_types[t], 96);
    float got[96], want[96];
    int64_t r;
    for (r = 0; r < 5; r++) {
      wk_tensor_get_row (&W, r, got);
      wk_row_to_f32 (all_types[t], (const unsigned char *) W.data + r * rb,
          want, 96);
      CHECK_MSG (memcmp (got, want, sizeof got) == 0, "%s row %ld",
          wk_type_name (all_types[t]), (long) r);
    }
    free ((void *) W.data);
  }
}

static void
check_gemm_case (int b_trans, int64_t n, int64_t m, int64_t k)
{
  int64_t lda = k + 1, ldb = (b_trans ? k : m) + 2, ldc = m + 3;
  float *A = rand_floats (n * lda, 1.0f);
  float *B = rand_floats ((b_trans ? m : k) * ldb, 1.0f);
  float *C = malloc ((size_t) (n * ldc) * sizeof (float));
  float alpha = 0.125f;
  int s, p;

  for (s = -1; s < n_simd_sets; s++) {
    wk_kernels_set (s < 0 ? &wk_kernels_ref : simd_sets[s]);
    for (p = 0; p < n_pools; p++) {
      int64_t i, j, l, bad = 0;
      memset (C, 0, (size_t) (n * ldc) * sizeof (float));
      wk_gemm_f32 (pools[p], b_trans, n, m, k, alpha, A, lda, B, ldb, C, ldc);
      for (i = 0; i < n; i++)
        for (j = 0; j < m; j++) {
          double acc = 0.0, mag = 0.0;
          for (l = 0; l < k; l++) {
            double b = b_trans ? B[j * ldb + l] : B[l * ldb + j];
            acc += A[i * lda + l] * b;
            mag += fabs (A[i * lda + l] * b);
          }
          acc *= alpha;
          mag *= alpha;
          if (!(fabs (C[i * ldc + j] - acc) <= 1e-5 * mag + 1e-6) && bad++ < 3)
            CHECK_MSG (0, "gemm %s trans=%d n=%ld m=%ld k=%ld C[%ld][%ld] = "
                "%g want %g", s < 0 ? "ref" : simd_sets[s]->name, b_trans,
                (long) n, (long) m, (long) k, (long) i, (long) j,
                C[i * ldc + j], acc);
        }
    }
  }
  wk_kernels_set (NULL);
  free (A);
  free (B);
  free (C);
}

static void
test_gemm_f32 (void)
{
  static const int64_t sz[] = { 1, 2, 5, 6, 7, 16, 17, 33, 64, 70 };
  int c;
  for (c = 0; c < 40; c++)
    check_gemm_case (c % 2, sz[rng_u32 () % 10], sz[rng_u32 () % 10],
        sz[rng_u32 () % 10]);
  check_gemm_case (1, 100, 150, 64);
  check_gemm_case (0, 100, 64, 150);
  check_gemm_case (1, 20, 30, 300);
}

static void
check_attention_case (int n_head, int64_t d_head, int64_t n_q, int64_t n_kv,
    int causal)
{
  int64_t d = n_head * d_head, ld = d + 3;
  float *Q = rand_floats (n_q * ld, 2.0f);
  float *K = rand_floats (n_kv * ld, 2.0f);
  float *V = rand_floats (n_kv * ld, 1.0f);
  float *O = malloc ((size_t) (n_q * ld) * sizeof (float));
  float *R = malloc ((size_t) (n_q * ld) * sizeof (float));
  float *O2 = malloc ((size_t) (n_q * ld) * sizeof (float));
  /* wk_attention_work's copies of a head: room for 4 threads */
  size_t slot = (size_t) (2 * n_kv * d_head);
  float *work = malloc (4 * slot * sizeof (float));
  float scale = 1.0f / sqrtf ((float) d_head);
  int s, p, room;

  /* reference against a direct softmax in the test */
  wk_kernels_set (&wk_kernels_ref);
  wk_attention (NULL, n_head, d_head, n_q, n_kv, Q, ld, K, ld, V, ld, scale,
      causal, R, ld);
  {
    double *w = malloc ((size_t) n_kv * sizeof (double));
    int64_t h, i, t, l, bad = 0;
    for (h = 0; h < n_head; h++)
      for (i = 0; i < n_q; i++) {
        int64_t last = wk_attention_last_key (i, n_q, n_kv, causal);
        double mx = -INFINITY, sum = 0.0;
        for (t = 0; t <= last; t++) {
          double dot = 0.0;
          for (l = 0; l < d_head; l++)
            dot += (double) Q[i * ld + h * d_head + l] * K[t * ld + h * d_head
                + l];
          w[t] = dot * scale;
          mx = w[t] > mx ? w[t] : mx;
        }
        for (t = 0; t <= last; t++)
          sum += (w[t] = exp (w[t] - mx));
        for (l = 0; l < d_head; l++) {
          double o = 0.0;
          for (t = 0; t <= last; t++)
            o += w[t] / sum * V[t * ld + h * d_head + l];
          if (!(fabs (R[i * ld + h * d_head + l] - o) <= 1e-6) && bad++ < 3)
            CHECK_MSG (0, "ref attention h=%ld i=%ld l=%ld: %g want %g",
                (long) h, (long) i, (long) l, R[i * ld + h * d_head + l], o);
        }
      }
    free (w);
  }
  for (s = 0; s < n_simd_sets; s++) {
    wk_kernels_set (simd_sets[s]);
    for (p = 0; p < n_pools; p++) {
      int64_t i, l, bad = 0;
      memset (O, 0, (size_t) (n_q * ld) * sizeof (float));
      wk_attention (pools[p], n_head, d_head, n_q, n_kv, Q, ld, K, ld, V, ld,
          scale, causal, O, ld);
      for (i = 0; i < n_q; i++)
        for (l = 0; l < d; l++)
          if (!(fabs (O[i * ld + l] - R[i * ld + l]) <= 2e-5) && bad++ < 3)
            CHECK_MSG (0, "%s attention heads=%d d_head=%ld n_q=%ld n_kv=%ld "
                "causal=%d threads=%d: O[%ld][%ld] = %g want %g",
                simd_sets[s]->name, n_head, (long) d_head, (long) n_q,
                (long) n_kv, causal, wk_pool_size (pools[p]), (long) i,
                (long) l, O[i * ld + l], R[i * ld + l]);
      /* with work (the encoder's: each thread copies a head's K and V
       * into rows of their own), room for every thread or for one: the
       * bits of wk_attention */
      for (room = 0; room < 2; room++) {
        memset (O2, 0, (size_t) (n_q * ld) * sizeof (float));
        wk_attention_work (pools[p], n_head, d_head, n_q, n_kv, Q, ld, K, ld,
            V, ld, scale, causal, O2, ld, work, room ? slot : 4 * slot);
        CHECK_MSG (memcmp (O, O2, (size_t) (n_q * ld) * sizeof (float)) == 0,
            "%s attention_work (room for %d) heads=%d d_head=%ld n_q=%ld "
            "n_kv=%ld causal=%d threads=%d: not wk_attention's bits",
            simd_sets[s]->name, room ? 1 : 4, n_head, (long) d_head,
            (long) n_q, (long) n_kv, causal, wk_pool_size (pools[p]));
      }
    }
  }
  /* K and V in f16: held to wk_attention on their f32 values */
  {
    uint16_t *Kh = malloc ((size_t) (n_kv * ld) * sizeof (uint16_t));
    uint16_t *Vh = malloc ((size_t) (n_kv * ld) * sizeof (uint16_t));
    int64_t i, l;
    for (i = 0; i < n_kv * ld; i++) {
      Kh[i] = wk_fp32_to_fp16 (K[i]);
      Vh[i] = wk_fp32_to_fp16 (V[i]);
      K[i] = wk_fp16_to_fp32 (Kh[i]);
      V[i] = wk_fp16_to_fp32 (Vh[i]);
    }
    wk_kernels_set (&wk_kernels_ref);
    wk_attention (NULL, n_head, d_head, n_q, n_kv, Q, ld, K, ld, V, ld, scale,
        causal, R, ld);
    for (s = -1; s < n_simd_sets; s++) {
      wk_kernels_set (s < 0 ? &wk_kernels_ref : simd_sets[s]);
      for (p = 0; p < n_pools; p++) {
        int bad = 0;
        memset (O, 0, (size_t) (n_q * ld) * sizeof (float));
        wk_attention_f16kv (pools[p], n_head, d_head, n_q, n_kv, Q, ld, Kh,
            ld, Vh, ld, scale, causal, O, ld);
        for (i = 0; i < n_q; i++)
          for (l = 0; l < d; l++)
            if (!(fabs (O[i * ld + l] - R[i * ld + l]) <= 2e-5) && bad++ < 3)
              CHECK_MSG (0, "%s attention_f16kv heads=%d d_head=%ld n_q=%ld "
                  "n_kv=%ld causal=%d: O[%ld][%ld] = %g want %g",
                  s < 0 ? "ref" : simd_sets[s]->name, n_head, (long) d_head,
                  (long) n_q, (long) n_kv, causal, (long) i, (long) l,
                  O[i * ld + l], R[i * ld + l]);
      }
    }
    free (Kh);
    free (Vh);
  }
  wk_kernels_set (NULL);
  free (Q);
  free (K);
  free (V);
  free (O);
  free (O2);
  free (work);
  free (R);
}

/* f16 keys and values that are not all finite normal numbers (the wasm
 * set converts them with shifts that hold only for finite halves, and
 * does the whole query again when it meets another): one query (a
 * decoder step) over 40 keys, a value +infinity, one -infinity in another
 * dimension, subnormal and negative-zero keys and values; every set
 * against the reference, an infinite output where the reference has one. */
static void
test_attention_f16kv_special (void)
{
  const int64_t d = 64, n_kv = 40;
  float Q[64], O[64], R[64];
  uint16_t Kh[40 * 64], Vh[40 * 64];
  int64_t i, l;
  int s;

  for (l = 0; l < d; l++)
    Q[l] = rng_f ();
  for (i = 0; i < n_kv * d; i++) {
    Kh[i] = wk_fp32_to_fp16 (rng_f ());
    Vh[i] = wk_fp32_to_fp16 (rng_f ());
  }
  Vh[5 * d + 3] = 0x7c00;       /* +inf */
  Vh[30 * d + 17] = 0xfc00;     /* -inf */
  Kh[2 * d + 9] = 0x0003;       /* subnormal */
  Vh[11 * d + 40] = 0x8001;     /* negative subnormal */
  Kh[12 * d + 1] = 0x8000;      /* -0 */
  wk_kernels_set (&wk_kernels_ref);
  wk_attention_f16kv (NULL, 1, d, 1, n_kv, Q, d, Kh, d, Vh, d, 0.125f, 0, R, d);
  CHECK_MSG (isinf (R[3]) && R[3] > 0 && isinf (R[17]) && R[17] < 0,
      "reference: O[3] = %g, O[17] = %g", R[3], R[17]);
  for (s = 0; s < n_simd_sets; s++) {
    int bad = 0;
    wk_kernels_set (simd_sets[s]);
    wk_attention_f16kv (NULL, 1, d, 1, n_kv, Q, d, Kh, d, Vh, d, 0.125f, 0,
        O, d);
    for (l = 0; l < d; l++)
      if (!(isinf (R[l]) ? O[l] == R[l] : fabs (O[l] - R[l]) <= 2e-5)
          && bad++ < 3)
        CHECK_MSG (0, "%s attention_f16kv, special halves: O[%ld] = %g want %g",
            simd_sets[s]->name, (long) l, O[l], R[l]);
  }
  wk_kernels_set (NULL);
}

/* A set with f16kv_exact computes wk_attention_halves on f32 keys and
 * values holding halves as its wk_attention_f16kv does on the halves, bit
 * for bit, for every query count the decoder gives it (1 to 15: beams,
 * prompts; more go through wk_attention in both). */
static void
test_attention_halves_match_f16kv (void)
{
  const int nh = 6, d = 64, n_kv = 200;
  static float Q[15 * 384], O[15 * 384], R[15 * 384], K[200 * 384],
      V[200 * 384];
  static uint16_t Kh[200 * 384], Vh[200 * 384];
  int s, n, tested = 0;
  int64_t i;

  for (i = 0; i < 15 * nh * d; i++)
    Q[i] = rng_f ();
  for (i = 0; i < n_kv * nh * d; i++) {
    Kh[i] = wk_fp32_to_fp16 (rng_f ());
    Vh[i] = wk_fp32_to_fp16 (rng_f ());
    K[i] = wk_fp16_to_fp32 (Kh[i]);
    V[i] = wk_fp16_to_fp32 (Vh[i]);
  }
  for (s = 0; s < n_simd_sets; s++) {
    if (!simd_sets[s]->f16kv_exact)
      continue;
    tested++;
    wk_kernels_set (simd_sets[s]);
    for (n = 1; n < 16; n++) {
      wk_attention_f16kv (NULL, nh, d, n, n_kv, Q, nh * d, Kh, nh * d, Vh,
          nh * d, 0.125f, 0, R, nh * d);
      wk_attention_halves (NULL, nh, d, n, n_kv, Q, nh * d, K, nh * d, V,
          nh * d, 0.125f, 0, O, nh * d);
      CHECK_MSG (memcmp (O, R, (size_t) n * nh * d * sizeof (float)) == 0,
          "%s: %d queries over halves in f32 are not the f16 results",
          simd_sets[s]->name, n);
    }
  }
  wk_kernels_set (NULL);
  if (!tested)
    printf ("# no set here keeps halves in f32 (f16kv_exact): not run\n");
}

static void
test_f32_to_f16 (void)
{
  static const float special[] = { 0.0f, -0.0f, 1.0f, -2.5f, 65504.0f,
    65520.0f, 1e6f, -1e6f, 6.1e-5f, 5.96e-8f, 2.98e-8f, 1e-9f, -3e-6f,
    1.00048828125f, 1.00146484375f, INFINITY, -INFINITY
  };
  float x[1000];
  uint16_t a[1000], b[1000];
  int i, s;

  for (i = 0; i < 1000; i++)
    x[i] = i < 17 ? special[i] : rng_f () * powf (2.0f,
        (float) (rng_u32 () % 40) - 25.0f);
  for (s = -1; s < n_simd_sets; s++) {
    wk_kernels_set (s < 0 ? &wk_kernels_ref : simd_sets[s]);
    for (i = 0; i < 1000; i++)
      a[i] = wk_fp32_to_fp16 (x[i]);
    wk_f32_to_f16 (x, b, 1000);
    for (i = 0; i < 1000; i++)
      CHECK_MSG (a[i] == b[i], "%s f32_to_f16 (%g) = 0x%04x, want 0x%04x",
          s < 0 ? "ref" : simd_sets[s]->name, x[i], b[i], a[i]);
  }
  wk_kernels_set (NULL);
}

/* The sets' f16_to_f32 gives wk_fp16_to_fp32's bits for all 65536 halves
 * (NaN payloads kept, where F16C alone quiets signaling NaNs), in pieces
 * that end inside a vector; wk_tensor_get_row of an f16 row the same. */
static void
test_f16_to_f32_all_halves (void)
{
  uint16_t *h = malloc (65536 * sizeof (uint16_t));
  float *want = malloc (65536 * sizeof (float));
  float *got = malloc (65536 * sizeof (float));
  int64_t i, bad;
  int s;

  for (i = 0; i < 65536; i++) {
    h[i] = (uint16_t) i;
    want[i] = wk_fp16_to_fp32 (h[i]);
  }
  for (s = 0; s < n_simd_sets; s++) {
    const wk_kernel_set *ks = simd_sets[s];
    if (!ks->f16_to_f32)
      continue;
    memset (got, 0, 65536 * sizeof (float));
    for (i = 0; i < 65536; i += 4093)
      ks->f16_to_f32 (h + i, got + i, 65536 - i < 4093 ? 65536 - i : 4093);
    for (i = 0, bad = 0; i < 65536; i++)
      if (memcmp (&got[i], &want[i], sizeof (float)) != 0 && bad++ < 3)
        fprintf (stderr, "# %s: half 0x%04x -> 0x%08x, want 0x%08x\n",
            ks->name, (unsigned) i, *(const uint32_t *) &got[i],
            *(const uint32_t *) &want[i]);
    CHECK_MSG (bad == 0, "%s: %ld halves differ", ks->name, (long) bad);
  }
  {
    /* a 2-row f16 tensor through the set in use */
    wk_tensor W = { "h", WK_TYPE_F16, 2, {32768, 2, 1, 1}, h, 65536 * 2 };
    wk_tensor_get_row (&W, 1, got);
    CHECK (memcmp (got, want + 32768, 32768 * sizeof (float)) == 0);
  }
  free (h);
  free (want);
  free (got);
}

/* wk_f32_to_f16 and wk_round_f16 of every kernel set against the scalar
 * conversion, bit for bit, on every f32 whose sign, exponent and top ten
 * mantissa bits (all 2^19 of them: every half's neighbourhood, zeros,
 * f32 and f16 subnormals, infinities, NaNs) come with low 13 bits around
 * the rounding points of normal halves (ties, one either side) and a
 * random pattern; the subnormal halves' rounding points sit in the top
 * bits, so they are covered too. The x86 sets convert with F16C, which
 * quiets signaling NaNs (sets the payload's top bit): for them only
 * that difference is allowed. */
static void
test_f16_rounding_all_inputs (void)
{
  static const uint32_t lows[] = { 0x0000, 0x0001, 0x07ff, 0x0800, 0x0801,
    0x0fff, 0x1000, 0x1001, 0x17ff, 0x1800, 0x1fff, 0
  };
  enum
  { N_LOW = sizeof lows / sizeof lows[0], CHUNK = 1 << 12 };
  float *x = malloc (CHUNK * N_LOW * sizeof (float));
  float *r = malloc (CHUNK * N_LOW * sizeof (float));
  uint16_t *h = malloc (CHUNK * N_LOW * sizeof (uint16_t));
  uint32_t top, u, want;
  int s, i, bad = 0;

  if (!x || !r || !h) {
    CHECK (0);
    goto out;
  }
  for (s = -1; s < n_simd_sets; s++) {
    const char *name = s < 0 ? "ref" : simd_sets[s]->name;
    const int quiet_ok = s >= 0 && !simd_sets[s]->f16kv_slow;
    wk_kernels_set (s < 0 ? &wk_kernels_ref : simd_sets[s]);
    for (top = 0; top < (1u << 19); top += CHUNK) {
      for (i = 0; i < CHUNK * N_LOW; i++) {
        uint32_t low = i % N_LOW < N_LOW - 1 ? lows[i % N_LOW] :
            rng_u32 () & 0x1fff;
        u = (top + (uint32_t) (i / N_LOW)) << 13 | low;
        memcpy (&x[i], &u, sizeof u);
      }
      memcpy (r, x, CHUNK * N_LOW * sizeof (float));
      /* odd lengths: the vector loops and their scalar tails */
      wk_f32_to_f16 (x, h, CHUNK * N_LOW - 3);
      wk_f32_to_f16 (x + CHUNK * N_LOW - 3, h + CHUNK * N_LOW - 3, 3);
      wk_round_f16 (r, CHUNK * N_LOW - 1);
      wk_round_f16 (r + CHUNK * N_LOW - 1, 1);
      for (i = 0; i < CHUNK * N_LOW; i++) {
        uint16_t hw = wk_fp32_to_fp16 (x[i]);
        float fw = wk_fp16_to_fp32 (hw);
        memcpy (&want, &fw, sizeof want);
        memcpy (&u, &r[i], sizeof u);
        /* F16C's conversion (the x86 sets) quiets a signaling NaN; sets
         * that convert in software give the reference's bits */
        if (hw != h[i] && quiet_ok && (hw & 0x7c00) == 0x7c00 && (hw & 0x3ff)
            && h[i] == (hw | 0x200)) {
          hw = h[i];
          want |= 0x400000;
        }
        if ((h[i] != hw || u != want) && bad++ < 5) {
          memcpy (&u, &x[i], sizeof u);
          CHECK_MSG (0, "%s: 0x%08x (%g) to half 0x%04x want 0x%04x, "
              "rounded %g want %g", name, u, x[i], h[i], hw, r[i], fw);
        }
      }
    }
  }
  CHECK (bad == 0);
out:
  wk_kernels_set (NULL);
  free (x);
  free (r);
  free (h);
}

/* n values for comparisons against scalar loops: with hard set, only
 * NaNs, zeros of both signs, infinities and small integers (ties); else
 * mostly random values among them. A NaN at index 0 only with nan_at_0. */
static void
hostile_floats (float *x, int n, int hard, int nan_at_0)
{
  int i;

  for (i = 0; i < n; i++) {
    switch (rng_u32 () % (hard ? 4 : 16)) {
      case 0:
        x[i] = i > 0 || nan_at_0 ? NAN : 1.0f;
        break;
      case 1:
        x[i] = (rng_u32 () & 1) ? -0.0f : 0.0f;
        break;
      case 2:
        x[i] = (rng_u32 () & 1) ? -INFINITY : INFINITY;
        break;
      case 3:
        x[i] = (float) (rng_u32 () % 3);
        break;
      default:
        x[i] = rng_f () * 10.0f;
        break;
    }
  }
}

/* wk_argmax of every kernel set against the scalar loop's definition (the
 * first index of the largest value; NaNs never chosen unless at index 0)
 * on ties, -0 against +0, infinities and NaNs, at every length and
 * position around the vector widths. */
static void
test_argmax_matches_scalar (void)
{
  float x[300];
  int s, c, n, i, bad = 0;

  for (c = 0; c < 2000; c++) {
    int64_t want = 0;
    n = 1 + (int) (rng_u32 () % 300);
    hostile_floats (x, n, c % 4 == 0, 1);
    for (i = 1; i < n; i++)
      if (x[i] > x[want])
        want = i;
    for (s = -1; s < n_simd_sets; s++) {
      int64_t got;
      wk_kernels_set (s < 0 ? &wk_kernels_ref : simd_sets[s]);
      got = wk_argmax (x, n);
      if (got != want && bad++ < 5)
        CHECK_MSG (0, "%s argmax n=%d: %ld want %ld (%g)",
            s < 0 ? "ref" : simd_sets[s]->name, n, (long) got, (long) want,
            x[want]);
    }
  }
  wk_kernels_set (NULL);
  CHECK (bad == 0);
}

/* wk_find_gt and wk_top_k of every kernel set against their scalar
 * definitions (the first index above t; k rounds of argmax, each masking
 * what it found and stopping at -INFINITY) on the values of the argmax
 * test, at every length and position around the vector widths. */
static void
test_find_gt_top_k (void)
{
  float x[300], y[300];
  int s, c, n, i, k, bad = 0;

  for (c = 0; c < 2000; c++) {
    int64_t want_gt, want[WK_TOP_K_MAX], got[WK_TOP_K_MAX];
    int n_want = 0, n_got;
    float t;
    n = 1 + (int) (rng_u32 () % 300);
    /* no NaN at 0, which argmax keeps and top_k leaves out */
    hostile_floats (x, n, c % 4 == 0, 0);
    t = (c % 3 == 0) ? -INFINITY : (c % 3 == 1) ? x[rng_u32 () % n] : 9.5f;
    for (want_gt = 0; want_gt < n && !(x[want_gt] > t); want_gt++);
    k = 1 + (int) (rng_u32 () % 17);
    memcpy (y, x, (size_t) n * sizeof (float));
    for (i = 0; i < k; i++) {
      int64_t best = 0, j;
      for (j = 1; j < n; j++)
        if (y[j] > y[best])
          best = j;
      if (y[best] == -INFINITY || y[best] != y[best])
        break;
      want[n_want++] = best;
      y[best] = -INFINITY;
    }
    for (s = -1; s < n_simd_sets; s++) {
      const char *name = s < 0 ? "ref" : simd_sets[s]->name;
      wk_kernels_set (s < 0 ? &wk_kernels_ref : simd_sets[s]);
      if (wk_find_gt (x, n, t) != want_gt && bad++ < 5)
        CHECK_MSG (0, "%s find_gt n=%d t=%g: %ld want %ld", name, n, t,
            (long) wk_find_gt (x, n, t), (long) want_gt);
      n_got = wk_top_k (x, n, k, got);
      if ((n_got != n_want || memcmp (got, want,
                  (size_t) n_want * sizeof got[0])) && bad++ < 5)
        CHECK_MSG (0, "%s top_k n=%d k=%d: %d found, want %d (first %ld, "
            "want %ld)", name, n, k, n_got, n_want,
            n_got > 0 ? (long) got[0] : -1L, n_want > 0 ? (long) want[0] : -1L);
    }
  }
  wk_kernels_set (NULL);
  CHECK (bad == 0);
  CHECK (wk_find_gt (x, 0, 0.0f) == 0);
  CHECK (wk_top_k (x, 0, 3, NULL) == 0);
}

static void
test_attention (void)
{
  static const int64_t nqs[] = { 1, 2, 3, 4, 5, 31, 33, 70 };
  static const int64_t nkvs[] = { 1, 7, 64, 65, 150 };
  static const int64_t dhs[] = { 8, 13, 64 };
  int c;
  for (c = 0; c < 40; c++) {
    int64_t n_q = nqs[rng_u32 () % 8], n_kv = nkvs[rng_u32 () % 5];
    int causal = c % 2;
    if (causal && n_kv < n_q)
      n_kv = n_q + (int64_t) (rng_u32 () % 5);
    check_attention_case (1 + (int) (rng_u32 () % 3), dhs[rng_u32 () % 3],
        n_q, n_kv, causal);
  }
  check_attention_case (6, 64, 100, 300, 0);
  /* many queries with wk_attention_work's copies: several blocks of
   * queries per thread, causal, a width that is not a multiple of 8 */
  check_attention_case (6, 64, 200, 200, 1);
  check_attention_case (4, 72, 130, 150, 0);
  check_attention_case (6, 64, 1, 300, 0);
  check_attention_case (6, 64, 5, 40, 1);
  /* few queries over several 64-wide heads (read together: up to 6 heads
   * a pass in the AVX-512 kernel, which gives more to the AVX2 one), long
   * key runs (chunks), heads that do not divide evenly */
  check_attention_case (6, 64, 1, 1500, 0);
  check_attention_case (6, 64, 1, 130, 1);
  check_attention_case (8, 64, 2, 257, 0);
  check_attention_case (7, 64, 3, 129, 1);
  check_attention_case (13, 64, 1, 9, 0);
  check_attention_case (5, 64, 7, 300, 1);
  /* the AVX2 kernel's groups (at most 24 heads and 1536 columns a pass)
   * and a width of 64 + 8 */
  check_attention_case (26, 64, 2, 150, 1);
  check_attention_case (9, 256, 1, 100, 0);
  check_attention_case (3, 72, 1, 97, 0);
}

/* A step's beams share the cross-attention's keys and values (f16 on x86):
 * each of a few queries gets the bits of the query alone, on every kernel
 * set (kernels-avx512.c walks the keys chunk by chunk for all of them).
 * f32 keys hold it up to 3 queries: from 4 the AVX2 set takes them to the
 * many-query kernel (attention_block), whose sums go in another order.
 * The wasm set takes every 2 or more queries there (its cross keys are
 * f32: no F16C), so it is not held to this. */
static void
test_attention_queries_match_alone (void)
{
  static const int64_t dhs[] = { 64, 32 };
  static const int64_t nkvs[] = { 1500, 77 };
  int s, c, kv16;
  int64_t n_q, i;

  for (s = -1; s < n_simd_sets; s++) {
    if (s >= 0 && strcmp (simd_sets[s]->name, "wasm") == 0)
      continue;
    wk_kernels_set (s < 0 ? &wk_kernels_ref : simd_sets[s]);
    for (c = 0; c < 4; c++)
      for (kv16 = 0; kv16 < 2; kv16++) {
        const int nh = 6;
        const int64_t dh = dhs[c % 2], n_kv = nkvs[c / 2], d = nh * dh;
        float *Q = rand_floats (7 * d, 1.0f);
        float *K = rand_floats (n_kv * d, 1.0f);
        float *V = rand_floats (n_kv * d, 1.0f);
        uint16_t *K16 = malloc ((size_t) (n_kv * d) * sizeof (uint16_t));
        uint16_t *V16 = malloc ((size_t) (n_kv * d) * sizeof (uint16_t));
        float *On = malloc ((size_t) (7 * d) * sizeof (float));
        float *O1 = malloc ((size_t) d * sizeof (float));

        for (i = 0; i < n_kv * d; i++) {
          K16[i] = wk_fp32_to_fp16 (K[i]);
          V16[i] = wk_fp32_to_fp16 (V[i]);
        }
        for (n_q = 2; n_q < (kv16 ? 8 : 4); n_q++) {
          if (kv16)
            wk_attention_f16kv (NULL, nh, dh, n_q, n_kv, Q, d, K16, d, V16, d,
                0.125f, 0, On, d);
          else
            wk_attention (NULL, nh, dh, n_q, n_kv, Q, d, K, d, V, d, 0.125f,
                0, On, d);
          for (i = 0; i < n_q; i++) {
            if (kv16)
              wk_attention_f16kv (NULL, nh, dh, 1, n_kv, Q + i * d, d, K16, d,
                  V16, d, 0.125f, 0, O1, d);
            else
              wk_attention (NULL, nh, dh, 1, n_kv, Q + i * d, d, K, d, V, d,
                  0.125f, 0, O1, d);
            CHECK_MSG (memcmp (O1, On + i * d, (size_t) d * sizeof (float))
                == 0, "%s d_head=%ld n_kv=%ld %s n_q=%ld query %ld",
                s < 0 ? "ref" : simd_sets[s]->name, (long) dh, (long) n_kv,
                kv16 ? "f16" : "f32", (long) n_q, (long) i);
          }
        }
        free (Q);
        free (K);
        free (V);
        free (K16);
        free (V16);
        free (On);
        free (O1);
      }
  }
  wk_kernels_set (NULL);
}

/* The AVX-512 set computes the decoder's attention (a few queries, any
 * heads, f32 or f16 keys) in the AVX2 set's order, so that both decode
 * alike: with an unsure model a last-bit difference in the attention
 * turned into another greedy token after the decoder's int8 activations
 * (examples/data/sample.wav read differently with AVX-512 than with AVX2,
 * the reference kernels and wasm). Here every path the decoder takes
 * (the several-head kernel below 8 queries, the per-head ones from 8 on:
 * f16 keys one query at a time, f32 keys in blocks with a tail of 1-3)
 * gives both sets the same bits. Up to six heads the AVX-512 kernel is its
 * own (1, 4: the default model's, 6); beyond, it hands the heads to the
 * AVX2 kernel whole (12: that hand-off). */
static void
test_x86_attention_sets_agree (void)
{
  static const int64_t nqs[] = { 1, 2, 3, 4, 5, 7, 9, 15, 33, 35 };
  static const int64_t nkvs[] = { 1, 7, 77, 96, 97, 200, 1500 };
  static const int nhs[] = { 1, 4, 6, 12 };
  const wk_kernel_set *a = NULL, *b = NULL;
  int s, h, c, kv16, causal;
  size_t q, v;

  for (s = 0; s < n_simd_sets; s++) {
    if (strcmp (simd_sets[s]->name, "avx2") == 0)
      a = simd_sets[s];
    if (strcmp (simd_sets[s]->name, "avx512") == 0)
      b = simd_sets[s];
  }
  if (!a || !b) {
    printf ("# AVX2 and AVX-512 sets not both here: not compared\n");
    return;
  }
  for (h = 0; h < (int) (sizeof nhs / sizeof *nhs); h++)
    for (v = 0; v < sizeof nkvs / sizeof *nkvs; v++)
      for (q = 0; q < sizeof nqs / sizeof *nqs; q++)
        for (c = 0; c < 4; c++) {
          const int nh = nhs[h];
          const int64_t dh = 64, d = nh * dh, n_kv = nkvs[v], n_q = nqs[q];
          float *Q = rand_floats (n_q * d, 1.0f);
          float *K = rand_floats (n_kv * d, 1.0f);
          float *V = rand_floats (n_kv * d, 1.0f);
          uint16_t *K16 = malloc ((size_t) (n_kv * d) * sizeof (uint16_t));
          uint16_t *V16 = malloc ((size_t) (n_kv * d) * sizeof (uint16_t));
          float *O[2];
          int64_t i;
          int k;

          kv16 = c & 1;
          causal = c >> 1;
          for (i = 0; i < n_kv * d; i++) {
            K16[i] = wk_fp32_to_fp16 (K[i]);
            V16[i] = wk_fp32_to_fp16 (V[i]);
          }
          for (k = 0; k < 2; k++) {
            O[k] = malloc ((size_t) (n_q * d) * sizeof (float));
            wk_kernels_set (k ? b : a);
            if (kv16)
              wk_attention_f16kv (NULL, nh, dh, n_q, n_kv, Q, d, K16, d, V16,
                  d, 0.125f, causal, O[k], d);
            else
              wk_attention (NULL, nh, dh, n_q, n_kv, Q, d, K, d, V, d, 0.125f,
                  causal, O[k], d);
          }
          CHECK_MSG (memcmp (O[0], O[1], (size_t) (n_q * d) * sizeof (float))
              == 0, "avx2 and avx512 differ: %d heads, n_kv %ld, n_q %ld, "
              "%s keys%s", nh, (long) n_kv, (long) n_q, kv16 ? "f16" : "f32",
              causal ? ", causal" : "");
          free (Q);
          free (K);
          free (V);
          free (K16);
          free (V16);
          free (O[0]);
          free (O[1]);
        }
  wk_kernels_set (NULL);
}

static void
test_rows (void)
{
  static const int64_t lens[] = { 1, 7, 8, 9, 64, 384, 1001 };
  int s, c;

  for (c = 0; c < 7; c++) {
    int64_t n = lens[c], i;
    float *x = rand_floats (n, 6.0f);
    float *g = rand_floats (n, 1.0f), *b = rand_floats (n, 1.0f);
    float *y = malloc ((size_t) n * sizeof (float));
    float *r = malloc ((size_t) n * sizeof (float));

    for (s = -1; s < n_simd_sets; s++) {
      const wk_kernel_set *ks = s < 0 ? &wk_kernels_ref : simd_sets[s];
      double mean = 0.0, var = 0.0, mx = -INFINITY, sum = 0.0;
      int bad = 0;

      wk_kernels_set (ks);
      /* layer norm (in place) */
      memcpy (y, x, (size_t) n * sizeof (float));
      wk_layer_norm (NULL, y, 1, n, n, g, b, 1e-5f, y, n);
      for (i = 0; i < n; i++)
        mean += x[i];
      mean /= n;
      for (i = 0; i < n; i++)
        var += (x[i] - mean) * (x[i] - mean);
      var /= n;
      for (i = 0; i < n; i++) {
        double want = (x[i] - mean) / sqrt (var + 1e-5) * g[i] + b[i];
        if (!(fabs (y[i] - want) <= 1e-5 * (1.0 + fabs (want))) && bad++ < 3)
          CHECK_MSG (0, "%s layer_norm n=%ld [%ld] %g want %g", ks->name,
              (long) n, (long) i, y[i], want);
      }
      /* gelu */
      memcpy (y, x, (size_t) n * sizeof (float));
      wk_gelu (y, n);
      for (i = 0; i < n; i++) {
        double want = gelu_exact (x[i]);
        if (!(fabs (y[i] - want) <= 1e-6 * (1.0 + fabs (x[i]))) && bad++ < 3)
          CHECK_MSG (0, "%s gelu (%g) = %.9g want %.9g", ks->name, x[i], y[i],
              want);
      }
      /* softmax */
      memcpy (y, x, (size_t) n * sizeof (float));
      wk_softmax (y, n);
      for (i = 0; i < n; i++)
        mx = x[i] > mx ? x[i] : mx;
      for (i = 0; i < n; i++)
        sum += exp (x[i] - mx);
      for (i = 0; i < n; i++) {
        double want = exp (x[i] - mx) / sum;
        if (!(fabs (y[i] - want) <= 1e-6 * want + 1e-9) && bad++ < 3)
          CHECK_MSG (0, "%s softmax n=%ld [%ld] %g want %g", ks->name,
              (long) n, (long) i, y[i], want);
      }
      /* add */
      memcpy (y, x, (size_t) n * sizeof (float));
      wk_add (y, g, n);
      for (i = 0; i < n; i++)
        if (y[i] != x[i] + g[i] && bad++ < 3)
          CHECK_MSG (0, "%s add", ks->name);
    }
    wk_kernels_set (NULL);
    memcpy (r, x, (size_t) n * sizeof (float));
    CHECK (wk_argmax (r, n) >= 0);
    for (i = 0; i < n; i++)
      CHECK (r[i] <= r[wk_argmax (r, n)]);
    free (x);
    free (g);
    free (b);
    free (y);
    free (r);
  }
  {
    float t[4] = { 1, 3, 3, 2 };
    CHECK (wk_argmax (t, 4) == 1);
    CHECK (wk_argmax (t, 0) == -1);
  }
  {
    /* extreme values: softmax of huge spreads, gelu far out */
    float big[9] = { -1e30f, 0, 80, -80, 88, -100, 1e30f, -3, 3 };
    float g2[4] = { -10, 10, -1e4f, 1e4f };
    for (s = 0; s < n_simd_sets; s++) {
      float y[9];
      wk_kernels_set (simd_sets[s]);
      memcpy (y, big, sizeof y);
      wk_softmax (y, 9);
      CHECK (y[6] == 1.0f && y[0] == 0.0f);
      memcpy (y, g2, sizeof g2);
      wk_gelu (y, 4);
      CHECK (fabsf (y[0]) < 1e-6f && y[1] == 10.0f && fabsf (y[2]) < 1e-3f
          && y[3] == 1e4f);
    }
    wk_kernels_set (NULL);
  }
}

static void
check_conv_case (wk_type type, int64_t c_in, int64_t n_in, int64_t c_out,
    int stride, int time_major)
{
  /* W ne = {3, c_in, c_out}: the linear weight {3 c_in, c_out} */
  wk_tensor W = make_weight (type, 3 * c_in, c_out);
  int64_t n_out = (n_in - 1) / stride + 1, ldx, ldy = c_out + 1, t, j, c;
  float *X, *Y, *work, *bias = rand_floats (c_out, 0.5f), *w;
  size_t rb = wk_type_row_bytes (type, 3 * c_in);
  int bad = 0, p;

  W.n_dims = 3;
  W.ne[0] = 3;
  W.ne[1] = c_in;
  W.ne[2] = c_out;
  ldx = time_major ? c_in + 2 : n_in + 5;
  X = rand_floats ((time_major ? n_in : c_in) * ldx, 1.0f);
  Y = malloc ((size_t) (n_out * ldy) * sizeof (float));
  work = malloc ((size_t) wk_conv1d_k3_work_size (c_in, n_in, stride) *
      sizeof (float));
  w = malloc ((size_t) (3 * c_in) * sizeof (float));
  CHECK (wk_conv1d_k3_work_size (c_in, n_in, stride) == n_out * 3 * c_in);

  for (p = 0; p < n_pools; p++) {
    wk_conv1d_k3 (pools[p], &W, bias, X, c_in, n_in, ldx, time_major, stride,
        Y, ldy, WK_LINEAR_GELU, work);
    for (j = 0; j < c_out; j++) {
      wk_row_to_f32 (type, (const unsigned char *) W.data + j * rb, w,
          3 * c_in);
      for (t = 0; t < n_out; t++) {
        double acc = bias[j], mag = fabs (bias[j]);
        int u;
        for (c = 0; c < c_in; c++)
          for (u = 0; u < 3; u++) {
            int64_t s = stride * t + u - 1;
            double x;
            if (s < 0 || s >= n_in)
              continue;
            x = time_major ? X[s * ldx + c] : X[c * ldx + s];
            acc += x * w[c * 3 + u];
            mag += fabs (x * w[c * 3 + u]);
          }
        acc = gelu_exact (acc);
        if (!(fabs (Y[t * ldy + j] - acc) <= 2e-5 * mag + 2e-6) && bad++ < 3)
          CHECK_MSG (0, "conv %s c_in=%ld n_in=%ld stride=%d tm=%d "
              "Y[%ld][%ld] = %g want %g", wk_type_name (type), (long) c_in,
              (long) n_in, stride, time_major, (long) t, (long) j,
              Y[t * ldy + j], acc);
      }
    }
  }
  free ((void *) W.data);
  free (X);
  free (Y);
  free (work);
  free (bias);
  free (w);
}

static void
test_conv1d (void)
{
  check_conv_case (WK_TYPE_F32, 5, 20, 7, 1, 0);
  check_conv_case (WK_TYPE_F16, 5, 21, 7, 2, 0);
  check_conv_case (WK_TYPE_F16, 80, 100, 24, 1, 0);
  check_conv_case (WK_TYPE_F16, 24, 100, 24, 2, 1);
  check_conv_case (WK_TYPE_F32, 17, 9, 33, 2, 1);
  check_conv_case (WK_TYPE_F16, 1, 1, 1, 1, 1);
}

/* ---- pool ---- */

#ifndef __wasm__
typedef struct
{
  atomic_int calls[8];
  atomic_int nth_seen;
  int64_t data[8];
  int round;
} pool_ctx;

static void
pool_job (void *data, int ith, int nth)
{
  pool_ctx *c = data;
  atomic_fetch_add (&c->calls[ith], 1);
  atomic_store (&c->nth_seen, nth);
  c->data[ith] += c->round + ith;
}

static void
test_pool_many_short_jobs (void)
{
  int nt;
  for (nt = 1; nt <= 4; nt++) {
    wk_pool *pool = wk_pool_new (nt);
    pool_ctx *c = calloc (1, sizeof *c);
    int64_t want[8] = { 0 };
    int r, i;

    CHECK (pool != NULL);
    if (!pool)
      continue;
    CHECK (wk_pool_size (pool) == nt);
    for (r = 0; r < 20000; r++) {
      c->round = r;
      wk_pool_run (pool, pool_job, c);
      for (i = 0; i < nt; i++)
        want[i] += r + i;
      /* every worker finished this round before run returned */
      if (r % 997 == 0)
        for (i = 0; i < nt; i++)
          CHECK (c->data[i] == want[i]);
    }
    for (i = 0; i < nt; i++) {
      CHECK (atomic_load (&c->calls[i]) == 20000);
      CHECK (c->data[i] == want[i]);
    }
    for (; i < 8; i++)
      CHECK (atomic_load (&c->calls[i]) == 0);
    CHECK (atomic_load (&c->nth_seen) == nt);
    wk_pool_free (pool);
    free (c);
  }
}

static void
test_pool_null_and_default (void)
{
  pool_ctx c;
  wk_pool *pool;

  memset (&c, 0, sizeof c);
  wk_pool_run (NULL, pool_job, &c);
  CHECK (atomic_load (&c.calls[0]) == 1 && atomic_load (&c.nth_seen) == 1);
  CHECK (wk_pool_size (NULL) == 1);
  pool = wk_pool_new (0);
  CHECK (pool != NULL && wk_pool_size (pool) >= 1 && wk_pool_size (pool) <= 8);
  wk_pool_free (pool);
  wk_pool_free (NULL);
  /* create and destroy repeatedly (no leaked or stuck threads) */
  {
    int r;
    for (r = 0; r < 50; r++) {
      pool = wk_pool_new (3);
      if (r % 2)
        wk_pool_run (pool, pool_job, &c);
      wk_pool_free (pool);
    }
  }
}

/* Several callers at once on the process's shared workers (as streams on
 * one model are): every job of every caller runs each ith exactly once
 * and is complete when its run returns. */
typedef struct
{
  int n_threads;
  int ok;
} shared_caller;

static void *
shared_caller_main (void *data)
{
  shared_caller *sc = data;
  wk_pool *pool = wk_pool_new_shared (sc->n_threads);
  pool_ctx *c = calloc (1, sizeof *c);
  int64_t want[8] = { 0 };
  int r, i, nt;

  sc->ok = pool != NULL && c != NULL;
  if (!sc->ok)
    goto done;
  nt = wk_pool_size (pool);
  sc->ok = nt == sc->n_threads;
  for (r = 0; r < 5000 && sc->ok; r++) {
    c->round = r;
    wk_pool_run (pool, pool_job, c);
    for (i = 0; i < nt; i++) {
      want[i] += r + i;
      if (c->data[i] != want[i])
        sc->ok = 0;
    }
  }
  for (i = 0; i < nt; i++)
    if (atomic_load (&c->calls[i]) != 5000)
      sc->ok = 0;
  for (; i < 8; i++)
    if (atomic_load (&c->calls[i]) != 0)
      sc->ok = 0;
done:
  wk_pool_free (pool);
  free (c);
  return NULL;
}

static void
test_pool_shared_many_callers (void)
{
  pthread_t th[6];
  shared_caller sc[6];
  int i, round;

  /* twice: the shared workers end with their last handle and start again */
  for (round = 0; round < 2; round++) {
    for (i = 0; i < 6; i++) {
      sc[i].n_threads = 1 + i % 4;
      sc[i].ok = 0;
      CHECK (pthread_create (&th[i], NULL, shared_caller_main, &sc[i]) == 0);
    }
    for (i = 0; i < 6; i++) {
      pthread_join (th[i], NULL);
      CHECK_MSG (sc[i].ok, "caller %d (%d threads) saw a job run wrong", i,
          sc[i].n_threads);
    }
  }
}

#endif /* __wasm__ */

static void
test_dispatch (void)
{
  const char *name = wk_kernels_name ();
  const char *env = getenv ("WK_KERNELS");
  CHECK (name != NULL);
  CHECK (strcmp (name, "ref") == 0 || strcmp (name, "avx2") == 0
      || strcmp (name, "avx2vnni") == 0
      || strcmp (name, "avx512") == 0 || strcmp (name, "wasm") == 0
      || strcmp (name, "wasm-avx2") == 0);
  if (env && strcmp (env, "ref") == 0)
    CHECK (strcmp (name, "ref") == 0);
  else if (!env && n_simd_sets > 0)
    CHECK (strcmp (name, simd_sets[n_simd_sets - 1]->name) == 0);
  printf ("# kernels in use: %s\n", name);
}

int
main (void)
{
  int i;

  find_simd_sets ();
  pools[n_pools++] = NULL;
  for (i = 2; i <= 4; i++)
    if ((pools[n_pools] = wk_pool_new (i)) != NULL)
      n_pools++;

  RUN (test_dispatch);
#ifndef __wasm__
  /* the WebAssembly engine has one thread: no pool to test */
  RUN (test_pool_many_short_jobs);
  RUN (test_pool_null_and_default);
  RUN (test_pool_shared_many_callers);
#endif
  RUN (test_get_row);
  RUN (test_quantize_act_bits);
  RUN (test_linear_random_shapes);
  RUN (test_linear_model_shapes);
  RUN (test_linear_f16_special_values);
  RUN (test_linear_nonfinite_block_scales);
  RUN (test_linear_extreme_blocks);
  RUN (test_linear_is_deterministic_across_threads);
  RUN (test_gemv_is_deterministic_across_threads);
  RUN (test_few_rows_match_one_row);
  RUN (test_linear_work);
  RUN (test_linear_q_extremes);
  RUN (test_linear_work_is_deterministic_across_threads);
  RUN (test_linear_work_reuse_x);
  RUN (test_linear_batch_matches_alone);
  RUN (test_gemm_f32);
  RUN (test_attention);
  RUN (test_attention_queries_match_alone);
  RUN (test_x86_attention_sets_agree);
  RUN (test_attention_f16kv_special);
  RUN (test_attention_halves_match_f16kv);
  RUN (test_f32_to_f16);
  RUN (test_f16_rounding_all_inputs);
  RUN (test_f16_to_f32_all_halves);
  RUN (test_argmax_matches_scalar);
  RUN (test_find_gt_top_k);
  RUN (test_rows);
  RUN (test_conv1d);

  for (i = 1; i < n_pools; i++)
    wk_pool_free (pools[i]);
  return TEST_EXIT ();
}
