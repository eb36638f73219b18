/* Decoding any audio file through GStreamer, see audio-decode.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gst/gst.h>

#include "audio-decode.h"

#define DECODE_CAPS "audio/x-raw, format = (string) F32LE, " \
    "rate = (int) 16000, channels = (int) 1, layout = (string) interleaved"

struct wk_audio_decoder
{
  GstElement *pipeline, *convert, *sink;
  GstBus *bus;
  char *name;
  gint channels;                /* of the decoded audio, 0: not seen (set
                                 * on a streaming thread: atomic) */
  GstBuffer *buf;               /* the samples being read, mapped */
  GstMapInfo map;
  size_t off;                   /* in floats */
  gboolean end;
};

static void
on_pad_added (GstElement * decodebin, GstPad * pad, gpointer user_data)
{
  wk_audio_decoder *d = user_data;
  GstPad *sink = gst_element_get_static_pad (d->convert, "sink");
  GstCaps *caps = gst_pad_get_current_caps (pad);

  if (!caps)
    caps = gst_pad_query_caps (pad, NULL);
  /* the first audio stream; video and subtitles stay unlinked */
  if (caps && !gst_pad_is_linked (sink) &&
      g_str_has_prefix (gst_structure_get_name (gst_caps_get_structure (caps,
                  0)), "audio/")) {
    gint channels = 0;
    gst_structure_get_int (gst_caps_get_structure (caps, 0), "channels",
        &channels);
    g_atomic_int_set (&d->channels, channels);
    gst_pad_link (pad, sink);
  }
  if (caps)
    gst_caps_unref (caps);
  gst_object_unref (sink);
}

static gboolean gst_started;

void
wk_audio_decode_end (void)
{
  if (gst_started)
    gst_deinit ();
  gst_started = FALSE;
}

/* The bus's error, if one was posted: its message into err. */
static gboolean
bus_error (wk_audio_decoder * d, char *err, size_t err_size)
{
  GstMessage *msg = gst_bus_pop_filtered (d->bus, GST_MESSAGE_ERROR);
  GError *error = NULL;
  gchar *debug = NULL;

  if (!msg)
    return FALSE;
  gst_message_parse_error (msg, &error, &debug);
  snprintf (err, err_size, "%s: cannot decode it: %s", d->name,
      error ? error->message : "unknown error");
  g_clear_error (&error);
  g_free (debug);
  gst_message_unref (msg);
  return TRUE;
}

/* Lets go of the buffer being read. */
static void
release_buffer (wk_audio_decoder * d)
{
  if (d->buf) {
    gst_buffer_unmap (d->buf, &d->map);
    gst_buffer_unref (d->buf);
    d->buf = NULL;
  }
}

/* The next buffer of samples into d->buf (mapped), or d->end. */
static wk_status
next_buffer (wk_audio_decoder * d, char *err, size_t err_size)
{
  release_buffer (d);
  d->off = 0;
  while (!d->end) {
    GstSample *sample = NULL;
    gboolean eos = FALSE;

    /* a failure stops the stream without an end-of-stream: the bus
     * is looked at between waits */
    g_signal_emit_by_name (d->sink, "try-pull-sample", 100 * GST_MSECOND,
        &sample);
    if (sample) {
      GstBuffer *b = gst_sample_get_buffer (sample);
      if (b && gst_buffer_get_size (b) >= 4
          && gst_buffer_map (b, &d->map, GST_MAP_READ))
        d->buf = gst_buffer_ref (b);
      gst_sample_unref (sample);
      if (d->buf)
        return WK_OK;
      continue;
    }
    /* the end-of-stream flag first: an error posted before it is seen */
    g_object_get (d->sink, "eos", &eos, NULL);
    if (bus_error (d, err, err_size))
      return WK_ERR_FORMAT;
    d->end = eos;
  }
  return WK_OK;
}

void
wk_audio_decoder_close (wk_audio_decoder * d)
{
  if (!d)
    return;
  release_buffer (d);
  if (d->pipeline) {
    gst_element_set_state (d->pipeline, GST_STATE_NULL);
    gst_object_unref (d->pipeline);
  }
  if (d->bus)
    gst_object_unref (d->bus);
  g_free (d->name);
  g_free (d);
}

/* src: a source element, not yet in a bin (floating): it is sunk here.
 * bytes/size: pushed into src (an appsrc) once the pipeline runs, then
 * end-of-stream; NULL for a source that reads by itself. Returns with
 * the first samples decoded (or the end of a stream with audio but no
 * samples), so that a file that cannot be decoded fails here. */
static wk_status
decoder_start (GstElement * src, const void *bytes, size_t size,
    const char *name, wk_audio_decoder ** out, char *err, size_t err_size)
{
  GstElement *dec, *conv, *res, *filter, *sink;
  GstCaps *caps;
  wk_audio_decoder *d = g_new0 (wk_audio_decoder, 1);
  wk_status st;

  *out = NULL;
  d->name = g_strdup (name);
  d->pipeline = gst_pipeline_new ("decode");
  dec = gst_element_factory_make ("decodebin", NULL);
  conv = gst_element_factory_make ("audioconvert", NULL);
  res = gst_element_factory_make ("audioresample", NULL);
  filter = gst_element_factory_make ("capsfilter", NULL);
  sink = gst_element_factory_make ("appsink", NULL);
  if (!d->pipeline || !src || !dec || !conv || !res || !filter || !sink) {
    snprintf (err, err_size, "%s: not a 16 kHz WAV file, and GStreamer's "
        "decodebin, audioconvert, audioresample and appsink "
        "(gst-plugins-base) are not installed to decode it", name);
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
    wk_audio_decoder_close (d);
    return WK_ERR_UNSUPPORTED;
  }
  caps = gst_caps_from_string (DECODE_CAPS);
  g_object_set (filter, "caps", caps, NULL);
  gst_caps_unref (caps);
  /* as fast as decoding goes, a few buffers ahead of the reader */
  g_object_set (sink, "sync", FALSE, "max-buffers", 16, "drop", FALSE, NULL);
  gst_bin_add_many (GST_BIN (d->pipeline), src, dec, conv, res, filter, sink,
      NULL);
  gst_element_link (src, dec);
  gst_element_link_many (conv, res, filter, sink, NULL);
  d->convert = conv;
  d->sink = sink;
  g_signal_connect (dec, "pad-added", G_CALLBACK (on_pad_added), d);

  d->bus = gst_element_get_bus (d->pipeline);
  /* a failure posts its reason on the bus */
  gst_element_set_state (d->pipeline, GST_STATE_PLAYING);
  if (bytes) {
    /* the whole file as one buffer that borrows the caller's bytes (the
     * pipeline is stopped before they go), then end-of-stream */
    GstBuffer *buf = gst_buffer_new_wrapped_full (GST_MEMORY_FLAG_READONLY,
        (gpointer) bytes, size, 0, size, NULL, NULL);
    GstFlowReturn fr = GST_FLOW_OK;

    g_signal_emit_by_name (src, "push-buffer", buf, &fr);
    gst_buffer_unref (buf);
    g_signal_emit_by_name (src, "end-of-stream", &fr);
  }
  st = next_buffer (d, err, err_size);
  if (st == WK_OK && g_atomic_int_get (&d->channels) == 0) {
    snprintf (err, err_size, "%s: no audio in it", name);
    st = WK_ERR_FORMAT;
  }
  if (st != WK_OK) {
    wk_audio_decoder_close (d);
    return st;
  }
  *out = d;
  return WK_OK;
}

wk_status
wk_audio_decoder_read (wk_audio_decoder * d, float *out, size_t n,
    size_t *got, char *err, size_t err_size)
{
  size_t done = 0;

  *got = 0;
  while (done < n && !d->end) {
    size_t have = d->map.size / 4 - d->off, k, take;
    wk_status st;
    if (!d->buf || have == 0) {
      st = next_buffer (d, err, err_size);
      if (st != WK_OK)
        return st;
      continue;
    }
    take = n - done < have ? n - done : have;
    for (k = 0; k < take; k++)
      out[done + k] = GST_READ_FLOAT_LE (d->map.data + 4 * (d->off + k));
    d->off += take;
    done += take;
    *got = done;
  }
  return WK_OK;
}

int64_t
wk_audio_decoder_length (const wk_audio_decoder * d)
{
  gint64 ns = -1;

  if (!gst_element_query_duration (d->pipeline, GST_FORMAT_TIME, &ns)
      || ns < 0)
    return -1;
  return (int64_t) gst_util_uint64_scale_round ((guint64) ns, WK_SAMPLE_RATE,
      GST_SECOND);
}

int
wk_audio_decoder_channels (const wk_audio_decoder * d)
{
  return g_atomic_int_get (&((wk_audio_decoder *) d)->channels);
}

/* Every sample of d into wav, and d closed. */
static wk_status
decode_all (wk_audio_decoder * d, wk_wav * wav, char *err, size_t err_size)
{
  float *samples = NULL;
  size_t n = 0, cap = 0, got;
  wk_status st = WK_OK;

  for (;;) {
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 1 << 20;
      float *p = realloc (samples, ncap * sizeof *p);
      if (!p) {
        snprintf (err, err_size, "%s: out of memory decoding it", d->name);
        st = WK_ERR_NOMEM;
        break;
      }
      samples = p;
      cap = ncap;
    }
    st = wk_audio_decoder_read (d, samples + n, cap - n, &got, err, err_size);
    n += got;
    if (st != WK_OK || n < cap)
      break;
  }
  if (st == WK_OK) {
    wav->samples = samples;
    wav->n_samples = n;
    wav->rate = WK_SAMPLE_RATE;
    wav->channels = wk_audio_decoder_channels (d);
  } else {
    free (samples);
  }
  wk_audio_decoder_close (d);
  return st;
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

static GstElement *
file_source (const char *path)
{
  GstElement *src = gst_element_factory_make ("filesrc", NULL);

  if (src)
    g_object_set (src, "location", path, NULL);
  return src;
}

wk_status
wk_audio_decoder_open (const char *path, wk_audio_decoder ** out, char *err,
    size_t err_size)
{
  wk_wav unused;

  *out = NULL;
  if (!start_gst (path, &unused, err, err_size))
    return WK_ERR_UNSUPPORTED;
  return decoder_start (file_source (path), NULL, 0, path, out, err, err_size);
}

wk_status
wk_audio_decode (const char *path, wk_wav * wav, char *err, size_t err_size)
{
  wk_audio_decoder *d;
  wk_status st;

  if (!start_gst (path, wav, err, err_size))
    return WK_ERR_UNSUPPORTED;
  st = decoder_start (file_source (path), NULL, 0, path, &d, err, err_size);
  return st == WK_OK ? decode_all (d, wav, err, err_size) : st;
}

wk_status
wk_audio_decode_bytes (const void *data, size_t size, const char *name,
    wk_wav * wav, char *err, size_t err_size)
{
  GstElement *src;
  wk_audio_decoder *d;
  wk_status st;

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
  st = decoder_start (src, data, size, name, &d, err, err_size);
  return st == WK_OK ? decode_all (d, wav, err, err_size) : st;
}
