/* Loading a knot into a wk_model: hyper-parameters checked, every tensor
 * bound by name and checked against them, mel tables and vocabulary built
 * once. Weights stay in the read-only mapping.
 *
 * Models are shared process-wide through the registry (registry.h): a
 * second load of the same, unchanged file returns the first wk_model with
 * one more reference.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "align.h"
#include "kernels.h"
#include "model.h"
#include "scheduler.h"
#include "wk-alloc.h"
#include "wk-err.h"
#include "wk-time.h"

/* ---- status and paths -------------------------------------------------- */

const char *
wk_status_str (wk_status status)
{
  switch (status) {
    case WK_OK:
      return "success";
    case WK_ERR_IO:
      return "I/O error";
    case WK_ERR_FORMAT:
      return "corrupt or invalid file";
    case WK_ERR_UNSUPPORTED:
      return "unsupported model";
    case WK_ERR_NOMEM:
      return "out of memory";
    case WK_ERR_ARG:
      return "invalid argument";
    case WK_ERR_STATE:
      return "call not allowed in this state";
    case WK_ERR_INTERNAL:
      return "internal error";
  }
  return "unknown status";
}

#ifndef WK_MODEL_INSTALL_PATH
#define WK_MODEL_INSTALL_PATH "/usr/local/share/whisperknot/default.knot"
#endif
#ifndef WK_MODEL_BUILD_PATH
#define WK_MODEL_BUILD_PATH "knots/default.knot"
#endif

const char *
wk_default_model_path (void)
{
  const char *env = getenv ("WHISPERKNOT_MODEL");

  if (env && env[0])
    return env;
  if (access (WK_MODEL_INSTALL_PATH, R_OK) == 0)
    return WK_MODEL_INSTALL_PATH;
  return WK_MODEL_BUILD_PATH;
}

/* The folder tools/whisperknot-model installs into, or NULL (no $HOME). */
static char *
model_dir (void)
{
  const char *d = getenv ("WHISPERKNOT_MODEL_DIR");
  const char *base = getenv ("XDG_DATA_HOME");
  const char *home = getenv ("HOME");
  size_t n;
  char *p;

  if (d && d[0])
    return strdup (d);
  if (base && base[0]) {
    n = strlen (base) + sizeof "/whisperknot";
    if ((p = malloc (n)))
      snprintf (p, n, "%s/whisperknot", base);
    return p;
  }
  if (!home || !home[0])
    return NULL;
  n = strlen (home) + sizeof "/.local/share/whisperknot";
  if ((p = malloc (n)))
    snprintf (p, n, "%s/.local/share/whisperknot", home);
  return p;
}

char *
wk_model_resolve_path (const char *name_or_path)
{
  char *dir, *p;
  size_t n;

  if (!name_or_path)
    return strdup (wk_default_model_path ());
  /* a path, or a file of that name here, is taken as is */
  if (!name_or_path[0] || strchr (name_or_path, '/') ||
      access (name_or_path, F_OK) == 0 || !(dir = model_dir ()))
    return strdup (name_or_path);
  n = strlen (dir) + strlen (name_or_path) + sizeof "/.knot";
  p = malloc (n);
  if (p) {
    snprintf (p, n, "%s/%s.knot", dir, name_or_path);
    if (access (p, F_OK) != 0) {
      free (p);
      p = NULL;
    }
  }
  free (dir);
  return p ? p : strdup (name_or_path);
}

wk_model_params
wk_model_default_params (void)
{
  wk_model_params p;

  memset (&p, 0, sizeof p);
  return p;
}

/* ---- sharing ------------------------------------------------------------- */

static void
model_destroy (wk_model * m)
{
  if (!m)
    return;
  wk_sched_free (m->sched);
  wk_gate_free (m->gate);
  wk_mel_free (m->mel);
  wk_tokenizer_free (m->tok);
  free (m->mel_filters);
  free (m->suppress);
  free (m->enc);
  free (m->dec);
  free (m->align_heads);
  free (m->path);
  if (m->knot)
    wk_knot_close (m->knot);
  free (m);
}

static void
model_destroy_loaded (wk_loaded * obj)
{
  model_destroy ((wk_model *) obj);
}

static wk_status model_load_file (const char *path, wk_loaded ** out,
    char *err, size_t err_size);

/* Whisper models in the process-wide registry (registry.h). */
static wk_loaded_kind model_kind = {
  "model", model_load_file, model_destroy_loaded, PTHREAD_MUTEX_INITIALIZER
};

wk_model *
wk_model_ref (wk_model * model)
{
  if (model)
    wk_loaded_ref (&model->base);
  return model;
}

void
wk_model_unref (wk_model * model)
{
  if (model)
    wk_loaded_unref (&model->base);
}

/* ---- binding tensors ----------------------------------------------------- */

typedef struct
{
  wk_model *m;
  char *err;
  size_t err_size;
  wk_status status;
} binder;

static void
fmt_shape (char *buf, size_t size, int n_dims, const int64_t * ne)
{
  size_t off = 0;
  int i;

  off += snprintf (buf + off, size - off, "[");
  for (i = 0; i < n_dims && off < size; i++)
    off += snprintf (buf + off, size - off, "%s%lld", i ? ", " : "",
        (long long) ne[i]);
  if (off < size)
    snprintf (buf + off, size - off, "]");
}

/* Finds `name` and checks it has n_dims dimensions ne[] (ggml order). A
 * tensor stored with trailing dimensions of 1 is accepted. 1-D tensors
 * must be f32; others any type whose rows are whole blocks. */
static const wk_tensor *
bind (binder * b, const char *name, int n_dims, int64_t ne0, int64_t ne1)
{
  const wk_tensor *t;
  int64_t want[WK_MAX_DIMS] = { ne0, ne1, 1, 1 };
  int i;

  if (b->status != WK_OK)
    return NULL;
  t = wk_knot_find (b->m->knot, name);
  if (!t) {
    wk_set_err (b->err, b->err_size, "model: tensor '%s' is missing", name);
    b->status = WK_ERR_FORMAT;
    return NULL;
  }
  for (i = 0; i < WK_MAX_DIMS; i++) {
    int64_t have = i < t->n_dims ? t->ne[i] : 1;
    if (have != want[i] || (i >= n_dims && i < t->n_dims && t->ne[i] != 1)) {
      char hs[96], ws[96];
      fmt_shape (hs, sizeof hs, t->n_dims, t->ne);
      fmt_shape (ws, sizeof ws, n_dims, want);
      wk_set_err (b->err, b->err_size,
          "model: tensor '%s' has shape %s but the header says %s", name, hs,
          ws);
      b->status = WK_ERR_FORMAT;
      return NULL;
    }
  }
  if (!wk_type_is_known (t->type)) {
    wk_set_err (b->err, b->err_size, "model: tensor '%s' has unknown type %d",
        name, (int) t->type);
    b->status = WK_ERR_UNSUPPORTED;
    return NULL;
  }
  if (n_dims == 1 && t->type != WK_TYPE_F32) {
    wk_set_err (b->err, b->err_size,
        "model: tensor '%s' is %s but 1-D tensors must be f32", name,
        wk_type_name (t->type));
    b->status = WK_ERR_UNSUPPORTED;
    return NULL;
  }
  if (wk_type_row_bytes (t->type, t->ne[0]) == 0) {
    wk_set_err (b->err, b->err_size,
        "model: tensor '%s' (%s) has rows of %lld elements, not whole blocks",
        name, wk_type_name (t->type), (long long) t->ne[0]);
    b->status = WK_ERR_UNSUPPORTED;
    return NULL;
  }
  if (((uintptr_t) t->data & 3) != 0) {
    wk_set_err (b->err, b->err_size, "model: tensor '%s' data is misaligned",
        name);
    b->status = WK_ERR_FORMAT;
    return NULL;
  }
  b->m->n_params += (uint64_t) (t->ne[0] * t->ne[1]);
  return t;
}

static const float *
bind_vec (binder * b, const char *name, int64_t n)
{
  const wk_tensor *t = bind (b, name, 1, n, 1);
  return t ? (const float *) t->data : NULL;
}


/* conv weights: stored as ne = {3, in, out} (f32 or f16) or flattened to
 * the 2-D {3 in, out} (any type whose rows are whole blocks: the same
 * bytes, since the kernel taps are the contiguous dimension). Either way
 * *view becomes the {3, in, out} tensor wk_conv1d_k3 expects, over the
 * mapped data (no copy). */
static const wk_tensor *
bind_conv (binder * b, const char *name, int64_t in, int64_t out,
    wk_tensor * view)
{
  const wk_tensor *t;
  int64_t want3[3] = { 3, in, out }, want2[2] = { 3 * in, out };
  bool is3 = true, is2 = true;
  int i;

  if (b->status != WK_OK)
    return NULL;
  t = wk_knot_find (b->m->knot, name);
  if (!t) {
    wk_set_err (b->err, b->err_size, "model: tensor '%s' is missing", name);
    b->status = WK_ERR_FORMAT;
    return NULL;
  }
  for (i = 0; i < WK_MAX_DIMS; i++) {
    int64_t have = i < t->n_dims ? t->ne[i] : 1;
    if (have != (i < 3 ? want3[i] : 1))
      is3 = false;
    if (have != (i < 2 ? want2[i] : 1))
      is2 = false;
  }
  /* {3, in, out} with in = out = 1 reads as 2-D too: the 3-D reading
   * wins (its rows of 3 are not whole blocks anyway) */
  if (is3)
    is2 = false;
  if (!is3 && !is2) {
    char hs[96], ws[96], ws2[96];
    fmt_shape (hs, sizeof hs, t->n_dims, t->ne);
    fmt_shape (ws, sizeof ws, 3, want3);
    fmt_shape (ws2, sizeof ws2, 2, want2);
    wk_set_err (b->err, b->err_size,
        "model: tensor '%s' has shape %s but the header says %s (or %s)",
        name, hs, ws, ws2);
    b->status = WK_ERR_FORMAT;
    return NULL;
  }
  if (is3 && t->type != WK_TYPE_F32 && t->type != WK_TYPE_F16) {
    wk_set_err (b->err, b->err_size,
        "model: tensor '%s' is %s; convolutions stored as {3, in, out} must "
        "be f32 or f16 (block types need the flattened {3 in, out})", name,
        wk_type_is_known (t->type) ? wk_type_name (t->type) : "unknown");
    b->status = WK_ERR_UNSUPPORTED;
    return NULL;
  }
  if (is2 && (!wk_type_is_known (t->type)
          || wk_type_row_bytes (t->type, 3 * in) == 0)) {
    wk_set_err (b->err, b->err_size,
        "model: tensor '%s' (%s) has rows of %lld elements, not whole blocks",
        name, wk_type_is_known (t->type) ? wk_type_name (t->type) :
        "unknown type", (long long) (3 * in));
    b->status = WK_ERR_UNSUPPORTED;
    return NULL;
  }
  if (((uintptr_t) t->data & 3) != 0) {
    wk_set_err (b->err, b->err_size, "model: tensor '%s' data is misaligned",
        name);
    b->status = WK_ERR_FORMAT;
    return NULL;
  }
  *view = *t;
  view->n_dims = 3;
  view->ne[0] = 3;
  view->ne[1] = in;
  view->ne[2] = out;
  view->ne[3] = 1;
  b->m->n_params += (uint64_t) (3 * in * out);
  return view;
}

static void
bind_attn (binder * b, const char *prefix, int64_t d_in, int64_t d,
    const wk_tensor ** q, const float **q_b, const wk_tensor ** k,
    const wk_tensor ** v, const float **v_b, const wk_tensor ** o,
    const float **o_b)
{
  char name[160];

  snprintf (name, sizeof name, "%s.query.weight", prefix);
  *q = bind (b, name, 2, d, d);
  snprintf (name, sizeof name, "%s.query.bias", prefix);
  *q_b = bind_vec (b, name, d);
  snprintf (name, sizeof name, "%s.key.weight", prefix);
  *k = bind (b, name, 2, d_in, d);
  snprintf (name, sizeof name, "%s.value.weight", prefix);
  *v = bind (b, name, 2, d_in, d);
  snprintf (name, sizeof name, "%s.value.bias", prefix);
  *v_b = bind_vec (b, name, d);
  snprintf (name, sizeof name, "%s.out.weight", prefix);
  *o = bind (b, name, 2, d, d);
  snprintf (name, sizeof name, "%s.out.bias", prefix);
  *o_b = bind_vec (b, name, d);
}

static void
bind_ln (binder * b, const char *prefix, int64_t d, const float **w,
    const float **bias)
{
  char name[160];

  snprintf (name, sizeof name, "%s.weight", prefix);
  *w = bind_vec (b, name, d);
  snprintf (name, sizeof name, "%s.bias", prefix);
  *bias = bind_vec (b, name, d);
}

static void
bind_mlp (binder * b, const char *prefix, int64_t d, const wk_tensor ** w0,
    const float **b0, const wk_tensor ** w2, const float **b2)
{
  char name[160];

  snprintf (name, sizeof name, "%s.mlp.0.weight", prefix);
  *w0 = bind (b, name, 2, d, 4 * d);
  snprintf (name, sizeof name, "%s.mlp.0.bias", prefix);
  *b0 = bind_vec (b, name, 4 * d);
  snprintf (name, sizeof name, "%s.mlp.2.weight", prefix);
  *w2 = bind (b, name, 2, 4 * d, d);
  snprintf (name, sizeof name, "%s.mlp.2.bias", prefix);
  *b2 = bind_vec (b, name, d);
}

static wk_status
bind_all (wk_model * m, char *err, size_t err_size)
{
  binder b = { m, err, err_size, WK_OK };
  const wk_hparams *hp = &m->hp;
  int64_t da = hp->n_audio_state, dt = hp->n_text_state;
  char prefix[128];
  int i;

  m->enc = calloc ((size_t) hp->n_audio_layer, sizeof *m->enc);
  m->dec = calloc ((size_t) hp->n_text_layer, sizeof *m->dec);
  if (!m->enc || !m->dec) {
    wk_set_err (err, err_size, "model: out of memory");
    return WK_ERR_NOMEM;
  }

  m->conv1_w = bind_conv (&b, "encoder.conv1.weight", hp->n_mels, da,
      &m->conv1_view);
  m->conv1_b = bind_vec (&b, "encoder.conv1.bias", da);
  m->conv2_w = bind_conv (&b, "encoder.conv2.weight", da, da, &m->conv2_view);
  m->conv2_b = bind_vec (&b, "encoder.conv2.bias", da);
  m->enc_pos = bind (&b, "encoder.positional_embedding", 2, da,
      hp->n_audio_ctx);
  for (i = 0; i < hp->n_audio_layer; i++) {
    wk_enc_layer *l = &m->enc[i];

    snprintf (prefix, sizeof prefix, "encoder.blocks.%d.attn_ln", i);
    bind_ln (&b, prefix, da, &l->attn_ln_w, &l->attn_ln_b);
    snprintf (prefix, sizeof prefix, "encoder.blocks.%d.attn", i);
    bind_attn (&b, prefix, da, da, &l->attn_q, &l->attn_q_b, &l->attn_k,
        &l->attn_v, &l->attn_v_b, &l->attn_o, &l->attn_o_b);
    snprintf (prefix, sizeof prefix, "encoder.blocks.%d.mlp_ln", i);
    bind_ln (&b, prefix, da, &l->mlp_ln_w, &l->mlp_ln_b);
    snprintf (prefix, sizeof prefix, "encoder.blocks.%d", i);
    bind_mlp (&b, prefix, da, &l->mlp0, &l->mlp0_b, &l->mlp2, &l->mlp2_b);
  }
  bind_ln (&b, "encoder.ln_post", da, &m->ln_post_w, &m->ln_post_b);

  m->tok_emb = bind (&b, "decoder.token_embedding.weight", 2, dt, hp->n_vocab);
  m->dec_pos = bind (&b, "decoder.positional_embedding", 2, dt, hp->n_text_ctx);
  for (i = 0; i < hp->n_text_layer; i++) {
    wk_dec_layer *l = &m->dec[i];

    snprintf (prefix, sizeof prefix, "decoder.blocks.%d.attn_ln", i);
    bind_ln (&b, prefix, dt, &l->attn_ln_w, &l->attn_ln_b);
    snprintf (prefix, sizeof prefix, "decoder.blocks.%d.attn", i);
    bind_attn (&b, prefix, dt, dt, &l->attn_q, &l->attn_q_b, &l->attn_k,
        &l->attn_v, &l->attn_v_b, &l->attn_o, &l->attn_o_b);
    snprintf (prefix, sizeof prefix, "decoder.blocks.%d.cross_attn_ln", i);
    bind_ln (&b, prefix, dt, &l->cross_ln_w, &l->cross_ln_b);
    snprintf (prefix, sizeof prefix, "decoder.blocks.%d.cross_attn", i);
    bind_attn (&b, prefix, da, dt, &l->cross_q, &l->cross_q_b, &l->cross_k,
        &l->cross_v, &l->cross_v_b, &l->cross_o, &l->cross_o_b);
    snprintf (prefix, sizeof prefix, "decoder.blocks.%d.mlp_ln", i);
    bind_ln (&b, prefix, dt, &l->mlp_ln_w, &l->mlp_ln_b);
    snprintf (prefix, sizeof prefix, "decoder.blocks.%d", i);
    bind_mlp (&b, prefix, dt, &l->mlp0, &l->mlp0_b, &l->mlp2, &l->mlp2_b);
  }
  bind_ln (&b, "decoder.ln", dt, &m->ln_w, &m->ln_b);
  return b.status;
}

/* ---- values that silence the model ---------------------------------------- */

/* A NaN or Inf in a weight that every window goes through (the mel
 * filters, a norm, a bias, the convolutions, the embeddings) makes every
 * activation after it NaN: the model loads, runs and says nothing. These
 * tensors are checked at load; the block matrices (most of the file) are
 * not, which keeps the check to a few percent of the bytes. Values are
 * tested by their exponent bits, all ones for both NaN and Inf. */

/* Index of the first non-finite value among n elements of type at data,
 * or -1. q8_0 / q4_0 hold finite integers times an f16 scale, so only
 * the scales can be non-finite. */
static int64_t
first_non_finite (wk_type type, const void *data, int64_t n)
{
  /* scanned in chunks with an OR of the exponent test, which compilers
   * vectorise; the exact index is looked up only in a bad chunk */
  enum
  { CHUNK = 4096 };
  int64_t i0, i;

  switch (type) {
    case WK_TYPE_F32:{
      const uint32_t *x = data;
      for (i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t e = i0 + CHUNK < n ? i0 + CHUNK : n;
        uint32_t acc = 0;
        for (i = i0; i < e; i++)
          acc |= (x[i] & 0x7f800000u) + 0x00800000u;
        if (acc & 0x80000000u)
          for (i = i0; i < e; i++)
            if ((x[i] & 0x7f800000u) == 0x7f800000u)
              return i;
      }
      return -1;
    }
    case WK_TYPE_F16:{
      const uint16_t *x = data;
      for (i0 = 0; i0 < n; i0 += CHUNK) {
        int64_t e = i0 + CHUNK < n ? i0 + CHUNK : n;
        uint32_t acc = 0;
        for (i = i0; i < e; i++)
          acc |= (uint32_t) (x[i] & 0x7c00u) + 0x0400u;
        if (acc & 0x8000u)
          for (i = i0; i < e; i++)
            if ((x[i] & 0x7c00u) == 0x7c00u)
              return i;
      }
      return -1;
    }
    case WK_TYPE_Q8_0:{
      const wk_block_q8_0 *b = data;
      for (i = 0; i < n / WK_QK; i++)
        if ((b[i].d & 0x7c00u) == 0x7c00u)
          return i * WK_QK;
      return -1;
    }
    case WK_TYPE_Q4_0:{
      const wk_block_q4_0 *b = data;
      for (i = 0; i < n / WK_QK; i++)
        if ((b[i].d & 0x7c00u) == 0x7c00u)
          return i * WK_QK;
      return -1;
    }
  }
  return -1;
}

/* Whether a knot tensor is one of those checked: everything but the
 * matrices inside the encoder and decoder blocks. */
static bool
is_checked (const wk_tensor * t)
{
  int dims = 0;

  for (int i = 0; i < WK_MAX_DIMS; i++)
    dims += t->ne[i] > 1;
  return dims <= 1 || !strstr (t->name, ".blocks.");
}

wk_status
wk_model_check_weights (const wk_model * m, char *err, size_t err_size)
{
  size_t n_filt = (size_t) m->hp.n_mels * WK_N_BINS;
  double sum = 0;
  int64_t n_t = wk_knot_n_tensors (m->knot);
  long page = sysconf (_SC_PAGESIZE);

  for (size_t i = 0; i < n_filt; i++) {
    float v = m->mel_filters[i];
    if (!isfinite (v) || v < 0) {
      wk_set_err (err, err_size, "model: whisper.mel_filters[%zu] is %g; "
          "the filters must be finite and non-negative (the file is "
          "damaged: convert the model again)", i, (double) v);
      return WK_ERR_FORMAT;
    }
    sum += v;
  }
  if (sum <= 0) {
    wk_set_err (err, err_size, "model: whisper.mel_filters are all zero (the "
        "file is damaged: convert the model again)");
    return WK_ERR_FORMAT;
  }
  /* ask for all the checked ranges at once: on a cold page cache, page
   * faults one tensor at a time read the file in small pieces */
  if (page > 0)
    for (int64_t k = 0; k < n_t; k++) {
      const wk_tensor *t = wk_knot_tensor_at (m->knot, k);
      uintptr_t a, e;
      if (!t || !is_checked (t) || !t->nbytes)
        continue;
      a = (uintptr_t) t->data & ~(uintptr_t) (page - 1);
      e = (uintptr_t) t->data + t->nbytes;
      madvise ((void *) a, e - a, MADV_WILLNEED);
    }
  for (int64_t k = 0; k < n_t; k++) {
    const wk_tensor *t = wk_knot_tensor_at (m->knot, k);
    int64_t n, bad;
    if (!t || !is_checked (t) || !wk_type_is_known (t->type))
      continue;
    n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    bad = first_non_finite (t->type, t->data, n);
    if (bad >= 0) {
      wk_set_err (err, err_size, "model: tensor '%s' holds NaN or Inf (at "
          "element %lld%s): every output after it would be NaN, so the model "
          "would say nothing. The file is damaged: convert the model again",
          t->name, (long long) bad, t->type == WK_TYPE_Q8_0
          || t->type == WK_TYPE_Q4_0 ? ", a block scale" : "");
      return WK_ERR_FORMAT;
    }
  }
  return WK_OK;
}

/* ---- hyper-parameters ---------------------------------------------------- */

/* A string key with two allowed values: *is_second says whether it holds the
 * second one (false when the key is absent); false on any other value. */
static bool
read_choice (wk_model * m, const char *key, const char *first,
    const char *second, bool *is_second, char *err, size_t err_size)
{
  const char *v;
  size_t n;

  if (!wk_knot_get_str (m->knot, key, &v, &n))
    return true;
  if (n == strlen (second) && !memcmp (v, second, n)) {
    *is_second = true;
    return true;
  }
  if (n == strlen (first) && !memcmp (v, first, n))
    return true;
  wk_set_err (err, err_size, "model: %s is neither \"%s\" nor \"%s\"", key,
      first, second);
  return false;
}

#define ALIGN_KEY "whisperknot.alignment_heads"

/* whisperknot.alignment_heads: u32 pairs (layer, head), every pair inside
 * the decoder and none repeated; absent: all heads of the last half of
 * the layers (openai's default); empty: none. */
static wk_status
read_align_heads (wk_model * m, char *err, size_t err_size)
{
  const wk_hparams *hp = &m->hp;
  size_t n, i, j;
  uint32_t *v;

  free (m->align_heads);
  m->align_heads = NULL;
  m->n_align_heads = 0;
  m->align_heads_default = false;
  if (!wk_knot_get_arr_len (m->knot, ALIGN_KEY, &n)) {
    int l, h, k = 0;
    const char *str;
    size_t len;
    uint32_t u;
    float f;
    if (wk_knot_get_u32 (m->knot, ALIGN_KEY, &u)
        || wk_knot_get_str (m->knot, ALIGN_KEY, &str, &len)
        || wk_knot_get_f32 (m->knot, ALIGN_KEY, &f)) {
      wk_set_err (err, err_size, "model: " ALIGN_KEY " is not an array");
      return WK_ERR_FORMAT;
    }
    m->n_align_heads = (hp->n_text_layer - hp->n_text_layer / 2)
        * hp->n_text_head;
    m->align_heads = malloc ((size_t) m->n_align_heads * 2 * sizeof (int32_t));
    if (!m->align_heads) {
      wk_set_err (err, err_size, "model: out of memory");
      return WK_ERR_NOMEM;
    }
    for (l = hp->n_text_layer / 2; l < hp->n_text_layer; l++)
      for (h = 0; h < hp->n_text_head; h++) {
        m->align_heads[k++] = l;
        m->align_heads[k++] = h;
      }
    m->align_heads_default = true;
    return WK_OK;
  }
  if (n % 2 != 0) {
    wk_set_err (err, err_size, "model: " ALIGN_KEY " has %zu elements, not "
        "(layer, head) pairs", n);
    return WK_ERR_FORMAT;
  }
  if (n / 2 > (size_t) hp->n_text_layer * (size_t) hp->n_text_head) {
    wk_set_err (err, err_size, "model: " ALIGN_KEY " has %zu pairs, more "
        "than the decoder's %d heads", n / 2,
        hp->n_text_layer * hp->n_text_head);
    return WK_ERR_FORMAT;
  }
  if (n == 0)
    return WK_OK;
  v = malloc (n * sizeof (uint32_t));
  m->align_heads = malloc (n * sizeof (int32_t));
  if (!v || !m->align_heads) {
    free (v);
    wk_set_err (err, err_size, "model: out of memory");
    return WK_ERR_NOMEM;
  }
  if (!wk_knot_copy_u32_arr (m->knot, ALIGN_KEY, v, n)) {
    free (v);
    wk_set_err (err, err_size, "model: " ALIGN_KEY " is not an array of "
        "non-negative 32-bit integers");
    return WK_ERR_FORMAT;
  }
  for (i = 0; i < n; i += 2) {
    if (v[i] >= (uint32_t) hp->n_text_layer
        || v[i + 1] >= (uint32_t) hp->n_text_head) {
      wk_set_err (err, err_size, "model: " ALIGN_KEY " pair %zu (%u, %u) is "
          "outside the decoder's %d layers x %d heads", i / 2, v[i],
          v[i + 1], hp->n_text_layer, hp->n_text_head);
      free (v);
      return WK_ERR_FORMAT;
    }
    for (j = 0; j < i; j += 2)
      if (v[j] == v[i] && v[j + 1] == v[i + 1]) {
        wk_set_err (err, err_size, "model: " ALIGN_KEY " names (%u, %u) "
            "twice", v[i], v[i + 1]);
        free (v);
        return WK_ERR_FORMAT;
      }
  }
  for (i = 0; i < n; i++)
    m->align_heads[i] = (int32_t) v[i];
  m->n_align_heads = (int) (n / 2);
  free (v);
  return WK_OK;
}

/* The hyper-parameters' knot keys and their largest values. */
static const struct
{
  const char *key;
  size_t off;
  uint32_t max;
} hp_keys[] = {
  {"whisper.n_vocab", offsetof (wk_hparams, n_vocab), 51866},
  {"whisper.n_audio_ctx", offsetof (wk_hparams, n_audio_ctx), 1 << 14},
  {"whisper.n_audio_state", offsetof (wk_hparams, n_audio_state), 1 << 14},
  {"whisper.n_audio_head", offsetof (wk_hparams, n_audio_head), 1024},
  {"whisper.n_audio_layer", offsetof (wk_hparams, n_audio_layer), 1024},
  {"whisper.n_text_ctx", offsetof (wk_hparams, n_text_ctx), 1 << 14},
  {"whisper.n_text_state", offsetof (wk_hparams, n_text_state), 1 << 14},
  {"whisper.n_text_head", offsetof (wk_hparams, n_text_head), 1024},
  {"whisper.n_text_layer", offsetof (wk_hparams, n_text_layer), 1024},
  {"whisper.n_mels", offsetof (wk_hparams, n_mels), 128},
};

wk_status
wk_hparams_check (const wk_hparams * hp, char *err, size_t err_size)
{
  size_t i;

  for (i = 0; i < sizeof hp_keys / sizeof hp_keys[0]; i++) {
    int v = *(const int *) ((const char *) hp + hp_keys[i].off);
    if (v < 1 || (uint32_t) v > hp_keys[i].max) {
      wk_set_err (err, err_size, "model: %s = %d is out of range (1..%u)",
          hp_keys[i].key, v, hp_keys[i].max);
      return WK_ERR_FORMAT;
    }
  }
  if (hp->n_vocab != 51864 && hp->n_vocab != 51865 && hp->n_vocab != 51866) {
    wk_set_err (err, err_size, "model: n_vocab %d is not a Whisper vocabulary "
        "(51864, 51865 or 51866)", hp->n_vocab);
    return WK_ERR_UNSUPPORTED;
  }
  if (hp->n_mels != 80 && hp->n_mels != 128) {
    wk_set_err (err, err_size, "model: n_mels %d is not 80 or 128", hp->n_mels);
    return WK_ERR_UNSUPPORTED;
  }
  if (hp->n_audio_state % hp->n_audio_head != 0
      || hp->n_text_state % hp->n_text_head != 0) {
    wk_set_err (err, err_size, "model: the state width (%d audio, %d text) is "
        "not a multiple of the head count (%d, %d)", hp->n_audio_state,
        hp->n_text_state, hp->n_audio_head, hp->n_text_head);
    return WK_ERR_FORMAT;
  }
  if (hp->n_audio_state / hp->n_audio_head > 256
      || hp->n_text_state / hp->n_text_head > 256) {
    wk_set_err (err, err_size, "model: heads wider than 256 are not supported");
    return WK_ERR_UNSUPPORTED;
  }
  if (hp->n_audio_ctx * 2 > WK_N_FRAMES) {
    wk_set_err (err, err_size, "model: n_audio_ctx %d is longer than a 30 s "
        "window (%d)", hp->n_audio_ctx, WK_N_FRAMES / 2);
    return WK_ERR_UNSUPPORTED;
  }
  if (hp->n_text_state > 2 * hp->n_audio_state) {
    /* the context's encoder scratch holds the cross-attention K and V in
     * f32 (decoder.c) */
    wk_set_err (err, err_size, "model: n_text_state %d is more than 2 x "
        "n_audio_state %d", hp->n_text_state, hp->n_audio_state);
    return WK_ERR_UNSUPPORTED;
  }
  if (hp->n_text_ctx < 16) {
    wk_set_err (err, err_size, "model: n_text_ctx %d is too short",
        hp->n_text_ctx);
    return WK_ERR_UNSUPPORTED;
  }
  return WK_OK;
}

static wk_status
read_hparams (wk_model * m, char *err, size_t err_size)
{
  wk_hparams *hp = &m->hp;
  const char *arch;
  size_t arch_len, i;
  wk_status st;

  if (!wk_knot_get_str (m->knot, "general.architecture", &arch, &arch_len)
      || arch_len != 7 || memcmp (arch, "whisper", 7) != 0) {
    wk_set_err (err, err_size,
        "model: general.architecture is missing or not \"whisper\"");
    return WK_ERR_FORMAT;
  }
  for (i = 0; i < sizeof hp_keys / sizeof hp_keys[0]; i++) {
    uint32_t v;
    if (!wk_knot_get_u32 (m->knot, hp_keys[i].key, &v)) {
      wk_set_err (err, err_size, "model: metadata key %s is missing",
          hp_keys[i].key);
      return WK_ERR_FORMAT;
    }
    /* (out of range: wk_hparams_check says so) */
    *(int *) ((char *) hp + hp_keys[i].off) = v > INT_MAX ? INT_MAX : (int) v;
  }
  if ((st = wk_hparams_check (hp, err, err_size)) != WK_OK)
    return st;
  m->max_text_ctx = hp->n_text_ctx / 2;
  {
    uint32_t v;
    if (wk_knot_get_u32 (m->knot, "whisperknot.max_text_ctx", &v)) {
      if (v > (uint32_t) hp->n_text_ctx / 2) {
        wk_set_err (err, err_size, "model: whisperknot.max_text_ctx %u is more "
            "than n_text_ctx / 2 (%d)", v, hp->n_text_ctx / 2);
        return WK_ERR_FORMAT;
      }
      m->max_text_ctx = (int) v;
    }
  }
  if (!read_choice (m, "whisperknot.pad_window", "zeros", "silence",
          &m->pad_silence, err, err_size)
      || !read_choice (m, "whisperknot.timestamp_rule", "sum", "max",
          &m->ts_rule_max, err, err_size)
      || !read_choice (m, "whisperknot.live_audio_ctx", "full", "short",
          &m->live_short_ctx, err, err_size))
    return WK_ERR_FORMAT;
  return read_align_heads (m, err, err_size);
}

/* ---- vocabulary and logit filters ---------------------------------------- */

static wk_status
build_tokenizer (wk_model * m, char *err, size_t err_size)
{
  size_t count, i;
  const char **toks = NULL;
  size_t *lens = NULL;
  wk_status st;
  int n_base;

  wk_special_tokens_for (m->hp.n_vocab, &m->sp);
  if (!wk_knot_get_arr_len (m->knot, "tokenizer.ggml.tokens", &count)) {
    wk_set_err (err, err_size, "model: tokenizer.ggml.tokens is missing");
    return WK_ERR_FORMAT;
  }
  /* ordinary tokens are ids 0 .. eot-1; an English-only vocabulary lists
   * <|endoftext|> too, a multilingual one an empty entry */
  if (count < (size_t) m->sp.eot || count > (size_t) m->sp.timestamp_begin) {
    wk_set_err (err, err_size, "model: the vocabulary has %zu tokens; this "
        "n_vocab (%d) needs %d", count, m->hp.n_vocab, m->sp.eot + 1);
    return WK_ERR_FORMAT;
  }
  n_base = m->sp.eot;
  toks = calloc ((size_t) n_base, sizeof *toks);
  lens = calloc ((size_t) n_base, sizeof *lens);
  if (!toks || !lens) {
    free (toks);
    free (lens);
    wk_set_err (err, err_size, "model: out of memory");
    return WK_ERR_NOMEM;
  }
  for (i = 0; i < (size_t) n_base; i++) {
    if (!wk_knot_get_str_at (m->knot, "tokenizer.ggml.tokens", i, &toks[i],
            &lens[i])) {
      free (toks);
      free (lens);
      wk_set_err (err, err_size, "model: vocabulary entry %zu is unreadable",
          i);
      return WK_ERR_FORMAT;
    }
  }
  st = wk_tokenizer_new (m->hp.n_vocab, n_base, toks, lens, &m->tok, err,
      err_size);
  free (toks);
  free (lens);
  if (st != WK_OK)
    return st;

  m->max_token_bytes = 0;
  for (i = 0; i < (size_t) m->hp.n_vocab; i++) {
    size_t len = 0;
    wk_tokenizer_bytes (m->tok, (int) i, &len);
    if ((int) len > m->max_token_bytes)
      m->max_token_bytes = (int) len;
  }
  return WK_OK;
}

static int
cmp_i32 (const void *a, const void *b)
{
  int32_t x = *(const int32_t *) a, y = *(const int32_t *) b;
  return (x > y) - (x < y);
}

static bool
round_trips (const wk_model * m, const int32_t * ids, int k, const char *text)
{
  char back[128];
  size_t off = 0;
  int i;

  for (i = 0; i < k; i++) {
    size_t len = 0;
    const char *t = wk_tokenizer_bytes (m->tok, ids[i], &len);
    if (!t || off + len >= sizeof back)
      return false;
    memcpy (back + off, t, len);
    off += len;
  }
  return off == strlen (text) && memcmp (back, text, off) == 0;
}

/* Whisper's suppress_tokens="-1": the non-speech symbols (tokenizer.py
 * non_speech_tokens) plus the special tokens decoding.py adds. */
static wk_status
build_suppress (wk_model * m)
{
  static const char *const symbols[] = {
    "\"", "#", "(", ")", "*", "+", "/", ":", ";", "<", "=", ">", "@", "[",
    "\\", "]", "^", "_", "`", "{", "|", "}", "~", "\xe3\x80\x8c",
    "\xe3\x80\x8d", "\xe3\x80\x8e", "\xe3\x80\x8f",
    "<<", ">>", "<<<", ">>>", "--", "---", "-(", "-[", "('", "(\"", "((",
    "))", "(((", ")))", "[[", "]]", "{{", "}}", "\xe2\x99\xaa\xe2\x99\xaa",
    "\xe2\x99\xaa\xe2\x99\xaa\xe2\x99\xaa",
  };
  /* U+2669..U+266F: always suppressed by their first token */
  static const char *const misc[] = {
    "\xe2\x99\xa9", "\xe2\x99\xaa", "\xe2\x99\xab", "\xe2\x99\xac",
    "\xe2\x99\xad", "\xe2\x99\xae", "\xe2\x99\xaf",
  };
  size_t n_sym = sizeof symbols / sizeof symbols[0];
  size_t n_misc = sizeof misc / sizeof misc[0];
  size_t cap = 2 * (n_sym + n_misc) + 16, n = 0, i, j;
  int32_t *out, ids[64];
  char buf[64];
  int k;

  out = malloc (cap * sizeof *out);
  if (!out)
    return WK_ERR_NOMEM;
  k = wk_tokenizer_encode (m->tok, " -", 2, ids, 64);
  if (k >= 1)
    out[n++] = ids[0];
  k = wk_tokenizer_encode (m->tok, " '", 2, ids, 64);
  if (k >= 1)
    out[n++] = ids[0];
  for (i = 0; i < n_sym + n_misc; i++) {
    const char *s = i < n_sym ? symbols[i] : misc[i - n_sym];
    bool is_misc = i >= n_sym;
    for (j = 0; j < 2; j++) {
      snprintf (buf, sizeof buf, "%s%s", j ? " " : "", s);
      k = wk_tokenizer_encode (m->tok, buf, strlen (buf), ids, 64);
      /* A vocabulary that lost byte-fragment tokens (whisper.cpp .bin
       * files store them as U+FFFD) cannot encode some symbols; use only
       * encodings that give the text back. */
      if (k >= 1 && !round_trips (m, ids, k, buf))
        continue;
      if (k == 1 || (is_misc && k >= 1))
        out[n++] = ids[0];
    }
  }
  out[n++] = m->sp.transcribe;
  out[n++] = m->sp.translate;
  out[n++] = m->sp.sot;
  out[n++] = m->sp.prev;
  out[n++] = m->sp.solm;
  out[n++] = m->sp.nosp;
  qsort (out, n, sizeof *out, cmp_i32);
  for (i = 0, j = 0; i < n; i++)
    if (j == 0 || out[j - 1] != out[i])
      out[j++] = out[i];
  m->suppress = out;
  m->n_suppress = (int) j;

  k = wk_tokenizer_encode (m->tok, " ", 1, ids, 64);
  m->n_blank = 0;
  for (i = 0; k > 0 && i < (size_t) k && i < 8; i++)
    m->blank[m->n_blank++] = ids[i];
  return WK_OK;
}

/* ---- load ----------------------------------------------------------------- */

/* Loads path into a new model (the registry shares it, see registry.h). */
static wk_status
model_load_file (const char *path, wk_loaded ** out, char *err, size_t err_size)
{
  wk_model *m;
  wk_status st;
  size_t n_filt;

  *out = NULL;
  m = calloc (1, sizeof *m);
  if (!m) {
    wk_set_err (err, err_size, "model: out of memory");
    return WK_ERR_NOMEM;
  }
  wk_loaded_init (&m->base, &model_kind);
  m->sched = wk_sched_new ();
  m->gate = wk_gate_new (0);
  if (!m->sched || !m->gate) {
    wk_sched_free (m->sched);
    wk_gate_free (m->gate);
    free (m);
    wk_set_err (err, err_size, "model: out of memory");
    return WK_ERR_NOMEM;
  }
  m->path = strdup (path);

  st = wk_knot_open (path, &m->knot, err, err_size);
  if (st != WK_OK)
    goto fail;
  /* the identity of what is mapped, which the registry matches */
  wk_knot_file_id (m->knot, &m->base.id);
  st = read_hparams (m, err, err_size);
  if (st != WK_OK)
    goto fail;
  m->multilingual = m->hp.n_vocab >= 51865;

  n_filt = (size_t) m->hp.n_mels * WK_N_BINS;
  {
    size_t n;
    if (!wk_knot_get_arr_len (m->knot, "whisper.mel_filters", &n)
        || n != n_filt) {
      wk_set_err (err, err_size, "model: whisper.mel_filters is missing or not "
          "%d x %d values", m->hp.n_mels, WK_N_BINS);
      st = WK_ERR_FORMAT;
      goto fail;
    }
  }
  m->mel_filters = malloc (n_filt * sizeof (float));
  if (!m->mel_filters || !m->path) {
    st = WK_ERR_NOMEM;
    wk_set_err (err, err_size, "model: out of memory");
    goto fail;
  }
  if (!wk_knot_copy_f32_arr (m->knot, "whisper.mel_filters", m->mel_filters,
          n_filt)) {
    wk_set_err (err, err_size,
        "model: whisper.mel_filters is not an f32 array");
    st = WK_ERR_FORMAT;
    goto fail;
  }
  st = wk_mel_new (m->hp.n_mels, m->mel_filters, &m->mel);
  if (st != WK_OK) {
    wk_set_err (err, err_size, "model: cannot set up the mel front end: %s",
        wk_status_str (st));
    goto fail;
  }

  st = build_tokenizer (m, err, err_size);
  if (st != WK_OK)
    goto fail;
  st = build_suppress (m);
  if (st != WK_OK) {
    wk_set_err (err, err_size, "model: out of memory");
    goto fail;
  }

  st = bind_all (m, err, err_size);
  if (st != WK_OK)
    goto fail;
  st = wk_model_check_weights (m, err, err_size);
  if (st != WK_OK)
    goto fail;

  *out = &m->base;
  return WK_OK;

fail:
  if (err && err_size && !err[0])
    wk_set_err (err, err_size, "model: cannot load '%s': %s", path,
        wk_status_str (st));
  model_destroy (m);
  return st;
}

/* The arguments wk_model_load and wk_model_load_start check first: an
 * output pointer (the caller clears it) and a path. */
static wk_status
check_load_args (const char *path, int have_out, char *err, size_t err_size)
{
  if (err && err_size)
    err[0] = '\0';
  if (!have_out) {
    wk_set_err (err, err_size, "model: no output pointer");
    return WK_ERR_ARG;
  }
  if (!path || !path[0]) {
    wk_set_err (err, err_size, "model: no model path given");
    return WK_ERR_ARG;
  }
  return WK_OK;
}

wk_status
wk_model_load (const char *path, const wk_model_params * params,
    wk_model ** out, char *err, size_t err_size)
{
  wk_loaded *obj;
  wk_status st;

  (void) params;
  if (out)
    *out = NULL;
  if ((st = check_load_args (path, out != NULL, err, err_size)) != WK_OK)
    return st;
  st = wk_registry_load (&model_kind, path, &obj, err, err_size);
  if (st == WK_OK)
    *out = (wk_model *) obj;
  return st;
}

struct wk_model_loader
{
  pthread_t thread;
  bool threaded;
  char *path;
  wk_model_params params;
  wk_model_loaded_fn done;
  void *user_data;
  /* the load's results, written by its thread before it ends */
  wk_model *model;
  wk_status status;
  double seconds;
  char err[512];
};

static void *
loader_run (void *data)
{
  wk_model_loader *l = data;
  double t0 = wk_now_s ();

  l->status = wk_model_load (l->path, &l->params, &l->model, l->err,
      sizeof l->err);
  l->seconds = wk_now_s () - t0;
  if (l->done)
    l->done (l->model, l->status, l->seconds, l->user_data);
  return NULL;
}

wk_status
wk_model_load_start (const char *path, const wk_model_params * params,
    wk_model_loaded_fn done, void *user_data, wk_model_loader ** out,
    char *err, size_t err_size)
{
  struct stat sb;
  wk_model_loader *l;
  wk_status st;

  if (out)
    *out = NULL;
  if ((st = check_load_args (path, out != NULL, err, err_size)) != WK_OK)
    return st;
  if (stat (path, &sb) != 0) {
    wk_set_err (err, err_size, "%s", errno == ENOENT ?
        "the file does not exist" : strerror (errno));
    return WK_ERR_IO;
  }
  /* only a regular file can be mapped (and a FIFO must not block) */
  if (!S_ISREG (sb.st_mode)) {
    wk_set_err (err, err_size, "not a regular file (a FIFO, directory or "
        "device cannot be a model)");
    return WK_ERR_IO;
  }
  if (access (path, R_OK) != 0) {
    wk_set_err (err, err_size, "%s", strerror (errno));
    return WK_ERR_IO;
  }
  l = calloc (1, sizeof *l);
  if (!l || !(l->path = strdup (path))) {
    free (l);
    wk_set_err (err, err_size, "model: out of memory");
    return WK_ERR_NOMEM;
  }
  l->params = params ? *params : wk_model_default_params ();
  l->done = done;
  l->user_data = user_data;
  l->threaded = pthread_create (&l->thread, NULL, loader_run, l) == 0;
  if (!l->threaded)
    loader_run (l);             /* no threads (the WebAssembly build) */
  *out = l;
  return WK_OK;
}

wk_status
wk_model_load_finish (wk_model_loader * loader, wk_model ** model,
    double *seconds, char *err, size_t err_size)
{
  wk_status st;

  if (err && err_size)
    err[0] = '\0';
  if (model)
    *model = NULL;
  if (seconds)
    *seconds = 0.0;
  if (!loader) {
    wk_set_err (err, err_size, "model: no loader");
    return WK_ERR_ARG;
  }
  if (loader->threaded)
    pthread_join (loader->thread, NULL);
  st = loader->status;
  if (model)
    *model = loader->model;
  else
    wk_model_unref (loader->model);
  if (seconds)
    *seconds = loader->seconds;
  if (st != WK_OK)
    wk_set_err (err, err_size, "%s", loader->err[0] ? loader->err :
        wk_status_str (st));
  free (loader->path);
  free (loader);
  return st;
}

void
wk_model_get_info (const wk_model * model, wk_model_info * info)
{
  if (!info)
    return;
  memset (info, 0, sizeof *info);
  if (!model)
    return;
  info->n_vocab = model->hp.n_vocab;
  info->n_mels = model->hp.n_mels;
  info->n_audio_ctx = model->hp.n_audio_ctx;
  info->n_audio_state = model->hp.n_audio_state;
  info->n_audio_head = model->hp.n_audio_head;
  info->n_audio_layer = model->hp.n_audio_layer;
  info->n_text_ctx = model->hp.n_text_ctx;
  info->n_text_state = model->hp.n_text_state;
  info->n_text_head = model->hp.n_text_head;
  info->n_text_layer = model->hp.n_text_layer;
  info->multilingual = model->multilingual;
  info->max_prompt_tokens = model->max_text_ctx < model->hp.n_text_ctx / 2 - 1 ?
      model->max_text_ctx : model->hp.n_text_ctx / 2 - 1;
  info->n_params = model->n_params;
  info->file_bytes = wk_knot_size (model->knot);
  info->n_alignment_heads = model->n_align_heads;
}

/* ---- the encoder's input window ---------------------------------------- */

void
wk_model_window_mel (const wk_model * model, const float *audio,
    size_t n_audio, int64_t first, int n_frames, float *out)
{
  int n_mels = model->hp.n_mels;
  int ld = 2 * model->hp.n_audio_ctx;
  float max = -INFINITY;        /* the largest normalised value */
  int i;

  if (n_frames > ld)
    n_frames = ld;
  if (n_frames < 0)
    n_frames = 0;
  if (n_frames > 0) {
    wk_mel_log_frames (model->mel, audio, n_audio, first, n_frames, out, ld);
    max = wk_mel_normalize (out, n_mels, n_frames, ld);
  }
  if (model->pad_silence) {
    /* log10 (1e-10) = -10 before the clamp: below any max - 8 of real
     * content; with no content the whole window is that silence.
     * Normalised values are (x + 4) / 4, their floor (max - 8 + 4) / 4 */
    float pad = max - 2.0f;
    int m, f;
    if (pad < -1.5f)
      pad = -1.5f;
    for (m = 0; m < n_mels; m++)
      for (f = n_frames; f < ld; f++)
        out[(size_t) m * ld + f] = pad;
    return;
  }
  for (i = 0; i < n_mels; i++)
    memset (out + (size_t) i * ld + n_frames, 0,
        (size_t) (ld - n_frames) * sizeof (float));
}

/* ---- the working state ------------------------------------------------- */

static void *
ctx_alloc (wk_ctx * ctx, size_t n, size_t elem, bool *ok)
{
  void *p;

  if (!*ok)
    return NULL;
  if (n == 0)
    n = 1;
  p = wk_scratch_alloc (n, elem);
  if (!p)
    *ok = false;
  else
    ctx->state_bytes += n * elem;
  return p;
}

/* zlib's state for one deflate at level 6 (window 32 KiB, memLevel 8)
 * takes about 270 KiB; it is carved from this arena so that decoding
 * never allocates. */
#define WK_ZARENA_BYTES (512 * 1024)

wk_status
wk_model_check_file (const wk_model * model, char *err, size_t err_size)
{
  if (!model)
    return WK_ERR_ARG;
  return wk_knot_check_file (model->knot, model->path, err, err_size);
}

/* Whether wk_linear_work with these flags takes integer products for any
 * of the encoder's weights (the cross K/V included: wk_encode computes
 * them too), so that a context needs their scratch. */
static bool
enc_takes_q (const wk_model * m, unsigned flags)
{
  int l;

  for (l = 0; l < m->hp.n_audio_layer; l++) {
    const wk_enc_layer *L = &m->enc[l];
    const wk_tensor *w[6] = { L->attn_q, L->attn_k, L->attn_v, L->attn_o,
      L->mlp0, L->mlp2
    };
    for (int i = 0; i < 6; i++)
      if (wk_linear_work_used (w[i]->type, flags))
        return true;
  }
  for (l = 0; l < m->hp.n_text_layer; l++)
    if (wk_linear_work_used (m->dec[l].cross_k->type, flags)
        || wk_linear_work_used (m->dec[l].cross_v->type, flags))
      return true;
  return false;
}

wk_status
wk_ctx_new (wk_model * model, int n_threads, int n_beams, wk_ctx ** out,
    char *err, size_t err_size)
{
  wk_ctx *ctx;
  const wk_hparams *hp;
  size_t A, da, dt, T, V, Lt, conv_work, n_logit_rows;
  bool ok = true;

  if (out)
    *out = NULL;
  if (!model || !out) {
    wk_set_err (err, err_size, "stream: no model");
    return WK_ERR_ARG;
  }
  if (n_beams < 1)
    n_beams = 1;
  if (n_beams > WK_MAX_BEAM_SIZE) {
    wk_set_err (err, err_size, "stream: beam size %d is larger than %d",
        n_beams, WK_MAX_BEAM_SIZE);
    return WK_ERR_ARG;
  }
  if (wk_model_check_file (model, err, err_size) != WK_OK)
    return WK_ERR_IO;
  hp = &model->hp;
  A = (size_t) hp->n_audio_ctx;
  da = (size_t) hp->n_audio_state;
  dt = (size_t) hp->n_text_state;
  T = (size_t) hp->n_text_ctx;
  V = (size_t) hp->n_vocab;
  Lt = (size_t) hp->n_text_layer;

  ctx = calloc (1, sizeof *ctx);
  if (!ctx) {
    wk_set_err (err, err_size, "stream: out of memory");
    return WK_ERR_NOMEM;
  }
  ctx->model = wk_model_ref (model);
  ctx->n_beams = n_beams;
  /* the process's workers, shared with every other context */
  ctx->pool = wk_pool_new_shared (n_threads);
  if (!ctx->pool)
    ok = false;

  conv_work = (size_t) wk_conv1d_k3_work_size (hp->n_mels, 2 * A, 1);
  if ((size_t) wk_conv1d_k3_work_size (da, 2 * A, 2) > conv_work)
    conv_work = (size_t) wk_conv1d_k3_work_size (da, 2 * A, 2);

  ctx->mel = ctx_alloc (ctx, (size_t) hp->n_mels * 2 * A, sizeof (float), &ok);
  /* The encoder's output e_x [A][da], and its scratch, sized for the full
   * context: 5 blocks of A x da floats or 2 and the larger convolution's
   * im2col (wk_encode lays them out). Scratch (wk-alloc.h) leaves the
   * pages a shortened context never touches untouched, so a live stream
   * is resident for what it runs. */
  {
    size_t blk = A * da;
    size_t region = 5 * blk;
    if (2 * blk + conv_work > region)
      region = 2 * blk + conv_work;
    ctx->e_x = ctx_alloc (ctx, blk, sizeof (float), &ok);
    ctx->enc_scratch = ctx_alloc (ctx, region, sizeof (float), &ok);
    ctx->enc_scratch_floats = region;
    /* NULL (the f32 panels) unless the integer products run by default
     * (q8_0 with AVX-512 VNNI or AVX-VNNI, or WK_INT8=all); wk_ctx_int8_alloc for
     * those asked per encode */
    if (enc_takes_q (model, 0))
      ctx->e_qwork = ctx_alloc (ctx, wk_ctx_qwork_size (ctx), 1, &ok);
  }
  ctx->cross_f16 = model->dec[0].cross_q->type != WK_TYPE_F32;
  if (ctx->cross_f16 && wk_kernels_f16kv_slow ()) {
    ctx->cross_f16 = false;
    ctx->cross_f16_in_f32 = true;
  }
  if (ctx->cross_f16) {
    ctx->cross_k16 = ctx_alloc (ctx, Lt * A * dt, sizeof (uint16_t), &ok);
    ctx->cross_v16 = ctx_alloc (ctx, Lt * A * dt, sizeof (uint16_t), &ok);
  } else {
    ctx->cross_k = ctx_alloc (ctx, Lt * A * dt, sizeof (float), &ok);
    ctx->cross_v = ctx_alloc (ctx, Lt * A * dt, sizeof (float), &ok);
  }
  ctx->kv_k = ctx_alloc (ctx, (size_t) n_beams * Lt * T * dt, sizeof (float),
      &ok);
  ctx->kv_v = ctx_alloc (ctx, (size_t) n_beams * Lt * T * dt, sizeof (float),
      &ok);
  ctx->d_x = ctx_alloc (ctx, T * dt, sizeof (float), &ok);
  ctx->d_xn = ctx_alloc (ctx, T * dt, sizeof (float), &ok);
  ctx->d_q = ctx_alloc (ctx, T * dt, sizeof (float), &ok);
  ctx->d_att = ctx_alloc (ctx, T * dt, sizeof (float), &ok);
  ctx->d_h = ctx_alloc (ctx, T * 4 * dt, sizeof (float), &ok);
  ctx->d_row = ctx_alloc (ctx, dt, sizeof (float), &ok);
  n_logit_rows = (size_t) (n_beams > 5 ? n_beams : 5);
  ctx->logits = ctx_alloc (ctx, n_logit_rows * V, sizeof (float), &ok);
  ctx->logprobs = ctx_alloc (ctx, V, sizeof (float), &ok);
  ctx->seq = ctx_alloc (ctx, T + 1, sizeof (int32_t), &ok);
  ctx->res_tokens = ctx_alloc (ctx, T + 1, sizeof (int32_t), &ok);
  ctx->res_probs = ctx_alloc (ctx, T + 1, sizeof (float), &ok);
  ctx->try_tokens = ctx_alloc (ctx, T + 1, sizeof (int32_t), &ok);
  ctx->try_probs = ctx_alloc (ctx, T + 1, sizeof (float), &ok);
  ctx->text_cap = (T + 1) * (size_t) (model->max_token_bytes + 1) * 3 + 16;
  ctx->text = ctx_alloc (ctx, ctx->text_cap, 1, &ok);
  ctx->zbuf_cap = ctx->text_cap + ctx->text_cap / 8 + 64;
  ctx->zbuf = ctx_alloc (ctx, ctx->zbuf_cap, 1, &ok);
  ctx->zarena_cap = WK_ZARENA_BYTES;
  ctx->zarena = ctx_alloc (ctx, ctx->zarena_cap, 1, &ok);
  ctx->beam_seq = ctx_alloc (ctx, 3 * (size_t) n_beams * (T + 1),
      sizeof (int32_t), &ok);
  ctx->beam_p = ctx_alloc (ctx, 3 * (size_t) n_beams * (T + 1),
      sizeof (float), &ok);
  ctx->rng = 0x9e3779b97f4a7c15ull;
  if (!ok) {
    wk_set_err (err, err_size, "stream: out of memory (or no threads) for "
        "%.1f MB of state", ctx->state_bytes / 1e6);
    wk_ctx_free (ctx);
    return WK_ERR_NOMEM;
  }
  *out = ctx;
  return WK_OK;
}

void
wk_ctx_free (wk_ctx * ctx)
{
  if (!ctx)
    return;
  wk_pool_free (ctx->pool);
  free (ctx->mel);
  free (ctx->e_x);
  free (ctx->enc_scratch);
  free (ctx->e_qwork);
  free (ctx->cross_k);
  free (ctx->cross_v);
  free (ctx->cross_k16);
  free (ctx->cross_v16);
  free (ctx->kv_k);
  free (ctx->kv_v);
  free (ctx->d_x);
  free (ctx->d_xn);
  free (ctx->d_q);
  free (ctx->d_att);
  free (ctx->d_h);
  free (ctx->d_row);
  free (ctx->logits);
  free (ctx->logprobs);
  free (ctx->seq);
  free (ctx->res_tokens);
  free (ctx->res_probs);
  free (ctx->try_tokens);
  free (ctx->try_probs);
  free (ctx->text);
  free (ctx->zbuf);
  free (ctx->zarena);
  free (ctx->beam_seq);
  free (ctx->beam_p);
  wk_align_ctx_free (ctx);
  wk_model_unref (ctx->model);
  free (ctx);
}

size_t
wk_ctx_qwork_size (const wk_ctx * ctx)
{
  const wk_hparams *hp = &ctx->model->hp;

  return wk_linear_work_size (hp->n_audio_ctx, 4 * (int64_t) hp->n_audio_state);
}

bool
wk_ctx_int8_alloc (wk_ctx * ctx)
{
  bool ok = true;

  if (ctx->e_qwork || !enc_takes_q (ctx->model, WK_LINEAR_INT8))
    return true;
  ctx->e_qwork = ctx_alloc (ctx, wk_ctx_qwork_size (ctx), 1, &ok);
  return ok;
}

wk_model *
wk_ctx_model (const wk_ctx * ctx)
{
  return ctx ? ctx->model : NULL;
}

uint64_t
wk_ctx_state_bytes (const wk_ctx * ctx)
{
  return ctx ? ctx->state_bytes : 0;
}
