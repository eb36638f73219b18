/* The admission of live runs (engine/scheduler.h, wk_gate): never more
 * runs at once than slots, the waiting run with the earliest deadline
 * next (arrival order on ties, INFINITY and NaN last), and a waiting run
 * whose stream is cancelled leaves without a slot.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "scheduler.h"
#include "wk-test.h"

#define N_RUNNERS 6

static void
nap_ms (int ms)
{
  struct timespec ts = { ms / 1000, (long) (ms % 1000) * 1000000L };
  nanosleep (&ts, NULL);
}

/* Waits (bounded) until n runs wait at the gate. */
static int
wait_for_waiters (wk_gate * g, int n)
{
  int i;

  for (i = 0; i < 5000 && wk_gate_waiting (g) < n; i++)
    nap_ms (1);
  return wk_gate_waiting (g) == n;
}

typedef struct
{
  wk_gate *gate;
  double deadline;
  atomic_bool cancel;
  bool admitted;
  int others;                   /* what wk_gate_enter returned */
  int order;                    /* its place among the admitted */
} runner;

static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static int order_next;
static atomic_int inside, most_inside;

static void *
run_once (void *arg)
{
  runner *r = arg;
  int now, most;

  r->others = wk_gate_enter (r->gate, r->deadline, &r->cancel);
  r->admitted = r->others >= 0;
  if (!r->admitted)
    return NULL;
  pthread_mutex_lock (&order_lock);
  r->order = order_next++;
  pthread_mutex_unlock (&order_lock);
  now = atomic_fetch_add (&inside, 1) + 1;
  most = atomic_load (&most_inside);
  while (now > most
      && !atomic_compare_exchange_weak (&most_inside, &most, now));
  nap_ms (5);
  atomic_fetch_sub (&inside, 1);
  wk_gate_leave (r->gate);
  return NULL;
}

static void
start (runner * r, wk_gate * g, double deadline, pthread_t * th)
{
  r->gate = g;
  r->deadline = deadline;
  atomic_init (&r->cancel, false);
  r->admitted = false;
  r->order = -1;
  pthread_create (th, NULL, run_once, r);
}

/* With the slot held, runners queue up; released, they go in deadline
 * order, ties in arrival order, INFINITY and NaN after every finite one. */
static void
test_deadline_order (void)
{
  const double dl[N_RUNNERS] = { 4.0, 1.0, INFINITY, 2.0, NAN, 2.0 };
  /* expected places: 1.0, 2.0 (first), 2.0 (second), 4.0, then
   * INFINITY and NaN in arrival order */
  const int want[N_RUNNERS] = { 3, 0, 4, 1, 5, 2 };
  wk_gate *g = wk_gate_new (1);
  runner r[N_RUNNERS];
  pthread_t th[N_RUNNERS];
  atomic_bool never = false;
  int i;

  CHECK (g && wk_gate_slots (g) == 1);
  if (!g)
    return;
  order_next = 0;
  CHECK (wk_gate_enter (g, 0.0, &never) == 0);
  for (i = 0; i < N_RUNNERS; i++) {
    start (&r[i], g, dl[i], &th[i]);
    /* arrival order is the order they start waiting */
    CHECK (wait_for_waiters (g, i + 1));
  }
  wk_gate_leave (g);
  for (i = 0; i < N_RUNNERS; i++)
    pthread_join (th[i], NULL);
  for (i = 0; i < N_RUNNERS; i++) {
    CHECK (r[i].admitted);
    CHECK_MSG (r[i].order == want[i], "runner %d (deadline %g) went %d, "
        "expected %d", i, dl[i], r[i].order, want[i]);
    /* one at a time: the others are those still waiting behind it */
    CHECK_MSG (r[i].others == N_RUNNERS - 1 - r[i].order, "runner %d went "
        "%d with %d others", i, r[i].order, r[i].others);
  }
  CHECK (wk_gate_waiting (g) == 0);
  wk_gate_free (g);
}

/* Never more runs inside than slots, however many arrive at once. */
static void
test_slots_bound_runs (void)
{
  wk_gate *g = wk_gate_new (2);
  runner r[N_RUNNERS];
  pthread_t th[N_RUNNERS];
  int i;

  CHECK (g);
  if (!g)
    return;
  atomic_store (&inside, 0);
  atomic_store (&most_inside, 0);
  for (i = 0; i < N_RUNNERS; i++)
    start (&r[i], g, (double) (i % 3), &th[i]);
  for (i = 0; i < N_RUNNERS; i++)
    pthread_join (th[i], NULL);
  for (i = 0; i < N_RUNNERS; i++)
    CHECK (r[i].admitted);
  CHECK_MSG (atomic_load (&most_inside) >= 1 && atomic_load (&most_inside) <= 2,
      "%d runs inside at once with 2 slots", atomic_load (&most_inside));
  wk_gate_free (g);
}

/* A waiting run whose cancel flag is set leaves without a slot, and the
 * run behind it still gets the slot when it comes free. */
static void
test_cancel_while_waiting (void)
{
  wk_gate *g = wk_gate_new (1);
  runner a, b;
  pthread_t ta, tb;
  atomic_bool never = false;

  CHECK (g);
  if (!g)
    return;
  order_next = 0;
  CHECK (wk_gate_enter (g, 0.0, &never) == 0);
  start (&a, g, 1.0, &ta);
  CHECK (wait_for_waiters (g, 1));
  start (&b, g, 2.0, &tb);
  CHECK (wait_for_waiters (g, 2));
  atomic_store (&a.cancel, true);
  pthread_join (ta, NULL);
  CHECK (!a.admitted);
  CHECK (wk_gate_waiting (g) == 1);
  wk_gate_leave (g);
  pthread_join (tb, NULL);
  CHECK (b.admitted && b.order == 0 && b.others == 0);
  wk_gate_free (g);
}

/* No gate, or 0 slots: every run goes at once. */
static void
test_no_limit (void)
{
  wk_gate *g = NULL;

  CHECK (wk_gate_enter (NULL, 1.0, NULL) == 0);
  wk_gate_leave (NULL);
  CHECK (wk_gate_slots (NULL) == 0);
  /* the default: one slot per online CPU at least */
  g = wk_gate_new (0);
  CHECK (g && wk_gate_slots (g) >= 0);
  wk_gate_free (g);
}

int
main (void)
{
  RUN (test_deadline_order);
  RUN (test_slots_bound_runs);
  RUN (test_cancel_while_waiting);
  RUN (test_no_limit);
  return TEST_EXIT ();
}
