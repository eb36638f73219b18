/* Error messages into a caller's buffer (see wk-err.h). */
#include "wk-err.h"

#include <stdarg.h>
#include <stdio.h>

void
wk_set_err (char *err, size_t err_size, const char *fmt, ...)
{
  va_list ap;

  if (!err || err_size == 0)
    return;
  va_start (ap, fmt);
  vsnprintf (err, err_size, fmt, ap);
  va_end (ap);
}
