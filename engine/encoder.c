/* Whisper's audio encoder: two convolutions with GELU, learned positions,
 * pre-LN transformer blocks, a final layer norm; then, once per window,
 * the cross-attention keys and values of every decoder layer.
 *
 * All activations live in the wk_ctx (allocated once); the heavy lifting
 * is in the kernels (wk_linear_ex with fused GELU / residual add,
 * wk_attention, which runs over the 1500 keys in blocks with a running
 * softmax, so no n_ctx x n_ctx score matrix is ever materialised).
 */
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "model.h"
#include "wk-time.h"


/* A cancelled run stops at the next of these, between two of the
 * encoder's large operations (one layer of a large model on a 30 s window
 * takes seconds): the cross-attention cache is incomplete, so nothing may
 * decode from it. */
#define CANCEL_POINT(ctx) do { \
    if (wk_ctx_cancelled (ctx)) \
      return WK_ERR_STATE; \
  } while (0)

wk_status
wk_encode (wk_ctx * ctx, const float *mel, int ld)
{
  const wk_model *m;
  const wk_hparams *hp;
  int64_t A, da, dt, nh, dh, p;
  float scale;
  int l;
  double t0;
  unsigned qf;

  if (!ctx || !mel)
    return WK_ERR_ARG;
  m = ctx->model;
  /* One fstat per window: a model file that shrank or was rewritten in
   * place since the load fails the run here rather than raising SIGBUS in
   * the weights below (see wk_model_check_file). */
  if (wk_model_check_file (m, NULL, 0) != WK_OK)
    return WK_ERR_IO;
  hp = &m->hp;
  A = hp->n_audio_ctx;
  if (ctx->audio_ctx > 0 && ctx->audio_ctx < A)
    A = ctx->audio_ctx;         /* shortened context (live policy) */
  da = hp->n_audio_state;
  dt = hp->n_text_state;
  nh = hp->n_audio_head;
  dh = da / nh;
  if (ld < 2 * A)
    return WK_ERR_ARG;
  ctx->enc_ctx = (int) A;
  qf = ctx->enc_int8 ? WK_LINEAR_INT8 : 0;
  t0 = wk_now_s ();
  ctx->encoded = false;

  /* The scratch in blocks of A x da floats, packed for this run's A so
   * that a short context touches only its own pages:
   *   0: e_xn = e_att (the normed input is dead once q, k, v exist)
   *   1, 2, 3: e_q, e_k, e_v; 1..4: e_h [A][4 da] (q..att are dead in
   *   the MLP; e_h also holds the cross K/V before their f16 rounding);
   *   4 during the self-attention: its per-thread copies of a head's K
   *   and V (2 A dh floats each: as many threads as half the heads)
   * and during the stem: 0..1: e_conv [2A][da], 2..: the im2col work
   * (which fits: wk_ctx_new sized it for the full context). */
  {
    float *w = ctx->enc_scratch;
    size_t blk = (size_t) (A * da);
    ctx->e_xn = ctx->e_att = w;
    ctx->e_q = ctx->e_h = w + blk;
    ctx->e_k = w + 2 * blk;
    ctx->e_v = w + 3 * blk;
    ctx->e_conv = w;
    ctx->conv_work = w + 2 * blk;
  }

  /* conv1: [n_mels][2A] (channel-major) -> [2A][da]; conv2 (stride 2) ->
   * [A][da], both with GELU */
  wk_conv1d_k3 (ctx->pool, m->conv1_w, m->conv1_b, mel, hp->n_mels, 2 * A,
      ld, 0, 1, ctx->e_conv, da, WK_LINEAR_GELU, ctx->conv_work);
  CANCEL_POINT (ctx);
  wk_conv1d_k3 (ctx->pool, m->conv2_w, m->conv2_b, ctx->e_conv, da, 2 * A,
      da, 1, 2, ctx->e_x, da, WK_LINEAR_GELU, ctx->conv_work);

  /* + positional embedding (f32 in place, f16 through a row buffer) */
  for (p = 0; p < A; p++) {
    float *x = ctx->e_x + p * da;
    const float *pos;
    if (m->enc_pos->type == WK_TYPE_F32) {
      pos = (const float *) m->enc_pos->data + p * da;
    } else {
      wk_tensor_get_row (m->enc_pos, p, ctx->e_att);
      pos = ctx->e_att;
    }
    wk_add (x, pos, da);
  }

  scale = 1.0f / sqrtf ((float) dh);
  for (l = 0; l < hp->n_audio_layer; l++) {
    const wk_enc_layer *L = &m->enc[l];

    CANCEL_POINT (ctx);

    /* self-attention */
    wk_layer_norm (ctx->pool, ctx->e_x, A, da, da, L->attn_ln_w, L->attn_ln_b,
        WK_LN_EPS, ctx->e_xn, da);
    wk_linear_work (ctx->pool, L->attn_q, L->attn_q_b, ctx->e_xn, A, da,
        ctx->e_q, da, qf, ctx->e_qwork);
    /* k and v take the normed rows q quantized */
    wk_linear_work (ctx->pool, L->attn_k, NULL, ctx->e_xn, A, da, ctx->e_k, da,
        WK_LINEAR_REUSE_X | qf, ctx->e_qwork);
    wk_linear_work (ctx->pool, L->attn_v, L->attn_v_b, ctx->e_xn, A, da,
        ctx->e_v, da, WK_LINEAR_REUSE_X | qf, ctx->e_qwork);
    CANCEL_POINT (ctx);
    wk_attention_work (ctx->pool, (int) nh, dh, A, A, ctx->e_q, da,
        ctx->e_k, da, ctx->e_v, da, scale, 0, ctx->e_att, da,
        ctx->e_h + 3 * A * da, (size_t) (A * da));
    CANCEL_POINT (ctx);
    wk_linear_work (ctx->pool, L->attn_o, L->attn_o_b, ctx->e_att, A, da,
        ctx->e_x, da, WK_LINEAR_ADD | qf, ctx->e_qwork);

    /* MLP */
    CANCEL_POINT (ctx);
    wk_layer_norm (ctx->pool, ctx->e_x, A, da, da, L->mlp_ln_w, L->mlp_ln_b,
        WK_LN_EPS, ctx->e_xn, da);
    wk_linear_work (ctx->pool, L->mlp0, L->mlp0_b, ctx->e_xn, A, da, ctx->e_h,
        4 * da, WK_LINEAR_GELU | qf, ctx->e_qwork);
    CANCEL_POINT (ctx);
    wk_linear_work (ctx->pool, L->mlp2, L->mlp2_b, ctx->e_h, A, 4 * da,
        ctx->e_x, da, WK_LINEAR_ADD | qf, ctx->e_qwork);
  }
  wk_layer_norm (ctx->pool, ctx->e_x, A, da, da, m->ln_post_w, m->ln_post_b,
      WK_LN_EPS, ctx->e_x, da);
  CANCEL_POINT (ctx);

  /* cross-attention cache: K and V of the encoder output per decoder
   * layer, [A][dt] each */
  for (l = 0; l < hp->n_text_layer; l++) {
    const wk_dec_layer *L = &m->dec[l];
    size_t off = (size_t) l * A * dt;
    /* every product after the first takes the rows it quantized */
    const unsigned rf = (l > 0 ? WK_LINEAR_REUSE_X : 0) | qf;
    if (ctx->cross_f16) {
      /* through the free MLP scratch (>= A x dt floats, see model.c) */
      wk_linear_work (ctx->pool, L->cross_k, NULL, ctx->e_x, A, da, ctx->e_h,
          dt, rf, ctx->e_qwork);
      wk_f32_to_f16 (ctx->e_h, ctx->cross_k16 + off, A * dt);
      wk_linear_work (ctx->pool, L->cross_v, L->cross_v_b, ctx->e_x, A, da,
          ctx->e_h, dt, WK_LINEAR_REUSE_X | qf, ctx->e_qwork);
      wk_f32_to_f16 (ctx->e_h, ctx->cross_v16 + off, A * dt);
    } else {
      wk_linear_work (ctx->pool, L->cross_k, NULL, ctx->e_x, A, da,
          ctx->cross_k + off, dt, rf, ctx->e_qwork);
      wk_linear_work (ctx->pool, L->cross_v, L->cross_v_b, ctx->e_x, A, da,
          ctx->cross_v + off, dt, WK_LINEAR_REUSE_X | qf, ctx->e_qwork);
      if (ctx->cross_f16_in_f32) {
        wk_round_f16 (ctx->cross_k + off, A * dt);
        wk_round_f16 (ctx->cross_v + off, A * dt);
      }
    }
  }
  ctx->encoded = true;
  ctx->t_encoder += wk_now_s () - t0;
  return WK_OK;
}

const float *
wk_ctx_encoder_output (const wk_ctx * ctx)
{
  return ctx && ctx->encoded ? ctx->e_x : NULL;
}
