/* The engine's one result store: see results.h. */
#include "results.h"

#include <stdlib.h>
#include <string.h>

#include "live.h"
#include "tokenizer.h"

bool
wk_results_init (wk_results * r, int segs, int toks, size_t text,
    uint64_t * own_bytes)
{
  bool ok = true;

  memset (r, 0, sizeof *r);
  r->own_bytes = own_bytes;
  /* valid up to the counts: not zeroed */
  r->segs_cap = segs;
  r->segs = wk_live_scratch (own_bytes, (size_t) segs, sizeof *r->segs, &ok);
  r->toks_cap = toks;
  r->toks = wk_live_scratch (own_bytes, (size_t) toks, sizeof *r->toks, &ok);
  r->text_cap = text;
  r->text = wk_live_scratch (own_bytes, text, 1, &ok);
  return ok;
}

void
wk_results_free (wk_results * r)
{
  free (r->segs);
  free (r->toks);
  free (r->text);
  memset (r, 0, sizeof *r);
}

void
wk_results_clear (wk_results * r)
{
  r->n_segs = 0;
  r->n_toks = 0;
  r->text_len = 0;
  r->taken = false;
}

void
wk_results_begin (wk_results * r)
{
  if (r->taken)
    wk_results_clear (r);
}

size_t
wk_results_take (wk_results * r, const wk_segment ** segs)
{
  wk_results_begin (r);
  if (segs)
    *segs = r->n_segs ? r->segs : NULL;
  r->taken = true;
  return (size_t) r->n_segs;
}

int64_t
wk_results_first_start (const wk_results * r)
{
  return !r->taken && r->n_segs > 0 ? r->segs[0].start : -1;
}

/* The next capacity of at least want (doubling), or 0 past max. */
static size_t
grown_cap (size_t cap, size_t want, size_t max)
{
  size_t c = cap > 0 ? cap : 16;
  while (c < want && c <= max / 2)
    c *= 2;
  return c >= want && c <= max ? c : 0;
}

/* Room for one more segment of n_toks tokens and need text bytes: new
 * arrays with the old contents, the segments' pointers moved into them.
 * False (the store as it was) without memory. */
static bool
results_grow (wk_results * r, int n_toks, size_t need)
{
  size_t segs_cap = grown_cap ((size_t) r->segs_cap, (size_t) r->n_segs + 1,
      INT32_MAX);
  size_t toks_cap = grown_cap ((size_t) r->toks_cap, (size_t) r->n_toks
      + (size_t) n_toks, INT32_MAX);
  size_t text_cap = grown_cap (r->text_cap, r->text_len + need,
      SIZE_MAX / 4);
  uint64_t added = 0;
  wk_segment *segs;
  wk_token *toks;
  char *text;
  bool ok = true;
  int i;

  if (!segs_cap || !toks_cap || !text_cap)
    return false;
  segs = wk_live_scratch (&added, segs_cap, sizeof *segs, &ok);
  toks = wk_live_scratch (&added, toks_cap, sizeof *toks, &ok);
  text = wk_live_scratch (&added, text_cap, 1, &ok);
  if (!ok) {
    free (segs);
    free (toks);
    free (text);
    return false;
  }
  if (r->n_segs > 0)
    memcpy (segs, r->segs, (size_t) r->n_segs * sizeof *segs);
  if (r->n_toks > 0)
    memcpy (toks, r->toks, (size_t) r->n_toks * sizeof *toks);
  if (r->text_len > 0)
    memcpy (text, r->text, r->text_len);
  for (i = 0; i < r->n_segs; i++) {
    segs[i].text = text + (r->segs[i].text - r->text);
    segs[i].tokens = toks + (r->segs[i].tokens - r->toks);
  }
  if (r->own_bytes)
    *r->own_bytes += added - ((uint64_t) r->segs_cap * sizeof *segs
        + (uint64_t) r->toks_cap * sizeof *toks + r->text_cap);
  free (r->segs);
  free (r->toks);
  free (r->text);
  r->segs = segs;
  r->toks = toks;
  r->text = text;
  r->segs_cap = (int) segs_cap;
  r->toks_cap = (int) toks_cap;
  r->text_cap = text_cap;
  return true;
}

wk_segment *
wk_results_add (wk_results * r, const char *text, size_t len, bool sanitize,
    const wk_token * toks, int n_toks)
{
  /* sanitizing writes U+FFFD (3 bytes) for a bad byte at worst */
  size_t need = (sanitize ? len * 3 : len) + 1;
  char *at;
  wk_segment *seg;

  if (n_toks < 0)
    n_toks = 0;
  /* not taken (begin cleared what was): keep it all, or without memory
   * for it drop it and go on */
  if ((r->n_segs + 1 > r->segs_cap || r->n_toks + n_toks > r->toks_cap
          || r->text_len + need > r->text_cap) && !results_grow (r, n_toks,
          need))
    wk_results_clear (r);
  seg = &r->segs[r->n_segs++];
  memset (seg, 0, sizeof *seg);
  at = r->text + r->text_len;
  if (sanitize) {
    size_t n = wk_utf8_sanitize (text, len, at, need);
    if (n >= need)
      n = strlen (at);
    seg->text = wk_text_trim (at, &n, &seg->space_before);
    r->text_len = (size_t) (seg->text - r->text) + n + 1;
  } else {
    if (len > 0)
      memcpy (at, text, len);
    at[len] = '\0';
    seg->text = at;
    r->text_len += len + 1;
  }
  seg->tokens = r->toks + r->n_toks;
  seg->stability = 1.0f;
  if (toks) {
    if (n_toks > 0)
      memcpy (r->toks + r->n_toks, toks, (size_t) n_toks * sizeof *toks);
    seg->n_tokens = n_toks;
    r->n_toks += n_toks;
  }
  return seg;
}

wk_token *
wk_results_token (wk_results * r, wk_segment * seg)
{
  wk_token *t;

  if (r->n_toks >= r->toks_cap || seg->tokens + seg->n_tokens != r->toks
      + r->n_toks)
    return NULL;                /* not the last segment, or no room */
  t = &r->toks[r->n_toks++];
  memset (t, 0, sizeof *t);
  seg->n_tokens++;
  return t;
}
