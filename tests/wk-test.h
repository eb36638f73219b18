/* A few macros for the plain C tests: each failed check prints where and
 * why (on stderr) and makes the test exit non-zero. The programs print TAP
 * on stdout (meson runs them with protocol 'tap' and counts each RUN as a
 * subtest), so anything else they print there starts with "# ". */
#ifndef WK_TEST_H
#define WK_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int wk_test_failures;
static int wk_test_count;       /* RUN()s so far: the TAP test number */

#define CHECK(cond) do { if (!(cond)) { \
      fprintf (stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      wk_test_failures++; } } while (0)

#define CHECK_MSG(cond, ...) do { if (!(cond)) { \
      fprintf (stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf (stderr, __VA_ARGS__); fputc ('\n', stderr); \
      wk_test_failures++; } } while (0)

#define CHECK_NEAR(a, b, tol) do { double _a = (a), _b = (b); \
    if (!(fabs (_a - _b) <= (tol))) { \
      fprintf (stderr, "%s:%d: %s = %g, %s = %g, differ by more than %g\n", \
          __FILE__, __LINE__, #a, _a, #b, _b, (double) (tol)); \
      wk_test_failures++; } } while (0)

/* Runs a test function and reports it as one TAP test point. */
#define RUN(fn) do { int _before = wk_test_failures; fn (); \
    printf ("%s %d - %s\n", wk_test_failures == _before ? "ok" : "not ok", \
        ++wk_test_count, #fn); \
    fflush (stdout); } while (0)

/* The TAP plan comes last (the count is known only then); checks that
 * failed outside any RUN() still make the exit status non-zero. */
#define TEST_EXIT() (printf ("1..%d\n", wk_test_count), fflush (stdout), \
    wk_test_failures ? (fprintf (stderr, "%d check(s) failed\n", \
        wk_test_failures), 1) : 0)

/* $WK_SHARED_DATA/name, or NULL if the variable is unset. */
static inline const char *
wk_test_shared_path (const char *name)
{
  static char buf[4096];
  const char *dir = getenv ("WK_SHARED_DATA");
  if (!dir)
    return NULL;
  snprintf (buf, sizeof buf, "%s/%s", dir, name);
  return buf;
}

#endif
