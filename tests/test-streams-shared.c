/* Many streams on one model in one process: each stream's text, times and
 * tokens are those it gets alone, whatever runs beside it. Streams share
 * the process's workers and (when they are ready together) passes over
 * the weights; none of that may change a result.
 *
 * usage: test-streams-shared MODEL.knot AUDIO.wav... (the default model
 * and real speech: a trained model gives real text, a random one
 * arbitrary but equally deterministic tokens).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wav.h"
#include "whisperknot.h"
#include "wk-test.h"

#define MAX_AUDIO 4
#define MAX_SEGS 256
#define PIECE (WK_SAMPLE_RATE / 10)     /* fed in 100 ms pieces */

typedef struct
{
  int n;
  int64_t start[MAX_SEGS], end[MAX_SEGS];
  int n_tokens[MAX_SEGS];
  char text[MAX_SEGS][256];
} results;

typedef struct
{
  wk_model *model;
  const wk_wav *audio;
  int latency_ms;               /* 0: offline windows */
  int beam_size;                /* 0: the engine's */
  int n_threads;
  results r;
  int64_t n_steps, n_shared_steps;      /* wk_stream_stats */
  wk_status status;
  pthread_t thread;
} stream_run;

static wk_model *model;
static wk_wav audio[MAX_AUDIO];
static int n_audio;

static void
collect (wk_stream * s, results * r)
{
  const wk_segment *segs;
  size_t n = wk_stream_take (s, &segs), i;

  for (i = 0; i < n && r->n < MAX_SEGS; i++, r->n++) {
    r->start[r->n] = segs[i].start;
    r->end[r->n] = segs[i].end;
    r->n_tokens[r->n] = segs[i].n_tokens;
    snprintf (r->text[r->n], sizeof r->text[0], "%s", segs[i].text);
  }
}

static void *
run_stream (void *data)
{
  stream_run *run = data;
  wk_stream_params p = wk_stream_default_params ();
  wk_stream *s = NULL;
  size_t off;

  p.language = "en";
  p.latency_ms = run->latency_ms;
  p.beam_size = run->beam_size;
  p.n_threads = run->n_threads;
  memset (&run->r, 0, sizeof run->r);
  run->status = wk_stream_new (run->model, &p, &s, NULL, 0);
  if (run->status != WK_OK)
    return NULL;
  for (off = 0; off < run->audio->n_samples && run->status == WK_OK;
      off += PIECE) {
    size_t n = run->audio->n_samples - off;
    run->status = wk_stream_feed (s, run->audio->samples + off,
        n < PIECE ? n : PIECE);
    collect (s, &run->r);
  }
  if (run->status == WK_OK)
    run->status = wk_stream_finish (s);
  collect (s, &run->r);
  {
    wk_stream_stats st;
    wk_stream_get_stats (s, &st);
    run->n_steps = st.n_tokens;
    run->n_shared_steps = st.n_shared_steps;
  }
  wk_stream_free (s);
  return NULL;
}

static int
same_results (const results * a, const results * b)
{
  int i;

  if (a->n != b->n)
    return 0;
  for (i = 0; i < a->n; i++)
    if (a->start[i] != b->start[i] || a->end[i] != b->end[i]
        || a->n_tokens[i] != b->n_tokens[i]
        || strcmp (a->text[i], b->text[i]) != 0)
      return 0;
  return 1;
}

/* The kinds of stream run side by side: offline and live, greedy and
 * beam search, one thread and two. */
static const struct
{
  int latency_ms, beam_size, n_threads;
} kinds[] = {
  {0, 1, 1},
  {1000, 0, 2},
  {1000, 1, 1},
  {0, 0, 2},
};

#define N_KINDS ((int) (sizeof kinds / sizeof kinds[0]))

static void
setup_run (stream_run * run, int kind, int a)
{
  memset (run, 0, sizeof *run);
  run->model = model;
  run->audio = &audio[a];
  run->latency_ms = kinds[kind].latency_ms;
  run->beam_size = kinds[kind].beam_size;
  run->n_threads = kinds[kind].n_threads;
}

/* Every kind on every file at once (a stream each), against each alone. */
static void
test_streams_together_give_what_each_gives_alone (void)
{
  stream_run alone[N_KINDS * MAX_AUDIO], together[N_KINDS * MAX_AUDIO];
  int k, a, i, n = 0;

  for (k = 0; k < N_KINDS; k++)
    for (a = 0; a < n_audio; a++, n++) {
      setup_run (&alone[n], k, a);
      run_stream (&alone[n]);
      CHECK_MSG (alone[n].status == WK_OK, "alone %d: %s", n,
          wk_status_str (alone[n].status));
      CHECK_MSG (alone[n].r.n > 0, "alone %d: no text", n);
      setup_run (&together[n], k, a);
    }
  for (i = 0; i < n; i++)
    CHECK (pthread_create (&together[i].thread, NULL, run_stream,
            &together[i]) == 0);
  for (i = 0; i < n; i++) {
    pthread_join (together[i].thread, NULL);
    CHECK_MSG (together[i].status == WK_OK, "stream %d: %s", i,
        wk_status_str (together[i].status));
    CHECK_MSG (same_results (&alone[i].r, &together[i].r), "stream %d "
        "(latency %d, beam %d, %d threads): %d segments beside the others, "
        "%d alone; first: \"%s\" / \"%s\"", i, together[i].latency_ms,
        together[i].beam_size, together[i].n_threads, together[i].r.n,
        alone[i].r.n, together[i].r.n ? together[i].r.text[0] : "",
        alone[i].r.n ? alone[i].r.text[0] : "");
  }
}

/* Many streams of one kind on one file: the most alike their timing can
 * be, so the most often ready together. */
static void
test_identical_streams_stay_identical (void)
{
  stream_run alone, together[6];
  int64_t shared = 0, steps = 0;
  int i;

  setup_run (&alone, 2, 0);
  run_stream (&alone);
  CHECK (alone.status == WK_OK);
  for (i = 0; i < 6; i++) {
    setup_run (&together[i], 2, 0);
    CHECK (pthread_create (&together[i].thread, NULL, run_stream,
            &together[i]) == 0);
  }
  for (i = 0; i < 6; i++) {
    pthread_join (together[i].thread, NULL);
    CHECK (together[i].status == WK_OK);
    CHECK_MSG (same_results (&alone.r, &together[i].r), "stream %d: %d "
        "segments, alone %d", i, together[i].r.n, alone.r.n);
    shared += together[i].n_shared_steps;
    steps += together[i].n_steps;
  }
  /* what this test is for: six streams for seconds share some steps */
  CHECK (alone.n_shared_steps == 0);
  printf ("# %lld of %lld decoder steps shared a pass with another "
      "stream's\n", (long long) shared, (long long) steps);
  CHECK_MSG (shared > 0, "no decoder step ran together with another's");
}

int
main (int argc, char **argv)
{
  char err[512];
  int i;

  if (argc < 3 || argc - 2 > MAX_AUDIO) {
    fprintf (stderr, "usage: %s MODEL.knot AUDIO.wav...\n", argv[0]);
    return 2;
  }
  if (wk_model_load (argv[1], NULL, &model, err, sizeof err) != WK_OK) {
    fprintf (stderr, "%s\n", err);
    return 1;
  }
  for (i = 2; i < argc; i++) {
    if (wk_wav_read (argv[i], &audio[n_audio], err, sizeof err) != WK_OK) {
      fprintf (stderr, "%s\n", err);
      return 1;
    }
    n_audio++;
  }
  RUN (test_streams_together_give_what_each_gives_alone);
  RUN (test_identical_streams_stay_identical);
  for (i = 0; i < n_audio; i++)
    wk_wav_clear (&audio[i]);
  wk_model_unref (model);
  return TEST_EXIT ();
}
