/* Read-only file mapping (see mapfile.h). */
#include "mapfile.h"
#include "wk-err.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

wk_status
wk_map_file (const char *path, bool shared, const void **data, size_t *size,
    char *err, size_t err_size)
{
  struct stat sb;
  void *map;
  int fd;

  if (!path || !data || !size)
    return WK_ERR_ARG;
  *data = NULL;
  *size = 0;
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    wk_set_err (err, err_size, "%s: cannot open: %s", path, strerror (errno));
    return WK_ERR_IO;
  }
  if (fstat (fd, &sb) != 0 || !S_ISREG (sb.st_mode)) {
    wk_set_err (err, err_size, "%s: not a regular file", path);
    close (fd);
    return WK_ERR_IO;
  }
  if (sb.st_size <= 0 || (uint64_t) sb.st_size > SIZE_MAX) {
    wk_set_err (err, err_size, "%s: empty file", path);
    close (fd);
    return WK_ERR_FORMAT;
  }
  map = mmap (NULL, (size_t) sb.st_size, PROT_READ,
      shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
  close (fd);
  if (map == MAP_FAILED) {
    wk_set_err (err, err_size, "%s: cannot map: %s", path, strerror (errno));
    return WK_ERR_IO;
  }
  *data = map;
  *size = (size_t) sb.st_size;
  return WK_OK;
}

void
wk_unmap_file (const void *data, size_t size)
{
  if (data)
    munmap ((void *) data, size);
}
