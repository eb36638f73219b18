/* POSIX threads for the single-threaded WebAssembly engine.
 *
 * wasi-libc as Debian ships it (wasm32-wasi, no threads) has no
 * <pthread.h>. The engine needs locks and once-flags for its native
 * multi-threaded life; in one thread a lock never waits, so each of them
 * reduces to bookkeeping. Creating a thread fails (EAGAIN), which wk_pool
 * reports: the web build always asks for one thread, and its pool then
 * never starts a worker and never waits on a condition. Only
 * engine sources compiled for wasm32 see this header (web/meson.build puts
 * this folder on their include path). */
#ifndef WK_COMPAT_PTHREAD_H
#define WK_COMPAT_PTHREAD_H

#include <errno.h>
#include <time.h>

typedef struct
{
  int locked;
} pthread_mutex_t;
typedef struct
{
  int unused;
} pthread_cond_t;
typedef int pthread_once_t;
typedef int pthread_t;
typedef int pthread_attr_t;
typedef int pthread_mutexattr_t;
typedef int pthread_condattr_t;

#define PTHREAD_MUTEX_INITIALIZER { 0 }
#define PTHREAD_COND_INITIALIZER { 0 }
#define PTHREAD_ONCE_INIT 0

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

#endif /* WK_COMPAT_PTHREAD_H */
