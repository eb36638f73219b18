/* Packet-loss concealment (internal header): sound for samples that never
 * arrived (RTP packets lost, a short GAP), continuing the audio on both
 * sides of the hole, so that the recognizer does not hear every lost
 * packet as a click of silence inside a word.
 *
 * Each side next to the hole is repeated at its own pitch period (the lag
 * between 2.5 and 20 ms at which its last 10 ms best match the 10 ms one
 * lag earlier), the side before from the hole's start on, the side after
 * backwards from the hole's end; the two cross-fade over the hole. A
 * side holds its level for 10 ms and fades out over the next 50 ms, so a
 * long hole is silence in its middle rather than a buzz. A side with
 * too little audio (the stream's start) or only silence gives nothing. */
#ifndef WK_CONCEAL_H
#define WK_CONCEAL_H

#include <stddef.h>
#include <stdint.h>

/* samples of context each side uses, at most */
#define WK_CONCEAL_CONTEXT 480

typedef struct
{
  /* each side with its sample next to the hole last (the side after is
   * stored reversed); period 0: the side gives nothing */
  float side[2][WK_CONCEAL_CONTEXT];
  size_t n[2];
  int period[2];
  uint64_t len;                 /* the hole's samples */
} wk_conceal;

/* Plans the filling of a hole of len samples between before[0 .. n_before)
 * (its last sample just before the hole) and after[0 .. n_after) (its
 * first sample just after it); either side may be empty. */
void wk_conceal_plan (wk_conceal * c, const float *before, size_t n_before,
    const float *after, size_t n_after, uint64_t len);

/* The hole's samples [j0, j0 + m) into out (j0 + m <= len). */
void wk_conceal_fill (const wk_conceal * c, uint64_t j0, float *out, size_t m);

#endif /* WK_CONCEAL_H */
