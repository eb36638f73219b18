/* wk-word-times: how far word times are from where the words are spoken.
 *
 * Reads a list of WAV files with their reference word times (LIST: lines
 * "wav<TAB>words", a words file holding "start<TAB>end<TAB>word" per line,
 * seconds; tools/make-word-times-set.py synthesizes such a set with
 * festival, which knows where each word it speaks starts and ends),
 * transcribes each file twice, with word times from the alignment heads
 * (wk_stream_params.word_times) and without (the segment's span shared
 * out by byte length), matches the words to the reference (same spelling,
 * in order: a longest common subsequence), and prints the mean and 95th
 * percentile of the start and end errors of both, side by side, and
 * their ratio; with --latency MS the live policy's committed words, and
 * the count of words of zero length (a zero-length WebVTT cue).
 *
 * --search-heads (offline, one 30 s window per file) chooses a model's
 * alignment heads on a development set instead: each file is decoded
 * once, then aligned with each single decoder head; heads are ranked by
 * their mean error and the best k (k = 1 .. all) tried together; the set
 * with the least mean error is printed as whisperknot-convert's
 * --alignment-heads value.
 *
 * A measurement, not a test: it prints figures and never fails on them.
 */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "align.h"
#include "model.h"
#include "wav.h"

#define MAX_WORDS 4096

#define WORD_BYTES 64

typedef struct
{
  double start, end;
  char w[WORD_BYTES];           /* normalised: lower case letters, digits */
} word;

typedef struct
{
  double *v;
  size_t n, cap;
} series;

static void
series_add (series * s, double x)
{
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 1024;
    s->v = realloc (s->v, s->cap * sizeof *s->v);
    if (!s->v) {
      fprintf (stderr, "out of memory\n");
      exit (1);
    }
  }
  s->v[s->n++] = x;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;
  return (x > y) - (x < y);
}

static double
series_mean (const series * s)
{
  double sum = 0.0;
  for (size_t i = 0; i < s->n; i++)
    sum += s->v[i];
  return s->n ? sum / (double) s->n : NAN;
}

static double
series_p95 (series * s)
{
  size_t k;
  if (!s->n)
    return NAN;
  qsort (s->v, s->n, sizeof *s->v, cmp_double);
  k = (size_t) ceil (0.95 * (double) s->n) - 1;
  return s->v[k < s->n ? k : s->n - 1];
}

static void
norm_word (const char *in, size_t len, char *out)
{
  size_t k = 0;
  for (size_t i = 0; i < len && k + 1 < WORD_BYTES; i++) {
    unsigned char c = (unsigned char) in[i];
    if (isalnum (c))
      out[k++] = (char) tolower (c);
  }
  out[k] = '\0';
}

static int
read_ref (const char *path, word * w, int max)
{
  FILE *f = fopen (path, "r");
  char line[512];
  int n = 0;

  if (!f)
    return -1;
  while (n < max && fgets (line, sizeof line, f)) {
    double s, e;
    char txt[256];
    if (sscanf (line, "%lf\t%lf\t%255s", &s, &e, txt) != 3)
      continue;
    w[n].start = s;
    w[n].end = e;
    norm_word (txt, strlen (txt), w[n].w);
    if (w[n].w[0])
      n++;
  }
  fclose (f);
  return n;
}

/* words from token times, split where a token's text starts with a space
 * (as the CLI and the live policy split them) */
static int
words_from_tokens (const wk_token * tok, int n_tok, word * w, int n, int max)
{
  char buf[256];
  size_t len = 0;
  int i, first = 0;

  for (i = 0; i <= n_tok; i++) {
    const char *t = i < n_tok && tok[i].text ? tok[i].text : "";
    if (i == n_tok || (i > first && t[0] == ' ')) {
      if (n < max && i > first) {
        w[n].start = tok[first].start / (double) WK_SAMPLE_RATE;
        w[n].end = tok[i - 1].end / (double) WK_SAMPLE_RATE;
        norm_word (buf, len, w[n].w);
        if (w[n].w[0])
          n++;
      }
      first = i;
      len = 0;
    }
    if (i < n_tok) {
      size_t tl = strlen (t);
      if (len + tl < sizeof buf) {
        memcpy (buf + len, t, tl);
        len += tl;
      }
    }
  }
  return n;
}

/* Matches hyp to ref (a longest common subsequence of spellings) and adds
 * the matched words' errors; returns the matches. */
static int
score (const word * ref, int nr, const word * hyp, int nh, series * es,
    series * ee)
{
  int *L = calloc ((size_t) (nr + 1) * (nh + 1), sizeof *L), i, j, m = 0;
  if (!L)
    exit (1);
#define AT(a, b) L[(size_t) (a) * (nh + 1) + (b)]
  for (i = nr - 1; i >= 0; i--)
    for (j = nh - 1; j >= 0; j--)
      AT (i, j) = !strcmp (ref[i].w, hyp[j].w) ? AT (i + 1, j + 1) + 1 :
          (AT (i + 1, j) > AT (i, j + 1) ? AT (i + 1, j) : AT (i, j + 1));
  i = j = 0;
  while (i < nr && j < nh) {
    if (!strcmp (ref[i].w, hyp[j].w)) {
      series_add (es, fabs (hyp[j].start - ref[i].start));
      series_add (ee, fabs (hyp[j].end - ref[i].end));
      m++;
      i++;
      j++;
    } else if (AT (i + 1, j) >= AT (i, j + 1))
      i++;
    else
      j++;
  }
#undef AT
  free (L);
  return m;
}

/* The words of one file through a stream. */
static int
transcribe (wk_model * model, const wk_wav * wav, int threads, int latency,
    bool word_times, word * w, int max, int *n_zero)
{
  wk_stream_params p = wk_stream_default_params ();
  wk_stream *s = NULL;
  char err[512];
  int n = 0;

  p.n_threads = threads;
  p.latency_ms = latency;
  p.word_times = word_times;
  p.temperature_inc = 0.0f;     /* deterministic: both runs get one text */
  if (wk_stream_new (model, &p, &s, err, sizeof err) != WK_OK) {
    fprintf (stderr, "stream: %s\n", err);
    exit (1);
  }
  for (int pass = 0; pass < 2; pass++) {
    const wk_segment *seg;
    size_t ns, i;
    if (pass == 0)
      wk_stream_feed (s, wav->samples, wav->n_samples);
    else
      wk_stream_finish (s);
    ns = wk_stream_take (s, &seg);
    for (i = 0; i < ns; i++) {
      if (seg[i].utterance_end)
        continue;
      if (latency > 0) {
        /* live: a committed segment is a word */
        if (seg[i].end <= seg[i].start)
          (*n_zero)++;
        if (n < max) {
          w[n].start = seg[i].start / (double) WK_SAMPLE_RATE;
          w[n].end = seg[i].end / (double) WK_SAMPLE_RATE;
          norm_word (seg[i].text, strlen (seg[i].text), w[n].w);
          if (w[n].w[0])
            n++;
        }
      } else {
        int before = n;
        n = words_from_tokens (seg[i].tokens, seg[i].n_tokens, w, n, max);
        for (int k = before; k < n; k++)
          if (w[k].end <= w[k].start)
            (*n_zero)++;
      }
    }
  }
  wk_stream_free (s);
  return n;
}

typedef struct
{
  char wav[2100], ref[2100];
} entry;

static int
read_list (const char *path, entry ** out)
{
  FILE *f = fopen (path, "r");
  char line[2100];
  int n = 0, cap = 0;
  entry *e = NULL;

  if (!f)
    return -1;
  while (fgets (line, sizeof line, f)) {
    char *tab = strchr (line, '\t'), *nl;
    if (!tab)
      continue;
    *tab = '\0';
    if ((nl = strchr (tab + 1, '\n')))
      *nl = '\0';
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      e = realloc (e, (size_t) cap * sizeof *e);
      if (!e)
        exit (1);
    }
    snprintf (e[n].wav, sizeof e[n].wav, "%s", line);
    snprintf (e[n].ref, sizeof e[n].ref, "%s", tab + 1);
    n++;
  }
  fclose (f);
  *out = e;
  return n;
}

static void
print_row (const char *name, series * s, series * e)
{
  double ms = series_mean (s), me = series_mean (e);
  printf ("%-12s %10.3f %10.3f %10.3f %10.3f %10.3f\n", name, ms,
      series_p95 (s), me, series_p95 (e), (ms + me) / 2);
}

/* ---- head search ---------------------------------------------------------- */

/* one file, decoded once */
typedef struct
{
  word ref[MAX_WORDS];
  int n_ref;
  int32_t text[1024];
  int n_text;
  int n_frames;
} decoded;

/* Aligns d (encoded in ctx) with the model's current heads; adds errors. */
static void
align_errors (wk_ctx * ctx, const decoded * d, series * es, series * ee)
{
  static int32_t f0[1024], f1[1024];
  static word hyp[MAX_WORDS];
  static wk_token tok[1024];
  const wk_model *m = ctx->model;
  int64_t end = (int64_t) d->n_frames * WK_HOP;
  int i, nh;

  if (wk_align_window (ctx, 0, false, true, d->text, d->n_text,
          (d->n_frames + 1) / 2, f0, f1) != WK_OK)
    return;
  if (!wk_align_segment (ctx, d->text, d->n_text, f0, f1, 0, 0, end))
    return;
  for (i = 0; i < d->n_text; i++) {
    tok[i].text = wk_tokenizer_bytes (m->tok, d->text[i], NULL);
    tok[i].start = (int64_t) f0[i] * WK_ALIGN_POS_SAMPLES;
    tok[i].end = (int64_t) f1[i] * WK_ALIGN_POS_SAMPLES;
  }
  nh = words_from_tokens (tok, d->n_text, hyp, 0, MAX_WORDS);
  score (d->ref, d->n_ref, hyp, nh, es, ee);
}

/* Encodes file e's first 30 s into ctx; its frames of audio into *n_frames. */
static bool
encode_file (wk_ctx * ctx, const entry * e, int *n_frames)
{
  wk_wav wav;
  char err[512];
  size_t n;
  bool ok;

  if (wk_wav_read (e->wav, &wav, err, sizeof err) != WK_OK) {
    fprintf (stderr, "%s\n", err);
    return false;
  }
  n = wav.n_samples / WK_HOP;
  *n_frames = n < WK_N_FRAMES ? (int) n : WK_N_FRAMES;
  wk_model_window_mel (ctx->model, wav.samples, wav.n_samples, 0, *n_frames,
      ctx->mel);
  ok = wk_encode (ctx, ctx->mel, 2 * ctx->model->hp.n_audio_ctx) == WK_OK;
  wk_wav_clear (&wav);
  return ok;
}

static double
both_mean (const series * s, const series * e)
{
  return (series_mean (s) + series_mean (e)) / 2;
}

static int
search_heads (wk_model * model, const entry * files, int n_files, int threads)
{
  const wk_hparams *hp = &model->hp;
  int nH = hp->n_text_layer * hp->n_text_head, i, k, best_k = 0;
  int32_t *saved = model->align_heads, *all, *set, *rank;
  int n_saved = model->n_align_heads;
  series *es, *ee;
  double *err_h, best = INFINITY;
  decoded **ds;
  wk_ctx *ctx = NULL;
  char err[512];
  wk_stream_params p = wk_stream_default_params ();

  all = malloc ((size_t) nH * 2 * sizeof *all);
  set = malloc ((size_t) nH * 2 * sizeof *set);
  rank = malloc ((size_t) nH * sizeof *rank);
  es = calloc ((size_t) nH, sizeof *es);
  ee = calloc ((size_t) nH, sizeof *ee);
  err_h = calloc ((size_t) nH, sizeof *err_h);
  ds = calloc ((size_t) n_files, sizeof *ds);
  if (!all || !set || !rank || !es || !ee || !err_h || !ds)
    return 1;
  for (i = 0; i < nH; i++) {
    all[2 * i] = i / hp->n_text_head;
    all[2 * i + 1] = i % hp->n_text_head;
  }
  model->align_heads = all;
  model->n_align_heads = nH;
  if (wk_ctx_new (model, threads, 5, &ctx, err, sizeof err) != WK_OK
      || !wk_align_ctx_alloc (ctx)) {
    fprintf (stderr, "%s\n", err);
    return 1;
  }
  p.beam_size = 5;
  p.temperature_inc = 0.0f;

  /* each file decoded once, aligned with every single head */
  for (i = 0; i < n_files; i++) {
    const wk_window_result *r;
    decoded *d = ds[i] = calloc (1, sizeof *d);
    if (!d || !encode_file (ctx, &files[i], &d->n_frames))
      return 1;
    d->n_ref = read_ref (files[i].ref, d->ref, MAX_WORDS);
    if (wk_decode_window (ctx, &p, 0, NULL, NULL, 0, &r) != WK_OK)
      return 1;
    for (k = 0; k < r->n_tokens && d->n_text < 1024; k++)
      if (r->tokens[k] < model->sp.eot)
        d->text[d->n_text++] = r->tokens[k];
    if (d->n_text == 0)
      continue;
    for (k = 0; k < nH; k++) {
      model->align_heads = all + 2 * k;
      model->n_align_heads = 1;
      align_errors (ctx, d, &es[k], &ee[k]);
    }
    model->align_heads = all;
    model->n_align_heads = nH;
  }
  printf ("# single heads on %d files: mean word-boundary error, seconds\n",
      n_files);
  for (k = 0; k < nH; k++) {
    err_h[k] = both_mean (&es[k], &ee[k]);
    rank[k] = k;
    printf ("head %d:%d %.3f\n", all[2 * k], all[2 * k + 1], err_h[k]);
  }
  for (i = 1; i < nH; i++)      /* rank by error, insertion sort */
    for (k = i; k > 0 && err_h[rank[k]] < err_h[rank[k - 1]]; k--) {
      int t = rank[k];
      rank[k] = rank[k - 1];
      rank[k - 1] = t;
    }

  /* the best k together, k = 1 .. nH */
  printf ("# the best k heads together\n");
  for (k = 1; k <= nH; k++) {
    series s = { 0 }, e = { 0 };
    double m;
    for (i = 0; i < k; i++) {
      set[2 * i] = all[2 * rank[i]];
      set[2 * i + 1] = all[2 * rank[i] + 1];
    }
    for (i = 0; i < n_files; i++) {
      int nf;
      if (ds[i]->n_text == 0)
        continue;
      model->align_heads = all;
      model->n_align_heads = nH;
      if (!encode_file (ctx, &files[i], &nf))
        return 1;
      model->align_heads = set;
      model->n_align_heads = k;
      align_errors (ctx, ds[i], &s, &e);
    }
    m = both_mean (&s, &e);
    printf ("k=%d %.3f (start %.3f end %.3f)\n", k, m, series_mean (&s),
        series_mean (&e));
    if (m < best) {
      best = m;
      best_k = k;
    }
    free (s.v);
    free (e.v);
  }
  printf ("best: k=%d, mean %.3f s: --alignment-heads ", best_k, best);
  for (i = 0; i < best_k; i++)
    printf ("%s%d:%d", i ? "," : "", all[2 * rank[i]], all[2 * rank[i] + 1]);
  printf ("\n");

  model->align_heads = saved;
  model->n_align_heads = n_saved;
  wk_ctx_free (ctx);
  for (i = 0; i < n_files; i++)
    free (ds[i]);
  for (k = 0; k < nH; k++) {
    free (es[k].v);
    free (ee[k].v);
  }
  free (ds);
  free (es);
  free (ee);
  free (err_h);
  free (rank);
  free (set);
  free (all);
  return 0;
}

static int
usage (void)
{
  fprintf (stderr, "usage: wk-word-times [-m MODEL] [-t THREADS] "
      "[--latency MS] [--search-heads] LIST\n");
  return 2;
}

int
main (int argc, char **argv)
{
  const char *model_path = NULL, *list = NULL;
  int threads = 0, latency = 0, n_files, i;
  bool search = false;
  entry *files = NULL;
  wk_model_params mp = wk_model_default_params ();
  wk_model *model = NULL;
  char err[512];

  for (i = 1; i < argc; i++) {
    if (!strcmp (argv[i], "-m") && i + 1 < argc)
      model_path = argv[++i];
    else if (!strcmp (argv[i], "-t") && i + 1 < argc)
      threads = atoi (argv[++i]);
    else if (!strcmp (argv[i], "--latency") && i + 1 < argc)
      latency = atoi (argv[++i]);
    else if (!strcmp (argv[i], "--search-heads"))
      search = true;
    else if (argv[i][0] == '-' || list)
      return usage ();
    else
      list = argv[i];
  }
  if (!list)
    return usage ();
  if (!model_path)
    model_path = wk_default_model_path ();
  n_files = read_list (list, &files);
  if (n_files <= 0) {
    fprintf (stderr, "%s: no files\n", list);
    return 1;
  }
  if (wk_model_load (model_path, &mp, &model, err, sizeof err) != WK_OK) {
    fprintf (stderr, "%s\n", err);
    return 1;
  }

  if (search) {
    int rc = search_heads (model, files, n_files, threads);
    wk_model_unref (model);
    free (files);
    return rc;
  }

  {
    static word ref[MAX_WORDS], hyp[MAX_WORDS];
    series es[2] = { {0} }, ee[2] = { {0} };
    int n_ref = 0, n_match[2] = { 0, 0 }, n_zero[2] = { 0, 0 };
    for (i = 0; i < n_files; i++) {
      wk_wav wav;
      int nr = read_ref (files[i].ref, ref, MAX_WORDS);
      if (nr < 0 || wk_wav_read (files[i].wav, &wav, err, sizeof err)
          != WK_OK) {
        fprintf (stderr, "%s: cannot read\n", files[i].wav);
        return 1;
      }
      n_ref += nr;
      for (int k = 0; k < 2; k++) {
        int nh = transcribe (model, &wav, threads, latency, k == 0, hyp,
            MAX_WORDS, &n_zero[k]);
        n_match[k] += score (ref, nr, hyp, nh, &es[k], &ee[k]);
      }
      wk_wav_clear (&wav);
    }
    printf ("# %d files, %d reference words, %d / %d matched, %s\n",
        n_files, n_ref, n_match[0], n_match[1],
        latency > 0 ? "live" : "offline");
    printf ("%-12s %10s %10s %10s %10s %10s\n", "seconds", "start_mean",
        "start_p95", "end_mean", "end_p95", "mean");
    print_row ("dtw", &es[0], &ee[0]);
    print_row ("byte-share", &es[1], &ee[1]);
    printf ("ratio dtw/byte-share (mean of start and end): %.3f\n",
        (series_mean (&es[0]) + series_mean (&ee[0]))
        / (series_mean (&es[1]) + series_mean (&ee[1])));
    printf ("zero-length words: dtw %d, byte-share %d\n", n_zero[0], n_zero[1]);
  }
  wk_model_unref (model);
  free (files);
  return 0;
}
