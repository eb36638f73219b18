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

static const char *
file_kind (mode_t mode)
{
  if (S_ISDIR (mode))
    return "a directory";
  if (S_ISFIFO (mode))
    return "a FIFO";
  if (S_ISCHR (mode) || S_ISBLK (mode))
    return "a device";
  if (S_ISSOCK (mode))
    return "a socket";
  return "not a regular file";
}

static int64_t
mtime_ns (const struct stat *sb)
{
  return (int64_t) sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

wk_status
wk_map_file_fd (const char *path, bool shared, const void **data,
    size_t *size, wk_file_id * id, int *fd_out, char *err, size_t err_size)
{
  struct stat sb;
  void *map;
  int fd;

  if (fd_out)
    *fd_out = -1;
  if (!path || !data || !size)
    return WK_ERR_ARG;
  *data = NULL;
  *size = 0;
  /* O_NONBLOCK: open() of a FIFO without a writer returns at once
   * instead of waiting; nothing is read before the type check below */
  fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    wk_set_err (err, err_size, "%s: cannot open: %s", path, strerror (errno));
    return WK_ERR_IO;
  }
  if (fstat (fd, &sb) != 0) {
    wk_set_err (err, err_size, "%s: cannot stat: %s", path, strerror (errno));
    close (fd);
    return WK_ERR_IO;
  }
  if (!S_ISREG (sb.st_mode)) {
    wk_set_err (err, err_size, "%s: %s, not a model file", path,
        file_kind (sb.st_mode));
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
  if (map == MAP_FAILED) {
    wk_set_err (err, err_size, "%s: cannot map: %s", path, strerror (errno));
    close (fd);
    return WK_ERR_IO;
  }
  if (id) {
    id->dev = (uint64_t) sb.st_dev;
    id->ino = (uint64_t) sb.st_ino;
    id->size = (int64_t) sb.st_size;
    id->mtime_ns = mtime_ns (&sb);
  }
  if (fd_out)
    *fd_out = fd;
  else
    close (fd);
  *data = map;
  *size = (size_t) sb.st_size;
  return WK_OK;
}

wk_status
wk_map_file (const char *path, bool shared, const void **data, size_t *size,
    char *err, size_t err_size)
{
  return wk_map_file_fd (path, shared, data, size, NULL, NULL, err, err_size);
}

wk_status
wk_map_parse (const char *path, wk_map_parser parse, void *out,
    const void **data, size_t *size, char *err, size_t err_size)
{
  const void *map;
  size_t len;
  wk_status st;
  char inner[512] = "";

  st = wk_map_file (path, false, &map, &len, err, err_size);
  if (st != WK_OK)
    return st;
  st = parse (map, len, out, inner, sizeof inner);
  if (st != WK_OK || !data) {
    wk_unmap_file (map, len);
    if (st != WK_OK)
      wk_set_err (err, err_size, "%s: %s", path, inner);
    return st;
  }
  *data = map;
  *size = len;
  return WK_OK;
}

void
wk_unmap_file (const void *data, size_t size)
{
  if (data)
    munmap ((void *) data, size);
}

wk_status
wk_file_check (int fd, const wk_file_id * id, const char *path, char *err,
    size_t err_size)
{
  struct stat sb;

  if (fd < 0 || !id)
    return WK_OK;               /* not a file (a knot in memory) */
  if (fstat (fd, &sb) != 0) {
    wk_set_err (err, err_size, "%s: cannot stat the loaded model: %s", path,
        strerror (errno));
    return WK_ERR_IO;
  }
  if ((int64_t) sb.st_size < id->size) {
    wk_set_err (err, err_size, "%s: the file shrank from %lld to %lld bytes "
        "after it was loaded; reading its weights would crash the process. "
        "Replace model files by renaming a new file into place (as "
        "whisperknot-convert does), then load the model again", path,
        (long long) id->size, (long long) sb.st_size);
    return WK_ERR_IO;
  }
  if ((int64_t) sb.st_size != id->size || mtime_ns (&sb) != id->mtime_ns) {
    wk_set_err (err, err_size, "%s: the file was rewritten in place after "
        "it was loaded, so its weights no longer match the loaded model. "
        "Replace model files by renaming a new file into place (as "
        "whisperknot-convert does), then load the model again", path);
    return WK_ERR_IO;
  }
  return WK_OK;
}

wk_file_kind
wk_file_kind_of (const void *head, size_t n, uint64_t file_size)
{
  const uint8_t *d = head;
  uint64_t len = 0;

  if (n >= 4 && memcmp (d, "GGUF", 4) == 0)
    return WK_FILE_KNOT;
  if (n >= 4 && memcmp (d, "lmgg", 4) == 0)     /* 0x67676d6c, little-endian */
    return WK_FILE_GGML;
  if (n >= 4 && memcmp (d, "PK\3\4", 4) == 0)
    return WK_FILE_TORCH_ZIP;
  for (int i = 0; i < 8 && n >= 9; i++)
    len |= (uint64_t) d[i] << (8 * i);
  if (n >= 9 && d[8] == '{' && len >= 2 && file_size >= 8
      && len <= file_size - 8)
    return WK_FILE_SAFETENSORS;
  if (n >= 2 && d[0] == 0x80 && d[1] >= 2 && d[1] <= 5)
    return WK_FILE_TORCH_PICKLE;
  if (n >= 9 && d[8] == '{')
    return WK_FILE_SAFETENSORS_DAMAGED;
  return WK_FILE_OTHER;
}
