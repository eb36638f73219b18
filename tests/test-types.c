/* Tensor types: exact fp16 conversion and the reference quantizers'
 * bits (ggml's rounding rules, block layouts, nibble order). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "wk-types.h"
#include "wk-test.h"

static float
f32_from_bits (uint32_t u)
{
  float f;
  memcpy (&f, &u, 4);
  return f;
}

static uint32_t
bits_from_f32 (float f)
{
  uint32_t u;
  memcpy (&u, &f, 4);
  return u;
}

/* Independent oracle: the half nearest to f (ties to even mantissa),
 * found by bisection over the ordered positive halves in double. */
static uint16_t
oracle_fp16 (float f)
{
  double a = fabs ((double) f);
  uint16_t sign = signbit (f) ? 0x8000 : 0;
  int lo = 0, hi = 0x7bff;

  if (isnan (f))
    return 0x7e00;
  if (a >= 65520.0)
    return sign | 0x7c00;
  /* largest half <= a */
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if ((double) wk_fp16_to_fp32 ((uint16_t) mid) <= a)
      lo = mid;
    else
      hi = mid - 1;
  }
  if (lo < 0x7bff) {
    double dl = a - (double) wk_fp16_to_fp32 ((uint16_t) lo);
    double du = (double) wk_fp16_to_fp32 ((uint16_t) (lo + 1)) - a;
    if (du < dl || (du == dl && (lo & 1)))
      lo++;
  }
  return sign | (uint16_t) lo;
}

static void
test_fp16_every_half_round_trips (void)
{
  int bad = 0;

  for (uint32_t h = 0; h < 65536; h++) {
    float f = wk_fp16_to_fp32 ((uint16_t) h);
    uint16_t back = wk_fp32_to_fp16 (f);
    if (back != h && bad++ < 5)
      CHECK_MSG (back == h, "0x%04x -> %g -> 0x%04x", h, f, back);
  }
  CHECK (bad == 0);
}

static void
test_fp16_to_fp32_values (void)
{
  CHECK (wk_fp16_to_fp32 (0x3c00) == 1.0f);
  CHECK (wk_fp16_to_fp32 (0xc000) == -2.0f);
  CHECK (wk_fp16_to_fp32 (0x7bff) == 65504.0f);
  CHECK (wk_fp16_to_fp32 (0x0001) == 0x1p-24f);
  CHECK (wk_fp16_to_fp32 (0x03ff) == 1023 * 0x1p-24f);
  CHECK (wk_fp16_to_fp32 (0x0400) == 0x1p-14f);
  CHECK (isinf (wk_fp16_to_fp32 (0x7c00)));
  CHECK (isnan (wk_fp16_to_fp32 (0x7e00)));
  CHECK (bits_from_f32 (wk_fp16_to_fp32 (0x8000)) == 0x80000000u);
}

static void
test_fp32_to_fp16_rounding (void)
{
  CHECK (wk_fp32_to_fp16 (1.0f) == 0x3c00);
  CHECK (wk_fp32_to_fp16 (65504.0f) == 0x7bff);
  CHECK (wk_fp32_to_fp16 (65519.996f) == 0x7bff);
  CHECK (wk_fp32_to_fp16 (65520.0f) == 0x7c00); /* tie goes to even: inf */
  CHECK (wk_fp32_to_fp16 (1e10f) == 0x7c00);
  CHECK (wk_fp32_to_fp16 (-INFINITY) == 0xfc00);
  CHECK ((wk_fp32_to_fp16 (NAN) & 0x7fff) > 0x7c00);
  CHECK (wk_fp32_to_fp16 (0x1p-25f) == 0x0000); /* tie to even: 0 */
  CHECK (wk_fp32_to_fp16 (0x1.000002p-25f) == 0x0001);
  CHECK (wk_fp32_to_fp16 (0x3p-25f) == 0x0002); /* 1.5 ulp: tie -> 2 */
  CHECK (wk_fp32_to_fp16 (0x1p-26f) == 0x0000);
  CHECK (wk_fp32_to_fp16 (-0x1p-30f) == 0x8000);
  /* 1 + 2^-11 is halfway between 1 and 1 + 2^-10: even is 1 */
  CHECK (wk_fp32_to_fp16 (1.0f + 0x1p-11f) == 0x3c00);
  CHECK (wk_fp32_to_fp16 (1.0f + 0x3p-11f) == 0x3c02);
  CHECK (wk_fp32_to_fp16 (1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);
  /* largest subnormal rounding up into the smallest normal */
  CHECK (wk_fp32_to_fp16 (0x1p-14f - 0x1p-26f) == 0x0400);

  /* a stride over all float bit patterns against the oracle */
  {
    int bad = 0;
    for (uint64_t u = 0; u < 0x100000000ull; u += 2039) {
      float f = f32_from_bits ((uint32_t) u);
      uint16_t got, want;
      if (isnan (f))
        continue;
      got = wk_fp32_to_fp16 (f);
      want = oracle_fp16 (f);
      if (got != want && bad++ < 5)
        CHECK_MSG (got == want, "%a -> 0x%04x, oracle 0x%04x", f, got, want);
    }
    CHECK (bad == 0);
  }
}

static void
test_type_table (void)
{
  CHECK (strcmp (wk_type_name (WK_TYPE_Q8_0), "q8_0") == 0);
  CHECK (wk_type_from_name ("q4_0") == WK_TYPE_Q4_0);
  CHECK (wk_type_from_name ("f16") == WK_TYPE_F16);
  CHECK (wk_type_from_name ("q5_0") == -1);
  CHECK (wk_type_name (3) == NULL);
  CHECK (!wk_type_is_known (7));
  CHECK (wk_type_is_known (0) && wk_type_is_known (1) && wk_type_is_known (2)
      && wk_type_is_known (8));
  CHECK (wk_type_block_elems (WK_TYPE_Q4_0) == 32);
  CHECK (wk_type_block_bytes (WK_TYPE_Q4_0) == 18);
  CHECK (wk_type_block_bytes (WK_TYPE_Q8_0) == 34);
  CHECK (wk_type_row_bytes (WK_TYPE_F32, 10) == 40);
  CHECK (wk_type_row_bytes (WK_TYPE_F16, 3) == 6);
  CHECK (wk_type_row_bytes (WK_TYPE_Q8_0, 64) == 68);
  CHECK (wk_type_row_bytes (WK_TYPE_Q4_0, 384) == 12 * 18);
  CHECK (wk_type_row_bytes (WK_TYPE_Q8_0, 33) == 0);
  CHECK (wk_type_row_bytes (WK_TYPE_F32, 0) == 0);
  CHECK (wk_type_row_bytes (WK_TYPE_F32, INT64_MAX) == 0);
  CHECK (wk_type_row_bytes ((wk_type) 5, 32) == 0);
}

static void
test_q8_0_reference_bits (void)
{
  float x[64], y[64];
  wk_block_q8_0 b[2];

  /* block 0: -16..15, amax 16 */
  for (int j = 0; j < 32; j++)
    x[j] = (float) (j - 16);
  /* block 1: amax 127 so d = 1 exactly; halves round away from zero */
  for (int j = 0; j < 32; j++)
    x[32 + j] = 0.0f;
  x[32] = 127.0f;
  x[33] = 2.5f;
  x[34] = -2.5f;
  x[35] = 0.49f;
  x[36] = -126.5f;
  wk_quantize_row_q8_0 (x, b, 64);

  CHECK (b[0].d == wk_fp32_to_fp16 (16.0f / 127.0f));
  CHECK (b[0].qs[0] == -127);
  CHECK (b[0].qs[16] == 0);
  CHECK (b[0].qs[31] == 119);   /* 15 * 127/16 = 119.06 */
  CHECK (b[0].qs[24] == 64);    /* 8 * 7.9375 = 63.5 -> 64 */
  CHECK (b[1].d == 0x3c00);
  CHECK (b[1].qs[0] == 127);
  CHECK (b[1].qs[1] == 3);
  CHECK (b[1].qs[2] == -3);
  CHECK (b[1].qs[3] == 0);
  CHECK (b[1].qs[4] == -127);

  wk_dequantize_row_q8_0 (b, y, 64);
  CHECK (y[33] == 3.0f);
  CHECK (y[0] == -127.0f * wk_fp16_to_fp32 (b[0].d));

  /* all-zero block: d = 0, codes 0, no NaN */
  memset (x, 0, sizeof x);
  wk_quantize_row_q8_0 (x, b, 32);
  CHECK (b[0].d == 0);
  wk_dequantize_row_q8_0 (b, y, 32);
  CHECK (y[5] == 0.0f);
}

static void
test_q4_0_reference_bits (void)
{
  float x[32], y[32];
  wk_block_q4_0 b;

  memset (x, 0, sizeof x);
  x[0] = 8.0f;                  /* largest magnitude, positive: d = -1 */
  x[1] = -8.0f;
  x[2] = 3.0f;
  x[3] = -3.0f;
  x[4] = 2.5f;
  x[16] = 1.0f;
  x[17] = -7.9f;
  wk_quantize_row_q4_0 (x, &b, 32);

  CHECK (b.d == wk_fp32_to_fp16 (-1.0f));
  /* q = min(15, trunc(x * id + 8.5)), id = -1 */
  CHECK ((b.qs[0] & 0x0f) == 0);        /* -8 + 8.5 = 0.5 -> 0 */
  CHECK ((b.qs[1] & 0x0f) == 15);       /* 16.5 -> 16 -> 15 */
  CHECK ((b.qs[2] & 0x0f) == 5);        /* 5.5 */
  CHECK ((b.qs[3] & 0x0f) == 11);       /* 11.5 */
  CHECK ((b.qs[4] & 0x0f) == 6);        /* 6.0 */
  CHECK ((b.qs[5] & 0x0f) == 8);
  /* elements 16.. live in the high nibbles */
  CHECK ((b.qs[0] >> 4) == 7);  /* 7.5 */
  CHECK ((b.qs[1] >> 4) == 16 - 1);     /* 7.9 + 8.5 = 16.4 -> 15 */
  CHECK ((b.qs[2] >> 4) == 8);

  wk_dequantize_row_q4_0 (&b, y, 32);
  CHECK (y[0] == 8.0f);
  CHECK (y[2] == 3.0f);
  CHECK (y[16] == 1.0f);
  CHECK (y[1] == -7.0f);        /* clipped code 15 -> (15 - 8) * -1 */

  /* the largest magnitude negative: d positive */
  memset (x, 0, sizeof x);
  x[9] = -4.0f;
  wk_quantize_row_q4_0 (x, &b, 32);
  CHECK (b.d == wk_fp32_to_fp16 (0.5f));
  CHECK ((b.qs[9] & 0x0f) == 0);        /* -8 + 8.5 */
  CHECK ((b.qs[0] & 0x0f) == 8);

  memset (x, 0, sizeof x);
  wk_quantize_row_q4_0 (x, &b, 32);
  CHECK ((b.d & 0x7fff) == 0);  /* 0 / -8 is -0, as in ggml */
  CHECK (b.qs[7] == 0x88);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double
rnd (void)
{
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double) (z >> 11) * 0x1p-53;
}

static void
test_quantizer_error_bounds (void)
{
  enum
  { N = 32 * 64 };
  static float x[N], y[N];
  static wk_block_q8_0 b8[N / 32];
  static wk_block_q4_0 b4[N / 32];
  int bad8 = 0, bad4 = 0;

  for (int i = 0; i < N; i++)
    x[i] = (float) ((rnd () - 0.5) * 0.2 * (1 + i % 7));
  wk_quantize_row_q8_0 (x, b8, N);
  wk_dequantize_row_q8_0 (b8, y, N);
  for (int i = 0; i < N; i++) {
    float d = wk_fp16_to_fp32 (b8[i / 32].d);
    /* half a step, plus the f16 rounding of d times the largest code */
    if (fabsf (x[i] - y[i]) > 0.5f * d + 127.0f * d * 0x1p-11f)
      bad8++;
  }
  CHECK (bad8 == 0);

  wk_quantize_row_q4_0 (x, b4, N);
  wk_row_to_f32 (WK_TYPE_Q4_0, b4, y, N);
  for (int i = 0; i < N; i++) {
    float d = fabsf (wk_fp16_to_fp32 (b4[i / 32].d));
    if (fabsf (x[i] - y[i]) > d * (1.0f + 8.0f * 0x1p-11f))
      bad4++;
  }
  CHECK (bad4 == 0);

  /* non-finite inputs must not be undefined behaviour */
  x[3] = NAN;
  x[40] = INFINITY;
  wk_quantize_row_q8_0 (x, b8, N);
  wk_quantize_row_q4_0 (x, b4, N);
}

/* The fitted q4_0 scales: the same format, never much worse than ggml's
 * rule on any block (both round their scale to f16) and better overall,
 * with Gaussian weights as trained matrices have. */
static void
test_q4_0_fit (void)
{
  enum
  { N = 32 * 256 };
  static float x[N], yg[N], yf[N];
  static wk_block_q4_0 bg[N / 32], bf[N / 32];
  double eg = 0.0, ef = 0.0;
  int worse = 0;

  for (int i = 0; i < N; i += 2) {
    /* Box-Muller, a scale per block */
    double r = sqrt (-2.0 * log (1.0 - rnd ())), t = 6.283185307179586 * rnd ();
    double s = 0.01 * (1 + (i / 32) % 5);
    x[i] = (float) (s * r * cos (t));
    x[i + 1] = (float) (s * r * sin (t));
  }
  wk_quantize_row_q4_0 (x, bg, N);
  wk_quantize_row_q4_0_fit (x, bf, N);
  wk_dequantize_row_q4_0 (bg, yg, N);
  wk_dequantize_row_q4_0 (bf, yf, N);
  for (int b = 0; b < N / 32; b++) {
    double g = 0.0, f = 0.0;
    for (int j = b * 32; j < b * 32 + 32; j++) {
      g += (double) (x[j] - yg[j]) * (x[j] - yg[j]);
      f += (double) (x[j] - yf[j]) * (x[j] - yf[j]);
    }
    if (f > g * 1.001)
      worse++;
    eg += g;
    ef += f;
  }
  CHECK (worse == 0);
  CHECK (ef < 0.97 * eg);

  /* all zeros: ggml's block (d = -0, every code 8) */
  memset (x, 0, 32 * sizeof x[0]);
  wk_quantize_row_q4_0_fit (x, bf, 32);
  wk_quantize_row_q4_0 (x, bg, 32);
  CHECK (memcmp (&bf[0], &bg[0], sizeof bf[0]) == 0);
  /* non-finite values: defined behaviour, ggml's rule for the block */
  x[3] = NAN;
  x[40 % 32] = 1.0f;
  wk_quantize_row_q4_0_fit (x, bf, 32);
  x[3] = INFINITY;
  wk_quantize_row_q4_0_fit (x, bf, 32);
  wk_quantize_row_q4_0 (x, bg, 32);
  CHECK (memcmp (&bf[0], &bg[0], sizeof bf[0]) == 0);
}

static void
test_row_to_f32 (void)
{
  uint16_t h[4] = { 0x3c00, 0xc000, 0x3800, 0x0000 };
  float y[4], f[3] = { 1.5f, -2.0f, 3.25f }, g[3];

  wk_row_to_f32 (WK_TYPE_F16, h, y, 4);
  CHECK (y[0] == 1.0f && y[1] == -2.0f && y[2] == 0.5f && y[3] == 0.0f);
  wk_row_to_f32 (WK_TYPE_F32, f, g, 3);
  CHECK (memcmp (f, g, sizeof f) == 0);
}

int
main (void)
{
  RUN (test_fp16_every_half_round_trips);
  RUN (test_fp16_to_fp32_values);
  RUN (test_fp32_to_fp16_rounding);
  RUN (test_type_table);
  RUN (test_q8_0_reference_bits);
  RUN (test_q4_0_reference_bits);
  RUN (test_quantizer_error_bounds);
  RUN (test_q4_0_fit);
  RUN (test_row_to_f32);
  return TEST_EXIT ();
}
