/* Stress test of the element: 8 pipelines on one model, paced like a live
 * source (filesrc ! wavparse ! identity sync=true ! whisperknot !
 * fakesink, jfk.wav), half with the live policy and half offline, go
 * through random state changes and flushing seeks for a while. Every
 * change to NULL must return within a second, no pipeline may post an
 * error, and afterwards every pipeline must still transcribe jfk.wav to
 * EOS: text and gap events to the end of the file, and text from the
 * offline ones. (Not from the live ones: on a loaded machine the live
 * policy runs on longer steps, and on some of those the random-weight
 * model says nothing; a live pipeline then sends only gaps. Seen under
 * TSan with six busy loops beside it; wk-live-latency --virtual
 * 2000,3,50,1 gives no words either.)
 *
 * The model is the random-weight one the other tests use (small: the test
 * checks the element's threads, not the model). The churn lasts
 * $WK_STRESS_SECONDS (default 40) seconds from the seed $WK_STRESS_SEED
 * (default 1); the figures it prints (actions, slowest stop and seek) are
 * for people, only the bounds above are checked.
 */
#include <unistd.h>
#include <glib/gstdio.h>
#include <gst/gst.h>

#include "wk-test.h"
#include "wk-test-model.h"

#define N_PIPES 8
/* a stop that takes longer fails the test; sanitizer builds run the
 * recognizers 5-15x slower, and a stop waits for the model run it
 * cancels to reach its next check (TSan, beside another test: 1.16 s) */
#define STOP_BOUND_S (WK_TEST_SANITIZED ? 2.0 : 1.0)
#define JFK_SECONDS 11

typedef struct
{
  GstElement *pipeline;
  GstElement *wk;
  GstBus *bus;
  gint n_text;                  /* text buffers out of whisperknot */
  gint out_ms;                  /* the latest end of its text and gaps */
  gboolean eos;
  guint latency_ms;
} Pipe;

static gchar tmpdir[256];
static gchar knot[512];
static double max_stop_s, max_seek_s;
static guint n_stops, n_seeks, n_changes, n_errors;

/* Counts whisperknot's text buffers and notes how far its text and gap
 * events reach. */
static GstPadProbeReturn
watch_output (GstPad * pad, GstPadProbeInfo * info, gpointer user_data)
{
  Pipe *p = user_data;
  GstClockTime ts = GST_CLOCK_TIME_NONE, dur = GST_CLOCK_TIME_NONE;
  gint ms, old;

  if (info->type & GST_PAD_PROBE_TYPE_BUFFER) {
    GstBuffer *buf = GST_PAD_PROBE_INFO_BUFFER (info);

    g_atomic_int_inc (&p->n_text);
    ts = GST_BUFFER_PTS (buf);
    dur = GST_BUFFER_DURATION (buf);
  } else if (GST_EVENT_TYPE (GST_PAD_PROBE_INFO_EVENT (info)) == GST_EVENT_GAP) {
    gst_event_parse_gap (GST_PAD_PROBE_INFO_EVENT (info), &ts, &dur);
  }
  if (!GST_CLOCK_TIME_IS_VALID (ts) || !GST_CLOCK_TIME_IS_VALID (dur))
    return GST_PAD_PROBE_OK;
  ms = (gint) ((ts + dur) / GST_MSECOND);
  do {
    old = g_atomic_int_get (&p->out_ms);
  } while (ms > old && !g_atomic_int_compare_and_exchange (&p->out_ms, old,
          ms));
  return GST_PAD_PROBE_OK;
}

static gboolean
pipe_init (Pipe * p, guint i, const gchar * wav)
{
  gchar *desc;
  GError *error = NULL;
  GstPad *pad;

  memset (p, 0, sizeof *p);
  p->latency_ms = i % 2 ? 0 : 1000;
  /* one thread each: 8 pipelines share two cores in CI */
  desc = g_strdup_printf ("filesrc location=\"%s\" ! wavparse ! "
      "identity sync=true ! whisperknot name=wk model=\"%s\" latency=%u "
      "threads=1 ! fakesink sync=false async=false", wav, knot, p->latency_ms);
  p->pipeline = gst_parse_launch (desc, &error);
  g_free (desc);
  if (!p->pipeline) {
    fprintf (stderr, "pipeline %u: %s\n", i, error ? error->message : "?");
    g_clear_error (&error);
    return FALSE;
  }
  p->wk = gst_bin_get_by_name (GST_BIN (p->pipeline), "wk");
  pad = gst_element_get_static_pad (p->wk, "src");
  gst_pad_add_probe (pad, GST_PAD_PROBE_TYPE_BUFFER |
      GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM, watch_output, p, NULL);
  gst_object_unref (pad);
  p->bus = gst_element_get_bus (p->pipeline);
  return TRUE;
}

static void
pipe_clear (Pipe * p)
{
  if (!p->pipeline)
    return;
  gst_element_set_state (p->pipeline, GST_STATE_NULL);
  gst_object_unref (p->bus);
  gst_object_unref (p->wk);
  gst_object_unref (p->pipeline);
}

/* Takes the messages on p's bus: errors fail the test, EOS is noted. */
static void
pipe_poll (Pipe * p, guint i)
{
  GstMessage *msg;

  while ((msg = gst_bus_pop_filtered (p->bus, GST_MESSAGE_ERROR |
              GST_MESSAGE_EOS))) {
    if (GST_MESSAGE_TYPE (msg) == GST_MESSAGE_EOS) {
      p->eos = TRUE;
    } else {
      GError *error = NULL;
      gchar *debug = NULL;

      gst_message_parse_error (msg, &error, &debug);
      CHECK_MSG (FALSE, "pipeline %u: error from %s: %s (%s)", i,
          GST_OBJECT_NAME (GST_MESSAGE_SRC (msg)), error->message,
          debug ? debug : "");
      n_errors++;
      g_clear_error (&error);
      g_free (debug);
    }
    gst_message_unref (msg);
  }
}

/* Sets p to NULL and checks that it took less than STOP_BOUND_S. */
static void
pipe_stop (Pipe * p, guint i)
{
  GstState from = GST_STATE_VOID_PENDING;
  double t;
  GstStateChangeReturn ret;

  gst_element_get_state (p->pipeline, &from, NULL, 0);
  t = wk_test_now_s ();
  ret = gst_element_set_state (p->pipeline, GST_STATE_NULL);
  t = wk_test_now_s () - t;
  CHECK_MSG (ret == GST_STATE_CHANGE_SUCCESS, "pipeline %u: to NULL: %s", i,
      gst_element_state_change_return_get_name (ret));
  CHECK_MSG (t < STOP_BOUND_S, "pipeline %u: to NULL from %s took %.3f s", i,
      gst_element_state_get_name (from), t);
  if (t > STOP_BOUND_S / 4)
    printf ("# pipeline %u: to NULL from %s took %.3f s\n", i,
        gst_element_state_get_name (from), t);
  if (t > max_stop_s)
    max_stop_s = t;
  n_stops++;
  p->eos = FALSE;
}

static void
pipe_change (Pipe * p, guint i, GstState state)
{
  GstStateChangeReturn ret;

  if (state == GST_STATE_NULL) {
    pipe_stop (p, i);
    return;
  }
  if (state == GST_STATE_READY)
    p->eos = FALSE;
  ret = gst_element_set_state (p->pipeline, state);
  CHECK_MSG (ret != GST_STATE_CHANGE_FAILURE, "pipeline %u: to %s failed",
      i, gst_element_state_get_name (state));
  n_changes++;
}

/* A flushing seek to pos (in PAUSED or PLAYING). */
static void
pipe_seek (Pipe * p, guint i, GstClockTime pos)
{
  GstState state = GST_STATE_NULL;
  double t;

  gst_element_get_state (p->pipeline, &state, NULL, 0);
  if (state < GST_STATE_PAUSED)
    return;
  t = wk_test_now_s ();
  /* may be refused while the pipeline is still changing state */
  gst_element_seek_simple (p->pipeline, GST_FORMAT_TIME, GST_SEEK_FLAG_FLUSH,
      pos);
  t = wk_test_now_s () - t;
  if (t > max_seek_s)
    max_seek_s = t;
  p->eos = FALSE;
  n_seeks++;
}

static void
churn (Pipe * pipes, double seconds, guint32 seed)
{
  GRand *rand = g_rand_new_with_seed (seed);
  double end = wk_test_now_s () + seconds;
  guint i;

  while (wk_test_now_s () < end && n_errors == 0) {
    Pipe *p;

    i = (guint) g_rand_int_range (rand, 0, N_PIPES);
    p = &pipes[i];
    switch (g_rand_int_range (rand, 0, 6)) {
      case 0:
        pipe_change (p, i, GST_STATE_NULL);
        break;
      case 1:
        pipe_change (p, i, GST_STATE_READY);
        break;
      case 2:
        pipe_change (p, i, GST_STATE_PAUSED);
        break;
      case 3:
      case 4:
        /* mostly playing, so that the recognizers work */
        pipe_change (p, i, GST_STATE_PLAYING);
        break;
      default:
        pipe_seek (p, i, g_rand_int_range (rand, 0, JFK_SECONDS * 10) *
            (GST_SECOND / 10));
        break;
    }
    for (i = 0; i < N_PIPES; i++)
      pipe_poll (&pipes[i], i);
    g_usleep ((gulong) g_rand_int_range (rand, 20, 250) * 1000);
  }
  g_rand_free (rand);
}

/* After the churn: each pipeline stops, then plays jfk.wav from the start
 * to EOS, with text. */
static void
play_to_eos (Pipe * pipes)
{
  /* real time plus room for 8 recognizers on two cores (sanitizers: 4x) */
  double limit = wk_test_now_s () + (JFK_SECONDS + 60) *
      (WK_TEST_SANITIZED ? 4 : 1);
  guint i, n_eos = 0;

  for (i = 0; i < N_PIPES; i++) {
    pipe_stop (&pipes[i], i);
    g_atomic_int_set (&pipes[i].n_text, 0);
    g_atomic_int_set (&pipes[i].out_ms, 0);
  }
  for (i = 0; i < N_PIPES; i++)
    pipe_change (&pipes[i], i, GST_STATE_PLAYING);
  while (n_eos < N_PIPES && wk_test_now_s () < limit && n_errors == 0) {
    g_usleep (G_USEC_PER_SEC / 10);
    for (i = 0, n_eos = 0; i < N_PIPES; i++) {
      pipe_poll (&pipes[i], i);
      n_eos += pipes[i].eos;
    }
  }
  for (i = 0; i < N_PIPES; i++) {
    CHECK_MSG (pipes[i].eos, "pipeline %u (latency %u): no EOS", i,
        pipes[i].latency_ms);
    CHECK_MSG (g_atomic_int_get (&pipes[i].out_ms) >= JFK_SECONDS * 1000 -
        100, "pipeline %u (latency %u): text and gaps to %.3f s of %d s", i,
        pipes[i].latency_ms, g_atomic_int_get (&pipes[i].out_ms) / 1000.0,
        JFK_SECONDS);
    CHECK_MSG (pipes[i].latency_ms > 0 ||
        g_atomic_int_get (&pipes[i].n_text) > 0,
        "pipeline %u (offline): no text after the churn", i);
    printf ("# pipeline %u (latency %u): %d text buffers, text and gaps "
        "to %.1f s\n", i, pipes[i].latency_ms,
        g_atomic_int_get (&pipes[i].n_text),
        g_atomic_int_get (&pipes[i].out_ms) / 1000.0);
    pipe_stop (&pipes[i], i);
  }
}

static Pipe pipes[N_PIPES];

static void
test_stress_8_pipelines (void)
{
  const gchar *s_env = g_getenv ("WK_STRESS_SECONDS");
  const gchar *seed_env = g_getenv ("WK_STRESS_SEED");
  double seconds = s_env ? g_ascii_strtod (s_env, NULL) : 40.0;
  guint32 seed = seed_env ? (guint32) g_ascii_strtoull (seed_env, NULL,
      10) : 1;
  gchar *wav = g_strdup (wk_test_shared_path ("jfk.wav"));
  double t0;
  guint i;

  for (i = 0; i < N_PIPES; i++)
    if (!pipe_init (&pipes[i], i, wav)) {
      wk_test_failures++;
      goto out;
    }
  t0 = wk_test_now_s ();
  for (i = 0; i < N_PIPES; i++)
    pipe_change (&pipes[i], i, GST_STATE_PLAYING);
  churn (pipes, seconds, seed);
  printf ("# churn: %.0f s, seed %u: %u state changes, %u stops (slowest "
      "%.3f s), %u flushing seeks (slowest %.3f s)\n",
      wk_test_now_s () - t0, seed, n_changes, n_stops, max_stop_s, n_seeks,
      max_seek_s);
  play_to_eos (pipes);
  printf ("# slowest stop overall: %.3f s (bound %.1f s)\n", max_stop_s,
      STOP_BOUND_S);
out:
  for (i = 0; i < N_PIPES; i++)
    pipe_clear (&pipes[i]);
  g_free (wav);
}

/* Links the system plugins the pipelines need (filesrc, identity,
 * fakesink; wavparse) from GStreamer's plugin folder into dir/plugins;
 * FALSE when one is missing. Only these: scanning every installed plugin
 * costs seconds and makes GLib leave behind its first quark block, which
 * LeakSanitizer reports. */
static gboolean
link_system_plugins (const gchar * pluginsdir, const gchar * dir, gchar ** out)
{
  static const gchar *const files[] = { "libgstcoreelements.so",
    "libgstwavparse.so"
  };
  gchar *plugins = g_build_filename (dir, "plugins", NULL);
  guint i;

  *out = plugins;
  if (g_mkdir (plugins, 0755) != 0)
    return FALSE;
  for (i = 0; i < G_N_ELEMENTS (files); i++) {
    gchar *from = g_build_filename (pluginsdir, files[i], NULL);
    gchar *to = g_build_filename (plugins, files[i], NULL);
    gboolean ok = g_file_test (from, G_FILE_TEST_EXISTS) &&
        symlink (from, to) == 0;

    if (!ok)
      printf ("1..0 # SKIP no %s\n", from);
    g_free (from);
    g_free (to);
    if (!ok)
      return FALSE;
  }
  return TRUE;
}

/* argv[1]: GStreamer's plugin folder */
int
main (int argc, char **argv)
{
  gchar *plugins = NULL, *registry;
  int rc;

  /* the fixture's allocation counters serve the engine tests */
  (void) counting;
  (void) n_allocs;
  if (argc < 2) {
    fprintf (stderr, "usage: %s GST-PLUGINS-DIR\n", argv[0]);
    return 2;
  }
  if (!wk_test_have_model_tools ())
    return 77;
  if (wk_test_make_tmpdir (tmpdir, sizeof tmpdir, "test-stress") != 0)
    return 1;
  /* The pipelines need system plugins, which the tests' environment
   * hides, beside the build's; in a registry of their own, scanned in
   * this process (gst-plugin-scanner cannot load a sanitizer build of
   * the plugin). */
  if (!link_system_plugins (argv[1], tmpdir, &plugins)) {
    g_free (plugins);
    wk_test_remove_tmpdir (tmpdir);
    return 77;
  }
  g_setenv ("GST_PLUGIN_SYSTEM_PATH_1_0", plugins, TRUE);
  registry = g_build_filename (tmpdir, "registry.bin", NULL);
  g_setenv ("GST_REGISTRY_1_0", registry, TRUE);
  g_setenv ("GST_REGISTRY_FORK", "no", TRUE);
  g_free (registry);
  g_free (plugins);
  gst_init (&argc, &argv);

  if (wk_test_make_model (tmpdir, "small-test", "q8_0",
          "for-tests-ggml-tiny.en.bin", NULL, "small", knot, sizeof knot,
          NULL, 0) != 0) {
    fprintf (stderr, "cannot make the test model\n");
    wk_test_remove_tmpdir (tmpdir);
    return 1;
  }
  RUN (test_stress_8_pipelines);
  rc = TEST_EXIT ();
  wk_test_remove_tmpdir (tmpdir);
  return rc;
}
