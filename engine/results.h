/* The engine's one result store: the segments a stream hands out with
 * wk_stream_take / wk_stream_partial, their tokens and their text, in
 * arrays sized once when the stream is made. The offline stream, the live
 * policy (its committed and partial results) and the word grouping all
 * keep their output in one of these. */
#ifndef WK_RESULTS_H
#define WK_RESULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "whisperknot.h"

typedef struct
{
  wk_segment *segs;
  int n_segs, segs_cap;
  wk_token *toks;
  int n_toks, toks_cap;
  char *text;
  size_t text_len, text_cap;
  bool taken;                   /* handed out by the last take */
  uint64_t *own_bytes;          /* the owner's count, grown with the store */
} wk_results;

/* Allocates room for segs segments, toks tokens and text bytes (NULs
 * included), counting them in *own_bytes (which must outlive the store:
 * growth is counted there too); false when out of memory (what was
 * allocated is freed by wk_results_free). */
bool wk_results_init (wk_results * r, int segs, int toks, size_t text,
    uint64_t * own_bytes);
void wk_results_free (wk_results * r);

/* Empties the store (the pointers handed out before become invalid). */
void wk_results_clear (wk_results * r);

/* At the start of every call that may add results: what the last take
 * handed out is released. */
void wk_results_begin (wk_results * r);

/* Releases what the last take handed out (wk_results_begin), then hands
 * out the segments added since (NULL when there are none) until the next
 * wk_results_begin; returns how many. */
size_t wk_results_take (wk_results * r, const wk_segment ** segs);

/* The start of the first segment not handed out yet, -1 when there is
 * none (what a stream still owes its caller). */
int64_t wk_results_first_start (const wk_results * r);

/* Appends a segment: its text from len bytes at text, made valid trimmed
 * UTF-8 (wk_utf8_sanitize, wk_text_trim: space_before set) when sanitize
 * is true, else copied as it is; its tokens toks[0..n_toks-1] copied, or,
 * when toks is NULL, room for n_toks that the caller then appends with
 * wk_results_token. The other fields are zero, stability 1. A store that
 * is full (its results were not taken: a file fed whole, then taken)
 * grows, so nothing is lost; only when memory for that runs out does it
 * drop the output not taken, and go on. Segments added earlier move with
 * it (their text and tokens too): pointers into the store last until the
 * next add. */
wk_segment *wk_results_add (wk_results * r, const char *text, size_t len,
    bool sanitize, const wk_token * toks, int n_toks);

/* The next token of seg, the last segment added (zeroed; counted in
 * seg->n_tokens): at most the n_toks it was added with. */
wk_token *wk_results_token (wk_results * r, wk_segment * seg);

#endif /* WK_RESULTS_H */
