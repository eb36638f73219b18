/* Fixtures shared by the tests that run on generated models (test-live,
 * test-stream, test-vad): allocation counting, clocks, a scratch folder,
 * and a random-weight model made with $WK_MAKE_TEST_MODEL and converted
 * with $WK_CONVERT.
 *
 * Include it in exactly one file of a test program: with glibc (and no
 * sanitizer) it defines malloc, calloc and realloc, which count calls while
 * wk_test_counting is set. They are interposed for the whole program (the
 * engine is linked statically), so any allocation the engine makes while
 * counting is seen. */
#ifndef WK_TEST_MODEL_H
#define WK_TEST_MODEL_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wk-test.h"

/* ---- counting allocations (not under sanitizers, which own malloc) ---- */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define WK_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) \
  || __has_feature(thread_sanitizer)
#define WK_TEST_SANITIZED 1
#endif
#endif
#ifndef WK_TEST_SANITIZED
#define WK_TEST_SANITIZED 0
#endif
#if !WK_TEST_SANITIZED && defined(__GLIBC__)
#define WK_COUNT_ALLOCS 1
#else
#define WK_COUNT_ALLOCS 0
#endif

static atomic_int counting;
static atomic_long n_allocs;

#if WK_COUNT_ALLOCS
extern void *__libc_malloc (size_t);
extern void *__libc_calloc (size_t, size_t);
extern void *__libc_realloc (void *, size_t);

void *
malloc (size_t n)
{
  if (atomic_load (&counting))
    atomic_fetch_add (&n_allocs, 1);
  return __libc_malloc (n);
}

void *
calloc (size_t n, size_t m)
{
  if (atomic_load (&counting))
    atomic_fetch_add (&n_allocs, 1);
  return __libc_calloc (n, m);
}

void *
realloc (void *p, size_t n)
{
  if (atomic_load (&counting))
    atomic_fetch_add (&n_allocs, 1);
  return __libc_realloc (p, n);
}
#endif

/* ---- clocks ------------------------------------------------------------ */

/* Seconds on clock clk (CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID, ...). */
static inline double
wk_test_clock_s (clockid_t clk)
{
  struct timespec ts;
  clock_gettime (clk, &ts);
  return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static inline double
wk_test_now_s (void)
{
  return wk_test_clock_s (CLOCK_MONOTONIC);
}

/* CPU seconds used by the whole process (all threads). */
static inline double
wk_test_cpu_s (void)
{
  return wk_test_clock_s (CLOCK_PROCESS_CPUTIME_ID);
}

/* ---- a scratch folder and generated models ----------------------------- */

/* True when the generator, the converter and the shared data are known;
 * otherwise prints the TAP skip line (the caller then returns 77). */
static inline bool
wk_test_have_model_tools (void)
{
  if (!getenv ("WK_MAKE_TEST_MODEL") || !getenv ("WK_CONVERT")
      || !getenv ("WK_SHARED_DATA")) {
    printf ("1..0 # SKIP WK_MAKE_TEST_MODEL / WK_CONVERT / WK_SHARED_DATA "
        "not set\n");
    return false;
  }
  return true;
}

/* Creates $WK_BUILD_ROOT/<prefix>-XXXXXX (or under /tmp) into dir;
 * returns 0, or -1 after printing why. */
static inline int
wk_test_make_tmpdir (char *dir, size_t dir_size, const char *prefix)
{
  const char *base = getenv ("WK_BUILD_ROOT");

  snprintf (dir, dir_size, "%s/%s-XXXXXX", base ? base : "/tmp", prefix);
  if (!mkdtemp (dir)) {
    fprintf (stderr, "mkdtemp %s: %s\n", dir, strerror (errno));
    return -1;
  }
  return 0;
}

/* Removes dir and everything in it (nothing when dir is empty). */
static inline void
wk_test_remove_tmpdir (const char *dir)
{
  char cmd[600];
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (dir[0] && system (cmd) != 0)
    fprintf (stderr, "cannot remove %s\n", dir);
}

/* Runs a shell command; prints it when it fails. */
static inline int
wk_test_run_cmd (const char *cmd)
{
  int rc = system (cmd);
  if (rc != 0)
    fprintf (stderr, "command failed (%d): %s\n", rc, cmd);
  return rc;
}

/* Generates a model in dir (make-test-model --dims dims --type gen_type
 * --seed 7, vocabulary $WK_SHARED_DATA/vocab) and converts it (with
 * --type conv_type unless NULL) to dir/name.knot, written into knot. The
 * generated dir/name.bin is kept and its path written into bin_out when
 * bin_out is not NULL, else removed. Returns 0 or -1. */
static inline int
wk_test_make_model (const char *dir, const char *dims, const char *gen_type,
    const char *vocab, const char *conv_type, const char *name, char *knot,
    size_t knot_size, char *bin_out, size_t bin_size)
{
  const char *gen = getenv ("WK_MAKE_TEST_MODEL");
  const char *conv = getenv ("WK_CONVERT");
  const char *voc = wk_test_shared_path (vocab);
  char bin[512], cmd[2048], vocab_path[1024];

  if (!gen || !conv || !voc)
    return -1;
  snprintf (vocab_path, sizeof vocab_path, "%s", voc);
  snprintf (bin, sizeof bin, "%s/%s.bin", dir, name);
  snprintf (knot, knot_size, "%s/%s.knot", dir, name);
  snprintf (cmd, sizeof cmd, "'%s' --dims %s --type %s --seed 7 --vocab '%s' "
      "'%s' >/dev/null", gen, dims, gen_type, vocab_path, bin);
  if (wk_test_run_cmd (cmd) != 0)
    return -1;
  if (conv_type)
    snprintf (cmd, sizeof cmd, "'%s' --type %s '%s' '%s' >/dev/null", conv,
        conv_type, bin, knot);
  else
    snprintf (cmd, sizeof cmd, "'%s' '%s' '%s' >/dev/null", conv, bin, knot);
  if (wk_test_run_cmd (cmd) != 0)
    return -1;
  if (bin_out)
    snprintf (bin_out, bin_size, "%s", bin);
  else
    unlink (bin);
  return 0;
}

#endif /* WK_TEST_MODEL_H */
