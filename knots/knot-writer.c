/* Knot writer: serializes metadata as it is added and lays tensors out at
 * aligned offsets when the file is written. */
#include "knot-writer.h"
#include "wk-err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum
{
  GGUF_U32 = 4, GGUF_F32 = 6, GGUF_STRING = 8, GGUF_ARRAY = 9
};

typedef struct
{
  char *name;
  wk_type type;
  int n_dims;
  int64_t ne[WK_MAX_DIMS];
  const void *data;
  size_t nbytes;
  bool owned;
  uint64_t offset;              /* relative to the data section */
} wtensor;

struct wk_knot_writer
{
  uint32_t alignment;
  uint8_t *meta;                /* serialized metadata entries */
  size_t meta_len, meta_cap;
  uint64_t n_kv;
  wtensor *tensors;
  size_t n_tensors, tensors_cap;
  bool failed;                  /* an allocation failed while adding */
};

static bool
meta_put (wk_knot_writer * w, const void *p, size_t n)
{
  if (w->failed)
    return false;
  if (n > w->meta_cap - w->meta_len) {
    size_t cap = w->meta_cap ? w->meta_cap : 4096;
    uint8_t *m;
    while (cap - w->meta_len < n)
      cap *= 2;
    m = realloc (w->meta, cap);
    if (!m) {
      w->failed = true;
      return false;
    }
    w->meta = m;
    w->meta_cap = cap;
  }
  memcpy (w->meta + w->meta_len, p, n);
  w->meta_len += n;
  return true;
}

static bool
meta_u32 (wk_knot_writer * w, uint32_t v)
{
  uint8_t b[4] = { v, v >> 8, v >> 16, v >> 24 };
  return meta_put (w, b, 4);
}

static bool
meta_u64 (wk_knot_writer * w, uint64_t v)
{
  uint8_t b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t) (v >> (8 * i));
  return meta_put (w, b, 8);
}

static bool
meta_str (wk_knot_writer * w, const char *s, size_t len)
{
  return meta_u64 (w, len) && meta_put (w, s, len);
}

wk_knot_writer *
wk_knot_writer_new (uint32_t alignment)
{
  wk_knot_writer *w;

  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    return NULL;
  w = calloc (1, sizeof *w);
  if (!w)
    return NULL;
  w->alignment = alignment;
  if (wk_knot_writer_set_u32 (w, "general.alignment", alignment) != WK_OK) {
    wk_knot_writer_free (w);
    return NULL;
  }
  return w;
}

void
wk_knot_writer_free (wk_knot_writer * w)
{
  if (!w)
    return;
  for (size_t i = 0; i < w->n_tensors; i++) {
    free (w->tensors[i].name);
    if (w->tensors[i].owned)
      free ((void *) w->tensors[i].data);
  }
  free (w->tensors);
  free (w->meta);
  free (w);
}

wk_status
wk_knot_writer_set_u32 (wk_knot_writer * w, const char *key, uint32_t v)
{
  if (!meta_str (w, key, strlen (key)) || !meta_u32 (w, GGUF_U32)
      || !meta_u32 (w, v))
    return WK_ERR_NOMEM;
  w->n_kv++;
  return WK_OK;
}

wk_status
wk_knot_writer_set_str (wk_knot_writer * w, const char *key, const char *s,
    size_t len)
{
  if (!meta_str (w, key, strlen (key)) || !meta_u32 (w, GGUF_STRING)
      || !meta_str (w, s, len))
    return WK_ERR_NOMEM;
  w->n_kv++;
  return WK_OK;
}

wk_status
wk_knot_writer_set_f32_array (wk_knot_writer * w, const char *key,
    const float *v, size_t n)
{
  if (!meta_str (w, key, strlen (key)) || !meta_u32 (w, GGUF_ARRAY)
      || !meta_u32 (w, GGUF_F32) || !meta_u64 (w, n))
    return WK_ERR_NOMEM;
  for (size_t i = 0; i < n; i++) {
    uint32_t b;
    memcpy (&b, &v[i], 4);
    if (!meta_u32 (w, b))
      return WK_ERR_NOMEM;
  }
  w->n_kv++;
  return WK_OK;
}

wk_status
wk_knot_writer_set_u32_array (wk_knot_writer * w, const char *key,
    const uint32_t * v, size_t n)
{
  if (!meta_str (w, key, strlen (key)) || !meta_u32 (w, GGUF_ARRAY)
      || !meta_u32 (w, GGUF_U32) || !meta_u64 (w, n))
    return WK_ERR_NOMEM;
  for (size_t i = 0; i < n; i++)
    if (!meta_u32 (w, v[i]))
      return WK_ERR_NOMEM;
  w->n_kv++;
  return WK_OK;
}

wk_status
wk_knot_writer_set_str_array (wk_knot_writer * w, const char *key,
    const char *const *strs, const size_t *lens, size_t n)
{
  if (!meta_str (w, key, strlen (key)) || !meta_u32 (w, GGUF_ARRAY)
      || !meta_u32 (w, GGUF_STRING) || !meta_u64 (w, n))
    return WK_ERR_NOMEM;
  for (size_t i = 0; i < n; i++)
    if (!meta_str (w, strs[i], lens[i]))
      return WK_ERR_NOMEM;
  w->n_kv++;
  return WK_OK;
}

wk_status
wk_knot_writer_add_tensor (wk_knot_writer * w, const char *name,
    wk_type type, int n_dims, const int64_t * ne, const void *data,
    size_t nbytes, bool owned, char *err, size_t err_size)
{
  wtensor *t;
  uint64_t rows = 1;
  size_t rb;
  wk_status st = WK_ERR_ARG;

  if (!wk_type_is_known ((int) type)) {
    wk_set_err (err, err_size, "tensor '%s': unknown type %d", name,
        (int) type);
    goto fail;
  }
  if (n_dims < 1 || n_dims > WK_MAX_DIMS || strlen (name) == 0
      || strlen (name) > 256) {
    wk_set_err (err, err_size, "tensor '%s': bad name or %d dimensions", name,
        n_dims);
    goto fail;
  }
  for (int d = 0; d < n_dims; d++)
    if (ne[d] < 1) {
      wk_set_err (err, err_size, "tensor '%s': dimension %d is %lld", name, d,
          (long long) ne[d]);
      goto fail;
    }
  rb = wk_type_row_bytes (type, ne[0]);
  for (int d = 1; d < n_dims; d++)
    rows *= (uint64_t) ne[d];
  if (rb == 0 || rows * rb != nbytes) {
    wk_set_err (err, err_size, "tensor '%s': %zu bytes do not match type %s "
        "with ne[0]=%lld", name, nbytes, wk_type_name (type),
        (long long) ne[0]);
    goto fail;
  }
  if (w->n_tensors == w->tensors_cap) {
    size_t cap = w->tensors_cap ? 2 * w->tensors_cap : 64;
    wtensor *nt = realloc (w->tensors, cap * sizeof *nt);
    if (!nt)
      goto nomem;
    w->tensors = nt;
    w->tensors_cap = cap;
  }
  t = &w->tensors[w->n_tensors];
  memset (t, 0, sizeof *t);
  t->name = strdup (name);
  if (!t->name)
    goto nomem;
  t->type = type;
  t->n_dims = n_dims;
  for (int d = 0; d < WK_MAX_DIMS; d++)
    t->ne[d] = d < n_dims ? ne[d] : 1;
  t->data = data;
  t->nbytes = nbytes;
  t->owned = owned;
  w->n_tensors++;
  return WK_OK;

nomem:
  wk_set_err (err, err_size, "out of memory");
  st = WK_ERR_NOMEM;
fail:
  if (owned)
    free ((void *) data);
  return st;
}

static uint64_t
align_up (uint64_t v, uint64_t a)
{
  return (v + a - 1) / a * a;
}

/* Header bytes (up to the aligned data section) and total size. */
static void
layout (wk_knot_writer * w, uint64_t * header, uint64_t * total)
{
  uint64_t off = 4 + 4 + 8 + 8 + w->meta_len, d = 0;

  for (size_t i = 0; i < w->n_tensors; i++) {
    wtensor *t = &w->tensors[i];
    off += 8 + strlen (t->name) + 4 + 8 * (uint64_t) t->n_dims + 4 + 8;
    t->offset = d;
    d = align_up (d + t->nbytes, w->alignment);
  }
  *header = align_up (off, w->alignment);
  /* no padding after the last tensor */
  if (w->n_tensors)
    d = w->tensors[w->n_tensors - 1].offset
        + w->tensors[w->n_tensors - 1].nbytes;
  *total = *header + d;
}

uint64_t
wk_knot_writer_file_size (const wk_knot_writer * w)
{
  uint64_t h, t;
  layout ((wk_knot_writer *) w, &h, &t);
  return t;
}

static bool
put (FILE * f, const void *p, size_t n)
{
  return n == 0 || fwrite (p, 1, n, f) == n;
}

static bool
put_u32 (FILE * f, uint32_t v)
{
  uint8_t b[4] = { v, v >> 8, v >> 16, v >> 24 };
  return put (f, b, 4);
}

static bool
put_u64 (FILE * f, uint64_t v)
{
  uint8_t b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t) (v >> (8 * i));
  return put (f, b, 8);
}

static bool
put_zeros (FILE * f, uint64_t n)
{
  static const uint8_t z[256];
  while (n) {
    size_t k = n < sizeof z ? (size_t) n : sizeof z;
    if (!put (f, z, k))
      return false;
    n -= k;
  }
  return true;
}

static bool
emit (wk_knot_writer * w, FILE * f)
{
  uint64_t header, total, pos;

  layout (w, &header, &total);
  if (!put (f, "GGUF", 4) || !put_u32 (f, 3) || !put_u64 (f, w->n_tensors)
      || !put_u64 (f, w->n_kv) || !put (f, w->meta, w->meta_len))
    return false;
  pos = 24 + w->meta_len;
  for (size_t i = 0; i < w->n_tensors; i++) {
    const wtensor *t = &w->tensors[i];
    size_t nl = strlen (t->name);
    if (!put_u64 (f, nl) || !put (f, t->name, nl) || !put_u32 (f,
            (uint32_t) t->n_dims))
      return false;
    for (int d = 0; d < t->n_dims; d++)
      if (!put_u64 (f, (uint64_t) t->ne[d]))
        return false;
    if (!put_u32 (f, (uint32_t) t->type) || !put_u64 (f, t->offset))
      return false;
    pos += 8 + nl + 4 + 8 * (uint64_t) t->n_dims + 4 + 8;
  }
  if (!put_zeros (f, header - pos))
    return false;
  pos = 0;
  for (size_t i = 0; i < w->n_tensors; i++) {
    const wtensor *t = &w->tensors[i];
    if (!put_zeros (f, t->offset - pos) || !put (f, t->data, t->nbytes))
      return false;
    pos = t->offset + t->nbytes;
  }
  return true;
}

wk_status
wk_knot_writer_write_memory (wk_knot_writer * w, void **data, size_t *size,
    char *err, size_t err_size)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *f;

  if (w->failed) {
    wk_set_err (err, err_size, "out of memory while collecting metadata");
    return WK_ERR_NOMEM;
  }
  f = open_memstream (&buf, &len);
  if (!f) {
    wk_set_err (err, err_size, "out of memory");
    return WK_ERR_NOMEM;
  }
  if (!emit (w, f) || fclose (f) != 0) {
    free (buf);
    wk_set_err (err, err_size, "out of memory");
    return WK_ERR_NOMEM;
  }
  *data = buf;
  *size = len;
  return WK_OK;
}

wk_status
wk_knot_writer_write_file (wk_knot_writer * w, const char *path, char *err,
    size_t err_size)
{
  size_t plen = strlen (path);
  char *tmp;
  int fd;
  FILE *f;
  bool ok;
  mode_t mask;

  if (w->failed) {
    wk_set_err (err, err_size, "out of memory while collecting metadata");
    return WK_ERR_NOMEM;
  }
  tmp = malloc (plen + 16);
  if (!tmp) {
    wk_set_err (err, err_size, "out of memory");
    return WK_ERR_NOMEM;
  }
  memcpy (tmp, path, plen);
  memcpy (tmp + plen, ".tmp-XXXXXX", 12);
  fd = mkstemp (tmp);
  if (fd < 0) {
    wk_set_err (err, err_size, "%s: cannot create a temporary file beside it: "
        "%s", path, strerror (errno));
    free (tmp);
    return WK_ERR_IO;
  }
  /* mkstemp creates 0600; give the file the usual permissions */
  mask = umask (0);
  umask (mask);
  if (fchmod (fd, 0666 & ~mask) != 0) {
    /* not fatal: the file is still usable by its owner */
  }
  f = fdopen (fd, "wb");
  if (!f) {
    close (fd);
    ok = false;
  } else {
    ok = emit (w, f);
    ok = fflush (f) == 0 && ok;
    ok = fsync (fileno (f)) == 0 && ok;
    ok = fclose (f) == 0 && ok;
  }
  if (!ok) {
    wk_set_err (err, err_size, "%s: write failed: %s", path, strerror (errno));
    unlink (tmp);
    free (tmp);
    return WK_ERR_IO;
  }
  if (rename (tmp, path) != 0) {
    wk_set_err (err, err_size, "%s: cannot rename the temporary file into "
        "place: %s", path, strerror (errno));
    unlink (tmp);
    free (tmp);
    return WK_ERR_IO;
  }
  free (tmp);
  return WK_OK;
}
