/* GstHarness tests of what the whisperknot element accepts as audio: a
 * buffer that is not a whole number of samples is an error that says so,
 * never silently truncated.
 *
 * (Kept apart from test-element.c, which another change is editing; its
 * model is made the same way: $WK_MAKE_TEST_MODEL, then $WK_CONVERT.) */

#include <stdlib.h>
#include <string.h>
#include <glib/gstdio.h>
#include <gst/check/gstcheck.h>
#include <gst/check/gstharness.h>

#define CAPS_F32 "audio/x-raw, format=F32LE, rate=16000, channels=1, " \
    "layout=interleaved"
#define CAPS_S16 "audio/x-raw, format=S16LE, rate=16000, channels=1, " \
    "layout=interleaved"

static gchar *tmp_dir, *model_path;

static gboolean
make_model (void)
{
  const gchar *gen = g_getenv ("WK_MAKE_TEST_MODEL");
  const gchar *conv = g_getenv ("WK_CONVERT");
  const gchar *shared = g_getenv ("WK_SHARED_DATA");
  gchar *bin, *cmd;
  gboolean ok;

  if (!gen || !conv || !shared)
    return FALSE;
  tmp_dir = g_dir_make_tmp ("wk-test-element-input-XXXXXX", NULL);
  if (!tmp_dir)
    return FALSE;
  bin = g_build_filename (tmp_dir, "m.bin", NULL);
  model_path = g_build_filename (tmp_dir, "m.knot", NULL);
  cmd = g_strdup_printf ("'%s' --dims small-test --seed 5 --vocab "
      "'%s/for-tests-ggml-tiny.en.bin' '%s' >/dev/null && '%s' '%s' '%s' "
      ">/dev/null", gen, shared, bin, conv, bin, model_path);
  ok = system (cmd) == 0;
  g_unlink (bin);
  g_free (bin);
  g_free (cmd);
  return ok;
}

/* Pushes a buffer of `bytes` under caps; returns the flow and, in *debug,
 * the debug string of the error posted (NULL if none). */
static GstFlowReturn
push_bytes (const gchar * caps, gsize bytes, gchar ** debug)
{
  GstElement *e = gst_element_factory_make ("whisperknot", NULL);
  GstBus *bus = gst_bus_new ();
  GstHarness *h;
  GstBuffer *buf;
  GstMessage *msg;
  GstFlowReturn ret;

  fail_unless (e != NULL, "no whisperknot element: is GST_PLUGIN_PATH set?");
  g_object_set (e, "model", model_path, NULL);
  gst_element_set_bus (e, bus);
  h = gst_harness_new_with_element (e, "sink", "src");
  gst_object_unref (e);
  gst_harness_set_src_caps_str (h, caps);
  buf = gst_buffer_new_and_alloc (bytes);
  gst_buffer_memset (buf, 0, 0, bytes);
  GST_BUFFER_PTS (buf) = 0;
  ret = gst_harness_push (h, buf);
  *debug = NULL;
  msg = gst_bus_pop_filtered (bus, GST_MESSAGE_ERROR);
  if (msg) {
    GError *err = NULL;
    gst_message_parse_error (msg, &err, debug);
    g_clear_error (&err);
    gst_message_unref (msg);
  }
  gst_harness_teardown (h);
  gst_bus_set_flushing (bus, TRUE);
  gst_object_unref (bus);
  return ret;
}

GST_START_TEST (test_partial_samples_are_an_error)
{
  static const struct
  {
    const gchar *caps;
    gsize bytes;
  } bad[] = {
    {CAPS_F32, 4 * 1600 + 2}, {CAPS_F32, 3}, {CAPS_S16, 2 * 1600 + 1},
  };
  guint i;
  gchar *debug;

  for (i = 0; i < G_N_ELEMENTS (bad); i++) {
    fail_unless_equals_int (push_bytes (bad[i].caps, bad[i].bytes, &debug),
        GST_FLOW_ERROR);
    fail_unless (debug && strstr (debug, "whole number"), "case %u: %s", i,
        debug ? debug : "no error posted");
    g_free (debug);
  }
  /* whole samples are fine */
  fail_unless_equals_int (push_bytes (CAPS_F32, 4 * 1600, &debug), GST_FLOW_OK);
  fail_unless (debug == NULL, "%s", debug);
  fail_unless_equals_int (push_bytes (CAPS_S16, 2 * 1601, &debug), GST_FLOW_OK);
  fail_unless (debug == NULL, "%s", debug);
}

GST_END_TEST;

static Suite *
element_input_suite (void)
{
  Suite *s = suite_create ("whisperknot-input");
  TCase *tc = tcase_create ("general");

  suite_add_tcase (s, tc);
  tcase_set_timeout (tc, 300);
  tcase_add_test (tc, test_partial_samples_are_an_error);
  return s;
}

int
main (int argc, char **argv)
{
  int failed;
  Suite *s;

#ifdef __SANITIZE_ADDRESS__
  /* as test-element.c: an uninstrumented scanner cannot load the plugin */
  g_setenv ("GST_REGISTRY_FORK", "no", TRUE);
#endif
  gst_check_init (&argc, &argv);
  if (!make_model ()) {
    g_print ("1..0 # SKIP no model tools (WK_MAKE_TEST_MODEL, WK_CONVERT, "
        "WK_SHARED_DATA)\n");
    return 77;
  }
  s = element_input_suite ();
  failed = gst_check_run_suite (s, "whisperknot-input", __FILE__);
  g_unlink (model_path);
  g_rmdir (tmp_dir);
  g_free (model_path);
  g_free (tmp_dir);
  return failed;
}
