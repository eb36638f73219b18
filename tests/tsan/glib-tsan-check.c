/* The TSan set-up can fail: two GLib threads that increment a counter
 * under a GMutex, a GRecMutex, or passing it through a GAsyncQueue are
 * clean (the annotations of glib-tsan.c make those locks visible), and the
 * same increments without a lock are reported (so nothing hides a real
 * race). Run as `glib-tsan-check MODE`; meson expects "unlocked" to fail
 * with TSan's exit code. */
#include <stdio.h>
#include <string.h>

#include <glib.h>

#define ROUNDS 1000

static GMutex mutex;
static GRecMutex rec_mutex;
static GCond cond;
static GAsyncQueue *queue;
static long counter;
static const char *mode;

static gpointer
work (gpointer data)
{
  for (int i = 0; i < ROUNDS; i++) {
    if (!strcmp (mode, "mutex")) {
      g_mutex_lock (&mutex);
      counter++;
      g_cond_signal (&cond);
      g_mutex_unlock (&mutex);
    } else if (!strcmp (mode, "rec-mutex")) {
      g_rec_mutex_lock (&rec_mutex);
      g_rec_mutex_lock (&rec_mutex);
      counter++;
      g_rec_mutex_unlock (&rec_mutex);
      g_rec_mutex_unlock (&rec_mutex);
    } else {
      counter++;
    }
  }
  return NULL;
}

/* A token handed back and forth through the queue: each side writes the
 * counter only while it holds the token. */
static gpointer
ping (gpointer data)
{
  GAsyncQueue *in = data;

  for (int i = 0; i < ROUNDS; i++) {
    gpointer token = g_async_queue_pop (in);
    counter++;
    g_async_queue_push (queue, token);
  }
  return NULL;
}

int
main (int argc, char **argv)
{
  GThread *t;

  if (argc != 2) {
    fprintf (stderr, "usage: glib-tsan-check mutex|rec-mutex|cond|queue|"
        "unlocked\n");
    return 2;
  }
  mode = argv[1];
  if (!strcmp (mode, "queue")) {
    GAsyncQueue *back = g_async_queue_new ();
    queue = g_async_queue_new ();
    t = g_thread_new ("ping", ping, back);
    for (int i = 0; i < ROUNDS; i++) {
      g_async_queue_push (back, GINT_TO_POINTER (1));
      (void) g_async_queue_pop (queue);
      counter++;
    }
    g_thread_join (t);
    g_async_queue_unref (back);
    g_async_queue_unref (queue);
  } else if (!strcmp (mode, "cond")) {
    /* the waiter reads what the other thread wrote before signalling */
    mode = "mutex";
    t = g_thread_new ("work", work, NULL);
    g_mutex_lock (&mutex);
    while (counter < ROUNDS)
      g_cond_wait (&cond, &mutex);
    g_mutex_unlock (&mutex);
    g_thread_join (t);
  } else {
    t = g_thread_new ("work", work, NULL);
    work (NULL);
    g_thread_join (t);
  }
  printf ("%s: counter %ld\n", argv[1], counter);
  return 0;
}
