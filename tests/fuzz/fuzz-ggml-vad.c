/* libFuzzer target: the converter's reader of Silero VAD's ggml file on
 * arbitrary bytes. A model it accepts must become a knot in memory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-vad.h"

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  wk_ggml_vad *v = NULL;
  wk_knot_writer *w;
  char err[256];
  void *out = NULL;
  size_t out_size = 0;

  err[0] = '\0';
  if (wk_ggml_vad_parse (data, size, &v, err, sizeof err) != WK_OK) {
    if (v != NULL || err[0] == '\0')
      abort ();
    return 0;
  }
  w = wk_knot_writer_new (64);
  if (!w || wk_ggml_vad_to_knot (v, "fuzz", w, err, sizeof err) != WK_OK
      || wk_knot_writer_write_memory (w, &out, &out_size, err,
          sizeof err) != WK_OK)
    abort ();
  free (out);
  wk_knot_writer_free (w);
  wk_ggml_vad_free (v);
  return 0;
}
