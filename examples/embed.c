/* wk-embed-example: the smallest program embedding the whisperknot engine.
 *
 *   wk-embed-example FILE.wav [MODEL.knot]
 *
 * Reads a 16 kHz WAV file, feeds it to a stream as if it arrived live (a
 * tenth of a second at a time) and prints each segment when the engine
 * completes it. Only engine/whisperknot.h is needed; tools/wav.h reads
 * the file.
 */
#include <stdio.h>

#include "whisperknot.h"
#include "wav.h"

/* Prints the segments completed since the last call. The array and its
 * strings belong to the stream and stay valid only until the next
 * wk_stream_* call, so they are used right away. */
static void
print_segments (wk_stream * stream)
{
  const wk_segment *segs;
  size_t n = wk_stream_take (stream, &segs);

  for (size_t i = 0; i < n; i++)
    printf ("[%7.2f --> %7.2f] %s\n",
        (double) segs[i].start / WK_SAMPLE_RATE,
        (double) segs[i].end / WK_SAMPLE_RATE, segs[i].text);
  fflush (stdout);
}

int
main (int argc, char **argv)
{
  const char *model_path;
  wk_model_params mp = wk_model_default_params ();
  wk_stream_params sp = wk_stream_default_params ();
  char err[512];
  wk_wav wav = { 0 };
  wk_model *model = NULL;
  wk_stream *stream = NULL;
  int rc = 1;

  if (argc < 2 || argc > 3) {
    fprintf (stderr, "usage: %s FILE.wav [MODEL.knot]\n", argv[0]);
    return 2;
  }
  model_path = argc > 2 ? argv[2] : wk_default_model_path ();

  if (wk_wav_read (argv[1], &wav, err, sizeof err) != WK_OK) {
    /* wk_wav_read's messages name the file already */
    fprintf (stderr, "%s\n", err);
    return 1;
  }
  if (wav.rate != WK_SAMPLE_RATE) {
    fprintf (stderr, "%s: %d Hz, need %d Hz\n", argv[1], wav.rate,
        WK_SAMPLE_RATE);
    goto out;
  }

  /* The model is mapped read-only and shared by every stream (and by any
   * other load of the same file in this process). */
  if (wk_model_load (model_path, &mp, &model, err, sizeof err) != WK_OK) {
    fprintf (stderr, "%s\n", err);
    goto out;
  }

  /* A stream allocates everything it needs here; feeding never does. */
  if (wk_stream_new (model, &sp, &stream, err, sizeof err) != WK_OK) {
    fprintf (stderr, "%s\n", err);
    goto out;
  }

  for (size_t pos = 0; pos < wav.n_samples; pos += WK_SAMPLE_RATE / 10) {
    size_t n = wav.n_samples - pos;
    if (n > WK_SAMPLE_RATE / 10)
      n = WK_SAMPLE_RATE / 10;
    if (wk_stream_feed (stream, wav.samples + pos, n) != WK_OK)
      goto out;
    print_segments (stream);
  }
  /* End of audio: transcribe what is left. */
  if (wk_stream_finish (stream) != WK_OK)
    goto out;
  print_segments (stream);
  rc = 0;

out:
  if (stream)
    wk_stream_free (stream);
  if (model)
    wk_model_unref (model);
  wk_wav_clear (&wav);
  return rc;
}
