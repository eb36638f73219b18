/* The tokenizer on Whisper's real vocabularies (the tiktoken rank files;
 * the ggml test files hold the same tokens, except that those which are
 * not valid UTF-8 were written with U+FFFD replacements), the special token
 * layouts and names, encoding against reference ids
 * (tests/data/tokenizer-cases.txt, made by gen-tokenizer-cases.py with the
 * `regex` module), round trips, UTF-8 assembly across token boundaries,
 * languages and refused inputs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "wk-test.h"
#include "test-ggml-header.h"

static wk_test_ggml en_file, ml_file;
static wk_tokenizer *en, *ml, *v3;

static int
b64_value (int c)
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

/* Decodes base64 text into out; returns the length or -1. */
static int
b64_decode (const char *s, unsigned char *out, int max)
{
  int n = 0, bits = 0;
  uint32_t acc = 0;
  for (; *s && *s != '='; s++) {
    int v = b64_value ((unsigned char) *s);
    if (v < 0)
      return -1;
    acc = acc << 6 | (uint32_t) v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (n >= max)
        return -1;
      out[n++] = (unsigned char) (acc >> bits);
    }
  }
  return n;
}

/* A .tiktoken file: lines of base64 bytes and rank, as token arrays in
 * rank order. */
typedef struct
{
  int n;
  char **tokens;
  size_t *lens;
} tiktoken;

static tiktoken gpt2_tt, ml_tt;

static void
tiktoken_clear (tiktoken * t)
{
  int i;
  for (i = 0; i < t->n; i++)
    free (t->tokens[i]);
  free (t->tokens);
  free (t->lens);
  memset (t, 0, sizeof *t);
}

static int
tiktoken_read (const char *name, tiktoken * t)
{
  const char *path = wk_test_shared_path (name);
  char line[512], b64[400];
  unsigned char bytes[300];
  FILE *f = path ? fopen (path, "r") : NULL;
  int rank, len, cap = 65536;

  memset (t, 0, sizeof *t);
  if (!f) {
    fprintf (stderr, "cannot open %s\n", path ? path : name);
    return -1;
  }
  t->tokens = calloc ((size_t) cap, sizeof *t->tokens);
  t->lens = calloc ((size_t) cap, sizeof *t->lens);
  while (fgets (line, sizeof line, f)) {
    if (sscanf (line, "%399s %d", b64, &rank) != 2) {
      /* a line with only a rank: the empty token */
      if (sscanf (line, " %d", &rank) != 1)
        continue;
      b64[0] = '\0';
    }
    len = b64_decode (b64, bytes, sizeof bytes);
    /* ranks are the line numbers: the arrays are in id order */
    if (len < 0 || rank != t->n || t->n >= cap) {
      fprintf (stderr, "%s: bad line %d\n", name, t->n + 1);
      fclose (f);
      tiktoken_clear (t);
      return -1;
    }
    t->tokens[t->n] = malloc ((size_t) len + 1);
    memcpy (t->tokens[t->n], bytes, (size_t) len);
    t->lens[t->n++] = (size_t) len;
  }
  fclose (f);
  return 0;
}

/* The ggml file's entry for every rank of the .tiktoken file: the same
 * bytes, or for bytes that are not valid UTF-8 what Python's
 * decode(errors="replace") makes of them (whisper.cpp's test files were
 * written so), which wk_utf8_sanitize reproduces. */
static void
compare_with_ggml (const char *name, const tiktoken * t, const wk_test_ggml * g)
{
  int i, n_bad = 0, n_replaced = 0;
  char fixed[1200];

  for (i = 0; i < t->n && i < g->n_tokens; i++) {
    size_t n = wk_utf8_sanitize (t->tokens[i], t->lens[i], fixed,
        sizeof fixed);
    if (n != t->lens[i] || memcmp (fixed, t->tokens[i], n) != 0)
      n_replaced++;
    if (g->lens[i] != n || memcmp (g->tokens[i], fixed, n) != 0) {
      if (n_bad++ < 5)
        fprintf (stderr, "%s: rank %d differs from the ggml vocabulary\n",
            name, i);
    }
  }
  CHECK_MSG (n_bad == 0, "%d of %d ranks differ", n_bad, t->n);
  printf ("# %s: %d ranks, %d of them not UTF-8 (U+FFFD in the .bin)\n",
      name, t->n, n_replaced);
}

static void
test_ggml_vocabularies_equal_tiktoken_ranks (void)
{
  CHECK (en_file.n_tokens == 50257);
  CHECK (ml_file.n_tokens == 50257);
  CHECK (gpt2_tt.n == 50256);
  CHECK (ml_tt.n == 50257);
  compare_with_ggml ("gpt2.tiktoken", &gpt2_tt, &en_file);
  compare_with_ggml ("multilingual.tiktoken", &ml_tt, &ml_file);
  CHECK (en_file.lens[50256] == 13
      && memcmp (en_file.tokens[50256], "<|endoftext|>", 13) == 0);
}

/* A tokenizer over the ggml file's (lossy) list, as a knot converted from
 * it would give: the same special tokens, the same ids for UTF-8 text. */
static void
test_tokenizer_from_ggml_vocabulary (void)
{
  wk_tokenizer *g = NULL;
  char err[256];
  int32_t a[64], b[64];
  const char *text = " And so my fellow Americans, ask not 12 times.";
  int na, nb;

  if (!en || !en_file.n_tokens)
    return;
  CHECK (wk_tokenizer_new (en_file.hparams[0], en_file.n_tokens,
          en_file.tokens, en_file.lens, &g, err, sizeof err) == WK_OK);
  if (!g)
    return;
  CHECK (strcmp (wk_tokenizer_bytes (g, 50256, NULL), "<|endoftext|>") == 0);
  CHECK (strcmp (wk_tokenizer_bytes (g, 50363, NULL), "<|0.00|>") == 0);
  na = wk_tokenizer_encode (g, text, strlen (text), a, 64);
  nb = wk_tokenizer_encode (en, text, strlen (text), b, 64);
  CHECK (na > 0 && na == nb && memcmp (a, b, na * sizeof *a) == 0);
  wk_tokenizer_free (g);
}

static void
check_name (const wk_tokenizer * tok, int id, const char *name)
{
  size_t len;
  const char *b = wk_tokenizer_bytes (tok, id, &len);
  CHECK_MSG (strcmp (b, name) == 0 && len == strlen (name),
      "token %d is \"%s\", expected \"%s\"", id, b, name);
}

static void
test_special_token_layouts (void)
{
  wk_special_tokens sp;

  wk_special_tokens_for (51864, &sp);
  CHECK (sp.eot == 50256 && sp.sot == 50257 && sp.translate == 50357
      && sp.transcribe == 50358 && sp.solm == 50359 && sp.prev == 50360
      && sp.nosp == 50361 && sp.no_timestamps == 50362
      && sp.timestamp_begin == 50363 && sp.lang_begin == -1 && sp.n_langs == 0);
  CHECK (51864 - sp.timestamp_begin == 1501);   /* 0.00 .. 30.00 s */

  wk_special_tokens_for (51865, &sp);
  CHECK (sp.eot == 50257 && sp.sot == 50258 && sp.lang_begin == 50259
      && sp.n_langs == 99 && sp.translate == 50358 && sp.transcribe == 50359
      && sp.solm == 50360 && sp.prev == 50361 && sp.nosp == 50362
      && sp.no_timestamps == 50363 && sp.timestamp_begin == 50364);
  CHECK (51865 - sp.timestamp_begin == 1501);

  wk_special_tokens_for (51866, &sp);
  CHECK (sp.eot == 50257 && sp.sot == 50258 && sp.lang_begin == 50259
      && sp.n_langs == 100 && sp.translate == 50359 && sp.transcribe == 50360
      && sp.solm == 50361 && sp.prev == 50362 && sp.nosp == 50363
      && sp.no_timestamps == 50364 && sp.timestamp_begin == 50365);
  CHECK (51866 - sp.timestamp_begin == 1501);
}

static void
test_special_token_names (void)
{
  if (!en || !ml || !v3)
    return;
  CHECK (wk_tokenizer_n_vocab (en) == 51864);
  CHECK (wk_tokenizer_special (ml)->n_langs == 99);
  check_name (en, 50256, "<|endoftext|>");
  check_name (en, 50257, "<|startoftranscript|>");
  check_name (en, 50258, "<|en|>");     /* present but unused in English */
  check_name (en, 50357, "<|translate|>");
  check_name (en, 50358, "<|transcribe|>");
  check_name (en, 50359, "<|startoflm|>");
  check_name (en, 50360, "<|startofprev|>");
  check_name (en, 50361, "<|nospeech|>");
  check_name (en, 50362, "<|notimestamps|>");
  check_name (en, 50363, "<|0.00|>");
  check_name (en, 50363 + 62, "<|1.24|>");
  check_name (en, 51863, "<|30.00|>");
  check_name (en, 15496, "Hello");

  check_name (ml, 50257, "<|endoftext|>");
  check_name (ml, 50258, "<|startoftranscript|>");
  check_name (ml, 50259, "<|en|>");
  check_name (ml, 50260, "<|zh|>");
  check_name (ml, 50259 + 98, "<|su|>");
  check_name (ml, 50358, "<|translate|>");
  check_name (ml, 50359, "<|transcribe|>");
  check_name (ml, 50362, "<|nospeech|>");
  check_name (ml, 50363, "<|notimestamps|>");
  check_name (ml, 50364, "<|0.00|>");
  check_name (ml, 51864, "<|30.00|>");
  check_name (ml, 50256, "");

  check_name (v3, 50259 + 99, "<|yue|>");
  check_name (v3, 50359, "<|translate|>");
  check_name (v3, 50365, "<|0.00|>");
  check_name (v3, 51865, "<|30.00|>");

  check_name (en, -1, "");
  check_name (en, 51864, "");
}

static void
test_languages (void)
{
  CHECK (strcmp (wk_language_code (0), "en") == 0);
  CHECK (strcmp (wk_language_code (1), "zh") == 0);
  CHECK (strcmp (wk_language_code (20), "he") == 0);
  CHECK (strcmp (wk_language_code (93), "haw") == 0);
  CHECK (strcmp (wk_language_code (99), "yue") == 0);
  CHECK (wk_language_code (100) == NULL && wk_language_code (-1) == NULL);
  CHECK (wk_language_index ("de") == 2);
  CHECK (wk_language_index ("DE") == 2);
  CHECK (wk_language_index ("yue") == 99);
  CHECK (wk_language_index ("xx") == -1 && wk_language_index (NULL) == -1);
  CHECK (wk_language_index ("german") == -1);
  CHECK (wk_language_lookup ("German") == 2);
  CHECK (wk_language_lookup ("mandarin") == 1);
  CHECK (wk_language_lookup ("haitian creole") == 80);
  CHECK (wk_language_lookup ("Castilian") == 3);
  CHECK (wk_language_lookup ("klingon") == -1);
  CHECK (strcmp (wk_language_name (99), "cantonese") == 0);
  CHECK (wk_language_name (100) == NULL);
}

static int
hex_decode (const char *hex, char *out, int max)
{
  int n = 0;
  while (hex[0] && hex[1]) {
    unsigned v;
    if (sscanf (hex, "%2x", &v) != 1 || n >= max)
      return -1;
    out[n++] = (char) v;
    hex += 2;
  }
  return n;
}

static void
test_encode_matches_reference_ids (void)
{
  char path[4096], line[16384], text[4096], out[4096];
  const char *dir = getenv ("WK_TEST_DATA");
  int32_t ids[2048], want[2048];
  int n_cases = 0;
  FILE *f;

  snprintf (path, sizeof path, "%s/tokenizer-cases.txt", dir ? dir : ".");
  f = fopen (path, "r");
  CHECK_MSG (f != NULL, "cannot open %s", path);
  if (!f || !en || !ml)
    return;
  while (fgets (line, sizeof line, f)) {
    char *vocab = strtok (line, "\t\n");
    char *hex = strtok (NULL, "\t\n");
    char *list = strtok (NULL, "\t\n");
    const wk_tokenizer *tok;
    int len, n_want = 0, n, i;
    char *save = NULL, *t;

    if (!vocab)
      continue;
    /* an empty text has neither hex nor ids */
    len = hex ? hex_decode (hex, text, sizeof text) : 0;
    CHECK (len >= 0);
    if (len < 0)
      continue;
    tok = strcmp (vocab, "gpt2") == 0 ? en : ml;
    for (t = list ? strtok_r (list, " ", &save) : NULL; t && n_want < 2048;
        t = strtok_r (NULL, " ", &save))
      want[n_want++] = atoi (t);

    n = wk_tokenizer_encode (tok, text, (size_t) len, ids, 2048);
    CHECK_MSG (n == n_want && memcmp (ids, want, n * sizeof *ids) == 0,
        "%s \"%.*s\": %d ids, expected %d", vocab, len, text, n, n_want);
    for (i = 0; i < n && i < n_want; i++)
      if (ids[i] != want[i]) {
        fprintf (stderr, "  first difference at %d: %d vs %d\n", i, ids[i],
            want[i]);
        break;
      }
    /* decoding gives the text back, byte for byte */
    CHECK (wk_tokenizer_decode (tok, ids, n, out, sizeof out) == (size_t) len
        && memcmp (out, text, len) == 0);
    n_cases++;
  }
  fclose (f);
  CHECK (n_cases >= 40);
  printf ("# %d reference encodings\n", n_cases);
}

/* Single words whose ids we look up in the vocabulary file itself. */
static void
test_known_ids_from_the_vocabulary_file (void)
{
  const char *words[] = { "Hello", " world", " And", " country", ".", " so",
    "!", " Americans"
  };
  size_t w;
  int32_t ids[8];

  if (!en)
    return;
  for (w = 0; w < sizeof words / sizeof words[0]; w++) {
    int id, found = -1;
    for (id = 0; id < en_file.n_tokens; id++)
      if (en_file.lens[id] == strlen (words[w])
          && memcmp (en_file.tokens[id], words[w], en_file.lens[id]) == 0) {
        found = id;
        break;
      }
    CHECK (found >= 0);
    CHECK_MSG (wk_tokenizer_encode (en, words[w], strlen (words[w]), ids, 8)
        == 1 && ids[0] == found, "\"%s\" is not token %d", words[w], found);
  }
  CHECK (wk_tokenizer_encode (en, "Hello world", 11, ids, 8) == 2
      && ids[0] == 15496 && ids[1] == 995);
  CHECK (wk_tokenizer_encode (en, " And", 4, ids, 8) == 1 && ids[0] == 843);
}

static void
test_arbitrary_bytes_round_trip (void)
{
  char text[3000], out[3001];
  int32_t ids[3000];
  uint32_t s = 12345;
  int i, rep, n;

  if (!en || !ml)
    return;
  for (rep = 0; rep < 20; rep++) {
    for (i = 0; i < (int) sizeof text; i++) {
      s = s * 1103515245u + 12345u;
      /* mostly ASCII with spaces, some high bytes (invalid UTF-8 too) */
      text[i] = (char) ((s >> 16) % 7 == 0 ? 0x80 + (s >> 8) % 128 :
          (s >> 16) % 5 == 0 ? ' ' : 'a' + (s >> 20) % 26);
    }
    n = wk_tokenizer_encode (rep % 2 ? ml : en, text, sizeof text, ids, 3000);
    CHECK (n > 0);
    CHECK (wk_tokenizer_decode (rep % 2 ? ml : en, ids, n, out, sizeof out)
        == sizeof text && memcmp (out, text, sizeof text) == 0);
  }
  /* too little room is -1, never an overrun */
  CHECK (wk_tokenizer_encode (en, "Hello world", 11, ids, 1) == -1);
  CHECK (wk_tokenizer_encode (en, "", 0, ids, 0) == 0);
}

static int
utf8_ok (const char *s, size_t n)
{
  char buf[4096];
  /* sanitize changes nothing exactly when s is valid */
  return wk_utf8_sanitize (s, n, buf, sizeof buf) == n
      && memcmp (buf, s, n) == 0;
}

/* Text assembled token by token, holding back incomplete characters,
 * only ever emits valid UTF-8 and ends equal to the whole text. */
static void
test_utf8_kept_intact_across_tokens (void)
{
  const char *text = " caf\xC3\xA9 na\xC3\xAFve \xE6\x9D\xB1\xE4\xBA\xAC "
      "\xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD \xE2\x99\xAA";
  int32_t ids[64];
  char pending[64], assembled[256];
  size_t n_pending = 0, n_assembled = 0;
  int n, i, split_tokens = 0;

  if (!en)
    return;
  n = wk_tokenizer_encode (en, text, strlen (text), ids, 64);
  CHECK (n > 0);
  for (i = 0; i < n; i++) {
    size_t len, keep;
    const char *b = wk_tokenizer_bytes (en, ids[i], &len);
    if (!utf8_ok (b, len))
      split_tokens++;
    memcpy (pending + n_pending, b, len);
    n_pending += len;
    keep = wk_utf8_valid_prefix_len (pending, n_pending);
    CHECK (utf8_ok (pending, keep));
    memcpy (assembled + n_assembled, pending, keep);
    n_assembled += keep;
    memmove (pending, pending + keep, n_pending - keep);
    n_pending -= keep;
  }
  CHECK (split_tokens > 0);     /* the test does cross characters */
  CHECK (n_pending == 0);
  CHECK (n_assembled == strlen (text)
      && memcmp (assembled, text, n_assembled) == 0);
}

static void
test_utf8_helpers (void)
{
  char out[64];
  /* U+6771 is E6 9D B1 */
  CHECK (wk_utf8_valid_prefix_len ("ab\xE6", 3) == 2);
  CHECK (wk_utf8_valid_prefix_len ("ab\xE6\x9D", 4) == 2);
  CHECK (wk_utf8_valid_prefix_len ("ab\xE6\x9D\xB1", 5) == 5);
  CHECK (wk_utf8_valid_prefix_len ("\xF0\x9F\x98", 3) == 0);
  CHECK (wk_utf8_valid_prefix_len ("a\xF0\x9F\x98\x80", 5) == 5);
  /* invalid bytes never become valid: not held back */
  CHECK (wk_utf8_valid_prefix_len ("a\x80", 2) == 2);
  CHECK (wk_utf8_valid_prefix_len ("a\xC0", 2) == 2);
  CHECK (wk_utf8_valid_prefix_len ("a\xE0\x80", 3) == 3);       /* overlong */
  CHECK (wk_utf8_valid_prefix_len ("a\xED\xA0", 3) == 3);       /* surrogate */
  CHECK (wk_utf8_valid_prefix_len ("a\xF5", 2) == 2);
  CHECK (wk_utf8_valid_prefix_len ("", 0) == 0);

  CHECK (wk_utf8_sanitize ("a\xE6\x9D" "b", 4, out, sizeof out) == 5
      && strcmp (out, "a\xEF\xBF\xBD" "b") == 0);
  CHECK (wk_utf8_sanitize ("\x80\x80", 2, out, sizeof out) == 6
      && strcmp (out, "\xEF\xBF\xBD\xEF\xBF\xBD") == 0);
  CHECK (wk_utf8_sanitize ("\xC3\xA9", 2, out, sizeof out) == 2
      && strcmp (out, "\xC3\xA9") == 0);
  /* truncation never splits a character */
  CHECK (wk_utf8_sanitize ("ab\xC3\xA9", 4, out, 4) == 4
      && strcmp (out, "ab") == 0);

  /* where text stops being UTF-8 (initial_prompt's check) */
  CHECK (wk_utf8_invalid_at ("Caf\xC3\xA9 \xE6\x9D\xB1 \xF0\x9F\x98\x80", 14)
      == 14);
  CHECK (wk_utf8_invalid_at ("Caf\xC3 au lait", 12) == 3);
  CHECK (wk_utf8_invalid_at ("ab\xE6\x9D", 4) == 2);    /* cut short */
  CHECK (wk_utf8_invalid_at ("a\xE0\x80\x80", 4) == 1); /* overlong */
  CHECK (wk_utf8_invalid_at ("a\xED\xA0\x80", 4) == 1); /* surrogate */
  CHECK (wk_utf8_invalid_at ("a\xF4\x90\x80\x80", 5) == 1);     /* > U+10FFFF */
  CHECK (wk_utf8_invalid_at ("\x80", 1) == 0);
  CHECK (wk_utf8_invalid_at ("", 0) == 0);
}

static void
test_bad_vocabularies_are_refused (void)
{
  wk_tokenizer *tok = (wk_tokenizer *) 1;
  char err[256] = "";
  const char *toks[1] = { "a" };
  size_t lens[1] = { 1 };

  CHECK (wk_tokenizer_new (1000, 50257, en_file.tokens, en_file.lens, &tok,
          err, sizeof err) == WK_ERR_UNSUPPORTED && tok == NULL);
  CHECK (strstr (err, "1000") != NULL);
  CHECK (wk_tokenizer_new (52000, 50257, en_file.tokens, en_file.lens, &tok,
          err, sizeof err) == WK_ERR_UNSUPPORTED);
  CHECK (wk_tokenizer_new (51864, 50258, en_file.tokens, en_file.lens, &tok,
          err, sizeof err) == WK_ERR_FORMAT);
  CHECK (wk_tokenizer_new (51864, 1, toks, lens, &tok, err, sizeof err)
      == WK_ERR_FORMAT);
  CHECK (wk_tokenizer_new (51864, 50257, NULL, NULL, &tok, err, sizeof err)
      == WK_ERR_FORMAT);
  wk_tokenizer_free (NULL);
}

int
main (void)
{
  const char *p;
  char err[256];

  p = wk_test_shared_path ("for-tests-ggml-tiny.en.bin");
  CHECK (p && wk_test_ggml_read (p, &en_file) == 0);
  p = wk_test_shared_path ("for-tests-ggml-tiny.bin");
  CHECK (p && wk_test_ggml_read (p, &ml_file) == 0);
  CHECK (en_file.n_tokens == 0 || en_file.hparams[0] == 51864);
  CHECK (ml_file.n_tokens == 0 || ml_file.hparams[0] == 51865);
  CHECK (tiktoken_read ("gpt2.tiktoken", &gpt2_tt) == 0);
  CHECK (tiktoken_read ("multilingual.tiktoken", &ml_tt) == 0);
  if (gpt2_tt.n)
    CHECK (wk_tokenizer_new (51864, gpt2_tt.n,
            (const char *const *) gpt2_tt.tokens, gpt2_tt.lens, &en, err,
            sizeof err) == WK_OK);
  if (ml_tt.n) {
    CHECK (wk_tokenizer_new (51865, ml_tt.n,
            (const char *const *) ml_tt.tokens, ml_tt.lens, &ml, err,
            sizeof err) == WK_OK);
    /* large-v3's layout over the same ordinary tokens */
    CHECK (wk_tokenizer_new (51866, ml_tt.n,
            (const char *const *) ml_tt.tokens, ml_tt.lens, &v3, err,
            sizeof err) == WK_OK);
  }

  RUN (test_ggml_vocabularies_equal_tiktoken_ranks);
  RUN (test_tokenizer_from_ggml_vocabulary);
  RUN (test_special_token_layouts);
  RUN (test_special_token_names);
  RUN (test_languages);
  RUN (test_encode_matches_reference_ids);
  RUN (test_known_ids_from_the_vocabulary_file);
  RUN (test_arbitrary_bytes_round_trip);
  RUN (test_utf8_kept_intact_across_tokens);
  RUN (test_utf8_helpers);
  RUN (test_bad_vocabularies_are_refused);

  wk_tokenizer_free (en);
  wk_tokenizer_free (ml);
  wk_tokenizer_free (v3);
  wk_test_ggml_clear (&en_file);
  wk_test_ggml_clear (&ml_file);
  tiktoken_clear (&gpt2_tt);
  tiktoken_clear (&ml_tt);
  return TEST_EXIT ();
}
