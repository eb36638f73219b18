/* A few macros for the plain C tests: each failed check prints where and
 * why and makes the test exit non-zero. */
#ifndef WK_TEST_H
#define WK_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int wk_test_failures;

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

/* Runs a test function and reports it in TAP-like form. */
#define RUN(fn) do { int _before = wk_test_failures; fn (); \
    printf ("%s %s\n", wk_test_failures == _before ? "ok" : "not ok", #fn); \
    fflush (stdout); } while (0)

#define TEST_EXIT() (wk_test_failures ? (fprintf (stderr, "%d check(s) failed\n", \
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
