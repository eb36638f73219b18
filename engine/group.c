/* Grouping of committed live words into phrases or utterances: see
 * group.h. */
#include "group.h"

#include <stdlib.h>
#include <string.h>

#include "live.h"
#include "results.h"

/* phrases: a pause this long between two words ends one */
#define WK_GROUP_PAUSE (WK_SAMPLE_RATE / 2)
/* tokens a word takes at most, for sizing (longer words are cut) */
#define WK_GROUP_WORD_TOKENS 16

struct wk_group
{
  wk_group_by by;
  wk_results done;              /* closed groups and markers */
  /* the open group */
  int n_words;
  int64_t start, end;
  bool space_before;
  double sum_logprob, sum_no_speech, sum_p;
  wk_token *toks;
  int n_toks, toks_cap;
  char *text;
  size_t len, text_cap;
};

wk_group *
wk_group_new (wk_group_by by, int max_words, size_t max_bytes,
    uint64_t * own_bytes)
{
  bool ok = true;
  wk_group *g = wk_live_calloc (own_bytes, 1, sizeof *g, &ok);
  int toks = max_words * WK_GROUP_WORD_TOKENS;

  if (!g)
    return NULL;
  g->by = by;
  g->toks_cap = toks;
  g->text_cap = max_bytes + (size_t) max_words;
  ok = wk_results_init (&g->done, max_words, toks, g->text_cap, own_bytes);
  g->toks = wk_live_calloc (own_bytes, (size_t) toks, sizeof *g->toks, &ok);
  g->text = wk_live_calloc (own_bytes, g->text_cap, 1, &ok);
  if (!ok) {
    wk_group_free (g);
    return NULL;
  }
  return g;
}

void
wk_group_free (wk_group * g)
{
  if (!g)
    return;
  wk_results_free (&g->done);
  free (g->toks);
  free (g->text);
  free (g);
}

static void
close_open (wk_group * g)
{
  wk_segment *seg;

  if (g->n_words == 0)
    return;
  seg = wk_results_add (&g->done, g->text, g->len, false, g->toks, g->n_toks);
  seg->start = g->start;
  seg->end = g->end;
  seg->space_before = g->space_before;
  seg->avg_logprob = (float) (g->sum_logprob / g->n_words);
  seg->no_speech_prob = (float) (g->sum_no_speech / g->n_words);
  seg->p = (float) (g->sum_p / g->n_words);
  g->n_words = 0;
  g->n_toks = 0;
  g->len = 0;
}

static void
add_word (wk_group * g, const wk_segment * w)
{
  size_t len = strlen (w->text);
  int n_toks = w->n_tokens;
  bool space = g->n_words > 0 && w->space_before;

  if (n_toks > WK_GROUP_WORD_TOKENS)
    n_toks = WK_GROUP_WORD_TOKENS;
  if (len + 1 > g->text_cap)
    len = 0;                    /* cannot happen: words are short */
  if (g->n_words > 0 && ((g->by == WK_GROUP_PHRASE
              && w->start - g->end >= WK_GROUP_PAUSE)
          || g->n_toks + n_toks > g->toks_cap
          || g->len + (space ? 1 : 0) + len + 1 > g->text_cap)) {
    close_open (g);
    space = false;
  }
  if (g->n_words == 0) {
    g->start = w->start;
    g->end = w->end;
    g->space_before = w->space_before;
    g->sum_logprob = g->sum_no_speech = g->sum_p = 0.0;
  }
  if (space)
    g->text[g->len++] = ' ';
  memcpy (g->text + g->len, w->text, len);
  g->len += len;
  if (n_toks > 0)
    memcpy (g->toks + g->n_toks, w->tokens, (size_t) n_toks * sizeof *g->toks);
  g->n_toks += n_toks;
  if (w->end > g->end)
    g->end = w->end;
  g->sum_logprob += w->avg_logprob;
  g->sum_no_speech += w->no_speech_prob;
  g->sum_p += w->p;
  g->n_words++;
}

void
wk_group_add (wk_group * g, const wk_segment * segs, size_t n)
{
  size_t i;

  wk_results_begin (&g->done);
  for (i = 0; i < n; i++) {
    if (segs[i].utterance_end) {
      wk_segment *m;
      close_open (g);
      m = wk_results_add (&g->done, "", 0, false, NULL, 0);
      m->start = m->end = segs[i].start;
      m->utterance_end = true;
    } else if (segs[i].text && segs[i].text[0]) {
      add_word (g, &segs[i]);
    }
  }
}

void
wk_group_close (wk_group * g)
{
  wk_results_begin (&g->done);
  close_open (g);
}

size_t
wk_group_take (wk_group * g, const wk_segment ** segs)
{
  return wk_results_take (&g->done, segs);
}

int64_t
wk_group_pending_start (const wk_group * g)
{
  int64_t first = wk_results_first_start (&g->done);
  if (first >= 0)
    return first;
  return g->n_words > 0 ? g->start : -1;
}

void
wk_group_reset (wk_group * g)
{
  wk_results_clear (&g->done);
  g->n_words = 0;
  g->n_toks = 0;
  g->len = 0;
}
