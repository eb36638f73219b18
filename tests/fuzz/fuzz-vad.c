/* libFuzzer target: the Silero VAD model loader (a knot: knot.c's reader,
 * then vad.c's checks of keys, shapes and values) on arbitrary bytes. A
 * model it accepts must run: a few chunks made from the input go through
 * the network and the segmenter. Seeds: tests/fuzz/make-seeds.py. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vad.h"

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  wk_vad_model *m = NULL;
  wk_vad *v = NULL;
  char err[256];
  float pcm[3 * WK_VAD_CHUNK + 100];
  wk_vad_event ev;

  if (wk_vad_model_load_memory (data, size, &m, err, sizeof err) != WK_OK) {
    if (m != NULL || err[0] == '\0')
      abort ();
    return 0;
  }
  if (wk_vad_new (m, NULL, &v, err, sizeof err) != WK_OK)
    abort ();
  for (size_t i = 0; i < sizeof pcm / sizeof *pcm; i++)
    pcm[i] = (float) data[i % size] / 128.0f - 1.0f;
  for (size_t off = 0; off < sizeof pcm / sizeof *pcm;) {
    off += wk_vad_feed (v, pcm + off, sizeof pcm / sizeof *pcm - off);
    while (wk_vad_pop_event (v, &ev))
      if (ev.sample < 0 || ev.sample > wk_vad_position (v))
        abort ();
  }
  wk_vad_finish (v);
  while (wk_vad_pop_event (v, &ev)) {
  }
  wk_vad_free (v);
  wk_vad_model_unref (m);
  return 0;
}
