/* Read-only file mapping shared by the knot reader and the converter's
 * readers of foreign formats (internal: not part of the public API). */
#ifndef WK_MAPFILE_H
#define WK_MAPFILE_H

#include "whisperknot.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What fstat says of a mapped file: which file it is and which version. */
typedef struct
{
  uint64_t dev, ino;
  int64_t size, mtime_ns;
} wk_file_id;

/* Opens path without blocking (O_NONBLOCK: a FIFO would otherwise wait
 * for a writer), checks with fstat, before any read, that it is a
 * regular, non-empty file that fits in size_t, and maps all of it
 * read-only (MAP_SHARED when shared, else MAP_PRIVATE). On success *data
 * and *size describe the mapping (release it with wk_unmap_file), *id
 * (if not NULL) the file, and *fd (if not NULL) receives the descriptor,
 * left open for wk_file_check (the caller closes it); with fd NULL it is
 * closed before returning. On failure nothing stays open, *data is NULL,
 * *size 0, *fd -1 and err holds "<path>: ...": WK_ERR_IO when the file
 * cannot be opened, is not a regular file (a directory, FIFO, device,
 * socket) or cannot be mapped; WK_ERR_FORMAT (message "<path>: empty
 * file") when it is empty or larger than SIZE_MAX; WK_ERR_ARG for NULL
 * arguments. */
wk_status wk_map_file_fd (const char *path, bool shared, const void **data,
    size_t *size, wk_file_id * id, int *fd, char *err, size_t err_size);

/* wk_map_file_fd without the identity and with the descriptor closed. */
wk_status wk_map_file (const char *path, bool shared, const void **data,
    size_t *size, char *err, size_t err_size);

/* Parses a mapped file's bytes into *out (a reader's _open_memory). */
typedef wk_status (*wk_map_parser) (const void *data, size_t size,
    void *out, char *err, size_t err_size);

/* Maps path privately (wk_map_file) and parses the mapping with parse.
 * When parse fails the mapping is released and err holds "<path>: " and
 * parse's message. On success, with data NULL the mapping is released
 * (a parser that copies what it keeps); else *data and *size describe it
 * and the caller keeps it while the parsed object points into it. */
wk_status wk_map_parse (const char *path, wk_map_parser parse, void *out,
    const void **data, size_t *size, char *err, size_t err_size);

/* What a file given as a model is, from its first bytes. */
typedef enum
{
  WK_FILE_OTHER,
  WK_FILE_KNOT,                 /* "GGUF" */
  WK_FILE_GGML,                 /* whisper.cpp's .bin (or Silero VAD's) */
  /* torch.save since PyTorch 1.6: a zip (OpenAI's .pt, pytorch_model.bin) */
  WK_FILE_TORCH_ZIP,
  /* torch.save before 1.6: a bare pickle (protocol 2 to 5) */
  WK_FILE_TORCH_PICKLE,
  /* an 8-byte header length (at least 2, within the file), then '{' */
  WK_FILE_SAFETENSORS,
  /* '{' after a header length the file cannot hold (truncated, damaged,
   * or other bytes that happen to have '{' there) */
  WK_FILE_SAFETENSORS_DAMAGED,
} wk_file_kind;

/* Bytes of a file's head that wk_file_kind_of reads at most. */
#define WK_FILE_HEAD_BYTES 9

/* The kind of a file of file_size bytes whose first n bytes are head
 * (n < WK_FILE_HEAD_BYTES: the file is that short, or only the kinds
 * those bytes tell). The safetensors test comes before the pickle's: a
 * header length of 640 starts with the bytes 0x80 0x02 of a pickle. */
wk_file_kind wk_file_kind_of (const void *head, size_t n, uint64_t file_size);

/* Releases a mapping from wk_map_file; NULL data does nothing. */
void wk_unmap_file (const void *data, size_t size);

/* Whether the mapped file behind fd is still the version id describes
 * (see wk_map_file_fd). A file that shrank would raise SIGBUS on the
 * first touch of a page past its new end; one rewritten in place (same
 * inode, new size or modification time) holds weights the parsed tables
 * no longer describe. Both are WK_ERR_IO with a message naming path; a
 * file replaced by rename(2) leaves the mapped inode intact and passes.
 * One fstat: cheap enough to run before every use of the weights. */
wk_status wk_file_check (int fd, const wk_file_id * id, const char *path,
    char *err, size_t err_size);

#endif /* WK_MAPFILE_H */
