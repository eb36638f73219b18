/* whisperknot: speech to text in a GStreamer element.
 *
 * The element is thin: it queues audio and hands it to the engine
 * (engine/whisperknot.h) on a thread of its own, and turns the engine's
 * segments into timestamped text buffers.
 */
#ifndef __GST_WHISPERKNOT_H__
#define __GST_WHISPERKNOT_H__

#include <gst/gst.h>

G_BEGIN_DECLS
#define GST_TYPE_WHISPERKNOT (gst_whisperknot_get_type ())
G_DECLARE_FINAL_TYPE (GstWhisperKnot, gst_whisperknot, GST, WHISPERKNOT,
    GstElement);

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

GST_ELEMENT_REGISTER_DECLARE (whisperknot);

G_END_DECLS
#endif /* __GST_WHISPERKNOT_H__ */
