/* Thread pools for the kernels: a wk_pool is one caller's handle on a set
 * of worker threads, its own or the process's shared set, which any number
 * of callers use at once. Workers sleep on a condition variable between
 * jobs (no busy-waiting that would starve other work on a shared machine).
 */
#ifndef WK_POOL_H
#define WK_POOL_H

typedef struct wk_pool wk_pool;

/* The online CPU count, 1 to 1024. */
int wk_online_cpus (void);

/* fn is called once on each of nth threads, ith = 0..nth-1; the calling
 * thread runs ith = 0. */
typedef void (*wk_pool_fn) (void *ctx, int ith, int nth);

/* A pool with its own n_threads - 1 workers (the caller is the n-th).
 * n_threads <= 0 picks a default (the online CPU count, at most 8).
 * Returns NULL on allocation or thread-creation failure. */
wk_pool *wk_pool_new (int n_threads);
/* A handle on the process's shared workers, which every handle's jobs
 * use at once: a job of this handle runs on the caller and at most
 * n_threads - 1 of them (n_threads <= 0: the default above). The shared
 * set has as many workers as the largest n_threads asked for so far,
 * less one, and ends with its last handle. Results never depend on
 * which threads run a job. NULL as wk_pool_new. */
wk_pool *wk_pool_new_shared (int n_threads);
void wk_pool_free (wk_pool * pool);
int wk_pool_size (const wk_pool * pool);
/* Runs fn on every thread and returns when all are done. pool may be NULL
 * (runs fn (ctx, 0, 1) on the caller). Implemented as
 * wk_pool_run_tasks (pool, fn, ctx, wk_pool_size (pool)): each ith runs
 * exactly once, the caller runs ith = 0, but a thread may run several
 * (never two at once), so per-ith scratch stays safe. */
void wk_pool_run (wk_pool * pool, wk_pool_fn fn, void *ctx);

/* Runs fn (ctx, t, n_tasks) for every t in 0 .. n_tasks-1 and returns when
 * all are done. Threads claim tasks one at a time (the caller first takes
 * t = 0), so a worker that is slow to wake on a busy machine never delays
 * the call: the others take its share. Added by the kernels helper. */
void wk_pool_run_tasks (wk_pool * pool, wk_pool_fn fn, void *ctx, int n_tasks);

#endif
