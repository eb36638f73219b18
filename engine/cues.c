/* Segments shaped into cues: see cues.h and wk_stream_take_cues. */
#include "cues.h"

#include <stdint.h>
#include <stdlib.h>

#include "live.h"

/* the shortest text cue: the engine's time step (a caption never lasts
 * 0) */
#define MIN_TEXT WK_TIME_STEP_SAMPLES
/* gaps before the text is finished are given in steps at least this long
 * (at the finish they cover everything) */
#define MIN_GAP (WK_SAMPLE_RATE / 2)

struct wk_cues
{
  wk_cue *cues;                 /* [cap] */
  size_t n, cap;
  uint64_t *own_bytes;          /* the stream's count, grown with cues */
  bool text_lines, words;
  int64_t out;                  /* the cues cover time up to here */
  bool line_open;               /* text_lines, words: a line not ended */
  double line_p;                /* the sum of its words' p */
  int line_words;
};

wk_cues *
wk_cues_new (size_t max_segs, bool text_lines, bool words, uint64_t * own_bytes)
{
  bool ok = true;
  wk_cues *c = wk_live_calloc (own_bytes, 1, sizeof *c, &ok);

  if (!c)
    return NULL;
  /* per segment a gap, a line end and the cue itself; then a line end
   * and a gap */
  c->cap = 3 * max_segs + 2;
  c->cues = wk_live_calloc (own_bytes, c->cap, sizeof *c->cues, &ok);
  c->own_bytes = own_bytes;
  if (!ok) {
    wk_cues_free (c);
    return NULL;
  }
  c->text_lines = text_lines;
  c->words = words && text_lines;
  return c;
}

void
wk_cues_free (wk_cues * c)
{
  if (!c)
    return;
  free (c->cues);
  free (c);
}

void
wk_cues_reset (wk_cues * c, int64_t from)
{
  c->n = 0;
  c->out = from > 0 ? from : 0;
  c->line_open = false;
}

static wk_cue *
add (wk_cues * c, wk_cue_kind kind, int64_t start, int64_t end)
{
  wk_cue *cue = &c->cues[c->n++];

  cue->kind = kind;
  cue->start = start;
  cue->end = end;
  cue->before = cue->text = cue->after = "";
  cue->p = 0.0;
  cue->segment = NULL;
  return cue;
}

/* A gap from out to end when it is at least min long. */
static void
gap (wk_cues * c, int64_t end, int64_t min)
{
  if (end > c->out && end - c->out >= min) {
    add (c, WK_CUE_GAP, c->out, end);
    c->out = end;
  }
}

/* text_lines, words: ends the open line with a newline lasting 0 at the
 * end of its last word */
static void
end_line (wk_cues * c)
{
  wk_cue *cue;

  if (!c->line_open)
    return;
  c->line_open = false;
  cue = add (c, WK_CUE_TEXT, c->out, c->out);
  cue->after = "\n";
  cue->p = c->line_p / c->line_words;
}

static void
text (wk_cues * c, const wk_segment * seg, int64_t fed)
{
  /* within the audio fed, whatever the model says */
  int64_t start = seg->start < fed ? seg->start : fed;
  int64_t end = seg->end < fed ? seg->end : fed;
  wk_cue *cue;

  /* from where the cues so far end, with a gap up to a later start */
  gap (c, start, 0);
  start = c->out;
  /* text the model gave no time of its own, or that the clamps squeezed,
   * still lasts a step (past the audio fed if need be) */
  if (end < start + MIN_TEXT)
    end = start + MIN_TEXT;
  cue = add (c, WK_CUE_TEXT, start, end);
  cue->text = seg->text;
  cue->p = seg->p;
  cue->segment = seg;
  if (c->words) {
    if (c->line_open && seg->space_before)
      cue->before = " ";
    if (!c->line_open) {
      c->line_p = 0.0;
      c->line_words = 0;
    }
    c->line_open = true;
    c->line_p += seg->p;
    c->line_words++;
  } else if (c->text_lines) {
    cue->after = "\n";
  }
  c->out = end;
}

size_t
wk_cues_make (wk_cues * c, const wk_segment * segs, size_t n, int64_t fed,
    int64_t settled, bool finished, const wk_cue ** out)
{
  size_t i;

  c->n = 0;
  /* a take of more segments than the cues were made for (a file fed
   * whole, then taken: the stream kept them all) */
  if (n <= (SIZE_MAX - 2) / 3 / sizeof *c->cues && 3 * n + 2 > c->cap) {
    bool ok = true;
    wk_cue *more = wk_live_calloc (c->own_bytes, 3 * n + 2, sizeof *more,
        &ok);
    if (more) {
      *c->own_bytes -= c->cap * sizeof *more;
      free (c->cues);
      c->cues = more;
      c->cap = 3 * n + 2;
    }
  }
  /* (room for a segment's three cues and the two after the loop: fewer
   * segments only when growing failed) */
  for (i = 0; i < n && c->n + 5 <= c->cap; i++) {
    if (segs[i].utterance_end) {
      int64_t at = segs[i].start < fed ? segs[i].start : fed;

      end_line (c);
      gap (c, at, 0);
      add (c, WK_CUE_UTTERANCE_END, at, at);
    } else if (segs[i].text[0]) {
      text (c, &segs[i], fed);
    }
  }
  /* no text can come any more before the settled point */
  if (finished) {
    end_line (c);
    gap (c, fed, 0);
  } else {
    gap (c, settled, MIN_GAP);
  }
  if (out)
    *out = c->n ? c->cues : NULL;
  return c->n;
}
