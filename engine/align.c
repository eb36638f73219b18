/* Word timing from the alignment heads' cross-attention: see align.h.
 * Written for whisperknot after the method of openai/whisper's timing.py
 * (z-score over tokens, median filter along time, mean of the heads,
 * DTW on the negated matrix); no code taken from it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "align.h"
#include "wk-alloc.h"
#include "wk-time.h"
#include "wk-types.h"

/* ---- matrix helpers ---------------------------------------------------- */

void
wk_align_softmax_rows (float *x, int rows, int cols)
{
  int r, c;

  for (r = 0; r < rows; r++) {
    float *row = x + (size_t) r * cols, mx = -INFINITY;
    double sum = 0.0;
    for (c = 0; c < cols; c++)
      if (row[c] > mx)
        mx = row[c];
    for (c = 0; c < cols; c++) {
      row[c] = expf (row[c] - mx);
      sum += row[c];
    }
    for (c = 0; c < cols; c++)
      row[c] = (float) (row[c] / sum);
  }
}

void
wk_align_zscore_cols (float *x, int rows, int cols)
{
  int r, c;

  if (rows < 1)
    return;
  for (c = 0; c < cols; c++) {
    double mean = 0.0, var = 0.0, sd;
    for (r = 0; r < rows; r++)
      mean += x[(size_t) r * cols + c];
    mean /= rows;
    for (r = 0; r < rows; r++) {
      double d = x[(size_t) r * cols + c] - mean;
      var += d * d;
    }
    sd = sqrt (var / rows);
    for (r = 0; r < rows; r++) {
      float *v = &x[(size_t) r * cols + c];
      *v = sd > 0.0 ? (float) ((*v - mean) / sd) : 0.0f;
    }
  }
}

/* the median of v[0..n-1] (n odd, at most 63), sorting a copy */
static float
median_of (const float *v, int n)
{
  float s[63];
  int i, j;

  for (i = 0; i < n; i++) {
    float t = v[i];
    for (j = i; j > 0 && s[j - 1] > t; j--)
      s[j] = s[j - 1];
    s[j] = t;
  }
  return s[n / 2];
}

void
wk_align_median_filter (float *x, int rows, int cols, int width, float *tmp)
{
  int half = width / 2, r, c;

  if (width < 3 || width % 2 == 0 || width > 63 || cols <= half)
    return;
  for (r = 0; r < rows; r++) {
    float *row = x + (size_t) r * cols;
    /* tmp[half + c] = row[c], mirrored past both ends */
    for (c = 0; c < cols; c++)
      tmp[half + c] = row[c];
    for (c = 1; c <= half; c++) {
      tmp[half - c] = row[c];
      tmp[half + cols - 1 + c] = row[cols - 1 - c];
    }
    for (c = 0; c < cols; c++)
      row[c] = median_of (tmp + c, width);
  }
}

int
wk_align_dtw (const float *cost, int rows, int cols, float *acc,
    uint8_t * trace, int *path_r, int *path_c)
{
  size_t ld = (size_t) cols + 1;
  int r, c, n = 0, i;

  if (rows < 1 || cols < 1)
    return 0;
  /* acc[r][c]: the least cost of a path ending at cell (r-1, c-1); row
   * and column 0 are the border (only (0, 0) reachable) */
  for (c = 0; c <= cols; c++)
    acc[c] = INFINITY;
  acc[0] = 0.0f;
  for (r = 1; r <= rows; r++) {
    acc[r * ld] = INFINITY;
    for (c = 1; c <= cols; c++) {
      float d = acc[(r - 1) * ld + c - 1];      /* diagonal */
      float up = acc[(r - 1) * ld + c]; /* next token, same position */
      float left = acc[r * ld + c - 1]; /* same token, next position */
      float best = d;
      uint8_t t = 0;
      if (up < best) {
        best = up;
        t = 1;
      }
      if (left < best) {
        best = left;
        t = 2;
      }
      acc[r * ld + c] = best + cost[(size_t) (r - 1) * cols + c - 1];
      trace[r * ld + c] = t;
    }
  }
  /* back from the last cell to (0, 0), then reversed */
  r = rows;
  c = cols;
  while (r > 0 && c > 0) {
    uint8_t t = trace[r * ld + c];
    path_r[n] = r - 1;
    path_c[n] = c - 1;
    n++;
    if (t == 0) {
      r--;
      c--;
    } else if (t == 1)
      r--;
    else
      c--;
  }
  for (i = 0; i < n / 2; i++) {
    int a = path_r[i], b = path_c[i];
    path_r[i] = path_r[n - 1 - i];
    path_c[i] = path_c[n - 1 - i];
    path_r[n - 1 - i] = a;
    path_c[n - 1 - i] = b;
  }
  return n;
}

void
wk_align_first_cols (const int *path_r, const int *path_c, int n_path,
    int rows, int *first)
{
  int i, r;

  for (r = 0; r < rows; r++)
    first[r] = -1;
  for (i = 0; i < n_path; i++)
    if (path_r[i] >= 0 && path_r[i] < rows && first[path_r[i]] < 0)
      first[path_r[i]] = path_c[i];
  /* a path from wk_align_dtw visits every row; be safe anyway */
  for (r = 0; r < rows; r++)
    if (first[r] < 0)
      first[r] = r > 0 ? first[r - 1] : 0;
}

void
wk_align_fix_words (int32_t * t0, int32_t * t1, const bool *word_start,
    int n, int32_t lo, int32_t hi)
{
  int32_t prev_end = lo;
  int a = 0, b, i;

  if (hi <= lo)
    hi = lo + 1;
  while (a < n) {
    int32_t ws, we;
    for (b = a + 1; b < n && !word_start[b]; b++);
    ws = t0[a];
    we = t1[b - 1];
    if (ws < prev_end)
      ws = prev_end;
    if (ws > hi - 1)
      ws = hi - 1;
    if (we < ws + 1)
      we = ws + 1;
    if (we > hi)
      we = hi;
    for (i = a; i < b; i++) {
      int32_t s = t0[i], e = t1[i];
      if (i == a || s < ws)
        s = ws;
      if (i > a && s < t1[i - 1])
        s = t1[i - 1];          /* after the token before (>= its start) */
      if (s > we)
        s = we;
      if (i == b - 1 || e > we)
        e = we;
      if (e < s)
        e = s;
      t0[i] = s;
      t1[i] = e;
    }
    prev_end = we;
    a = b;
  }
}

/* ---- scratch ------------------------------------------------------------ */

bool
wk_align_ctx_alloc (wk_ctx * ctx)
{
  const wk_model *m = ctx->model;
  size_t T = (size_t) m->hp.n_text_ctx, A = (size_t) m->hp.n_audio_ctx;
  size_t dh = (size_t) (m->hp.n_text_state / m->hp.n_text_head);

  if (m->n_align_heads == 0)
    return true;
  ctx->al_acc = wk_scratch_alloc (T * A, sizeof (float));
  ctx->al_w = wk_scratch_alloc ((T + 1) * (A + 1), sizeof (float));
  ctx->al_trace = wk_scratch_alloc ((T + 1) * (A + 1), 1);
  ctx->al_k = wk_scratch_alloc (A * dh + A + WK_ALIGN_MEDFILT, sizeof (float));
  ctx->al_seq = calloc (T + 1, sizeof (int32_t));
  ctx->al_path = calloc (2 * (T + A + 1) + T + 1, sizeof (int));
  ctx->al_text = calloc (3 * (T + 1), sizeof (int32_t));
  ctx->al_ws = calloc (T + 1, sizeof (bool));
  if (!ctx->al_acc || !ctx->al_w || !ctx->al_trace || !ctx->al_k
      || !ctx->al_seq || !ctx->al_path || !ctx->al_text || !ctx->al_ws)
    return false;
  ctx->state_bytes += (T * A + (T + 1) * (A + 1) + A * dh + A
      + WK_ALIGN_MEDFILT) * sizeof (float) + (T + 1) * (A + 1)
      + 4 * (T + 1) * sizeof (int32_t) + (T + 1) * sizeof (bool)
      + (2 * (T + A + 1) + T + 1) * sizeof (int);
  return true;
}

void
wk_align_ctx_free (wk_ctx * ctx)
{
  free (ctx->al_acc);
  free (ctx->al_w);
  free (ctx->al_trace);
  free (ctx->al_k);
  free (ctx->al_seq);
  free (ctx->al_path);
  free (ctx->al_text);
  free (ctx->al_ws);
}

bool
wk_align_ready (const wk_ctx * ctx)
{
  return ctx && ctx->model->n_align_heads > 0 && ctx->al_acc && ctx->al_ws;
}

/* ---- the pass ----------------------------------------------------------- */

void
wk_align_capture (wk_ctx * ctx, int l, int n, float scale)
{
  const wk_model *m = ctx->model;
  const wk_hparams *hp = &m->hp;
  int64_t dt = hp->n_text_state, dh = dt / hp->n_text_head;
  int64_t A = hp->n_audio_ctx;
  int P = ctx->al_pos, j;
  float *kh = ctx->al_k, *tmp = ctx->al_k + (size_t) A * dh;
  size_t off;

  if (ctx->enc_ctx > 0 && ctx->enc_ctx < A)
    A = ctx->enc_ctx;           /* the cache holds these positions */
  off = ((size_t) l) * A * dt;
  for (j = 0; j < m->n_align_heads; j++) {
    int h = m->align_heads[2 * j + 1], i, a;
    float *w = ctx->al_w;
    if (m->align_heads[2 * j] != l)
      continue;
    /* the head's keys for the window's positions, as f32 [P][dh] */
    for (a = 0; a < P; a++) {
      size_t ko = off + (size_t) a * dt + (size_t) h * dh;
      int64_t e;
      if (ctx->cross_f16)
        for (e = 0; e < dh; e++)
          kh[a * dh + e] = wk_fp16_to_fp32 (ctx->cross_k16[ko + e]);
      else
        memcpy (kh + a * dh, ctx->cross_k + ko, (size_t) dh * sizeof (float));
    }
    for (i = 0; i < n; i++) {
      const float *q = ctx->d_q + (size_t) i * dt + (size_t) h * dh;
      for (a = 0; a < P; a++) {
        const float *k = kh + (size_t) a * dh;
        float s = 0.0f;
        int64_t e;
        for (e = 0; e < dh; e++)
          s += q[e] * k[e];
        w[(size_t) i * P + a] = s * scale;
      }
    }
    /* openai's order: softmax over the audio's positions only, then
     * standardise over tokens, then smooth along time */
    wk_align_softmax_rows (w, n, P);
    wk_align_zscore_cols (w, n, P);
    wk_align_median_filter (w, n, P, WK_ALIGN_MEDFILT, tmp);
    for (i = 0; i < n * P; i++)
      ctx->al_acc[i] += w[i];
  }
}

wk_status
wk_align_window (wk_ctx * ctx, int lang, bool translate, bool lead_row,
    const int32_t * text, int n_text, int n_pos, int32_t * t0, int32_t * t1)
{
  const wk_model *m;
  const wk_special_tokens *sp;
  int n = 0, sot_len, rows, i, n_path, A, lead;
  int *path_r, *path_c, *first;
  float *cost, inv;
  double t_dec, t_start;
  int64_t n_dec;
  wk_status st;

  if (!ctx || !text || !t0 || !t1 || n_text < 1 || n_pos < 1)
    return WK_ERR_ARG;
  m = ctx->model;
  sp = &m->sp;
  if (!wk_align_ready (ctx))
    return WK_ERR_STATE;
  A = m->hp.n_audio_ctx;
  if (ctx->enc_ctx > 0 && ctx->enc_ctx < A)
    A = ctx->enc_ctx;
  if (n_pos > A)
    n_pos = A;
  sot_len = m->multilingual ? 3 : 1;
  if (sot_len + n_text + 2 > m->hp.n_text_ctx)
    return WK_ERR_ARG;

  /* openai's sequence: SOT [language task] <|notimestamps|> text EOT */
  ctx->al_seq[n++] = sp->sot;
  if (m->multilingual) {
    if (lang < 0 || lang >= sp->n_langs)
      lang = 0;
    ctx->al_seq[n++] = sp->lang_begin + lang;
    ctx->al_seq[n++] = translate ? sp->translate : sp->transcribe;
  }
  ctx->al_seq[n++] = sp->no_timestamps;
  for (i = 0; i < n_text; i++) {
    if (text[i] < 0 || text[i] >= sp->eot)
      return WK_ERR_ARG;
    ctx->al_seq[n++] = text[i];
  }
  ctx->al_seq[n++] = sp->eot;

  memset (ctx->al_acc, 0, (size_t) n * n_pos * sizeof (float));
  ctx->al_pos = n_pos;
  ctx->al_capture = true;
  t_start = wk_now_s ();
  t_dec = ctx->t_decoder;
  n_dec = ctx->n_decoder_tokens;
  st = wk_decoder_eval (ctx, 0, ctx->al_seq, n, 0, NULL, 0);
  ctx->t_decoder = t_dec;       /* the stream counts this pass apart */
  ctx->n_decoder_tokens = n_dec;
  ctx->al_capture = false;
  if (st != WK_OK)
    return st;

  /* rows: the positions that predict [<|notimestamps|>,] text token 0 ..
   * n_text-1 and EOT, i.e. the token before <|notimestamps|> .. the last
   * text token (without lead_row from <|notimestamps|>, as openai does:
   * then the path gives the first token all the audio before it); a
   * token's row is the one that predicts it */
  lead = lead_row ? 1 : 0;
  rows = n_text + 1 + lead;
  cost = ctx->al_acc + (size_t) (sot_len - lead) * n_pos;
  inv = -1.0f / (float) m->n_align_heads;
  for (i = 0; i < rows * n_pos; i++)
    cost[i] *= inv;
  path_r = ctx->al_path;
  path_c = path_r + (m->hp.n_text_ctx + m->hp.n_audio_ctx + 1);
  first = path_c + (m->hp.n_text_ctx + m->hp.n_audio_ctx + 1);
  n_path = wk_align_dtw (cost, rows, n_pos, ctx->al_w, ctx->al_trace,
      path_r, path_c);
  wk_align_first_cols (path_r, path_c, n_path, rows, first);
  for (i = 0; i < n_text; i++) {
    t0[i] = first[i + lead];
    t1[i] = first[i + 1 + lead];
  }
  ctx->t_align += wk_now_s () - t_start;
  ctx->n_aligned++;
  return WK_OK;
}

bool
wk_align_segment (wk_ctx * ctx, const int32_t * tok, int n, int32_t * f0,
    int32_t * f1, int64_t offset, int64_t start, int64_t end)
{
  const wk_model *m = ctx->model;
  int64_t lo, hi;
  int i;

  if (n < 1 || n > m->hp.n_text_ctx || !ctx->al_ws)
    return false;
  /* the segment's whole positions */
  lo = (start - offset + WK_ALIGN_POS_SAMPLES - 1) / WK_ALIGN_POS_SAMPLES;
  hi = (end - offset) / WK_ALIGN_POS_SAMPLES;
  if (start < offset || hi <= lo || hi > INT32_MAX)
    return false;
  for (i = 0; i < n; i++) {
    size_t tl = 0;
    const char *t = wk_tokenizer_bytes (m->tok, tok[i], &tl);
    ctx->al_ws[i] = i == 0 || (t && tl > 0 && t[0] == ' ');
  }
  wk_align_fix_words (f0, f1, ctx->al_ws, n, (int32_t) lo, (int32_t) hi);
  return true;
}
