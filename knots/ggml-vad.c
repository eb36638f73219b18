/* Silero VAD in whisper.cpp's ggml layout -> the VAD knot's tensors (see
 * ggml-vad.h): a bounds-checked walk over the header and the tensor
 * records, each tensor widened to f32 and laid out as the engine
 * computes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-bin.h"
#include "ggml-vad.h"
#include "mapfile.h"
#include "wk-err.h"

#define CHUNK WK_VAD_CHUNK
#define CTX WK_VAD_CONTEXT
#define NFFT WK_VAD_NFFT
#define NSTFT WK_VAD_NSTFT
#define NSTFT_PAD WK_VAD_NSTFT_PAD
#define NBINS (NSTFT / 2)
#define HID WK_VAD_HID
#define NGATES WK_VAD_NGATES
#define N_ENC WK_VAD_N_ENC
#define KSIZE WK_VAD_KSIZE

typedef struct
{
  const uint8_t *p;
  size_t size;
  size_t off;
} reader;

static int
read_i32 (reader * r, int32_t * v)
{
  uint32_t u;

  if (r->size - r->off < 4)
    return 0;
  u = (uint32_t) r->p[r->off] | (uint32_t) r->p[r->off + 1] << 8 |
      (uint32_t) r->p[r->off + 2] << 16 | (uint32_t) r->p[r->off + 3] << 24;
  r->off += 4;
  memcpy (v, &u, sizeof *v);
  return 1;
}

enum
{
  T_ENC_W0, T_ENC_B0, T_ENC_W1, T_ENC_B1, T_ENC_W2, T_ENC_B2, T_ENC_W3,
  T_ENC_B3, T_W_IH, T_W_HH, T_B_IH, T_B_HH, T_OUT_W, T_OUT_B, T_STFT,
  N_TENSORS
};

typedef struct
{
  const char *name;
  int64_t ne[3];                /* ggml order, trailing 1s */
} tensor_spec;

static const tensor_spec specs[N_TENSORS] = {
  {"_model.encoder.0.reparam_conv.weight", {KSIZE, NBINS, 128}},
  {"_model.encoder.0.reparam_conv.bias", {128, 1, 1}},
  {"_model.encoder.1.reparam_conv.weight", {KSIZE, 128, 64}},
  {"_model.encoder.1.reparam_conv.bias", {64, 1, 1}},
  {"_model.encoder.2.reparam_conv.weight", {KSIZE, 64, 64}},
  {"_model.encoder.2.reparam_conv.bias", {64, 1, 1}},
  {"_model.encoder.3.reparam_conv.weight", {KSIZE, 64, 128}},
  {"_model.encoder.3.reparam_conv.bias", {128, 1, 1}},
  {"_model.decoder.rnn.weight_ih", {HID, NGATES, 1}},
  {"_model.decoder.rnn.weight_hh", {HID, NGATES, 1}},
  {"_model.decoder.rnn.bias_ih", {NGATES, 1, 1}},
  {"_model.decoder.rnn.bias_hh", {NGATES, 1, 1}},
  {"_model.decoder.decoder.2.weight", {HID, 1, 1}},
  {"_model.decoder.decoder.2.bias", {1, 1, 1}},
  {"_model.stft.forward_basis_buffer", {NFFT, 1, NSTFT}},
};

/* Element i of a tensor's data as f32 (type 0 = f32, 1 = f16; data is
 * unaligned in the file). */
static float
elem (const uint8_t * data, int type, int64_t i)
{
  if (type == 0) {
    float f;
    memcpy (&f, data + 4 * i, 4);
    return f;
  } else {
    uint16_t h;
    memcpy (&h, data + 2 * i, 2);
    return wk_fp16_to_fp32 (h);
  }
}

/* Puts tensor t (data in ggml order) into the knot's layout. Returns 0
 * when a value is not finite. */
static int
place_tensor (wk_ggml_vad * m, int t, const uint8_t * data, int type)
{
  int64_t n = specs[t].ne[0] * specs[t].ne[1] * specs[t].ne[2];

  for (int64_t i = 0; i < n; i++)
    if (!isfinite (elem (data, type, i)))
      return 0;

  switch (t) {
    case T_ENC_W0:
    case T_ENC_W1:
    case T_ENC_W2:
    case T_ENC_W3:{
      int l = (t - T_ENC_W0) / 2;
      int ci_n = WK_VAD_ENC_IN (l), co_n = WK_VAD_ENC_OUT (l);
      /* ggml (k, ci, co) at (co * ci_n + ci) * K + k -> [(ci K + k)][co] */
      for (int co = 0; co < co_n; co++)
        for (int ci = 0; ci < ci_n; ci++)
          for (int k = 0; k < KSIZE; k++)
            m->enc_w[l][(ci * KSIZE + k) * co_n + co] =
                elem (data, type, ((int64_t) co * ci_n + ci) * KSIZE + k);
      break;
    }
    case T_ENC_B0:
    case T_ENC_B1:
    case T_ENC_B2:
    case T_ENC_B3:{
      int l = (t - T_ENC_B0) / 2;
      for (int co = 0; co < WK_VAD_ENC_OUT (l); co++)
        m->enc_b[l][co] = elem (data, type, co);
      break;
    }
    case T_W_IH:
    case T_W_HH:{
      float *w = t == T_W_IH ? m->w_ih : m->w_hh;
      /* ggml (in, gate) at gate * HID + in -> [in][gate] */
      for (int g = 0; g < NGATES; g++)
        for (int i = 0; i < HID; i++)
          w[i * NGATES + g] = elem (data, type, (int64_t) g * HID + i);
      break;
    }
    case T_B_IH:
    case T_B_HH:
      /* summed onto zeros in file order, as the engine used to at load:
       * the same bits */
      for (int g = 0; g < NGATES; g++)
        m->b_gates[g] += elem (data, type, g);
      break;
    case T_OUT_W:
      for (int i = 0; i < HID; i++)
        m->out_w[i] = elem (data, type, i);
      break;
    case T_OUT_B:
      m->out_b[0] = elem (data, type, 0);
      break;
    case T_STFT:
      /* ggml (k, 0, c) at c * NFFT + k -> [k][c] */
      for (int c = 0; c < NSTFT; c++)
        for (int k = 0; k < NFFT; k++)
          m->stft[k * NSTFT_PAD + c] =
              elem (data, type, (int64_t) c * NFFT + k);
      break;
    default:
      break;
  }
  return 1;
}

static wk_ggml_vad *
vad_alloc (void)
{
  wk_ggml_vad *m = calloc (1, sizeof *m);
  size_t n = 0;
  float *p;

  if (!m)
    return NULL;
  n += ((size_t) NFFT) * NSTFT_PAD;
  for (int l = 0; l < N_ENC; l++)
    n += (size_t) WK_VAD_ENC_IN (l) * KSIZE * WK_VAD_ENC_OUT (l)
        + WK_VAD_ENC_OUT (l);
  n += 2 * ((size_t) HID) * NGATES + NGATES + HID + 1;
  m->block = calloc (n, sizeof (float));
  if (!m->block) {
    free (m);
    return NULL;
  }
  p = m->block;
  m->stft = p;
  p += ((size_t) NFFT) * NSTFT_PAD;
  for (int l = 0; l < N_ENC; l++) {
    m->enc_w[l] = p;
    p += (size_t) WK_VAD_ENC_IN (l) * KSIZE * WK_VAD_ENC_OUT (l);
    m->enc_b[l] = p;
    p += WK_VAD_ENC_OUT (l);
  }
  m->w_ih = p;
  p += ((size_t) HID) * NGATES;
  m->w_hh = p;
  p += ((size_t) HID) * NGATES;
  m->b_gates = p;
  p += NGATES;
  m->out_w = p;
  p += HID;
  m->out_b = p;
  return m;
}

void
wk_ggml_vad_free (wk_ggml_vad * m)
{
  if (!m)
    return;
  free (m->block);
  free (m);
}

bool
wk_ggml_vad_probe (const void *data, size_t size)
{
  const uint8_t *p = data;

  return size >= 14 && (p[0] | p[1] << 8 | p[2] << 16 | (uint32_t) p[3] << 24)
      == WK_GGML_MAGIC && p[4] > 0 && p[4] < 64 && !p[5] && !p[6] && !p[7]
      && memcmp (p + 8, "silero", 6) == 0;
}

wk_status
wk_ggml_vad_parse (const void *data, size_t size, wk_ggml_vad ** out,
    char *err, size_t err_size)
{
  reader r = { data, size, 0 };
  int32_t v, hp[5], n_layers, lstm[4];
  int seen[N_TENSORS] = { 0 };
  wk_ggml_vad *m;

  *out = NULL;
  if (!data && size) {
    wk_set_err (err, err_size, "bad argument");
    return WK_ERR_ARG;
  }
  if (!read_i32 (&r, &v))
    goto truncated;
  if ((uint32_t) v != WK_GGML_MAGIC) {
    wk_set_err (err, err_size, "not a ggml VAD model (bad magic 0x%08x)",
        (unsigned) v);
    return WK_ERR_FORMAT;
  }
  if (!read_i32 (&r, &v))
    goto truncated;
  if (v <= 0 || v >= 64) {
    wk_set_err (err, err_size, "bad model type length %d", (int) v);
    return WK_ERR_FORMAT;
  }
  if (r.size - r.off < (size_t) v)
    goto truncated;
  {
    char type[64];
    memcpy (type, r.p + r.off, (size_t) v);
    type[v] = '\0';
    r.off += (size_t) v;
    if (strcmp (type, "silero-16k") != 0) {
      wk_set_err (err, err_size, "unsupported VAD model type '%.63s' "
          "(expected silero-16k)", type);
      return WK_ERR_UNSUPPORTED;
    }
  }
  /* version (3), window, context */
  for (int i = 0; i < 5; i++)
    if (!read_i32 (&r, &hp[i]))
      goto truncated;
  if (hp[0] < 0 || hp[1] < 0 || hp[2] < 0 || hp[0] > 1000 || hp[1] > 1000
      || hp[2] > 1000) {
    wk_set_err (err, err_size, "bad VAD model version %d.%d.%d", (int) hp[0],
        (int) hp[1], (int) hp[2]);
    return WK_ERR_FORMAT;
  }
  if (hp[3] != CHUNK || hp[4] != CTX) {
    wk_set_err (err, err_size, "unsupported VAD window %d / context %d "
        "(expected %d / %d)", (int) hp[3], (int) hp[4], CHUNK, CTX);
    return WK_ERR_UNSUPPORTED;
  }
  if (!read_i32 (&r, &n_layers))
    goto truncated;
  if (n_layers != N_ENC) {
    wk_set_err (err, err_size, "unsupported VAD encoder with %d layers "
        "(expected %d)", (int) n_layers, N_ENC);
    return WK_ERR_UNSUPPORTED;
  }
  for (int l = 0; l < N_ENC; l++) {
    int32_t ci, co, k;
    if (!read_i32 (&r, &ci) || !read_i32 (&r, &co) || !read_i32 (&r, &k))
      goto truncated;
    if (ci != WK_VAD_ENC_IN (l) || co != WK_VAD_ENC_OUT (l) || k != KSIZE) {
      wk_set_err (err, err_size, "unsupported VAD encoder layer %d: %d -> %d, "
          "kernel %d (expected %d -> %d, kernel %d)", l, (int) ci, (int) co,
          (int) k, WK_VAD_ENC_IN (l), WK_VAD_ENC_OUT (l), KSIZE);
      return WK_ERR_UNSUPPORTED;
    }
  }
  for (int i = 0; i < 4; i++)
    if (!read_i32 (&r, &lstm[i]))
      goto truncated;
  if (lstm[0] != HID || lstm[1] != HID || lstm[2] != HID || lstm[3] != 1) {
    wk_set_err (err, err_size, "unsupported VAD LSTM %d/%d or output %d/%d",
        (int) lstm[0], (int) lstm[1], (int) lstm[2], (int) lstm[3]);
    return WK_ERR_UNSUPPORTED;
  }

  m = vad_alloc ();
  if (!m) {
    wk_set_err (err, err_size, "out of memory");
    return WK_ERR_NOMEM;
  }
  m->version[0] = hp[0];
  m->version[1] = hp[1];
  m->version[2] = hp[2];

  while (r.off < r.size) {
    int32_t n_dims, name_len, type, ne[4] = { 1, 1, 1, 1 };
    int64_t norm[3] = { 1, 1, 1 };
    uint64_t n_elems = 1, n_bytes;
    char name[128];
    int t;

    if (!read_i32 (&r, &n_dims) || !read_i32 (&r, &name_len)
        || !read_i32 (&r, &type))
      goto truncated_m;
    if (n_dims < 0 || n_dims > 4) {
      wk_set_err (err, err_size, "tensor with %d dimensions", (int) n_dims);
      goto format_m;
    }
    if (name_len <= 0 || name_len >= (int32_t) sizeof name) {
      wk_set_err (err, err_size, "bad tensor name length %d", (int) name_len);
      goto format_m;
    }
    if (type != 0 && type != 1) {
      wk_set_err (err, err_size, "unsupported tensor type %d (f32 or f16 "
          "expected)", (int) type);
      goto format_m;
    }
    for (int i = 0; i < n_dims; i++) {
      if (!read_i32 (&r, &ne[i]))
        goto truncated_m;
      if (ne[i] <= 0 || ne[i] > (1 << 20)) {
        wk_set_err (err, err_size, "bad tensor dimension %d", (int) ne[i]);
        goto format_m;
      }
      if (n_elems > size / (uint64_t) ne[i]) {
        wk_set_err (err, err_size, "tensor larger than the file");
        goto format_m;
      }
      n_elems *= (uint64_t) ne[i];      /* <= size: no overflow */
    }
    if (r.size - r.off < (size_t) name_len)
      goto truncated_m;
    memcpy (name, r.p + r.off, (size_t) name_len);
    name[name_len] = '\0';
    r.off += (size_t) name_len;

    for (t = 0; t < N_TENSORS; t++)
      if (strcmp (name, specs[t].name) == 0)
        break;
    if (t == N_TENSORS) {
      wk_set_err (err, err_size, "unknown tensor '%s' in VAD model", name);
      goto format_m;
    }
    if (seen[t]) {
      wk_set_err (err, err_size, "tensor '%s' appears twice", name);
      goto format_m;
    }
    /* shape, ignoring trailing 1s (the converter squeezes) */
    {
      int nd = n_dims;
      while (nd > 0 && ne[nd - 1] == 1)
        nd--;
      if (nd > 3)
        goto shape_m;
      for (int i = 0; i < nd; i++)
        norm[i] = ne[i];
      for (int i = 0; i < 3; i++)
        if (norm[i] != specs[t].ne[i])
          goto shape_m;
    }
    n_bytes = n_elems * (type == 0 ? 4u : 2u);
    if (r.size - r.off < n_bytes)
      goto truncated_m;
    if (!place_tensor (m, t, r.p + r.off, type)) {
      wk_set_err (err, err_size, "tensor '%s' holds a value that is not "
          "finite", name);
      goto format_m;
    }
    r.off += (size_t) n_bytes;
    seen[t] = 1;
    continue;

  shape_m:
    wk_set_err (err, err_size, "tensor '%s' has shape [%d, %d, %d, %d], "
        "expected [%d, %d, %d]", name, (int) ne[0], (int) ne[1], (int) ne[2],
        (int) ne[3], (int) specs[t].ne[0], (int) specs[t].ne[1],
        (int) specs[t].ne[2]);
    goto format_m;
  }
  for (int t = 0; t < N_TENSORS; t++)
    if (!seen[t]) {
      wk_set_err (err, err_size, "tensor '%s' missing from the VAD model",
          specs[t].name);
      goto format_m;
    }
  *out = m;
  return WK_OK;

truncated_m:
  wk_ggml_vad_free (m);
truncated:
  wk_set_err (err, err_size, "VAD model truncated at byte %zu", r.off);
  return WK_ERR_FORMAT;
format_m:
  wk_ggml_vad_free (m);
  return WK_ERR_FORMAT;
}

static wk_status
parse_mapped (const void *data, size_t size, void *out, char *err,
    size_t err_size)
{
  return wk_ggml_vad_parse (data, size, out, err, err_size);
}

wk_status
wk_ggml_vad_open (const char *path, wk_ggml_vad ** out, char *err,
    size_t err_size)
{
  *out = NULL;
  /* the parser copies the weights: the mapping is released at once */
  return wk_map_parse (path, parse_mapped, out, NULL, NULL, err, err_size);
}

static wk_status
add (wk_knot_writer * w, const char *name, const float *data, int64_t ne0,
    int64_t ne1, char *err, size_t err_size)
{
  int64_t ne[WK_MAX_DIMS] = { ne0, ne1, 1, 1 };

  return wk_knot_writer_add_tensor (w, name, WK_TYPE_F32, ne1 > 1 ? 2 : 1,
      ne, data, (size_t) (ne0 * ne1) * sizeof (float), false, err, err_size);
}

wk_status
wk_ggml_vad_to_knot (const wk_ggml_vad * m, const char *name,
    wk_knot_writer * w, char *err, size_t err_size)
{
  uint32_t version[3];
  wk_status st = WK_OK;
  char tn[32];

  for (int i = 0; i < 3; i++)
    version[i] = (uint32_t) m->version[i];
  if (wk_knot_writer_set_str (w, "general.architecture", WK_VAD_ARCH,
          strlen (WK_VAD_ARCH)) != WK_OK
      || wk_knot_writer_set_str (w, "general.name", name, strlen (name))
      != WK_OK
      || wk_knot_writer_set_u32 (w, "general.file_type", 0) != WK_OK
      || wk_knot_writer_set_u32_array (w, WK_VAD_KEY_VERSION, version, 3)
      != WK_OK
      || wk_knot_writer_set_u32 (w, WK_VAD_KEY_SAMPLE_RATE, 16000) != WK_OK
      || wk_knot_writer_set_u32 (w, WK_VAD_KEY_WINDOW, CHUNK) != WK_OK
      || wk_knot_writer_set_u32 (w, WK_VAD_KEY_CONTEXT, CTX) != WK_OK) {
    wk_set_err (err, err_size, "out of memory");
    return WK_ERR_NOMEM;
  }
  st = add (w, WK_VAD_T_STFT, m->stft, NSTFT_PAD, NFFT, err, err_size);
  for (int l = 0; l < N_ENC && st == WK_OK; l++) {
    snprintf (tn, sizeof tn, WK_VAD_T_ENC_W, l);
    st = add (w, tn, m->enc_w[l], WK_VAD_ENC_OUT (l),
        (int64_t) KSIZE * WK_VAD_ENC_IN (l), err, err_size);
    snprintf (tn, sizeof tn, WK_VAD_T_ENC_B, l);
    if (st == WK_OK)
      st = add (w, tn, m->enc_b[l], WK_VAD_ENC_OUT (l), 1, err, err_size);
  }
  if (st == WK_OK)
    st = add (w, WK_VAD_T_W_IH, m->w_ih, NGATES, HID, err, err_size);
  if (st == WK_OK)
    st = add (w, WK_VAD_T_W_HH, m->w_hh, NGATES, HID, err, err_size);
  if (st == WK_OK)
    st = add (w, WK_VAD_T_B, m->b_gates, NGATES, 1, err, err_size);
  if (st == WK_OK)
    st = add (w, WK_VAD_T_OUT_W, m->out_w, HID, 1, err, err_size);
  if (st == WK_OK)
    st = add (w, WK_VAD_T_OUT_B, m->out_b, 1, 1, err, err_size);
  return st;
}
