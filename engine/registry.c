/* The process-wide registry of models loaded from files (see registry.h):
 * one list and one staleness rule for every kind of model. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "registry.h"
#include "wk-err.h"

/* guards the list and every refcount (held briefly, never during a load) */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static wk_loaded *registry;

void
wk_loaded_init (wk_loaded * obj, const wk_loaded_kind * kind)
{
  memset (obj, 0, sizeof *obj);
  obj->kind = kind;
  obj->refcount = 1;
}

static int64_t
stat_mtime_ns (const struct stat *sb)
{
  return (int64_t) sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

wk_status
wk_registry_load (wk_loaded_kind * kind, const char *path, wk_loaded ** out,
    char *err, size_t err_size)
{
  struct stat sb;
  wk_loaded *o;
  wk_status st;

  *out = NULL;
  if (stat (path, &sb) != 0) {
    wk_set_err (err, err_size, "%s: cannot open '%s': %s", kind->what, path,
        strerror (errno));
    return WK_ERR_IO;
  }

  pthread_mutex_lock (&kind->load_lock);
  pthread_mutex_lock (&registry_lock);
  for (o = registry; o; o = o->next) {
    if (o->kind == kind && o->id.dev == (uint64_t) sb.st_dev
        && o->id.ino == (uint64_t) sb.st_ino
        && o->id.size == (int64_t) sb.st_size
        && o->id.mtime_ns == stat_mtime_ns (&sb)) {
      o->refcount++;
      pthread_mutex_unlock (&registry_lock);
      pthread_mutex_unlock (&kind->load_lock);
      *out = o;
      return WK_OK;
    }
  }
  pthread_mutex_unlock (&registry_lock);

  /* the loader records the identity of what it mapped, which a
   * replacement between the stat above and its open would have changed */
  st = kind->load (path, &o, err, err_size);
  if (st == WK_OK) {
    pthread_mutex_lock (&registry_lock);
    o->listed = true;
    o->next = registry;
    registry = o;
    pthread_mutex_unlock (&registry_lock);
    *out = o;
  }
  pthread_mutex_unlock (&kind->load_lock);
  return st;
}

void
wk_loaded_ref (wk_loaded * obj)
{
  pthread_mutex_lock (&registry_lock);
  obj->refcount++;
  pthread_mutex_unlock (&registry_lock);
}

void
wk_loaded_unref (wk_loaded * obj)
{
  bool last;

  pthread_mutex_lock (&registry_lock);
  last = --obj->refcount == 0;
  if (last && obj->listed) {
    wk_loaded **pp;
    for (pp = &registry; *pp; pp = &(*pp)->next) {
      if (*pp == obj) {
        *pp = obj->next;
        break;
      }
    }
  }
  pthread_mutex_unlock (&registry_lock);
  if (last)
    obj->kind->destroy (obj);
}
