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
  if (r->n_segs + 1 > r->segs_cap || r->n_toks + n_toks > r->toks_cap
      || r->text_len + need > r->text_cap)
    wk_results_clear (r);       /* never taken: drop the oldest output */
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
