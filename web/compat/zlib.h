/* The part of zlib the engine uses (one deflate at level 6 to measure
 * Whisper's compression ratio, engine/decode.c), for the WebAssembly
 * engine: Debian has no zlib for wasm32-wasi, so the host does the
 * compression. web/whisperknot.mjs supplies the import wk_host.deflate,
 * zlib's algorithm at zlib's defaults (level 6, 32 KiB window, memLevel
 * 8), so that the ratio, and with it every fallback decision, is the
 * native engine's. */
#ifndef WK_COMPAT_ZLIB_H
#define WK_COMPAT_ZLIB_H

#include <stddef.h>

typedef unsigned char Bytef;
typedef unsigned int uInt;
typedef unsigned long uLong;
typedef void *voidpf;
typedef voidpf (*alloc_func) (voidpf opaque, uInt items, uInt size);
typedef void (*free_func) (voidpf opaque, voidpf address);

#define Z_NULL 0
#define Z_OK 0
#define Z_STREAM_END 1
#define Z_STREAM_ERROR (-2)
#define Z_BUF_ERROR (-5)
#define Z_FINISH 4
#define Z_DEFAULT_COMPRESSION (-1)

typedef struct
{
  Bytef *next_in;
  uInt avail_in;
  uLong total_in;
  Bytef *next_out;
  uInt avail_out;
  uLong total_out;
  alloc_func zalloc;
  free_func zfree;
  voidpf opaque;
  int level;
} z_stream;

/* Compresses src[0 .. src_len) into dst (at most dst_cap bytes) as
 * zlib.compress does; returns the compressed size, or -1 when it does not
 * fit or the host cannot compress. */
__attribute__((import_module ("wk_host"), import_name ("deflate")))
     int
     wk_host_deflate (const void *src, size_t src_len, void *dst,
    size_t dst_cap, int level);

     static inline int
     deflateInit (z_stream * zs, int level)
{
  zs->level = level < 0 ? 6 : level;
  zs->total_in = zs->total_out = 0;
  return Z_OK;
}

/* Only the one-shot use: all input at once with Z_FINISH. */
static inline int
deflate (z_stream * zs, int flush)
{
  int n;

  if (flush != Z_FINISH)
    return Z_STREAM_ERROR;
  n = wk_host_deflate (zs->next_in, zs->avail_in, zs->next_out,
      zs->avail_out, zs->level);
  if (n < 0)
    return Z_BUF_ERROR;
  zs->total_in += zs->avail_in;
  zs->next_in += zs->avail_in;
  zs->avail_in = 0;
  zs->total_out += (uLong) n;
  zs->next_out += n;
  zs->avail_out -= (uInt) n;
  return Z_STREAM_END;
}

static inline int
deflateEnd (z_stream * zs)
{
  (void) zs;
  return Z_OK;
}

#endif /* WK_COMPAT_ZLIB_H */
