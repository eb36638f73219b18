/* libFuzzer target: the tiktoken rank reader behind the converter's
 * --vocab FILE.tiktoken. A file that parses has ranks 0 .. n-1, each with
 * its bytes (base64-decoded, so at most 3/4 of the line). */
#include <stdint.h>
#include <stdlib.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  wk_hf_vocab v;
  char err[256];
  /* a small limit as well as Whisper's, so "too many ranks" is reached */
  int32_t max = size > 0 && (data[0] & 1) ? 50257 : 16;

  if (wk_tiktoken_parse ((const char *) data, size, max, &v, err,
          sizeof err) == WK_OK) {
    volatile uint8_t sink = 0;
    if (v.n < 1 || v.n > max)
      abort ();
    for (int32_t i = 0; i < v.n; i++) {
      if (!v.tokens[i] || v.lens[i] > size)
        abort ();
      if (v.lens[i])
        sink ^= (uint8_t) v.tokens[i][v.lens[i] - 1];
    }
    (void) sink;
    wk_hf_vocab_clear (&v);
  } else if (v.n != 0 || v.tokens || v.lens) {
    abort ();                   /* a failure leaves nothing behind */
  }
  return 0;
}
