/* Whisper's byte-level BPE vocabulary.
 *
 * Encoding is tiktoken's: the text is split by the GPT-2 pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (implemented by hand over UTF-8 with the Unicode tables of
 * tokenizer-unicode.h; bytes that are not valid UTF-8 are taken one at a
 * time as "other" characters), then each piece is merged from single bytes
 * by repeatedly joining the adjacent pair whose joined bytes form the token
 * of lowest id (rank = id), leftmost first on ties. Token bytes are looked
 * up in an open-addressing hash table built once.
 */
#include "tokenizer.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer-unicode.h"
#include "wk-err.h"

struct wk_tokenizer
{
  int n_vocab;
  int n_ordinary;               /* ids below this are BPE tokens */
  wk_special_tokens sp;
  char *blob;                   /* every token's bytes, each NUL-terminated */
  size_t *off;                  /* [n_vocab] offset of token id in blob */
  uint32_t *len;                /* [n_vocab] */
  int32_t *table;               /* hash slots: id or -1 */
  uint32_t table_mask;
};

static const char *const language_codes[WK_N_LANGUAGES] = {
  "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr",
  "pl", "ca", "nl", "ar", "sv", "it", "id", "hi", "fi", "vi",
  "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no",
  "th", "ur", "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk",
  "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk",
  "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
  "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc",
  "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo",
  "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
  "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue",
};

static const char *const language_names[WK_N_LANGUAGES] = {
  "english", "chinese", "german", "spanish", "russian", "korean", "french",
  "japanese", "portuguese", "turkish", "polish", "catalan", "dutch",
  "arabic", "swedish", "italian", "indonesian", "hindi", "finnish",
  "vietnamese", "hebrew", "ukrainian", "greek", "malay", "czech",
  "romanian", "danish", "hungarian", "tamil", "norwegian", "thai", "urdu",
  "croatian", "bulgarian", "lithuanian", "latin", "maori", "malayalam",
  "welsh", "slovak", "telugu", "persian", "latvian", "bengali", "serbian",
  "azerbaijani", "slovenian", "kannada", "estonian", "macedonian",
  "breton", "basque", "icelandic", "armenian", "nepali", "mongolian",
  "bosnian", "kazakh", "albanian", "swahili", "galician", "marathi",
  "punjabi", "sinhala", "khmer", "shona", "yoruba", "somali", "afrikaans",
  "occitan", "georgian", "belarusian", "tajik", "sindhi", "gujarati",
  "amharic", "yiddish", "lao", "uzbek", "faroese", "haitian creole",
  "pashto", "turkmen", "nynorsk", "maltese", "sanskrit", "luxembourgish",
  "myanmar", "tibetan", "tagalog", "malagasy", "assamese", "tatar",
  "hawaiian", "lingala", "hausa", "bashkir", "javanese", "sundanese",
  "cantonese",
};

/* Whisper's extra names (whisper/tokenizer.py TO_LANGUAGE_CODE). */
static const struct
{
  const char *alias, *code;
} language_aliases[] = {
  {"burmese", "my"}, {"valencian", "ca"}, {"flemish", "nl"},
  {"haitian", "ht"}, {"letzeburgesch", "lb"}, {"pushto", "ps"},
  {"panjabi", "pa"}, {"moldavian", "ro"}, {"moldovan", "ro"},
  {"sinhalese", "si"}, {"castilian", "es"}, {"mandarin", "zh"},
};

const char *
wk_language_code (int index)
{
  return index >= 0 && index < WK_N_LANGUAGES ? language_codes[index] : NULL;
}

const char *
wk_language_name (int index)
{
  return index >= 0 && index < WK_N_LANGUAGES ? language_names[index] : NULL;
}

static int
ascii_casecmp (const char *a, const char *b)
{
  for (;; a++, b++) {
    int ca = (unsigned char) *a, cb = (unsigned char) *b;
    if (ca >= 'A' && ca <= 'Z')
      ca += 'a' - 'A';
    if (cb >= 'A' && cb <= 'Z')
      cb += 'a' - 'A';
    if (ca != cb)
      return ca - cb;
    if (!ca)
      return 0;
  }
}

int
wk_language_index (const char *code)
{
  int i;
  if (!code)
    return -1;
  for (i = 0; i < WK_N_LANGUAGES; i++)
    if (ascii_casecmp (code, language_codes[i]) == 0)
      return i;
  return -1;
}

int
wk_language_lookup (const char *code_or_name)
{
  size_t i;
  int idx = wk_language_index (code_or_name);
  if (idx >= 0 || !code_or_name)
    return idx;
  for (i = 0; i < WK_N_LANGUAGES; i++)
    if (ascii_casecmp (code_or_name, language_names[i]) == 0)
      return (int) i;
  for (i = 0; i < sizeof language_aliases / sizeof language_aliases[0]; i++)
    if (ascii_casecmp (code_or_name, language_aliases[i].alias) == 0)
      return wk_language_index (language_aliases[i].code);
  return -1;
}

/* English-only vocabularies (51864) have eot 50256; multilingual ones one
 * more ordinary token, then the language tokens (n_vocab - 51766 of them:
 * 99, or 100 with large-v3's <|yue|>). Then, in both, translate,
 * transcribe, startoflm, startofprev, nospeech, notimestamps and 1501
 * timestamps. (The English-only vocabulary also has 99 language tokens
 * between sot and translate, which Whisper never uses with it.) */
void
wk_special_tokens_for (int n_vocab, wk_special_tokens * sp)
{
  int tasks;

  if (n_vocab >= 51865) {
    sp->eot = 50257;
    sp->sot = 50258;
    sp->lang_begin = 50259;
    sp->n_langs = n_vocab - 51766;
    tasks = sp->lang_begin + sp->n_langs;
  } else {
    sp->eot = 50256;
    sp->sot = 50257;
    sp->lang_begin = -1;
    sp->n_langs = 0;
    tasks = sp->sot + 1 + 99;
  }
  sp->translate = tasks;
  sp->transcribe = tasks + 1;
  sp->solm = tasks + 2;
  sp->prev = tasks + 3;
  sp->nosp = tasks + 4;
  sp->no_timestamps = tasks + 5;
  sp->timestamp_begin = tasks + 6;
}

/* ---- hash table of ordinary token bytes ------------------------------- */

static uint32_t
hash_bytes (const unsigned char *p, size_t n)
{
  uint32_t h = 2166136261u;     /* FNV-1a */
  size_t i;
  for (i = 0; i < n; i++) {
    h ^= p[i];
    h *= 16777619u;
  }
  return h;
}

/* Id of the ordinary token with exactly these bytes, or -1. */
static int
lookup (const wk_tokenizer * tok, const unsigned char *p, size_t n)
{
  uint32_t slot = hash_bytes (p, n) & tok->table_mask;
  for (;;) {
    int32_t id = tok->table[slot];
    if (id < 0)
      return -1;
    if (tok->len[id] == n && memcmp (tok->blob + tok->off[id], p, n) == 0)
      return id;
    slot = (slot + 1) & tok->table_mask;
  }
}

/* ---- construction ----------------------------------------------------- */

/* Writes the name of special token id into buf (at least 32 bytes). */
static void
special_name (const wk_special_tokens * sp, int id, char *buf, size_t size)
{
  const char *fixed = NULL;
  if (id == sp->eot)
    fixed = "<|endoftext|>";
  else if (id == sp->sot)
    fixed = "<|startoftranscript|>";
  else if (id == sp->translate)
    fixed = "<|translate|>";
  else if (id == sp->transcribe)
    fixed = "<|transcribe|>";
  else if (id == sp->solm)
    fixed = "<|startoflm|>";
  else if (id == sp->prev)
    fixed = "<|startofprev|>";
  else if (id == sp->nosp)
    fixed = "<|nospeech|>";     /* "<|nocaptions|>" in Whisper before 2023 */
  else if (id == sp->no_timestamps)
    fixed = "<|notimestamps|>";
  if (fixed) {
    snprintf (buf, size, "%s", fixed);
  } else if (id >= sp->timestamp_begin) {
    int cs = (id - sp->timestamp_begin) * 2;    /* centiseconds */
    snprintf (buf, size, "<|%d.%02d|>", cs / 100, cs % 100);
  } else if (id > sp->sot && id < sp->translate
      && id - sp->sot - 1 < WK_N_LANGUAGES) {
    snprintf (buf, size, "<|%s|>", language_codes[id - sp->sot - 1]);
  } else {
    buf[0] = '\0';              /* an unnamed ordinary slot */
  }
}

wk_status
wk_tokenizer_new (int n_vocab, int n_base, const char *const *tokens,
    const size_t *lens, wk_tokenizer ** out, char *err, size_t err_size)
{
  wk_tokenizer *tok;
  wk_special_tokens sp;
  size_t total = 0, pos, cap;
  char name[64];
  int id;

  if (!out) {
    wk_set_err (err, err_size, "tokenizer: no output pointer");
    return WK_ERR_ARG;
  }
  *out = NULL;
  wk_special_tokens_for (n_vocab, &sp);
  if (n_vocab < 51864 || sp.n_langs > WK_N_LANGUAGES) {
    if (err && err_size)
      snprintf (err, err_size, "tokenizer: a vocabulary of %d tokens is not "
          "a Whisper vocabulary (51864, 51865 or 51866)", n_vocab);
    return WK_ERR_UNSUPPORTED;
  }
  if (n_base < 256 || n_base > sp.eot + 1 || !tokens || !lens) {
    if (err && err_size)
      snprintf (err, err_size, "tokenizer: %d ordinary tokens for a "
          "vocabulary of %d (expected 256 .. %d)", n_base, n_vocab, sp.eot + 1);
    return WK_ERR_FORMAT;
  }

  tok = calloc (1, sizeof *tok);
  if (!tok)
    goto nomem;
  tok->n_vocab = n_vocab;
  tok->sp = sp;
  /* With n_base == eot + 1 the last entry is <|endoftext|> itself. */
  tok->n_ordinary = n_base < sp.eot ? n_base : sp.eot;
  tok->off = calloc ((size_t) n_vocab, sizeof *tok->off);
  tok->len = calloc ((size_t) n_vocab, sizeof *tok->len);
  if (!tok->off || !tok->len)
    goto nomem;

  for (id = 0; id < n_vocab; id++) {
    size_t n;
    if (id < tok->n_ordinary) {
      if (!tokens[id] && lens[id]) {
        wk_set_err (err, err_size, "tokenizer: missing token bytes");
        wk_tokenizer_free (tok);
        return WK_ERR_ARG;
      }
      n = lens[id];
      if (n > 4096) {
        if (err && err_size)
          snprintf (err, err_size, "tokenizer: token %d is %zu bytes long",
              id, n);
        wk_tokenizer_free (tok);
        return WK_ERR_FORMAT;
      }
    } else {
      special_name (&sp, id, name, sizeof name);
      n = strlen (name);
    }
    tok->len[id] = (uint32_t) n;
    total += n + 1;
  }
  tok->blob = malloc (total);
  if (!tok->blob)
    goto nomem;
  pos = 0;
  for (id = 0; id < n_vocab; id++) {
    tok->off[id] = pos;
    if (id < tok->n_ordinary) {
      if (lens[id])
        memcpy (tok->blob + pos, tokens[id], lens[id]);
    } else {
      special_name (&sp, id, name, sizeof name);
      memcpy (tok->blob + pos, name, tok->len[id]);
    }
    tok->blob[pos + tok->len[id]] = '\0';
    pos += tok->len[id] + 1;
  }

  /* Hash table at most half full; a byte string listed twice keeps its
   * lowest id (its BPE rank). Empty tokens are never looked up. */
  for (cap = 64; cap < (size_t) tok->n_ordinary * 2; cap *= 2);
  tok->table = malloc (cap * sizeof *tok->table);
  if (!tok->table)
    goto nomem;
  memset (tok->table, 0xff, cap * sizeof *tok->table);
  tok->table_mask = (uint32_t) (cap - 1);
  for (id = 0; id < tok->n_ordinary; id++) {
    const unsigned char *p = (const unsigned char *) tok->blob + tok->off[id];
    uint32_t slot;
    if (tok->len[id] == 0 || lookup (tok, p, tok->len[id]) >= 0)
      continue;
    slot = hash_bytes (p, tok->len[id]) & tok->table_mask;
    while (tok->table[slot] >= 0)
      slot = (slot + 1) & tok->table_mask;
    tok->table[slot] = id;
  }

  *out = tok;
  return WK_OK;

nomem:
  wk_tokenizer_free (tok);
  wk_set_err (err, err_size, "tokenizer: out of memory");
  return WK_ERR_NOMEM;
}

void
wk_tokenizer_free (wk_tokenizer * tok)
{
  if (!tok)
    return;
  free (tok->blob);
  free (tok->off);
  free (tok->len);
  free (tok->table);
  free (tok);
}

const wk_special_tokens *
wk_tokenizer_special (const wk_tokenizer * tok)
{
  return &tok->sp;
}

int
wk_tokenizer_n_vocab (const wk_tokenizer * tok)
{
  return tok->n_vocab;
}

const char *
wk_tokenizer_bytes (const wk_tokenizer * tok, int id, size_t *len)
{
  if (!tok || id < 0 || id >= tok->n_vocab) {
    if (len)
      *len = 0;
    return "";
  }
  if (len)
    *len = tok->len[id];
  return tok->blob + tok->off[id];
}

size_t
wk_tokenizer_decode (const wk_tokenizer * tok, const int32_t * ids, int n,
    char *out, size_t out_size)
{
  size_t total = 0;
  int i;

  if (out && out_size)
    out[0] = '\0';
  if (!tok || !ids)
    return 0;
  for (i = 0; i < n; i++) {
    size_t len;
    const char *b;
    if (ids[i] < 0 || ids[i] >= tok->sp.eot)
      continue;
    b = wk_tokenizer_bytes (tok, ids[i], &len);
    if (out && total + 1 < out_size) {
      size_t room = out_size - 1 - total;
      memcpy (out + total, b, len < room ? len : room);
      out[total + (len < room ? len : room)] = '\0';
    }
    total += len;
  }
  return total;
}

/* ---- UTF-8 ------------------------------------------------------------ */

/* Decodes the character at s[0 .. n-1] (n >= 1). Returns its length and
 * the code point in *cp; for an invalid or incomplete sequence returns the
 * length of its maximal valid subpart (at least 1) with *cp = -1. */
static size_t
utf8_next (const unsigned char *s, size_t n, int32_t * cp)
{
  unsigned c = s[0];
  unsigned lo = 0x80, hi = 0xBF;
  size_t need, i;
  int32_t v;

  if (c < 0x80) {
    *cp = (int32_t) c;
    return 1;
  }
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
    v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    v = c & 0x0F;
    if (c == 0xE0)
      lo = 0xA0;                /* no overlong forms */
    else if (c == 0xED)
      hi = 0x9F;                /* no surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    v = c & 0x07;
    if (c == 0xF0)
      lo = 0x90;
    else if (c == 0xF4)
      hi = 0x8F;                /* nothing above U+10FFFF */
  } else {
    *cp = -1;
    return 1;
  }
  for (i = 1; i <= need; i++) {
    unsigned b;
    if (i >= n) {
      *cp = -1;
      return i;
    }
    b = s[i];
    if (b < lo || b > hi) {
      *cp = -1;
      return i;
    }
    lo = 0x80;
    hi = 0xBF;
    v = (v << 6) | (int32_t) (b & 0x3F);
  }
  *cp = v;
  return need + 1;
}

size_t
wk_utf8_valid_prefix_len (const char *s, size_t len)
{
  const unsigned char *u = (const unsigned char *) s;
  size_t back;

  if (!s)
    return 0;
  /* A character being completed starts at most 3 bytes before the end. */
  for (back = 1; back <= 3 && back <= len; back++) {
    unsigned c = u[len - back];
    if (c >= 0x80 && c < 0xC0)
      continue;                 /* continuation byte: look further back */
    if (c >= 0xC2 && c <= 0xF4) {
      int32_t cp;
      size_t got = utf8_next (u + len - back, back, &cp);
      /* Incomplete but valid so far: every byte up to the end was used. */
      if (cp < 0 && got == back)
        return len - back;
    }
    break;
  }
  return len;
}

static bool
is_space (char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v'
      || c == '\f';
}

char *
wk_text_trim (char *text, size_t *len, bool *space_before)
{
  size_t a = 0, b = *len;

  while (a < b && is_space (text[a]))
    a++;
  while (b > a && is_space (text[b - 1]))
    b--;
  *space_before = a > 0;
  text[b] = '\0';
  *len = b - a;
  return text + a;
}

size_t
wk_utf8_invalid_at (const char *s, size_t len)
{
  const unsigned char *u = (const unsigned char *) s;
  size_t i = 0;

  if (!s)
    return 0;
  while (i < len) {
    int32_t cp;
    size_t n = utf8_next (u + i, len - i, &cp);
    if (cp < 0)
      return i;
    i += n;
  }
  return len;
}

size_t
wk_utf8_sanitize (const char *s, size_t len, char *out, size_t out_size)
{
  const unsigned char *u = (const unsigned char *) s;
  size_t i = 0, total = 0;

  if (out && out_size)
    out[0] = '\0';
  if (!s)
    return 0;
  while (i < len) {
    int32_t cp;
    size_t n = utf8_next (u + i, len - i, &cp);
    const char *src = cp >= 0 ? s + i : "\xEF\xBF\xBD";
    size_t m = cp >= 0 ? n : 3;
    if (out && total + m < out_size) {
      memcpy (out + total, src, m);
      out[total + m] = '\0';
    } else if (out) {
      out = NULL;               /* full: stop writing, keep counting */
    }
    total += m;
    i += n;
  }
  return total;
}

/* ---- pre-tokenizer ---------------------------------------------------- */

enum
{
  CLASS_OTHER,
  CLASS_LETTER,
  CLASS_NUMBER,
  CLASS_SPACE
};

static int
in_ranges (const uint32_t (*r)[2], size_t n, uint32_t cp)
{
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (cp < r[mid][0])
      hi = mid;
    else if (cp > r[mid][1])
      lo = mid + 1;
    else
      return 1;
  }
  return 0;
}

#define N_RANGES(t) (sizeof (t) / sizeof (t)[0])

static int
char_class (int32_t cp)
{
  if (cp < 0)
    return CLASS_OTHER;         /* a byte that is not valid UTF-8 */
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
      return CLASS_LETTER;
    if (cp >= '0' && cp <= '9')
      return CLASS_NUMBER;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D))
      return CLASS_SPACE;
    return CLASS_OTHER;
  }
  if (in_ranges (wk_uni_space, N_RANGES (wk_uni_space), (uint32_t) cp))
    return CLASS_SPACE;
  if (in_ranges (wk_uni_letter, N_RANGES (wk_uni_letter), (uint32_t) cp))
    return CLASS_LETTER;
  if (in_ranges (wk_uni_number, N_RANGES (wk_uni_number), (uint32_t) cp))
    return CLASS_NUMBER;
  return CLASS_OTHER;
}

/* Class and length of the character at p[i] (i < n). */
static int
class_at (const unsigned char *p, size_t n, size_t i, size_t *clen)
{
  int32_t cp;
  *clen = utf8_next (p + i, n - i, &cp);
  return char_class (cp);
}

/* Length of the pre-token starting at p[i] (i < n), following the GPT-2
 * pattern's alternatives in order. */
static size_t
pretoken_len (const unsigned char *p, size_t n, size_t i)
{
  size_t l0, l1, j, k, last;
  int c0, c1;

  /* 's 't 're 've 'm 'll 'd */
  if (p[i] == '\'' && i + 1 < n) {
    unsigned a = p[i + 1], b = i + 2 < n ? p[i + 2] : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
      return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l'
            && b == 'l'))
      return 3;
  }

  c0 = class_at (p, n, i, &l0);
  /* " ?" before a letter, number or other run */
  j = i;
  if (p[i] == ' ' && i + 1 < n) {
    c1 = class_at (p, n, i + 1, &l1);
    if (c1 != CLASS_SPACE) {
      j = i + 1;
      c0 = c1;
      l0 = l1;
    }
  }
  if (c0 != CLASS_SPACE) {
    size_t l;
    k = j + l0;
    while (k < n && class_at (p, n, k, &l) == c0)
      k += l;
    return k - i;
  }

  /* \s+(?!\S): a run of white space not followed by a non-space, so a
   * run before a word leaves its last character to that word; \s+ for a
   * single white space character before a non-space. */
  k = i;
  last = i;
  while (k < n) {
    size_t l;
    if (class_at (p, n, k, &l) != CLASS_SPACE)
      break;
    last = k;
    k += l;
  }
  if (k == n || last == i)
    return k - i;
  return last - i;
}

/* ---- BPE -------------------------------------------------------------- */

/* The merges of a piece of n bytes: parts form a list in which a part is
 * named by its first byte and end[] holds where it ends (0 once merged
 * into its left neighbour), start[] where the part before it starts. The
 * candidate joins of adjacent parts wait in a min-heap ordered by rank,
 * then position, so the lowest-rank, leftmost pair is merged first (as
 * tiktoken does) in O(n log n); entries made stale by other merges are
 * dropped when they come up. */
typedef struct
{
  int rank;
  uint32_t left, right, right_end;
} bpe_cand;

typedef struct
{
  uint32_t *end, *start;        /* [n] */
  bpe_cand *heap;               /* [3 n]: n - 1 at first, 2 per merge */
  size_t n_heap;
} bpe_scratch;

static int
cand_before (const bpe_cand * a, const bpe_cand * b)
{
  return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void
heap_push (bpe_scratch * s, bpe_cand c)
{
  size_t i = s->n_heap++;
  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (!cand_before (&c, &s->heap[up]))
      break;
    s->heap[i] = s->heap[up];
    i = up;
  }
  s->heap[i] = c;
}

static bpe_cand
heap_pop (bpe_scratch * s)
{
  bpe_cand top = s->heap[0], last = s->heap[--s->n_heap];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= s->n_heap)
      break;
    if (c + 1 < s->n_heap && cand_before (&s->heap[c + 1], &s->heap[c]))
      c++;
    if (!cand_before (&s->heap[c], &last))
      break;
    s->heap[i] = s->heap[c];
    i = c;
  }
  if (s->n_heap)
    s->heap[i] = last;
  return top;
}

/* Queues the join of part left with the part after it, if that is a
 * token. */
static void
push_pair (const wk_tokenizer * tok, const unsigned char *p, size_t n,
    bpe_scratch * s, uint32_t left)
{
  uint32_t right = s->end[left];
  bpe_cand c;
  int id;

  if (right >= n)
    return;
  id = lookup (tok, p + left, s->end[right] - left);
  if (id < 0)
    return;
  c.rank = id;
  c.left = left;
  c.right = right;
  c.right_end = s->end[right];
  heap_push (s, c);
}

/* Merges the piece p[0 .. n-1] (n >= 1) and appends its ids. Returns the
 * new count or -1 if max_ids would be exceeded. */
static int
bpe_piece (const wk_tokenizer * tok, const unsigned char *p, size_t n,
    bpe_scratch * s, int32_t * ids, int count, int max_ids)
{
  uint32_t i;
  int id = lookup (tok, p, n);

  if (id >= 0) {                /* the whole piece is one token */
    if (count >= max_ids)
      return -1;
    ids[count] = id;
    return count + 1;
  }

  for (i = 0; i < n; i++) {
    s->end[i] = i + 1;
    s->start[i] = i ? i - 1 : UINT32_MAX;
  }
  s->n_heap = 0;
  for (i = 0; i + 1 < n; i++)
    push_pair (tok, p, n, s, i);

  while (s->n_heap) {
    bpe_cand c = heap_pop (s);
    uint32_t l = c.left, r = c.right;
    /* stale unless both parts are as they were when it was queued */
    if (s->end[l] != r || s->end[r] != c.right_end)
      continue;
    s->end[l] = s->end[r];
    s->end[r] = 0;
    if (s->end[l] < n)
      s->start[s->end[l]] = l;
    if (s->start[l] != UINT32_MAX)
      push_pair (tok, p, n, s, s->start[l]);
    push_pair (tok, p, n, s, l);
  }

  for (i = 0; i < n; i = s->end[i]) {
    id = lookup (tok, p + i, s->end[i] - i);
    if (id < 0)
      continue;                 /* a byte with no token: not in Whisper */
    if (count >= max_ids)
      return -1;
    ids[count++] = id;
  }
  return count;
}

int
wk_tokenizer_encode (const wk_tokenizer * tok, const char *text, size_t len,
    int32_t * ids, int max_ids)
{
  const unsigned char *p = (const unsigned char *) text;
  bpe_scratch s = { NULL, NULL, NULL, 0 };
  size_t i = 0, cap = 0;
  int count = 0;

  if (!tok || (!text && len) || max_ids < 0 || (!ids && max_ids)
      || len >= UINT32_MAX / 4)
    return -1;
  while (i < len && count >= 0) {
    size_t n = pretoken_len (p, len, i);
    if (n > cap) {
      cap = n > 64 ? n : 64;
      free (s.end);
      free (s.start);
      free (s.heap);
      s.end = malloc (cap * sizeof *s.end);
      s.start = malloc (cap * sizeof *s.start);
      s.heap = malloc (3 * cap * sizeof *s.heap);
      if (!s.end || !s.start || !s.heap) {
        count = -1;
        break;
      }
    }
    count = bpe_piece (tok, p + i, n, &s, ids, count, max_ids);
    i += n;
  }
  free (s.end);
  free (s.start);
  free (s.heap);
  return count;
}
