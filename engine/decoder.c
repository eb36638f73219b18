/* Whisper's text decoder: token embedding + learned positions, pre-LN
 * blocks of causal self-attention (over a KV cache sized once, n_text_ctx
 * positions per layer and beam), cross-attention over the encoder's
 * cached K/V, MLP; final layer norm; logits against the token embedding.
 * One entry point runs n tokens at once (the start-of-transcript
 * sequence in one pass) or a single step.
 */
#include <math.h>
#include <string.h>

#include "align.h"
#include "kernels.h"
#include "model.h"
#include "scheduler.h"
#include "wk-time.h"

/* wk_attention_f16kv is slower than wk_attention from about 16 queries */
#define WK_F16KV_MAX_QUERIES 16

/* The K (or V) cache of one layer of one beam: [T][dt]. */
static float *
kv_at (const wk_ctx * ctx, float *base, int beam, int layer)
{
  const wk_hparams *hp = &ctx->model->hp;
  return base + ((size_t) beam * hp->n_text_layer + layer)
      * (size_t) hp->n_text_ctx * hp->n_text_state;
}

/* d_att[0..n-1] = attention of d_q[0..n-1] over layer l's cross cache */
static void
cross_attention (wk_ctx * ctx, int l, int64_t n, float scale)
{
  const wk_hparams *hp = &ctx->model->hp;
  int64_t dt = hp->n_text_state, A = hp->n_audio_ctx;
  int nh = hp->n_text_head;
  size_t off;

  if (ctx->enc_ctx > 0 && ctx->enc_ctx < A)
    A = ctx->enc_ctx;           /* the encoder ran on fewer positions */
  off = ((size_t) l) * A * dt;

  if (ctx->cross_f16 && n >= WK_F16KV_MAX_QUERIES) {
    /* Many queries (a prompt): the f16 kernel is meant for few, so the
     * layer's K/V go back to f32 in the context's encoder scratch
     * (>= 2 A dt floats, dead once the cache is built) for
     * wk_attention. */
    wk_tensor t;
    float *k32, *v32;

    memset (&t, 0, sizeof t);
    t.type = WK_TYPE_F16;
    t.n_dims = 2;
    t.ne[0] = A * dt;
    t.ne[1] = t.ne[2] = t.ne[3] = 1;
    t.nbytes = (size_t) (A * dt) * sizeof (uint16_t);
    k32 = ctx->enc_scratch;
    v32 = k32 + A * dt;
    t.data = ctx->cross_k16 + off;
    wk_tensor_get_row (&t, 0, k32);
    t.data = ctx->cross_v16 + off;
    wk_tensor_get_row (&t, 0, v32);
    wk_attention (ctx->pool, nh, dt / nh, n, A, ctx->d_q, dt, k32, dt, v32,
        dt, scale, 0, ctx->d_att, dt);
  } else if (ctx->cross_f16)
    wk_attention_f16kv (ctx->pool, nh, dt / nh, n, A, ctx->d_q, dt,
        ctx->cross_k16 + off, dt, ctx->cross_v16 + off, dt, scale, 0,
        ctx->d_att, dt);
  else if (ctx->cross_f16_in_f32 && n < WK_F16KV_MAX_QUERIES)
    wk_attention_halves (ctx->pool, nh, dt / nh, n, A, ctx->d_q, dt,
        ctx->cross_k + off, dt, ctx->cross_v + off, dt, scale, 0,
        ctx->d_att, dt);
  else
    wk_attention (ctx->pool, nh, dt / nh, n, A, ctx->d_q, dt,
        ctx->cross_k + off, dt, ctx->cross_v + off, dt, scale, 0,
        ctx->d_att, dt);
}

/* One call of the decoder: with slots NULL, n consecutive tokens of
 * KV-cache slot beam at positions n_past .. n_past + n - 1 (causal among
 * themselves, written straight into the cache); else one token per row r
 * at position n_past of slot slots[r] (beam search). Arguments are checked
 * by the callers. logits (if not NULL) receives the last n_logits rows. */
typedef struct
{
  wk_sched_req head;            /* first: the scheduler's view */
  wk_ctx *ctx;
  const int32_t *tokens;
  int n;
  const int *slots;
  int beam;
  int n_past;
  float *logits;
  int n_logits;
  wk_status status;
} wk_dec_req;

/* One product of the batch: a request alone takes wk_linear_work on its
 * own pool, exactly as without a scheduler; several (steps: few rows) take
 * one pass over the weights, which gives each the same bits
 * (wk_linear_batch). A request's many-token pass (a prompt, the word
 * alignment's) takes the integer products where the encoder's do
 * (wk_linear_work's rule), through the encoder's quantization buffer,
 * which is free while the decoder runs (wk_ctx_qwork_size). */
static void
batch_linear (wk_dec_req ** reqs, wk_rows * g, int n_reqs,
    const wk_tensor * W, const float *bias, int64_t ldx, int64_t ldy,
    unsigned flags)
{
  wk_ctx *ctx = reqs[0]->ctx;

  if (n_reqs == 1)
    wk_linear_work (ctx->pool, W, bias, g[0].X, g[0].n, ldx, g[0].Y, ldy,
        flags, wk_linear_work_size (g[0].n, W->ne[0]) <=
        wk_ctx_qwork_size (ctx) ? ctx->e_qwork : NULL);
  else
    wk_linear_batch (ctx->pool, W, bias, g, n_reqs, ldx, ldy, flags);
}

/* Each live request's rows d_x -> d_xn through one layer norm, on its own
 * pool (norms read no large weights: nothing to share). */
static void
batch_layer_norm (wk_dec_req ** reqs, int n_reqs, int64_t dt,
    const float *w, const float *b)
{
  int j;

  for (j = 0; j < n_reqs; j++) {
    wk_ctx *ctx = reqs[j]->ctx;
    if (reqs[j]->status == WK_OK)
      wk_layer_norm (ctx->pool, ctx->d_x, reqs[j]->n, dt, dt, w, b,
          WK_LN_EPS, ctx->d_xn, dt);
  }
}

/* Sets g[i] to request i's rows X -> Y (none once it is cancelled). */
#define ROWS(xexpr, yexpr) do { \
    for (i = 0; i < n_reqs; i++) { \
      wk_dec_req *r = reqs[i]; \
      wk_ctx *c = r->ctx; \
      (void) c; \
      g[i].X = (xexpr); \
      g[i].Y = (yexpr); \
      g[i].n = r->status == WK_OK ? r->n : 0; \
    } \
  } while (0)

/* The decoder on the rows of n_reqs requests of contexts on one model
 * (one body for both entry points): everything that reads weights runs
 * once over every request's rows, the rest (norms, attention over each
 * one's caches) per request on its own pool, as it would alone. */
static void
decode_batch (wk_dec_req ** reqs, int n_reqs)
{
  const wk_model *m = reqs[0]->ctx->model;
  const wk_hparams *hp = &m->hp;
  int64_t dt = hp->n_text_state, nh = hp->n_text_head, dh = dt / nh;
  int64_t V = hp->n_vocab;
  size_t row_bytes = ((size_t) dt) * sizeof (float);
  float scale = 1.0f / sqrtf ((float) dh);
  wk_rows g[WK_SCHED_MAX_REQS];
  int i, j, l;
  double t0 = wk_now_s ();

  /* x = token embedding + position */
  for (j = 0; j < n_reqs; j++) {
    wk_dec_req *r = reqs[j];
    wk_ctx *ctx = r->ctx;
    r->status = WK_OK;
    for (i = 0; i < r->n; i++) {
      float *x = ctx->d_x + (size_t) i * dt;
      int pos = r->slots ? r->n_past : r->n_past + i;
      wk_tensor_get_row (m->tok_emb, r->tokens[i], x);
      if (m->dec_pos->type == WK_TYPE_F32) {
        wk_add (x, (const float *) m->dec_pos->data + (size_t) pos * dt, dt);
      } else {
        wk_tensor_get_row (m->dec_pos, pos, ctx->d_row);
        wk_add (x, ctx->d_row, dt);
      }
    }
  }

  for (l = 0; l < hp->n_text_layer; l++) {
    const wk_dec_layer *L = &m->dec[l];

    /* between layers (the prompt's pass runs many tokens at once) */
    for (j = 0; j < n_reqs; j++)
      if (reqs[j]->status == WK_OK && wk_ctx_cancelled (reqs[j]->ctx))
        reqs[j]->status = WK_ERR_STATE;

    /* causal self-attention; the new keys and values go into the cache
     * (one slot: straight there; beams: each row to its own slot) */
    batch_layer_norm (reqs, n_reqs, dt, L->attn_ln_w, L->attn_ln_b);
    ROWS (c->d_xn, c->d_q);
    batch_linear (reqs, g, n_reqs, L->attn_q, L->attn_q_b, dt, dt, 0);
    ROWS (c->d_xn, r->slots ? c->d_att : kv_at (c, c->kv_k, r->beam, l)
        + (size_t) r->n_past * dt);
    /* k and v take the normed rows q quantized (many-token passes) */
    batch_linear (reqs, g, n_reqs, L->attn_k, NULL, dt, dt, WK_LINEAR_REUSE_X);
    for (j = 0; j < n_reqs; j++) {
      wk_dec_req *r = reqs[j];
      wk_ctx *ctx = r->ctx;
      if (r->status == WK_OK && r->slots)
        for (i = 0; i < r->n; i++)
          memcpy (kv_at (ctx, ctx->kv_k, r->slots[i], l)
              + (size_t) r->n_past * dt, ctx->d_att + (size_t) i * dt,
              row_bytes);
    }
    ROWS (c->d_xn, r->slots ? c->d_att : kv_at (c, c->kv_v, r->beam, l)
        + (size_t) r->n_past * dt);
    batch_linear (reqs, g, n_reqs, L->attn_v, L->attn_v_b, dt, dt,
        WK_LINEAR_REUSE_X);
    for (j = 0; j < n_reqs; j++) {
      wk_dec_req *r = reqs[j];
      wk_ctx *ctx = r->ctx;
      if (r->status != WK_OK)
        continue;
      if (!r->slots) {
        wk_attention (ctx->pool, (int) nh, dh, r->n, r->n_past + r->n,
            ctx->d_q, dt, kv_at (ctx, ctx->kv_k, r->beam, l), dt,
            kv_at (ctx, ctx->kv_v, r->beam, l), dt, scale, 1, ctx->d_att, dt);
        continue;
      }
      for (i = 0; i < r->n; i++)
        memcpy (kv_at (ctx, ctx->kv_v, r->slots[i], l)
            + (size_t) r->n_past * dt, ctx->d_att + (size_t) i * dt, row_bytes);
      for (i = 0; i < r->n; i++)
        wk_attention (ctx->pool, (int) nh, dh, 1, r->n_past + 1,
            ctx->d_q + (size_t) i * dt, dt, kv_at (ctx, ctx->kv_k,
                r->slots[i], l), dt, kv_at (ctx, ctx->kv_v, r->slots[i], l),
            dt, scale, 1, ctx->d_att + (size_t) i * dt, dt);
    }
    ROWS (c->d_att, c->d_x);
    batch_linear (reqs, g, n_reqs, L->attn_o, L->attn_o_b, dt, dt,
        WK_LINEAR_ADD);

    /* cross-attention over the encoder output (shared by all beams) */
    batch_layer_norm (reqs, n_reqs, dt, L->cross_ln_w, L->cross_ln_b);
    ROWS (c->d_xn, c->d_q);
    batch_linear (reqs, g, n_reqs, L->cross_q, L->cross_q_b, dt, dt, 0);
    for (j = 0; j < n_reqs; j++) {
      wk_ctx *ctx = reqs[j]->ctx;
      if (reqs[j]->status != WK_OK)
        continue;
      if (ctx->al_capture)
        wk_align_capture (ctx, l, reqs[j]->n, scale);
      cross_attention (ctx, l, reqs[j]->n, scale);
    }
    ROWS (c->d_att, c->d_x);
    batch_linear (reqs, g, n_reqs, L->cross_o, L->cross_o_b, dt, dt,
        WK_LINEAR_ADD);

    /* MLP */
    batch_layer_norm (reqs, n_reqs, dt, L->mlp_ln_w, L->mlp_ln_b);
    ROWS (c->d_xn, c->d_h);
    batch_linear (reqs, g, n_reqs, L->mlp0, L->mlp0_b, dt, 4 * dt,
        WK_LINEAR_GELU);
    ROWS (c->d_h, c->d_x);
    batch_linear (reqs, g, n_reqs, L->mlp2, L->mlp2_b, 4 * dt, dt,
        WK_LINEAR_ADD);
  }

  /* logits of the last n_logits rows */
  for (j = 0; j < n_reqs; j++) {
    wk_dec_req *r = reqs[j];
    wk_ctx *ctx = r->ctx;
    if (r->status == WK_OK && r->logits)
      wk_layer_norm (ctx->pool, ctx->d_x + (size_t) (r->n - r->n_logits)
          * dt, r->n_logits, dt, dt, m->ln_w, m->ln_b, WK_LN_EPS,
          ctx->d_xn, dt);
  }
  ROWS (c->d_xn, r->logits);
  for (j = 0; j < n_reqs; j++)
    g[j].n = reqs[j]->status == WK_OK && reqs[j]->logits ?
        reqs[j]->n_logits : 0;
  batch_linear (reqs, g, n_reqs, m->tok_emb, NULL, dt, V, 0);

  for (j = 0; j < n_reqs; j++) {
    wk_ctx *ctx = reqs[j]->ctx;
    if (reqs[j]->status != WK_OK)
      continue;
    ctx->n_decoder_tokens += reqs[j]->n;
    if (n_reqs > 1)
      ctx->n_shared_steps++;
    ctx->t_decoder += wk_now_s () - t0;
  }
}

#undef ROWS

static void
decode_batch_sched (wk_sched_req ** reqs, int n_reqs)
{
  decode_batch ((wk_dec_req **) reqs, n_reqs);
}

/* A step (fewer rows than a product's GEMM takes) goes through the
 * model's scheduler, to share a pass over the weights with other
 * streams' steps; a longer call (a prompt) runs here alone. */
static wk_status
decode_rows (wk_ctx * ctx, const int32_t * tokens, int n, const int *slots,
    int beam, int n_past, float *logits, int n_logits)
{
  wk_dec_req req, *one = &req;

  req.head.rows = n;
  req.head.owner = ctx;
  req.ctx = ctx;
  req.tokens = tokens;
  req.n = n;
  req.slots = slots;
  req.beam = beam;
  req.n_past = n_past;
  req.logits = logits;
  req.n_logits = n_logits;
  req.status = WK_OK;
  if (n < WK_LINEAR_GEMM_ROWS && ctx->model->sched)
    wk_sched_run (ctx->model->sched, &req.head, decode_batch_sched);
  else
    decode_batch (&one, 1);
  return req.status;
}

wk_status
wk_decoder_eval (wk_ctx * ctx, int beam, const int32_t * tokens, int n,
    int n_past, float *logits, int n_logits)
{
  const wk_hparams *hp;
  int i;

  if (!ctx || !tokens || n < 1 || n_past < 0)
    return WK_ERR_ARG;
  hp = &ctx->model->hp;
  if (beam < 0 || beam >= ctx->n_beams || n > hp->n_text_ctx
      || n_past > hp->n_text_ctx - n)
    return WK_ERR_ARG;
  if (logits && (n_logits < 1 || n_logits > n))
    return WK_ERR_ARG;
  if (!ctx->encoded)
    return WK_ERR_STATE;
  for (i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
      return WK_ERR_ARG;
  return decode_rows (ctx, tokens, n, NULL, beam, n_past, logits, n_logits);
}

wk_status
wk_decoder_eval_beams (wk_ctx * ctx, int n_beams, const int *slots,
    const int32_t * tokens, int n_past, float *logits)
{
  const wk_hparams *hp;
  int i;

  if (!ctx || !slots || !tokens || n_beams < 1 || n_past < 0)
    return WK_ERR_ARG;
  hp = &ctx->model->hp;
  if (n_beams > ctx->n_beams || n_past >= hp->n_text_ctx)
    return WK_ERR_ARG;
  if (!ctx->encoded)
    return WK_ERR_STATE;
  for (i = 0; i < n_beams; i++)
    if (tokens[i] < 0 || tokens[i] >= hp->n_vocab || slots[i] < 0
        || slots[i] >= ctx->n_beams)
      return WK_ERR_ARG;
  return decode_rows (ctx, tokens, n_beams, slots, 0, n_past, logits, n_beams);
}
