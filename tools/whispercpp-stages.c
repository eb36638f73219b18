/* wk-whispercpp-stages: times whisper.cpp's stages with the same protocol
 * as whisperknot-bench times ours, so the two can be compared line by line.
 *
 * This file is NOT part of the meson build: it includes whisper.cpp's
 * public C header and links its static libraries. tools/whispercpp-build.sh
 * compiles it against a whisper.cpp checkout the user supplies; nothing of
 * whisper.cpp is committed here.
 *
 *   wk-whispercpp-stages -m MODEL.bin -a AUDIO.f32 -t THREADS -r RUNS \
 *       [-p PAST] [-s STEPS] [-e]
 *
 * AUDIO.f32 is raw native-endian float32 mono 16 kHz samples (whisperknot-
 * bench writes it from the WAV). The first 30 s of it (zero-padded) is the
 * window. After one untimed warm-up, each run prints, on stdout:
 *
 *   WKB mel_ms X        whisper_pcm_to_mel on the 30 s window
 *   WKB encoder_ms X    whisper_encode at offset 0 (conv + encoder + the
 *                       cross-attention keys/values)
 *   WKB decstep_ms X    mean wall time of STEPS one-token whisper_decode
 *                       calls at n_past = PAST .. PAST+STEPS-1 (the KV cache
 *                       is first filled with PAST tokens in one call)
 *
 * and once "WKB load_ms X". With -e, each run is instead one whisper_full
 * over the whole audio (greedy, the library's other defaults, as
 * whisper-cli -bs 1 -bo 1), printed as
 *
 *   WKB full_ms X       wall time of whisper_full
 *   WKB text T          the segments' text, joined (last run only)
 *
 * The same program is built for WebAssembly by tools/whispercpp-wasm-
 * build.sh (then run by Node.js). Logging from whisper.cpp is silenced.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "whisper.h"

#define SAMPLE_RATE 16000
#define WINDOW_SAMPLES (30 * SAMPLE_RATE)

static double
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void
quiet_log (enum ggml_log_level level, const char *text, void *user_data)
{
  (void) level;
  (void) text;
  (void) user_data;
}

static float *
read_f32 (const char *path, size_t *n_out)
{
  FILE *f = fopen (path, "rb");
  float *buf = NULL;
  long size;

  if (f == NULL)
    return NULL;
  if (fseek (f, 0, SEEK_END) != 0 || (size = ftell (f)) < 0
      || fseek (f, 0, SEEK_SET) != 0)
    goto fail;
  buf = malloc ((size_t) size + sizeof (float));
  if (buf == NULL)
    goto fail;
  if (fread (buf, 1, (size_t) size, f) != (size_t) size)
    goto fail;
  fclose (f);
  *n_out = (size_t) size / sizeof (float);
  return buf;

fail:
  free (buf);
  fclose (f);
  return NULL;
}

static int
int_arg (const char *s, int min, int max, int *out)
{
  char *end;
  long v;

  errno = 0;
  v = strtol (s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max)
    return -1;
  *out = (int) v;
  return 0;
}

static void
usage (void)
{
  fprintf (stderr, "usage: wk-whispercpp-stages -m MODEL.bin -a AUDIO.f32 "
      "[-t THREADS] [-r RUNS] [-p PAST] [-s STEPS] [-e]\n");
}

int
main (int argc, char **argv)
{
  const char *model_path = NULL, *audio_path = NULL;
  int n_threads = 2, n_runs = 5, n_past = 96, n_steps = 32, full = 0;
  struct whisper_context_params cparams;
  struct whisper_context *ctx;
  whisper_token *tokens;
  float *audio, *window;
  size_t n_audio = 0;
  double t0;
  int i, r, n_text_ctx, n_vocab;

  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    int bad = 0;

    if (strcmp (a, "-e") == 0) {
      full = 1;
      continue;
    }
    if (i + 1 >= argc) {
      usage ();
      return 2;
    }
    if (strcmp (a, "-m") == 0)
      model_path = argv[++i];
    else if (strcmp (a, "-a") == 0)
      audio_path = argv[++i];
    else if (strcmp (a, "-t") == 0)
      bad = int_arg (argv[++i], 1, 1024, &n_threads);
    else if (strcmp (a, "-r") == 0)
      bad = int_arg (argv[++i], 1, 100000, &n_runs);
    else if (strcmp (a, "-p") == 0)
      bad = int_arg (argv[++i], 1, 100000, &n_past);
    else if (strcmp (a, "-s") == 0)
      bad = int_arg (argv[++i], 1, 100000, &n_steps);
    else
      bad = 1;
    if (bad) {
      usage ();
      return 2;
    }
  }
  if (model_path == NULL || audio_path == NULL) {
    usage ();
    return 2;
  }

  audio = read_f32 (audio_path, &n_audio);
  if (audio == NULL) {
    fprintf (stderr, "wk-whispercpp-stages: cannot read %s\n", audio_path);
    return 1;
  }
  window = calloc (WINDOW_SAMPLES, sizeof (float));
  if (window == NULL)
    return 1;
  memcpy (window, audio,
      (n_audio < WINDOW_SAMPLES ? n_audio : WINDOW_SAMPLES) * sizeof (float));

  whisper_log_set (quiet_log, NULL);
  cparams = whisper_context_default_params ();
  cparams.use_gpu = false;
  t0 = now_ms ();
  ctx = whisper_init_from_file_with_params (model_path, cparams);
  if (ctx == NULL) {
    fprintf (stderr, "wk-whispercpp-stages: whisper.cpp cannot load %s\n",
        model_path);
    return 1;
  }
  printf ("WKB load_ms %.3f\n", now_ms () - t0);

  if (full) {
    struct whisper_full_params fp =
        whisper_full_default_params (WHISPER_SAMPLING_GREEDY);

    fp.n_threads = n_threads;
    fp.print_progress = false;
    fp.print_realtime = false;
    fp.print_timestamps = false;
    fp.print_special = false;
    for (r = 0; r < n_runs; r++) {
      t0 = now_ms ();
      if (whisper_full (ctx, fp, audio, (int) n_audio) != 0)
        goto failed;
      printf ("WKB full_ms %.3f\n", now_ms () - t0);
      fflush (stdout);
    }
    printf ("WKB text");
    for (i = 0; i < whisper_full_n_segments (ctx); i++)
      printf ("%s", whisper_full_get_segment_text (ctx, i));
    printf ("\n");
    whisper_free (ctx);
    free (window);
    free (audio);
    return 0;
  }

  n_text_ctx = whisper_n_text_ctx (ctx);
  n_vocab = whisper_n_vocab (ctx);
  if (n_past + n_steps > n_text_ctx) {
    fprintf (stderr, "wk-whispercpp-stages: PAST + STEPS must be <= %d\n",
        n_text_ctx);
    return 2;
  }
  /* Plausible text tokens: the values do not change the work done. */
  tokens = malloc ((size_t) (n_past + n_steps) * sizeof *tokens);
  if (tokens == NULL)
    return 1;
  tokens[0] = whisper_token_sot (ctx);
  for (i = 1; i < n_past + n_steps; i++)
    tokens[i] = (whisper_token) ((i * 7919) % (n_vocab < 50000 ? n_vocab :
            50000));

  /* Run 0 is the warm-up and is not printed. */
  for (r = 0; r <= n_runs; r++) {
    double mel, enc, dec;

    t0 = now_ms ();
    if (whisper_pcm_to_mel (ctx, window, WINDOW_SAMPLES, n_threads) != 0)
      goto failed;
    mel = now_ms () - t0;

    t0 = now_ms ();
    if (whisper_encode (ctx, 0, n_threads) != 0)
      goto failed;
    enc = now_ms () - t0;

    if (whisper_decode (ctx, tokens, n_past, 0, n_threads) != 0)
      goto failed;
    t0 = now_ms ();
    for (i = 0; i < n_steps; i++)
      if (whisper_decode (ctx, tokens + n_past + i, 1, n_past + i,
              n_threads) != 0)
        goto failed;
    dec = (now_ms () - t0) / n_steps;

    if (r > 0) {
      printf ("WKB mel_ms %.3f\n", mel);
      printf ("WKB encoder_ms %.3f\n", enc);
      printf ("WKB decstep_ms %.3f\n", dec);
      fflush (stdout);
    }
  }

  whisper_free (ctx);
  free (tokens);
  free (window);
  free (audio);
  return 0;

failed:
  fprintf (stderr, "wk-whispercpp-stages: a whisper.cpp call failed\n");
  return 1;
}
