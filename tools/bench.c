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
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
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

static bool
run_ours (workspace * w, const options * o, const char *mode, int runs,
    results * r)
{
  char t[16], n[16], past[16], steps[16];
  char *argv[24];
  int k = 0, rc;
  struct rusage ru;
  double wall;

  snprintf (t, sizeof t, "%d", o->threads);
  snprintf (n, sizeof n, "%d", runs);
  snprintf (past, sizeof past, "%d", o->past);
  snprintf (steps, sizeof steps, "%d", o->steps);
  argv[k++] = w->self;
  argv[k++] = (char *) "--child";
  argv[k++] = (char *) mode;
  argv[k++] = (char *) "-m";
  argv[k++] = (char *) o->model;
  argv[k++] = (char *) "-f";
  argv[k++] = (char *) o->audio;
  argv[k++] = (char *) "-t";
  argv[k++] = t;
  argv[k++] = (char *) "-r";
  argv[k++] = n;
  argv[k++] = (char *) "--past";
  argv[k++] = past;
  argv[k++] = (char *) "--steps";
  argv[k++] = steps;
  argv[k++] = (char *) "-l";
  argv[k++] = (char *) (o->language ? o->language : "auto");
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

static void
usage (FILE * f)
{
  fprintf (f,
      "usage: whisperknot-bench -m MODEL.knot -f AUDIO.wav [-t THREADS] "
      "[-r RUNS]\n"
      "         [--whispercpp DIR --ggml MODEL.bin] [--e2e-runs N] "
      "[--past P] [--steps S]\n"
      "         [-l LANG] [--fallback] [--no-stages] [--no-e2e]\n\n"
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
      "Defaults: -t 2 -r 5 --past 96 --steps 32 -l en.\n"
      "Exit status: 0 when every measurement ran (figures are never "
      "judged), 1 when\none failed, 2 usage.\n");
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
