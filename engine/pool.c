/* Thread pools for the kernels.
 *
 * A wk_pool is a caller's handle on a set of worker threads (a "core"):
 * its own (wk_pool_new) or the process's shared one (wk_pool_new_shared),
 * which every stream's context uses so that ten streams do not bring ten
 * sets of threads. Any number of callers may run jobs on one core at
 * once; each job is a number of tasks that threads claim one at a time
 * from an atomic counter. The caller starts with task 0 and keeps
 * claiming, so a worker that wakes late or is busy with another caller's
 * job (the machine is shared, the decoder's jobs last microseconds) costs
 * nothing: once every task is claimed the caller closes the job, workers
 * that have not joined by then stay out of it, and the caller waits only
 * for those running a task. A job takes at most wk_pool_size - 1 workers;
 * a free worker joins the open job with the fewest workers inside, so
 * one stream's long encoder pass does not take every worker from the
 * others. Idle workers spin for a few microseconds (WK_POOL_SPIN_US,
 * default 5) and then sleep on a condition variable, so an idle pool
 * costs no CPU. */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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

typedef struct wk_pool_core wk_pool_core;

/* One caller's job, on its stack while it runs. */
typedef struct wk_job
{
  wk_pool_fn fn;
  void *ctx;
  int n_tasks;
  atomic_int next_task;
  int max_helpers;              /* workers it may take at once */
  /* workers running its tasks: changed under the core lock, read by
   * the spinning caller without it */
  atomic_int inside;
  bool caller_waiting;          /* core lock */
  struct wk_job *next;          /* core lock: the open jobs */
} wk_job;

struct wk_pool_core
{
  int refs;                     /* shared_lock for the shared core */
  int spin_us;

  pthread_mutex_t lock;
  pthread_cond_t start_cond;
  pthread_cond_t done_cond;
  pthread_t threads[WK_POOL_MAX_THREADS];
  int n_workers;                /* lock: threads started */
  int n_sleeping;               /* lock */
  int quit;                     /* lock */
  wk_job *jobs;                 /* lock: open jobs, oldest first */
  /* bumped (under lock) when a job opens: spinning workers watch it */
  atomic_uint generation;
};

struct wk_pool
{
  wk_pool_core *core;
  int n_threads;
  bool shared;
};

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static wk_pool_core *shared_core;

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

/* Claims and runs tasks until none is left. */
static void
wk_job_work (wk_job * job)
{
  int t;
  while ((t = atomic_fetch_add_explicit (&job->next_task, 1,
              memory_order_relaxed)) < job->n_tasks)
    job->fn (job->ctx, t, job->n_tasks);
}

/* The open job a free worker should join: room for a helper and tasks
 * left, the fewest workers inside (the oldest on a tie). Core lock. */
static wk_job *
wk_pool_pick (wk_pool_core * core)
{
  wk_job *j, *best = NULL;

  for (j = core->jobs; j; j = j->next) {
    int in = atomic_load_explicit (&j->inside, memory_order_relaxed);
    if (in >= j->max_helpers
        || atomic_load_explicit (&j->next_task,
            memory_order_relaxed) >= j->n_tasks)
      continue;
    if (!best || in < atomic_load_explicit (&best->inside,
            memory_order_relaxed))
      best = j;
  }
  return best;
}

static bool
wk_pool_spin_idle (atomic_int * inside, int spin_us)
{
  uint64_t deadline = 0;
  int i;

  for (i = 0;; i++) {
    if (atomic_load_explicit (inside, memory_order_acquire) == 0)
      return true;
    if (spin_us <= 0)
      return false;
    if ((i & 63) == 0) {
      uint64_t now = wk_pool_now_ns ();
      if (deadline == 0)
        deadline = now + ((uint64_t) spin_us) * 1000u;
      else if (now >= deadline)
        return false;
    }
    WK_CPU_RELAX ();
  }
}

static void *
wk_pool_worker_main (void *data)
{
  wk_pool_core *core = data;

  pthread_mutex_lock (&core->lock);
  while (!core->quit) {
    wk_job *job = wk_pool_pick (core);
    unsigned seen;

    if (job) {
      bool waiting;
      atomic_fetch_add_explicit (&job->inside, 1, memory_order_relaxed);
      pthread_mutex_unlock (&core->lock);
      wk_job_work (job);
      pthread_mutex_lock (&core->lock);
      /* a spinning caller may return (and its job go) as soon as inside
       * is 0: nothing of the job is read after it */
      waiting = job->caller_waiting;
      if (atomic_fetch_sub_explicit (&job->inside, 1,
              memory_order_release) == 1 && waiting)
        pthread_cond_broadcast (&core->done_cond);
      continue;
    }
    /* nothing to do: spin a little on the generation, then sleep */
    seen = atomic_load_explicit (&core->generation, memory_order_relaxed);
    pthread_mutex_unlock (&core->lock);
    if (wk_pool_spin_while (&core->generation, seen, core->spin_us) != seen) {
      pthread_mutex_lock (&core->lock);
      continue;
    }
    pthread_mutex_lock (&core->lock);
    if (core->quit || atomic_load_explicit (&core->generation,
            memory_order_relaxed) != seen)
      continue;
    core->n_sleeping++;
    pthread_cond_wait (&core->start_cond, &core->lock);
    core->n_sleeping--;
  }
  pthread_mutex_unlock (&core->lock);
  return NULL;
}

int
wk_online_cpus (void)
{
  long n = sysconf (_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > 1024 ? 1024 : (int) n;
}

static int
wk_pool_default_threads (void)
{
  int n = wk_online_cpus ();
  return n > 8 ? 8 : n;
}

static int
wk_pool_clamp_threads (int n_threads)
{
  if (n_threads <= 0)
    n_threads = wk_pool_default_threads ();
  if (n_threads > WK_POOL_MAX_THREADS)
    n_threads = WK_POOL_MAX_THREADS;
  return n_threads;
}

static void wk_pool_core_free (wk_pool_core * core);

static wk_pool_core *
wk_pool_core_new (void)
{
  wk_pool_core *core = calloc (1, sizeof *core);
  const char *env;

  if (!core)
    return NULL;
  core->spin_us = WK_POOL_DEFAULT_SPIN_US;
  env = getenv ("WK_POOL_SPIN_US");
  if (env) {
    long v = strtol (env, NULL, 10);
    core->spin_us = v < 0 ? 0 : v > 10000 ? 10000 : (int) v;
  }
  atomic_init (&core->generation, 0u);
  if (pthread_mutex_init (&core->lock, NULL) != 0) {
    free (core);
    return NULL;
  }
  pthread_cond_init (&core->start_cond, NULL);
  pthread_cond_init (&core->done_cond, NULL);
  return core;
}

/* Starts workers until the core has n_workers; false when a thread
 * could not be created (those started stay). */
static bool
wk_pool_core_grow (wk_pool_core * core, int n_workers)
{
  bool ok = true;

  pthread_mutex_lock (&core->lock);
  while (core->n_workers < n_workers) {
    if (pthread_create (&core->threads[core->n_workers], NULL,
            wk_pool_worker_main, core) != 0) {
      ok = false;
      break;
    }
    core->n_workers++;
  }
  pthread_mutex_unlock (&core->lock);
  return ok;
}

static void
wk_pool_core_free (wk_pool_core * core)
{
  int i, n;

  if (!core)
    return;
  pthread_mutex_lock (&core->lock);
  core->quit = 1;
  atomic_fetch_add_explicit (&core->generation, 1u, memory_order_relaxed);
  pthread_cond_broadcast (&core->start_cond);
  n = core->n_workers;
  pthread_mutex_unlock (&core->lock);
  for (i = 0; i < n; i++)
    pthread_join (core->threads[i], NULL);
  pthread_cond_destroy (&core->start_cond);
  pthread_cond_destroy (&core->done_cond);
  pthread_mutex_destroy (&core->lock);
  free (core);
}

wk_pool *
wk_pool_new (int n_threads)
{
  wk_pool *pool = calloc (1, sizeof *pool);

  if (!pool)
    return NULL;
  pool->n_threads = wk_pool_clamp_threads (n_threads);
  pool->core = wk_pool_core_new ();
  if (!pool->core || !wk_pool_core_grow (pool->core, pool->n_threads - 1)) {
    wk_pool_free (pool);
    return NULL;
  }
  return pool;
}

wk_pool *
wk_pool_new_shared (int n_threads)
{
  wk_pool *pool = calloc (1, sizeof *pool);
  bool ok = true;

  if (!pool)
    return NULL;
  pool->n_threads = wk_pool_clamp_threads (n_threads);
  pool->shared = true;
  pthread_mutex_lock (&shared_lock);
  if (!shared_core)
    shared_core = wk_pool_core_new ();
  if (shared_core) {
    shared_core->refs++;
    pool->core = shared_core;
    ok = wk_pool_core_grow (shared_core, pool->n_threads - 1);
  }
  pthread_mutex_unlock (&shared_lock);
  if (!pool->core || !ok) {
    wk_pool_free (pool);
    return NULL;
  }
  return pool;
}

void
wk_pool_free (wk_pool * pool)
{
  wk_pool_core *core = NULL;

  if (!pool)
    return;
  if (pool->shared && pool->core) {
    pthread_mutex_lock (&shared_lock);
    if (--pool->core->refs == 0) {
      core = pool->core;
      shared_core = NULL;
    }
    pthread_mutex_unlock (&shared_lock);
  } else
    core = pool->core;
  wk_pool_core_free (core);
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
  wk_pool_core *core;
  wk_job job, **p;
  int t;

  if (n_tasks <= 0)
    return;
  if (!pool || pool->n_threads == 1 || n_tasks == 1) {
    for (t = 0; t < n_tasks; t++)
      fn (ctx, t, n_tasks);
    return;
  }
  core = pool->core;

  /* publish: task 0 is the caller's */
  job.fn = fn;
  job.ctx = ctx;
  job.n_tasks = n_tasks;
  atomic_init (&job.next_task, 1);
  job.max_helpers = pool->n_threads - 1;
  atomic_init (&job.inside, 0);
  job.caller_waiting = false;
  job.next = NULL;
  pthread_mutex_lock (&core->lock);
  for (p = &core->jobs; *p; p = &(*p)->next);
  *p = &job;
  atomic_fetch_add_explicit (&core->generation, 1u, memory_order_release);
  if (core->n_sleeping > 0) {
    if (core->n_sleeping > 1 && job.max_helpers > 1)
      pthread_cond_broadcast (&core->start_cond);
    else
      pthread_cond_signal (&core->start_cond);
  }
  pthread_mutex_unlock (&core->lock);

  fn (ctx, 0, n_tasks);
  wk_job_work (&job);

  /* every task is claimed: close, then wait for the workers inside (they
   * are computing: worth a few microseconds of spinning) */
  pthread_mutex_lock (&core->lock);
  for (p = &core->jobs; *p != &job; p = &(*p)->next);
  *p = job.next;
  pthread_mutex_unlock (&core->lock);
  if (wk_pool_spin_idle (&job.inside, 4 * core->spin_us))
    return;
  pthread_mutex_lock (&core->lock);
  job.caller_waiting = true;
  while (atomic_load_explicit (&job.inside, memory_order_acquire) > 0)
    pthread_cond_wait (&core->done_cond, &core->lock);
  pthread_mutex_unlock (&core->lock);
}

void
wk_pool_run (wk_pool * pool, wk_pool_fn fn, void *ctx)
{
  wk_pool_run_tasks (pool, fn, ctx, wk_pool_size (pool));
}
