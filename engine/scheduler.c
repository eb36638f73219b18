/* The scheduler of a model's decoder steps (see scheduler.h). */
#include "scheduler.h"

#include "pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>

/* How long a free scheduler waits for the streams of the last batch to
 * come back with their next step (each samples its token in between,
 * tens of microseconds) before it runs without them. */
#define WK_SCHED_GATHER_NS (200 * 1000)

struct wk_sched
{
  pthread_mutex_t lock;
  pthread_cond_t done_cond;     /* a batch finished */
  pthread_cond_t arrive_cond;   /* a request came */
  wk_sched_req *head, **tail;   /* lock: waiting requests, oldest first */
  bool busy;                    /* lock: a batch is running or gathering */
  bool gathering;               /* lock: its leader waits for arrivals */
  /* lock: the owners of the last batch, compared, never dereferenced */
  const void *last[WK_SCHED_MAX_REQS];
  int n_last;
};

wk_sched *
wk_sched_new (void)
{
  wk_sched *s = calloc (1, sizeof *s);

  if (!s)
    return NULL;
  if (pthread_mutex_init (&s->lock, NULL) != 0) {
    free (s);
    return NULL;
  }
  pthread_cond_init (&s->done_cond, NULL);
  pthread_cond_init (&s->arrive_cond, NULL);
  s->tail = &s->head;
  return s;
}

void
wk_sched_free (wk_sched * s)
{
  if (!s)
    return;
  pthread_cond_destroy (&s->done_cond);
  pthread_cond_destroy (&s->arrive_cond);
  pthread_mutex_destroy (&s->lock);
  free (s);
}

/* *t = CLOCK_REALTIME (pthread_cond_timedwait's clock) in ns (< 1 s) */
static void
time_in_ns (struct timespec *t, long ns)
{
  clock_gettime (CLOCK_REALTIME, t);
  t->tv_nsec += ns;
  if (t->tv_nsec >= 1000 * 1000 * 1000) {
    t->tv_sec++;
    t->tv_nsec -= 1000 * 1000 * 1000;
  }
}

/* Whether an owner of the last batch has no request waiting (it is
 * still sampling its token, or its window is done). Lock. */
static bool
wk_sched_missing (const wk_sched * s)
{
  int i;

  for (i = 0; i < s->n_last; i++) {
    const wk_sched_req *r;
    for (r = s->head; r && r->owner != s->last[i]; r = r->next);
    if (!r)
      return true;
  }
  return false;
}

/* Waits (lock held) until every owner of the last batch is back or
 * WK_SCHED_GATHER_NS have passed: streams that batched once come back
 * at about the same time, and the first back would otherwise run alone
 * and the others after it, every step. A stream alone is always back
 * (it is the caller): it never waits. */
static void
wk_sched_gather (wk_sched * s)
{
  struct timespec until;

  if (!wk_sched_missing (s))
    return;
  time_in_ns (&until, WK_SCHED_GATHER_NS);
  s->gathering = true;
  while (wk_sched_missing (s)
      && pthread_cond_timedwait (&s->arrive_cond, &s->lock, &until) == 0);
  s->gathering = false;
}

void
wk_sched_run (wk_sched * s, wk_sched_req * req, wk_sched_fn fn)
{
  wk_sched_req *batch[WK_SCHED_MAX_REQS];

  pthread_mutex_lock (&s->lock);
  req->done = false;
  req->next = NULL;
  *s->tail = req;
  s->tail = &req->next;
  if (s->gathering)
    pthread_cond_signal (&s->arrive_cond);
  while (!req->done) {
    int n = 0, rows = 0, i;

    if (s->busy) {
      pthread_cond_wait (&s->done_cond, &s->lock);
      continue;
    }
    /* run the oldest waiting requests (ours may be later: then we serve
     * them and look again) */
    s->busy = true;
    wk_sched_gather (s);
    while (s->head && n < WK_SCHED_MAX_REQS
        && (n == 0 || rows + s->head->rows <= WK_SCHED_MAX_ROWS)) {
      rows += s->head->rows;
      batch[n++] = s->head;
      s->head = s->head->next;
    }
    if (!s->head)
      s->tail = &s->head;
    for (i = 0; i < n; i++)
      s->last[i] = batch[i]->owner;
    s->n_last = n;
    pthread_mutex_unlock (&s->lock);
    fn (batch, n);
    pthread_mutex_lock (&s->lock);
    for (i = 0; i < n; i++)
      batch[i]->done = true;
    s->busy = false;
    pthread_cond_broadcast (&s->done_cond);
  }
  pthread_mutex_unlock (&s->lock);
}

/* ---- the admission of live runs ---------------------------------------- */

/* How often a waiting run looks at its stream's cancel flag. */
#define WK_GATE_POLL_NS (10 * 1000 * 1000)

typedef struct wk_gate_waiter
{
  double deadline;
  unsigned long long seq;       /* arrival order, for ties */
  struct wk_gate_waiter *next;
} wk_gate_waiter;

struct wk_gate
{
  pthread_mutex_t lock;
  pthread_cond_t cond;          /* a slot came free */
  int slots;                    /* 0: no limit */
  int active;                   /* lock: runs holding a slot */
  unsigned long long seq;       /* lock: the next waiter's */
  wk_gate_waiter *waiting;      /* lock: unordered */
};

static int
wk_gate_default_slots (void)
{
  const char *env = getenv ("WK_RUN_SLOTS");
  long n;

  if (env && *env) {
    char *end;
    n = strtol (env, &end, 10);
    if (*end == '\0' && n >= 0 && n <= 1024)
      return (int) n;
  }
  return wk_online_cpus ();
}

wk_gate *
wk_gate_new (int slots)
{
  wk_gate *g = calloc (1, sizeof *g);

  if (!g)
    return NULL;
  if (pthread_mutex_init (&g->lock, NULL) != 0) {
    free (g);
    return NULL;
  }
  if (pthread_cond_init (&g->cond, NULL) != 0) {
    pthread_mutex_destroy (&g->lock);
    free (g);
    return NULL;
  }
  g->slots = slots > 0 ? slots : wk_gate_default_slots ();
  return g;
}

void
wk_gate_free (wk_gate * g)
{
  if (!g)
    return;
  pthread_cond_destroy (&g->cond);
  pthread_mutex_destroy (&g->lock);
  free (g);
}

int
wk_gate_slots (const wk_gate * g)
{
  return g ? g->slots : 0;
}

int
wk_gate_waiting (wk_gate * g)
{
  const wk_gate_waiter *w;
  int n = 0;

  if (!g)
    return 0;
  pthread_mutex_lock (&g->lock);
  for (w = g->waiting; w; w = w->next)
    n++;
  pthread_mutex_unlock (&g->lock);
  return n;
}

/* Whether w goes before every other waiter. Lock. */
static bool
wk_gate_first (const wk_gate * g, const wk_gate_waiter * w)
{
  const wk_gate_waiter *o;

  for (o = g->waiting; o; o = o->next)
    if (o != w && (o->deadline < w->deadline
            || (o->deadline == w->deadline && o->seq < w->seq)))
      return false;
  return true;
}

int
wk_gate_enter (wk_gate * g, double deadline, const atomic_bool * cancel)
{
  wk_gate_waiter me, **pp;
  int others = -1;

  if (!g || g->slots == 0)
    return 0;
  /* NaN would compare false both ways: last, as INFINITY */
  me.deadline = deadline == deadline ? deadline : (double) INFINITY;
  pthread_mutex_lock (&g->lock);
  me.seq = g->seq++;
  me.next = g->waiting;
  g->waiting = &me;
  while (g->active >= g->slots || !wk_gate_first (g, &me)) {
    struct timespec until;

    if (cancel && atomic_load_explicit (cancel, memory_order_relaxed))
      break;
    time_in_ns (&until, WK_GATE_POLL_NS);
    pthread_cond_timedwait (&g->cond, &g->lock, &until);
  }
  if (g->active < g->slots && wk_gate_first (g, &me)) {
    const wk_gate_waiter *w;
    others = g->active;
    for (w = g->waiting; w; w = w->next)
      others += w != &me;
    g->active++;
  }
  for (pp = &g->waiting; *pp != &me; pp = &(*pp)->next);
  *pp = me.next;
  /* the next in line may be free to go: after a cancel, or when a slot
   * is still free (two slots freed at once woke a waiter that was not
   * first, which went back to sleep for a poll) */
  if (g->waiting && (others < 0 || g->active < g->slots))
    pthread_cond_broadcast (&g->cond);
  pthread_mutex_unlock (&g->lock);
  return others;
}

void
wk_gate_leave (wk_gate * g)
{
  if (!g || g->slots == 0)
    return;
  pthread_mutex_lock (&g->lock);
  g->active--;
  pthread_cond_broadcast (&g->cond);
  pthread_mutex_unlock (&g->lock);
}
