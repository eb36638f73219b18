/* Reading knot files (GGUF v3 layout, see knots/FORMAT.md).
 *
 * Every size, count and offset is checked against the file size before
 * a pointer is formed. A file is hostile until the whole header, metadata
 * and tensor table have been validated; only then is a wk_knot returned. */
#ifndef WK_KNOT_H
#define WK_KNOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wk-types.h"
#include "mapfile.h"

typedef struct wk_knot wk_knot;

/* Maps the file read-only (MAP_SHARED, so every process-wide user shares
 * the page cache) and validates it. The descriptor stays open until
 * wk_knot_close, for wk_knot_check_file. */
wk_status wk_knot_open (const char *path, wk_knot ** out, char *err,
    size_t err_size);
/* Validates a knot held in memory; the memory must outlive the knot.
 * Used by tests and fuzz targets. */
wk_status wk_knot_open_memory (const void *data, size_t size, wk_knot ** out,
    char *err, size_t err_size);
void wk_knot_close (wk_knot * knot);

/* The identity of the file a knot from wk_knot_open maps, as it was when
 * mapped; false for a knot in memory. */
bool wk_knot_file_id (const wk_knot * knot, wk_file_id * id);
/* Whether that file is still the version that was mapped (wk_file_check
 * on the descriptor the knot keeps open): WK_ERR_IO, with a message
 * naming path, once it shrank (touching the weights would raise SIGBUS)
 * or was rewritten in place. WK_OK for a knot in memory. */
wk_status wk_knot_check_file (const wk_knot * knot, const char *path,
    char *err, size_t err_size);

size_t wk_knot_size (const wk_knot * knot);     /* bytes of the file */
int64_t wk_knot_n_tensors (const wk_knot * knot);
const wk_tensor *wk_knot_tensor_at (const wk_knot * knot, int64_t i);
/* NULL if absent. */
const wk_tensor *wk_knot_find (const wk_knot * knot, const char *name);

/* Metadata. Each getter returns false when the key is absent or has
 * another type. Integer getters accept any GGUF integer type whose value
 * fits. Strings are not NUL-terminated in the file: *len gives the size. */
bool wk_knot_get_u32 (const wk_knot * knot, const char *key, uint32_t * out);
bool wk_knot_get_f32 (const wk_knot * knot, const char *key, float *out);
bool wk_knot_get_str (const wk_knot * knot, const char *key,
    const char **str, size_t *len);
/* Arrays: the element count, then element access. */
bool wk_knot_get_arr_len (const wk_knot * knot, const char *key, size_t *n);
/* Copies n f32 elements of an f32 array into dst (metadata is not
 * aligned, so no pointer into the file is handed out). */
bool wk_knot_copy_f32_arr (const wk_knot * knot, const char *key,
    float *dst, size_t n);
/* Copies n elements of a u32 (or non-negative i32) array into dst; false
 * for another element type, a negative element or n past the end. */
bool wk_knot_copy_u32_arr (const wk_knot * knot, const char *key,
    uint32_t * dst, size_t n);
/* The i-th string of a string array. */
bool wk_knot_get_str_at (const wk_knot * knot, const char *key, size_t i,
    const char **str, size_t *len);

#endif
