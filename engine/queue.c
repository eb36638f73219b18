/* A bounded queue of audio in front of a stream: see wk_queue in
 * whisperknot.h.
 *
 * Samples live in a ring of `cap` floats; `written` and `read` count the
 * samples ever appended and ever handed to the stream, so written - read
 * are queued. A mark sits at the position (a value of `written`) where it
 * was placed, in a FIFO. The worker feeds from the ring without the lock:
 * the writer never touches [read, read + n) while a feed of those n
 * samples is running, because read advances only when the feed returns. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "conceal.h"
#include "whisperknot.h"

typedef struct mark_node
{
  uint64_t pos;                 /* the samples before it: written then */
  void *mark;
  struct mark_node *next;
} mark_node;

struct wk_queue
{
  pthread_mutex_t lock;
  pthread_cond_t cond;          /* every change of the queue or of stopped */
  float *ring;                  /* [cap] */
  size_t cap;
  uint64_t written, read;
  mark_node *head, *tail;
  bool stopped;
  void (*free_mark) (void *mark);
  /* the writer's, for a hole (samples announced missing): its length
   * and the first samples written after it, held back until there are
   * enough of them to conceal it towards (the side before it is the
   * ring's last samples) */
  uint64_t missing;
  float after[WK_CONCEAL_CONTEXT];
  size_t n_after;
};

wk_status
wk_queue_new (size_t capacity, void (*free_mark) (void *mark), wk_queue ** out)
{
  wk_queue *q;

  if (!out)
    return WK_ERR_ARG;
  *out = NULL;
  if (capacity == 0 || capacity > SIZE_MAX / sizeof (float))
    return WK_ERR_ARG;
  q = calloc (1, sizeof *q);
  if (!q)
    return WK_ERR_NOMEM;
  q->ring = malloc (capacity * sizeof *q->ring);
  if (!q->ring) {
    free (q);
    return WK_ERR_NOMEM;
  }
  q->cap = capacity;
  q->stopped = true;
  q->free_mark = free_mark;
  pthread_mutex_init (&q->lock, NULL);
  pthread_cond_init (&q->cond, NULL);
  *out = q;
  return WK_OK;
}

void
wk_queue_free (wk_queue * q)
{
  if (!q)
    return;
  wk_queue_clear (q, NULL, NULL);
  pthread_mutex_destroy (&q->lock);
  pthread_cond_destroy (&q->cond);
  free (q->ring);
  free (q);
}

/* m samples of fmt from data (NULL: silence) into out; bytes in any
 * alignment, little-endian */
static void
convert (float *out, const unsigned char *data, wk_sample_format fmt, size_t m)
{
  size_t i;

  if (!data) {
    memset (out, 0, m * sizeof *out);
  } else if (fmt == WK_SAMPLE_S16LE) {
    for (i = 0; i < m; i++) {
      int16_t v = (int16_t) (data[2 * i] | data[2 * i + 1] << 8);
      out[i] = v * (1.0f / 32768.0f);
    }
  } else {
    for (i = 0; i < m; i++) {
      const unsigned char *b = data + 4 * i;
      uint32_t v = (uint32_t) b[0] | (uint32_t) b[1] << 8 |
          (uint32_t) b[2] << 16 | (uint32_t) b[3] << 24;
      memcpy (out + i, &v, 4);
    }
  }
}

/* Waits (lock held) for room in the ring; the room that follows
 * `written` without wrapping, or 0 once the queue is stopped. */
static size_t
wait_room (wk_queue * q)
{
  size_t wpos, m;

  while (!q->stopped && q->written - q->read == q->cap)
    pthread_cond_wait (&q->cond, &q->lock);
  if (q->stopped)
    return 0;
  wpos = (size_t) (q->written % q->cap);
  m = q->cap - (size_t) (q->written - q->read);
  return m < q->cap - wpos ? m : q->cap - wpos;
}

/* Appends n samples (lock held): of fmt from data (NULL: silence), or
 * floats from f when it is not NULL. WK_ERR_STATE when the queue stops
 * first (the rest is dropped). */
static wk_status
append (wk_queue * q, const unsigned char *data, wk_sample_format fmt,
    const float *f, size_t n)
{
  const size_t bps = fmt == WK_SAMPLE_S16LE ? 2 : 4;

  while (n > 0) {
    size_t m = wait_room (q);
    float *dst = q->ring + (size_t) (q->written % q->cap);

    if (m == 0)
      return WK_ERR_STATE;
    if (m > n)
      m = n;
    if (f) {
      memcpy (dst, f, m * sizeof *f);
      f += m;
    } else {
      convert (dst, data, fmt, m);
      if (data)
        data += m * bps;
    }
    q->written += m;
    n -= m;
    pthread_cond_broadcast (&q->cond);
  }
  return WK_OK;
}

/* The last samples appended, at most WK_CONCEAL_CONTEXT, into out (oldest
 * first; lock held): still in the ring, which only the writer overwrites.
 * Returns their number. */
static size_t
last_appended (const wk_queue * q, float *out)
{
  uint64_t n = q->written < WK_CONCEAL_CONTEXT ? q->written :
      WK_CONCEAL_CONTEXT;
  size_t i;

  if (n > q->cap)
    n = q->cap;
  for (i = 0; i < n; i++)
    out[i] = q->ring[(size_t) ((q->written - n + i) % q->cap)];
  return (size_t) n;
}

#define CONCEAL_PIECE 512       /* samples concealed at a time */

/* Ends a hole (lock held): its samples concealed between the samples
 * before it and those held back after it (none: no audio follows it),
 * then those. While the queue is stopped they are dropped: WK_ERR_STATE. */
static wk_status
end_hole (wk_queue * q)
{
  float before[WK_CONCEAL_CONTEXT], piece[CONCEAL_PIECE];
  wk_conceal c;
  uint64_t j;
  wk_status st = WK_OK;

  if (q->missing == 0)
    return WK_OK;
  wk_conceal_plan (&c, before, last_appended (q, before), q->after,
      q->n_after, q->missing);
  for (j = 0; st == WK_OK && j < q->missing; j += CONCEAL_PIECE) {
    size_t m = q->missing - j < CONCEAL_PIECE ? (size_t) (q->missing - j) :
        CONCEAL_PIECE;
    wk_conceal_fill (&c, j, piece, m);
    st = append (q, NULL, WK_SAMPLE_F32LE, piece, m);
  }
  if (st == WK_OK)
    st = append (q, NULL, WK_SAMPLE_F32LE, q->after, q->n_after);
  q->missing = 0;
  q->n_after = 0;
  return st;
}

wk_status
wk_queue_write (wk_queue * q, const void *data, wk_sample_format fmt, size_t n)
{
  const unsigned char *src = data;
  const size_t bps = fmt == WK_SAMPLE_S16LE ? 2 : 4;
  wk_status st = WK_OK;

  if (!q || (fmt != WK_SAMPLE_F32LE && fmt != WK_SAMPLE_S16LE))
    return WK_ERR_ARG;
  pthread_mutex_lock (&q->lock);
  if (n > 0 && q->stopped) {
    st = WK_ERR_STATE;
  } else if (q->missing > 0 && src) {
    /* after a hole: held back until the hole can be concealed towards
     * WK_CONCEAL_CONTEXT samples of them */
    size_t k = WK_CONCEAL_CONTEXT - q->n_after;

    if (k > n)
      k = n;
    convert (q->after + q->n_after, src, fmt, k);
    q->n_after += k;
    src += k * bps;
    n -= k;
    if (q->n_after == WK_CONCEAL_CONTEXT)
      st = end_hole (q);
  } else if (q->missing > 0 && n > 0) {
    st = end_hole (q);          /* silence follows it */
  }
  if (st == WK_OK)
    st = append (q, src, fmt, NULL, n);
  pthread_mutex_unlock (&q->lock);
  return st;
}

wk_status
wk_queue_end_hole (wk_queue * q)
{
  wk_status st;

  if (!q)
    return WK_ERR_ARG;
  pthread_mutex_lock (&q->lock);
  st = end_hole (q);
  pthread_mutex_unlock (&q->lock);
  return st;
}

wk_status
wk_queue_write_missing (wk_queue * q, size_t n)
{
  wk_status st = WK_OK;

  if (!q)
    return WK_ERR_ARG;
  pthread_mutex_lock (&q->lock);
  if (q->stopped)
    st = WK_ERR_STATE;
  else if (q->n_after > 0)
    st = end_hole (q);          /* a new hole after a few samples */
  if (st == WK_OK && n > UINT64_MAX - q->missing)
    st = WK_ERR_ARG;
  if (st == WK_OK)
    q->missing += n;
  pthread_mutex_unlock (&q->lock);
  return st;
}

wk_status
wk_queue_mark (wk_queue * q, void *mark)
{
  mark_node *node;

  if (!q)
    return WK_ERR_ARG;
  node = malloc (sizeof *node);
  if (!node)
    return WK_ERR_NOMEM;
  node->pos = 0;
  node->mark = mark;
  node->next = NULL;
  pthread_mutex_lock (&q->lock);
  /* a hole before the mark ends there */
  end_hole (q);
  node->pos = q->written;
  if (q->tail)
    q->tail->next = node;
  else
    q->head = node;
  q->tail = node;
  pthread_cond_broadcast (&q->cond);
  pthread_mutex_unlock (&q->lock);
  return WK_OK;
}

static void
set_stopped (wk_queue * q, bool stopped)
{
  if (!q)
    return;
  pthread_mutex_lock (&q->lock);
  q->stopped = stopped;
  pthread_cond_broadcast (&q->cond);
  pthread_mutex_unlock (&q->lock);
}

void
wk_queue_stop (wk_queue * q)
{
  set_stopped (q, true);
}

void
wk_queue_start (wk_queue * q)
{
  set_stopped (q, false);
}

void
wk_queue_clear (wk_queue * q, void (*take) (void *mark, void *user), void *user)
{
  mark_node *node;

  if (!q)
    return;
  pthread_mutex_lock (&q->lock);
  node = q->head;
  q->head = q->tail = NULL;
  q->written = q->read = 0;
  q->missing = 0;
  q->n_after = 0;
  pthread_cond_broadcast (&q->cond);
  pthread_mutex_unlock (&q->lock);
  while (node) {
    mark_node *next = node->next;

    if (take)
      take (node->mark, user);
    else if (q->free_mark)
      q->free_mark (node->mark);
    free (node);
    node = next;
  }
}

wk_status
wk_queue_next (wk_queue * q, wk_stream * stream, size_t max,
    double (*due) (void *user), void *user, void **mark, size_t *n_fed)
{
  mark_node *node = NULL;
  size_t n = 0, off = 0;
  uint64_t read0;
  wk_status st;

  if (mark)
    *mark = NULL;
  if (n_fed)
    *n_fed = 0;
  if (!q || !mark || !n_fed || max == 0)
    return WK_ERR_ARG;
  pthread_mutex_lock (&q->lock);
  while (!q->stopped && q->written == q->read &&
      !(q->head && q->head->pos == q->read))
    pthread_cond_wait (&q->cond, &q->lock);
  if (q->stopped) {
    pthread_mutex_unlock (&q->lock);
    return WK_ERR_STATE;
  }
  if (q->head && q->head->pos == q->read) {
    node = q->head;
    q->head = node->next;
    if (!q->head)
      q->tail = NULL;
    pthread_mutex_unlock (&q->lock);
    *mark = node->mark;
    free (node);
    return WK_OK;
  }
  n = (size_t) (q->written - q->read);
  if (q->head && q->head->pos - q->read < n)
    n = (size_t) (q->head->pos - q->read);
  off = (size_t) (q->read % q->cap);
  if (n > q->cap - off)
    n = q->cap - off;
  if (n > max)
    n = max;
  read0 = q->read;
  pthread_mutex_unlock (&q->lock);

  /* the writer does not write into [read, read + n) meanwhile */
  st = wk_stream_feed_at (stream, q->ring + off, n, due ? due (user) :
      INFINITY);

  pthread_mutex_lock (&q->lock);
  /* a clear during the feed started the queue anew: keep its count */
  if (q->read == read0 && q->written >= read0 + n)
    q->read += n;
  pthread_cond_broadcast (&q->cond);
  pthread_mutex_unlock (&q->lock);
  *n_fed = n;
  return st;
}
