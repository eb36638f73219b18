/* Hugging Face Whisper checkpoints: safetensors, JSON side files, name
 * mapping, and Whisper's mel filterbank. */
#include "safetensors.h"
#include "wk-err.h"
#include "mapfile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- mel filterbank ---------------------------------------------------- */

/* Slaney's mel scale: linear below 1 kHz, logarithmic above. */
#define MEL_F_SP (200.0 / 3.0)
#define MEL_MIN_LOG_HZ 1000.0
#define MEL_MIN_LOG_MEL (MEL_MIN_LOG_HZ / MEL_F_SP)

static double
mel_logstep (void)
{
  return log (6.4) / 27.0;
}

static double
hz_to_mel (double f)
{
  if (f >= MEL_MIN_LOG_HZ)
    return MEL_MIN_LOG_MEL + log (f / MEL_MIN_LOG_HZ) / mel_logstep ();
  return f / MEL_F_SP;
}

static double
mel_to_hz (double m)
{
  if (m >= MEL_MIN_LOG_MEL)
    return MEL_MIN_LOG_HZ * exp (mel_logstep () * (m - MEL_MIN_LOG_MEL));
  return MEL_F_SP * m;
}

void
wk_mel_filters_slaney (int n_mels, int n_fft, int sample_rate, float *out)
{
  int n_bins = n_fft / 2 + 1;
  double *mel_f = malloc ((size_t) (n_mels + 2) * sizeof (double));
  double *fft_f = malloc ((size_t) n_bins * sizeof (double));
  double max_mel, step, bin_hz;

  if (!mel_f || !fft_f) {
    free (mel_f);
    free (fft_f);
    memset (out, 0, (size_t) n_mels * (size_t) n_bins * sizeof (float));
    return;
  }
  /* numpy.fft.rfftfreq(n_fft, 1/sr), evaluated the same way */
  bin_hz = 1.0 / ((double) n_fft * (1.0 / (double) sample_rate));
  for (int k = 0; k < n_bins; k++)
    fft_f[k] = ((double) k) * bin_hz;
  /* n_mels + 2 points evenly spaced in mel from 0 to sr/2 (linspace) */
  max_mel = hz_to_mel ((double) sample_rate / 2.0);
  step = max_mel / (double) (n_mels + 1);
  for (int i = 0; i < n_mels + 2; i++)
    mel_f[i] = mel_to_hz (i == n_mels + 1 ? max_mel : (double) i * step);

  for (int i = 0; i < n_mels; i++) {
    double lo = mel_f[i + 1] - mel_f[i], hi = mel_f[i + 2] - mel_f[i + 1];
    /* Slaney normalisation: each triangle has unit area */
    double enorm = 2.0 / (mel_f[i + 2] - mel_f[i]);
    for (int k = 0; k < n_bins; k++) {
      double lower = -(mel_f[i] - fft_f[k]) / lo;
      double upper = (mel_f[i + 2] - fft_f[k]) / hi;
      double w = lower < upper ? lower : upper;
      /* librosa stores the triangle in float32, then scales it */
      float w32 = (float) (w > 0.0 ? w : 0.0);
      out[(size_t) i * n_bins + k] = (float) ((double) w32 * enorm);
    }
  }
  free (mel_f);
  free (fft_f);
}

/* ---- a strict JSON parser (RFC 8259) ------------------------------------
 *
 * Parses into a flat array of nodes; children are linked by index. Strings
 * are decoded (escapes, UTF-8 checked) into an arena; numbers keep their
 * text and are read as exact integers on demand. Nesting is bounded, and
 * every node consumes at least one input byte, so memory is bounded by the
 * input size. */

#define JSON_MAX_DEPTH 64

typedef enum
{
  J_NULL, J_FALSE, J_TRUE, J_NUM, J_STR, J_ARR, J_OBJ
} jtype;

typedef struct
{
  jtype t;
  size_t str;                   /* J_STR: offset of the decoded bytes */
  size_t len;                   /* J_STR bytes; J_NUM text length; J_ARR/J_OBJ count */
  size_t num;                   /* J_NUM: offset of the text in the input */
  size_t key, key_len;          /* member of an object: decoded key */
  int64_t first, next;          /* children / siblings, -1 = none */
} jnode;

typedef struct
{
  const char *in;
  size_t n, pos;
  jnode *nodes;
  size_t n_nodes, cap_nodes;
  char *arena;
  size_t arena_len;
  char *err;
  size_t err_size;
  int depth;
} jparser;

static bool
j_fail (jparser * p, const char *what)
{
  wk_set_err (p->err, p->err_size, "JSON: %s at byte %zu", what, p->pos);
  return false;
}

static void
j_ws (jparser * p)
{
  while (p->pos < p->n && (p->in[p->pos] == ' ' || p->in[p->pos] == '\t'
          || p->in[p->pos] == '\n' || p->in[p->pos] == '\r'))
    p->pos++;
}

static int64_t
j_new (jparser * p, jtype t)
{
  jnode *nd;

  if (p->n_nodes == p->cap_nodes) {
    size_t cap = p->cap_nodes ? 2 * p->cap_nodes : 256;
    jnode *nn = realloc (p->nodes, cap * sizeof *nn);
    if (!nn)
      return -1;
    p->nodes = nn;
    p->cap_nodes = cap;
  }
  nd = &p->nodes[p->n_nodes];
  memset (nd, 0, sizeof *nd);
  nd->t = t;
  nd->first = nd->next = -1;
  return (int64_t) p->n_nodes++;
}

static int
hexval (char c)
{
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

static bool
j_hex4 (jparser * p, uint32_t * v)
{
  *v = 0;
  if (p->n - p->pos < 4)
    return j_fail (p, "truncated \\u escape");
  for (int i = 0; i < 4; i++) {
    int h = hexval (p->in[p->pos + i]);
    if (h < 0)
      return j_fail (p, "bad \\u escape");
    *v = *v << 4 | (uint32_t) h;
  }
  p->pos += 4;
  return true;
}

static void
j_put_utf8 (jparser * p, uint32_t cp)
{
  char *o = p->arena + p->arena_len;
  if (cp < 0x80) {
    o[0] = (char) cp;
    p->arena_len += 1;
  } else if (cp < 0x800) {
    o[0] = (char) (0xc0 | cp >> 6);
    o[1] = (char) (0x80 | (cp & 0x3f));
    p->arena_len += 2;
  } else if (cp < 0x10000) {
    o[0] = (char) (0xe0 | cp >> 12);
    o[1] = (char) (0x80 | ((cp >> 6) & 0x3f));
    o[2] = (char) (0x80 | (cp & 0x3f));
    p->arena_len += 3;
  } else {
    o[0] = (char) (0xf0 | cp >> 18);
    o[1] = (char) (0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char) (0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char) (0x80 | (cp & 0x3f));
    p->arena_len += 4;
  }
}

/* Length of a valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t
utf8_len (const unsigned char *s, size_t n, uint32_t * cp)
{
  uint32_t c = s[0];
  size_t len;
  uint32_t min;

  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  if ((c & 0xe0) == 0xc0) {
    len = 2;
    c &= 0x1f;
    min = 0x80;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3;
    c &= 0x0f;
    min = 0x800;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4;
    c &= 0x07;
    min = 0x10000;
  } else
    return 0;
  if (n < len)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    c = c << 6 | (s[i] & 0x3f);
  }
  if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
    return 0;
  *cp = c;
  return len;
}

/* Decodes a string (p->pos at the opening quote) into the arena. */
static bool
j_string (jparser * p, size_t *off, size_t *len)
{
  p->pos++;
  *off = p->arena_len;
  for (;;) {
    unsigned char c;
    if (p->pos >= p->n)
      return j_fail (p, "unterminated string");
    c = (unsigned char) p->in[p->pos];
    if (c == '"') {
      p->pos++;
      break;
    }
    if (c < 0x20)
      return j_fail (p, "control character in string");
    if (c == '\\') {
      char e;
      p->pos++;
      if (p->pos >= p->n)
        return j_fail (p, "unterminated escape");
      e = p->in[p->pos++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          p->arena[p->arena_len++] = e;
          break;
        case 'b':
          p->arena[p->arena_len++] = '\b';
          break;
        case 'f':
          p->arena[p->arena_len++] = '\f';
          break;
        case 'n':
          p->arena[p->arena_len++] = '\n';
          break;
        case 'r':
          p->arena[p->arena_len++] = '\r';
          break;
        case 't':
          p->arena[p->arena_len++] = '\t';
          break;
        case 'u':{
          uint32_t cp, lo;
          if (!j_hex4 (p, &cp))
            return false;
          if (cp >= 0xdc00 && cp <= 0xdfff)
            return j_fail (p, "lone low surrogate");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            if (p->n - p->pos < 2 || p->in[p->pos] != '\\'
                || p->in[p->pos + 1] != 'u')
              return j_fail (p, "lone high surrogate");
            p->pos += 2;
            if (!j_hex4 (p, &lo))
              return false;
            if (lo < 0xdc00 || lo > 0xdfff)
              return j_fail (p, "bad surrogate pair");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          }
          /* a \uXXXX escape (6 input bytes) decodes to at most 3 bytes,
           * a pair (12) to 4: the arena (input size) is never exceeded */
          j_put_utf8 (p, cp);
          break;
        }
        default:
          p->pos--;
          return j_fail (p, "bad escape");
      }
    } else {
      uint32_t cp;
      size_t l = utf8_len ((const unsigned char *) p->in + p->pos,
          p->n - p->pos, &cp);
      if (l == 0)
        return j_fail (p, "invalid UTF-8 in string");
      memcpy (p->arena + p->arena_len, p->in + p->pos, l);
      p->arena_len += l;
      p->pos += l;
    }
  }
  *len = p->arena_len - *off;
  /* keep decoded strings NUL-terminated for convenience; the closing
   * quote paid for this byte */
  p->arena[p->arena_len++] = '\0';
  return true;
}

static bool j_value (jparser * p, int64_t * out);

static bool
j_number (jparser * p, int64_t * out)
{
  size_t start = p->pos;
  int64_t id;

  if (p->pos < p->n && p->in[p->pos] == '-')
    p->pos++;
  if (p->pos >= p->n)
    return j_fail (p, "truncated number");
  if (p->in[p->pos] == '0')
    p->pos++;
  else if (p->in[p->pos] >= '1' && p->in[p->pos] <= '9')
    while (p->pos < p->n && p->in[p->pos] >= '0' && p->in[p->pos] <= '9')
      p->pos++;
  else
    return j_fail (p, "bad number");
  if (p->pos < p->n && p->in[p->pos] == '.') {
    p->pos++;
    if (p->pos >= p->n || p->in[p->pos] < '0' || p->in[p->pos] > '9')
      return j_fail (p, "bad fraction");
    while (p->pos < p->n && p->in[p->pos] >= '0' && p->in[p->pos] <= '9')
      p->pos++;
  }
  if (p->pos < p->n && (p->in[p->pos] == 'e' || p->in[p->pos] == 'E')) {
    p->pos++;
    if (p->pos < p->n && (p->in[p->pos] == '+' || p->in[p->pos] == '-'))
      p->pos++;
    if (p->pos >= p->n || p->in[p->pos] < '0' || p->in[p->pos] > '9')
      return j_fail (p, "bad exponent");
    while (p->pos < p->n && p->in[p->pos] >= '0' && p->in[p->pos] <= '9')
      p->pos++;
  }
  id = j_new (p, J_NUM);
  if (id < 0)
    return j_fail (p, "out of memory");
  p->nodes[id].num = start;
  p->nodes[id].len = p->pos - start;
  *out = id;
  return true;
}

static bool
j_lit (jparser * p, const char *lit, jtype t, int64_t * out)
{
  size_t l = strlen (lit);
  if (p->n - p->pos < l || memcmp (p->in + p->pos, lit, l) != 0)
    return j_fail (p, "unexpected character");
  p->pos += l;
  *out = j_new (p, t);
  return *out >= 0 || j_fail (p, "out of memory");
}

static bool
j_container (jparser * p, bool obj, int64_t * out)
{
  int64_t id = j_new (p, obj ? J_OBJ : J_ARR), last = -1;
  char close = obj ? '}' : ']';

  if (id < 0)
    return j_fail (p, "out of memory");
  if (++p->depth > JSON_MAX_DEPTH)
    return j_fail (p, "nesting too deep");
  p->pos++;
  j_ws (p);
  if (p->pos < p->n && p->in[p->pos] == close) {
    p->pos++;
    p->depth--;
    *out = id;
    return true;
  }
  for (;;) {
    size_t key = 0, key_len = 0;
    int64_t child;

    j_ws (p);
    if (obj) {
      if (p->pos >= p->n || p->in[p->pos] != '"')
        return j_fail (p, "expected a member name");
      if (!j_string (p, &key, &key_len))
        return false;
      j_ws (p);
      if (p->pos >= p->n || p->in[p->pos] != ':')
        return j_fail (p, "expected ':'");
      p->pos++;
    }
    if (!j_value (p, &child))
      return false;
    p->nodes[child].key = key;
    p->nodes[child].key_len = key_len;
    if (last < 0)
      p->nodes[id].first = child;
    else
      p->nodes[last].next = child;
    last = child;
    p->nodes[id].len++;
    j_ws (p);
    if (p->pos < p->n && p->in[p->pos] == ',') {
      p->pos++;
      continue;
    }
    if (p->pos < p->n && p->in[p->pos] == close) {
      p->pos++;
      break;
    }
    return j_fail (p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
  }
  p->depth--;
  *out = id;
  return true;
}

static bool
j_value (jparser * p, int64_t * out)
{
  j_ws (p);
  if (p->pos >= p->n)
    return j_fail (p, "unexpected end");
  switch (p->in[p->pos]) {
    case '{':
      return j_container (p, true, out);
    case '[':
      return j_container (p, false, out);
    case '"':{
      int64_t id = j_new (p, J_STR);
      if (id < 0)
        return j_fail (p, "out of memory");
      if (!j_string (p, &p->nodes[id].str, &p->nodes[id].len))
        return false;
      *out = id;
      return true;
    }
    case 't':
      return j_lit (p, "true", J_TRUE, out);
    case 'f':
      return j_lit (p, "false", J_FALSE, out);
    case 'n':
      return j_lit (p, "null", J_NULL, out);
    default:
      return j_number (p, out);
  }
}

typedef struct
{
  const char *in;
  jnode *nodes;
  char *arena;
} jdoc;

static void
jdoc_free (jdoc * d)
{
  free (d->nodes);
  free (d->arena);
  memset (d, 0, sizeof *d);
}

/* Parses the whole buffer as one JSON value (root is node 0). */
static bool
jdoc_parse (jdoc * d, const char *in, size_t n, char *err, size_t err_size)
{
  jparser p = { 0 };
  int64_t root;

  memset (d, 0, sizeof *d);
  p.in = in;
  p.n = n;
  p.err = err;
  p.err_size = err_size;
  p.arena = malloc (n + 1);
  if (!p.arena) {
    wk_set_err (err, err_size, "JSON: out of memory");
    return false;
  }
  if (!j_value (&p, &root))
    goto fail;
  j_ws (&p);
  if (p.pos != n) {
    j_fail (&p, "trailing characters after the value");
    goto fail;
  }
  d->in = in;
  d->nodes = p.nodes;
  d->arena = p.arena;
  return true;
fail:
  free (p.nodes);
  free (p.arena);
  return false;
}

static const jnode *
j_member (const jdoc * d, const jnode * obj, const char *key)
{
  size_t kl = strlen (key);

  if (!obj || obj->t != J_OBJ)
    return NULL;
  for (int64_t c = obj->first; c >= 0; c = d->nodes[c].next)
    if (d->nodes[c].key_len == kl
        && memcmp (d->arena + d->nodes[c].key, key, kl) == 0)
      return &d->nodes[c];
  return NULL;
}

/* An exact non-negative integer (no fraction or exponent). */
static bool
j_u64 (const jdoc * d, const jnode * nd, uint64_t * v)
{
  uint64_t x = 0;

  if (!nd || nd->t != J_NUM || nd->len == 0)
    return false;
  for (size_t i = 0; i < nd->len; i++) {
    char c = d->in[nd->num + i];
    if (c < '0' || c > '9' || x > (UINT64_MAX - 9) / 10)
      return false;
    x = x * 10 + (uint64_t) (c - '0');
  }
  *v = x;
  return true;
}

static bool
j_str_is (const jdoc * d, const jnode * nd, const char *s)
{
  return nd && nd->t == J_STR && nd->len == strlen (s)
      && memcmp (d->arena + nd->str, s, nd->len) == 0;
}

/* ---- safetensors -------------------------------------------------------- */

#define ST_MAX_HEADER (100u << 20)      /* the format's own limit */

void
wk_safetensors_free (wk_safetensors * st)
{
  if (!st)
    return;
  for (int64_t i = 0; i < st->n_tensors; i++)
    free (st->tensors[i].name);
  free (st->tensors);
  wk_unmap_file (st->map_, st->map_size_);
  free (st);
}

static uint64_t
name_hash (const char *s)
{
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++) {
    h ^= (unsigned char) *s;
    h *= 0x100000001b3ull;
  }
  return h;
}

wk_status
wk_safetensors_open_memory (const void *data, size_t size,
    bool skip_other_dtypes, wk_safetensors ** out, char *err, size_t err_size)
{
  const uint8_t *b = data;
  uint64_t hlen = 0;
  size_t data_start, data_size;
  jdoc d;
  const jnode *root;
  wk_safetensors *st;
  wk_status status = WK_ERR_FORMAT;
  size_t *hash = NULL, hcap = 16;

  if (!out)
    return WK_ERR_ARG;
  *out = NULL;
  if (!data || size < 8) {
    wk_set_err (err, err_size, "safetensors: file of %zu bytes is too "
        "short", size);
    return WK_ERR_FORMAT;
  }
  for (int i = 0; i < 8; i++)
    hlen |= (uint64_t) b[i] << (8 * i);
  if (hlen < 2 || hlen > ST_MAX_HEADER || hlen > size - 8) {
    wk_set_err (err, err_size, "safetensors: header length %llu does not "
        "fit in the file (size %zu)", (unsigned long long) hlen, size);
    return WK_ERR_FORMAT;
  }
  data_start = 8 + (size_t) hlen;
  data_size = size - data_start;
  if (!jdoc_parse (&d, (const char *) b + 8, (size_t) hlen, err, err_size))
    return WK_ERR_FORMAT;
  root = &d.nodes[0];
  if (root->t != J_OBJ) {
    wk_set_err (err, err_size, "safetensors: header is not a JSON object");
    jdoc_free (&d);
    return WK_ERR_FORMAT;
  }
  st = calloc (1, sizeof *st);
  if (st)
    st->tensors = calloc (root->len ? root->len : 1, sizeof (wk_st_tensor));
  while (hcap < 2 * root->len)
    hcap *= 2;
  hash = calloc (hcap, sizeof *hash);
  if (!st || !st->tensors || !hash) {
    wk_set_err (err, err_size, "safetensors: out of memory");
    status = WK_ERR_NOMEM;
    goto out;
  }

  for (int64_t c = root->first; c >= 0; c = d.nodes[c].next) {
    const jnode *m = &d.nodes[c];
    const char *name = d.arena + m->key;
    const jnode *dt, *shape, *offs;
    wk_st_tensor *t;
    uint64_t begin, end, elems = 1, es;
    wk_st_dtype dtype;
    int n_dims = 0;

    if (strcmp (name, "__metadata__") == 0 && m->key_len == 12)
      continue;
    if (m->t != J_OBJ || m->key_len == 0 || strlen (name) != m->key_len) {
      wk_set_err (err, err_size, "safetensors: entry '%.64s' is not a "
          "tensor description", name);
      goto out;
    }
    dt = j_member (&d, m, "dtype");
    shape = j_member (&d, m, "shape");
    offs = j_member (&d, m, "data_offsets");
    if (!dt || dt->t != J_STR || !shape || shape->t != J_ARR || !offs
        || offs->t != J_ARR || offs->len != 2
        || !j_u64 (&d, &d.nodes[offs->first], &begin)
        || !j_u64 (&d, &d.nodes[d.nodes[offs->first].next], &end)) {
      wk_set_err (err, err_size, "safetensors: tensor '%.64s' lacks a "
          "valid dtype, shape or data_offsets", name);
      goto out;
    }
    if (end < begin || end > data_size) {
      wk_set_err (err, err_size, "safetensors: tensor '%.64s' data [%llu, "
          "%llu) is outside the data section (%zu bytes)", name,
          (unsigned long long) begin, (unsigned long long) end, data_size);
      goto out;
    }
    if (j_str_is (&d, dt, "F32")) {
      dtype = WK_ST_F32;
      es = 4;
    } else if (j_str_is (&d, dt, "F16")) {
      dtype = WK_ST_F16;
      es = 2;
    } else if (j_str_is (&d, dt, "BF16")) {
      dtype = WK_ST_BF16;
      es = 2;
    } else if (skip_other_dtypes) {
      continue;
    } else {
      wk_set_err (err, err_size, "safetensors: tensor '%.64s' has dtype "
          "'%.16s' (supported: F32, F16, BF16)", name, d.arena + dt->str);
      status = WK_ERR_UNSUPPORTED;
      goto out;
    }
    t = &st->tensors[st->n_tensors];
    if (shape->len < 1 || shape->len > WK_MAX_DIMS) {
      wk_set_err (err, err_size, "safetensors: tensor '%.64s' has %zu "
          "dimensions (supported: 1..4)", name, shape->len);
      goto out;
    }
    for (int64_t s = shape->first; s >= 0; s = d.nodes[s].next) {
      uint64_t v;
      if (!j_u64 (&d, &d.nodes[s], &v) || v < 1 || v > (uint64_t) INT64_MAX
          || v > (end - begin) / es / elems) {
        wk_set_err (err, err_size, "safetensors: tensor '%.64s' has a bad "
            "shape or a shape larger than its data", name);
        goto out;
      }
      elems *= v;
      t->shape[n_dims++] = (int64_t) v;
    }
    if (elems * es != end - begin) {
      wk_set_err (err, err_size, "safetensors: tensor '%.64s' shape needs "
          "%llu bytes but data_offsets give %llu", name,
          (unsigned long long) (elems * es),
          (unsigned long long) (end - begin));
      goto out;
    }
    t->name = strdup (name);
    if (!t->name) {
      wk_set_err (err, err_size, "safetensors: out of memory");
      status = WK_ERR_NOMEM;
      goto out;
    }
    t->dtype = dtype;
    t->n_dims = n_dims;
    t->data = b + data_start + begin;
    t->nbytes = (size_t) (end - begin);
    st->n_tensors++;
    {
      size_t h = (size_t) name_hash (name) & (hcap - 1);
      while (hash[h]) {
        if (strcmp (st->tensors[hash[h] - 1].name, name) == 0) {
          wk_set_err (err, err_size, "safetensors: tensor '%.64s' appears "
              "twice", name);
          goto out;
        }
        h = (h + 1) & (hcap - 1);
      }
      hash[h] = (size_t) st->n_tensors;
    }
  }
  status = WK_OK;

out:
  free (hash);
  jdoc_free (&d);
  if (status != WK_OK) {
    wk_safetensors_free (st);
    return status;
  }
  *out = st;
  return WK_OK;
}

static wk_status
parse_mapped (const void *data, size_t size, void *out, char *err,
    size_t err_size)
{
  return wk_safetensors_open_memory (data, size, true, out, err, err_size);
}

wk_status
wk_safetensors_open (const char *path, wk_safetensors ** out, char *err,
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

const wk_st_tensor *
wk_safetensors_find (const wk_safetensors * st, const char *name)
{
  for (int64_t i = 0; st && i < st->n_tensors; i++)
    if (strcmp (st->tensors[i].name, name) == 0)
      return &st->tensors[i];
  return NULL;
}

void
wk_st_to_f32 (wk_st_dtype dtype, const void *src, float *dst, size_t n)
{
  const uint8_t *s = src;

  for (size_t i = 0; i < n; i++) {
    switch (dtype) {
      case WK_ST_F32:
        memcpy (&dst[i], s + 4 * i, 4);
        break;
      case WK_ST_F16:
        dst[i] = wk_fp16_to_fp32 ((uint16_t) (s[2 * i] | s[2 * i + 1] << 8));
        break;
      case WK_ST_BF16:{
        /* bfloat16 is the top half of an f32 */
        uint32_t u = (uint32_t) (s[2 * i] | s[2 * i + 1] << 8) << 16;
        memcpy (&dst[i], &u, 4);
        break;
      }
    }
  }
}

/* ---- Hugging Face names ------------------------------------------------- */

static bool
map_layer_rest (const char *rest, char *buf, size_t n)
{
  static const char *const map[][2] = {
    {"self_attn.q_proj.", "attn.query."},
    {"self_attn.k_proj.", "attn.key."},
    {"self_attn.v_proj.", "attn.value."},
    {"self_attn.out_proj.", "attn.out."},
    {"self_attn_layer_norm.", "attn_ln."},
    {"encoder_attn.q_proj.", "cross_attn.query."},
    {"encoder_attn.k_proj.", "cross_attn.key."},
    {"encoder_attn.v_proj.", "cross_attn.value."},
    {"encoder_attn.out_proj.", "cross_attn.out."},
    {"encoder_attn_layer_norm.", "cross_attn_ln."},
    {"fc1.", "mlp.0."},
    {"fc2.", "mlp.2."},
    {"final_layer_norm.", "mlp_ln."},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
    size_t l = strlen (map[i][0]);
    if (strncmp (rest, map[i][0], l) == 0) {
      const char *wb = rest + l;
      if (strcmp (wb, "weight") && strcmp (wb, "bias"))
        return false;
      return (size_t) snprintf (buf, n, "%s%s", map[i][1], wb) < n;
    }
  }
  return false;
}

bool
wk_hf_name_to_openai (const char *hf, char *out, size_t out_size)
{
  const char *part, *rest;
  char tail[128];
  bool enc;

  if (strncmp (hf, "model.", 6) == 0)
    hf += 6;
  if (strncmp (hf, "encoder.", 8) == 0) {
    enc = true;
    rest = hf + 8;
    part = "encoder";
  } else if (strncmp (hf, "decoder.", 8) == 0) {
    enc = false;
    rest = hf + 8;
    part = "decoder";
  } else
    return false;

  if (enc && (!strcmp (rest, "conv1.weight") || !strcmp (rest, "conv1.bias")
          || !strcmp (rest, "conv2.weight") || !strcmp (rest, "conv2.bias")))
    return (size_t) snprintf (out, out_size, "encoder.%s", rest) < out_size;
  if (!strcmp (rest, "embed_positions.weight"))
    return (size_t) snprintf (out, out_size, "%s.positional_embedding",
        part) < out_size;
  if (!enc && !strcmp (rest, "embed_tokens.weight"))
    return (size_t) snprintf (out, out_size,
        "decoder.token_embedding.weight") < out_size;
  if (!strcmp (rest, "layer_norm.weight") || !strcmp (rest, "layer_norm.bias"))
    return (size_t) snprintf (out, out_size, "%s.%s.%s", part,
        enc ? "ln_post" : "ln", rest + strlen ("layer_norm.")) < out_size;
  if (strncmp (rest, "layers.", 7) == 0) {
    char *end;
    long idx = strtol (rest + 7, &end, 10);
    if (end == rest + 7 || *end != '.' || idx < 0 || idx > 1000
        || (rest[7] == '0' && end != rest + 8))
      return false;
    if (!map_layer_rest (end + 1, tail, sizeof tail))
      return false;
    return (size_t) snprintf (out, out_size, "%s.blocks.%ld.%s", part, idx,
        tail) < out_size;
  }
  return false;
}

/* ---- config.json -------------------------------------------------------- */

wk_status
wk_hf_config_parse (const char *json, size_t len, wk_hf_config * cfg,
    char *err, size_t err_size)
{
  static const char *keys[10] = { "vocab_size", "max_source_positions",
    "d_model", "encoder_attention_heads", "encoder_layers",
    "max_target_positions", "d_model", "decoder_attention_heads",
    "decoder_layers", "num_mel_bins"
  };
  int32_t *dst[10] = { &cfg->n_vocab, &cfg->n_audio_ctx, &cfg->n_audio_state,
    &cfg->n_audio_head, &cfg->n_audio_layer, &cfg->n_text_ctx,
    &cfg->n_text_state, &cfg->n_text_head, &cfg->n_text_layer, &cfg->n_mels
  };
  jdoc d;

  if (!jdoc_parse (&d, json, len, err, err_size))
    return WK_ERR_FORMAT;
  for (int i = 0; i < 10; i++) {
    uint64_t v;
    if (!j_u64 (&d, j_member (&d, &d.nodes[0], keys[i]), &v) || v < 1
        || v > (1u << 24)) {
      wk_set_err (err, err_size, "config.json: '%s' is missing or not a "
          "positive integer", keys[i]);
      jdoc_free (&d);
      return WK_ERR_FORMAT;
    }
    *dst[i] = (int32_t) v;
  }
  jdoc_free (&d);
  return WK_OK;
}

/* ---- vocabulary --------------------------------------------------------- */

/* GPT-2 maps each byte to a printable code point: the printable Latin-1
 * bytes map to themselves, the others to 256, 257, ... in byte order. */
static void
byte_unicode_inverse (int16_t inv[324])
{
  int extra = 0;

  for (int i = 0; i < 324; i++)
    inv[i] = -1;
  for (int b = 0; b < 256; b++) {
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172)
        || (b >= 174 && b <= 255);
    if (printable)
      inv[b] = (int16_t) b;
    else
      inv[256 + extra++] = (int16_t) b;
  }
}

void
wk_hf_vocab_clear (wk_hf_vocab * vocab)
{
  if (!vocab)
    return;
  if (vocab->tokens)
    for (int32_t i = 0; i < vocab->n; i++)
      free (vocab->tokens[i]);
  free (vocab->tokens);
  free (vocab->lens);
  memset (vocab, 0, sizeof *vocab);
}

wk_status
wk_hf_vocab_parse (const char *json, size_t len, int32_t max_id,
    wk_hf_vocab * vocab, char *err, size_t err_size)
{
  jdoc d;
  const jnode *obj;
  int16_t inv[324];
  wk_status st = WK_ERR_FORMAT;

  memset (vocab, 0, sizeof *vocab);
  if (max_id < 1 || max_id > (1 << 24))
    return WK_ERR_ARG;
  if (!jdoc_parse (&d, json, len, err, err_size))
    return WK_ERR_FORMAT;
  obj = &d.nodes[0];
  /* tokenizer.json keeps the vocabulary in model.vocab. The test is the
   * shape, not the member's name: "model" is also an ordinary token of
   * Whisper's vocabulary (id 19849), so vocab.json has a "model" member
   * too, holding a number. */
  {
    const jnode *model = j_member (&d, obj, "model");
    const jnode *inner = j_member (&d, model, "vocab");
    if (inner && inner->t == J_OBJ)
      obj = inner;
  }
  if (!obj || obj->t != J_OBJ) {
    wk_set_err (err, err_size, "vocabulary: expected a JSON object of "
        "token: id (vocab.json) or tokenizer.json's model.vocab");
    goto out;
  }
  byte_unicode_inverse (inv);
  vocab->tokens = calloc ((size_t) max_id, sizeof (char *));
  vocab->lens = calloc ((size_t) max_id, sizeof (uint32_t));
  if (!vocab->tokens || !vocab->lens) {
    st = WK_ERR_NOMEM;
    wk_set_err (err, err_size, "vocabulary: out of memory");
    goto out;
  }
  vocab->n = max_id;            /* while filling, so clear() frees all */
  {
    int32_t top = 0;
    for (int64_t c = obj->first; c >= 0; c = d.nodes[c].next) {
      const jnode *m = &d.nodes[c];
      const unsigned char *s = (const unsigned char *) d.arena + m->key;
      uint64_t id;
      char *bytes;
      size_t bl = 0, i = 0;
      bool mapped = true;

      if (!j_u64 (&d, m, &id)) {
        wk_set_err (err, err_size, "vocabulary: the id of token '%.32s' is "
            "not a non-negative integer", (const char *) s);
        goto out;
      }
      if (id >= (uint64_t) max_id)
        continue;
      if (vocab->tokens[id]) {
        wk_set_err (err, err_size, "vocabulary: id %llu is used twice",
            (unsigned long long) id);
        goto out;
      }
      bytes = malloc (m->key_len + 1);
      if (!bytes) {
        st = WK_ERR_NOMEM;
        goto out;
      }
      while (i < m->key_len) {
        uint32_t cp;
        size_t l = utf8_len (s + i, m->key_len - i, &cp);
        if (l == 0 || cp >= 324 || inv[cp] < 0) {
          mapped = false;
          break;
        }
        bytes[bl++] = (char) inv[cp];
        i += l;
      }
      if (!mapped) {
        /* not a byte-level token (an added special token): keep it */
        memcpy (bytes, s, m->key_len);
        bl = m->key_len;
      }
      bytes[bl] = '\0';
      vocab->tokens[id] = bytes;
      vocab->lens[id] = (uint32_t) bl;
      if ((int32_t) id + 1 > top)
        top = (int32_t) id + 1;
    }
    /* gaps become empty strings; the count is the highest id + 1 */
    for (int32_t i = 0; i < top; i++)
      if (!vocab->tokens[i]) {
        vocab->tokens[i] = calloc (1, 1);
        if (!vocab->tokens[i]) {
          st = WK_ERR_NOMEM;
          goto out;
        }
      }
    for (int32_t i = top; i < max_id; i++)
      free (vocab->tokens[i]);
    vocab->n = top;
  }
  st = WK_OK;
out:
  jdoc_free (&d);
  if (st != WK_OK)
    wk_hf_vocab_clear (vocab);
  return st;
}

/* ---- special-token ids of the side files ------------------------------ */

void
wk_hf_named_ids_clear (wk_hf_named_ids * ids)
{
  if (!ids)
    return;
  for (int32_t i = 0; i < ids->n; i++)
    free (ids->names[i]);
  free (ids->names);
  free (ids->ids);
  memset (ids, 0, sizeof *ids);
}

/* Appends (name, id); false when out of memory. */
static bool
named_ids_add (wk_hf_named_ids * ids, const char *name, size_t len, uint64_t id)
{
  char *copy = malloc (len + 1);

  if (!copy)
    return false;
  memcpy (copy, name, len);
  copy[len] = '\0';
  ids->names[ids->n] = copy;
  ids->ids[ids->n] = (int64_t) id;
  ids->n++;
  return true;
}

wk_status
wk_hf_added_tokens_parse (const char *json, size_t len,
    wk_hf_named_ids * ids, char *err, size_t err_size)
{
  jdoc d;
  const jnode *root, *list;
  size_t count;
  wk_status st = WK_ERR_FORMAT;

  memset (ids, 0, sizeof *ids);
  if (!jdoc_parse (&d, json, len, err, err_size))
    return WK_ERR_FORMAT;
  root = &d.nodes[0];
  /* tokenizer.json: "added_tokens": [{"id": N, "content": "..."}, ...];
   * added_tokens.json: {"<|...|>": N, ...} (whose names could include
   * "added_tokens", hence the test on the member's type) */
  list = j_member (&d, root, "added_tokens");
  if (!list || list->t != J_ARR)
    list = root;
  if (list->t != J_OBJ && list->t != J_ARR) {
    wk_set_err (err, err_size, "added tokens: expected a JSON object of "
        "token: id or tokenizer.json's added_tokens list");
    goto out;
  }
  count = list->len;
  ids->names = calloc (count ? count : 1, sizeof *ids->names);
  ids->ids = calloc (count ? count : 1, sizeof *ids->ids);
  if (!ids->names || !ids->ids) {
    wk_set_err (err, err_size, "added tokens: out of memory");
    st = WK_ERR_NOMEM;
    goto out;
  }
  for (int64_t c = list->first; c >= 0; c = d.nodes[c].next) {
    const jnode *m = &d.nodes[c], *idn = m, *content;
    const char *name;
    size_t name_len;
    uint64_t id;

    if (list->t == J_ARR) {
      content = j_member (&d, m, "content");
      idn = j_member (&d, m, "id");
      if (!content || content->t != J_STR) {
        wk_set_err (err, err_size, "added tokens: an entry of added_tokens "
            "has no \"content\" string");
        goto out;
      }
      name = d.arena + content->str;
      name_len = content->len;
    } else {
      name = d.arena + m->key;
      name_len = m->key_len;
    }
    if (!j_u64 (&d, idn, &id) || id > INT32_MAX) {
      wk_set_err (err, err_size, "added tokens: the id of '%.*s' is not a "
          "non-negative integer", (int) (name_len < 40 ? name_len : 40), name);
      goto out;
    }
    if (!named_ids_add (ids, name, name_len, id)) {
      wk_set_err (err, err_size, "added tokens: out of memory");
      st = WK_ERR_NOMEM;
      goto out;
    }
  }
  st = WK_OK;
out:
  jdoc_free (&d);
  if (st != WK_OK)
    wk_hf_named_ids_clear (ids);
  return st;
}

wk_status
wk_hf_json_ids (const char *json, size_t len, const char *const *keys,
    int n_keys, int64_t * vals, char *err, size_t err_size)
{
  jdoc d;

  for (int i = 0; i < n_keys; i++)
    vals[i] = -1;
  if (!jdoc_parse (&d, json, len, err, err_size))
    return WK_ERR_FORMAT;
  if (d.nodes[0].t != J_OBJ) {
    wk_set_err (err, err_size, "expected a JSON object");
    jdoc_free (&d);
    return WK_ERR_FORMAT;
  }
  for (int i = 0; i < n_keys; i++) {
    const jnode *m = j_member (&d, &d.nodes[0], keys[i]);
    uint64_t v;
    if (!m || m->t == J_NULL)
      continue;
    if (!j_u64 (&d, m, &v) || v > INT32_MAX) {
      wk_set_err (err, err_size, "'%s' is not a token id", keys[i]);
      jdoc_free (&d);
      return WK_ERR_FORMAT;
    }
    vals[i] = (int64_t) v;
  }
  jdoc_free (&d);
  return WK_OK;
}

/* ---- generation_config.json's alignment heads -------------------------- */

wk_status
wk_hf_alignment_heads (const char *json, size_t len, uint32_t * pairs,
    int max, int *n, char *err, size_t err_size)
{
  const jnode *list;
  jdoc d;
  int k = 0;

  *n = -1;
  if (!jdoc_parse (&d, json, len, err, err_size))
    return WK_ERR_FORMAT;
  list = d.nodes[0].t == J_OBJ ? j_member (&d, &d.nodes[0],
      "alignment_heads") : NULL;
  if (!list || list->t == J_NULL) {
    jdoc_free (&d);
    return WK_OK;
  }
  if (list->t != J_ARR)
    goto bad;
  for (int64_t c = list->first; c >= 0; c = d.nodes[c].next) {
    const jnode *pr = &d.nodes[c];
    uint64_t l, h;
    if (pr->t != J_ARR || pr->len != 2 || !j_u64 (&d, &d.nodes[pr->first], &l)
        || !j_u64 (&d, &d.nodes[d.nodes[pr->first].next], &h)
        || l > 0xffff || h > 0xffff)
      goto bad;
    if (k == max) {
      wk_set_err (err, err_size, "more than %d alignment heads", max);
      jdoc_free (&d);
      return WK_ERR_FORMAT;
    }
    pairs[2 * k] = (uint32_t) l;
    pairs[2 * k + 1] = (uint32_t) h;
    k++;
  }
  *n = k;
  jdoc_free (&d);
  return WK_OK;
bad:
  wk_set_err (err, err_size, "\"alignment_heads\" is not a list of "
      "[layer, head] pairs");
  jdoc_free (&d);
  return WK_ERR_FORMAT;
}

/* ---- shard indexes ----------------------------------------------------- */

#define HF_MAX_SHARDS 4096

void
wk_hf_shards_clear (wk_hf_shards * sh)
{
  for (int32_t i = 0; sh && i < sh->n; i++)
    free (sh->files[i]);
  if (sh) {
    free (sh->files);
    memset (sh, 0, sizeof *sh);
  }
}

wk_status
wk_hf_shards_parse (const char *json, size_t len, wk_hf_shards * sh,
    char *err, size_t err_size)
{
  const jnode *map;
  jdoc d;

  memset (sh, 0, sizeof *sh);
  if (!jdoc_parse (&d, json, len, err, err_size))
    return WK_ERR_FORMAT;
  map = d.nodes[0].t == J_OBJ ? j_member (&d, &d.nodes[0], "weight_map") : NULL;
  if (!map || map->t != J_OBJ || map->first < 0) {
    wk_set_err (err, err_size, "no \"weight_map\" object naming the "
        "tensors' files");
    goto fail;
  }
  for (int64_t c = map->first; c >= 0; c = d.nodes[c].next) {
    const jnode *v = &d.nodes[c];
    const char *f = d.arena + v->str;
    int32_t i;
    if (v->t != J_STR || v->len == 0 || v->len > 255
        || memchr (f, '/', v->len) || memchr (f, '\\', v->len)
        || memchr (f, '\0', v->len) || (v->len <= 2 && f[0] == '.'
            && f[v->len - 1] == '.')) {
      wk_set_err (err, err_size, "a weight_map value that is not a file "
          "name beside the index");
      goto fail;
    }
    for (i = 0; i < sh->n; i++)
      if (strlen (sh->files[i]) == v->len && !memcmp (sh->files[i], f, v->len))
        break;
    if (i < sh->n)
      continue;
    if (sh->n == HF_MAX_SHARDS) {
      wk_set_err (err, err_size, "more than %d shards", HF_MAX_SHARDS);
      goto fail;
    }
    if (sh->n % 16 == 0) {
      char **nf = realloc (sh->files, (size_t) (sh->n + 16) * sizeof *nf);
      if (!nf)
        goto nomem;
      sh->files = nf;
    }
    if (!(sh->files[sh->n] = malloc (v->len + 1)))
      goto nomem;
    memcpy (sh->files[sh->n], f, v->len);
    sh->files[sh->n++][v->len] = '\0';
  }
  jdoc_free (&d);
  return WK_OK;
nomem:
  wk_set_err (err, err_size, "out of memory");
fail:
  jdoc_free (&d);
  wk_hf_shards_clear (sh);
  return WK_ERR_FORMAT;
}

/* ---- tiktoken rank files ---------------------------------------------- */

/* Value of a base64 digit (standard alphabet), or -1. */
static int
b64_digit (unsigned char c)
{
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

/* Decodes s[0 .. n-1] (digits then at most two '=') into out (room for
 * n * 3 / 4 bytes); returns the byte count or -1. A lone "=" is the empty
 * string (openai/whisper's multilingual.tiktoken writes its empty token
 * so, and Python's decoder accepts it). */
static long
b64_decode (const char *s, size_t n, unsigned char *out)
{
  size_t nd = 0, np, i;
  uint32_t acc = 0;
  int bits = 0;
  long k = 0;

  while (nd < n && s[nd] != '=')
    nd++;
  np = n - nd;
  for (i = nd; i < n; i++)
    if (s[i] != '=')
      return -1;
  if (nd % 4 == 1 || np > 2)
    return -1;
  if (np > 0 && nd > 0 && n % 4 != 0)
    return -1;
  for (i = 0; i < nd; i++) {
    int v = b64_digit ((unsigned char) s[i]);
    if (v < 0)
      return -1;
    acc = (acc << 6) | (uint32_t) v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[k++] = (unsigned char) (acc >> bits);
      acc &= (1u << bits) - 1;
    }
  }
  return k;
}

wk_status
wk_tiktoken_parse (const char *text, size_t len, int32_t max_ranks,
    wk_hf_vocab * vocab, char *err, size_t err_size)
{
  size_t pos = 0, line_no = 0;
  int32_t n_lines = 0, top = -1;
  wk_status st = WK_ERR_FORMAT;

  memset (vocab, 0, sizeof *vocab);
  if (!text || max_ranks < 1 || max_ranks > (1 << 24))
    return WK_ERR_ARG;
  vocab->tokens = calloc ((size_t) max_ranks, sizeof (char *));
  vocab->lens = calloc ((size_t) max_ranks, sizeof (uint32_t));
  if (!vocab->tokens || !vocab->lens) {
    wk_set_err (err, err_size, "tiktoken: out of memory");
    st = WK_ERR_NOMEM;
    goto out;
  }
  vocab->n = max_ranks;         /* for wk_hf_vocab_clear until the end */

  while (pos < len) {
    size_t end = pos, tok_end, r0;
    int64_t rank = 0;
    long nb;
    unsigned char *bytes;

    while (end < len && text[end] != '\n')
      end++;
    line_no++;
    tok_end = end;
    if (tok_end > pos && text[tok_end - 1] == '\r')
      tok_end--;
    if (tok_end == pos) {       /* an empty line */
      pos = end + 1;
      continue;
    }
    /* "TOKEN RANK": the base64 token, blanks, decimal digits */
    r0 = pos;
    while (r0 < tok_end && text[r0] != ' ' && text[r0] != '\t')
      r0++;
    {
      size_t d = r0, digits = 0;
      while (d < tok_end && (text[d] == ' ' || text[d] == '\t'))
        d++;
      if (d == r0 || d == tok_end) {
        wk_set_err (err, err_size, "tiktoken: line %zu is not 'BASE64 "
            "RANK'", line_no);
        goto out;
      }
      for (; d < tok_end; d++, digits++) {
        if (text[d] < '0' || text[d] > '9' || digits >= 9) {
          wk_set_err (err, err_size, "tiktoken: line %zu: bad rank", line_no);
          goto out;
        }
        rank = rank * 10 + (text[d] - '0');
      }
    }
    if (rank >= max_ranks) {
      wk_set_err (err, err_size, "tiktoken: line %zu: rank %lld, more than "
          "the %d ordinary tokens of a Whisper vocabulary", line_no,
          (long long) rank, max_ranks);
      goto out;
    }
    if (vocab->tokens[rank]) {
      wk_set_err (err, err_size, "tiktoken: line %zu: rank %lld given twice",
          line_no, (long long) rank);
      goto out;
    }
    bytes = malloc ((r0 - pos) * 3 / 4 + 1);
    if (!bytes) {
      wk_set_err (err, err_size, "tiktoken: out of memory");
      st = WK_ERR_NOMEM;
      goto out;
    }
    nb = b64_decode (text + pos, r0 - pos, bytes);
    if (nb < 0) {
      free (bytes);
      wk_set_err (err, err_size, "tiktoken: line %zu: bad base64 '%.*s'",
          line_no, (int) (r0 - pos < 40 ? r0 - pos : 40), text + pos);
      goto out;
    }
    vocab->tokens[rank] = (char *) bytes;
    vocab->lens[rank] = (uint32_t) nb;
    if (rank > top)
      top = (int32_t) rank;
    n_lines++;
    pos = end + 1;
  }
  if (n_lines == 0 || n_lines != top + 1) {
    int32_t gap = 0;
    while (gap < max_ranks && gap <= top && vocab->tokens[gap])
      gap++;
    if (n_lines == 0)
      wk_set_err (err, err_size, "tiktoken: no ranks");
    else
      wk_set_err (err, err_size, "tiktoken: %d ranks but the highest is %d "
          "(rank %d is missing)", n_lines, top, gap);
    goto out;
  }
  for (int32_t i = top + 1; i < max_ranks; i++)
    free (vocab->tokens[i]);
  vocab->n = top + 1;
  st = WK_OK;
out:
  if (st != WK_OK)
    wk_hf_vocab_clear (vocab);
  return st;
}
