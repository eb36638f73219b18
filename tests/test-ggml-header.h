/* A tiny reader of the header of a whisper.cpp ggml .bin (magic, 11 int32
 * hyper-parameters, the mel filterbank, the vocabulary) for the mel and
 * tokenizer tests, independent of the engine's readers so that the tests
 * check the engine against the file itself. Every size is checked. */
#ifndef WK_TEST_GGML_HEADER_H
#define WK_TEST_GGML_HEADER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct
{
  unsigned char *data;          /* the whole file */
  size_t size;
  int32_t hparams[11];          /* n_vocab .. ftype, in file order */
  int n_mels, n_fft;
  const float *filters;         /* [n_mels][n_fft], unaligned: copied */
  float *filters_copy;
  int n_tokens;
  const char **tokens;          /* into data, not NUL-terminated */
  size_t *lens;
} wk_test_ggml;

static inline int32_t
wk_test_ggml_i32 (const unsigned char *p)
{
  return (int32_t) ((uint32_t) p[0] | (uint32_t) p[1] << 8 |
      (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24);
}

static inline void
wk_test_ggml_clear (wk_test_ggml * g)
{
  free (g->data);
  free (g->filters_copy);
  free ((void *) g->tokens);
  free (g->lens);
  memset (g, 0, sizeof *g);
}

/* Returns 0 on success, -1 (with a message on stderr) otherwise. */
static inline int
wk_test_ggml_read (const char *path, wk_test_ggml * g)
{
  FILE *f;
  long sz;
  size_t pos, i;

  memset (g, 0, sizeof *g);
  f = fopen (path, "rb");
  if (!f) {
    fprintf (stderr, "cannot open %s\n", path);
    return -1;
  }
  if (fseek (f, 0, SEEK_END) != 0 || (sz = ftell (f)) < 0
      || fseek (f, 0, SEEK_SET) != 0) {
    fclose (f);
    return -1;
  }
  g->size = (size_t) sz;
  g->data = malloc (g->size ? g->size : 1);
  if (!g->data || fread (g->data, 1, g->size, f) != g->size) {
    fclose (f);
    wk_test_ggml_clear (g);
    return -1;
  }
  fclose (f);

  if (g->size < 4 + 44 + 8 || wk_test_ggml_i32 (g->data) != 0x67676d6c)
    goto bad;
  for (i = 0; i < 11; i++)
    g->hparams[i] = wk_test_ggml_i32 (g->data + 4 + 4 * i);
  pos = 48;
  g->n_mels = wk_test_ggml_i32 (g->data + pos);
  g->n_fft = wk_test_ggml_i32 (g->data + pos + 4);
  pos += 8;
  if (g->n_mels <= 0 || g->n_mels > 1024 || g->n_fft <= 0 || g->n_fft > 4096
      || (size_t) g->n_mels * g->n_fft * 4 > g->size - pos)
    goto bad;
  g->filters_copy = malloc ((size_t) g->n_mels * g->n_fft * sizeof (float));
  if (!g->filters_copy)
    goto bad;
  memcpy (g->filters_copy, g->data + pos, (size_t) g->n_mels * g->n_fft * 4);
  g->filters = g->filters_copy;
  pos += (size_t) g->n_mels * g->n_fft * 4;

  if (g->size - pos < 4)
    goto bad;
  g->n_tokens = wk_test_ggml_i32 (g->data + pos);
  pos += 4;
  if (g->n_tokens <= 0 || g->n_tokens > 1000000)
    goto bad;
  g->tokens = calloc ((size_t) g->n_tokens, sizeof *g->tokens);
  g->lens = calloc ((size_t) g->n_tokens, sizeof *g->lens);
  if (!g->tokens || !g->lens)
    goto bad;
  for (i = 0; i < (size_t) g->n_tokens; i++) {
    uint32_t len;
    if (g->size - pos < 4)
      goto bad;
    len = (uint32_t) wk_test_ggml_i32 (g->data + pos);
    pos += 4;
    if (len > g->size - pos)
      goto bad;
    g->tokens[i] = (const char *) g->data + pos;
    g->lens[i] = len;
    pos += len;
  }
  return 0;

bad:
  fprintf (stderr, "%s: not a ggml .bin header this test understands\n", path);
  wk_test_ggml_clear (g);
  return -1;
}

#endif
