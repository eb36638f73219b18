/* A fixed thread pool for the kernels.
 *
 * A job is published by bumping a generation counter under the pool's
 * mutex; workers run it and count down `pending`. Between jobs a worker
 * spins for a bounded few microseconds (the decoder issues hundreds of
 * small jobs per token, with gaps of microseconds between them) and then
 * sleeps on a condition variable, so an idle pool costs no CPU. The
 * caller waits for the stragglers the same way. */
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
/* Default bound on spinning before sleeping, in microseconds. */
#define WK_POOL_DEFAULT_SPIN_US 30

typedef struct
{
  wk_pool *pool;
  int ith;
  pthread_t thread;
} wk_worker;

struct wk_pool
{
  int n_threads;
  wk_worker *workers;           /* [n_threads - 1], ith = 1.. */
  int n_started;

  pthread_mutex_t lock;
  pthread_cond_t start_cond;
  pthread_cond_t done_cond;

  /* The current job; written by the caller before gen is bumped. */
  wk_pool_fn fn;
  void *ctx;
  atomic_uint gen;
  atomic_int pending;
  int quit;                     /* under lock */
  int caller_sleeping;          /* under lock */
  int spin_us;
};

static uint64_t
wk_pool_now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Spins until *gen differs from old or spin_us pass; returns 1 if it did
 * change. The clock is read only every 64 rounds. */
static int
wk_pool_spin_gen (atomic_uint * gen, unsigned old, int spin_us)
{
  uint64_t deadline = 0;
  int i;

  if (spin_us <= 0)
    return atomic_load_explicit (gen, memory_order_acquire) != old;
  for (i = 0;; i++) {
    if (atomic_load_explicit (gen, memory_order_acquire) != old)
      return 1;
    if ((i & 63) == 0) {
      uint64_t now = wk_pool_now_ns ();
      if (deadline == 0)
        deadline = now + (uint64_t) spin_us * 1000u;
      else if (now >= deadline)
        return 0;
    }
    WK_CPU_RELAX ();
  }
}

static int
wk_pool_spin_done (atomic_int * pending, int spin_us)
{
  uint64_t deadline = 0;
  int i;

  if (spin_us <= 0)
    return atomic_load_explicit (pending, memory_order_acquire) == 0;
  for (i = 0;; i++) {
    if (atomic_load_explicit (pending, memory_order_acquire) == 0)
      return 1;
    if ((i & 63) == 0) {
      uint64_t now = wk_pool_now_ns ();
      if (deadline == 0)
        deadline = now + (uint64_t) spin_us * 1000u;
      else if (now >= deadline)
        return 0;
    }
    WK_CPU_RELAX ();
  }
}

static void *
wk_pool_worker_main (void *data)
{
  wk_worker *w = data;
  wk_pool *pool = w->pool;
  unsigned seen = 0;

  for (;;) {
    unsigned gen;

    if (!wk_pool_spin_gen (&pool->gen, seen, pool->spin_us)) {
      pthread_mutex_lock (&pool->lock);
      while (!pool->quit
          && atomic_load_explicit (&pool->gen, memory_order_acquire) == seen)
        pthread_cond_wait (&pool->start_cond, &pool->lock);
      pthread_mutex_unlock (&pool->lock);
    }
    gen = atomic_load_explicit (&pool->gen, memory_order_acquire);
    if (gen == seen) {
      /* woken without a job: only quit does that */
      break;
    }
    seen = gen;
    if (pool->fn == NULL)       /* the quit job */
      break;

    pool->fn (pool->ctx, w->ith, pool->n_threads);

    if (atomic_fetch_sub_explicit (&pool->pending, 1,
            memory_order_acq_rel) == 1) {
      pthread_mutex_lock (&pool->lock);
      if (pool->caller_sleeping)
        pthread_cond_signal (&pool->done_cond);
      pthread_mutex_unlock (&pool->lock);
    }
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

/* Publishes fn/ctx as a new job to all workers. */
static void
wk_pool_publish (wk_pool * pool, wk_pool_fn fn, void *ctx)
{
  pool->fn = fn;
  pool->ctx = ctx;
  atomic_store_explicit (&pool->pending, pool->n_started,
      memory_order_relaxed);
  pthread_mutex_lock (&pool->lock);
  atomic_fetch_add_explicit (&pool->gen, 1, memory_order_release);
  pthread_cond_broadcast (&pool->start_cond);
  pthread_mutex_unlock (&pool->lock);
}

static void
wk_pool_wait (wk_pool * pool)
{
  if (wk_pool_spin_done (&pool->pending, pool->spin_us))
    return;
  pthread_mutex_lock (&pool->lock);
  pool->caller_sleeping = 1;
  while (atomic_load_explicit (&pool->pending, memory_order_acquire) != 0)
    pthread_cond_wait (&pool->done_cond, &pool->lock);
  pool->caller_sleeping = 0;
  pthread_mutex_unlock (&pool->lock);
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
  atomic_init (&pool->gen, 0);
  atomic_init (&pool->pending, 0);
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
  if (pool->n_started > 0) {
    pool->fn = NULL;
    pthread_mutex_lock (&pool->lock);
    pool->quit = 1;
    atomic_fetch_add_explicit (&pool->gen, 1, memory_order_release);
    pthread_cond_broadcast (&pool->start_cond);
    pthread_mutex_unlock (&pool->lock);
    for (i = 0; i < pool->n_started; i++)
      pthread_join (pool->workers[i].thread, NULL);
  }
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
wk_pool_run (wk_pool * pool, wk_pool_fn fn, void *ctx)
{
  if (!pool || pool->n_threads <= 1 || pool->n_started == 0) {
    fn (ctx, 0, 1);
    return;
  }
  wk_pool_publish (pool, fn, ctx);
  fn (ctx, 0, pool->n_threads);
  wk_pool_wait (pool);
}
