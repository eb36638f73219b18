/* The scheduler of one model's decoder steps: threads of different
 * streams that ask for a step at the same time get one pass over the
 * weights for all of them (flat combining: the first to find it free runs
 * the requests waiting then, its own among them, while the others sleep
 * until theirs is done). A stream alone runs its steps at once, as it
 * would without a scheduler; streams that batched together are waited
 * for a little (at most 200 us) when one comes back before the others,
 * so that they stay together.
 *
 * Fairness: requests are served in arrival order; a batch takes the
 * oldest ones up to WK_SCHED_MAX_ROWS rows, so a request waits at most
 * for the batch in flight and those ahead of it. Only short requests
 * (a decoder step: one token, or one per beam) come here; long ones (a
 * prompt's pass, an encoder window) run on their own threads beside the
 * batches, so no stream's step waits behind another's window.
 */
#ifndef WK_SCHED_H
#define WK_SCHED_H

#include <stdatomic.h>
#include <stdbool.h>

#define WK_SCHED_MAX_REQS 32
#define WK_SCHED_MAX_ROWS 64

typedef struct wk_sched wk_sched;

/* A request's header: the caller embeds it as the first member of its
 * own request (the decoder's wk_dec_req). rows: what it adds to a
 * batch. */
typedef struct wk_sched_req
{
  int rows;
  const void *owner;            /* its stream (the decoder's wk_ctx) */
  bool done;                    /* the scheduler's lock */
  struct wk_sched_req *next;    /* the scheduler's lock: the queue */
} wk_sched_req;

/* Runs reqs[0 .. n_reqs - 1] (1 <= n_reqs <= WK_SCHED_MAX_REQS) as one
 * batch, on the thread of whichever request found the scheduler free. */
typedef void (*wk_sched_fn) (wk_sched_req ** reqs, int n_reqs);

wk_sched *wk_sched_new (void);
void wk_sched_free (wk_sched * sched);

/* Runs req through fn, batched with whatever requests are waiting, and
 * returns when it is done. Every request given to one scheduler must be
 * run by the same fn. */
void wk_sched_run (wk_sched * sched, wk_sched_req * req, wk_sched_fn fn);

/* The admission of one model's live runs (a window's mel, encoder and
 * decoding): at most `slots` at once, and when one ends the waiting run
 * with the earliest deadline goes next (ties: the one that came first).
 * Runs of many streams started together (every stream hears speech at
 * the same moments) otherwise share the cores all at once and all finish
 * late; in deadline order the urgent ones finish first and the others'
 * runs spread out over time. Decoder steps of admitted runs still meet in
 * the step scheduler above. */
typedef struct wk_gate wk_gate;

/* slots <= 0: the online CPU count, or $WK_RUN_SLOTS when set (0 there:
 * no limit, every run at once, as without a gate). NULL on failure. */
wk_gate *wk_gate_new (int slots);
void wk_gate_free (wk_gate * gate);
/* Waits for a slot, the waiting run with the smallest deadline (any
 * clock, the same for every caller; INFINITY last) first. Returns the
 * number of other runs holding a slot or waiting for one when it got its
 * own (0: the machine is the run's alone), or -1 without a slot once
 * *cancel is set (looked at every few milliseconds). gate NULL or without
 * a limit: returns 0 at once. */
int wk_gate_enter (wk_gate * gate, double deadline, const atomic_bool * cancel);
/* Gives the slot of a successful wk_gate_enter back. */
void wk_gate_leave (wk_gate * gate);
/* The slots (0: no limit). */
int wk_gate_slots (const wk_gate * gate);
/* Runs waiting for a slot now. */
int wk_gate_waiting (wk_gate * gate);

#endif
