/* Scratch memory (internal): a stream's working buffers, whose contents
 * are undefined until the code that uses them writes them. */
#ifndef WK_ALLOC_H
#define WK_ALLOC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* n elements of elem bytes, not zeroed (NULL on overflow or no memory).
 * malloc rather than calloc so that the pages a run never reaches stay
 * untouched: the wasm build's dlmalloc clears every calloc block, and
 * glibc clears a block it reuses from its heap (large blocks are, once
 * a few streams were freed), which made a stream resident for the full
 * 30 s context whatever it ran. With WK_POISON_SCRATCH (the sanitizer
 * build of the test suite) every byte is 0xff, a NaN in every float, so
 * code that reads scratch it has not written changes the tests' results. */
static inline void *
wk_scratch_alloc (size_t n, size_t elem)
{
  void *p;

  if (elem != 0 && n > SIZE_MAX / elem)
    return NULL;
  p = malloc (n * elem > 0 ? n * elem : 1);
#ifdef WK_POISON_SCRATCH
  if (p)
    memset (p, 0xff, n * elem);
#endif
  return p;
}

#endif /* WK_ALLOC_H */
