/* PyTorch zip checkpoints (see torch-pt.h): the zip directory, then a
 * pickle machine reduced to what torch.save writes for a dict of ints and
 * tensors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mapfile.h"
#include "torch-pt.h"
#include "wk-err.h"

/* Bounds on what a hostile file can make us allocate. A Whisper tiny
 * saved by torch.save has a 19 KB pickle for its 167 tensors (about 15
 * objects each); large-v3, with about 1,250 tensors, some 150 KB. */
#define PT_MAX_ENTRIES 1000000
#define PT_MAX_PICKLE (16u << 20)
#define PT_MAX_NODES (1 << 20)
#define PT_MAX_MEMO (1 << 22)
#define PT_MAX_STACK (1 << 20)

/* ---- the zip archive ------------------------------------------------- */

typedef struct
{
  const char *name;             /* not NUL-terminated */
  size_t name_len;
  int method;                   /* 0: stored */
  const uint8_t *data;          /* stored entries: the bytes */
  uint64_t size;
} zentry;

static uint16_t
rd16 (const uint8_t * p)
{
  return (uint16_t) (p[0] | p[1] << 8);
}

static uint32_t
rd32 (const uint8_t * p)
{
  return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 |
      (uint32_t) p[3] << 24;
}

static uint64_t
rd64 (const uint8_t * p)
{
  return (uint64_t) rd32 (p) | (uint64_t) rd32 (p + 4) << 32;
}

/* [off, off + len) inside [0, size), without overflow */
static bool
inside (uint64_t off, uint64_t len, uint64_t size)
{
  return off <= size && len <= size - off;
}

bool
wk_torch_pt_sniff (const void *data, size_t size)
{
  return size >= 4 && rd32 (data) == 0x04034b50;
}

/* The central directory's entries, each resolved to its local header's
 * data. Zip64 sizes and offsets (archives over 4 GiB) are read too. */
static wk_status
zip_read (const uint8_t * b, size_t size, zentry ** out, int64_t * n_out,
    char *err, size_t es)
{
  uint64_t pos, lo, n_total, cd_size, cd_off, p, cd_end;
  zentry *e = NULL;
  int64_t i;

  *out = NULL;
  *n_out = 0;
  if (size < 22) {
    wk_set_err (err, es, "%zu bytes, too short for a zip archive", size);
    return WK_ERR_FORMAT;
  }
  /* the end record: the last signature whose comment ends the file */
  lo = size > 22 + 65535 ? size - 22 - 65535 : 0;
  for (pos = size - 22;; pos--) {
    if (rd32 (b + pos) == 0x06054b50 && pos + 22 + rd16 (b + pos + 20) == size)
      break;
    if (pos == lo) {
      wk_set_err (err, es, "no zip end-of-directory record (truncated?)");
      return WK_ERR_FORMAT;
    }
  }
  if (rd16 (b + pos + 4) != 0 && rd16 (b + pos + 4) != 0xffff) {
    wk_set_err (err, es, "a multi-part zip archive");
    return WK_ERR_FORMAT;
  }
  n_total = rd16 (b + pos + 10);
  cd_size = rd32 (b + pos + 12);
  cd_off = rd32 (b + pos + 16);
  if (n_total == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu) {
    uint64_t r;
    if (pos < 20 || rd32 (b + pos - 20) != 0x07064b50) {
      wk_set_err (err, es, "zip64 sizes without a zip64 locator");
      return WK_ERR_FORMAT;
    }
    r = rd64 (b + pos - 20 + 8);
    if (!inside (r, 56, pos - 20) || rd32 (b + r) != 0x06064b50) {
      wk_set_err (err, es, "the zip64 end record is not where its locator "
          "says");
      return WK_ERR_FORMAT;
    }
    n_total = rd64 (b + r + 32);
    cd_size = rd64 (b + r + 40);
    cd_off = rd64 (b + r + 48);
  }
  if (!inside (cd_off, cd_size, size)) {
    wk_set_err (err, es, "the zip directory (offset %llu, %llu bytes) lies "
        "outside the file", (unsigned long long) cd_off,
        (unsigned long long) cd_size);
    return WK_ERR_FORMAT;
  }
  if (n_total == 0 || n_total > PT_MAX_ENTRIES || n_total > cd_size / 46) {
    wk_set_err (err, es, "the zip directory claims %llu entries in %llu "
        "bytes", (unsigned long long) n_total, (unsigned long long) cd_size);
    return WK_ERR_FORMAT;
  }
  e = calloc ((size_t) n_total, sizeof *e);
  if (!e) {
    wk_set_err (err, es, "out of memory");
    return WK_ERR_NOMEM;
  }
  p = cd_off;
  cd_end = cd_off + cd_size;
  for (i = 0; i < (int64_t) n_total; i++) {
    uint64_t usize, csize, loff, data;
    unsigned nl, xl, cl, flags;
    const uint8_t *x, *xe;

    if (!inside (p, 46, cd_end) || rd32 (b + p) != 0x02014b50) {
      wk_set_err (err, es, "zip directory entry %lld is damaged",
          (long long) i);
      goto fail;
    }
    flags = rd16 (b + p + 8);
    e[i].method = rd16 (b + p + 10);
    csize = rd32 (b + p + 20);
    usize = rd32 (b + p + 24);
    nl = rd16 (b + p + 28);
    xl = rd16 (b + p + 30);
    cl = rd16 (b + p + 32);
    loff = rd32 (b + p + 42);
    if (!inside (p + 46, (uint64_t) nl + xl + cl, cd_end)) {
      wk_set_err (err, es, "zip directory entry %lld runs past the "
          "directory", (long long) i);
      goto fail;
    }
    if (flags & 1) {
      wk_set_err (err, es, "an encrypted zip entry");
      goto fail;
    }
    e[i].name = (const char *) b + p + 46;
    e[i].name_len = nl;
    /* zip64 extra field: the 8-byte values of the fields saturated above,
     * in this order */
    x = b + p + 46 + nl;
    xe = x + xl;
    while (xe - x >= 4) {
      unsigned id = rd16 (x), len = rd16 (x + 2);
      const uint8_t *v = x + 4;
      if ((size_t) (xe - v) < len) {
        wk_set_err (err, es, "a zip extra field runs past its entry");
        goto fail;
      }
      if (id == 0x0001) {
        const uint8_t *ve = v + len;
        if (usize == 0xffffffffu) {
          if (ve - v < 8)
            goto bad64;
          usize = rd64 (v);
          v += 8;
        }
        if (csize == 0xffffffffu) {
          if (ve - v < 8)
            goto bad64;
          csize = rd64 (v);
          v += 8;
        }
        if (loff == 0xffffffffu) {
          if (ve - v < 8)
            goto bad64;
          loff = rd64 (v);
        }
      }
      x += 4 + len;
    }
    if (!inside (loff, 30, size) || rd32 (b + loff) != 0x04034b50) {
      wk_set_err (err, es, "zip entry '%.*s': no local header at offset "
          "%llu", (int) (nl < 80 ? nl : 80), e[i].name,
          (unsigned long long) loff);
      goto fail;
    }
    data = loff + 30 + rd16 (b + loff + 26) + rd16 (b + loff + 28);
    if (!inside (data, csize, size)) {
      wk_set_err (err, es, "zip entry '%.*s' (%llu bytes) runs past the "
          "end of the file (truncated?)", (int) (nl < 80 ? nl : 80),
          e[i].name, (unsigned long long) csize);
      goto fail;
    }
    if (e[i].method == 0 && csize != usize) {
      wk_set_err (err, es, "stored zip entry '%.*s' has sizes %llu and %llu",
          (int) (nl < 80 ? nl : 80), e[i].name, (unsigned long long) csize,
          (unsigned long long) usize);
      goto fail;
    }
    e[i].data = b + data;
    e[i].size = csize;
    p += 46 + (uint64_t) nl + xl + cl;
  }
  *out = e;
  *n_out = (int64_t) n_total;
  return WK_OK;

bad64:
  wk_set_err (err, es, "a zip64 extra field too short for its sizes");
fail:
  free (e);
  return WK_ERR_FORMAT;
}

/* ---- the pickle ------------------------------------------------------ */

enum
{
  P_NONE, P_BOOL, P_INT, P_FLOAT, P_STR, P_TUPLE, P_LIST, P_DICT, P_GLOBAL,
  P_STORAGE, P_TENSOR
};

typedef struct
{
  int kind;
  int64_t i;                    /* INT, BOOL; STORAGE: elements; TENSOR:
                                 * first element in its storage */
  const char *s, *s2;           /* STR; GLOBAL: module, name */
  uint32_t len, len2;
  int32_t *kids, n, cap;        /* TUPLE, LIST; DICT: key, value, ... */
  /* STORAGE */
  int dtype;                    /* wk_st_dtype, or -1: another type */
  int elem;                     /* bytes per element */
  const uint8_t *data;
  /* TENSOR */
  int32_t storage;
  int n_dims;
  int64_t shape[WK_MAX_DIMS];
} pnode;

typedef struct
{
  const uint8_t *start, *p, *end;
  pnode *nodes;
  int32_t n_nodes, cap_nodes;
  int32_t *stack, sp, cap_stack;
  int32_t *marks, n_marks, cap_marks;
  int32_t *memo;
  int64_t cap_memo, n_memo;
  const zentry *zip;
  int64_t n_zip;
  const char *prefix;           /* "NAME/" of NAME/data.pkl */
  size_t prefix_len;
  char *err;
  size_t es;
} pvm;

static bool
grow (void **a, int32_t * cap, size_t elem, int64_t need, int64_t limit)
{
  int64_t c = *cap ? *cap : 16;
  void *n;

  if (need <= *cap)
    return true;
  if (need > limit)
    return false;
  while (c < need)
    c *= 2;
  if (c > limit)
    c = limit;
  n = realloc (*a, (size_t) c * elem);
  if (!n)
    return false;
  *a = n;
  *cap = (int32_t) c;
  return true;
}

static int32_t
new_node (pvm * vm, int kind)
{
  pnode *n;

  if (!grow ((void **) &vm->nodes, &vm->cap_nodes, sizeof *vm->nodes,
          (int64_t) vm->n_nodes + 1, PT_MAX_NODES)) {
    wk_set_err (vm->err, vm->es, "the pickle builds more than %d objects",
        PT_MAX_NODES);
    return -1;
  }
  n = &vm->nodes[vm->n_nodes];
  memset (n, 0, sizeof *n);
  n->kind = kind;
  n->storage = -1;
  return vm->n_nodes++;
}

static bool
push (pvm * vm, int32_t v)
{
  if (v < 0)
    return false;
  if (!grow ((void **) &vm->stack, &vm->cap_stack, sizeof *vm->stack,
          (int64_t) vm->sp + 1, PT_MAX_STACK)) {
    wk_set_err (vm->err, vm->es, "the pickle's stack grows past %d",
        PT_MAX_STACK);
    return false;
  }
  vm->stack[vm->sp++] = v;
  return true;
}

static bool
add_kid (pvm * vm, int32_t c, int32_t v)
{
  pnode *n = &vm->nodes[c];

  if (!grow ((void **) &n->kids, &n->cap, sizeof *n->kids,
          (int64_t) n->n + 1, PT_MAX_STACK)) {
    wk_set_err (vm->err, vm->es, "a pickled container grows past %d items",
        PT_MAX_STACK);
    return false;
  }
  n->kids[n->n++] = v;
  return true;
}

/* The stack from the last mark (its first index), or -1. */
static int32_t
pop_mark (pvm * vm)
{
  if (vm->n_marks == 0) {
    wk_set_err (vm->err, vm->es, "pickle: an opcode needs a mark that is not "
        "there");
    return -1;
  }
  return vm->marks[--vm->n_marks];
}

/* Steps past an opcode's n bytes of argument, if the pickle holds them. */
static bool
take (pvm * vm, uint64_t n)
{
  if ((uint64_t) (vm->end - vm->p) < n) {
    wk_set_err (vm->err, vm->es, "the pickle ends inside an opcode");
    return false;
  }
  vm->p += n;
  return true;
}

static bool
need_stack (pvm * vm, int32_t n, int32_t floor)
{
  if (vm->sp - floor < n) {
    wk_set_err (vm->err, vm->es, "pickle: an opcode takes more values than "
        "the stack holds");
    return false;
  }
  return true;
}

static const pnode *
node (const pvm * vm, int32_t i)
{
  return &vm->nodes[i];
}

static bool
is_str (const pnode * n, const char *s)
{
  size_t l = strlen (s);
  return n->kind == P_STR && n->len == l && memcmp (n->s, s, l) == 0;
}

static bool
is_global (const pnode * n, const char *mod, const char *name)
{
  return n->kind == P_GLOBAL && n->len == strlen (mod)
      && memcmp (n->s, mod, n->len) == 0 && n->len2 == strlen (name)
      && memcmp (n->s2, name, n->len2) == 0;
}

static int32_t
new_str (pvm * vm, const uint8_t * s, uint64_t len)
{
  int32_t i;

  if (!take (vm, len))
    return -1;
  i = new_node (vm, P_STR);
  if (i >= 0) {
    vm->nodes[i].s = (const char *) s;
    vm->nodes[i].len = (uint32_t) len;
  }
  return i;
}

static int32_t
new_int (pvm * vm, int kind, int64_t v)
{
  int32_t i = new_node (vm, kind);
  if (i >= 0)
    vm->nodes[i].i = v;
  return i;
}

/* A tuple of the stack's values from index from on. */
static int32_t
new_tuple (pvm * vm, int32_t from)
{
  int32_t t = new_node (vm, P_TUPLE), k;

  if (t < 0)
    return -1;
  for (k = from; k < vm->sp; k++)
    if (!add_kid (vm, t, vm->stack[k]))
      return -1;
  vm->sp = from;
  return t;
}

/* The storages torch.save names (torch.XStorage), with their element
 * sizes; the three a knot can take from have a dtype. */
static bool
storage_type (const pnode * g, int *dtype, int *elem)
{
  static const struct
  {
    const char *name;
    int dtype, elem;
  } t[] = {
    {"FloatStorage", WK_ST_F32, 4}, {"HalfStorage", WK_ST_F16, 2},
    {"BFloat16Storage", WK_ST_BF16, 2}, {"DoubleStorage", -1, 8},
    {"LongStorage", -1, 8}, {"IntStorage", -1, 4}, {"ShortStorage", -1, 2},
    {"CharStorage", -1, 1}, {"ByteStorage", -1, 1}, {"BoolStorage", -1, 1},
  };

  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (is_global (g, "torch", t[i].name)) {
      *dtype = t[i].dtype;
      *elem = t[i].elem;
      return true;
    }
  return false;
}

/* BINPERSID: ('storage', torch.XStorage, key, location, numel) -> the
 * archive's entry PREFIX/data/KEY */
static int32_t
persistent_load (pvm * vm, int32_t pid)
{
  const pnode *t = node (vm, pid), *cls, *key, *num;
  int32_t s;
  int dtype, elem;
  int64_t i, numel;

  if (t->kind != P_TUPLE || t->n != 5 || !is_str (node (vm, t->kids[0]),
          "storage")) {
    wk_set_err (vm->err, vm->es, "pickle: a persistent id that is not a "
        "torch storage");
    return -1;
  }
  cls = node (vm, t->kids[1]);
  key = node (vm, t->kids[2]);
  num = node (vm, t->kids[4]);
  if (!storage_type (cls, &dtype, &elem)) {
    wk_set_err (vm->err, vm->es, "pickle: unknown storage type %.*s.%.*s",
        cls->kind == P_GLOBAL ? (int) (cls->len < 40 ? cls->len : 40) : 1,
        cls->kind == P_GLOBAL ? cls->s : "?",
        cls->kind == P_GLOBAL ? (int) (cls->len2 < 40 ? cls->len2 : 40) : 1,
        cls->kind == P_GLOBAL ? cls->s2 : "?");
    return -1;
  }
  if (key->kind != P_STR || num->kind != P_INT || num->i < 0) {
    wk_set_err (vm->err, vm->es, "pickle: a storage without a key or size");
    return -1;
  }
  for (i = 0; i < vm->n_zip; i++) {
    const zentry *z = &vm->zip[i];
    if (z->name_len == vm->prefix_len + 5 + key->len
        && memcmp (z->name, vm->prefix, vm->prefix_len) == 0
        && memcmp (z->name + vm->prefix_len, "data/", 5) == 0
        && memcmp (z->name + vm->prefix_len + 5, key->s, key->len) == 0)
      break;
  }
  if (i == vm->n_zip) {
    wk_set_err (vm->err, vm->es, "storage '%.*s' is not in the archive "
        "(truncated?)", (int) (key->len < 40 ? key->len : 40), key->s);
    return -1;
  }
  if (vm->zip[i].method != 0) {
    wk_set_err (vm->err, vm->es, "storage '%.*s' is compressed (zip method "
        "%d); torch.save stores them uncompressed",
        (int) (key->len < 40 ? key->len : 40), key->s, vm->zip[i].method);
    return -1;
  }
  if ((uint64_t) num->i > vm->zip[i].size / (uint64_t) elem) {
    wk_set_err (vm->err, vm->es, "storage '%.*s' claims %lld elements of %d "
        "bytes in %llu bytes", (int) (key->len < 40 ? key->len : 40), key->s,
        (long long) num->i, elem, (unsigned long long) vm->zip[i].size);
    return -1;
  }
  numel = num->i;
  /* (new_node may move the nodes: no pointer into them below) */
  s = new_node (vm, P_STORAGE);
  if (s < 0)
    return -1;
  vm->nodes[s].dtype = dtype;
  vm->nodes[s].elem = elem;
  vm->nodes[s].i = numel;
  vm->nodes[s].data = vm->zip[i].data;
  return s;
}

/* torch._utils._rebuild_tensor_v2 (storage, offset, size, stride,
 * requires_grad, hooks[, metadata]): a view that must be the storage's
 * elements offset .. offset + numel - 1 in row-major order. */
static int32_t
rebuild_tensor (pvm * vm, const pnode * args)
{
  const pnode *st, *off, *size, *stride;
  int64_t numel = 1, expect = 1, offset, shape[WK_MAX_DIMS];
  int32_t t, storage;
  int d, nd;

  if (args->n != 6 && args->n != 7) {
    wk_set_err (vm->err, vm->es, "pickle: _rebuild_tensor_v2 with %d "
        "arguments", args->n);
    return -1;
  }
  storage = args->kids[0];
  st = node (vm, storage);
  off = node (vm, args->kids[1]);
  size = node (vm, args->kids[2]);
  stride = node (vm, args->kids[3]);
  if (st->kind != P_STORAGE || off->kind != P_INT || off->i < 0
      || size->kind != P_TUPLE || stride->kind != P_TUPLE
      || size->n != stride->n) {
    wk_set_err (vm->err, vm->es, "pickle: a tensor without a storage, "
        "offset, shape or strides");
    return -1;
  }
  nd = size->n;
  if (nd > WK_MAX_DIMS) {
    wk_set_err (vm->err, vm->es, "a tensor of %d dimensions (at most %d)",
        nd, WK_MAX_DIMS);
    return -1;
  }
  for (d = 0; d < nd; d++) {
    const pnode *n = node (vm, size->kids[d]);
    if (n->kind != P_INT || n->i < 0 || n->i > (INT64_C (1) << 40)) {
      wk_set_err (vm->err, vm->es, "a tensor dimension that is not a size");
      return -1;
    }
    if (n->i && numel > (INT64_C (1) << 50) / n->i) {
      wk_set_err (vm->err, vm->es, "a tensor too large");
      return -1;
    }
    numel *= n->i;
    shape[d] = n->i;
  }
  /* row-major: the last dimension contiguous; sizes of 1 take any stride */
  for (d = nd - 1; d >= 0; d--) {
    const pnode *n = node (vm, size->kids[d]), *s = node (vm, stride->kids[d]);
    if (s->kind != P_INT || (n->i > 1 && s->i != expect)) {
      wk_set_err (vm->err, vm->es, "a tensor that is not contiguous (a view "
          "or a transposed tensor): save a .contiguous() copy");
      return -1;
    }
    expect *= n->i;
  }
  if (off->i > st->i || numel > st->i - off->i) {
    wk_set_err (vm->err, vm->es, "a tensor of %lld elements at %lld runs "
        "past its storage of %lld", (long long) numel, (long long) off->i,
        (long long) st->i);
    return -1;
  }
  offset = off->i;
  /* (new_node may move the nodes, args among them) */
  t = new_node (vm, P_TENSOR);
  if (t < 0)
    return -1;
  vm->nodes[t].storage = storage;
  vm->nodes[t].i = offset;
  vm->nodes[t].n_dims = nd;
  for (d = 0; d < nd; d++)
    vm->nodes[t].shape[d] = shape[d];
  return t;
}

static int32_t
reduce (pvm * vm, int32_t fn, int32_t args)
{
  const pnode *f = node (vm, fn), *a = node (vm, args);

  if (a->kind != P_TUPLE) {
    wk_set_err (vm->err, vm->es, "pickle: REDUCE without an argument tuple");
    return -1;
  }
  if (is_global (f, "collections", "OrderedDict") && a->n == 0)
    return new_node (vm, P_DICT);
  if (is_global (f, "torch._utils", "_rebuild_tensor_v2"))
    return rebuild_tensor (vm, a);
  if (is_global (f, "torch._utils", "_rebuild_parameter") && a->n == 3
      && node (vm, a->kids[0])->kind == P_TENSOR)
    return a->kids[0];
  if (f->kind == P_GLOBAL)
    wk_set_err (vm->err, vm->es, "the pickle builds a %.*s.%.*s, which a "
        "Whisper checkpoint does not hold (this reader builds only dicts and "
        "tensors)", (int) (f->len < 60 ? f->len : 60), f->s,
        (int) (f->len2 < 60 ? f->len2 : 60), f->s2);
  else
    wk_set_err (vm->err, vm->es, "pickle: REDUCE of something not callable");
  return -1;
}

static bool
memo_put (pvm * vm, int64_t key)
{
  if (vm->sp < 1 || key < 0 || key >= PT_MAX_MEMO) {
    wk_set_err (vm->err, vm->es, "pickle: a memo entry out of range");
    return false;
  }
  if (key >= vm->cap_memo) {
    int64_t c = vm->cap_memo ? vm->cap_memo : 64;
    int32_t *m;
    while (c <= key)
      c *= 2;
    m = realloc (vm->memo, (size_t) c * sizeof *m);
    if (!m) {
      wk_set_err (vm->err, vm->es, "out of memory");
      return false;
    }
    for (int64_t i = vm->cap_memo; i < c; i++)
      m[i] = -1;
    vm->memo = m;
    vm->cap_memo = c;
  }
  vm->memo[key] = vm->stack[vm->sp - 1];
  if (key >= vm->n_memo)
    vm->n_memo = key + 1;
  return true;
}

static bool
memo_get (pvm * vm, int64_t key)
{
  if (key < 0 || key >= vm->cap_memo || vm->memo[key] < 0) {
    wk_set_err (vm->err, vm->es, "pickle: a memo entry read before it is "
        "written");
    return false;
  }
  return push (vm, vm->memo[key]);
}

/* Runs the pickle; the result is the node left by STOP, or -1. */
static int32_t
run (pvm * vm)
{
  const uint8_t *b;

  while (vm->p < vm->end) {
    int op = *vm->p++;
    int32_t floor = vm->n_marks ? vm->marks[vm->n_marks - 1] : 0;
    int32_t v, m;

    b = vm->p;
    switch (op) {
      case 0x80:               /* PROTO */
        if (!take (vm, 1))
          return -1;
        if (*b > 5) {
          wk_set_err (vm->err, vm->es, "pickle protocol %d", *b);
          return -1;
        }
        break;
      case 0x95:               /* FRAME */
        if (!take (vm, 8))
          return -1;
        break;
      case '}':
        if (!push (vm, new_node (vm, P_DICT)))
          return -1;
        break;
      case ']':
        if (!push (vm, new_node (vm, P_LIST)))
          return -1;
        break;
      case ')':
        if (!push (vm, new_node (vm, P_TUPLE)))
          return -1;
        break;
      case 'N':
        if (!push (vm, new_node (vm, P_NONE)))
          return -1;
        break;
      case 0x88:               /* NEWTRUE */
      case 0x89:               /* NEWFALSE */
        if (!push (vm, new_int (vm, P_BOOL, op == 0x88)))
          return -1;
        break;
      case '(':
        if (!grow ((void **) &vm->marks, &vm->cap_marks, sizeof *vm->marks,
                (int64_t) vm->n_marks + 1, PT_MAX_STACK)) {
          wk_set_err (vm->err, vm->es, "pickle: too many marks");
          return -1;
        }
        vm->marks[vm->n_marks++] = vm->sp;
        break;
      case 'X':                /* BINUNICODE */
      case 'T':                /* BINSTRING */
      case 'B':                /* BINBYTES */
        if (!take (vm, 4) || !push (vm, new_str (vm, vm->p, rd32 (b))))
          return -1;
        break;
      case 0x8c:               /* SHORT_BINUNICODE */
      case 'U':                /* SHORT_BINSTRING */
      case 'C':                /* SHORT_BINBYTES */
        if (!take (vm, 1) || !push (vm, new_str (vm, vm->p, *b)))
          return -1;
        break;
      case 0x8d:               /* BINUNICODE8 */
        if (!take (vm, 8))
          return -1;
        if (rd64 (b) > (uint64_t) (vm->end - vm->p)) {
          wk_set_err (vm->err, vm->es, "the pickle ends inside a string");
          return -1;
        }
        if (!push (vm, new_str (vm, vm->p, rd64 (b))))
          return -1;
        break;
      case 'K':                /* BININT1 */
        if (!take (vm, 1) || !push (vm, new_int (vm, P_INT, *b)))
          return -1;
        break;
      case 'M':                /* BININT2 */
        if (!take (vm, 2) || !push (vm, new_int (vm, P_INT, rd16 (b))))
          return -1;
        break;
      case 'J':                /* BININT */
        if (!take (vm, 4)
            || !push (vm, new_int (vm, P_INT, (int32_t) rd32 (b))))
          return -1;
        break;
      case 0x8a:{              /* LONG1: little-endian two's complement */
        uint64_t u = 0;
        int n;
        if (!take (vm, 1))
          return -1;
        n = *b++;
        if (n > 8) {
          wk_set_err (vm->err, vm->es, "pickle: an integer of %d bytes", n);
          return -1;
        }
        if (!take (vm, n))
          return -1;
        for (int k = 0; k < n; k++)
          u |= (uint64_t) b[k] << (8 * k);
        if (n > 0 && n < 8 && (b[n - 1] & 0x80))
          u |= ~UINT64_C (0) << (8 * n);
        if (!push (vm, new_int (vm, P_INT, (int64_t) u)))
          return -1;
        break;
      }
      case 'G':                /* BINFLOAT: the value is never used */
        if (!take (vm, 8) || !push (vm, new_node (vm, P_FLOAT)))
          return -1;
        break;
      case 'q':                /* BINPUT */
        if (!take (vm, 1) || !memo_put (vm, *b))
          return -1;
        break;
      case 'r':                /* LONG_BINPUT */
        if (!take (vm, 4) || !memo_put (vm, rd32 (b)))
          return -1;
        break;
      case 0x94:               /* MEMOIZE */
        if (!memo_put (vm, vm->n_memo))
          return -1;
        break;
      case 'h':                /* BINGET */
        if (!take (vm, 1) || !memo_get (vm, *b))
          return -1;
        break;
      case 'j':                /* LONG_BINGET */
        if (!take (vm, 4) || !memo_get (vm, rd32 (b)))
          return -1;
        break;
      case 't':                /* TUPLE */
        if ((m = pop_mark (vm)) < 0 || !push (vm, new_tuple (vm, m)))
          return -1;
        break;
      case 0x85:               /* TUPLE1 .. TUPLE3 */
      case 0x86:
      case 0x87:
        if (!need_stack (vm, op - 0x84, floor)
            || !push (vm, new_tuple (vm, vm->sp - (op - 0x84))))
          return -1;
        break;
      case 's':{               /* SETITEM */
        int32_t d;
        if (!need_stack (vm, 3, floor))
          return -1;
        d = vm->stack[vm->sp - 3];
        if (vm->nodes[d].kind != P_DICT) {
          wk_set_err (vm->err, vm->es, "pickle: SETITEM on a non-dict");
          return -1;
        }
        if (!add_kid (vm, d, vm->stack[vm->sp - 2])
            || !add_kid (vm, d, vm->stack[vm->sp - 1]))
          return -1;
        vm->sp -= 2;
        break;
      }
      case 'u':{               /* SETITEMS */
        int32_t d;
        if ((m = pop_mark (vm)) < 0)
          return -1;
        if (m < 1 || (vm->sp - m) % 2) {
          wk_set_err (vm->err, vm->es, "pickle: SETITEMS without a dict or "
              "with an odd count");
          return -1;
        }
        d = vm->stack[m - 1];
        if (vm->nodes[d].kind != P_DICT) {
          wk_set_err (vm->err, vm->es, "pickle: SETITEMS on a non-dict");
          return -1;
        }
        for (int32_t k = m; k < vm->sp; k++)
          if (!add_kid (vm, d, vm->stack[k]))
            return -1;
        vm->sp = m;
        break;
      }
      case 'a':{               /* APPEND */
        int32_t l;
        if (!need_stack (vm, 2, floor))
          return -1;
        l = vm->stack[vm->sp - 2];
        if (vm->nodes[l].kind != P_LIST) {
          wk_set_err (vm->err, vm->es, "pickle: APPEND to a non-list");
          return -1;
        }
        if (!add_kid (vm, l, vm->stack[vm->sp - 1]))
          return -1;
        vm->sp--;
        break;
      }
      case 'e':{               /* APPENDS */
        int32_t l;
        if ((m = pop_mark (vm)) < 0)
          return -1;
        if (m < 1 || vm->nodes[l = vm->stack[m - 1]].kind != P_LIST) {
          wk_set_err (vm->err, vm->es, "pickle: APPENDS to a non-list");
          return -1;
        }
        for (int32_t k = m; k < vm->sp; k++)
          if (!add_kid (vm, l, vm->stack[k]))
            return -1;
        vm->sp = m;
        break;
      }
      case 'c':{               /* GLOBAL: "module\nname\n" */
        const uint8_t *nl1 = memchr (vm->p, '\n', (size_t) (vm->end - vm->p));
        const uint8_t *nl2 = nl1 ? memchr (nl1 + 1, '\n',
            (size_t) (vm->end - nl1 - 1)) : NULL;
        int32_t g;
        if (!nl2) {
          wk_set_err (vm->err, vm->es, "the pickle ends inside a GLOBAL");
          return -1;
        }
        if ((g = new_node (vm, P_GLOBAL)) < 0)
          return -1;
        vm->nodes[g].s = (const char *) vm->p;
        vm->nodes[g].len = (uint32_t) (nl1 - vm->p);
        vm->nodes[g].s2 = (const char *) nl1 + 1;
        vm->nodes[g].len2 = (uint32_t) (nl2 - nl1 - 1);
        vm->p = nl2 + 1;
        if (!push (vm, g))
          return -1;
        break;
      }
      case 0x93:{              /* STACK_GLOBAL */
        int32_t g;
        const pnode *mod, *name;
        if (!need_stack (vm, 2, floor))
          return -1;
        mod = node (vm, vm->stack[vm->sp - 2]);
        name = node (vm, vm->stack[vm->sp - 1]);
        if (mod->kind != P_STR || name->kind != P_STR) {
          wk_set_err (vm->err, vm->es, "pickle: STACK_GLOBAL of non-strings");
          return -1;
        }
        if ((g = new_node (vm, P_GLOBAL)) < 0)
          return -1;
        mod = node (vm, vm->stack[vm->sp - 2]);
        name = node (vm, vm->stack[vm->sp - 1]);
        vm->nodes[g].s = mod->s;
        vm->nodes[g].len = mod->len;
        vm->nodes[g].s2 = name->s;
        vm->nodes[g].len2 = name->len;
        vm->sp -= 2;
        if (!push (vm, g))
          return -1;
        break;
      }
      case 'Q':                /* BINPERSID */
        if (!need_stack (vm, 1, floor))
          return -1;
        v = persistent_load (vm, vm->stack[vm->sp - 1]);
        if (v < 0)
          return -1;
        vm->stack[vm->sp - 1] = v;
        break;
      case 'R':                /* REDUCE */
        if (!need_stack (vm, 2, floor))
          return -1;
        v = reduce (vm, vm->stack[vm->sp - 2], vm->stack[vm->sp - 1]);
        if (v < 0)
          return -1;
        vm->sp -= 2;
        if (!push (vm, v))
          return -1;
        break;
      case 'b':                /* BUILD: a dict's attributes (the state
                                 * dict's _metadata), dropped */
        if (!need_stack (vm, 2, floor))
          return -1;
        if (vm->nodes[vm->stack[vm->sp - 2]].kind != P_DICT) {
          wk_set_err (vm->err, vm->es, "pickle: BUILD of something other "
              "than a dict");
          return -1;
        }
        vm->sp--;
        break;
      case '0':                /* POP */
        if (!need_stack (vm, 1, floor))
          return -1;
        vm->sp--;
        break;
      case '1':                /* POP_MARK */
        if ((m = pop_mark (vm)) < 0)
          return -1;
        vm->sp = m;
        break;
      case '2':                /* DUP */
        if (!need_stack (vm, 1, floor) || !push (vm, vm->stack[vm->sp - 1]))
          return -1;
        break;
      case '.':                /* STOP */
        if (vm->sp != 1 || vm->n_marks) {
          wk_set_err (vm->err, vm->es, "pickle: STOP with %d values and %d "
              "marks left", vm->sp, vm->n_marks);
          return -1;
        }
        return vm->stack[0];
      default:
        wk_set_err (vm->err, vm->es, "pickle opcode 0x%02x at byte %td is "
            "not one torch.save writes", op, vm->p - 1 - vm->start);
        return -1;
    }
  }
  wk_set_err (vm->err, vm->es, "the pickle ends before its STOP "
      "(truncated?)");
  return -1;
}

/* The value of key in a dict node, or -1. */
static int32_t
dict_get (const pvm * vm, int32_t d, const char *key)
{
  const pnode *n = node (vm, d);

  if (n->kind != P_DICT)
    return -1;
  for (int32_t k = 0; k + 1 < n->n; k += 2)
    if (is_str (node (vm, n->kids[k]), key))
      return n->kids[k + 1];
  return -1;
}

static void
vm_free (pvm * vm)
{
  for (int32_t i = 0; i < vm->n_nodes; i++)
    free (vm->nodes[i].kids);
  free (vm->nodes);
  free (vm->stack);
  free (vm->marks);
  free (vm->memo);
}

/* ---- the checkpoint -------------------------------------------------- */

void
wk_torch_pt_free (wk_torch_pt * pt)
{
  if (!pt)
    return;
  for (int64_t i = 0; i < pt->n_tensors; i++)
    free (pt->tensors[i].name);
  free (pt->tensors);
  for (int i = 0; i < pt->n_dims; i++)
    free (pt->dim_names[i]);
  free (pt->dim_names);
  free (pt->dim_values);
  wk_unmap_file (pt->map_, pt->map_size_);
  free (pt);
}

static char *
copy_name (const pnode * s)
{
  char *c;

  if (s->kind != P_STR || memchr (s->s, '\0', s->len))
    return NULL;
  c = malloc ((size_t) s->len + 1);
  if (c) {
    memcpy (c, s->s, s->len);
    c[s->len] = '\0';
  }
  return c;
}

/* The tensors of the state dict sd and the integer members of dims (-1:
 * none) into pt. */
static wk_status
collect (const pvm * vm, int32_t sd, int32_t dims, wk_torch_pt * pt, char *err,
    size_t es)
{
  const pnode *d = node (vm, sd);
  int32_t k;

  if (d->kind != P_DICT) {
    wk_set_err (err, es, "model_state_dict is not a dict");
    return WK_ERR_FORMAT;
  }
  pt->tensors = calloc ((size_t) d->n / 2 + 1, sizeof *pt->tensors);
  if (!pt->tensors)
    return WK_ERR_NOMEM;
  for (k = 0; k + 1 < d->n; k += 2) {
    const pnode *key = node (vm, d->kids[k]), *t = node (vm, d->kids[k + 1]);
    const pnode *st;
    wk_st_tensor *o;
    int64_t numel = 1;

    if (key->kind != P_STR || t->kind != P_TENSOR) {
      wk_set_err (err, es, "model_state_dict holds a %s that is not a "
          "named tensor", key->kind == P_STR ? "value" : "key");
      return WK_ERR_FORMAT;
    }
    st = node (vm, t->storage);
    if (st->dtype < 0 || t->n_dims == 0) {
      pt->n_skipped++;
      continue;
    }
    o = &pt->tensors[pt->n_tensors];
    if (!(o->name = copy_name (key))) {
      wk_set_err (err, es, "a tensor name with a NUL byte");
      return WK_ERR_FORMAT;
    }
    pt->n_tensors++;
    for (int64_t j = 0; j + 1 < pt->n_tensors; j++)
      if (strcmp (pt->tensors[j].name, o->name) == 0) {
        wk_set_err (err, es, "tensor '%.80s' twice in the state dict", o->name);
        return WK_ERR_FORMAT;
      }
    o->dtype = (wk_st_dtype) st->dtype;
    o->n_dims = t->n_dims;
    for (int j = 0; j < WK_MAX_DIMS; j++)
      o->shape[j] = j < t->n_dims ? t->shape[j] : 1;
    for (int j = 0; j < t->n_dims; j++)
      numel *= t->shape[j];
    o->data = st->data + (size_t) t->i * (size_t) st->elem;
    o->nbytes = (size_t) numel *(size_t) st->elem;
  }
  if (dims >= 0) {
    const pnode *dd = node (vm, dims);
    if (dd->kind != P_DICT) {
      wk_set_err (err, es, "dims is not a dict");
      return WK_ERR_FORMAT;
    }
    pt->dim_names = calloc ((size_t) dd->n / 2 + 1, sizeof *pt->dim_names);
    pt->dim_values = calloc ((size_t) dd->n / 2 + 1, sizeof *pt->dim_values);
    if (!pt->dim_names || !pt->dim_values)
      return WK_ERR_NOMEM;
    for (k = 0; k + 1 < dd->n; k += 2) {
      const pnode *key = node (vm, dd->kids[k]), *v = node (vm,
          dd->kids[k + 1]);
      if (key->kind != P_STR || v->kind != P_INT)
        continue;
      if (!(pt->dim_names[pt->n_dims] = copy_name (key))) {
        wk_set_err (err, es, "a dims name with a NUL byte");
        return WK_ERR_FORMAT;
      }
      pt->dim_values[pt->n_dims++] = v->i;
    }
  }
  return WK_OK;
}

wk_status
wk_torch_pt_open_memory (const void *data, size_t size, wk_torch_pt ** out,
    char *err, size_t err_size)
{
  const uint8_t *b = data;
  zentry *zip = NULL;
  int64_t n_zip = 0, i, pkl = -1;
  pvm vm;
  wk_torch_pt *pt = NULL;
  wk_status status;
  int32_t root, sd, dims;

  if (!out || (!data && size))
    return WK_ERR_ARG;
  *out = NULL;
  memset (&vm, 0, sizeof vm);
  if (!wk_torch_pt_sniff (data, size)) {
    wk_set_err (err, err_size, "not a zip archive (torch.save's format since "
        "PyTorch 1.6; an older checkpoint must be saved again)");
    return WK_ERR_FORMAT;
  }
  status = zip_read (b, size, &zip, &n_zip, err, err_size);
  if (status != WK_OK)
    return status;
  /* NAME/data.pkl, the one pickle at the archive's top level */
  for (i = 0; i < n_zip; i++) {
    const char *slash = memchr (zip[i].name, '/', zip[i].name_len);
    if (slash && (size_t) (zip[i].name + zip[i].name_len - slash) == 9
        && memcmp (slash, "/data.pkl", 9) == 0) {
      if (pkl >= 0) {
        wk_set_err (err, err_size, "two pickles (data.pkl) in the archive");
        status = WK_ERR_FORMAT;
        goto out;
      }
      pkl = i;
    }
  }
  if (pkl < 0) {
    wk_set_err (err, err_size, "a zip archive without a PyTorch pickle "
        "(NAME/data.pkl): not a torch.save checkpoint");
    status = WK_ERR_FORMAT;
    goto out;
  }
  if (zip[pkl].method != 0 || zip[pkl].size > PT_MAX_PICKLE) {
    wk_set_err (err, err_size, "data.pkl is compressed or over %u MiB",
        PT_MAX_PICKLE >> 20);
    status = WK_ERR_FORMAT;
    goto out;
  }
  for (i = 0; i < n_zip; i++) {
    /* torch >= 2.1 says which byte order the storages are in */
    if (zip[i].name_len == zip[pkl].name_len - 8 + 9
        && memcmp (zip[i].name, zip[pkl].name, zip[pkl].name_len - 8) == 0
        && memcmp (zip[i].name + zip[pkl].name_len - 8, "byteorder", 9) == 0
        && !(zip[i].size == 6 && memcmp (zip[i].data, "little", 6) == 0)) {
      wk_set_err (err, err_size, "storages not in little-endian byte order");
      status = WK_ERR_UNSUPPORTED;
      goto out;
    }
  }
  vm.start = vm.p = zip[pkl].data;
  vm.end = zip[pkl].data + zip[pkl].size;
  vm.zip = zip;
  vm.n_zip = n_zip;
  vm.prefix = zip[pkl].name;
  vm.prefix_len = zip[pkl].name_len - 8;
  vm.err = err;
  vm.es = err_size;
  root = run (&vm);
  if (root < 0) {
    status = WK_ERR_FORMAT;
    goto out;
  }
  if (node (&vm, root)->kind != P_DICT) {
    wk_set_err (err, err_size, "the checkpoint is not a dict");
    status = WK_ERR_FORMAT;
    goto out;
  }
  sd = dict_get (&vm, root, "model_state_dict");
  dims = dict_get (&vm, root, "dims");
  if (sd < 0)
    sd = root;
  pt = calloc (1, sizeof *pt);
  if (!pt) {
    status = WK_ERR_NOMEM;
    goto out;
  }
  status = collect (&vm, sd, dims, pt, err, err_size);
  if (status == WK_ERR_NOMEM)
    wk_set_err (err, err_size, "out of memory");

out:
  vm_free (&vm);
  free (zip);
  if (status != WK_OK) {
    wk_torch_pt_free (pt);
    return status;
  }
  *out = pt;
  return WK_OK;
}

static wk_status
parse_mapped (const void *data, size_t size, void *out, char *err,
    size_t err_size)
{
  return wk_torch_pt_open_memory (data, size, out, err, err_size);
}

wk_status
wk_torch_pt_open (const char *path, wk_torch_pt ** out, char *err,
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
    (*out)->map_ = (void *) map;
    (*out)->map_size_ = size;
  }
  return st;
}

bool
wk_torch_pt_dim (const wk_torch_pt * pt, const char *name, int64_t * value)
{
  for (int i = 0; pt && i < pt->n_dims; i++)
    if (strcmp (pt->dim_names[i], name) == 0) {
      *value = pt->dim_values[i];
      return true;
    }
  return false;
}
