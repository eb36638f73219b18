/* whisperknot-bench: stage and end-to-end timings of the engine, optionally
 * side by side with whisper.cpp on the same model, audio and thread count.
 *
 *   whisperknot-bench -m MODEL.knot -f AUDIO.wav [-t THREADS] [-r RUNS]
 *       [--whispercpp BUILD/bin --ggml MODEL.bin] [options]
 *
 * Every measurement runs in a child process so that each side's peak RSS
 * (wait4's ru_maxrss) is its own and the parent stays small:
 *
 * - our stages: this program re-run with --child stages; after one untimed
 *   warm-up it times, per run, the log-mel of a 30 s window
 *   (wk_model_window_mel), one encoder pass over it (wk_encode: conv,
 *   blocks and the cross-attention K/V of every decoder layer) and the
 *   mean of STEPS one-token decoder steps (wk_decoder_eval with logits) at
 *   n_past = PAST .. PAST+STEPS-1 after filling the KV cache with PAST
 *   tokens. These are the engine's internal entry points (model.h).
 * - our end-to-end: --child e2e loads the model and transcribes the file
 *   through the public API (wk_stream_new, feed, finish, take), greedy.
 * - whisper.cpp's stages: wk-whispercpp-stages (tools/whispercpp-stages.c,
 *   built by tools/whispercpp-build.sh) with the same protocol through
 *   whisper.h; without it, whisper-bench (its own protocol, labelled).
 * - whisper.cpp's end-to-end: whisper-cli -bs 1 -bo 1 (greedy), parsed
 *   from whisper_print_timings: total - load.
 *
 * The 30 s window is the first 30 s of the file, zero-padded. Temperature
 * fallback is off on both sides unless --fallback. Figures are printed,
 * never judged: this is a measuring tool, not a test.
 *
 * Many live streams, instead of all the above:
 *
 *   whisperknot-bench --live-streams N[,N2,...] -m MODEL.knot -f AUDIO.wav
 *       [-t THREADS] [--latency MS] [--fast]
 *
 * For each N, --child live plays the file into N live streams of one
 * loaded model (a thread per stream, wk_stream_feed_at in 100 ms pieces at
 * real-time pace, taking the committed words after every feed), then N
 * such children with one stream each play it together, each on its own
 * loaded model. The children start playing at once when the parent closes
 * the pipe on their stdin, and report over their stdout. One table row per
 * N holds both, shared / separate: CPU seconds per stream per audio second
 * (getrusage over the playback), the median, p95 and worst commit delay
 * (a word taken from the engine against the feed of its last sample),
 * which streams kept up, and the ratio of the CPU figures; live_definitions
 * below (also printed) says exactly what each figure is.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "whisperknot.h"
#include "kernels.h"
#include "model.h"
#include "wav.h"

#define MAX_VALUES 256
#define MAX_METRICS 48
#define TEXT_MAX 8192
#define LIVE_MAX_N 16           /* values in --live-streams */
#define LIVE_MAX_STREAMS 64     /* the largest of them */
#define LIVE_CHUNK (WK_SAMPLE_RATE / 10)        /* samples per feed: 100 ms */

typedef struct
{
  const char *model;
  const char *audio;
  const char *wcpp_dir;
  const char *ggml;
  const char *language;
  const char *child;
  int threads;
  int runs;
  int e2e_runs;
  int past;
  int steps;
  bool fallback;
  bool no_stages;
  bool no_e2e;
  /* --live-streams: the stream counts to measure (a --child live process:
   * its own count, live_n[0]) */
  int live_n[LIVE_MAX_N];
  int n_live;
  int latency;
  bool fast;
} options;

/* ---- small helpers ------------------------------------------------------ */

static double
now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int
parse_int (const char *s, int min, int max, int *out)
{
  char *end;
  long v;

  errno = 0;
  v = strtol (s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
    return -1;
  *out = (int) v;
  return 0;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return (x > y) - (x < y);
}

/* ---- collected figures: key -> values ----------------------------------- */

typedef struct
{
  char key[40];
  double v[MAX_VALUES];
  int n;
} metric;

typedef struct
{
  metric m[MAX_METRICS];
  int n;
  char text[TEXT_MAX];
  char info[TEXT_MAX];
  bool ok;
  long maxrss_kb;               /* largest over the runs */
} results;

static metric *
results_get (results * r, const char *key, bool create)
{
  int i;

  for (i = 0; i < r->n; i++)
    if (strcmp (r->m[i].key, key) == 0)
      return &r->m[i];
  if (!create || r->n >= MAX_METRICS)
    return NULL;
  snprintf (r->m[r->n].key, sizeof r->m[r->n].key, "%s", key);
  r->m[r->n].n = 0;
  return &r->m[r->n++];
}

static void
results_add (results * r, const char *key, double v)
{
  metric *m = results_get (r, key, true);

  if (m && m->n < MAX_VALUES)
    m->v[m->n++] = v;
}

/* Median and minimum of a metric; false if there is none. */
static bool
results_stat (results * r, const char *key, double *median, double *min)
{
  metric *m = results_get (r, key, false);
  double s[MAX_VALUES];

  if (!m || m->n == 0)
    return false;
  memcpy (s, m->v, m->n * sizeof s[0]);
  qsort (s, m->n, sizeof s[0], cmp_double);
  *median = m->n % 2 ? s[m->n / 2] : 0.5 * (s[m->n / 2 - 1] + s[m->n / 2]);
  *min = s[0];
  return true;
}

static void
append_text (char *dst, const char *src)
{
  size_t len = strlen (dst);

  snprintf (dst + len, TEXT_MAX - len, "%s", src);
}

/* ---- child processes ---------------------------------------------------- */

/* user + system CPU time of a child, ms */
static double
cpu_ms (const struct rusage *ru)
{
  return (ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1e3
      + (ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) / 1e3;
}

/* Runs argv with stdout and stderr sent to files; returns its exit status
 * (-1 if it could not run or died from a signal). */
static int
spawn (char *const argv[], const char *out_path, const char *err_path,
    struct rusage *ru, double *wall_ms)
{
  pid_t pid;
  int status;
  double t0 = now_ms ();

  fflush (stdout);
  fflush (stderr);
  pid = fork ();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    int in = open ("/dev/null", O_RDONLY);
    int out = open (out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open (err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

    if (in < 0 || out < 0 || err < 0 || dup2 (in, 0) < 0 || dup2 (out, 1) < 0
        || dup2 (err, 2) < 0)
      _exit (127);
    execv (argv[0], argv);
    _exit (127);
  }
  while (wait4 (pid, &status, 0, ru) < 0)
    if (errno != EINTR)
      return -1;
  *wall_ms = now_ms () - t0;
  if (!WIFEXITED (status))
    return -1;
  return WEXITSTATUS (status);
}

/* Reads "WKB key value" lines (and "WKB text ..." / "WKB info ...")
 * from a child's stdout. */
static void
parse_wkb (const char *path, results * r)
{
  FILE *f = fopen (path, "r");
  char line[TEXT_MAX];

  if (!f)
    return;
  while (fgets (line, sizeof line, f)) {
    char key[40];
    double v;
    int n = 0;

    line[strcspn (line, "\n")] = '\0';
    if (strncmp (line, "WKB text ", 9) == 0) {
      snprintf (r->text, sizeof r->text, "%s", line + 9);
    } else if (strncmp (line, "WKB info ", 9) == 0) {
      if (r->info[0] == '\0')
        snprintf (r->info, sizeof r->info, "%s", line + 9);
    } else if (sscanf (line, "WKB %39s %lf%n", key, &v, &n) == 2 && n > 0) {
      results_add (r, key, v);
    }
  }
  fclose (f);
}

static void
show_tail (const char *path)
{
  FILE *f = fopen (path, "r");
  char line[1024];
  char last[8][1024];
  int n = 0, i;

  if (!f)
    return;
  while (fgets (line, sizeof line, f))
    snprintf (last[n++ % 8], sizeof last[0], "%s", line);
  fclose (f);
  for (i = n > 8 ? n - 8 : 0; i < n; i++)
    fprintf (stderr, "    | %s", last[i % 8]);
}

/* whisper_print_timings lines: "...: NAME time = X ms / N runs (...)". */
static void
parse_whisper_timings (const char *err_path, const char *out_path, results * r)
{
  static const char *names[] = { "load", "mel", "sample", "encode",
    "decode", "batchd", "prompt", "total"
  };
  FILE *f = fopen (err_path, "r");
  char line[TEXT_MAX];
  double decode_ms = 0.0, run_total = 0.0;
  bool have_total = false, have_load = false;
  double load = 0.0, total = 0.0;
  size_t i;

  if (!f)
    return;
  while (fgets (line, sizeof line, f)) {
    const char *p;

    if ((p = strstr (line, "model size")) && (p = strchr (p, '='))) {
      double mb;
      if (sscanf (p + 1, "%lf MB", &mb) == 1)
        results_add (r, "model_mb", mb);
      continue;
    }
    if (!strstr (line, "whisper_print_timings"))
      continue;
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
      char pat[32];
      double ms;
      int runs;

      snprintf (pat, sizeof pat, " %s time =", names[i]);
      if (!(p = strstr (line, pat)))
        continue;
      p += strlen (pat);
      if (sscanf (p, "%lf ms / %d runs", &ms, &runs) == 2) {
        char key[40];
        snprintf (key, sizeof key, "%s_ms", names[i]);
        results_add (r, key, ms);
        snprintf (key, sizeof key, "%s_runs", names[i]);
        results_add (r, key, runs);
        if (strcmp (names[i], "decode") == 0 || strcmp (names[i], "batchd") == 0
            || strcmp (names[i], "prompt") == 0
            || strcmp (names[i], "sample") == 0)
          decode_ms += ms;
      } else if (sscanf (p, "%lf", &ms) == 1) {
        char key[40];
        snprintf (key, sizeof key, "%s_ms", names[i]);
        results_add (r, key, ms);
        if (strcmp (names[i], "load") == 0) {
          load = ms;
          have_load = true;
        } else if (strcmp (names[i], "total") == 0) {
          total = ms;
          have_total = true;
        }
      }
    }
  }
  fclose (f);
  if (have_total && have_load) {
    run_total = total - load;
    results_add (r, "e2e_ms", run_total);
    results_add (r, "dec_total_ms", decode_ms);
  }

  /* The transcript: stdout lines, "[t0 --> t1]  text" or plain text. */
  r->text[0] = '\0';
  f = fopen (out_path, "r");
  if (!f)
    return;
  while (fgets (line, sizeof line, f)) {
    char *p = line;

    line[strcspn (line, "\n")] = '\0';
    if (*p == '[' && strstr (p, "-->") && strchr (p, ']'))
      p = strchr (p, ']') + 1;
    while (*p == ' ')
      p++;
    if (*p == '\0')
      continue;
    if (r->text[0])
      append_text (r->text, " ");
    append_text (r->text, p);
  }
  fclose (f);
}

/* ---- the children: our engine ------------------------------------------- */

/* Bytes of the model file resident in this process: the Rss of its
 * mappings in /proc/self/smaps. */
static uint64_t
mapped_rss_bytes (const char *path)
{
  char real[PATH_MAX], line[PATH_MAX + 256];
  FILE *f;
  bool in_map = false;
  uint64_t total = 0;

  if (!realpath (path, real) || !(f = fopen ("/proc/self/smaps", "r")))
    return 0;
  while (fgets (line, sizeof line, f)) {
    unsigned long lo, hi, off, inode;
    unsigned maj, min;
    char perms[8];
    int n = 0;

    line[strcspn (line, "\n")] = '\0';
    if (sscanf (line, "%lx-%lx %7s %lx %x:%x %lu %n", &lo, &hi, perms, &off,
            &maj, &min, &inode, &n) == 7 && n > 0) {
      in_map = strcmp (line + n, real) == 0;
    } else if (in_map && strncmp (line, "Rss:", 4) == 0) {
      unsigned long kb;
      if (sscanf (line + 4, "%lu", &kb) == 1)
        total += ((uint64_t) kb) * 1024;
    }
  }
  fclose (f);
  return total;
}

/* what: NULL where err names the file already (wk_wav_read's messages) */
static int
child_fail (const char *what, const char *err)
{
  fprintf (stderr, "whisperknot-bench: %s%s%s\n", what ? what : "",
      what ? ": " : "", err ? err : "");
  return 1;
}

static int
child_stages (const options * o)
{
  char err[512];
  wk_model *model = NULL;
  wk_model_params mp = wk_model_default_params ();
  wk_ctx *ctx = NULL;
  wk_wav wav;
  wk_model_info info;
  const wk_hparams *hp;
  float *window, *mel, *logits;
  int32_t *tokens;
  int r, i, ld, tok_range;
  double t0;

  t0 = now_ms ();
  if (wk_model_load (o->model, &mp, &model, err, sizeof err) != WK_OK)
    return child_fail (strstr (err, o->model) ? NULL : o->model, err);
  printf ("WKB load_ms %.3f\n", now_ms () - t0);
  if (wk_wav_read (o->audio, &wav, err, sizeof err) != WK_OK)
    return child_fail (NULL, err);

  hp = &model->hp;
  wk_model_get_info (model, &info);
  printf ("WKB info %s weights, %.1f M params, %.1f MB file, kernels %s\n",
      wk_type_name (model->enc[0].attn_q->type), info.n_params / 1e6,
      info.file_bytes / 1e6, wk_kernels_name ());
  if (o->past + o->steps > hp->n_text_ctx)
    return child_fail ("--past + --steps", "larger than the text context");

  ld = 2 * hp->n_audio_ctx;
  window = calloc (WK_N_SAMPLES, sizeof *window);
  mel = calloc ((size_t) hp->n_mels * ld, sizeof *mel);
  logits = malloc ((size_t) hp->n_vocab * sizeof *logits);
  tokens = malloc ((size_t) (o->past + o->steps) * sizeof *tokens);
  if (!window || !mel || !logits || !tokens)
    return child_fail ("stages", "out of memory");
  memcpy (window, wav.samples, (wav.n_samples < WK_N_SAMPLES ?
          wav.n_samples : WK_N_SAMPLES) * sizeof *window);

  /* The same token pattern as wk-whispercpp-stages: values do not change
   * the work done. */
  tok_range = hp->n_vocab < 50000 ? hp->n_vocab : 50000;
  tokens[0] = model->sp.sot;
  for (i = 1; i < o->past + o->steps; i++)
    tokens[i] = (int32_t) ((i * 7919) % tok_range);

  if (wk_ctx_new (model, o->threads, 1, &ctx, err, sizeof err) != WK_OK)
    return child_fail ("context", err);
  printf ("WKB ctx_state_bytes %.0f\n", (double) wk_ctx_state_bytes (ctx));

  /* Run 0 is the warm-up and is not reported. */
  for (r = 0; r <= o->runs; r++) {
    double t_mel, t_enc, t_dec;

    t0 = now_ms ();
    wk_model_window_mel (model, window, WK_N_SAMPLES, 0, WK_N_FRAMES, mel);
    t_mel = now_ms () - t0;

    t0 = now_ms ();
    if (wk_encode (ctx, mel, ld) != WK_OK)
      return child_fail ("wk_encode", "failed");
    t_enc = now_ms () - t0;

    if (wk_decoder_eval (ctx, 0, tokens, o->past, 0, logits, 1) != WK_OK)
      return child_fail ("wk_decoder_eval", "failed");
    t0 = now_ms ();
    for (i = 0; i < o->steps; i++)
      if (wk_decoder_eval (ctx, 0, tokens + o->past + i, 1, o->past + i,
              logits, 1) != WK_OK)
        return child_fail ("wk_decoder_eval", "failed");
    t_dec = (now_ms () - t0) / o->steps;

    if (r > 0) {
      printf ("WKB mel_ms %.3f\n", t_mel);
      printf ("WKB encoder_ms %.3f\n", t_enc);
      printf ("WKB decstep_ms %.3f\n", t_dec);
      fflush (stdout);
    }
  }

  wk_ctx_free (ctx);
  wk_model_unref (model);
  wk_wav_clear (&wav);
  free (window);
  free (mel);
  free (logits);
  free (tokens);
  return 0;
}

static int
child_e2e (const options * o)
{
  char err[512];
  char *text;
  wk_model *model = NULL;
  wk_model_params mp = wk_model_default_params ();
  wk_stream_params sp = wk_stream_default_params ();
  wk_stream *s = NULL;
  wk_stream_stats st;
  wk_model_info info;
  const wk_segment *segs;
  wk_wav wav;
  size_t n_segs, i;
  double t0, t_e2e;
  int64_t n_text_tokens = 0;

  if (wk_wav_read (o->audio, &wav, err, sizeof err) != WK_OK)
    return child_fail (NULL, err);
  t0 = now_ms ();
  if (wk_model_load (o->model, &mp, &model, err, sizeof err) != WK_OK)
    return child_fail (strstr (err, o->model) ? NULL : o->model, err);
  printf ("WKB load_ms %.3f\n", now_ms () - t0);

  sp.language = o->language;
  sp.n_threads = o->threads;
  sp.beam_size = 1;
  if (!o->fallback)
    sp.temperature_inc = 0.0f;

  text = calloc (1, TEXT_MAX);
  if (!text)
    return child_fail ("e2e", "out of memory");

  /* Timed: stream setup, all audio, end of stream, results. */
  t0 = now_ms ();
  if (wk_stream_new (model, &sp, &s, err, sizeof err) != WK_OK)
    return child_fail ("wk_stream_new", err);
  if (wk_stream_feed (s, wav.samples, wav.n_samples) != WK_OK
      || wk_stream_finish (s) != WK_OK)
    return child_fail ("transcription", "failed");
  n_segs = wk_stream_take (s, &segs);
  t_e2e = now_ms () - t0;
  for (i = 0; i < n_segs; i++) {
    append_text (text, segs[i].text);
    n_text_tokens += segs[i].n_tokens;
  }
  for (i = 0; text[i]; i++)
    if (text[i] == '\n' || text[i] == '\r')
      text[i] = ' ';

  wk_stream_get_stats (s, &st);
  wk_model_get_info (model, &info);
  printf ("WKB e2e_ms %.3f\n", t_e2e);
  printf ("WKB mel_ms %.3f\n", st.mel_seconds * 1e3);
  printf ("WKB encode_ms %.3f\n", st.encoder_seconds * 1e3);
  printf ("WKB dec_total_ms %.3f\n", st.decoder_seconds * 1e3);
  printf ("WKB encode_runs %.0f\n", (double) st.n_windows);
  printf ("WKB decode_runs %.0f\n", (double) st.n_tokens);
  printf ("WKB text_tokens %.0f\n", (double) n_text_tokens);
  printf ("WKB state_bytes %.0f\n", (double) st.state_bytes);
  printf ("WKB model_file_bytes %.0f\n", (double) info.file_bytes);
  printf ("WKB model_rss_bytes %.0f\n", (double) mapped_rss_bytes (o->model));
  printf ("WKB text %s\n", text[0] == ' ' ? text + 1 : text);

  wk_stream_free (s);
  wk_model_unref (model);
  wk_wav_clear (&wav);
  free (text);
  return 0;
}

/* ---- the children: live streams (--live-streams) ------------------------ */

/* Sleeps until t on the engine's clock (wk_clock_seconds: CLOCK_MONOTONIC). */
static void
sleep_until_s (double t)
{
  struct timespec ts;

  if (t <= wk_clock_seconds ())
    return;
  ts.tv_sec = (time_t) t;
  ts.tv_nsec = (long) ((t - (double) ts.tv_sec) * 1e9);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  while (clock_nanosleep (CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR);
}

/* One stream of a --child live process, played by its own thread. */
typedef struct
{
  wk_model *model;
  const float *pcm;
  size_t n;
  const options *o;
  pthread_barrier_t *barrier;
  const double *t0;             /* the playback's start: read after the
                                 * second barrier */
  double *fed_at;               /* per 100 ms piece: when its feed began */
  double *delay;                /* per committed word */
  size_t n_delay, cap_delay;
  double feed_lag;              /* the latest feed against its schedule */
  double final_lag;             /* final text after the audio's end */
  int64_t n_late;               /* the engine's count (wk_stream_stats) */
  bool failed;
  char err[256];
} live_player;

static wk_stream_params
live_params (const options * o)
{
  wk_stream_params sp = wk_stream_default_params ();

  sp.language = o->language;
  sp.n_threads = o->threads;
  sp.latency_ms = o->latency;
  if (!o->fallback)
    sp.temperature_inc = 0.0f;
  return sp;
}

/* Takes the committed words after a feed (fed: samples fed so far) and
 * records each one's delay from the feed that brought its last sample. */
static void
live_take (live_player * p, wk_stream * s, size_t fed)
{
  const wk_segment *segs;
  size_t n = wk_stream_take (s, &segs), i;
  double t = wk_clock_seconds ();

  for (i = 0; i < n; i++) {
    int64_t end = segs[i].end;

    if (segs[i].utterance_end)
      continue;
    /* a word may reach past the audio fed: it counts from the last feed */
    if (end > (int64_t) fed)
      end = (int64_t) fed;
    if (end < 1)
      end = 1;
    if (p->n_delay == p->cap_delay) {
      size_t cap = p->cap_delay ? 2 * p->cap_delay : 256;
      double *d = realloc (p->delay, cap * sizeof *d);

      if (!d) {
        snprintf (p->err, sizeof p->err, "out of memory");
        p->failed = true;
        return;
      }
      p->delay = d;
      p->cap_delay = cap;
    }
    p->delay[p->n_delay++] = t - p->fed_at[(end - 1) / LIVE_CHUNK];
  }
}

/* Feeds the audio in 100 ms pieces, each when its last sample would have
 * been captured (start + its end / 16 kHz) and with its first sample's
 * capture time as its due time, as a live source would; a piece that is
 * late because a model run was still going is fed at once and keeps its
 * due time. --fast feeds at once and without due times. */
static void *
live_play (void *arg)
{
  live_player *p = arg;
  wk_stream_params sp = live_params (p->o);
  wk_stream *s = NULL;
  wk_stream_stats st;
  size_t pos, c;
  double t0;

  if (wk_stream_new (p->model, &sp, &s, p->err, sizeof p->err) != WK_OK)
    p->failed = true;
  pthread_barrier_wait (p->barrier);    /* every stream made */
  pthread_barrier_wait (p->barrier);    /* go: *p->t0 is set */
  if (p->failed)
    return NULL;
  t0 = *p->t0;
  for (pos = 0, c = 0; pos < p->n && !p->failed; pos += LIVE_CHUNK, c++) {
    size_t k = p->n - pos < LIVE_CHUNK ? p->n - pos : LIVE_CHUNK;
    double due = t0 + (double) (pos + k) / WK_SAMPLE_RATE;
    wk_status rc;

    if (!p->o->fast)
      sleep_until_s (due);
    p->fed_at[c] = wk_clock_seconds ();
    if (p->fed_at[c] - due > p->feed_lag)
      p->feed_lag = p->fed_at[c] - due;
    rc = p->o->fast ? wk_stream_feed (s, p->pcm + pos, k) :
        wk_stream_feed_at (s, p->pcm + pos, k,
        t0 + (double) pos / WK_SAMPLE_RATE);
    if (rc != WK_OK) {
      snprintf (p->err, sizeof p->err, "feed: %s", wk_status_str (rc));
      p->failed = true;
    } else {
      live_take (p, s, pos + k);
    }
  }
  if (!p->failed) {
    wk_status rc = wk_stream_finish (s);

    if (rc != WK_OK) {
      snprintf (p->err, sizeof p->err, "finish: %s", wk_status_str (rc));
      p->failed = true;
    } else {
      live_take (p, s, p->n);
    }
  }
  p->final_lag = wk_clock_seconds () - (t0 + (double) p->n / WK_SAMPLE_RATE);
  wk_stream_get_stats (s, &st);
  p->n_late = st.n_late;
  wk_stream_free (s);
  return NULL;
}

/* N streams (live_n[0]) of one loaded model, one thread each. Protocol
 * with the parent: "WKL ready" on stdout once the model is loaded and
 * every stream made, then playback starts when stdin reaches its end (the
 * parent closes it for all its children at once); afterwards "WKL run
 * CPU_S AUDIO_S WALL_S", per stream "WKL stream FEED_LAG FINAL_LAG N_LATE
 * N_WORDS" and per committed word "WKL delay S". */
static int
child_live (const options * o)
{
  char err[512];
  wk_model *model = NULL;
  wk_model_params mp = wk_model_default_params ();
  wk_model_info info;
  wk_wav wav;
  live_player *pl;
  pthread_t *th;
  pthread_barrier_t barrier;
  struct rusage ru0, ru1;
  double t0 = 0.0, wall;
  size_t n_chunks;
  int n = o->live_n[0], i, j;
  char c;
  ssize_t got;

  if (o->n_live != 1)
    return child_fail ("--child live", "needs one --live-streams N");
  if (wk_model_load (o->model, &mp, &model, err, sizeof err) != WK_OK)
    return child_fail (strstr (err, o->model) ? NULL : o->model, err);
  if (wk_wav_read (o->audio, &wav, err, sizeof err) != WK_OK)
    return child_fail (NULL, err);
  if (wav.rate != WK_SAMPLE_RATE || wav.n_samples == 0)
    return child_fail (o->audio, "need 16 kHz audio, not empty");
  wk_model_get_info (model, &info);
  printf ("WKL info %s weights, %.1f M params, kernels %s\n",
      wk_type_name (model->enc[0].attn_q->type), info.n_params / 1e6,
      wk_kernels_name ());

  n_chunks = (wav.n_samples + LIVE_CHUNK - 1) / LIVE_CHUNK;
  pl = calloc ((size_t) n, sizeof *pl);
  th = calloc ((size_t) n, sizeof *th);
  if (!pl || !th || pthread_barrier_init (&barrier, NULL, (unsigned) n + 1))
    return child_fail ("live", "out of memory");
  for (i = 0; i < n; i++) {
    pl[i].model = model;
    pl[i].pcm = wav.samples;
    pl[i].n = wav.n_samples;
    pl[i].o = o;
    pl[i].barrier = &barrier;
    pl[i].t0 = &t0;
    pl[i].fed_at = calloc (n_chunks, sizeof *pl[i].fed_at);
    if (!pl[i].fed_at)
      return child_fail ("live", "out of memory");
  }
  /* (returning from here on ends the process, its threads with it) */
  for (i = 0; i < n; i++)
    if (pthread_create (&th[i], NULL, live_play, &pl[i]) != 0)
      return child_fail ("live", "cannot start a thread");
  pthread_barrier_wait (&barrier);
  for (i = 0; i < n; i++)
    if (pl[i].failed)
      return child_fail ("wk_stream_new", pl[i].err);
  printf ("WKL ready\n");
  fflush (stdout);
  while ((got = read (0, &c, 1)) > 0 || (got < 0 && errno == EINTR));

  getrusage (RUSAGE_SELF, &ru0);
  t0 = wk_clock_seconds ();
  pthread_barrier_wait (&barrier);
  for (i = 0; i < n; i++)
    pthread_join (th[i], NULL);
  getrusage (RUSAGE_SELF, &ru1);
  wall = wk_clock_seconds () - t0;

  for (i = 0; i < n; i++)
    if (pl[i].failed)
      return child_fail ("live stream", pl[i].err);
  printf ("WKL run %.6f %.6f %.6f\n", (cpu_ms (&ru1) - cpu_ms (&ru0)) / 1e3,
      (double) wav.n_samples / WK_SAMPLE_RATE, wall);
  for (i = 0; i < n; i++) {
    printf ("WKL stream %.6f %.6f %lld %zu\n", pl[i].feed_lag,
        pl[i].final_lag, (long long) pl[i].n_late, pl[i].n_delay);
    for (j = 0; j < (int) pl[i].n_delay; j++)
      printf ("WKL delay %.6f\n", pl[i].delay[j]);
    free (pl[i].delay);
    free (pl[i].fed_at);
  }
  pthread_barrier_destroy (&barrier);
  free (pl);
  free (th);
  wk_model_unref (model);
  wk_wav_clear (&wav);
  return fflush (stdout) == 0 ? 0 : 1;
}

/* ---- the parent --------------------------------------------------------- */

typedef struct
{
  char dir[64];
  char self[PATH_MAX];
  char out[128], err[128], pcm[128];
} workspace;

/* Reads a file once so every side starts from a warm page cache. */
static void
warm_file (const char *path)
{
  char buf[1 << 16];
  int fd = open (path, O_RDONLY);

  if (fd < 0)
    return;
  while (read (fd, buf, sizeof buf) > 0);
  close (fd);
}

static void
loadavg (char *buf, size_t size)
{
  FILE *f = fopen ("/proc/loadavg", "r");
  double a = 0;

  if (f && fscanf (f, "%lf", &a) == 1)
    snprintf (buf, size, "%.2f", a);
  else
    snprintf (buf, size, "?");
  if (f)
    fclose (f);
}

/* The arguments every --child run of this program starts with: the
 * mode, the model, the audio, the threads (printed into threads) and the
 * language. Returns how many it put in argv. */
static int
child_argv (const workspace * w, const options * o, const char *mode,
    char threads[16], char **argv)
{
  int k = 0;

  snprintf (threads, 16, "%d", o->threads);
  argv[k++] = (char *) w->self;
  argv[k++] = (char *) "--child";
  argv[k++] = (char *) mode;
  argv[k++] = (char *) "-m";
  argv[k++] = (char *) o->model;
  argv[k++] = (char *) "-f";
  argv[k++] = (char *) o->audio;
  argv[k++] = (char *) "-t";
  argv[k++] = threads;
  argv[k++] = (char *) "-l";
  argv[k++] = (char *) (o->language ? o->language : "auto");
  return k;
}

static bool
run_ours (workspace * w, const options * o, const char *mode, int runs,
    results * r)
{
  char t[16], n[16], past[16], steps[16];
  char *argv[24];
  int k, rc;
  struct rusage ru;
  double wall;

  k = child_argv (w, o, mode, t, argv);
  snprintf (n, sizeof n, "%d", runs);
  snprintf (past, sizeof past, "%d", o->past);
  snprintf (steps, sizeof steps, "%d", o->steps);
  argv[k++] = (char *) "-r";
  argv[k++] = n;
  argv[k++] = (char *) "--past";
  argv[k++] = past;
  argv[k++] = (char *) "--steps";
  argv[k++] = steps;
  if (o->fallback)
    argv[k++] = (char *) "--fallback";
  argv[k] = NULL;

  rc = spawn (argv, w->out, w->err, &ru, &wall);
  if (rc != 0) {
    fprintf (stderr, "whisperknot-bench: our %s run failed (status %d):\n",
        mode, rc);
    show_tail (w->err);
    return false;
  }
  parse_wkb (w->out, r);
  results_add (r, "proc_wall_ms", wall);
  results_add (r, "cpu_ms", cpu_ms (&ru));
  if (ru.ru_maxrss > r->maxrss_kb)
    r->maxrss_kb = ru.ru_maxrss;
  results_add (r, "maxrss_kb", ru.ru_maxrss);
  r->ok = true;
  return true;
}

static bool
run_theirs_stages (workspace * w, const options * o, results * r,
    bool *used_bench)
{
  char prog[PATH_MAX], t[16], n[16], past[16], steps[16];
  char *argv[16];
  int k = 0, rc;
  struct rusage ru;
  double wall;

  *used_bench = false;
  snprintf (prog, sizeof prog, "%s/wk-whispercpp-stages", o->wcpp_dir);
  snprintf (t, sizeof t, "%d", o->threads);
  snprintf (n, sizeof n, "%d", o->runs);
  snprintf (past, sizeof past, "%d", o->past);
  snprintf (steps, sizeof steps, "%d", o->steps);
  if (access (prog, X_OK) == 0) {
    argv[k++] = prog;
    argv[k++] = (char *) "-m";
    argv[k++] = (char *) o->ggml;
    argv[k++] = (char *) "-a";
    argv[k++] = w->pcm;
    argv[k++] = (char *) "-t";
    argv[k++] = t;
    argv[k++] = (char *) "-r";
    argv[k++] = n;
    argv[k++] = (char *) "-p";
    argv[k++] = past;
    argv[k++] = (char *) "-s";
    argv[k++] = steps;
    argv[k] = NULL;
    rc = spawn (argv, w->out, w->err, &ru, &wall);
    if (rc != 0) {
      fprintf (stderr, "whisperknot-bench: wk-whispercpp-stages failed "
          "(status %d):\n", rc);
      show_tail (w->err);
      return false;
    }
    parse_wkb (w->out, r);
  } else {
    /* whisper-bench: one encoder run and 256 one-token decoder steps at
     * n_past 0..255 per invocation (plus batched and prompt runs). */
    int i, reps = o->runs < 3 ? o->runs : 3;
    results b;

    snprintf (prog, sizeof prog, "%s/whisper-bench", o->wcpp_dir);
    if (access (prog, X_OK) != 0) {
      fprintf (stderr, "whisperknot-bench: neither wk-whispercpp-stages nor "
          "whisper-bench in %s\n", o->wcpp_dir);
      return false;
    }
    *used_bench = true;
    argv[k++] = prog;
    argv[k++] = (char *) "-m";
    argv[k++] = (char *) o->ggml;
    argv[k++] = (char *) "-t";
    argv[k++] = t;
    argv[k] = NULL;
    for (i = 0; i < reps; i++) {
      double med, mn, runs;
      memset (&b, 0, sizeof b);
      rc = spawn (argv, w->out, w->err, &ru, &wall);
      if (rc != 0) {
        fprintf (stderr, "whisperknot-bench: whisper-bench failed:\n");
        show_tail (w->err);
        return false;
      }
      parse_whisper_timings (w->err, w->out, &b);
      if (results_stat (&b, "encode_ms", &med, &mn))
        results_add (r, "encoder_ms", med);
      if (results_stat (&b, "decode_ms", &med, &mn)
          && results_stat (&b, "decode_runs", &runs, &mn) && runs > 0)
        results_add (r, "decstep_ms", med / runs);
    }
  }
  results_add (r, "proc_wall_ms", wall);
  if (ru.ru_maxrss > r->maxrss_kb)
    r->maxrss_kb = ru.ru_maxrss;
  r->ok = true;
  return true;
}

static bool
run_theirs_e2e (workspace * w, const options * o, results * r)
{
  char prog[PATH_MAX], t[16];
  char *argv[24];
  int k = 0, rc;
  struct rusage ru;
  double wall;

  snprintf (prog, sizeof prog, "%s/whisper-cli", o->wcpp_dir);
  snprintf (t, sizeof t, "%d", o->threads);
  argv[k++] = prog;
  argv[k++] = (char *) "-m";
  argv[k++] = (char *) o->ggml;
  argv[k++] = (char *) "-f";
  argv[k++] = (char *) o->audio;
  argv[k++] = (char *) "-t";
  argv[k++] = t;
  argv[k++] = (char *) "-bs";
  argv[k++] = (char *) "1";
  argv[k++] = (char *) "-bo";
  argv[k++] = (char *) "1";
  argv[k++] = (char *) "-l";
  argv[k++] = (char *) (o->language ? o->language : "auto");
  if (!o->fallback)
    argv[k++] = (char *) "-nf";
  argv[k] = NULL;

  rc = spawn (argv, w->out, w->err, &ru, &wall);
  if (rc != 0) {
    fprintf (stderr, "whisperknot-bench: whisper-cli failed (status %d):\n",
        rc);
    show_tail (w->err);
    return false;
  }
  parse_whisper_timings (w->err, w->out, r);
  results_add (r, "proc_wall_ms", wall);
  results_add (r, "cpu_ms", cpu_ms (&ru));
  results_add (r, "maxrss_kb", ru.ru_maxrss);
  if (ru.ru_maxrss > r->maxrss_kb)
    r->maxrss_kb = ru.ru_maxrss;
  r->ok = true;
  return true;
}

/* One table row: "label  ours  theirs  ratio". scale multiplies the
 * stored values (e.g. kB -> MB). */
static void
row (const char *label, results * ours, const char *okey, results * theirs,
    const char *tkey, double scale)
{
  double om = 0, on = 0, tm = 0, tn = 0;
  bool have_o = ours && results_stat (ours, okey, &om, &on);
  bool have_t = theirs && tkey && results_stat (theirs, tkey, &tm, &tn);
  char ob[48] = "-", tb[48] = "", rb[24] = "";

  if (!have_o && !have_t)
    return;
  /* counts are whole numbers */
  int prec = strstr (okey, "_runs") ? 0 : 2;

  if (have_o)
    snprintf (ob, sizeof ob, "%.*f [%.*f]", prec, om * scale, prec, on * scale);
  if (theirs && tkey && !have_t)
    snprintf (tb, sizeof tb, "-");
  if (have_t)
    snprintf (tb, sizeof tb, "%.*f [%.*f]", prec, tm * scale, prec, tn * scale);
  if (have_o && have_t && om > 0)
    snprintf (rb, sizeof rb, "%.2fx", tm / om);
  printf ("  %-34s %-21s %-21s %s\n", label, ob, tb, rb);
}

/* ---- the parent: live streams (--live-streams) -------------------------- */

/* One mode's figures for one stream count, over all its processes. */
typedef struct
{
  double *delay;                /* every committed word of every stream */
  size_t n_delay, cap_delay;
  double cpu_s;                 /* summed over the processes */
  double audio_s;
  int n_streams, n_kept;
  double feed_lag, final_lag;   /* the largest over the streams */
  int64_t n_late;
  long rss_kb;                  /* peak RSS, summed over the processes */
  char info[256];
  bool ok;
} live_result;

static bool
live_add_delay (live_result * r, double d)
{
  if (r->n_delay == r->cap_delay) {
    size_t cap = r->cap_delay ? 2 * r->cap_delay : 1024;
    double *v = realloc (r->delay, cap * sizeof *v);

    if (!v)
      return false;
    r->delay = v;
    r->cap_delay = cap;
  }
  r->delay[r->n_delay++] = d;
  return true;
}

/* Reads one child's "WKL" lines up to "WKL ready" (ready) or to the end
 * (the figures). Returns false when the line or the figures never came. */
static bool
live_read (FILE * f, const options * o, live_result * r, bool ready)
{
  char line[512];
  bool have_run = false;

  while (fgets (line, sizeof line, f)) {
    double a, b, cpu;
    long long late;
    unsigned long long words;

    line[strcspn (line, "\n")] = '\0';
    if (ready && strcmp (line, "WKL ready") == 0)
      return true;
    if (strncmp (line, "WKL info ", 9) == 0) {
      if (!r->info[0])
        snprintf (r->info, sizeof r->info, "%.200s", line + 9);
    } else if (sscanf (line, "WKL delay %lf", &a) == 1) {
      if (!live_add_delay (r, a))
        return false;
    } else if (sscanf (line, "WKL stream %lf %lf %lld %llu", &a, &b, &late,
            &words) == 4) {
      if (a > r->feed_lag)
        r->feed_lag = a;
      if (b > r->final_lag)
        r->final_lag = b;
      r->n_late += late;
      if (!o->fast && a <= o->latency / 1e3 && b <= o->latency / 1e3)
        r->n_kept++;
    } else if (sscanf (line, "WKL run %lf %lf %lf", &cpu, &a, &b) == 3) {
      r->cpu_s += cpu;
      r->audio_s = a;
      have_run = true;
    }
  }
  return !ready && have_run;
}

/* Runs n_streams live streams: shared, in one child process on one loaded
 * model; separate, in n_streams child processes with a model each. The
 * children load and make their streams, say they are ready, and all start
 * playing when the parent closes the pipe on their stdin. */
static bool
live_mode (const workspace * w, const options * o, int n_streams,
    bool separate, live_result * r)
{
  int n_proc = separate ? n_streams : 1, i, k = 0, go[2];
  pid_t pid[LIVE_MAX_STREAMS];
  FILE *out[LIVE_MAX_STREAMS];
  bool killed[LIVE_MAX_STREAMS];
  char err_path[LIVE_MAX_STREAMS][160];
  char t[16], lat[16], per[16];
  char *argv[24];
  bool ok = true;

  memset (r, 0, sizeof *r);
  r->n_streams = n_streams;
  k = child_argv (w, o, "live", t, argv);
  snprintf (lat, sizeof lat, "%d", o->latency);
  snprintf (per, sizeof per, "%d", separate ? 1 : n_streams);
  argv[k++] = (char *) "--latency";
  argv[k++] = lat;
  argv[k++] = (char *) "--live-streams";
  argv[k++] = per;
  if (o->fast)
    argv[k++] = (char *) "--fast";
  if (o->fallback)
    argv[k++] = (char *) "--fallback";
  argv[k] = NULL;

  for (i = 0; i < n_proc; i++) {
    pid[i] = -1;
    out[i] = NULL;
    killed[i] = false;
    snprintf (err_path[i], sizeof err_path[i], "%s/live-err-%d", w->dir, i);
  }
  /* close-on-exec everywhere: a child must hold no other child's pipe,
   * nor the write end of the start pipe (its end would never come) */
  if (pipe2 (go, O_CLOEXEC) != 0)
    return false;
  fflush (stdout);
  fflush (stderr);
  for (i = 0; i < n_proc && ok; i++) {
    int p[2];

    if (pipe2 (p, O_CLOEXEC) != 0) {
      ok = false;
      break;
    }
    pid[i] = fork ();
    if (pid[i] == 0) {
      int e = open (err_path[i], O_WRONLY | O_CREAT | O_TRUNC, 0600);

      if (e < 0 || dup2 (go[0], 0) < 0 || dup2 (p[1], 1) < 0 || dup2 (e, 2) < 0)
        _exit (127);
      execv (argv[0], argv);
      _exit (127);
    }
    close (p[1]);
    if (pid[i] < 0 || !(out[i] = fdopen (p[0], "r"))) {
      close (p[0]);
      ok = false;
    }
  }
  close (go[0]);
  for (i = 0; i < n_proc && ok; i++)
    if (!live_read (out[i], o, r, true)) {
      int j;

      /* this one failed (its tail is shown below): stop the others */
      for (j = 0; j < n_proc; j++)
        if (j != i && pid[j] > 0 && kill (pid[j], SIGTERM) == 0)
          killed[j] = true;
      ok = false;
    }
  close (go[1]);                /* go */
  for (i = 0; i < n_proc; i++)
    if (out[i]) {
      if (ok && !live_read (out[i], o, r, false))
        ok = false;
      fclose (out[i]);
    }
  for (i = 0; i < n_proc; i++) {
    struct rusage ru;
    int status;

    if (pid[i] <= 0)
      continue;
    while (wait4 (pid[i], &status, 0, &ru) < 0)
      if (errno != EINTR) {
        status = -1;
        break;
      }
    if (status != -1)
      r->rss_kb += ru.ru_maxrss;
    if (status == -1 || !WIFEXITED (status) || WEXITSTATUS (status) != 0) {
      if (!killed[i]) {
        fprintf (stderr, "whisperknot-bench: %d live stream%s, %s: process "
            "%d failed:\n", n_streams, n_streams > 1 ? "s" : "",
            separate ? "separate" : "shared", i);
        show_tail (err_path[i]);
      }
      ok = false;
    }
    unlink (err_path[i]);
  }
  if (r->n_delay > 0)
    qsort (r->delay, r->n_delay, sizeof r->delay[0], cmp_double);
  r->ok = ok;
  return ok;
}

/* The nearest-rank quantile of sorted values. */
static double
nearest_rank (const double *v, size_t n, double q)
{
  size_t k = (size_t) ceil (q * (double) n);

  return v[k > 0 ? (k <= n ? k - 1 : n - 1) : 0];
}

/* "shared / separate" into buf, "-" for a side without the figure. */
static void
live_cell (char *buf, size_t size, int prec, bool have_a, double a,
    bool have_b, double b)
{
  char x[32] = "-", y[32] = "-";

  if (have_a)
    snprintf (x, sizeof x, "%.*f", prec, a);
  if (have_b)
    snprintf (y, sizeof y, "%.*f", prec, b);
  snprintf (buf, size, "%s / %s", x, y);
}

static const char *
live_kept (char *buf, size_t size, const options * o, const live_result * r)
{
  if (!r->ok)
    snprintf (buf, size, "-");
  else if (o->fast)
    snprintf (buf, size, "n/a");
  else if (r->n_kept == r->n_streams)
    snprintf (buf, size, "all");
  else
    snprintf (buf, size, "%d of %d", r->n_kept, r->n_streams);
  return buf;
}

static void
live_row (const options * o, const live_result * a, const live_result * b)
{
  char cpu[48], ratio[16] = "-", med[48], p95[48], worst[48], kept[48];
  char ka[16], kb[16], lag[48], fin[48], words[48], late[48], rss[48];
  bool da = a->ok && a->n_delay > 0, db = b->ok && b->n_delay > 0;
  double ca = a->ok ? a->cpu_s / a->n_streams / a->audio_s : 0.0;
  double cb = b->ok ? b->cpu_s / b->n_streams / b->audio_s : 0.0;

  live_cell (cpu, sizeof cpu, 3, a->ok, ca, b->ok, cb);
  if (a->ok && b->ok && ca > 0)
    snprintf (ratio, sizeof ratio, "%.2fx", cb / ca);
  live_cell (med, sizeof med, 2, da, da ? nearest_rank (a->delay,
          a->n_delay, 0.5) : 0, db, db ? nearest_rank (b->delay, b->n_delay,
          0.5) : 0);
  live_cell (p95, sizeof p95, 2, da, da ? nearest_rank (a->delay,
          a->n_delay, 0.95) : 0, db, db ? nearest_rank (b->delay, b->n_delay,
          0.95) : 0);
  live_cell (worst, sizeof worst, 2, da, da ? a->delay[a->n_delay - 1] :
      0, db, db ? b->delay[b->n_delay - 1] : 0);
  snprintf (kept, sizeof kept, "%s / %s", live_kept (ka, sizeof ka, o, a),
      live_kept (kb, sizeof kb, o, b));
  live_cell (lag, sizeof lag, 2, a->ok, a->feed_lag, b->ok, b->feed_lag);
  live_cell (fin, sizeof fin, 2, a->ok, a->final_lag, b->ok, b->final_lag);
  live_cell (words, sizeof words, 1, a->ok,
      (double) a->n_delay / a->n_streams, b->ok,
      (double) b->n_delay / b->n_streams);
  live_cell (late, sizeof late, 0, a->ok, (double) a->n_late, b->ok,
      (double) b->n_late);
  live_cell (rss, sizeof rss, 0, a->ok, a->rss_kb / 1024.0, b->ok,
      b->rss_kb / 1024.0);
  printf ("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
      a->n_streams, cpu, ratio, med, p95, worst, kept, lag, fin, words, late,
      rss);
  fflush (stdout);
}

static const char live_definitions[] =
    "  shared: N streams in one process on one loaded model, a thread each;\n"
    "    separate: N processes started together, each with its own loaded\n"
    "    model and one stream. Every stream plays the whole file in 100 ms\n"
    "    pieces, each fed (wk_stream_feed_at, with its capture time) when its\n"
    "    last sample would have been captured; --fast: at once (wk_stream_feed).\n"
    "  CPU: user + system time (getrusage RUSAGE_SELF in each process) from\n"
    "    the start of playback to the last final text, summed over the\n"
    "    processes, / N / the file's seconds; model load and stream setup are\n"
    "    not counted. CPU separate / shared: the ratio of the two.\n"
    "  commit delay: per committed word of every stream, the wall time it was\n"
    "    taken (wk_stream_take right after each feed and after finish) minus\n"
    "    the wall time the feed holding its last sample began (a word reaching\n"
    "    past the audio fed counts from the last feed); median and p95 by\n"
    "    nearest rank, worst = the largest.\n"
    "  kept up: the streams where no feed began more than the latency after its\n"
    "    schedule (the capture time of the piece's last sample) and the final\n"
    "    text (wk_stream_finish + take) came at most the latency after the end\n"
    "    of the audio; n/a with --fast.\n"
    "  feed lag: the latest any feed began against its schedule; final after\n"
    "    end: the last final text against the end of the audio (seconds, the\n"
    "    worst stream's).\n"
    "  late words: the engine's wk_stream_stats.n_late summed over the streams\n"
    "    (words committed after their first sample's due time + the latency).\n"
    "  peak RSS: wait4 of each process, summed for separate (each counts the\n"
    "    pages of the model file it touched).\n";

static int
run_live (const workspace * w, const options * o)
{
  live_result *sh = calloc (1, sizeof *sh), *sep = calloc (1, sizeof *sep);
  char la0[16], la1[16], date[64];
  time_t now = time (NULL);
  bool failed = false, head = false;
  int i;

  if (!sh || !sep)
    return 1;
  warm_file (o->model);
  warm_file (o->audio);
  strftime (date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime (&now));
  loadavg (la0, sizeof la0);
  fprintf (stderr, "whisperknot-bench: live streams (load average %s)...\n",
      la0);
  for (i = 0; i < o->n_live; i++) {
    failed |= !live_mode (w, o, o->live_n[i], false, sh);
    failed |= !live_mode (w, o, o->live_n[i], true, sep);
    if (!head) {
      printf ("whisperknot-bench --live-streams  %s  load average at the "
          "start %s\n", date, la0);
      printf ("  model: %s", o->model);
      if (sh->info[0] || sep->info[0])
        printf ("  (%s)", sh->info[0] ? sh->info : sep->info);
      printf ("\n  audio: %s", o->audio);
      if (sh->ok || sep->ok)
        printf (", %.1f s", sh->ok ? sh->audio_s : sep->audio_s);
      printf (", fed in 100 ms pieces %s\n", o->fast ?
          "as fast as possible (--fast)" : "at real-time pace");
      printf ("  streams: latency %d ms, deadline commits, beam %d (the live "
          "default), %d thread%s\n    per stream, %s\n\n", o->latency,
          WK_DEFAULT_LIVE_BEAM_SIZE, o->threads, o->threads > 1 ? "s" : "",
          o->fallback ? "temperature fallback" : "no temperature fallback");
      printf ("each cell: shared / separate\n\n");
      printf ("| streams | CPU s per stream per audio s | CPU separate / "
          "shared | commit delay median, s | p95, s | worst, s | kept up | "
          "feed lag, s | final after end, s | words per stream | late words "
          "| peak RSS, MB |\n");
      printf ("|---:|---|---:|---|---|---|---|---|---|---|---|---|\n");
      head = true;
    }
    live_row (o, sh, sep);
    free (sh->delay);
    free (sep->delay);
  }
  loadavg (la1, sizeof la1);
  printf ("\nload average at the end %s\n\nDefinitions:\n%s", la1,
      live_definitions);
  free (sh);
  free (sep);
  /* never judged: the status says whether every run ran */
  return failed ? 1 : 0;
}

static void
usage (FILE * f)
{
  fprintf (f,
      "usage: whisperknot-bench -m MODEL.knot -f AUDIO.wav [-t THREADS] "
      "[-r RUNS]\n"
      "         [--whispercpp DIR --ggml MODEL.bin] [--e2e-runs N] "
      "[--past P] [--steps S]\n"
      "         [-l LANG] [--fallback] [--no-stages] [--no-e2e]\n"
      "       whisperknot-bench --live-streams N[,N...] -m MODEL.knot -f "
      "AUDIO.wav\n"
      "         [-t THREADS] [--latency MS] [--fast] [-l LANG] [--fallback]"
      "\n\n"
      "Prints medians [and minima] over RUNS of: log-mel of a 30 s window, "
      "one encoder\npass over it, one decoder step (mean of S one-token "
      "steps at n_past P..P+S-1),\nend-to-end transcription of the file "
      "(greedy, no temperature fallback unless\n--fallback), peak RSS and "
      "the model's resident bytes.\n\n"
      "With --whispercpp DIR (the bin folder tools/whispercpp-build.sh "
      "made) and\n--ggml MODEL.bin (the same model in whisper.cpp's "
      "format) it also runs\nwhisper.cpp on the same audio, threads and "
      "runs and prints the ratio\nwhisper.cpp / whisperknot for each figure "
      "(> 1: whisperknot is faster/smaller).\n\n"
      "With --live-streams it measures many live streams instead (nothing "
      "else): for\neach N, N streams (-t threads each, live latency MS, "
      "default 1000) as N\nthreads of one process on one loaded model, "
      "then as N processes with a\nmodel each, and prints one table row "
      "per N, shared / separate in each cell:\n%s\n"
      "Defaults: -t 2 -r 5 --past 96 --steps 32 -l en --latency 1000.\n"
      "Exit status: 0 when every measurement ran (figures are never "
      "judged), 1 when\none failed, 2 usage.\n", live_definitions);
}

/* "N[,N...]" into o->live_n */
static int
parse_counts (const char *s, options * o)
{
  char buf[16];

  o->n_live = 0;
  for (;;) {
    size_t len = strcspn (s, ",");

    if (len == 0 || len >= sizeof buf || o->n_live == LIVE_MAX_N)
      return -1;
    memcpy (buf, s, len);
    buf[len] = '\0';
    if (parse_int (buf, 1, LIVE_MAX_STREAMS, &o->live_n[o->n_live]) != 0)
      return -1;
    o->n_live++;
    if (s[len] == '\0')
      return 0;
    s += len + 1;
  }
}

static int
parse_args (int argc, char **argv, options * o)
{
  int i;

  memset (o, 0, sizeof *o);
  o->threads = 2;
  o->runs = 5;
  o->e2e_runs = -1;
  o->past = 96;
  o->steps = 32;
  o->language = "en";
  o->latency = 1000;
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;

    if (!strcmp (a, "-h") || !strcmp (a, "--help")) {
      usage (stdout);
      exit (0);
    } else if (!strcmp (a, "--fallback")) {
      o->fallback = true;
      continue;
    } else if (!strcmp (a, "--no-stages")) {
      o->no_stages = true;
      continue;
    } else if (!strcmp (a, "--no-e2e")) {
      o->no_e2e = true;
      continue;
    } else if (!strcmp (a, "--fast")) {
      o->fast = true;
      continue;
    }
    if (!v) {
      fprintf (stderr, "whisperknot-bench: %s needs a value\n", a);
      return -1;
    }
    i++;
    if (!strcmp (a, "-m"))
      o->model = v;
    else if (!strcmp (a, "-f"))
      o->audio = v;
    else if (!strcmp (a, "--whispercpp"))
      o->wcpp_dir = v;
    else if (!strcmp (a, "--ggml"))
      o->ggml = v;
    else if (!strcmp (a, "-l"))
      o->language = strcmp (v, "auto") ? v : NULL;
    else if (!strcmp (a, "--child"))
      o->child = v;
    else if (!strcmp (a, "-t"))
      bad = parse_int (v, 1, 256, &o->threads);
    else if (!strcmp (a, "-r"))
      bad = parse_int (v, 1, MAX_VALUES - 1, &o->runs);
    else if (!strcmp (a, "--e2e-runs"))
      bad = parse_int (v, 0, MAX_VALUES - 1, &o->e2e_runs);
    else if (!strcmp (a, "--past"))
      bad = parse_int (v, 1, 100000, &o->past);
    else if (!strcmp (a, "--steps"))
      bad = parse_int (v, 1, 100000, &o->steps);
    else if (!strcmp (a, "--latency"))
      bad = parse_int (v, 1, 60000, &o->latency);
    else if (!strcmp (a, "--live-streams"))
      bad = parse_counts (v, o);
    else {
      fprintf (stderr, "whisperknot-bench: unknown option %s\n", a);
      return -1;
    }
    if (bad) {
      fprintf (stderr, "whisperknot-bench: bad value for %s: %s\n", a, v);
      return -1;
    }
  }
  if (o->e2e_runs < 0)
    o->e2e_runs = o->runs;
  if (!o->model || !o->audio) {
    fprintf (stderr, "whisperknot-bench: -m and -f are required\n");
    return -1;
  }
  if (o->n_live && o->wcpp_dir) {
    fprintf (stderr, "whisperknot-bench: --live-streams measures whisperknot "
        "alone (no --whispercpp)\n");
    return -1;
  }
  if (!o->wcpp_dir != !o->ggml) {
    fprintf (stderr, "whisperknot-bench: --whispercpp and --ggml go "
        "together\n");
    return -1;
  }
  return 0;
}

static bool
write_pcm (const char *audio, const char *path)
{
  char err[256];
  wk_wav wav;
  FILE *f;
  bool ok;

  if (wk_wav_read (audio, &wav, err, sizeof err) != WK_OK) {
    /* wk_wav_read's messages name the file already */
    fprintf (stderr, "whisperknot-bench: %s\n", err);
    return false;
  }
  f = fopen (path, "wb");
  ok = f && fwrite (wav.samples, sizeof (float), wav.n_samples, f)
      == wav.n_samples;
  if (f && fclose (f) != 0)
    ok = false;
  wk_wav_clear (&wav);
  return ok;
}

static void
print_rss (const char *label, long kb)
{
  if (kb > 0)
    printf ("%s%.1f MB", label, kb / 1024.0);
}

int
main (int argc, char **argv)
{
  options o;
  workspace w;
  results *ours_st, *theirs_st, *ours_e2e, *theirs_e2e;
  bool cmp, used_bench = false, failed = false;
  char la0[16], la1[16], date[64];
  time_t now;
  double med, mn;
  int i;

  if (parse_args (argc, argv, &o) != 0) {
    usage (stderr);
    return 2;
  }
  if (o.child) {
    if (!strcmp (o.child, "stages"))
      return child_stages (&o);
    if (!strcmp (o.child, "e2e"))
      return child_e2e (&o);
    if (!strcmp (o.child, "live"))
      return child_live (&o);
    return 2;
  }

  cmp = o.wcpp_dir != NULL;
  memset (&w, 0, sizeof w);
  {
    ssize_t n = readlink ("/proc/self/exe", w.self, sizeof w.self - 1);
    if (n <= 0) {
      fprintf (stderr, "whisperknot-bench: cannot find my own path\n");
      return 1;
    }
    w.self[n] = '\0';
  }
  snprintf (w.dir, sizeof w.dir, "/tmp/wk-bench-XXXXXX");
  if (!mkdtemp (w.dir)) {
    fprintf (stderr, "whisperknot-bench: mkdtemp: %s\n", strerror (errno));
    return 1;
  }
  snprintf (w.out, sizeof w.out, "%s/out", w.dir);
  snprintf (w.err, sizeof w.err, "%s/err", w.dir);
  snprintf (w.pcm, sizeof w.pcm, "%s/audio.f32", w.dir);
  if (o.n_live) {
    int rc = run_live (&w, &o);
    rmdir (w.dir);
    return rc;
  }

  ours_st = calloc (1, sizeof *ours_st);
  theirs_st = calloc (1, sizeof *theirs_st);
  ours_e2e = calloc (1, sizeof *ours_e2e);
  theirs_e2e = calloc (1, sizeof *theirs_e2e);
  if (!ours_st || !theirs_st || !ours_e2e || !theirs_e2e)
    return 1;

  warm_file (o.model);
  warm_file (o.audio);
  if (cmp) {
    warm_file (o.ggml);
    if (!write_pcm (o.audio, w.pcm)) {
      failed = true;
      goto done;
    }
  }

  now = time (NULL);
  strftime (date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime (&now));
  loadavg (la0, sizeof la0);
  fprintf (stderr, "whisperknot-bench: measuring (load average %s)...\n", la0);

  if (!o.no_stages) {
    failed |= !run_ours (&w, &o, "stages", o.runs, ours_st);
    if (cmp)
      failed |= !run_theirs_stages (&w, &o, theirs_st, &used_bench);
  }
  /* End-to-end runs alternate between the two engines so that a change in
   * the machine's load hits both alike. */
  if (!o.no_e2e) {
    for (i = 0; i < o.e2e_runs; i++) {
      failed |= !run_ours (&w, &o, "e2e", 1, ours_e2e);
      if (cmp)
        failed |= !run_theirs_e2e (&w, &o, theirs_e2e);
    }
  }
  loadavg (la1, sizeof la1);

  printf ("whisperknot-bench  %s  threads %d  runs: stages %d, e2e %d  "
      "load average %s -> %s\n", date, o.threads, o.no_stages ? 0 : o.runs,
      o.no_e2e ? 0 : o.e2e_runs, la0, la1);
  printf ("  whisperknot: %s", o.model);
  if (ours_st->info[0])
    printf ("  (%s)", ours_st->info);
  printf ("\n");
  if (cmp) {
    char ver[PATH_MAX];
    FILE *f;

    printf ("  whisper.cpp: %s  (%s", o.ggml, o.wcpp_dir);
    snprintf (ver, sizeof ver, "%s/wk-whispercpp-version.txt", o.wcpp_dir);
    if ((f = fopen (ver, "r"))) {
      char line[256];
      if (fgets (line, sizeof line, f)) {
        line[strcspn (line, "\n")] = '\0';
        printf (", %s", line);
      }
      fclose (f);
    }
    printf (")\n");
  }
  printf ("  audio: %s;  30 s window = its first 30 s, zero-padded\n", o.audio);
  printf ("\n  %-34s %-21s %-21s %s\n", "median [min], ms", "whisperknot",
      cmp ? "whisper.cpp" : "", cmp ? "whisper.cpp/ours" : "");

  if (!o.no_stages) {
    char dec[64];
    snprintf (dec, sizeof dec, "decoder step (n_past %d..%d)", o.past,
        o.past + o.steps - 1);
    row ("log-mel, 30 s window", ours_st, "mel_ms", used_bench ? NULL :
        theirs_st, "mel_ms", 1);
    row ("encoder, 30 s window", ours_st, "encoder_ms", theirs_st,
        "encoder_ms", 1);
    row (dec, ours_st, "decstep_ms", theirs_st, "decstep_ms", 1);
    row ("model load (stages process)", ours_st, "load_ms", used_bench ?
        NULL : theirs_st, "load_ms", 1);
  }
  if (!o.no_e2e) {
    row ("end-to-end file (excl. load)", ours_e2e, "e2e_ms", theirs_e2e,
        "e2e_ms", 1);
    row ("  of which mel", ours_e2e, "mel_ms", theirs_e2e, "mel_ms", 1);
    row ("  of which encoder", ours_e2e, "encode_ms", theirs_e2e,
        "encode_ms", 1);
    row ("  of which decoding", ours_e2e, "dec_total_ms", theirs_e2e,
        "dec_total_ms", 1);
    row ("  encoder runs", ours_e2e, "encode_runs", theirs_e2e,
        "encode_runs", 1);
    row ("  decoder steps (tokens)", ours_e2e, "decode_runs", theirs_e2e,
        "decode_runs", 1);
    row ("model load (e2e process)", ours_e2e, "load_ms", theirs_e2e,
        "load_ms", 1);
    row ("process wall, load + e2e", ours_e2e, "proc_wall_ms", theirs_e2e,
        "proc_wall_ms", 1);
    row ("process CPU time (user + sys)", ours_e2e, "cpu_ms", theirs_e2e,
        "cpu_ms", 1);
    printf ("\n  %-34s %-21s %-21s %s\n", "memory, MB", "whisperknot",
        cmp ? "whisper.cpp" : "", cmp ? "whisper.cpp/ours" : "");
    row ("peak RSS, e2e process", ours_e2e, "maxrss_kb", theirs_e2e,
        "maxrss_kb", 1.0 / 1024);
    row ("model weights resident", ours_e2e, "model_rss_bytes", NULL, NULL,
        1.0 / (1024 * 1024));
    if (cmp && results_stat (theirs_e2e, "model_mb", &med, &mn))
      printf ("  %-34s %-21s %.2f (its \"model size\", 1e6 B)\n",
          "model weights in memory", "", med);
    row ("model file", ours_e2e, "model_file_bytes", NULL, NULL,
        1.0 / (1024 * 1024));
    row ("stream state", ours_e2e, "state_bytes", NULL, NULL,
        1.0 / (1024 * 1024));
  }
  {
    /* A forked child starts from its parent's high-water mark, so this is
     * a floor under both sides' figures. */
    struct rusage self;
    if (getrusage (RUSAGE_SELF, &self) == 0)
      printf ("  (this program's own peak RSS, a floor under both: %.1f "
          "MB)\n", self.ru_maxrss / 1024.0);
  }
  if (!o.no_stages && ours_st->ok) {
    printf ("  peak RSS, stages process: ");
    print_rss ("whisperknot ", ours_st->maxrss_kb);
    if (cmp)
      print_rss (", whisper.cpp ", theirs_st->maxrss_kb);
    printf ("\n");
  }

  if (!o.no_e2e) {
    printf ("\n  transcript, whisperknot: %s\n", ours_e2e->ok ?
        ours_e2e->text : "(failed)");
    if (cmp)
      printf ("  transcript, whisper.cpp: %s\n", theirs_e2e->ok ?
          theirs_e2e->text : "(failed)");
  }

  printf ("\nWhere the figures come from:\n"
      "  whisperknot stages: wk_model_window_mel, wk_encode (incl. the cross "
      "K/V) and\n"
      "    wk_decoder_eval (incl. logits), timed in a child process of this "
      "program.\n"
      "  whisperknot end-to-end: the public stream API (new + feed + finish "
      "+ take),\n"
      "    greedy%s, in a child process.\n",
      o.fallback ? " with temperature fallback" : ", no temperature fallback");
  if (cmp) {
    if (used_bench)
      printf ("  whisper.cpp stages: whisper-bench (its own protocol: one "
          "encoder run; decoder\n"
          "    step = mean of 256 steps at n_past 0..255; no mel figure).\n");
    else
      printf ("  whisper.cpp stages: wk-whispercpp-stages (whisper_pcm_to_mel, "
          "whisper_encode,\n"
          "    whisper_decode with the same protocol; its mel also covers 30 s "
          "of padding).\n");
    printf ("  whisper.cpp end-to-end: whisper-cli -bs 1 -bo 1%s, its "
        "whisper_print_timings:\n"
        "    total - load; decoding = sample + decode + batchd + prompt; "
        "decoder steps =\n"
        "    its one-token decode runs.\n", o.fallback ? "" : " -nf");
  }
  printf ("  Peak RSS and CPU time: wait4() of each child process (CPU "
      "time includes\n    time spent spinning at thread barriers).\n"
      "  Ratio: whisper.cpp / whisperknot (> 1: whisperknot faster or "
      "smaller).\n");

done:
  unlink (w.out);
  unlink (w.err);
  unlink (w.pcm);
  rmdir (w.dir);
  free (ours_st);
  free (theirs_st);
  free (ours_e2e);
  free (theirs_e2e);
  /* The figures are never judged; the status only says whether every
   * measurement ran. */
  return failed ? 1 : 0;
}
