/* Reader of whisper.cpp's legacy ggml .bin model files.
 *
 * Layout: u32 magic 0x67676d6c; 11 int32 hyper-parameters; the mel
 * filterbank (int32 n_mel, int32 n_fft, n_mel*n_fft f32); the vocabulary
 * (int32 n, then n times int32 length + bytes); then tensors until the end
 * of the file (int32 n_dims, int32 name length, int32 ggml type,
 * int32 ne[n_dims], name, data; no padding). Everything is bounds-checked;
 * tensors point into the caller's memory (or the file's mapping). */
#ifndef WK_GGML_BIN_H
#define WK_GGML_BIN_H

#include <stddef.h>
#include <stdint.h>

#include "wk-types.h"

#define WK_GGML_MAGIC 0x67676d6cu

/* ggml type ids found in whisper.cpp files (besides WK_TYPE_*) */
enum
{
  WK_GGML_TYPE_Q4_1 = 3,
  WK_GGML_TYPE_Q5_0 = 6,
  WK_GGML_TYPE_Q5_1 = 7,
};

typedef struct
{
  int32_t n_vocab;
  int32_t n_audio_ctx;
  int32_t n_audio_state;
  int32_t n_audio_head;
  int32_t n_audio_layer;
  int32_t n_text_ctx;
  int32_t n_text_state;
  int32_t n_text_head;
  int32_t n_text_layer;
  int32_t n_mels;
  int32_t ftype;                /* without the quantization version */
  int32_t qntvr;                /* ftype / 1000 in the file */
} wk_ggml_hparams;

typedef struct
{
  const char *name;             /* NUL-terminated copy */
  int type;                     /* ggml type id: 0 1 2 3 6 7 8 */
  int n_dims;
  int64_t ne[WK_MAX_DIMS];      /* unused dims are 1 */
  const void *data;             /* unaligned, inside the file */
  size_t nbytes;
} wk_ggml_tensor;

typedef struct
{
  wk_ggml_hparams hp;
  int32_t n_mel, n_fft;         /* filterbank shape (n_fft is 201) */
  float *mel_filters;           /* n_mel * n_fft, copied (aligned) */
  int32_t n_tokens;             /* vocabulary entries in the file */
  const char **tokens;          /* into the file, not NUL-terminated */
  uint32_t *token_lens;
  int64_t n_tensors;
  wk_ggml_tensor *tensors;
  /* private */
  char *names_;
  const void *map_;
  size_t map_size_;
} wk_ggml_bin;

/* Parses a .bin held in memory (which must outlive the result). */
wk_status wk_ggml_bin_open_memory (const void *data, size_t size,
    wk_ggml_bin ** out, char *err, size_t err_size);
/* Maps and parses a file. */
wk_status wk_ggml_bin_open (const char *path, wk_ggml_bin ** out, char *err,
    size_t err_size);
void wk_ggml_bin_free (wk_ggml_bin * bin);

const wk_ggml_tensor *wk_ggml_bin_find (const wk_ggml_bin * bin,
    const char *name);

/* Name of any type a .bin may hold ("q5_1", ...), NULL if unknown. */
const char *wk_ggml_type_name (int type);
/* Bytes of a row of n elements of any .bin type; 0 if not whole blocks
 * or unknown. */
size_t wk_ggml_row_bytes (int type, int64_t n);
/* Any .bin type -> f32 for one row (n a whole number of blocks). */
void wk_ggml_row_to_f32 (int type, const void *row, float *y, int64_t n);

#endif
