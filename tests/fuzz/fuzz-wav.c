/* libFuzzer target for the WAV reader: any input is parsed without a
 * crash, leak or undefined behaviour, and a success is consistent. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "wav.h"

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  wk_wav wav;
  char err[256];

  if (wk_wav_parse (data, size, &wav, err, sizeof err) == WK_OK) {
    volatile float sink = 0.0f;
    size_t i;
    if (!wav.samples || wav.n_samples > size || wav.channels <= 0
        || wav.rate <= 0)
      abort ();
    for (i = 0; i < wav.n_samples; i++)
      sink += wav.samples[i];
    (void) sink;
  }
  wk_wav_clear (&wav);
  return 0;
}
