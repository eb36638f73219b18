/* The live streaming policy (internal): wk_stream's behaviour when
 * wk_stream_params.latency_ms > 0. stream.c forwards its calls here; the
 * policy itself is described in live.c and in whisperknot.h.
 *
 * Not installed. The live state shares the stream's wk_ctx (encoder,
 * decoder and decoding buffers) and owns everything else it needs (audio
 * window, voice detector, hypotheses, results), all allocated by
 * wk_live_new: feeding never allocates.
 */
#ifndef WK_LIVE_H
#define WK_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct wk_live wk_live;

/* ctx: the stream's context (not owned). p: the stream's parameters
 * (copied; p->vad_model is only read here). lang: the stream's language
 * in use (-1 = detect on the first run; written by the policy). */
wk_status wk_live_new (wk_ctx * ctx, const wk_stream_params * p, int *lang,
    wk_live ** out, char *err, size_t err_size);
void wk_live_free (wk_live * live);

/* pcm may hold any values: see wk_live_copy_samples. due_s: the
 * wk_now_s () time the first sample was due (wk_stream_feed_at). */
wk_status wk_live_feed (wk_live * live, const float *pcm, size_t n,
    double due_s);
/* Commits everything heard so far (ends the current utterance). */
wk_status wk_live_flush (wk_live * live);
/* End of audio: closes the detector's last segment and commits the rest. */
wk_status wk_live_finish (wk_live * live);
void wk_live_reset (wk_live * live);

size_t wk_live_take (wk_live * live, const wk_segment ** segs);
/* The most segments one take returns. */
size_t wk_live_take_max (const wk_live * live);
/* The bytes of the partial result's words' text, NULs included, at most. */
size_t wk_live_partial_bytes_max (const wk_live * live);
int64_t wk_live_settled (const wk_live * live);
/* Samples fed since the last reset (a failed feed counts what it took). */
int64_t wk_live_fed (const wk_live * live);
size_t wk_live_partial (wk_live * live, const wk_segment ** segs,
    uint64_t * serial);

/* Fills the live fields of stats and adds the policy's counters (runs as
 * windows, mel time, memory) to the stream's. */
void wk_live_get_stats (const wk_live * live, wk_stream_stats * stats);


/* calloc (n ? n : 1, elem), adding n * elem to *own_bytes; sets *ok to
 * false when it fails and, once *ok is false, returns NULL without
 * trying (so a constructor checks ok once after all its allocations). */
void *wk_live_calloc (uint64_t * own_bytes, size_t n, size_t elem, bool *ok);
/* The same without zeroing (wk_scratch_alloc): for buffers the code
 * writes before it reads them. */
void *wk_live_scratch (uint64_t * own_bytes, size_t n, size_t elem, bool *ok);

/* The caller's initial prompt, t[0..n-1] (the stream's tokens: they must
 * outlive the policy), read before the committed text in every run. */
void wk_live_set_prompt (wk_live * live, const int32_t * t, int n);

/* Appends t[0..n-1] to the decoder prompt prompt[0..*n_prompt-1] (room
 * for prompt_cap tokens), keeping only the newest min (prompt_cap,
 * max_text_ctx) tokens (none when that is <= 0). Used by both the offline
 * stream and the live policy. */
void wk_live_prompt_push (int32_t * prompt, int *n_prompt, int prompt_cap,
    int max_text_ctx, const int32_t * t, int n);

/* Copies src[0..n-1] to dst as the recognizer takes samples: values
 * outside [-1, 1] are clipped to it, NaN, infinities and values beyond
 * +-2^32 become 0 (silence); each is counted (*n_clipped, *n_zeroed).
 * Used by both the offline stream and the live policy. */
void wk_live_copy_samples (float *dst, const float *src, size_t n,
    int64_t * n_clipped, int64_t * n_zeroed);

/* Drops the samples before absolute position new_base from the audio
 * buffer audio[0..*len-1], whose first sample is at *base; nothing when
 * new_base <= *base. Used by both the offline stream and the live policy. */
void wk_live_audio_drop (float *audio, size_t *len, int64_t * base,
    int64_t new_base);

/* ---- for tests ------------------------------------------------------- */

/* The number of leading words two word lists share (LocalAgreement's
 * longest common prefix): words compare equal when their bytes are
 * equal. a and b are arrays of NUL-terminated words. */
int wk_live_common_prefix (const char *const *a, int n_a,
    const char *const *b, int n_b);

/* Encoder positions a live run uses for n_frames mel frames of audio
 * (see wk_stream_params.audio_ctx; the caller has checked it); 0 = the
 * model's full context. */
int wk_live_audio_ctx (const wk_model * model, int audio_ctx_param,
    int n_frames);

/* Test hooks: only where the tests and wk-live-latency compile live.c
 * themselves (WK_TEST_HOOKS), never in the library or the plugin. */
#ifdef WK_TEST_HOOKS
/* A scripted stand-in for the model, for testing the policy itself:
 * when set, a run calls fn with the window [start, end) (samples) instead
 * of the encoder and decoder; fn writes the sampled tokens (text and
 * timestamp tokens relative to start, as the decoder would, without
 * <|endoftext|>) and returns how many (at most max). NULL restores the
 * model. */
typedef int (*wk_live_script_fn) (void *user, int64_t start, int64_t end,
    int32_t * tokens, int max);
void wk_live_set_script (wk_live * live, wk_live_script_fn fn, void *user);
/* The probability of every scripted token (default 0.9). */
void wk_live_set_script_prob (wk_live * live, float p);

/* A stand-in for the monotonic clock, for testing the deadlines: when
 * set, the policy reads the time (seconds) from fn instead of
 * wk_now_s () (wk-time.h). NULL restores the clock. */
typedef double (*wk_live_clock_fn) (void *user);
void wk_live_set_clock (wk_live * live, wk_live_clock_fn fn, void *user);

/* What one model run did, for a cost model of run times (wk-live-latency's
 * virtual time): the hook is called at the end of every run, before the
 * policy reads the clock for the run's duration, so a hook that advances
 * a virtual clock sets what the run took. Scripted runs report zeros. */
typedef struct
{
  int positions;                /* encoder positions (audio context) */
  int n_tokens;                 /* tokens sampled (the best sequence) */
  int n_given;                  /* prompt and prefix tokens decoded first */
  int beam_size;                /* of this run (1 when it ran slow) */
  double t0;                    /* the clock when the run was asked for */
} wk_live_run_info;
typedef void (*wk_live_run_fn) (void *user, const wk_live_run_info * info);
void wk_live_set_run_hook (wk_live * live, wk_live_run_fn fn, void *user);
#endif /* WK_TEST_HOOKS */

/* The live policy of a stream with a latency (NULL without one): for
 * the test hooks above, in programs built with them. */
wk_live *wk_stream_live (wk_stream * s);

#endif /* WK_LIVE_H */
