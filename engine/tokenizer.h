/* Whisper's byte-level BPE vocabulary: token bytes, special tokens,
 * encoding with the GPT-2 pre-tokenizer and BPE ranks, UTF-8 assembly. */
#ifndef WK_TOKENIZER_H
#define WK_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "whisperknot.h"

typedef struct wk_tokenizer wk_tokenizer;

/* Special token ids for a vocabulary of n_vocab (51864 English-only,
 * 51865 multilingual, 51866 large-v3), as Whisper lays them out. */
typedef struct
{
  int eot, sot, translate, transcribe, solm, prev, nosp, no_timestamps;
  int timestamp_begin;          /* <|0.00|>; timestamps run to n_vocab-1 */
  int lang_begin;               /* <|en|>, or -1 for English-only */
  int n_langs;
} wk_special_tokens;

void wk_special_tokens_for (int n_vocab, wk_special_tokens * sp);

/* tokens[i] / lens[i] are the bytes of the n_base ordinary tokens (ids
 * 0..n_base-1, their BPE merge rank is their id); the bytes are copied. */
wk_status wk_tokenizer_new (int n_vocab, int n_base,
    const char *const *tokens, const size_t *lens, wk_tokenizer ** out,
    char *err, size_t err_size);
void wk_tokenizer_free (wk_tokenizer * tok);

const wk_special_tokens *wk_tokenizer_special (const wk_tokenizer * tok);
int wk_tokenizer_n_vocab (const wk_tokenizer * tok);

/* The bytes of a token: ordinary tokens their BPE bytes, special tokens
 * their name ("<|endoftext|>", "<|en|>", "<|1.24|>"). *len may be NULL.
 * The returned string is NUL-terminated and lives as long as tok. */
const char *wk_tokenizer_bytes (const wk_tokenizer * tok, int id, size_t *len);

/* Encodes UTF-8 text into ordinary tokens. Returns the number of ids
 * written (at most max_ids), or -1 if text does not fit. */
int wk_tokenizer_encode (const wk_tokenizer * tok, const char *text,
    size_t len, int32_t * ids, int max_ids);

/* Language codes of Whisper's language tokens, in token order
 * ("en", "zh", "de", ...); count is 100 (99 before large-v3). */
const char *wk_language_code (int index);
int wk_language_index (const char *code);       /* -1 if unknown */

/* ---- added by the front-end helper ---------------------------------- */

#define WK_N_LANGUAGES 100

/* The English name of language index ("english", "chinese", ...), or NULL
 * outside 0 .. WK_N_LANGUAGES-1. */
const char *wk_language_name (int index);

/* Index of a language given by code or English name, ASCII case-insensitive
 * ("de", "German"), with Whisper's aliases ("mandarin", "castilian", ...);
 * -1 if unknown. */
int wk_language_lookup (const char *code_or_name);

/* Concatenates the bytes of the ordinary tokens among ids (special tokens,
 * ids >= eot, are skipped) into out, NUL-terminated and truncated to
 * out_size; returns the full length (as snprintf). The bytes are raw: a
 * character may be split at either end, see wk_utf8_valid_prefix_len. */
size_t wk_tokenizer_decode (const wk_tokenizer * tok, const int32_t * ids,
    int n, char *out, size_t out_size);

/* Length of the longest prefix of s[0 .. len-1] that does not end inside
 * an incomplete UTF-8 character: the bytes after it are the start of a
 * character whose remaining bytes may arrive with the next token, so text
 * assembly keeps them back. Invalid bytes count as complete (they never
 * become valid); the result is at least len - 3. */
size_t wk_utf8_valid_prefix_len (const char *s, size_t len);

/* The offset of the first byte of s[0 .. len-1] that does not belong to
 * a complete, valid UTF-8 character (no overlong forms, surrogates or
 * code points above U+10FFFF); len when all of it is valid. */
size_t wk_utf8_invalid_at (const char *s, size_t len);

/* Copies s[0 .. len-1] to out replacing each invalid or incomplete UTF-8
 * sequence by U+FFFD (as Python's errors="replace" does, one per maximal
 * invalid subpart), NUL-terminated and truncated to out_size (never inside
 * a character); returns the full length of the result. */
size_t wk_utf8_sanitize (const char *s, size_t len, char *out, size_t out_size);

/* Trims ASCII white space off text[0..len-1] in place (the end gets a
 * NUL): returns the first byte kept and sets *len to what is kept and
 * *space_before to whether white space came before it. */
char *wk_text_trim (char *text, size_t *len, bool *space_before);

#endif
