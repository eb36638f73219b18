/* The engine's clock (internal): monotonic seconds, for stage timings and
 * the live policy's deadlines (wk_clock_seconds () is the public face). */
#ifndef WK_TIME_H
#define WK_TIME_H

#include <time.h>

static inline double
wk_now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif /* WK_TIME_H */
