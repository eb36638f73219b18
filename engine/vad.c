/* Silero VAD (16 kHz) in plain C: the model from its knot (knots/FORMAT.md,
 * "Silero VAD knots"; read by knot.c, shared by registry.c), the network,
 * and a streaming speech segmenter.
 *
 * The network, per 512-sample chunk:
 *   framing to 640 samples (see wk_vad_framing in vad.h)
 *   STFT as a convolution with a fixed basis: 258 filters of 256 taps, hop
 *     128 -> 4 frames; magnitude of the 129 (re, im) pairs
 *   encoder: 4 conv1d (kernel 3, padding 1) + ReLU:
 *     129 -> 128 (stride 1), 128 -> 64 (2), 64 -> 64 (2), 64 -> 128 (1);
 *     the time axis goes 4 -> 4 -> 2 -> 1 -> 1
 *   LSTM cell, 128 -> 128, gates in PyTorch order (i, f, g, o); h and c
 *     carried to the next chunk
 *   ReLU, 1x1 conv 128 -> 1, sigmoid: the speech probability.
 *
 * The segmenter gives whisper.cpp's whisper_vad_segments_from_probs()
 * segments (itself silero-vad's get_speech_timestamps() plus a merge of
 * segments closer than 200 ms), recast so that every decision is taken as
 * soon as it is certain, chunk by chunk. Deliberate differences: a
 * max_speech_duration_s split is never merged back, a split segment must
 * outlast min_speech like any other, and speech still open at the end of
 * the audio ends where its last silence began rather than at the end. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "knot.h"
#include "mapfile.h"
#include "registry.h"
#include "vad.h"
#include "wk-err.h"
#include "wk-types.h"

#ifndef WK_VAD_MODEL_INSTALL_PATH
#define WK_VAD_MODEL_INSTALL_PATH ""
#endif
#ifndef WK_VAD_MODEL_BUILD_PATH
#define WK_VAD_MODEL_BUILD_PATH "silero-v6.2.0.knot"
#endif

/* The one architecture we run (vad.h). */
#define CHUNK WK_VAD_CHUNK
#define CTX WK_VAD_CONTEXT      /* context samples (SILERO framing) */
#define PAD 64                  /* reflected samples */
#define FRAME (CHUNK + 2 * PAD) /* 640 samples into the STFT */
#define NFFT WK_VAD_NFFT        /* STFT taps */
#define HOP 128
#define NFRAMES ((FRAME - NFFT) / HOP + 1)      /* 4 */
#define NBINS (NFFT / 2 + 1)    /* 129 */
#define NSTFT WK_VAD_NSTFT      /* 258 filters: re then im */
#define NSTFT_PAD WK_VAD_NSTFT_PAD      /* rows padded to a multiple of 8 */
#define HID WK_VAD_HID          /* LSTM size */
#define NGATES WK_VAD_NGATES
#define N_ENC WK_VAD_N_ENC
#define KSIZE WK_VAD_KSIZE

#if NSTFT != 2 * NBINS || NSTFT_PAD % 8 != 0 || NSTFT_PAD < NSTFT
#error "the STFT rows are 2 NBINS filters, padded to a multiple of 8"
#endif

static const int enc_in[N_ENC] = { WK_VAD_ENC_IN (0), WK_VAD_ENC_IN (1),
  WK_VAD_ENC_IN (2), WK_VAD_ENC_IN (3)
};

static const int enc_out[N_ENC] = { WK_VAD_ENC_OUT (0), WK_VAD_ENC_OUT (1),
  WK_VAD_ENC_OUT (2), WK_VAD_ENC_OUT (3)
};
static const int enc_stride[N_ENC] = { 1, 2, 2, 1 };

#define MAX_EVENTS 16
#define EVENTS_PER_CHUNK 8      /* more than one chunk can produce */
#define SAMPLE_RATE 16000

struct wk_vad_model
{
  /* process-wide sharing (registry.h): first, so a wk_loaded * is a
   * wk_vad_model * */
  wk_loaded base;
  wk_knot *knot;                /* the weights below point into it */
  void *mem;                    /* the bytes, for a model from memory */
  char *path;                   /* NULL for a model from memory */
  int version[3];

  /* the knot's tensors, used in place (vad.h gives their layout) */
  const float *stft;            /* [NFFT][NSTFT_PAD]: tap-major basis */
  const float *enc_w[N_ENC];    /* [in * KSIZE][out]: (ci, k) major */
  const float *enc_b[N_ENC];    /* [out] */
  const float *w_ih;            /* [HID in][NGATES] */
  const float *w_hh;            /* [HID in][NGATES] */
  const float *b_gates;         /* [NGATES]: bias_ih + bias_hh */
  const float *out_w;           /* [HID] */
  const float *out_b;           /* [1] */
  /* the encoder's output for an all-zero frame (digital silence), computed
   * at load with the same code, so the shortcut changes no bit */
  float enc_zero[128];
};

/* The segmenter's state, in chunk-grid samples (-1: none). */
typedef struct
{
  /* whisper.cpp's first pass: a speech candidate */
  int triggered;                /* inside a candidate */
  int64_t start;                /* its first chunk at or above threshold */
  int64_t temp_end;             /* first chunk of the current silence */
  int64_t prev_end;             /* a pause usable for a max-length split */
  int64_t next_start;           /* speech after that pause */
  int cand_covered;             /* its START is out, or it will merge */
  /* its second pass: a kept segment that the next one may merge into */
  int has_pend;
  int64_t pend_start, pend_end;
  int64_t last_end;             /* last END reported (padded), or 0 */
} segmenter;

struct wk_vad
{
  wk_vad_model *model;
  wk_vad_params params;
  wk_vad_framing framing;

  /* parameters in samples */
  float thr, neg_thr;
  int64_t min_speech, min_silence, merge_gap, pad, max_speech;
  int64_t min_silence_at_max;

  /* network state */
  float ctx[CTX];
  float h[HID];
  float c[HID];

  /* scratch, sized once */
  float frame[FRAME];
  float spec[NFRAMES * NSTFT_PAD];      /* [t][filter] */
  float mag[NFRAMES * NBINS];   /* [t][bin] */
  float act0[NFRAMES * 128];    /* [t][ch] after each encoder layer */
  float act1[2 * 64];
  float act2[1 * 64];
  float act3[1 * 128];
  float gates[NGATES];

  /* input */
  float pending[CHUNK];
  size_t n_pending;
  int64_t n_fed;                /* samples taken */
  int64_t n_chunks;             /* chunks run */
  int finished;
  float last_prob;
  float *probs_sink;            /* wk_vad_detect's output, or NULL */

  segmenter seg;
  int in_speech;                /* between a reported START and END */

  wk_vad_event events[MAX_EVENTS];
  int ev_head, ev_count;

  double seconds;
};

static void encode_zero (wk_vad_model * m);

/* ---- loader ------------------------------------------------------------ */

static void
model_destroy (wk_vad_model * m)
{
  if (!m)
    return;
  if (m->knot)
    wk_knot_close (m->knot);
  free (m->mem);
  free (m->path);
  free (m);
}

static void
model_destroy_loaded (wk_loaded * obj)
{
  model_destroy ((wk_vad_model *) obj);
}

static wk_status model_load_file (const char *path, wk_loaded ** out,
    char *err, size_t err_size);

/* VAD models in the process-wide registry (registry.h), shared and
 * replaced by the rule whisper models follow. */
static wk_loaded_kind vad_kind = {
  "VAD model", model_load_file, model_destroy_loaded,
  PTHREAD_MUTEX_INITIALIZER
};

/* Tensor name of f32 shape {ne0, ne1} (ne1 = 1: 1-D), its data in place;
 * NULL with a message otherwise. */
static const float *
bind (const wk_knot * k, const char *name, int64_t ne0, int64_t ne1,
    char *err, size_t err_size)
{
  const wk_tensor *t = wk_knot_find (k, name);
  int nd = ne1 > 1 ? 2 : 1;
  const float *d;
  size_t n;

  if (!t) {
    wk_set_err (err, err_size, "VAD model: tensor '%s' is missing", name);
    return NULL;
  }
  if (t->type != WK_TYPE_F32) {
    wk_set_err (err, err_size, "VAD model: tensor '%s' is %s, not f32", name,
        wk_type_name (t->type) ? wk_type_name (t->type) : "?");
    return NULL;
  }
  if (t->n_dims != nd || t->ne[0] != ne0 || (nd == 2 && t->ne[1] != ne1)) {
    wk_set_err (err, err_size, "VAD model: tensor '%s' has shape {%lld%s%lld} "
        "(%d-D), expected {%lld%s%lld}", name, (long long) t->ne[0],
        t->n_dims > 1 ? ", " : "", t->n_dims > 1 ? (long long) t->ne[1] : 0LL,
        (int) t->n_dims, (long long) ne0, nd > 1 ? ", " : "",
        nd > 1 ? (long long) ne1 : 0LL);
    return NULL;
  }
  if (((uintptr_t) t->data & (_Alignof (float) - 1)) != 0) {
    wk_set_err (err, err_size, "VAD model: tensor '%s' data is misaligned",
        name);
    return NULL;
  }
  d = t->data;
  n = (size_t) (ne0 * ne1);
  for (size_t i = 0; i < n; i++)
    if (!isfinite (d[i])) {
      wk_set_err (err, err_size, "VAD model: tensor '%s' holds a value that "
          "is not finite (element %zu): the file is damaged, convert it "
          "again", name, i);
      return NULL;
    }
  return d;
}

/* Checks the metadata of the VAD knot and binds its tensors. */
static wk_status
bind_model (wk_vad_model * m, char *err, size_t err_size)
{
  const wk_knot *k = m->knot;
  const char *arch;
  size_t arch_len, n;
  uint32_t v, ver[3];
  static const struct
  {
    const char *key;
    uint32_t want;
  } fixed[] = {
    {WK_VAD_KEY_SAMPLE_RATE, SAMPLE_RATE},
    {WK_VAD_KEY_WINDOW, CHUNK},
    {WK_VAD_KEY_CONTEXT, CTX},
  };
  char tn[32];

  if (!wk_knot_get_str (k, "general.architecture", &arch, &arch_len)) {
    wk_set_err (err, err_size, "VAD model: general.architecture is missing");
    return WK_ERR_FORMAT;
  }
  if (arch_len != strlen (WK_VAD_ARCH) || memcmp (arch, WK_VAD_ARCH,
          arch_len) != 0) {
    wk_set_err (err, err_size, "VAD model: this knot is a '%.*s' model, not "
        "a Silero VAD ('" WK_VAD_ARCH "')", (int) (arch_len < 32 ? arch_len :
            32), arch);
    return WK_ERR_FORMAT;
  }
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
    if (!wk_knot_get_u32 (k, fixed[i].key, &v)) {
      wk_set_err (err, err_size, "VAD model: metadata key %s is missing "
          "(or not an integer)", fixed[i].key);
      return WK_ERR_FORMAT;
    }
    if (v != fixed[i].want) {
      wk_set_err (err, err_size, "VAD model: %s = %u is not supported "
          "(the engine runs %u)", fixed[i].key, v, fixed[i].want);
      return WK_ERR_UNSUPPORTED;
    }
  }
  if (!wk_knot_get_arr_len (k, WK_VAD_KEY_VERSION, &n) || n != 3
      || !wk_knot_copy_u32_arr (k, WK_VAD_KEY_VERSION, ver, 3)
      || ver[0] > 1000 || ver[1] > 1000 || ver[2] > 1000) {
    wk_set_err (err, err_size, "VAD model: " WK_VAD_KEY_VERSION " is missing "
        "or not three version numbers");
    return WK_ERR_FORMAT;
  }
  for (int i = 0; i < 3; i++)
    m->version[i] = (int) ver[i];

  if (!(m->stft = bind (k, WK_VAD_T_STFT, NSTFT_PAD, NFFT, err, err_size)))
    return WK_ERR_FORMAT;
  for (int l = 0; l < N_ENC; l++) {
    snprintf (tn, sizeof tn, WK_VAD_T_ENC_W, l);
    if (!(m->enc_w[l] = bind (k, tn, enc_out[l], (int64_t) enc_in[l] * KSIZE,
                err, err_size)))
      return WK_ERR_FORMAT;
    snprintf (tn, sizeof tn, WK_VAD_T_ENC_B, l);
    if (!(m->enc_b[l] = bind (k, tn, enc_out[l], 1, err, err_size)))
      return WK_ERR_FORMAT;
  }
  if (!(m->w_ih = bind (k, WK_VAD_T_W_IH, NGATES, HID, err, err_size))
      || !(m->w_hh = bind (k, WK_VAD_T_W_HH, NGATES, HID, err, err_size))
      || !(m->b_gates = bind (k, WK_VAD_T_B, NGATES, 1, err, err_size))
      || !(m->out_w = bind (k, WK_VAD_T_OUT_W, HID, 1, err, err_size))
      || !(m->out_b = bind (k, WK_VAD_T_OUT_B, 1, 1, err, err_size)))
    return WK_ERR_FORMAT;
  encode_zero (m);
  return WK_OK;
}

/* Whether data starts with ggml's magic: Silero's ggml file, which the
 * engine read before VAD models were knots. */
static bool
is_ggml (const void *data, size_t size)
{
  return size >= 4 && memcmp (data, "lmgg", 4) == 0;
}

/* The message for a ggml VAD file (at path, NULL: in memory): what to
 * run instead. */
static void
ggml_err (const char *path, char *err, size_t err_size)
{
  if (!path) {
    wk_set_err (err, err_size, "VAD model: in whisper.cpp's ggml layout, "
        "which the engine no longer reads: convert it with "
        "whisperknot-convert");
    return;
  }
  wk_set_err (err, err_size, "%s: a VAD model in whisper.cpp's ggml layout, "
      "which the engine no longer reads: convert it once with "
      "whisperknot-convert %s silero-vad.knot, and use the knot", path, path);
}

static wk_status
model_load_file (const char *path, wk_loaded ** out, char *err, size_t err_size)
{
  wk_vad_model *m = calloc (1, sizeof *m);
  wk_status st;

  *out = NULL;
  if (!m) {
    wk_set_err (err, err_size, "VAD model: out of memory");
    return WK_ERR_NOMEM;
  }
  wk_loaded_init (&m->base, &vad_kind);
  m->path = strdup (path);
  st = wk_knot_open (path, &m->knot, err, err_size);
  if (st == WK_ERR_FORMAT) {
    const void *d;
    size_t n;
    char e2[16];
    if (wk_map_file (path, false, &d, &n, e2, sizeof e2) == WK_OK) {
      if (is_ggml (d, n))
        ggml_err (path, err, err_size);
      wk_unmap_file (d, n);
    }
  }
  if (st != WK_OK) {
    model_destroy (m);
    return st;
  }
  wk_knot_file_id (m->knot, &m->base.id);
  if (m->path)
    st = bind_model (m, err, err_size);
  else {
    st = WK_ERR_NOMEM;
    wk_set_err (err, err_size, "VAD model: out of memory");
  }
  if (st != WK_OK) {
    char inner[512];
    snprintf (inner, sizeof inner, "%s", err && err_size ? err : "");
    wk_set_err (err, err_size, "%s: %s", path, inner);
    model_destroy (m);
    return st;
  }
  *out = &m->base;
  return WK_OK;
}

wk_status
wk_vad_model_load_memory (const void *data, size_t size, wk_vad_model ** out,
    char *err, size_t err_size)
{
  wk_vad_model *m;
  wk_status st;

  if (!out || (!data && size)) {
    wk_set_err (err, err_size, "bad argument");
    if (out)
      *out = NULL;
    return WK_ERR_ARG;
  }
  *out = NULL;
  m = calloc (1, sizeof *m);
  /* malloc's alignment keeps the knot's aligned tensors aligned */
  if (!m || !(m->mem = malloc (size ? size : 1))) {
    free (m);
    wk_set_err (err, err_size, "VAD model: out of memory");
    return WK_ERR_NOMEM;
  }
  wk_loaded_init (&m->base, &vad_kind);
  if (size)
    memcpy (m->mem, data, size);
  st = wk_knot_open_memory (m->mem, size, &m->knot, err, err_size);
  if (st == WK_OK)
    st = bind_model (m, err, err_size);
  else if (is_ggml (data, size))
    ggml_err (NULL, err, err_size);
  if (st != WK_OK) {
    model_destroy (m);
    return st;
  }
  *out = m;
  return WK_OK;
}

wk_status
wk_vad_model_load (const char *path, wk_vad_model ** out, char *err,
    size_t err_size)
{
  wk_loaded *obj;
  wk_status st;

  if (!out) {
    wk_set_err (err, err_size, "bad argument");
    return WK_ERR_ARG;
  }
  *out = NULL;
  if (!path || !path[0]) {
    wk_set_err (err, err_size, "no VAD model path given");
    return WK_ERR_ARG;
  }
  st = wk_registry_load (&vad_kind, path, &obj, err, err_size);
  if (st == WK_OK)
    *out = (wk_vad_model *) obj;
  return st;
}

wk_vad_model *
wk_vad_model_ref (wk_vad_model * model)
{
  if (model)
    wk_loaded_ref (&model->base);
  return model;
}

void
wk_vad_model_unref (wk_vad_model * model)
{
  if (model)
    wk_loaded_unref (&model->base);
}

/* Whether the mapped file is still the one loaded (see registry.h): a
 * file truncated in place would raise SIGBUS on the next weight read. */
static wk_status
model_check_file (const wk_vad_model * m, char *err, size_t err_size)
{
  return wk_knot_check_file (m->knot, m->path, err, err_size);
}

const char *
wk_vad_model_type (const wk_vad_model * model)
{
  (void) model;
  return "silero-16k";
}

void
wk_vad_model_version (const wk_vad_model * model, int version[3])
{
  memcpy (version, model->version, sizeof model->version);
}

const char *
wk_default_vad_model_path (void)
{
  const char *env = getenv ("WHISPERKNOT_VAD_MODEL");

  if (env && env[0])
    return env;
  if (WK_VAD_MODEL_INSTALL_PATH[0]
      && access (WK_VAD_MODEL_INSTALL_PATH, R_OK) == 0)
    return WK_VAD_MODEL_INSTALL_PATH;
  return WK_VAD_MODEL_BUILD_PATH;
}

/* ---- network ----------------------------------------------------------- */

/* Eight floats in registers: two SSE-sized vectors with GCC/clang vector
 * extensions (plain SSE2 on x86-64, NEON on ARM, no -ffast-math, no
 * run-time dispatch), an array elsewhere. Lane by lane it computes what the
 * scalar loop would, in the same order, so results do not depend on it. */
#if defined(__GNUC__) && !defined(WK_VAD_NO_VECTOR_EXT)
typedef float v4sf __attribute__((vector_size (16)));
typedef struct
{
  v4sf lo, hi;
} f8;

static inline f8
f8_load (const float *p)
{
  f8 r;
  memcpy (&r.lo, p, sizeof r.lo);
  memcpy (&r.hi, p + 4, sizeof r.hi);
  return r;
}

static inline void
f8_store (float *p, f8 a)
{
  memcpy (p, &a.lo, sizeof a.lo);
  memcpy (p + 4, &a.hi, sizeof a.hi);
}

/* acc + w * s */
static inline f8
f8_madd (f8 acc, f8 w, float s)
{
  v4sf sv = { s, s, s, s };
  acc.lo += w.lo * sv;
  acc.hi += w.hi * sv;
  return acc;
}
#else
typedef struct
{
  float v[8];
} f8;

static inline f8
f8_load (const float *p)
{
  f8 r;
  memcpy (r.v, p, sizeof r.v);
  return r;
}

static inline void
f8_store (float *p, f8 a)
{
  memcpy (p, a.v, sizeof a.v);
}

static inline f8
f8_madd (f8 acc, f8 w, float s)
{
  for (int j = 0; j < 8; j++)
    acc.v[j] += w.v[j] * s;
  return acc;
}
#endif

#if NFRAMES != 4
#error "stft() is written for 4 frames"
#endif

/* spec[t][c] = sum_k basis[k][c] x[t HOP + k] for the 4 frames: blocks of
 * 8 filters stay in registers over all taps, so the basis is read once per
 * chunk. */
static void
stft (const float *x, const float *basis, float *spec)
{
  static const float zero8[8];

  for (int c = 0; c < NSTFT_PAD; c += 8) {
    f8 a0 = f8_load (zero8), a1 = a0, a2 = a0, a3 = a0;
    for (int k = 0; k < NFFT; k++) {
      f8 w = f8_load (basis + (size_t) k * NSTFT_PAD + c);
      a0 = f8_madd (a0, w, x[k]);
      a1 = f8_madd (a1, w, x[HOP + k]);
      a2 = f8_madd (a2, w, x[2 * HOP + k]);
      a3 = f8_madd (a3, w, x[3 * HOP + k]);
    }
    f8_store (spec + c, a0);
    f8_store (spec + NSTFT_PAD + c, a1);
    f8_store (spec + 2 * NSTFT_PAD + c, a2);
    f8_store (spec + 3 * NSTFT_PAD + c, a3);
  }
}

/* gates = b + W_ih^T x + W_hh^T h, 8 gates at a time in registers. */
static void
lstm_gates (const wk_vad_model * m, const float *x, const float *h,
    float *gates)
{
  for (int g = 0; g < NGATES; g += 8) {
    f8 acc = f8_load (m->b_gates + g);
    for (int i = 0; i < HID; i++) {
      if (x[i] != 0.0f)         /* ReLU outputs are often 0 */
        acc = f8_madd (acc, f8_load (m->w_ih + (size_t) i * NGATES + g), x[i]);
      if (h[i] != 0.0f)
        acc = f8_madd (acc, f8_load (m->w_hh + (size_t) i * NGATES + g), h[i]);
    }
    f8_store (gates + g, acc);
  }
}

/* Conv1d, kernel KSIZE, padding 1, then ReLU. x: [n_in][c_in] time-major,
 * w: [c_in * KSIZE][c_out], y: [n_out][c_out]; c_out a multiple of 8. */
static void
conv_relu (const float *x, int n_in, int c_in, const float *w,
    const float *b, int c_out, int stride, float *y, int n_out)
{
  for (int t = 0; t < n_out; t++) {
    float *yt = y + (size_t) t * c_out;
    for (int co = 0; co < c_out; co += 8) {
      f8 acc = f8_load (b + co);
      for (int k = 0; k < KSIZE; k++) {
        int src = t * stride + k - 1;
        if (src < 0 || src >= n_in)
          continue;
        for (int ci = 0; ci < c_in; ci++) {
          float s = x[(size_t) src * c_in + ci];
          if (s != 0.0f)        /* ReLU outputs are often 0 */
            acc = f8_madd (acc, f8_load (w + (size_t) (ci * KSIZE + k) *
                    c_out + co), s);
        }
      }
      f8_store (yt + co, acc);
    }
    for (int co = 0; co < c_out; co++)
      yt[co] = yt[co] > 0.0f ? yt[co] : 0.0f;
  }
}

/* The encoder on the magnitudes in v->mag, into v->act3. */
static void
encode (const wk_vad_model * m, float *mag, float *act0, float *act1,
    float *act2, float *act3)
{
  conv_relu (mag, NFRAMES, NBINS, m->enc_w[0], m->enc_b[0], 128,
      enc_stride[0], act0, 4);
  conv_relu (act0, 4, 128, m->enc_w[1], m->enc_b[1], 64, enc_stride[1],
      act1, 2);
  conv_relu (act1, 2, 64, m->enc_w[2], m->enc_b[2], 64, enc_stride[2], act2, 1);
  conv_relu (act2, 1, 64, m->enc_w[3], m->enc_b[3], 128, enc_stride[3],
      act3, 1);
}

static void
encode_zero (wk_vad_model * m)
{
  float mag[NFRAMES * NBINS] = { 0 }, a0[NFRAMES * 128], a1[2 * 64], a2[64];

  encode (m, mag, a0, a1, a2, m->enc_zero);
}

static inline float
sigmoidf (float x)
{
  return 1.0f / (1.0f + expf (-x));
}

float
wk_vad_run_chunk (wk_vad * v, const float *chunk)
{
  const wk_vad_model *m = v->model;
  float *x = v->frame;
  struct timespec t0, t1;
  float logit;

  clock_gettime (CLOCK_MONOTONIC, &t0);

  /* framing: 640 samples */
  if (v->framing == WK_VAD_FRAMING_SILERO) {
    memcpy (x, v->ctx, sizeof v->ctx);
    memcpy (x + CTX, chunk, CHUNK * sizeof *x);
    memcpy (v->ctx, chunk + CHUNK - CTX, sizeof v->ctx);
  } else {
    memcpy (x + PAD, chunk, CHUNK * sizeof *x);
    for (int j = 1; j <= PAD; j++)
      x[PAD - j] = x[PAD + j];
  }
  /* reflect on the right: x[last + j] = x[last - j] */
  for (int j = 1; j <= PAD; j++)
    x[FRAME - PAD - 1 + j] = x[FRAME - PAD - 1 - j];

  /* an all-zero frame (digital silence) has a known encoding */
  {
    int zero = 1;
    for (int i = 0; i < FRAME && zero; i++)
      zero = x[i] == 0.0f;
    if (zero) {
      memcpy (v->act3, m->enc_zero, sizeof v->act3);
      goto lstm;
    }
  }

  /* STFT magnitude */
  stft (x, m->stft, v->spec);
  for (int t = 0; t < NFRAMES; t++) {
    const float *st = v->spec + t * NSTFT_PAD;
    float *mt = v->mag + t * NBINS;
    for (int f = 0; f < NBINS; f++)
      mt[f] = sqrtf (st[f] * st[f] + st[NBINS + f] * st[NBINS + f]);
  }
  encode (m, v->mag, v->act0, v->act1, v->act2, v->act3);

lstm:
  /* LSTM cell */
  lstm_gates (m, v->act3, v->h, v->gates);
  logit = m->out_b[0];
  for (int i = 0; i < HID; i++) {
    float ig = sigmoidf (v->gates[i]);
    float fg = sigmoidf (v->gates[HID + i]);
    float gg = tanhf (v->gates[2 * HID + i]);
    float og = sigmoidf (v->gates[3 * HID + i]);
    v->c[i] = fg * v->c[i] + ig * gg;
    v->h[i] = og * tanhf (v->c[i]);
    /* decoder: ReLU then 1x1 conv */
    if (v->h[i] > 0.0f)
      logit += m->out_w[i] * v->h[i];
  }
  v->last_prob = sigmoidf (logit);

  clock_gettime (CLOCK_MONOTONIC, &t1);
  v->seconds += (double) (t1.tv_sec - t0.tv_sec)
      + 1e-9 * (double) (t1.tv_nsec - t0.tv_nsec);
  return v->last_prob;
}

/* ---- segmenter --------------------------------------------------------- */

wk_vad_params
wk_vad_default_params (void)
{
  wk_vad_params p;

  memset (&p, 0, sizeof p);
  p.threshold = 0.5f;
  p.neg_threshold = -1.0f;
  p.min_speech_duration_ms = 250;
  p.min_silence_duration_ms = 100;
  p.merge_gap_ms = 200;
  p.speech_pad_ms = 30;
  p.max_speech_duration_s = 0.0f;
  return p;
}

static void
push_event (wk_vad * v, wk_vad_event_type type, int64_t sample)
{
  int i;

  if (v->ev_count == MAX_EVENTS)        /* cannot happen: feed stops */
    return;
  i = (v->ev_head + v->ev_count) % MAX_EVENTS;
  v->events[i].type = type;
  v->events[i].sample = sample;
  v->ev_count++;
}

/* The end of what has been run so far: padding never reaches past it. */
static int64_t
horizon (const wk_vad * v)
{
  int64_t h = v->n_chunks * CHUNK;
  return h < v->n_fed ? h : v->n_fed;
}

static void
report_start (wk_vad * v, int64_t start)
{
  int64_t s = start - v->pad;

  if (s < v->seg.last_end)
    s = v->seg.last_end;
  if (s < 0)
    s = 0;
  push_event (v, WK_VAD_EVENT_SPEECH_START, s);
  v->in_speech = 1;
}

static void
report_end (wk_vad * v, int64_t end)
{
  int64_t e = end + v->pad;

  if (e > horizon (v))
    e = horizon (v);
  push_event (v, WK_VAD_EVENT_SPEECH_END, e);
  v->seg.last_end = e;
  v->in_speech = 0;
}

/* The pending segment is final: nothing more can merge into it. */
static void
finalize_pend (wk_vad * v)
{
  if (v->seg.has_pend) {
    report_end (v, v->seg.pend_end);
    v->seg.has_pend = 0;
  }
}

/* Would a segment starting at a merge into the pending one? */
static int
merges (const wk_vad * v, int64_t a)
{
  return v->seg.has_pend && a - v->seg.pend_end < v->merge_gap;
}

/* The first pass kept [a, b) (longer than min_speech). */
static void
kept_segment (wk_vad * v, int64_t a, int64_t b)
{
  segmenter *s = &v->seg;

  if (merges (v, a)) {
    s->pend_end = b;
    return;
  }
  finalize_pend (v);
  if (!s->cand_covered)
    report_start (v, a);
  s->has_pend = 1;
  s->pend_start = a;
  s->pend_end = b;
}

static void
seg_reset_marks (segmenter * s)
{
  s->temp_end = -1;
  s->prev_end = -1;
  s->next_start = -1;
}

static void
end_candidate (segmenter * s)
{
  seg_reset_marks (s);
  s->triggered = 0;
  s->cand_covered = 0;
}

/* Reports START as soon as the open candidate is sure to be kept (it will
 * last more than min_speech) unless it will merge into the pending
 * segment, whose START is out already. */
static void
maybe_confirm (wk_vad * v, int64_t cur)
{
  segmenter *s = &v->seg;
  int64_t end_bound;

  if (!s->triggered || s->cand_covered)
    return;
  end_bound = s->temp_end >= 0 ? s->temp_end : cur + CHUNK;
  if (end_bound - s->start <= v->min_speech)
    return;
  if (!merges (v, s->start)) {
    finalize_pend (v);
    report_start (v, s->start);
  }
  s->cand_covered = 1;
}

/* One chunk's probability p; cur = the chunk's first sample. The first
 * pass is whisper.cpp's (silero-vad's) candidate logic; kept segments
 * then wait until the merge gap has passed, as its second pass merges
 * segments closer than that. */
static void
seg_step (wk_vad * v, float p, int64_t cur)
{
  segmenter *s = &v->seg;

  if (p >= v->thr && s->temp_end >= 0) {
    /* speech again: the pause did not end the candidate */
    s->temp_end = -1;
    if (s->next_start < s->prev_end)
      s->next_start = cur;
  }
  if (p >= v->thr && !s->triggered) {
    s->triggered = 1;
    s->cand_covered = 0;
    s->start = cur;
    seg_reset_marks (s);
  } else if (s->triggered) {
    /* a candidate that will merge counts from the pending segment's start */
    int64_t seg_start = merges (v, s->start) ? s->pend_start : s->start;
    if (cur - seg_start > v->max_speech) {
      /* split at the last long-enough pause, else here; a split is final
       * (whisper.cpp would merge it back across a short pause) */
      int64_t end = s->prev_end >= 0 ? s->prev_end : cur;
      int still_silent = s->prev_end < 0 || s->next_start < s->prev_end;
      int64_t next = s->next_start;
      /* kept if long enough, or if its START is out already (reported
       * on the speech after the pause we now split at) */
      if (end - s->start > v->min_speech || s->cand_covered
          || merges (v, s->start))
        kept_segment (v, s->start, end);
      finalize_pend (v);
      if (still_silent) {
        end_candidate (s);
      } else {
        seg_reset_marks (s);
        s->start = next;
        s->cand_covered = 0;
      }
    }
    if (s->triggered && p < v->neg_thr) {
      if (s->temp_end < 0)
        s->temp_end = cur;
      if (cur - s->temp_end > v->min_silence_at_max)
        s->prev_end = s->temp_end;
      if (cur - s->temp_end >= v->min_silence) {
        if (s->temp_end - s->start > v->min_speech)
          kept_segment (v, s->start, s->temp_end);
        end_candidate (s);
      }
    }
  }

  /* The pending segment is final once no candidate can merge into it:
   * none open within the gap, and the gap has passed. */
  if (s->has_pend && !(s->triggered && merges (v, s->start))
      && cur + CHUNK - s->pend_end >= v->merge_gap)
    finalize_pend (v);
  maybe_confirm (v, cur);
}

static void
apply_params (wk_vad * v)
{
  const wk_vad_params *p = &v->params;
  int64_t max_speech;

  v->thr = p->threshold;
  v->neg_thr = p->neg_threshold >= 0.0f ? p->neg_threshold
      : p->threshold - 0.15f;
  if (v->neg_thr < 0.01f)
    v->neg_thr = 0.01f;
  v->min_speech = ((int64_t) SAMPLE_RATE) * p->min_speech_duration_ms / 1000;
  v->min_silence = ((int64_t) SAMPLE_RATE) * p->min_silence_duration_ms / 1000;
  v->merge_gap = ((int64_t) SAMPLE_RATE) * p->merge_gap_ms / 1000;
  v->pad = ((int64_t) SAMPLE_RATE) * p->speech_pad_ms / 1000;
  v->min_silence_at_max = ((int64_t) SAMPLE_RATE) * 98 / 1000;
  if (p->max_speech_duration_s > 0.0f && p->max_speech_duration_s < 1e6f) {
    max_speech = (int64_t) (SAMPLE_RATE * (double) p->max_speech_duration_s)
        - CHUNK - 2 * v->pad;
    v->max_speech = max_speech > 0 ? max_speech : CHUNK;
  } else {
    v->max_speech = INT64_MAX / 4;
  }
}

static int
params_valid (const wk_vad_params * p, char *err, size_t err_size)
{
  if (!(p->threshold > 0.0f && p->threshold <= 1.0f)) {
    wk_set_err (err, err_size, "VAD threshold must be in (0, 1]");
    return 0;
  }
  if (p->neg_threshold > p->threshold) {
    wk_set_err (err, err_size, "VAD neg_threshold above threshold");
    return 0;
  }
  if (p->min_speech_duration_ms < 0 || p->min_silence_duration_ms < 0
      || p->merge_gap_ms < 0 || p->speech_pad_ms < 0
      || p->min_speech_duration_ms > 3600000
      || p->min_silence_duration_ms > 3600000
      || p->merge_gap_ms > 3600000 || p->speech_pad_ms > 3600000
      || isnan (p->max_speech_duration_s)) {
    wk_set_err (err, err_size, "VAD durations must be between 0 and 1 hour");
    return 0;
  }
  return 1;
}

void
wk_vad_reset (wk_vad * v)
{
  memset (v->ctx, 0, sizeof v->ctx);
  memset (v->h, 0, sizeof v->h);
  memset (v->c, 0, sizeof v->c);
  v->n_pending = 0;
  v->n_fed = 0;
  v->n_chunks = 0;
  v->finished = 0;
  v->last_prob = 0.0f;
  memset (&v->seg, 0, sizeof v->seg);
  seg_reset_marks (&v->seg);
  v->in_speech = 0;
  v->ev_head = v->ev_count = 0;
}

wk_status
wk_vad_new (wk_vad_model * model, const wk_vad_params * params,
    wk_vad ** out, char *err, size_t err_size)
{
  wk_vad *v;
  wk_vad_params def = wk_vad_default_params ();

  if (!out) {
    wk_set_err (err, err_size, "bad argument");
    return WK_ERR_ARG;
  }
  *out = NULL;
  if (!model) {
    wk_set_err (err, err_size, "no VAD model");
    return WK_ERR_ARG;
  }
  if (!params)
    params = &def;
  if (!params_valid (params, err, err_size))
    return WK_ERR_ARG;
  if (model_check_file (model, err, err_size) != WK_OK)
    return WK_ERR_IO;
  v = calloc (1, sizeof *v);
  if (!v) {
    wk_set_err (err, err_size, "out of memory");
    return WK_ERR_NOMEM;
  }
  v->model = wk_vad_model_ref (model);
  v->params = *params;
  v->framing = WK_VAD_FRAMING_SILERO;
  apply_params (v);
  wk_vad_reset (v);
  *out = v;
  return WK_OK;
}

void
wk_vad_free (wk_vad * v)
{
  if (!v)
    return;
  wk_vad_model_unref (v->model);
  free (v);
}

void
wk_vad_set_framing (wk_vad * v, wk_vad_framing framing)
{
  v->framing = framing;
  wk_vad_reset (v);
}

static void
run_pending (wk_vad * v)
{
  int64_t cur = v->n_chunks * CHUNK;

  wk_vad_run_chunk (v, v->pending);
  if (v->probs_sink)
    v->probs_sink[v->n_chunks] = v->last_prob;
  v->n_chunks++;
  v->n_pending = 0;
  seg_step (v, v->last_prob, cur);
}

void
wk_vad_step_prob (wk_vad * v, float p)
{
  int64_t cur;

  if (!v || v->finished || v->n_pending != 0
      || v->ev_count > MAX_EVENTS - EVENTS_PER_CHUNK)
    return;
  cur = v->n_chunks * CHUNK;
  v->last_prob = p;
  v->n_chunks++;
  v->n_fed += CHUNK;
  seg_step (v, p, cur);
}

size_t
wk_vad_feed (wk_vad * v, const float *pcm, size_t n)
{
  size_t used = 0;

  if (!v || !pcm || v->finished)
    return 0;
  /* keep room for the events of one more chunk */
  while (used < n && v->ev_count <= MAX_EVENTS - EVENTS_PER_CHUNK) {
    size_t take = CHUNK - v->n_pending;
    if (take > n - used)
      take = n - used;
    memcpy (v->pending + v->n_pending, pcm + used, take * sizeof *pcm);
    v->n_pending += take;
    v->n_fed += (int64_t) take;
    used += take;
    if (v->n_pending == CHUNK) {
      run_pending (v);
      if (v->ev_count > 0)
        break;
    }
  }
  return used;
}

void
wk_vad_finish (wk_vad * v)
{
  segmenter *s;

  if (!v || v->finished)
    return;
  v->finished = 1;
  if (v->n_pending > 0) {
    memset (v->pending + v->n_pending, 0,
        (CHUNK - v->n_pending) * sizeof (float));
    run_pending (v);
  }
  s = &v->seg;
  if (s->triggered) {
    /* speech up to the end of the audio, or to the silence it was in */
    int64_t end = s->temp_end >= 0 ? s->temp_end : v->n_chunks * CHUNK;
    if (end - s->start > v->min_speech)
      kept_segment (v, s->start, end);
    end_candidate (s);
  }
  finalize_pend (v);
}

bool
wk_vad_pop_event (wk_vad * v, wk_vad_event * ev)
{
  if (!v || v->ev_count == 0)
    return false;
  if (ev)
    *ev = v->events[v->ev_head];
  v->ev_head = (v->ev_head + 1) % MAX_EVENTS;
  v->ev_count--;
  return true;
}

bool
wk_vad_in_speech (const wk_vad * v)
{
  return v && v->in_speech;
}

float
wk_vad_last_prob (const wk_vad * v)
{
  return v ? v->last_prob : 0.0f;
}

int64_t
wk_vad_position (const wk_vad * v)
{
  return v ? v->n_fed : 0;
}

void
wk_vad_get_stats (const wk_vad * v, wk_vad_stats * stats)
{
  if (!stats)
    return;
  memset (stats, 0, sizeof *stats);
  if (!v)
    return;
  stats->n_chunks = v->n_chunks;
  stats->seconds = v->seconds;
}

wk_status
wk_vad_detect (wk_vad * v, const float *pcm, size_t n, float *probs,
    wk_vad_segment ** segs, size_t *n_segs)
{
  wk_vad_segment *arr = NULL;
  size_t n_arr = 0, cap = 0, off = 0;
  int64_t open_start = -1;
  int done = 0;

  if (segs)
    *segs = NULL;
  if (n_segs)
    *n_segs = 0;
  if (!v || (!pcm && n))
    return WK_ERR_ARG;
  wk_vad_reset (v);
  v->probs_sink = probs;
  while (!done) {
    wk_vad_event ev;
    if (off < n) {
      off += wk_vad_feed (v, pcm + off, n - off);
    } else {
      wk_vad_finish (v);
      done = 1;
    }
    while (wk_vad_pop_event (v, &ev)) {
      if (ev.type == WK_VAD_EVENT_SPEECH_START) {
        open_start = ev.sample;
        continue;
      }
      if (n_arr == cap) {
        size_t ncap = cap ? 2 * cap : 16;
        wk_vad_segment *na = realloc (arr, ncap * sizeof *na);
        if (!na) {
          free (arr);
          v->probs_sink = NULL;
          return WK_ERR_NOMEM;
        }
        arr = na;
        cap = ncap;
      }
      arr[n_arr].start = open_start;
      arr[n_arr].end = ev.sample;
      n_arr++;
      open_start = -1;
    }
  }
  v->probs_sink = NULL;
  if (segs)
    *segs = arr;
  else
    free (arr);
  if (n_segs)
    *n_segs = n_arr;
  return WK_OK;
}
