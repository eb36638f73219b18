/* POSIX threads for the WebAssembly engine.
 *
 * wasi-libc as Debian ships it (wasm32-wasi, no threads) has no
 * <pthread.h>. Two builds use this header: the threaded module
 * (whisperknot-threads.wasm, compiled with -matomics: __wasm_atomics__)
 * gets real locks, conditions and threads (the first half below); the
 * single-threaded one (whisperknot.wasm) the bookkeeping of the second
 * half.
 *
 * Single-threaded, the engine still needs locks and once-flags for its
 * native multi-threaded life; in one thread a lock never waits, so each of
 * them reduces to bookkeeping. Creating a thread fails (EAGAIN), which
 * wk_pool reports: that module always asks for one thread, and its pool
 * then never starts a worker and never waits on a condition. Only engine
 * sources compiled for wasm32 see this header (engine/meson.build puts
 * this folder on their include path). */
#ifndef WK_COMPAT_PTHREAD_H
#define WK_COMPAT_PTHREAD_H

#include <errno.h>
#include <time.h>

/* the same in both builds; the mutex and condition are each build's */
typedef int pthread_once_t;
typedef int pthread_t;
typedef int pthread_attr_t;
typedef int pthread_mutexattr_t;
typedef int pthread_condattr_t;

#define PTHREAD_MUTEX_INITIALIZER { 0 }
#define PTHREAD_COND_INITIALIZER { 0 }
#define PTHREAD_ONCE_INIT 0

#ifdef __wasm_atomics__
/* Threaded: the module's memory is shared with its workers (instances of
 * the same module in Web Workers or Node.js worker threads, started by
 * whisperknot.mjs), locks and conditions are futexes on it
 * (memory.atomic.wait32 / notify), and a thread is one of those workers,
 * handed a function by wk-web.c's wkw_thread_start. Waiting blocks, which a
 * browser allows in workers only: whisperknot.mjs starts the threaded
 * module in a worker or Node.js. */
#include <stdint.h>

typedef struct
{
  int v;                        /* 0 free, 1 locked, 2 locked with waiters */
} pthread_mutex_t;
typedef struct
{
  int seq;
} pthread_cond_t;

int wkw_thread_start (void *(*fn) (void *), void *arg);
void wkw_thread_join (int id);

/* Nonzero once a worker's call has trapped (whisperknot-thread.mjs sets
 * it, wk-web.c holds it): that thread never finishes its function nor
 * releases what it held, so whoever waits for it would wait forever. */
extern int wkw_failed;

/* A wait on a futex waits at most this long at a time (ns), then looks at
 * wkw_failed */
#define WKW_WAIT_SLICE 100000000

/* one memory.atomic.wait32, in a function of its own: Node 20's baseline
 * compiler (Liftoff) mishandled code around the wait when it was inlined
 * (an atomic add after it was lost; a loop around it spun at 100% CPU) */
static int wkw_wait32_once (int *p, int expect, int64_t ns)
    __attribute__((noinline));

static int
wkw_wait32_once (int *p, int expect, int64_t ns)
{
  return __builtin_wasm_memory_atomic_wait32 (p, expect, ns);
}

/* memory.atomic.wait32 (ns < 0: no timeout): 0 woken, 1 *p != expect, 2
 * timed out; in slices, after each of which a wkw_failed set traps this
 * thread too, which whisperknot.mjs reports as an error of the instance
 * rather than hang. */
static inline int
wkw_wait32 (int *p, int expect, int64_t ns)
{
  for (;;) {
    int64_t t = ns < 0 || ns > WKW_WAIT_SLICE ? WKW_WAIT_SLICE : ns;
    int r = wkw_wait32_once (p, expect, t);

    if (__atomic_load_n (&wkw_failed, __ATOMIC_ACQUIRE))
      __builtin_trap ();
    if (r != 2 || ns == t)
      return r;
    if (ns > 0)
      ns -= t;
  }
}

static inline void
wkw_notify (int *p, int n)
{
  __builtin_wasm_memory_atomic_notify (p, (unsigned) n);
}

static inline int
pthread_mutex_init (pthread_mutex_t * m, const pthread_mutexattr_t * a)
{
  (void) a;
  m->v = 0;
  return 0;
}

static inline int
pthread_mutex_destroy (pthread_mutex_t * m)
{
  (void) m;
  return 0;
}

static inline int
pthread_mutex_lock (pthread_mutex_t * m)
{
  int c = 0;

  if (__atomic_compare_exchange_n (&m->v, &c, 1, 0, __ATOMIC_ACQUIRE,
          __ATOMIC_RELAXED))
    return 0;
  if (c != 2)
    c = __atomic_exchange_n (&m->v, 2, __ATOMIC_ACQUIRE);
  while (c != 0) {
    wkw_wait32 (&m->v, 2, -1);
    c = __atomic_exchange_n (&m->v, 2, __ATOMIC_ACQUIRE);
  }
  return 0;
}

static inline int
pthread_mutex_trylock (pthread_mutex_t * m)
{
  int c = 0;

  return __atomic_compare_exchange_n (&m->v, &c, 1, 0, __ATOMIC_ACQUIRE,
      __ATOMIC_RELAXED) ? 0 : EBUSY;
}

static inline int
pthread_mutex_unlock (pthread_mutex_t * m)
{
  if (__atomic_exchange_n (&m->v, 0, __ATOMIC_RELEASE) == 2)
    wkw_notify (&m->v, 1);
  return 0;
}

static inline int
pthread_cond_init (pthread_cond_t * c, const pthread_condattr_t * a)
{
  (void) a;
  c->seq = 0;
  return 0;
}

static inline int
pthread_cond_destroy (pthread_cond_t * c)
{
  (void) c;
  return 0;
}

static inline int
pthread_cond_signal (pthread_cond_t * c)
{
  __atomic_fetch_add (&c->seq, 1, __ATOMIC_RELEASE);
  wkw_notify (&c->seq, 1);
  return 0;
}

static inline int
pthread_cond_broadcast (pthread_cond_t * c)
{
  __atomic_fetch_add (&c->seq, 1, __ATOMIC_RELEASE);
  wkw_notify (&c->seq, -1);
  return 0;
}

static inline int
pthread_cond_wait (pthread_cond_t * c, pthread_mutex_t * m)
{
  int s = __atomic_load_n (&c->seq, __ATOMIC_ACQUIRE);

  pthread_mutex_unlock (m);
  wkw_wait32 (&c->seq, s, -1);
  pthread_mutex_lock (m);
  return 0;
}

static inline int
pthread_cond_timedwait (pthread_cond_t * c, pthread_mutex_t * m,
    const struct timespec *until)
{
  int s = __atomic_load_n (&c->seq, __ATOMIC_ACQUIRE), r;
  struct timespec now;
  int64_t ns;

  clock_gettime (CLOCK_REALTIME, &now);
  ns = (int64_t) (until->tv_sec - now.tv_sec) * 1000000000 +
      (until->tv_nsec - now.tv_nsec);
  if (ns <= 0)
    return ETIMEDOUT;
  pthread_mutex_unlock (m);
  r = wkw_wait32 (&c->seq, s, ns);
  pthread_mutex_lock (m);
  return r == 2 ? ETIMEDOUT : 0;
}

static inline int
pthread_once (pthread_once_t * once, void (*fn) (void))
{
  int c = 0;

  if (__atomic_compare_exchange_n (once, &c, 1, 0, __ATOMIC_ACQ_REL,
          __ATOMIC_ACQUIRE)) {
    fn ();
    __atomic_store_n (once, 2, __ATOMIC_RELEASE);
    wkw_notify (once, -1);
    return 0;
  }
  while ((c = __atomic_load_n (once, __ATOMIC_ACQUIRE)) != 2)
    wkw_wait32 (once, c, -1);
  return 0;
}

static inline int
pthread_create (pthread_t * t, const pthread_attr_t * a,
    void *(*fn) (void *), void *arg)
{
  int id = wkw_thread_start (fn, arg);

  (void) a;
  if (id < 0)
    return EAGAIN;
  *t = id;
  return 0;
}

static inline int
pthread_join (pthread_t t, void **ret)
{
  wkw_thread_join (t);
  if (ret)
    *ret = NULL;
  return 0;
}

#else /* !__wasm_atomics__ */

typedef struct
{
  int locked;
} pthread_mutex_t;
typedef struct
{
  int unused;
} pthread_cond_t;

static inline int
pthread_mutex_init (pthread_mutex_t * m, const pthread_mutexattr_t * a)
{
  (void) a;
  m->locked = 0;
  return 0;
}

static inline int
pthread_mutex_destroy (pthread_mutex_t * m)
{
  return m->locked ? EBUSY : 0;
}

/* A second lock of a held mutex in one thread would deadlock natively
 * (a default mutex); here it reports it instead of hanging the page. */
static inline int
pthread_mutex_lock (pthread_mutex_t * m)
{
  if (m->locked)
    return EDEADLK;
  m->locked = 1;
  return 0;
}

static inline int
pthread_mutex_trylock (pthread_mutex_t * m)
{
  if (m->locked)
    return EBUSY;
  m->locked = 1;
  return 0;
}

static inline int
pthread_mutex_timedlock (pthread_mutex_t * m, const struct timespec *t)
{
  (void) t;
  return pthread_mutex_trylock (m) == 0 ? 0 : ETIMEDOUT;
}

static inline int
pthread_mutex_unlock (pthread_mutex_t * m)
{
  if (!m->locked)
    return EPERM;
  m->locked = 0;
  return 0;
}

static inline int
pthread_cond_init (pthread_cond_t * c, const pthread_condattr_t * a)
{
  (void) c;
  (void) a;
  return 0;
}

static inline int
pthread_cond_destroy (pthread_cond_t * c)
{
  (void) c;
  return 0;
}

static inline int
pthread_cond_signal (pthread_cond_t * c)
{
  (void) c;
  return 0;
}

static inline int
pthread_cond_broadcast (pthread_cond_t * c)
{
  (void) c;
  return 0;
}

/* Nobody else could signal: a wait would last forever. The pool only
 * waits for workers, and there are none. */
static inline int
pthread_cond_wait (pthread_cond_t * c, pthread_mutex_t * m)
{
  (void) c;
  (void) m;
  return EINVAL;
}

/* The same: nobody could signal before the time is up. */
static inline int
pthread_cond_timedwait (pthread_cond_t * c, pthread_mutex_t * m,
    const struct timespec *until)
{
  (void) c;
  (void) m;
  (void) until;
  return ETIMEDOUT;
}

static inline int
pthread_once (pthread_once_t * once, void (*fn) (void))
{
  if (!*once) {
    *once = 1;
    fn ();
  }
  return 0;
}

static inline int
pthread_create (pthread_t * t, const pthread_attr_t * a,
    void *(*fn) (void *), void *arg)
{
  (void) t;
  (void) a;
  (void) fn;
  (void) arg;
  return EAGAIN;
}

static inline int
pthread_join (pthread_t t, void **ret)
{
  (void) t;
  (void) ret;
  return ESRCH;
}

#endif /* __wasm_atomics__ */

#endif /* WK_COMPAT_PTHREAD_H */
