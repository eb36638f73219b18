/* A small fixed thread pool. Workers sleep on a condition variable between
 * jobs (no busy-waiting that would starve other work on a shared machine).
 */
#ifndef WK_POOL_H
#define WK_POOL_H

typedef struct wk_pool wk_pool;

/* fn is called once on each of nth threads, ith = 0..nth-1; the calling
 * thread runs ith = 0. */
typedef void (*wk_pool_fn) (void *ctx, int ith, int nth);

/* n_threads <= 0 picks a default (the online CPU count, at most 8).
 * Returns NULL on allocation or thread-creation failure. */
wk_pool *wk_pool_new (int n_threads);
void wk_pool_free (wk_pool * pool);
int wk_pool_size (const wk_pool * pool);
/* Runs fn on every thread and returns when all are done. pool may be NULL
 * (runs fn (ctx, 0, 1) on the caller). */
void wk_pool_run (wk_pool * pool, wk_pool_fn fn, void *ctx);

#endif
