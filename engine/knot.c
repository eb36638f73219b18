/* Knot reader: GGUF v3 files mapped read-only and validated completely
 * before a handle is returned (see knots/FORMAT.md for the rules).
 *
 * The parser walks the file with a bounds-checked cursor; every count is
 * bounded by the bytes left before anything is allocated for it, every
 * size computation is overflow-checked, and no pointer into the file is
 * formed before its range has been checked. */
#include "knot.h"
#include "wk-err.h"
#include "mapfile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* GGUF value types */
enum
{
  GGUF_U8 = 0, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32,
  GGUF_BOOL, GGUF_STRING, GGUF_ARRAY, GGUF_U64, GGUF_I64, GGUF_F64,
  GGUF_N_TYPES
};

#define KNOT_MAX_KEY 65535      /* GGUF's limit on key length */
#define KNOT_MAX_NAME 256       /* tensor names, bytes */
#define KNOT_MAX_ALIGN (1u << 30)
#define KNOT_DEFAULT_ALIGN 32   /* GGUF's default when the key is absent */

/* smallest encodings, used to bound counts by the bytes left */
#define MIN_KV_BYTES (8 + 1 + 4 + 1)
#define MIN_TENSOR_INFO_BYTES (8 + 1 + 4 + 8 + 4 + 8)

typedef struct
{
  const char *key;              /* into the file, not NUL-terminated */
  size_t key_len;
  uint32_t type;
  uint32_t arr_type;            /* arrays only */
  uint64_t n;                   /* arrays: element count */
  const uint8_t *val;           /* scalar bytes / string length / first element */
  size_t *str_offs;             /* string arrays: offset of each element from val */
} knot_kv;

struct wk_knot
{
  const uint8_t *data;
  size_t size;
  bool mapped;
  /* wk_knot_open: the mapped file's descriptor, kept open so that
   * wk_knot_check_file can fstat the very inode that is mapped, and its
   * identity when mapped; -1 for knots in memory */
  int fd;
  wk_file_id id;

  knot_kv *kvs;
  uint64_t n_kv;
  size_t *kv_hash;              /* open addressing, index + 1, 0 = empty */
  size_t kv_hash_cap;

  wk_tensor *tensors;
  int64_t n_tensors;
  char *names;                  /* NUL-terminated copies of the names */
  size_t *t_hash;
  size_t t_hash_cap;

  uint32_t alignment;
  size_t data_offset;
};

typedef struct
{
  const uint8_t *p;
  size_t size;
  size_t off;
  char *err;
  size_t err_size;
} cursor;

/* A printable copy of a name from the file for error messages. */
static const char *
printable (const char *s, size_t len, char *buf, size_t buf_size)
{
  size_t i, n = len < buf_size - 4 ? len : buf_size - 4;

  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char) s[i];
    buf[i] = (c >= 0x20 && c < 0x7f) ? (char) c : '?';
  }
  if (n < len) {
    memcpy (buf + n, "...", 3);
    n += 3;
  }
  buf[n] = '\0';
  return buf;
}

static uint64_t
fnv1a (const char *s, size_t len)
{
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < len; i++) {
    h ^= (unsigned char) s[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static uint32_t
le32 (const uint8_t * p)
{
  return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 |
      (uint32_t) p[3] << 24;
}

static uint64_t
le64 (const uint8_t * p)
{
  return (uint64_t) le32 (p) | (uint64_t) le32 (p + 4) << 32;
}

static bool
need (cursor * c, size_t n, const char *what)
{
  if (n > c->size - c->off) {
    wk_set_err (c->err, c->err_size,
        "knot: truncated: %s needs %zu bytes at offset %zu but the file "
        "ends at %zu", what, n, c->off, c->size);
    return false;
  }
  return true;
}

static bool
rd_u32 (cursor * c, uint32_t * v, const char *what)
{
  if (!need (c, 4, what))
    return false;
  *v = le32 (c->p + c->off);
  c->off += 4;
  return true;
}

static bool
rd_u64 (cursor * c, uint64_t * v, const char *what)
{
  if (!need (c, 8, what))
    return false;
  *v = le64 (c->p + c->off);
  c->off += 8;
  return true;
}

/* A GGUF string: u64 length, bytes. */
static bool
rd_str (cursor * c, const char **s, size_t *len, const char *what)
{
  uint64_t n;
  size_t at = c->off;

  if (!rd_u64 (c, &n, what))
    return false;
  if (n > c->size - c->off) {
    wk_set_err (c->err, c->err_size,
        "knot: %s at offset %zu has length %llu, past the end of the file "
        "(size %zu)", what, at, (unsigned long long) n, c->size);
    return false;
  }
  *s = (const char *) c->p + c->off;
  *len = (size_t) n;
  c->off += (size_t) n;
  return true;
}

static size_t
scalar_size (uint32_t type)
{
  switch (type) {
    case GGUF_U8:
    case GGUF_I8:
    case GGUF_BOOL:
      return 1;
    case GGUF_U16:
    case GGUF_I16:
      return 2;
    case GGUF_U32:
    case GGUF_I32:
    case GGUF_F32:
      return 4;
    case GGUF_U64:
    case GGUF_I64:
    case GGUF_F64:
      return 8;
    default:
      return 0;
  }
}

/* Hash sets of names, for duplicate detection and lookup. */
static size_t
hash_cap_for (uint64_t n)
{
  size_t cap = 16;
  while (cap < 2 * n)
    cap *= 2;
  return cap;
}

/* Inserts index idx (whose name is s/len); returns the index already
 * holding an equal name, or -1. */
static int64_t
hash_insert (size_t *table, size_t cap, const char *s, size_t len,
    size_t idx, const char *(*name_of) (const void *, size_t, size_t *),
    const void *ctx)
{
  size_t mask = cap - 1, h = (size_t) fnv1a (s, len) & mask;

  while (table[h]) {
    size_t olen;
    const char *o = name_of (ctx, table[h] - 1, &olen);
    if (olen == len && memcmp (o, s, len) == 0)
      return (int64_t) (table[h] - 1);
    h = (h + 1) & mask;
  }
  table[h] = idx + 1;
  return -1;
}

static int64_t
hash_find (const size_t *table, size_t cap, const char *s, size_t len,
    const char *(*name_of) (const void *, size_t, size_t *), const void *ctx)
{
  size_t mask, h;

  if (!table)
    return -1;
  mask = cap - 1;
  h = (size_t) fnv1a (s, len) & mask;
  while (table[h]) {
    size_t olen;
    const char *o = name_of (ctx, table[h] - 1, &olen);
    if (olen == len && memcmp (o, s, len) == 0)
      return (int64_t) (table[h] - 1);
    h = (h + 1) & mask;
  }
  return -1;
}

static const char *
kv_name_of (const void *ctx, size_t i, size_t *len)
{
  const wk_knot *k = ctx;
  *len = k->kvs[i].key_len;
  return k->kvs[i].key;
}

static const char *
tensor_name_of (const void *ctx, size_t i, size_t *len)
{
  const wk_knot *k = ctx;
  *len = strlen (k->tensors[i].name);
  return k->tensors[i].name;
}

static wk_status
parse_kv (wk_knot * k, cursor * c, uint64_t i)
{
  knot_kv *kv = &k->kvs[i];
  char pb[80];
  const char *key;
  size_t key_len, at = c->off;
  uint32_t type;

  if (!rd_str (c, &key, &key_len, "metadata key"))
    return WK_ERR_FORMAT;
  if (key_len == 0 || key_len > KNOT_MAX_KEY || memchr (key, 0, key_len)) {
    wk_set_err (c->err, c->err_size, "knot: metadata key %llu at offset %zu "
        "is empty, longer than %d bytes or contains NUL",
        (unsigned long long) i, at, KNOT_MAX_KEY);
    return WK_ERR_FORMAT;
  }
  printable (key, key_len, pb, sizeof pb);
  kv->key = key;
  kv->key_len = key_len;
  if (!rd_u32 (c, &type, "metadata value type"))
    return WK_ERR_FORMAT;
  if (type >= GGUF_N_TYPES) {
    wk_set_err (c->err, c->err_size, "knot: metadata '%s' has unknown value "
        "type %u", pb, type);
    return WK_ERR_FORMAT;
  }
  kv->type = type;
  kv->val = c->p + c->off;

  if (type == GGUF_STRING) {
    const char *s;
    size_t len;
    if (!rd_str (c, &s, &len, "metadata string"))
      return WK_ERR_FORMAT;
  } else if (type == GGUF_ARRAY) {
    uint32_t at_type;
    uint64_t n;

    if (!rd_u32 (c, &at_type, "array element type")
        || !rd_u64 (c, &n, "array length"))
      return WK_ERR_FORMAT;
    if (at_type == GGUF_ARRAY) {
      wk_set_err (c->err, c->err_size, "knot: metadata '%s' is a nested array "
          "(not supported)", pb);
      return WK_ERR_FORMAT;
    }
    if (at_type >= GGUF_N_TYPES) {
      wk_set_err (c->err, c->err_size, "knot: metadata '%s' is an array of "
          "unknown type %u", pb, at_type);
      return WK_ERR_FORMAT;
    }
    kv->arr_type = at_type;
    kv->n = n;
    kv->val = c->p + c->off;
    if (at_type == GGUF_STRING) {
      size_t base = c->off;
      if (n > (c->size - c->off) / 8) {
        wk_set_err (c->err, c->err_size, "knot: metadata '%s': %llu strings "
            "cannot fit in the %zu bytes left", pb, (unsigned long long) n,
            c->size - c->off);
        return WK_ERR_FORMAT;
      }
      kv->str_offs = malloc ((n ? n : 1) * sizeof (size_t));
      if (!kv->str_offs) {
        wk_set_err (c->err, c->err_size, "knot: out of memory");
        return WK_ERR_NOMEM;
      }
      for (uint64_t j = 0; j < n; j++) {
        const char *s;
        size_t len;
        kv->str_offs[j] = c->off - base;
        if (!rd_str (c, &s, &len, "string array element"))
          return WK_ERR_FORMAT;
      }
    } else {
      size_t es = scalar_size (at_type);
      if (n > (c->size - c->off) / es) {
        wk_set_err (c->err, c->err_size, "knot: metadata '%s': array of %llu "
            "elements of %zu bytes extends past the end of the file "
            "(size %zu)", pb, (unsigned long long) n, es, c->size);
        return WK_ERR_FORMAT;
      }
      if (at_type == GGUF_BOOL)
        for (uint64_t j = 0; j < n; j++)
          if (c->p[c->off + j] > 1) {
            wk_set_err (c->err, c->err_size, "knot: metadata '%s': bool "
                "element %llu is %u", pb, (unsigned long long) j,
                c->p[c->off + j]);
            return WK_ERR_FORMAT;
          }
      c->off += ((size_t) n) * es;
    }
  } else {
    size_t es = scalar_size (type);
    if (!need (c, es, "metadata value"))
      return WK_ERR_FORMAT;
    if (type == GGUF_BOOL && c->p[c->off] > 1) {
      wk_set_err (c->err, c->err_size, "knot: metadata '%s': bool is %u", pb,
          c->p[c->off]);
      return WK_ERR_FORMAT;
    }
    c->off += es;
  }

  if (hash_insert (k->kv_hash, k->kv_hash_cap, key, key_len, (size_t) i,
          kv_name_of, k) >= 0) {
    wk_set_err (c->err, c->err_size, "knot: metadata key '%s' appears twice",
        pb);
    return WK_ERR_FORMAT;
  }
  return WK_OK;
}

static void
knot_free (wk_knot * k)
{
  if (!k)
    return;
  if (k->kvs)
    for (uint64_t i = 0; i < k->n_kv; i++)
      free (k->kvs[i].str_offs);
  free (k->kvs);
  free (k->kv_hash);
  free (k->tensors);
  free (k->names);
  free (k->t_hash);
  if (k->mapped)
    wk_unmap_file (k->data, k->size);
  if (k->fd >= 0)
    close (k->fd);
  free (k);
}

/* Tensor info, already range-checked fields; returns its byte size. */
static wk_status
tensor_nbytes (const wk_tensor * t, size_t *nbytes, char *err, size_t err_size)
{
  uint64_t rows = 1, elems;
  size_t rb;

  /* ne[d] >= 1 and <= INT64_MAX each; the element count must fit too */
  elems = (uint64_t) t->ne[0];
  for (int d = 1; d < t->n_dims; d++) {
    if ((uint64_t) t->ne[d] > (uint64_t) INT64_MAX / elems) {
      wk_set_err (err, err_size, "knot: tensor '%s' has too many elements",
          t->name);
      return WK_ERR_FORMAT;
    }
    elems *= (uint64_t) t->ne[d];
    rows *= (uint64_t) t->ne[d];
  }
  rb = wk_type_row_bytes (t->type, t->ne[0]);
  if (rb == 0) {
    wk_set_err (err, err_size, "knot: tensor '%s' of type %s has rows of "
        "%lld elements, not a whole number of %lld-element blocks",
        t->name, wk_type_name (t->type), (long long) t->ne[0],
        (long long) wk_type_block_elems (t->type));
    return WK_ERR_FORMAT;
  }
  if (rows > SIZE_MAX / rb) {
    wk_set_err (err, err_size, "knot: tensor '%s' is too large", t->name);
    return WK_ERR_FORMAT;
  }
  *nbytes = ((size_t) rows) * rb;
  return WK_OK;
}

/* A file that is not a knot but one whisperknot-convert reads: what it
 * is and what to do (from its first bytes), or NULL. */
static const char *
what_file (const uint8_t * d, size_t size)
{
  switch (wk_file_kind_of (d, size < WK_FILE_HEAD_BYTES ? size :
          WK_FILE_HEAD_BYTES, size)) {
    case WK_FILE_GGML:
      return "a whisper.cpp ggml file (magic \"lmgg\"), not a knot: convert "
          "it with whisperknot-convert";
    case WK_FILE_TORCH_ZIP:
      return "a PyTorch checkpoint (OpenAI's .pt or a pytorch_model.bin), "
          "not a knot: convert it with whisperknot-convert";
    case WK_FILE_TORCH_PICKLE:
      return "a PyTorch file saved before PyTorch 1.6, not a knot: save it "
          "again with torch.save, then convert it with whisperknot-convert";
    case WK_FILE_SAFETENSORS:
      return "a safetensors file, not a knot: convert its Hugging Face "
          "checkpoint directory with whisperknot-convert";
    default:                   /* a damaged safetensors head: too unsure */
      return NULL;
  }
}

static wk_status
parse (wk_knot * k, char *err, size_t err_size)
{
  cursor c = { k->data, k->size, 0, err, err_size };
  const char *what;
  uint32_t version;
  uint64_t n_tensors, n_kv;
  uint64_t *offsets = NULL;
  size_t names_len = 0, names_cap;
  wk_status st = WK_ERR_FORMAT;

  if (k->size < 4 || memcmp (k->data, "GGUF", 4) != 0) {
    what = what_file (k->data, k->size);
    wk_set_err (err, err_size, "knot: %s", what ? what : "not a knot/GGUF "
        "file (magic is not \"GGUF\")");
    return WK_ERR_FORMAT;
  }
  c.off = 4;
  if (!rd_u32 (&c, &version, "version"))
    return WK_ERR_FORMAT;
  if (version != 3) {
    wk_set_err (err, err_size, "knot: GGUF version %u is not supported "
        "(need 3)", version);
    return WK_ERR_UNSUPPORTED;
  }
  if (!rd_u64 (&c, &n_tensors, "tensor count")
      || !rd_u64 (&c, &n_kv, "metadata count"))
    return WK_ERR_FORMAT;
  if (n_kv > (k->size - c.off) / MIN_KV_BYTES) {
    wk_set_err (err, err_size, "knot: %llu metadata entries cannot fit in a "
        "file of %zu bytes", (unsigned long long) n_kv, k->size);
    return WK_ERR_FORMAT;
  }
  if (n_tensors > (k->size - c.off) / MIN_TENSOR_INFO_BYTES) {
    wk_set_err (err, err_size, "knot: %llu tensors cannot fit in a file of "
        "%zu bytes", (unsigned long long) n_tensors, k->size);
    return WK_ERR_FORMAT;
  }

  /* metadata */
  k->kvs = calloc (n_kv ? n_kv : 1, sizeof (knot_kv));
  k->kv_hash_cap = hash_cap_for (n_kv);
  k->kv_hash = calloc (k->kv_hash_cap, sizeof (size_t));
  if (!k->kvs || !k->kv_hash)
    goto nomem;
  for (uint64_t i = 0; i < n_kv; i++) {
    k->n_kv = i + 1;
    st = parse_kv (k, &c, i);
    if (st != WK_OK)
      return st;
  }
  st = WK_ERR_FORMAT;

  k->alignment = KNOT_DEFAULT_ALIGN;
  {
    int64_t ai = hash_find (k->kv_hash, k->kv_hash_cap, "general.alignment",
        strlen ("general.alignment"), kv_name_of, k);
    if (ai >= 0) {
      const knot_kv *kv = &k->kvs[ai];
      uint32_t a;
      if (kv->type != GGUF_U32) {
        wk_set_err (err, err_size, "knot: general.alignment must be a u32");
        return WK_ERR_FORMAT;
      }
      a = le32 (kv->val);
      if (a == 0 || (a & (a - 1)) != 0 || a > KNOT_MAX_ALIGN) {
        wk_set_err (err, err_size, "knot: general.alignment %u is not a power "
            "of two up to 2^30", a);
        return WK_ERR_FORMAT;
      }
      k->alignment = a;
    }
  }

  /* tensor infos */
  k->tensors = calloc (n_tensors ? n_tensors : 1, sizeof (wk_tensor));
  offsets = calloc (n_tensors ? n_tensors : 1, sizeof (uint64_t));
  /* names are bounded by the file: each byte of a name is a byte of it */
  names_cap = ((size_t) n_tensors) * (KNOT_MAX_NAME + 1);
  if (names_cap > k->size + n_tensors)
    names_cap = k->size + (size_t) n_tensors;
  k->names = malloc (names_cap ? names_cap : 1);
  k->t_hash_cap = hash_cap_for (n_tensors);
  k->t_hash = calloc (k->t_hash_cap, sizeof (size_t));
  if (!k->tensors || !offsets || !k->names || !k->t_hash)
    goto nomem;

  for (uint64_t i = 0; i < n_tensors; i++) {
    wk_tensor *t = &k->tensors[i];
    const char *name;
    size_t name_len, at = c.off;
    uint32_t n_dims, type;
    char pb[80];

    if (!rd_str (&c, &name, &name_len, "tensor name"))
      goto out;
    if (name_len == 0 || name_len > KNOT_MAX_NAME || memchr (name, 0, name_len)) {
      wk_set_err (err, err_size, "knot: tensor %llu at offset %zu: name is "
          "empty, longer than %d bytes or contains NUL",
          (unsigned long long) i, at, KNOT_MAX_NAME);
      goto out;
    }
    if (names_len + name_len + 1 > names_cap) {
      wk_set_err (err, err_size, "knot: tensor names exceed the file size");
      goto out;
    }
    memcpy (k->names + names_len, name, name_len);
    k->names[names_len + name_len] = '\0';
    /* name pointers are fixed up once the arena is complete */
    t->name = (const char *) (uintptr_t) names_len;
    names_len += name_len + 1;
    printable (name, name_len, pb, sizeof pb);

    if (!rd_u32 (&c, &n_dims, "tensor n_dims"))
      goto out;
    if (n_dims < 1 || n_dims > WK_MAX_DIMS) {
      wk_set_err (err, err_size, "knot: tensor '%s' has %u dimensions (must be "
          "1..%d)", pb, n_dims, WK_MAX_DIMS);
      goto out;
    }
    t->n_dims = (int) n_dims;
    for (int d = 0; d < WK_MAX_DIMS; d++)
      t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
      uint64_t ne;
      if (!rd_u64 (&c, &ne, "tensor dimension"))
        goto out;
      if (ne < 1 || ne > (uint64_t) INT64_MAX) {
        wk_set_err (err, err_size, "knot: tensor '%s' dimension %u is %llu "
            "(must be >= 1)", pb, d, (unsigned long long) ne);
        goto out;
      }
      t->ne[d] = (int64_t) ne;
    }
    if (!rd_u32 (&c, &type, "tensor type"))
      goto out;
    if (!wk_type_is_known ((int) type)) {
      wk_set_err (err, err_size, "knot: tensor '%s' has type %u, not one of "
          "f32 (0), f16 (1), q4_0 (2), q8_0 (8)", pb, type);
      st = WK_ERR_UNSUPPORTED;
      goto out;
    }
    t->type = (wk_type) type;
    if (!rd_u64 (&c, &offsets[i], "tensor offset"))
      goto out;
  }
  k->n_tensors = (int64_t) n_tensors;
  for (uint64_t i = 0; i < n_tensors; i++) {
    wk_tensor *t = &k->tensors[i];
    t->name = k->names + (size_t) (uintptr_t) t->name;
    if (hash_insert (k->t_hash, k->t_hash_cap, t->name, strlen (t->name),
            (size_t) i, tensor_name_of, k) >= 0) {
      char pb[80];
      wk_set_err (err, err_size, "knot: tensor name '%s' appears twice",
          printable (t->name, strlen (t->name), pb, sizeof pb));
      goto out;
    }
  }

  /* data section: starts at the next multiple of the alignment */
  {
    size_t a = k->alignment;
    size_t start = c.off + (a - c.off % a) % a;
    if (start > k->size) {
      if (n_tensors > 0) {
        wk_set_err (err, err_size, "knot: data section at offset %zu starts "
            "past the end of the file (size %zu)", start, k->size);
        goto out;
      }
      start = k->size;
    }
    k->data_offset = start;
  }

  for (uint64_t i = 0; i < n_tensors; i++) {
    wk_tensor *t = &k->tensors[i];
    size_t nbytes, avail = k->size - k->data_offset;
    char pb[80];

    printable (t->name, strlen (t->name), pb, sizeof pb);
    if (offsets[i] % k->alignment != 0) {
      wk_set_err (err, err_size, "knot: tensor '%s' offset %llu is not a "
          "multiple of the alignment %u", pb,
          (unsigned long long) offsets[i], k->alignment);
      goto out;
    }
    st = tensor_nbytes (t, &nbytes, err, err_size);
    if (st != WK_OK)
      goto out;
    st = WK_ERR_FORMAT;
    if (offsets[i] > avail || nbytes > avail - offsets[i]) {
      unsigned long long s = (unsigned long long) k->data_offset + offsets[i];
      wk_set_err (err, err_size, "knot: tensor '%s' data [%llu, %llu%s) "
          "extends past end of file (size %zu)", pb, s,
          s + nbytes < s ? (unsigned long long) nbytes : s + nbytes,
          s + nbytes < s ? " past that" : "", k->size);
      goto out;
    }
    t->data = k->data + k->data_offset + (size_t) offsets[i];
    t->nbytes = nbytes;
  }
  st = WK_OK;
  goto out;

nomem:
  wk_set_err (err, err_size, "knot: out of memory");
  st = WK_ERR_NOMEM;
out:
  free (offsets);
  return st;
}

wk_status
wk_knot_open_memory (const void *data, size_t size, wk_knot ** out,
    char *err, size_t err_size)
{
  wk_knot *k;
  wk_status st;

  if (!out)
    return WK_ERR_ARG;
  *out = NULL;
  if (!data && size) {
    wk_set_err (err, err_size, "knot: no data");
    return WK_ERR_ARG;
  }
  k = calloc (1, sizeof *k);
  if (!k) {
    wk_set_err (err, err_size, "knot: out of memory");
    return WK_ERR_NOMEM;
  }
  k->fd = -1;
  k->data = data ? data : (const uint8_t *) "";
  k->size = size;
  st = parse (k, err, err_size);
  if (st != WK_OK) {
    knot_free (k);
    return st;
  }
  *out = k;
  return WK_OK;
}

wk_status
wk_knot_open (const char *path, wk_knot ** out, char *err, size_t err_size)
{
  const void *map;
  size_t size;
  wk_knot *k;
  wk_status st;
  char inner[512];
  wk_file_id id;
  int fd;

  if (!out || !path)
    return WK_ERR_ARG;
  *out = NULL;
  st = wk_map_file_fd (path, true, &map, &size, &id, &fd, err, err_size);
  if (st == WK_ERR_FORMAT)
    wk_set_err (err, err_size, "%s: knot: file is empty (0 bytes)", path);
  if (st != WK_OK)
    return st;
  k = calloc (1, sizeof *k);
  if (!k) {
    wk_unmap_file (map, size);
    close (fd);
    wk_set_err (err, err_size, "%s: out of memory", path);
    return WK_ERR_NOMEM;
  }
  k->data = map;
  k->size = size;
  k->mapped = true;
  k->fd = fd;
  k->id = id;
  inner[0] = '\0';
  st = parse (k, inner, sizeof inner);
  if (st != WK_OK) {
    wk_set_err (err, err_size, "%s: %s", path, inner);
    knot_free (k);
    return st;
  }
  *out = k;
  return WK_OK;
}

void
wk_knot_close (wk_knot * knot)
{
  knot_free (knot);
}

bool
wk_knot_file_id (const wk_knot * knot, wk_file_id * id)
{
  if (!knot || knot->fd < 0)
    return false;
  *id = knot->id;
  return true;
}

wk_status
wk_knot_check_file (const wk_knot * knot, const char *path, char *err,
    size_t err_size)
{
  if (!knot)
    return WK_ERR_ARG;
  return wk_file_check (knot->fd, &knot->id, path ? path : "model", err,
      err_size);
}

size_t
wk_knot_size (const wk_knot * knot)
{
  return knot ? knot->size : 0;
}

int64_t
wk_knot_n_tensors (const wk_knot * knot)
{
  return knot ? knot->n_tensors : 0;
}

const wk_tensor *
wk_knot_tensor_at (const wk_knot * knot, int64_t i)
{
  if (!knot || i < 0 || i >= knot->n_tensors)
    return NULL;
  return &knot->tensors[i];
}

const wk_tensor *
wk_knot_find (const wk_knot * knot, const char *name)
{
  int64_t i;

  if (!knot || !name)
    return NULL;
  i = hash_find (knot->t_hash, knot->t_hash_cap, name, strlen (name),
      tensor_name_of, knot);
  return i >= 0 ? &knot->tensors[i] : NULL;
}

/* ---- metadata getters ------------------------------------------------- */

static const knot_kv *
find_kv (const wk_knot * knot, const char *key)
{
  int64_t i;

  if (!knot || !key)
    return NULL;
  i = hash_find (knot->kv_hash, knot->kv_hash_cap, key, strlen (key),
      kv_name_of, knot);
  return i >= 0 ? &knot->kvs[i] : NULL;
}

bool
wk_knot_get_u32 (const wk_knot * knot, const char *key, uint32_t * out)
{
  const knot_kv *kv = find_kv (knot, key);
  int64_t s = 0;
  uint64_t u = 0;
  bool is_signed = false;

  if (!kv)
    return false;
  switch (kv->type) {
    case GGUF_U8:
      u = kv->val[0];
      break;
    case GGUF_I8:
      s = (int8_t) kv->val[0];
      is_signed = true;
      break;
    case GGUF_U16:
      u = (uint16_t) (kv->val[0] | kv->val[1] << 8);
      break;
    case GGUF_I16:
      s = (int16_t) (uint16_t) (kv->val[0] | kv->val[1] << 8);
      is_signed = true;
      break;
    case GGUF_U32:
      u = le32 (kv->val);
      break;
    case GGUF_I32:
      s = (int32_t) le32 (kv->val);
      is_signed = true;
      break;
    case GGUF_U64:
      u = le64 (kv->val);
      break;
    case GGUF_I64:
      s = (int64_t) le64 (kv->val);
      is_signed = true;
      break;
    default:
      return false;
  }
  if (is_signed) {
    if (s < 0)
      return false;
    u = (uint64_t) s;
  }
  if (u > UINT32_MAX)
    return false;
  if (out)
    *out = (uint32_t) u;
  return true;
}

bool
wk_knot_get_f32 (const wk_knot * knot, const char *key, float *out)
{
  const knot_kv *kv = find_kv (knot, key);

  if (!kv)
    return false;
  if (kv->type == GGUF_F32) {
    uint32_t b = le32 (kv->val);
    float f;
    memcpy (&f, &b, 4);
    if (out)
      *out = f;
    return true;
  }
  if (kv->type == GGUF_F64) {
    uint64_t b = le64 (kv->val);
    double d;
    memcpy (&d, &b, 8);
    if (out)
      *out = (float) d;
    return true;
  }
  return false;
}

bool
wk_knot_get_str (const wk_knot * knot, const char *key, const char **str,
    size_t *len)
{
  const knot_kv *kv = find_kv (knot, key);

  if (!kv || kv->type != GGUF_STRING)
    return false;
  if (str)
    *str = (const char *) kv->val + 8;
  if (len)
    *len = (size_t) le64 (kv->val);
  return true;
}

bool
wk_knot_get_arr_len (const wk_knot * knot, const char *key, size_t *n)
{
  const knot_kv *kv = find_kv (knot, key);

  if (!kv || kv->type != GGUF_ARRAY)
    return false;
  if (n)
    *n = (size_t) kv->n;
  return true;
}

bool
wk_knot_copy_f32_arr (const wk_knot * knot, const char *key, float *dst,
    size_t n)
{
  const knot_kv *kv = find_kv (knot, key);

  if (!kv || kv->type != GGUF_ARRAY || kv->arr_type != GGUF_F32 || n > kv->n)
    return false;
  for (size_t i = 0; i < n; i++) {
    uint32_t b = le32 (kv->val + 4 * i);
    memcpy (&dst[i], &b, 4);
  }
  return true;
}

bool
wk_knot_copy_u32_arr (const wk_knot * knot, const char *key, uint32_t * dst,
    size_t n)
{
  const knot_kv *kv = find_kv (knot, key);

  if (!kv || kv->type != GGUF_ARRAY || n > kv->n)
    return false;
  if (kv->arr_type != GGUF_U32 && kv->arr_type != GGUF_I32)
    return false;
  for (size_t i = 0; i < n; i++) {
    uint32_t v = le32 (kv->val + 4 * i);
    if (kv->arr_type == GGUF_I32 && (int32_t) v < 0)
      return false;
    dst[i] = v;
  }
  return true;
}

bool
wk_knot_get_str_at (const wk_knot * knot, const char *key, size_t i,
    const char **str, size_t *len)
{
  const knot_kv *kv = find_kv (knot, key);
  const uint8_t *p;

  if (!kv || kv->type != GGUF_ARRAY || kv->arr_type != GGUF_STRING
      || i >= kv->n)
    return false;
  p = kv->val + kv->str_offs[i];
  if (str)
    *str = (const char *) p + 8;
  if (len)
    *len = (size_t) le64 (p);
  return true;
}
