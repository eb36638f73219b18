/* Voice activity detection: the Silero VAD knot loader (shared and
 * replaced through the model registry), the network against whisper.cpp's
 * probabilities on jfk.wav, the segmenter (whisper.cpp's segments,
 * streaming in any buffer size == offline, parameters), silence and noise,
 * rejection of corrupt knots and of the ggml file, no allocation while
 * feeding, and the cost of a chunk. */
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ggml-vad.h"
#include "knot.h"
#include "knot-writer.h"
#include "vad.h"
#include "wav.h"
#include "whisperknot.h"
#include "wk-test.h"
#include "wk-test-model.h"

/* The long statistical runs are shortened under sanitizers (about 20x
 * slower), which are there for memory errors, not for statistics. */
#define NOISE_SECONDS (WK_TEST_SANITIZED ? 60 : 600)
#define COST_SECONDS (WK_TEST_SANITIZED ? 5 : 60)

/* ---- fixtures ---------------------------------------------------------- */

#define SR 16000

static const char *ggml_path;   /* Silero's ggml file (shared test data) */
static char model_path[256];    /* its knot, converted by main() */
static wk_vad_model *model;
static float *jfk;
static size_t jfk_n;

/* whisper.cpp's segments of jfk.wav with the default parameters, in
 * 10 ms units (tests/data/vad-jfk-whispercpp-probs.txt) */
static const int wcpp_segs[4][2] = {
  {32, 227}, {327, 441}, {538, 768}, {816, 1062}
};

static int64_t
to_cs (int64_t samples)
{
  return (int64_t) floor (samples / (double) SR * 100.0 + 0.5);
}

/* Deterministic white noise, Gaussian, at `dbfs` RMS. */
static void
make_noise (float *x, size_t n, double dbfs, uint64_t seed)
{
  double rms = pow (10.0, dbfs / 20.0);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;

  for (size_t i = 0; i < n; i += 2) {
    double u1, u2, r;
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    u1 = ((s >> 11) + 1.0) / 9007199254740993.0;
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    u2 = (s >> 11) / 9007199254740992.0;
    r = sqrt (-2.0 * log (u1)) * rms;
    x[i] = (float) (r * cos (2 * M_PI * u2));
    if (i + 1 < n)
      x[i + 1] = (float) (r * sin (2 * M_PI * u2));
  }
}

static wk_vad *
new_vad (const wk_vad_params * p)
{
  wk_vad *v = NULL;
  char err[256];

  if (wk_vad_new (model, p, &v, err, sizeof err) != WK_OK) {
    fprintf (stderr, "wk_vad_new: %s\n", err);
    exit (1);
  }
  return v;
}

static size_t
speech_samples (const wk_vad_segment * s, size_t n)
{
  size_t t = 0;
  for (size_t i = 0; i < n; i++)
    t += (size_t) (s[i].end - s[i].start);
  return t;
}

/* ---- tests ------------------------------------------------------------- */

static void
test_load_shipped_and_shared (void)
{
  wk_vad_model *a = NULL, *b = NULL, *c = NULL;
  char err[256];
  int ver[3];
  const char *shipped = wk_default_vad_model_path ();

  CHECK (shipped != NULL && shipped[0]);
  CHECK_MSG (wk_vad_model_load (shipped, &a, err, sizeof err) == WK_OK,
      "%s: %s", shipped, err);
  if (!a)
    return;
  CHECK (strcmp (wk_vad_model_type (a), "silero-16k") == 0);
  wk_vad_model_version (a, ver);
  CHECK (ver[0] == 6 && ver[1] == 2 && ver[2] == 0);
  /* the same file twice: one model */
  CHECK (wk_vad_model_load (shipped, &b, err, sizeof err) == WK_OK);
  CHECK (a == b);
  /* the knot converted from the shared test copy is another file (the
   * same tensors): its own model */
  CHECK (wk_vad_model_load (model_path, &c, err, sizeof err) == WK_OK);
  CHECK (c != NULL && c != a);
  wk_vad_model_unref (b);
  wk_vad_model_unref (a);
  wk_vad_model_unref (c);
  /* the shipped file is that knot, tensor for tensor */
  {
    wk_knot *k1 = NULL, *k2 = NULL;
    CHECK (wk_knot_open (shipped, &k1, err, sizeof err) == WK_OK);
    CHECK (wk_knot_open (model_path, &k2, err, sizeof err) == WK_OK);
    CHECK (k1 && k2 && wk_knot_n_tensors (k1) == wk_knot_n_tensors (k2));
    for (int64_t i = 0; k1 && k2 && i < wk_knot_n_tensors (k1); i++) {
      const wk_tensor *t1 = wk_knot_tensor_at (k1, i);
      const wk_tensor *t2 = wk_knot_find (k2, t1->name);
      CHECK_MSG (t2 && t2->nbytes == t1->nbytes
          && memcmp (t1->data, t2->data, t1->nbytes) == 0, "%s", t1->name);
    }
    wk_knot_close (k1);
    wk_knot_close (k2);
  }

  setenv ("WHISPERKNOT_VAD_MODEL", "/some/where/else.bin", 1);
  CHECK (strcmp (wk_default_vad_model_path (), "/some/where/else.bin") == 0);
  unsetenv ("WHISPERKNOT_VAD_MODEL");
}

/* Reads up to max probabilities from $WK_TEST_DATA/name ('#' lines are
 * comments); returns how many. */
static size_t
read_probs (const char *name, float *out, size_t max)
{
  char path[4096], line[256];
  const char *dir = getenv ("WK_TEST_DATA");
  size_t n = 0;
  FILE *f;

  snprintf (path, sizeof path, "%s/%s", dir ? dir : "tests/data", name);
  f = fopen (path, "r");
  CHECK_MSG (f != NULL, "%s", path);
  if (!f)
    return 0;
  while (fgets (line, sizeof line, f) && n < max)
    if (line[0] != '#')
      out[n++] = strtof (line, NULL);
  fclose (f);
  return n;
}

/* The default framing against an independent pure-Python statement of
 * silero-vad's reference code (tests/data/gen-vad-silero-probs.py) with
 * the same weights. */
static void
test_probs_match_silero_reference (void)
{
  float ref[400], *probs;
  size_t n_ref, n_chunks = (jfk_n + WK_VAD_CHUNK - 1) / WK_VAD_CHUNK;
  double max_diff = 0;
  wk_vad *v = new_vad (NULL);

  n_ref = read_probs ("vad-jfk-silero-probs.txt", ref, 400);
  CHECK (n_ref == n_chunks);
  probs = malloc (n_chunks * sizeof *probs);
  CHECK (wk_vad_detect (v, jfk, jfk_n, probs, NULL, NULL) == WK_OK);
  for (size_t i = 0; i < n_ref && i < n_chunks; i++)
    if (fabs (probs[i] - ref[i]) > max_diff)
      max_diff = fabs (probs[i] - ref[i]);
  printf ("# Silero framing: max |p - p_reference| = %.6f over %zu chunks\n",
      max_diff, n_chunks);
  CHECK (max_diff < 1e-4);
  free (probs);
  wk_vad_free (v);
}

/* With whisper.cpp's framing, the network gives whisper.cpp's
 * probabilities (it rounds the convolutions' inputs to f16, we do not),
 * and the segmenter whisper.cpp's segments. */
static void
test_probs_match_whispercpp (void)
{
  float ref[400], *probs;
  size_t n_ref, n_chunks = (jfk_n + WK_VAD_CHUNK - 1) / WK_VAD_CHUNK;
  double max_diff = 0;
  wk_vad *v = new_vad (NULL);
  wk_vad_segment *segs = NULL;
  size_t n_segs = 0;

  n_ref = read_probs ("vad-jfk-whispercpp-probs.txt", ref, 400);
  CHECK (n_ref == 344);
  CHECK (n_chunks == 344);

  probs = malloc (n_chunks * sizeof *probs);
  wk_vad_set_framing (v, WK_VAD_FRAMING_WHISPERCPP);
  CHECK (wk_vad_detect (v, jfk, jfk_n, probs, &segs, &n_segs) == WK_OK);
  for (size_t i = 0; i < n_ref && i < n_chunks; i++)
    if (fabs (probs[i] - ref[i]) > max_diff)
      max_diff = fabs (probs[i] - ref[i]);
  printf ("# whisper.cpp framing: max |p - p_whisper.cpp| = %.5f over %zu "
      "chunks\n", max_diff, n_chunks);
  CHECK (max_diff < 0.01);

  CHECK (n_segs == 4);
  for (size_t i = 0; i < n_segs && i < 4; i++) {
    printf ("# whisper.cpp framing: segment %zu: %.2f - %.2f s "
        "(whisper.cpp %.2f - %.2f)\n", i, segs[i].start / (double) SR,
        segs[i].end / (double) SR, wcpp_segs[i][0] / 100.0,
        wcpp_segs[i][1] / 100.0);
    CHECK (to_cs (segs[i].start) == wcpp_segs[i][0]);
    CHECK (to_cs (segs[i].end) == wcpp_segs[i][1]);
  }
  free (segs);
  free (probs);
  wk_vad_free (v);
}

/* The default (Silero's own) framing on jfk.wav: speech where whisper.cpp
 * finds it, probabilities high inside the words and low in the pauses. */
static void
test_jfk_segments (void)
{
  wk_vad *v = new_vad (NULL);
  size_t n_chunks = (jfk_n + WK_VAD_CHUNK - 1) / WK_VAD_CHUNK;
  float *probs = malloc (n_chunks * sizeof *probs);
  wk_vad_segment *segs = NULL;
  size_t n_segs = 0;
  double in_sum = 0, out_max = 0;
  int in_n = 0;

  CHECK (wk_vad_detect (v, jfk, jfk_n, probs, &segs, &n_segs) == WK_OK);
  CHECK_MSG (n_segs == 4, "%zu segments", n_segs);
  for (size_t i = 0; i < n_segs; i++) {
    printf ("# segment %zu: %.3f - %.3f s\n", i, segs[i].start / (double) SR,
        segs[i].end / (double) SR);
    if (i < 4) {
      CHECK (llabs (to_cs (segs[i].start) - wcpp_segs[i][0]) <= 10);
      CHECK (llabs (to_cs (segs[i].end) - wcpp_segs[i][1]) <= 10);
    }
  }
  /* chunks well inside whisper.cpp's segments / well outside them */
  for (size_t c = 0; c < n_chunks; c++) {
    int64_t cs0 = to_cs ((int64_t) c * WK_VAD_CHUNK);
    int64_t cs1 = to_cs ((int64_t) (c + 1) * WK_VAD_CHUNK);
    int inside = 0, near = 0;
    for (int s = 0; s < 4; s++) {
      if (cs0 >= wcpp_segs[s][0] + 10 && cs1 <= wcpp_segs[s][1] - 15)
        inside = 1;
      if (cs1 > wcpp_segs[s][0] - 15 && cs0 < wcpp_segs[s][1] + 15)
        near = 1;
    }
    if (inside) {
      in_sum += probs[c];
      in_n++;
    } else if (!near && cs1 <= 1062 && probs[c] > out_max) {
      out_max = probs[c];
    }
  }
  printf ("# mean p inside speech %.3f (%d chunks), max p in the pauses "
      "%.3f\n", in_sum / in_n, in_n, out_max);
  CHECK (in_n > 200 && in_sum / in_n > 0.95);
  CHECK (out_max < 0.35);
  free (segs);
  free (probs);
  wk_vad_free (v);
}

/* A NaN or infinite sample (the API asks for [-1, 1], a caller may not
 * clean its input) stays out of the LSTM's state: the encoder's ReLUs
 * give 0 for the NaN the STFT makes of it, so the probabilities after it
 * stay numbers and the speech after it is still found. (A NaN that got
 * into the state would stay there: every later probability NaN, no END.) */
static void
test_non_finite_samples (void)
{
  wk_vad *v = new_vad (NULL);
  size_t n_chunks = (jfk_n + WK_VAD_CHUNK - 1) / WK_VAD_CHUNK, c;
  float *probs = malloc (n_chunks * sizeof *probs);
  float *x = malloc (jfk_n * sizeof *x);
  wk_vad_segment *segs = NULL;
  size_t n_segs = 0;
  int finite = 1;

  memcpy (x, jfk, jfk_n * sizeof *x);
  x[SR / 2] = NAN;              /* before the first word */
  x[SR / 2 + 100] = INFINITY;
  CHECK (wk_vad_detect (v, x, jfk_n, probs, &segs, &n_segs) == WK_OK);
  for (c = 0; c < n_chunks; c++)
    finite &= isfinite (probs[c]) != 0;
  CHECK (finite);
  CHECK_MSG (n_segs == 4, "%zu segments", n_segs);
  free (segs);
  free (probs);
  free (x);
  wk_vad_free (v);
}

/* Speech in white noise (jfk.wav is at about -17 dBFS RMS): still found
 * where it is, and nothing is found away from it. */
static void
test_speech_in_noise (void)
{
  const double levels[] = { -40.0, -25.0 };
  float *x = malloc (jfk_n * sizeof *x);
  wk_vad *v = new_vad (NULL);

  for (int l = 0; l < 2; l++) {
    wk_vad_segment *segs = NULL;
    size_t n_segs = 0, covered = 0, wanted = 0, stray = 0;

    make_noise (x, jfk_n, levels[l], 11 + (uint64_t) l);
    for (size_t i = 0; i < jfk_n; i++)
      x[i] += jfk[i];
    CHECK (wk_vad_detect (v, x, jfk_n, NULL, &segs, &n_segs) == WK_OK);
    printf ("# jfk + noise at %.0f dBFS:", levels[l]);
    for (size_t i = 0; i < n_segs; i++)
      printf (" %.2f-%.2f", segs[i].start / (double) SR,
          segs[i].end / (double) SR);
    printf ("\n");
    /* in 10 ms steps: inside whisper.cpp's segments (0.1 s margin) must be
     * covered, more than 0.3 s away from them must not */
    for (int64_t cs = 0; cs < (int64_t) (jfk_n / (SR / 100)); cs++) {
      int64_t smp = cs * (SR / 100);
      int in_seg = 0, inside = 0, near = 0;
      for (size_t i = 0; i < n_segs; i++)
        in_seg |= smp >= segs[i].start && smp < segs[i].end;
      for (int s = 0; s < 4; s++) {
        inside |= cs >= wcpp_segs[s][0] + 10 && cs < wcpp_segs[s][1] - 10;
        near |= cs >= wcpp_segs[s][0] - 30 && cs < wcpp_segs[s][1] + 30;
      }
      wanted += inside;
      covered += inside && in_seg;
      stray += !near && in_seg;
    }
    CHECK_MSG (covered >= wanted * 95 / 100, "%zu of %zu covered", covered,
        wanted);
    CHECK_MSG (stray == 0, "%zu cs of speech away from the speech", stray);
    free (segs);
  }
  free (x);
  wk_vad_free (v);
}

/* A 2-minute signal: pieces of jfk.wav (0.5 to 5.5 s) separated by pauses
 * of faint noise, half of them 0.1 to 0.35 s long, the others up to 1.5 s,
 * so that segments split, merge (7 times in whisper.cpp) and get dropped.
 * Deterministic; *n_out samples. */
static float *
make_mix (size_t *n_out)
{
  size_t cap = (size_t) 120 * SR, n = 0;
  float *x = calloc (cap, sizeof *x);
  uint64_t r = 42;

#define NEXT() (r ^= r << 13, r ^= r >> 7, r ^= r << 17, r)
  while (n + jfk_n + 2 * SR < cap) {
    size_t a = NEXT () % jfk_n, len = SR / 2 + NEXT () % (5 * SR), gap;
    if (a + len > jfk_n)
      len = jfk_n - a;
    memcpy (x + n, jfk + a, len * sizeof *x);
    n += len;
    gap = NEXT () % 2 == 0 ? SR / 10 + NEXT () % (SR / 4)
        : NEXT () % (3 * SR / 2);
    for (size_t i = 0; i < gap; i++)
      x[n++] = 0.003f * ((float) (NEXT () >> 40) / 16777216.0f - 0.5f);
  }
#undef NEXT
  *n_out = n;
  return x;
}

/* On that signal, whisper.cpp's segments (tests/data/vad-mix-whispercpp-
 * segments.txt, from whisper_vad_segments_from_samples on the same
 * samples), within a chunk: its probabilities differ from ours by up to
 * 0.0015, which can move a boundary by one chunk. */
static void
test_segments_match_whispercpp_on_mix (void)
{
  size_t n, n_segs = 0, n_ref = 0, off_by = 0;
  float *x = make_mix (&n);
  wk_vad *v = new_vad (NULL);
  wk_vad_segment *segs = NULL;
  int ref[200][2];
  char path[4096], line[256];
  const char *dir = getenv ("WK_TEST_DATA");
  FILE *f;

  snprintf (path, sizeof path, "%s/vad-mix-whispercpp-segments.txt",
      dir ? dir : "tests/data");
  f = fopen (path, "r");
  CHECK_MSG (f != NULL, "%s", path);
  while (f && fgets (line, sizeof line, f) && n_ref < 200)
    if (line[0] != '#'
        && sscanf (line, "%d %d", &ref[n_ref][0], &ref[n_ref][1]) == 2)
      n_ref++;
  if (f)
    fclose (f);

  wk_vad_set_framing (v, WK_VAD_FRAMING_WHISPERCPP);
  CHECK (wk_vad_detect (v, x, n, NULL, &segs, &n_segs) == WK_OK);
  printf ("# mix of %.1f s: %zu segments, whisper.cpp %zu\n",
      n / (double) SR, n_segs, n_ref);
  CHECK (n_ref > 20);
  CHECK (n_segs == n_ref);
  for (size_t i = 0; i < n_segs && i < n_ref; i++) {
    int64_t d0 = llabs (to_cs (segs[i].start) - ref[i][0]);
    int64_t d1 = llabs (to_cs (segs[i].end) - ref[i][1]);
    CHECK_MSG (d0 <= 4 && d1 <= 4, "segment %zu: %lld-%lld vs %d-%d", i,
        (long long) to_cs (segs[i].start), (long long) to_cs (segs[i].end),
        ref[i][0], ref[i][1]);
    off_by += d0 > 0 || d1 > 0;
  }
  printf ("# %zu of them differ from whisper.cpp's (by at most a chunk)\n",
      off_by);
  free (segs);
  free (x);
  wk_vad_free (v);
}

/* whisper.cpp's whisper_vad_segments_from_probs() as a plain offline
 * statement (without max_speech_duration_s), in samples: a first pass of
 * candidates with hysteresis, dropped unless longer than min_speech; a
 * merge of segments less than merge_gap apart; a final min_speech filter;
 * padding, split evenly where two segments are closer than twice it. */
static size_t
reference_segments (const float *p, size_t n, const wk_vad_params * prm,
    wk_vad_segment * out, size_t max)
{
  const int64_t C = WK_VAD_CHUNK, len = (int64_t) n * C;
  float thr = prm->threshold, neg = thr - 0.15f;
  int64_t min_sil = (int64_t) SR * prm->min_silence_duration_ms / 1000;
  int64_t min_sp = (int64_t) SR * prm->min_speech_duration_ms / 1000;
  int64_t gap = (int64_t) SR * prm->merge_gap_ms / 1000;
  int64_t pad = (int64_t) SR * prm->speech_pad_ms / 1000;
  int64_t start = 0, temp_end = -1;
  int trig = 0;
  size_t k = 0, m;

  if (neg < 0.01f)
    neg = 0.01f;
  for (size_t i = 0; i < n; i++) {
    int64_t cur = (int64_t) i * C;
    if (p[i] >= thr)
      temp_end = -1;
    if (p[i] >= thr && !trig) {
      trig = 1;
      start = cur;
    } else if (trig && p[i] < neg) {
      if (temp_end < 0)
        temp_end = cur;
      if (cur - temp_end >= min_sil) {
        if (temp_end - start > min_sp && k < max) {
          out[k].start = start;
          out[k++].end = temp_end;
        }
        trig = 0;
        temp_end = -1;
      }
    }
  }
  if (trig && len - start > min_sp && k < max) {
    out[k].start = start;
    out[k++].end = len;
  }
  for (size_t i = 0; i + 1 < k;) {
    if (out[i + 1].start - out[i].end < gap) {
      out[i].end = out[i + 1].end;
      memmove (out + i + 1, out + i + 2, (k - i - 2) * sizeof *out);
      k--;
    } else {
      i++;
    }
  }
  m = 0;
  for (size_t i = 0; i < k; i++)
    if (out[i].end - out[i].start >= min_sp)
      out[m++] = out[i];
  k = m;
  for (size_t i = 0; i < k; i++) {
    if (i == 0)
      out[i].start = out[i].start > pad ? out[i].start - pad : 0;
    if (i + 1 < k) {
      int64_t silence = out[i + 1].start - out[i].end;
      if (silence < 2 * pad) {
        out[i].end += silence / 2;
        out[i + 1].start -= silence / 2;
      } else {
        out[i].end += pad;
        out[i + 1].start -= pad;
      }
    } else {
      out[i].end = out[i].end + pad < len ? out[i].end + pad : len;
    }
  }
  return k;
}

/* The streaming segmenter against that statement on random probability
 * sequences: runs of speech, silence and in-between values (and values
 * exactly at the thresholds), ending in silence, with several parameter
 * sets. */
static void
test_segmenter_matches_reference (void)
{
  enum
  {
    N = 600,
    MAXS = 128
  };
  float probs[N];
  wk_vad_segment ref[MAXS], got[MAXS];
  uint64_t r = 2024;
  int mismatches = 0, total_segs = 0;

#define NEXT() (r ^= r << 13, r ^= r >> 7, r ^= r << 17, r)
#define UNIF() ((float) (NEXT () >> 40) / 16777216.0f)
  for (int iter = 0; iter < 400; iter++) {
    wk_vad_params prm = wk_vad_default_params ();
    wk_vad *v;
    size_t n = 0, n_ref, n_got = 0;
    int64_t open = -1;
    wk_vad_event ev;
    float neg;

    switch (iter % 5) {
      case 1:
        prm.threshold = 0.3f;
        prm.min_silence_duration_ms = 0;
        break;
      case 2:
        prm.threshold = 0.7f;
        prm.min_silence_duration_ms = 300;
        prm.speech_pad_ms = 100;
        break;
      case 3:
        prm.min_speech_duration_ms = 0;
        prm.merge_gap_ms = 0;
        prm.speech_pad_ms = 0;
        break;
      case 4:
        prm.min_speech_duration_ms = 500;
        prm.merge_gap_ms = 500;
        break;
      default:
        break;
    }
    neg = prm.threshold - 0.15f;
    while (n < N - 20) {
      int kind = (int) (NEXT () % 7), run = 1 + (int) (NEXT () % 12);
      for (int j = 0; j < run && n < N - 20; j++) {
        float u = UNIF ();
        if (kind <= 2)          /* speech */
          probs[n++] = prm.threshold + u * (1.0f - prm.threshold);
        else if (kind <= 4)     /* silence */
          probs[n++] = u * neg;
        else if (kind == 5)     /* in between */
          probs[n++] = neg + u * (prm.threshold - neg);
        else                    /* on the thresholds */
          probs[n++] = NEXT () % 2 ? prm.threshold : neg;
      }
    }
    while (n < N)
      probs[n++] = 0.0f;

    n_ref = reference_segments (probs, n, &prm, ref, MAXS);
    v = new_vad (&prm);
    for (size_t i = 0; i <= n; i++) {
      if (i < n)
        wk_vad_step_prob (v, probs[i]);
      else
        wk_vad_finish (v);
      while (wk_vad_pop_event (v, &ev)) {
        if (ev.type == WK_VAD_EVENT_SPEECH_START) {
          open = ev.sample;
        } else if (n_got < MAXS) {
          got[n_got].start = open;
          got[n_got++].end = ev.sample;
        }
      }
    }
    wk_vad_free (v);
    total_segs += (int) n_ref;
    if (n_got != n_ref || memcmp (got, ref, n_got * sizeof *got) != 0) {
      if (mismatches++ < 3) {
        fprintf (stderr, "sequence %d: %zu segments, reference %zu\n", iter,
            n_got, n_ref);
        for (size_t i = 0; i < n_got || i < n_ref; i++)
          fprintf (stderr, "  %lld-%lld | %lld-%lld\n",
              i < n_got ? (long long) got[i].start : -1LL,
              i < n_got ? (long long) got[i].end : -1LL,
              i < n_ref ? (long long) ref[i].start : -1LL,
              i < n_ref ? (long long) ref[i].end : -1LL);
      }
    }
  }
  printf ("# segmenter vs whisper.cpp's algorithm: %d of 400 random "
      "sequences differ (%d segments in all)\n", mismatches, total_segs);
  CHECK (mismatches == 0);
  CHECK (total_segs > 1000);

  /* max_speech_duration_s (not in the statement above): segments in
   * order, apart, no longer than the limit plus padding */
  for (int iter = 0; iter < 200; iter++) {
    wk_vad_params prm = wk_vad_default_params ();
    wk_vad *v;
    wk_vad_event ev;
    int64_t open = -1, last_end = 0, limit;
    int bad = 0;

    prm.max_speech_duration_s = 0.5f + (float) (iter % 4);
    prm.min_silence_duration_ms = iter % 2 ? 300 : 100;
    limit = (int64_t) (SR * (double) prm.max_speech_duration_s);
    v = new_vad (&prm);
    for (int i = 0; i <= N; i++) {
      if (i < N)
        wk_vad_step_prob (v, (NEXT () % 4) ? (NEXT () % 10 ? 0.9f : 0.4f)
            : 0.05f);
      else
        wk_vad_finish (v);
      while (wk_vad_pop_event (v, &ev)) {
        if (ev.type == WK_VAD_EVENT_SPEECH_START) {
          if (open >= 0 || ev.sample < last_end) {
            if (!bad)
              fprintf (stderr, "seq %d chunk %d: START %lld (open %lld, last "
                  "END %lld)\n", iter, i, (long long) ev.sample,
                  (long long) open, (long long) last_end);
            bad = 1;
          }
          open = ev.sample;
        } else {
          if (open < 0 || ev.sample <= open
              || ev.sample - open > limit + 2 * SR * 30 / 1000) {
            if (!bad)
              fprintf (stderr, "seq %d: %lld-%lld (limit %lld)\n", iter,
                  (long long) open, (long long) ev.sample, (long long) limit);
            bad = 1;
          }
          last_end = ev.sample;
          open = -1;
        }
      }
    }
    bad |= open >= 0;
    CHECK_MSG (!bad, "max_speech sequence %d: start %lld end %lld last %lld",
        iter, (long long) open, (long long) ev.sample, (long long) last_end);
    wk_vad_free (v);
  }
#undef UNIF
#undef NEXT
}

/* Feeds pcm in pieces of the given sizes (cycled) and collects events. */
static size_t
stream_segments (wk_vad * v, const float *pcm, size_t n,
    const size_t *sizes, size_t n_sizes, wk_vad_segment * out,
    size_t max_out, int *order_ok)
{
  size_t off = 0, k = 0, n_out = 0;
  int64_t open = -1, last = -1;
  wk_vad_event ev;
  int done = 0;

  wk_vad_reset (v);
  *order_ok = 1;
  while (!done) {
    if (off < n) {
      size_t want = sizes[k++ % n_sizes], used;
      if (want > n - off)
        want = n - off;
      /* a buffer is fed until all of it is taken */
      while (want > 0) {
        used = wk_vad_feed (v, pcm + off, want);
        off += used;
        want -= used;
        while (wk_vad_pop_event (v, &ev)) {
          if (ev.sample < last || ev.sample > wk_vad_position (v))
            *order_ok = 0;
          last = ev.sample;
          if (ev.type == WK_VAD_EVENT_SPEECH_START) {
            if (open >= 0 || !wk_vad_in_speech (v))
              *order_ok = 0;
            open = ev.sample;
          } else {
            if (open < 0 || n_out == max_out)
              *order_ok = 0;
            else {
              out[n_out].start = open;
              out[n_out].end = ev.sample;
              n_out++;
            }
            open = -1;
          }
        }
      }
    } else {
      wk_vad_finish (v);
      done = 1;
      while (wk_vad_pop_event (v, &ev)) {
        if (ev.type == WK_VAD_EVENT_SPEECH_START)
          open = ev.sample;
        else if (open >= 0 && n_out < max_out) {
          out[n_out].start = open;
          out[n_out].end = ev.sample;
          n_out++;
          open = -1;
        }
      }
      if (wk_vad_in_speech (v) || open >= 0)
        *order_ok = 0;
    }
  }
  return n_out;
}

/* Streaming in odd buffer sizes gives exactly the offline segments, also
 * with max_speech_duration_s splitting and on a longer, mixed signal. */
static void
test_streaming_equals_offline (void)
{
  static const size_t sz1[] = { 1 };
  static const size_t sz7[] = { 7, 333, 1, 513, 4097, 160 };
  static const size_t sz_big[] = { 100000 };
  static const size_t sz511[] = { 511 };
  const size_t *sizes[] = { sz1, sz7, sz_big, sz511 };
  const size_t n_sizes[] = { 1, 6, 1, 1 };
  /* jfk, 3 s of quiet noise, jfk again, 0.7 s of zeros */
  size_t n = jfk_n * 2 + 3 * SR + 7 * SR / 10;
  float *pcm = calloc (n, sizeof *pcm);
  wk_vad_params split = wk_vad_default_params ();

  memcpy (pcm, jfk, jfk_n * sizeof *pcm);
  make_noise (pcm + jfk_n, 3 * SR, -45.0, 7);
  memcpy (pcm + jfk_n + 3 * SR, jfk, jfk_n * sizeof *pcm);
  split.max_speech_duration_s = 2.0f;

  for (int pset = 0; pset < 2; pset++) {
    wk_vad *v = new_vad (pset ? &split : NULL);
    wk_vad_segment *off_segs = NULL, got[64];
    size_t n_off = 0;

    CHECK (wk_vad_detect (v, pcm, n, NULL, &off_segs, &n_off) == WK_OK);
    printf ("# %s: %zu segments offline\n", pset ? "max 2 s" : "defaults",
        n_off);
    CHECK (n_off >= (pset ? 8u : 8u));
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
      int order_ok;
      size_t n_got = stream_segments (v, pcm, n, sizes[s], n_sizes[s], got,
          64, &order_ok);
      CHECK_MSG (order_ok, "events out of order (sizes set %zu)", s);
      CHECK_MSG (n_got == n_off, "set %zu: %zu vs %zu segments", s, n_got,
          n_off);
      for (size_t i = 0; i < n_got && i < n_off; i++)
        CHECK_MSG (got[i].start == off_segs[i].start
            && got[i].end == off_segs[i].end,
            "set %zu seg %zu: %lld-%lld vs %lld-%lld", s, i,
            (long long) got[i].start, (long long) got[i].end,
            (long long) off_segs[i].start, (long long) off_segs[i].end);
    }
    for (size_t i = 0; i < n_off; i++) {
      CHECK (off_segs[i].end > off_segs[i].start);
      if (i > 0)
        CHECK (off_segs[i].start >= off_segs[i - 1].end);
      if (pset)                 /* max 2 s, plus the padding */
        CHECK_MSG (off_segs[i].end - off_segs[i].start <= 2 * SR + SR / 10,
            "segment %zu lasts %lld samples", i,
            (long long) (off_segs[i].end - off_segs[i].start));
    }
    free (off_segs);
    wk_vad_free (v);
  }
  free (pcm);
}

/* Parameters do what they say. */
static void
test_params (void)
{
  wk_vad_params p = wk_vad_default_params ();
  wk_vad *v;
  wk_vad_segment *segs = NULL;
  size_t n_segs = 0;
  char err[256];

  CHECK (p.threshold == 0.5f && p.min_speech_duration_ms == 250
      && p.min_silence_duration_ms == 100 && p.speech_pad_ms == 30
      && p.merge_gap_ms == 200 && p.max_speech_duration_s <= 0.0f);

  /* long min_silence: the pauses (about 1 s) no longer split */
  p.min_silence_duration_ms = 1500;
  v = new_vad (&p);
  wk_vad_detect (v, jfk, jfk_n, NULL, &segs, &n_segs);
  CHECK_MSG (n_segs == 1, "%zu segments", n_segs);
  free (segs);
  wk_vad_free (v);

  /* min_speech longer than every segment: nothing */
  p = wk_vad_default_params ();
  p.min_speech_duration_ms = 3000;
  v = new_vad (&p);
  wk_vad_detect (v, jfk, jfk_n, NULL, &segs, &n_segs);
  CHECK_MSG (n_segs == 0, "%zu segments", n_segs);
  free (segs);
  wk_vad_free (v);

  /* padding widens each segment by that much on both sides */
  {
    wk_vad_segment *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    p = wk_vad_default_params ();
    p.speech_pad_ms = 0;
    v = new_vad (&p);
    wk_vad_detect (v, jfk, jfk_n, NULL, &a, &na);
    wk_vad_free (v);
    p.speech_pad_ms = 100;
    v = new_vad (&p);
    wk_vad_detect (v, jfk, jfk_n, NULL, &b, &nb);
    wk_vad_free (v);
    CHECK (na == 4 && nb == 4);
    for (size_t i = 0; i < na && i < nb; i++) {
      CHECK (a[i].start - b[i].start == 1600);
      CHECK (b[i].end - a[i].end == 1600);
    }
    free (a);
    free (b);
  }

  /* bad parameters */
  p = wk_vad_default_params ();
  p.threshold = 0.0f;
  CHECK (wk_vad_new (model, &p, &v, err, sizeof err) == WK_ERR_ARG);
  CHECK (v == NULL);
  p = wk_vad_default_params ();
  p.min_silence_duration_ms = -1;
  CHECK (wk_vad_new (model, &p, &v, err, sizeof err) == WK_ERR_ARG);
  p = wk_vad_default_params ();
  p.neg_threshold = 0.9f;
  CHECK (wk_vad_new (model, &p, &v, err, sizeof err) == WK_ERR_ARG);
  CHECK (wk_vad_new (NULL, NULL, &v, err, sizeof err) == WK_ERR_ARG);
}

/* Digital silence and low-level white noise are not speech. */
static void
test_silence_and_noise (void)
{
  size_t n = (size_t) NOISE_SECONDS * SR;
  float *x = malloc (n * sizeof *x);
  const double levels[] = { -50.0, -30.0 };
  wk_vad *v = new_vad (NULL);
  wk_vad_segment *segs = NULL;
  size_t n_segs = 0, n_chunks = (n + WK_VAD_CHUNK - 1) / WK_VAD_CHUNK;
  float *probs = malloc (n_chunks * sizeof *probs);
  float pmax;

  memset (x, 0, n * sizeof *x);
  wk_vad_detect (v, x, n, probs, &segs, &n_segs);
  pmax = 0;
  for (size_t i = 0; i < n_chunks; i++)
    pmax = probs[i] > pmax ? probs[i] : pmax;
  printf ("# %d s of zeros: %zu segments, max p %.4f\n", NOISE_SECONDS,
      n_segs, pmax);
  CHECK (n_segs == 0);
  CHECK (pmax < 0.1f);
  free (segs);

  for (size_t l = 0; l < 2; l++) {
    size_t above = 0;
    make_noise (x, n, levels[l], 1 + l);
    wk_vad_detect (v, x, n, probs, &segs, &n_segs);
    pmax = 0;
    for (size_t i = 0; i < n_chunks; i++) {
      pmax = probs[i] > pmax ? probs[i] : pmax;
      above += probs[i] >= 0.5f;
    }
    printf ("# %d s of white noise at %.0f dBFS: %zu segments (%.2f s), "
        "%zu of %zu chunks at p >= 0.5, max p %.4f\n", NOISE_SECONDS,
        levels[l], n_segs,
        speech_samples (segs, n_segs) / (double) SR, above, n_chunks, pmax);
    /* "no or almost no speech": at most 1 s in 10 minutes */
    CHECK (speech_samples (segs, n_segs) <= (size_t) SR);
    free (segs);
  }
  free (probs);
  free (x);
  wk_vad_free (v);
}

/* Reset gives the same as a fresh detector; finish ends feeding. */
static void
test_reset_and_finish (void)
{
  wk_vad *v = new_vad (NULL);
  size_t n_chunks = (jfk_n + WK_VAD_CHUNK - 1) / WK_VAD_CHUNK;
  float *a = malloc (n_chunks * sizeof *a), *b = malloc (n_chunks * sizeof *b);
  float one = 0.5f;

  wk_vad_detect (v, jfk, jfk_n, a, NULL, NULL);
  /* leave state behind: half of the clip, no finish */
  wk_vad_reset (v);
  while (wk_vad_position (v) < (int64_t) jfk_n / 2) {
    wk_vad_feed (v, jfk + wk_vad_position (v), jfk_n / 2 -
        (size_t) wk_vad_position (v));
    while (wk_vad_pop_event (v, NULL)) {
    }
  }
  wk_vad_detect (v, jfk, jfk_n, b, NULL, NULL);
  CHECK (memcmp (a, b, n_chunks * sizeof *a) == 0);
  /* after finish nothing more is taken */
  CHECK (wk_vad_feed (v, &one, 1) == 0);
  wk_vad_reset (v);
  CHECK (wk_vad_feed (v, &one, 1) == 1);
  CHECK (wk_vad_position (v) == 1);
  free (a);
  free (b);
  wk_vad_free (v);
}

/* Digital silence takes a shortcut past the STFT and the encoder; it must
 * give exactly what the full path gives. A chunk of the smallest denormal
 * goes the full path, and its spectrum underflows to exact zeros. */
static void
test_zero_shortcut_exact (void)
{
  float zeros[WK_VAD_CHUNK], tiny[WK_VAD_CHUNK];
  wk_vad *a = new_vad (NULL), *b = new_vad (NULL);
  int same = 1;

  for (int i = 0; i < WK_VAD_CHUNK; i++) {
    zeros[i] = 0.0f;
    tiny[i] = 1.4e-45f;
  }
  for (int c = 0; c < 40; c++) {
    float pa, pb;
    /* start both on the same speech so the LSTM state is not trivial */
    const float *src = c < 20 ? jfk + (size_t) 16000 + (size_t) c *
        WK_VAD_CHUNK : NULL;
    pa = wk_vad_run_chunk (a, src ? src : zeros);
    pb = wk_vad_run_chunk (b, src ? src : tiny);
    if (memcmp (&pa, &pb, sizeof pa) != 0)
      same = 0;
  }
  CHECK (same);
  wk_vad_free (a);
  wk_vad_free (b);
}

/* Feeding never allocates. */
static void
test_no_alloc_while_feeding (void)
{
  wk_vad *v = new_vad (NULL);
  size_t off = 0;

  if (!WK_COUNT_ALLOCS) {
    printf ("# allocation counting off under sanitizers\n");
    wk_vad_free (v);
    return;
  }
  atomic_store (&n_allocs, 0);
  atomic_store (&counting, 1);
  while (off < jfk_n) {
    size_t want = jfk_n - off < 1000 ? jfk_n - off : 1000;
    off += wk_vad_feed (v, jfk + off, want);
    while (wk_vad_pop_event (v, NULL)) {
    }
  }
  wk_vad_finish (v);
  while (wk_vad_pop_event (v, NULL)) {
  }
  atomic_store (&counting, 0);
  CHECK_MSG (atomic_load (&n_allocs) == 0, "%ld allocations",
      atomic_load (&n_allocs));
  wk_vad_free (v);
}

static void
write_file (const char *path, const void *data, size_t n)
{
  FILE *f = fopen (path, "wb");
  if (f) {
    fwrite (data, 1, n, f);
    fclose (f);
  }
}

static wk_status
load_mem (const uint8_t * d, size_t n, char *err, size_t err_size)
{
  wk_vad_model *m = NULL;
  wk_status st = wk_vad_model_load_memory (d, n, &m, err, err_size);
  if (st == WK_OK)
    wk_vad_model_unref (m);
  else if (m != NULL)
    st = WK_ERR_INTERNAL;       /* must be NULL on failure */
  return st;
}

/* The offset of the first occurrence of needle in hay (which holds it). */
static size_t
find_bytes (const uint8_t * hay, size_t n, const void *needle, size_t len)
{
  for (size_t i = 0; i + len <= n; i++)
    if (memcmp (hay + i, needle, len) == 0)
      return i;
  CHECK_MSG (0, "%.*s not found", (int) len, (const char *) needle);
  return 0;
}

/* The offset of a metadata key's u32 value (after the key and its type). */
static size_t
key_value_off (const uint8_t * d, size_t n, const char *key)
{
  return find_bytes (d, n, key, strlen (key)) + strlen (key) + 4;
}

/* The offset of a tensor info's n_dims (after its name). */
static size_t
tensor_info_off (const uint8_t * d, size_t n, const char *name)
{
  uint8_t rec[64];
  size_t len = strlen (name);

  memset (rec, 0, 8);
  rec[0] = (uint8_t) len;
  memcpy (rec + 8, name, len);
  return find_bytes (d, n, rec, 8 + len) + 8 + len;
}

/* The offset of a tensor's data in the knot d. */
static size_t
tensor_data_off (const uint8_t * d, size_t n, const char *name)
{
  wk_knot *k = NULL;
  char err[256];
  size_t off = 0;

  if (wk_knot_open_memory (d, n, &k, err, sizeof err) == WK_OK) {
    const wk_tensor *t = wk_knot_find (k, name);
    if (t)
      off = (size_t) ((const uint8_t *) t->data - d);
    wk_knot_close (k);
  }
  CHECK (off > 0);
  return off;
}

static void
put_u32 (uint8_t * p, uint32_t v)
{
  p[0] = (uint8_t) v;
  p[1] = (uint8_t) (v >> 8);
  p[2] = (uint8_t) (v >> 16);
  p[3] = (uint8_t) (v >> 24);
}

/* The whole shipped model file, malloc'd (*n bytes), or NULL after a
 * failed check. */
static uint8_t *
read_model_file (long *n)
{
  FILE *f = fopen (model_path, "rb");
  uint8_t *d;

  CHECK_MSG (f != NULL, "cannot open %s", model_path);
  if (!f)
    return NULL;
  fseek (f, 0, SEEK_END);
  *n = ftell (f);
  fseek (f, 0, SEEK_SET);
  d = malloc ((size_t) *n);
  CHECK (fread (d, 1, (size_t) *n, f) == (size_t) *n);
  fclose (f);
  return d;
}

/* Truncated or corrupt VAD knots, and Silero's ggml file, are refused
 * with a message that says what is wrong. */
static void
test_reject_corrupt (void)
{
  uint8_t *d, *c;
  long n;
  char err[512];
  wk_vad_model *m = NULL;
  size_t bad_prefix = 0, o;
  char tmp[4096];
  const float nan = NAN, inf = INFINITY;

  d = read_model_file (&n);
  if (!d)
    return;
  c = malloc ((size_t) n);

  CHECK (load_mem (d, (size_t) n, err, sizeof err) == WK_OK);

  /* every prefix through the metadata and tensor table, then a spread */
  for (size_t len = 0; len < (size_t) n; len += len < 2048 ? 1 : 9973)
    if (load_mem (d, len, err, sizeof err) == WK_OK)
      bad_prefix++;
  CHECK_MSG (bad_prefix == 0, "%zu truncated files accepted", bad_prefix);
  CHECK (load_mem (d, (size_t) n - 1, err, sizeof err) == WK_ERR_FORMAT);
  printf ("# truncated: %s\n", err);

#define EXPECT(expect, what) do { \
    wk_status _s = load_mem (c, (size_t) n, err, sizeof err); \
    CHECK_MSG (_s == (expect) && strstr (err, (what)) != NULL, \
        "status %d, message '%s' (want '%s')", (int) _s, err, (what)); \
    printf ("# %s\n", err); } while (0)

  /* metadata */
  memcpy (c, d, (size_t) n);
  /* the value of general.architecture (general.name's key length next) */
  c[find_bytes (c, (size_t) n, "silero-vad\x0c", 11) + 9] = 'x';
  EXPECT (WK_ERR_FORMAT, "not a Silero VAD");
  memcpy (c, d, (size_t) n);
  put_u32 (c + key_value_off (c, (size_t) n, WK_VAD_KEY_WINDOW), 1024);
  EXPECT (WK_ERR_UNSUPPORTED, WK_VAD_KEY_WINDOW " = 1024");
  memcpy (c, d, (size_t) n);
  put_u32 (c + key_value_off (c, (size_t) n, WK_VAD_KEY_SAMPLE_RATE), 8000);
  EXPECT (WK_ERR_UNSUPPORTED, WK_VAD_KEY_SAMPLE_RATE " = 8000");
  memcpy (c, d, (size_t) n);
  put_u32 (c + key_value_off (c, (size_t) n, WK_VAD_KEY_CONTEXT), 32);
  EXPECT (WK_ERR_UNSUPPORTED, WK_VAD_KEY_CONTEXT);
  memcpy (c, d, (size_t) n);
  c[key_value_off (c, (size_t) n, WK_VAD_KEY_CONTEXT) - 5] = 'X';
  EXPECT (WK_ERR_FORMAT, "missing");
  memcpy (c, d, (size_t) n);
  c[key_value_off (c, (size_t) n, WK_VAD_KEY_VERSION) - 5] = 'X';
  EXPECT (WK_ERR_FORMAT, WK_VAD_KEY_VERSION);

  /* tensors: renamed (so missing), another type, another shape */
  memcpy (c, d, (size_t) n);
  c[tensor_info_off (c, (size_t) n, WK_VAD_T_OUT_B) - 1] = 'X';
  EXPECT (WK_ERR_FORMAT, "'" WK_VAD_T_OUT_B "' is missing");
  memcpy (c, d, (size_t) n);
  o = tensor_info_off (c, (size_t) n, WK_VAD_T_OUT_W);
  put_u32 (c + o + 4 + 8, WK_TYPE_F16); /* after n_dims and ne[0] */
  EXPECT (WK_ERR_FORMAT, "not f32");
  memcpy (c, d, (size_t) n);
  o = tensor_info_off (c, (size_t) n, WK_VAD_T_W_HH);
  put_u32 (c + o + 4, 256);     /* ne[0] 512 -> 256 */
  EXPECT (WK_ERR_FORMAT, "has shape {256, 128}");
  memcpy (c, d, (size_t) n);
  put_u32 (c, 0);               /* no magic */
  EXPECT (WK_ERR_FORMAT, "magic");

  /* values that would make every probability NaN */
  memcpy (c, d, (size_t) n);
  memcpy (c + tensor_data_off (c, (size_t) n, WK_VAD_T_STFT) + 4 * 1000,
      &nan, 4);
  EXPECT (WK_ERR_FORMAT, "'" WK_VAD_T_STFT "' holds a value that is not "
      "finite");
  memcpy (c, d, (size_t) n);
  memcpy (c + tensor_data_off (c, (size_t) n, WK_VAD_T_B) + 4 * 511, &inf, 4);
  EXPECT (WK_ERR_FORMAT, "not finite");
#undef EXPECT

  /* Silero's ggml file: convert it */
  if (ggml_path) {
    CHECK (wk_vad_model_load (ggml_path, &m, err, sizeof err)
        == WK_ERR_FORMAT);
    CHECK (m == NULL);
    CHECK_MSG (strstr (err, "whisperknot-convert") != NULL, "%s", err);
    printf ("# ggml file: %s\n", err);
  }

  /* files: missing, a directory, a FIFO, empty, truncated on disk */
  CHECK (wk_vad_model_load ("/nonexistent/vad.knot", &m, err, sizeof err)
      == WK_ERR_IO);
  CHECK (m == NULL);
  CHECK (wk_vad_model_load ("/", &m, err, sizeof err) == WK_ERR_IO);
  {
    /* a FIFO without a writer: an error at once, not a wait forever */
    char fifo[256];
    struct timespec a, b;
    snprintf (fifo, sizeof fifo, "/tmp/wk-vad-fifo-%d", (int) getpid ());
    unlink (fifo);
    CHECK (mkfifo (fifo, 0600) == 0);
    clock_gettime (CLOCK_MONOTONIC, &a);
    CHECK (wk_vad_model_load (fifo, &m, err, sizeof err) == WK_ERR_IO);
    clock_gettime (CLOCK_MONOTONIC, &b);
    CHECK_MSG (strstr (err, "FIFO") != NULL, "%s", err);
    CHECK (b.tv_sec - a.tv_sec < 1);
    unlink (fifo);
  }
  CHECK (wk_vad_model_load ("", &m, err, sizeof err) == WK_ERR_ARG);
  snprintf (tmp, sizeof tmp, "/tmp/wk-test-vad-%d.knot", (int) getpid ());
  write_file (tmp, d, (size_t) n / 2);
  CHECK (wk_vad_model_load (tmp, &m, err, sizeof err) == WK_ERR_FORMAT);
  CHECK_MSG (strstr (err, "past end of file") != NULL, "%s", err);
  printf ("# truncated file: %s\n", err);
  write_file (tmp, "", 0);
  CHECK (wk_vad_model_load (tmp, &m, err, sizeof err) == WK_ERR_FORMAT);
  remove (tmp);
  free (c);
  free (d);
}

/* The registry's rule: a file rewritten in place is loaded afresh, and a
 * detector is not created on a model whose file changed under it. */
static void
test_file_replaced (void)
{
  char path[256], err[512];
  wk_vad_model *a = NULL, *b = NULL;
  wk_vad *v = NULL;
  uint8_t *d;
  long n;
  struct timespec ts[2] = { {0, 0}, {1000000000, 0} };

  d = read_model_file (&n);
  if (!d)
    return;
  snprintf (path, sizeof path, "/tmp/wk-test-vad-replace-%d.knot",
      (int) getpid ());
  write_file (path, d, (size_t) n);
  CHECK (wk_vad_model_load (path, &a, err, sizeof err) == WK_OK);
  /* the same bytes written again, with another modification time */
  write_file (path, d, (size_t) n);
  CHECK (utimensat (AT_FDCWD, path, ts, 0) == 0);
  CHECK (wk_vad_model_load (path, &b, err, sizeof err) == WK_OK);
  CHECK (a && b && a != b);
  CHECK (a && wk_vad_new (a, NULL, &v, err, sizeof err) == WK_ERR_IO);
  CHECK (v == NULL);
  printf ("# rewritten in place: %s\n", err);
  CHECK (b && wk_vad_new (b, NULL, &v, err, sizeof err) == WK_OK);
  wk_vad_free (v);
  wk_vad_model_unref (a);
  wk_vad_model_unref (b);
  remove (path);
  free (d);
}

/* Converts Silero's ggml file at src to a knot at dst, as
 * whisperknot-convert does. */
static wk_status
convert (const char *src, const char *dst, char *err, size_t err_size)
{
  wk_ggml_vad *g = NULL;
  wk_knot_writer *w = wk_knot_writer_new (64);
  wk_status st = w ? wk_ggml_vad_open (src, &g, err, err_size) : WK_ERR_NOMEM;

  if (st == WK_OK)
    st = wk_ggml_vad_to_knot (g, "test", w, err, err_size);
  if (st == WK_OK)
    st = wk_knot_writer_write_file (w, dst, err, err_size);
  wk_knot_writer_free (w);
  wk_ggml_vad_free (g);
  return st;
}

/* How much a 32 ms chunk costs (printed, never asserted). */
static void
test_cost (void)
{
  size_t n = (size_t) COST_SECONDS * SR;
  float *x = calloc (n > jfk_n ? n : jfk_n, sizeof *x);
  wk_vad *v = new_vad (NULL);
  const char *what[] = { "silence (zeros)", "noise -40 dBFS", "speech (jfk)" };

  for (int w = 0; w < 3; w++) {
    double t0, c0, t1, c1;
    size_t len = n;
    if (w == 1)
      make_noise (x, n, -40.0, 3);
    if (w == 2) {
      len = jfk_n;
      memcpy (x, jfk, jfk_n * sizeof *x);
    }
    t0 = wk_test_clock_s (CLOCK_MONOTONIC);
    c0 = wk_test_clock_s (CLOCK_THREAD_CPUTIME_ID);
    wk_vad_detect (v, x, len, NULL, NULL, NULL);
    t1 = wk_test_clock_s (CLOCK_MONOTONIC);
    c1 = wk_test_clock_s (CLOCK_THREAD_CPUTIME_ID);
    {
      double chunks = (double) ((len + WK_VAD_CHUNK - 1) / WK_VAD_CHUNK);
      printf ("# cost, %s: %.1f us per 32 ms chunk of CPU time (%.1f us "
          "wall), %.3f%% of one core in real time\n", what[w],
          1e6 * (c1 - c0) / chunks, 1e6 * (t1 - t0) / chunks,
          100.0 * (c1 - c0) / (chunks * 0.032));
    }
  }
  free (x);
  wk_vad_free (v);
}

int
main (void)
{
  char err[256];
  wk_wav wav;
  const char *jfk_path;

  ggml_path = wk_test_shared_path ("for-tests-silero-v6.2.0-ggml.bin");
  if (!ggml_path) {
    printf ("1..0 # SKIP WK_SHARED_DATA not set\n");
    return 77;
  }
  ggml_path = strdup (ggml_path);
  snprintf (model_path, sizeof model_path, "/tmp/wk-test-vad-%d-model.knot",
      (int) getpid ());
  if (convert (ggml_path, model_path, err, sizeof err) != WK_OK
      || wk_vad_model_load (model_path, &model, err, sizeof err) != WK_OK) {
    fprintf (stderr, "%s\n", err);
    return 1;
  }
  jfk_path = wk_test_shared_path ("jfk.wav");
  if (wk_wav_read (jfk_path, &wav, err, sizeof err) != WK_OK) {
    fprintf (stderr, "%s\n", err);
    return 1;
  }
  jfk = wav.samples;
  jfk_n = wav.n_samples;

  if (getenv ("WK_VAD_DUMP_MIX")) {
    /* writes the mix as raw f32 for regenerating the whisper.cpp data */
    size_t n;
    float *x = make_mix (&n);
    FILE *f = fopen (getenv ("WK_VAD_DUMP_MIX"), "wb");
    if (!f || fwrite (x, sizeof *x, n, f) != n)
      return 1;
    fclose (f);
    free (x);
    return 0;
  }

  RUN (test_load_shipped_and_shared);
  RUN (test_probs_match_whispercpp);
  RUN (test_probs_match_silero_reference);
  RUN (test_jfk_segments);
  RUN (test_non_finite_samples);
  RUN (test_speech_in_noise);
  RUN (test_segments_match_whispercpp_on_mix);
  RUN (test_segmenter_matches_reference);
  RUN (test_streaming_equals_offline);
  RUN (test_params);
  RUN (test_silence_and_noise);
  RUN (test_reset_and_finish);
  RUN (test_zero_shortcut_exact);
  RUN (test_no_alloc_while_feeding);
  RUN (test_reject_corrupt);
  RUN (test_file_replaced);
  RUN (test_cost);

  wk_wav_clear (&wav);
  wk_vad_model_unref (model);
  remove (model_path);
  free ((void *) ggml_path);
  return TEST_EXIT ();
}
