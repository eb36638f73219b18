/* Word alignment (engine/align.c): the filters and DTW on small known
 * matrices, DTW against an exhaustive search over every monotonic path,
 * and the word-span rules. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "align.h"
#include "wk-test.h"

static void
test_softmax_rows_sum_to_one (void)
{
  float x[6] = { 0.0f, 1.0f, 2.0f, 1000.0f, 1000.0f, 1000.0f };
  wk_align_softmax_rows (x, 2, 3);
  CHECK_NEAR (x[0] + x[1] + x[2], 1.0, 1e-6);
  CHECK_NEAR (x[2] / x[1], exp (1.0), 1e-4);
  /* large logits: no overflow */
  CHECK_NEAR (x[3], 1.0 / 3.0, 1e-6);
  CHECK_NEAR (x[5], 1.0 / 3.0, 1e-6);
}

static void
test_zscore_over_tokens (void)
{
  /* [3 rows][2 cols]: column 0 is 1, 2, 3; column 1 is constant */
  float x[6] = { 1.0f, 5.0f, 2.0f, 5.0f, 3.0f, 5.0f };
  double s = sqrt (1.5);        /* (x - 2) / sqrt (2 / 3) */
  wk_align_zscore_cols (x, 3, 2);
  CHECK_NEAR (x[0], -s, 1e-5);
  CHECK_NEAR (x[2], 0.0, 1e-6);
  CHECK_NEAR (x[4], s, 1e-5);
  CHECK (x[1] == 0.0f && x[3] == 0.0f && x[5] == 0.0f);
}

static void
test_median_filter_mirrors_ends (void)
{
  float tmp[32];
  /* width 5 on 1..5: mirrored 3 2 [1 2 3 4 5] 4 3 */
  float a[5] = { 1, 2, 3, 4, 5 };
  const float want_a[5] = { 2, 2, 3, 4, 4 };
  /* a lone spike goes, a step stays */
  float b[2][8] = { {0, 0, 0, 9, 0, 0, 0, 0}, {0, 0, 0, 0, 1, 1, 1, 1} };
  /* rows no longer than width / 2 are left alone */
  float c[3] = { 3, 1, 2 };
  int i;

  wk_align_median_filter (a, 1, 5, 5, tmp);
  for (i = 0; i < 5; i++)
    CHECK_NEAR (a[i], want_a[i], 0);
  wk_align_median_filter (&b[0][0], 2, 8, 3, tmp);
  for (i = 0; i < 8; i++) {
    CHECK_NEAR (b[0][i], 0.0, 0);
    CHECK_NEAR (b[1][i], i >= 4 ? 1.0 : 0.0, 0);
  }
  wk_align_median_filter (c, 1, 3, 7, tmp);
  CHECK (c[0] == 3 && c[1] == 1 && c[2] == 2);
}

/* the least cost of any monotonic path from (r, c) to the last cell */
static float
best_from (const float *cost, int rows, int cols, int r, int c)
{
  float here = cost[r * cols + c], best = INFINITY, v;
  if (r == rows - 1 && c == cols - 1)
    return here;
  if (r + 1 < rows && c + 1 < cols
      && (v = best_from (cost, rows, cols, r + 1, c + 1)) < best)
    best = v;
  if (r + 1 < rows && (v = best_from (cost, rows, cols, r + 1, c)) < best)
    best = v;
  if (c + 1 < cols && (v = best_from (cost, rows, cols, r, c + 1)) < best)
    best = v;
  return here + best;
}

static void
test_dtw_known_path (void)
{
  /* three tokens, each cheap on its own two positions */
  const float cost[3][6] = {
    {-1, -1, 0, 0, 0, 0},
    {0, 0, -1, -1, 0, 0},
    {0, 0, 0, 0, -1, -1},
  };
  float acc[4 * 7];
  uint8_t trace[4 * 7];
  int pr[8], pc[8], first[3], n;
  const int want_r[6] = { 0, 0, 1, 1, 2, 2 }, want_c[6] = { 0, 1, 2, 3, 4, 5 };

  n = wk_align_dtw (&cost[0][0], 3, 6, acc, trace, pr, pc);
  CHECK (n == 6);
  for (int i = 0; i < n && i < 6; i++)
    CHECK_MSG (pr[i] == want_r[i] && pc[i] == want_c[i], "step %d: (%d, %d)",
        i, pr[i], pc[i]);
  wk_align_first_cols (pr, pc, n, 3, first);
  CHECK (first[0] == 0 && first[1] == 2 && first[2] == 4);
  CHECK (wk_align_dtw (&cost[0][0], 0, 6, acc, trace, pr, pc) == 0);
  /* one row: the path runs along it */
  n = wk_align_dtw (&cost[0][0], 1, 6, acc, trace, pr, pc);
  CHECK (n == 6 && pr[5] == 0 && pc[5] == 5);
}

static void
test_dtw_is_least_cost_path (void)
{
  uint32_t seed = 12345;
  float cost[5 * 6], acc[6 * 7];
  uint8_t trace[6 * 7];
  int pr[16], pc[16];

  for (int trial = 0; trial < 200; trial++) {
    int rows = 1 + trial % 5, cols = 1 + (trial / 5) % 6, n, i;
    double sum = 0.0;
    for (i = 0; i < rows * cols; i++) {
      seed = seed * 1664525u + 1013904223u;
      cost[i] = (float) ((seed >> 8) % 2001) / 1000.0f - 1.0f;
    }
    n = wk_align_dtw (cost, rows, cols, acc, trace, pr, pc);
    CHECK (n >= (rows > cols ? rows : cols) && n <= rows + cols - 1);
    CHECK (pr[0] == 0 && pc[0] == 0);
    CHECK (pr[n - 1] == rows - 1 && pc[n - 1] == cols - 1);
    for (i = 0; i < n; i++) {
      sum += cost[pr[i] * cols + pc[i]];
      if (i > 0) {
        int dr = pr[i] - pr[i - 1], dc = pc[i] - pc[i - 1];
        CHECK_MSG ((dr == 1 && dc == 1) || (dr == 1 && dc == 0)
            || (dr == 0 && dc == 1), "trial %d step %d: %d %d", trial, i,
            dr, dc);
      }
    }
    CHECK_NEAR (sum, best_from (cost, rows, cols, 0, 0), 1e-4);
  }
}

static void
test_fix_words_spans (void)
{
  /* tokens: " a" (0..0: zero length), " b" "c" (2..5, 5..5), " d"
   * (3..4: before b's end), " e" (20..30: past the segment end 12) */
  int32_t t0[5] = { 0, 2, 5, 3, 20 }, t1[5] = { 0, 5, 5, 4, 30 };
  const bool ws[5] = { true, true, false, true, true };
  int i;

  wk_align_fix_words (t0, t1, ws, 5, 0, 12);
  /* word a: at least one position */
  CHECK (t0[0] == 0 && t1[0] == 1);
  /* word bc: 2..5, its tokens inside and monotonic */
  CHECK (t0[1] == 2 && t1[2] == 5);
  CHECK (t0[2] >= t1[1] && t1[1] <= t1[2] && t1[1] >= t0[1]);
  /* word d starts where bc ended and lasts a position */
  CHECK (t0[3] == 5 && t1[3] == 6);
  /* word e pulled inside the segment */
  CHECK (t0[4] == 11 && t1[4] == 12);
  for (i = 0; i < 5; i++) {
    CHECK (t0[i] <= t1[i] && t0[i] >= 0 && t1[i] <= 12);
    CHECK (i == 0 || t0[i] >= t1[i - 1]);       /* no overlap */
  }

  /* more words than positions: the last share the final one */
  {
    int32_t a0[3] = { 0, 0, 0 }, a1[3] = { 0, 0, 0 };
    const bool w3[3] = { true, true, true };
    wk_align_fix_words (a0, a1, w3, 3, 4, 6);
    CHECK (a0[0] == 4 && a1[0] == 5);
    CHECK (a0[1] == 5 && a1[1] == 6);
    CHECK (a0[2] == 5 && a1[2] == 6);
  }
}

int
main (void)
{
  RUN (test_softmax_rows_sum_to_one);
  RUN (test_zscore_over_tokens);
  RUN (test_median_filter_mirrors_ends);
  RUN (test_dtw_known_path);
  RUN (test_dtw_is_least_cost_path);
  RUN (test_fix_words_spans);
  return TEST_EXIT ();
}
