/* wk-make-test-model: a random-weight Whisper model in whisper.cpp's
 * legacy ggml .bin layout, deterministic for a seed.
 *
 * The vocabulary and mel filterbank are copied from a real (weightless)
 * .bin such as whisper.cpp's for-tests-ggml-tiny.en.bin; the weights are
 * drawn with our own PRNG (splitmix64 + Box-Muller) at scales that keep
 * activations non-degenerate. Tensor types follow whisper.cpp's files:
 * positional embeddings, conv biases ({1, d}) and 1-D tensors f32, conv
 * weights f16 (f32 in an f32 model), 2-D matrices the chosen type. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ggml-bin.h"
#include "safetensors.h"
#include "wk-types.h"

typedef struct
{
  int n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer;
  int n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels;
} dims;

static const dims dims_tiny = { 51864, 1500, 384, 6, 4, 448, 384, 6, 4, 80 };
static const dims dims_base = { 51864, 1500, 512, 8, 6, 448, 512, 8, 6, 80 };

static const dims dims_small_en = {
  51864, 1500, 768, 12, 12, 448, 768, 12, 12, 80
};
static const dims dims_small = { 51864, 1500, 64, 2, 2, 64, 64, 2, 2, 80 };

/* ---- PRNG ---------------------------------------------------------------- */

static uint64_t rng;

static uint64_t
splitmix64 (void)
{
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* uniform in (0, 1] */
static double
uniform (void)
{
  return (double) ((splitmix64 () >> 11) + 1) * 0x1p-53;
}

static double gauss_spare;
static int gauss_have_spare;

static double
gauss (void)
{
  double r, t;

  if (gauss_have_spare) {
    gauss_have_spare = 0;
    return gauss_spare;
  }
  r = sqrt (-2.0 * log (uniform ()));
  t = 2.0 * M_PI * uniform ();
  gauss_spare = r * sin (t);
  gauss_have_spare = 1;
  return r * cos (t);
}

/* ---- writing ------------------------------------------------------------- */

typedef struct
{
  FILE *f;
  int wtype;                    /* type of 2-D weight matrices */
  int ok;
  char err[256];
} out_ctx;

static void
put_i32 (out_ctx * o, int32_t v)
{
  uint8_t b[4] = { (uint8_t) v, (uint8_t) (v >> 8), (uint8_t) (v >> 16),
    (uint8_t) (v >> 24)
  };
  if (o->ok && fwrite (b, 1, 4, o->f) != 4)
    o->ok = 0;
}

static void
put_bytes (out_ctx * o, const void *p, size_t n)
{
  if (o->ok && n && fwrite (p, 1, n, o->f) != n)
    o->ok = 0;
}

/* Writes one tensor record: x holds prod(ne) f32 values. */
static void
write_tensor (out_ctx * o, const char *name, int type, int n_dims,
    const int64_t * ne, const float *x)
{
  int64_t n = 1, rows;
  size_t rb = wk_type_row_bytes ((wk_type) type, ne[0]);
  void *buf;

  if (!o->ok)
    return;
  for (int d = 0; d < n_dims; d++)
    n *= ne[d];
  rows = n / ne[0];
  if (rb == 0) {
    snprintf (o->err, sizeof o->err, "tensor %s: ne[0] = %lld is not a "
        "multiple of %d, cannot store it as %s", name, (long long) ne[0],
        WK_QK, wk_type_name (type));
    o->ok = 0;
    return;
  }
  buf = malloc (rb * (size_t) rows);
  if (!buf) {
    snprintf (o->err, sizeof o->err, "out of memory");
    o->ok = 0;
    return;
  }
  for (int64_t r = 0; r < rows; r++) {
    const float *src = x + r * ne[0];
    uint8_t *dst = (uint8_t *) buf + (size_t) r * rb;
    switch (type) {
      case WK_TYPE_F32:
        memcpy (dst, src, rb);
        break;
      case WK_TYPE_F16:
        for (int64_t i = 0; i < ne[0]; i++) {
          uint16_t h = wk_fp32_to_fp16 (src[i]);
          memcpy (dst + 2 * i, &h, 2);
        }
        break;
      case WK_TYPE_Q8_0:
        wk_quantize_row_q8_0 (src, (wk_block_q8_0 *) dst, ne[0]);
        break;
      case WK_TYPE_Q4_0:
        wk_quantize_row_q4_0 (src, (wk_block_q4_0 *) dst, ne[0]);
        break;
    }
  }
  put_i32 (o, n_dims);
  put_i32 (o, (int32_t) strlen (name));
  put_i32 (o, type);
  for (int d = 0; d < n_dims; d++)
    put_i32 (o, (int32_t) ne[d]);
  put_bytes (o, name, strlen (name));
  put_bytes (o, buf, rb * (size_t) rows);
  free (buf);
}

static float *
alloc_f32 (int64_t n)
{
  return malloc ((size_t) n * sizeof (float));
}

/* Draws n values ~ N(mean, std) (always consuming the PRNG the same way,
 * so the stream of numbers depends only on the seed and the dims). */
static void
fill_gauss (float *x, int64_t n, double mean, double std)
{
  for (int64_t i = 0; i < n; i++)
    x[i] = (float) (mean + std * gauss ());
}

static void
gen_tensor (out_ctx * o, const char *name, int type, int n_dims, int64_t ne0,
    int64_t ne1, int64_t ne2, double mean, double std)
{
  int64_t ne[3] = { ne0, ne1, ne2 }, n = ne0 * ne1 * ne2;
  float *x = alloc_f32 (n);

  if (!x) {
    snprintf (o->err, sizeof o->err, "out of memory");
    o->ok = 0;
    return;
  }
  fill_gauss (x, n, mean, std);
  write_tensor (o, name, type, n_dims, ne, x);
  free (x);
}

/* Linear layer: weight {in, out} ~ N(0, 1/sqrt(in)), bias {out} small. */
static void
gen_linear (out_ctx * o, const char *prefix, int64_t in, int64_t out, int bias)
{
  char name[256];

  snprintf (name, sizeof name, "%s.weight", prefix);
  gen_tensor (o, name, o->wtype, 2, in, out, 1, 0.0, 1.0 / sqrt ((double) in));
  if (bias) {
    snprintf (name, sizeof name, "%s.bias", prefix);
    gen_tensor (o, name, WK_TYPE_F32, 1, out, 1, 1, 0.0, 0.02);
  }
}

static void
gen_ln (out_ctx * o, const char *prefix, int64_t d)
{
  char name[256];

  snprintf (name, sizeof name, "%s.weight", prefix);
  gen_tensor (o, name, WK_TYPE_F32, 1, d, 1, 1, 1.0, 0.05);
  snprintf (name, sizeof name, "%s.bias", prefix);
  gen_tensor (o, name, WK_TYPE_F32, 1, d, 1, 1, 0.0, 0.02);
}

static void
gen_block (out_ctx * o, const char *pfx, int i, int64_t d, int cross)
{
  char p[200];

  snprintf (p, sizeof p, "%s.blocks.%d.attn_ln", pfx, i);
  gen_ln (o, p, d);
  snprintf (p, sizeof p, "%s.blocks.%d.attn.query", pfx, i);
  gen_linear (o, p, d, d, 1);
  snprintf (p, sizeof p, "%s.blocks.%d.attn.key", pfx, i);
  gen_linear (o, p, d, d, 0);
  snprintf (p, sizeof p, "%s.blocks.%d.attn.value", pfx, i);
  gen_linear (o, p, d, d, 1);
  snprintf (p, sizeof p, "%s.blocks.%d.attn.out", pfx, i);
  gen_linear (o, p, d, d, 1);
  if (cross) {
    snprintf (p, sizeof p, "%s.blocks.%d.cross_attn_ln", pfx, i);
    gen_ln (o, p, d);
    snprintf (p, sizeof p, "%s.blocks.%d.cross_attn.query", pfx, i);
    gen_linear (o, p, d, d, 1);
    snprintf (p, sizeof p, "%s.blocks.%d.cross_attn.key", pfx, i);
    gen_linear (o, p, d, d, 0);
    snprintf (p, sizeof p, "%s.blocks.%d.cross_attn.value", pfx, i);
    gen_linear (o, p, d, d, 1);
    snprintf (p, sizeof p, "%s.blocks.%d.cross_attn.out", pfx, i);
    gen_linear (o, p, d, d, 1);
  }
  snprintf (p, sizeof p, "%s.blocks.%d.mlp_ln", pfx, i);
  gen_ln (o, p, d);
  snprintf (p, sizeof p, "%s.blocks.%d.mlp.0", pfx, i);
  gen_linear (o, p, d, 4 * d, 1);
  snprintf (p, sizeof p, "%s.blocks.%d.mlp.2", pfx, i);
  gen_linear (o, p, 4 * d, d, 1);
}

/* Whisper's encoder positions: sin on the first half of the channels,
 * cos on the second, timescales from 1 to 10000. */
static void
gen_sinusoids (out_ctx * o, int64_t d, int64_t len)
{
  int64_t ne[2] = { d, len }, half = d / 2;
  float *x = alloc_f32 (d * len);
  double inc = log (10000.0) / (double) (half > 1 ? half - 1 : 1);

  if (!x) {
    o->ok = 0;
    snprintf (o->err, sizeof o->err, "out of memory");
    return;
  }
  for (int64_t t = 0; t < len; t++)
    for (int64_t c = 0; c < half; c++) {
      double a = (double) t * exp (-inc * (double) c);
      x[t * d + c] = (float) sin (a);
      x[t * d + half + c] = (float) cos (a);
    }
  if (d % 2)
    for (int64_t t = 0; t < len; t++)
      x[t * d + d - 1] = 0.0f;
  write_tensor (o, "encoder.positional_embedding", WK_TYPE_F32, 2, ne, x);
  free (x);
}

static int
parse_dims (const char *s, dims * d)
{
  int v[10], n = 0;
  const char *p = s;

  if (!strcmp (s, "tiny")) {
    *d = dims_tiny;
    return 0;
  }
  if (!strcmp (s, "base")) {
    *d = dims_base;
    return 0;
  }
  if (!strcmp (s, "small")) {
    *d = dims_small_en;
    return 0;
  }
  if (!strcmp (s, "small-test")) {
    *d = dims_small;
    return 0;
  }
  while (*p && n < 10) {
    char *end;
    long x = strtol (p, &end, 10);
    if (end == p || x < 1 || x > (1 << 20))
      return -1;
    v[n++] = (int) x;
    p = end;
    if (*p == ',')
      p++;
    else if (*p)
      return -1;
  }
  if (n != 10 || *p)
    return -1;
  d->n_vocab = v[0];
  d->n_audio_ctx = v[1];
  d->n_audio_state = v[2];
  d->n_audio_head = v[3];
  d->n_audio_layer = v[4];
  d->n_text_ctx = v[5];
  d->n_text_state = v[6];
  d->n_text_head = v[7];
  d->n_text_layer = v[8];
  d->n_mels = v[9];
  return 0;
}

static void
usage (FILE * f)
{
  fprintf (f, "usage: wk-make-test-model [--dims tiny|base|small|small-test|"
      "LIST] "
      "[--type f32|f16|q8_0|q4_0]\n"
      "                          [--seed S] --vocab VOCAB.bin OUT.bin\n\n"
      "Writes a random-weight Whisper model in whisper.cpp's ggml .bin "
      "layout.\n"
      "LIST is n_vocab,n_audio_ctx,n_audio_state,n_audio_head,"
      "n_audio_layer,\n"
      "        n_text_ctx,n_text_state,n_text_head,n_text_layer,n_mels\n"
      "tiny       = 51864,1500,384,6,4,448,384,6,4,80 (whisper tiny.en)\n"
      "base       = 51864,1500,512,8,6,448,512,8,6,80 (whisper base.en)\n"
      "small      = 51864,1500,768,12,12,448,768,12,12,80 (whisper small.en)\n"
      "small-test = 51864,1500,64,2,2,64,64,2,2,80 (default)\n"
      "VOCAB.bin supplies the vocabulary and, when its n_mels matches, the "
      "mel filters\n(else Whisper's are computed). Output depends only on "
      "the arguments.\n");
}

int
main (int argc, char **argv)
{
  dims d = dims_small;
  int type = WK_TYPE_F32;
  uint64_t seed = 1;
  const char *vocab_path = NULL, *out_path = NULL;
  wk_ggml_bin *vb = NULL;
  char err[512], *tmp = NULL;
  out_ctx o = { 0 };
  float *filters = NULL;
  int ftype, rc = 1, fd;

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp (a, "--help") || !strcmp (a, "-h")) {
      usage (stdout);
      return 0;
    } else if (!strcmp (a, "--dims") && i + 1 < argc) {
      if (parse_dims (argv[++i], &d) != 0) {
        fprintf (stderr, "wk-make-test-model: bad --dims '%s'\n", argv[i]);
        return 2;
      }
    } else if (!strcmp (a, "--type") && i + 1 < argc) {
      type = wk_type_from_name (argv[++i]);
      if (type < 0) {
        fprintf (stderr, "wk-make-test-model: bad --type '%s'\n", argv[i]);
        return 2;
      }
    } else if (!strcmp (a, "--seed") && i + 1 < argc) {
      seed = strtoull (argv[++i], NULL, 0);
    } else if (!strcmp (a, "--vocab") && i + 1 < argc) {
      vocab_path = argv[++i];
    } else if (a[0] == '-' && a[1]) {
      fprintf (stderr, "wk-make-test-model: unknown option '%s'\n", a);
      usage (stderr);
      return 2;
    } else if (!out_path) {
      out_path = a;
    } else {
      usage (stderr);
      return 2;
    }
  }
  if (!vocab_path || !out_path) {
    usage (stderr);
    return 2;
  }
  if (d.n_audio_state % d.n_audio_head || d.n_text_state % d.n_text_head) {
    fprintf (stderr, "wk-make-test-model: widths must be multiples of the "
        "head counts\n");
    return 2;
  }
  if (wk_ggml_bin_open (vocab_path, &vb, err, sizeof err) != WK_OK) {
    fprintf (stderr, "wk-make-test-model: %s\n", err);
    return 1;
  }

  {
    size_t n = (size_t) d.n_mels * 201;
    filters = malloc (n * sizeof (float));
    if (!filters)
      goto done;
    if (vb->n_mel == d.n_mels && vb->n_fft == 201)
      memcpy (filters, vb->mel_filters, n * sizeof (float));
    else
      wk_mel_filters_slaney (d.n_mels, 400, 16000, filters);
  }

  tmp = malloc (strlen (out_path) + 16);
  if (!tmp)
    goto done;
  sprintf (tmp, "%s.tmp-XXXXXX", out_path);
  fd = mkstemp (tmp);
  if (fd < 0 || !(o.f = fdopen (fd, "wb"))) {
    fprintf (stderr, "wk-make-test-model: cannot create %s: %s\n", tmp,
        strerror (errno));
    free (tmp);
    tmp = NULL;
    goto done;
  }
  fchmod (fd, 0644);
  o.ok = 1;
  o.wtype = type;
  rng = seed;

  switch (type) {
    case WK_TYPE_F32:
      ftype = 0;
      break;
    case WK_TYPE_F16:
      ftype = 1;
      break;
    case WK_TYPE_Q4_0:
      ftype = 2000 + 2;         /* quantization version 2, MOSTLY_Q4_0 */
      break;
    default:
      ftype = 2000 + 7;         /* MOSTLY_Q8_0 */
      break;
  }
  put_i32 (&o, (int32_t) WK_GGML_MAGIC);
  put_i32 (&o, d.n_vocab);
  put_i32 (&o, d.n_audio_ctx);
  put_i32 (&o, d.n_audio_state);
  put_i32 (&o, d.n_audio_head);
  put_i32 (&o, d.n_audio_layer);
  put_i32 (&o, d.n_text_ctx);
  put_i32 (&o, d.n_text_state);
  put_i32 (&o, d.n_text_head);
  put_i32 (&o, d.n_text_layer);
  put_i32 (&o, d.n_mels);
  put_i32 (&o, ftype);
  put_i32 (&o, d.n_mels);
  put_i32 (&o, 201);
  put_bytes (&o, filters, (size_t) d.n_mels * 201 * sizeof (float));
  put_i32 (&o, vb->n_tokens);
  for (int32_t i = 0; i < vb->n_tokens; i++) {
    put_i32 (&o, (int32_t) vb->token_lens[i]);
    put_bytes (&o, vb->tokens[i], vb->token_lens[i]);
  }

  {
    int64_t ea = d.n_audio_state, dt = d.n_text_state;
    int conv_type = type == WK_TYPE_F32 ? WK_TYPE_F32 : WK_TYPE_F16;

    gen_tensor (&o, "encoder.conv1.weight", conv_type, 3, 3, d.n_mels, ea,
        0.0, 1.0 / sqrt (3.0 * d.n_mels));
    gen_tensor (&o, "encoder.conv1.bias", WK_TYPE_F32, 2, 1, ea, 1, 0.0, 0.02);
    gen_tensor (&o, "encoder.conv2.weight", conv_type, 3, 3, ea, ea, 0.0,
        1.0 / sqrt (3.0 * (double) ea));
    gen_tensor (&o, "encoder.conv2.bias", WK_TYPE_F32, 2, 1, ea, 1, 0.0, 0.02);
    gen_sinusoids (&o, ea, d.n_audio_ctx);
    for (int i = 0; i < d.n_audio_layer; i++)
      gen_block (&o, "encoder", i, ea, 0);
    gen_ln (&o, "encoder.ln_post", ea);

    gen_tensor (&o, "decoder.token_embedding.weight", type, 2, dt, d.n_vocab,
        1, 0.0, 1.0 / sqrt ((double) dt));
    gen_tensor (&o, "decoder.positional_embedding", WK_TYPE_F32, 2, dt,
        d.n_text_ctx, 1, 0.0, 0.01);
    for (int i = 0; i < d.n_text_layer; i++)
      gen_block (&o, "decoder", i, dt, 1);
    gen_ln (&o, "decoder.ln", dt);
  }

  if (fflush (o.f) != 0)
    o.ok = 0;
  if (fclose (o.f) != 0)
    o.ok = 0;
  if (!o.ok) {
    fprintf (stderr, "wk-make-test-model: %s: %s\n", out_path,
        o.err[0] ? o.err : strerror (errno));
    unlink (tmp);
    goto done;
  }
  if (rename (tmp, out_path) != 0) {
    fprintf (stderr, "wk-make-test-model: cannot rename to %s: %s\n",
        out_path, strerror (errno));
    unlink (tmp);
    goto done;
  }
  rc = 0;

done:
  if (rc && !o.f)
    fprintf (stderr, "wk-make-test-model: failed\n");
  free (tmp);
  free (filters);
  wk_ggml_bin_free (vb);
  return rc;
}
