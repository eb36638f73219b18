/* The live policy (wk_stream_params.latency_ms > 0) on a random-weight
 * model: mechanics, not text (random weights produce arbitrary tokens).
 *
 *  - silence and low noise (10 minutes each, faster than real time): no
 *    text, no partial, the model never runs; CPU per minute printed;
 *  - jfk.wav in 20 ms pieces: runs happen, partial results appear,
 *    committed words only ever come after earlier ones, every utterance
 *    ends with an utterance_end marker, no allocation while feeding;
 *  - an hour of mostly silence with speech every five minutes: memory
 *    constant (state_bytes), no allocation, bounded runs;
 *  - a scripted ideal recognizer in place of the model: LocalAgreement-2
 *    commits every word once, in order, with its times, within two steps
 *    of its end, after showing it as a partial; the window stays short;
 *    words heard again at a window's start are not committed twice;
 *  - the feed queue (wk_queue): marks in place, sample formats, stops;
 *    the agreement policy gives the same cues whether jfk.wav comes in
 *    20 ms feeds or through the queue in whatever feeds it queued;
 *  - finish in the middle of a word commits the tail; reset in the middle
 *    of an utterance forgets everything; parameters are checked; latency
 *    0 keeps the offline behaviour (no partials, no markers).
 *
 * The model comes from $WK_MAKE_TEST_MODEL (vocabulary from
 * $WK_SHARED_DATA) converted with $WK_CONVERT; the VAD is the shipped
 * Silero model.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "group.h"
#include "live.h"
#include "results.h"
#include "model.h"
#include "wav.h"
#include "whisperknot.h"
#include "wk-test.h"
#include "wk-test-model.h"
#include "wk-time.h"

/* ---- fixtures ---------------------------------------------------------- */

#define SR WK_SAMPLE_RATE
#define PIECE 320               /* 20 ms */

static char tmpdir[256];
static char small_knot[512];
static wk_model *model;
static float *jfk;
static size_t jfk_n;

static wk_stream_params
live_params (int latency_ms)
{
  wk_stream_params p = wk_stream_default_params ();
  p.n_threads = 2;
  p.temperature_inc = 0.0f;     /* random weights would always fall back */
  p.beam_size = 1;              /* greedy: random weights decode to the
                                 * token limit, a beam would triple that */
  p.latency_ms = latency_ms;
  /* the random test model's knot has no whisperknot.live_audio_ctx, so
   * it would get the full context; the runs here are about the policy */
  p.audio_ctx = WK_AUDIO_CTX_SHORT;
  return p;
}

static wk_stream *
new_stream (const wk_stream_params * p)
{
  wk_stream *s = NULL;
  char err[256];
  wk_status st = wk_stream_new (model, p, &s, err, sizeof err);
  CHECK_MSG (st == WK_OK, "%s", err);
  return s;
}

/* What a caller sees: committed words and markers, partial updates. */
typedef struct
{
  int n_words, n_markers, n_partial_updates, max_partial;
  int64_t last_start, last_end;
  bool marker_last;             /* the last thing taken was a marker */
  bool order_ok, words_ok, partial_ok;
  bool settled_ok;              /* nothing before wk_stream_settled */
  int64_t settled;
  int64_t fed;                  /* by feed_pieces */
  int64_t max_lag;              /* of settled behind fed */
  char text[8192];
  size_t text_len;
  uint64_t serial;
} seen;

static void
seen_init (seen * v)
{
  memset (v, 0, sizeof *v);
  v->order_ok = v->words_ok = v->partial_ok = v->settled_ok = true;
}

static void
collect (wk_stream * s, seen * v)
{
  const wk_segment *segs;
  size_t n = wk_stream_take (s, &segs), i;
  uint64_t serial;
  size_t np;

  for (i = 0; i < n; i++) {
    const wk_segment *g = &segs[i];
    if (g->start < v->settled) {
      if (v->settled_ok)
        fprintf (stderr, "# settled: %lld-%lld '%s' before %lld\n",
            (long long) g->start, (long long) g->end, g->text,
            (long long) v->settled);
      v->settled_ok = false;
    }
    if (g->start < v->last_start || g->end < g->start) {
      if (v->order_ok)
        fprintf (stderr, "# order: %lld-%lld after %lld-%lld '%s'\n",
            (long long) g->start, (long long) g->end,
            (long long) v->last_start, (long long) v->last_end, g->text);
      v->order_ok = false;
    }
    if (g->utterance_end) {
      if (g->text[0] || g->n_tokens != 0 || g->start != g->end)
        v->words_ok = false;
      v->n_markers++;
      v->marker_last = true;
    } else {
      size_t tl = strlen (g->text);
      int k;
      if (g->n_tokens < 1 || g->stability != 1.0f)
        v->words_ok = false;
      for (k = 0; k < g->n_tokens; k++)
        if (g->tokens[k].start < g->start || g->tokens[k].end > g->end)
          v->words_ok = false;
      if (v->text_len + tl < sizeof v->text) {
        memcpy (v->text + v->text_len, g->text, tl + 1);
        v->text_len += tl;
      }
      v->n_words++;
      v->marker_last = false;
    }
    v->last_start = g->start;
    v->last_end = g->end;
  }
  np = wk_stream_partial (s, &segs, &serial);
  if (serial != v->serial) {
    v->serial = serial;
    if (np > 0)
      v->n_partial_updates++;
  }
  if ((int) np > v->max_partial)
    v->max_partial = (int) np;
  for (i = 0; i < np; i++) {
    /* partial words follow the committed ones and are not final */
    if (segs[i].start < v->last_end - SR / 50 || segs[i].utterance_end
        || !(segs[i].stability >= 0.0f && segs[i].stability < 1.0f))
      v->partial_ok = false;
  }
  {
    int64_t st = wk_stream_settled (s);
    /* only grows, and the partial words lie after it */
    if (st < v->settled || (np > 0 && segs[0].start < st)) {
      if (v->settled_ok)
        fprintf (stderr, "# settled %lld after %lld, partial at %lld\n",
            (long long) st, (long long) v->settled,
            (long long) (np > 0 ? segs[0].start : -1));
      v->settled_ok = false;
    }
    v->settled = st;
    if (v->fed - st > v->max_lag)
      v->max_lag = v->fed - st;
  }
}

/* Feeds pcm in 20 ms pieces, collecting after each. */
static wk_status
feed_pieces (wk_stream * s, const float *pcm, size_t n, seen * v)
{
  size_t off;
  for (off = 0; off < n; off += PIECE) {
    size_t k = n - off < PIECE ? n - off : PIECE;
    wk_status st = wk_stream_feed (s, pcm + off, k);
    if (st != WK_OK)
      return st;
    if (v) {
      v->fed += (int64_t) k;
      collect (s, v);
    }
  }
  return WK_OK;
}

/* ---- tests ----------------------------------------------------------- */

/* A store whose results are not taken keeps them all (a file fed whole,
 * then taken once): it grows past the room it was made with, the
 * segments' text and tokens move with it, and its owner's byte count
 * follows. The next call after a take starts empty. */
static void
test_results_keep_untaken (void)
{
  wk_results r;
  uint64_t own = 0, own0;
  const wk_segment *segs;
  char text[32];
  int i, k, bad = 0;
  size_t n;

  CHECK (wk_results_init (&r, 2, 4, 16, &own));
  own0 = own;
  wk_results_begin (&r);
  for (i = 0; i < 500; i++) {
    wk_token toks[3];
    wk_segment *seg;
    memset (toks, 0, sizeof toks);
    for (k = 0; k < 3; k++)
      toks[k].id = i * 3 + k;
    snprintf (text, sizeof text, " word%d ", i);
    seg = wk_results_add (&r, text, strlen (text), true, toks, 3);
    seg->start = i;
  }
  n = wk_results_take (&r, &segs);
  CHECK_MSG (n == 500, "%zu segments kept of 500", n);
  for (i = 0; i < (int) n; i++) {
    snprintf (text, sizeof text, "word%d", i);
    if (strcmp (segs[i].text, text) != 0 || !segs[i].space_before
        || segs[i].start != i || segs[i].n_tokens != 3
        || segs[i].tokens[0].id != i * 3 || segs[i].tokens[2].id != i * 3 + 2)
      bad++;
  }
  CHECK_MSG (bad == 0, "%d segments changed", bad);
  CHECK (own > own0);
  /* the take's segments stay until the next call, which starts anew */
  wk_results_begin (&r);
  wk_results_add (&r, "x", 1, false, NULL, 0);
  CHECK (wk_results_take (&r, &segs) == 1 && strcmp (segs[0].text, "x") == 0);
  wk_results_free (&r);
}

static void
test_helpers (void)
{
  const char *a[] = { " And", " so", " my", " fellow" };
  const char *b[] = { " And", " so", " my", " fell" };
  const char *c[] = { " and" };
  CHECK (wk_live_common_prefix (a, 4, b, 4) == 3);
  CHECK (wk_live_common_prefix (a, 4, a, 2) == 2);
  CHECK (wk_live_common_prefix (a, 4, c, 1) == 0);
  CHECK (wk_live_common_prefix (a, 0, b, 4) == 0);

  /* 1 s = 100 frames = 50 positions + 32 padding -> 128 */
  CHECK (wk_live_audio_ctx (model, WK_AUDIO_CTX_SHORT, 100) == 128);
  CHECK (wk_live_audio_ctx (model, WK_AUDIO_CTX_SHORT, 0) == 64);
  CHECK (wk_live_audio_ctx (model, WK_AUDIO_CTX_FULL, 100) == 0);
  CHECK (wk_live_audio_ctx (model, 512, 100) == 512);
  CHECK (wk_live_audio_ctx (model, 100, 100) == 128);
  CHECK (wk_live_audio_ctx (model, WK_AUDIO_CTX_SHORT, 3000) == 0);     /* full */
  CHECK (wk_live_audio_ctx (model, WK_AUDIO_CTX_SHORT, 2900) == 0);
  /* the default follows the knot: no whisperknot.live_audio_ctx (as in
   * OpenAI's models) is the full context, "short" the window's audio */
  CHECK (!model->live_short_ctx);
  CHECK (wk_live_audio_ctx (model, WK_AUDIO_CTX_AUTO, 100) == 0);
  model->live_short_ctx = true;
  CHECK (wk_live_audio_ctx (model, WK_AUDIO_CTX_AUTO, 100) == 128);
  CHECK (wk_live_audio_ctx (model, WK_AUDIO_CTX_FULL, 100) == 0);
  model->live_short_ctx = false;
}

static void
test_params (void)
{
  wk_stream_params p = live_params (1000);
  wk_stream *s = NULL;
  char err[256];
  const wk_segment *segs;
  uint64_t serial = 1;

  p.latency_ms = -5;
  CHECK (wk_stream_new (model, &p, &s, err, sizeof err) == WK_ERR_ARG);
  p = live_params (1000);
  p.vad_threshold = 1.5f;
  CHECK (wk_stream_new (model, &p, &s, err, sizeof err) == WK_ERR_ARG);
  p = live_params (1000);
  p.vad_model = "/nonexistent/vad.bin";
  CHECK (wk_stream_new (model, &p, &s, err, sizeof err) != WK_OK);
  CHECK (s == NULL);
  CHECK (err[0] != '\0');

  /* defaults */
  p = wk_stream_default_params ();
  CHECK (p.latency_ms == 0 && p.use_vad && p.vad_threshold == 0.5f
      && p.vad_min_silence_ms == 300 && !p.vad_model
      && p.audio_ctx == WK_AUDIO_CTX_AUTO);
  p = live_params (1000);
  p.audio_ctx = -3;
  CHECK (wk_stream_new (model, &p, &s, err, sizeof err) == WK_ERR_ARG);
  CHECK (s == NULL && strstr (err, "audio_ctx") != NULL);

  /* offline streams have no partial result */
  p = live_params (0);
  s = new_stream (&p);
  if (!s)
    return;
  CHECK (wk_stream_feed (s, jfk, SR) == WK_OK);
  CHECK (wk_stream_partial (s, &segs, &serial) == 0);
  CHECK (segs == NULL && serial == 0);
  wk_stream_free (s);
  CHECK (wk_stream_partial (NULL, &segs, NULL) == 0);
}

/* 10 minutes of digital silence, then 10 of low noise: nothing runs. */
static void
test_silence (void)
{
  wk_stream_params p = live_params (1000);
  wk_stream *s = new_stream (&p);
  wk_stream_stats st;
  float *buf;
  const size_t minute = 60 * SR;
  uint32_t x = 99;
  size_t i;
  double c0, c1, c2;
  seen v;

  if (!s)
    return;
  seen_init (&v);
  buf = calloc (minute, sizeof *buf);
  c0 = wk_test_cpu_s ();
  for (i = 0; i < 10; i++)
    CHECK (feed_pieces (s, buf, minute, &v) == WK_OK);
  c1 = wk_test_cpu_s ();
  /* low noise, about -50 dBFS (uniform, white) */
  for (i = 0; i < minute; i++) {
    x = x * 1664525u + 1013904223u;
    buf[i] = ((int32_t) (x >> 8) - (1 << 23)) * (0.003f / (1 << 23));
  }
  for (i = 0; i < 10; i++)
    CHECK (feed_pieces (s, buf, minute, &v) == WK_OK);
  c2 = wk_test_cpu_s ();
  CHECK (wk_stream_finish (s) == WK_OK);
  collect (s, &v);
  wk_stream_get_stats (s, &st);
  CHECK_MSG (st.n_runs == 0 && st.n_windows == 0 && st.n_tokens == 0,
      "runs %lld windows %lld tokens %lld", (long long) st.n_runs,
      (long long) st.n_windows, (long long) st.n_tokens);
  CHECK (v.n_words == 0 && v.n_markers == 0 && v.max_partial == 0);
  /* what the detector calls non-speech (it judges whole chunks) is
   * settled within a second */
  CHECK_MSG (v.settled_ok && v.max_lag < SR + WK_VAD_CHUNK,
      "settled lags %.3f s", (double) v.max_lag / SR);
  CHECK (v.settled == v.fed);
  CHECK_NEAR (st.audio_seconds, 1200.0, 1e-6);
  CHECK (st.vad_seconds > 0.0);
  printf ("# silence: %.3f CPU s per minute (digital), %.3f (noise); "
      "detector %.3f s for 20 min\n", (c1 - c0) / 10, (c2 - c1) / 10,
      st.vad_seconds);
  free (buf);
  wk_stream_free (s);
}

/* jfk.wav in 20 ms pieces, then silence: runs, partials, commits,
 * markers; no allocation while feeding. */
static void
test_speech (void)
{
  wk_stream_params p = live_params (1000);
  wk_stream *s;
  wk_stream_stats st;
  float *sil;
  long allocs;
  double t0;
  seen v;

  p.beam_size = 0;              /* the engine's choice: a beam of 3 live */
  s = new_stream (&p);
  if (!s)
    return;
  sil = calloc (2 * SR, sizeof *sil);
  seen_init (&v);
  t0 = wk_test_now_s ();
  atomic_store (&n_allocs, 0);
  atomic_store (&counting, 1);
  CHECK (feed_pieces (s, jfk, jfk_n, &v) == WK_OK);
  CHECK (feed_pieces (s, sil, 2 * SR, &v) == WK_OK);
  atomic_store (&counting, 0);
  allocs = atomic_load (&n_allocs);
  wk_stream_get_stats (s, &st);
  printf ("# jfk 11 s live (latency 1000 ms): %.2f s wall, %lld runs, "
      "%lld words, %d markers, %d partial updates, step %.2f s, "
      "run max %.3f s, delay max %.3f s, speech %.1f s\n",
      wk_test_now_s () - t0, (long long) st.n_runs, (long long) st.n_committed,
      v.n_markers, v.n_partial_updates, st.step_seconds, st.max_run_seconds,
      st.max_delay_seconds, st.speech_seconds);
  printf ("# committed:%s\n", v.text);
  printf ("# settled lagged the audio by %.2f s at most\n",
      (double) v.max_lag / SR);
#if WK_COUNT_ALLOCS
  CHECK_MSG (allocs == 0, "%ld allocations while feeding", allocs);
#else
  (void) allocs;
#endif
  CHECK (st.n_runs >= 5);
  CHECK (st.n_windows == st.n_runs);
  CHECK (st.speech_seconds > 5.0 && st.speech_seconds < 12.0);
  CHECK (v.n_partial_updates > 0);
  CHECK (v.n_words > 0);
  CHECK (v.n_markers >= 1);
  CHECK (v.marker_last);        /* speech over: the utterance has ended */
  CHECK (v.order_ok && v.settled_ok && v.words_ok && v.partial_ok);
  CHECK (v.last_end <= (int64_t) jfk_n + 2 * SR);
  CHECK (st.max_delay_seconds >= 0.0 && st.n_utterances == v.n_markers);
  /* after the utterance ended nothing is pending */
  CHECK (wk_stream_partial (s, NULL, NULL) == 0);
  /* a step (about 0.33 s), the run, half a second for a cut word and the
   * words held for agreement; far below the window */
  CHECK_MSG (v.max_lag < 4 * SR, "settled lagged %.2f s",
      (double) v.max_lag / SR);
  CHECK (wk_stream_finish (s) == WK_OK);
  collect (s, &v);
  CHECK (v.marker_last);
  CHECK (v.settled == v.fed);
  CHECK (wk_stream_feed (s, sil, 10) == WK_ERR_STATE);
  free (sil);
  wk_stream_free (s);
}

/* Without the detector all audio is speech; finish commits. */
static void
test_no_vad (void)
{
  wk_stream_params p = live_params (600);
  wk_stream *s;
  wk_stream_stats st;
  seen v;

  p.use_vad = false;
  s = new_stream (&p);
  if (!s)
    return;
  seen_init (&v);
  CHECK (feed_pieces (s, jfk, 4 * SR, &v) == WK_OK);
  wk_stream_get_stats (s, &st);
  /* every 300 ms from the start, unless runs take longer than that (a
   * sanitizer build): then the step grows to a run's duration */
  CHECK_MSG (st.n_runs >= (st.max_run_seconds < 0.25 ? 10 : 3),
      "%lld runs, the longest %.3f s", (long long) st.n_runs,
      st.max_run_seconds);
  CHECK (st.vad_seconds == 0.0);
  CHECK (wk_stream_finish (s) == WK_OK);
  collect (s, &v);
  CHECK (v.n_words > 0 && v.marker_last && v.order_ok && v.settled_ok
      && v.words_ok);
  wk_stream_free (s);
}

/* A latency longer than the window (60 s) still runs the model every few
 * seconds: runs every latency / 3 = 20 s let the window outgrow the audio
 * kept (31 s), and the stream ended an utterance in the middle of the
 * speech, leaving the second past 30 s untranscribed. */
static void
test_long_latency (void)
{
  wk_stream_params p = live_params (60000);
  wk_stream *s;
  wk_stream_stats st;
  size_t n = 40 * SR, i;
  float *buf;
  seen v;

  p.use_vad = false;
  s = new_stream (&p);
  buf = malloc (n * sizeof *buf);
  if (!s || !buf) {
    CHECK (buf != NULL);
    free (buf);
    wk_stream_free (s);
    return;
  }
  for (i = 0; i < n; i++)
    buf[i] = jfk[i % jfk_n];
  seen_init (&v);
  CHECK (feed_pieces (s, buf, n, &v) == WK_OK);
  wk_stream_get_stats (s, &st);
  CHECK_MSG (v.n_markers == 0 && st.n_utterances == 0, "%d utterance ends "
      "before the end of 40 s of speech", v.n_markers);
  CHECK (st.step_seconds <= 4.0);
  CHECK (wk_stream_finish (s) == WK_OK);
  collect (s, &v);
  CHECK (v.marker_last && v.n_markers == 1);
  CHECK_MSG (v.order_ok && v.settled_ok && v.words_ok, "order %d settled %d "
      "words %d", v.order_ok, v.settled_ok, v.words_ok);
  free (buf);
  wk_stream_free (s);
}

/* End of stream in the middle of a word: the tail is committed. */
static void
test_finish_mid_word (void)
{
  wk_stream_params p = live_params (1000);
  wk_stream *s = new_stream (&p);
  seen v;
  int before;

  if (!s)
    return;
  seen_init (&v);
  /* "And so my fellow Americans" ends about 3.3 s in; stop at 2.9 s */
  CHECK (feed_pieces (s, jfk, (size_t) (2.9 * SR), &v) == WK_OK);
  before = v.n_words;
  CHECK (wk_stream_partial (s, NULL, NULL) > 0 || before > 0);
  CHECK (wk_stream_finish (s) == WK_OK);
  collect (s, &v);
  CHECK (v.n_words > before || (before > 0 && v.n_markers == 1));
  CHECK (v.marker_last && v.n_markers == 1);
  CHECK (wk_stream_partial (s, NULL, NULL) == 0);
  CHECK (v.last_end <= (int64_t) (2.9 * SR));
  CHECK (v.order_ok && v.settled_ok && v.words_ok && v.partial_ok);
  wk_stream_free (s);
}

/* Flush ends the utterance without ending the stream; reset in the
 * middle of one forgets it. */
static void
test_flush_reset (void)
{
  wk_stream_params p = live_params (1000);
  wk_stream *s = new_stream (&p);
  wk_stream_stats st;
  seen v;

  if (!s)
    return;
  seen_init (&v);
  CHECK (feed_pieces (s, jfk, 2 * SR, &v) == WK_OK);
  CHECK (wk_stream_flush (s) == WK_OK);
  collect (s, &v);
  CHECK (v.marker_last && v.n_markers == 1);
  CHECK (feed_pieces (s, jfk + 2 * SR, 2 * SR, &v) == WK_OK);

  /* reset mid-utterance */
  wk_stream_reset (s);
  CHECK (wk_stream_take (s, NULL) == 0);
  CHECK (wk_stream_partial (s, NULL, NULL) == 0);
  seen_init (&v);
  CHECK (feed_pieces (s, jfk + 3 * SR, 3 * SR, &v) == WK_OK);
  CHECK (wk_stream_finish (s) == WK_OK);
  collect (s, &v);
  wk_stream_get_stats (s, &st);
  CHECK (v.n_words > 0 && v.marker_last && v.order_ok && v.settled_ok
      && v.words_ok);
  /* times count from the reset */
  CHECK (v.last_end <= 3 * SR);
  wk_stream_free (s);
}

/* An hour of mostly silence with jfk every five minutes, as fast as
 * possible: constant memory, no allocation, bounded work. */
static void
test_hour (void)
{
  wk_stream_params p = live_params (1000);
  wk_stream *s = new_stream (&p);
  wk_stream_stats st0, st;
  const size_t block = 5 * 60 * SR;
  float *buf = calloc (block, sizeof *buf);
  long allocs;
  double t0, c0;
  int i;
  seen v;

  if (!s || !buf)
    return;
  seen_init (&v);
  memcpy (buf + 30 * SR, jfk, jfk_n * sizeof *buf);
  wk_stream_get_stats (s, &st0);
  t0 = wk_test_now_s ();
  c0 = wk_test_cpu_s ();
  atomic_store (&n_allocs, 0);
  atomic_store (&counting, 1);
  for (i = 0; i < 12; i++) {
    size_t off;
    /* big pieces: feeding faster than real time */
    for (off = 0; off < block; off += 16000) {
      CHECK (wk_stream_feed (s, buf + off, 16000) == WK_OK);
      collect (s, &v);
    }
    wk_stream_get_stats (s, &st);
    CHECK (st.state_bytes == st0.state_bytes);
  }
  atomic_store (&counting, 0);
  allocs = atomic_load (&n_allocs);
#if WK_COUNT_ALLOCS
  CHECK_MSG (allocs == 0, "%ld allocations while feeding", allocs);
#else
  (void) allocs;
#endif
  wk_stream_get_stats (s, &st);
  printf ("# one hour (12 x jfk in silence): %.1f s wall, %.1f CPU s, "
      "%lld runs, %lld words, %lld utterances, state %.1f MB constant, "
      "encoder %.1f s, decoder %.1f s, detector %.1f s\n",
      wk_test_now_s () - t0, wk_test_cpu_s () - c0, (long long) st.n_runs,
      (long long) st.n_committed, (long long) st.n_utterances,
      st.state_bytes / 1e6, st.encoder_seconds, st.decoder_seconds,
      st.vad_seconds);
  CHECK_NEAR (st.audio_seconds, 3600.0, 1e-6);
  CHECK_MSG (v.n_markers >= 12 && v.order_ok && v.settled_ok && v.words_ok,
      "markers %d order %d words %d", v.n_markers, v.order_ok, v.words_ok);
  CHECK (v.settled_ok);
  CHECK (st.speech_seconds < 12 * 12.0);
  free (buf);
  wk_stream_free (s);
}

/* ---- grouping ------------------------------------------------------- */

static wk_segment
word_seg (const char *text, bool space, double t0, double t1)
{
  wk_segment w;

  memset (&w, 0, sizeof w);
  w.text = text;
  w.space_before = space;
  w.start = (int64_t) (t0 * SR);
  w.end = (int64_t) (t1 * SR);
  w.stability = 1.0f;
  return w;
}

/* The grouper itself: phrases end at a pause of half a second or at a
 * marker, utterances only at a marker or a close; text is joined with a
 * space exactly where a word says so; markers follow their group. */
static void
test_group_unit (void)
{
  wk_segment in[7];
  const wk_segment *out;
  uint64_t own = 0;
  wk_group *ph = wk_group_new (WK_GROUP_PHRASE, 16, 256, &own);
  wk_group *ut = wk_group_new (WK_GROUP_UTTERANCE, 16, 256, &own);
  size_t n;

  CHECK (ph && ut && own > 0);
  if (!ph || !ut)
    goto done;
  in[0] = word_seg ("Hello", true, 1.0, 1.3);
  in[1] = word_seg (",", false, 1.3, 1.35);
  in[2] = word_seg ("world", true, 1.4, 1.8);
  in[3] = word_seg ("again", true, 2.5, 2.9);   /* after a 0.7 s pause */
  in[4] = word_seg ("", false, 0, 0);
  in[4].utterance_end = true;
  in[4].start = in[4].end = (int64_t) (3.2 * SR);
  in[5] = word_seg ("next", true, 4.0, 4.3);
  in[6] = word_seg ("one", true, 4.4, 4.6);

  wk_group_add (ph, in, 3);
  CHECK (wk_group_take (ph, &out) == 0);        /* the phrase is open */
  CHECK (wk_group_pending_start (ph) == SR);
  wk_group_add (ph, in + 3, 4);
  n = wk_group_take (ph, &out);
  CHECK_MSG (n == 3, "%zu phrases and markers", n);
  if (n == 3) {
    CHECK (!strcmp (out[0].text, "Hello, world") && out[0].space_before);
    CHECK (out[0].start == SR && out[0].end == (int64_t) (1.8 * SR));
    CHECK (!strcmp (out[1].text, "again") && !out[1].utterance_end);
    CHECK (out[2].utterance_end && out[2].start == (int64_t) (3.2 * SR)
        && out[2].text[0] == '\0');
  }
  CHECK (wk_group_pending_start (ph) == 4 * SR);
  wk_group_close (ph);
  n = wk_group_take (ph, &out);
  CHECK (n == 1 && !strcmp (out[0].text, "next one")
      && out[0].start == 4 * SR && out[0].end == (int64_t) (4.6 * SR));
  CHECK (wk_group_take (ph, &out) == 0 && wk_group_pending_start (ph) == -1);

  wk_group_add (ut, in, 7);
  n = wk_group_take (ut, &out);
  CHECK (n == 2 && !strcmp (out[0].text, "Hello, world again")
      && out[1].utterance_end);
  wk_group_close (ut);
  n = wk_group_take (ut, &out);
  CHECK (n == 1 && !strcmp (out[0].text, "next one"));

  /* a group that outgrows the store closes and a new one starts */
  wk_group_reset (ut);
  {
    int i, total = 0;
    for (i = 0; i < 100; i++) {
      wk_segment w = word_seg ("word", true, i * 0.3, i * 0.3 + 0.2);
      wk_group_add (ut, &w, 1);
      n = wk_group_take (ut, &out);
      for (size_t j = 0; j < n; j++) {
        CHECK (strlen (out[j].text) <= 256 + 16);
        total += (int) (strlen (out[j].text) + 1) / 5;
      }
    }
    wk_group_close (ut);
    n = wk_group_take (ut, &out);
    for (size_t j = 0; j < n; j++)
      total += (int) (strlen (out[j].text) + 1) / 5;
    CHECK_MSG (total == 100, "%d words out of 100", total);
  }
done:
  wk_group_free (ph);
  wk_group_free (ut);
}

/* The text of every committed segment of jfk.wav (then 2 s of silence)
 * fed live in 20 ms pieces, joined as space_before says; the counts of
 * text segments and markers; *ok false if a segment is out of order,
 * before what was settled when it was taken, or not trimmed. */
static void
live_joined (wk_model * m, wk_group_by by, char *text, size_t cap,
    int *n_text, int *n_markers, bool *ok)
{
  wk_stream_params p = live_params (1000);
  wk_stream *s = NULL;
  char err[256];
  size_t n_all = jfk_n + 2 * SR, len = 0, off;
  float *all = calloc (n_all, sizeof *all);
  int64_t last = 0;

  p.group = by;
  text[0] = '\0';
  *n_text = *n_markers = 0;
  CHECK_MSG (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK, "%s", err);
  if (!s || !all) {
    free (all);
    wk_stream_free (s);
    return;
  }
  memcpy (all, jfk, jfk_n * sizeof *all);
  for (off = 0; off <= n_all; off += PIECE) {
    const wk_segment *segs;
    int64_t settled;
    size_t n, i;
    if (off < n_all)
      CHECK (wk_stream_feed (s, all + off, n_all - off < PIECE ? n_all - off :
              PIECE) == WK_OK);
    else
      CHECK (wk_stream_finish (s) == WK_OK);
    settled = wk_stream_settled (s);
    n = wk_stream_take (s, &segs);
    for (i = 0; i < n; i++) {
      size_t tl = strlen (segs[i].text);
      if (segs[i].start < settled || segs[i].start < last)
        *ok = false;
      last = segs[i].start;
      if (segs[i].utterance_end) {
        (*n_markers)++;
        continue;
      }
      (*n_text)++;
      if (tl == 0 || segs[i].text[0] == ' ' || segs[i].text[tl - 1] == ' ')
        *ok = false;            /* trimmed, never empty */
      if (len > 0 && segs[i].space_before && len + 1 < cap)
        text[len++] = ' ';
      if (len + tl < cap) {
        memcpy (text + len, segs[i].text, tl);
        len += tl;
      }
      text[len] = '\0';
    }
  }
  CHECK (wk_stream_settled (s) == (int64_t) n_all);
  free (all);
  wk_stream_free (s);
}

/* Grouped output holds the same text as word output, in fewer segments
 * (the same markers), trimmed, in order, never before settled: with the
 * default model (real words; this feeding has no deadlines, so the
 * three runs commit the same words). */
static void
test_group_stream (void)
{
  static char words[4096], phrases[4096], utts[4096];
  int nw, np, nu, mw, mp, mu;
  bool ok = true;
  wk_model *m = NULL;
  char err[256];

  if (wk_model_load (wk_default_model_path (), NULL, &m, err,
          sizeof err) != WK_OK) {
    printf ("# no default model (%s): grouping checked on the test model\n",
        err);
    m = wk_model_ref (model);
  }
  live_joined (m, WK_GROUP_WORD, words, sizeof words, &nw, &mw, &ok);
  live_joined (m, WK_GROUP_PHRASE, phrases, sizeof phrases, &np, &mp, &ok);
  live_joined (m, WK_GROUP_UTTERANCE, utts, sizeof utts, &nu, &mu, &ok);
  wk_model_unref (m);
  printf ("# jfk live: %d words, %d phrases, %d utterances, %d markers: "
      "%s\n", nw, np, nu, mw, utts);
  CHECK (ok);
  CHECK (nw > 0 && np > 0 && nu > 0);
  CHECK (np <= nw && nu <= np && nu >= mu && mw == mp && mp == mu);
  CHECK_MSG (!strcmp (words, phrases), "words '%s', phrases '%s'", words,
      phrases);
  CHECK_MSG (!strcmp (words, utts), "words '%s', utterances '%s'", words, utts);
  {
    wk_stream_params p = live_params (1000);
    wk_stream *s = NULL;
    p.group = (wk_group_by) 7;
    CHECK (wk_stream_new (model, &p, &s, err, sizeof err) == WK_ERR_ARG
        && s == NULL && strstr (err, "group"));
  }
}

/* wk_stream_take_cues and wk_stream_partial_cue on jfk: the text cues
 * hold the words wk_stream_take gives (text_lines: a newline ends each
 * utterance or phrase), the cues cover the audio in order without a
 * hole, and the partial cue is the partial words joined. */
static void
cues_stream (wk_model * m, wk_group_by by, const char *words, int n_markers)
{
  wk_stream_params p = live_params (1000);
  wk_stream *s = NULL;
  char err[256], text[4096], part[1024], want[4096];
  size_t n_all = jfk_n + 2 * SR, len = 0, off, i, j, k;
  float *all = calloc (n_all, sizeof *all);
  int64_t pos = 0;
  int lines = 0, ends = 0;
  bool order = true, partial = true;

  p.group = by;
  p.text_lines = true;
  CHECK_MSG (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK, "%s", err);
  if (!s || !all) {
    free (all);
    wk_stream_free (s);
    return;
  }
  memcpy (all, jfk, jfk_n * sizeof *all);
  for (off = 0; off <= n_all; off += PIECE) {
    const wk_segment *w;
    const wk_cue *c;
    wk_cue pc;
    size_t n, pl = 0;
    if (off < n_all)
      CHECK (wk_stream_feed (s, all + off, n_all - off < PIECE ? n_all - off :
              PIECE) == WK_OK);
    else
      CHECK (wk_stream_finish (s) == WK_OK);
    n = wk_stream_take_cues (s, &c);
    for (i = 0; i < n; i++) {
      if (c[i].kind == WK_CUE_UTTERANCE_END) {
        ends++;
        order &= c[i].start <= pos && c[i].start == c[i].end;
        continue;
      }
      /* from where the cues so far end, never a hole */
      order &= c[i].start == pos && c[i].end >= c[i].start;
      pos = c[i].end;
      if (c[i].kind == WK_CUE_TEXT) {
        int t = snprintf (text + len, sizeof text - len, "%s%s%s",
            c[i].before, c[i].text, c[i].after);
        lines += c[i].after[0] == '\n';
        if (t > 0 && len + (size_t) t < sizeof text)
          len += (size_t) t;
        /* only a line end lasts 0 */
        order &= c[i].end > c[i].start || !c[i].segment;
      }
    }
    /* the partial words joined as the model spaced them */
    n = wk_stream_partial (s, &w, NULL);
    part[0] = '\0';
    for (i = 0; i < n && pl < sizeof part; i++)
      pl += (size_t) snprintf (part + pl, sizeof part - pl, "%s%s",
          i > 0 && w[i].space_before ? " " : "", w[i].text);
    CHECK (wk_stream_partial_cue (s, &pc, NULL) == n);
    partial &= !strcmp (pc.text, part) && pc.kind == WK_CUE_TEXT;
    partial &= n == 0 ? pc.start == pc.end : pc.start <= pc.end;
  }
  CHECK (order);
  CHECK (partial);
  CHECK_MSG (pos == (int64_t) n_all, "cues end at %lld of %zu",
      (long long) pos, n_all);
  CHECK_MSG (ends == n_markers, "%d utterance ends, %d markers", ends,
      n_markers);
  /* a newline after each utterance's words (a finish may close the
   * last line), or after each phrase */
  CHECK_MSG (lines > 0 && (by != WK_GROUP_WORD || lines <= ends + 1),
      "%d lines, %d utterance ends", lines, ends);
  /* lines joined without their newlines are the words, but for the
   * spaces: compare without white space */
  for (i = j = 0; text[i]; i++)
    if (text[i] != '\n' && text[i] != ' ')
      text[j++] = text[i];
  text[j] = '\0';
  for (i = k = 0; words[i] && k + 1 < sizeof want; i++)
    if (words[i] != ' ')
      want[k++] = words[i];
  want[k] = '\0';
  CHECK_MSG (!strcmp (text, want), "cues '%s', words '%s'", text, want);

  /* after a restart at an earlier time, cues start where told */
  wk_stream_reset (s);
  wk_stream_cues_from (s, 5000);
  CHECK (wk_stream_feed (s, all, SR) == WK_OK);
  CHECK (wk_stream_finish (s) == WK_OK);
  {
    const wk_cue *c;
    size_t n = wk_stream_take_cues (s, &c);
    CHECK (n > 0 && c[0].start == 5000 && c[n - 1].end >= SR);
  }
  free (all);
  wk_stream_free (s);
}

static void
test_cues_stream (void)
{
  static char words[4096];
  int nw, mw;
  bool ok = true;
  wk_model *m = NULL;
  char err[256];

  if (wk_model_load (wk_default_model_path (), NULL, &m, err,
          sizeof err) != WK_OK) {
    printf ("# no default model (%s): cues checked on the test model\n", err);
    m = wk_model_ref (model);
  }
  live_joined (m, WK_GROUP_WORD, words, sizeof words, &nw, &mw, &ok);
  CHECK (ok && nw > 0);
  cues_stream (m, WK_GROUP_WORD, words, mw);
  cues_stream (m, WK_GROUP_PHRASE, words, mw);
  wk_model_unref (m);
}

/* ---- the engine's feed queue ----------------------------------------- */

/* Marks keep their place between samples; S16LE and F32LE bytes at any
 * alignment arrive as the samples they hold; silence is zeros; a stopped
 * queue refuses writes and wakes a writer waiting on a full queue; a
 * clear hands the marks left to the taker in order. */
static int queue_taken[4], n_queue_taken;

static void
queue_take (void *mark, void *user)
{
  (void) user;
  if (n_queue_taken < 4)
    queue_taken[n_queue_taken++] = *(int *) mark;
}

typedef struct
{
  wk_queue *q;
  wk_status st;
} queue_writer;

static void *
queue_block (void *arg)
{
  queue_writer *w = arg;
  float x[8] = { 0 };
  w->st = wk_queue_write (w->q, x, WK_SAMPLE_F32LE, 8);
  return NULL;
}

static void
test_queue (void)
{
  wk_stream_params p = wk_stream_default_params ();
  wk_stream *s;
  wk_queue *q = NULL;
  unsigned char bytes[1 + 3 * 4];
  int16_t s16[3] = { -32768, 16384, 32767 };
  float f32[3] = { -1.0f, 0.25f, 1.0f };
  int marks[3] = { 1, 2, 3 };
  void *mark;
  size_t n;
  queue_writer w;
  pthread_t t;
  int64_t fed;

  p.n_threads = 1;
  s = new_stream (&p);          /* offline: 3 samples never run the model */
  if (!s)
    return;
  CHECK (wk_queue_new (0, NULL, &q) == WK_ERR_ARG && q == NULL);
  CHECK (wk_queue_new (4, NULL, &q) == WK_OK);
  /* a new queue is stopped */
  CHECK (wk_queue_write (q, NULL, WK_SAMPLE_F32LE, 1) == WK_ERR_STATE);
  CHECK (wk_queue_next (q, s, 16, NULL, NULL, &mark, &n) == WK_ERR_STATE
      && mark == NULL && n == 0);
  wk_queue_start (q);
  /* S16LE bytes at an odd address, a mark, F32LE likewise, silence */
  memcpy (bytes + 1, s16, sizeof s16);
  CHECK (wk_queue_write (q, bytes + 1, WK_SAMPLE_S16LE, 3) == WK_OK);
  CHECK (wk_queue_mark (q, &marks[0]) == WK_OK);
  CHECK (wk_queue_next (q, s, 2, NULL, NULL, &mark, &n) == WK_OK
      && mark == NULL && n == 2);
  CHECK (wk_queue_next (q, s, 16, NULL, NULL, &mark, &n) == WK_OK
      && mark == NULL && n == 1);
  CHECK (wk_queue_next (q, s, 16, NULL, NULL, &mark, &n) == WK_OK
      && mark == &marks[0] && n == 0);
  memcpy (bytes + 1, f32, sizeof f32);
  CHECK (wk_queue_write (q, bytes + 1, WK_SAMPLE_F32LE, 3) == WK_OK);
  /* the ring's end (4 samples) cuts the feed */
  CHECK (wk_queue_next (q, s, 16, NULL, NULL, &mark, &n) == WK_OK && n == 1);
  CHECK (wk_queue_next (q, s, 16, NULL, NULL, &mark, &n) == WK_OK && n == 2);
  CHECK (wk_queue_write (q, NULL, WK_SAMPLE_S16LE, 2) == WK_OK);
  CHECK (wk_queue_next (q, s, 16, NULL, NULL, &mark, &n) == WK_OK && n == 2);
  {
    wk_stream_stats st;
    wk_stream_get_stats (s, &st);
    fed = (int64_t) (st.audio_seconds * SR + 0.5);
    /* -1, 16384 / 32768 = 0.5, 32767 / 32768 < 1, then -1, 0.25, 1, 0,
     * 0: nothing clipped (the S16 scale stays within [-1, 1]) */
    CHECK (fed == 8 && st.n_clipped == 0 && st.n_zeroed == 0);
  }
  /* a writer waiting on a full queue: the stop wakes it */
  w.q = q;
  w.st = WK_OK;
  CHECK (pthread_create (&t, NULL, queue_block, &w) == 0);
  usleep (50000);
  wk_queue_stop (q);
  pthread_join (t, NULL);
  CHECK (w.st == WK_ERR_STATE);
  /* marks left over go to the taker in order */
  wk_queue_start (q);
  CHECK (wk_queue_mark (q, &marks[1]) == WK_OK);
  CHECK (wk_queue_mark (q, &marks[2]) == WK_OK);
  n_queue_taken = 0;
  wk_queue_clear (q, queue_take, NULL);
  CHECK (n_queue_taken == 2 && queue_taken[0] == 2 && queue_taken[1] == 3);
  CHECK (wk_queue_write (NULL, f32, WK_SAMPLE_F32LE, 1) == WK_ERR_ARG);
  wk_queue_free (q);
  wk_stream_free (s);
}

/* The agreement policy, fed without due times, gives the same text however
 * the audio is cut into feeds: jfk.wav and a second of silence fed in
 * 20 ms pieces, and through a wk_queue whose writer thread writes pieces
 * of irregular sizes while the worker feeds whatever has queued (up to
 * 2 s, as the element does), give the same cues: text, times and
 * utterance ends (the gaps in between follow when the cues are taken).
 * (With WK_COMMIT_DEADLINE and due times the text depends on the wall
 * clock by design.) */
typedef struct
{
  wk_queue *q;
  const float *pcm;
  size_t n;
  int end;
} chunk_writer;

static void *
chunk_write (void *arg)
{
  static const size_t sizes[] = { 37, 5000, 320, 16000, 1234, 40000, 7 };
  chunk_writer *w = arg;
  size_t off = 0, i = 0;

  while (off < w->n) {
    size_t k = sizes[i++ % 7];
    if (k > w->n - off)
      k = w->n - off;
    if (wk_queue_write (w->q, w->pcm + off, WK_SAMPLE_F32LE, k) != WK_OK)
      return NULL;
    off += k;
    if (i % 5 == 0)
      usleep (2000);
  }
  wk_queue_mark (w->q, &w->end);
  return NULL;
}

static void
cues_text (wk_stream * s, char *out, size_t size, size_t *len)
{
  const wk_cue *c;
  size_t n = wk_stream_take_cues (s, &c), i;

  for (i = 0; i < n; i++) {
    int k;
    if (c[i].kind == WK_CUE_GAP)
      continue;
    k = snprintf (out + *len, size - *len, "%lld-%lld %s%s%s|",
        (long long) c[i].start, (long long) c[i].end, c[i].before,
        c[i].text, c[i].kind == WK_CUE_UTTERANCE_END ? "<end>" :
        c[i].after[0] ? "<nl>" : "");
    if (k > 0 && (size_t) k < size - *len)
      *len += (size_t) k;
  }
}

static void
test_chunking (void)
{
  static char a[16384], b[16384];
  size_t la = 0, lb = 0, n_all = jfk_n + SR, n, off, n_feeds = 0;
  size_t min_feed = SIZE_MAX, max_feed = 0;
  float *all = calloc (n_all, sizeof *all);
  wk_stream_params p = live_params (1000);
  wk_stream_stats sa, sb;
  wk_stream *s;
  wk_model *m = NULL;
  wk_queue *q = NULL;
  chunk_writer w;
  pthread_t t;
  void *mark;
  char err[256];

  if (!all)
    return;
  memcpy (all, jfk, jfk_n * sizeof *all);
  if (wk_model_load (wk_default_model_path (), NULL, &m, err,
          sizeof err) != WK_OK) {
    printf ("# no default model (%s): the test model instead\n", err);
    m = wk_model_ref (model);
  }
  p.commit = WK_COMMIT_AGREEMENT;
  p.text_lines = true;

  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  for (off = 0; off < n_all; off += PIECE) {
    CHECK (wk_stream_feed (s, all + off, n_all - off < PIECE ? n_all - off :
            PIECE) == WK_OK);
    cues_text (s, a, sizeof a, &la);
  }
  CHECK (wk_stream_finish (s) == WK_OK);
  cues_text (s, a, sizeof a, &la);
  wk_stream_get_stats (s, &sa);
  wk_stream_free (s);

  CHECK (wk_stream_new (m, &p, &s, err, sizeof err) == WK_OK);
  CHECK (wk_queue_new (3 * SR, NULL, &q) == WK_OK);
  wk_queue_start (q);
  w.q = q;
  w.pcm = all;
  w.n = n_all;
  CHECK (pthread_create (&t, NULL, chunk_write, &w) == 0);
  for (;;) {
    CHECK (wk_queue_next (q, s, 2 * SR, NULL, NULL, &mark, &n) == WK_OK);
    if (mark || n == 0)
      break;
    n_feeds++;
    min_feed = n < min_feed ? n : min_feed;
    max_feed = n > max_feed ? n : max_feed;
    cues_text (s, b, sizeof b, &lb);
  }
  pthread_join (t, NULL);
  CHECK (mark == &w.end);
  CHECK (wk_stream_finish (s) == WK_OK);
  cues_text (s, b, sizeof b, &lb);
  wk_stream_get_stats (s, &sb);
  wk_stream_free (s);
  wk_queue_free (q);

  printf ("# 20 ms feeds: %lld runs, cues: %s\n", (long long) sa.n_runs, a);
  printf ("# queue: %zu feeds of %zu to %zu samples, %lld runs\n", n_feeds,
      min_feed, max_feed, (long long) sb.n_runs);
  CHECK (la > 0 && sa.n_committed > 0);
  CHECK_MSG (!strcmp (a, b), "queue's cues: %s", b);
  CHECK (sa.n_runs == sb.n_runs && sa.n_committed == sb.n_committed);
  wk_model_unref (m);
  free (all);
}

/* ---- the policy with a scripted model ------------------------------------
 *
 * An ideal recognizer: it hears the words of a fixed script whose times
 * it knows exactly; a word cut by the window's end comes out as a wrong
 * guess (" xx") in an open segment, as a real model guesses at a word it
 * only half heard. With echo, a run whose window starts right where the
 * previous word ended also hears that word again first. */

#define N_SCRIPT 14
static const char *const script_words[N_SCRIPT] = {
  "and", "so", "my", "fellow", "Americans", "ask", "not", "what", "your",
  "country", "can", "do", "for", "you"
};

typedef struct
{
  wk_model *m;
  int64_t start[N_SCRIPT], end[N_SCRIPT];
  int32_t tok[N_SCRIPT][4];
  int n_tok[N_SCRIPT];
  int32_t guess[4];
  int n_guess;
  bool echo;
  int64_t max_window;
  int n_calls;
  double *clock;                /* virtual time (NULL: the real clock) */
  double run_cost;              /* seconds a run takes on it */
} script;

static double
virtual_clock (void *user)
{
  return *(double *) user;
}

static int32_t
ts_token (const script * sc, int64_t rel)
{
  int64_t k = (rel + 160) / 320;
  if (k < 0)
    k = 0;
  if (k > 1500)
    k = 1500;
  return sc->m->sp.timestamp_begin + (int32_t) k;
}

static int
script_run (void *user, int64_t ws, int64_t we, int32_t * out, int max)
{
  script *sc = user;
  int n = 0, i, k;

  sc->n_calls++;
  if (sc->clock)
    *sc->clock += sc->run_cost;
  if (we - ws > sc->max_window)
    sc->max_window = we - ws;
  for (i = 0; i < N_SCRIPT && n + 8 < max; i++) {
    bool echo = sc->echo && sc->end[i] <= ws && ws - sc->end[i] < 320
        && ws - sc->start[i] < 2 * SR;
    if (sc->end[i] <= ws - 160 && !echo)
      continue;                 /* committed before this window */
    if (sc->start[i] >= we - 1600)
      break;                    /* not heard yet */
    if (echo) {
      out[n++] = ts_token (sc, 0);
      for (k = 0; k < sc->n_tok[i]; k++)
        out[n++] = sc->tok[i][k];
      out[n++] = ts_token (sc, 0);
      continue;
    }
    out[n++] = ts_token (sc, sc->start[i] - ws);
    if (sc->end[i] <= we) {
      for (k = 0; k < sc->n_tok[i]; k++)
        out[n++] = sc->tok[i][k];
      out[n++] = ts_token (sc, sc->end[i] - ws);
    } else {
      for (k = 0; k < sc->n_guess; k++)
        out[n++] = sc->guess[k];
      break;                    /* open segment: cut by the window */
    }
  }
  return n;
}

/* The script's words, their times (one every 450 ms from 1 s, 350 ms
 * long) and tokens, and its guess for a cut word; returns where the
 * audio ends (a second after the last word). */
static int64_t
script_init (script * sc)
{
  int i;

  memset (sc, 0, sizeof *sc);
  sc->m = model;
  for (i = 0; i < N_SCRIPT; i++) {
    char w[64];
    snprintf (w, sizeof w, " %s", script_words[i]);
    sc->start[i] = SR + ((int64_t) i) * SR * 45 / 100;
    sc->end[i] = sc->start[i] + SR * 35 / 100;
    sc->n_tok[i] = wk_tokenizer_encode (model->tok, w, strlen (w),
        sc->tok[i], 4);
    CHECK (sc->n_tok[i] >= 1);
  }
  sc->n_guess = wk_tokenizer_encode (model->tok, " xx", 3, sc->guess, 4);
  return sc->end[N_SCRIPT - 1] + SR;
}

static void
script_policy (bool echo)
{
  wk_stream_params p = live_params (900);       /* step 300 ms */
  wk_ctx *ctx = NULL;
  wk_live *live = NULL;
  script sc;
  char err[256];
  int lang = -1, i, n_committed = 0, k;
  int64_t fed = 0, total, commit_at[N_SCRIPT];
  bool partial_before[N_SCRIPT], seen_partial[N_SCRIPT];
  float *zeros = calloc (PIECE, sizeof *zeros);

  total = script_init (&sc);
  sc.echo = echo;
  for (i = 0; i < N_SCRIPT; i++) {
    seen_partial[i] = partial_before[i] = false;
    commit_at[i] = -1;
  }

  p.use_vad = false;
  CHECK (wk_ctx_new (model, 1, 1, &ctx, err, sizeof err) == WK_OK);
  CHECK_MSG (wk_live_new (ctx, &p, &lang, &live, err, sizeof err) == WK_OK,
      "%s", err);
  if (!live)
    goto done;
  wk_live_set_script (live, script_run, &sc);

  while (fed <= total) {
    const wk_segment *segs;
    size_t n, j;
    if (fed < total)
      CHECK (wk_live_feed (live, zeros, PIECE, wk_now_s ()) == WK_OK);
    else
      CHECK (wk_live_finish (live) == WK_OK);
    fed += PIECE;
    n = wk_live_take (live, &segs);
    for (j = 0; j < n; j++) {
      if (segs[j].utterance_end)
        continue;
      CHECK_MSG (n_committed < N_SCRIPT, "extra word '%s'", segs[j].text);
      if (n_committed >= N_SCRIPT)
        break;
      k = n_committed++;
      /* trimmed, with the model's space before it said */
      CHECK_MSG (segs[j].space_before
          && !strcmp (segs[j].text, script_words[k]),
          "word %d: '%s' (space %d), expected ' %s'", k, segs[j].text,
          segs[j].space_before, script_words[k]);
      CHECK (llabs (segs[j].start - sc.start[k]) <= 160
          && llabs (segs[j].end - sc.end[k]) <= 160);
      commit_at[k] = fed < total ? fed : total;
      partial_before[k] = seen_partial[k];
    }
    n = wk_live_partial (live, &segs, NULL);
    for (j = 0; j < n; j++)
      for (k = n_committed; k < N_SCRIPT; k++)
        if (!strcmp (segs[j].text, script_words[k]))
          seen_partial[k] = true;
  }
  CHECK_MSG (n_committed == N_SCRIPT, "%d of %d words committed",
      n_committed, N_SCRIPT);
  for (k = 0; k < N_SCRIPT; k++) {
    /* committed by the second run that hears the whole word: two steps
     * (300 ms) and a piece after its end at most */
    CHECK_MSG (commit_at[k] >= 0 && commit_at[k] - sc.end[k] <= 2 * 4800
        + 2 * PIECE, "word %d committed %lld samples after its end", k,
        (long long) (commit_at[k] - sc.end[k]));
    CHECK_MSG (partial_before[k], "word %d was never a partial", k);
  }
  /* the window is trimmed behind committed words */
  CHECK_MSG (sc.max_window < 2 * SR, "window reached %lld samples",
      (long long) sc.max_window);
  printf ("# scripted%s: %d runs, window at most %.2f s\n",
      echo ? " (echo)" : "", sc.n_calls, (double) sc.max_window / SR);
done:
  wk_live_free (live);
  wk_ctx_free (ctx);
  free (zeros);
}

/* The deadline policy on the scripted model, on a virtual clock: audio is
 * captured in real time (each 20 ms piece is due when its first sample
 * was spoken and arrives when its last one was), and every run takes
 * run_cost seconds, during which audio queues up as it would behind a
 * slow model. queued: what queued up is fed in one call (up to half a
 * second, as the element's worker does), else piece by piece. The words
 * of each call are taken after it, as the element pushes them. Returns
 * the number of words committed later than their start + the latency;
 * *n_words receives the words committed. */
#define QUEUED_MAX (SR / 2)
static float script_p = 0.9f;   /* every scripted token's probability */
static int64_t n_withheld_seen; /* of the last deadline_policy */
static int
deadline_policy (wk_commit_policy commit, int latency_ms, double run_cost,
    bool queued, int *n_words, int *n_forced)
{
  wk_stream_params p = live_params (latency_ms);
  wk_ctx *ctx = NULL;
  wk_live *live = NULL;
  wk_stream_stats st;
  script sc;
  char err[256];
  int lang = -1, i, n_late = 0, n_committed = 0, n_right = 0, next = 0;
  int n_retract = 0, n_said[N_SCRIPT] = { 0 };
  int64_t fed = 0, total, last_end = 0;
  double vt = 0.0, lat = latency_ms / 1000.0;
  float *zeros = calloc (QUEUED_MAX, sizeof *zeros);

  total = script_init (&sc);
  sc.clock = &vt;
  sc.run_cost = run_cost;

  p.use_vad = false;
  p.commit = commit;
  CHECK (wk_ctx_new (model, 1, 1, &ctx, err, sizeof err) == WK_OK);
  CHECK_MSG (wk_live_new (ctx, &p, &lang, &live, err, sizeof err) == WK_OK,
      "%s", err);
  if (!live)
    goto done;
  wk_live_set_script (live, script_run, &sc);
  wk_live_set_script_prob (live, script_p);
  wk_live_set_clock (live, virtual_clock, &vt);

  while (fed <= total) {
    const wk_segment *segs;
    size_t n, j;
    int64_t k = PIECE;
    if (fed < total) {
      double captured = (double) (fed + PIECE) / SR;
      if (vt < captured)
        vt = captured;          /* wait for the piece (late: at once) */
      if (queued) {
        /* every whole piece captured by now */
        k = (int64_t) (vt * SR + 0.5) / PIECE * PIECE - fed;
        if (k > QUEUED_MAX)
          k = QUEUED_MAX;
        if (k < PIECE)
          k = PIECE;
      }
      if (k > total - fed)
        k = total - fed;
      CHECK (wk_live_feed (live, zeros, (size_t) k, (double) fed / SR)
          == WK_OK);
    } else {
      CHECK (wk_live_finish (live) == WK_OK);
    }
    fed += k;
    n = wk_live_take (live, &segs);
    for (j = 0; j < n; j++) {
      if (segs[j].utterance_end)
        continue;
      n_committed++;
      /* in order, never overlapping what came before */
      CHECK_MSG (segs[j].start >= last_end - 160, "word '%s' at %lld "
          "overlaps the previous one (ends %lld)", segs[j].text,
          (long long) segs[j].start, (long long) last_end);
      if (segs[j].end > last_end)
        last_end = segs[j].end;
      if (vt > (double) segs[j].start / SR + lat + 1e-9) {
        n_late++;
        printf ("# late: '%s' %.3f-%.3f committed at %.3f\n", segs[j].text,
            (double) segs[j].start / SR, (double) segs[j].end / SR, vt);
      }
      /* each word in the place of the script word it starts in: that
       * word, or (forced while the run heard it cut) the script's guess */
      for (i = next; i < N_SCRIPT; i++)
        if (segs[j].start >= sc.start[i] - 160
            && segs[j].start < sc.end[i] + 160)
          break;
      CHECK_MSG (i < N_SCRIPT && (!strcmp (segs[j].text, script_words[i])
              || !strcmp (segs[j].text, "xx")), "word '%s' at %.3f s is "
          "no script word's, in order", segs[j].text,
          (double) segs[j].start / SR);
      if (i < N_SCRIPT) {
        n_said[i]++;
        n_right += !strcmp (segs[j].text, script_words[i]);
        next = i;
      }
    }
    /* never retracted: what is still to come (the partial result) starts
     * after every committed word, and so nothing can take one's place */
    n = wk_live_partial (live, &segs, NULL);
    for (j = 0; j < n; j++)
      if (segs[j].start < last_end - 160) {
        n_retract++;
        printf ("# partial '%s' at %lld, inside the committed text (ends "
            "%lld)\n", segs[j].text, (long long) segs[j].start,
            (long long) last_end);
      }
  }
  CHECK_MSG (n_retract == 0, "%d partial words inside committed text",
      n_retract);
  wk_live_get_stats (live, &st);
  CHECK_MSG (st.n_late == n_late, "the policy counted %lld late words, the "
      "test %d", (long long) st.n_late, n_late);
  printf ("# %s, latency %d ms, runs of %.2f s%s: %d words (%d of %d right), "
      "%lld at their deadline, %d late (at most %.2f s), %d runs\n",
      commit == WK_COMMIT_DEADLINE ? "deadline" : "agreement", latency_ms,
      run_cost, queued ? ", queued audio fed at once" : "", n_committed,
      n_right, N_SCRIPT,
      (long long) st.n_deadline_commits, n_late, st.max_late_seconds,
      sc.n_calls);
  /* every script word is there once, right or (forced) guessed: a word
   * forced as a guess is not written again when a later run hears it;
   * one withheld at its deadline is not written at all */
  {
    int n_unsaid = 0;
    for (i = 0; i < N_SCRIPT; i++) {
      CHECK_MSG (n_said[i] <= 1, "script word %d ('%s') written %d times", i,
          script_words[i], n_said[i]);
      n_unsaid += n_said[i] == 0;
    }
    CHECK_MSG (n_unsaid == st.n_withheld, "%d script words not written, "
        "%lld withheld", n_unsaid, (long long) st.n_withheld);
  }
  n_withheld_seen = st.n_withheld;
  *n_words = n_committed;
  *n_forced = (int) st.n_deadline_commits;
done:
  wk_live_free (live);
  wk_ctx_free (ctx);
  free (zeros);
  return n_late;
}

static void
test_deadline (void)
{
  int n_words, n_forced, late;

  /* runs of 200 ms against a 900 ms latency (room for two runs and the
   * margins): two runs that agree come too late for most words */
  late = deadline_policy (WK_COMMIT_AGREEMENT, 900, 0.2, false, &n_words,
      &n_forced);
  CHECK_MSG (late > 0, "agreement alone was never late: the test cannot "
      "tell the policies apart");
  CHECK (n_forced == 0);
  late = deadline_policy (WK_COMMIT_DEADLINE, 900, 0.2, false, &n_words,
      &n_forced);
  CHECK_MSG (late == 0, "%d words late with deadlines", late);
  CHECK (n_forced > 0);
  /* and with room for a run after each word's end before its deadline,
   * runs are timed to hear every word whole: no guess for a word cut at
   * a window's end is committed (the script's 14 words, nothing else) */
  CHECK_MSG (n_words == N_SCRIPT, "%d words committed for %d: guesses at "
      "cut words", n_words, N_SCRIPT);
  /* the same with what queued up during a run fed in one call, as the
   * element does: one run per call, on all of it, and its words out
   * before the next run */
  late = deadline_policy (WK_COMMIT_DEADLINE, 900, 0.2, true, &n_words,
      &n_forced);
  CHECK_MSG (late == 0, "%d words late with deadlines, queued audio fed at "
      "once", late);
  CHECK_MSG (n_words == N_SCRIPT, "%d words committed for %d, queued audio "
      "fed at once", n_words, N_SCRIPT);
  {
    /* a model unsure of every word (p = 0.3 a token, under
     * LIVE_FORCED_MIN_P): what the deadline forced out before is withheld
     * now, and nothing is late or written twice for it */
    int forced = n_forced;
    CHECK (forced > 0 && n_withheld_seen == 0);
    script_p = 0.3f;
    late = deadline_policy (WK_COMMIT_DEADLINE, 900, 0.2, true, &n_words,
        &n_forced);
    script_p = 0.9f;
    CHECK_MSG (late == 0, "%d words late, unsure words", late);
    CHECK_MSG (n_forced == 0 && n_withheld_seen == forced, "unsure words: "
        "%d written at their deadline (0 expected), %lld withheld (%d "
        "expected)", n_forced, (long long) n_withheld_seen, forced);
    CHECK_MSG (n_words == N_SCRIPT - forced, "unsure words: %d written, %d "
        "expected", n_words, N_SCRIPT - forced);
  }
  /* tighter: 500 ms with runs of 150 ms */
  late = deadline_policy (WK_COMMIT_DEADLINE, 500, 0.15, false, &n_words,
      &n_forced);
  CHECK_MSG (late == 0, "%d words late at 500 ms", late);
  late = deadline_policy (WK_COMMIT_DEADLINE, 500, 0.15, true, &n_words,
      &n_forced);
  CHECK_MSG (late == 0, "%d words late at 500 ms, queued audio fed at once",
      late);
  /* an overloaded machine: runs longer than the latency; words are late
   * but still all there, in order */
  late = deadline_policy (WK_COMMIT_DEADLINE, 500, 0.6, false, &n_words,
      &n_forced);
  CHECK (late > 0);
}

static void
test_script (void)
{
  script_policy (false);
}

static void
test_script_echo (void)
{
  script_policy (true);
}

int
main (void)
{
  char jfk_path[1024];
  wk_wav wav;
  char err[256];

  if (!wk_test_have_model_tools ())
    return 77;
  if (wk_test_make_tmpdir (tmpdir, sizeof tmpdir, "test-live") != 0)
    return 1;
  snprintf (jfk_path, sizeof jfk_path, "%s", wk_test_shared_path ("jfk.wav"));
  memset (&wav, 0, sizeof wav);
  if (wk_test_make_model (tmpdir, "small-test", "f32",
          "for-tests-ggml-tiny.en.bin", NULL, "small", small_knot,
          sizeof small_knot, NULL, 0) != 0
      || wk_model_load (small_knot, NULL, &model, err, sizeof err) != WK_OK
      || wk_wav_read (jfk_path, &wav, err, sizeof err) != WK_OK
      || wav.rate != SR) {
    fprintf (stderr, "cannot prepare the test model or audio: %s\n", err);
    wk_test_remove_tmpdir (tmpdir);
    return 1;
  }
  jfk = wav.samples;
  jfk_n = wav.n_samples;

  RUN (test_helpers);
  RUN (test_results_keep_untaken);
  RUN (test_group_unit);
  RUN (test_group_stream);
  RUN (test_cues_stream);
  RUN (test_queue);
  RUN (test_chunking);
  RUN (test_params);
  RUN (test_script);
  RUN (test_script_echo);
  RUN (test_deadline);
  RUN (test_silence);
  RUN (test_speech);
  RUN (test_no_vad);
  RUN (test_long_latency);
  RUN (test_finish_mid_word);
  RUN (test_flush_reset);
  RUN (test_hour);

  wk_model_unref (model);
  wk_wav_clear (&wav);
  wk_test_remove_tmpdir (tmpdir);
  return TEST_EXIT ();
}
