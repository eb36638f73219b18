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
  else
    wk_attention (ctx->pool, nh, dt / nh, n, A, ctx->d_q, dt,
        ctx->cross_k + off, dt, ctx->cross_v + off, dt, scale, 0,
        ctx->d_att, dt);
}

/* The decoder on n rows (one body for both entry points): with slots
 * NULL, n consecutive tokens of KV-cache slot beam at positions n_past ..
 * n_past + n - 1 (causal among themselves, written straight into the
 * cache); else one token per row r at position n_past of slot slots[r]
 * (beam search). Arguments are checked by the callers. logits (if not
 * NULL) receives the last n_logits rows. */
static wk_status
decode_rows (wk_ctx * ctx, const int32_t * tokens, int n, const int *slots,
    int beam, int n_past, float *logits, int n_logits)
{
  const wk_model *m = ctx->model;
  const wk_hparams *hp = &m->hp;
  int64_t dt = hp->n_text_state, nh = hp->n_text_head, dh = dt / nh;
  int64_t V = hp->n_vocab;
  size_t row_bytes = ((size_t) dt) * sizeof (float);
  float scale = 1.0f / sqrtf ((float) dh);
  int i, l;
  double t0 = wk_now_s ();

  /* x = token embedding + position */
  for (i = 0; i < n; i++) {
    float *x = ctx->d_x + (size_t) i * dt;
    int pos = slots ? n_past : n_past + i;
    wk_tensor_get_row (m->tok_emb, tokens[i], x);
    if (m->dec_pos->type == WK_TYPE_F32) {
      wk_add (x, (const float *) m->dec_pos->data + (size_t) pos * dt, dt);
    } else {
      wk_tensor_get_row (m->dec_pos, pos, ctx->d_row);
      wk_add (x, ctx->d_row, dt);
    }
  }

  for (l = 0; l < hp->n_text_layer; l++) {
    const wk_dec_layer *L = &m->dec[l];
    float *Kc = kv_at (ctx, ctx->kv_k, beam, l);
    float *Vc = kv_at (ctx, ctx->kv_v, beam, l);

    /* between layers (the prompt's pass runs many tokens at once) */
    if (wk_ctx_cancelled (ctx))
      return WK_ERR_STATE;

    /* causal self-attention; the new keys and values go into the cache
     * (one slot: straight there; beams: each row to its own slot) */
    wk_layer_norm (ctx->pool, ctx->d_x, n, dt, dt, L->attn_ln_w,
        L->attn_ln_b, WK_LN_EPS, ctx->d_xn, dt);
    wk_linear (ctx->pool, L->attn_q, L->attn_q_b, ctx->d_xn, n, dt, ctx->d_q,
        dt);
    if (!slots) {
      wk_linear (ctx->pool, L->attn_k, NULL, ctx->d_xn, n, dt,
          Kc + (size_t) n_past * dt, dt);
      wk_linear (ctx->pool, L->attn_v, L->attn_v_b, ctx->d_xn, n, dt,
          Vc + (size_t) n_past * dt, dt);
      wk_attention (ctx->pool, (int) nh, dh, n, n_past + n, ctx->d_q, dt, Kc,
          dt, Vc, dt, scale, 1, ctx->d_att, dt);
    } else {
      wk_linear (ctx->pool, L->attn_k, NULL, ctx->d_xn, n, dt, ctx->d_att, dt);
      for (i = 0; i < n; i++)
        memcpy (kv_at (ctx, ctx->kv_k, slots[i], l) + (size_t) n_past * dt,
            ctx->d_att + (size_t) i * dt, row_bytes);
      wk_linear (ctx->pool, L->attn_v, L->attn_v_b, ctx->d_xn, n, dt,
          ctx->d_att, dt);
      for (i = 0; i < n; i++)
        memcpy (kv_at (ctx, ctx->kv_v, slots[i], l) + (size_t) n_past * dt,
            ctx->d_att + (size_t) i * dt, row_bytes);
      for (i = 0; i < n; i++)
        wk_attention (ctx->pool, (int) nh, dh, 1, n_past + 1,
            ctx->d_q + (size_t) i * dt, dt, kv_at (ctx, ctx->kv_k, slots[i],
                l), dt, kv_at (ctx, ctx->kv_v, slots[i], l), dt, scale, 1,
            ctx->d_att + (size_t) i * dt, dt);
    }
    wk_linear_ex (ctx->pool, L->attn_o, L->attn_o_b, ctx->d_att, n, dt,
        ctx->d_x, dt, WK_LINEAR_ADD);

    /* cross-attention over the encoder output (shared by all beams) */
    wk_layer_norm (ctx->pool, ctx->d_x, n, dt, dt, L->cross_ln_w,
        L->cross_ln_b, WK_LN_EPS, ctx->d_xn, dt);
    wk_linear (ctx->pool, L->cross_q, L->cross_q_b, ctx->d_xn, n, dt,
        ctx->d_q, dt);
    if (ctx->al_capture)
      wk_align_capture (ctx, l, n, scale);
    cross_attention (ctx, l, n, scale);
    wk_linear_ex (ctx->pool, L->cross_o, L->cross_o_b, ctx->d_att, n, dt,
        ctx->d_x, dt, WK_LINEAR_ADD);

    /* MLP */
    wk_layer_norm (ctx->pool, ctx->d_x, n, dt, dt, L->mlp_ln_w, L->mlp_ln_b,
        WK_LN_EPS, ctx->d_xn, dt);
    wk_linear_ex (ctx->pool, L->mlp0, L->mlp0_b, ctx->d_xn, n, dt, ctx->d_h,
        4 * dt, WK_LINEAR_GELU);
    wk_linear_ex (ctx->pool, L->mlp2, L->mlp2_b, ctx->d_h, n, 4 * dt,
        ctx->d_x, dt, WK_LINEAR_ADD);
  }

  if (logits) {
    const float *x = ctx->d_x + (size_t) (n - n_logits) * dt;
    wk_layer_norm (ctx->pool, x, n_logits, dt, dt, m->ln_w, m->ln_b,
        WK_LN_EPS, ctx->d_xn, dt);
    wk_linear (ctx->pool, m->tok_emb, NULL, ctx->d_xn, n_logits, dt, logits, V);
  }
  ctx->n_decoder_tokens += n;
  ctx->t_decoder += wk_now_s () - t0;
  return WK_OK;
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
