/* Writing knot files (GGUF v3 layout, see FORMAT.md).
 *
 * Collect metadata and tensors, then write them in one go. Tensor data is
 * referenced (or owned, when asked) until the writer is freed; the file is
 * written to a temporary name beside the target and renamed into place, so
 * a failed write never leaves a partial output. */
#ifndef WK_KNOT_WRITER_H
#define WK_KNOT_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wk-types.h"

typedef struct wk_knot_writer wk_knot_writer;

/* alignment: a power of two (the knot convention is 64); it is written as
 * general.alignment, the first metadata entry. NULL on allocation failure
 * or a bad alignment. */
wk_knot_writer *wk_knot_writer_new (uint32_t alignment);
void wk_knot_writer_free (wk_knot_writer * w);

/* Metadata, in the order added. Keys must be unique (not checked here;
 * the reader rejects duplicates). */
wk_status wk_knot_writer_set_u32 (wk_knot_writer * w, const char *key,
    uint32_t v);
wk_status wk_knot_writer_set_str (wk_knot_writer * w, const char *key,
    const char *s, size_t len);
wk_status wk_knot_writer_set_f32_array (wk_knot_writer * w, const char *key,
    const float *v, size_t n);
wk_status wk_knot_writer_set_u32_array (wk_knot_writer * w, const char *key,
    const uint32_t * v, size_t n);
wk_status wk_knot_writer_set_str_array (wk_knot_writer * w, const char *key,
    const char *const *strs, const size_t *lens, size_t n);

/* Adds a tensor; nbytes must equal the size its type and shape imply.
 * With owned, the writer takes data whatever happens: it free()s it when
 * it is freed, or at once when the tensor is refused. */
wk_status wk_knot_writer_add_tensor (wk_knot_writer * w, const char *name,
    wk_type type, int n_dims, const int64_t * ne, const void *data,
    size_t nbytes, bool owned, char *err, size_t err_size);

/* Writes path atomically (temporary file + rename). */
wk_status wk_knot_writer_write_file (wk_knot_writer * w, const char *path,
    char *err, size_t err_size);
/* Writes into a malloc()ed buffer (tests, fuzz seeds). */
wk_status wk_knot_writer_write_memory (wk_knot_writer * w, void **data,
    size_t *size, char *err, size_t err_size);

/* Bytes the file will have. */
uint64_t wk_knot_writer_file_size (const wk_knot_writer * w);

#endif
