/* libFuzzer target: the model loader's checks after the knot parse
 * (hyper-parameters, tensor shapes and types, vocabulary size against
 * n_vocab, mel filters, the whisperknot.* keys (alignment heads among
 * them), non-finite weights).
 *
 * fuzz-knot covers the byte-level parse; here the input is a compact
 * description of a model (sizes, types, one damaged tensor, key values)
 * that is written as a knot with the writer, so nearly every input gets
 * past the parse into the checks. A model that loads must be safe to
 * run: one encoder window and one decoder step run on it under ASan. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "knot-writer.h"
#include "model.h"

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

typedef struct
{
  const uint8_t *p;
  size_t n, pos;
} src;

static unsigned
get8 (src * s)
{
  return s->pos < s->n ? s->p[s->pos++] : 0;
}

static unsigned
get16 (src * s)
{
  unsigned lo = get8 (s);
  return lo | get8 (s) << 8;
}

/* The writer's input for one model. */
typedef struct
{
  wk_knot_writer *w;
  src *in;
  uint64_t rng;
  int victim, op, n_seen;       /* the one tensor to damage, and how */
  int mat_type;
  bool nan;                     /* put a NaN into the victim instead */
  int64_t budget;               /* elements left */
} gen;

static float
rnd (gen * g)
{
  g->rng = g->rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float) ((g->rng >> 40) & 0xffff) / 65536.0f * 0.2f - 0.1f;
}

static void
row_from_f32 (wk_type type, const float *x, void *dst, int64_t n)
{
  switch (type) {
    case WK_TYPE_F16:
      for (int64_t i = 0; i < n; i++)
        ((uint16_t *) dst)[i] = wk_fp32_to_fp16 (x[i]);
      break;
    case WK_TYPE_Q8_0:
      wk_quantize_row_q8_0 (x, dst, n);
      break;
    case WK_TYPE_Q4_0:
      wk_quantize_row_q4_0 (x, dst, n);
      break;
    default:
      memcpy (dst, x, (size_t) n * sizeof *x);
      break;
  }
}

/* Adds tensor name {ne0, ne1} (ne1 = 0: 1-D), applying the damage when it
 * is the victim. One random row is repeated (generating the data must
 * not dominate the run). */
static void
add (gen * g, const char *name, int64_t ne0, int64_t ne1)
{
  int64_t ne[2] = { ne0, ne1 ? ne1 : 1 };
  int n_dims = ne1 ? 2 : 1;
  wk_type type = n_dims == 2 ? (wk_type) g->mat_type : WK_TYPE_F32;
  bool victim = g->n_seen++ == g->victim;
  float *f;
  size_t row_bytes, nbytes;
  uint8_t *buf;
  char err[128];

  if (victim && !g->nan) {
    switch (g->op) {
      case 0:
        return;                 /* missing */
      case 1:
        ne[0]++;
        break;
      case 2:
        ne[1]++;
        n_dims = 2;
        break;
      case 3:
        type = WK_TYPE_F16;
        break;
      default:
        break;
    }
  }
  if (wk_type_row_bytes (type, ne[0]) == 0)
    type = WK_TYPE_F32;         /* rows that are not whole blocks */
  if (ne[0] * ne[1] > g->budget)
    return;
  g->budget -= ne[0] * ne[1];
  row_bytes = wk_type_row_bytes (type, ne[0]);
  nbytes = row_bytes * (size_t) ne[1];
  f = malloc ((size_t) ne[0] * sizeof *f);
  buf = malloc (nbytes);
  if (!f || !buf) {
    free (f);
    free (buf);
    return;
  }
  for (int64_t i = 0; i < ne[0]; i++)
    f[i] = n_dims == 1 && strstr (name, "ln") ? 1.0f + rnd (g) : rnd (g);
  row_from_f32 (type, f, buf, ne[0]);
  for (int64_t r = 1; r < ne[1]; r++)
    memcpy (buf + (size_t) r * row_bytes, buf, row_bytes);
  free (f);
  if (victim && g->nan && ne[0] * ne[1] > 0) {
    /* a NaN (or Inf) element; for q8_0/q4_0 the scale of its block (an
     * empty tensor has none) */
    uint64_t e = (g->rng >> 7) % (uint64_t) (ne[0] * ne[1]);
    uint8_t *row = buf + (size_t) (e / (uint64_t) ne[0]) * row_bytes;
    int64_t c = (int64_t) (e % (uint64_t) ne[0]);
    float v = (g->op & 1) ? NAN : INFINITY;
    uint16_t h = (g->op & 1) ? 0x7e00 : 0x7c00;
    if (type == WK_TYPE_F32)
      memcpy (row + c * 4, &v, 4);
    else if (type == WK_TYPE_F16)
      memcpy (row + c * 2, &h, 2);
    else
      memcpy (row + (size_t) (c / WK_QK) * wk_type_block_bytes (type), &h, 2);
  }
  /* the writer owns buf from here, taken or refused */
  wk_knot_writer_add_tensor (g->w, name, type, n_dims, ne, buf, nbytes, true,
      err, sizeof err);
}

static void
add_block (gen * g, const char *p, const char *attn, int64_t d, int64_t d_in)
{
  static const char *const w[] = { "query", "key", "value", "out" };
  char n[160];

  snprintf (n, sizeof n, "%s.%s_ln.weight", p, attn);
  add (g, n, d, 0);
  snprintf (n, sizeof n, "%s.%s_ln.bias", p, attn);
  add (g, n, d, 0);
  for (int k = 0; k < 4; k++) {
    snprintf (n, sizeof n, "%s.%s.%s.weight", p, attn, w[k]);
    add (g, n, (k == 1 || k == 2) ? d_in : d, d);
    if (k != 1) {
      snprintf (n, sizeof n, "%s.%s.%s.bias", p, attn, w[k]);
      add (g, n, d, 0);
    }
  }
}

static void
add_mlp (gen * g, const char *p, int64_t d)
{
  char n[160];

  snprintf (n, sizeof n, "%s.mlp_ln.weight", p);
  add (g, n, d, 0);
  snprintf (n, sizeof n, "%s.mlp_ln.bias", p);
  add (g, n, d, 0);
  snprintf (n, sizeof n, "%s.mlp.0.weight", p);
  add (g, n, d, 4 * d);
  snprintf (n, sizeof n, "%s.mlp.0.bias", p);
  add (g, n, 4 * d, 0);
  snprintf (n, sizeof n, "%s.mlp.2.weight", p);
  add (g, n, 4 * d, d);
  snprintf (n, sizeof n, "%s.mlp.2.bias", p);
  add (g, n, d, 0);
}

/* Runs what a stream runs first: one window through the encoder, the
 * decoder on <|startoftranscript|>, language detection. */
static void
run_model (wk_model * m)
{
  wk_ctx *c = NULL;
  char err[256];
  float *mel, *logits;
  int32_t sot = m->sp.sot;
  int A = m->hp.n_audio_ctx;

  if (wk_ctx_new (m, 1, 1, &c, err, sizeof err) != WK_OK)
    return;
  mel = calloc ((size_t) m->hp.n_mels * 2 * (size_t) A, sizeof *mel);
  logits = malloc ((size_t) m->hp.n_vocab * sizeof *logits);
  if (mel && logits) {
    wk_model_window_mel (m, NULL, 0, 0, 0, mel);
    if (wk_encode (c, mel, 2 * A) == WK_OK) {
      wk_decoder_eval (c, 0, &sot, 1, 0, logits, 1);
      wk_detect_language (c, NULL);
    }
  }
  free (mel);
  free (logits);
  wk_ctx_free (c);
}

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  static const char *const pad[] = { "zeros", "silence", "pad" };
  static const char *const rule[] = { "sum", "max", "" };
  static char bytes[256];
  static const char *toks[51866];
  static size_t lens[51866];
  src in = { data, size, 0 };
  gen g = { 0 };
  unsigned flags, hp[10];
  wk_special_tokens sp;
  int64_t da, dt;
  float *mel;
  void *knot = NULL;
  size_t knot_size = 0, n_tok, n_mel;
  char err[512], path[64], name[160];
  wk_model *m = NULL;
  int fd;

  flags = get8 (&in);
  /* hyper-parameters: raw 16-bit values with flag 1, else small ones the
   * fuzzer can vary (heads x head width, a few layers, short contexts) */
  if (flags & 1) {
    for (int i = 0; i < 10; i++)
      hp[i] = get16 (&in);
  } else {
    unsigned ah = 1 + get8 (&in) % 4, th = 1 + get8 (&in) % 4;
    hp[0] = 51864 + get8 (&in) % 4;
    hp[1] = 1 + get8 (&in) % 16;
    hp[2] = ah * (1 + get8 (&in) % 8);
    hp[3] = ah;
    hp[4] = get8 (&in) % 3;
    hp[5] = 12 + get8 (&in) % 24;
    hp[6] = th * (1 + get8 (&in) % 8);
    hp[7] = th;
    hp[8] = get8 (&in) % 3;
    hp[9] = get8 (&in) & 1 ? 128 : 80;
  }
  if (hp[0] < 51864 || hp[0] > 51866 || hp[2] > 4096 || hp[6] > 4096
      || hp[1] > 3000 || hp[5] > 4096 || hp[4] > 8 || hp[8] > 8
      || (hp[9] != 80 && hp[9] != 128))
    hp[0] = hp[0] < 51864 || hp[0] > 51866 ? hp[0] : 51864;     /* header only */
  da = hp[2];
  dt = hp[6];
  g.in = &in;
  g.rng = get16 (&in) + 1;
  g.victim = (int) get8 (&in);
  g.op = (int) get8 (&in) % 5;
  g.nan = (flags & 2) != 0;
  g.mat_type = (int) ((const int[]) {
        WK_TYPE_F32, WK_TYPE_F16, WK_TYPE_Q8_0, WK_TYPE_Q4_0
      }
  )[get8 (&in) % 4];
  g.budget = 1 << 21;
  g.w = wk_knot_writer_new (flags & 4 ? 32 : 64);
  if (!g.w)
    return 0;

  wk_knot_writer_set_str (g.w, "general.architecture",
      flags & 8 ? "whispe" : "whisper", flags & 8 ? 6 : 7);
  {
    static const char *const keys[10] = { "whisper.n_vocab",
      "whisper.n_audio_ctx", "whisper.n_audio_state", "whisper.n_audio_head",
      "whisper.n_audio_layer", "whisper.n_text_ctx", "whisper.n_text_state",
      "whisper.n_text_head", "whisper.n_text_layer", "whisper.n_mels"
    };
    for (int i = 0; i < 10; i++)
      if (!(flags & 16) || i != (int) (get8 (&in) % 10))
        wk_knot_writer_set_u32 (g.w, keys[i], hp[i]);
  }
  if (flags & 32)
    wk_knot_writer_set_u32 (g.w, "whisperknot.max_text_ctx", get16 (&in));
  if (flags & 64) {
    const char *p = pad[get8 (&in) % 3], *r = rule[get8 (&in) % 3];
    wk_knot_writer_set_str (g.w, "whisperknot.pad_window", p, strlen (p));
    wk_knot_writer_set_str (g.w, "whisperknot.timestamp_rule", r, strlen (r));
    /* whisperknot.alignment_heads: up to 8 small values (odd counts,
     * layers and heads out of range, repeats) */
    {
      uint32_t v[8];
      unsigned n = get8 (&in) % 9;
      for (unsigned i = 0; i < n; i++)
        v[i] = get8 (&in) % 6;
      wk_knot_writer_set_u32_array (g.w, "whisperknot.alignment_heads", v, n);
    }
  }
  /* the filters: positive, with one damaged value or a wrong count */
  n_mel = (size_t) (hp[9] <= 128 ? hp[9] : 128) * 201;
  if (flags & 128) {
    unsigned d = get8 (&in) % 3;        /* one fewer, as many, one more */
    n_mel = d == 0 ? (n_mel ? n_mel - 1 : 0) : n_mel + d - 1;
  }
  mel = malloc ((n_mel ? n_mel : 1) * sizeof *mel);
  if (mel) {
    unsigned what = get8 (&in);
    for (size_t i = 0; i < n_mel; i++)
      mel[i] = (float) (i % 201) / 201.0f;
    if (n_mel && (what & 3) == 1)
      mel[get16 (&in) % n_mel] = NAN;
    else if (n_mel && (what & 3) == 2)
      mel[get16 (&in) % n_mel] = -1.0f;
    else if ((what & 3) == 3)
      memset (mel, 0, n_mel * sizeof *mel);
    wk_knot_writer_set_f32_array (g.w, "whisper.mel_filters", mel, n_mel);
    free (mel);
  }
  /* the vocabulary: 256 byte tokens and empty ones, about eot entries */
  wk_special_tokens_for ((int) hp[0], &sp);
  for (int i = 0; i < 256; i++)
    bytes[i] = (char) i;
  n_tok = (size_t) sp.eot + (get8 (&in) % 3);
  if (n_tok > 0 && get8 (&in) == 0)
    n_tok--;
  for (size_t i = 0; i < n_tok && i < 51866; i++) {
    toks[i] = i < 256 ? &bytes[i] : "";
    lens[i] = i < 256 ? 1 : 0;
  }
  wk_knot_writer_set_str_array (g.w, "tokenizer.ggml.tokens", toks, lens,
      n_tok < 51866 ? n_tok : 51866);

  if (da >= 1 && dt >= 1 && da <= 4096 && dt <= 4096 && hp[1] <= 3000
      && hp[5] <= 4096 && hp[4] <= 8 && hp[8] <= 8) {
    add (&g, "encoder.conv1.weight", 3 * (int64_t) n_mel / 201, da);
    add (&g, "encoder.conv1.bias", da, 0);
    add (&g, "encoder.conv2.weight", 3 * da, da);
    add (&g, "encoder.conv2.bias", da, 0);
    add (&g, "encoder.positional_embedding", da, hp[1]);
    for (unsigned l = 0; l < hp[4]; l++) {
      snprintf (name, sizeof name, "encoder.blocks.%u", l);
      add_block (&g, name, "attn", da, da);
      add_mlp (&g, name, da);
    }
    add (&g, "encoder.ln_post.weight", da, 0);
    add (&g, "encoder.ln_post.bias", da, 0);
    add (&g, "decoder.token_embedding.weight", dt, hp[0]);
    add (&g, "decoder.positional_embedding", dt, hp[5]);
    for (unsigned l = 0; l < hp[8]; l++) {
      snprintf (name, sizeof name, "decoder.blocks.%u", l);
      add_block (&g, name, "attn", dt, dt);
      add_block (&g, name, "cross_attn", dt, da);
      add_mlp (&g, name, dt);
    }
    add (&g, "decoder.ln.weight", dt, 0);
    add (&g, "decoder.ln.bias", dt, 0);
  }

  if (wk_knot_writer_write_memory (g.w, &knot, &knot_size, err,
          sizeof err) != WK_OK) {
    wk_knot_writer_free (g.w);
    return 0;
  }
  wk_knot_writer_free (g.w);
  /* wk_model_load takes a path: an anonymous file, gone with its fd */
  fd = memfd_create ("fuzz-model.knot", MFD_CLOEXEC);
  if (fd >= 0 && write (fd, knot, knot_size) == (ssize_t) knot_size) {
    snprintf (path, sizeof path, "/proc/self/fd/%d", fd);
    if (wk_model_load (path, NULL, &m, err, sizeof err) == WK_OK) {
      if (getenv ("WK_FUZZ_VERBOSE"))
        fprintf (stderr, "fuzz-model: loaded\n");
      run_model (m);
      wk_model_unref (m);
    } else if (m || !err[0]) {
      abort ();                 /* a failure leaves nothing, says why */
    } else if (getenv ("WK_FUZZ_VERBOSE")) {
      fprintf (stderr, "fuzz-model: %s\n", err);
    }
  }
  if (fd >= 0)
    close (fd);
  free (knot);
  return 0;
}
