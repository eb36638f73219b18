/* Decoding any audio file through GStreamer, see audio-decode.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gst/gst.h>

#include "audio-decode.h"

#define DECODE_CAPS "audio/x-raw, format = (string) F32LE, " \
    "rate = (int) 16000, channels = (int) 1, layout = (string) interleaved"

typedef struct
{
  GstElement *convert;          /* where decodebin's audio pad goes */
  float *samples;
  size_t n, cap;
  int channels;                 /* of the decoded audio, 0: not seen */
  gboolean failed;              /* out of memory */
} decode_state;

static void
on_pad_added (GstElement * decodebin, GstPad * pad, gpointer user_data)
{
  decode_state *ds = user_data;
  GstPad *sink = gst_element_get_static_pad (ds->convert, "sink");
  GstCaps *caps = gst_pad_get_current_caps (pad);

  if (!caps)
    caps = gst_pad_query_caps (pad, NULL);
  /* the first audio stream; video and subtitles stay unlinked */
  if (caps && !gst_pad_is_linked (sink) &&
      g_str_has_prefix (gst_structure_get_name (gst_caps_get_structure (caps,
                  0)), "audio/")) {
    gst_structure_get_int (gst_caps_get_structure (caps, 0), "channels",
        &ds->channels);
    gst_pad_link (pad, sink);
  }
  if (caps)
    gst_caps_unref (caps);
  gst_object_unref (sink);
}

static void
on_handoff (GstElement * sink, GstBuffer * buf, GstPad * pad,
    gpointer user_data)
{
  decode_state *ds = user_data;
  GstMapInfo map;
  size_t k, n;

  if (ds->failed || !gst_buffer_map (buf, &map, GST_MAP_READ))
    return;
  n = map.size / 4;
  if (ds->n + n > ds->cap) {
    size_t cap = ds->cap ? ds->cap : 1 << 20;
    float *p;
    while (cap < ds->n + n)
      cap *= 2;
    p = realloc (ds->samples, cap * sizeof *p);
    if (!p) {
      ds->failed = TRUE;
      gst_buffer_unmap (buf, &map);
      return;
    }
    ds->samples = p;
    ds->cap = cap;
  }
  for (k = 0; k < n; k++)
    ds->samples[ds->n + k] = GST_READ_FLOAT_LE (map.data + 4 * k);
  ds->n += n;
  gst_buffer_unmap (buf, &map);
}

static gboolean gst_started;

void
wk_audio_decode_end (void)
{
  if (gst_started)
    gst_deinit ();
  gst_started = FALSE;
}

/* src: a source element, not yet in a bin (floating): it is sunk here.
 * bytes/size: pushed into src (an appsrc) once the pipeline runs, then
 * end-of-stream; NULL for a source that reads by itself. */
static wk_status
decode_from (GstElement * src, const void *bytes, size_t size,
    const char *name, wk_wav * wav, char *err, size_t err_size)
{
  GstElement *pipeline, *dec, *conv, *res, *filter, *sink;
  GstCaps *caps;
  GstBus *bus;
  GstMessage *msg;
  decode_state ds = { 0 };
  wk_status st = WK_OK;

  pipeline = gst_pipeline_new ("decode");
  dec = gst_element_factory_make ("decodebin", NULL);
  conv = gst_element_factory_make ("audioconvert", NULL);
  res = gst_element_factory_make ("audioresample", NULL);
  filter = gst_element_factory_make ("capsfilter", NULL);
  sink = gst_element_factory_make ("fakesink", NULL);
  if (!pipeline || !src || !dec || !conv || !res || !filter || !sink) {
    snprintf (err, err_size, "%s: not a 16 kHz WAV file, and GStreamer's "
        "decodebin, audioconvert and audioresample (gst-plugins-base) are "
        "not installed to decode it", name);
    if (pipeline)
      gst_object_unref (pipeline);
    /* elements not yet in a bin are floating */
    if (src)
      gst_object_unref (gst_object_ref_sink (src));
    if (dec)
      gst_object_unref (gst_object_ref_sink (dec));
    if (conv)
      gst_object_unref (gst_object_ref_sink (conv));
    if (res)
      gst_object_unref (gst_object_ref_sink (res));
    if (filter)
      gst_object_unref (gst_object_ref_sink (filter));
    if (sink)
      gst_object_unref (gst_object_ref_sink (sink));
    return WK_ERR_UNSUPPORTED;
  }
  caps = gst_caps_from_string (DECODE_CAPS);
  g_object_set (filter, "caps", caps, NULL);
  gst_caps_unref (caps);
  /* as fast as decoding goes, every buffer to the handoff */
  g_object_set (sink, "sync", FALSE, "signal-handoffs", TRUE, NULL);
  gst_bin_add_many (GST_BIN (pipeline), src, dec, conv, res, filter, sink,
      NULL);
  gst_element_link (src, dec);
  gst_element_link_many (conv, res, filter, sink, NULL);
  ds.convert = conv;
  g_signal_connect (dec, "pad-added", G_CALLBACK (on_pad_added), &ds);
  g_signal_connect (sink, "handoff", G_CALLBACK (on_handoff), &ds);

  bus = gst_element_get_bus (pipeline);
  /* a failure posts its reason on the bus */
  gst_element_set_state (pipeline, GST_STATE_PLAYING);
  if (bytes) {
    /* the whole file as one buffer that borrows the caller's bytes (the
     * pipeline is stopped before this returns), then end-of-stream */
    GstBuffer *buf = gst_buffer_new_wrapped_full (GST_MEMORY_FLAG_READONLY,
        (gpointer) bytes, size, 0, size, NULL, NULL);
    GstFlowReturn fr = GST_FLOW_OK;

    g_signal_emit_by_name (src, "push-buffer", buf, &fr);
    gst_buffer_unref (buf);
    g_signal_emit_by_name (src, "end-of-stream", &fr);
  }
  msg = gst_bus_timed_pop_filtered (bus, GST_CLOCK_TIME_NONE,
      GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
  if (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
    GError *error = NULL;
    gchar *debug = NULL;

    gst_message_parse_error (msg, &error, &debug);
    snprintf (err, err_size, "%s: cannot decode it: %s", name,
        error ? error->message : "unknown error");
    g_clear_error (&error);
    g_free (debug);
    st = WK_ERR_FORMAT;
  } else if (ds.failed) {
    snprintf (err, err_size, "%s: out of memory decoding it", name);
    st = WK_ERR_NOMEM;
  } else if (ds.channels == 0) {
    snprintf (err, err_size, "%s: no audio in it", name);
    st = WK_ERR_FORMAT;
  }
  if (msg)
    gst_message_unref (msg);
  gst_element_set_state (pipeline, GST_STATE_NULL);
  gst_object_unref (bus);
  gst_object_unref (pipeline);
  if (st != WK_OK) {
    free (ds.samples);
    return st;
  }
  wav->samples = ds.samples;
  wav->n_samples = ds.n;
  wav->rate = WK_SAMPLE_RATE;
  wav->channels = ds.channels;
  return WK_OK;
}

static gboolean
start_gst (const char *name, wk_wav * wav, char *err, size_t err_size)
{
  memset (wav, 0, sizeof *wav);
  if (!gst_init_check (NULL, NULL, NULL)) {
    snprintf (err, err_size, "%s: GStreamer cannot start", name);
    return FALSE;
  }
  gst_started = TRUE;
  return TRUE;
}

wk_status
wk_audio_decode (const char *path, wk_wav * wav, char *err, size_t err_size)
{
  GstElement *src;

  if (!start_gst (path, wav, err, err_size))
    return WK_ERR_UNSUPPORTED;
  src = gst_element_factory_make ("filesrc", NULL);
  if (src)
    g_object_set (src, "location", path, NULL);
  return decode_from (src, NULL, 0, path, wav, err, err_size);
}

wk_status
wk_audio_decode_bytes (const void *data, size_t size, const char *name,
    wk_wav * wav, char *err, size_t err_size)
{
  GstElement *src;

  if (!start_gst (name, wav, err, err_size))
    return WK_ERR_UNSUPPORTED;
  if (size == 0) {
    snprintf (err, err_size, "%s: empty", name);
    return WK_ERR_FORMAT;
  }
  src = gst_element_factory_make ("appsrc", NULL);
  if (src)
    /* a byte stream of known size; the one buffer goes in whatever
     * appsrc's queue limit */
    g_object_set (src, "size", (gint64) size, "format", GST_FORMAT_BYTES,
        "max-bytes", (guint64) size, "block", FALSE, NULL);
  return decode_from (src, data, size, name, wav, err, err_size);
}
