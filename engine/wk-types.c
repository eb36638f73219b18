/* Tensor types: names, block sizes, IEEE half conversion and the reference
 * q8_0 / q4_0 quantizers. The quantizers reproduce ggml's reference
 * rounding so a knot written by our converter holds the same bits as
 * ggml's own quantizer would produce for finite inputs. */
#include "wk-types.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

const char *
wk_type_name (int type)
{
  switch (type) {
    case WK_TYPE_F32:
      return "f32";
    case WK_TYPE_F16:
      return "f16";
    case WK_TYPE_Q4_0:
      return "q4_0";
    case WK_TYPE_Q8_0:
      return "q8_0";
    default:
      return NULL;
  }
}

int
wk_type_from_name (const char *name)
{
  static const int all[] = { WK_TYPE_F32, WK_TYPE_F16, WK_TYPE_Q4_0,
    WK_TYPE_Q8_0
  };
  size_t i;

  if (!name)
    return -1;
  for (i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp (name, wk_type_name (all[i])) == 0)
      return all[i];
  return -1;
}

int
wk_type_is_known (int type)
{
  return wk_type_name (type) != NULL;
}

int64_t
wk_type_block_elems (wk_type type)
{
  switch (type) {
    case WK_TYPE_F32:
    case WK_TYPE_F16:
      return 1;
    case WK_TYPE_Q4_0:
    case WK_TYPE_Q8_0:
      return WK_QK;
    default:
      return 0;
  }
}

size_t
wk_type_block_bytes (wk_type type)
{
  switch (type) {
    case WK_TYPE_F32:
      return 4;
    case WK_TYPE_F16:
      return 2;
    case WK_TYPE_Q4_0:
      return sizeof (wk_block_q4_0);
    case WK_TYPE_Q8_0:
      return sizeof (wk_block_q8_0);
    default:
      return 0;
  }
}

size_t
wk_type_row_bytes (wk_type type, int64_t n)
{
  int64_t be = wk_type_block_elems (type);
  size_t bb = wk_type_block_bytes (type);
  uint64_t blocks;

  if (be <= 0 || n <= 0 || n % be != 0)
    return 0;
  blocks = (uint64_t) (n / be);
  /* 0 on overflow as well: callers treat it as "not representable" */
  if (blocks > SIZE_MAX / bb)
    return 0;
  return ((size_t) blocks) * bb;
}

/* ---- IEEE binary16 ------------------------------------------------------ */

static inline uint32_t
f32_bits (float f)
{
  uint32_t u;
  memcpy (&u, &f, sizeof u);
  return u;
}

static inline float
bits_f32 (uint32_t u)
{
  float f;
  memcpy (&f, &u, sizeof f);
  return f;
}

float
wk_fp16_to_fp32 (uint16_t h)
{
  uint32_t sign = (uint32_t) (h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;

  if (exp == 0x1f)              /* inf / NaN: keep the payload */
    return bits_f32 (sign | 0x7f800000 | (mant << 13));
  if (exp != 0)                 /* normal: rebias 15 -> 127 */
    return bits_f32 (sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0)
    return bits_f32 (sign);
  /* subnormal: mant * 2^-24 is exact in f32 */
  {
    float v = (float) mant * 0x1p-24f;
    return bits_f32 (sign | f32_bits (v));
  }
}

uint16_t
wk_fp32_to_fp16 (float f)
{
  uint32_t x = f32_bits (f);
  uint16_t sign = (uint16_t) ((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7fffffff;
  uint32_t e = ax >> 23;
  uint32_t mant = ax & 0x7fffff;

  if (e == 0xff) {
    if (mant == 0)
      return sign | 0x7c00;
    /* NaN: keep the top payload bits, never let it become infinity */
    {
      uint16_t m = (uint16_t) (mant >> 13);
      return sign | 0x7c00 | (m ? m : 0x200);
    }
  }
  if (e >= 143)                 /* >= 2^16: overflows to infinity */
    return sign | 0x7c00;
  if (e >= 113) {               /* normal half */
    uint32_t h = ((e - 112) << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fff;
    /* round to nearest even; a carry may reach infinity, as it should */
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
      h++;
    return sign | (uint16_t) h;
  }
  if (e < 102)                  /* below 2^-25: rounds to zero */
    return sign;
  {
    /* subnormal half: value / 2^-24 = m * 2^(e - 126) */
    uint32_t m = mant | 0x800000;
    uint32_t shift = 126 - e;   /* 14 .. 24 */
    uint32_t h = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1)))
      h++;
    return sign | (uint16_t) h;
  }
}

/* ---- reference quantizers ---------------------------------------------- */

void
wk_quantize_row_q8_0 (const float *x, wk_block_q8_0 * y, int64_t n)
{
  int64_t nb = n / WK_QK;

  for (int64_t i = 0; i < nb; i++) {
    const float *xb = x + i * WK_QK;
    float amax = 0.0f;

    for (int j = 0; j < WK_QK; j++) {
      float a = fabsf (xb[j]);
      if (a > amax)
        amax = a;
    }
    {
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;

      y[i].d = wk_fp32_to_fp16 (d);
      for (int j = 0; j < WK_QK; j++) {
        float q = roundf (xb[j] * id);
        /* finite inputs give |q| <= 127; the guards only keep NaN/inf
         * inputs from being undefined behaviour in the cast */
        if (!(q >= -127.0f))
          q = q != q ? 0.0f : -127.0f;
        if (q > 127.0f)
          q = 127.0f;
        y[i].qs[j] = (int8_t) q;
      }
    }
  }
}

void
wk_quantize_row_q4_0 (const float *x, wk_block_q4_0 * y, int64_t n)
{
  int64_t nb = n / WK_QK;

  for (int64_t i = 0; i < nb; i++) {
    const float *xb = x + i * WK_QK;
    float amax = 0.0f, vmax = 0.0f;

    /* the signed value of largest magnitude (first one on ties) */
    for (int j = 0; j < WK_QK; j++) {
      float a = fabsf (xb[j]);
      if (amax < a) {
        amax = a;
        vmax = xb[j];
      }
    }
    {
      const float d = vmax / -8.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;

      y[i].d = wk_fp32_to_fp16 (d);
      for (int j = 0; j < WK_QK / 2; j++) {
        /* two statements so no compiler fuses them into an FMA */
        float x0 = xb[j] * id;
        float x1 = xb[WK_QK / 2 + j] * id;
        float v0 = x0 + 8.5f;
        float v1 = x1 + 8.5f;
        int q0, q1;

        /* finite inputs give v in [0.5, 16.5]: truncation then min(15) is
         * ggml's rounding; the guards only tame NaN/inf */
        if (!(v0 >= 0.0f))
          v0 = 0.0f;
        if (!(v1 >= 0.0f))
          v1 = 0.0f;
        q0 = v0 >= 15.0f ? 15 : (int) v0;
        q1 = v1 >= 15.0f ? 15 : (int) v1;
        y[i].qs[j] = (uint8_t) (q0 | (q1 << 4));
      }
    }
  }
}

/* Levels -8..7 for one block at scale d (nearest, clamped); returns the
 * squared error of d * level against x. */
static double
q4_levels (const float *x, float d, int8_t * l)
{
  double err = 0.0;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;

  for (int j = 0; j < WK_QK; j++) {
    float v = floorf (x[j] * id + 0.5f);
    double e;

    /* NaN goes to -8; its error is NaN, which no candidate keeps */
    l[j] = (int8_t) (v >= 7.0f ? 7 : v >= -8.0f ? v : -8);
    e = (double) x[j] - (double) d *l[j];
    err += e * e;
  }
  return err;
}

void
wk_quantize_row_q4_0_fit (const float *x, wk_block_q4_0 * y, int64_t n)
{
  int64_t nb = n / WK_QK;

  for (int64_t i = 0; i < nb; i++) {
    const float *xb = x + i * WK_QK;
    float amax = 0.0f, vmax = 0.0f, best_d = 0.0f;
    double best = INFINITY;
    int8_t l[WK_QK], best_l[WK_QK];

    for (int j = 0; j < WK_QK; j++) {
      float a = fabsf (xb[j]);
      if (amax < a) {
        amax = a;
        vmax = xb[j];
      }
    }
    memset (best_l, 0, sizeof best_l);
    /* vmax / -8 is ggml's scale (the largest value on the extra level
     * -8); scales around it trade clipping the largest value for finer
     * steps for the rest */
    for (int k = -12; amax > 0.0f && isfinite (amax) && k <= 12; k++) {
      float d0 = vmax / (-8.0f + 0.1f * (float) k), d;
      double sxl = 0.0, sll = 0.0, err;

      q4_levels (xb, d0, l);
      for (int j = 0; j < WK_QK; j++) {
        sxl += (double) xb[j] * l[j];
        sll += (double) l[j] * l[j];
      }
      if (sll == 0.0)
        continue;
      /* the least-squares scale for these levels, as stored (f16), and
       * the nearest levels at that scale */
      d = wk_fp16_to_fp32 (wk_fp32_to_fp16 ((float) (sxl / sll)));
      err = q4_levels (xb, d, l);
      if (err < best) {
        best = err;
        best_d = d;
        memcpy (best_l, l, sizeof l);
      }
    }
    if (best == INFINITY) {
      /* all zero or not finite: ggml's rule */
      wk_quantize_row_q4_0 (xb, &y[i], WK_QK);
      continue;
    }
    y[i].d = wk_fp32_to_fp16 (best_d);
    for (int j = 0; j < WK_QK / 2; j++)
      y[i].qs[j] = (uint8_t) ((best_l[j] + 8) | ((best_l[WK_QK / 2 + j] + 8)
              << 4));
  }
}

void
wk_dequantize_row_q8_0 (const wk_block_q8_0 * x, float *y, int64_t n)
{
  int64_t nb = n / WK_QK;

  for (int64_t i = 0; i < nb; i++) {
    const float d = wk_fp16_to_fp32 (x[i].d);
    for (int j = 0; j < WK_QK; j++)
      y[i * WK_QK + j] = (float) x[i].qs[j] * d;
  }
}

void
wk_dequantize_row_q4_0 (const wk_block_q4_0 * x, float *y, int64_t n)
{
  int64_t nb = n / WK_QK;

  for (int64_t i = 0; i < nb; i++) {
    const float d = wk_fp16_to_fp32 (x[i].d);
    for (int j = 0; j < WK_QK / 2; j++) {
      int lo = (x[i].qs[j] & 0x0f) - 8;
      int hi = (x[i].qs[j] >> 4) - 8;
      y[i * WK_QK + j] = ((float) lo) * d;
      y[i * WK_QK + WK_QK / 2 + j] = ((float) hi) * d;
    }
  }
}

void
wk_row_to_f32 (wk_type type, const void *row, float *y, int64_t n)
{
  switch (type) {
    case WK_TYPE_F32:
      memcpy (y, row, (size_t) n * sizeof (float));
      break;
    case WK_TYPE_F16:{
      const uint8_t *p = row;
      for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy (&h, p + 2 * i, 2);
        y[i] = wk_fp16_to_fp32 (h);
      }
      break;
    }
    case WK_TYPE_Q8_0:
      wk_dequantize_row_q8_0 (row, y, n);
      break;
    case WK_TYPE_Q4_0:
      wk_dequantize_row_q4_0 (row, y, n);
      break;
    default:
      /* unknown types never get past the loaders */
      memset (y, 0, (size_t) n * sizeof (float));
      break;
  }
}
