/* Weight tensors made from generated float rows, for the kernel tests
 * (tests/test-kernels.c) and the kernel benchmark (bench-kernels.c). */
#ifndef WK_WEIGHT_H
#define WK_WEIGHT_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wk-types.h"

/* Writes the k values of row j into row. */
typedef void (*wk_weight_row_fn) (float *row, int64_t k, int64_t j, void *user);

/* An m x k weight ("w", ne = {k, m}) of the given type whose row j is
 * fill's row j stored in that type (data malloc'ed: free W.data). */
static inline wk_tensor
wk_weight_make (wk_type type, int64_t k, int64_t m, wk_weight_row_fn fill,
    void *user)
{
  wk_tensor W;
  size_t rb = wk_type_row_bytes (type, k);
  unsigned char *data = malloc (rb * (size_t) m);
  float *row = malloc ((size_t) k * sizeof (float));
  int64_t j, l;

  for (j = 0; j < m; j++) {
    fill (row, k, j, user);
    switch (type) {
      case WK_TYPE_F32:
        memcpy (data + j * rb, row, rb);
        break;
      case WK_TYPE_F16:
        for (l = 0; l < k; l++) {
          uint16_t h = wk_fp32_to_fp16 (row[l]);
          memcpy (data + j * rb + 2 * l, &h, 2);
        }
        break;
      case WK_TYPE_Q8_0:
        wk_quantize_row_q8_0 (row, (wk_block_q8_0 *) (data + j * rb), k);
        break;
      case WK_TYPE_Q4_0:
        wk_quantize_row_q4_0 (row, (wk_block_q4_0 *) (data + j * rb), k);
        break;
    }
  }
  free (row);
  memset (&W, 0, sizeof W);
  W.name = "w";
  W.type = type;
  W.n_dims = 2;
  W.ne[0] = k;
  W.ne[1] = m;
  W.ne[2] = W.ne[3] = 1;
  W.data = data;
  W.nbytes = rb * (size_t) m;
  return W;
}

#endif /* WK_WEIGHT_H */
