/* Word timing from the decoder's cross-attention (the idea of openai's
 * word_timestamps and whisper.cpp's DTW token times): once a window's
 * text is decoded, the decoder runs once more over the start-of-
 * transcript tokens + the text, keeping the softmax cross-attention of
 * a few "alignment heads" (those whose attention follows the audio);
 * each head's weights are standardised over the tokens and median-
 * filtered along time, the heads averaged, and dynamic time warping on
 * the negated matrix gives a monotonic token -> encoder-position path.
 * A token starts at the first position its row (the position that
 * predicts it) takes on that path; with lead_row the row before the
 * first text token's (predicting <|notimestamps|>) takes the audio
 * before it.
 *
 * The matrix helpers are plain functions on row-major [rows][cols]
 * float matrices, exposed for the unit tests (tests/test-align.c).
 */
#ifndef WK_ALIGN_H
#define WK_ALIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* openai's median filter width along time (timing.py medfilt_width) */
#define WK_ALIGN_MEDFILT 7
/* samples per encoder position: 2 mel hops, 20 ms */
#define WK_ALIGN_POS_SAMPLES (2 * WK_HOP)

/* ---- matrix helpers ---------------------------------------------------- */

/* Softmax of each row of x [rows][cols], in place. */
void wk_align_softmax_rows (float *x, int rows, int cols);

/* Each column of x [rows][cols] standardised over the rows: (x - mean)
 * / std (population std); a column with std 0 becomes 0. */
void wk_align_zscore_cols (float *x, int rows, int cols);

/* A median filter of odd width along each row of x [rows][cols], in
 * place, the row mirrored at its ends without repeating the edge
 * (x[-1] = x[1]). Rows no longer than width / 2 are left as they are
 * (there is nothing to mirror). tmp holds cols + width floats. */
void wk_align_median_filter (float *x, int rows, int cols, int width,
    float *tmp);

/* Dynamic time warping: the monotonic path from (0, 0) to (rows-1,
 * cols-1), each step one of (+1, +1), (+1, 0), (0, +1), of least summed
 * cost[r][c]. acc holds (rows + 1) (cols + 1) floats, trace as many
 * bytes. Writes the path's rows and columns in order (at most rows +
 * cols - 1 entries each) and returns its length; 0 when rows or cols is
 * below 1. On equal costs the diagonal step wins, then the row step. */
int wk_align_dtw (const float *cost, int rows, int cols, float *acc,
    uint8_t * trace, int *path_r, int *path_c);

/* first[r] = the first column the path (from wk_align_dtw) takes on row
 * r, for r in 0 .. rows-1 (every row is on a DTW path). */
void wk_align_first_cols (const int *path_r, const int *path_c, int n_path,
    int rows, int *first);

/* Word spans from token spans: token i of n covers [t0[i], t1[i])
 * (positions); word_start[i] says that token i starts a word (token 0
 * always does). Makes words monotonic and non-overlapping, each at
 * least one position long and inside [lo, hi) (hi > lo), and the
 * tokens of a word inside its span, in order, none overlapping the one
 * before. When hi - lo is less than the number of words, the last words
 * share the final position. */
void wk_align_fix_words (int32_t * t0, int32_t * t1, const bool *word_start,
    int n, int32_t lo, int32_t hi);

/* ---- the pass ----------------------------------------------------------- */

/* Scratch for wk_align_window, sized once by wk_stream_new for a stream
 * that wants word times from a model with heads (about 2.25 (T + 1) (A + 1)
 * floats: 6.5 MB for T = 448, A = 1500); wk_ctx_free frees it. */
bool wk_align_ctx_alloc (wk_ctx * ctx);
void wk_align_ctx_free (wk_ctx * ctx);

/* Called by the decoder at layer l with the n cross-attention queries
 * in ctx->d_q when ctx->al_capture: adds the layer's heads' processed
 * weights (softmax over the first ctx->al_pos positions, z-score,
 * median filter) into ctx->al_acc. */
void wk_align_capture (wk_ctx * ctx, int l, int n, float scale);

/* Times the text tokens text[0..n_text-1] (no timestamps or specials)
 * of the window last encoded, whose audio fills its first n_pos encoder
 * positions: t0[i] / t1[i] receive token i's start and end, in encoder
 * positions (20 ms) from the window's start, t0[i] <= t1[i] <= n_pos.
 * lang and translate as the window was decoded with. lead_row: the
 * path starts on the row before the first text token's, which takes the
 * audio before the first word (else, as openai does, the first token
 * starts at position 0). Overwrites the KV
 * cache of beam 0. WK_ERR_ARG when the sequence does not fit the
 * context; WK_ERR_STATE when the model has no heads or the run was
 * cancelled. */
wk_status wk_align_window (wk_ctx * ctx, int lang, bool translate,
    bool lead_row, const int32_t * text, int n_text, int n_pos,
    int32_t * t0, int32_t * t1);

/* Whether wk_align_window can run on ctx: the model has heads and the
 * scratch is there. */
bool wk_align_ready (const wk_ctx * ctx);

/* The DTW positions f0/f1 of the text tokens tok[0..n-1] of one segment
 * (a window starting at sample offset) fitted to the segment's span
 * [start, end) samples with wk_align_fix_words, words split where a
 * token's text starts with a space (as the live policy and the CLI split
 * them). False, leaving them, when the span is shorter than one
 * position. n <= n_text_ctx. */
bool wk_align_segment (wk_ctx * ctx, const int32_t * tok, int n,
    int32_t * f0, int32_t * f1, int64_t offset, int64_t start, int64_t end);

#endif /* WK_ALIGN_H */
