/* libFuzzer target: the knot loader on arbitrary bytes. A file that
 * validates must be safe to use: every tensor's data range is touched
 * (ASan sees the exact input buffer) and every getter exercised. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "knot.h"

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  wk_knot *k = NULL;
  char err[256];
  volatile uint8_t sink = 0;

  if (wk_knot_open_memory (data, size, &k, err, sizeof err) != WK_OK)
    return 0;
  for (int64_t i = 0; i < wk_knot_n_tensors (k); i++) {
    const wk_tensor *t = wk_knot_tensor_at (k, i);
    const uint8_t *p = t->data;
    float row[64];

    if (wk_knot_find (k, t->name) != t)
      abort ();
    sink ^= p[0] ^ p[t->nbytes - 1];
    /* dequantize the start of the first row when it is short enough */
    if (t->ne[0] <= 64 && ((uintptr_t) p % 4) == 0)
      wk_row_to_f32 (t->type, p, row, t->ne[0]);
  }
  {
    uint32_t u;
    float f, arr[16];
    const char *s;
    size_t len, n;
    wk_knot_get_u32 (k, "general.alignment", &u);
    wk_knot_get_u32 (k, "whisper.n_mels", &u);
    wk_knot_get_f32 (k, "whisper.x", &f);
    wk_knot_get_str (k, "general.architecture", &s, &len);
    if (wk_knot_get_arr_len (k, "whisper.mel_filters", &n))
      wk_knot_copy_f32_arr (k, "whisper.mel_filters", arr, n < 16 ? n : 16);
    if (wk_knot_get_arr_len (k, "tokenizer.ggml.tokens", &n) && n > 0) {
      for (size_t i = 0; i < n && i < 64; i++)
        if (wk_knot_get_str_at (k, "tokenizer.ggml.tokens", i, &s, &len)
            && len)
          sink ^= (uint8_t) s[len - 1];
      wk_knot_get_str_at (k, "tokenizer.ggml.tokens", n - 1, &s, &len);
    }
  }
  (void) sink;
  wk_knot_close (k);
  return 0;
}
