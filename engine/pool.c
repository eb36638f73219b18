/* A fixed thread pool for the kernels.
 *
 * A job is a number of tasks that threads claim one at a time from an
 * atomic counter; the caller starts with task 0 and keeps claiming, so a
 * worker that wakes late (the machine is shared, the decoder's jobs last
 * microseconds) costs nothing: once every task is claimed the caller
 * closes the job, workers that have not joined by then stay out of it, and
 * the caller waits only for those running a task. Idle workers spin for a
 * few microseconds (WK_POOL_SPIN_US, default 5) and then sleep on a
 * condition variable, so an idle pool costs no CPU. */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define WK_CPU_RELAX() _mm_pause ()
#else
#define WK_CPU_RELAX() do { } while (0)
#endif

#define WK_POOL_MAX_THREADS 64
#define WK_POOL_DEFAULT_SPIN_US 5

typedef struct
{
  wk_pool *pool;
  int ith;
  pthread_t thread;
} wk_worker;

struct wk_pool
{
  int n_threads;
  wk_worker *workers;           /* [n_threads - 1] */
  int n_started;
  int spin_us;

  pthread_mutex_t lock;
  pthread_cond_t start_cond;
  pthread_cond_t done_cond;
  atomic_int n_sleeping;        /* workers sleeping or about to */
  int caller_sleeping;          /* lock */
  int quit;                     /* lock */

  /* The job: written by the caller before state announces it. */
  wk_pool_fn fn;
  void *ctx;
  int n_tasks;
  atomic_int next_task;
  /* generation << 1 | closed: one word, so that a worker that read an
   * open job of its generation knows fn/ctx are that job's */
  atomic_uint state;
  atomic_int active;            /* workers inside the current job */
};

static uint64_t
wk_pool_now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Spins while *word == old, for at most spin_us; returns the last value
 * read. The clock is read only every 64 rounds. */
static unsigned
wk_pool_spin_while (atomic_uint * word, unsigned old, int spin_us)
{
  uint64_t deadline = 0;
  unsigned v;
  int i;

  for (i = 0;; i++) {
    v = atomic_load_explicit (word, memory_order_acquire);
    if (v != old || spin_us <= 0)
      return v;
    if ((i & 63) == 0) {
      uint64_t now = wk_pool_now_ns ();
      if (deadline == 0)
        deadline = now + ((uint64_t) spin_us) * 1000u;
      else if (now >= deadline)
        return v;
    }
    WK_CPU_RELAX ();
  }
}

static int
wk_pool_spin_idle (atomic_int * active, int spin_us)
{
  uint64_t deadline = 0;
  int i;

  for (i = 0;; i++) {
    if (atomic_load_explicit (active, memory_order_acquire) == 0)
      return 1;
    if (spin_us <= 0)
      return 0;
    if ((i & 63) == 0) {
      uint64_t now = wk_pool_now_ns ();
      if (deadline == 0)
        deadline = now + ((uint64_t) spin_us) * 1000u;
      else if (now >= deadline)
        return 0;
    }
    WK_CPU_RELAX ();
  }
}

/* Claims and runs tasks until none is left. */
static void
wk_pool_work (wk_pool * pool, wk_pool_fn fn, void *ctx, int n_tasks)
{
  int t;
  while ((t = atomic_fetch_add_explicit (&pool->next_task, 1,
              memory_order_relaxed)) < n_tasks)
    fn (ctx, t, n_tasks);
}

static void
wk_pool_leave (wk_pool * pool)
{
  if (atomic_fetch_sub_explicit (&pool->active, 1, memory_order_acq_rel) == 1) {
    pthread_mutex_lock (&pool->lock);
    if (pool->caller_sleeping)
      pthread_cond_signal (&pool->done_cond);
    pthread_mutex_unlock (&pool->lock);
  }
}

static void *
wk_pool_worker_main (void *data)
{
  wk_worker *w = data;
  wk_pool *pool = w->pool;
  unsigned seen = atomic_load_explicit (&pool->state, memory_order_acquire);

  for (;;) {
    unsigned s = wk_pool_spin_while (&pool->state, seen, pool->spin_us);

    if (s == seen) {
      pthread_mutex_lock (&pool->lock);
      atomic_fetch_add_explicit (&pool->n_sleeping, 1, memory_order_seq_cst);
      while (!pool->quit && (s = atomic_load_explicit (&pool->state,
                  memory_order_acquire)) == seen)
        pthread_cond_wait (&pool->start_cond, &pool->lock);
      atomic_fetch_sub_explicit (&pool->n_sleeping, 1, memory_order_relaxed);
      if (pool->quit) {
        pthread_mutex_unlock (&pool->lock);
        break;
      }
      pthread_mutex_unlock (&pool->lock);
    }
    seen = s;
    if (s & 1u)                 /* closed before we got here */
      continue;

    /* join, then make sure the job is still the open one we saw */
    atomic_fetch_add_explicit (&pool->active, 1, memory_order_seq_cst);
    if (atomic_load_explicit (&pool->state, memory_order_seq_cst) == s)
      wk_pool_work (pool, pool->fn, pool->ctx, pool->n_tasks);
    wk_pool_leave (pool);
  }
  return NULL;
}

static int
wk_pool_default_threads (void)
{
  long n = sysconf (_SC_NPROCESSORS_ONLN);
  if (n < 1)
    n = 1;
  if (n > 8)
    n = 8;
  return (int) n;
}

wk_pool *
wk_pool_new (int n_threads)
{
  wk_pool *pool;
  const char *env;
  int i;

  if (n_threads <= 0)
    n_threads = wk_pool_default_threads ();
  if (n_threads > WK_POOL_MAX_THREADS)
    n_threads = WK_POOL_MAX_THREADS;

  pool = calloc (1, sizeof *pool);
  if (!pool)
    return NULL;
  pool->n_threads = n_threads;
  pool->spin_us = WK_POOL_DEFAULT_SPIN_US;
  env = getenv ("WK_POOL_SPIN_US");
  if (env) {
    long v = strtol (env, NULL, 10);
    pool->spin_us = v < 0 ? 0 : v > 10000 ? 10000 : (int) v;
  }
  atomic_init (&pool->next_task, 0);
  atomic_init (&pool->state, 1u);       /* generation 0, closed */
  atomic_init (&pool->active, 0);
  atomic_init (&pool->n_sleeping, 0);
  if (pthread_mutex_init (&pool->lock, NULL) != 0) {
    free (pool);
    return NULL;
  }
  pthread_cond_init (&pool->start_cond, NULL);
  pthread_cond_init (&pool->done_cond, NULL);

  if (n_threads > 1) {
    pool->workers = calloc ((size_t) n_threads - 1, sizeof (wk_worker));
    if (!pool->workers) {
      wk_pool_free (pool);
      return NULL;
    }
  }
  for (i = 1; i < n_threads; i++) {
    wk_worker *w = &pool->workers[i - 1];
    w->pool = pool;
    w->ith = i;
    if (pthread_create (&w->thread, NULL, wk_pool_worker_main, w) != 0) {
      wk_pool_free (pool);
      return NULL;
    }
    pool->n_started++;
  }
  return pool;
}

void
wk_pool_free (wk_pool * pool)
{
  int i;

  if (!pool)
    return;
  pthread_mutex_lock (&pool->lock);
  pool->quit = 1;
  /* a new (closed) generation gets spinning workers to the lock */
  atomic_fetch_add_explicit (&pool->state, 2u, memory_order_release);
  pthread_cond_broadcast (&pool->start_cond);
  pthread_mutex_unlock (&pool->lock);
  for (i = 0; i < pool->n_started; i++)
    pthread_join (pool->workers[i].thread, NULL);
  pthread_cond_destroy (&pool->start_cond);
  pthread_cond_destroy (&pool->done_cond);
  pthread_mutex_destroy (&pool->lock);
  free (pool->workers);
  free (pool);
}

int
wk_pool_size (const wk_pool * pool)
{
  return pool ? pool->n_threads : 1;
}

void
wk_pool_run_tasks (wk_pool * pool, wk_pool_fn fn, void *ctx, int n_tasks)
{
  unsigned s;
  int t;

  if (n_tasks <= 0)
    return;
  if (!pool || pool->n_started == 0 || n_tasks == 1) {
    for (t = 0; t < n_tasks; t++)
      fn (ctx, t, n_tasks);
    return;
  }

  /* publish: task 0 is the caller's */
  pool->fn = fn;
  pool->ctx = ctx;
  pool->n_tasks = n_tasks;
  atomic_store_explicit (&pool->next_task, 1, memory_order_relaxed);
  s = (atomic_load_explicit (&pool->state, memory_order_relaxed) | 1u) + 1u;
  atomic_store_explicit (&pool->state, s, memory_order_seq_cst);
  /* a worker counts itself sleeping before it checks state (both seq_cst),
   * so either it sees the new job or we see it and wake it */
  if (atomic_load_explicit (&pool->n_sleeping, memory_order_seq_cst) > 0) {
    pthread_mutex_lock (&pool->lock);
    pthread_cond_broadcast (&pool->start_cond);
    pthread_mutex_unlock (&pool->lock);
  }

  fn (ctx, 0, n_tasks);
  wk_pool_work (pool, fn, ctx, n_tasks);

  /* every task is claimed: close, then wait for the workers inside */
  atomic_store_explicit (&pool->state, s | 1u, memory_order_seq_cst);
  /* they are computing: worth a few more microseconds of spinning than
   * an idle worker */
  if (wk_pool_spin_idle (&pool->active, 4 * pool->spin_us))
    return;
  pthread_mutex_lock (&pool->lock);
  pool->caller_sleeping = 1;
  while (atomic_load_explicit (&pool->active, memory_order_acquire) != 0)
    pthread_cond_wait (&pool->done_cond, &pool->lock);
  pool->caller_sleeping = 0;
  pthread_mutex_unlock (&pool->lock);
}

void
wk_pool_run (wk_pool * pool, wk_pool_fn fn, void *ctx)
{
  wk_pool_run_tasks (pool, fn, ctx, wk_pool_size (pool));
}
