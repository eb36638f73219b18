/* libFuzzer target: the BPE tokenizer, as prompt text reaches it, and the
 * UTF-8 helpers of text assembly.
 *
 * Input: byte 0 = the number K of extra tokens (merges) besides the 256
 * single bytes; then K tokens, each a length byte (1..16) and its bytes;
 * the rest is the text. K = 255 instead takes Whisper's real vocabulary,
 * $WK_SHARED_DATA/gpt2.tiktoken (or ../shared/data/), read once, when it
 * is there. A vocabulary with every byte must encode any text
 * losslessly: the ids decode back to the text, each id is an ordinary
 * token, and a too-small id buffer is an error (-1), never an overflow. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "tokenizer.h"

#define N_VOCAB 51864           /* English-only: eot 50256 */
#define MAX_IDS 4096

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);
int LLVMFuzzerInitialize (int *argc, char ***argv);

static wk_tokenizer *real_tok;  /* gpt2.tiktoken's, or NULL */
static int real_n;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  const char *dir = getenv ("WK_SHARED_DATA");
  char path[4096], err[256];
  FILE *f;
  char *text = NULL;
  long n = 0;
  wk_hf_vocab v;

  (void) argc;
  (void) argv;
  snprintf (path, sizeof path, "%s/gpt2.tiktoken", dir ? dir :
      "../shared/data");
  f = fopen (path, "rb");
  if (!f)
    return 0;
  if (fseek (f, 0, SEEK_END) == 0 && (n = ftell (f)) > 0
      && fseek (f, 0, SEEK_SET) == 0 && (text = malloc ((size_t) n))
      && fread (text, 1, (size_t) n, f) == (size_t) n
      && wk_tiktoken_parse (text, (size_t) n, 50257, &v, err,
          sizeof err) == WK_OK) {
    size_t *lens = malloc ((size_t) v.n * sizeof *lens);
    for (int32_t i = 0; lens && i < v.n; i++)
      lens[i] = v.lens[i];
    if (lens && wk_tokenizer_new (N_VOCAB, v.n, (const char *const *) v.tokens,
            lens, &real_tok, err, sizeof err) == WK_OK)
      real_n = v.n;
    free (lens);
    wk_hf_vocab_clear (&v);
  }
  free (text);
  fclose (f);
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  static char bytes[256];
  const char *toks[256 + 255];
  size_t lens[256 + 255];
  size_t pos = 1, k = 0, n_extra;
  wk_tokenizer *tok = NULL;
  int32_t *ids;
  char *back, *clean;
  const char *text;
  size_t text_len, got;
  int n, n_small;

  if (size < 1)
    return 0;
  for (int i = 0; i < 256; i++) {
    bytes[i] = (char) i;
    toks[i] = &bytes[i];
    lens[i] = 1;
  }
  n_extra = data[0];
  if (n_extra == 255 && real_tok) {
    tok = real_tok;
    k = (size_t) real_n - 256;
    n_extra = 0;
  }
  for (k = tok ? k : 0; k < n_extra; k++) {
    size_t l;
    if (pos >= size)
      break;
    l = (data[pos] % 16) + 1;
    if (pos + 1 + l > size)
      break;
    toks[256 + k] = (const char *) data + pos + 1;
    lens[256 + k] = l;
    pos += 1 + l;
  }
  if (!tok && wk_tokenizer_new (N_VOCAB, 256 + (int) k, toks, lens, &tok,
          NULL, 0) != WK_OK)
    abort ();                   /* every such vocabulary is valid */
  text = (const char *) data + pos;
  text_len = size - pos;

  ids = malloc (MAX_IDS * sizeof *ids);
  back = malloc (text_len + 1);
  clean = malloc (3 * text_len + 1);
  n = wk_tokenizer_encode (tok, text, text_len, ids, MAX_IDS);
  if (n < 0 && text_len <= MAX_IDS)
    abort ();                   /* at most one id per byte */
  if (n >= 0) {
    for (int i = 0; i < n; i++)
      if (ids[i] < 0 || ids[i] >= 256 + (int) k)
        abort ();
    got = wk_tokenizer_decode (tok, ids, n, back, text_len + 1);
    if (got != text_len || memcmp (back, text, text_len) != 0)
      abort ();
    /* a buffer one id short of the encoding must be refused */
    if (n > 0) {
      n_small = wk_tokenizer_encode (tok, text, text_len, ids, n - 1);
      if (n_small != -1)
        abort ();
    }
  }
  /* decode arbitrary ids (specials, negatives, past the vocabulary) */
  {
    int32_t raw[64];
    size_t m = text_len / 4 < 64 ? text_len / 4 : 64;
    char out[256];
    memcpy (raw, text, m * 4);
    wk_tokenizer_decode (tok, raw, (int) m, out, sizeof out);
    for (size_t i = 0; i < m; i++)
      wk_tokenizer_bytes (tok, raw[i], NULL);
  }
  /* text assembly: the kept-back tail is at most 3 bytes; the sanitized
   * text is valid UTF-8 (sanitizing it changes nothing) whose length is
   * what was reported */
  if (wk_utf8_valid_prefix_len (text, text_len) + 3 < text_len)
    abort ();
  got = wk_utf8_sanitize (text, text_len, clean, 3 * text_len + 1);
  if (got > 3 * text_len || clean[got] != '\0'
      || wk_utf8_sanitize (clean, got, NULL, 0) != got)
    abort ();
  free (ids);
  free (back);
  free (clean);
  if (tok != real_tok)
    wk_tokenizer_free (tok);
  return 0;
}
