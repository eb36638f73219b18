/* whisperknot: an embeddable Whisper-architecture speech recognizer.
 *
 * This is the engine's only public header. It has no GStreamer types, so
 * any C program can embed the engine.
 *
 * Typical use:
 *
 *   wk_model *model;
 *   char err[256];
 *   wk_model_params mp = wk_model_default_params ();
 *   if (wk_model_load ("model.knot", &mp, &model, err, sizeof err) != WK_OK)
 *     fail (err);
 *   wk_stream_params sp = wk_stream_default_params ();
 *   wk_stream *s;
 *   wk_stream_new (model, &sp, &s, err, sizeof err);
 *   wk_stream_feed (s, pcm, n);          // as often as audio arrives
 *   wk_stream_finish (s);                // end of audio: transcribe the rest
 *   const wk_segment *segs;
 *   size_t n_segs = wk_stream_take (s, &segs);
 *   ...
 *   wk_stream_free (s);
 *   wk_model_unref (model);
 *
 * Times are sample positions at 16 kHz counted from the first sample fed
 * to the stream (or from the last wk_stream_reset()).
 *
 * Thread safety: a wk_model is immutable after load and may be shared by
 * any number of streams on any threads. A wk_stream must be used by one
 * thread at a time.
 */
#ifndef WHISPERKNOT_H
#define WHISPERKNOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(WK_BUILDING_ENGINE)
#define WK_API __attribute__ ((visibility ("default")))
#else
#define WK_API
#endif

#define WK_SAMPLE_RATE 16000

typedef enum
{
  WK_OK = 0,
  WK_ERR_IO,                    /* file missing, unreadable, mmap failed */
  WK_ERR_FORMAT,                /* corrupt, truncated or hostile file */
  WK_ERR_UNSUPPORTED,           /* valid file we cannot run (type, dims) */
  WK_ERR_NOMEM,
  WK_ERR_ARG,                   /* bad argument from the caller */
  WK_ERR_STATE,                 /* call not allowed in this state */
  WK_ERR_INTERNAL
} wk_status;

WK_API const char *wk_status_str (wk_status status);

/* ---- models ---------------------------------------------------------- */

typedef struct wk_model wk_model;

/* Load-time parameters. */
typedef struct
{
  /* Reserved for future use (for example a preferred kernel ISA); keep the
   * struct so callers start from wk_model_default_params(). */
  int reserved;
} wk_model_params;

WK_API wk_model_params wk_model_default_params (void);

/* Maps a knot file read-only. A file already loaded in this process (same
 * device and inode) is shared: the returned handle holds a new reference to
 * the same mapping. On failure *out is NULL and err (if not NULL) holds a
 * message a user can act on. */
WK_API wk_status wk_model_load (const char *path, const wk_model_params *params,
    wk_model ** out, char *err, size_t err_size);

WK_API wk_model *wk_model_ref (wk_model * model);
WK_API void wk_model_unref (wk_model * model);

typedef struct
{
  int n_vocab;
  int n_mels;
  int n_audio_ctx;
  int n_audio_state;
  int n_audio_head;
  int n_audio_layer;
  int n_text_ctx;
  int n_text_state;
  int n_text_head;
  int n_text_layer;
  bool multilingual;
  uint64_t n_params;            /* weights in the file */
  uint64_t file_bytes;          /* bytes mapped */
} wk_model_info;

WK_API void wk_model_get_info (const wk_model * model, wk_model_info * info);

/* The path of the default model: $WHISPERKNOT_MODEL if set, else the file
 * installed with the engine, else (when running from the build tree) the
 * copy there. Never NULL. */
WK_API const char *wk_default_model_path (void);

/* ---- streams --------------------------------------------------------- */

typedef struct wk_stream wk_stream;

typedef struct
{
  /* ISO 639-1 code ("en", "de") or NULL/"" / "auto" to detect (multilingual
   * models only; English-only models always use English). */
  const char *language;
  bool translate;               /* translate to English (multilingual only) */
  int n_threads;                /* 0 = a sane default for this machine */
  int beam_size;                /* <= 1: greedy */
  /* Temperature fallback as Whisper does it: start at 0, add this step on
   * a failed window (compression ratio or log-probability check) up to
   * 1.0. 0 disables fallback. */
  float temperature_inc;
  float logprob_threshold;      /* default -1.0 */
  float compression_ratio_threshold;    /* default 2.4 */
  float no_speech_threshold;    /* default 0.6 */
  bool suppress_blank;
  bool no_timestamps;           /* decode without timestamp tokens */
  int max_text_ctx;             /* prompt tokens kept from earlier text */
  uint64_t seed;                /* for sampling at temperature > 0 */
  /* Live policy (see issue "Live captioning"): target delay from a word's
   * end to its committed text, in milliseconds. 0 = offline behaviour:
   * transcribe in 30 s windows, seeking to the last timestamp. */
  int latency_ms;
} wk_stream_params;

WK_API wk_stream_params wk_stream_default_params (void);

/* A stream holds every buffer it will need; feeding never allocates. The
 * stream keeps its own reference to the model. */
WK_API wk_status wk_stream_new (wk_model * model,
    const wk_stream_params * params, wk_stream ** out, char *err,
    size_t err_size);
WK_API void wk_stream_free (wk_stream * stream);

/* Appends mono 16 kHz samples in [-1, 1]. May run the recognizer on
 * complete windows before returning. */
WK_API wk_status wk_stream_feed (wk_stream * stream, const float *pcm,
    size_t n_samples);
WK_API wk_status wk_stream_feed_s16 (wk_stream * stream, const int16_t * pcm,
    size_t n_samples);

/* Transcribes everything buffered now (for example at the end of an
 * utterance) without ending the stream. */
WK_API wk_status wk_stream_flush (wk_stream * stream);

/* End of audio: transcribes the rest. Feeding afterwards is WK_ERR_STATE
 * until wk_stream_reset(). */
WK_API wk_status wk_stream_finish (wk_stream * stream);

/* Forgets all audio, text and results; time starts again at 0. */
WK_API void wk_stream_reset (wk_stream * stream);

typedef struct
{
  int32_t id;                   /* vocabulary id */
  float p;                      /* probability when sampled */
  int64_t start, end;           /* samples */
  const char *text;             /* the token's bytes, NUL-terminated; may
                                 * be an incomplete UTF-8 sequence */
} wk_token;

typedef struct
{
  int64_t start, end;           /* samples */
  const char *text;             /* valid UTF-8, NUL-terminated */
  const wk_token *tokens;       /* text tokens only */
  int n_tokens;
  float avg_logprob;
  float no_speech_prob;
} wk_segment;

/* Returns the segments completed since the previous take, in time order.
 * The array and its strings belong to the stream and stay valid until the
 * next call of any wk_stream_* function on this stream. */
WK_API size_t wk_stream_take (wk_stream * stream, const wk_segment ** segs);

/* The detected (or configured) language code of the stream, or NULL. */
WK_API const char *wk_stream_language (const wk_stream * stream);

/* Counters for statistics; all times in seconds. */
typedef struct
{
  double audio_seconds;         /* audio fed */
  double mel_seconds;           /* wall time spent per stage */
  double encoder_seconds;
  double decoder_seconds;
  int64_t n_windows;            /* encoder runs */
  int64_t n_tokens;             /* decoder steps */
  uint64_t state_bytes;         /* memory owned by this stream */
} wk_stream_stats;

WK_API void wk_stream_get_stats (const wk_stream * stream,
    wk_stream_stats * stats);

#ifdef __cplusplus
}
#endif
#endif /* WHISPERKNOT_H */
