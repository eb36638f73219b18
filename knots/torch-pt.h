/* OpenAI's Whisper checkpoints as openai-whisper downloads them
 * (~/.cache/whisper/base.en.pt): PyTorch's zip format, as torch.save
 * writes it since PyTorch 1.6. The archive holds one pickle (NAME/data.pkl)
 * and each tensor storage as a stored (uncompressed) entry NAME/data/KEY.
 * The pickle is read by a small machine that knows only what torch.save
 * writes for a dict of ints and tensors: dicts, lists, tuples, strings,
 * ints, collections.OrderedDict, torch._utils._rebuild_tensor_v2 and
 * _rebuild_parameter over f32, f16 and bf16 storages. Nothing in the file
 * is ever executed or imported; any other object is an error.
 *
 * The checkpoint is {"dims": {"n_mels": ..., ...}, "model_state_dict":
 * {OpenAI tensor name: tensor}}; a bare state dict (no "dims") is read
 * too, with no dims. Everything here parses hostile input: every size
 * and offset is checked against the buffer, tensors must be contiguous
 * and lie inside their storage, and failures are messages. */
#ifndef WK_TORCH_PT_H
#define WK_TORCH_PT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "safetensors.h"

typedef struct
{
  int64_t n_tensors;
  wk_st_tensor *tensors;        /* the state dict's f32/f16/bf16 tensors */
  int64_t n_skipped;            /* tensors of other dtypes (not listed) */
  int n_dims;
  char **dim_names;             /* "dims" members with integer values */
  int64_t *dim_values;
  /* private */
  void *map_;
  size_t map_size_;
} wk_torch_pt;

/* Whether the bytes start like a zip archive (a local file header). */
bool wk_torch_pt_sniff (const void *data, size_t size);

/* Parses a checkpoint held in memory (the memory must outlive the
 * result). */
wk_status wk_torch_pt_open_memory (const void *data, size_t size,
    wk_torch_pt ** out, char *err, size_t err_size);
wk_status wk_torch_pt_open (const char *path, wk_torch_pt ** out, char *err,
    size_t err_size);
void wk_torch_pt_free (wk_torch_pt * pt);
/* A "dims" member: true and *value when present. */
bool wk_torch_pt_dim (const wk_torch_pt * pt, const char *name,
    int64_t * value);

#endif
