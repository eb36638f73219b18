/* Cues (engine/cues.c, wk_stream_take_cues): segments shaped into text
 * ready to show, checked on hand-made segments against the values the
 * rules in whisperknot.h give. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cues.h"
#include "whisperknot.h"
#include "wk-test.h"

#define STEP WK_TIME_STEP_SAMPLES
#define HALF (WK_SAMPLE_RATE / 2)

static uint64_t own;            /* the cues' memory, unchecked */

static wk_segment
word (const char *text, int64_t start, int64_t end, float p, bool space)
{
  wk_segment s;

  memset (&s, 0, sizeof s);
  s.text = text;
  s.start = start;
  s.end = end;
  s.p = p;
  s.space_before = space;
  s.stability = 1.0f;
  return s;
}

static wk_segment
utterance_end (int64_t at)
{
  wk_segment s = word ("", at, at, 0.0f, false);

  s.utterance_end = true;
  return s;
}

static void
check_cue (const wk_cue * c, wk_cue_kind kind, int64_t start, int64_t end,
    const char *text)
{
  char got[256];

  CHECK_MSG (c->kind == kind, "kind %d, want %d", (int) c->kind, (int) kind);
  CHECK_MSG (c->start == start && c->end == end, "[%lld, %lld), want "
      "[%lld, %lld)", (long long) c->start, (long long) c->end,
      (long long) start, (long long) end);
  snprintf (got, sizeof got, "%s%s%s", c->before, c->text, c->after);
  CHECK_MSG (strcmp (got, text) == 0, "text \"%s\", want \"%s\"", got, text);
}

/* text in order, a gap before text that starts later, no gap shorter than
 * half a second up to the settled point while the text is not finished */
static void
test_text_and_gaps (void)
{
  uint64_t bytes = 0;
  wk_cues *c = wk_cues_new (8, false, false, &bytes);
  wk_segment segs[2] = { word ("Hello", 100, 500, 0.5f, true),
    word ("world.", 1000, 2000, 0.75f, true)
  };
  const wk_cue *q;
  size_t n;

  CHECK (c != NULL && bytes > 0);
  if (!c)
    return;
  wk_cues_reset (c, 0);
  n = wk_cues_make (c, segs, 2, 30000, 2000 + HALF - 1, false, &q);
  CHECK (n == 4);
  if (n == 4) {
    check_cue (&q[0], WK_CUE_GAP, 0, 100, "");
    check_cue (&q[1], WK_CUE_TEXT, 100, 500, "Hello");
    CHECK (q[1].segment == &segs[0] && q[1].p == 0.5);
    check_cue (&q[2], WK_CUE_GAP, 500, 1000, "");
    check_cue (&q[3], WK_CUE_TEXT, 1000, 2000, "world.");
  }
  /* the settled point half a second ahead: a gap up to it */
  n = wk_cues_make (c, NULL, 0, 30000, 2000 + HALF, false, &q);
  CHECK (n == 1);
  if (n == 1)
    check_cue (&q[0], WK_CUE_GAP, 2000, 2000 + HALF, "");
  /* finished: everything up to the audio's end, however short */
  n = wk_cues_make (c, NULL, 0, 2000 + HALF + 1, 0, true, &q);
  CHECK (n == 1);
  if (n == 1)
    check_cue (&q[0], WK_CUE_GAP, 2000 + HALF, 2000 + HALF + 1, "");
  n = wk_cues_make (c, NULL, 0, 2000 + HALF + 1, 0, true, &q);
  CHECK (n == 0 && q == NULL);
  wk_cues_free (c);
}

/* text never before what came before nor past the audio fed, and at
 * least a step long (past the audio if need be) */
static void
test_times_clamped (void)
{
  wk_cues *c = wk_cues_new (8, false, false, &own);
  wk_segment segs[5] = { word ("a", 0, 1000, 1.0f, true),
    word ("b", 800, 1200, 1.0f, true),  /* overlaps a: starts at its end */
    word ("c", 1500, 1500, 1.0f, true), /* no time of its own */
    word ("d", 4000, 9000, 1.0f, true), /* past the audio fed */
    word ("e", 5000, 5000, 1.0f, true), /* at the end of the audio */
  };
  const wk_cue *q;
  size_t n;

  if (!c)
    return;
  wk_cues_reset (c, 0);
  n = wk_cues_make (c, segs, 4, 5000, 0, false, &q);
  CHECK (n == 6);
  if (n == 6) {
    check_cue (&q[0], WK_CUE_TEXT, 0, 1000, "a");
    /* squeezed to less than a step: lasts a step */
    check_cue (&q[1], WK_CUE_TEXT, 1000, 1000 + STEP, "b");
    check_cue (&q[2], WK_CUE_GAP, 1000 + STEP, 1500, "");
    check_cue (&q[3], WK_CUE_TEXT, 1500, 1500 + STEP, "c");
    check_cue (&q[4], WK_CUE_GAP, 1500 + STEP, 4000, "");
    check_cue (&q[5], WK_CUE_TEXT, 4000, 5000, "d");
  }
  /* "e" has no room left in the audio: just past the end */
  n = wk_cues_make (c, &segs[4], 1, 5000, 0, false, &q);
  CHECK (n == 1);
  if (n == 1)
    check_cue (&q[0], WK_CUE_TEXT, 5000, 5000 + STEP, "e");
  /* a short word near the end of the audio lasts a step from its start */
  wk_cues_reset (c, 0);
  segs[4] = word ("e", 4900, 4900, 1.0f, true);
  n = wk_cues_make (c, &segs[4], 1, 5000, 0, false, &q);
  CHECK (n == 2);
  if (n == 2) {
    check_cue (&q[0], WK_CUE_GAP, 0, 4900, "");
    check_cue (&q[1], WK_CUE_TEXT, 4900, 4900 + STEP, "e");
  }

  /* after a restart at an earlier time: nothing before where the cues
   * start */
  wk_cues_reset (c, 2500);
  n = wk_cues_make (c, segs, 1, 5000, 0, false, &q);
  CHECK (n == 1);
  if (n == 1)
    check_cue (&q[0], WK_CUE_TEXT, 2500, 2500 + STEP, "a");
  wk_cues_free (c);
}

/* text_lines: live words one space apart where the model put one, each
 * utterance's line ended by a newline lasting 0 with its words' mean
 * probability; other segments each end with a newline */
static void
test_text_lines (void)
{
  wk_cues *c = wk_cues_new (8, true, true, &own);
  wk_segment segs[5] = { word ("Hello", 0, 400, 0.5f, true),
    word ("world", 400, 900, 1.0f, true),
    word ("!", 900, 1250, 0.75f, false),
    utterance_end (1400),
    word ("Again", 2000, 2400, 0.25f, true),
  };
  const wk_cue *q;
  size_t n;

  if (!c)
    return;
  wk_cues_reset (c, 0);
  n = wk_cues_make (c, segs, 5, 3000, 0, false, &q);
  CHECK (n == 8);
  if (n == 8) {
    check_cue (&q[0], WK_CUE_TEXT, 0, 400, "Hello");
    check_cue (&q[1], WK_CUE_TEXT, 400, 900, " world");
    check_cue (&q[2], WK_CUE_TEXT, 900, 1250, "!");
    check_cue (&q[3], WK_CUE_TEXT, 1250, 1250, "\n");
    CHECK (q[3].segment == NULL);
    CHECK_NEAR (q[3].p, (0.5 + 1.0 + 0.75) / 3, 1e-12);
    check_cue (&q[4], WK_CUE_GAP, 1250, 1400, "");
    check_cue (&q[5], WK_CUE_UTTERANCE_END, 1400, 1400, "");
    check_cue (&q[6], WK_CUE_GAP, 1400, 2000, "");
    check_cue (&q[7], WK_CUE_TEXT, 2000, 2400, "Again");
  }
  /* the finish ends the open line */
  n = wk_cues_make (c, NULL, 0, 3000, 0, true, &q);
  CHECK (n == 2);
  if (n == 2) {
    check_cue (&q[0], WK_CUE_TEXT, 2400, 2400, "\n");
    CHECK_NEAR (q[0].p, 0.25, 1e-7);
    check_cue (&q[1], WK_CUE_GAP, 2400, 3000, "");
  }
  /* a reset forgets the open line */
  n = wk_cues_make (c, &segs[4], 1, 3000, 0, false, &q);
  wk_cues_reset (c, 0);
  n = wk_cues_make (c, NULL, 0, 10, 0, true, &q);
  CHECK (n == 1 && q[0].kind == WK_CUE_GAP);
  wk_cues_free (c);

  /* phrases and offline segments: a newline each */
  c = wk_cues_new (8, true, false, &own);
  if (!c)
    return;
  wk_cues_reset (c, 0);
  n = wk_cues_make (c, segs, 2, 3000, 0, true, &q);
  CHECK (n == 3);
  if (n == 3) {
    check_cue (&q[0], WK_CUE_TEXT, 0, 400, "Hello\n");
    check_cue (&q[1], WK_CUE_TEXT, 400, 900, "world\n");
    check_cue (&q[2], WK_CUE_GAP, 900, 3000, "");
  }
  wk_cues_free (c);
}

/* the array holds what the most segments one take returns can give */
static void
test_capacity (void)
{
  enum
  { N = 64 };
  wk_segment segs[N];
  size_t i, made;

  for (i = 0; i < N; i++)
    segs[i] = i % 2 ? utterance_end (1000 * (int64_t) i + 500) :
        word ("w", 1000 * (int64_t) i + 100, 1000 * (int64_t) i + 400,
        1.0f, true);
  /* cues made for N segments, and for N / 8 given N (a whole file's
   * segments taken at once): every one either way */
  for (made = N; made >= N / 8; made /= 8) {
    wk_cues *c = wk_cues_new (made, true, true, &own);
    const wk_cue *q;
    size_t n, texts = 0, ends = 0;

    if (!c)
      return;
    wk_cues_reset (c, 0);
    n = wk_cues_make (c, segs, N, 1000 * N, 0, true, &q);
    for (i = 0; i < n; i++) {
      texts += q[i].kind == WK_CUE_TEXT && q[i].segment;
      ends += q[i].kind == WK_CUE_UTTERANCE_END;
      CHECK (i == 0 || q[i].start >= q[i - 1].end
          || q[i].kind == WK_CUE_UTTERANCE_END);
    }
    CHECK_MSG (texts == N / 2 && ends == N / 2, "made for %zu: %zu words, "
        "%zu ends", made, texts, ends);
    CHECK (n > 0 && q[n - 1].kind == WK_CUE_GAP && q[n - 1].end == 1000 * N);
    wk_cues_free (c);
  }
}

int
main (void)
{
  RUN (test_text_and_gaps);
  RUN (test_times_clamped);
  RUN (test_text_lines);
  RUN (test_capacity);
  return TEST_EXIT ();
}
