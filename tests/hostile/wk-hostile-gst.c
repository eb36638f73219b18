/* wk-hostile-gst: one GStreamer pipeline with the whisperknot element, run
 * to EOS or to its first error, for tests/hostile/run.py.
 *
 *   wk-hostile-gst launch 'PIPELINE'
 *     as gst-launch-1.0 does (gst_parse_launch), in a program built with
 *     the project's sanitizers, so that the instrumented plugin can load;
 *   wk-hostile-gst appsrc CASE MODEL RAW
 *     appsrc ! whisperknot model=MODEL ! fakesink, with RAW (s16le, 16 kHz,
 *     mono) pushed the way CASE says (odd-length buffers, no caps, caps
 *     changes, no timestamps, ...: see push_case); shrink-after-load
 *     truncates MODEL to half once the element has loaded it, before any
 *     audio.
 *
 * The text buffers reaching the sink named "out" go to standard output,
 * one per line. An error message goes to standard error as
 * "ERROR: <element>: <message> (<debug>)" and the exit status is 1; EOS
 * gives 0; 2 is a bad command line.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gst/gst.h>

#define RATE 16000

typedef struct
{
  GstElement *src;
  const char *mode;
  gint16 *pcm;                  /* the RAW file, s16 mono */
  gsize n_samples;
} pusher;

static void
on_handoff (GstElement * sink, GstBuffer * buf, GstPad * pad, gpointer data)
{
  GstMapInfo map;

  if (!gst_buffer_map (buf, &map, GST_MAP_READ))
    return;
  if (map.size > 0) {
    fwrite (map.data, 1, map.size, stdout);
    if (map.data[map.size - 1] != '\n')
      fputc ('\n', stdout);
  }
  gst_buffer_unmap (buf, &map);
}

static GstCaps *
audio_caps (const char *format, int rate)
{
  return gst_caps_new_simple ("audio/x-raw", "format", G_TYPE_STRING, format,
      "rate", G_TYPE_INT, rate, "channels", G_TYPE_INT, 1,
      "layout", G_TYPE_STRING, "interleaved", NULL);
}

/* false once appsrc refuses (flushing after an error, or EOS) */
static gboolean
push_bytes (pusher * p, const void *data, gsize size, GstClockTime pts)
{
  GstBuffer *buf = gst_buffer_new_allocate (NULL, size, NULL);
  GstFlowReturn ret = GST_FLOW_OK;

  if (size)
    gst_buffer_fill (buf, 0, data, size);
  GST_BUFFER_PTS (buf) = pts;
  g_signal_emit_by_name (p->src, "push-buffer", buf, &ret);
  gst_buffer_unref (buf);
  return ret == GST_FLOW_OK;
}

static GstClockTime
pts_at (gsize byte_offset, gsize bytes_per_sample)
{
  return gst_util_uint64_scale (byte_offset / bytes_per_sample, GST_SECOND,
      RATE);
}

/* Pushes bytes [0, size) of data in chunks of `chunk` bytes (the last
 * shorter), timestamped from the offset unless no_pts. */
static gboolean
push_chunked (pusher * p, const guint8 * data, gsize size, gsize chunk,
    gsize bytes_per_sample, gboolean no_pts, gsize offset0)
{
  for (gsize off = 0; off < size; off += chunk) {
    gsize n = MIN (chunk, size - off);
    GstClockTime pts = no_pts ? GST_CLOCK_TIME_NONE :
        pts_at (offset0 + off, bytes_per_sample);
    if (!push_bytes (p, data + off, n, pts))
      return FALSE;
  }
  return TRUE;
}

static float *
to_f32 (const gint16 * pcm, gsize n)
{
  float *f = g_new (float, n);

  for (gsize i = 0; i < n; i++)
    f[i] = (float) pcm[i] / 32768.0f;
  return f;
}

static gpointer
push_case (gpointer data)
{
  pusher *p = data;
  const char *m = p->mode;
  const guint8 *s16 = (const guint8 *) p->pcm;
  gsize s16_bytes = p->n_samples * 2;
  gboolean ok = TRUE;

  if (!strcmp (m, "odd-s16")) {
    /* 4001 bytes: every buffer ends inside a sample */
    ok = push_chunked (p, s16, s16_bytes, 4001, 2, FALSE, 0);
  } else if (!strcmp (m, "odd-f32")) {
    float *f = to_f32 (p->pcm, p->n_samples);
    ok = push_chunked (p, (guint8 *) f, p->n_samples * 4, 4002, 4, FALSE, 0);
    g_free (f);
  } else if (!strcmp (m, "tiny-buffers")) {
    /* one second in 3-byte buffers, then the rest in 100 ms ones */
    gsize first = MIN (s16_bytes, 2 * RATE);
    ok = push_chunked (p, s16, first, 3, 2, TRUE, 0)
        && push_chunked (p, s16 + first, s16_bytes - first, 3200, 2, TRUE,
        first);
  } else if (!strcmp (m, "empty-buffers")) {
    for (gsize off = 0; ok && off < s16_bytes; off += 3200) {
      ok = push_bytes (p, NULL, 0, pts_at (off, 2))
          && push_chunked (p, s16 + off, MIN (3200, s16_bytes - off), 3200, 2,
          FALSE, off);
    }
  } else if (!strcmp (m, "shrink-after-load")) {
    ok = push_chunked (p, s16, s16_bytes, 3200, 2, FALSE, 0);
  } else if (!strcmp (m, "no-timestamps")) {
    ok = push_chunked (p, s16, s16_bytes, 3200, 2, TRUE, 0);
  } else if (!strcmp (m, "backwards-pts")) {
    /* each 100 ms buffer stamped 50 ms before the previous one */
    GstClockTime t = 10 * GST_SECOND;
    for (gsize off = 0; ok && off < s16_bytes; off += 3200) {
      ok = push_bytes (p, s16 + off, MIN (3200, s16_bytes - off), t);
      t -= 50 * GST_MSECOND;
    }
  } else if (!strcmp (m, "huge-pts")) {
    GstClockTime t0 = G_MAXUINT64 / 2;
    for (gsize off = 0; ok && off < s16_bytes; off += 3200)
      ok = push_bytes (p, s16 + off, MIN (3200, s16_bytes - off),
          t0 + pts_at (off, 2));
  } else if (!strcmp (m, "no-caps")) {
    ok = push_chunked (p, s16, s16_bytes, 3200, 2, FALSE, 0);
  } else if (!strcmp (m, "eos-only") || !strcmp (m, "eos-no-caps")) {
    /* nothing */
  } else if (!strcmp (m, "caps-change")) {
    /* two seconds of S16LE, then the rest as F32LE */
    gsize half = MIN (s16_bytes, 4 * RATE);
    float *f = to_f32 (p->pcm, p->n_samples);
    ok = push_chunked (p, s16, half, 3200, 2, FALSE, 0);
    if (ok) {
      GstCaps *caps = audio_caps ("F32LE", RATE);
      g_object_set (p->src, "caps", caps, NULL);
      gst_caps_unref (caps);
      ok = push_chunked (p, (guint8 *) f + half * 2, (s16_bytes - half) * 2,
          6400, 4, FALSE, half * 2);
    }
    g_free (f);
  } else if (!strcmp (m, "rate-change")) {
    gsize half = MIN (s16_bytes, 4 * RATE);
    ok = push_chunked (p, s16, half, 3200, 2, FALSE, 0);
    if (ok) {
      GstCaps *caps = audio_caps ("S16LE", 8000);
      g_object_set (p->src, "caps", caps, NULL);
      gst_caps_unref (caps);
      ok = push_chunked (p, s16 + half, s16_bytes - half, 3200, 2, FALSE, half);
    }
  } else if (!strcmp (m, "one-buffer")) {
    ok = push_bytes (p, s16, s16_bytes, 0);
  } else if (!strcmp (m, "nonfinite-f32")) {
    /* a second of NaN, +-Inf and +-1e30 before the speech */
    float *f = to_f32 (p->pcm, p->n_samples);
    float bad[RATE];
    for (int i = 0; i < RATE; i++) {
      static const float v[] = { NAN, INFINITY, -INFINITY, 1e30f, -1e30f };
      bad[i] = v[i % 5];
    }
    ok = push_chunked (p, (guint8 *) bad, sizeof bad, 6400, 4, FALSE, 0)
        && push_chunked (p, (guint8 *) f, p->n_samples * 4, 6400, 4, FALSE,
        sizeof bad);
    g_free (f);
  } else if (!strcmp (m, "silence")) {
    guint8 *z = g_malloc0 (10 * RATE * 2);
    ok = push_chunked (p, z, 10 * RATE * 2, 3200, 2, FALSE, 0);
    g_free (z);
  }
  if (ok) {
    GstFlowReturn ret;
    g_signal_emit_by_name (p->src, "end-of-stream", &ret);
  }
  return NULL;
}

static const char *const appsrc_modes[] = { "odd-s16", "odd-f32",
  "tiny-buffers", "empty-buffers", "no-timestamps", "backwards-pts",
  "huge-pts", "no-caps", "eos-only", "eos-no-caps", "caps-change",
  "rate-change", "one-buffer", "nonfinite-f32", "silence",
  "shrink-after-load", NULL
};

static GstElement *
make_appsrc_pipeline (const char *mode, const char *model, GstElement ** src,
    GError ** error)
{
  /* max-bytes=0: an unbounded queue, so that no push blocks (a push
   * blocked on a full queue outlives an error and the stop) */
  char *desc = g_strdup_printf ("appsrc name=src format=time max-bytes=0 "
      "! whisperknot name=wk model=\"%s\" ! fakesink name=out "
      "sync=false", model);
  GstElement *pipe = gst_parse_launch (desc, error);

  g_free (desc);
  if (!pipe)
    return NULL;
  *src = gst_bin_get_by_name (GST_BIN (pipe), "src");
  if (strcmp (mode, "no-caps") && strcmp (mode, "eos-no-caps")) {
    GstCaps *caps = audio_caps (!strcmp (mode, "odd-f32")
        || !strcmp (mode, "nonfinite-f32") ? "F32LE" : "S16LE", RATE);
    g_object_set (*src, "caps", caps, NULL);
    gst_caps_unref (caps);
  }
  return pipe;
}

/* READY (the element loads the model), waits until the model is in, then
 * truncates the file to half. */
static gboolean
shrink_after_load (GstElement * pipe, const char *model)
{
  GstElement *wk = gst_bin_get_by_name (GST_BIN (pipe), "wk");
  guint64 bytes = 0;
  struct stat sb;

  if (gst_element_set_state (pipe, GST_STATE_READY) == GST_STATE_CHANGE_FAILURE)
    return FALSE;
  for (int i = 0; i < 60000 && bytes == 0; i++) {
    GstStructure *stats = NULL;
    g_object_get (wk, "stats", &stats, NULL);
    if (stats) {
      gst_structure_get_uint64 (stats, "model-bytes", &bytes);
      gst_structure_free (stats);
    }
    if (bytes == 0)
      g_usleep (10000);
  }
  gst_object_unref (wk);
  if (bytes == 0) {
    fprintf (stderr, "wk-hostile-gst: the model never loaded\n");
    return FALSE;
  }
  if (stat (model, &sb) != 0 || truncate (model, sb.st_size / 2) != 0) {
    fprintf (stderr, "wk-hostile-gst: cannot truncate %s\n", model);
    return FALSE;
  }
  return TRUE;
}

static int
usage (void)
{
  fprintf (stderr, "usage: wk-hostile-gst launch PIPELINE\n"
      "       wk-hostile-gst appsrc CASE MODEL RAW\n");
  return 2;
}

int
main (int argc, char **argv)
{
  GError *error = NULL;
  GstElement *pipe, *out, *src = NULL;
  GThread *thread = NULL;
  pusher p = { 0 };
  GstBus *bus;
  GstMessage *msg;
  int status = 0;

  gst_init (&argc, &argv);
  if (argc == 3 && !strcmp (argv[1], "launch")) {
    pipe = gst_parse_launch (argv[2], &error);
    /* a link that caps forbid is reported with a pipeline */
    if (error && pipe) {
      fprintf (stderr, "ERROR: %s\n", error->message);
      gst_object_unref (pipe);
      return 1;
    }
  } else if (argc == 5 && !strcmp (argv[1], "appsrc")) {
    gchar *raw;
    gsize size;
    gboolean known = FALSE;
    for (int i = 0; appsrc_modes[i]; i++)
      known |= !strcmp (argv[2], appsrc_modes[i]);
    if (!known)
      return usage ();
    if (!g_file_get_contents (argv[4], &raw, &size, &error)) {
      fprintf (stderr, "ERROR: %s\n", error->message);
      return 2;
    }
    p.mode = argv[2];
    p.pcm = (gint16 *) raw;
    p.n_samples = size / 2;
    pipe = make_appsrc_pipeline (argv[2], argv[3], &src, &error);
    p.src = src;
  } else
    return usage ();
  if (!pipe) {
    fprintf (stderr, "ERROR: %s\n", error ? error->message : "no pipeline");
    return 1;
  }

  out = gst_bin_get_by_name (GST_BIN (pipe), "out");
  if (out) {
    g_object_set (out, "signal-handoffs", TRUE, NULL);
    g_signal_connect (out, "handoff", G_CALLBACK (on_handoff), NULL);
    gst_object_unref (out);
  }
  bus = gst_element_get_bus (pipe);
  if (src && !strcmp (p.mode, "shrink-after-load")
      && !shrink_after_load (pipe, argv[3])) {
    gst_object_unref (src);
    gst_object_unref (bus);
    gst_object_unref (pipe);
    g_free (p.pcm);
    return 2;
  }
  if (gst_element_set_state (pipe, GST_STATE_PLAYING) ==
      GST_STATE_CHANGE_FAILURE) {
    /* the error message, if any, says why */
    status = 1;
  }
  if (src)
    thread = g_thread_new ("push", push_case, &p);

  msg = gst_bus_timed_pop_filtered (bus, status ? 0 : GST_CLOCK_TIME_NONE,
      GST_MESSAGE_ERROR | GST_MESSAGE_EOS);
  if (msg && GST_MESSAGE_TYPE (msg) == GST_MESSAGE_ERROR) {
    GError *e = NULL;
    gchar *debug = NULL;
    gst_message_parse_error (msg, &e, &debug);
    fprintf (stderr, "ERROR: %s: %s (%s)\n", GST_OBJECT_NAME (msg->src),
        e->message, debug ? debug : "");
    g_clear_error (&e);
    g_free (debug);
    status = 1;
  } else if (status) {
    fprintf (stderr, "ERROR: the pipeline refused to start, with no error "
        "message\n");
  }
  if (msg)
    gst_message_unref (msg);
  gst_element_set_state (pipe, GST_STATE_NULL);
  if (thread)
    g_thread_join (thread);
  fflush (stdout);
  if (src)
    gst_object_unref (src);
  gst_object_unref (bus);
  gst_object_unref (pipe);
  g_free (p.pcm);
  return status;
}
