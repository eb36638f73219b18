/* Hugging Face Whisper checkpoints: model.safetensors, config.json,
 * vocab.json / added_tokens.json / tokenizer.json, and the mel filterbank
 * they lack.
 *
 * Everything here parses hostile input: the JSON parser is strict (RFC
 * 8259, nesting and sizes bounded), every offset is checked against the
 * buffer, and failures are messages, never crashes. */
#ifndef WK_SAFETENSORS_H
#define WK_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wk-types.h"

/* ---- safetensors ------------------------------------------------------ */

typedef enum
{
  WK_ST_F32,
  WK_ST_F16,
  WK_ST_BF16,
} wk_st_dtype;

typedef struct
{
  char *name;                   /* as in the file (NUL-terminated copy) */
  wk_st_dtype dtype;
  int n_dims;                   /* 1..4 */
  int64_t shape[WK_MAX_DIMS];   /* PyTorch order (last is contiguous) */
  const void *data;             /* inside the buffer, unaligned */
  size_t nbytes;
} wk_st_tensor;

typedef struct
{
  int64_t n_tensors;
  wk_st_tensor *tensors;
  /* private */
  void *map_;
  size_t map_size_;
} wk_safetensors;

/* Parses a .safetensors file held in memory (the memory must outlive the
 * result). Tensors of other dtypes (I64 position ids, ...) are skipped
 * when skip_other_dtypes, else an error. */
wk_status wk_safetensors_open_memory (const void *data, size_t size,
    bool skip_other_dtypes, wk_safetensors ** out, char *err, size_t err_size);
wk_status wk_safetensors_open (const char *path, wk_safetensors ** out,
    char *err, size_t err_size);
void wk_safetensors_free (wk_safetensors * st);
const wk_st_tensor *wk_safetensors_find (const wk_safetensors * st,
    const char *name);
/* One element of a tensor as f32 (exact for all three dtypes). */
void wk_st_to_f32 (wk_st_dtype dtype, const void *src, float *dst, size_t n);

/* ---- Hugging Face names ----------------------------------------------- */

/* Maps a Hugging Face Whisper tensor name ("model.encoder.layers.3.fc1.
 * weight") to OpenAI's ("encoder.blocks.3.mlp.0.weight") in out. Returns
 * false for names without an OpenAI counterpart (proj_out.weight, tied to
 * the token embedding) or unknown names. */
bool wk_hf_name_to_openai (const char *hf, char *out, size_t out_size);

/* ---- config.json ------------------------------------------------------ */

typedef struct
{
  int32_t n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer;
  int32_t n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels;
} wk_hf_config;

wk_status wk_hf_config_parse (const char *json, size_t len,
    wk_hf_config * cfg, char *err, size_t err_size);

/* ---- vocabulary ------------------------------------------------------- */

/* Raw token bytes by id, decoded from GPT-2's byte-to-unicode strings. */
typedef struct
{
  int32_t n;                    /* ids 0 .. n-1 (gaps are empty strings) */
  char **tokens;
  uint32_t *lens;
} wk_hf_vocab;

/* json is vocab.json ({"token": id, ...}) or tokenizer.json (its
 * model.vocab object is used when "model" holds an object with a "vocab"
 * object: vocab.json's own "model" member is the token 19849). Ids >= max_id are ignored (special tokens
 * live there); pass 50257 for Whisper's ordinary tokens. */
wk_status wk_hf_vocab_parse (const char *json, size_t len, int32_t max_id,
    wk_hf_vocab * vocab, char *err, size_t err_size);
void wk_hf_vocab_clear (wk_hf_vocab * vocab);

/* Token names with ids, as a checkpoint's side files give them. */
typedef struct
{
  int32_t n;
  char **names;                 /* NUL-terminated */
  int64_t *ids;
} wk_hf_named_ids;

/* json is added_tokens.json ({"<|startoftranscript|>": 50258, ...}) or
 * tokenizer.json (its "added_tokens" list of {"id", "content"}). */
wk_status wk_hf_added_tokens_parse (const char *json, size_t len,
    wk_hf_named_ids * ids, char *err, size_t err_size);
void wk_hf_named_ids_clear (wk_hf_named_ids * ids);

/* The integer members keys[0 .. n_keys-1] of a JSON object (such as
 * generation_config.json's eos_token_id) into vals; -1 where a member is
 * absent or null. A member that is not an integer in 0 .. INT32_MAX is an
 * error. */
wk_status wk_hf_json_ids (const char *json, size_t len,
    const char *const *keys, int n_keys, int64_t * vals, char *err,
    size_t err_size);

/* A tiktoken rank file (openai/whisper's gpt2.tiktoken, multilingual.
 * tiktoken): lines "BASE64_TOKEN RANK"; token bytes are stored at their
 * rank, which is their id. Ranks must be 0 .. n-1, each once, n <=
 * max_ranks (pass 50257); blank lines are skipped. */
wk_status wk_tiktoken_parse (const char *text, size_t len, int32_t max_ranks,
    wk_hf_vocab * vocab, char *err, size_t err_size);

/* generation_config.json's "alignment_heads" ([[layer, head], ...], the
 * decoder heads whose cross-attention times words) into pairs (layer,
 * head, ...; at most max heads). *n = -1 when the member is absent or
 * null; an error when it is anything but a list of pairs of integers in
 * 0 .. 65535 (the range against the model is the caller's). */
wk_status wk_hf_alignment_heads (const char *json, size_t len,
    uint32_t * pairs, int max, int *n, char *err, size_t err_size);

/* ---- shard indexes ---------------------------------------------------- */

/* The weight files a sharded checkpoint's index (model.safetensors.index.
 * json, pytorch_model.bin.index.json) names in its "weight_map", each
 * once, in order of first mention. Each must be a bare file name (no
 * path: the shards lie beside the index). */
typedef struct
{
  int32_t n;
  char **files;                 /* NUL-terminated */
} wk_hf_shards;

wk_status wk_hf_shards_parse (const char *json, size_t len,
    wk_hf_shards * shards, char *err, size_t err_size);
void wk_hf_shards_clear (wk_hf_shards * shards);

/* ---- mel filterbank --------------------------------------------------- */

/* Whisper's filterbank: librosa.filters.mel(sr, n_fft, n_mels) with the
 * Slaney mel scale and Slaney area normalisation, fmin 0, fmax sr/2,
 * computed in double and stored as float like librosa's float32 output.
 * out has n_mels * (n_fft/2 + 1) elements, row-major. */
void wk_mel_filters_slaney (int n_mels, int n_fft, int sample_rate, float *out);

#endif
