/* libFuzzer target: the whisper.cpp .bin reader on arbitrary bytes; what
 * it accepts is dequantized (first row) and touched end to end. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-bin.h"

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  wk_ggml_bin *b = NULL;
  char err[256];
  volatile uint8_t sink = 0;

  if (wk_ggml_bin_open_memory (data, size, &b, err, sizeof err) != WK_OK)
    return 0;
  for (int32_t i = 0; i < b->n_tokens; i++)
    if (b->token_lens[i])
      sink ^= (uint8_t) b->tokens[i][b->token_lens[i] - 1];
  if (b->n_mel > 0 && b->n_fft > 0)
    sink ^= (uint8_t) (b->mel_filters[(size_t) b->n_mel * b->n_fft - 1] > 0);
  for (int64_t i = 0; i < b->n_tensors; i++) {
    const wk_ggml_tensor *t = &b->tensors[i];
    const uint8_t *p = t->data;
    float row[256];
    if (wk_ggml_bin_find (b, t->name) != t)
      abort ();
    sink ^= p[0] ^ p[t->nbytes - 1];
    if (t->ne[0] <= 256)
      wk_ggml_row_to_f32 (t->type, p, row, t->ne[0]);
  }
  (void) sink;
  wk_ggml_bin_free (b);
  return 0;
}
