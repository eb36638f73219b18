/* The error message convention of the engine and the converter's readers
 * (internal): a printf-style message into a caller's err buffer. */
#ifndef WK_ERR_H
#define WK_ERR_H

#include <stddef.h>

/* Formats into err (at most err_size bytes, NUL-terminated); does nothing
 * when err is NULL or err_size is 0. */
void wk_set_err (char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format (printf, 3, 4)));

#endif /* WK_ERR_H */
