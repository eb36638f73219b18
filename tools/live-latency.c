/* wk-live-latency: how late the live policy's words are.
 *
 * Plays WAV files (16 kHz mono; several are joined with silence between
 * them, as held-out utterances) at real-time pace, 20 ms per feed, into a
 * stream with the given latency, and compares with the offline
 * transcription (latency 0) of the same audio:
 *
 *   - per word: the word's end time in the offline reference (its token
 *     times), the delay from that moment of the playback to the word's
 *     committed output and to its first appearance in the partial result;
 *   - median and 95th percentile of both delays over the words that
 *     streaming and offline agree on (aligned by edit distance), and the
 *     same against streaming's own word end times for all words;
 *   - the WER of streaming against offline, and with --truth of both
 *     against the true transcripts.
 *
 * The clock for a word's end is the playback schedule (start + sample /
 * 16000), so a feed that is late because a run was still going counts
 * against the policy, as it would on a live source.
 *
 * --virtual plays in virtual time: the clock the policy reads is the
 * playback's, it jumps to each piece's capture time when nothing runs, and
 * a run advances it by a cost model of the run's work (encoder positions,
 * tokens decoded x beam, prompt tokens) instead of by the run's wall time.
 * The words and every delay then depend only on the files, the model and
 * the costs, not on the machine's load, and an hour of audio plays in
 * minutes: one run says whether a change to the policy helps, where real
 * time needs many (the same policy moves by 3-10 points from run to run).
 * A real-time run prints the costs fitted to its own runs.
 *
 * --encoder-bench instead times the encoder on a 30 s window and on
 * shortened audio contexts (the live policy's default).
 *
 * Exit status: 0 done, 1 model/audio failure, 2 bad command line.
 */
#include <ctype.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

#include "live.h"
#include "model.h"
#include "wav.h"
#include "whisperknot.h"
#include "wk-time.h"

#define PROGRAM "wk-live-latency"
#define SR WK_SAMPLE_RATE
#define PIECE 320               /* 20 ms */
#define WORD_MAX 48

typedef struct
{
  char norm[WORD_MAX];          /* lower case, letters digits apostrophes */
  char text[WORD_MAX];
  int64_t start, end;           /* samples */
  double t_commit, t_partial;   /* wall, relative to the playback start */
  int ref;                      /* aligned reference word or -1 */
} word;

typedef struct
{
  word *w;
  int n, cap;
} words;

typedef struct
{
  char norm[WORD_MAX];
  int64_t start;
  double t;
} partial_seen;

static double
cpu_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void
sleep_until (double t)
{
  double d = t - wk_now_s ();
  struct timespec ts;
  if (d <= 0)
    return;
  ts.tv_sec = (time_t) d;
  ts.tv_nsec = (long) ((d - (double) ts.tv_sec) * 1e9);
  nanosleep (&ts, NULL);
}

static void
normalize (const char *s, char *out)
{
  size_t k = 0;
  for (; *s && k + 1 < WORD_MAX; s++) {
    unsigned char c = (unsigned char) *s;
    if (isalnum (c) || c == '\'' || c >= 0x80)
      out[k++] = (char) tolower (c);
  }
  out[k] = '\0';
}

static void
copy_str (char *dst, const char *src)
{
  size_t n = strlen (src);
  if (n > WORD_MAX - 1)
    n = WORD_MAX - 1;
  memcpy (dst, src, n);
  dst[n] = '\0';
}

static word *
words_add (words * ws)
{
  if (ws->n == ws->cap) {
    int cap = ws->cap ? 2 * ws->cap : 256;
    word *w = realloc (ws->w, (size_t) cap * sizeof *w);
    if (!w) {
      fprintf (stderr, PROGRAM ": out of memory\n");
      exit (1);
    }
    ws->w = w;
    ws->cap = cap;
  }
  memset (&ws->w[ws->n], 0, sizeof ws->w[0]);
  ws->w[ws->n].ref = -1;
  return &ws->w[ws->n++];
}

/* Adds the words of a text (split at white space) spanning [start, end),
 * times shared out by length. */
static void
add_text_words (words * ws, const char *text, int64_t start, int64_t end)
{
  char buf[4096], *save = NULL, *t;
  size_t total = 0, cum = 0;

  snprintf (buf, sizeof buf, "%s", text);
  for (t = buf; *t; t++)
    if (!isspace ((unsigned char) *t))
      total++;
  for (t = strtok_r (buf, " \t\n", &save); t; t = strtok_r (NULL, " \t\n",
          &save)) {
    word *w;
    char n[WORD_MAX];
    normalize (t, n);
    if (!n[0])
      continue;
    w = words_add (ws);
    copy_str (w->norm, n);
    copy_str (w->text, t);
    w->start = start + (int64_t) ((end - start) * (double) cum
        / (total ? total : 1));
    cum += strlen (t);
    w->end = start + (int64_t) ((end - start) * (double) cum
        / (total ? total : 1));
  }
}

/* Offline segments -> words with times from their tokens (a word starts
 * at a token beginning with a space). */
static void
add_segment_words (words * ws, const wk_segment * g)
{
  char text[WORD_MAX * 2];
  size_t len = 0;
  int64_t ws0 = 0, we = 0;
  int i;

  for (i = 0; i <= g->n_tokens; i++) {
    const wk_token *t = i < g->n_tokens ? &g->tokens[i] : NULL;
    if (!t || (t->text[0] == ' ' && len > 0)) {
      char n[WORD_MAX];
      text[len] = '\0';
      normalize (text, n);
      if (n[0]) {
        word *w = words_add (ws);
        copy_str (w->norm, n);
        copy_str (w->text, text[0] == ' ' ? text + 1 : text);
        w->start = ws0;
        w->end = we;
      }
      len = 0;
    }
    if (!t)
      break;
    if (len == 0)
      ws0 = t->start;
    {
      size_t tl = strlen (t->text);
      if (len + tl < sizeof text - 1) {
        memcpy (text + len, t->text, tl);
        len += tl;
      }
    }
    we = t->end;
  }
}

/* Edit distance alignment of hyp to ref; sets hyp[i].ref for equal
 * words; returns the number of errors (substitutions + deletions +
 * insertions), or -1 if too large to align. */
static int
align (words * hyp, const words * ref)
{
  int n = hyp->n, m = ref->n, i, j, errors;
  int *d;

  if ((double) (n + 1) * (m + 1) > 6e7)
    return -1;
  d = malloc ((size_t) (n + 1) * (m + 1) * sizeof *d);
  if (!d)
    return -1;
#define D(a, b) d[(size_t) (a) * (m + 1) + (b)]
  for (i = 0; i <= n; i++)
    D (i, 0) = i;
  for (j = 0; j <= m; j++)
    D (0, j) = j;
  for (i = 1; i <= n; i++)
    for (j = 1; j <= m; j++) {
      int sub = D (i - 1, j - 1) + (strcmp (hyp->w[i - 1].norm,
              ref->w[j - 1].norm) != 0);
      int del = D (i - 1, j) + 1, ins = D (i, j - 1) + 1;
      D (i, j) = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
    }
  errors = D (n, m);
  for (i = n, j = m; i > 0 && j > 0;) {
    bool eq = strcmp (hyp->w[i - 1].norm, ref->w[j - 1].norm) == 0;
    if (D (i, j) == D (i - 1, j - 1) + !eq) {
      if (eq)
        hyp->w[i - 1].ref = j - 1;
      i--;
      j--;
    } else if (D (i, j) == D (i - 1, j) + 1) {
      i--;
    } else {
      j--;
    }
  }
#undef D
  free (d);
  return errors;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return x < y ? -1 : x > y;
}

static double
quantile (double *v, int n, double q)
{
  int k;
  if (n <= 0)
    return NAN;
  qsort (v, (size_t) n, sizeof *v, cmp_double);
  k = (int) ceil (q * n) - 1;
  if (k < 0)
    k = 0;
  if (k >= n)
    k = n - 1;
  return v[k];
}

static void
usage (FILE * f)
{
  fprintf (f,
      "usage: " PROGRAM " [OPTION...] FILE.wav...\n"
      "\n"
      "Plays the files (16 kHz mono, joined with silence) at real-time pace\n"
      "into a live stream and prints per-word delays and WER against the\n"
      "offline transcription of the same audio.\n"
      "\n"
      "  -m, --model MODEL     knot file (default: the default model)\n"
      "  -l, --latency MS      live latency setting (default 1000)\n"
      "  -t, --threads N       threads (default 0: the engine's choice)\n"
      "      --gap S           silence between files, seconds (default 1.5)\n"
      "      --audio-ctx N     wk_stream_params.audio_ctx: 0 as the model was\n"
      "                        trained (default), -1 full, -2 short, N at\n"
      "                        least N\n"
      "      --beam-size N     the live runs' beam width (default 0: the\n"
      "                        engine's choice, 3; the offline\n"
      "                        reference always uses the engine's default)\n"
      "      --min-silence MS  vad_min_silence_ms (default: the engine's)\n"
      "      --fast            do not sleep: as fast as possible\n"
      "      --truth FILE      lines 'ID<TAB>...<TAB>text', ID = a file's\n"
      "                        base name without .wav: WER against it too\n"
      "  -q, --quiet           no per-word lines\n"
      "      --commit POLICY   deadline (the default) or agreement\n"
      "                        (wk_stream_params.commit)\n"
      "      --streams N       N streams on the one model, started together\n"
      "                        (default 1)\n"
      "      --sweep           a table instead: latency 500, 1000, 2000 and\n"
      "                        3000 ms, both commit policies\n"
      "      --latencies LIST  the sweep's latencies instead, ms, comma\n"
      "                        separated (at most 8)\n"
      "      --virtual COSTS   virtual time instead of real time: no sleeping,\n"
      "                        and a run takes C0 + C1 x encoder positions +\n"
      "                        C2 x tokens x beam + C3 x prompt tokens ms\n"
      "                        (COSTS = C0,C1,C2,C3; a real-time run prints\n"
      "                        them fitted to its runs), so the same files\n"
      "                        give the same words every time (1 stream)\n"
      "      --encoder-bench   time the encoder on full and shortened\n"
      "                        contexts instead, then exit\n"
      "  -h, --help            this help\n");
}

/* ---- encoder timing --------------------------------------------------- */

static int
encoder_bench (wk_model * model, int n_threads)
{
  static const int ctxs[] = { 0, 1024, 768, 512, 384, 256, 192, 128, 64 };
  wk_ctx *ctx;
  char err[256];
  int W = 2 * model->hp.n_audio_ctx, i, r, n_mels = model->hp.n_mels;
  uint32_t x = 1;

  if (wk_ctx_new (model, n_threads, 1, &ctx, err, sizeof err) != WK_OK) {
    fprintf (stderr, PROGRAM ": %s\n", err);
    return 1;
  }
  for (i = 0; i < n_mels * W; i++) {
    x = x * 1664525u + 1013904223u;
    ctx->mel[i] = (float) ((x >> 8) & 0xffff) / 65536.0f - 0.5f;
  }
  printf ("encoder (n_audio_ctx %d, d %d, %d layers), best of 3:\n",
      model->hp.n_audio_ctx, model->hp.n_audio_state, model->hp.n_audio_layer);
  for (i = 0; i < (int) (sizeof ctxs / sizeof ctxs[0]); i++) {
    double best = 1e9, best_cpu = 1e9;
    int A = ctxs[i] ? ctxs[i] : model->hp.n_audio_ctx;
    if (A > model->hp.n_audio_ctx)
      continue;
    for (r = 0; r < 3; r++) {
      double t0 = wk_now_s (), c0 = cpu_s ();
      ctx->audio_ctx = ctxs[i];
      wk_encode (ctx, ctx->mel, W);
      if (wk_now_s () - t0 < best)
        best = wk_now_s () - t0;
      if (cpu_s () - c0 < best_cpu)
        best_cpu = cpu_s () - c0;
    }
    printf ("  audio_ctx %4d (%5.2f s of audio): %7.1f ms wall, %7.1f ms "
        "CPU\n", A, A * 2.0 * WK_HOP / SR, best * 1e3, best_cpu * 1e3);
  }
  ctx->audio_ctx = 0;
  wk_ctx_free (ctx);
  return 0;
}

/* ---- live playback ------------------------------------------------------ */

/* --virtual: a run's seconds = the cost model's coefficients . x */
#define N_COST 4

/* a live run's work and wall time, for the run cost model */
typedef struct
{
  double x[N_COST];             /* 1, positions, tokens x beam, given */
  double dt;
} run_seen;

/* One live stream playing the program (at real-time pace, or in virtual
 * time). */
typedef struct
{
  wk_model *model;
  const float *audio;
  size_t n_audio;
  wk_stream_params sp;
  bool fast;
  const double *virt;           /* --virtual's cost model, or NULL */
  double vt;                    /* virtual time: the playback's clock */
  run_seen *runs;               /* real time: each run, for the fit */
  int n_runs, runs_cap;
  double t0;                    /* the playback's start (shared) */
  words live;
  partial_seen *ps;
  int n_ps, ps_cap;
  wk_stream_stats st;
  double wall;
  int failed;
  char err[256];
} player;

static void
player_word (player * pl, const wk_segment * g, double t)
{
  word *w;
  char nm[WORD_MAX];
  int q;

  normalize (g->text, nm);
  if (!nm[0])
    return;
  w = words_add (&pl->live);
  copy_str (w->norm, nm);
  copy_str (w->text, g->text[0] == ' ' ? g->text + 1 : g->text);
  w->start = g->start;
  w->end = g->end;
  w->t_commit = t;
  w->t_partial = t;
  for (q = 0; q < pl->n_ps; q++)
    if (!strcmp (pl->ps[q].norm, nm)
        && llabs (pl->ps[q].start - w->start) < SR * 6 / 10
        && pl->ps[q].t < w->t_partial)
      w->t_partial = pl->ps[q].t;
}

static void
player_partial (player * pl, const wk_segment * g, double t, size_t pos)
{
  char nm[WORD_MAX];
  int q;

  normalize (g->text, nm);
  if (!nm[0])
    return;
  for (q = 0; q < pl->n_ps; q++)
    if (!strcmp (pl->ps[q].norm, nm)
        && llabs (pl->ps[q].start - g->start) < SR * 3 / 10)
      return;
  if (pl->n_ps == pl->ps_cap) {
    partial_seen *np;
    int cap = pl->ps_cap ? 2 * pl->ps_cap : 256;
    np = realloc (pl->ps, (size_t) cap * sizeof *np);
    if (!np)
      return;
    pl->ps = np;
    pl->ps_cap = cap;
  }
  copy_str (pl->ps[pl->n_ps].norm, nm);
  pl->ps[pl->n_ps].start = g->start;
  pl->ps[pl->n_ps].t = t;
  pl->n_ps++;
  /* forget partial words long behind */
  if (pl->n_ps > 200) {
    int k2 = 0;
    for (q = 0; q < pl->n_ps; q++)
      if (pl->ps[q].start > (int64_t) pos - 30 * SR)
        pl->ps[k2++] = pl->ps[q];
    pl->n_ps = k2;
  }
}

static void
run_x (const wk_live_run_info * ri, double *x)
{
  x[0] = 1.0;
  x[1] = ri->positions;
  x[2] = (double) ri->n_tokens * (ri->beam_size > 0 ? ri->beam_size : 1);
  x[3] = ri->n_given;
}

static double
virtual_clock (void *user)
{
  return ((player *) user)->vt;
}

/* At each run's end: in virtual time, the run takes what the cost model
 * says; in real time, its work and wall time are kept for the fit. */
static void
run_done (void *user, const wk_live_run_info * ri)
{
  player *pl = user;
  double x[N_COST];
  int i;

  run_x (ri, x);
  if (pl->virt) {
    for (i = 0; i < N_COST; i++)
      pl->vt += pl->virt[i] * x[i];
    return;
  }
  if (pl->n_runs == pl->runs_cap) {
    int cap = pl->runs_cap ? 2 * pl->runs_cap : 256;
    run_seen *nr = realloc (pl->runs, (size_t) cap * sizeof *nr);
    if (!nr)
      return;
    pl->runs = nr;
    pl->runs_cap = cap;
  }
  memcpy (pl->runs[pl->n_runs].x, x, sizeof x);
  pl->runs[pl->n_runs].dt = wk_now_s () - ri->t0;
  pl->n_runs++;
}

/* The playback's clock: virtual or wall, seconds. */
static double
player_now (const player * pl)
{
  return pl->virt ? pl->vt : wk_now_s ();
}

/* Plays the program into a new live stream: each 20 ms piece is fed when
 * its last sample has been "captured" (t0 + its end / 16000), with the
 * capture time of its first sample as its due time, as a live source
 * timestamps it; a piece that is late because a run was still going is
 * fed at once and keeps its due time. */
static void *
play (void *arg)
{
  player *pl = arg;
  wk_stream *s;
  const wk_segment *segs;
  size_t pos, n, j;

  if (wk_stream_new (pl->model, &pl->sp, &s, pl->err, sizeof pl->err)
      != WK_OK) {
    pl->failed = 1;
    return NULL;
  }
  {
    wk_live *lv = wk_stream_live (s);
    if (pl->virt)
      wk_live_set_clock (lv, virtual_clock, pl);
    wk_live_set_run_hook (lv, run_done, pl);
  }
  pl->vt = pl->t0;
  for (pos = 0; pos <= pl->n_audio; pos += PIECE) {
    size_t k = pl->n_audio - pos < PIECE ? pl->n_audio - pos : PIECE;
    double t;
    if (k > 0) {
      double captured = pl->t0 + (double) (pos + k) / SR;
      if (pl->virt && pl->vt < captured)
        pl->vt = captured;      /* wait for the piece (late: at once) */
      else if (!pl->fast && !pl->virt)
        sleep_until (captured);
      if ((pl->fast ? wk_stream_feed (s, pl->audio + pos, k) :
              wk_stream_feed_at (s, pl->audio + pos, k,
                  pl->t0 + (double) pos / SR)) != WK_OK) {
        snprintf (pl->err, sizeof pl->err, "feed failed");
        pl->failed = 1;
        break;
      }
    } else {
      wk_stream_finish (s);
    }
    t = player_now (pl) - pl->t0;
    n = wk_stream_take (s, &segs);
    for (j = 0; j < n; j++)
      if (!segs[j].utterance_end)
        player_word (pl, &segs[j], t);
    n = wk_stream_partial (s, &segs, NULL);
    for (j = 0; j < n; j++)
      player_partial (pl, &segs[j], t, pos);
  }
  pl->wall = player_now (pl) - pl->t0;
  wk_stream_get_stats (s, &pl->st);
  wk_stream_free (s);
  return NULL;
}

/* Plays audio into n_streams streams with parameters sp, started
 * together, one thread each (players pls[n_streams], set up here; free
 * their results with player_clear). virt: the cost model, or NULL for
 * real time. Returns 0, or 1 when a stream failed. */
static int
play_all (player * pls, int n_streams, wk_model * model, const float *audio,
    size_t n_audio, const wk_stream_params * sp, bool fast, const double *virt)
{
  pthread_t *th = calloc ((size_t) n_streams, sizeof *th);
  bool *started = calloc ((size_t) n_streams, sizeof *started);
  double t0 = wk_now_s () + 0.1;
  int i, rc = 0;

  if (!th || !started) {
    free (th);
    free (started);
    return 1;
  }
  for (i = 0; i < n_streams; i++) {
    memset (&pls[i], 0, sizeof pls[i]);
    pls[i].model = model;
    pls[i].audio = audio;
    pls[i].n_audio = n_audio;
    pls[i].sp = *sp;
    pls[i].fast = fast;
    pls[i].virt = virt;
    pls[i].t0 = t0;
    started[i] = pthread_create (&th[i], NULL, play, &pls[i]) == 0;
    if (!started[i]) {
      pls[i].failed = 1;
      snprintf (pls[i].err, sizeof pls[i].err, "cannot start a thread");
    }
  }
  for (i = 0; i < n_streams; i++)
    if (started[i])
      pthread_join (th[i], NULL);
  free (started);
  for (i = 0; i < n_streams; i++)
    if (pls[i].failed) {
      fprintf (stderr, PROGRAM ": stream %d: %s\n", i, pls[i].err);
      rc = 1;
    }
  free (th);
  return rc;
}

static void
player_clear (player * pl)
{
  free (pl->live.w);
  free (pl->ps);
  free (pl->runs);
  memset (&pl->live, 0, sizeof pl->live);
  pl->ps = NULL;
  pl->runs = NULL;
  pl->n_ps = pl->ps_cap = pl->n_runs = pl->runs_cap = 0;
}

/* Over all streams: words committed later than their own start + the
 * latency (a synchronised sink's deadline, PTS + latency), the largest
 * lateness, and the p95 of the delay from a word's start to its text. */
typedef struct
{
  int n_words, n_late;
  double max_late, p95_start, p95_end;
  double wer_off, wer_truth, wer_off_max;
  int64_t n_runs, n_forced, n_slow;
  double run_max, run_est;
} summary;

static void
summarize (player * pls, int n_streams, int latency, words * ref,
    words * truth, summary * sm)
{
  double *ds, *de;
  int i, k, n = 0, total = 0;

  memset (sm, 0, sizeof *sm);
  for (i = 0; i < n_streams; i++)
    total += pls[i].live.n;
  ds = malloc ((size_t) (total + 1) * sizeof *ds);
  de = malloc ((size_t) (total + 1) * sizeof *de);
  for (i = 0; i < n_streams; i++) {
    player *pl = &pls[i];
    int e;
    for (k = 0; k < pl->live.n; k++) {
      const word *w = &pl->live.w[k];
      double late = w->t_commit - ((double) w->start / SR + latency / 1000.0);
      ds[n] = w->t_commit - (double) w->start / SR;
      de[n] = w->t_commit - (double) w->end / SR;
      n++;
      if (late > 0.0) {
        sm->n_late++;
        if (late > sm->max_late)
          sm->max_late = late;
      }
    }
    e = align (&pl->live, ref);
    if (e >= 0 && ref->n > 0) {
      double w = 100.0 * e / ref->n;
      sm->wer_off += w / n_streams;
      if (w > sm->wer_off_max)
        sm->wer_off_max = w;
    }
    if (truth->n > 0)
      sm->wer_truth += 100.0 * align (&pl->live, truth) / truth->n / n_streams;
    sm->n_runs += pl->st.n_runs;
    sm->n_forced += pl->st.n_deadline_commits;
    sm->n_slow += pl->st.n_slow_runs;
    if (pl->st.max_run_seconds > sm->run_max)
      sm->run_max = pl->st.max_run_seconds;
    if (pl->st.run_estimate_seconds > sm->run_est)
      sm->run_est = pl->st.run_estimate_seconds;
  }
  sm->n_words = n;
  sm->p95_start = quantile (ds, n, 0.95);
  sm->p95_end = quantile (de, n, 0.95);
  free (ds);
  free (de);
}

/* Least squares of the runs' wall times on their work (run_x), printed
 * as --virtual's argument, with how well it fits. A cost that comes out
 * negative is dropped (set to 0) and the rest fitted again. */
static void
print_cost_fit (const player * pls, int n_streams)
{
  double c[N_COST], ss = 0.0, sd = 0.0;
  bool use[N_COST];
  int i, j, k, r, n = 0, round;

  for (j = 0; j < N_COST; j++)
    use[j] = true;
  for (round = 0; round < N_COST; round++) {
    double a[N_COST][N_COST + 1] = { {0} };
    bool again = false;
    n = 0;
    for (i = 0; i < n_streams; i++)
      for (r = 0; r < pls[i].n_runs; r++) {
        const run_seen *rs = &pls[i].runs[r];
        for (j = 0; j < N_COST; j++) {
          for (k = 0; k < N_COST; k++)
            a[j][k] += use[j] && use[k] ? rs->x[j] * rs->x[k] : 0.0;
          a[j][N_COST] += use[j] ? rs->x[j] * rs->dt : 0.0;
        }
        n++;
      }
    if (n < 2 * N_COST)
      return;
    /* Gauss-Jordan with partial pivoting; a column of zeros (a cost
     * dropped, or no prompt tokens) gets a zero cost */
    for (j = 0; j < N_COST; j++) {
      int piv = j;
      for (k = j + 1; k < N_COST; k++)
        if (fabs (a[k][j]) > fabs (a[piv][j]))
          piv = k;
      for (k = 0; k <= N_COST; k++) {
        double t = a[j][k];
        a[j][k] = a[piv][k];
        a[piv][k] = t;
      }
      if (fabs (a[j][j]) < 1e-12) {
        for (k = 0; k <= N_COST; k++)
          a[j][k] = 0.0;
        continue;
      }
      for (i = 0; i < N_COST; i++) {
        double f;
        if (i == j)
          continue;
        f = a[i][j] / a[j][j];
        for (k = j; k <= N_COST; k++)
          a[i][k] -= f * a[j][k];
      }
    }
    for (j = 0; j < N_COST; j++) {
      c[j] = a[j][j] != 0.0 ? a[j][N_COST] / a[j][j] : 0.0;
      if (c[j] < 0.0) {
        use[j] = false;
        again = true;
      }
    }
    if (!again)
      break;
  }
  for (j = 0; j < N_COST; j++)
    if (c[j] < 0.0)
      c[j] = 0.0;
  for (i = 0; i < n_streams; i++)
    for (r = 0; r < pls[i].n_runs; r++) {
      const run_seen *rs = &pls[i].runs[r];
      double m = 0.0;
      for (j = 0; j < N_COST; j++)
        m += c[j] * rs->x[j];
      ss += (rs->dt - m) * (rs->dt - m);
      sd += rs->dt;
    }
  printf ("run cost fit over %d runs (mean %.1f ms, rms residual %.1f ms): "
      "--virtual %.3g,%.3g,%.3g,%.3g\n", n, 1e3 * sd / n, 1e3 * sqrt (ss / n),
      1e3 * c[0], 1e3 * c[1], 1e3 * c[2], 1e3 * c[3]);
}

/* ---- main --------------------------------------------------------------- */

int
main (int argc, char **argv)
{
  static const struct option opts[] = {
    {"model", required_argument, NULL, 'm'},
    {"latency", required_argument, NULL, 'l'},
    {"threads", required_argument, NULL, 't'},
    {"gap", required_argument, NULL, 'g'},
    {"audio-ctx", required_argument, NULL, 'a'},
    {"beam-size", required_argument, NULL, 'b'},
    {"min-silence", required_argument, NULL, 's'},
    {"fast", no_argument, NULL, 'f'},
    {"truth", required_argument, NULL, 'T'},
    {"quiet", no_argument, NULL, 'q'},
    {"encoder-bench", no_argument, NULL, 'E'},
    {"commit", required_argument, NULL, 'C'},
    {"streams", required_argument, NULL, 'S'},
    {"sweep", no_argument, NULL, 'W'},
    {"latencies", required_argument, NULL, 'L'},
    {"virtual", required_argument, NULL, 'V'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}
  };
  const char *model_path = NULL, *truth_path = NULL;
  int latency = 1000, threads = 0, audio_ctx = 0, min_silence = -1, c, i;
  int beam = 0, n_streams = 1, lats[8] = { 500, 1000, 2000, 3000 };
  int n_lats = 4;
  bool fast = false, quiet = false, bench = false, sweep = false;
  double virt[N_COST];
  bool use_virt = false;
  wk_commit_policy commit = WK_COMMIT_DEADLINE;
  double gap = 1.5;
  wk_model *model;
  wk_stream_params sp;
  wk_stream *s;
  wk_stream_stats st;
  char err[256];
  float *audio = NULL;
  size_t n_audio = 0, pos;
  words ref = { 0 }, live = { 0 }, truth = { 0 };
  player *pls;
  double t0, c0;
  const wk_segment *segs;
  size_t n;

  while ((c = getopt_long (argc, argv, "m:l:t:qh", opts, NULL)) != -1) {
    switch (c) {
      case 'm':
        model_path = optarg;
        break;
      case 'l':
        latency = atoi (optarg);
        break;
      case 't':
        threads = atoi (optarg);
        break;
      case 'g':
        gap = atof (optarg);
        break;
      case 'a':
        audio_ctx = atoi (optarg);
        break;
      case 'b':
        beam = atoi (optarg);
        break;
      case 's':
        min_silence = atoi (optarg);
        break;
      case 'f':
        fast = true;
        break;
      case 'T':
        truth_path = optarg;
        break;
      case 'q':
        quiet = true;
        break;
      case 'E':
        bench = true;
        break;
      case 'C':
        if (!strcmp (optarg, "deadline"))
          commit = WK_COMMIT_DEADLINE;
        else if (!strcmp (optarg, "agreement"))
          commit = WK_COMMIT_AGREEMENT;
        else {
          usage (stderr);
          return 2;
        }
        break;
      case 'S':
        n_streams = atoi (optarg);
        break;
      case 'W':
        sweep = true;
        break;
      case 'L':{
        char *e = optarg;
        n_lats = 0;
        while (*e && n_lats < 8) {
          long v = strtol (e, &e, 10);
          if (v <= 0 || v > 60000 || (*e && *e != ',')) {
            usage (stderr);
            return 2;
          }
          lats[n_lats++] = (int) v;
          if (*e == ',')
            e++;
        }
        if (n_lats == 0 || *e) {
          usage (stderr);
          return 2;
        }
        break;
      }
      case 'V':{
        char *e = optarg;
        int k;
        for (k = 0; k < N_COST; k++) {
          /* ms in, seconds inside */
          virt[k] = strtod (e, &e) / 1e3;
          if (!isfinite (virt[k]) || virt[k] < 0.0
              || *e != (k < N_COST - 1 ? ',' : '\0')) {
            fprintf (stderr, PROGRAM ": --virtual takes four costs in ms, "
                "C0,C1,C2,C3\n");
            return 2;
          }
          e++;
        }
        use_virt = true;
        break;
      }
      case 'h':
        usage (stdout);
        return 0;
      default:
        usage (stderr);
        return 2;
    }
  }
  if ((optind >= argc && !bench) || latency <= 0 || gap < 0 || gap > 600
      || n_streams < 1 || n_streams > 64) {
    usage (stderr);
    return 2;
  }
  if (use_virt && (n_streams > 1 || fast)) {
    fprintf (stderr, PROGRAM ": --virtual plays one stream, not --fast\n");
    return 2;
  }
  if (!model_path)
    model_path = wk_default_model_path ();
  if (wk_model_load (model_path, NULL, &model, err, sizeof err) != WK_OK) {
    fprintf (stderr, PROGRAM ": %s\n", err);
    return 1;
  }
  if (bench) {
    int rc = encoder_bench (model, threads);
    wk_model_unref (model);
    return rc;
  }

  /* the program: 1 s of silence, the files with gaps, 2 s of silence */
  {
    size_t lead = SR, tail = 2 * SR, g = (size_t) (gap * SR);
    for (i = optind; i < argc; i++) {
      wk_wav wav;
      float *a;
      memset (&wav, 0, sizeof wav);
      if (wk_wav_read (argv[i], &wav, err, sizeof err) != WK_OK) {
        fprintf (stderr, PROGRAM ": %s\n", err);
        return 1;
      }
      if (wav.rate != SR) {
        fprintf (stderr, PROGRAM ": %s: %d Hz, need 16000\n", argv[i],
            wav.rate);
        return 1;
      }
      a = realloc (audio, (n_audio + lead + wav.n_samples + g + tail)
          * sizeof *a);
      if (!a)
        return 1;
      audio = a;
      memset (audio + n_audio, 0, lead * sizeof *a);
      n_audio += lead;
      memcpy (audio + n_audio, wav.samples, wav.n_samples * sizeof *a);
      n_audio += wav.n_samples;
      lead = g;
      wk_wav_clear (&wav);
      if (truth_path) {
        /* the truth line whose ID is this file's base name */
        const char *b = strrchr (argv[i], '/');
        char id[256], line[8192];
        FILE *f = fopen (truth_path, "r");
        b = b ? b + 1 : argv[i];
        snprintf (id, sizeof id, "%s", b);
        if (strlen (id) > 4 && !strcmp (id + strlen (id) - 4, ".wav"))
          id[strlen (id) - 4] = '\0';
        while (f && fgets (line, sizeof line, f)) {
          char *tab = strchr (line, '\t'), *last;
          if (!tab || (size_t) (tab - line) != strlen (id)
              || strncmp (line, id, strlen (id)) != 0)
            continue;
          last = strrchr (line, '\t');
          add_text_words (&truth, last + 1, 0, 0);
          break;
        }
        if (f)
          fclose (f);
      }
    }
    memset (audio + n_audio, 0, tail * sizeof *audio);
    n_audio += tail;
  }

  /* offline reference */
  sp = wk_stream_default_params ();
  sp.n_threads = threads;
  if (wk_stream_new (model, &sp, &s, err, sizeof err) != WK_OK) {
    fprintf (stderr, PROGRAM ": %s\n", err);
    return 1;
  }
  t0 = wk_now_s ();
  wk_stream_feed (s, audio, n_audio);
  wk_stream_finish (s);
  n = wk_stream_take (s, &segs);
  for (pos = 0; pos < n; pos++)
    add_segment_words (&ref, &segs[pos]);
  printf ("# offline: %d words in %.2f s (%.1f s of audio)\n", ref.n,
      wk_now_s () - t0, (double) n_audio / SR);
  wk_stream_free (s);

  /* live, at real-time pace */
  sp.audio_ctx = audio_ctx;
  sp.beam_size = beam;
  if (min_silence >= 0)
    sp.vad_min_silence_ms = min_silence;
  pls = calloc ((size_t) n_streams, sizeof *pls);
  if (!pls)
    return 1;
  if (sweep) {
    int li, pi, lowest = -1;
    double worst_est = 0.0;
    printf ("# %d stream%s, %.1f s of audio each, late = committed after "
        "the word's start + the latency\n", n_streams, n_streams > 1 ? "s" :
        "", (double) n_audio / SR);
    printf ("| latency | commit | WER vs offline | WER vs truth | late words "
        "| worst late | p95 start-to-text | deadline commits | runs | run "
        "max |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    fflush (stdout);
    for (li = 0; li < n_lats; li++)
      for (pi = 0; pi < 2; pi++) {
        summary sm;
        sp.latency_ms = lats[li];
        sp.commit = pi ? WK_COMMIT_DEADLINE : WK_COMMIT_AGREEMENT;
        if (play_all (pls, n_streams, model, audio, n_audio, &sp, fast,
                use_virt ? virt : NULL) != 0)
          return 1;
        summarize (pls, n_streams, lats[li], &ref, &truth, &sm);
        printf ("| %d | %s | %.1f %% | %s%.1f %% | %d / %d | %.2f s | "
            "%.2f s | %lld | %lld | %.3f s |\n", lats[li],
            pi ? "deadline" : "agreement", sm.wer_off, truth.n ? "" : "- ",
            sm.wer_truth, sm.n_late, sm.n_words, sm.max_late, sm.p95_start,
            (long long) sm.n_forced, (long long) sm.n_runs, sm.run_max);
        fflush (stdout);
        if (pi && sm.n_late == 0 && (lowest < 0 || lats[li] < lowest))
          lowest = lats[li];
        if (pi && sm.run_est > worst_est)
          worst_est = sm.run_est;
        for (i = 0; i < n_streams; i++)
          player_clear (&pls[i]);
      }
    /* a word is sure to be in time when one run that starts after its
     * first sample finishes within the latency: two run times (one still
     * going when the word starts, the next), a feed and the push margin */
    printf ("lowest workable latency here (%d stream%s): %s%d ms in this "
        "sweep (the lowest with no late word, deadline policy); from the "
        "run times, about %.0f ms (2 x %.0f ms per run + %d ms + %d ms)\n",
        n_streams, n_streams > 1 ? "s" : "", lowest < 0 ? "none up to " : "",
        lowest < 0 ? lats[n_lats - 1] : lowest,
        2e3 * worst_est + PIECE * 1e3 / SR + WK_PUSH_MARGIN_MS, worst_est * 1e3,
        PIECE * 1000 / SR, WK_PUSH_MARGIN_MS);
    goto out;
  }

  sp.latency_ms = latency;
  sp.commit = commit;
  c0 = cpu_s ();
  if (play_all (pls, n_streams, model, audio, n_audio, &sp, fast,
          use_virt ? virt : NULL) != 0)
    return 1;
  st = pls[0].st;
  live = pls[0].live;
  printf ("# live: latency %d ms, %s commits, %d stream%s, %s, %.1f s wall, "
      "%.1f CPU s, %lld runs, step %.2f s, run max %.3f s, encoder %.1f s, "
      "decoder %.1f s, alignment %.1f s, mel %.1f s, detector %.2f s, "
      "engine max delay %.2f s (stream 0)\n", latency,
      commit == WK_COMMIT_DEADLINE ? "deadline" : "agreement", n_streams,
      n_streams > 1 ? "s" : "", use_virt ? "virtual time" : fast ?
      "as fast as possible" : "real time",
      pls[0].wall, cpu_s () - c0, (long long) st.n_runs, st.step_seconds,
      st.max_run_seconds, st.encoder_seconds, st.decoder_seconds,
      st.align_seconds, st.mel_seconds, st.vad_seconds, st.max_delay_seconds);

  {
    int errors = align (&live, &ref), nm = 0, k;
    double *dc = malloc ((size_t) (live.n + 1) * sizeof *dc);
    double *dp = malloc ((size_t) (live.n + 1) * sizeof *dp);
    double *oc = malloc ((size_t) (live.n + 1) * sizeof *oc);
    double *op = malloc ((size_t) (live.n + 1) * sizeof *op);
    summary sm;

    if (!quiet)
      printf ("# word                 ref_end  commit_delay  partial_delay "
          "(own_end  commit  partial)\n");
    for (k = 0; !quiet && k < live.n; k++) {
      const word *w = &live.w[k];
      double late = w->t_commit - ((double) w->start / SR + latency / 1e3);
      if (late > 0.0)
        printf ("# late: %-20s start %7.2f end %7.2f commit %7.2f: %.2f s "
            "late\n", w->text, (double) w->start / SR, (double) w->end / SR,
            w->t_commit, late);
    }
    for (k = 0; k < live.n; k++) {
      const word *w = &live.w[k];
      double own = (double) w->end / SR;
      oc[k] = w->t_commit - own;
      op[k] = w->t_partial - own;
      if (w->ref >= 0) {
        double e = (double) ref.w[w->ref].end / SR;
        dc[nm] = w->t_commit - e;
        dp[nm] = w->t_partial - e;
        if (!quiet)
          printf ("%-20s %8.2f %13.2f %14.2f  (%7.2f %7.2f %8.2f)\n",
              w->text, e, dc[nm], dp[nm], own, oc[k], op[k]);
        nm++;
      } else if (!quiet) {
        printf ("%-20s %8s %13s %14s  (%7.2f %7.2f %8.2f)\n", w->text, "-",
            "-", "-", own, oc[k], op[k]);
      }
    }
    printf ("words: %d live, %d offline, %d matched\n", live.n, ref.n, nm);
    if (nm > 0) {
      double mc = quantile (dc, nm, 0.5), pc = quantile (dc, nm, 0.95);
      double mp = quantile (dp, nm, 0.5), pp = quantile (dp, nm, 0.95);
      printf ("delay vs offline word ends (matched words): committed median "
          "%.2f s, p95 %.2f s; first partial median %.2f s, p95 %.2f s\n",
          mc, pc, mp, pp);
    }
    if (live.n > 0) {
      double mc = quantile (oc, live.n, 0.5), pc = quantile (oc, live.n, 0.95);
      double mp = quantile (op, live.n, 0.5), pp = quantile (op, live.n, 0.95);
      printf ("delay vs the live words' own end times (all words): committed "
          "median %.2f s, p95 %.2f s; first partial median %.2f s, p95 %.2f "
          "s\n", mc, pc, mp, pp);
    }
    if (errors >= 0 && ref.n > 0)
      printf ("WER live vs offline: %.1f %% (%d errors / %d words)\n",
          100.0 * errors / ref.n, errors, ref.n);
    if (truth.n > 0) {
      int e1 = align (&live, &truth), e2 = align (&ref, &truth);
      printf ("WER vs truth: live %.1f %%, offline %.1f %% (%d words)\n",
          100.0 * e1 / truth.n, 100.0 * e2 / truth.n, truth.n);
    }
    summarize (pls, n_streams, latency, &ref, &truth, &sm);
    printf ("late (committed after the word's start + %d ms), all streams: "
        "%d of %d words, worst %.2f s late; %lld deadline commits; %lld of "
        "%lld runs slow; p95 start-to-text %.2f s; WER vs offline mean "
        "%.1f %%, worst stream %.1f %%\n", latency, sm.n_late, sm.n_words,
        sm.max_late, (long long) sm.n_forced, (long long) sm.n_slow,
        (long long) sm.n_runs, sm.p95_start, sm.wer_off, sm.wer_off_max);
    free (dc);
    free (dp);
    free (oc);
    free (op);
  }
  if (!use_virt)
    print_cost_fit (pls, n_streams);
  for (i = 0; i < n_streams; i++)
    player_clear (&pls[i]);
out:
  free (pls);
  wk_model_unref (model);
  free (audio);
  free (ref.w);
  free (truth.w);
  return 0;
}
