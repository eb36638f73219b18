/* whisper.cpp legacy ggml .bin reader: a bounds-checked walk over the
 * header, filterbank, vocabulary and tensor records. */
#include "ggml-bin.h"
#include "wk-err.h"
#include "mapfile.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIN_MAX_NAME 256
#define BIN_MAX_HPARAM (1 << 24)

typedef struct
{
  const uint8_t *p;
  size_t size, off;
  char *err;
  size_t err_size;
} cursor;

static bool
rd_i32 (cursor * c, int32_t * v, const char *what)
{
  uint32_t u;

  if (c->size - c->off < 4) {
    wk_set_err (c->err, c->err_size, "ggml .bin: truncated: %s at offset %zu "
        "past the end of the file (size %zu)", what, c->off, c->size);
    return false;
  }
  u = (uint32_t) c->p[c->off] | (uint32_t) c->p[c->off + 1] << 8 |
      (uint32_t) c->p[c->off + 2] << 16 | (uint32_t) c->p[c->off + 3] << 24;
  memcpy (v, &u, 4);
  c->off += 4;
  return true;
}

const char *
wk_ggml_type_name (int type)
{
  switch (type) {
    case WK_GGML_TYPE_Q4_1:
      return "q4_1";
    case WK_GGML_TYPE_Q5_0:
      return "q5_0";
    case WK_GGML_TYPE_Q5_1:
      return "q5_1";
    default:
      return wk_type_name (type);
  }
}

static size_t
block_bytes (int type)
{
  switch (type) {
    case WK_GGML_TYPE_Q4_1:
      return 20;                /* f16 d, f16 m, 16 nibble bytes */
    case WK_GGML_TYPE_Q5_0:
      return 22;                /* f16 d, u32 high bits, 16 bytes */
    case WK_GGML_TYPE_Q5_1:
      return 24;                /* f16 d, f16 m, u32 high bits, 16 bytes */
    default:
      return wk_type_block_bytes ((wk_type) type);
  }
}

size_t
wk_ggml_row_bytes (int type, int64_t n)
{
  size_t bb = block_bytes (type);
  int64_t be;

  if (bb == 0 || n <= 0)
    return 0;
  be = (type == WK_TYPE_F32 || type == WK_TYPE_F16) ? 1 : WK_QK;
  if (n % be != 0 || (uint64_t) (n / be) > SIZE_MAX / bb)
    return 0;
  return (size_t) (n / be) * bb;
}

static float
h2f (const uint8_t * p)
{
  return wk_fp16_to_fp32 ((uint16_t) (p[0] | p[1] << 8));
}

void
wk_ggml_row_to_f32 (int type, const void *row, float *y, int64_t n)
{
  const uint8_t *b = row;
  size_t bb = block_bytes (type);

  switch (type) {
    case WK_GGML_TYPE_Q4_1:
      for (int64_t i = 0; i < n / WK_QK; i++, b += bb) {
        float d = h2f (b), m = h2f (b + 2);
        for (int j = 0; j < 16; j++) {
          y[i * WK_QK + j] = (float) (b[4 + j] & 15) * d + m;
          y[i * WK_QK + 16 + j] = (float) (b[4 + j] >> 4) * d + m;
        }
      }
      break;
    case WK_GGML_TYPE_Q5_0:
    case WK_GGML_TYPE_Q5_1:{
      bool q51 = type == WK_GGML_TYPE_Q5_1;
      for (int64_t i = 0; i < n / WK_QK; i++, b += bb) {
        float d = h2f (b), m = q51 ? h2f (b + 2) : 0.0f;
        const uint8_t *hb = b + (q51 ? 4 : 2), *qs = hb + 4;
        uint32_t qh = (uint32_t) hb[0] | (uint32_t) hb[1] << 8 |
            (uint32_t) hb[2] << 16 | (uint32_t) hb[3] << 24;
        /* bit j of qh is the fifth bit of element j, bit j+16 of j+16 */
        for (int j = 0; j < 16; j++) {
          int lo = (qs[j] & 15) | (int) (((qh >> j) & 1) << 4);
          int hi = (qs[j] >> 4) | (int) (((qh >> (j + 16)) & 1) << 4);
          if (q51) {
            y[i * WK_QK + j] = ((float) lo) * d + m;
            y[i * WK_QK + 16 + j] = ((float) hi) * d + m;
          } else {
            y[i * WK_QK + j] = (float) (lo - 16) * d;
            y[i * WK_QK + 16 + j] = (float) (hi - 16) * d;
          }
        }
      }
      break;
    }
    case WK_TYPE_Q8_0:
    case WK_TYPE_Q4_0:
      /* .bin data has no alignment: dequantize from aligned copies */
      for (int64_t i = 0; i < n / WK_QK; i++, b += bb) {
        union
        {
          wk_block_q8_0 q8;
          wk_block_q4_0 q4;
        } blk;
        memcpy (&blk, b, bb);
        wk_row_to_f32 ((wk_type) type, &blk, y + i * WK_QK, WK_QK);
      }
      break;
    default:
      wk_row_to_f32 ((wk_type) type, row, y, n);
      break;
  }
}

static bool
is_quantized (int type)
{
  return type != WK_TYPE_F32 && type != WK_TYPE_F16;
}

static uint64_t
fnv1a (const char *s)
{
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++) {
    h ^= (unsigned char) *s;
    h *= 0x100000001b3ull;
  }
  return h;
}

void
wk_ggml_bin_free (wk_ggml_bin * bin)
{
  if (!bin)
    return;
  free (bin->mel_filters);
  free (bin->tokens);
  free (bin->token_lens);
  free (bin->tensors);
  free (bin->names_);
  wk_unmap_file (bin->map_, bin->map_size_);
  free (bin);
}

static wk_status
parse (wk_ggml_bin * b, const uint8_t * data, size_t size, char *err,
    size_t err_size)
{
  cursor c = { data, size, 0, err, err_size };
  int32_t v, hp[11];
  static const char *hp_names[11] = { "n_vocab", "n_audio_ctx",
    "n_audio_state", "n_audio_head", "n_audio_layer", "n_text_ctx",
    "n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype"
  };
  size_t cap = 0, names_len = 0;
  size_t *hash = NULL, hash_cap = 0;
  wk_status st = WK_ERR_FORMAT;

  if (!rd_i32 (&c, &v, "magic") || (uint32_t) v != WK_GGML_MAGIC) {
    wk_set_err (err, err_size, "ggml .bin: bad magic (not a whisper.cpp ggml "
        "model file)");
    return WK_ERR_FORMAT;
  }
  for (int i = 0; i < 11; i++) {
    if (!rd_i32 (&c, &hp[i], hp_names[i]))
      return WK_ERR_FORMAT;
    if (hp[i] < (i == 10 ? 0 : 1) || hp[i] > BIN_MAX_HPARAM) {
      wk_set_err (err, err_size, "ggml .bin: hyper-parameter %s = %d is out of "
          "range", hp_names[i], hp[i]);
      return WK_ERR_FORMAT;
    }
  }
  b->hp.n_vocab = hp[0];
  b->hp.n_audio_ctx = hp[1];
  b->hp.n_audio_state = hp[2];
  b->hp.n_audio_head = hp[3];
  b->hp.n_audio_layer = hp[4];
  b->hp.n_text_ctx = hp[5];
  b->hp.n_text_state = hp[6];
  b->hp.n_text_head = hp[7];
  b->hp.n_text_layer = hp[8];
  b->hp.n_mels = hp[9];
  b->hp.ftype = hp[10] % 1000;
  b->hp.qntvr = hp[10] / 1000;

  /* mel filterbank */
  if (!rd_i32 (&c, &b->n_mel, "filter n_mel")
      || !rd_i32 (&c, &b->n_fft, "filter n_fft"))
    return WK_ERR_FORMAT;
  if (b->n_mel < 0 || b->n_fft < 0 || (uint64_t) b->n_mel * (uint64_t)
      b->n_fft > (c.size - c.off) / 4) {
    wk_set_err (err, err_size, "ggml .bin: mel filterbank %d x %d at offset "
        "%zu does not fit in the file (size %zu)", b->n_mel, b->n_fft,
        c.off, c.size);
    return WK_ERR_FORMAT;
  }
  {
    size_t n = (size_t) b->n_mel * (size_t) b->n_fft;
    b->mel_filters = malloc (n ? n * 4 : 4);
    if (!b->mel_filters)
      goto nomem;
    memcpy (b->mel_filters, data + c.off, n * 4);
    c.off += n * 4;
  }

  /* vocabulary */
  if (!rd_i32 (&c, &b->n_tokens, "vocabulary size"))
    return WK_ERR_FORMAT;
  if (b->n_tokens < 0 || (size_t) b->n_tokens > (c.size - c.off) / 4) {
    wk_set_err (err, err_size, "ggml .bin: vocabulary of %d entries at offset "
        "%zu cannot fit in the file (size %zu)", b->n_tokens, c.off, c.size);
    return WK_ERR_FORMAT;
  }
  b->tokens = malloc ((b->n_tokens ? b->n_tokens : 1) * sizeof (char *));
  b->token_lens = malloc ((b->n_tokens ? b->n_tokens : 1) * sizeof (uint32_t));
  if (!b->tokens || !b->token_lens)
    goto nomem;
  for (int32_t i = 0; i < b->n_tokens; i++) {
    int32_t len;
    if (!rd_i32 (&c, &len, "token length"))
      return WK_ERR_FORMAT;
    if ((uint32_t) len > c.size - c.off) {
      wk_set_err (err, err_size, "ggml .bin: token %d at offset %zu has length "
          "%u, past the end of the file (size %zu)", i, c.off - 4,
          (uint32_t) len, c.size);
      return WK_ERR_FORMAT;
    }
    b->tokens[i] = (const char *) data + c.off;
    b->token_lens[i] = (uint32_t) len;
    c.off += (uint32_t) len;
  }

  /* tensors until the end */
  b->names_ = malloc (c.size - c.off + 1);
  if (!b->names_)
    goto nomem;
  while (c.off < c.size) {
    int32_t n_dims, name_len, type;
    wk_ggml_tensor *t;
    size_t rb, at = c.off;
    uint64_t rows = 1;

    if (!rd_i32 (&c, &n_dims, "tensor n_dims")
        || !rd_i32 (&c, &name_len, "tensor name length")
        || !rd_i32 (&c, &type, "tensor type"))
      goto out;
    if (n_dims < 1 || n_dims > WK_MAX_DIMS) {
      wk_set_err (err, err_size, "ggml .bin: tensor record at offset %zu has "
          "%d dimensions (must be 1..4)", at, n_dims);
      goto out;
    }
    if (name_len < 1 || name_len > BIN_MAX_NAME) {
      wk_set_err (err, err_size, "ggml .bin: tensor record at offset %zu has "
          "a name length of %d (must be 1..%d)", at, name_len, BIN_MAX_NAME);
      goto out;
    }
    if ((size_t) b->n_tensors == cap) {
      size_t ncap = cap ? 2 * cap : 64;
      wk_ggml_tensor *nt = realloc (b->tensors, ncap * sizeof *nt);
      if (!nt)
        goto nomem;
      b->tensors = nt;
      cap = ncap;
    }
    t = &b->tensors[b->n_tensors];
    memset (t, 0, sizeof *t);
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < WK_MAX_DIMS; d++)
      t->ne[d] = 1;
    for (int d = 0; d < n_dims; d++) {
      int32_t ne;
      if (!rd_i32 (&c, &ne, "tensor dimension"))
        goto out;
      if (ne < 1) {
        wk_set_err (err, err_size, "ggml .bin: tensor record at offset %zu: "
            "dimension %d is %d", at, d, ne);
        goto out;
      }
      t->ne[d] = ne;
    }
    if ((size_t) name_len > c.size - c.off) {
      wk_set_err (err, err_size, "ggml .bin: tensor name at offset %zu extends "
          "past the end of the file (size %zu)", c.off, c.size);
      goto out;
    }
    if (memchr (data + c.off, 0, (size_t) name_len)) {
      wk_set_err (err, err_size, "ggml .bin: tensor name at offset %zu "
          "contains NUL", c.off);
      goto out;
    }
    memcpy (b->names_ + names_len, data + c.off, (size_t) name_len);
    b->names_[names_len + name_len] = '\0';
    t->name = (const char *) (uintptr_t) names_len;
    names_len += (size_t) name_len + 1;
    c.off += (size_t) name_len;
    {
      const char *nm = b->names_ + (size_t) (uintptr_t) t->name;
      if (!wk_ggml_type_name (type)) {
        wk_set_err (err, err_size, "ggml .bin: tensor '%s' has unsupported "
            "ggml type %d (readable: f32, f16, q4_0, q4_1, q5_0, q5_1, "
            "q8_0)", nm, type);
        st = WK_ERR_UNSUPPORTED;
        goto out;
      }
      if (is_quantized (type) && b->hp.qntvr != 2) {
        wk_set_err (err, err_size, "ggml .bin: tensor '%s' is %s from ggml "
            "quantization version %d; only version 2 (the current block "
            "layouts) is supported: requantize it with a recent whisper.cpp",
            nm, wk_ggml_type_name (type), b->hp.qntvr);
        st = WK_ERR_UNSUPPORTED;
        goto out;
      }
      rb = wk_ggml_row_bytes (type, t->ne[0]);
      if (rb == 0) {
        wk_set_err (err, err_size, "ggml .bin: tensor '%s' of type %s has rows "
            "of %lld elements, not whole blocks", nm,
            wk_ggml_type_name (type), (long long) t->ne[0]);
        goto out;
      }
      {
        /* rows may not exceed what the rest of the file can hold; checking
         * each factor against that limit also rules out overflow */
        uint64_t limit = (c.size - c.off) / rb;
        bool fits = true;
        for (int d = 1; d < n_dims && fits; d++) {
          if ((uint64_t) t->ne[d] > limit / rows)
            fits = false;
          else
            rows *= (uint64_t) t->ne[d];
        }
        if (!fits)
          rows = UINT64_MAX;
      }
      if (rows > (c.size - c.off) / rb) {
        wk_set_err (err, err_size, "ggml .bin: tensor '%s' data [%zu, +%llu x "
            "%zu bytes) extends past end of file (size %zu)", nm, c.off,
            (unsigned long long) rows, rb, c.size);
        goto out;
      }
      t->data = data + c.off;
      t->nbytes = ((size_t) rows) * rb;
      c.off += t->nbytes;
    }
    b->n_tensors++;
  }

  /* names are final: fix pointers, reject duplicates */
  for (int64_t i = 0; i < b->n_tensors; i++)
    b->tensors[i].name = b->names_ + (size_t) (uintptr_t) b->tensors[i].name;
  hash_cap = 16;
  while (hash_cap < 2 * (size_t) b->n_tensors)
    hash_cap *= 2;
  hash = calloc (hash_cap, sizeof *hash);
  if (!hash)
    goto nomem;
  for (int64_t i = 0; i < b->n_tensors; i++) {
    size_t h = (size_t) fnv1a (b->tensors[i].name) & (hash_cap - 1);
    while (hash[h]) {
      if (strcmp (b->tensors[hash[h] - 1].name, b->tensors[i].name) == 0) {
        wk_set_err (err, err_size, "ggml .bin: tensor '%s' appears twice",
            b->tensors[i].name);
        goto out;
      }
      h = (h + 1) & (hash_cap - 1);
    }
    hash[h] = (size_t) i + 1;
  }
  st = WK_OK;
  goto out;

nomem:
  wk_set_err (err, err_size, "ggml .bin: out of memory");
  st = WK_ERR_NOMEM;
out:
  free (hash);
  if (st != WK_OK) {
    /* names of a partial table are offsets, not pointers: drop them */
    b->n_tensors = 0;
  }
  return st;
}

wk_status
wk_ggml_bin_open_memory (const void *data, size_t size, wk_ggml_bin ** out,
    char *err, size_t err_size)
{
  wk_ggml_bin *b;
  wk_status st;

  if (!out)
    return WK_ERR_ARG;
  *out = NULL;
  b = calloc (1, sizeof *b);
  if (!b) {
    wk_set_err (err, err_size, "ggml .bin: out of memory");
    return WK_ERR_NOMEM;
  }
  st = parse (b, data ? data : (const void *) "", data ? size : 0, err,
      err_size);
  if (st != WK_OK) {
    wk_ggml_bin_free (b);
    return st;
  }
  *out = b;
  return WK_OK;
}

static wk_status
parse_mapped (const void *data, size_t size, void *out, char *err,
    size_t err_size)
{
  return wk_ggml_bin_open_memory (data, size, out, err, err_size);
}

wk_status
wk_ggml_bin_open (const char *path, wk_ggml_bin ** out, char *err,
    size_t err_size)
{
  const void *map;
  size_t size;
  wk_status st;

  if (!out || !path)
    return WK_ERR_ARG;
  *out = NULL;
  st = wk_map_parse (path, parse_mapped, out, &map, &size, err, err_size);
  if (st == WK_OK) {
    (*out)->map_ = map;
    (*out)->map_size_ = size;
  }
  return st;
}

const wk_ggml_tensor *
wk_ggml_bin_find (const wk_ggml_bin * bin, const char *name)
{
  /* converters look up each tensor once: a linear scan is enough */
  for (int64_t i = 0; bin && i < bin->n_tensors; i++)
    if (strcmp (bin->tensors[i].name, name) == 0)
      return &bin->tensors[i];
  return NULL;
}
