/* Read-only file mapping shared by the knot reader and the converter's
 * readers of foreign formats (internal: not part of the public API). */
#ifndef WK_MAPFILE_H
#define WK_MAPFILE_H

#include "whisperknot.h"

#include <stdbool.h>
#include <stddef.h>

/* Opens path, checks it is a regular, non-empty file that fits in size_t
 * and maps all of it read-only (MAP_SHARED when shared, else MAP_PRIVATE);
 * the descriptor is closed before returning. On success *data and *size
 * describe the mapping (release it with wk_unmap_file). On failure nothing
 * stays open, *data is NULL, *size 0 and err holds "<path>: ...":
 * WK_ERR_IO when the file cannot be opened, is not a regular file or
 * cannot be mapped; WK_ERR_FORMAT (message "<path>: empty file") when it
 * is empty or larger than SIZE_MAX; WK_ERR_ARG for NULL arguments. */
wk_status wk_map_file (const char *path, bool shared, const void **data,
    size_t *size, char *err, size_t err_size);

/* Releases a mapping from wk_map_file; NULL data does nothing. */
void wk_unmap_file (const void *data, size_t size);

#endif /* WK_MAPFILE_H */
