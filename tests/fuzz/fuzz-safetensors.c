/* libFuzzer target: the Hugging Face readers. The first byte (mod 8)
 * picks the reader: safetensors (0 strict, 1 skipping other dtypes), 2
 * config.json, 3 vocab.json / tokenizer.json, 4 a shard index's file
 * names, 5 added_tokens.json / tokenizer.json's added_tokens, 6
 * generation_config.json's token ids and alignment heads, else the
 * tensor-name mapping. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput (const uint8_t * data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t * data, size_t size)
{
  char err[256];
  volatile uint8_t sink = 0;

  if (size < 1)
    return 0;
  switch (data[0] % 8) {
    case 0:
    case 1:{
      wk_safetensors *st = NULL;
      if (wk_safetensors_open_memory (data + 1, size - 1, data[0] % 8 == 1,
              &st, err, sizeof err) == WK_OK) {
        for (int64_t i = 0; i < st->n_tensors; i++) {
          const wk_st_tensor *t = &st->tensors[i];
          const uint8_t *p = t->data;
          float f[8];
          char name[200];
          size_t n = t->nbytes / (t->dtype == WK_ST_F32 ? 4 : 2);
          sink ^= p[0] ^ p[t->nbytes - 1];
          wk_st_to_f32 (t->dtype, p, f, n < 8 ? n : 8);
          if (wk_safetensors_find (st, t->name) == NULL)
            abort ();
          wk_hf_name_to_openai (t->name, name, sizeof name);
        }
        wk_safetensors_free (st);
      }
      break;
    }
    case 2:{
      wk_hf_config cfg;
      wk_hf_config_parse ((const char *) data + 1, size - 1, &cfg, err,
          sizeof err);
      break;
    }
    case 3:{
      wk_hf_vocab v;
      if (wk_hf_vocab_parse ((const char *) data + 1, size - 1, 4096, &v,
              err, sizeof err) == WK_OK) {
        for (int32_t i = 0; i < v.n; i++)
          if (v.lens[i])
            sink ^= (uint8_t) v.tokens[i][v.lens[i] - 1];
        wk_hf_vocab_clear (&v);
      }
      break;
    }
    case 4:{
      wk_hf_shards sh;
      if (wk_hf_shards_parse ((const char *) data + 1, size - 1, &sh, err,
              sizeof err) == WK_OK) {
        for (int32_t i = 0; i < sh.n; i++)
          if (!sh.files[i][0] || strchr (sh.files[i], '/'))
            abort ();
        wk_hf_shards_clear (&sh);
      } else if (sh.n || sh.files) {
        abort ();
      }
      break;
    }
    case 5:{
      wk_hf_named_ids ids;
      if (wk_hf_added_tokens_parse ((const char *) data + 1, size - 1, &ids,
              err, sizeof err) == WK_OK) {
        for (int32_t i = 0; i < ids.n; i++)
          if (!ids.names[i] || ids.ids[i] < 0 || ids.ids[i] > INT32_MAX)
            abort ();
          else
            sink ^= (uint8_t) ids.names[i][0];
        wk_hf_named_ids_clear (&ids);
      } else if (ids.n || ids.names || ids.ids) {
        abort ();
      }
      break;
    }
    case 6:{
      static const char *const keys[] = { "decoder_start_token_id",
        "eos_token_id", "no_timestamps_token_id", "prev_sot_token_id"
      };
      int64_t v[4];
      uint32_t heads[2 * 64];
      int n_heads;
      if (wk_hf_json_ids ((const char *) data + 1, size - 1, keys, 4, v, err,
              sizeof err) == WK_OK)
        for (int i = 0; i < 4; i++)
          if (v[i] < -1 || v[i] > INT32_MAX)
            abort ();
      /* the same file's alignment_heads */
      if (wk_hf_alignment_heads ((const char *) data + 1, size - 1, heads,
              64, &n_heads, err, sizeof err) == WK_OK)
        for (int i = 0; i < n_heads; i++)
          if (n_heads > 64 || heads[2 * i] > 0xffff
              || heads[2 * i + 1] > 0xffff)
            abort ();
      break;
    }
    default:{
      char *s = malloc (size);
      char out[64];
      memcpy (s, data + 1, size - 1);
      s[size - 1] = '\0';
      wk_hf_name_to_openai (s, out, sizeof out);
      free (s);
      break;
    }
  }
  (void) sink;
  return 0;
}
