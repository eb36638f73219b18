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
 * Live captioning (wk_stream_params.latency_ms > 0, see there): feed audio
 * as it arrives, in any piece size (20 ms is fine), and after each feed
 * collect what changed:
 *
 *   sp.latency_ms = 1000;
 *   wk_stream_new (model, &sp, &s, err, sizeof err);
 *   for (;;) {                           // every buffer from the source
 *     wk_stream_feed_at (s, pcm, n, t);  // t: wk_clock_seconds () when
 *                                        // pcm[0] was captured (for the
 *                                        // deadlines); may run the model
 *                                        // (tens to a few hundred ms on
 *                                        // a CPU)
 *     n_segs = wk_stream_take (s, &segs); // committed: final, in order
 *     for (i = 0; i < n_segs; i++)
 *       if (segs[i].utterance_end)
 *         ...;                           // the utterance is over at .start
 *       else
 *         ...;                           // one word: .text (with Whisper's
 *                                        // leading space), .start, .end
 *     n_part = wk_stream_partial (s, &part, &serial);
 *     if (serial != last_serial)
 *       ...;                             // show part[0..n_part-1] (words
 *                                        // after the committed ones, each
 *                                        // with a .stability)
 *   }
 *   wk_stream_finish (s);                // end of audio: commits the rest
 *
 * Committed words are never retracted and never overlap earlier ones;
 * a partial word may change or vanish at the next feed. Silence costs
 * the voice detector only (about 0.2 % of one core) and produces no text.
 * Feeding never allocates and memory stays constant on streams of any
 * length. wk_stream_get_stats() reports runs, per-stage times, the step
 * in use and the largest delay from a word's last sample arriving to its
 * commit (max_delay_seconds).
 *
 * Times are sample positions at 16 kHz counted from the first sample fed
 * to the stream (or from the last wk_stream_reset()).
 *
 * Thread safety: a wk_model is immutable after load and may be shared by
 * any number of streams on any threads. A wk_stream must be used by one
 * thread at a time, except wk_stream_cancel(), which any thread may call
 * to stop the stream's work.
 *
 * Many streams in one process: each stream's working state is its own, so
 * streams on one model run at the same time without waiting for each
 * other; they share the process's worker threads (see n_threads), and
 * decoder steps of streams on one model that come at the same time run
 * as one pass over the weights (wk_stream_stats.n_shared_steps). Live
 * streams' runs (latency_ms > 0) on one model go at most one per core at
 * once, the one whose earliest uncommitted word is due first next, each
 * on one thread while others run or wait; the environment variable
 * WK_RUN_SLOTS sets how many at once (0: no limit). None of this changes
 * a stream's results: they are those it gives alone (live text with
 * capture times depends on run times, as it always does).
 */
#ifndef WHISPERKNOT_H
#define WHISPERKNOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
/* *INDENT-OFF* */
extern "C" {
/* *INDENT-ON* */
#endif

#if defined(__GNUC__) && defined(WK_BUILDING_ENGINE)
#define WK_API __attribute__ ((visibility ("default")))
#else
#define WK_API
#endif

#define WK_SAMPLE_RATE 16000
/* Whisper's window. Offline (latency_ms = 0) a window's text comes once
 * the window is complete (or at wk_stream_finish), so it trails the audio
 * by up to this much. */
#define WK_WINDOW_SAMPLES (30 * WK_SAMPLE_RATE)
/* The resolution of segment and word times: one timestamp token, 20 ms. */
#define WK_TIME_STEP_SAMPLES (WK_SAMPLE_RATE / 50)

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
WK_API wk_status wk_model_load (const char *path,
    const wk_model_params * params, wk_model ** out, char *err,
    size_t err_size);

/* A load of a knot file on a thread of its own, for a caller that must
 * not wait for it (a GStreamer element while it goes to READY, a user
 * interface): wk_model_load_start checks at once what needs no reading
 * (the file exists, is a regular file rather than a FIFO, directory or
 * device, and is readable; otherwise WK_ERR_IO with the reason in err
 * and *out NULL), then starts wk_model_load on a thread (where no thread
 * can be started, as in the single-threaded WebAssembly build, it loads
 * before returning). wk_model_load_finish waits for the load to end,
 * frees the loader and returns wk_model_load's status and message, the
 * model in *model (NULL on failure; with model NULL it is released) and
 * in *seconds (if not NULL) the wall time the load took. Every started
 * load must be finished once; a loader is used by one thread at a
 * time. done, if not NULL, is called with user_data on the loading
 * thread as soon as the load ends (before wk_model_load_finish returns),
 * with the model (NULL on failure; valid during the call only: the
 * reference is wk_model_load_finish's), the status and the seconds, so
 * that a caller can show the model as loaded without waiting for it. */
typedef struct wk_model_loader wk_model_loader;
typedef void (*wk_model_loaded_fn) (const wk_model * model, wk_status status,
    double seconds, void *user_data);

WK_API wk_status wk_model_load_start (const char *path,
    const wk_model_params * params, wk_model_loaded_fn done,
    void *user_data, wk_model_loader ** out, char *err, size_t err_size);
WK_API wk_status wk_model_load_finish (wk_model_loader * loader,
    wk_model ** model, double *seconds, char *err, size_t err_size);

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
  /* the most prompt tokens (wk_stream_params.initial_prompt and earlier
   * text) the model reads after <|startofprev|>: at most n_text_ctx / 2 -
   * 1; 0 for a model never trained with a prompt (its knot's
   * whisperknot.max_text_ctx = 0): it reads none */
  int max_prompt_tokens;
  uint64_t n_params;            /* weights in the file */
  uint64_t file_bytes;          /* bytes mapped */
  /* decoder heads word times come from (wk_stream_params.word_times): its
   * knot's whisperknot.alignment_heads, or all heads of the last half of
   * the decoder layers without the key; 0: none (byte-share times) */
  int n_alignment_heads;
} wk_model_info;

WK_API void wk_model_get_info (const wk_model * model, wk_model_info * info);

/* The path of the default model: $WHISPERKNOT_MODEL if set, else the file
 * installed with the engine, else (when running from the build tree) the
 * copy there. Never NULL. */
WK_API const char *wk_default_model_path (void);

/* A model= value as a path: NULL (no model named) is
 * wk_default_model_path(); one containing '/' or naming an existing file
 * is returned as is; otherwise the installed NAME.knot (from
 * tools/whisperknot-model: $WHISPERKNOT_MODEL_DIR, else
 * $XDG_DATA_HOME/whisperknot, else ~/.local/share/whisperknot) if it
 * exists; else the value unchanged. The result is malloc'd (free() it);
 * NULL when out of memory. */
WK_API char *wk_model_resolve_path (const char *name_or_path);

/* ---- streams --------------------------------------------------------- */

typedef struct wk_stream wk_stream;

/* How the live policy decides that a word is final.
 *
 * WK_COMMIT_AGREEMENT: LocalAgreement-2 alone: a word is committed when two
 * consecutive runs agree on it (or its utterance ends). Most accurate, but
 * a word may come later than latency_ms when runs disagree or are slow.
 *
 * WK_COMMIT_DEADLINE (the default): the same, plus a deadline for every
 * word not yet committed: the time its first sample was due (audio fed
 * with wk_stream_feed_at, which says when; wk_stream_feed's has none)
 * plus latency_ms, less a margin to deliver it
 * (WK_PUSH_MARGIN_MS). A word whose deadline would pass before the next
 * run could finish is committed as the latest run heard it, and runs are
 * scheduled to finish before the next deadline, so that a caller which
 * shows each word at its start time + latency_ms (a synchronised sink)
 * gets it in time. Committed words stay final in both policies. Runs
 * expected to take over a third of latency_ms (a loaded machine) decode
 * greedily and take the encoder's integer products where the kernels have
 * them (wk_stream_stats.n_slow_runs). When the machine cannot keep up (a
 * run takes longer than the latency allows), a word is committed at the
 * first run after its deadline and counted in wk_stream_stats.n_late. */
typedef enum
{
  WK_COMMIT_DEADLINE = 0,
  WK_COMMIT_AGREEMENT = 1
} wk_commit_policy;

/* Live policy: the unit of committed text wk_stream_take returns. */
typedef enum
{
  WK_GROUP_WORD = 0,            /* one segment per word, as soon as it is
                                 * committed (the default; the lowest
                                 * latency) */
  WK_GROUP_PHRASE,              /* words up to a pause of half a second or
                                 * the utterance's end, as one segment when
                                 * the phrase is over */
  WK_GROUP_UTTERANCE            /* one segment per utterance (a line or a
                                 * subtitle cue), when it is over */
} wk_group_by;

/* The time the deadline policy leaves, before a word's deadline, to hand
 * the word on (a GStreamer push, a network send). */
#define WK_PUSH_MARGIN_MS 50

#define WK_DEFAULT_BEAM_SIZE 5
#define WK_DEFAULT_LIVE_BEAM_SIZE 3
/* The widest beam search a stream takes (wk_stream_params.beam_size). */
#define WK_MAX_BEAM_SIZE 16

/* wk_stream_params.audio_ctx's choices besides a number of positions */
#define WK_AUDIO_CTX_AUTO 0
#define WK_AUDIO_CTX_FULL (-1)
#define WK_AUDIO_CTX_SHORT (-2)

typedef struct
{
  /* ISO 639-1 code ("en", "de") or NULL/"" / "auto" to detect (multilingual
   * models only; English-only models always use English). */
  const char *language;
  bool translate;               /* translate to English (multilingual only) */
  /* The most threads that work on this stream's computation at once: the
   * thread calling the stream and up to n_threads - 1 workers of the
   * process's pool, which every stream shares (it has as many workers
   * as the largest n_threads of the streams so far, less one), so many
   * streams do not bring many sets of threads. 0 = a sane default for
   * this machine (one per core, at most 8). Results do not depend on
   * it. */
  int n_threads;
  /* Beam search width at temperature 0: 1 = greedy; 0 (the default) =
   * the engine's choice: WK_DEFAULT_BEAM_SIZE offline (as openai's and
   * whisper.cpp's command lines do: on whisperknot's own model it cut WER
   * by 3 to 7 points on the development sets), WK_DEFAULT_LIVE_BEAM_SIZE
   * with the live policy (latency_ms > 0), whose many runs must stay
   * cheap. At most WK_MAX_BEAM_SIZE. */
  int beam_size;
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
  /* Text the decoder reads before the audio, as openai's initial_prompt:
   * names, spellings, a style ("Nakamura spoke in Kyoto."). NULL or "":
   * none. It must be valid UTF-8 (else wk_stream_new fails with
   * WK_ERR_ARG) and is read by wk_stream_new only, which tokenizes " " +
   * the text stripped of surrounding white space, as openai does, and
   * keeps its last n_text_ctx / 2 - 1 tokens (223 for Whisper's models):
   * a longer prompt is cut, not refused. The decoder reads it after
   * <|startofprev|>, before <|startoftranscript|>. Offline it is the
   * earliest earlier text, as in openai's transcribe(): the text of later
   * windows follows it and pushes it out once max_text_ctx tokens have
   * come after it, and a window decoded above temperature 0.5 clears it
   * with the rest; with max_text_ctx = 0 (no earlier text) every window
   * reads it. Live, it comes first in every run, followed by as much
   * recent committed text as fits. A model never trained with a prompt
   * (wk_model_info.max_prompt_tokens = 0, as whisperknot's own model)
   * ignores it, as whisper.cpp ignores one with -mc 0: given one, that
   * model wrote no text at all on most sentences. */
  const char *initial_prompt;
  uint64_t seed;                /* for sampling at temperature > 0 */
  /* Live policy (see issue "Live captioning"): target delay from a word's
   * end to its committed text, in milliseconds. 0 = offline behaviour:
   * transcribe in 30 s windows, seeking to the last timestamp. */
  int latency_ms;

  /* ---- the live policy (used only when latency_ms > 0) ----------------
   *
   * Audio accumulates in a rolling window (at most 30 s) that starts at
   * the last committed word. A voice activity detector (Silero VAD) runs
   * on every 32 ms of audio; while it hears no speech nothing else runs
   * and the window is trimmed. During speech the model re-runs on the
   * window every step (latency_ms / 3, from 200 ms to 4 s of audio; for
   * audio fed with capture times (wk_stream_feed_at), longer when a run
   * takes longer than that, so the stream keeps up with real time without
   * dropping audio, and sooner when a word's deadline needs it, see
   * wk_commit_policy; audio fed without times gives the same text however
   * fast the machine is). A word is committed once two consecutive runs
   * agree on it (the longest common prefix, in words, of the last two
   * hypotheses: LocalAgreement-2), or when its deadline comes
   * (WK_COMMIT_DEADLINE), or when the utterance ends (the detector hears
   * vad_min_silence_ms of silence), or on flush/finish. Committed words come out of wk_stream_take() one
   * segment per word (or per phrase or utterance: group), each utterance
   * followed by an utterance_end marker;
   * the rest of the latest hypothesis is the partial result
   * (wk_stream_partial()). Committed text becomes the decoder prompt. */
  bool use_vad;                 /* default true; false: all audio is
                                 * speech, utterances end only at
                                 * flush/finish */
  float vad_threshold;          /* speech probability that starts speech
                                 * (default 0.5) */
  int vad_min_silence_ms;       /* silence that ends an utterance
                                 * (default 300) */
  const char *vad_model;        /* Silero VAD knot; NULL = the shipped one
                                 * (wk_default_vad_model_path()). Read
                                 * by wk_stream_new() only. */
  /* Encoder positions per live run (offline windows always use the full
   * context): WK_AUDIO_CTX_AUTO (0, the default) = what the model was
   * trained for (its knot's whisperknot.live_audio_ctx: short for
   * whisperknot's own model, full for OpenAI's, which saw 30 s windows
   * only and lose accuracy and hallucinate on shortened ones),
   * WK_AUDIO_CTX_FULL = the model's full 30 s context (the window padded,
   * as Whisper was trained; an encoder run costs as much as for 30 s),
   * WK_AUDIO_CTX_SHORT = only the window's audio (its frames plus 0.64 s,
   * rounded up to a multiple of 64 positions, as whisper.cpp's audio_ctx
   * is used; much cheaper for short windows), > 0 = short, but at least
   * this many positions. */
  int audio_ctx;
  /* When a word is committed (see wk_commit_policy): WK_COMMIT_DEADLINE
   * (the default) keeps latency_ms as a bound, WK_COMMIT_AGREEMENT waits
   * for two runs to agree whatever the delay. */
  wk_commit_policy commit;
  /* What one committed segment holds (see wk_group_by); offline segments
   * are the model's own whatever this says. */
  wk_group_by group;
  /* wk_stream_take_cues' text for a terminal or a file rather than for
   * caption elements: each offline segment, phrase and utterance ends
   * with a newline; live words (WK_GROUP_WORD) are separated by a space
   * where the model put one, and each utterance's line ends with a
   * newline cue lasting 0 at the end of its last word. Default false:
   * a cue holds the text alone, as a caption cue. */
  bool text_lines;
  /* Token and word times (wk_segment.start/.end of live words, wk_token
   * times offline) from the decoder's cross-attention: once a window's
   * text is decoded, the decoder reads it again and dynamic time warping
   * over the attention of the model's alignment heads (its knot's
   * whisperknot.alignment_heads, knots/FORMAT.md) gives each token its
   * audio, as openai's word_timestamps does. Default true; false, or a
   * model without heads, shares the span between two timestamps out by
   * the tokens' byte lengths. Costs one more decoder pass per window
   * (per run, live) and about 6.5 MB of state for a 30 s context. Every
   * word gets at least 20 ms, inside its segment. */
  bool word_times;
} wk_stream_params;

WK_API wk_stream_params wk_stream_default_params (void);

/* A stream holds every buffer it will need; feeding never allocates. The
 * stream keeps its own reference to the model. */
WK_API wk_status wk_stream_new (wk_model * model,
    const wk_stream_params * params, wk_stream ** out, char *err,
    size_t err_size);
WK_API void wk_stream_free (wk_stream * stream);

/* Appends mono 16 kHz samples in [-1, 1]. Samples outside that range
 * are clipped to it; NaN, infinite ones and values beyond +-2^32 (the
 * scale of any integer format: garbage, not audio) are fed as silence
 * (0), so a burst of bad input costs only its own stretch of audio.
 * Both are counted in wk_stream_stats. May run the recognizer on
 * complete windows before returning. */
WK_API wk_status wk_stream_feed (wk_stream * stream, const float *pcm,
    size_t n_samples);
WK_API wk_status wk_stream_feed_s16 (wk_stream * stream, const int16_t * pcm,
    size_t n_samples);

/* The engine's clock: monotonic seconds (CLOCK_MONOTONIC, the clock of
 * g_get_monotonic_time () / 1e6), for wk_stream_feed_at. */
WK_API double wk_clock_seconds (void);

/* As wk_stream_feed, and tells the live policy when the audio was due:
 * due_s is the wk_clock_seconds () time of the first sample's capture (a
 * live source's timestamp; in GStreamer the clock time of the buffer's
 * running time), the next samples following at 16 kHz. A word's deadline
 * counts from the due time of its first sample, so audio that reaches the
 * stream late (queued behind a model run) keeps its true deadline.
 * wk_stream_feed gives no time: its samples have no deadline, as with
 * due_s = INFINITY (nothing waits on a clock for their text: a file, a
 * test); the live policy then commits by agreement alone, and the text
 * does not depend on how long runs take. Offline streams ignore due_s.
 * With WK_COMMIT_DEADLINE a call runs the model at most once, at the end
 * of its samples (unless they are longer than 4 s): a caller that queued
 * audio during a run feeds it at once, the run hears all of it, and the
 * caller takes and pushes the run's words before the next call. */
WK_API wk_status wk_stream_feed_at (wk_stream * stream, const float *pcm,
    size_t n_samples, double due_s);

/* Transcribes everything buffered now (for example at the end of an
 * utterance) without ending the stream. */
WK_API wk_status wk_stream_flush (wk_stream * stream);

/* End of audio: transcribes the rest. Feeding afterwards is WK_ERR_STATE
 * until wk_stream_reset(). */
WK_API wk_status wk_stream_finish (wk_stream * stream);

/* Forgets all audio, text and results; time starts again at 0. Ends a
 * cancel. */
WK_API void wk_stream_reset (wk_stream * stream);

/* Stops the stream's work: a model run in progress in wk_stream_feed,
 * _flush or _finish on another thread stops at its next layer boundary
 * (within a fraction of a second, or while it waits for another stream's
 * encoder on the same model) and that call returns WK_ERR_STATE; so do
 * every later feed, flush and finish, at once, until wk_stream_reset().
 * Segments completed before stay available to wk_stream_take(). The one
 * stream call that may be made from any thread while another uses the
 * stream (a pipeline's state change or flush, say); not during or after
 * wk_stream_free(). */
WK_API void wk_stream_cancel (wk_stream * stream);

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
  const char *text;             /* valid UTF-8, NUL-terminated, trimmed
                                 * (see space_before) */
  const wk_token *tokens;       /* text tokens only */
  int n_tokens;
  float avg_logprob;
  float no_speech_prob;
  float p;                      /* confidence: the mean probability of
                                 * its text tokens (0 for a marker) */
  /* Live policy (latency_ms > 0) only; offline segments have
   * utterance_end false and stability 1. */
  bool utterance_end;           /* a marker, not text: the utterance whose
                                 * words came before ended at .start
                                 * (= .end); .text is "", no tokens */
  float stability;              /* 1 for committed words; for partial
                                 * words an estimate in [0, 1) of how
                                 * likely the word is to be committed as
                                 * it is */
  /* .text has no leading or trailing white space; this says whether the
   * model put a space before it (Whisper's word separator: languages
   * written without spaces have none), so that joining segments with a
   * space exactly where this is true gives the model's text. */
  bool space_before;
} wk_segment;

/* Returns the segments completed since the previous take, in time order,
 * all of them however long ago the last take was (a whole file fed, then
 * taken once: the stream keeps what is not taken, and its memory grows
 * with it past the first few windows' worth). The array and its strings
 * belong to the stream and stay valid until the next call of any
 * wk_stream_* function on this stream. */
WK_API size_t wk_stream_take (wk_stream * stream, const wk_segment ** segs);

/* Where the text is final: no segment that wk_stream_take returns from
 * now on (committed words, utterance_end markers, offline segments)
 * starts before this sample (counted from the last reset). It only grows,
 * never passes the audio fed, and reaches its end after wk_stream_finish.
 * What lies before it can be shown as silence or as final captions (a
 * GStreamer element sends GAP events up to it). Offline it is the start
 * of the next 30 s window; live it follows the committed words and the
 * first partial word, or the audio the voice detector has called
 * non-speech, so it trails the audio by about a step plus half a
 * second. */
WK_API int64_t wk_stream_settled (const wk_stream * stream);

/* Text ready to show: wk_stream_take's segments shaped into cues that
 * cover the stream's time in order. */
typedef enum
{
  WK_CUE_TEXT,                  /* .before + .text + .after shown from
                                 * .start to .end */
  WK_CUE_GAP,                   /* no text from .start to .end, nor any
                                 * to come */
  WK_CUE_UTTERANCE_END          /* live: the utterance ended at .start
                                 * (= .end); text before it is complete */
} wk_cue_kind;

typedef struct
{
  wk_cue_kind kind;
  int64_t start, end;           /* samples, as wk_segment's */
  /* WK_CUE_TEXT: the segment's text and its separators
   * (wk_stream_params.text_lines): .before "" or " ", .after "" or
   * "\n"; all "" but .after for the newline that ends a line of live
   * words; "" for the other kinds */
  const char *before, *text, *after;
  double p;                     /* WK_CUE_TEXT: the segment's p, a line
                                 * end's its words' mean */
  const wk_segment *segment;    /* WK_CUE_TEXT: the segment shown; NULL
                                 * for a line end and the other kinds */
} wk_cue;

/* Takes the segments completed since the previous take (as
 * wk_stream_take, which it replaces for a caller that shows text) and
 * returns them as cues, ready to show: in time order, never overlapping
 * nor going back, each text within the audio fed (but a text cue lasts
 * at least WK_TIME_STEP_SAMPLES, past the audio if need be; only a line
 * end lasts 0), a gap before text
 * that starts later than the cues so far, a gap up to
 * wk_stream_settled() once it is at least half a second ahead, and
 * after wk_stream_finish everything up to the end of the audio closed.
 * Cues start at 0 after wk_stream_reset (or where
 * wk_stream_cues_from says). The array and its strings stay valid until
 * the next call of any wk_stream_* function on this stream. */
WK_API size_t wk_stream_take_cues (wk_stream * stream, const wk_cue ** cues);

/* Cues start at sample from rather than 0: for a caller whose output
 * already covers time up to there (a restart at an earlier time), so
 * that its text never goes back. Call after wk_stream_reset. */
WK_API void wk_stream_cues_from (wk_stream * stream, int64_t from);

/* Live policy: the partial result, i.e. the words of the latest
 * hypothesis that are not committed yet, one segment per word (start,
 * end, text, tokens, stability), in time order. Taking it does not
 * consume it: it is replaced by every run of the model and is empty
 * after an utterance ends. The array stays valid until the next call of
 * any wk_stream_* function on this stream. Offline streams return 0.
 * *serial (if not NULL) receives a number that changes whenever the
 * partial result changes. */
WK_API size_t wk_stream_partial (wk_stream * stream, const wk_segment ** segs,
    uint64_t * serial);

/* Live policy: the partial result as one text cue: its words joined as
 * the model spaced them (.text; "" when there are none), from the first
 * word's start (the end of the audio fed when there is none) to the
 * last's end, .p the least stability of its words (1 for none). Returns
 * the number of words; *serial and the text's lifetime as
 * wk_stream_partial's. Offline streams give an empty cue. */
WK_API size_t wk_stream_partial_cue (wk_stream * stream, wk_cue * cue,
    uint64_t * serial);

/* Whether the stream ignores the initial_prompt it was given (not NULL
 * nor ""): the model was never trained with a prompt
 * (wk_model_info.max_prompt_tokens = 0). A caller warns its user. */
WK_API bool wk_stream_prompt_ignored (const wk_stream * stream);

/* The detected (or configured) language code of the stream, or NULL. */
WK_API const char *wk_stream_language (const wk_stream * stream);

typedef struct
{
  const char *code;             /* ISO 639-1 ("en"), static */
  float p;                      /* probability */
} wk_language_prob;

/* The stream's language with its probability: writes the max most likely
 * languages of the detection that chose the stream's language (the
 * decoder's distribution over the language tokens on the first window,
 * as Whisper's detect_language gives it), most likely first, and returns
 * how many it wrote. A language given in wk_stream_params, or English for
 * an English-only model, is one entry with p = 1. 0 while the language is
 * not known yet (before the first window, or after wk_stream_reset). */
WK_API size_t wk_stream_language_probs (const wk_stream * stream,
    wk_language_prob * out, size_t max);

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
  /* live policy */
  int64_t n_runs;               /* model runs (one encoder window each) */
  double vad_seconds;           /* wall time in the voice detector */
  double speech_seconds;        /* audio the detector called speech */
  double step_seconds;          /* current step (audio between runs) */
  double last_run_seconds;      /* wall time of the last run */
  double max_run_seconds;       /* longest run */
  /* Delay from the arrival (wk_stream_feed) of a committed word's last
   * sample to its commit, wall time: the last and the largest seen. */
  double last_delay_seconds;
  double max_delay_seconds;
  int64_t n_committed;          /* words committed */
  int64_t n_utterances;         /* utterance ends */
  /* input fixed by feeding (both policies) */
  int64_t n_clipped;            /* samples outside [-1, 1], clipped */
  int64_t n_zeroed;             /* NaN, infinite or beyond +-2^32 (not
                                 * audio): fed as 0 */
  /* deadlines (live policy): words committed at their deadline before two
   * runs agreed (WK_COMMIT_DEADLINE), words committed after their
   * deadline (due time of the first sample + latency_ms; either policy),
   * and by how much the latest was late */
  int64_t n_deadline_commits;
  int64_t n_late;
  double max_late_seconds;
  /* the expected wall time of the next run (the largest of the last
   * eight), which the deadline policy plans with */
  double run_estimate_seconds;
  /* word times (wk_stream_params.word_times): wall time of the
   * alignment passes (decoder pass, attention, DTW), not counted in
   * decoder_seconds or n_tokens */
  double align_seconds;
  int64_t n_aligned;            /* windows (live: runs) aligned */
  /* decoder steps that ran in one pass over the weights with steps of
   * other streams on the same model (in this process) that came at the
   * same time; their results are those they would have alone */
  int64_t n_shared_steps;
  /* live runs whose expected time was above a third of latency_ms (a
   * loaded machine, WK_COMMIT_DEADLINE): they decode greedily and take
   * the encoder's integer products where the kernels have them */
  int64_t n_slow_runs;
  /* words withheld at their deadline (WK_COMMIT_DEADLINE): the model
   * was too unsure of its guess to write it, and no later run writes it
   * (it would be late) */
  int64_t n_withheld;
} wk_stream_stats;

WK_API void wk_stream_get_stats (const wk_stream * stream,
    wk_stream_stats * stats);

/* One number of wk_stream_stats under a stable name (lowercase words
 * joined by '-', such as "encoder-seconds"), for a caller that lists
 * them all (a GStreamer structure, JSON, a log line) without naming each
 * field. */
typedef struct
{
  const char *name;             /* static */
  bool is_count;                /* a count or bytes (value is an integer);
                                 * else seconds or a ratio */
  double value;
} wk_stat;

/* The numbers of stats, one wk_stat each, in a fixed order, with
 * "real-time-factor" (the time in mel, encoder, decoder and voice
 * detector over the audio's time, 0 without audio) among them. Writes at
 * most max of them to out (which may be NULL with max 0) and returns how
 * many there are. */
WK_API size_t wk_stream_stats_list (const wk_stream_stats * stats,
    wk_stat * out, size_t max);

/* ---- feed queues ------------------------------------------------------ */

/* A bounded queue of audio in front of a stream, for a caller whose audio
 * arrives on one thread (a GStreamer streaming thread) while the stream
 * runs on another (a worker), so that the first only copies samples and
 * waits while the queue is full. The caller's marks (opaque pointers:
 * events, restarts) keep their place between the samples. One writer and
 * one worker at a time; wk_queue_stop and _start from any thread.
 *
 *   writer:  wk_queue_write (q, bytes, WK_SAMPLE_S16LE, n);
 *            wk_queue_write_missing (q, lost);   // packets that never came
 *            wk_queue_mark (q, event);
 *   worker:  for (;;) {
 *              st = wk_queue_next (q, stream, max, due, user, &mark, &n);
 *              if (n == 0 && st == WK_ERR_STATE) break;   // stopped
 *              mark ? handle (mark) : take (stream);
 *            }
 *
 * The samples a worker feeds are those written, in order, however they
 * were cut into writes: they reach the stream in feeds of at most `max`
 * samples, cut at marks and at the ring's end. */
typedef struct wk_queue wk_queue;

typedef enum
{
  WK_SAMPLE_F32LE,              /* 32-bit float, little-endian */
  WK_SAMPLE_S16LE               /* 16-bit signed, little-endian */
} wk_sample_format;

/* A queue of at most capacity samples (allocated here, once); free_mark
 * (or NULL) frees each mark the queue drops (wk_queue_clear without a
 * taker, wk_queue_free). A new queue is stopped. */
WK_API wk_status wk_queue_new (size_t capacity,
    void (*free_mark) (void *mark), wk_queue ** out);
WK_API void wk_queue_free (wk_queue * queue);

/* Appends n samples of fmt read from data (bytes in any alignment; NULL:
 * n samples of silence), waiting while the queue is full. WK_ERR_STATE,
 * at once or when it comes during a wait, while the queue is stopped (the
 * samples not appended yet are dropped). */
WK_API wk_status wk_queue_write (wk_queue * queue, const void *data,
    wk_sample_format fmt, size_t n);

/* Announces n samples that never arrived (RTP packets lost, a short GAP)
 * at this point of the audio. The queue fills them with sound that
 * continues the audio on both sides of the hole (each side repeated at
 * its pitch period, cross-faded, fading to silence over 60 ms in a long
 * hole): the first 30 ms written after the hole wait, unfed, until they
 * are there to conceal it towards; a new hole, a mark or a write of
 * silence ends it with what came. The recognizer hears a lost 20 ms
 * packet far less than as silence (knots/MODEL.md). WK_ERR_STATE while
 * the queue is stopped. */
WK_API wk_status wk_queue_write_missing (wk_queue * queue, size_t n);

/* Ends a hole announced with wk_queue_write_missing now: its samples and
 * those held back after it are appended (waiting for room as a write
 * does; WK_ERR_STATE, and they are dropped, while the queue is stopped).
 * wk_queue_mark does this itself; a writer that places marks under a
 * lock of its own, one the worker may need, calls this first so that it
 * never waits for the worker while holding that lock. */
WK_API wk_status wk_queue_end_hole (wk_queue * queue);

/* Places a mark after the samples appended so far, stopped or not (a
 * caller that drops what comes while it flushes checks that itself);
 * WK_ERR_NOMEM: the queue did not take it. Samples announced missing are
 * appended first (waiting for room as a write does; dropped while the
 * queue is stopped). */
WK_API wk_status wk_queue_mark (wk_queue * queue, void *mark);

/* Stops the queue: wakes a waiting writer and worker, and their calls
 * return WK_ERR_STATE until wk_queue_start. (It does not stop a feed in
 * progress: wk_stream_cancel does.) */
WK_API void wk_queue_stop (wk_queue * queue);
WK_API void wk_queue_start (wk_queue * queue);

/* Drops the samples and marks queued; take (if not NULL) receives each
 * mark in order and owns it, else free_mark frees it. Only while no
 * wk_queue_next runs (a stopped worker). */
WK_API void wk_queue_clear (wk_queue * queue,
    void (*take) (void *mark, void *user), void *user);

/* The worker's call: waits until the queue holds work or is stopped
 * (then WK_ERR_STATE, *n_fed 0). When a mark is next it returns it in
 * *mark (the caller owns it) and WK_OK; otherwise it feeds the next
 * samples, at most max and none past a mark, to stream with
 * wk_stream_feed_at (due (user) when due is not NULL, the due time of
 * their first sample; else wk_stream_feed), sets *n_fed to their number
 * and returns the feed's status. The writer keeps writing meanwhile. */
WK_API wk_status wk_queue_next (wk_queue * queue, wk_stream * stream,
    size_t max, double (*due) (void *user), void *user, void **mark,
    size_t *n_fed);


/* ---- voice activity detection ---------------------------------------- */

/* Silero VAD (v5/v6, 16 kHz) run by the engine: a small network that gives
 * the probability of speech for every 512-sample (32 ms) chunk, and a
 * segmenter with hysteresis on top of it. Weights come from a VAD knot
 * (knots/FORMAT.md; the file shipped with whisperknot is
 * wk_default_vad_model_path()); whisperknot-convert makes one from
 * Silero's ggml file (ggml-silero-v6.2.0.bin).
 *
 * Streaming use (sample positions count from the first sample fed):
 *
 *   wk_vad_model *vm;
 *   wk_vad_model_load (wk_default_vad_model_path (), &vm, err, sizeof err);
 *   wk_vad_params vp = wk_vad_default_params ();
 *   wk_vad *vad;
 *   wk_vad_new (vm, &vp, &vad, err, sizeof err);
 *   while (n > 0) {                       // for every buffer that arrives
 *     size_t used = wk_vad_feed (vad, pcm, n);
 *     pcm += used;
 *     n -= used;
 *     wk_vad_event ev;
 *     while (wk_vad_pop_event (vad, &ev))
 *       ...;                               // ev.type at sample ev.sample
 *   }
 *   wk_vad_finish (vad);                   // end of audio: pop the rest
 *   wk_vad_free (vad);
 *   wk_vad_model_unref (vm);
 *
 * Thread safety: a wk_vad_model is immutable and may be shared; a wk_vad
 * must be used by one thread at a time. */

typedef struct wk_vad_model wk_vad_model;
typedef struct wk_vad wk_vad;

/* Reads a Silero VAD knot (general.architecture "silero-vad", see
 * knots/FORMAT.md). A file already loaded in this process is shared (same
 * device, inode, size and modification time: the rule wk_model_load
 * follows). Silero's ggml file is refused (WK_ERR_FORMAT) with a message
 * that says to convert it with whisperknot-convert. */
WK_API wk_status wk_vad_model_load (const char *path, wk_vad_model ** out,
    char *err, size_t err_size);
WK_API wk_vad_model *wk_vad_model_ref (wk_vad_model * model);
WK_API void wk_vad_model_unref (wk_vad_model * model);

/* The path of the VAD model shipped with whisperknot: $WHISPERKNOT_VAD_MODEL
 * if set, else the installed file, else the copy in the source tree. Never
 * NULL. */
WK_API const char *wk_default_vad_model_path (void);

/* Samples per network step (512 at 16 kHz = 32 ms). */
#define WK_VAD_CHUNK 512

/* Segmenter parameters; the defaults are whisper.cpp's / Silero's. */
typedef struct
{
  float threshold;              /* speech starts at p >= this (0.5) */
  float neg_threshold;          /* silence is p < this; < 0: threshold -
                                 * 0.15, at least 0.01 (default -1) */
  int min_speech_duration_ms;   /* shorter bursts are dropped (250) */
  int min_silence_duration_ms;  /* silence that ends speech (100) */
  int merge_gap_ms;             /* a segment starting less than this
                                 * after the previous one's end joins it
                                 * (200, whisper.cpp's merge) */
  int speech_pad_ms;            /* widen segments by this much (30) */
  float max_speech_duration_s;  /* split longer speech, preferably at a
                                 * pause (never merged back); <= 0: no
                                 * limit (default 0) */
} wk_vad_params;

WK_API wk_vad_params wk_vad_default_params (void);

typedef enum
{
  WK_VAD_EVENT_SPEECH_START,    /* speech begins at .sample (padded) */
  WK_VAD_EVENT_SPEECH_END       /* speech ended at .sample (padded) */
} wk_vad_event_type;

typedef struct
{
  wk_vad_event_type type;
  int64_t sample;               /* position in samples, already fed */
} wk_vad_event;

/* A detector: the network state (LSTM, context) and the segmenter. Holds
 * every buffer it needs: feeding never allocates. Keeps a reference to
 * the model. */
WK_API wk_status wk_vad_new (wk_vad_model * model,
    const wk_vad_params * params, wk_vad ** out, char *err, size_t err_size);
WK_API void wk_vad_free (wk_vad * vad);

/* Forgets all state; positions start again at 0. */
WK_API void wk_vad_reset (wk_vad * vad);

/* Consumes mono 16 kHz samples in [-1, 1] and runs the network on every
 * completed chunk. Returns how many samples it took: it stops right after
 * a chunk that produced events, so call wk_vad_pop_event() until it
 * returns false and feed the rest. Events are reported when they are
 * certain: START about min_speech_duration_ms after speech begins, END
 * about max (min_silence_duration_ms, merge_gap_ms) after it ends; the
 * sample positions they carry lie in the past. Feeding after
 * wk_vad_finish() takes nothing until wk_vad_reset(). */
WK_API size_t wk_vad_feed (wk_vad * vad, const float *pcm, size_t n);

/* End of audio: runs the last partial chunk (zero-padded) and closes an
 * open speech segment at the end of the audio. */
WK_API void wk_vad_finish (wk_vad * vad);

/* Takes the oldest pending event; false when there is none. */
WK_API bool wk_vad_pop_event (wk_vad * vad, wk_vad_event * ev);

/* True between a reported START and its END. */
WK_API bool wk_vad_in_speech (const wk_vad * vad);

/* Speech probability of the last chunk run (0 before any). */
WK_API float wk_vad_last_prob (const wk_vad * vad);

/* Samples fed so far (since creation or the last reset). */
WK_API int64_t wk_vad_position (const wk_vad * vad);

typedef struct
{
  int64_t start, end;           /* samples, padded */
} wk_vad_segment;

/* Offline helper: resets vad, runs the whole buffer through it (exactly as
 * feeding it in pieces would) and finishes it (wk_vad_reset() before
 * feeding it again); returns the speech segments in a
 * malloc'd array (NULL when there are none) to release with free().
 * probs, when not NULL, receives the probability of each chunk:
 * ceil (n / WK_VAD_CHUNK) floats. */
WK_API wk_status wk_vad_detect (wk_vad * vad, const float *pcm, size_t n,
    float *probs, wk_vad_segment ** segs, size_t *n_segs);

typedef struct
{
  int64_t n_chunks;             /* network runs */
  double seconds;               /* wall time spent in the network */
} wk_vad_stats;

WK_API void wk_vad_get_stats (const wk_vad * vad, wk_vad_stats * stats);

#ifdef __cplusplus
/* *INDENT-OFF* */
}
/* *INDENT-ON* */
#endif
#endif /* WHISPERKNOT_H */
