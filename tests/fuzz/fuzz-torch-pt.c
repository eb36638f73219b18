/* libFuzzer target: the PyTorch .pt reader (knots/torch-pt.c), the zip
 * directory and the pickle machine. Every tensor it accepts must lie
 * inside the input; each is read whole. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "torch-pt.h"

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  char err[256];
  wk_torch_pt *pt = NULL;
  volatile uint8_t sink = 0;
  int64_t v;

  if (wk_torch_pt_open_memory (data, size, &pt, err, sizeof err) != WK_OK) {
    if (pt)
      abort ();
    return 0;
  }
  for (int64_t i = 0; i < pt->n_tensors; i++) {
    const wk_st_tensor *t = &pt->tensors[i];
    const uint8_t *p = t->data;
    float f[8];
    size_t n = t->nbytes / (t->dtype == WK_ST_F32 ? 4 : 2);
    if (p < data || t->nbytes > size || (size_t) (p - data) > size - t->nbytes
        || !t->name)
      abort ();
    for (size_t k = 0; k < t->nbytes; k++)
      sink ^= p[k];
    wk_st_to_f32 (t->dtype, p, f, n < 8 ? n : 8);
  }
  for (int i = 0; i < pt->n_dims; i++)
    if (!wk_torch_pt_dim (pt, pt->dim_names[i], &v))
      abort ();
  wk_torch_pt_free (pt);
  (void) sink;
  return 0;
}
