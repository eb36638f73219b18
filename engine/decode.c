/* Whisper's decoding of one window, as openai/whisper's decoding.py and
 * transcribe.py's decode_with_fallback do it:
 *
 *  - initial tokens: [<|startofprev|> prompt... earlier text...]
 *    <|startoftranscript|>
 *    [language task] [<|notimestamps|>];
 *  - logit filters in Whisper's order: SuppressBlank, SuppressTokens
 *    (non-speech symbols + specials), ApplyTimestampRules;
 *  - greedy at temperature 0 (or beam search), sampling above 0;
 *  - no_speech_prob = P(<|nospeech|>) at the <|startoftranscript|> row;
 *  - avg_logprob = sum_logprob / (tokens + 1), compression ratio by zlib;
 *  - temperature fallback 0, inc, 2 inc ... 1.0 while the ratio is above
 *    its threshold or the average log-probability below its own, unless
 *    the window looks silent (no_speech_prob above its threshold with a
 *    low log-probability).
 *
 * best_of at temperature > 0 is 1 (one sample per temperature).
 * Nothing here allocates: every buffer is in the wk_ctx, and zlib's state
 * is carved from a preallocated arena.
 */
#include <math.h>
#include <string.h>
#include <zlib.h>

#include "kernels.h"
#include "model.h"

/* Whisper's max_initial_timestamp = 1.0 s in 0.02 s steps */
#define WK_MAX_INITIAL_TS 50

/* ---- text helpers ---------------------------------------------------- */

static voidpf
zarena_alloc (voidpf opaque, uInt items, uInt size)
{
  wk_ctx *ctx = opaque;
  size_t n = (size_t) items * size;
  void *p;

  n = (n + 15) & ~(size_t) 15;
  if (n > ctx->zarena_cap - ctx->zarena_used)
    return Z_NULL;
  p = ctx->zarena + ctx->zarena_used;
  ctx->zarena_used += n;
  return p;
}

static void
zarena_free (voidpf opaque, voidpf address)
{
  (void) opaque;
  (void) address;
}

float
wk_ctx_compression_ratio (wk_ctx * ctx, const char *text, size_t len)
{
  z_stream zs;
  size_t out;
  int r;

  memset (&zs, 0, sizeof zs);
  zs.zalloc = zarena_alloc;
  zs.zfree = zarena_free;
  zs.opaque = ctx;
  ctx->zarena_used = 0;
  /* zlib.compress(): level 6, 32 KiB window, memLevel 8 */
  if (deflateInit (&zs, Z_DEFAULT_COMPRESSION) != Z_OK)
    return 0.0f;
  zs.next_in = (Bytef *) text;
  zs.avail_in = (uInt) len;
  zs.next_out = ctx->zbuf;
  zs.avail_out = (uInt) ctx->zbuf_cap;
  r = deflate (&zs, Z_FINISH);
  out = zs.total_out;
  deflateEnd (&zs);
  if (r != Z_STREAM_END || out == 0)
    return 0.0f;
  return (float) len / (float) out;
}

/* Whisper's tokenizer.decode(tokens).strip() for the compression check:
 * timestamps dropped, bytes joined, invalid UTF-8 replaced. */
static size_t
window_text (wk_ctx * ctx, const int32_t * tokens, int n)
{
  const wk_model *m = ctx->model;
  char *raw = (char *) ctx->zbuf;       /* scratch before compressing */
  size_t raw_len = 0, cap = ctx->text_cap / 3, len, b, e;
  int i;

  for (i = 0; i < n; i++) {
    size_t tl = 0;
    const char *t;
    if (tokens[i] >= m->sp.timestamp_begin)
      continue;
    t = wk_tokenizer_bytes (m->tok, tokens[i], &tl);
    if (!t || raw_len + tl > cap || raw_len + tl > ctx->zbuf_cap)
      break;
    memcpy (raw + raw_len, t, tl);
    raw_len += tl;
  }
  len = wk_utf8_sanitize (raw, raw_len, ctx->text, ctx->text_cap);
  if (len >= ctx->text_cap)
    len = strlen (ctx->text);
  b = 0;
  e = len;
  while (b < e && strchr (" \t\n\r\v\f", ctx->text[b]))
    b++;
  while (e > b && strchr (" \t\n\r\v\f", ctx->text[e - 1]))
    e--;
  if (b > 0)
    memmove (ctx->text, ctx->text + b, e - b);
  ctx->text[e - b] = '\0';
  return e - b;
}

/* ---- sampling helpers ---------------------------------------------- */

/* splitmix64's finaliser: a well-mixed 64-bit function of z */
static uint64_t
mix64 (uint64_t z)
{
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static uint64_t
rng_next (wk_ctx * ctx)
{
  /* splitmix64 */
  return mix64 (ctx->rng += 0x9e3779b97f4a7c15ull);
}

/* log (sum exp x) over n values; -INFINITY when all are. */
static float
log_sum_exp (const float *x, int n)
{
  float mx = -INFINITY;
  double s = 0.0;
  int i;

  for (i = 0; i < n; i++)
    if (x[i] > mx)
      mx = x[i];
  if (mx == -INFINITY)
    return -INFINITY;
  for (i = 0; i < n; i++)
    s += exp ((double) (x[i] - mx));
  return mx + (float) log (s);
}

/* log (sum exp x) over the vocabulary through the vector softmax: with
 * p = softmax (x), lse = x[i] - log p[i] for the largest x[i] (whose p
 * is at least 1 / n, so it never underflows). */
static float
vocab_lse_at (wk_ctx * ctx, const float *x, int n, int64_t best)
{
  float p;

  if (best < 0 || x[best] == -INFINITY)
    return -INFINITY;
  memcpy (ctx->logprobs, x, (size_t) n * sizeof (float));
  wk_softmax (ctx->logprobs, n);
  p = ctx->logprobs[best];
  if (!(p > 0.0f))
    return log_sum_exp (x, n);
  return x[best] - logf (p);
}

static float
vocab_lse (wk_ctx * ctx, const float *x, int n)
{
  return vocab_lse_at (ctx, x, n, wk_argmax (x, n));
}

/* tokens per block of wk_sample_race's first race */
#define WK_RACE_BLOCK 64

/* The arrival time -log (v) / w of racer i (weight w > 0), v in (0, 1]
 * hashed from (key, i); INFINITY when it cannot come before bound. */
static double
race_arrival (uint64_t key, int i, double w, double bound)
{
  uint64_t h = mix64 (key + ((uint64_t) i + 1) * 0x9e3779b97f4a7c15ull);
  /* a multiple of 2^-53 in (0, 1], so 1 - v is exact */
  double v = (double) ((h >> 11) + 1) * (1.0 / 9007199254740992.0);

  /* -log v >= 1 - v: skip the log when even that bound arrives later (the
   * margin keeps the product's rounding from skipping a racer that the
   * exact comparison would take) */
  if (1.0 - v >= bound * w * (1.0 + 1e-9))
    return INFINITY;
  return -log (v) / w;
}

int
wk_sample_race (const float *p, int n, uint64_t key)
{
  const uint64_t key2 = mix64 (key ^ 0xd1b54a32d192ed03ull);
  double best_t = INFINITY;
  int b, j, e, best_b = -1, best = -1;

  if (!p || n <= 0)
    return -1;
  /* blocks race with their masses, then the winning block's tokens with
   * theirs: P (token) = P (block) P (token | block), with a hash per block
   * and per token of one block instead of one per token */
  for (b = 0; b < n; b += WK_RACE_BLOCK) {
    /* four partial sums (four short dependency chains) in a fixed order */
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, mass, t;
    e = b + WK_RACE_BLOCK < n ? b + WK_RACE_BLOCK : n;
    for (j = b; j + 4 <= e; j += 4) {
      s0 += p[j] > 0.0f ? p[j] : 0.0f;
      s1 += p[j + 1] > 0.0f ? p[j + 1] : 0.0f;
      s2 += p[j + 2] > 0.0f ? p[j + 2] : 0.0f;
      s3 += p[j + 3] > 0.0f ? p[j + 3] : 0.0f;
    }
    for (; j < e; j++)
      s0 += p[j] > 0.0f ? p[j] : 0.0f;
    mass = (s0 + s1) + (s2 + s3);
    if (!(mass > 0.0))
      continue;
    t = race_arrival (key, b / WK_RACE_BLOCK, mass, best_t);
    if (t < best_t) {
      best_t = t;
      best_b = b;
    }
  }
  if (best_b < 0)
    return -1;
  best_t = INFINITY;
  e = best_b + WK_RACE_BLOCK < n ? best_b + WK_RACE_BLOCK : n;
  for (j = best_b; j < e; j++) {
    double t;
    if (!(p[j] > 0.0f))
      continue;
    t = race_arrival (key2, j, p[j], best_t);
    if (t < best_t) {
      best_t = t;
      best = j;
    }
  }
  return best;
}

/* Draws from softmax (x / temp) (Categorical(logits / temperature)), one
 * RNG step per draw. */
static int
sample_token (wk_ctx * ctx, const float *x, int n, float temp)
{
  float *p = ctx->logprobs;
  int i, tok;

  for (i = 0; i < n; i++)
    p[i] = x[i] / temp;
  wk_softmax (p, n);
  tok = wk_sample_race (p, n, rng_next (ctx));
  return tok >= 0 ? tok : 0;
}

/* ---- logit filters ---------------------------------------------------- */

typedef struct
{
  int sample_begin;
  bool suppress_blank;
  bool timestamps;
} filters;

static void
fill (float *x, int b, int e)
{
  int i;
  for (i = b; i < e; i++)
    x[i] = -INFINITY;
}

/* logits of the next token after seq[0..n-1] */
static void
apply_filters (const wk_model * m, const filters * f, float *x,
    const int32_t * seq, int n)
{
  const wk_special_tokens *sp = &m->sp;
  const int32_t *sampled = seq + f->sample_begin;
  int ns = n - f->sample_begin, V = m->hp.n_vocab, tb = sp->timestamp_begin;
  int i;

  /* SuppressBlank */
  if (f->suppress_blank && ns == 0) {
    for (i = 0; i < m->n_blank; i++)
      x[m->blank[i]] = -INFINITY;
    x[sp->eot] = -INFINITY;
  }
  /* SuppressTokens */
  for (i = 0; i < m->n_suppress; i++)
    x[m->suppress[i]] = -INFINITY;

  if (!f->timestamps)
    return;
  /* ApplyTimestampRules */
  x[sp->no_timestamps] = -INFINITY;
  {
    bool last_ts = ns >= 1 && sampled[ns - 1] >= tb;
    bool pen_ts = ns < 2 || sampled[ns - 2] >= tb;
    int last = -1;

    if (last_ts) {
      if (pen_ts)
        fill (x, tb, V);        /* has to be non-timestamp */
      else
        fill (x, 0, sp->eot);   /* cannot be normal text */
    }
    for (i = ns - 1; i >= 0; i--) {
      if (sampled[i] >= tb) {
        last = sampled[i];
        break;
      }
    }
    if (last >= 0) {
      /* timestamps never decrease, and a segment has nonzero length */
      int limit = (last_ts && !pen_ts) ? last : last + 1;
      fill (x, tb, limit < V ? limit : V);
    }
  }
  if (ns == 0) {
    fill (x, 0, tb);
    if (tb + WK_MAX_INITIAL_TS + 1 < V)
      fill (x, tb + WK_MAX_INITIAL_TS + 1, V);
  }
  /* if timestamps together are likelier than any text token, sample one
   * (openai's rule; a model marked timestamp_rule "max" skips it: on
   * whisperknot's own model, whose timestamp mass is spread over many
   * neighbouring times, it ended sentences after their first words, and
   * skipping it lowered WER on the development sets by about 1 point) */
  if (!m->ts_rule_max) {
    float ts_lse = log_sum_exp (x + tb, V - tb);
    float text_max = -INFINITY;
    for (i = 0; i < tb; i++)
      if (x[i] > text_max)
        text_max = x[i];
    if (ts_lse > text_max)
      fill (x, 0, tb);
  }
}

void
wk_logit_filters_apply (const wk_model * m, int sample_begin,
    bool suppress_blank, bool timestamps, float *logits,
    const int32_t * seq, int n)
{
  filters f = { sample_begin, suppress_blank, timestamps };
  apply_filters (m, &f, logits, seq, n);
}

/* ---- initial tokens --------------------------------------------------- */

static int
initial_tokens (wk_ctx * ctx, const wk_stream_params * p, int lang,
    const wk_prompt * prompt, int n_prefix, int *sot_index)
{
  const wk_model *m = ctx->model;
  const wk_special_tokens *sp = &m->sp;
  const int T = m->hp.n_text_ctx;
  int n = 0, room = T / 2 - 1, n_head = 0, n_prev = 0, i;
  const int32_t *head = NULL, *prev = NULL;

  /* openai keeps the last n_text_ctx / 2 - 1 tokens of the context: the
   * caller's prompt first, then the newest earlier text that fits, at
   * most what the model was trained with (none at all for a model never
   * trained with a prompt: on whisperknot's own, a prompt of names left
   * no text at all); a forced prefix (which with the initial tokens may
   * fill 3/4 of the context, see wk_decode_window) shortens it */
  if (room > m->max_text_ctx)
    room = m->max_text_ctx;
  if (room > T * 3 / 4 - n_prefix - 6)
    room = T * 3 / 4 - n_prefix - 6;
  if (room < 0)
    room = 0;
  if (prompt && prompt->n_head > 0 && prompt->head) {
    n_head = prompt->n_head < room ? prompt->n_head : room;
    head = prompt->head + prompt->n_head - n_head;
  }
  if (prompt && prompt->n_prev > 0 && prompt->prev) {
    int cap = room - n_head;
    n_prev = prompt->n_prev < cap ? prompt->n_prev : cap;
    if (n_prev > 0)
      prev = prompt->prev + prompt->n_prev - n_prev;
    else
      n_prev = 0;
  }
  if (n_head + n_prev > 0) {
    ctx->seq[n++] = sp->prev;
    for (i = 0; i < n_head; i++)
      ctx->seq[n++] = head[i];
    for (i = 0; i < n_prev; i++)
      ctx->seq[n++] = prev[i];
  }
  *sot_index = n;
  ctx->n_context = n;
  ctx->seq[n++] = sp->sot;
  if (m->multilingual) {
    if (lang < 0 || lang >= sp->n_langs)
      lang = 0;
    ctx->seq[n++] = sp->lang_begin + lang;
    ctx->seq[n++] = p->translate ? sp->translate : sp->transcribe;
  }
  if (p->no_timestamps)
    ctx->seq[n++] = sp->no_timestamps;
  return n;
}

/* ---- the first step ----------------------------------------------------- */

/* Runs the decoder over ctx->seq[0..n0-1], whose last n_pre tokens are a
 * forced prefix: the no-speech probability from the SOT row, and the
 * logits of the token after seq[n0-1] in ctx->logits' first row. */
static wk_status
eval_initial (wk_ctx * ctx, int n0, int sot_index, int n_pre,
    wk_window_result * r)
{
  const wk_model *m = ctx->model;
  const int V = m->hp.n_vocab;
  int n_init = n0 - n_pre, n_rows = n_init - sot_index;
  wk_status st;

  st = wk_decoder_eval (ctx, 0, ctx->seq, n_init, 0, ctx->logits, n_rows);
  if (st != WK_OK)
    return st;
  r->no_speech_prob = expf (ctx->logits[m->sp.nosp]
      - vocab_lse (ctx, ctx->logits, V));
  if (n_pre > 0)
    return wk_decoder_eval (ctx, 0, ctx->seq + n_init, n_pre, n_init,
        ctx->logits, 1);
  if (n_rows > 1)
    memmove (ctx->logits, ctx->logits + (size_t) (n_rows - 1) * V,
        (size_t) V * sizeof (float));
  return WK_OK;
}

/* ---- greedy / sampling ------------------------------------------------- */

/* One attempt at temperature temp; fills ctx->try_* and the result's
 * log-probabilities. */
static wk_status
decode_sampled (wk_ctx * ctx, const filters * f, int n0, int sot_index,
    int n_pre, float temp, wk_window_result * r)
{
  const wk_model *m = ctx->model;
  const int V = m->hp.n_vocab, T = m->hp.n_text_ctx;
  const int sample_len = ctx->max_tokens > 0 && ctx->max_tokens < T / 2 ?
      ctx->max_tokens : T / 2;
  const int eot = m->sp.eot;
  int n = n0, ns = 0, i;
  double sum = 0.0;
  float *cur;
  wk_status st;

  st = eval_initial (ctx, n0, sot_index, n_pre, r);
  if (st != WK_OK)
    return st;
  cur = ctx->logits;

  for (i = 0; i < sample_len; i++) {
    float lse, lp;
    int tok;

    apply_filters (m, f, cur, ctx->seq, n);
    if (temp > 0.0f) {
      tok = sample_token (ctx, cur, V, temp);
      lse = vocab_lse (ctx, cur, V);
    } else {
      tok = (int) wk_argmax (cur, V);
      lse = vocab_lse_at (ctx, cur, V, tok);
    }
    if (lse == -INFINITY)
      tok = eot;                /* everything suppressed: end the window */
    lp = lse == -INFINITY ? 0.0f : cur[tok] - lse;
    sum += lp;
    ctx->try_tokens[ns] = tok;
    ctx->try_probs[ns] = expf (lp);
    ns++;
    ctx->seq[n++] = tok;
    if (tok == eot || n > T || i + 1 == sample_len)
      break;
    st = wk_decoder_eval (ctx, 0, &ctx->seq[n - 1], 1, n - 1, ctx->logits, 1);
    if (st != WK_OK)
      return st;
    cur = ctx->logits;
  }
  if (ns > 0 && ctx->try_tokens[ns - 1] == eot)
    ns--;
  r->tokens = ctx->try_tokens;
  r->probs = ctx->try_probs;
  r->n_tokens = ns;
  r->sum_logprob = (float) sum;
  r->avg_logprob = (float) (sum / (ns + 1));
  return WK_OK;
}

/* ---- beam search ------------------------------------------------------- */

/* As decoding.py's BeamSearchDecoder with patience 1: every step each
 * live beam proposes its beam_size + 1 best tokens; the best beam_size
 * sequences not ending in <|endoftext|> live on, those ending in it are
 * kept as finished (up to beam_size); done when beam_size have finished.
 * The winner maximises sum_logprob / length. KV caches live in slots;
 * a slot is copied only when one beam has several successors. */

typedef struct
{
  float score;
  int src;
  int32_t tok;
  float lp;
} beam_cand;

static void
kv_copy (wk_ctx * ctx, int dst, int src, int n_pos)
{
  const wk_hparams *hp = &ctx->model->hp;
  size_t per_layer = (size_t) hp->n_text_ctx * hp->n_text_state;
  size_t bytes = (size_t) n_pos * hp->n_text_state * sizeof (float);
  int l;

  for (l = 0; l < hp->n_text_layer; l++) {
    size_t so = ((size_t) src * hp->n_text_layer + l) * per_layer;
    size_t d_o = ((size_t) dst * hp->n_text_layer + l) * per_layer;
    memcpy (ctx->kv_k + d_o, ctx->kv_k + so, bytes);
    memcpy (ctx->kv_v + d_o, ctx->kv_v + so, bytes);
  }
}

static wk_status
decode_beam (wk_ctx * ctx, const filters * f, int n0, int sot_index,
    int n_pre, int B, wk_window_result * r)
{
  const wk_model *m = ctx->model;
  const int V = m->hp.n_vocab, T = m->hp.n_text_ctx, eot = m->sp.eot;
  const int sample_len = ctx->max_tokens > 0 && ctx->max_tokens < T / 2 ?
      ctx->max_tokens : T / 2;
  const size_t stride = (size_t) T + 1;
  /* live beams (tokens + probs), next beams, finished sequences */
  int32_t *live = ctx->beam_seq, *next = live + (size_t) B * stride;
  int32_t *fin = next + (size_t) B * stride;
  float *live_p = ctx->beam_p, *next_p = live_p + (size_t) B * stride;
  float *fin_p = next_p + (size_t) B * stride;
  float live_lp[WK_MAX_BEAM_SIZE], next_lp[WK_MAX_BEAM_SIZE],
      fin_lp[WK_MAX_BEAM_SIZE];
  int slot[WK_MAX_BEAM_SIZE], next_slot[WK_MAX_BEAM_SIZE],
      fin_len[WK_MAX_BEAM_SIZE], uses[WK_MAX_BEAM_SIZE];
  beam_cand cand[WK_MAX_BEAM_SIZE * (WK_MAX_BEAM_SIZE + 1)];
  int n_live = 1, n_fin = 0, len = 0, i, j, step;
  wk_status st;

  st = eval_initial (ctx, n0, sot_index, n_pre, r);
  if (st != WK_OK)
    return st;
  slot[0] = 0;
  live_lp[0] = 0.0f;

  for (step = 0; step < sample_len && n0 + len < T + 1; step++) {
    int n_cand = 0, saved = 0;

    /* candidates of every live beam (its logits are in row j) */
    for (j = 0; j < n_live; j++) {
      float *x = ctx->logits + (size_t) j * V, lse;
      int64_t top[WK_MAX_BEAM_SIZE + 1];
      int k, n_top;
      memcpy (ctx->seq + n0, live + j * stride,
          (size_t) len * sizeof (int32_t));
      apply_filters (m, f, x, ctx->seq, n0 + len);
      /* the B + 1 best tokens in one pass over the vocabulary */
      n_top = wk_top_k (x, V, B + 1, top);
      lse = vocab_lse_at (ctx, x, V, n_top > 0 ? top[0] : 0);
      for (k = 0; k < n_top; k++) {
        int best = (int) top[k];
        cand[n_cand].lp = x[best] - lse;
        cand[n_cand].score = live_lp[j] + cand[n_cand].lp;
        cand[n_cand].src = j;
        cand[n_cand].tok = best;
        n_cand++;
        x[best] = -INFINITY;
      }
    }
    /* rank (stable insertion sort: at most WK_MAX_BEAM_SIZE * (that + 1)
     * entries) */
    for (i = 1; i < n_cand; i++) {
      beam_cand c = cand[i];
      for (j = i; j > 0 && cand[j - 1].score < c.score; j--)
        cand[j] = cand[j - 1];
      cand[j] = c;
    }
    memset (uses, 0, sizeof uses);
    for (i = 0; i < n_cand && saved < B; i++) {
      const beam_cand *c = &cand[i];
      if (c->tok == eot) {
        if (n_fin < B) {
          memcpy (fin + n_fin * stride, live + c->src * stride,
              (size_t) len * sizeof (int32_t));
          memcpy (fin_p + n_fin * stride, live_p + c->src * stride,
              (size_t) len * sizeof (float));
          fin_lp[n_fin] = c->score;
          fin_len[n_fin] = len;
          n_fin++;
        }
        continue;
      }
      memcpy (next + saved * stride, live + c->src * stride,
          (size_t) len * sizeof (int32_t));
      memcpy (next_p + saved * stride, live_p + c->src * stride,
          (size_t) len * sizeof (float));
      next[saved * stride + len] = c->tok;
      next_p[saved * stride + len] = expf (c->lp);
      next_lp[saved] = c->score;
      next_slot[saved] = c->src;        /* source beam for now */
      uses[c->src]++;
      saved++;
    }
    if (n_fin >= B || saved == 0)
      break;

    /* slots: the first successor of a beam keeps its slot, others get a
     * free slot with a copy of the cache */
    {
      int free_slots[WK_MAX_BEAM_SIZE], n_free = 0, first[WK_MAX_BEAM_SIZE];
      bool used_slot[WK_MAX_BEAM_SIZE] = { false };
      for (j = 0; j < n_live; j++)
        if (uses[j] > 0)
          used_slot[slot[j]] = true;
      for (j = 0; j < B; j++)
        if (!used_slot[j])
          free_slots[n_free++] = j;
      memset (first, 0, sizeof first);
      for (i = 0; i < saved; i++) {
        int src = next_slot[i];
        if (!first[src]) {
          first[src] = 1;
          next_slot[i] = slot[src];
        } else {
          int d = free_slots[--n_free];
          kv_copy (ctx, d, slot[src], n0 + len);
          next_slot[i] = d;
        }
      }
    }
    len++;
    n_live = saved;
    for (j = 0; j < n_live; j++) {
      slot[j] = next_slot[j];
      live_lp[j] = next_lp[j];
      memcpy (live + j * stride, next + j * stride,
          (size_t) len * sizeof (int32_t));
      memcpy (live_p + j * stride, next_p + j * stride,
          (size_t) len * sizeof (float));
    }
    if (len >= sample_len || n0 + len > T)
      break;
    {
      int32_t last_tok[WK_MAX_BEAM_SIZE];
      for (j = 0; j < n_live; j++)
        last_tok[j] = live[j * stride + len - 1];
      st = wk_decoder_eval_beams (ctx, n_live, slot, last_tok, n0 + len - 1,
          ctx->logits);
      if (st != WK_OK)
        return st;
    }
  }

  /* not enough finished: the live beams with an implied end */
  for (j = 0; n_fin < B && j < n_live; j++) {
    int best = -1, k;
    for (k = 0; k < n_live; k++)
      if (live_lp[k] > -INFINITY && (best < 0 || live_lp[k] > live_lp[best]))
        best = k;
    if (best < 0)
      break;
    memcpy (fin + n_fin * stride, live + best * stride,
        (size_t) len * sizeof (int32_t));
    memcpy (fin_p + n_fin * stride, live_p + best * stride,
        (size_t) len * sizeof (float));
    fin_lp[n_fin] = live_lp[best];
    fin_len[n_fin] = len;
    live_lp[best] = -INFINITY;
    n_fin++;
  }
  {
    int best = 0;
    float best_score = -INFINITY;
    for (i = 0; i < n_fin; i++) {
      float s = fin_lp[i] / (float) (fin_len[i] > 0 ? fin_len[i] : 1);
      if (s > best_score) {
        best_score = s;
        best = i;
      }
    }
    r->n_tokens = n_fin > 0 ? fin_len[best] : 0;
    memcpy (ctx->try_tokens, fin + best * stride,
        (size_t) r->n_tokens * sizeof (int32_t));
    memcpy (ctx->try_probs, fin_p + best * stride,
        (size_t) r->n_tokens * sizeof (float));
    r->sum_logprob = n_fin > 0 ? fin_lp[best] : 0.0f;
  }
  r->tokens = ctx->try_tokens;
  r->probs = ctx->try_probs;
  r->avg_logprob = r->sum_logprob / (float) (r->n_tokens + 1);
  return WK_OK;
}

/* ---- one window -------------------------------------------------------- */

wk_status
wk_decode_window (wk_ctx * ctx, const wk_stream_params * p, int lang,
    const wk_prompt * prompt, const int32_t * prefix, int n_prefix,
    const wk_window_result ** res)
{
  wk_window_result *r;
  filters f;
  int n0, sot_index, k, V;
  float inc;

  if (!ctx || !p || !res || n_prefix < 0 || (n_prefix > 0 && !prefix))
    return WK_ERR_ARG;
  *res = NULL;
  if (!ctx->encoded)
    return WK_ERR_STATE;
  V = ctx->model->hp.n_vocab;
  r = &ctx->result;
  memset (r, 0, sizeof *r);
  n0 = initial_tokens (ctx, p, lang, prompt, n_prefix, &sot_index);
  /* the forced prefix counts as sampled (timestamp rules see it), and
   * leaves room for at least a quarter of the context to be decoded */
  if (n0 + n_prefix > ctx->model->hp.n_text_ctx * 3 / 4)
    return WK_ERR_ARG;
  for (k = 0; k < n_prefix; k++) {
    if (prefix[k] < 0 || prefix[k] >= V || prefix[k] == ctx->model->sp.eot)
      return WK_ERR_ARG;
    ctx->seq[n0 + k] = prefix[k];
  }
  f.sample_begin = n0;
  n0 += n_prefix;
  f.suppress_blank = p->suppress_blank;
  f.timestamps = !p->no_timestamps;
  inc = p->temperature_inc;

  for (k = 0;; k++) {
    float temp = k * inc;
    bool fallback = false;
    size_t len;
    wk_status st;

    if (k > 0 && (inc <= 0.0f || temp > 1.0f + 1e-6f))
      break;
    if (temp == 0.0f && p->beam_size > 1)
      st = decode_beam (ctx, &f, n0, sot_index, n_prefix,
          p->beam_size < ctx->n_beams ? p->beam_size : ctx->n_beams, r);
    else
      st = decode_sampled (ctx, &f, n0, sot_index, n_prefix, temp, r);
    if (st != WK_OK)
      return st;
    r->temperature = temp;
    r->n_attempts = k + 1;
    len = window_text (ctx, r->tokens, r->n_tokens);
    r->compression_ratio = wk_ctx_compression_ratio (ctx, ctx->text, len);

    if (p->compression_ratio_threshold > 0.0f
        && r->compression_ratio > p->compression_ratio_threshold)
      fallback = true;          /* too repetitive */
    if (r->avg_logprob < p->logprob_threshold)
      fallback = true;          /* too unlikely */
    if (r->no_speech_prob > p->no_speech_threshold
        && r->avg_logprob < p->logprob_threshold)
      fallback = false;         /* silence: no point in retrying */
    if (!fallback)
      break;
  }
  *res = r;
  return WK_OK;
}

/* ---- language detection, raw greedy ------------------------------------- */

int
wk_detect_language (wk_ctx * ctx, float *probs)
{
  const wk_model *m;
  const wk_special_tokens *sp;
  int32_t sot;
  float *x, mx, lse;
  int i, best = 0;

  if (!ctx || !ctx->model->multilingual || !ctx->encoded)
    return -1;
  m = ctx->model;
  sp = &m->sp;
  sot = sp->sot;
  if (wk_decoder_eval (ctx, 0, &sot, 1, 0, ctx->logits, 1) != WK_OK)
    return -1;
  x = ctx->logits + sp->lang_begin;
  mx = x[0];
  for (i = 1; i < sp->n_langs; i++) {
    if (x[i] > mx) {
      mx = x[i];
      best = i;
    }
  }
  lse = log_sum_exp (x, sp->n_langs);
  for (i = 0; i < sp->n_langs; i++) {
    float pr = expf (x[i] - lse);
    if (i < WK_N_LANGUAGES)
      ctx->lang_probs[i] = pr;
    if (probs)
      probs[i] = pr;
  }
  return best;
}

int
wk_greedy_raw (wk_ctx * ctx, const int32_t * prompt, int n_prompt,
    int max_new, int32_t * out)
{
  const wk_model *m;
  int T, V, n, k = 0;
  int32_t tok;

  if (!ctx || !prompt || n_prompt < 1 || max_new < 0 || !out)
    return -1;
  m = ctx->model;
  T = m->hp.n_text_ctx;
  V = m->hp.n_vocab;
  if (n_prompt > T)
    return -1;
  if (max_new == 0)
    return 0;
  if (wk_decoder_eval (ctx, 0, prompt, n_prompt, 0, ctx->logits, 1) != WK_OK)
    return -1;
  n = n_prompt;
  for (;;) {
    tok = (int32_t) wk_argmax (ctx->logits, V);
    out[k++] = tok;
    if (tok == m->sp.eot || k >= max_new || n >= T)
      break;
    if (wk_decoder_eval (ctx, 0, &tok, 1, n, ctx->logits, 1) != WK_OK)
      return -1;
    n++;
  }
  return k;
}
