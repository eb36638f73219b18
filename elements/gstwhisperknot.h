/* whisperknot: speech to text in a GStreamer element.
 *
 * The element is thin: it queues audio and hands it to the engine
 * (engine/whisperknot.h) on a thread of its own, and turns the engine's
 * segments into timestamped text buffers.
 */
#ifndef __GST_WHISPERKNOT_H__
#define __GST_WHISPERKNOT_H__

#include <gst/gst.h>
#include <gst/audio/audio.h>

#include "whisperknot.h"

G_BEGIN_DECLS
#define GST_TYPE_WHISPERKNOT \
  (gst_whisperknot_get_type())
#define GST_WHISPERKNOT(obj) \
  (G_TYPE_CHECK_INSTANCE_CAST((obj),GST_TYPE_WHISPERKNOT,GstWhisperKnot))
#define GST_WHISPERKNOT_CLASS(klass) \
  (G_TYPE_CHECK_CLASS_CAST((klass),GST_TYPE_WHISPERKNOT,GstWhisperKnotClass))
#define GST_IS_WHISPERKNOT(obj) \
  (G_TYPE_CHECK_INSTANCE_TYPE((obj),GST_TYPE_WHISPERKNOT))
#define GST_IS_WHISPERKNOT_CLASS(klass) \
  (G_TYPE_CHECK_CLASS_TYPE((klass),GST_TYPE_WHISPERKNOT))
typedef struct _GstWhisperKnot GstWhisperKnot;

/* The name of the GstCustomMeta on every text buffer (see the element's
 * documentation): gst_buffer_get_custom_meta (buf,
 * GST_WHISPERKNOT_TEXT_META_NAME). */
#define GST_WHISPERKNOT_TEXT_META_NAME "GstWhisperKnotTextMeta"

/* the output and commit properties' types: wk_group_by (word, phrase)
 * and wk_commit_policy values */
#define GST_TYPE_WHISPERKNOT_OUTPUT (gst_whisperknot_output_get_type ())
GType gst_whisperknot_output_get_type (void);
#define GST_TYPE_WHISPERKNOT_COMMIT (gst_whisperknot_commit_get_type ())
GType gst_whisperknot_commit_get_type (void);

typedef struct _GstWhisperKnotClass GstWhisperKnotClass;

/**
 * GstWhisperKnot:
 *
 * Opaque data structure.
 */
struct _GstWhisperKnot
{
  GstElement parent;

  GstPad *sinkpad;
  GstPad *srcpad;

  /* the value of each property (PROP_* in the .c file), under the object
   * lock */
  GValue *props;
  /* statistics (the stats property), also under the object lock */
  wk_stream_stats stats;        /* the stream's, as of the last feed */
  guint64 model_bytes;          /* mapped bytes of the model file, 0 with
                                 * none (object lock) */
  gdouble load_seconds;         /* wall time of the last model load */
  gboolean qos_warned;          /* the delay warning was posted */
  GstPad *partial_srcpad;       /* the requested partial_src, or NULL */
  gboolean partial_requested;   /* a request_new_pad is making it */

  /* Everything below "lock" is shared by the streaming thread and the
   * worker (the src pad task). */
  GMutex lock;

  /* the model, changed in state changes only */
  wk_model_loader *loader;      /* started at NULL_TO_READY */
  wk_model *model;              /* NULL when none or the load failed */
  gchar *loaded_path;           /* path of model (or of the failed load) */

  /* the engine's bounded queue (READY and up): the audio, and serialized
   * events and restarts as marks between its samples */
  wk_queue *queue;
  gboolean flushing;
  GstFlowReturn srcresult;      /* what the chain function returns */

  /* streaming thread only */
  gboolean negotiated;
  GstAudioFormat format;        /* F32LE or S16LE */
  GstSegment segment;           /* the input's, FORMAT_UNDEFINED: none */
  GstAudioStreamAlign *align;   /* input timing */
  GstClockTime in_end;          /* where the audio queued ends, or NONE */

  /* worker only (or with the worker stopped) */
  wk_stream *stream;
  guint stream_latency_ms;      /* the stream's policy: 0 offline */
  guint64 partial_serial;       /* of the last partial result posted */
  GstSegment out_segment;       /* the last segment pushed downstream */
  GstClockTime base;            /* stream time of the engine's sample 0 */
  guint64 fed;                  /* samples fed since the last reset */
  GstClockTime out_pos;         /* text or gaps cover time up to here */
  gboolean discont;             /* next text buffer carries DISCONT */
  gboolean own_error;           /* the error was posted already */
  gboolean stream_translate;    /* translate of this run */
  GstClockTime stream_limit;    /* latency + lateness of this run */
  GstClockTime stream_lateness; /* lateness of this run */
  gchar *tag_language;          /* the language code tagged downstream */
  GstClockTime partial_pos;     /* the last partial buffer's PTS, or NONE */
};

struct _GstWhisperKnotClass
{
  GstElementClass parent_class;
};

GType gst_whisperknot_get_type (void);

GST_ELEMENT_REGISTER_DECLARE (whisperknot);

G_END_DECLS
#endif /* __GST_WHISPERKNOT_H__ */
