/* The public stream API: audio in, timestamped segments out.
 *
 * Offline policy (latency_ms = 0), as Whisper's transcribe() does it:
 * 30 s windows (2 n_audio_ctx mel frames) starting at `seek`; after each
 * window, seek moves to the last timestamp when the window ended with a
 * complete segment pair, else by the whole window; earlier text (up to
 * max_text_ctx tokens, reset after a window decoded above temperature
 * 0.5) is the prompt.
 *
 * Memory: everything is allocated in wk_stream_new. The audio buffer
 * holds one window plus a few frames of history (for the mel frames
 * that look back) plus one second of slack; wk_stream_feed copies what
 * fits, runs every complete window (a window runs once its last frame
 * has all its samples, so chunking never changes results), drops the
 * audio behind the new seek and goes on. Nothing in feed, flush or
 * finish allocates: the encoder, decoder and decoding buffers are in the
 * wk_ctx, zlib works in a preallocated arena, results go to fixed
 * arrays sized for WK_PENDING_WINDOWS windows of output (if a caller
 * never takes results, the oldest untaken ones are dropped).
 * test-stream.c checks this by counting malloc calls while feeding.
 *
 * The encoder's input is Whisper's: the window's log-mel frames computed
 * from the stream's samples (frame f centred on sample 160 f, so frames
 * near a window's start see the audio before it), normalised over the
 * window's content frames, then padded with 0.0 to 2 n_audio_ctx frames
 * as transcribe() pads a short last segment.
 *
 * The caller's initial_prompt is the first previous text (openai's
 * transcribe() puts it at the start of all_tokens), or, for a model that
 * takes none, the prompt of every window.
 *
 * Token times: a segment's span (from its timestamp tokens) is shared out
 * over its text tokens in proportion to their byte lengths.
 *
 * latency_ms > 0: the live policy (live.c) takes over feeding, flushing
 * and the results; this file only forwards to it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cues.h"
#include "group.h"
#include "align.h"
#include "live.h"
#include "model.h"
#include "results.h"
#include "wk-err.h"
#include "wk-time.h"

#define WK_PENDING_WINDOWS 8
#define WK_HISTORY_FRAMES 3     /* >= 200 samples before a window's frame 0 */
#define WK_SLACK_SAMPLES WK_SAMPLE_RATE
#define WK_TS_SAMPLES WK_TIME_STEP_SAMPLES      /* 2 mel hops */

struct wk_stream
{
  wk_model *model;
  wk_ctx *ctx;
  wk_stream_params p;
  int lang_fixed;               /* configured language index, -1 = detect */
  bool prompt_ignored;          /* wk_stream_prompt_ignored */
  int lang;                     /* in use, -1 = not known yet */
  bool finished;
  int W;                        /* window frames: 2 n_audio_ctx */

  /* audio: samples [base, base + len) of the stream */
  float *audio;
  size_t audio_cap, audio_len;
  int64_t audio_base;
  int64_t total;                /* samples fed */
  int64_t seek;                 /* first frame of the next window */

  /* previous text (prompt), the last prompt_cap tokens */
  int32_t *prompt;
  int n_prompt, prompt_cap;
  /* the caller's initial_prompt, tokenized: the start of the previous
   * text (initial_as_prev), or else read before every window */
  int32_t *initial;
  int n_initial;
  bool initial_as_prev;

  wk_results out;               /* results since the last take */
  char *raw;                    /* one segment's bytes before sanitizing */
  size_t raw_cap;
  int64_t last_end;

  wk_stream_stats stats;
  uint64_t own_bytes;

  wk_live *live;                /* the live policy (latency_ms > 0) */
  wk_group *group;              /* its words grouped (group != WORD) */
  wk_cues *cues;                /* wk_stream_take_cues' */
  char *partial;                /* wk_stream_partial_cue's text */
  size_t partial_cap;
};

/* what a grouper holds between takes */
#define WK_GROUP_MAX_WORDS 1024
#define WK_GROUP_MAX_BYTES (64 * 1024)

wk_stream_params
wk_stream_default_params (void)
{
  wk_stream_params p;

  memset (&p, 0, sizeof p);
  p.language = NULL;
  p.translate = false;
  p.n_threads = 0;
  p.beam_size = 0;              /* the engine's choice */
  p.temperature_inc = 0.2f;
  p.logprob_threshold = -1.0f;
  p.compression_ratio_threshold = 2.4f;
  p.no_speech_threshold = 0.6f;
  p.suppress_blank = true;
  p.no_timestamps = false;
  p.max_text_ctx = 224;
  p.seed = 0;
  p.latency_ms = 0;
  p.use_vad = true;
  p.vad_threshold = 0.5f;
  p.vad_min_silence_ms = 300;
  p.vad_model = NULL;
  p.audio_ctx = WK_AUDIO_CTX_AUTO;
  p.commit = WK_COMMIT_DEADLINE;
  p.word_times = true;
  return p;
}

static void *
stream_alloc (wk_stream * s, size_t n, size_t elem, bool *ok)
{
  return wk_live_calloc (&s->own_bytes, n, elem, ok);
}

/* Only a prompt's last n_text_ctx / 2 - 1 tokens are kept: its last 32 KiB
 * hold them (Whisper's 223 tokens are a few KiB of text), so a huge
 * prompt costs no more to tokenize */
#define WK_PROMPT_MAX_BYTES 32768

/* Tokenizes the caller's initial prompt as openai does (encode (" " +
 * prompt.strip ())) into s->initial, keeping its last n_text_ctx / 2 - 1
 * tokens. */
static wk_status
tokenize_prompt (wk_stream * s, const char *text, char *err, size_t err_size)
{
  const wk_model *m = s->model;
  size_t len = strlen (text), b = 0, e = len, bad;
  int keep = m->hp.n_text_ctx / 2 - 1, n;
  char *buf;
  int32_t *ids;
  bool ok = true;

  bad = wk_utf8_invalid_at (text, len);
  if (bad < len) {
    if (err && err_size)
      snprintf (err, err_size, "stream: initial_prompt is not valid UTF-8 "
          "(byte %zu of %zu)", bad, len);
    return WK_ERR_ARG;
  }
  while (b < e && strchr (" \t\n\r\v\f", text[b]))
    b++;
  while (e > b && strchr (" \t\n\r\v\f", text[e - 1]))
    e--;
  if (e - b > WK_PROMPT_MAX_BYTES) {
    /* cut at a character's start */
    b = e - WK_PROMPT_MAX_BYTES;
    while (b < e && ((unsigned char) text[b] & 0xC0) == 0x80)
      b++;
  }
  if (e == b || keep <= 0)
    return WK_OK;
  buf = malloc (e - b + 1);
  ids = malloc ((e - b + 1) * sizeof *ids);
  if (!buf || !ids) {
    free (buf);
    free (ids);
    wk_set_err (err, err_size, "stream: out of memory");
    return WK_ERR_NOMEM;
  }
  buf[0] = ' ';
  memcpy (buf + 1, text + b, e - b);
  /* a token has at least one byte: e - b + 1 ids always suffice */
  n = wk_tokenizer_encode (m->tok, buf, e - b + 1, ids, (int) (e - b + 1));
  free (buf);
  if (n < 0) {
    free (ids);
    wk_set_err (err, err_size, "stream: out of memory");
    return WK_ERR_NOMEM;
  }
  s->n_initial = n < keep ? n : keep;
  s->initial = stream_alloc (s, (size_t) s->n_initial, sizeof (int32_t), &ok);
  if (ok)                       /* the encoding's last tokens */
    memcpy (s->initial, ids + n - s->n_initial,
        (size_t) s->n_initial * sizeof *ids);
  free (ids);
  if (!ok) {
    s->n_initial = 0;
    wk_set_err (err, err_size, "stream: out of memory");
    return WK_ERR_NOMEM;
  }
  return WK_OK;
}

/* The previous text a stream starts with: the initial prompt, when the
 * model takes previous text. */
static void
seed_prompt (wk_stream * s)
{
  s->n_prompt = 0;
  if (s->initial_as_prev && s->n_initial > 0)
    wk_live_prompt_push (s->prompt, &s->n_prompt, s->prompt_cap,
        s->p.max_text_ctx, s->initial, s->n_initial);
}

wk_status
wk_stream_new (wk_model * model, const wk_stream_params * params,
    wk_stream ** out, char *err, size_t err_size)
{
  wk_stream *s;
  wk_stream_params p = params ? *params : wk_stream_default_params ();
  const wk_hparams *hp;
  wk_model_info info;
  wk_status st;
  bool ok = true;
  int T, max_seg_tokens;

  if (err && err_size)
    err[0] = '\0';
  if (!out) {
    wk_set_err (err, err_size, "stream: no output pointer");
    return WK_ERR_ARG;
  }
  *out = NULL;
  if (!model) {
    wk_set_err (err, err_size, "stream: no model");
    return WK_ERR_ARG;
  }
  hp = &model->hp;
  T = hp->n_text_ctx;
  if (p.beam_size > WK_MAX_BEAM_SIZE || p.beam_size < 0) {
    wk_set_err (err, err_size, "stream: beam_size must be in [0, %d]",
        WK_MAX_BEAM_SIZE);
    return WK_ERR_ARG;
  }
  if (p.beam_size == 0)
    p.beam_size = p.latency_ms > 0 ? WK_DEFAULT_LIVE_BEAM_SIZE :
        WK_DEFAULT_BEAM_SIZE;
  if (p.group != WK_GROUP_WORD && p.group != WK_GROUP_PHRASE
      && p.group != WK_GROUP_UTTERANCE) {
    wk_set_err (err, err_size, "stream: group must be WK_GROUP_WORD, "
        "WK_GROUP_PHRASE or WK_GROUP_UTTERANCE");
    return WK_ERR_ARG;
  }
  if (p.commit != WK_COMMIT_DEADLINE && p.commit != WK_COMMIT_AGREEMENT) {
    wk_set_err (err, err_size, "stream: commit must be WK_COMMIT_DEADLINE or "
        "WK_COMMIT_AGREEMENT");
    return WK_ERR_ARG;
  }
  if (p.temperature_inc < 0.0f || p.temperature_inc > 1.0f
      || p.max_text_ctx < 0) {
    wk_set_err (err, err_size, "stream: temperature_inc must be in [0, 1] and "
        "max_text_ctx >= 0");
    return WK_ERR_ARG;
  }
  if (p.audio_ctx < WK_AUDIO_CTX_SHORT) {
    wk_set_err (err, err_size, "stream: audio_ctx must be WK_AUDIO_CTX_AUTO, "
        "_FULL, _SHORT or a number of positions");
    return WK_ERR_ARG;
  }

  s = calloc (1, sizeof *s);
  if (!s) {
    wk_set_err (err, err_size, "stream: out of memory");
    return WK_ERR_NOMEM;
  }
  s->lang_fixed = -1;
  if (p.language && p.language[0] && strcmp (p.language, "auto") != 0) {
    int idx = wk_language_lookup (p.language);

    if (idx < 0 || (model->multilingual && idx >= model->sp.n_langs)) {
      wk_set_err (err, err_size, "stream: unknown language: %s", p.language);
      free (s);
      return WK_ERR_ARG;
    }
    /* an English-only model would turn other speech into English-looking
     * nonsense: say so instead */
    if (!model->multilingual && strcmp (wk_language_code (idx), "en") != 0) {
      wk_set_err (err, err_size, "stream: this model is English-only and "
          "cannot transcribe language %s", p.language);
      free (s);
      return WK_ERR_ARG;
    }
    if (model->multilingual)
      s->lang_fixed = idx;
  }
  p.language = NULL;            /* not kept: the caller's strings */
  p.initial_prompt = NULL;
  s->p = p;
  s->lang = s->lang_fixed;

  st = wk_ctx_new (model, p.n_threads, p.beam_size > 1 ? p.beam_size : 1,
      &s->ctx, err, err_size);
  if (st != WK_OK) {
    free (s);
    return st;
  }
  s->model = model;             /* the ctx holds the stream's reference */
  if (p.word_times && model->n_align_heads > 0 && !wk_align_ctx_alloc (s->ctx)) {
    wk_set_err (err, err_size, "stream: out of memory for word times");
    wk_ctx_free (s->ctx);
    free (s);
    return WK_ERR_NOMEM;
  }
  s->W = 2 * hp->n_audio_ctx;
  s->audio_cap = (size_t) (s->W + WK_HISTORY_FRAMES + 2) * WK_HOP
      + WK_SLACK_SAMPLES;
  s->audio = wk_live_scratch (&s->own_bytes, s->audio_cap, sizeof (float), &ok);
  s->prompt_cap = T / 2;
  s->prompt = stream_alloc (s, (size_t) s->prompt_cap, sizeof (int32_t), &ok);

  /* a window yields at most T/2 tokens, and a segment has at least 2 */
  max_seg_tokens = T / 2 + 1;
  s->raw_cap = ((size_t) max_seg_tokens) * (model->max_token_bytes + 1) + 1;
  s->raw = stream_alloc (s, s->raw_cap, 1, &ok);
  {
    int segs = WK_PENDING_WINDOWS * (max_seg_tokens / 2 + 2);
    if (ok)
      ok = wk_results_init (&s->out, segs, WK_PENDING_WINDOWS * max_seg_tokens,
          WK_PENDING_WINDOWS * (s->raw_cap * 3 + (size_t) segs
              / WK_PENDING_WINDOWS + 16), &s->own_bytes);
  }
  if (!ok) {
    wk_set_err (err, err_size, "stream: out of memory");
    wk_stream_free (s);
    return WK_ERR_NOMEM;
  }
  if (params && params->initial_prompt) {
    st = tokenize_prompt (s, params->initial_prompt, err, err_size);
    if (st != WK_OK) {
      wk_stream_free (s);
      return st;
    }
    wk_model_get_info (model, &info);
    s->prompt_ignored = params->initial_prompt[0]
        && info.max_prompt_tokens == 0;
  }
  s->initial_as_prev = p.latency_ms == 0 && p.max_text_ctx > 0
      && model->max_text_ctx > 0;
  seed_prompt (s);
  s->ctx->rng = p.seed ^ 0x5851f42d4c957f2dull;
  atomic_init (&s->ctx->cancel, false);
  if (s->p.latency_ms != 0) {
    /* the resolved parameters (beam_size); vad_model is still the
     * caller's string, read by wk_live_new only */
    st = wk_live_new (s->ctx, &s->p, &s->lang, &s->live, err, err_size);
    if (st != WK_OK) {
      wk_stream_free (s);
      return st;
    }
    s->p.vad_model = NULL;
    wk_live_set_prompt (s->live, s->initial, s->n_initial);
    if (s->p.group != WK_GROUP_WORD) {
      s->group = wk_group_new (s->p.group, WK_GROUP_MAX_WORDS,
          WK_GROUP_MAX_BYTES, &s->own_bytes);
      if (!s->group) {
        wk_set_err (err, err_size, "stream: out of memory");
        wk_stream_free (s);
        return WK_ERR_NOMEM;
      }
    }
  }
  s->cues = wk_cues_new (s->group ? WK_GROUP_MAX_WORDS : s->live ?
      wk_live_take_max (s->live) : (size_t) s->out.segs_cap, p.text_lines,
      s->live && !s->group, &s->own_bytes);
  if (s->live) {
    s->partial_cap = wk_live_partial_bytes_max (s->live) + 1;
    s->partial = stream_alloc (s, s->partial_cap, 1, &ok);
  }
  if (!s->cues || !ok) {
    wk_set_err (err, err_size, "stream: out of memory");
    wk_stream_free (s);
    return WK_ERR_NOMEM;
  }
  *out = s;
  return WK_OK;
}

void
wk_stream_free (wk_stream * s)
{
  if (!s)
    return;
  free (s->audio);
  free (s->prompt);
  free (s->initial);
  wk_results_free (&s->out);
  free (s->raw);
  wk_live_free (s->live);
  wk_group_free (s->group);
  wk_cues_free (s->cues);
  free (s->partial);
  wk_ctx_free (s->ctx);         /* drops the model reference last */
  free (s);
}

/* ---- results ------------------------------------------------------------- */

/* Results handed out by the last take are released by the next call. */
static void
begin_call (wk_stream * s)
{
  wk_results_begin (&s->out);
}

/* Adds the segment tokens[0..n-1] spanning [start, end) samples. Returns
 * false when it is empty (no text, or no duration), as Whisper clears
 * those. */
static bool
add_segment (wk_stream * s, const wk_window_result * r, const int32_t * tok,
    const float *prob, int n, int64_t start, int64_t end, int64_t offset,
    int al_first)
{
  const wk_model *m = s->model;
  size_t raw_len = 0;
  int i, n_text = 0;
  int64_t total_bytes = 0, cum = 0;
  wk_segment *seg;
  bool any = false;

  for (i = 0; i < n; i++) {
    size_t tl = 0;
    const char *t;
    if (tok[i] >= m->sp.eot)
      continue;
    t = wk_tokenizer_bytes (m->tok, tok[i], &tl);
    if (!t || raw_len + tl >= s->raw_cap)
      break;
    memcpy (s->raw + raw_len, t, tl);
    raw_len += tl;
    n_text++;
  }
  for (i = 0; i < (int) raw_len; i++)
    if (!strchr (" \t\n\r\v\f", s->raw[i]))
      any = true;
  if (start < s->last_end)
    start = s->last_end;
  if (end < start)
    end = start;
  if (!any || end == start)
    return false;

  seg = wk_results_add (&s->out, s->raw, raw_len, true, NULL, n_text);
  seg->start = start;
  seg->end = end;
  seg->avg_logprob = r->avg_logprob;
  seg->no_speech_prob = r->no_speech_prob;

  /* token times: the segment's span shared out in proportion to the
   * tokens' byte lengths */
  for (i = 0; i < n; i++) {
    size_t tl = 0;
    if (tok[i] < m->sp.eot) {
      wk_tokenizer_bytes (m->tok, tok[i], &tl);
      total_bytes += (int64_t) tl;
    }
  }
  if (total_bytes == 0)
    total_bytes = 1;
  for (i = 0; i < n && seg->n_tokens < n_text; i++) {
    wk_token *t;
    size_t tl = 0;
    if (tok[i] >= m->sp.eot)
      continue;
    if (!(t = wk_results_token (&s->out, seg)))
      break;
    t->id = tok[i];
    t->p = prob[i];
    t->text = wk_tokenizer_bytes (m->tok, tok[i], &tl);
    t->start = start + (end - start) * cum / total_bytes;
    cum += (int64_t) tl;
    t->end = start + (end - start) * cum / total_bytes;
    seg->p += t->p;
  }
  if (seg->n_tokens > 0)
    seg->p /= (float) seg->n_tokens;
  /* the DTW times of this segment's text tokens (the window's text from
   * al_first on), when the window was aligned */
  if (al_first >= 0) {
    wk_ctx *ctx = s->ctx;
    int T1 = s->model->hp.n_text_ctx + 1, k = al_first, nt = seg->n_tokens;
    int32_t *ids = ctx->al_text + k, *f0 = ids + T1, *f1 = f0 + T1;
    if (k + nt <= T1
        && wk_align_segment (ctx, ids, nt, f0, f1, offset, start, end)) {
      for (i = 0; i < nt; i++) {
        wk_token *t = &s->out.toks[s->out.n_toks - nt + i];
        t->start = offset + (int64_t) f0[i] * WK_ALIGN_POS_SAMPLES;
        t->end = offset + (int64_t) f1[i] * WK_ALIGN_POS_SAMPLES;
        if (t->start < start)
          t->start = start;
        if (t->end > end)
          t->end = end;
      }
    }
  }
  s->last_end = end;
  wk_live_prompt_push (s->prompt, &s->n_prompt, s->prompt_cap,
      s->p.max_text_ctx, tok, n);
  return true;
}

/* ---- windows ---------------------------------------------------------- */

/* The DTW times of the text tokens of r (a window with n_frames frames of
 * audio) into ctx->al_text: ids, then start and end positions. False
 * when the stream has no word times or the pass failed (the segments
 * keep their byte-share times). */
static bool
align_window (wk_stream * s, const wk_window_result * r, int n_frames)
{
  wk_ctx *ctx = s->ctx;
  int T1 = s->model->hp.n_text_ctx + 1, i, k = 0;
  int32_t *ids = ctx->al_text;
  wk_status st;

  if (!wk_align_ready (ctx))
    return false;
  for (i = 0; i < r->n_tokens && k < T1; i++)
    if (r->tokens[i] < s->model->sp.eot)
      ids[k++] = r->tokens[i];
  if (k == 0)
    return false;
  /* the lead row: an offline window starts on whatever came before the
   * first word (on the development set, 0.052 s mean start error with it,
   * 0.062 s without) */
  st = wk_align_window (ctx, s->lang, s->p.translate, true, ids, k,
      (n_frames + 1) / 2, ids + T1, ids + 2 * T1);
  return st == WK_OK;
}

/* Which of the window's text tokens the slice from r->tokens[at] starts
 * with, or -1 when the window was not aligned. */
static int
text_index (wk_stream * s, const wk_window_result * r, int at, bool al)
{
  int i, k = 0;

  if (!al)
    return -1;
  for (i = 0; i < at; i++)
    if (r->tokens[i] < s->model->sp.eot)
      k++;
  return k;
}

/* Runs the window at s->seek with n_frames frames of content (the rest
 * padded) and advances seek. */
static wk_status
run_window (wk_stream * s, int n_frames)
{
  wk_ctx *ctx = s->ctx;
  const wk_model *m = s->model;
  const wk_window_result *r;
  int64_t first, offset, window_end;
  const float *audio;
  size_t n_audio;
  int tb = m->sp.timestamp_begin, i, n, n_cons = 0, last_slice = 0;
  bool single_ending, al;
  wk_status st;
  double t0;

  /* frames are relative to audio[0], i.e. sample s->audio_base */
  audio = s->audio;
  n_audio = s->audio_len;
  first = s->seek - s->audio_base / WK_HOP;

  t0 = wk_now_s ();
  wk_model_window_mel (m, audio, n_audio, first, n_frames, ctx->mel);
  s->stats.mel_seconds += wk_now_s () - t0;

  st = wk_encode (ctx, ctx->mel, s->W);
  if (st != WK_OK)
    return st;
  s->stats.n_windows++;

  if (s->lang < 0 && m->multilingual)
    s->lang = wk_detect_language (ctx, NULL);

  {
    wk_prompt pr = { NULL, 0, s->prompt, s->n_prompt };
    if (!s->initial_as_prev) {
      pr.head = s->initial;
      pr.n_head = s->n_initial;
    }
    st = wk_decode_window (ctx, &s->p, s->lang, &pr, NULL, 0, &r);
  }
  if (st != WK_OK)
    return st;

  offset = s->seek * WK_HOP;
  window_end = (s->seek + n_frames) * WK_HOP;
  n = r->n_tokens;

  /* no speech: skip the window */
  if (r->no_speech_prob > s->p.no_speech_threshold
      && !(r->avg_logprob > s->p.logprob_threshold)) {
    s->seek += n_frames;
    return WK_OK;
  }

  al = align_window (s, r, n_frames);
  single_ending = n >= 2 && r->tokens[n - 2] < tb && r->tokens[n - 1] >= tb;
  for (i = 1; i < n; i++) {
    if (r->tokens[i - 1] >= tb && r->tokens[i] >= tb) {
      int64_t a = r->tokens[last_slice] >= tb ?
          offset + (int64_t) (r->tokens[last_slice] - tb) * WK_TS_SAMPLES :
          offset;
      int64_t b = offset + (int64_t) (r->tokens[i - 1] - tb) * WK_TS_SAMPLES;
      if (b > window_end)
        b = window_end;
      add_segment (s, r, r->tokens + last_slice, r->probs + last_slice,
          i - last_slice, a, b, offset, text_index (s, r, last_slice, al));
      last_slice = i;
      n_cons++;
    }
  }
  if (n_cons > 0) {
    if (single_ending) {
      int64_t a = r->tokens[last_slice] >= tb ?
          offset + (int64_t) (r->tokens[last_slice] - tb) * WK_TS_SAMPLES :
          offset;
      int64_t b = offset + (int64_t) (r->tokens[n - 1] - tb) * WK_TS_SAMPLES;
      if (b > window_end)
        b = window_end;
      add_segment (s, r, r->tokens + last_slice, r->probs + last_slice,
          n - last_slice, a, b, offset, text_index (s, r, last_slice, al));
      s->seek += n_frames;
    } else {
      /* the unfinished segment is decoded again from its start */
      int64_t adv = (int64_t) (r->tokens[last_slice - 1] - tb) * 2;
      if (adv <= 0 || adv > n_frames)
        adv = n_frames;
      s->seek += adv;
    }
  } else {
    int64_t dur = (int64_t) n_frames * WK_HOP;
    for (i = n - 1; i >= 0; i--) {
      if (r->tokens[i] >= tb) {
        if (r->tokens[i] != tb)
          dur = (int64_t) (r->tokens[i] - tb) * WK_TS_SAMPLES;
        break;
      }
    }
    if (offset + dur > window_end)
      dur = window_end - offset;
    add_segment (s, r, r->tokens, r->probs, n, offset, offset + dur, offset,
        al ? 0 : -1);
    s->seek += n_frames;
  }
  if (r->temperature > 0.5f)
    s->n_prompt = 0;            /* don't condition on high-temperature text */
  return WK_OK;
}

/* Drops audio no window will need again. */
static void
trim_audio (wk_stream * s)
{
  int64_t keep = s->seek - WK_HISTORY_FRAMES;

  if (keep < 0)
    keep = 0;
  wk_live_audio_drop (s->audio, &s->audio_len, &s->audio_base, keep * WK_HOP);
}

/* Runs every window whose frames all have their samples. */
static wk_status
run_complete_windows (wk_stream * s)
{
  for (;;) {
    int64_t need = (s->seek + s->W) * WK_HOP + WK_N_FFT / 2;
    wk_status st;
    if (s->audio_base + (int64_t) s->audio_len < need)
      return WK_OK;
    st = run_window (s, s->W);
    trim_audio (s);
    if (st != WK_OK)
      return st;
  }
}

void
wk_stream_cancel (wk_stream * s)
{
  if (s)
    atomic_store_explicit (&s->ctx->cancel, true, memory_order_relaxed);
}

double
wk_clock_seconds (void)
{
  return wk_now_s ();
}

wk_status
wk_stream_feed (wk_stream * s, const float *pcm, size_t n)
{
  /* no capture times: no deadlines (the text does not depend on how long
   * runs take); wk_stream_feed_at gives them */
  return wk_stream_feed_at (s, pcm, n, INFINITY);
}

wk_live *
wk_stream_live (wk_stream * s)
{
  return s ? s->live : NULL;
}

wk_status
wk_stream_feed_at (wk_stream * s, const float *pcm, size_t n, double due_s)
{
  if (!s || (!pcm && n) || isnan (due_s) || due_s == -INFINITY)
    return WK_ERR_ARG;
  if (s->finished || wk_ctx_cancelled (s->ctx))
    return WK_ERR_STATE;
  begin_call (s);
  if (s->live) {
    /* what the policy took: a feed a cancel stopped took part of it */
    int64_t before = wk_live_fed (s->live);
    wk_status st = wk_live_feed (s->live, pcm, n, due_s);
    int64_t took = wk_live_fed (s->live) - before;

    s->total += took;
    s->stats.audio_seconds += (double) took / WK_SAMPLE_RATE;
    return st;
  }
  while (n > 0) {
    size_t space, k;
    wk_status st;

    trim_audio (s);
    space = s->audio_cap - s->audio_len;
    if (space == 0)
      return WK_ERR_INTERNAL;   /* cannot happen: a full buffer holds a window */
    k = n < space ? n : space;
    wk_live_copy_samples (s->audio + s->audio_len, pcm, k,
        &s->stats.n_clipped, &s->stats.n_zeroed);
    s->audio_len += k;
    s->total += (int64_t) k;
    s->stats.audio_seconds += (double) k / WK_SAMPLE_RATE;
    pcm += k;
    n -= k;
    st = run_complete_windows (s);
    if (st != WK_OK)
      return st;
  }
  return WK_OK;
}

wk_status
wk_stream_feed_s16 (wk_stream * s, const int16_t * pcm, size_t n)
{
  float buf[2048];

  if (!s || (!pcm && n))
    return WK_ERR_ARG;
  while (n > 0) {
    size_t k = n < 2048 ? n : 2048, i;
    wk_status st;
    for (i = 0; i < k; i++)
      buf[i] = pcm[i] / 32768.0f;
    st = wk_stream_feed (s, buf, k);
    if (st != WK_OK)
      return st;
    pcm += k;
    n -= k;
  }
  return s->finished ? WK_ERR_STATE : WK_OK;
}

/* Live, grouped: what the policy committed goes into the open group,
 * which closes (a flush or the finish ends the phrase or utterance). */
static void
close_group (wk_stream * s)
{
  const wk_segment *words;
  size_t n;

  if (!s->group)
    return;
  n = wk_live_take (s->live, &words);
  wk_group_add (s->group, words, n);
  wk_group_close (s->group);
}

wk_status
wk_stream_flush (wk_stream * s)
{
  int64_t content;

  if (!s)
    return WK_ERR_ARG;
  if (wk_ctx_cancelled (s->ctx))
    return WK_ERR_STATE;
  if (s->finished)
    return WK_OK;
  begin_call (s);
  if (s->live) {
    wk_status st = wk_live_flush (s->live);
    close_group (s);
    return st;
  }
  /* Whisper's content frames: floor (samples / hop) */
  content = s->total / WK_HOP;
  while (s->seek < content) {
    int64_t left = content - s->seek;
    int nf = left < s->W ? (int) left : s->W;
    wk_status st = run_window (s, nf);
    trim_audio (s);
    if (st != WK_OK)
      return st;
  }
  return WK_OK;
}

wk_status
wk_stream_finish (wk_stream * s)
{
  wk_status st;

  if (!s)
    return WK_ERR_ARG;
  if (wk_ctx_cancelled (s->ctx))
    return WK_ERR_STATE;
  if (s->finished)
    return WK_OK;
  if (s->live) {
    begin_call (s);
    st = wk_live_finish (s->live);
    close_group (s);
  } else {
    st = wk_stream_flush (s);
  }
  s->finished = true;
  return st;
}

void
wk_stream_reset (wk_stream * s)
{
  if (!s)
    return;
  wk_results_clear (&s->out);
  s->audio_len = 0;
  s->audio_base = 0;
  s->total = 0;
  s->seek = 0;
  seed_prompt (s);
  s->last_end = 0;
  s->finished = false;
  s->lang = s->lang_fixed;
  s->ctx->rng = s->p.seed ^ 0x5851f42d4c957f2dull;
  atomic_store_explicit (&s->ctx->cancel, false, memory_order_relaxed);
  wk_live_reset (s->live);
  if (s->group)
    wk_group_reset (s->group);
  wk_cues_reset (s->cues, 0);
}

size_t
wk_stream_take (wk_stream * s, const wk_segment ** segs)
{
  if (!s) {
    if (segs)
      *segs = NULL;
    return 0;
  }
  begin_call (s);
  if (s->group) {
    const wk_segment *words;
    size_t n = wk_live_take (s->live, &words);
    wk_group_add (s->group, words, n);
    return wk_group_take (s->group, segs);
  }
  if (s->live)
    return wk_live_take (s->live, segs);
  return wk_results_take (&s->out, segs);
}

size_t
wk_stream_take_cues (wk_stream * s, const wk_cue ** cues)
{
  const wk_segment *segs;
  size_t n;

  if (cues)
    *cues = NULL;
  if (!s)
    return 0;
  n = wk_stream_take (s, &segs);
  return wk_cues_make (s->cues, segs, n, s->total, wk_stream_settled (s),
      s->finished, cues);
}

void
wk_stream_cues_from (wk_stream * s, int64_t from)
{
  if (s)
    wk_cues_reset (s->cues, from);
}

int64_t
wk_stream_settled (const wk_stream * s)
{
  int64_t settled, first;

  if (!s)
    return 0;
  if (s->group) {
    int64_t g = wk_group_pending_start (s->group);
    settled = wk_live_settled (s->live);
    return g >= 0 && g < settled ? g : settled;
  }
  if (s->live)
    return wk_live_settled (s->live);
  /* windows run from seek on; once finished everything is */
  settled = s->finished ? s->total : s->seek * WK_HOP;
  if (settled > s->total)
    settled = s->total;
  first = wk_results_first_start (&s->out);
  if (first >= 0 && first < settled)
    settled = first;
  return settled;
}

size_t
wk_stream_partial (wk_stream * s, const wk_segment ** segs, uint64_t * serial)
{
  if (segs)
    *segs = NULL;
  if (serial)
    *serial = 0;
  if (!s)
    return 0;
  begin_call (s);
  if (!s->live)
    return 0;
  return wk_live_partial (s->live, segs, serial);
}

size_t
wk_stream_partial_cue (wk_stream * s, wk_cue * cue, uint64_t * serial)
{
  const wk_segment *w;
  size_t n = wk_stream_partial (s, &w, serial), i, len = 0, k;
  double stability = 1.0;

  if (!cue)
    return n;
  memset (cue, 0, sizeof *cue);
  cue->kind = WK_CUE_TEXT;
  cue->before = cue->text = cue->after = "";
  cue->p = 1.0;
  if (!s)
    return 0;
  for (i = 0; i < n && s->partial; i++) {
    k = strlen (w[i].text);
    /* cannot happen: the words' text with a NUL each fits */
    if (len + 1 + k >= s->partial_cap)
      break;
    if (i > 0 && w[i].space_before)
      s->partial[len++] = ' ';
    memcpy (s->partial + len, w[i].text, k);
    len += k;
    if (w[i].stability < stability)
      stability = w[i].stability;
  }
  if (s->partial) {
    s->partial[len] = '\0';
    cue->text = s->partial;
  }
  cue->start = n ? w[0].start : s->total;
  cue->end = n ? w[n - 1].end : cue->start;
  cue->p = stability;
  return n;
}

size_t
wk_stream_language_probs (const wk_stream * s, wk_language_prob * out,
    size_t max)
{
  const float *pr;
  bool used[WK_N_LANGUAGES] = { false };
  size_t k;
  int n;

  if (!s || !out || max == 0)
    return 0;
  if (!s->model->multilingual || s->lang_fixed >= 0) {
    out[0].code = wk_stream_language (s);
    out[0].p = 1.0f;
    return 1;
  }
  if (s->lang < 0)
    return 0;
  /* the detection that chose s->lang (no other runs once it is known) */
  pr = s->ctx->lang_probs;
  n = s->model->sp.n_langs < WK_N_LANGUAGES ? s->model->sp.n_langs :
      WK_N_LANGUAGES;
  for (k = 0; k < max && k < (size_t) n; k++) {
    int i, best = -1;
    for (i = 0; i < n; i++)
      if (!used[i] && (best < 0 || pr[i] > pr[best]))
        best = i;
    used[best] = true;
    out[k].code = wk_language_code (best);
    out[k].p = pr[best];
  }
  return k;
}

wk_ctx *
wk_stream_ctx (wk_stream * s)
{
  return s ? s->ctx : NULL;
}

bool
wk_stream_prompt_ignored (const wk_stream * s)
{
  return s && s->prompt_ignored;
}

const char *
wk_stream_language (const wk_stream * s)
{
  if (!s)
    return NULL;
  if (!s->model->multilingual)
    return "en";
  return s->lang >= 0 ? wk_language_code (s->lang) : NULL;
}

void
wk_stream_get_stats (const wk_stream * s, wk_stream_stats * stats)
{
  if (!stats)
    return;
  memset (stats, 0, sizeof *stats);
  if (!s)
    return;
  *stats = s->stats;
  stats->encoder_seconds = s->ctx->t_encoder;
  stats->decoder_seconds = s->ctx->t_decoder;
  stats->n_tokens = s->ctx->n_decoder_tokens;
  stats->n_shared_steps = s->ctx->n_shared_steps;
  stats->align_seconds = s->ctx->t_align;
  stats->n_aligned = s->ctx->n_aligned;
  stats->state_bytes = wk_ctx_state_bytes (s->ctx) + s->own_bytes + sizeof *s;
  wk_live_get_stats (s->live, stats);
}

size_t
wk_stream_stats_list (const wk_stream_stats * st, wk_stat * out, size_t max)
{
  double busy = st->mel_seconds + st->encoder_seconds + st->decoder_seconds +
      st->vad_seconds;
#define SEC(name, v) { name, false, v }
#define NUM(name, v) { name, true, (double) (v) }
  const wk_stat list[] = {
    SEC ("audio-seconds", st->audio_seconds),
    SEC ("mel-seconds", st->mel_seconds),
    SEC ("encoder-seconds", st->encoder_seconds),
    SEC ("decoder-seconds", st->decoder_seconds),
    SEC ("vad-seconds", st->vad_seconds),
    SEC ("speech-seconds", st->speech_seconds),
    SEC ("real-time-factor",
        st->audio_seconds > 0 ? busy / st->audio_seconds : 0.0),
    SEC ("max-delay", st->max_delay_seconds),
    SEC ("last-delay", st->last_delay_seconds),
    SEC ("step-seconds", st->step_seconds),
    NUM ("runs", st->n_runs),
    NUM ("windows", st->n_windows),
    NUM ("tokens", st->n_tokens),
    NUM ("words", st->n_committed),
    NUM ("utterances", st->n_utterances),
    NUM ("state-bytes", st->state_bytes),
    NUM ("deadline-commits", st->n_deadline_commits),
    NUM ("late-words", st->n_late),
    SEC ("max-lateness", st->max_late_seconds),
    SEC ("run-estimate", st->run_estimate_seconds),
    NUM ("clipped-samples", st->n_clipped),
    NUM ("zeroed-samples", st->n_zeroed),
    SEC ("last-run-seconds", st->last_run_seconds),
    SEC ("max-run-seconds", st->max_run_seconds),
    SEC ("align-seconds", st->align_seconds),
    NUM ("aligned-windows", st->n_aligned),
    NUM ("shared-steps", st->n_shared_steps),
    NUM ("slow-runs", st->n_slow_runs),
    NUM ("withheld-words", st->n_withheld),
  };
#undef SEC
#undef NUM
  size_t n = sizeof list / sizeof list[0];

  if (out && max > 0)
    memcpy (out, list, (max < n ? max : n) * sizeof *out);
  return n;
}
