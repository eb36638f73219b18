/* whisperknot-convert: whisper.cpp ggml .bin, Hugging Face safetensors or
 * OpenAI's PyTorch .pt -> knot (see FORMAT.md); Silero VAD's ggml file ->
 * VAD knot.
 *
 *   whisperknot-convert [--type f32|f16|q8_0|q4_0] [--keep NAME=TYPE ...]
 *                       [--vocab FILE] INPUT OUTPUT.knot
 *
 * Without --type every tensor keeps its source type bit for bit (types a
 * knot cannot hold are converted: BF16 -> f32 exactly, q4_1/q5_0/q5_1 ->
 * q8_0). With --type, 2-D weight matrices whose rows are whole blocks
 * take the target type, 1-D tensors are f32, conv weights q8_0 for a
 * quantized target where their unfolded rows (3 c_in) are whole blocks
 * (stored flattened to {3 c_in, c_out}), else f16 (f32 for an f32
 * target), positional embeddings q8_0 for a quantized target, else f16
 * (f32 for an f32 target). Conv biases are flattened to 1-D. The output
 * is written to a temporary file and renamed. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ggml-bin.h"
#include "ggml-vad.h"
#include "knot-writer.h"
#include "mapfile.h"
#include "model.h"
#include "safetensors.h"
#include "tokenizer.h"
#include "torch-pt.h"
#include "wk-types.h"

#define SRC_BF16 30             /* ggml's id for bfloat16 */
#define WK_CONVERT_MAX_HEADS 1024
#define N_ORDINARY_TOKENS 50257

typedef struct
{
  char name[160];               /* OpenAI name */
  int type;                     /* ggml id of the source data */
  int n_dims;
  int64_t ne[WK_MAX_DIMS];
  const void *data;
  size_t nbytes;
} src_tensor;

/* One weight file's reader: exactly one of the two. */
typedef struct
{
  wk_safetensors *st;
  wk_torch_pt *pt;
} src_file;

typedef struct
{
  int32_t hp[10];               /* n_vocab .. n_mels, FORMAT.md order */
  float *mel;                   /* n_mels * 201 */
  int32_t n_tokens;
  const char **tokens;
  uint32_t *token_lens;
  src_tensor *t;
  int64_t n;
  uint64_t src_bytes;
  /* owners */
  wk_ggml_bin *bin, *vocab_bin;
  src_file *files;              /* a checkpoint's files (or OpenAI's .pt) */
  int n_files;
  /* generation_config.json's alignment_heads (pairs), n_heads -1: none */
  uint32_t heads[2 * WK_CONVERT_MAX_HEADS];
  int n_heads;
  wk_hf_vocab hf_vocab;
} src_model;

static const char *hp_keys[10] = { "whisper.n_vocab", "whisper.n_audio_ctx",
  "whisper.n_audio_state", "whisper.n_audio_head", "whisper.n_audio_layer",
  "whisper.n_text_ctx", "whisper.n_text_state", "whisper.n_text_head",
  "whisper.n_text_layer", "whisper.n_mels"
};

enum
{ HP_VOCAB, HP_ACTX, HP_ASTATE, HP_AHEAD, HP_ALAYER, HP_TCTX, HP_TSTATE,
  HP_THEAD, HP_TLAYER, HP_MELS
};

static double
now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}

static const char *
src_type_name (int type)
{
  return type == SRC_BF16 ? "bf16" : wk_ggml_type_name (type);
}

/* Source row -> f32 (any source type). */
static void
src_row_to_f32 (int type, const void *row, float *y, int64_t n)
{
  if (type == SRC_BF16)
    wk_st_to_f32 (WK_ST_BF16, row, y, (size_t) n);
  else
    wk_ggml_row_to_f32 (type, row, y, n);
}

static size_t
src_row_bytes (int type, int64_t n)
{
  return type == SRC_BF16 ? ((size_t) n) * 2 : wk_ggml_row_bytes (type, n);
}

/* fopen (path, "rb") for a regular file only, decided by fstat before
 * anything is read: a FIFO, a directory or /dev/zero given by mistake is
 * an error, not a converter that waits or reads forever. */
static FILE *
open_regular (const char *path, char *err, size_t err_size)
{
  struct stat sb;
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  FILE *f;

  if (fd < 0) {
    snprintf (err, err_size, "%s: cannot open: %s", path, strerror (errno));
    return NULL;
  }
  if (fstat (fd, &sb) != 0 || !S_ISREG (sb.st_mode)) {
    snprintf (err, err_size, "%s: not a regular file", path);
    close (fd);
    return NULL;
  }
  f = fdopen (fd, "rb");
  if (!f) {
    snprintf (err, err_size, "%s: cannot open: %s", path, strerror (errno));
    close (fd);
  }
  return f;
}

static char *
read_file (const char *path, size_t *len, char *err, size_t err_size)
{
  FILE *f = open_regular (path, err, err_size);
  char *buf = NULL;
  long sz;

  if (!f)
    return NULL;
  if (fseek (f, 0, SEEK_END) != 0 || (sz = ftell (f)) < 0
      || fseek (f, 0, SEEK_SET) != 0 || sz > (1L << 30)) {
    snprintf (err, err_size, "%s: cannot read (or larger than 1 GiB)", path);
    fclose (f);
    return NULL;
  }
  buf = malloc ((size_t) sz + 1);
  if (!buf || fread (buf, 1, (size_t) sz, f) != (size_t) sz) {
    snprintf (err, err_size, "%s: read failed", path);
    free (buf);
    fclose (f);
    return NULL;
  }
  buf[sz] = '\0';
  *len = (size_t) sz;
  fclose (f);
  return buf;
}

/* A regular file's first bytes and what they say it is. */
typedef struct
{
  uint8_t b[16];                /* wk_ggml_vad_probe reads 14 */
  size_t n;
  wk_file_kind kind;
} file_head;

/* Reads path's head into h; false (err set) when it cannot be read. */
static bool
read_head (const char *path, file_head * h, char *err, size_t err_size)
{
  FILE *f = open_regular (path, err, err_size);
  struct stat sb;

  if (!f)
    return false;
  h->n = fread (h->b, 1, sizeof h->b, f);
  h->kind = wk_file_kind_of (h->b, h->n, fstat (fileno (f), &sb) == 0 ?
      (uint64_t) sb.st_size : 0);
  fclose (f);
  return true;
}

/* Whether the safetensors reader takes a file of this kind: a damaged
 * header too, so that its own message says what is wrong. */
static bool
is_safetensors (wk_file_kind kind)
{
  return kind == WK_FILE_SAFETENSORS || kind == WK_FILE_SAFETENSORS_DAMAGED;
}

/* Whether config.json lies beside path: a PyTorch zip holding a bare
 * state dict is then a transformers pytorch_model.bin rather than
 * OpenAI's checkpoint (with its "dims"). */
static bool
config_beside (const char *path)
{
  char cfg[4200];
  const char *slash = strrchr (path, '/');

  if (slash)
    snprintf (cfg, sizeof cfg, "%.*s/config.json", (int) (slash - path), path);
  else
    snprintf (cfg, sizeof cfg, "config.json");
  return access (cfg, R_OK) == 0;
}

/* Silero VAD's ggml file -> the VAD knot (FORMAT.md, "Silero VAD knots").
 * Returns the exit status. */
static int
convert_vad (const char *input, const char *output, bool quiet)
{
  wk_ggml_vad *v = NULL;
  wk_knot_writer *w = NULL;
  char err[1024] = "", name[256];
  const char *base = strrchr (input, '/');
  size_t bl;
  double t0 = now_s ();
  int rc = 1;

  base = base ? base + 1 : input;
  bl = strlen (base);
  if (bl > 4 && !strcmp (base + bl - 4, ".bin"))
    bl -= 4;
  snprintf (name, sizeof name, "%.*s", (int) bl, base);
  if (wk_ggml_vad_open (input, &v, err, sizeof err) != WK_OK)
    goto out;
  w = wk_knot_writer_new (64);
  if (!w) {
    snprintf (err, sizeof err, "out of memory");
    goto out;
  }
  if (wk_ggml_vad_to_knot (v, name, w, err, sizeof err) != WK_OK
      || wk_knot_writer_write_file (w, output, err, sizeof err) != WK_OK)
    goto out;
  if (!quiet)
    printf ("%s: Silero VAD v%d.%d.%d, %d tensors (f32, laid out as the "
        "engine computes), %.2f MB, %.2f s\n", output, (int) v->version[0],
        (int) v->version[1], (int) v->version[2], 6 + 2 * WK_VAD_N_ENC,
        (double) wk_knot_writer_file_size (w) / 1e6, now_s () - t0);
  rc = 0;
out:
  if (rc)
    fprintf (stderr, "whisperknot-convert: %s\n", err);
  wk_knot_writer_free (w);
  wk_ggml_vad_free (v);
  return rc;
}

/* err: what a file none of the readers here takes is (h: its head). */
static void
explain_head (const char *path, const file_head * h, char *err, size_t err_size)
{
  const uint8_t *b = h->b;

  if (h->kind == WK_FILE_TORCH_PICKLE)
    snprintf (err, err_size, "%s: a PyTorch checkpoint in the format before "
        "PyTorch 1.6 (a bare pickle): load it and save it again with "
        "torch.save, which writes the zip format this converter reads", path);
  else if (h->kind == WK_FILE_KNOT)
    snprintf (err, err_size, "%s: this is already a knot (GGUF); give a "
        "whisper.cpp .bin or a Hugging Face checkpoint to convert", path);
  else if (h->n >= 4)
    snprintf (err, err_size, "%s: not a model this converter reads: it "
        "starts with bytes %02x %02x %02x %02x, neither the magic of a "
        "whisper.cpp ggml .bin (6c 6d 67 67), of a PyTorch .pt (a zip, 50 4b "
        "03 04) nor a safetensors header", path, b[0], b[1], b[2], b[3]);
  else
    snprintf (err, err_size, "%s: %zu bytes, too short for a model", path,
        h->n);
}

static bool
file_exists (const char *path)
{
  struct stat sb;
  return stat (path, &sb) == 0 && S_ISREG (sb.st_mode);
}

/* "PREFIX: message" in place. */
static void
prefix_err (char *err, size_t err_size, const char *prefix)
{
  size_t pl = strlen (prefix), ml = strlen (err);

  if (pl + 3 > err_size)
    return;
  if (ml > err_size - pl - 3)
    ml = err_size - pl - 3;
  memmove (err + pl + 2, err, ml);
  memcpy (err, prefix, pl);
  err[pl] = ':';
  err[pl + 1] = ' ';
  err[pl + 2 + ml] = '\0';
}

/* ---- sources -------------------------------------------------------------- */

static int
load_bin (src_model * m, const char *path, char *err, size_t err_size)
{
  wk_ggml_bin *b;

  if (wk_ggml_bin_open (path, &b, err, err_size) != WK_OK)
    return -1;
  m->bin = b;
  m->hp[HP_VOCAB] = b->hp.n_vocab;
  m->hp[HP_ACTX] = b->hp.n_audio_ctx;
  m->hp[HP_ASTATE] = b->hp.n_audio_state;
  m->hp[HP_AHEAD] = b->hp.n_audio_head;
  m->hp[HP_ALAYER] = b->hp.n_audio_layer;
  m->hp[HP_TCTX] = b->hp.n_text_ctx;
  m->hp[HP_TSTATE] = b->hp.n_text_state;
  m->hp[HP_THEAD] = b->hp.n_text_head;
  m->hp[HP_TLAYER] = b->hp.n_text_layer;
  m->hp[HP_MELS] = b->hp.n_mels;
  m->n_tokens = b->n_tokens;
  m->tokens = b->tokens;
  m->token_lens = b->token_lens;
  m->mel = malloc ((size_t) m->hp[HP_MELS] * 201 * sizeof (float));
  if (!m->mel) {
    snprintf (err, err_size, "out of memory");
    return -1;
  }
  if (b->n_mel == m->hp[HP_MELS] && b->n_fft == 201)
    memcpy (m->mel, b->mel_filters, (size_t) b->n_mel * 201 * sizeof (float));
  else {
    fprintf (stderr, "note: %s has a %d x %d filterbank, not %d x 201: "
        "using Whisper's computed filters\n", path, b->n_mel, b->n_fft,
        m->hp[HP_MELS]);
    wk_mel_filters_slaney (m->hp[HP_MELS], 400, 16000, m->mel);
  }
  m->t = calloc (b->n_tensors ? (size_t) b->n_tensors : 1, sizeof *m->t);
  if (!m->t) {
    snprintf (err, err_size, "out of memory");
    return -1;
  }
  for (int64_t i = 0; i < b->n_tensors; i++) {
    const wk_ggml_tensor *g = &b->tensors[i];
    src_tensor *t = &m->t[m->n++];
    if (strlen (g->name) >= sizeof t->name) {
      snprintf (err, err_size, "%s: tensor name '%.40s...' too long", path,
          g->name);
      return -1;
    }
    strcpy (t->name, g->name);
    t->type = g->type;
    t->n_dims = g->n_dims;
    memcpy (t->ne, g->ne, sizeof t->ne);
    t->data = g->data;
    t->nbytes = g->nbytes;
  }
  return 0;
}

/* The side files of a Hugging Face checkpoint name special-token ids
 * (added_tokens.json, tokenizer.json's added_tokens, the *_token_id
 * members of generation_config.json and config.json). The knot keeps no
 * ids: the engine derives them from n_vocab, so a file whose ids differ
 * from that layout describes a vocabulary the engine would misread, and
 * is an error rather than a model that decodes the wrong tokens. */
static int
check_hf_special_ids (const src_model * m, const char *dir, char *err,
    size_t err_size)
{
  static const char *const files[] = { "added_tokens.json",
    "tokenizer.json", "generation_config.json", "config.json"
  };
  static const char *const id_keys[] = { "decoder_start_token_id",
    "eos_token_id", "no_timestamps_token_id", "prev_sot_token_id"
  };
  int n_vocab = m->hp[HP_VOCAB];
  wk_special_tokens sp;
  wk_tokenizer *tok = NULL;
  int rc = 0;

  wk_special_tokens_for (n_vocab, &sp);
  {
    /* the special tokens' names, from a tokenizer of 256 byte tokens */
    static char bytes[256];
    const char *t[256];
    size_t l[256];
    for (int i = 0; i < 256; i++) {
      bytes[i] = (char) i;
      t[i] = &bytes[i];
      l[i] = 1;
    }
    if (wk_tokenizer_new (n_vocab, 256, t, l, &tok, err, err_size) != WK_OK)
      return -1;
  }
  for (size_t f = 0; f < sizeof files / sizeof files[0] && rc == 0; f++) {
    char path[4200];
    size_t len;
    char *json;

    snprintf (path, sizeof path, "%s/%s", dir, files[f]);
    if (!file_exists (path))
      continue;
    json = read_file (path, &len, err, err_size);
    if (!json) {
      rc = -1;
      break;
    }
    if (f < 2) {
      wk_hf_named_ids ids;
      if (wk_hf_added_tokens_parse (json, len, &ids, err, err_size) != WK_OK) {
        /* tokenizer.json without added_tokens is only a vocabulary */
        rc = f == 0 ? -1 : 0;
        ids.n = 0;
      }
      for (int32_t i = 0; i < ids.n && rc == 0; i++) {
        const char *name = ids.names[i], *want;
        int64_t id = ids.ids[i];
        /* ordinary ids are the vocabulary's; ids past n_vocab (tokens a
         * tokenizer added without an embedding row) never come out */
        if (id < sp.eot || id >= n_vocab)
          continue;
        want = wk_tokenizer_bytes (tok, (int) id, NULL);
        if (strcmp (name, want) != 0 && !(id == sp.nosp
                && !strcmp (name, "<|nocaptions|>"))) {
          snprintf (err, err_size, "'%.40s' has id %lld, which a Whisper "
              "vocabulary of %d gives to '%s'", name,
              (long long) id, n_vocab, want);
          rc = -1;
        }
      }
      wk_hf_named_ids_clear (&ids);
    } else {
      int64_t v[4];
      const int want[4] = { sp.sot, sp.eot, sp.no_timestamps, sp.prev };
      if (wk_hf_json_ids (json, len, id_keys, 4, v, err, err_size) != WK_OK)
        rc = -1;
      for (int k = 0; k < 4 && rc == 0; k++)
        if (v[k] >= 0 && v[k] != want[k]) {
          snprintf (err, err_size, "%s is %lld, but a Whisper vocabulary of "
              "%d has %s at %d", id_keys[k],
              (long long) v[k], n_vocab, wk_tokenizer_bytes (tok, want[k],
                  NULL), want[k]);
          rc = -1;
        }
    }
    free (json);
    if (rc)
      prefix_err (err, err_size, path);
  }
  wk_tokenizer_free (tok);
  return rc;
}

/* A checkpoint file's tensors into m->t, renamed from Hugging Face's
 * names when hf (OpenAI's .pt uses the names a knot keeps). */
static int
add_tensors (src_model * m, const char *path, const wk_st_tensor * ts,
    int64_t n, bool hf, char *err, size_t err_size)
{
  src_tensor *nt = realloc (m->t, (size_t) (m->n + n + 1) * sizeof *m->t);

  if (!nt) {
    snprintf (err, err_size, "out of memory");
    return -1;
  }
  m->t = nt;
  for (int64_t i = 0; i < n; i++) {
    const wk_st_tensor *s = &ts[i];
    src_tensor *t = &m->t[m->n];
    memset (t, 0, sizeof *t);
    if (!hf) {
      if (strlen (s->name) >= sizeof t->name) {
        snprintf (err, err_size, "%s: tensor name '%.40s...' too long", path,
            s->name);
        return -1;
      }
      strcpy (t->name, s->name);
    } else if (!wk_hf_name_to_openai (s->name, t->name, sizeof t->name)) {
      if (strcmp (s->name, "proj_out.weight") != 0)
        fprintf (stderr, "note: skipping tensor '%s' (no Whisper "
            "counterpart)\n", s->name);
      continue;
    }
    for (int64_t j = 0; j < m->n; j++)
      if (!strcmp (m->t[j].name, t->name)) {
        snprintf (err, err_size, "%s: tensor '%s' again (the checkpoint "
            "holds it twice)", path, s->name);
        return -1;
      }
    t->type = s->dtype == WK_ST_F32 ? WK_TYPE_F32 : s->dtype == WK_ST_F16 ?
        WK_TYPE_F16 : SRC_BF16;
    t->n_dims = s->n_dims;
    for (int d = 0; d < WK_MAX_DIMS; d++)
      t->ne[d] = d < s->n_dims ? s->shape[s->n_dims - 1 - d] : 1;
    t->data = s->data;
    t->nbytes = s->nbytes;
    m->n++;
  }
  return 0;
}

/* Keeps a file's reader (st or pt, the other NULL; freed here on
 * failure) and adds its tensors (see add_tensors). */
static int
add_file (src_model * m, const char *path, wk_safetensors * st,
    wk_torch_pt * pt, bool hf, char *err, size_t err_size)
{
  src_file *nf = realloc (m->files, (size_t) (m->n_files + 1) * sizeof *nf);

  if (!nf) {
    wk_safetensors_free (st);
    wk_torch_pt_free (pt);
    snprintf (err, err_size, "out of memory");
    return -1;
  }
  m->files = nf;
  m->files[m->n_files].st = st;
  m->files[m->n_files].pt = pt;
  m->n_files++;
  if (st)
    return add_tensors (m, path, st->tensors, st->n_tensors, hf, err, err_size);
  if (pt->n_skipped)
    fprintf (stderr, "note: skipping %lld tensors that are neither f32, f16 "
        "nor bf16, or have no dimensions\n", (long long) pt->n_skipped);
  return add_tensors (m, path, pt->tensors, pt->n_tensors, hf, err, err_size);
}

/* One weight file of a Hugging Face checkpoint: safetensors, or PyTorch's
 * zip (pytorch_model.bin, as transformers saved checkpoints before
 * safetensors); pt, when not NULL, is path's zip already read (and is
 * kept or freed here). */
static int
load_hf_file (src_model * m, const char *path, wk_torch_pt * pt, char *err,
    size_t err_size)
{
  wk_safetensors *st;
  struct stat sb;
  file_head h;

  if (stat (path, &sb) == 0)
    m->src_bytes += (uint64_t) sb.st_size;
  if (!pt && !read_head (path, &h, err, err_size))
    return -1;
  if (pt || h.kind == WK_FILE_TORCH_ZIP) {
    if (!pt && wk_torch_pt_open (path, &pt, err, err_size) != WK_OK)
      return -1;
    return add_file (m, path, NULL, pt, true, err, err_size);
  }
  if (!is_safetensors (h.kind)) {
    explain_head (path, &h, err, err_size);
    return -1;
  }
  if (wk_safetensors_open (path, &st, err, err_size) != WK_OK)
    return -1;
  return add_file (m, path, st, NULL, true, err, err_size);
}

/* The weights of a checkpoint directory, as transformers saves them: the
 * first of model.safetensors, the shards model.safetensors.index.json
 * names, pytorch_model.bin and the shards pytorch_model.bin.index.json
 * names. */
static int
load_hf_weights (src_model * m, const char *dir, char *err, size_t err_size)
{
  static const char *const single[] = { "model.safetensors",
    "pytorch_model.bin"
  };
  char path[4200];

  for (int k = 0; k < 2; k++) {
    wk_hf_shards sh;
    char *json;
    size_t len;
    int rc = 0;

    snprintf (path, sizeof path, "%s/%s", dir, single[k]);
    if (file_exists (path))
      return load_hf_file (m, path, NULL, err, err_size);
    snprintf (path, sizeof path, "%s/%s.index.json", dir, single[k]);
    if (!file_exists (path))
      continue;
    json = read_file (path, &len, err, err_size);
    if (!json)
      return -1;
    if (wk_hf_shards_parse (json, len, &sh, err, err_size) != WK_OK) {
      prefix_err (err, err_size, path);
      free (json);
      return -1;
    }
    free (json);
    for (int32_t i = 0; i < sh.n && rc == 0; i++) {
      snprintf (path, sizeof path, "%s/%s", dir, sh.files[i]);
      rc = load_hf_file (m, path, NULL, err, err_size);
    }
    wk_hf_shards_clear (&sh);
    return rc;
  }
  snprintf (err, err_size, "%.900s: no model.safetensors, "
      "model.safetensors.index.json, pytorch_model.bin or "
      "pytorch_model.bin.index.json", dir);
  return -1;
}

/* A Hugging Face checkpoint: its directory, or one weight file in it
 * (pt: that file's zip already read, kept or freed here, or NULL). */
static int
load_hf (src_model * m, const char *input, wk_torch_pt * pt, char *err,
    size_t err_size)
{
  char dir[4096], path[4200];
  struct stat sb;
  char *json;
  size_t len;
  wk_hf_config cfg;

  if (stat (input, &sb) == 0 && S_ISDIR (sb.st_mode)) {
    snprintf (dir, sizeof dir, "%s", input);
    if (load_hf_weights (m, dir, err, err_size))
      return -1;
  } else {
    const char *slash = strrchr (input, '/');
    if (slash)
      snprintf (dir, sizeof dir, "%.*s", (int) (slash - input), input);
    else
      snprintf (dir, sizeof dir, ".");
    if (load_hf_file (m, input, pt, err, err_size))
      return -1;
  }

  snprintf (path, sizeof path, "%s/config.json", dir);
  json = read_file (path, &len, err, err_size);
  if (!json)
    return -1;
  if (wk_hf_config_parse (json, len, &cfg, err, err_size) != WK_OK) {
    free (json);
    return -1;
  }
  free (json);
  memcpy (m->hp, &cfg, sizeof m->hp);

  m->mel = malloc ((size_t) m->hp[HP_MELS] * 201 * sizeof (float));
  if (!m->mel) {
    snprintf (err, err_size, "out of memory");
    return -1;
  }
  wk_mel_filters_slaney (m->hp[HP_MELS], 400, 16000, m->mel);

  /* vocabulary beside the model (a --vocab file replaces it later) */
  snprintf (path, sizeof path, "%s/vocab.json", dir);
  if (!file_exists (path))
    snprintf (path, sizeof path, "%s/tokenizer.json", dir);
  if (file_exists (path)) {
    json = read_file (path, &len, err, err_size);
    if (!json)
      return -1;
    if (wk_hf_vocab_parse (json, len, N_ORDINARY_TOKENS, &m->hf_vocab, err,
            err_size) != WK_OK) {
      prefix_err (err, err_size, path);
      free (json);
      return -1;
    }
    free (json);
    m->n_tokens = m->hf_vocab.n;
    m->tokens = (const char **) m->hf_vocab.tokens;
    m->token_lens = m->hf_vocab.lens;
  }
  if (check_hf_special_ids (m, dir, err, err_size))
    return -1;
  /* the checkpoint's own word-timing heads (distilled and fine-tuned
   * models publish theirs there) */
  snprintf (path, sizeof path, "%s/generation_config.json", dir);
  if (file_exists (path)) {
    json = read_file (path, &len, err, err_size);
    if (!json)
      return -1;
    if (wk_hf_alignment_heads (json, len, m->heads, WK_CONVERT_MAX_HEADS,
            &m->n_heads, err, err_size) != WK_OK) {
      prefix_err (err, err_size, path);
      free (json);
      return -1;
    }
    free (json);
  }
  return 0;
}

/* OpenAI's checkpoint as openai-whisper saves it: {"dims": {...},
 * "model_state_dict": {OpenAI name: tensor}}. It holds no vocabulary
 * (openai-whisper reads its tiktoken files) and no mel filterbank (the
 * computed one is its mel_filters.npz). */
static int
load_pt (src_model * m, const char *path, wk_torch_pt * pt, bool have_vocab,
    char *err, size_t err_size)
{
  /* FORMAT.md's order, as hp_keys; openai-whisper's ModelDimensions */
  static const char *const dims[10] = { "n_vocab", "n_audio_ctx",
    "n_audio_state", "n_audio_head", "n_audio_layer", "n_text_ctx",
    "n_text_state", "n_text_head", "n_text_layer", "n_mels"
  };

  if (add_file (m, path, NULL, pt, false, err, err_size))
    return -1;
  for (int i = 0; i < 10; i++) {
    int64_t v;
    if (!wk_torch_pt_dim (pt, dims[i], &v)) {
      snprintf (err, err_size, "%s: no dims[\"%s\"]: not an openai-whisper "
          "checkpoint ({\"dims\": ..., \"model_state_dict\": ...})", path,
          dims[i]);
      return -1;
    }
    if (v < 1 || v > INT32_MAX) {
      snprintf (err, err_size, "%s: dims[\"%s\"] = %lld", path, dims[i],
          (long long) v);
      return -1;
    }
    m->hp[i] = (int32_t) v;
  }
  if (!have_vocab) {
    snprintf (err, err_size, "%s: an OpenAI .pt checkpoint holds no "
        "vocabulary: give --vocab %s (from openai-whisper's whisper/assets/)",
        path, m->hp[HP_VOCAB] >= 51865 ? "multilingual.tiktoken" :
        "gpt2.tiktoken");
    return -1;
  }
  m->mel = malloc ((size_t) m->hp[HP_MELS] * 201 * sizeof (float));
  if (!m->mel) {
    snprintf (err, err_size, "out of memory");
    return -1;
  }
  wk_mel_filters_slaney (m->hp[HP_MELS], 400, 16000, m->mel);
  return 0;
}

static int
load_vocab_override (src_model * m, const char *path, char *err,
    size_t err_size)
{
  file_head h;

  /* (a file that cannot be read: read_file's message below) */
  if (read_head (path, &h, err, err_size) && h.kind == WK_FILE_GGML) {
    wk_ggml_bin *b;
    if (wk_ggml_bin_open (path, &b, err, err_size) != WK_OK)
      return -1;
    m->vocab_bin = b;
    m->n_tokens = b->n_tokens;
    m->tokens = b->tokens;
    m->token_lens = b->token_lens;
    if (b->n_mel == m->hp[HP_MELS] && b->n_fft == 201)
      memcpy (m->mel, b->mel_filters, (size_t) b->n_mel * 201 * 4);
  } else {
    size_t len, k = 0;
    char *json = read_file (path, &len, err, err_size);
    wk_hf_vocab v;
    if (!json)
      return -1;
    while (k < len && (json[k] == ' ' || json[k] == '\t' || json[k] == '\n'
            || json[k] == '\r'))
      k++;
    if (k < len && json[k] == '{') {
      if (wk_hf_vocab_parse (json, len, N_ORDINARY_TOKENS, &v, err,
              err_size) != WK_OK) {
        free (json);
        return -1;
      }
      free (json);
    } else {
      /* a tiktoken rank file: English-only models take gpt2.tiktoken's
       * 50256 ranks and <|endoftext|> as id 50256 (as whisper.cpp's
       * files store it), multilingual ones multilingual.tiktoken's 50257
       * ranks, whose 50256 is empty (FORMAT.md) */
      bool multi = m->hp[HP_VOCAB] >= 51865;
      int32_t want = multi ? N_ORDINARY_TOKENS : N_ORDINARY_TOKENS - 1;
      wk_status st = wk_tiktoken_parse (json, len, N_ORDINARY_TOKENS, &v, err,
          err_size);
      free (json);
      if (st != WK_OK) {
        prefix_err (err, err_size, path);
        return -1;
      }
      if (v.n != want) {
        snprintf (err, err_size, "%s has %d ranks, but a%s model (n_vocab "
            "%d) has %d ordinary tokens%s: use openai/whisper's %s", path,
            v.n, multi ? " multilingual" : "n English-only",
            m->hp[HP_VOCAB], multi ? N_ORDINARY_TOKENS : want,
            multi ? "" : " besides <|endoftext|>",
            multi ? "multilingual.tiktoken" : "gpt2.tiktoken");
        wk_hf_vocab_clear (&v);
        return -1;
      }
      if (!multi) {
        char **t = realloc (v.tokens, N_ORDINARY_TOKENS * sizeof *t);
        uint32_t *l = t ? realloc (v.lens, N_ORDINARY_TOKENS * sizeof *l) :
            NULL;
        if (t)
          v.tokens = t;
        if (l)
          v.lens = l;
        if (!t || !l || !(t[want] = strdup ("<|endoftext|>"))) {
          snprintf (err, err_size, "out of memory");
          wk_hf_vocab_clear (&v);
          return -1;
        }
        l[want] = 13;
        v.n = N_ORDINARY_TOKENS;
      }
    }
    wk_hf_vocab_clear (&m->hf_vocab);
    m->hf_vocab = v;
    m->n_tokens = v.n;
    m->tokens = (const char **) v.tokens;
    m->token_lens = v.lens;
  }
  return 0;
}

/* whisper.cpp's test .bin files (and .bin files written from decoded
 * text) hold U+FFFD where a byte-level token is part of a UTF-8
 * character. Whisper's ids 0..255 are the 256 single bytes, so a 3-byte
 * U+FFFD there gives it away. */
static void
warn_lossy_vocab (const src_model * m, const char *source)
{
  int32_t n_fffd = 0, first = -1;

  for (int32_t i = 0; i < m->n_tokens; i++) {
    const char *t = m->tokens[i];
    uint32_t n = m->token_lens[i];
    bool has = false;
    for (uint32_t k = 0; t && k + 3 <= n && !has; k++)
      has = !memcmp (t + k, "\xef\xbf\xbd", 3);
    n_fffd += has;
    if (has && i < 256 && n == 3 && first < 0)
      first = i;
  }
  if (first < 0)
    return;
  fprintf (stderr, "warning: %s: the vocabulary has lost bytes: %d tokens "
      "hold U+FFFD (EF BF BD), among them token %d, a single byte in "
      "Whisper's byte-level BPE. Such tokens decode wrongly and text with "
      "non-ASCII characters (\xe2\x99\xaa, \xc3\xa9) cannot be encoded "
      "exactly. Give --vocab %s (openai/whisper's whisper/assets/) for the "
      "real token bytes.\n", source, n_fffd, first,
      m->hp[HP_VOCAB] >= 51865 ? "multilingual.tiktoken" : "gpt2.tiktoken");
}

static void
src_free (src_model * m)
{
  free (m->mel);
  free (m->t);
  wk_hf_vocab_clear (&m->hf_vocab);
  wk_ggml_bin_free (m->bin);
  wk_ggml_bin_free (m->vocab_bin);
  for (int i = 0; i < m->n_files; i++) {
    wk_safetensors_free (m->files[i].st);
    wk_torch_pt_free (m->files[i].pt);
  }
  free (m->files);
}

/* ---- checks ---------------------------------------------------------------- */

static const src_tensor *
find (const src_model * m, const char *name)
{
  for (int64_t i = 0; i < m->n; i++)
    if (!strcmp (m->t[i].name, name))
      return &m->t[i];
  return NULL;
}

/* Checks that a tensor exists with the expected (flattened) shape. */
static int
expect (const src_model * m, const char *name, int64_t ne0, int64_t ne1,
    int64_t ne2, char *err, size_t err_size)
{
  const src_tensor *t = find (m, name);
  int64_t e[3] = { ne0, ne1, ne2 }, got[3];
  int k = 0;

  if (!t) {
    snprintf (err, err_size, "tensor '%s' is missing", name);
    return -1;
  }
  /* compare ignoring leading 1s (whisper.cpp's {1, d} conv biases) */
  for (int d = 0; d < t->n_dims; d++)
    if (!(t->ne[d] == 1 && k == 0 && d + 1 < t->n_dims && ne1 == 1 && ne2 == 1)) {
      if (k == 3 && t->ne[d] != 1)
        k = 4;                  /* a dimension too many: no match */
      else if (k < 3)
        got[k++] = t->ne[d];
    }
  while (k < 3)
    got[k++] = 1;
  if (k > 3 || got[0] != e[0] || got[1] != e[1] || got[2] != e[2]) {
    snprintf (err, err_size, "tensor '%s' has shape {%lld, %lld, %lld}, "
        "expected {%lld, %lld, %lld}", name, (long long) t->ne[0],
        (long long) t->ne[1], (long long) t->ne[2], (long long) ne0,
        (long long) ne1, (long long) ne2);
    return -1;
  }
  return 0;
}

static int
check_model (const src_model * m, char *err, size_t err_size)
{
  const int32_t *h = m->hp;
  int64_t da = h[HP_ASTATE], dt = h[HP_TSTATE];
  char n[200];
  /* the engine's own rule: a knot it would not load is not written */
  const wk_hparams hp = { h[HP_VOCAB], h[HP_MELS], h[HP_ACTX], h[HP_ASTATE],
    h[HP_AHEAD], h[HP_ALAYER], h[HP_TCTX], h[HP_TSTATE], h[HP_THEAD],
    h[HP_TLAYER]
  };

  if (wk_hparams_check (&hp, err, err_size) != WK_OK)
    return -1;
  if (m->n_tokens < 1 || !m->tokens) {
    snprintf (err, err_size, "no vocabulary: give --vocab FILE (a whisper.cpp "
        ".bin, vocab.json, tokenizer.json or a .tiktoken file)");
    return -1;
  }
  if (m->n_tokens > h[HP_VOCAB]) {
    snprintf (err, err_size, "the vocabulary has %d entries, more than "
        "n_vocab %d", m->n_tokens, h[HP_VOCAB]);
    return -1;
  }
  {
    /* the engine's build_tokenizer bounds: every ordinary token, at most
     * up to the first timestamp; refused here rather than in a knot that
     * then fails to load */
    wk_special_tokens sp;

    wk_special_tokens_for (h[HP_VOCAB], &sp);
    if (m->n_tokens < sp.eot || m->n_tokens > sp.timestamp_begin) {
      snprintf (err, err_size, "the vocabulary has %d entries, but n_vocab "
          "%d needs %d ordinary tokens (ids 0 .. %d)%s", m->n_tokens,
          h[HP_VOCAB], sp.eot, sp.eot - 1, m->n_tokens < sp.eot ?
          ": a partial vocab.json? give the model's full vocabulary or "
          "--vocab FILE" : "");
      return -1;
    }
  }
#define EXPECT(name, a, b, c) \
  if (expect (m, name, a, b, c, err, err_size)) return -1
  EXPECT ("encoder.conv1.weight", 3, h[HP_MELS], da);
  EXPECT ("encoder.conv1.bias", da, 1, 1);
  EXPECT ("encoder.conv2.weight", 3, da, da);
  EXPECT ("encoder.conv2.bias", da, 1, 1);
  EXPECT ("encoder.positional_embedding", da, h[HP_ACTX], 1);
  EXPECT ("encoder.ln_post.weight", da, 1, 1);
  EXPECT ("encoder.ln_post.bias", da, 1, 1);
  EXPECT ("decoder.token_embedding.weight", dt, h[HP_VOCAB], 1);
  EXPECT ("decoder.positional_embedding", dt, h[HP_TCTX], 1);
  EXPECT ("decoder.ln.weight", dt, 1, 1);
  EXPECT ("decoder.ln.bias", dt, 1, 1);
  for (int part = 0; part < 2; part++) {
    const char *p = part ? "decoder" : "encoder";
    int64_t d = part ? dt : da;
    int layers = part ? h[HP_TLAYER] : h[HP_ALAYER];
    for (int i = 0; i < layers; i++) {
      static const char *const attn[] = { "attn", "cross_attn" };
      for (int a = 0; a < 1 + part; a++) {
        snprintf (n, sizeof n, "%s.blocks.%d.%s_ln.weight", p, i, attn[a]);
        EXPECT (n, d, 1, 1);
        snprintf (n, sizeof n, "%s.blocks.%d.%s_ln.bias", p, i, attn[a]);
        EXPECT (n, d, 1, 1);
        static const char *const w[] = { "query", "key", "value", "out" };
        for (int k = 0; k < 4; k++) {
          snprintf (n, sizeof n, "%s.blocks.%d.%s.%s.weight", p, i, attn[a],
              w[k]);
          /* cross-attention's keys and values are of the audio's width */
          EXPECT (n, a == 1 && (k == 1 || k == 2) ? da : d, d, 1);
          if (k != 1) {
            snprintf (n, sizeof n, "%s.blocks.%d.%s.%s.bias", p, i, attn[a],
                w[k]);
            EXPECT (n, d, 1, 1);
          }
        }
      }
      snprintf (n, sizeof n, "%s.blocks.%d.mlp_ln.weight", p, i);
      EXPECT (n, d, 1, 1);
      snprintf (n, sizeof n, "%s.blocks.%d.mlp_ln.bias", p, i);
      EXPECT (n, d, 1, 1);
      snprintf (n, sizeof n, "%s.blocks.%d.mlp.0.weight", p, i);
      EXPECT (n, d, 4 * d, 1);
      snprintf (n, sizeof n, "%s.blocks.%d.mlp.0.bias", p, i);
      EXPECT (n, 4 * d, 1, 1);
      snprintf (n, sizeof n, "%s.blocks.%d.mlp.2.weight", p, i);
      EXPECT (n, 4 * d, d, 1);
      snprintf (n, sizeof n, "%s.blocks.%d.mlp.2.bias", p, i);
      EXPECT (n, d, 1, 1);
    }
  }
#undef EXPECT
  return 0;
}

/* ---- conversion ------------------------------------------------------------ */

typedef struct
{
  char name[160];
  int type;
} keep_rule;

typedef enum
{ K_1D, K_CONV, K_POS, K_MATRIX, K_OTHER } tkind;

static tkind
kind_of (const src_tensor * t, int *flat_dims)
{
  size_t l = strlen (t->name);
  int nd = t->n_dims;

  /* whisper.cpp's {1, d} conv biases are 1-D in a knot */
  while (nd > 1 && t->ne[0] == 1 && strstr (t->name, ".bias"))
    nd = 1;
  *flat_dims = nd;
  if (strstr (t->name, "positional_embedding"))
    return K_POS;
  if (!strncmp (t->name, "encoder.conv", 12) && l > 7
      && !strcmp (t->name + l - 7, ".weight"))
    return K_CONV;
  if (nd == 1)
    return K_1D;
  if (nd == 2)
    return K_MATRIX;
  return K_OTHER;
}

static bool
is_knot_type (int type)
{
  return wk_type_is_known (type);
}

/* A conv weight {3, c_in, c_out} unfolds to rows of 3 c_in (the kernel
 * taps are contiguous); 0 for anything else. */
static int64_t
conv_row (const src_tensor * t)
{
  if (t->n_dims != 3 || t->ne[0] != 3 || t->ne[3] != 1)
    return 0;
  return 3 * t->ne[1];
}

static int
choose_type (const src_tensor * t, tkind k, int target, const keep_rule * keep,
    int n_keep)
{
  for (int i = 0; i < n_keep; i++)
    if (!strcmp (keep[i].name, t->name))
      return keep[i].type;
  if (k == K_1D)
    return WK_TYPE_F32;
  if (target < 0) {
    /* keep the source type where a knot can hold it */
    if (is_knot_type (t->type)) {
      if ((k == K_CONV || k == K_POS) && t->type != WK_TYPE_F32
          && t->type != WK_TYPE_F16)
        return WK_TYPE_F16;
      return t->type;
    }
    if (t->type == SRC_BF16)
      return WK_TYPE_F32;
    return wk_type_row_bytes (WK_TYPE_Q8_0, t->ne[0]) ? WK_TYPE_Q8_0 :
        WK_TYPE_F32;
  }
  /* positions (added once per row) keep q8_0 precision even in a q4_0
   * model: half the bytes of f16, without q4_0's coarse steps */
  if (k == K_POS && (target == WK_TYPE_Q8_0 || target == WK_TYPE_Q4_0)
      && wk_type_row_bytes (WK_TYPE_Q8_0, t->ne[0]) != 0)
    return WK_TYPE_Q8_0;
  /* conv weights whose unfolded rows are whole blocks (conv2: 3 d) go
   * to q8_0 too, stored flattened; 8 bits even in a q4_0 model (conv2
   * feeds every encoder position) */
  if (k == K_CONV && (target == WK_TYPE_Q8_0 || target == WK_TYPE_Q4_0)
      && conv_row (t) > 0
      && wk_type_row_bytes (WK_TYPE_Q8_0, conv_row (t)) != 0)
    return WK_TYPE_Q8_0;
  if (k == K_CONV || k == K_POS || k == K_OTHER)
    return target == WK_TYPE_F32 ? WK_TYPE_F32 : WK_TYPE_F16;
  if (wk_type_row_bytes ((wk_type) target, t->ne[0]) == 0)
    return target == WK_TYPE_F32 ? WK_TYPE_F32 : WK_TYPE_F16;
  return target;
}

typedef struct
{
  double err2, ref2, dot, out2;
} qstats;

/* --q4-scales fit: q4_0 blocks with least-squares scales instead of
 * ggml's (whose bits whisper.cpp's quantizer also writes) */
static bool q4_fit;

/* Converts t into a new buffer of type dst; accumulates error statistics
 * of the stored values against the source values. */
static void *
convert_tensor (const src_tensor * t, int dst, size_t *nbytes, qstats * qs)
{
  int64_t ne0 = t->ne[0], rows = 1;
  size_t srb = src_row_bytes (t->type, ne0), drb =
      wk_type_row_bytes ((wk_type) dst, ne0);
  float *x, *y;
  uint8_t *out;

  for (int d = 1; d < t->n_dims; d++)
    rows *= t->ne[d];
  if (drb == 0 || srb == 0)
    return NULL;
  out = malloc (drb * (size_t) rows);
  x = malloc ((size_t) ne0 * sizeof (float));
  y = malloc ((size_t) ne0 * sizeof (float));
  if (!out || !x || !y) {
    free (out);
    free (x);
    free (y);
    return NULL;
  }
  memset (qs, 0, sizeof *qs);
  for (int64_t r = 0; r < rows; r++) {
    uint8_t *o = out + (size_t) r * drb;
    src_row_to_f32 (t->type, (const uint8_t *) t->data + (size_t) r * srb, x,
        ne0);
    switch (dst) {
      case WK_TYPE_F32:
        memcpy (o, x, drb);
        break;
      case WK_TYPE_F16:
        for (int64_t i = 0; i < ne0; i++) {
          uint16_t h = wk_fp32_to_fp16 (x[i]);
          memcpy (o + 2 * i, &h, 2);
        }
        break;
      case WK_TYPE_Q8_0:
        wk_quantize_row_q8_0 (x, (wk_block_q8_0 *) o, ne0);
        break;
      case WK_TYPE_Q4_0:
        if (q4_fit)
          wk_quantize_row_q4_0_fit (x, (wk_block_q4_0 *) o, ne0);
        else
          wk_quantize_row_q4_0 (x, (wk_block_q4_0 *) o, ne0);
        break;
    }
    wk_row_to_f32 ((wk_type) dst, o, y, ne0);
    for (int64_t i = 0; i < ne0; i++) {
      double a = x[i], b = y[i];
      qs->err2 += (a - b) * (a - b);
      qs->ref2 += a * a;
      qs->out2 += b * b;
      qs->dot += a * b;
    }
  }
  free (x);
  free (y);
  *nbytes = drb * (size_t) rows;
  return out;
}

/* ---- alignment heads ---------------------------------------------------- */

/* The decoder heads whose cross-attention follows the audio, per OpenAI
 * model: data published by OpenAI (openai/whisper, whisper/__init__.py,
 * _ALIGNMENT_HEADS), here as whisper.cpp lists them (src/whisper.cpp,
 * g_aheads_*), (layer, head) pairs. Recognised by the vocabulary, mel
 * bands and decoder shape; large-v1 and large-v2 share them all, so a
 * model of that shape gets large-v2's set unless --alignment-heads
 * large-v1 says otherwise. */
typedef struct
{
  const char *name;
  int n_vocab, n_mels, n_text_state, n_text_head, n_text_layer;
  int n;                        /* pairs */
  const uint8_t (*heads)[2];
} ahead_set;

static const uint8_t ah_tiny_en[][2] = { {1, 0}, {2, 0}, {2, 5}, {3, 0},
{3, 1}, {3, 2}, {3, 3}, {3, 4}
};
static const uint8_t ah_tiny[][2] = { {2, 2}, {3, 0}, {3, 2}, {3, 3}, {3, 4},
{3, 5}
};
static const uint8_t ah_base_en[][2] = { {3, 3}, {4, 7}, {5, 1}, {5, 5},
{5, 7}
};
static const uint8_t ah_base[][2] = { {3, 1}, {4, 2}, {4, 3}, {4, 7}, {5, 1},
{5, 2}, {5, 4}, {5, 6}
};
static const uint8_t ah_small_en[][2] = { {6, 6}, {7, 0}, {7, 3}, {7, 8},
{8, 2}, {8, 5}, {8, 7}, {9, 0}, {9, 4}, {9, 8}, {9, 10}, {10, 0}, {10, 1},
{10, 2}, {10, 3}, {10, 6}, {10, 11}, {11, 2}, {11, 4}
};
static const uint8_t ah_small[][2] = { {5, 3}, {5, 9}, {8, 0}, {8, 4},
{8, 7}, {8, 8}, {9, 0}, {9, 7}, {9, 9}, {10, 5}
};
static const uint8_t ah_medium_en[][2] = { {11, 4}, {14, 1}, {14, 12},
{14, 14}, {15, 4}, {16, 0}, {16, 4}, {16, 9}, {17, 12}, {17, 14}, {18, 7},
{18, 10}, {18, 15}, {20, 0}, {20, 3}, {20, 9}, {20, 14}, {21, 12}
};
static const uint8_t ah_medium[][2] = { {13, 15}, {15, 4}, {15, 15},
{16, 1}, {20, 0}, {23, 4}
};
static const uint8_t ah_large_v1[][2] = { {9, 19}, {11, 2}, {11, 4},
{11, 17}, {22, 7}, {22, 11}, {22, 17}, {23, 2}, {23, 15}
};
static const uint8_t ah_large_v2[][2] = { {10, 12}, {13, 17}, {16, 11},
{16, 12}, {16, 13}, {17, 15}, {17, 16}, {18, 4}, {18, 11}, {18, 19},
{19, 11}, {21, 2}, {21, 3}, {22, 3}, {22, 9}, {22, 12}, {23, 5}, {23, 7},
{23, 13}, {25, 5}, {26, 1}, {26, 12}, {27, 15}
};
static const uint8_t ah_large_v3[][2] = { {7, 0}, {10, 17}, {12, 18},
{13, 12}, {16, 1}, {17, 14}, {19, 11}, {21, 4}, {24, 1}, {25, 6}
};
static const uint8_t ah_turbo[][2] = { {2, 4}, {2, 11}, {3, 3}, {3, 6},
{3, 11}, {3, 14}
};

#define AH(name, v, mels, d, h, l, t) \
  { name, v, mels, d, h, l, (int) (sizeof t / sizeof t[0]), t }
/* the first set of a shape is the one recognised */
static const ahead_set ahead_sets[] = {
  AH ("tiny.en", 51864, 80, 384, 6, 4, ah_tiny_en),
  AH ("tiny", 51865, 80, 384, 6, 4, ah_tiny),
  AH ("base.en", 51864, 80, 512, 8, 6, ah_base_en),
  AH ("base", 51865, 80, 512, 8, 6, ah_base),
  AH ("small.en", 51864, 80, 768, 12, 12, ah_small_en),
  AH ("small", 51865, 80, 768, 12, 12, ah_small),
  AH ("medium.en", 51864, 80, 1024, 16, 24, ah_medium_en),
  AH ("medium", 51865, 80, 1024, 16, 24, ah_medium),
  AH ("large-v2", 51865, 80, 1280, 20, 32, ah_large_v2),
  AH ("large-v1", 51865, 80, 1280, 20, 32, ah_large_v1),
  AH ("large-v3", 51866, 128, 1280, 20, 32, ah_large_v3),
  AH ("large-v3-turbo", 51866, 128, 1280, 20, 4, ah_turbo),
};

#undef AH

static bool
ahead_fits (const ahead_set * a, const int32_t * hp)
{
  return a->n_vocab == hp[HP_VOCAB] && a->n_mels == hp[HP_MELS]
      && a->n_text_state == hp[HP_TSTATE] && a->n_text_head == hp[HP_THEAD]
      && a->n_text_layer == hp[HP_TLAYER];
}

/* The set OpenAI publishes for a model of this shape, or NULL. */
static const ahead_set *
ahead_set_for (const int32_t * hp)
{
  for (size_t i = 0; i < sizeof ahead_sets / sizeof ahead_sets[0]; i++)
    if (ahead_fits (&ahead_sets[i], hp))
      return &ahead_sets[i];
  return NULL;
}

/* --alignment-heads SPEC for the model m into v[0..2 *n - 1] (room for
 * 2 * WK_CONVERT_MAX_HEADS): "auto" (the checkpoint's own set from its
 * generation_config.json when every head is inside the decoder, else the
 * published set of the OpenAI model it is shaped as, if any: *n = -1
 * when none, no key written), "none" (an empty set: byte-share
 * word times), a set's name (which must fit the model), or a list
 * "L:H,L:H,..." of pairs inside the decoder, none repeated. Non-zero
 * with a message in err when SPEC is wrong for this model. */
static int
parse_heads (const char *spec, const src_model * m, uint32_t * v, int *n,
    char *err, size_t err_size)
{
  const int32_t *hp = m->hp;
  const char *p = spec;

  *n = 0;
  if (!strcmp (spec, "auto") && m->n_heads > 0) {
    int k, j;
    for (k = 0; k < m->n_heads; k++)
      if (m->heads[2 * k] >= (uint32_t) hp[HP_TLAYER]
          || m->heads[2 * k + 1] >= (uint32_t) hp[HP_THEAD])
        break;
    if (k == m->n_heads) {
      /* each pair once (the engine refuses a knot that repeats one) */
      for (*n = 0, k = 0; k < m->n_heads; k++) {
        for (j = 0; j < *n && (v[2 * j] != m->heads[2 * k]
                || v[2 * j + 1] != m->heads[2 * k + 1]); j++);
        if (j == *n) {
          v[2 * j] = m->heads[2 * k];
          v[2 * j + 1] = m->heads[2 * k + 1];
          (*n)++;
        }
      }
      return 0;
    }
    fprintf (stderr, "note: generation_config.json's alignment_heads name "
        "%u:%u, outside the decoder's %d layers x %d heads (a set of another "
        "model?): not used\n", m->heads[2 * k], m->heads[2 * k + 1],
        (int) hp[HP_TLAYER], (int) hp[HP_THEAD]);
  }
  if (!strcmp (spec, "auto")) {
    const ahead_set *a = ahead_set_for (hp);
    if (!a) {
      *n = -1;
      return 0;
    }
    for (int i = 0; i < a->n; i++) {
      v[2 * i] = a->heads[i][0];
      v[2 * i + 1] = a->heads[i][1];
    }
    *n = a->n;
    return 0;
  }
  if (!strcmp (spec, "none"))
    return 0;
  for (size_t i = 0; i < sizeof ahead_sets / sizeof ahead_sets[0]; i++) {
    const ahead_set *a = &ahead_sets[i];
    if (strcmp (spec, a->name))
      continue;
    if (!ahead_fits (a, hp)) {
      snprintf (err, err_size, "--alignment-heads %s: this model is not "
          "shaped as %s (vocabulary, mel bands, decoder)", spec, a->name);
      return 1;
    }
    for (int k = 0; k < a->n; k++) {
      v[2 * k] = a->heads[k][0];
      v[2 * k + 1] = a->heads[k][1];
    }
    *n = a->n;
    return 0;
  }
  while (*p) {
    char *end;
    long l, h;
    l = strtol (p, &end, 10);
    if (end == p || *end != ':' || l < 0)
      goto bad;
    p = end + 1;
    h = strtol (p, &end, 10);
    if (end == p || (*end && *end != ',') || h < 0 || (*end == ',' && !end[1]))
      goto bad;
    p = *end ? end + 1 : end;
    if (l >= hp[HP_TLAYER] || h >= hp[HP_THEAD]) {
      snprintf (err, err_size, "--alignment-heads: %ld:%ld is outside the "
          "decoder's %d layers x %d heads", l, h, (int) hp[HP_TLAYER],
          (int) hp[HP_THEAD]);
      return 1;
    }
    for (int k = 0; k < *n; k++)
      if (v[2 * k] == (uint32_t) l && v[2 * k + 1] == (uint32_t) h) {
        snprintf (err, err_size, "--alignment-heads: %ld:%ld is named twice",
            l, h);
        return 1;
      }
    if (*n == WK_CONVERT_MAX_HEADS)
      goto bad;
    v[2 * *n] = (uint32_t) l;
    v[2 * *n + 1] = (uint32_t) h;
    (*n)++;
  }
  if (*n > 0)
    return 0;
bad:
  snprintf (err, err_size, "--alignment-heads wants auto, none, an OpenAI "
      "model's name (tiny.en .. large-v3-turbo) or LAYER:HEAD,..., got "
      "'%s'", spec);
  return 1;
}

static void
usage (FILE * f)
{
  fprintf (f,
      "usage: whisperknot-convert [--type f32|f16|q8_0|q4_0] "
      "[--keep NAME=TYPE ...]\n"
      "                           [--vocab FILE] [--pad-window MODE] "
      "[--max-text-ctx N]\n"
      "                           [--timestamp-rule sum|max] "
      "[--live-audio-ctx full|short]\n"
      "                           [--alignment-heads SPEC] "
      "[--q4-scales ggml|fit] [--quiet]\n"
      "                           INPUT OUTPUT.knot\n\n"
      "INPUT: a whisper.cpp ggml .bin, or a Hugging Face model directory "
      "(or its\n"
      "model.safetensors; its weights may be sharded, with an .index.json, "
      "or in\n"
      "pytorch_model.bin) with config.json and vocab.json or "
      "tokenizer.json, as\n"
      "transformers saves it (the special-token ids of added_tokens.json "
      "and\n"
      "generation_config.json, if present, must be Whisper's); or OpenAI's "
      "checkpoint as\n"
      "openai-whisper downloads it (~/.cache/whisper/base.en.pt, with --vocab "
      "gpt2.tiktoken\n"
      "or multilingual.tiktoken from its whisper/assets/); or Silero "
      "VAD's ggml\n"
      "file (ggml-silero-v6.2.0.bin), which becomes the VAD knot the engine "
      "reads\n"
      "(no options apply to it).\n"
      "--type T       2-D weight matrices become T; 1-D tensors f32; conv "
      "weights and\n"
      "               positional embeddings q8_0 (T when T is f32 or f16; "
      "conv1 f16).\n"
      "               Default: keep every tensor's source type bit for "
      "bit.\n"
      "--keep N=T     store tensor N (OpenAI name) as T, e.g.\n"
      "               --keep decoder.token_embedding.weight=q8_0\n"
      "--q4-scales S  how q4_0 blocks choose their scale: ggml (the largest "
      "magnitude\n"
      "               on level -8, as whisper.cpp's quantizer; the default) "
      "or fit (the\n"
      "               scale of least squared error; same format, slower)\n"
      "--vocab FILE   take the vocabulary from FILE: a .bin (whose mel "
      "filters are\n"
      "               also used when n_mels matches), vocab.json, "
      "tokenizer.json, or\n"
      "               openai/whisper's gpt2.tiktoken (English-only) / "
      "multilingual.tiktoken\n"
      "               (the real token bytes, which some .bin files have "
      "lost)\n"
      "--pad-window M how the engine fills a window shorter than 30 s: "
      "zeros (0.0 in\n"
      "               the normalised log-mel, as openai/whisper's transcribe; "
      "the default)\n"
      "               or silence (the frames of zero samples, as whisper.cpp "
      "and Hugging\n"
      "               Face pad the audio; what whisperknot's own model was "
      "trained with)\n"
      "--max-text-ctx N  the most earlier-text prompt tokens the model was "
      "trained with\n"
      "               (0: it never saw <|startofprev|>); the engine's prompt "
      "is never longer\n"
      "--timestamp-rule R  sum (openai's rule, the default) or max (a "
      "timestamp only\n"
      "               when it is itself the likeliest token)\n"
      "--live-audio-ctx C  full (the default: the model saw 30 s windows "
      "only, as\n"
      "               OpenAI's did) or short (trained with the encoder on "
      "short windows'\n"
      "               own positions, as whisperknot's own model): the live "
      "policy's context\n"
      "--alignment-heads SPEC  the decoder heads word times are taken "
      "from\n"
      "               (whisperknot.alignment_heads): auto (the default: a "
      "Hugging Face\n"
      "               checkpoint's own set, generation_config.json's "
      "alignment_heads,\n"
      "               else OpenAI's published set when the model is shaped "
      "as one of its\n"
      "               models, else no key), none (no heads: word times shared out "
      "by bytes),\n"
      "               a model's name (tiny.en, tiny, base.en, base, "
      "small.en, small,\n"
      "               medium.en, medium, large-v1, large-v2, large-v3, "
      "large-v3-turbo)\n" "               or LAYER:HEAD,LAYER:HEAD,...\n");
}

/* The value of option opt when it is one of its two choices; else says
 * so and returns NULL. */
static const char *
choice_arg (const char *opt, const char *value, const char *a, const char *b)
{
  if (!strcmp (value, a) || !strcmp (value, b))
    return value;
  fprintf (stderr, "whisperknot-convert: %s is %s or %s, got '%s'\n", opt, a,
      b, value);
  return NULL;
}

int
main (int argc, char **argv)
{
  const char *input = NULL, *output = NULL, *vocab_path = NULL;
  const char *pad_window = NULL, *ts_rule = NULL, *live_ctx = NULL;
  const char *heads_spec = "auto";
  static uint32_t heads[2 * WK_CONVERT_MAX_HEADS];
  int n_heads = -1;
  int max_text_ctx = -1;
  int target = -1, n_keep = 0, rc = 1;
  keep_rule *keep = calloc ((size_t) argc, sizeof *keep);
  bool quiet = false;
  src_model m;
  wk_knot_writer *w = NULL;
  char err[1024] = "";
  double t0 = now_s ();
  int n_quant = 0, n_copied = 0, n_converted = 0;
  double tot_err2 = 0, tot_ref2 = 0;
  struct stat sb;
  file_head head;

  memset (&m, 0, sizeof m);
  m.n_heads = -1;
  if (!keep)
    return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp (a, "--help") || !strcmp (a, "-h")) {
      usage (stdout);
      free (keep);
      return 0;
    } else if (!strcmp (a, "--type") && i + 1 < argc) {
      target = wk_type_from_name (argv[++i]);
      if (target < 0) {
        fprintf (stderr, "whisperknot-convert: unknown --type '%s' (f32, "
            "f16, q8_0, q4_0)\n", argv[i]);
        free (keep);
        return 2;
      }
    } else if (!strcmp (a, "--keep") && i + 1 < argc) {
      const char *eq = strrchr (argv[++i], '=');
      int ty = eq ? wk_type_from_name (eq + 1) : -1;
      if (!eq || ty < 0 || eq == argv[i]
          || (size_t) (eq - argv[i]) >= sizeof keep[0].name) {
        fprintf (stderr, "whisperknot-convert: --keep wants NAME=TYPE, got "
            "'%s'\n", argv[i]);
        free (keep);
        return 2;
      }
      memcpy (keep[n_keep].name, argv[i], (size_t) (eq - argv[i]));
      keep[n_keep++].type = ty;
    } else if (!strcmp (a, "--vocab") && i + 1 < argc) {
      vocab_path = argv[++i];
    } else if (!strcmp (a, "--max-text-ctx") && i + 1 < argc) {
      char *end;
      long v = strtol (argv[++i], &end, 10);
      if (*end || end == argv[i] || v < 0 || v > 65535) {
        fprintf (stderr, "whisperknot-convert: --max-text-ctx wants a token "
            "count, got '%s'\n", argv[i]);
        free (keep);
        return 2;
      }
      max_text_ctx = (int) v;
    } else if (!strcmp (a, "--pad-window") && i + 1 < argc) {
      if (!(pad_window = choice_arg (a, argv[++i], "zeros", "silence"))) {
        free (keep);
        return 2;
      }
    } else if (!strcmp (a, "--timestamp-rule") && i + 1 < argc) {
      if (!(ts_rule = choice_arg (a, argv[++i], "sum", "max"))) {
        free (keep);
        return 2;
      }
    } else if (!strcmp (a, "--live-audio-ctx") && i + 1 < argc) {
      if (!(live_ctx = choice_arg (a, argv[++i], "full", "short"))) {
        free (keep);
        return 2;
      }
    } else if (!strcmp (a, "--q4-scales") && i + 1 < argc) {
      const char *c = choice_arg (a, argv[++i], "ggml", "fit");
      if (!c) {
        free (keep);
        return 2;
      }
      q4_fit = !strcmp (c, "fit");
    } else if (!strcmp (a, "--alignment-heads") && i + 1 < argc) {
      heads_spec = argv[++i];
    } else if (!strcmp (a, "--quiet")) {
      quiet = true;
    } else if (a[0] == '-' && a[1]) {
      fprintf (stderr, "whisperknot-convert: unknown option '%s'\n", a);
      usage (stderr);
      free (keep);
      return 2;
    } else if (!input) {
      input = a;
    } else if (!output) {
      output = a;
    } else {
      usage (stderr);
      free (keep);
      return 2;
    }
  }
  if (!input || !output) {
    usage (stderr);
    free (keep);
    return 2;
  }

  /* read the source */
  if (stat (input, &sb) != 0) {
    snprintf (err, sizeof err, "%s: %s", input, strerror (errno));
    goto fail;
  }
  head.kind = WK_FILE_OTHER;
  if (!S_ISDIR (sb.st_mode) && !read_head (input, &head, err, sizeof err))
    goto fail;
  if (head.kind == WK_FILE_GGML && wk_ggml_vad_probe (head.b, head.n)) {
    if (target >= 0 || n_keep || vocab_path || pad_window || ts_rule
        || live_ctx || max_text_ctx >= 0 || strcmp (heads_spec, "auto")) {
      fprintf (stderr, "whisperknot-convert: %s is a Silero VAD model: the "
          "options for Whisper models do not apply (its tensors are "
          "stored f32)\n", input);
      free (keep);
      return 2;
    }
    free (keep);
    return convert_vad (input, output, quiet);
  }
  if (head.kind == WK_FILE_GGML) {
    if (load_bin (&m, input, err, sizeof err))
      goto fail;
  } else if (head.kind == WK_FILE_TORCH_ZIP) {
    /* OpenAI's .pt, or a transformers pytorch_model.bin (no "dims", its
     * config.json beside it) */
    wk_torch_pt *pt;
    if (wk_torch_pt_open (input, &pt, err, sizeof err) != WK_OK)
      goto fail;
    if (pt->n_dims == 0 && config_beside (input) ?
        load_hf (&m, input, pt, err, sizeof err) :
        load_pt (&m, input, pt, vocab_path != NULL, err, sizeof err))
      goto fail;
  } else if (!S_ISDIR (sb.st_mode) && !is_safetensors (head.kind)) {
    explain_head (input, &head, err, sizeof err);
    goto fail;
  } else if (load_hf (&m, input, NULL, err, sizeof err))
    goto fail;
  if (!S_ISDIR (sb.st_mode) && m.src_bytes == 0)
    m.src_bytes = (uint64_t) sb.st_size;
  if (vocab_path && load_vocab_override (&m, vocab_path, err, sizeof err))
    goto fail;
  if (check_model (&m, err, sizeof err))
    goto fail;
  warn_lossy_vocab (&m, vocab_path ? vocab_path : input);
  if (parse_heads (heads_spec, &m, heads, &n_heads, err, sizeof err)) {
    rc = 2;
    goto fail;
  }
  for (int i = 0; i < n_keep; i++) {
    const src_tensor *t = find (&m, keep[i].name);
    int flat;

    if (!t) {
      snprintf (err, sizeof err, "--keep: no tensor named '%s'", keep[i].name);
      goto fail;
    }
    /* the engine reads vectors (norms, biases) as f32 only */
    if (kind_of (t, &flat) == K_1D && keep[i].type != WK_TYPE_F32) {
      snprintf (err, sizeof err, "--keep: '%s' is a vector, which a knot "
          "stores as f32 only", keep[i].name);
      goto fail;
    }
  }
  if (max_text_ctx > m.hp[HP_TCTX] / 2) {
    snprintf (err, sizeof err, "--max-text-ctx %d: at most half the text "
        "context (%lld), which the prompt shares with the text",
        max_text_ctx, (long long) m.hp[HP_TCTX] / 2);
    goto fail;
  }

  /* metadata */
  w = wk_knot_writer_new (64);
  if (!w) {
    snprintf (err, sizeof err, "out of memory");
    goto fail;
  }
  {
    /* the last path component, without trailing slashes or ".bin" */
    size_t end = strlen (input), bl;
    const char *base;
    while (end > 1 && input[end - 1] == '/')
      end--;
    base = input + end;
    while (base > input && base[-1] != '/')
      base--;
    bl = (size_t) (input + end - base);
    if (bl > 4 && !strncmp (base + bl - 4, ".bin", 4))
      bl -= 4;
    else if (bl > 3 && !strncmp (base + bl - 3, ".pt", 3))
      bl -= 3;
    wk_knot_writer_set_str (w, "general.architecture", "whisper", 7);
    wk_knot_writer_set_str (w, "general.name", base, bl);
    if (pad_window)
      wk_knot_writer_set_str (w, "whisperknot.pad_window", pad_window,
          strlen (pad_window));
    if (max_text_ctx >= 0)
      wk_knot_writer_set_u32 (w, "whisperknot.max_text_ctx",
          (uint32_t) max_text_ctx);
    if (ts_rule)
      wk_knot_writer_set_str (w, "whisperknot.timestamp_rule", ts_rule,
          strlen (ts_rule));
    if (live_ctx)
      wk_knot_writer_set_str (w, "whisperknot.live_audio_ctx", live_ctx,
          strlen (live_ctx));
    if (n_heads >= 0)
      wk_knot_writer_set_u32_array (w, "whisperknot.alignment_heads", heads,
          2 * (size_t) n_heads);
  }

  /* tensors: decide types, convert, collect statistics */
  {
    int n_by_type[64] = { 0 };
    bool any_q = false;

    for (int64_t i = 0; i < m.n; i++) {
      const src_tensor *t = &m.t[i];
      int flat;
      tkind k = kind_of (t, &flat);
      int dst = choose_type (t, k, target, keep, n_keep);
      int64_t ne[WK_MAX_DIMS];
      const void *data;
      size_t nbytes;
      bool owned;

      if (k == K_1D)
        ne[0] = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
      else
        memcpy (ne, t->ne, sizeof ne);
      if (flat == 1 && t->n_dims > 1) {
        int64_t prod = 1;
        for (int d = 0; d < t->n_dims; d++)
          prod *= t->ne[d];
        ne[0] = prod;
      }
      /* a conv weight in a block type is stored as the matrix
       * {3 c_in, c_out} (a knot's block rows lie along ne[0]) */
      if (k == K_CONV && wk_type_block_elems ((wk_type) dst) > 1
          && conv_row (t) > 0) {
        ne[0] = conv_row (t);
        ne[1] = t->ne[2];
        ne[2] = ne[3] = 1;
        flat = 2;
      }
      if (wk_type_row_bytes ((wk_type) dst, ne[0]) == 0) {
        snprintf (err, sizeof err, "tensor '%s': rows of %lld elements "
            "cannot be stored as %s", t->name, (long long) ne[0],
            wk_type_name (dst));
        goto fail;
      }
      if (dst == t->type && !(k == K_CONV && flat == 2)) {
        data = t->data;
        nbytes = t->nbytes;
        owned = false;
        n_copied++;
      } else {
        qstats qs;
        src_tensor tt = *t;
        tt.n_dims = flat;
        if (flat < t->n_dims) {
          /* flattened: the written shape, unused dimensions 1 */
          for (int d = 0; d < WK_MAX_DIMS; d++)
            tt.ne[d] = d < flat ? ne[d] : 1;
        }
        data = convert_tensor (&tt, dst, &nbytes, &qs);
        if (!data) {
          snprintf (err, sizeof err, "tensor '%s': out of memory", t->name);
          goto fail;
        }
        owned = true;
        n_converted++;
        if (dst == WK_TYPE_Q8_0 || dst == WK_TYPE_Q4_0) {
          double rel = qs.ref2 > 0 ? sqrt (qs.err2 / qs.ref2) : 0.0;
          double cosv = qs.ref2 > 0 && qs.out2 > 0 ?
              qs.dot / sqrt (qs.ref2 * qs.out2) : 1.0;
          n_quant++;
          tot_err2 += qs.err2;
          tot_ref2 += qs.ref2;
          if (!quiet)
            printf ("  %-44s %-5s -> %-5s rel.err %.3e  cos %.6f\n",
                t->name, src_type_name (t->type), wk_type_name (dst), rel,
                cosv);
        }
      }
      if (wk_knot_writer_add_tensor (w, t->name, (wk_type) dst, flat, ne,
              data, nbytes, owned, err, sizeof err) != WK_OK)
        goto fail;
      if (dst == WK_TYPE_Q8_0 || dst == WK_TYPE_Q4_0)
        any_q = true;
      if (k == K_MATRIX)
        n_by_type[dst] += 1;
    }
    {
      /* general.file_type: the type most 2-D matrices have */
      int best = WK_TYPE_F32;
      static const int ftype_of[9] = { 0, 1, 2, 0, 0, 0, 0, 0, 7 };
      for (int ty = 0; ty < 9; ty++)
        if (n_by_type[ty] > n_by_type[best])
          best = ty;
      wk_knot_writer_set_u32 (w, "general.file_type",
          (uint32_t) ftype_of[best]);
    }
    if (any_q)
      wk_knot_writer_set_u32 (w, "general.quantization_version", 2);
  }
  for (int i = 0; i < 10; i++)
    wk_knot_writer_set_u32 (w, hp_keys[i], (uint32_t) m.hp[i]);
  wk_knot_writer_set_f32_array (w, "whisper.mel_filters", m.mel,
      (size_t) m.hp[HP_MELS] * 201);
  wk_knot_writer_set_str (w, "tokenizer.ggml.model", "gpt2", 4);
  {
    /* the writer takes size_t lengths */
    size_t *lens = malloc ((size_t) m.n_tokens * sizeof (size_t));
    wk_status st;
    if (!lens) {
      snprintf (err, sizeof err, "out of memory");
      goto fail;
    }
    for (int32_t i = 0; i < m.n_tokens; i++)
      lens[i] = m.token_lens[i];
    st = wk_knot_writer_set_str_array (w, "tokenizer.ggml.tokens",
        m.tokens, lens, (size_t) m.n_tokens);
    free (lens);
    if (st != WK_OK) {
      snprintf (err, sizeof err, "out of memory");
      goto fail;
    }
  }

  {
    char inner[1024];
    uint64_t out_bytes = wk_knot_writer_file_size (w);
    double secs;

    if (wk_knot_writer_write_file (w, output, inner, sizeof inner) != WK_OK) {
      snprintf (err, sizeof err, "%s", inner);
      goto fail;
    }
    secs = now_s () - t0;
    printf ("%s: %lld tensors (%d copied bit for bit, %d converted, %d "
        "quantized)\n", output, (long long) m.n, n_copied, n_converted,
        n_quant);
    if (n_quant)
      printf ("quantized weights: relative Frobenius error %.3e overall\n",
          tot_ref2 > 0 ? sqrt (tot_err2 / tot_ref2) : 0.0);
    printf ("size: %.2f MB -> %.2f MB (compression ratio %.2fx), %.2f s\n",
        (double) m.src_bytes / 1e6, (double) out_bytes / 1e6,
        out_bytes ? (double) m.src_bytes / (double) out_bytes : 0.0, secs);
  }
  rc = 0;
  wk_knot_writer_free (w);
  src_free (&m);
  free (keep);
  return rc;

fail:
  fprintf (stderr, "whisperknot-convert: %s\n", err);
  wk_knot_writer_free (w);
  src_free (&m);
  free (keep);
  return rc;
}
