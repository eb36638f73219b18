/* Tensor element types and block layouts shared by the loader, the
 * converter and the kernels. The numeric values and block layouts are
 * ggml's, so knots (GGUF) and whisper.cpp .bin files describe tensors the
 * same way. */
#ifndef WK_TYPES_H
#define WK_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "whisperknot.h"

typedef enum
{
  WK_TYPE_F32 = 0,
  WK_TYPE_F16 = 1,
  WK_TYPE_Q4_0 = 2,
  WK_TYPE_Q8_0 = 8,
} wk_type;

#define WK_QK 32                /* weights per q4_0 / q8_0 block */

/* q8_0: x[i] = d * qs[i] */
typedef struct
{
  uint16_t d;                   /* f16 scale */
  int8_t qs[WK_QK];
} wk_block_q8_0;
_Static_assert (sizeof (wk_block_q8_0) == 34, "q8_0 block is 34 bytes");

/* q4_0: x[i] = d * ((nibble i) - 8); low nibbles of qs hold elements
 * 0..15, high nibbles elements 16..31 (ggml's order). */
typedef struct
{
  uint16_t d;                   /* f16 scale */
  uint8_t qs[WK_QK / 2];
} wk_block_q4_0;
_Static_assert (sizeof (wk_block_q4_0) == 18, "q4_0 block is 18 bytes");

#define WK_MAX_DIMS 4

/* A tensor inside a mapped file (or any memory). ne[0] is the contiguous
 * dimension (ggml order): a PyTorch Linear weight [out][in] has ne[0] = in,
 * ne[1] = out. Unused dimensions are 1. */
typedef struct
{
  const char *name;
  wk_type type;
  int n_dims;
  int64_t ne[WK_MAX_DIMS];
  const void *data;
  size_t nbytes;
} wk_tensor;

/* Name of a type ("f32", "f16", "q8_0", "q4_0") or NULL if unknown. */
const char *wk_type_name (int type);
/* Parses a type name; returns -1 if unknown. */
int wk_type_from_name (const char *name);
/* 1 for the four types above, 0 otherwise. */
int wk_type_is_known (int type);
/* Elements per block (1 for f32/f16) and bytes per block. */
int64_t wk_type_block_elems (wk_type type);
size_t wk_type_block_bytes (wk_type type);
/* Bytes of a row of n elements, or 0 when n is not a whole number of
 * blocks. */
size_t wk_type_row_bytes (wk_type type, int64_t n);

/* IEEE half <-> single, exact (round to nearest even). */
float wk_fp16_to_fp32 (uint16_t h);
uint16_t wk_fp32_to_fp16 (float f);

/* Reference (de)quantizers; n must be a multiple of WK_QK. These define
 * the bits the converter writes. */
void wk_quantize_row_q8_0 (const float *x, wk_block_q8_0 * y, int64_t n);
void wk_quantize_row_q4_0 (const float *x, wk_block_q4_0 * y, int64_t n);
/* The same q4_0 format with each block's scale chosen to minimise the
 * block's squared error (ggml's rule above takes the largest magnitude
 * / -8); slower, for converters. */
void wk_quantize_row_q4_0_fit (const float *x, wk_block_q4_0 * y, int64_t n);
void wk_dequantize_row_q8_0 (const wk_block_q8_0 * x, float *y, int64_t n);
void wk_dequantize_row_q4_0 (const wk_block_q4_0 * x, float *y, int64_t n);

/* Any type -> f32 for one row of n elements. */
void wk_row_to_f32 (wk_type type, const void *row, float *y, int64_t n);

#endif
