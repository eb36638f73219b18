/* The process-wide registry of models loaded from files (internal).
 *
 * Whisper models (model.c) and VAD models (vad.c) both start with a
 * wk_loaded header and are shared through this one list: a second load of
 * a file that is the one already loaded -- same device, inode, size and
 * modification time, so a file rewritten in place is loaded afresh --
 * returns the loaded object with one more reference. */
#ifndef WK_REGISTRY_H
#define WK_REGISTRY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "mapfile.h"
#include "whisperknot.h"

typedef struct wk_loaded wk_loaded;
typedef struct wk_loaded_kind wk_loaded_kind;

struct wk_loaded_kind
{
  /* "model", "VAD model": how messages name it */
  const char *what;
  /* Loads path into a new object (wk_loaded_init'ed) whose id is the
   * identity of the file it read (wk_knot_file_id of its knot). */
    wk_status (*load) (const char *path, wk_loaded ** out, char *err,
      size_t err_size);
  void (*destroy) (wk_loaded * obj);
  /* one load of this kind at a time, so that two threads loading one
   * file end up with one copy; ref and unref never wait for it */
  pthread_mutex_t load_lock;
};

struct wk_loaded
{
  const wk_loaded_kind *kind;
  int refcount;                 /* under the registry's lock */
  bool listed;                  /* in the registry (loaded from a file) */
  wk_file_id id;                /* the file's identity and version */
  wk_loaded *next;
};

/* One reference, not listed (an object made from memory stays so). */
void wk_loaded_init (wk_loaded * obj, const wk_loaded_kind * kind);

/* The object of this kind loaded from path's file, or a new one from
 * kind->load, listed. WK_ERR_IO with "<what>: cannot open 'path': ..."
 * when path cannot be stat'ed. */
wk_status wk_registry_load (wk_loaded_kind * kind, const char *path,
    wk_loaded ** out, char *err, size_t err_size);

void wk_loaded_ref (wk_loaded * obj);
/* Drops a reference; the last one unlists the object and destroys it. */
void wk_loaded_unref (wk_loaded * obj);

#endif /* WK_REGISTRY_H */
