/* The WebAssembly module's own exports: what a JavaScript caller cannot do
 * through whisperknot.h alone without knowing C struct layouts. Every
 * struct the module hands out is described by wkw_layout (offsets from
 * offsetof), so web/whisperknot.mjs reads them without guessing; stream
 * parameters come in as plain arguments. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels.h"
#include "wav.h"
#include "whisperknot.h"

#define WKW_EXPORT __attribute__ ((visibility ("default")))

WKW_EXPORT void wkw_model_info (const wk_model * model, double *out);
WKW_EXPORT wk_status wkw_stream_new (wk_model * model, const char *language,
    int translate, int beam_size, int latency_ms, int use_vad,
    float vad_threshold, int vad_min_silence_ms, int audio_ctx, int commit,
    float temperature_inc, int no_timestamps, int suppress_blank,
    int word_times, int text_lines, const char *vad_model, wk_stream ** out,
    char *err, int err_size);
WKW_EXPORT void wkw_stream_stats (const wk_stream * stream, double *out);
WKW_EXPORT const int32_t *wkw_layout (void);
WKW_EXPORT const char *wkw_kernels_name (void);
WKW_EXPORT void wkw_set_threads (int n);
WKW_EXPORT wk_status wkw_wav_parse (const void *data, size_t size,
    int32_t * out, char *err, int err_size);

/* wasi-libc's emulated mmap has no madvise; the engine's
 * MADV_WILLNEED is a hint, and a "mapping" here is memory already read. */
int
madvise (void *addr, size_t len, int advice)
{
  (void) addr;
  (void) len;
  (void) advice;
  return 0;
}

/* out[12]: n_vocab, n_mels, n_audio_ctx, n_audio_state, n_audio_head,
 * n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer,
 * multilingual, n_params, file_bytes */
void
wkw_model_info (const wk_model * model, double *out)
{
  wk_model_info info;

  wk_model_get_info (model, &info);
  out[0] = info.n_vocab;
  out[1] = info.n_mels;
  out[2] = info.n_audio_ctx;
  out[3] = info.n_audio_state;
  out[4] = info.n_audio_head;
  out[5] = info.n_audio_layer;
  out[6] = info.n_text_ctx;
  out[7] = info.n_text_state;
  out[8] = info.n_text_head;
  out[9] = info.n_text_layer;
  out[10] = info.multilingual;
  out[11] = (double) info.n_params;
  out[12] = (double) info.file_bytes;
}

/* Threads a new stream computes on: 1, or in the threaded module the
 * workers whisperknot.mjs started plus the caller. */
static int wkw_n_threads = 1;

WKW_EXPORT void
wkw_set_threads (int n)
{
  wkw_n_threads = n > 0 ? n : 1;
}

#ifdef __wasm_atomics__
#include <pthread.h>
#include <stdlib.h>

/* ---- threads (whisperknot-threads.wasm) ----
 *
 * whisperknot.mjs starts each worker (an instance of this module on the
 * same memory, in a Web Worker or a Node.js worker thread), which takes
 * its own stack (wkw_set_stack) and then waits in a slot of its own
 * (wkw_worker_loop). pthread_create claims an idle slot and hands it the
 * function; pthread_join waits for it to be done and frees the slot. The
 * engine's only threads are its pool's (wk_pool), at most the workers
 * started, created when the first stream needs them. */

#define WKW_MAX_WORKERS 16
enum
{ SLOT_NONE, SLOT_IDLE, SLOT_CLAIMED, SLOT_RUN, SLOT_DONE };
typedef struct
{
  int state;                    /* atomic: SLOT_* */
  void *(*fn) (void *);
  void *arg;
} wkw_slot;
static wkw_slot wkw_slots[WKW_MAX_WORKERS];

/* compat/pthread.h's flag of a worker that trapped: whisperknot-thread.mjs
 * sets it (at the address wkw_failed_flag gives) when the call into
 * wkw_worker_loop throws, and every wait of the module then traps within
 * WKW_WAIT_SLICE, the main thread's included. */
int wkw_failed;

WKW_EXPORT int *wkw_failed_flag (void);

int *
wkw_failed_flag (void)
{
  return &wkw_failed;
}

WKW_EXPORT int wkw_idle_workers (void);
WKW_EXPORT void wkw_set_stack (uintptr_t top);
WKW_EXPORT void wkw_worker_loop (int i);

int
wkw_thread_start (void *(*fn) (void *), void *arg)
{
  int i;

  for (i = 0; i < WKW_MAX_WORKERS; i++) {
    int idle = SLOT_IDLE;
    if (__atomic_compare_exchange_n (&wkw_slots[i].state, &idle,
            SLOT_CLAIMED, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      wkw_slots[i].fn = fn;
      wkw_slots[i].arg = arg;
      __atomic_store_n (&wkw_slots[i].state, SLOT_RUN, __ATOMIC_RELEASE);
      wkw_notify (&wkw_slots[i].state, -1);
      return i;
    }
  }
  return -1;
}

void
wkw_thread_join (int i)
{
  int s;

  while ((s = __atomic_load_n (&wkw_slots[i].state, __ATOMIC_ACQUIRE)) !=
      SLOT_DONE)
    wkw_wait32 (&wkw_slots[i].state, s, -1);
  __atomic_store_n (&wkw_slots[i].state, SLOT_IDLE, __ATOMIC_RELEASE);
}

/* Workers waiting for a function: whisperknot.mjs waits for all of them
 * before the first stream. */
int
wkw_idle_workers (void)
{
  int i, n = 0;

  for (i = 0; i < WKW_MAX_WORKERS; i++)
    n += __atomic_load_n (&wkw_slots[i].state, __ATOMIC_ACQUIRE) == SLOT_IDLE;
  return n;
}

/* A worker's first call: its stack pointer (a global of each instance,
 * which starts at the main thread's stack) to the top of memory of its
 * own. This function keeps no frame of its own on the stack it leaves. */
void
wkw_set_stack (uintptr_t top)
{
  __asm__ volatile ("local.get %0\n\tglobal.set __stack_pointer"::"r" (top));
}

/* A worker's life: slot i's functions, one after another, forever (the
 * host ends the worker). */
void
wkw_worker_loop (int i)
{
  wkw_slot *sl;
  int s;

  if (i < 0 || i >= WKW_MAX_WORKERS)
    return;
  sl = &wkw_slots[i];
  __atomic_store_n (&sl->state, SLOT_IDLE, __ATOMIC_RELEASE);
  for (;;) {
    while ((s = __atomic_load_n (&sl->state, __ATOMIC_ACQUIRE)) != SLOT_RUN)
      wkw_wait32 (&sl->state, s, -1);
    sl->fn (sl->arg);
    __atomic_store_n (&sl->state, SLOT_DONE, __ATOMIC_RELEASE);
    wkw_notify (&sl->state, -1);
  }
}

/* wasi-libc's allocator takes no lock (its build has no threads): every
 * allocation of the module goes through one here (web/meson.build links
 * with --wrap for each of these), so that a worker's allocation, should a
 * kernel ever make one, cannot meet the main thread's in the heap. */
static pthread_mutex_t wkw_heap_lock = PTHREAD_MUTEX_INITIALIZER;

void *__real_malloc (size_t n);
void *__real_calloc (size_t n, size_t size);
void *__real_realloc (void *p, size_t n);
void __real_free (void *p);
void *__real_aligned_alloc (size_t align, size_t n);
int __real_posix_memalign (void **p, size_t align, size_t n);
void *__wrap_malloc (size_t n);
void *__wrap_calloc (size_t n, size_t size);
void *__wrap_realloc (void *p, size_t n);
void __wrap_free (void *p);
void *__wrap_aligned_alloc (size_t align, size_t n);
int __wrap_posix_memalign (void **p, size_t align, size_t n);

void *
__wrap_malloc (size_t n)
{
  void *p;

  pthread_mutex_lock (&wkw_heap_lock);
  p = __real_malloc (n);
  pthread_mutex_unlock (&wkw_heap_lock);
  return p;
}

void *
__wrap_calloc (size_t n, size_t size)
{
  void *p;

  pthread_mutex_lock (&wkw_heap_lock);
  p = __real_calloc (n, size);
  pthread_mutex_unlock (&wkw_heap_lock);
  return p;
}

void *
__wrap_realloc (void *p, size_t n)
{
  pthread_mutex_lock (&wkw_heap_lock);
  p = __real_realloc (p, n);
  pthread_mutex_unlock (&wkw_heap_lock);
  return p;
}

void
__wrap_free (void *p)
{
  pthread_mutex_lock (&wkw_heap_lock);
  __real_free (p);
  pthread_mutex_unlock (&wkw_heap_lock);
}

void *
__wrap_aligned_alloc (size_t align, size_t n)
{
  void *p;

  pthread_mutex_lock (&wkw_heap_lock);
  p = __real_aligned_alloc (align, n);
  pthread_mutex_unlock (&wkw_heap_lock);
  return p;
}

int
__wrap_posix_memalign (void **p, size_t align, size_t n)
{
  int r;

  pthread_mutex_lock (&wkw_heap_lock);
  r = __real_posix_memalign (p, align, n);
  pthread_mutex_unlock (&wkw_heap_lock);
  return r;
}
#endif

/* wk_stream_new with wk_stream_default_params () changed by the arguments;
 * a negative number (or NaN) keeps the default (audio_ctx: below -2).
 * Threads: wkw_set_threads' (1 unless the threaded module has workers). */
wk_status
wkw_stream_new (wk_model * model, const char *language, int translate,
    int beam_size, int latency_ms, int use_vad, float vad_threshold,
    int vad_min_silence_ms, int audio_ctx, int commit, float temperature_inc,
    int no_timestamps, int suppress_blank, int word_times, int text_lines,
    const char *vad_model, wk_stream ** out, char *err, int err_size)
{
  wk_stream_params p = wk_stream_default_params ();

  p.n_threads = wkw_n_threads;
  p.language = language;
  if (translate >= 0)
    p.translate = translate != 0;
  if (beam_size >= 0)
    p.beam_size = beam_size;
  if (latency_ms >= 0)
    p.latency_ms = latency_ms;
  if (use_vad >= 0)
    p.use_vad = use_vad != 0;
  if (vad_threshold >= 0.0f)
    p.vad_threshold = vad_threshold;
  if (vad_min_silence_ms >= 0)
    p.vad_min_silence_ms = vad_min_silence_ms;
  /* -1 and -2 are meaningful here (WK_AUDIO_CTX_FULL, _SHORT) */
  if (audio_ctx >= WK_AUDIO_CTX_SHORT)
    p.audio_ctx = audio_ctx;
  if (commit >= 0)
    p.commit = (wk_commit_policy) commit;
  if (temperature_inc >= 0.0f)
    p.temperature_inc = temperature_inc;
  if (no_timestamps >= 0)
    p.no_timestamps = no_timestamps != 0;
  if (suppress_blank >= 0)
    p.suppress_blank = suppress_blank != 0;
  if (word_times >= 0)
    p.word_times = word_times != 0;
  if (text_lines >= 0)
    p.text_lines = text_lines != 0;
  p.vad_model = vad_model;
  return wk_stream_new (model, &p, out, err,
      err_size > 0 ? (size_t) err_size : 0);
}

/* out[28]: the fields of wk_stream_stats in their order in whisperknot.h */
void
wkw_stream_stats (const wk_stream * stream, double *out)
{
  wk_stream_stats s;
  int i = 0;

  wk_stream_get_stats (stream, &s);
  out[i++] = s.audio_seconds;
  out[i++] = s.mel_seconds;
  out[i++] = s.encoder_seconds;
  out[i++] = s.decoder_seconds;
  out[i++] = (double) s.n_windows;
  out[i++] = (double) s.n_tokens;
  out[i++] = (double) s.state_bytes;
  out[i++] = (double) s.n_runs;
  out[i++] = s.vad_seconds;
  out[i++] = s.speech_seconds;
  out[i++] = s.step_seconds;
  out[i++] = s.last_run_seconds;
  out[i++] = s.max_run_seconds;
  out[i++] = s.last_delay_seconds;
  out[i++] = s.max_delay_seconds;
  out[i++] = (double) s.n_committed;
  out[i++] = (double) s.n_utterances;
  out[i++] = (double) s.n_clipped;
  out[i++] = (double) s.n_zeroed;
  out[i++] = (double) s.n_deadline_commits;
  out[i++] = (double) s.n_late;
  out[i++] = s.max_late_seconds;
  out[i++] = s.run_estimate_seconds;
  out[i++] = s.align_seconds;
  out[i++] = (double) s.n_aligned;
  out[i++] = (double) s.n_shared_steps;
  out[i++] = (double) s.n_slow_runs;
  out[i++] = (double) s.n_withheld;
}

/* Sizes and offsets (bytes) of wk_segment and wk_token:
 * [0] sizeof (wk_segment), start, end, text, tokens, n_tokens,
 * avg_logprob, no_speech_prob, utterance_end, stability,
 * [10] sizeof (wk_token), id, p, start, end, text,
 * [16] wk_segment's space_before, p,
 * [18] sizeof (wk_cue), kind, start, end, before, text, after, p, segment */
static const int32_t wkw_layout_table[] = {
  sizeof (wk_segment),
  offsetof (wk_segment, start),
  offsetof (wk_segment, end),
  offsetof (wk_segment, text),
  offsetof (wk_segment, tokens),
  offsetof (wk_segment, n_tokens),
  offsetof (wk_segment, avg_logprob),
  offsetof (wk_segment, no_speech_prob),
  offsetof (wk_segment, utterance_end),
  offsetof (wk_segment, stability),
  sizeof (wk_token),
  offsetof (wk_token, id),
  offsetof (wk_token, p),
  offsetof (wk_token, start),
  offsetof (wk_token, end),
  offsetof (wk_token, text),
  offsetof (wk_segment, space_before),
  offsetof (wk_segment, p),
  sizeof (wk_cue),
  offsetof (wk_cue, kind),
  offsetof (wk_cue, start),
  offsetof (wk_cue, end),
  offsetof (wk_cue, before),
  offsetof (wk_cue, text),
  offsetof (wk_cue, after),
  offsetof (wk_cue, p),
  offsetof (wk_cue, segment),
};

const int32_t *
wkw_layout (void)
{
  return wkw_layout_table;
}

const char *
wkw_kernels_name (void)
{
  return wk_kernels_name ();
}

/* tools/wav.c's reader, so that the module's callers get the samples the
 * native tools get: out[0] the malloc'd mono samples (free() them),
 * out[1] their number, out[2] the rate, out[3] the file's channels. */
wk_status
wkw_wav_parse (const void *data, size_t size, int32_t * out, char *err,
    int err_size)
{
  wk_wav wav;
  wk_status st = wk_wav_parse (data, size, &wav, err,
      err_size > 0 ? (size_t) err_size : 0);

  if (st != WK_OK)
    return st;
  out[0] = (int32_t) (uintptr_t) wav.samples;
  out[1] = (int32_t) wav.n_samples;
  out[2] = wav.rate;
  out[3] = wav.channels;
  return WK_OK;
}
