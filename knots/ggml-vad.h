/* Reader of Silero VAD models in whisper.cpp's ggml layout
 * (for-tests-silero-v6.2.0-ggml.bin, ggml-silero-v*.bin), for the
 * converter: the engine reads only knots.
 *
 * Layout (little-endian int32 unless noted): magic 0x67676d6c; length and
 * bytes of the type string ("silero-16k"); version major, minor, patch;
 * window (512) and context (64) samples; number of encoder layers (4) and,
 * for each, input channels, output channels and kernel size; LSTM input
 * and hidden size (128, 128); final convolution input and output channels
 * (128, 1). Then tensors until the end of the file: number of dimensions,
 * name length, type (0 = f32, 1 = f16), the dimensions (ggml order), the
 * name, the data (not aligned). Every field is checked against the one
 * architecture the engine runs and every size against the file. */
#ifndef WK_GGML_VAD_H
#define WK_GGML_VAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "knot-writer.h"
#include "vad.h"
#include "wk-types.h"

typedef struct
{
  int32_t version[3];
  /* the weights as f32 in the knot's layout (vad.h), all in one block */
  float *block;
  float *stft;                  /* [NFFT][NSTFT_PAD] */
  float *enc_w[WK_VAD_N_ENC];   /* [c_in KSIZE][c_out] */
  float *enc_b[WK_VAD_N_ENC];   /* [c_out] */
  float *w_ih, *w_hh;           /* [HID][NGATES] */
  float *b_gates;               /* [NGATES]: bias_ih + bias_hh */
  float *out_w;                 /* [HID] */
  float *out_b;                 /* [1] */
} wk_ggml_vad;

/* Whether data (at least the first 18 bytes of a file) starts like a
 * ggml VAD model: the ggml magic and the type string "silero-...". */
bool wk_ggml_vad_probe (const void *data, size_t size);

/* Parses and converts a model held in memory (nothing of data is kept). */
wk_status wk_ggml_vad_parse (const void *data, size_t size,
    wk_ggml_vad ** out, char *err, size_t err_size);
/* Reads path; messages start with "<path>: ". */
wk_status wk_ggml_vad_open (const char *path, wk_ggml_vad ** out, char *err,
    size_t err_size);
void wk_ggml_vad_free (wk_ggml_vad * vad);

/* Adds the VAD knot's metadata (general.name = name) and tensors to w,
 * which refers to vad's arrays: keep vad until w is written. */
wk_status wk_ggml_vad_to_knot (const wk_ggml_vad * vad, const char *name,
    wk_knot_writer * w, char *err, size_t err_size);

#endif /* WK_GGML_VAD_H */
