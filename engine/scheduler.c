/* The scheduler of a model's decoder steps (see scheduler.h). */
#include "scheduler.h"

#include <pthread.h>
#include <stdlib.h>

struct wk_sched
{
  pthread_mutex_t lock;
  pthread_cond_t done_cond;     /* a batch finished */
  wk_sched_req *head, **tail;   /* lock: waiting requests, oldest first */
  bool busy;                    /* lock: a batch is running */
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
  s->tail = &s->head;
  return s;
}

void
wk_sched_free (wk_sched * s)
{
  if (!s)
    return;
  pthread_cond_destroy (&s->done_cond);
  pthread_mutex_destroy (&s->lock);
  free (s);
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
  while (!req->done) {
    int n = 0, rows = 0, i;

    if (s->busy) {
      pthread_cond_wait (&s->done_cond, &s->lock);
      continue;
    }
    /* run the oldest waiting requests (ours may be later: then we serve
     * them and look again) */
    s->busy = true;
    while (s->head && n < WK_SCHED_MAX_REQS
        && (n == 0 || rows + s->head->rows <= WK_SCHED_MAX_ROWS)) {
      rows += s->head->rows;
      batch[n++] = s->head;
      s->head = s->head->next;
    }
    if (!s->head)
      s->tail = &s->head;
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
