/* whisperknot: speech to text in a GStreamer element. */

/**
 * SECTION:element-whisperknot
 * @title: whisperknot
 *
 * whisperknot transcribes mono 16 kHz speech with a Whisper-architecture
 * model mapped read-only from a knot file (`whisperknot-convert` makes one
 * from whisper.cpp, OpenAI or Hugging Face weights). Each `text/x-raw,
 * format=utf8` buffer is one recognized segment or, with a
 * #GstWhisperKnot:latency, one committed word or phrase, timed as its
 * speech; GAP events cover the time no more text can come for.
 *
 * The model loads on a thread of its own from NULL to READY; READY to
 * PAUSED waits for it. Recognition runs on the source pad's task, fed
 * through a bounded queue. Input times go through #GstAudioStreamAlign:
 * a hole up to 2 s (lost packets, a short GAP) is filled with sound that
 * continues the audio on both sides; anything else (a step back,
 * a larger jump, a new segment, EOS) transcribes what came before and
 * restarts at the new time. Properties are read from READY to PAUSED.
 *
 * Downstream also gets a stream-scoped `language-code` tag, a
 * #GstCustomMeta `GstWhisperKnotTextMeta` (`probability`, `language`) on
 * every buffer and, live, the event `rstranscribe/final-transcript` after
 * each utterance. Element messages: `whisperknot-language`,
 * `whisperknot-partial` (the words not committed yet, also carried by a
 * requested `partial_src` pad) and `whisperknot-qos` (a late word).
 * README.md describes them in full.
 *
 * ## Example pipelines
 * |[
 * gst-launch-1.0 filesrc location=jfk.wav ! wavparse ! audioconvert ! \
 *     audioresample ! whisperknot model=tiny.en.knot ! srtenc ! \
 *     filesink location=jfk.srt
 * ]| Writes SubRip subtitles (srtenc comes with gst-plugins-bad).
 * |[
 * gst-launch-1.0 autoaudiosrc ! audioconvert ! audioresample ! \
 *     whisperknot latency=1000 text-lines=true ! fdsink fd=1
 * ]| Prints what the microphone hears, a line per utterance.
 */

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <math.h>
#include <string.h>

#include <gst/audio/audio.h>

#include "gstwhisperknot.h"
#include "whisperknot.h"

GST_DEBUG_CATEGORY_STATIC (whisperknot_debug);
#define GST_CAT_DEFAULT whisperknot_debug

#define DEFAULT_ALIGNMENT_THRESHOLD (40 * GST_MSECOND)
#define DEFAULT_DISCONT_WAIT (1 * GST_SECOND)
#define MAX_DISCONT_WAIT (10 * GST_SECOND)
#define MAX_LATENCY 30000
/* samples per feed: the worker sees flushes between feeds; live, a run
 * per feed at most, so a backlog goes in one */
#define FEED_CHUNK (WK_SAMPLE_RATE / 2)
#define LIVE_FEED_CHUNK (2 * WK_SAMPLE_RATE)
/* an input hole up to this is lost audio (concealed): a dropout splits no
 * sentence */
#define FILL_MAX (2 * GST_SECOND)
#define MIN_TEXT_DURATION (WK_TIME_STEP_SAMPLES * GST_SECOND / WK_SAMPLE_RATE)

#define SRC_CAPS "text/x-raw, format = (string) utf8"
#define MODEL_HINT "Convert a Whisper model (whisper.cpp's ggml .bin, " \
    "OpenAI's .pt or a Hugging Face checkpoint) with whisperknot-convert " \
    "and set the model property to the .knot file, see the README"

static GstStaticPadTemplate sink_template = GST_STATIC_PAD_TEMPLATE ("sink",
    GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS ("audio/x-raw, "
        "format = (string) { F32LE, S16LE }, rate = (int) 16000, "
        "channels = (int) 1, layout = (string) interleaved"));
static GstStaticPadTemplate src_template = GST_STATIC_PAD_TEMPLATE ("src",
    GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS (SRC_CAPS));
static GstStaticPadTemplate partial_src_template =
GST_STATIC_PAD_TEMPLATE ("partial_src", GST_PAD_SRC, GST_PAD_REQUEST,
    GST_STATIC_CAPS (SRC_CAPS));

enum
{
  PROP_0, PROP_MODEL, PROP_LANGUAGE, PROP_TRANSLATE, PROP_LATENCY,
  PROP_THREADS, PROP_BEAM_SIZE, PROP_LANGUAGE_CODE, PROP_MAX_OBSERVED_DELAY,
  PROP_LATENESS, PROP_VAD, PROP_VAD_THRESHOLD, PROP_VAD_MIN_SILENCE,
  PROP_OUTPUT, PROP_COMMIT, PROP_TEXT_LINES, PROP_STATS,
  PROP_ALIGNMENT_THRESHOLD, PROP_DISCONT_WAIT, PROP_PROMPT, PROP_AUDIO_CTX,
  PROP_WORD_TIMES, N_PROPS
};

static const GEnumValue output_values[] = {
  {WK_GROUP_WORD, "One buffer per committed word", "word"},
  {WK_GROUP_PHRASE, "One buffer per run of words up to the end of an "
        "utterance or a pause", "phrase"},
  {0, NULL, NULL}
}, commit_values[] = {
  {WK_COMMIT_DEADLINE, "When two runs agree or, at the latest, at the "
        "word's start + latency", "deadline"},
  {WK_COMMIT_AGREEMENT, "Only when two runs agree, however late",
      "agreement"},
  {0, NULL, NULL}
};

static GType
register_enum (GType * type, const gchar * name, const GEnumValue * values)
{
  if (g_once_init_enter (type))
    g_once_init_leave (type, g_enum_register_static (name, values));
  return *type;
}

GType
gst_whisperknot_output_get_type (void)
{
  static GType type = 0;
  return register_enum (&type, "GstWhisperKnotOutput", output_values);
}

GType
gst_whisperknot_commit_get_type (void)
{
  static GType type = 0;
  return register_enum (&type, "GstWhisperKnotCommit", commit_values);
}

/* a mark in the audio queue: an event to pass on, or NULL: a restart */
typedef struct
{
  GstEvent *event;
  GstClockTime base;
  gboolean drain;
} Marker;

struct _GstWhisperKnot
{
  GstElement parent;
  GstPad *sinkpad, *srcpad;

  /* under the object lock: every property's value (PROP_*), the stats */
  GValue *props;
  wk_stream_stats stats;        /* the stream's, as of the last feed */
  guint64 model_bytes;          /* mapped bytes of the model, 0: none */
  gdouble load_seconds;
  gboolean qos_warned;          /* the lateness warning was posted */
  GstPad *partial_srcpad;       /* the requested partial_src, or NULL */
  gboolean partial_requested;   /* a request_new_pad is making it */
  GstClockTime run_latency;     /* this run's own latency, NONE: no run */

  /* shared by the streaming thread and the worker (the src pad task) */
  GMutex lock;
  wk_queue *queue;              /* audio, with Markers between samples */
  gboolean flushing;
  GstFlowReturn srcresult;      /* what the chain function returns */

  /* changed in state changes only */
  wk_model_loader *loader;      /* started at NULL_TO_READY */
  wk_model *model;
  gchar *loaded_path;           /* of model, or of the failed load */

  /* streaming thread only */
  gboolean negotiated;
  GstAudioFormat format;        /* F32LE or S16LE */
  GstSegment segment;           /* the input's; FORMAT_UNDEFINED: none */
  GstAudioStreamAlign *align;
  GstClockTime in_end;          /* where the audio queued ends, or NONE */

  /* worker only (or with the worker stopped) */
  wk_stream *stream;
  guint stream_latency_ms;      /* this run's policy: 0 offline */
  gboolean stream_translate;
  GstClockTime stream_limit;    /* latency + lateness of this run */
  GstClockTime stream_lateness;
  GstSegment out_segment;       /* the last segment pushed downstream */
  GstClockTime base;            /* time of the engine's sample 0 */
  guint64 fed;                  /* samples fed since the last reset */
  GstClockTime out_pos;         /* text or gaps cover time up to here */
  gboolean discont;             /* the next text buffer is DISCONT */
  gboolean own_error;           /* the error was posted already */
  gchar *tag_language;          /* the language code tagged downstream */
  guint64 partial_serial;       /* of the last partial result posted */
  GstClockTime partial_pos;     /* the last partial buffer's PTS, or NONE */
};

#define gst_whisperknot_parent_class parent_class
G_DEFINE_TYPE (GstWhisperKnot, gst_whisperknot, GST_TYPE_ELEMENT);
GST_ELEMENT_REGISTER_DEFINE (whisperknot, "whisperknot", GST_RANK_NONE,
    GST_TYPE_WHISPERKNOT);

static GParamSpec *properties[N_PROPS];
/* a property's value (g_value_get_TYPE), with the object lock held */
#define PROP_GET(self, type, id) g_value_get_##type (&(self)->props[id])

static GstClockTime
samples_to_time (gint64 samples)
{
  return samples <= 0 ? 0 :
      gst_util_uint64_scale_int (samples, GST_SECOND, WK_SAMPLE_RATE);
}

/* ---- the model ---------------------------------------------------------- */

/* The loading thread: the stats property shows the model from now on. */
static void
gst_whisperknot_loaded (const wk_model * model, wk_status status,
    double seconds, void *user_data)
{
  GstWhisperKnot *self = user_data;
  wk_model_info info;

  wk_model_get_info (model, &info);
  GST_OBJECT_LOCK (self);
  self->model_bytes = info.file_bytes;
  if (status == WK_OK)
    self->load_seconds = seconds;
  GST_OBJECT_UNLOCK (self);
}

/* Waits for a load started, keeps its model; with post a failure posts. */
static gboolean
gst_whisperknot_join_load (GstWhisperKnot * self, gboolean post)
{
  wk_status status;
  char err[512];

  if (!self->loader)
    return self->model != NULL;
  status = wk_model_load_finish (self->loader, &self->model, NULL, err,
      sizeof err);
  self->loader = NULL;
  GST_INFO_OBJECT (self, "model %s: %s", self->loaded_path,
      status == WK_OK ? "loaded" : err);
  if (status == WK_OK || !post)
    return status == WK_OK;
  if (status == WK_ERR_IO)
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ,
        ("Could not load model '%s': %s.", self->loaded_path, err),
        ("%s", wk_status_str (status)));
  else
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED,
        ("Could not load model '%s': %s. %s.", self->loaded_path, err,
            MODEL_HINT), ("%s", wk_status_str (status)));
  return FALSE;
}

/* Starts loading the model the property names unless loaded already; a
 * missing file fails at once, as in filesrc, a bad one when joined. */
static gboolean
gst_whisperknot_start_load (GstWhisperKnot * self)
{
  wk_model_params params = wk_model_default_params ();
  gchar *model, *path;
  gboolean is_default;
  char err[512];

  GST_OBJECT_LOCK (self);
  model = g_value_dup_string (&self->props[PROP_MODEL]);
  GST_OBJECT_UNLOCK (self);
  is_default = !model || !model[0];
  path = wk_model_resolve_path (is_default ? NULL : model);
  g_free (model);
  if (!path) {
    GST_ELEMENT_ERROR (self, RESOURCE, FAILED, (NULL), ("out of memory"));
    return FALSE;
  }
  if ((self->loader || self->model) && !g_strcmp0 (self->loaded_path, path)) {
    free (path);
    return TRUE;
  }
  gst_whisperknot_join_load (self, FALSE);
  g_clear_pointer (&self->model, wk_model_unref);
  g_free (self->loaded_path);
  self->loaded_path = g_strdup (path);
  free (path);
  GST_OBJECT_LOCK (self);
  self->model_bytes = 0;
  GST_OBJECT_UNLOCK (self);

  GST_INFO_OBJECT (self, "loading model %s", self->loaded_path);
  if (wk_model_load_start (self->loaded_path, &params, gst_whisperknot_loaded,
          self, &self->loader, err, sizeof err) == WK_OK)
    return TRUE;
  if (g_file_test (self->loaded_path, G_FILE_TEST_EXISTS))
    GST_ELEMENT_ERROR (self, RESOURCE, OPEN_READ,
        ("Could not load model '%s': %s.", self->loaded_path, err), (NULL));
  else
    GST_ELEMENT_ERROR (self, RESOURCE, NOT_FOUND,
        ("%s '%s' does not exist. %s%s.", is_default ? "No model: the model "
            "property is not set and the default model" :
            "Could not load model: the file", self->loaded_path, MODEL_HINT,
            is_default ? " (or set $WHISPERKNOT_MODEL)" : ""), (NULL));
  return FALSE;
}

/* What the element adds to a live pipeline's latency: the latency and
 * the lateness, or a window and the lateness offline. */
static GstClockTime
own_latency (guint latency_ms, GstClockTime lateness)
{
  return (latency_ms ? latency_ms * GST_MSECOND :
      samples_to_time (WK_WINDOW_SAMPLES)) + lateness;
}

/* the engine stream, input timing and statistics of this run */
static gboolean
gst_whisperknot_open_stream (GstWhisperKnot * self)
{
  wk_stream_params params = wk_stream_default_params ();
  gchar *language, *prompt;
  wk_status status;
  char err[512] = "";

  GST_OBJECT_LOCK (self);
  language = g_value_dup_string (&self->props[PROP_LANGUAGE]);
  prompt = g_value_dup_string (&self->props[PROP_PROMPT]);
  params.initial_prompt = prompt;
  params.translate = PROP_GET (self, boolean, PROP_TRANSLATE);
  params.latency_ms = PROP_GET (self, uint, PROP_LATENCY);
  params.n_threads = PROP_GET (self, uint, PROP_THREADS);
  params.beam_size = PROP_GET (self, uint, PROP_BEAM_SIZE);
  params.use_vad = PROP_GET (self, boolean, PROP_VAD);
  params.word_times = PROP_GET (self, boolean, PROP_WORD_TIMES);
  params.vad_threshold = PROP_GET (self, float, PROP_VAD_THRESHOLD);
  params.vad_min_silence_ms = PROP_GET (self, uint, PROP_VAD_MIN_SILENCE);
  params.audio_ctx = PROP_GET (self, int, PROP_AUDIO_CTX);
  params.commit = PROP_GET (self, enum, PROP_COMMIT);
  params.group = PROP_GET (self, enum, PROP_OUTPUT);
  params.text_lines = PROP_GET (self, boolean, PROP_TEXT_LINES);
  self->stream_latency_ms = params.latency_ms;
  self->stream_translate = params.translate;
  self->stream_lateness = PROP_GET (self, uint, PROP_LATENESS) * GST_MSECOND;
  self->stream_limit = params.latency_ms * GST_MSECOND + self->stream_lateness;
  gst_audio_stream_align_set_alignment_threshold (self->align,
      PROP_GET (self, uint64, PROP_ALIGNMENT_THRESHOLD));
  gst_audio_stream_align_set_discont_wait (self->align,
      PROP_GET (self, uint64, PROP_DISCONT_WAIT));
  memset (&self->stats, 0, sizeof self->stats);
  g_value_set_uint (&self->props[PROP_MAX_OBSERVED_DELAY], 0);
  self->qos_warned = FALSE;
  GST_OBJECT_UNLOCK (self);
  if (language && language[0] && g_ascii_strcasecmp (language, "auto"))
    params.language = language;

  /* left by a failed change to PAUSED; a new activation: no old tags */
  g_clear_pointer (&self->stream, wk_stream_free);
  g_clear_pointer (&self->tag_language, g_free);
  status = wk_stream_new (self->model, &params, &self->stream, err, sizeof err);
  g_free (prompt);              /* read by wk_stream_new only */
  if (status == WK_ERR_ARG)
    GST_ELEMENT_ERROR (self, LIBRARY, SETTINGS,
        ("Could not start transcription: %s%s (language '%s', translate "
            "%s).", err, strstr (err, "initial_prompt") ? "; set the prompt "
            "property to UTF-8 text" : "", language ? language : "auto",
            params.translate ? "on" : "off"), ("%s", wk_status_str (status)));
  else if (status != WK_OK)
    GST_ELEMENT_ERROR (self, LIBRARY, INIT,
        ("Could not start transcription: %s.", err),
        ("%s", wk_status_str (status)));
  g_free (language);
  if (status != WK_OK)
    return FALSE;

  if (wk_stream_prompt_ignored (self->stream))
    GST_ELEMENT_WARNING (self, LIBRARY, SETTINGS,
        ("The prompt is ignored: the model was never trained with one."),
        ("its knot has whisperknot.max_text_ctx = 0"));
  /* the stats property shows the new stream's state at once */
  GST_OBJECT_LOCK (self);
  wk_stream_get_stats (self->stream, &self->stats);
  self->run_latency = own_latency (self->stream_latency_ms,
      self->stream_lateness);
  GST_OBJECT_UNLOCK (self);
  return TRUE;
}

/* ---- the output --------------------------------------------------------- */

/* the stats property, with the object lock held (model_bytes, not model) */
static GstStructure *
gst_whisperknot_make_stats (GstWhisperKnot * self)
{
  GstStructure *s = gst_structure_new ("application/x-whisperknot-stats",
      "model-bytes", G_TYPE_UINT64, self->model_bytes,
      "load-time", G_TYPE_DOUBLE, self->load_seconds, NULL);
  wk_stat list[64];
  size_t n = wk_stream_stats_list (&self->stats, list, G_N_ELEMENTS (list));
  size_t i;

  for (i = 0; i < MIN (n, G_N_ELEMENTS (list)); i++) {
    if (list[i].is_count)
      gst_structure_set (s, list[i].name, G_TYPE_UINT64,
          (guint64) list[i].value, NULL);
    else
      gst_structure_set (s, list[i].name, G_TYPE_DOUBLE, list[i].value, NULL);
  }
  return s;
}

/* The engine's counters for the stats property; live, a word later than
 * start + latency + lateness warns once and posts whisperknot-qos. */
static void
gst_whisperknot_update_stats (GstWhisperKnot * self)
{
  wk_stream_stats stats;
  GstClockTime late, previous;
  gboolean warn = FALSE, post = FALSE;

  wk_stream_get_stats (self->stream, &stats);
  late = (GstClockTime) (stats.max_late_seconds * GST_SECOND);
  GST_OBJECT_LOCK (self);
  previous = (GstClockTime) (self->stats.max_late_seconds * GST_SECOND);
  self->stats = stats;
  g_value_set_uint (&self->props[PROP_MAX_OBSERVED_DELAY],
      MAX (PROP_GET (self, uint, PROP_MAX_OBSERVED_DELAY),
          (guint) (stats.max_delay_seconds * 1000)));
  if (self->stream_latency_ms > 0 && late > self->stream_lateness &&
      late > previous) {
    post = TRUE;
    warn = !self->qos_warned;
    self->qos_warned = TRUE;
  }
  GST_OBJECT_UNLOCK (self);

  if (warn)
    GST_ELEMENT_WARNING (self, CORE, CLOCK,
        ("Text is later than the latency allows: a word came %u ms after "
            "its start + the latency, the lateness allows %u ms. Raise "
            "the latency or use fewer threads elsewhere.",
            (guint) (late / GST_MSECOND),
            (guint) (self->stream_lateness / GST_MSECOND)), (NULL));
  if (post)
    gst_element_post_message (GST_ELEMENT (self),
        gst_message_new_element (GST_OBJECT (self),
            gst_structure_new ("whisperknot-qos",
                "lateness", G_TYPE_UINT64, late,
                "late-words", G_TYPE_UINT64, (guint64) stats.n_late,
                "max-delay", G_TYPE_UINT64,
                (guint64) (stats.max_delay_seconds * GST_SECOND),
                "allowed", G_TYPE_UINT64, self->stream_limit,
                "step-seconds", G_TYPE_DOUBLE, stats.step_seconds,
                "run-seconds", G_TYPE_DOUBLE, stats.run_estimate_seconds,
                NULL)));
}

/* one of wk_stream_take_cues' cues, in the input's time */
static GstFlowReturn
gst_whisperknot_push_cue (GstWhisperKnot * self, const wk_cue * cue)
{
  GstClockTime start = self->base + samples_to_time (cue->start);
  GstClockTime end = self->base + samples_to_time (cue->end);
  GstCustomMeta *meta;
  GstBuffer *buf;
  gchar *text;

  if (!GST_CLOCK_TIME_IS_VALID (self->out_pos) || end > self->out_pos)
    self->out_pos = end;
  if (cue->kind == WK_CUE_GAP) {
    gst_pad_push_event (self->srcpad, gst_event_new_gap (start, end - start));
    return GST_FLOW_OK;
  } else if (cue->kind == WK_CUE_UTTERANCE_END) {
    /* the event caption elements for gst-plugins-rs' transcribers know */
    gst_pad_push_event (self->srcpad,
        gst_event_new_custom (GST_EVENT_CUSTOM_DOWNSTREAM,
            gst_structure_new_empty ("rstranscribe/final-transcript")));
    return GST_FLOW_OK;
  }
  text = g_strconcat (cue->before, cue->text, cue->after, NULL);
  buf = gst_buffer_new_wrapped (text, strlen (text));
  if ((meta = gst_buffer_add_custom_meta (buf, GST_WHISPERKNOT_TEXT_META_NAME))) {
    GstStructure *st = gst_custom_meta_get_structure (meta);

    gst_structure_set (st, "probability", G_TYPE_DOUBLE,
        CLAMP (cue->p, 0.0, 1.0), NULL);
    if (self->tag_language)
      gst_structure_set (st, "language", G_TYPE_STRING, self->tag_language,
          NULL);
  }
  GST_BUFFER_PTS (buf) = start;
  GST_BUFFER_DURATION (buf) = end - start;
  if (self->discont)
    GST_BUFFER_FLAG_SET (buf, GST_BUFFER_FLAG_DISCONT);
  self->discont = FALSE;
  GST_DEBUG_OBJECT (self, "text %" GST_TIME_FORMAT " - %" GST_TIME_FORMAT
      ": %s", GST_TIME_ARGS (start), GST_TIME_ARGS (end), cue->text);
  return gst_pad_push (self->srcpad, buf);
}

static GstPad *
gst_whisperknot_get_partial_pad (GstWhisperKnot * self)
{
  GstPad *pad;

  GST_OBJECT_LOCK (self);
  pad = self->partial_srcpad ? gst_object_ref (self->partial_srcpad) : NULL;
  GST_OBJECT_UNLOCK (self);
  return pad;
}

/* event for partial_src: the same, but for its own stream-id (two pads
 * of one id would be one stream to playsink or a stream collection) */
static GstEvent *
partial_event (GstEvent * event)
{
  const gchar *id = NULL;
  GstStreamFlags flags;
  GstEvent *start;
  guint group;
  gchar *pid;

  if (GST_EVENT_TYPE (event) != GST_EVENT_STREAM_START)
    return gst_event_ref (event);
  gst_event_parse_stream_start (event, &id);
  pid = g_strconcat (id ? id : "", "/partial", NULL);
  start = gst_event_new_stream_start (pid);
  g_free (pid);
  gst_event_parse_stream_flags (event, &flags);
  gst_event_set_stream_flags (start, flags);
  if (gst_event_parse_group_id (event, &group))
    gst_event_set_group_id (start, group);
  return start;
}

/* event on src and, when it frames a stream, a copy on partial_src */
static gboolean
gst_whisperknot_push_event (GstWhisperKnot * self, GstEvent * event)
{
  GstEventType type = GST_EVENT_TYPE (event);
  GstPad *pad = NULL;

  if (type == GST_EVENT_STREAM_START || type == GST_EVENT_CAPS ||
      type == GST_EVENT_SEGMENT || type == GST_EVENT_TAG ||
      type == GST_EVENT_EOS || type == GST_EVENT_FLUSH_START ||
      type == GST_EVENT_FLUSH_STOP)
    pad = gst_whisperknot_get_partial_pad (self);
  if (pad) {
    if (type == GST_EVENT_FLUSH_STOP || type == GST_EVENT_SEGMENT)
      self->partial_pos = GST_CLOCK_TIME_NONE;
    gst_pad_push_event (pad, partial_event (event));
    gst_object_unref (pad);
  }
  return gst_pad_push_event (self->srcpad, event);
}

/* Live, when they change: the words not committed yet as a message and
 * on partial_src (PTS never going back; GAPs while nothing is partial). */
static void
gst_whisperknot_post_partial (GstWhisperKnot * self)
{
  wk_cue cue;
  guint64 serial = 0;
  size_t n = wk_stream_partial_cue (self->stream, &cue, &serial);
  GstClockTime start = self->base + samples_to_time (cue.start);
  GstClockTime end = self->base + samples_to_time (cue.end), pts = start;
  GstPad *pad;
  GstBuffer *buf;

  if (serial != self->partial_serial) {
    self->partial_serial = serial;
    gst_element_post_message (GST_ELEMENT (self),
        gst_message_new_element (GST_OBJECT (self),
            gst_structure_new ("whisperknot-partial",
                "text", G_TYPE_STRING, cue.text,
                "timestamp", G_TYPE_UINT64, start,
                "duration", G_TYPE_UINT64, end > start ? end - start : 0,
                "stability", G_TYPE_DOUBLE, cue.p,
                "words", G_TYPE_UINT, (guint) n, NULL)));
  } else if (cue.text[0]) {
    return;                     /* these words went out already */
  }

  if (!(pad = gst_whisperknot_get_partial_pad (self)))
    return;
  /* nothing partial (offline: ever): the pad's time keeps up with the
   * audio fed, so that a sink after it prerolls and a queue before the
   * other pad's sink does not fill while this one waits */
  if (!cue.text[0] && !GST_CLOCK_TIME_IS_VALID (self->partial_pos))
    self->partial_pos = self->base;
  if (cue.text[0]) {
    buf = gst_buffer_new_memdup (cue.text, strlen (cue.text));
    if (GST_CLOCK_TIME_IS_VALID (self->partial_pos))
      pts = MAX (start, self->partial_pos);
    else
      GST_BUFFER_FLAG_SET (buf, GST_BUFFER_FLAG_DISCONT);
    GST_BUFFER_PTS (buf) = self->partial_pos = pts;
    GST_BUFFER_DURATION (buf) = MAX (end, pts + MIN_TEXT_DURATION) - pts;
    gst_pad_push (pad, buf);
  } else if (GST_CLOCK_TIME_IS_VALID (self->partial_pos) &&
      start > self->partial_pos) {
    gst_pad_push_event (pad, gst_event_new_gap (self->partial_pos,
            start - self->partial_pos));
    self->partial_pos = start;
  }
  gst_object_unref (pad);
}

/* When the language is known or changes: the text's language as a tag
 * downstream, the detection's probabilities on the bus. */
static void
gst_whisperknot_tag_language (GstWhisperKnot * self)
{
  wk_language_prob probs[5];
  size_t n, i;
  GstStructure *langs;
  GstTagList *tags;
  const gchar *text_language;

  n = wk_stream_language_probs (self->stream, probs, G_N_ELEMENTS (probs));
  if (n == 0)
    return;
  text_language = self->stream_translate ? "en" : probs[0].code;
  if (!g_strcmp0 (text_language, self->tag_language))
    return;
  g_free (self->tag_language);
  self->tag_language = g_strdup (text_language);
  GST_INFO_OBJECT (self, "language %s (p = %.3f), text in %s",
      probs[0].code, probs[0].p, text_language);

  tags = gst_tag_list_new (GST_TAG_LANGUAGE_CODE, text_language, NULL);
  gst_tag_list_set_scope (tags, GST_TAG_SCOPE_STREAM);
  gst_whisperknot_push_event (self, gst_event_new_tag (tags));

  langs = gst_structure_new_empty ("languages");
  for (i = 0; i < n; i++)
    gst_structure_set (langs, probs[i].code, G_TYPE_DOUBLE,
        (gdouble) probs[i].p, NULL);
  gst_element_post_message (GST_ELEMENT (self),
      gst_message_new_element (GST_OBJECT (self),
          gst_structure_new ("whisperknot-language",
              "language-code", G_TYPE_STRING, probs[0].code,
              "probability", G_TYPE_DOUBLE, (gdouble) probs[0].p,
              "languages", GST_TYPE_STRUCTURE, langs, NULL)));
  gst_structure_free (langs);
}

/* what the engine completed, then the stats and the partial result */
static GstFlowReturn
gst_whisperknot_push_results (GstWhisperKnot * self)
{
  const wk_cue *cues;
  size_t n, i;
  GstFlowReturn ret = GST_FLOW_OK;

  if (!GST_CLOCK_TIME_IS_VALID (self->base))
    return GST_FLOW_OK;
  n = wk_stream_take_cues (self->stream, &cues);
  gst_whisperknot_tag_language (self);
  for (i = 0; i < n && ret == GST_FLOW_OK; i++)
    ret = gst_whisperknot_push_cue (self, &cues[i]);
  if (ret != GST_FLOW_OK)
    return ret;
  gst_whisperknot_update_stats (self);
  gst_whisperknot_post_partial (self);
  return GST_FLOW_OK;
}

/* ---- the worker --------------------------------------------------------- */

static void
marker_free (gpointer data)
{
  Marker *marker = data;

  if (marker->event)
    gst_event_unref (marker->event);
  g_free (marker);
}

/* a failed feed: FLUSHING when a flush cancelled it, else an error */
static GstFlowReturn
gst_whisperknot_feed_failed (GstWhisperKnot * self, wk_status status)
{
  gboolean flushing;

  g_mutex_lock (&self->lock);
  flushing = self->flushing;
  g_mutex_unlock (&self->lock);
  if (flushing)
    return GST_FLOW_FLUSHING;
  GST_ELEMENT_ERROR (self, STREAM, FAILED,
      ("Transcription failed: %s.", wk_status_str (status)), (NULL));
  self->own_error = TRUE;
  return GST_FLOW_ERROR;
}

/* transcribes and pushes all fed since the last reset, and resets */
static GstFlowReturn
gst_whisperknot_drain (GstWhisperKnot * self)
{
  GstFlowReturn ret = GST_FLOW_OK;
  wk_status status;

  if (self->fed > 0) {
    GST_DEBUG_OBJECT (self, "draining %" G_GUINT64_FORMAT " samples",
        self->fed);
    if ((status = wk_stream_finish (self->stream)) != WK_OK)
      return gst_whisperknot_feed_failed (self, status);
    ret = gst_whisperknot_push_results (self);
  }
  wk_stream_reset (self->stream);
  self->fed = 0;
  return ret;
}

static GstFlowReturn
gst_whisperknot_handle_marker (GstWhisperKnot * self, Marker * marker)
{
  GstFlowReturn ret = GST_FLOW_OK;
  GstEvent *event = marker->event;
  GstClockTime ts, dur;

  if (!event) {
    ret = gst_whisperknot_drain (self);
    self->base = marker->base;
    /* within a segment, a step back does not take text back in time */
    if (GST_CLOCK_TIME_IS_VALID (self->out_pos) && self->out_pos > self->base)
      wk_stream_cues_from (self->stream, gst_util_uint64_scale_int_ceil
          (self->out_pos - self->base, WK_SAMPLE_RATE, GST_SECOND));
    else
      self->out_pos = marker->base;
    self->discont = TRUE;
    return ret;
  }
  if (marker->drain && (ret = gst_whisperknot_drain (self)) != GST_FLOW_OK)
    return ret;
  if (GST_EVENT_TYPE (event) == GST_EVENT_GAP) {
    gst_event_parse_gap (event, &ts, &dur);
    if (GST_CLOCK_TIME_IS_VALID (ts) && GST_CLOCK_TIME_IS_VALID (dur) &&
        (!GST_CLOCK_TIME_IS_VALID (self->out_pos) || self->out_pos < ts + dur))
      self->out_pos = ts + dur;
  } else if (GST_EVENT_TYPE (event) == GST_EVENT_SEGMENT) {
    gst_event_copy_segment (event, &self->out_segment);
    if (marker->drain)          /* a new timeline */
      self->out_pos = GST_CLOCK_TIME_NONE;
  }
  marker->event = NULL;
  gst_whisperknot_push_event (self, event);
  return ret;
}

/* When the next sample fed was due in wk_clock_seconds (): in PLAYING,
 * when the clock reads its running time; else INFINITY. */
static double
gst_whisperknot_due (void *user)
{
  GstWhisperKnot *self = user;
  gint64 now = g_get_monotonic_time ();
  GstClock *clock = NULL;
  GstClockTime base_time = 0, rt, cnow;

  if (!GST_CLOCK_TIME_IS_VALID (self->base) ||
      self->out_segment.format != GST_FORMAT_TIME)
    return INFINITY;
  GST_OBJECT_LOCK (self);
  if (GST_STATE (self) == GST_STATE_PLAYING && GST_ELEMENT_CLOCK (self)) {
    clock = gst_object_ref (GST_ELEMENT_CLOCK (self));
    base_time = GST_ELEMENT_CAST (self)->base_time;
  }
  GST_OBJECT_UNLOCK (self);
  if (!clock)
    return INFINITY;
  rt = gst_segment_to_running_time (&self->out_segment, GST_FORMAT_TIME,
      self->base + samples_to_time (self->fed));
  cnow = gst_clock_get_time (clock);
  gst_object_unref (clock);
  if (!GST_CLOCK_TIME_IS_VALID (rt) || !GST_CLOCK_TIME_IS_VALID (cnow))
    return INFINITY;
  return (now + GST_CLOCK_DIFF (cnow, base_time + rt) / GST_USECOND) /
      (double) G_USEC_PER_SEC;
}

/* Stops the worker; upstream gets ret from the chain function. */
static void
gst_whisperknot_pause_worker (GstWhisperKnot * self, GstFlowReturn ret)
{
  g_mutex_lock (&self->lock);
  if (self->srcresult == GST_FLOW_OK)
    self->srcresult = ret;
  wk_queue_stop (self->queue);  /* the streaming thread waits no more */
  g_mutex_unlock (&self->lock);
  gst_pad_pause_task (self->srcpad);
}

static void
gst_whisperknot_loop (GstPad * srcpad)
{
  GstWhisperKnot *self = GST_WHISPERKNOT (GST_PAD_PARENT (srcpad));
  GstFlowReturn ret;
  void *marker;
  gsize n;
  wk_status status;

  if (!self->stream) {          /* READY_TO_PAUSED makes sure of it */
    g_warn_if_reached ();
    gst_whisperknot_pause_worker (self, GST_FLOW_ERROR);
    return;
  }
  status = wk_queue_next (self->queue, self->stream,
      self->stream_latency_ms > 0 ? LIVE_FEED_CHUNK : FEED_CHUNK,
      gst_whisperknot_due, self, &marker, &n);
  if (marker) {
    ret = gst_whisperknot_handle_marker (self, marker);
    marker_free (marker);
  } else if (n == 0) {
    GST_DEBUG_OBJECT (self, "flushing, pausing");
    gst_pad_pause_task (self->srcpad);
    return;
  } else if (status != WK_OK) {
    ret = gst_whisperknot_feed_failed (self, status);
  } else {
    self->fed += n;
    ret = gst_whisperknot_push_results (self);
  }
  if (ret == GST_FLOW_OK)
    return;

  GST_DEBUG_OBJECT (self, "pausing: %s", gst_flow_get_name (ret));
  gst_whisperknot_pause_worker (self, ret);
  if (ret == GST_FLOW_ERROR && self->own_error) {
    /* the engine failed and posted its error */
    self->own_error = FALSE;
  } else if (ret == GST_FLOW_NOT_LINKED || ret < GST_FLOW_EOS) {
    GST_ELEMENT_FLOW_ERROR (self, ret);
    gst_pad_push_event (self->srcpad, gst_event_new_eos ());
  }
}

/* a flush or a deactivation: wakes both threads, cancels a model run */
static void
gst_whisperknot_stop_worker (GstWhisperKnot * self)
{
  g_mutex_lock (&self->lock);
  self->flushing = TRUE;
  self->srcresult = GST_FLOW_FLUSHING;
  wk_queue_stop (self->queue);
  g_mutex_unlock (&self->lock);
  wk_stream_cancel (self->stream);
}

/* Starts the worker as src activates or, after FLUSH_STOP, while it is
 * still active (the element may be shutting down), as gstqueue.c does. */
static gboolean
gst_whisperknot_start_worker (GstWhisperKnot * self, gboolean restart)
{
  gboolean ok = TRUE;

  g_mutex_lock (&self->lock);
  if (restart) {
    GST_OBJECT_LOCK (self->srcpad);
    ok = GST_PAD_MODE (self->srcpad) == GST_PAD_MODE_PUSH;
    GST_OBJECT_UNLOCK (self->srcpad);
  }
  if (ok) {
    self->flushing = FALSE;
    self->srcresult = GST_FLOW_OK;
    wk_queue_start (self->queue);
    ok = gst_pad_start_task (self->srcpad,
        (GstTaskFunction) gst_whisperknot_loop, self->srcpad, NULL);
  } else {
    GST_INFO_OBJECT (self, "source pad inactive: the worker stays stopped");
  }
  g_mutex_unlock (&self->lock);
  return ok;
}

/* ---- the input ---------------------------------------------------------- */

/* queues a mark for the worker (drain: transcribe what came before) */
static gboolean
gst_whisperknot_queue_mark (GstWhisperKnot * self, GstEvent * event,
    gboolean drain, GstClockTime base)
{
  Marker *marker = g_new0 (Marker, 1);
  gboolean ok;

  marker->event = event;
  marker->drain = drain;
  marker->base = base;
  /* a hole before the mark is filled here, not under the lock: filling
   * may wait for the worker, which takes the lock to pause */
  wk_queue_end_hole (self->queue);
  g_mutex_lock (&self->lock);
  ok = !self->flushing && wk_queue_mark (self->queue, marker) == WK_OK;
  g_mutex_unlock (&self->lock);
  if (!ok)
    marker_free (marker);
  return ok;
}

/* on a flush, sticky events still queued go out before the next data */
static void
store_sticky (void *mark, void *user)
{
  Marker *marker = mark;
  GstEvent *event = marker->event;

  if (event && GST_EVENT_IS_STICKY (event) &&
      GST_EVENT_TYPE (event) != GST_EVENT_SEGMENT &&
      GST_EVENT_TYPE (event) != GST_EVENT_EOS)
    gst_pad_store_sticky_event (user, event);
  marker_free (marker);
}

/* queues n samples (data NULL: lost ones, concealed), waiting while it
 * is full */
static GstFlowReturn
gst_whisperknot_write (GstWhisperKnot * self, const guint8 * data, gsize n)
{
  GstFlowReturn ret;

  if ((data ? wk_queue_write (self->queue, data, self->format ==
              GST_AUDIO_FORMAT_S16LE ? WK_SAMPLE_S16LE : WK_SAMPLE_F32LE,
              n) : wk_queue_write_missing (self->queue, n)) == WK_OK)
    return GST_FLOW_OK;
  /* stopped: a flush, or the worker paused */
  g_mutex_lock (&self->lock);
  ret = self->flushing ? GST_FLOW_FLUSHING : self->srcresult;
  g_mutex_unlock (&self->lock);
  return ret == GST_FLOW_OK ? GST_FLOW_FLUSHING : ret;
}

/* The next input starts a new timeline (a flush, a new segment, a drain). */
static void
gst_whisperknot_forget_time (GstWhisperKnot * self)
{
  gst_audio_stream_align_mark_discont (self->align);
  self->in_end = GST_CLOCK_TIME_NONE;
}

/* with the worker stopped: the text starts anew at the next input */
static void
gst_whisperknot_start_anew (GstWhisperKnot * self, gboolean keep_sticky)
{
  wk_queue_clear (self->queue, keep_sticky ? store_sticky : NULL, self->srcpad);
  self->fed = 0;
  self->base = GST_CLOCK_TIME_NONE;
  self->out_pos = GST_CLOCK_TIME_NONE;
  self->discont = TRUE;
  gst_whisperknot_forget_time (self);
}

/* Times n samples stamped ts with GstAudioStreamAlign: text is timed by
 * samples counted. At a discontinuity a hole up to FILL_MAX is lost audio
 * (concealed: wk_queue_write_missing), even one within the alignment
 * threshold (each lost packet skipped would move the text after it
 * earlier); anything else restarts the recognizer at the new time. */
static GstFlowReturn
gst_whisperknot_align (GstWhisperKnot * self, GstClockTime ts,
    gboolean discont, gsize n)
{
  GstClockTime out, dur, threshold;
  GstClockTimeDiff hole;
  GstFlowReturn ret = GST_FLOW_OK;

  if (!GST_CLOCK_TIME_IS_VALID (ts))
    ts = GST_CLOCK_TIME_IS_VALID (self->in_end) ? self->in_end :
        self->segment.format == GST_FORMAT_TIME ? self->segment.start : 0;
  if (gst_audio_stream_align_process (self->align, discont, ts, n, &out, &dur,
          NULL)) {
    threshold = gst_audio_stream_align_get_alignment_threshold (self->align);
    hole = GST_CLOCK_TIME_IS_VALID (self->in_end) ?
        GST_CLOCK_DIFF (self->in_end, out) : -G_MAXINT64;
    if (hole > 0 && hole <= FILL_MAX) {
      GST_DEBUG_OBJECT (self, "filling a hole of %" GST_STIME_FORMAT,
          GST_STIME_ARGS (hole));
      ret = gst_whisperknot_write (self, NULL,
          gst_util_uint64_scale_int_round (hole, WK_SAMPLE_RATE, GST_SECOND));
    } else if (ABS (hole) <= (GstClockTimeDiff) threshold) {
      /* a DISCONT flag on audio that continues the timeline */
    } else {
      GST_DEBUG_OBJECT (self, "restarting at %" GST_TIME_FORMAT " (expected %"
          GST_TIME_FORMAT ")", GST_TIME_ARGS (out),
          GST_TIME_ARGS (self->in_end));
      gst_whisperknot_queue_mark (self, NULL, FALSE, out);
    }
  }
  self->in_end = out + dur;
  return ret;
}

static GstFlowReturn
gst_whisperknot_chain (GstPad * pad, GstObject * parent, GstBuffer * buf)
{
  GstWhisperKnot *self = GST_WHISPERKNOT (parent);
  GstFlowReturn ret;
  GstMapInfo map;
  gsize bps = self->format == GST_AUDIO_FORMAT_S16LE ? 2 : 4;

  g_mutex_lock (&self->lock);
  ret = self->flushing ? GST_FLOW_FLUSHING : self->srcresult;
  g_mutex_unlock (&self->lock);
  if (ret != GST_FLOW_OK) {
    gst_buffer_unref (buf);
    return ret;
  }
  if (!self->negotiated) {
    GST_ELEMENT_ERROR (self, CORE, NEGOTIATION, (NULL),
        ("audio arrived before caps"));
    gst_buffer_unref (buf);
    return GST_FLOW_NOT_NEGOTIATED;
  }
  if (!gst_buffer_map (buf, &map, GST_MAP_READ)) {
    GST_ELEMENT_ERROR (self, RESOURCE, READ, (NULL),
        ("could not map an input buffer"));
    gst_buffer_unref (buf);
    return GST_FLOW_ERROR;
  }
  if (map.size % bps != 0) {
    /* dropping the bytes would shift every later sample */
    GST_ELEMENT_ERROR (self, STREAM, FORMAT,
        ("Input audio is not a whole number of samples."),
        ("a buffer of %" G_GSIZE_FORMAT " bytes is not a whole number of %"
            G_GSIZE_FORMAT "-byte samples", map.size, bps));
    ret = GST_FLOW_ERROR;
  } else if (map.size > 0) {
    ret = gst_whisperknot_align (self, GST_BUFFER_PTS (buf),
        GST_BUFFER_IS_DISCONT (buf), map.size / bps);
    if (ret == GST_FLOW_OK)
      ret = gst_whisperknot_write (self, map.data, map.size / bps);
  }
  gst_buffer_unmap (buf, &map);
  gst_buffer_unref (buf);
  return ret;
}

static gboolean
gst_whisperknot_sink_event (GstPad * pad, GstObject * parent, GstEvent * event)
{
  GstWhisperKnot *self = GST_WHISPERKNOT (parent);
  gboolean ret;

  GST_LOG_OBJECT (self, "%" GST_PTR_FORMAT, event);
  switch (GST_EVENT_TYPE (event)) {
    case GST_EVENT_FLUSH_START:
      ret = gst_whisperknot_push_event (self, event);
      gst_whisperknot_stop_worker (self);
      gst_pad_pause_task (self->srcpad);        /* waits for the worker */
      return ret;
    case GST_EVENT_FLUSH_STOP:
      /* the worker is paused: its state is ours to reset */
      wk_stream_reset (self->stream);
      gst_whisperknot_start_anew (self, TRUE);
      ret = gst_whisperknot_push_event (self, event);
      gst_whisperknot_start_worker (self, TRUE);
      return ret;
    case GST_EVENT_CAPS:
    {
      GstCaps *caps;
      GstAudioInfo info;

      gst_event_parse_caps (event, &caps);
      if (!gst_audio_info_from_caps (&info, caps) ||
          GST_AUDIO_INFO_RATE (&info) != WK_SAMPLE_RATE ||
          GST_AUDIO_INFO_CHANNELS (&info) != 1 ||
          (GST_AUDIO_INFO_FORMAT (&info) != GST_AUDIO_FORMAT_F32LE &&
              GST_AUDIO_INFO_FORMAT (&info) != GST_AUDIO_FORMAT_S16LE)) {
        GST_WARNING_OBJECT (self, "refused caps %" GST_PTR_FORMAT, caps);
        gst_event_unref (event);
        return FALSE;
      }
      gst_event_unref (event);
      self->format = GST_AUDIO_INFO_FORMAT (&info);
      self->negotiated = TRUE;
      caps = gst_static_pad_template_get_caps (&src_template);
      event = gst_event_new_caps (caps);
      gst_caps_unref (caps);
      return gst_whisperknot_queue_mark (self, event, FALSE, 0);
    }
    case GST_EVENT_SEGMENT:
    {
      const GstSegment *segment;
      gboolean changed;

      gst_event_parse_segment (event, &segment);
      if (segment->format != GST_FORMAT_TIME) {
        GST_ELEMENT_ERROR (self, STREAM, FORMAT, (NULL),
            ("need a TIME segment, got %s",
                gst_format_get_name (segment->format)));
        gst_event_unref (event);
        return FALSE;
      }
      /* a new segment (a seek, concat) restarts after the text before */
      changed = self->segment.format == GST_FORMAT_TIME &&
          !gst_segment_is_equal (&self->segment, segment);
      if (changed)
        gst_whisperknot_forget_time (self);
      gst_segment_copy_into (segment, &self->segment);
      return gst_whisperknot_queue_mark (self, event, changed, 0);
    }
    case GST_EVENT_GAP:
    {
      GstClockTime ts, dur;
      gsize n;

      gst_event_parse_gap (event, &ts, &dur);
      if (self->negotiated && GST_CLOCK_TIME_IS_VALID (ts) &&
          GST_CLOCK_TIME_IS_VALID (dur) && dur <= FILL_MAX) {
        /* a short gap is lost audio, concealed */
        gst_event_unref (event);
        n = gst_util_uint64_scale_int_round (dur, WK_SAMPLE_RATE, GST_SECOND);
        return n == 0 || (gst_whisperknot_align (self, ts, TRUE, n) ==
            GST_FLOW_OK && gst_whisperknot_write (self, NULL, n) ==
            GST_FLOW_OK);
      }
      /* transcribe what came before, pass it on, start anew */
      gst_whisperknot_forget_time (self);
      return gst_whisperknot_queue_mark (self, event, TRUE, 0);
    }
    case GST_EVENT_EOS:
      gst_whisperknot_forget_time (self);
      return gst_whisperknot_queue_mark (self, event, TRUE, 0);
    case GST_EVENT_TAG:
    {
      GstTagList *tags;

      /* stream tags describe the audio, not the text; global ones both */
      gst_event_parse_tag (event, &tags);
      if (gst_tag_list_get_scope (tags) == GST_TAG_SCOPE_GLOBAL)
        return gst_whisperknot_queue_mark (self, event, FALSE, 0);
      gst_event_unref (event);
      return TRUE;
    }
    default:
      if (GST_EVENT_IS_SERIALIZED (event))
        return gst_whisperknot_queue_mark (self, event, FALSE, 0);
      return gst_pad_event_default (pad, parent, event);
  }
}

/* ---- pads and states ---------------------------------------------------- */

static gboolean
gst_whisperknot_src_query (GstPad * pad, GstObject * parent, GstQuery * query)
{
  GstWhisperKnot *self = GST_WHISPERKNOT (parent);
  gboolean live;
  GstClockTime min, max, ours;

  if (GST_QUERY_TYPE (query) != GST_QUERY_LATENCY)
    return gst_pad_query_default (pad, parent, query);
  if (!gst_pad_peer_query (self->sinkpad, query))
    return FALSE;
  /* ours: the running stream's (the properties change the next run) */
  GST_OBJECT_LOCK (self);
  ours = GST_CLOCK_TIME_IS_VALID (self->run_latency) ? self->run_latency :
      own_latency (PROP_GET (self, uint, PROP_LATENCY),
      PROP_GET (self, uint, PROP_LATENESS) * GST_MSECOND);
  GST_OBJECT_UNLOCK (self);
  gst_query_parse_latency (query, &live, &min, &max);
  min += ours;
  if (GST_CLOCK_TIME_IS_VALID (max))
    max += ours;
  GST_DEBUG_OBJECT (self, "latency: live %d, min %" GST_TIME_FORMAT
      ", max %" GST_TIME_FORMAT, live, GST_TIME_ARGS (min),
      GST_TIME_ARGS (max));
  gst_query_set_latency (query, live, min, max);
  return TRUE;
}

static gboolean
gst_whisperknot_src_activate_mode (GstPad * pad, GstObject * parent,
    GstPadMode mode, gboolean active)
{
  GstWhisperKnot *self = GST_WHISPERKNOT (parent);

  if (mode != GST_PAD_MODE_PUSH)
    return FALSE;
  if (active)
    return gst_whisperknot_start_worker (self, FALSE);
  /* under self->lock: stops a worker a FLUSH_STOP restarted */
  gst_whisperknot_stop_worker (self);
  return gst_pad_stop_task (pad);
}

static GstStateChangeReturn
gst_whisperknot_change_state (GstElement * element, GstStateChange transition)
{
  GstWhisperKnot *self = GST_WHISPERKNOT (element);
  GstStateChangeReturn ret;

  switch (transition) {
    case GST_STATE_CHANGE_NULL_TO_READY:
      /* the model loads in the background from here on */
      if (!gst_whisperknot_start_load (self))
        return GST_STATE_CHANGE_FAILURE;
      /* a window: upstream keeps flowing while one runs */
      if (!self->queue && wk_queue_new (WK_WINDOW_SAMPLES, marker_free,
              &self->queue) != WK_OK) {
        GST_ELEMENT_ERROR (self, RESOURCE, FAILED, (NULL),
            ("could not allocate the audio queue"));
        return GST_STATE_CHANGE_FAILURE;
      }
      break;
    case GST_STATE_CHANGE_READY_TO_PAUSED:
      /* the model (its property may have changed), this run's stream */
      if (!gst_whisperknot_start_load (self) ||
          !gst_whisperknot_join_load (self, TRUE) ||
          !gst_whisperknot_open_stream (self))
        return GST_STATE_CHANGE_FAILURE;
      gst_whisperknot_start_anew (self, FALSE);
      self->partial_pos = GST_CLOCK_TIME_NONE;
      self->partial_serial = 0;
      self->negotiated = FALSE;
      self->format = GST_AUDIO_FORMAT_F32LE;
      gst_segment_init (&self->segment, GST_FORMAT_UNDEFINED);
      gst_segment_init (&self->out_segment, GST_FORMAT_UNDEFINED);
      break;
    default:
      break;
  }

  ret = GST_ELEMENT_CLASS (parent_class)->change_state (element, transition);

  switch (transition) {
    case GST_STATE_CHANGE_PAUSED_TO_READY:
      /* the pads are inactive: the worker has stopped */
      wk_queue_clear (self->queue, NULL, NULL);
      g_clear_pointer (&self->stream, wk_stream_free);
      GST_OBJECT_LOCK (self);
      self->run_latency = GST_CLOCK_TIME_NONE;
      GST_OBJECT_UNLOCK (self);
      break;
    case GST_STATE_CHANGE_READY_TO_NULL:
      gst_whisperknot_join_load (self, FALSE);
      g_clear_pointer (&self->model, wk_model_unref);
      GST_OBJECT_LOCK (self);
      self->model_bytes = 0;
      GST_OBJECT_UNLOCK (self);
      g_clear_pointer (&self->loaded_path, g_free);
      g_clear_pointer (&self->queue, wk_queue_free);
      break;
    default:
      break;
  }
  return ret;
}

static gboolean
copy_sticky (GstPad * pad, GstEvent ** event, gpointer partial)
{
  GstEvent *copy;

  if (GST_EVENT_TYPE (*event) != GST_EVENT_EOS) {
    copy = partial_event (*event);
    gst_pad_store_sticky_event (partial, copy);
    gst_event_unref (copy);
  }
  return TRUE;
}

static GstPad *
gst_whisperknot_request_new_pad (GstElement * element, GstPadTemplate * templ,
    const gchar * name, const GstCaps * caps)
{
  GstWhisperKnot *self = GST_WHISPERKNOT (element);
  GstPad *pad;
  gboolean added;

  /* the check and the claim under one lock: of two callers, one gets it */
  GST_OBJECT_LOCK (self);
  if (self->partial_srcpad || self->partial_requested) {
    GST_OBJECT_UNLOCK (self);
    GST_WARNING_OBJECT (self, "partial_src was requested already");
    return NULL;
  }
  self->partial_requested = TRUE;
  GST_OBJECT_UNLOCK (self);

  pad = gst_object_ref_sink (gst_pad_new_from_template (templ, "partial_src"));
  gst_pad_use_fixed_caps (pad);
  gst_pad_set_query_function (pad, gst_whisperknot_src_query);
  gst_pad_set_active (pad, TRUE);
  /* what src announced so far goes out before the first partial */
  gst_pad_sticky_events_foreach (self->srcpad, copy_sticky, pad);
  added = gst_element_add_pad (element, pad);
  if (!added) {
    GST_WARNING_OBJECT (self, "could not add partial_src");
    gst_pad_set_active (pad, FALSE);
    gst_clear_object (&pad);
  }
  GST_OBJECT_LOCK (self);
  self->partial_srcpad = pad;   /* our reference, taken by ref_sink */
  self->partial_requested = FALSE;
  GST_OBJECT_UNLOCK (self);
  return pad;
}

static void
gst_whisperknot_release_pad (GstElement * element, GstPad * pad)
{
  GstWhisperKnot *self = GST_WHISPERKNOT (element);

  GST_OBJECT_LOCK (self);
  if (self->partial_srcpad != pad) {
    GST_OBJECT_UNLOCK (self);
    return;
  }
  self->partial_srcpad = NULL;
  GST_OBJECT_UNLOCK (self);
  gst_object_unref (pad);
  gst_pad_set_active (pad, FALSE);
  gst_element_remove_pad (element, pad);
}

/* ---- properties and the object ------------------------------------------ */

/* changes in PAUSED or PLAYING take effect at the next READY to PAUSED */
static void
gst_whisperknot_set_property (GObject * object, guint prop_id,
    const GValue * value, GParamSpec * pspec)
{
  GstWhisperKnot *self = GST_WHISPERKNOT (object);
  const gchar *tag = NULL;

  GST_OBJECT_LOCK (self);
  if (prop_id == PROP_LANGUAGE_CODE && (tag = g_value_get_string (value)))
    /* "en-US": the language alone */
    g_value_take_string (&self->props[PROP_LANGUAGE],
        g_strndup (tag, strcspn (tag, "-_")));
  else
    g_value_copy (value, &self->props[prop_id == PROP_LANGUAGE_CODE ?
            PROP_LANGUAGE : prop_id]);
  GST_OBJECT_UNLOCK (self);
}

static void
gst_whisperknot_get_property (GObject * object, guint prop_id,
    GValue * value, GParamSpec * pspec)
{
  GstWhisperKnot *self = GST_WHISPERKNOT (object);

  GST_OBJECT_LOCK (self);
  if (prop_id == PROP_STATS)
    g_value_take_boxed (value, gst_whisperknot_make_stats (self));
  else
    g_value_copy (&self->props[prop_id == PROP_LANGUAGE_CODE ?
            PROP_LANGUAGE : prop_id], value);
  GST_OBJECT_UNLOCK (self);
}

static void
gst_whisperknot_finalize (GObject * object)
{
  GstWhisperKnot *self = GST_WHISPERKNOT (object);
  guint i;

  /* a NULL_TO_READY that failed after starting the load */
  gst_whisperknot_join_load (self, FALSE);
  for (i = 1; i < N_PROPS; i++)
    g_value_unset (&self->props[i]);
  g_free (self->props);
  g_free (self->tag_language);
  g_free (self->loaded_path);
  g_clear_object (&self->partial_srcpad);       /* dispose released it */
  wk_queue_free (self->queue);
  wk_stream_free (self->stream);
  wk_model_unref (self->model);
  gst_audio_stream_align_free (self->align);
  g_mutex_clear (&self->lock);
  G_OBJECT_CLASS (parent_class)->finalize (object);
}

#define RW (G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | \
    GST_PARAM_MUTABLE_READY)
#define RO (G_PARAM_READABLE | G_PARAM_STATIC_STRINGS)

static void
gst_whisperknot_class_init (GstWhisperKnotClass * klass)
{
  GObjectClass *gobject_class = G_OBJECT_CLASS (klass);
  GstElementClass *element_class = GST_ELEMENT_CLASS (klass);
  GParamSpec **p = properties;
  static const gchar *tags[] = { NULL };

  gobject_class->set_property = gst_whisperknot_set_property;
  gobject_class->get_property = gst_whisperknot_get_property;
  gobject_class->finalize = gst_whisperknot_finalize;

  /* the README's "Pipelines" and wk_stream_params describe them in full */
  p[PROP_MODEL] = g_param_spec_string ("model", "Model",
      "Path of the model (a .knot file from whisperknot-convert) or the "
      "name of one installed by whisperknot-model; "
      "unset: $WHISPERKNOT_MODEL or the installed default model", NULL, RW);
  p[PROP_LANGUAGE] = g_param_spec_string ("language", "Language",
      "Spoken language (ISO 639-1 code such as \"en\" or \"de\"), or "
      "\"auto\" to detect it (multilingual models)", "auto", RW);
  p[PROP_TRANSLATE] = g_param_spec_boolean ("translate", "Translate",
      "Translate the speech into English (multilingual models)", FALSE, RW);
  p[PROP_LATENCY] = g_param_spec_uint ("latency", "Latency",
      "Target delay from speech to text in milliseconds for the live "
      "policy (0 = 30 s windows, for files)", 0, MAX_LATENCY, 0, RW);
  p[PROP_THREADS] = g_param_spec_uint ("threads", "Threads",
      "Threads the recognizer computes on (0 = one per core)", 0, 256, 0, RW);
  p[PROP_BEAM_SIZE] = g_param_spec_uint ("beam-size", "Beam size",
      "Beam search width, 1 = greedy (0 = the engine's choice: 5 for "
      "30 s windows, 3 with a latency)", 0, WK_MAX_BEAM_SIZE, 0, RW);
  p[PROP_LANGUAGE_CODE] = g_param_spec_string ("language-code",
      "Language code", "Spoken language as a tag such as \"en-US\" (sets "
      "language to its first part; transcriberbin's name)", "auto", RW);
  p[PROP_MAX_OBSERVED_DELAY] = g_param_spec_uint ("max-observed-delay",
      "Maximum observed delay", "Live policy: largest delay seen from a "
      "word's end arriving to its text, in milliseconds, since the last "
      "change to PAUSED", 0, G_MAXUINT, 0, RO);
  p[PROP_LATENESS] = g_param_spec_uint ("lateness", "Lateness",
      "Extra lateness in milliseconds added to the reported latency (and "
      "allowed before a whisperknot-qos message)", 0, MAX_LATENCY, 0, RW);
  p[PROP_VAD] = g_param_spec_boolean ("vad", "Voice detection",
      "Live policy: run the model only on speech found by the voice "
      "detector (off: utterances end only at a drain)", TRUE, RW);
  p[PROP_WORD_TIMES] = g_param_spec_boolean ("word-times", "Word times",
      "Word times from the model's alignment heads (else shared out "
      "by byte length)", TRUE, RW);
  p[PROP_VAD_THRESHOLD] = g_param_spec_float ("vad-threshold",
      "Voice detection threshold",
      "Live policy: speech probability at which speech starts",
      0.01f, 0.99f, 0.5f, RW);
  p[PROP_VAD_MIN_SILENCE] = g_param_spec_uint ("vad-min-silence",
      "Minimum silence",
      "Live policy: silence in milliseconds that ends an utterance",
      0, 10000, 300, RW);
  p[PROP_AUDIO_CTX] = g_param_spec_int ("audio-ctx", "Audio context",
      "Live policy: encoder positions per run: 0 = as the model was "
      "trained, -1 = the full 30 s, -2 = only the window's audio, "
      "N = at least N", WK_AUDIO_CTX_SHORT, 1 << 14, WK_AUDIO_CTX_AUTO, RW);
  p[PROP_OUTPUT] = g_param_spec_enum ("output", "Output",
      "Live policy: what a text buffer holds (offline: one of Whisper's "
      "segments)", GST_TYPE_WHISPERKNOT_OUTPUT, WK_GROUP_WORD, RW);
  p[PROP_COMMIT] = g_param_spec_enum ("commit", "Commit",
      "Live policy: when a word becomes final (deadline keeps the latency "
      "reported, as a synchronised sink needs)",
      GST_TYPE_WHISPERKNOT_COMMIT, WK_COMMIT_DEADLINE, RW);
  p[PROP_TEXT_LINES] = g_param_spec_boolean ("text-lines", "Text lines",
      "Separate words with spaces and end segments, phrases and "
      "utterances with a newline, for fdsink or filesink (off: the text "
      "alone, as textoverlay, srtenc and webvttenc want)", FALSE, RW);
  p[PROP_ALIGNMENT_THRESHOLD] = g_param_spec_uint64 ("alignment-threshold",
      "Alignment threshold", "Timestamp jitter in nanoseconds that is "
      "ignored (as audiobasesink's)", 1, G_MAXUINT64 - 1,
      DEFAULT_ALIGNMENT_THRESHOLD, RW);
  p[PROP_DISCONT_WAIT] = g_param_spec_uint64 ("discont-wait", "Discont wait",
      "Time in nanoseconds that timestamps must stay off before it "
      "counts as a discontinuity (as audiobasesink's; a DISCONT buffer "
      "counts at once)", 0, MAX_DISCONT_WAIT, DEFAULT_DISCONT_WAIT, RW);
  p[PROP_PROMPT] = g_param_spec_string ("prompt", "Prompt",
      "Text the decoder reads before the audio (names, spellings, "
      "style), as openai's initial_prompt; unset: none", NULL, RW);
  p[PROP_STATS] = g_param_spec_boxed ("stats", "Statistics",
      "application/x-whisperknot-stats: model-bytes (resident), "
      "load-time, then the engine's figures: audio processed, time per "
      "stage, real-time factor and delays", GST_TYPE_STRUCTURE, RO);
  g_object_class_install_properties (gobject_class, N_PROPS, properties);

  gst_element_class_add_static_pad_template (element_class, &sink_template);
  gst_element_class_add_static_pad_template (element_class, &src_template);
  gst_element_class_add_static_pad_template (element_class,
      &partial_src_template);
  gst_type_mark_as_plugin_api (GST_TYPE_WHISPERKNOT_OUTPUT, 0);
  gst_type_mark_as_plugin_api (GST_TYPE_WHISPERKNOT_COMMIT, 0);
  gst_element_class_set_static_metadata (element_class,
      "Speech to text", "Filter/Audio/Text",
      "Transcribes speech with a Whisper model kept resident in memory",
      "whisperknot developers");

  element_class->change_state =
      GST_DEBUG_FUNCPTR (gst_whisperknot_change_state);
  element_class->request_new_pad =
      GST_DEBUG_FUNCPTR (gst_whisperknot_request_new_pad);
  element_class->release_pad = GST_DEBUG_FUNCPTR (gst_whisperknot_release_pad);

  GST_DEBUG_CATEGORY_INIT (whisperknot_debug, "whisperknot", 0,
      "speech to text");
  gst_meta_register_custom (GST_WHISPERKNOT_TEXT_META_NAME, tags, NULL,
      NULL, NULL);
}

static void
gst_whisperknot_init (GstWhisperKnot * self)
{
  guint i;

  self->sinkpad = gst_pad_new_from_static_template (&sink_template, "sink");
  gst_pad_set_chain_function (self->sinkpad,
      GST_DEBUG_FUNCPTR (gst_whisperknot_chain));
  gst_pad_set_event_function (self->sinkpad,
      GST_DEBUG_FUNCPTR (gst_whisperknot_sink_event));
  GST_PAD_SET_ACCEPT_TEMPLATE (self->sinkpad);
  gst_element_add_pad (GST_ELEMENT (self), self->sinkpad);

  self->srcpad = gst_pad_new_from_static_template (&src_template, "src");
  gst_pad_set_query_function (self->srcpad,
      GST_DEBUG_FUNCPTR (gst_whisperknot_src_query));
  gst_pad_set_activatemode_function (self->srcpad,
      GST_DEBUG_FUNCPTR (gst_whisperknot_src_activate_mode));
  gst_pad_use_fixed_caps (self->srcpad);
  gst_element_add_pad (GST_ELEMENT (self), self->srcpad);

  /* every property's value, at its GParamSpec's default */
  self->props = g_new0 (GValue, N_PROPS);
  for (i = 1; i < N_PROPS; i++) {
    g_value_init (&self->props[i], G_PARAM_SPEC_VALUE_TYPE (properties[i]));
    g_param_value_set_default (properties[i], &self->props[i]);
  }
  g_mutex_init (&self->lock);
  self->flushing = TRUE;
  self->srcresult = GST_FLOW_FLUSHING;
  self->format = GST_AUDIO_FORMAT_F32LE;
  gst_segment_init (&self->segment, GST_FORMAT_UNDEFINED);
  self->align = gst_audio_stream_align_new (WK_SAMPLE_RATE,
      DEFAULT_ALIGNMENT_THRESHOLD, DEFAULT_DISCONT_WAIT);
  self->in_end = self->base = self->out_pos = self->partial_pos =
      self->run_latency = GST_CLOCK_TIME_NONE;
}
