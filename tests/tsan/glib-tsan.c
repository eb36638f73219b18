/* GLib's locks made visible to ThreadSanitizer, for the TSan build of the
 * tests that run GStreamer (linked into them only when b_sanitize=thread).
 *
 * GLib and GStreamer come from the distribution, not instrumented. GLib's
 * GMutex and GCond are futexes, which TSan cannot see, so every piece of
 * data the element guards with them (GST_OBJECT_LOCK, its own queue lock)
 * looks unguarded: hundreds of false reports. GAsyncQueue (GstHarness's
 * buffer queues) and g_once_init_* hand data between threads the same
 * invisible way.
 *
 * GRecMutex and GRWLock are pthread objects inside GLib, which TSan sees
 * by itself.
 *
 * The functions below take the place of GLib's: the test executable exports
 * them, so GStreamer, the plugin and the test all call these, which call
 * GLib's own (dlsym RTLD_NEXT) and tell TSan what happened through its
 * annotation interface: a mutex locked or unlocked, a release before a
 * queue push, an acquire after a pop. GLib's calls to itself are bound
 * inside libglib (-Bsymbolic-functions) and stay invisible, which is why
 * g_cond_wait, which unlocks and relocks inside GLib, is annotated here.
 * No data race is suppressed: this only adds the synchronisation TSan
 * misses (tsan.supp says what is). */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include <glib.h>
#include <sanitizer/tsan_interface.h>

/* the project builds with -fvisibility=hidden; these must be seen */
#pragma GCC visibility push(default)

static void *
resolve (_Atomic (void *) * slot, const char *name)
{
  void *p = atomic_load_explicit (slot, memory_order_relaxed);

  if (!p) {
    p = dlsym (RTLD_NEXT, name);
    if (!p) {
      fprintf (stderr, "glib-tsan: no %s in GLib\n", name);
      abort ();
    }
    /* relaxed: every thread that races to look it up stores the same */
    atomic_store_explicit (slot, p, memory_order_relaxed);
  }
  return p;
}

/* GLib's own implementation of the function we are in. */
#define REAL(name) \
  ((__typeof__ (&name)) resolve (&real_##name, #name))
#define SLOT(name) static _Atomic (void *) real_##name

/* ---- GMutex (futex) ---------------------------------------------------- */

/* No create or destroy annotations: TSan counts them as writes to the
 * mutex, which race with a lock in a thread GLib handed the object to out
 * of sight (its thread pool). A mutex is created at its first lock and
 * forgotten when its memory is freed (G_SLICE=always-malloc, so that
 * GLib's slices are freed where TSan sees it). */
SLOT (g_mutex_lock);
SLOT (g_mutex_unlock);
SLOT (g_mutex_trylock);

void
g_mutex_lock (GMutex * m)
{
  __tsan_mutex_pre_lock (m, 0);
  REAL (g_mutex_lock) (m);
  __tsan_mutex_post_lock (m, 0, 0);
}

void
g_mutex_unlock (GMutex * m)
{
  __tsan_mutex_pre_unlock (m, 0);
  REAL (g_mutex_unlock) (m);
  __tsan_mutex_post_unlock (m, 0);
}

gboolean
g_mutex_trylock (GMutex * m)
{
  gboolean ok;

  __tsan_mutex_pre_lock (m, __tsan_mutex_try_lock);
  ok = REAL (g_mutex_trylock) (m);
  __tsan_mutex_post_lock (m, __tsan_mutex_try_lock |
      (ok ? 0 : __tsan_mutex_try_lock_failed), 0);
  return ok;
}

/* ---- GCond: the wait unlocks and relocks the mutex inside GLib --------- */

SLOT (g_cond_wait);
SLOT (g_cond_wait_until);

void
g_cond_wait (GCond * c, GMutex * m)
{
  __tsan_mutex_pre_unlock (m, 0);
  __tsan_mutex_post_unlock (m, 0);
  REAL (g_cond_wait) (c, m);
  __tsan_mutex_pre_lock (m, 0);
  __tsan_mutex_post_lock (m, 0, 0);
}

gboolean
g_cond_wait_until (GCond * c, GMutex * m, gint64 end_time)
{
  gboolean ok;

  __tsan_mutex_pre_unlock (m, 0);
  __tsan_mutex_post_unlock (m, 0);
  ok = REAL (g_cond_wait_until) (c, m, end_time);
  __tsan_mutex_pre_lock (m, 0);
  __tsan_mutex_post_lock (m, 0, 0);
  return ok;
}

/* ---- GAsyncQueue: a push releases, a pop acquires ---------------------- */

SLOT (g_async_queue_lock);
SLOT (g_async_queue_unlock);
SLOT (g_async_queue_push);
SLOT (g_async_queue_push_unlocked);
SLOT (g_async_queue_push_front);
SLOT (g_async_queue_push_sorted);
SLOT (g_async_queue_pop);
SLOT (g_async_queue_pop_unlocked);
SLOT (g_async_queue_try_pop);
SLOT (g_async_queue_try_pop_unlocked);
SLOT (g_async_queue_timeout_pop);
SLOT (g_async_queue_timeout_pop_unlocked);

void
g_async_queue_lock (GAsyncQueue * q)
{
  REAL (g_async_queue_lock) (q);
  __tsan_acquire (q);
}

void
g_async_queue_unlock (GAsyncQueue * q)
{
  __tsan_release (q);
  REAL (g_async_queue_unlock) (q);
}

void
g_async_queue_push (GAsyncQueue * q, gpointer data)
{
  __tsan_release (q);
  REAL (g_async_queue_push) (q, data);
}

void
g_async_queue_push_unlocked (GAsyncQueue * q, gpointer data)
{
  __tsan_release (q);
  REAL (g_async_queue_push_unlocked) (q, data);
}

void
g_async_queue_push_front (GAsyncQueue * q, gpointer data)
{
  __tsan_release (q);
  REAL (g_async_queue_push_front) (q, data);
}

void
g_async_queue_push_sorted (GAsyncQueue * q, gpointer data,
    GCompareDataFunc func, gpointer user_data)
{
  __tsan_release (q);
  REAL (g_async_queue_push_sorted) (q, data, func, user_data);
}

#define POP(name, args, call)                                           \
  gpointer                                                              \
  name args                                                             \
  {                                                                     \
    gpointer item = REAL (name) call;                                 \
    __tsan_acquire (q);                                                 \
    return item;                                                        \
  }

POP (g_async_queue_pop, (GAsyncQueue * q), (q));
POP (g_async_queue_pop_unlocked, (GAsyncQueue * q), (q));
POP (g_async_queue_try_pop, (GAsyncQueue * q), (q));
POP (g_async_queue_try_pop_unlocked, (GAsyncQueue * q), (q));
POP (g_async_queue_timeout_pop, (GAsyncQueue * q, guint64 t), (q, t));
POP (g_async_queue_timeout_pop_unlocked, (GAsyncQueue * q, guint64 t), (q, t));

/* ---- g_once_init: the inline fast path is an atomic load in our code;
 * the store it pairs with is GLib's, so release on the location first --- */

#undef g_once_init_enter
#undef g_once_init_leave
SLOT (g_once_init_enter);
SLOT (g_once_init_leave);

gboolean
g_once_init_enter (volatile void *location)
{
  gboolean first = REAL (g_once_init_enter) (location);

  if (!first)
    __tsan_acquire ((void *) location);
  return first;
}

void
g_once_init_leave (volatile void *location, gsize result)
{
  __tsan_release ((void *) location);
  REAL (g_once_init_leave) (location, result);
}

#pragma GCC visibility pop
