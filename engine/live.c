/* The live streaming policy: text within about `latency_ms` of a word
 * being spoken, from a model that reads up to 30 s windows.
 *
 * Positions are absolute samples since the first sample fed (or the last
 * reset). The audio buffer holds samples [base, base + len); the window
 * the model reads is [anchor, total): it starts where the utterance
 * started (rounded to a mel hop) and grows as audio arrives, and the
 * words already committed in it (win_start is the end of the last one)
 * are given to the decoder as a forced prefix, tokens and timestamps as
 * the model wrote them, so the model hears every sentence from its start
 * and only continues it, as it was trained. (Windows that started at the
 * last committed word, mid-sentence, gave 40% WER where offline gave 8%
 * on whisperknot's own model.) An utterance longer than LIVE_ANCHOR_MAX
 * moves the anchor to the last committed word, with no prefix.
 *
 * Every buffer fed goes through the voice detector (Silero VAD, one
 * network step per 512 samples, a few tens of microseconds each). Its
 * START event opens an utterance at a position in the past (the buffer
 * keeps a pre-roll for that); while no utterance is open nothing else
 * runs, and the buffer keeps only the pre-roll, so silence and noise cost
 * the detector alone and can never produce text.
 *
 * During an utterance the model runs on the window each time `step`
 * samples have arrived since its last run (latency_ms / 3, at least
 * 200 ms, or sooner for a deadline, below: without deadlines a word is
 * committed by the second run that hears all of it,
 * so at most two steps plus a run's time after its end; when a run
 * takes longer in wall time than the step, the step grows to the run's
 * duration, at most 4 s, so a real-time stream keeps up without dropping
 * audio, and shrinks back when runs are fast). A run
 * is: log-mel of the window, the encoder on only the positions that hold
 * audio (wk_live_audio_ctx), decoding at temperature 0 (the stream's
 * beam_size) after the prefix, with earlier utterances' text as the
 * prompt and at most a few tokens per second of uncommitted audio. Its
 * tokens, with times from the timestamp tokens shared out over each
 * segment's tokens by byte length, are split into words (a word starts
 * at a token beginning with a space). LocalAgreement-2: the words the
 * previous run's hypothesis and this one share from the start are
 * committed, except those that end within LIVE_COMMIT_MARGIN of the
 * previous run's window end (a word cut off there is often misheard the
 * same way twice): they go to the results and to the prefix. The rest is
 * the partial result.
 *
 * Deadlines (WK_COMMIT_DEADLINE, the default): a caller that shows each
 * word at its start + latency_ms (a synchronised sink: PTS + latency) needs
 * it by then. Every feed says when its first sample was due (its capture
 * time, wk_stream_feed_at; a ring of those times maps any position to its
 * due time), so a word's deadline is the due time of its first sample +
 * latency_ms - WK_PUSH_MARGIN_MS, counted from the earliest a later run may
 * put its start: LIVE_START_JITTER before it, and in the open last segment
 * (whose times are shared out up to the window's end, so stretched) from a
 * brisk reading of its bytes; never before the last handed-out word's end.
 * After each run's agreed words, the words whose deadline comes before the
 * soonest next run could finish (its audio's arrival + the longest of the
 * last runs' times, with a margin) are handed out as this run heard them,
 * but do not join the forced prefix: later runs decode them again after
 * the agreed words, so a word misheard at the window's edge does not
 * steer the rest of the sentence (as a prefix it did: on the real-speech
 * live set at 1000 ms, 66% WER against agreement's 53%; now 58%); of
 * their words, those that start before the last handed-out word's end
 * are not handed out again (agreement puts them in the prefix). The next
 * run is planned to finish just before the next deadline (the first word
 * not handed out yet, or a word not heard yet, which starts after the
 * hypothesis' last word), but not later than the usual step. A deadline
 * no run can make any more (a machine too slow for the latency)
 * keeps the usual step, so the stream still keeps up with real time; the
 * word is committed late and counted (n_late). A run's timing decides
 * only when audio arrives in real time: audio fed ahead of its due times
 * (a file read fast) is committed by agreement alone. When audio will be
 * here is reckoned from its due times (captured, then one of the source's
 * pieces later), so a caller that queued audio during a run (the
 * element's worker) has its runs planned on all of it; and a feed with
 * due times runs the model at most once, at its end, so the words a run
 * commits go back to the caller before the next run starts.
 *
 * When the detector ends the utterance (vad_min_silence_ms of silence),
 * at flush and at finish, a final run (with the caller's temperature
 * fallback) commits its whole hypothesis, except words that start well
 * inside the trailing silence, and an utterance_end marker follows the
 * utterance's words. A window that reaches 24 s past the last committed
 * word without agreement commits all but its last word, so the window
 * stays under 30 s.
 *
 * Hallucinations: no run happens outside detected speech; a run whose
 * no_speech_prob is above no_speech_threshold with avg_logprob below
 * logprob_threshold yields nothing (Whisper's silence rule), nor one
 * above half that threshold with avg_logprob a whole unit lower; when a
 * window starts at the last committed word (no prefix), a run's first
 * words that repeat the last committed words (text normalised) are
 * dropped, since the window starts where they ended.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "align.h"
#include "live.h"
#include "results.h"
#include "scheduler.h"
#include "vad.h"
#include "wk-alloc.h"
#include "wk-err.h"
#include "wk-time.h"

#define LIVE_HOP WK_HOP
#define LIVE_TS_SAMPLES (2 * WK_HOP)    /* one timestamp step: 20 ms */
#define LIVE_HISTORY (3 * WK_HOP)       /* mel frames look back 200 samples */
#define LIVE_PREROLL (WK_SAMPLE_RATE)   /* kept while idle: VAD START lies
                                         * up to ~0.3 s in the past */
#define LIVE_MAX_WINDOW (24 * WK_SAMPLE_RATE)   /* forced commit above */
#define LIVE_COMMIT_MARGIN (WK_SAMPLE_RATE / 10)        /* 100 ms */
#define LIVE_SETTLE_MARGIN (WK_SAMPLE_RATE / 2) /* a word cut by a run's
                                                 * window end, unheard by
                                                 * it, starts within this
                                                 * of the end */
#define LIVE_ANCHOR_MAX (20 * WK_SAMPLE_RATE)   /* anchored windows: longer
                                                 * ones restart at the last
                                                 * committed word */
#define LIVE_MAX_STEP (4 * WK_SAMPLE_RATE)
#define LIVE_MIN_STEP (WK_SAMPLE_RATE / 5)
#define LIVE_ARRIVALS 256
#define LIVE_RECENT 4           /* committed words kept for de-duplication */
#define LIVE_WORD_BYTES 64
#define LIVE_OUT_WORDS 1024     /* committed words kept until taken */
#define LIVE_BRISK_BYTE (WK_SAMPLE_RATE / 20)   /* 50 ms a byte of text:
                                                 * faster than people speak */
#define LIVE_START_JITTER (WK_SAMPLE_RATE / 20) /* how much earlier a
                                                 * later run may put a
                                                 * word */
/* A word whose deadline comes before two runs agreed on it is handed out
 * as the run heard it, unless the model was this unsure of it (the
 * geometric mean of its tokens' probabilities): then it is withheld, never
 * written (wk_stream_stats.n_withheld). On the real-speech development
 * sets most such guesses were wrong: withholding those under 0.4 took the
 * deadline policy's WER against the truth at 1000 ms from 58.2% to 55.6%
 * and from 67.2% to 60.9% (wk-live-latency --virtual; README, "Captions
 * on time"), for 0.6-1.2 points on the synthetic set, where the model is
 * seldom unsure. */
#define LIVE_FORCED_MIN_P 0.4
#define LIVE_SLOW_RUN 3         /* a run longer than latency / this is
                                 * too slow for a beam */
#define LIVE_RUN_HIST 8         /* runs the run time estimate looks at */
#define LIVE_DUE_SLACK 0.01     /* a feed this close to its predicted due
                                 * time continues the previous entry */
#define LIVE_DEADLINE_STEP (WK_SAMPLE_RATE / 10)        /* the shortest step
                                                         * a deadline asks */
#define LIVE_MAX_PIECE 0.5      /* s: a source's pieces, at most */

typedef struct
{
  int tok0, n_tok;              /* tokens [tok0, tok0 + n_tok) of the hyp */
  int64_t start, end;
  /* the earliest the word may start, for its deadline: start, but in the
   * open last segment (times shared out up to the window's end, so
   * stretched) as if spoken briskly from the segment's start */
  int64_t early;
  float sum_lp;                 /* log-probabilities of its tokens */
} live_word;

/* One run's hypothesis (or the uncommitted rest of one). */
typedef struct
{
  int32_t *tok;                 /* text tokens [cap] */
  float *prob;
  int64_t *t0, *t1;
  int n_tok;
  live_word *w;                 /* [cap] */
  int n_w;
  int n_emitted;                /* its first words, handed out already by
                                 * a deadline but not in the prefix */
  float avg_logprob, no_speech_prob;
  int64_t end;                  /* window end of the run */
  /* the run's whole token sequence after the initial tokens (forced
   * prefix, then what it decoded; text and timestamps), the index there
   * of each text token, and the window start it was decoded in */
  int32_t *raw;                 /* [cap + 2] */
  int n_raw;
  int *ri;                      /* [cap] */
  int64_t anchor;
} live_hyp;

struct wk_live
{
  wk_ctx *ctx;
  wk_model *model;
  wk_stream_params p;
  int *lang;
  int W;                        /* full window frames: 2 n_audio_ctx */
  int T;                        /* n_text_ctx */

  wk_vad_model *vad_model;
  wk_vad *vad;

  /* audio */
  float *audio;
  size_t cap, len;
  int64_t base, total;
  int64_t win_start;            /* end of the last committed word */
  /* No word still to come starts before this (wk_stream_settled): new
   * words are moved to start at it at the earliest. Only grows. */
  int64_t settled;
  /* Anchored windows: the model reads [anchor, total), where anchor is
   * the utterance's start, and is given the words committed since then
   * as a forced decoder prefix (pre: their tokens with the timestamps the
   * model put between them), so it always hears a sentence from its
   * start, as in training, instead of a window that begins mid-sentence.
   * Past LIVE_ANCHOR_MAX (or a prefix of pre_cap tokens) the anchor moves
   * to win_start with an empty prefix. */
  int64_t anchor;
  int32_t *pre;
  int n_pre, n_pre_text, pre_cap;
  bool in_utt;                  /* an utterance is open */
  int64_t utt_end;              /* VAD END position of the closing one */
  int64_t speech_start;         /* of the open one (stats) */
  bool finished;

  /* stepping */
  int64_t step, step_eff;       /* samples */
  int64_t next_run;
  int64_t last_run_end;         /* window end of the last run, -1 none */

  /* hypotheses: the current run's and the previous one's rest */
  live_hyp hyp[2];
  int cur;
  int hyp_cap;

  /* prompt: committed tokens */
  int32_t *prompt;
  int n_prompt, prompt_cap;
  /* the caller's initial prompt (the stream's), first in every run */
  const int32_t *initial;
  int n_initial;

  /* the prefix's last words, normalised, for de-duplication */
  char recent[LIVE_RECENT][LIVE_WORD_BYTES];
  int n_recent;
  bool utt_has_words;           /* words committed in this utterance */
  int64_t last_word_end;        /* of the last committed word */

  /* results */
  wk_results out;               /* committed, until taken */
  wk_results part;              /* the partial result */
  uint64_t part_serial;
  char *raw;                    /* one word's bytes */
  size_t raw_cap;

  /* when the audio was due: a ring of (first sample of a feed, its due
   * time); feeds that continue the previous one on time share its entry */
  int64_t arr_pos[LIVE_ARRIVALS];
  double arr_t[LIVE_ARRIVALS];
  int arr_head, arr_n;

  /* deadlines */
  double lat_s;                 /* latency_ms in seconds */
  double run_hist[LIVE_RUN_HIST];       /* the last runs' wall times */
  int n_run_hist;
  double piece_s;               /* a source's pieces (s) */
  double ret_s;                 /* when the last timed feed returned */
  int64_t n_forced, n_late, n_withheld;
  double max_late_s;
#ifdef WK_TEST_HOOKS
  wk_live_clock_fn clock;       /* tests: instead of wk_now_s */
  void *clock_user;
  wk_live_run_fn run_hook;      /* tests and tools: each run's work */
  void *run_hook_user;
#endif

  /* stats */
  int64_t n_runs;
  int64_t n_slow_runs;          /* runs too slow for the deadlines */
  double mel_seconds, speech_seconds;
  double last_run_s, max_run_s, run_ema_s;
  double last_delay_s, max_delay_s;
  int64_t n_committed, n_utterances;
  int64_t n_clipped, n_zeroed;  /* samples fixed by feeding */
  uint64_t own_bytes;

#ifdef WK_TEST_HOOKS
  wk_live_script_fn script;     /* tests: instead of the model */
  float script_p;               /* the scripted tokens' probability */
  void *script_user;
  wk_window_result script_res;
#endif
};

/* A scripted stand-in runs instead of the model (test builds only). */
#ifdef WK_TEST_HOOKS
#define SCRIPTED(l) ((l)->script != NULL)
#else
#define SCRIPTED(l) false
#endif

static void *
own_alloc (uint64_t * own_bytes, size_t n, size_t elem, bool *ok, bool zero)
{
  void *q;
  if (!*ok)
    return NULL;
  q = zero ? calloc (n ? n : 1, elem) : wk_scratch_alloc (n ? n : 1, elem);
  if (!q)
    *ok = false;
  else
    *own_bytes += n * elem;
  return q;
}

void *
wk_live_calloc (uint64_t * own_bytes, size_t n, size_t elem, bool *ok)
{
  return own_alloc (own_bytes, n, elem, ok, true);
}

void *
wk_live_scratch (uint64_t * own_bytes, size_t n, size_t elem, bool *ok)
{
  return own_alloc (own_bytes, n, elem, ok, false);
}

static void *
live_alloc (wk_live * l, size_t n, size_t elem, bool *ok)
{
  return wk_live_calloc (&l->own_bytes, n, elem, ok);
}

static void
hyp_clear (live_hyp * h)
{
  h->n_tok = h->n_w = h->n_emitted = 0;
}

/* ---- helpers for tests and the policy -------------------------------- */

int
wk_live_common_prefix (const char *const *a, int n_a, const char *const *b,
    int n_b)
{
  int i, n = n_a < n_b ? n_a : n_b;
  for (i = 0; i < n; i++)
    if (strcmp (a[i], b[i]) != 0)
      break;
  return i;
}

int
wk_live_audio_ctx (const wk_model * model, int param, int n_frames)
{
  int A = model->hp.n_audio_ctx, need;

  if (param == WK_AUDIO_CTX_AUTO)
    param = model->live_short_ctx ? WK_AUDIO_CTX_SHORT : WK_AUDIO_CTX_FULL;
  if (param == WK_AUDIO_CTX_FULL)
    return 0;
  if (param < 0)
    param = 0;
  /* the frames' positions (conv2 has stride 2) plus 0.64 s of padding
   * (the model saw padded windows in training), in blocks of 64 */
  need = (n_frames + 1) / 2 + 32;
  need = (need + 63) / 64 * 64;
  if (param > need)
    need = param;
  return need >= A ? 0 : need;
}

/* ---- output lists -------------------------------------------------------- */

/* Appends a segment: the text raw[0..raw_len-1], its tokens from hyp
 * word w (NULL: a marker). */
static wk_segment *
out_add (wk_live * l, wk_results * o, const live_hyp * h, const live_word * w,
    const char *raw, size_t raw_len)
{
  const wk_model *m = l->model;
  int n_tok = w ? w->n_tok : 0, i;
  wk_segment *seg = wk_results_add (o, raw, raw_len, true, NULL, n_tok);

  if (!w)
    return seg;
  seg->start = w->start;
  seg->end = w->end;
  seg->avg_logprob = h->avg_logprob;
  seg->no_speech_prob = h->no_speech_prob;
  for (i = 0; i < n_tok; i++) {
    wk_token *t = wk_results_token (o, seg);
    size_t tl = 0;
    int k = w->tok0 + i;
    if (!t)
      break;
    t->id = h->tok[k];
    t->p = h->prob[k];
    t->start = h->t0[k];
    t->end = h->t1[k];
    t->text = wk_tokenizer_bytes (m->tok, h->tok[k], &tl);
    if (!t->text)
      t->text = "";
    seg->p += t->p;
  }
  if (seg->n_tokens > 0)
    seg->p /= (float) seg->n_tokens;
  return seg;
}

/* The bytes of word w of h into l->raw; returns the length. */
static size_t
word_bytes (wk_live * l, const live_hyp * h, const live_word * w)
{
  size_t n = 0;
  int i;
  for (i = 0; i < w->n_tok; i++) {
    size_t tl = 0;
    const char *t = wk_tokenizer_bytes (l->model->tok, h->tok[w->tok0 + i],
        &tl);
    if (!t || n + tl >= l->raw_cap)
      break;
    memcpy (l->raw + n, t, tl);
    n += tl;
  }
  l->raw[n] = '\0';
  return n;
}

/* Lower-case letters and digits of word w (for de-duplication). */
static void
word_norm (wk_live * l, const live_hyp * h, const live_word * w, char *out)
{
  size_t n = word_bytes (l, h, w), i, k = 0;
  for (i = 0; i < n && k + 1 < LIVE_WORD_BYTES; i++) {
    unsigned char c = (unsigned char) l->raw[i];
    if (c >= 'A' && c <= 'Z')
      out[k++] = (char) (c - 'A' + 'a');
    else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c >= 0x80)
      out[k++] = (char) c;
  }
  out[k] = '\0';
}

static bool
words_equal (wk_live * l, const live_hyp * a, const live_word * wa,
    const live_hyp * b, const live_word * wb)
{
  int i;
  if (wa->n_tok == wb->n_tok) {
    for (i = 0; i < wa->n_tok; i++)
      if (a->tok[wa->tok0 + i] != b->tok[wb->tok0 + i])
        break;
    if (i == wa->n_tok)
      return true;
  }
  {
    /* same text through different tokens */
    char x[LIVE_WORD_BYTES * 2];
    size_t n = word_bytes (l, a, wa);
    if (n >= sizeof x)
      return false;
    memcpy (x, l->raw, n + 1);
    return word_bytes (l, b, wb) == n && memcmp (x, l->raw, n) == 0;
  }
}

/* ---- creation ------------------------------------------------------------ */

static bool
hyp_alloc (wk_live * l, live_hyp * h, int cap)
{
  bool ok = true;
  h->tok = live_alloc (l, (size_t) cap, sizeof (int32_t), &ok);
  h->prob = live_alloc (l, (size_t) cap, sizeof (float), &ok);
  h->t0 = live_alloc (l, (size_t) cap, sizeof (int64_t), &ok);
  h->t1 = live_alloc (l, (size_t) cap, sizeof (int64_t), &ok);
  h->w = live_alloc (l, (size_t) cap, sizeof (live_word), &ok);
  h->raw = live_alloc (l, (size_t) cap + 2, sizeof (int32_t), &ok);
  h->ri = live_alloc (l, (size_t) cap, sizeof (int), &ok);
  return ok;
}

static void
hyp_free (live_hyp * h)
{
  free (h->tok);
  free (h->prob);
  free (h->t0);
  free (h->t1);
  free (h->w);
  free (h->raw);
  free (h->ri);
}

wk_status
wk_live_new (wk_ctx * ctx, const wk_stream_params * p, int *lang,
    wk_live ** out, char *err, size_t err_size)
{
  wk_live *l;
  wk_model *m;
  wk_vad_params vp;
  wk_status st;
  bool ok = true;
  const char *vad_path;
  int i;

  *out = NULL;
  if (p->latency_ms <= 0 || p->latency_ms > 60000) {
    wk_set_err (err, err_size, "stream: latency_ms must be in 1..60000");
    return WK_ERR_ARG;
  }
  if (p->use_vad && (!(p->vad_threshold > 0.0f && p->vad_threshold < 1.0f)
          || p->vad_min_silence_ms < 0 || p->vad_min_silence_ms > 60000)) {
    wk_set_err (err, err_size, "stream: vad_threshold must be in (0, 1) and "
        "vad_min_silence_ms in 0..60000");
    return WK_ERR_ARG;
  }
  m = wk_ctx_model (ctx);
  l = calloc (1, sizeof *l);
  if (!l) {
    wk_set_err (err, err_size, "stream: out of memory");
    return WK_ERR_NOMEM;
  }
  l->ctx = ctx;
  l->model = m;
  l->p = *p;
  l->p.vad_model = NULL;        /* the caller's string */
  l->lang = lang;
  l->W = 2 * m->hp.n_audio_ctx;
  l->T = m->hp.n_text_ctx;

  if (p->use_vad) {
    vad_path = p->vad_model ? p->vad_model : wk_default_vad_model_path ();
    st = wk_vad_model_load (vad_path, &l->vad_model, err, err_size);
    if (st != WK_OK) {
      free (l);
      return st;
    }
    vp = wk_vad_default_params ();
    vp.threshold = p->vad_threshold;
    vp.min_silence_duration_ms = p->vad_min_silence_ms;
    if (vp.merge_gap_ms > p->vad_min_silence_ms)
      vp.merge_gap_ms = p->vad_min_silence_ms;
    st = wk_vad_new (l->vad_model, &vp, &l->vad, err, err_size);
    if (st != WK_OK) {
      wk_live_free (l);
      return st;
    }
  }

  l->cap = (size_t) (WK_N_SAMPLES + LIVE_HISTORY + 2 * WK_VAD_CHUNK
      + WK_SAMPLE_RATE);
  l->audio = wk_live_scratch (&l->own_bytes, l->cap, sizeof (float), &ok);
  l->hyp_cap = l->T;
  for (i = 0; i < 2; i++)
    if (ok)
      ok = hyp_alloc (l, &l->hyp[i], l->hyp_cap);
  l->prompt_cap = l->T / 2;
  l->prompt = live_alloc (l, (size_t) l->prompt_cap, sizeof (int32_t), &ok);
  l->pre_cap = l->T / 4;
  l->pre = live_alloc (l, (size_t) l->pre_cap, sizeof (int32_t), &ok);
  l->raw_cap = (size_t) l->T * (m->max_token_bytes + 1) + 1;
  l->raw = live_alloc (l, l->raw_cap, 1, &ok);
  /* the integer products of runs too slow for the deadlines */
  if (ok && p->commit == WK_COMMIT_DEADLINE)
    ok = wk_ctx_int8_alloc (ctx);
  if (ok)
    ok = wk_results_init (&l->out, 2 * LIVE_OUT_WORDS, 4 * LIVE_OUT_WORDS,
        (size_t) LIVE_OUT_WORDS * 64, &l->own_bytes);
  if (ok)
    ok = wk_results_init (&l->part, l->T, l->T,
        l->raw_cap * 3 + (size_t) l->T, &l->own_bytes);
  if (!ok) {
    wk_set_err (err, err_size, "stream: out of memory");
    wk_live_free (l);
    return WK_ERR_NOMEM;
  }
  l->lat_s = p->latency_ms / 1000.0;
  l->step = (int64_t) p->latency_ms * WK_SAMPLE_RATE / 3000;
  if (l->step < LIVE_MIN_STEP)
    l->step = LIVE_MIN_STEP;
  /* forced commits keep a window under 24 s + a step: within the audio
   * kept (31 s) only with steps this short */
  if (l->step > LIVE_MAX_STEP)
    l->step = LIVE_MAX_STEP;
  wk_live_reset (l);
  *out = l;
  return WK_OK;
}

void
wk_live_free (wk_live * l)
{
  int i;
  if (!l)
    return;
  wk_vad_free (l->vad);
  wk_vad_model_unref (l->vad_model);
  free (l->audio);
  for (i = 0; i < 2; i++)
    hyp_free (&l->hyp[i]);
  free (l->prompt);
  free (l->pre);
  free (l->raw);
  wk_results_free (&l->out);
  wk_results_free (&l->part);
  free (l);
}

void
wk_live_reset (wk_live * l)
{
  if (!l)
    return;
  if (l->vad)
    wk_vad_reset (l->vad);
  l->len = 0;
  l->base = 0;
  l->total = 0;
  l->win_start = 0;
  l->settled = 0;
  l->anchor = 0;
  l->n_pre = l->n_pre_text = 0;
  l->in_utt = !l->p.use_vad;
  l->speech_start = 0;
  l->utt_end = -1;
  l->finished = false;
  l->step_eff = l->step;
  l->next_run = l->step;
  l->last_run_end = -1;
  hyp_clear (&l->hyp[0]);
  hyp_clear (&l->hyp[1]);
  l->cur = 0;
  l->n_prompt = 0;
  l->n_recent = 0;
  l->utt_has_words = false;
  l->last_word_end = 0;
  wk_results_clear (&l->out);
  wk_results_clear (&l->part);
  l->part_serial++;
  l->arr_head = l->arr_n = 0;
  l->run_ema_s = 0.0;
  l->n_run_hist = 0;
  l->piece_s = 0.0;
  l->ret_s = -INFINITY;
}

/* Results handed out by the last take are released by the next call. */
static void
begin_call (wk_live * l)
{
  wk_results_begin (&l->out);
}

/* ---- the prompt and commits ---------------------------------------------- */

void
wk_live_set_prompt (wk_live * l, const int32_t * t, int n)
{
  if (!l)
    return;
  l->initial = n > 0 ? t : NULL;
  l->n_initial = n > 0 ? n : 0;
}

void
wk_live_prompt_push (int32_t * prompt, int *n_prompt, int prompt_cap,
    int max_text_ctx, const int32_t * t, int n)
{
  int cap = prompt_cap;
  if (max_text_ctx < cap)
    cap = max_text_ctx;
  if (cap <= 0) {
    *n_prompt = 0;
    return;
  }
  if (n >= cap) {
    memcpy (prompt, t + n - cap, (size_t) cap * sizeof *t);
    *n_prompt = cap;
    return;
  }
  if (*n_prompt + n > cap) {
    int drop = *n_prompt + n - cap;
    memmove (prompt, prompt + drop, (size_t) (*n_prompt - drop) * sizeof *t);
    *n_prompt -= drop;
  }
  memcpy (prompt + *n_prompt, t, (size_t) n * sizeof *t);
  *n_prompt += n;
}

/* Beyond any integer sample format's scale (S32's 2^31 included): such a
 * value is not audio out of range but garbage (uninitialised memory, a
 * wrong format), and even clipped to full scale it would set the mel
 * maximum of the whole window and push the speech around it below the
 * log floor. */
#define WK_SAMPLE_GARBAGE 4294967296.0f

void
wk_live_copy_samples (float *dst, const float *src, size_t n,
    int64_t * n_clipped, int64_t * n_zeroed)
{
  size_t i;

  for (i = 0; i < n; i++) {
    float x = src[i];

    if (x >= -1.0f && x <= 1.0f) {
      dst[i] = x;
    } else if (x >= -WK_SAMPLE_GARBAGE && x <= WK_SAMPLE_GARBAGE) {
      /* an overload, or integers not scaled: clipped speech is still
       * speech */
      dst[i] = x > 0.0f ? 1.0f : -1.0f;
      (*n_clipped)++;
    } else {
      /* NaN, infinite or garbage: one would poison every mel frame it
       * touches */
      dst[i] = 0.0f;
      (*n_zeroed)++;
    }
  }
}

void
wk_live_audio_drop (float *audio, size_t *len, int64_t * base, int64_t new_base)
{
  int64_t drop;

  if (new_base <= *base)
    return;
  drop = new_base - *base;
  if (drop >= (int64_t) * len) {
    *len = 0;
  } else {
    memmove (audio, audio + drop, (*len - (size_t) drop) * sizeof (float));
    *len -= (size_t) drop;
  }
  *base = new_base;
}

static double
live_now (const wk_live * l)
{
#ifdef WK_TEST_HOOKS
  if (l->clock)
    return l->clock (l->clock_user);
#else
  (void) l;
#endif
  return wk_now_s ();
}

#ifdef WK_TEST_HOOKS
void
wk_live_set_clock (wk_live * l, wk_live_clock_fn fn, void *user)
{
  l->clock = fn;
  l->clock_user = user;
}

void
wk_live_set_run_hook (wk_live * l, wk_live_run_fn fn, void *user)
{
  l->run_hook = fn;
  l->run_hook_user = user;
}
#endif

/* The time the sample at pos was (or, past the audio fed, will be) due:
 * from the newest ring entry at or before pos, at 16 kHz; before the
 * oldest entry, counted back from it. */
static double
due_at (const wk_live * l, int64_t pos)
{
  int i, k = -1;
  for (i = 0; i < l->arr_n; i++) {
    k = (l->arr_head - 1 - i + LIVE_ARRIVALS) % LIVE_ARRIVALS;
    if (l->arr_pos[k] <= pos)
      break;
  }
  if (k < 0)
    return live_now (l);
  return l->arr_t[k] + (double) (pos - l->arr_pos[k]) / WK_SAMPLE_RATE;
}

/* Records that samples [pos, ...) were due from due_s on. */
static void
due_record (wk_live * l, int64_t pos, double due_s)
{
  double expected = l->arr_n > 0 ? due_at (l, pos) : NAN;
  if (isinf (expected) && isinf (due_s))
    return;                     /* still no deadline */
  if (fabs (expected - due_s) <= LIVE_DUE_SLACK)
    return;                     /* on time: the previous entry holds */
  l->arr_pos[l->arr_head] = pos;
  l->arr_t[l->arr_head] = due_s;
  l->arr_head = (l->arr_head + 1) % LIVE_ARRIVALS;
  if (l->arr_n < LIVE_ARRIVALS)
    l->arr_n++;
}

/* The time by which a word starting at pos must be committed: its first
 * sample's due time + the latency, less the time to hand it on. */
static double
deadline (const wk_live * l, int64_t pos)
{
  return due_at (l, pos) + l->lat_s - WK_PUSH_MARGIN_MS / 1000.0;
}

/* The earliest a word no run has heard yet may start: after the last
 * committed word and what is settled, and not before the last run's end
 * less LIVE_SETTLE_MARGIN, which advance_settled settles before the next
 * run (run_model starts every new word at settled or later). A run that
 * heard speech but wrote no new word (the model leaves out a word its
 * window end cut) thus plans the next run for a word starting there, not
 * for one at the last committed word's end, whose deadline has often
 * passed. */
static int64_t
unheard_floor (const wk_live * l)
{
  int64_t s = l->win_start;
  if (l->settled > s)
    s = l->settled;
  if (l->last_word_end > s)
    s = l->last_word_end;
  if (l->last_run_end >= 0 && l->last_run_end - LIVE_SETTLE_MARGIN > s)
    s = l->last_run_end - LIVE_SETTLE_MARGIN;
  return s;
}

/* The deadline of a word not handed out yet: from the earliest a later
 * run may put its start (its brisk start less the runs' jitter), never
 * before the end of the last word handed out. */
static double
word_deadline (const wk_live * l, const live_word * w)
{
  int64_t s = w->early - LIVE_START_JITTER;
  if (s < l->win_start)
    s = l->win_start;
  if (s < l->last_word_end)
    s = l->last_word_end;
  return deadline (l, s);
}

/* The wall time the next run is expected to take: the longest of the
 * last few (runs grow with the window and vary with the machine's load),
 * with a margin; before any run, a tenth of the latency. */
static double
run_estimate (const wk_live * l)
{
  double r = 0.0;
  int i;
  if (l->n_run_hist == 0)
    return 0.1 * l->lat_s;
  for (i = 0; i < l->n_run_hist; i++)
    if (l->run_hist[i] > r)
      r = l->run_hist[i];
  return 1.25 * r + 0.02;
}

/* When the audio up to pos will be here, now being now: at once when it
 * has been fed; else when its last sample has been captured (its due
 * time) and a feed's piece has carried it here (a source delivers a piece
 * once its last sample is in). Audio captured already but not fed yet (a
 * caller that queued it while a run was going, as the element does) is
 * here at once, so a stream that fell behind plans its next run on all of
 * it rather than waiting for audio that is no longer to come. */
static double
avail_at (const wk_live * l, int64_t pos, double now)
{
  double t;
  if (pos <= l->total)
    return now;
  t = due_at (l, pos) + l->piece_s;
  return t > now ? t : now;
}

/* When a run at position pos is expected to finish, now being now and
 * the run taking r. A source read faster than real time, far ahead of its
 * due times, meets every deadline by agreement alone: its text then does
 * not depend on how long runs take. */
static double
run_finish (const wk_live * l, int64_t pos, double now, double r)
{
  return avail_at (l, pos, now) + r;
}

/* Where the next run should start: after the usual step, or sooner when
 * the earliest deadline to come (d) needs it, but not before `least`
 * new samples; a deadline no run can make any more (an overloaded
 * machine) keeps the usual step, so the stream still keeps up. */
static int64_t
plan_run (const wk_live * l, double d, double now, double r, int64_t least)
{
  int64_t usual = l->total + l->step_eff, lo = l->total + least, at;
  double latest;

  if (l->p.commit != WK_COMMIT_DEADLINE || !isfinite (d))
    return usual;
  if (d < run_finish (l, lo, now, r))
    return usual;
  /* the latest start that still finishes by d, as the position of the
   * audio that is here by then: captured a piece before */
  latest = d - r - l->piece_s;
  at = l->total + (int64_t) ((latest - due_at (l, l->total)) * WK_SAMPLE_RATE);
  if (at < lo)
    at = lo;
  return at < usual ? at : usual;
}

/* Windows start at the end of the last committed word again, with no
 * prefix. */
static void
unanchor (wk_live * l)
{
  l->anchor = l->win_start;
  l->n_pre = l->n_pre_text = 0;
}

static void hyp_drop_words (live_hyp * h, int k);

/* Hands words [from, to) of hypothesis h to the caller. */
static void
emit_words (wk_live * l, const live_hyp * h, int from, int to)
{
  double now = live_now (l);
  int i;

  for (i = from; i < to; i++) {
    const live_word *w = &h->w[i];
    size_t n = word_bytes (l, h, w);
    double d, late;
    out_add (l, &l->out, h, w, l->raw, n);
    d = now - due_at (l, w->end);
    if (d < 0.0)
      d = 0.0;
    late = now - (due_at (l, w->start) + l->lat_s);
    if (late > 0.0) {
      l->n_late++;
      if (late > l->max_late_s)
        l->max_late_s = late;
    }
    l->last_delay_s = d;
    if (d > l->max_delay_s)
      l->max_delay_s = d;
    l->n_committed++;
    l->utt_has_words = true;
    if (w->end > l->last_word_end)
      l->last_word_end = w->end;
  }
}

/* Words a deadline handed out that no agreed prefix holds yet: later
 * runs decode them again (see deadline_commits). */
static bool
emitted_ahead (const wk_live * l)
{
  return l->last_word_end > l->win_start + LIVE_HOP;
}

/* Commits the first k words of hypothesis h and drops them from it: the
 * caller gets those a deadline did not hand out already; all of them
 * (with the timestamps between them) become the prompt's end and the
 * next runs' forced prefix, while the window stays anchored. */
static void
commit_words (wk_live * l, live_hyp * h, int k)
{
  const live_word *last;
  int64_t e;
  int n_raw, i;

  if (k <= 0)
    return;
  emit_words (l, h, k < h->n_emitted ? k : h->n_emitted, k);
  for (i = 0; i < k; i++) {
    wk_live_prompt_push (l->prompt, &l->n_prompt, l->prompt_cap,
        l->p.max_text_ctx, h->tok + h->w[i].tok0, h->w[i].n_tok);
    if (l->n_recent == LIVE_RECENT) {
      memmove (l->recent[0], l->recent[1], (LIVE_RECENT - 1) * LIVE_WORD_BYTES);
      l->n_recent--;
    }
    word_norm (l, h, &h->w[i], l->recent[l->n_recent++]);
  }
  last = &h->w[k - 1];
  e = last->end / LIVE_HOP * LIVE_HOP;
  n_raw = h->ri[last->tok0 + last->n_tok - 1] + 1;
  if (e > l->win_start)
    l->win_start = e;
  if (l->win_start > l->total)
    l->win_start = l->total / LIVE_HOP * LIVE_HOP;
  if (!SCRIPTED (l) && h->anchor == l->anchor && n_raw <= l->pre_cap
      && l->total - l->anchor <= LIVE_ANCHOR_MAX) {
    memcpy (l->pre, h->raw, (size_t) n_raw * sizeof *l->pre);
    l->n_pre = n_raw;
    l->n_pre_text = 0;
    for (i = 0; i < n_raw; i++)
      if (l->pre[i] < l->model->sp.eot)
        l->n_pre_text++;
  } else {
    unanchor (l);
  }
  hyp_drop_words (h, k);
}

/* Removes the first k words of h (keeping its arrays compact). */
static void
hyp_drop_words (live_hyp * h, int k)
{
  int t, i;
  if (k <= 0)
    return;
  if (k >= h->n_w) {
    hyp_clear (h);
    return;
  }
  h->n_emitted = h->n_emitted > k ? h->n_emitted - k : 0;
  t = h->w[k].tok0;
  memmove (h->tok, h->tok + t, (size_t) (h->n_tok - t) * sizeof *h->tok);
  memmove (h->prob, h->prob + t, (size_t) (h->n_tok - t) * sizeof *h->prob);
  memmove (h->t0, h->t0 + t, (size_t) (h->n_tok - t) * sizeof *h->t0);
  memmove (h->t1, h->t1 + t, (size_t) (h->n_tok - t) * sizeof *h->t1);
  memmove (h->ri, h->ri + t, (size_t) (h->n_tok - t) * sizeof *h->ri);
  h->n_tok -= t;
  memmove (h->w, h->w + k, (size_t) (h->n_w - k) * sizeof *h->w);
  h->n_w -= k;
  for (i = 0; i < h->n_w; i++)
    h->w[i].tok0 -= t;
}

static void
utterance_end (wk_live * l, int64_t at)
{
  if (l->utt_has_words) {
    wk_segment *seg = out_add (l, &l->out, NULL, NULL, "", 0);
    if (at < l->last_word_end)
      at = l->last_word_end;    /* markers come after the words */
    if (at < l->settled)
      at = l->settled;
    seg->start = seg->end = at;
    seg->utterance_end = true;
    l->n_utterances++;
  }
  l->utt_has_words = false;
}

/* The partial result: the words of h. */
static void
set_partial (wk_live * l, const live_hyp * h)
{
  int i;
  wk_results_clear (&l->part);
  for (i = h ? h->n_emitted : 0; h && i < h->n_w; i++) {
    const live_word *w = &h->w[i];
    size_t n = word_bytes (l, h, w);
    wk_segment *seg = out_add (l, &l->part, h, w, l->raw, n);
    double pgeo = exp (w->sum_lp / (w->n_tok > 0 ? w->n_tok : 1));
    double age = (double) (h->end - w->end) / WK_SAMPLE_RATE;
    double f = 0.5 + age;       /* words at the window's edge move most */
    if (f > 1.0)
      f = 1.0;
    seg->stability = (float) (0.9 * pgeo * f);
  }
  l->part_serial++;
}

/* ---- one run ----------------------------------------------------------- */

/* Builds hypothesis h from the window [ws, we): h->raw holds n_pre forced
 * prefix tokens, then the n_tokens of the run's result r (so from the
 * prefix on, raw[i] is r->tokens[i - n_pre]). A word starts at text token
 * word_at (the first after the prefix) whatever its spelling. */
static void
build_hyp (wk_live * l, live_hyp * h, int n_pre, const wk_window_result * r,
    int64_t ws, int64_t we, int word_at, int lang, int n_pos)
{
  const wk_model *m = l->model;
  const int32_t *tok = h->raw;
  int tb = m->sp.timestamp_begin, i, seg_b = 0, n, open_b = -1;
  int64_t seg_t = ws, open_t = ws, cum_open = 0;
  int32_t *al_ids = NULL, *f0 = NULL, *f1 = NULL;

  hyp_clear (h);
  h->avg_logprob = r->avg_logprob;
  h->no_speech_prob = r->no_speech_prob;
  h->end = we;
  h->anchor = ws;
  n = n_pre;
  for (i = 0; i < r->n_tokens && n < l->hyp_cap + 2; i++)
    h->raw[n++] = r->tokens[i];
  h->n_raw = n;

  /* the DTW times of the text tokens (those the loop below keeps, in its
   * order), when the stream wants them and the run encoded a window */
  if (n_pos > 0 && wk_align_ready (l->ctx)) {
    int T1 = m->hp.n_text_ctx + 1, k = 0;
    al_ids = l->ctx->al_text;
    for (i = 0; i < n && k < l->hyp_cap && k < T1; i++)
      if (tok[i] < tb && tok[i] < m->sp.eot)
        al_ids[k++] = tok[i];
    /* no lead row: a live window starts where the last committed word
     * ended, mostly on speech (on the development set the lead row gave
     * 0.059 s mean error live, 0.056 s without) */
    if (k == 0 || wk_align_window (l->ctx, lang, l->p.translate, false,
            al_ids, k, n_pos, al_ids + T1, al_ids + 2 * T1) != WK_OK)
      al_ids = NULL;
    else {
      f0 = al_ids + T1;
      f1 = al_ids + 2 * T1;
    }
  }

  /* text tokens, then times per timestamp-delimited segment */
  for (i = 0; i <= n; i++) {
    bool ts = i < n && tok[i] >= tb;
    if (i < n && !ts) {
      if (tok[i] < m->sp.eot && h->n_tok < l->hyp_cap) {
        h->tok[h->n_tok] = tok[i];
        h->prob[h->n_tok] = i < n_pre ? 1.0f : r->probs[i - n_pre];
        h->ri[h->n_tok] = i;
        h->n_tok++;
      }
      continue;
    }
    /* a timestamp (or the end): closes the open segment's tokens */
    {
      int64_t seg_e = ts ? ws + (int64_t) (tok[i] - tb) * LIVE_TS_SAMPLES : we;
      int64_t bytes = 0, cum = 0;
      int k;
      if (seg_e > we)
        seg_e = we;
      if (seg_e < seg_t)
        seg_e = seg_t;
      if (!ts) {
        open_b = seg_b;         /* the open segment, cut by the window */
        open_t = seg_t;
      }
      for (k = seg_b; k < h->n_tok; k++) {
        size_t tl = 0;
        wk_tokenizer_bytes (m->tok, h->tok[k], &tl);
        bytes += (int64_t) tl;
      }
      if (bytes == 0)
        bytes = 1;
      for (k = seg_b; k < h->n_tok; k++) {
        size_t tl = 0;
        wk_tokenizer_bytes (m->tok, h->tok[k], &tl);
        h->t0[k] = seg_t + (seg_e - seg_t) * cum / bytes;
        cum += (int64_t) tl;
        h->t1[k] = seg_t + (seg_e - seg_t) * cum / bytes;
      }
      if (al_ids && h->n_tok > seg_b
          && wk_align_segment (l->ctx, al_ids + seg_b, h->n_tok - seg_b,
              f0 + seg_b, f1 + seg_b, ws, seg_t, seg_e)) {
        for (k = seg_b; k < h->n_tok; k++) {
          int64_t a = ws + (int64_t) f0[k] * WK_ALIGN_POS_SAMPLES;
          int64_t b = ws + (int64_t) f1[k] * WK_ALIGN_POS_SAMPLES;
          h->t0[k] = a < seg_t ? seg_t : a;
          h->t1[k] = b > seg_e ? seg_e : b;
        }
      }
      seg_b = h->n_tok;
      if (ts) {
        int64_t t = ws + (int64_t) (tok[i] - tb) * LIVE_TS_SAMPLES;
        seg_t = t < we ? (t > seg_t ? t : seg_t) : we;
      }
    }
  }

  /* words: a token starting with a space (or the first) starts one */
  for (i = 0; i < h->n_tok; i++) {
    size_t tl = 0;
    const char *t = wk_tokenizer_bytes (m->tok, h->tok[i], &tl);
    float lp = h->prob[i] > 0.0f ? logf (h->prob[i]) : -30.0f;
    if (h->n_w == 0 || i == word_at || (t && tl > 0 && t[0] == ' ')) {
      live_word *w = &h->w[h->n_w++];
      w->tok0 = i;
      w->n_tok = 0;
      w->start = h->t0[i];
      w->early = w->start;
      if (open_b >= 0 && i >= open_b) {
        int64_t e = open_t + cum_open * LIVE_BRISK_BYTE;
        if (e < w->early)
          w->early = e;
      }
      w->sum_lp = 0.0f;
    }
    if (open_b >= 0 && i >= open_b)
      cum_open += (int64_t) tl;
    h->w[h->n_w - 1].n_tok++;
    h->w[h->n_w - 1].end = h->t1[i];
    h->w[h->n_w - 1].sum_lp += lp;
  }
  /* words with no letters at all (stray spaces) stay attached: fine */
}

/* Every word of h at least one timestamp step (20 ms) long, after the
 * previous one and not past h's audio, its tokens inside it: a word of
 * no length would be a caption cue of no length. New words (from
 * h->n_emitted) never start before floor (committed words, settled). */
static void
hyp_space_words (live_hyp * h, int64_t floor)
{
  int64_t prev_end = INT64_MIN;
  int i, t;

  for (i = 0; i < h->n_w; i++) {
    live_word *w = &h->w[i];
    if (w->start < prev_end)
      w->start = prev_end;
    if (w->end < w->start + LIVE_TS_SAMPLES)
      w->end = w->start + LIVE_TS_SAMPLES;
    /* never past the audio: at its very end a word keeps up to 20 ms by
     * starting earlier, but after the one before (and, new, not into a
     * committed word or settled time): shorter then, as short as none,
     * which the cues stretch to a step as they do any text */
    if (w->end > h->end) {
      w->end = h->end;
      if (w->start > w->end - LIVE_TS_SAMPLES)
        w->start = w->end - LIVE_TS_SAMPLES;
      if (w->start < prev_end)
        w->start = prev_end < w->end ? prev_end : w->end;
      if (i >= h->n_emitted && w->start < floor)
        w->start = floor < w->end ? floor : w->end;
    }
    for (t = w->tok0; t < w->tok0 + w->n_tok; t++) {
      if (h->t0[t] < w->start)
        h->t0[t] = w->start;
      if (h->t0[t] > w->end)
        h->t0[t] = w->end;
      if (h->t1[t] < h->t0[t])
        h->t1[t] = h->t0[t];
      if (h->t1[t] > w->end)
        h->t1[t] = w->end;
    }
    /* the word's tokens span it: words read back from token times (the
     * committed segments' words) keep the 20 ms too */
    if (w->n_tok > 0) {
      h->t0[w->tok0] = w->start;
      h->t1[w->tok0 + w->n_tok - 1] = w->end;
    }
    prev_end = w->end;
  }
}

/* Drops the hypothesis' first words when they repeat the last committed
 * ones (the window starts where those ended, so the model may hear
 * their tail again). */
static void
dedupe (wk_live * l, live_hyp * h)
{
  int n, i;
  if (h->n_w == 0 || h->w[0].start >= l->win_start + WK_SAMPLE_RATE / 2)
    return;                     /* an echo is at the window's start */
  for (n = l->n_recent < h->n_w ? l->n_recent : h->n_w; n > 0; n--) {
    char w[LIVE_WORD_BYTES];
    for (i = 0; i < n; i++) {
      word_norm (l, h, &h->w[i], w);
      if (strcmp (w, l->recent[l->n_recent - n + i]) != 0 || !w[0])
        break;
    }
    if (i == n) {
      hyp_drop_words (h, n);
      return;
    }
  }
}

#ifdef WK_TEST_HOOKS
void
wk_live_set_script (wk_live * l, wk_live_script_fn fn, void *user)
{
  l->script = fn;
  l->script_user = user;
}

void
wk_live_set_script_prob (wk_live * l, float p)
{
  l->script_p = p;
}

/* The scripted stand-in's result for [win_start, end). */
static const wk_window_result *
run_script (wk_live * l, int64_t end)
{
  wk_ctx *ctx = l->ctx;
  wk_window_result *r = &l->script_res;
  int n, i, T = l->T;

  n = l->script (l->script_user, l->win_start, end, ctx->res_tokens, T / 2);
  if (n < 0)
    n = 0;
  if (n > T / 2)
    n = T / 2;
  memset (r, 0, sizeof *r);
  for (i = 0; i < n; i++)
    ctx->res_probs[i] = l->script_p > 0.0f ? l->script_p : 0.9f;
  r->tokens = ctx->res_tokens;
  r->probs = ctx->res_probs;
  r->n_tokens = n;
  r->avg_logprob = -0.1f;
  return r;
}
#endif /* WK_TEST_HOOKS */

static double next_deadline (const wk_live * l, const live_hyp * cur);

/* Runs the model on [anchor, end) (scripts: [win_start, end)) into
 * l->hyp[l->cur], without the words of its forced prefix, once the
 * model's gate admits it (t0: when it asked). final: with the caller's
 * temperature fallback. */
static wk_status
run_admitted (wk_live * l, int64_t end, bool final, double t0)
{
  wk_ctx *ctx = l->ctx;
  const wk_model *m = l->model;
  const wk_window_result *r;
  wk_stream_params pp = l->p;
  live_hyp *h = &l->hyp[l->cur];
  int64_t ws, n, first;
  int n_frames = 0, max_tok, lang = 0, n_prompt, n_pre, i, k;
  int positions = 0, n_given = 0;
  double t1, dt, tm = live_now (l);
  bool slow;
  wk_status st;

  if (end - l->anchor > LIVE_ANCHOR_MAX && l->anchor < l->win_start)
    unanchor (l);
  ws = l->anchor;
  n = end - ws;
  if (n > WK_N_SAMPLES)
    n = WK_N_SAMPLES;
#ifdef WK_TEST_HOOKS
  if (l->script) {
    r = run_script (l, end);
    goto have_result;
  }
#endif
  n_frames = (int) (n / LIVE_HOP);
  if (n_frames > l->W)
    n_frames = l->W;
  first = (ws - l->base) / LIVE_HOP;
  wk_model_window_mel (m, l->audio, l->len, first, n_frames, ctx->mel);
  t1 = live_now (l);
  l->mel_seconds += t1 - tm;    /* not the wait at the gate */

  /* runs too slow for the deadlines (a loaded machine) take the
   * encoder's integer products, where the kernels have them, and greedy
   * decoding (below); audio fed without capture times has no deadlines,
   * so its text never depends on run times */
  slow = l->p.commit == WK_COMMIT_DEADLINE && l->n_run_hist > 0
      && isfinite (due_at (l, l->total))
      && run_estimate (l) > l->lat_s / LIVE_SLOW_RUN;
  ctx->audio_ctx = positions = wk_live_audio_ctx (m, l->p.audio_ctx, n_frames);
  ctx->enc_int8 = slow;
  st = wk_encode (ctx, ctx->mel, l->W);
  ctx->audio_ctx = 0;
  ctx->enc_int8 = false;
  if (slow)
    l->n_slow_runs++;
  if (st != WK_OK)
    return st;
  lang = *l->lang;
  if (lang < 0 && m->multilingual) {
    /* a guess from a short window is kept for this run only */
    lang = wk_detect_language (ctx, NULL);
    if (n >= 2 * WK_SAMPLE_RATE || final)
      *l->lang = lang;
  }

  /* a few tokens per second of audio not yet committed at most: bounds a
   * run's cost and cuts repetition loops short */
  max_tok = 8 + (int) ((end - l->win_start) * 10 / WK_SAMPLE_RATE);
  ctx->max_tokens = max_tok;
  if (!final)
    pp.temperature_inc = 0.0f;  /* runs must agree: greedy only */
  if (slow)
    pp.beam_size = 1;           /* a third of the decoder's work */
  /* the prompt ends with the prefix's words (pushed when committed):
   * they are given once, as the prefix */
  n_prompt = l->n_prompt - (l->n_pre ? l->n_pre_text : 0);
  if (n_prompt < 0)
    n_prompt = 0;
  n_given = l->n_initial + n_prompt + l->n_pre;
  {
    wk_prompt pr = { l->initial, l->n_initial, l->prompt, n_prompt };
    st = wk_decode_window (ctx, &pp, lang < 0 ? 0 : lang, &pr,
        l->n_pre ? l->pre : NULL, l->n_pre, &r);
  }
  ctx->max_tokens = 0;
  if (st != WK_OK)
    return st;

#ifdef WK_TEST_HOOKS
have_result:
#endif
  if ((r->no_speech_prob > l->p.no_speech_threshold
          && r->avg_logprob < l->p.logprob_threshold)
      || (r->no_speech_prob > 0.5f * l->p.no_speech_threshold
          && r->avg_logprob < l->p.logprob_threshold - 1.0f)) {
    /* Whisper's silence rule, and a stricter one: text the model is very
     * unsure of where it half believes there is no speech (noise that
     * got past the detector) */
    hyp_clear (h);
    h->end = end;
  } else {
    /* the prefix and the run's tokens, as one sequence from ws */
    n_pre = SCRIPTED (l) ? 0 : l->n_pre;
    memcpy (h->raw, l->pre, (size_t) n_pre * sizeof *h->raw);
    k = SCRIPTED (l) ? 0 : l->n_pre_text;
    build_hyp (l, h, n_pre, r, ws, end, k, lang < 0 ? 0 : lang,
        SCRIPTED (l) ? 0 : (n_frames + 1) / 2);
    for (i = 0; i < h->n_w && h->w[i].tok0 < k; i++);
    hyp_drop_words (h, i);      /* the prefix: committed already */
    if (k == 0)
      dedupe (l, h);
    /* words a deadline handed out past the prefix, heard again: those
     * that start before the last one's end (less the runs' jitter) */
    if (emitted_ahead (l))
      while (h->n_emitted < h->n_w && h->w[h->n_emitted].start
          + LIVE_START_JITTER < l->last_word_end)
        h->n_emitted++;
    /* times shared out over a segment that began in the prefix may put
     * the first new words inside the committed ones: they start after;
     * and no new word starts before what was promised settled */
    int64_t floor = l->settled > l->win_start ? l->settled : l->win_start;
    /* the window starts on a 10 ms step at or before the last committed
     * word's end: new words start after that end itself */
    if (floor < l->last_word_end)
      floor = l->last_word_end;
    for (i = h->n_emitted; i < h->n_w && h->w[i].start < floor; i++) {
      live_word *w = &h->w[i];
      int t;
      w->start = floor;
      if (w->early < floor)
        w->early = floor;
      if (w->end < w->start)
        w->end = w->start;
      for (t = w->tok0; t < w->tok0 + w->n_tok; t++) {
        if (h->t0[t] < w->start)
          h->t0[t] = w->start;
        if (h->t1[t] < h->t0[t])
          h->t1[t] = h->t0[t];
      }
    }
    hyp_space_words (h, floor);
  }
  if (r->temperature > 0.5f)
    l->n_prompt = 0;

  l->last_run_end = end;
#ifdef WK_TEST_HOOKS
  if (l->run_hook) {
    wk_live_run_info ri = { positions, r->n_tokens, n_given,
      pp.beam_size, t0
    };
    l->run_hook (l->run_hook_user, &ri);
  }
#else
  (void) positions;
  (void) n_given;
#endif
  dt = live_now (l) - t0;
  /* run_estimate reads slots [0, n_run_hist) */
  l->run_hist[l->n_runs % LIVE_RUN_HIST] = dt;
  l->n_runs++;
  if (l->n_run_hist < LIVE_RUN_HIST)
    l->n_run_hist++;
  l->last_run_s = dt;
  if (dt > l->max_run_s)
    l->max_run_s = dt;
  l->run_ema_s = l->n_runs == 1 ? dt : 0.7 * l->run_ema_s + 0.3 * dt;
  if (isfinite (due_at (l, l->total))) {
    /* adapt: step at least as long as a run takes (keeps up with real
     * time), never shorter than the configured step; only for audio that
     * says when it was captured: audio fed without times (a file) is not
     * real time, and its text must not depend on run times */
    int64_t want = (int64_t) (l->run_ema_s * WK_SAMPLE_RATE * 1.1);
    l->step_eff = want > l->step ? want : l->step;
    if (l->step_eff > LIVE_MAX_STEP)
      l->step_eff = LIVE_MAX_STEP;
  }
  return WK_OK;
}

/* run_admitted through the model's gate (scheduler.h), whose deadline
 * order is that of the stream's earliest uncommitted word (the last
 * run's rest, or a word not heard yet); without deadlines (no capture
 * times, agreement) its due time is now + the latency. The wait counts
 * in the run's time: it is part of what the deadline planner has to
 * reckon with. */
static wk_status
run_model (wk_live * l, int64_t end, bool final)
{
  double t0 = live_now (l), key = INFINITY;
  wk_pool *pool;
  int others;
  wk_status st;

  if (l->p.commit == WK_COMMIT_DEADLINE)
    key = next_deadline (l, &l->hyp[l->cur ^ 1]);
  if (!isfinite (key))
    key = t0 + l->lat_s;
  others = wk_gate_enter (l->model->gate, key, &l->ctx->cancel);
  if (others < 0)
    return WK_ERR_STATE;        /* cancelled while waiting */
  /* beside other runs, one thread: two runs on a thread each get more
   * out of the cores than one run on two (the results are the same) */
  pool = l->ctx->pool;
  if (others > 0)
    l->ctx->pool = NULL;
  st = run_admitted (l, end, final, t0);
  l->ctx->pool = pool;
  wk_gate_leave (l->model->gate);
  return st;
}

/* The deadline of the earliest word not committed yet: cur's first word,
 * or a word the runs have not heard yet, which starts after cur's words
 * (or, when it has none, at unheard_floor). */
static double
next_deadline (const wk_live * l, const live_hyp * cur)
{
  int first = cur->n_emitted;
  int64_t unheard = cur->n_w > first ? cur->w[cur->n_w - 1].early :
      unheard_floor (l);
  double d = deadline (l, unheard);

  if (cur->n_w > first && word_deadline (l, &cur->w[first]) < d)
    d = word_deadline (l, &cur->w[first]);
  return d;
}

/* WK_COMMIT_DEADLINE, after a run's agreed words: commits cur's words
 * whose deadline comes before even the soonest next run could finish
 * (as this run heard them: committing late is the alternative), then
 * schedules the next run to finish before the next deadline. Only words
 * this run heard with time of their own: words piled up at the very end
 * of its audio (hyp_space_words lets them overlap there, each 20 ms)
 * have none left once the first is committed, and would be caption cues
 * of no length; they wait for the next run, late rather than empty (on
 * a machine slower than the latency every word's deadline comes before
 * the next run, those heard at the end included). */
static void
deadline_commits (wk_live * l, live_hyp * cur)
{
  double now = live_now (l), r = run_estimate (l);
  double soonest = run_finish (l, l->total + LIVE_DEADLINE_STEP, now, r);
  int64_t prev_end = l->last_word_end;
  int f = cur->n_emitted, i;

  while (f < cur->n_w && word_deadline (l, &cur->w[f]) < soonest) {
    const live_word *w = &cur->w[f];
    if (w->start < prev_end || w->end - w->start < LIVE_TS_SAMPLES)
      break;
    prev_end = w->end;
    f++;
  }
  for (i = cur->n_emitted; i < f; i++) {
    const live_word *w = &cur->w[i];
    if (w->n_tok > 0 && exp (w->sum_lp / w->n_tok) < LIVE_FORCED_MIN_P) {
      /* withheld: handed out as far as later runs are concerned */
      if (w->end > l->last_word_end)
        l->last_word_end = w->end;
      l->n_withheld++;
    } else {
      emit_words (l, cur, i, i + 1);
      l->n_forced++;
    }
  }
  cur->n_emitted = f;
  l->next_run = plan_run (l, next_deadline (l, cur), now, r,
      LIVE_DEADLINE_STEP);
}

/* An intermediate run: commit what two runs agree on. */
static wk_status
step_run (wk_live * l)
{
  live_hyp *prev = &l->hyp[l->cur ^ 1], *cur;
  int k = 0, i;
  wk_status st;

  st = run_model (l, l->total, false);
  if (st != WK_OK)
    return st;
  cur = &l->hyp[l->cur];
  if (prev->n_w > 0 && cur->n_w > 0) {
    for (i = 0; i < prev->n_w && i < cur->n_w; i++)
      if (!words_equal (l, prev, &prev->w[i], cur, &cur->w[i]))
        break;
    k = i;
    /* and only words the earlier run heard to their end: a word cut by
     * that run's window end is often misheard the same way twice */
    while (k > 0 && prev->w[k - 1].end > prev->end - LIVE_COMMIT_MARGIN)
      k--;
  }
  if (k == 0 && l->total - l->win_start > LIVE_MAX_WINDOW) {
    /* no agreement for too long: keep the window under 30 s */
    k = cur->n_w > 1 ? cur->n_w - 1 : cur->n_w;
    if (k == 0) {
      l->win_start = (l->total - 4 * WK_SAMPLE_RATE) / LIVE_HOP * LIVE_HOP;
      unanchor (l);
    }
  }
  commit_words (l, cur, k);
  if (l->p.commit == WK_COMMIT_DEADLINE)
    deadline_commits (l, cur);
  else
    l->next_run = l->total + l->step_eff;
  if (l->total - l->win_start > LIVE_MAX_WINDOW) {
    l->win_start = (l->total - 4 * WK_SAMPLE_RATE) / LIVE_HOP * LIVE_HOP;
    unanchor (l);
  }
  set_partial (l, cur);
  l->cur ^= 1;                  /* this run's rest is the next one's prev */
  return WK_OK;
}

/* Ends the utterance (or flushes): a last run if audio arrived since the
 * previous one, everything committed. speech_end: where the detector put
 * the end (-1: unknown); words starting well after it are dropped. */
static wk_status
final_run (wk_live * l, int64_t speech_end)
{
  live_hyp *h = &l->hyp[l->cur ^ 1];    /* the last run's rest */
  int k;

  if (l->total - l->win_start >= 2 * LIVE_HOP && l->last_run_end < l->total) {
    /* (the window reaches back to the anchor) */
    wk_status st = run_model (l, l->total, true);
    if (st != WK_OK)
      return st;
    h = &l->hyp[l->cur];
    l->cur ^= 1;
  }
  k = h->n_w;
  if (speech_end >= 0)
    while (k > 0 && h->w[k - 1].start > speech_end + WK_SAMPLE_RATE / 5)
      k--;
  commit_words (l, h, k);
  hyp_clear (&l->hyp[0]);
  hyp_clear (&l->hyp[1]);
  utterance_end (l, speech_end >= 0 && speech_end < l->total ? speech_end :
      l->total);
  set_partial (l, NULL);
  l->win_start = l->total / LIVE_HOP * LIVE_HOP;
  unanchor (l);
  l->last_run_end = -1;
  l->n_recent = 0;              /* the next window starts after a pause */
  return WK_OK;
}

/* The audio the detector has judged: up to the last complete chunk. What
 * depends on it while no utterance is open (settled, trimming) is then the
 * same wherever the caller's feeds end. */
static int64_t
heard (const wk_live * l)
{
  return l->total / WK_VAD_CHUNK * WK_VAD_CHUNK;
}

/* Moves settled on after a feed, a flush or the finish: to the end once
 * finished; while no utterance is open, to what the detector can still
 * call the start of speech (run_model moves words that would start before
 * settled to it, so the promise holds even for a late START); in an
 * utterance, to the first word of the partial result, but not past the
 * audio a run has heard, less LIVE_SETTLE_MARGIN for a word its window
 * end cut. Committed words (win_start) are settled whatever else. */
static void
advance_settled (wk_live * l)
{
  int64_t s;

  if (l->finished) {
    s = l->total;
  } else if (!l->in_utt) {
    s = heard (l) - LIVE_PREROLL;
  } else {
    const live_hyp *h = &l->hyp[l->cur ^ 1];    /* the last run's rest */
    s = l->last_run_end >= 0 ? l->last_run_end - LIVE_SETTLE_MARGIN : 0;
    if (h->n_w > h->n_emitted && h->w[h->n_emitted].start < s)
      s = h->w[h->n_emitted].start;
  }
  if (s < l->win_start)
    s = l->win_start;
  if (s < l->last_word_end)
    s = l->last_word_end;
  if (s > l->total)
    s = l->total;
  if (s > l->settled)
    l->settled = s;
}

/* ---- feeding ------------------------------------------------------------- */

/* Drops audio no run will read again. */
static void
trim (wk_live * l)
{
  int64_t keep = l->in_utt ? l->anchor : heard (l) - LIVE_PREROLL;

  keep -= LIVE_HISTORY;
  if (keep < 0)
    keep = 0;
  wk_live_audio_drop (l->audio, &l->len, &l->base, keep / LIVE_HOP * LIVE_HOP);
}

static wk_status
handle_vad_event (wk_live * l, const wk_vad_event * ev)
{
  if (ev->type == WK_VAD_EVENT_SPEECH_START) {
    int64_t s = ev->sample / LIVE_HOP * LIVE_HOP;
    if (l->in_utt)
      return WK_OK;
    if (s < l->base + LIVE_HISTORY)
      s = (l->base + LIVE_HISTORY + LIVE_HOP - 1) / LIVE_HOP * LIVE_HOP;
    if (l->base == 0 && ev->sample < LIVE_HISTORY)
      s = ev->sample / LIVE_HOP * LIVE_HOP;
    if (s < l->win_start)
      s = l->win_start;
    if (s > l->total)
      s = l->total / LIVE_HOP * LIVE_HOP;
    l->win_start = s;
    unanchor (l);
    l->in_utt = true;
    l->speech_start = ev->sample;
    hyp_clear (&l->hyp[0]);
    hyp_clear (&l->hyp[1]);
    l->last_run_end = -1;
    /* a first partial as soon as the window holds half a second (the
     * model guesses wildly on less) */
    l->next_run = s + WK_SAMPLE_RATE / 2;
    if (l->next_run < l->total)
      l->next_run = l->total;
    if (l->p.commit == WK_COMMIT_DEADLINE) {
      /* sooner if the first word's deadline needs it */
      double now = live_now (l), r = run_estimate (l);
      int64_t at = plan_run (l, deadline (l, s), now, r, 0);
      if (at < l->next_run)
        l->next_run = at;
    }
    return WK_OK;
  }
  if (!l->in_utt)
    return WK_OK;
  l->in_utt = false;
  l->speech_seconds += (double) (ev->sample - l->speech_start)
      / WK_SAMPLE_RATE;
  return final_run (l, ev->sample);
}

/* Feeds the detector pcm[0..n-1] (already in the buffer) and handles its
 * events. */
static wk_status
vad_feed (wk_live * l, const float *pcm, size_t n)
{
  while (n > 0) {
    size_t used = wk_vad_feed (l->vad, pcm, n);
    wk_vad_event ev;
    while (wk_vad_pop_event (l->vad, &ev)) {
      wk_status st = handle_vad_event (l, &ev);
      if (st != WK_OK)
        return st;
    }
    if (used == 0)
      break;
    pcm += used;
    n -= used;
  }
  return WK_OK;
}

/* With deadlines, a feed runs the model at most once, at its end: audio
 * that queued up while a run was going (the element feeds it in pieces of
 * up to half a second) is all heard by the next run, and the words a run
 * commits go back to the caller, to be pushed, before another run; two
 * runs in one call would hold the first one's words for the second's
 * time. A feed longer than LIVE_MAX_STEP still runs on the way. Audio fed
 * without due times runs at every step as it comes, so its text does not
 * depend on how it is cut into feeds. */
wk_status
wk_live_feed (wk_live * l, const float *pcm, size_t n, double due_s)
{
  bool timed = isfinite (due_s) && l->p.commit == WK_COMMIT_DEADLINE;
  int64_t runs0 = l->n_runs;

  begin_call (l);
  if (l->finished)
    return WK_ERR_STATE;
  due_record (l, l->total, due_s);
  if (n > 0) {
    /* the pieces the source delivers, from feeds of audio whose last
     * sample came after the previous feed returned: audio that queued up
     * while the caller was busy (a run) comes in a larger feed, which
     * says nothing about them */
    double piece = (double) n / WK_SAMPLE_RATE;
    if (piece > LIVE_MAX_PIECE)
      piece = LIVE_MAX_PIECE;
    if (l->piece_s == 0.0 || !isfinite (due_s)
        || due_s + (double) n / WK_SAMPLE_RATE > l->ret_s)
      l->piece_s = piece;
  }
  while (n > 0) {
    /* pieces end on the detector's chunk grid */
    size_t k = WK_VAD_CHUNK - (size_t) (l->total % WK_VAD_CHUNK);
    float *dst;
    wk_status st;

    if (k > n)
      k = n;
    if (l->len + k > l->cap)
      trim (l);
    if (l->len + k > l->cap) {
      /* cannot happen (forced commits keep the window under 24 s + a
       * step): commit everything rather than lose audio */
      st = final_run (l, -1);
      if (st != WK_OK)
        return st;
      trim (l);
      if (l->len + k > l->cap)
        return WK_ERR_INTERNAL;
    }
    dst = l->audio + l->len;
    wk_live_copy_samples (dst, pcm, k, &l->n_clipped, &l->n_zeroed);
    l->len += k;
    l->total += (int64_t) k;
    if (l->vad) {
      st = vad_feed (l, dst, k);
      if (st != WK_OK)
        return st;
    }
    pcm += k;
    n -= k;
    /* without deadlines a run comes at the first whole chunk from
     * next_run on: it hears the audio the detector has judged, the same
     * however the caller cuts it into feeds */
    if (l->in_utt && l->total >= l->next_run
        && (timed ? n > LIVE_MAX_STEP : l->total % WK_VAD_CHUNK == 0)) {
      st = step_run (l);
      if (st != WK_OK)
        return st;
    }
    if (!l->in_utt && l->len > (size_t) (2 * LIVE_PREROLL))
      trim (l);
    /* after every piece, not only at the feed's end: runs read it */
    advance_settled (l);
  }
  if (timed && l->in_utt && l->total >= l->next_run && l->n_runs == runs0) {
    wk_status st = step_run (l);
    if (st != WK_OK)
      return st;
  }
  advance_settled (l);
  if (isfinite (due_s))
    l->ret_s = live_now (l);
  return WK_OK;
}

wk_status
wk_live_flush (wk_live * l)
{
  wk_status st;

  begin_call (l);
  if (l->finished || !l->in_utt)
    return WK_OK;
  st = final_run (l, -1);
  advance_settled (l);
  return st;
}

wk_status
wk_live_finish (wk_live * l)
{
  wk_status st = WK_OK;

  begin_call (l);
  if (l->finished)
    return WK_OK;
  if (l->vad) {
    wk_vad_event ev;
    wk_vad_finish (l->vad);
    while (wk_vad_pop_event (l->vad, &ev)) {
      wk_status s2 = handle_vad_event (l, &ev);
      if (s2 != WK_OK && st == WK_OK)
        st = s2;
    }
  }
  if (st == WK_OK && l->in_utt) {
    l->in_utt = false;
    st = final_run (l, -1);
  }
  l->finished = true;
  advance_settled (l);
  return st;
}

int64_t
wk_live_fed (const wk_live * l)
{
  return l->total;
}

int64_t
wk_live_settled (const wk_live * l)
{
  int64_t first = wk_results_first_start (&l->out);
  return first >= 0 && first < l->settled ? first : l->settled;
}

size_t
wk_live_take (wk_live * l, const wk_segment ** segs)
{
  return wk_results_take (&l->out, segs);
}

size_t
wk_live_take_max (const wk_live * l)
{
  return (size_t) l->out.segs_cap;
}

size_t
wk_live_partial_bytes_max (const wk_live * l)
{
  return l->part.text_cap;
}

size_t
wk_live_partial (wk_live * l, const wk_segment ** segs, uint64_t * serial)
{
  begin_call (l);
  if (segs)
    *segs = l->part.n_segs ? l->part.segs : NULL;
  if (serial)
    *serial = l->part_serial;
  return (size_t) l->part.n_segs;
}

void
wk_live_get_stats (const wk_live * l, wk_stream_stats * s)
{
  if (!l)
    return;
  s->n_windows += l->n_runs;
  s->mel_seconds += l->mel_seconds;
  s->state_bytes += l->own_bytes + sizeof *l;
  s->n_runs = l->n_runs;
  if (l->vad) {
    wk_vad_stats vs;
    wk_vad_get_stats (l->vad, &vs);
    s->vad_seconds = vs.seconds;
  }
  s->speech_seconds = l->speech_seconds + (l->in_utt && l->vad ?
      (double) (l->total - l->speech_start) / WK_SAMPLE_RATE : 0.0);
  s->step_seconds = (double) l->step_eff / WK_SAMPLE_RATE;
  s->last_run_seconds = l->last_run_s;
  s->max_run_seconds = l->max_run_s;
  s->last_delay_seconds = l->last_delay_s;
  s->max_delay_seconds = l->max_delay_s;
  s->n_committed = l->n_committed;
  s->n_utterances = l->n_utterances;
  s->n_clipped = l->n_clipped;
  s->n_zeroed = l->n_zeroed;
  s->n_deadline_commits = l->n_forced;
  s->n_withheld = l->n_withheld;
  s->n_slow_runs = l->n_slow_runs;
  s->n_late = l->n_late;
  s->max_late_seconds = l->max_late_s;
  s->run_estimate_seconds = l->n_run_hist ? run_estimate (l) : 0.0;
}
