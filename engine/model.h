/* The Whisper model as the engine holds it, and the internal entry points
 * of the recognizer (encoder, decoder, decoding) used by the stream, the
 * tools and the tests.
 *
 * Not installed: this is the contract between model.c / encoder.c /
 * decoder.c / decode.c / stream.c and the tests (test-parity.c,
 * test-stream.c).
 *
 * Shapes are given in ggml order as in wk_tensor (ne[0] first, the
 * contiguous dimension): a Linear weight {in, out} is PyTorch's
 * [out][in]. d = n_audio_state (encoder) or n_text_state (decoder). All
 * 1-D tensors (biases, norms) are f32 and are used through plain
 * pointers; 2-D weights are any wk_type and used in place from the
 * mapping (never copied).
 */
#ifndef WK_MODEL_H
#define WK_MODEL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "whisperknot.h"
#include "wk-types.h"
#include "knot.h"
#include "pool.h"
#include "registry.h"
#include "mel.h"
#include "tokenizer.h"

/* Whisper's fixed audio framing. */
#define WK_N_SAMPLES WK_WINDOW_SAMPLES  /* 480000 */
#define WK_N_FRAMES (WK_N_SAMPLES / WK_HOP)     /* 3000 mel frames */
#define WK_LN_EPS 1e-5f         /* Whisper's LayerNorm epsilon */

typedef struct
{
  int n_vocab;
  int n_mels;
  int n_audio_ctx;              /* 1500: encoder positions (frames / 2) */
  int n_audio_state;
  int n_audio_head;
  int n_audio_layer;
  int n_text_ctx;               /* 448 */
  int n_text_state;
  int n_text_head;
  int n_text_layer;
} wk_hparams;

/* Whether the engine runs a model of these hyper-parameters (each in its
 * range, heads dividing the widths, a Whisper vocabulary, ...): the
 * loader's rule, which whisperknot-convert applies before writing a knot.
 * The message starts "model: ". */
wk_status wk_hparams_check (const wk_hparams * hp, char *err, size_t err_size);

typedef struct
{
  const float *attn_ln_w, *attn_ln_b;   /* [d] */
  const wk_tensor *attn_q;      /* {d, d} */
  const float *attn_q_b;        /* [d] */
  const wk_tensor *attn_k;      /* {d, d}, no bias */
  const wk_tensor *attn_v;      /* {d, d} */
  const float *attn_v_b;        /* [d] */
  const wk_tensor *attn_o;      /* {d, d} */
  const float *attn_o_b;        /* [d] */
  const float *mlp_ln_w, *mlp_ln_b;     /* [d] */
  const wk_tensor *mlp0;        /* {d, 4d} */
  const float *mlp0_b;          /* [4d] */
  const wk_tensor *mlp2;        /* {4d, d} */
  const float *mlp2_b;          /* [d] */
} wk_enc_layer;

typedef struct
{
  const float *attn_ln_w, *attn_ln_b;   /* [d] */
  const wk_tensor *attn_q;      /* {d, d} */
  const float *attn_q_b;
  const wk_tensor *attn_k;      /* {d, d}, no bias */
  const wk_tensor *attn_v;      /* {d, d} */
  const float *attn_v_b;
  const wk_tensor *attn_o;      /* {d, d} */
  const float *attn_o_b;
  const float *cross_ln_w, *cross_ln_b; /* [d] */
  const wk_tensor *cross_q;     /* {d, d} */
  const float *cross_q_b;
  const wk_tensor *cross_k;     /* {n_audio_state, d}, no bias */
  const wk_tensor *cross_v;     /* {n_audio_state, d} */
  const float *cross_v_b;
  const wk_tensor *cross_o;     /* {d, d} */
  const float *cross_o_b;
  const float *mlp_ln_w, *mlp_ln_b;
  const wk_tensor *mlp0;        /* {d, 4d} */
  const float *mlp0_b;
  const wk_tensor *mlp2;        /* {4d, d} */
  const float *mlp2_b;
} wk_dec_layer;

struct wk_model
{
  /* process-wide sharing (registry.h): first, so a wk_loaded * is a
   * wk_model * */
  wk_loaded base;
  char *path;

  wk_knot *knot;
  wk_hparams hp;
  bool multilingual;
  /* whisperknot.pad_window = "silence": a short window's missing frames
   * are those of digital silence (whisper.cpp and Hugging Face pad the
   * audio), not transcribe()'s 0.0 (see wk_model_window_mel) */
  bool pad_silence;
  /* whisperknot.max_text_ctx: the most earlier-text prompt tokens the
   * model was trained with (0: never saw <|startofprev|>); the decoder's
   * initial tokens (decode.c) never take a longer prompt, the caller's
   * initial_prompt included. n_text_ctx / 2 when the key is absent. */
  int max_text_ctx;
  /* whisperknot.timestamp_rule = "max": a timestamp token is sampled only
   * when it is itself likelier than every text token, not (as openai's
   * ApplyTimestampRules does) whenever all timestamps together are; for a
   * model whose timestamp probabilities are spread thin (see decode.c) */
  bool ts_rule_max;
  /* whisperknot.live_audio_ctx = "short": the model was trained with the
   * encoder run on only a short window's own positions, so the live
   * policy's default (WK_AUDIO_CTX_AUTO) shortens its context; models
   * trained on 30 s windows only (OpenAI's) get the full context */
  bool live_short_ctx;
  /* whisperknot.alignment_heads: the decoder's (layer, head) pairs whose
   * cross-attention follows the audio, [n_align_heads][2]; word
   * times come from them (align.h). Without the key: every head of the
   * last half of the layers (align_heads_default); an empty array: none
   * (word times are the segment's span shared out by bytes). */
  int32_t *align_heads;
  int n_align_heads;
  bool align_heads_default;
  uint64_t n_params;

  /* encoder */
  const wk_tensor *conv1_w;     /* {3, n_mels, d} (points at conv1_view) */
  const float *conv1_b;         /* [d] */
  const wk_tensor *conv2_w;     /* {3, d, d} (points at conv2_view) */
  const float *conv2_b;         /* [d] */
  /* The conv weights as wk_conv1d_k3 takes them, ne = {3, c_in, c_out},
   * over the knot's data in place: a knot stores them either so (f32,
   * f16) or flattened to {3 c_in, c_out} (any type whose rows are whole
   * blocks, e.g. q8_0 in quantized knots); the bytes are the same. */
  wk_tensor conv1_view, conv2_view;
  const wk_tensor *enc_pos;     /* {d, n_audio_ctx}, f32 or f16 */
  wk_enc_layer *enc;            /* [n_audio_layer] */
  const float *ln_post_w, *ln_post_b;   /* [d] */

  /* decoder */
  const wk_tensor *tok_emb;     /* {d, n_vocab}: embedding and logits */
  const wk_tensor *dec_pos;     /* {d, n_text_ctx} */
  wk_dec_layer *dec;            /* [n_text_layer] */
  const float *ln_w, *ln_b;     /* [d] */

  /* front end and vocabulary, built once */
  float *mel_filters;           /* [n_mels][WK_N_BINS] */
  wk_mel *mel;
  wk_tokenizer *tok;
  wk_special_tokens sp;
  int max_token_bytes;          /* longest token text */

  /* The scheduler of decoder steps (scheduler.h): streams' steps that come
   * at the same time share one pass over the weights. The one object
   * the model holds that changes after load, behind its own lock;
   * created with the model. */
  struct wk_sched *sched;
  /* The admission of live runs (scheduler.h: at most a run per core, in
   * deadline order), behind its own lock too. */
  struct wk_gate *gate;

  /* Whisper's logit filters, fixed per vocabulary */
  int32_t *suppress;            /* non-speech symbols + specials, sorted */
  int n_suppress;
  int32_t blank[8];             /* encode(" ") */
  int n_blank;
};

/* Whether the model's file is still the version that was loaded (one
 * fstat of the mapped inode, see wk_knot_check_file): a file that shrank
 * would raise SIGBUS in whichever thread next reads a weight past its new
 * end, one rewritten in place no longer matches the bound tensors. Either
 * is WK_ERR_IO with a message naming the file. A file replaced by
 * rename(2), as whisperknot-convert writes, leaves the mapped inode
 * intact and passes. wk_ctx_new checks it; a run should check it before
 * it reads weights. What remains: a file truncated while a run is
 * already reading it can still raise SIGBUS (see knots/FORMAT.md). */
wk_status wk_model_check_file (const wk_model * model, char *err,
    size_t err_size);

/* The load-time check of the values that would silence the model: the
 * mel filters finite, non-negative and not all zero; every tensor but the
 * block matrices (norms, biases, convolutions, positional and token
 * embeddings; the scales of q8_0/q4_0 ones) free of NaN and Inf.
 * WK_ERR_FORMAT with a message naming the tensor. wk_model_load runs it;
 * exposed so tests can time it. */
wk_status wk_model_check_weights (const wk_model * model, char *err,
    size_t err_size);

/* ---- the recognizer's working state ----------------------------------- */

/* Everything one run of the recognizer needs, allocated once by
 * wk_ctx_new (whisper.cpp's whisper_state to the model's whisper_context):
 * encoder activations and scratch, the cross-attention cache (K and V of
 * the encoder output per decoder layer), the self-attention KV cache per
 * beam, logits and decoding buffers, and a handle on the process's
 * shared thread pool (n_threads of it at most, see pool.h). Holds a
 * reference to the model, which it only reads: contexts on one model run
 * in parallel without locks. One thread at a time. */
typedef struct wk_ctx wk_ctx;

wk_status wk_ctx_new (wk_model * model, int n_threads, int n_beams,
    wk_ctx ** out, char *err, size_t err_size);
void wk_ctx_free (wk_ctx * ctx);
wk_model *wk_ctx_model (const wk_ctx * ctx);
/* Bytes of scratch this context owns. */
uint64_t wk_ctx_state_bytes (const wk_ctx * ctx);
/* Bytes of e_qwork: A rows of depth 4 da, the encoder's largest product
 * and, with n_text_ctx <= A, any decoder product's. */
size_t wk_ctx_qwork_size (const wk_ctx * ctx);

/* The scratch of the encoder's integer products for encodes that ask for
 * them (wk_ctx.enc_int8), where the kernels and WK_INT8 let them run;
 * without it such encodes take the f32 panels. false: out of memory. */
bool wk_ctx_int8_alloc (wk_ctx * ctx);

/* The normalised log-mel window the encoder reads, as Whisper's
 * transcribe() builds it: frames first .. first+n_frames-1 of the signal
 * audio[0..n_audio-1] (n_frames <= WK_N_FRAMES), normalised over those
 * frames (max - 8 clamp, (x+4)/4), then padded with 0.0 up to
 * 2 * n_audio_ctx frames; or, for a model marked pad_silence, padded with
 * the frames digital silence gives after the same normalisation
 * ((max - 8 + 4) / 4; -1.5 when there is no content at all), as when the
 * audio itself is padded with zeros. out is [n_mels][2 * n_audio_ctx]. */
void wk_model_window_mel (const wk_model * model, const float *audio,
    size_t n_audio, int64_t first, int n_frames, float *out);

/* Encoder: mel is [n_mels][ld] (ld >= 2 n_audio_ctx, frames along rows).
 * Computes the encoder output and, from it, the cross-attention K/V of
 * every decoder layer. */
wk_status wk_encode (wk_ctx * ctx, const float *mel, int ld);
/* The last encoder output after ln_post: [n_audio_ctx][n_audio_state]. */
const float *wk_ctx_encoder_output (const wk_ctx * ctx);

/* Decoder: runs tokens[0..n-1] at positions n_past .. n_past+n-1 of beam
 * `beam` (its KV cache must hold positions 0..n_past-1 from earlier
 * calls), after wk_encode. n_past + n <= n_text_ctx. If logits is not
 * NULL it receives [n_logits][n_vocab] for the LAST n_logits of the n
 * positions (1 <= n_logits <= n). */
wk_status wk_decoder_eval (wk_ctx * ctx, int beam, const int32_t * tokens,
    int n, int n_past, float *logits, int n_logits);

/* One step of several beams at once (beam search): beam i appends
 * tokens[i] at position n_past of KV-cache slot slots[i] (0 <= slot <
 * the ctx's n_beams); logits (if not NULL) receives [n_beams][n_vocab].
 * The weights (and the token embedding for the logits) are read once for
 * all beams. Same results as wk_decoder_eval per beam. */
wk_status wk_decoder_eval_beams (wk_ctx * ctx, int n_beams, const int *slots,
    const int32_t * tokens, int n_past, float *logits);

/* Plain greedy decoding for parity tests: feeds prompt[0..n_prompt-1],
 * then appends argmax tokens (no logit filters, temperature 0) until
 * <|endoftext|> (which is written) or max_new tokens or the context end.
 * Returns the number of tokens written to out, or -1 on error. */
int wk_greedy_raw (wk_ctx * ctx, const int32_t * prompt, int n_prompt,
    int max_new, int32_t * out);

/* Language detection as Whisper does it: the decoder on <|startoftranscript|>
 * alone, argmax over the language tokens. Returns the language index
 * (wk_language_code), or -1 for English-only models. probs (optional,
 * [n_langs]) receives the language probabilities. After wk_encode. */
int wk_detect_language (wk_ctx * ctx, float *probs);

/* One 30 s window decoded with Whisper's rules and temperature fallback
 * (decoding.py / transcribe.py's decode_with_fallback). Lives in the
 * ctx; valid until the next decode on it. */
typedef struct
{
  const int32_t *tokens;        /* sampled tokens, timestamps included,
                                 * <|endoftext|> excluded */
  const float *probs;           /* probability of each sampled token */
  int n_tokens;
  float sum_logprob;
  float avg_logprob;            /* sum_logprob / (n_tokens + 1) */
  float no_speech_prob;         /* P(<|nospeech|>) at the SOT position */
  float temperature;            /* of the accepted attempt */
  float compression_ratio;      /* zlib ratio of the text */
  int n_attempts;
} wk_window_result;

/* The decoder's context before <|startoftranscript|>, given after
 * <|startofprev|> as openai's decoding.py does, within n_text_ctx / 2 - 1
 * tokens and the model's max_text_ctx (none when that is 0): head (the
 * caller's initial prompt, wk_stream_params.initial_prompt; its last
 * tokens when it is longer) comes first and whole, then the newest tokens
 * of prev (earlier text, oldest first) that fit. Either may be empty. */
typedef struct
{
  const int32_t *head;
  int n_head;
  const int32_t *prev;
  int n_prev;
} wk_prompt;

/* Decodes the window last given to wk_encode. lang is a language index
 * (ignored by English-only models; must be >= 0 for multilingual ones),
 * prompt the context (may be NULL: none). prefix (may be NULL): tokens
 * (text and timestamps) forced after the initial tokens as if decoded, so
 * the result continues them (the live policy's words already committed in
 * this window); the result's tokens are those after it. Uses p's task,
 * timestamps, suppress_blank, temperature, thresholds, beam_size and
 * seed. Afterwards ctx->seq[0 .. ctx->n_context - 1] holds the context
 * tokens it read (<|startofprev|> first; none without a prompt). */
wk_status wk_decode_window (wk_ctx * ctx, const wk_stream_params * p,
    int lang, const wk_prompt * prompt, const int32_t * prefix,
    int n_prefix, const wk_window_result ** res);

/* Whisper's logit filters (SuppressBlank, SuppressTokens,
 * ApplyTimestampRules) on the logits [n_vocab] of the token that follows
 * seq[0..n-1], whose sampled part starts at sample_begin. For tests. */
void wk_logit_filters_apply (const wk_model * m, int sample_begin,
    bool suppress_blank, bool timestamps, float *logits,
    const int32_t * seq, int n);

/* One draw from the distribution p [n] (p >= 0, summing to about 1;
 * entries <= 0 are never drawn) by exponential races: racer i of weight
 * w_i arrives at E_i / w_i with E_i = -log v_i ~ Exp (1), v_i in (0, 1] a
 * hash of (key, i), and the first arrival wins, with probability
 * w_i / sum w (the Gumbel-max trick in another form). Blocks of 64 tokens
 * race with their masses, then the winning block's tokens with theirs.
 * Inverse-CDF sampling lets the running sum's last bits choose among the
 * thousands of tail tokens of p ~ 1e-6 whenever the draw falls in the
 * tail, so kernel sets whose logits differ by f32 rounding drew different
 * tokens; a race's winner changes only if two arrivals are within that
 * rounding of each other. Returns the token, -1 when no p is positive.
 * The same (p, key) gives the same token on every platform (the hash is
 * integer arithmetic). */
int wk_sample_race (const float *p, int n, uint64_t key);

/* zlib compression ratio of bytes, as Whisper measures repetition:
 * len / len (zlib.compress (bytes)). Uses ctx's preallocated zlib arena. */
float wk_ctx_compression_ratio (wk_ctx * ctx, const char *text, size_t len);

/* Private to the engine's model files (encoder.c, decoder.c, decode.c,
 * stream.c); tests use the functions below. da = n_audio_state, dt =
 * n_text_state, A = n_audio_ctx, T = n_text_ctx, V = n_vocab. */
struct wk_ctx
{
  wk_model *model;
  wk_pool *pool;
  int n_beams;

  /* encoder */
  float *mel;                   /* [n_mels][2 A]: the window (stream's) */
  /* e_x is the output; the others point into enc_scratch and alias
   * where lifetimes allow, laid out by wk_encode for the positions it
   * runs (see there) */
  float *enc_scratch;
  size_t enc_scratch_floats;
  float *conv_work;             /* im2col of the larger conv */
  float *e_conv;                /* [2 A][da] conv1 output */
  float *e_x;                   /* [A][da] residual stream; output */
  float *e_xn;                  /* [A][da] normed */
  float *e_q, *e_k, *e_v;       /* [A][da] */
  float *e_att;                 /* [A][da], = e_xn */
  float *e_h;                   /* [A][4 da] MLP hidden, = e_q .. */
  /* the quantized rows of X of the integer products (wk_linear_work),
   * wk_linear_work_size (A, 4 da) bytes, or NULL where they do not run
   * (wk_linear_work_used, wk_ctx_int8_alloc); the encoder's, then the
   * decoder's many-token passes' (decoder.c, batch_linear) */
  void *e_qwork;
  bool encoded;

  /* cross-attention cache, per decoder layer: K and V of the encoder
   * output, [n_text_layer][A][dt]; in f16 (cross_k16/v16) unless the
   * model's decoder weights are f32, since reading them bounds the
   * decoder step; in f32 holding the f16-rounded values (cross_k/v,
   * cross_f16 false, cross_f16_in_f32 true) where the kernel set
   * converts halves in software (wasm): the same attention inputs, no
   * conversion per step, twice the memory */
  bool cross_f16;
  bool cross_f16_in_f32;
  float *cross_k, *cross_v;
  uint16_t *cross_k16, *cross_v16;

  /* self-attention cache, per beam and layer: [n_beams][n_text_layer][T][dt] */
  float *kv_k, *kv_v;

  /* decoder activations for up to T tokens at once */
  float *d_x;                   /* [T][dt] */
  float *d_xn, *d_q, *d_att;    /* [T][dt] */
  float *d_h;                   /* [T][4 dt] */
  float *d_row;                 /* [dt] */

  /* decoding */
  float *logits;                /* [max (2, n_beams)][V] */
  float *logprobs;              /* [V] */
  int32_t *seq;                 /* [T + 1]: initial + sampled tokens */
  int n_context;                /* seq's tokens before <|startoftranscript|>
                                 * in the last decode */
  int32_t *res_tokens;          /* [T] accepted result */
  float *res_probs;             /* [T] */
  int32_t *try_tokens;          /* [T] current attempt */
  float *try_probs;             /* [T] */
  char *text;                   /* decoded bytes for the compression ratio */
  size_t text_cap;
  unsigned char *zbuf;          /* zlib output */
  size_t zbuf_cap;
  unsigned char *zarena;        /* zlib's own state, preallocated */
  size_t zarena_cap, zarena_used;
  uint64_t rng;
  wk_window_result result;
  /* the last wk_detect_language's probabilities, [WK_N_LANGUAGES] */
  float lang_probs[WK_N_LANGUAGES];

  /* beam search (beam_size > 1) */
  int32_t *beam_seq;            /* [3][n_beams][T + 1]: live, next, done */
  float *beam_p;                /* [3][n_beams][T + 1]: their probs */

  uint64_t state_bytes;
  double t_encoder, t_decoder;  /* wall seconds, accumulated */
  int64_t n_decoder_tokens;
  int64_t n_shared_steps;       /* decoder calls batched with others' */
  double t_align;               /* wk_align_window: wall seconds, runs */
  int64_t n_aligned;

  /* word alignment (align.c), allocated only for a model with heads */
  bool al_capture;              /* the decoder adds the heads' weights */
  int al_pos;                   /* encoder positions of the audio */
  float *al_acc;                /* [T][A] heads' processed weights, summed */
  float *al_w;                  /* [T + 1][A + 1] one head; DTW costs */
  uint8_t *al_trace;            /* [T + 1][A + 1] DTW steps */
  float *al_k;                  /* [A][dh] a head's keys + filter scratch */
  int32_t *al_seq;              /* [T + 1] the aligned tokens */
  int *al_path;                 /* DTW path rows, columns; first columns */
  int32_t *al_text;             /* [3][T + 1] a window's text tokens and
                                 * their start / end positions (callers') */
  bool *al_ws;                  /* [T + 1] which tokens start a word */

  /* live policy (live.c) */
  int audio_ctx;                /* encoder positions for the next
                                 * wk_encode: 0 = n_audio_ctx; fewer
                                 * encode only the first 2 audio_ctx mel
                                 * frames (whisper.cpp's audio_ctx) */
  bool enc_int8;                /* the next wk_encode takes the integer
                                 * products (WK_LINEAR_INT8), given
                                 * wk_ctx_int8_alloc */
  int enc_ctx;                  /* positions of the last wk_encode (the
                                 * cross-attention cache's length) */
  int max_tokens;               /* tokens sampled per window: 0 =
                                 * n_text_ctx / 2 (Whisper's) */

  /* Set by wk_stream_cancel from any thread: the encoder and decoder
   * look at it between layers (and the decoder between steps) and give
   * up with WK_ERR_STATE; cleared by wk_stream_reset. */
  atomic_bool cancel;
};

/* The stream's context, for tests that look at what the decoder read
 * (ctx->seq after a window). */
wk_ctx *wk_stream_ctx (wk_stream * stream);

static inline bool
wk_ctx_cancelled (wk_ctx * ctx)
{
  return atomic_load_explicit (&ctx->cancel, memory_order_relaxed);
}

#endif /* WK_MODEL_H */
