/* whisperknot-transcribe: an audio file in (WAV, or whatever GStreamer
 * decodes), its transcript out (plain text, SubRip, WebVTT or JSON), through
 * the same engine and stream API as the GStreamer element. With --stats it
 * prints timings for benchmarks.
 *
 * Exit status: 0 done, 1 the model, the audio or the output failed,
 * 2 bad command line.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audio-decode.h"
#include "whisperknot.h"
#include "wav.h"

#define PROGRAM "whisperknot-transcribe"
/* audio handed to the engine per call, as a live source would */
#define CHUNK WK_SAMPLE_RATE

typedef enum
{
  FORMAT_TXT,
  FORMAT_SRT,
  FORMAT_VTT,
  FORMAT_JSON,
} out_format;

/* JSON: the words of the segment being written out. */
#define WORDS_MAX_TEXT 8192
#define WORDS_MAX 1024

/* A word for JSON: bytes (with Whisper's leading space; possibly cut
 * inside a character at a token boundary, see json_string), times in
 * samples and the mean probability of its tokens. */
typedef struct
{
  size_t off, len;              /* in the writer's word text */
  int64_t start, end;
  float p;
} word;

typedef struct
{
  FILE *f;
  out_format format;
  int n_segments;
  int tokens;                   /* JSON: list tokens */
  /* live policy (--latency > 0): the engine gives one segment per
   * utterance (a line or cue) */
  int live;
  /* JSON: the words of the segment being written, their bytes in
   * word_text */
  word words[WORDS_MAX];
  int n_words;
  char word_text[WORDS_MAX_TEXT];
  size_t word_len;
  int64_t shift;                /* samples added to every time (--offset) */
  /* --vad: the stream heard only the speech, joined: its positions map
   * back to the file's through these pieces (NULL: no --vad) */
  const struct piece *map;
  size_t n_map;
  /* a progress line is on the terminal the text goes to: cleared first */
  int clear_progress;
} writer;

/* --vad: samples [orig, orig + len) of the input (from --offset on) are
 * at [at, at + len) of the audio the stream heard */
typedef struct piece
{
  int64_t at, orig, len;
} piece;

/* The file's position (samples) of the stream's position t. */
static int64_t
file_time (const writer * w, int64_t t)
{
  size_t lo = 0, hi = w->n_map;

  if (!w->map || w->n_map == 0)
    return t + w->shift;
  /* the last piece starting at or before t */
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (w->map[mid].at <= t)
      lo = mid;
    else
      hi = mid;
  }
  t -= w->map[lo].at;
  if (t < 0)
    t = 0;
  if (t > w->map[lo].len)
    t = w->map[lo].len;         /* in the pause after it */
  return w->map[lo].orig + t + w->shift;
}

static void
usage (FILE * f)
{
  fprintf (f,
      "usage: " PROGRAM " [OPTION...] FILE...\n"
      "\n"
      "Transcribes an audio file: WAV, or anything GStreamer decodes (FLAC,\n"
      "MP3, Opus, ...; \"-\" reads any of them from standard input, as a\n"
      "named pipe is read, and transcribes a 16 kHz WAV stream there as it\n"
      "comes, live audio from a pipe).\n"
      "Several files are transcribed one after the other with one model\n"
      "load, as txt (each after a \"==> FILE <==\" line) or json (one\n"
      "document per file, with \"file\"). On a terminal a progress line\n"
      "goes to standard error.\n"
      "\n"
      "  -m, --model MODEL     knot file, or the name of one installed by\n"
      "                        whisperknot-model (default: $WHISPERKNOT_MODEL\n"
      "                        or the installed default model)\n"
      "  -l, --language LANG   spoken language, ISO 639-1, or auto (default)\n"
      "      --translate       translate into English\n"
      "  -t, --threads N       threads (default 0: one per core)\n"
      "  -b, --beam-size N     beam search width, 1 = greedy (default: the\n"
      "                        engine's, 5 for files, 3 with --latency)\n"
      "      --max-context N   at most N tokens of earlier text as the\n"
      "                        decoder's prompt (default 224; 0: none,\n"
      "                        whisper.cpp's -mc)\n"
      "      --prompt TEXT     text the decoder reads before the audio:\n"
      "                        names, spellings, style (openai's\n"
      "                        initial_prompt)\n"
      "      --offset MS       start this far into the audio (times stay\n"
      "                        those of the file)\n"
      "      --duration MS     transcribe only this much audio\n"
      "      --vad             transcribe only the speech the voice detector\n"
      "                        (Silero VAD) finds, joined with short pauses;\n"
      "                        times stay those of the file. Its model: the\n"
      "                        shipped knot, or $WHISPERKNOT_VAD_MODEL (a VAD\n"
      "                        knot: whisperknot-convert makes one from\n"
      "                        Silero's ggml file)\n"
      "      --no-fallback     no temperature fallback: deterministic\n"
      "                        decoding at temperature 0 (whisper.cpp's -nf)\n"
      "      --no-word-times   word and token times shared out over each\n"
      "                        segment by byte length, not taken from the\n"
      "                        model's alignment heads (faster, rougher)\n"
      "      --latency MS      live policy with this target delay (default\n"
      "                        0: 30 s windows); one line or cue per\n"
      "                        utterance\n"
      "      --audio-ctx N     live: encoder positions per run: 0 as the\n"
      "                        model was trained (default), -1 the full\n"
      "                        30 s, -2 only the window's audio, N at\n"
      "                        least N (wk_stream_params.audio_ctx)\n"
      "  -f, --format FMT      txt (default), srt, vtt or json (segments\n"
      "                        with their words: text, start, end,\n"
      "                        probability; the language's probability)\n"
      "      --tokens          json: list each segment's tokens\n"
      "  -o, --output FILE     write there instead of standard output\n"
      "      --stats           timings and counters on standard error\n"
      "  -h, --help            this help\n"
      "\nExit status: 0 done, 1 model, audio or output failed, 2 usage.\n");
}

static double
now_seconds (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* HH:MM:SS<sep>mmm for a sample position */
static void
format_time (char *buf, size_t size, int64_t samples, char sep)
{
  int64_t ms = samples > 0 ? samples * 1000 / WK_SAMPLE_RATE : 0;

  snprintf (buf, size, "%02" PRId64 ":%02d:%02d%c%03d", ms / 3600000,
      (int) (ms / 60000 % 60), (int) (ms / 1000 % 60), sep, (int) (ms % 1000));
}

/* Length of the valid UTF-8 sequence at s (1 to 4), or 0. */
static int
utf8_len (const unsigned char *s)
{
  int n, i;
  uint32_t c;

  if (s[0] < 0x80)
    return 1;
  if ((s[0] & 0xe0) == 0xc0)
    n = 2, c = s[0] & 0x1f;
  else if ((s[0] & 0xf0) == 0xe0)
    n = 3, c = s[0] & 0x0f;
  else if ((s[0] & 0xf8) == 0xf0)
    n = 4, c = s[0] & 0x07;
  else
    return 0;
  for (i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    c = c << 6 | (s[i] & 0x3f);
  }
  if ((n == 2 && c < 0x80) || (n == 3 && c < 0x800) || (n == 4 &&
          (c < 0x10000 || c > 0x10ffff)) || (c >= 0xd800 && c <= 0xdfff))
    return 0;
  return n;
}

/* A JSON string; bytes that are not UTF-8 (a token may hold part of a
 * character) become U+FFFD. */
static void
json_string (FILE * f, const char *s)
{
  const unsigned char *p = (const unsigned char *) s;

  fputc ('"', f);
  while (*p) {
    int n = utf8_len (p);

    if (n == 0) {
      fputs ("\\ufffd", f);
      p++;
    } else if (*p == '"' || *p == '\\') {
      fprintf (f, "\\%c", *p++);
    } else if (*p < 0x20) {
      fprintf (f, "\\u%04x", *p++);
    } else {
      fwrite (p, 1, (size_t) n, f);
      p += n;
    }
  }
  fputc ('"', f);
}

/* Adds a word of len bytes to the writer's word list (false when full). */
static int
add_word (writer * w, const char *text, size_t len, int64_t start,
    int64_t end, float p)
{
  word *wd;

  if (w->n_words == WORDS_MAX || w->word_len + len >= WORDS_MAX_TEXT)
    return 0;
  wd = &w->words[w->n_words++];
  wd->off = w->word_len;
  wd->len = len;
  memcpy (w->word_text + w->word_len, text, len);
  w->word_len += len;
  wd->start = start;
  wd->end = end;
  wd->p = p;
  return 1;
}

/* The words of an offline segment: a word starts at a token beginning
 * with a space (as the live policy splits them); its probability is the
 * mean of its tokens'. */
static void
segment_words (writer * w, const wk_segment * seg)
{
  int i, k, n;

  w->n_words = 0;
  w->word_len = 0;
  for (i = 0; i < seg->n_tokens; i = k) {
    size_t len = 0;
    double p = 0.0;
    char buf[1024];

    for (k = i; k < seg->n_tokens; k++) {
      const char *t = seg->tokens[k].text ? seg->tokens[k].text : "";
      size_t tl = strlen (t);
      if (k > i && t[0] == ' ')
        break;
      if (len + tl < sizeof buf) {
        memcpy (buf + len, t, tl);
        len += tl;
      }
      p += seg->tokens[k].p;
    }
    n = k - i;
    if (!add_word (w, buf, len, seg->tokens[i].start, seg->tokens[k - 1].end,
            (float) (p / n)))
      break;
  }
}

static void
write_words_json (writer * w)
{
  char text[WORDS_MAX_TEXT];
  int i;

  fputs (", \"words\": [", w->f);
  for (i = 0; i < w->n_words; i++) {
    const word *wd = &w->words[i];
    memcpy (text, w->word_text + wd->off, wd->len);
    text[wd->len] = '\0';
    fprintf (w->f, "%s\n      {\"text\": ", i ? "," : "");
    json_string (w->f, text);
    fprintf (w->f, ", \"start\": %.3f, \"end\": %.3f, \"probability\": "
        "%.4f}", (double) file_time (w, wd->start) / WK_SAMPLE_RATE,
        (double) file_time (w, wd->end) / WK_SAMPLE_RATE, wd->p);
  }
  fputs (w->n_words ? "\n    ]" : "]", w->f);
}

/* file: the input's name, when there are several (NULL otherwise) */
static void
write_begin (writer * w, const char *file)
{
  if (w->format == FORMAT_VTT) {
    fputs ("WEBVTT\n\n", w->f);
  } else if (w->format == FORMAT_JSON) {
    fputs ("{\n", w->f);
    if (file) {
      fputs ("  \"file\": ", w->f);
      json_string (w->f, file);
      fputs (",\n", w->f);
    }
    fputs ("  \"segments\": [", w->f);
  } else if (file) {
    fprintf (w->f, "==> %s <==\n", file);
  }
}

/* One of the engine's text cues (see wk_stream_take_cues): its text and
 * times as the engine shaped them, and its segment for JSON's details. */
static void
write_cue (writer * w, const wk_cue * cue)
{
  const wk_segment *seg = cue->segment;
  const char *text = cue->text;
  char t0[32], t1[32];
  int64_t start = file_time (w, cue->start), end = file_time (w, cue->end);
  int i;

  switch (w->format) {
    case FORMAT_TXT:
      /* a line each (wk_stream_params.text_lines) */
      fprintf (w->f, "%s%s%s", cue->before, text, cue->after);
      break;
    case FORMAT_SRT:
      format_time (t0, sizeof t0, start, ',');
      format_time (t1, sizeof t1, end, ',');
      fprintf (w->f, "%d\n%s --> %s\n%s\n\n", w->n_segments + 1, t0, t1, text);
      break;
    case FORMAT_VTT:
      format_time (t0, sizeof t0, start, '.');
      format_time (t1, sizeof t1, end, '.');
      fprintf (w->f, "%s --> %s\n%s\n\n", t0, t1, text);
      break;
    case FORMAT_JSON:
      fprintf (w->f, "%s\n    {\"start\": %.3f, \"end\": %.3f, \"text\": ",
          w->n_segments ? "," : "", (double) start / WK_SAMPLE_RATE,
          (double) end / WK_SAMPLE_RATE);
      json_string (w->f, text);
      fprintf (w->f, ", \"probability\": %.4f", cue->p);
      if (!w->live)
        fprintf (w->f, ", \"avg_logprob\": %.4f, \"no_speech_prob\": "
            "%.4f", seg->avg_logprob, seg->no_speech_prob);
      segment_words (w, seg);
      write_words_json (w);
      if (w->tokens) {
        fputs (", \"tokens\": [", w->f);
        for (i = 0; i < seg->n_tokens; i++) {
          const wk_token *t = &seg->tokens[i];
          fprintf (w->f, "%s{\"id\": %d, \"start\": %.3f, \"end\": %.3f, "
              "\"p\": %.4f, \"text\": ", i ? ", " : "", (int) t->id,
              (double) file_time (w, t->start) / WK_SAMPLE_RATE,
              (double) file_time (w, t->end) / WK_SAMPLE_RATE, t->p);
          json_string (w->f, t->text ? t->text : "");
          fputc ('}', w->f);
        }
        fputc (']', w->f);
      }
      fputc ('}', w->f);
      break;
  }
  w->n_segments++;
  fflush (w->f);
}

static void
write_end (writer * w, wk_stream * stream)
{
  wk_language_prob lp[5];
  size_t n, i;

  if (w->format != FORMAT_JSON)
    return;
  n = wk_stream_language_probs (stream, lp, 5);
  fputs ("\n  ],\n  \"language\": ", w->f);
  json_string (w->f, wk_stream_language (stream) ?
      wk_stream_language (stream) : "");
  fprintf (w->f, ",\n  \"language_probability\": %.4f,\n  \"languages\": {",
      n ? lp[0].p : 0.0f);
  for (i = 0; i < n; i++) {
    fputs (i ? ", " : "", w->f);
    json_string (w->f, lp[i].code);
    fprintf (w->f, ": %.4f", lp[i].p);
  }
  fputs ("}\n}\n", w->f);
}

/* Writes what the stream completed as the engine's cues: offline a cue
 * per segment, live one per utterance (the engine groups the words);
 * gaps and utterance ends carry no text. */
static void
write_results (writer * w, wk_stream * stream)
{
  const wk_cue *cues;
  size_t n = wk_stream_take_cues (stream, &cues), i;

  for (i = 0; i < n; i++)
    if (cues[i].kind == WK_CUE_TEXT && cues[i].segment) {
      if (w->clear_progress) {
        fputs ("\r\033[K", stderr);
        w->clear_progress = 0;  /* until the next progress line */
      }
      write_cue (w, &cues[i]);
    }
}

/* Reads a whole stream (standard input) into memory, after the head_len
 * bytes at head (malloc'd, taken over) that were read from it already. */
static int
read_all (FILE * f, unsigned char *head, size_t head_len, unsigned char **data,
    size_t *size)
{
  size_t cap = 1 << 20, len = head_len;
  unsigned char *buf, *tmp;

  while (cap < head_len + 1)
    cap *= 2;
  buf = realloc (head, cap);
  if (!buf) {
    free (head);
    return -1;
  }
  for (;;) {
    size_t got = fread (buf + len, 1, cap - len, f);
    len += got;
    if (len < cap) {
      if (ferror (f)) {
        free (buf);
        return -1;
      }
      break;
    }
    if (cap > SIZE_MAX / 2 || !(tmp = realloc (buf, cap * 2))) {
      free (buf);
      return -1;
    }
    buf = tmp;
    cap *= 2;
  }
  *data = buf;
  *size = len;
  return 0;
}

static int
parse_int (const char *s, int min, int max, int *out)
{
  char *end;
  long v;

  errno = 0;
  v = strtol (s, &end, 10);
  if (errno || end == s || *end || v < min || v > max)
    return -1;
  *out = (int) v;
  return 0;
}

/* One input file and what to do with it. */
typedef struct
{
  const char *path;             /* "-": standard input */
  int several;                  /* one of several files: name it */
  int offset_ms, duration_ms;   /* --offset, --duration (-1: all) */
  int stats;
  int progress;                 /* a progress line on standard error */
  wk_vad *vad;                  /* --vad: transcribe only its speech */
} job;

/* A pause between two stretches of speech joined for --vad (whisper.cpp
 * puts 0.1 s of silence there) */
#define VAD_PAUSE (WK_SAMPLE_RATE / 5)

/* --vad: the speech in pcm[0..n-1] joined, a pause after each stretch,
 * into *out (malloc'd, *n_out samples), with the pieces that map it back.
 * Returns -1 when out of memory or the detector failed. */
static int
join_speech (wk_vad * vad, const float *pcm, size_t n, float **out,
    size_t *n_out, piece ** map, size_t *n_map)
{
  wk_vad_segment *segs = NULL;
  size_t n_segs = 0, i, total = 0, at = 0;
  float *buf;
  piece *pc;

  if (wk_vad_detect (vad, pcm, n, NULL, &segs, &n_segs) != WK_OK)
    return -1;
  for (i = 0; i < n_segs; i++)
    total += (size_t) (segs[i].end - segs[i].start) + VAD_PAUSE;
  buf = calloc (total ? total : 1, sizeof *buf);
  pc = calloc (n_segs ? n_segs : 1, sizeof *pc);
  if (!buf || !pc) {
    free (buf);
    free (pc);
    free (segs);
    return -1;
  }
  for (i = 0; i < n_segs; i++) {
    int64_t a = segs[i].start < 0 ? 0 : segs[i].start;
    int64_t b = segs[i].end > (int64_t) n ? (int64_t) n : segs[i].end;
    if (b < a)
      b = a;
    memcpy (buf + at, pcm + a, (size_t) (b - a) * sizeof *buf);
    pc[i].at = (int64_t) at;
    pc[i].orig = a;
    pc[i].len = b - a;
    at += (size_t) (b - a) + VAD_PAUSE; /* the pause is zeros */
  }
  free (segs);
  *out = buf;
  *n_out = at;
  *map = pc;
  *n_map = n_segs;
  return 0;
}

/* err = "<wav_err>; <why GStreamer failed>": one message naming the
 * input once (GStreamer's message starts with "<name>: "). */
static void
join_errors (char *err, size_t err_size, const char *wav_err, const char *name)
{
  size_t n = strlen (name);
  const char *why = strncmp (err, name, n) == 0
      && !strncmp (err + n, ": ", 2) ? err + n + 2 : err;
  char gst_err[512];

  snprintf (gst_err, sizeof gst_err, "%s", why);
  if (snprintf (err, err_size, "%s; %s", wav_err, gst_err) >= (int) err_size)
    err[err_size - 2] = '.';    /* cut */
}

/* Reads the job's audio into wav: a WAV file, or anything GStreamer
 * decodes; from in when not NULL (standard input or a pipe given by
 * name, read once: its first head_len bytes are at head, malloc'd and
 * taken over). Prints what went wrong. */
static int
read_audio (const job * jb, FILE * in, unsigned char *head, size_t head_len,
    wk_wav * wav)
{
  char err[512] = "";
  wk_status st;
  bool from_stdin = in != NULL;
  const char *name = in == stdin ? "standard input" : jb->path;
  unsigned char *data = NULL;   /* the stream's bytes */
  size_t size = 0;

  if (from_stdin) {
    if (read_all (in, head, head_len, &data, &size) < 0) {
      fprintf (stderr, PROGRAM ": cannot read %s: %s\n", name,
          strerror (errno));
      return -1;
    }
    st = wk_wav_parse (data, size, wav, err, sizeof err);
  } else {
    st = wk_wav_read (jb->path, wav, err, sizeof err);
  }
  if ((st == WK_OK && wav->rate != WK_SAMPLE_RATE) || st == WK_ERR_FORMAT
      || st == WK_ERR_UNSUPPORTED) {
    /* not a 16 kHz WAV file: anything GStreamer decodes */
    char wav_err[512];
    wk_status wav_st = st;

    snprintf (wav_err, sizeof wav_err, "%s", err);
    wk_wav_clear (wav);
    st = from_stdin ? wk_audio_decode_bytes (data, size, name, wav, err,
        sizeof err) : wk_audio_decode (jb->path, wav, err, sizeof err);
    if (st != WK_OK && wav_st != WK_OK)
      join_errors (err, sizeof err, wav_err, name);
  }
  free (data);
  if (st != WK_OK) {
    /* the readers' messages name the file already */
    bool named = !from_stdin || !strncmp (err, name, strlen (name));

    fprintf (stderr, PROGRAM ": %s%s%s\n", named ? "" : name,
        named ? "" : ": ", err);
    return -1;
  }
  if (wav->rate != WK_SAMPLE_RATE) {
    fprintf (stderr, PROGRAM ": %s: the sample rate is %d Hz; whisperknot "
        "needs 16000 Hz (convert with: gst-launch-1.0 filesrc location=IN "
        "! decodebin ! audioconvert ! audioresample ! "
        "audio/x-raw,rate=16000,channels=1 ! wavenc ! filesink "
        "location=OUT.wav)\n", jb->path, wav->rate);
    return -1;
  }
  return 0;
}

/* Where a file's samples come from: a WAV file at 16 kHz read a piece at
 * a time (memory stays flat however long it is), or every sample in
 * memory (anything GStreamer decodes, standard input, --vad's joined
 * speech). */
typedef struct
{
  wk_wav_reader *reader;
  wk_audio_decoder *decoder;    /* or anything GStreamer decodes */
  const float *pcm;             /* without either */
  size_t len, pos;              /* without either */
  float *chunk;                 /* their samples, CHUNK of them */
} source;

/* The next n (<= CHUNK) samples of src, fewer at its end: *got of them
 * at *out. Returns 0, or -1 when the file cannot be read. */
static int
source_next (source * src, size_t n, const float **out, size_t *got)
{
  char err[512];
  wk_status st;

  if (!src->reader && !src->decoder) {
    *got = src->len - src->pos < n ? src->len - src->pos : n;
    *out = src->pcm + src->pos;
    src->pos += *got;
    return 0;
  }
  st = src->reader ? wk_wav_reader_read (src->reader, src->chunk, n, got,
      err, sizeof err) : wk_audio_decoder_read (src->decoder, src->chunk, n,
      got, err, sizeof err);
  if (st != WK_OK) {
    fprintf (stderr, PROGRAM ": %s\n", err);
    return -1;
  }
  *out = src->chunk;
  return 0;
}

/* Opens jb's file to be read piecewise, where nothing needs all of it at
 * once (--vad does): a 16 kHz WAV file, or else anything GStreamer
 * decodes; from in (not NULL: standard input or a pipe given by name),
 * a 16 kHz WAV stream. Returns 0 and src set, or -1: read it whole
 * (read_audio says what is wrong, if anything), after the *head_len
 * bytes at *head (malloc'd) read from in already. */
static int
open_piecewise (const job * jb, FILE * in, source * src,
    unsigned char **head, size_t *head_len)
{
  char err[512];
  wk_status st;

  *head = NULL;
  *head_len = 0;
  if (jb->vad)
    return -1;
  src->chunk = malloc (CHUNK * sizeof (float));
  if (!src->chunk)
    return -1;
  if (in) {
    /* a 16 kHz WAV stream as it comes (live audio from a pipe), else
     * the bytes read so far go to read_audio: a pipe is read once */
    st = wk_wav_open_fd (fileno (in), in == stdin ? "standard input" :
        jb->path, &src->reader, head, head_len, err, sizeof err);
    if (st == WK_OK && wk_wav_reader_rate (src->reader) == WK_SAMPLE_RATE)
      return 0;
    if (st == WK_OK)
      wk_wav_close_keep (src->reader, head, head_len);
    src->reader = NULL;
    free (src->chunk);
    src->chunk = NULL;
    return -1;
  }
  st = wk_wav_open (jb->path, &src->reader, err, sizeof err);
  if (st == WK_OK && wk_wav_reader_rate (src->reader) == WK_SAMPLE_RATE)
    return 0;
  wk_wav_close (src->reader);
  src->reader = NULL;
  if ((st == WK_OK || st == WK_ERR_FORMAT || st == WK_ERR_UNSUPPORTED)
      && wk_audio_decoder_open (jb->path, &src->decoder, err,
          sizeof err) == WK_OK)
    return 0;
  free (src->chunk);
  src->chunk = NULL;
  return -1;
}

/* Transcribes one file with stream (fresh or reset) into w. Returns 0,
 * 1 when the audio or the engine failed (the next file may still work),
 * 2 when the output failed. */
static int
transcribe_file (const job * jb, wk_model * model, wk_stream * stream,
    writer * w, double load_seconds, const char *model_path)
{
  wk_wav wav = { 0 };
  source src = { 0 };
  size_t pos, first, last, len, n_speech = 0, skipped = 0;
  /* len is a bound where the reader does not know the length (a pipe, a
   * decoded file); shown is what the progress line says it is, 0: not
   * known */
  size_t shown, head_len;
  unsigned char *head;
  double t0, t_done;
  wk_status st = WK_OK;
  float *speech = NULL;
  piece *map = NULL;
  FILE *in = NULL;
  struct stat sb;
  bool begun = false;           /* the document is open (write_begin) */
  int ret = 1;

  first = (size_t) jb->offset_ms * (WK_SAMPLE_RATE / 1000);
  /* standard input, or a pipe (or device) given by name: read once */
  if (!strcmp (jb->path, "-"))
    in = stdin;
  else if (stat (jb->path, &sb) == 0 && !S_ISREG (sb.st_mode)
      && !S_ISDIR (sb.st_mode) && !(in = fopen (jb->path, "rb"))) {
    fprintf (stderr, PROGRAM ": %s: %s\n", jb->path, strerror (errno));
    return 1;
  }
  if (open_piecewise (jb, in, &src, &head, &head_len) == 0) {
    int64_t n = src.reader ? wk_wav_reader_length (src.reader) : -1;
    int64_t est = src.decoder ? wk_audio_decoder_length (src.decoder) : n;
    last = n >= 0 ? (size_t) n : SIZE_MAX;
    shown = est >= 0 ? (size_t) est : 0;
  } else {
    if (read_audio (jb, in, head, head_len, &wav) < 0)
      goto done;
    last = shown = wav.n_samples;
  }
  t0 = now_seconds ();
  /* --offset, --duration: the samples [first, last) */
  if (first > last)
    first = last;
  shown = shown > first ? shown - first : 0;
  if (jb->duration_ms >= 0 && (size_t) jb->duration_ms *
      (WK_SAMPLE_RATE / 1000) < last - first) {
    last = first + (size_t) jb->duration_ms * (WK_SAMPLE_RATE / 1000);
    if (shown > last - first)
      shown = last - first;
  }
  w->shift = (int64_t) first;
  w->map = NULL;
  w->n_map = 0;
  len = last - first;
  if (src.reader || src.decoder) {
    /* skip to --offset */
    while (skipped < first) {
      const float *p;
      size_t got, n = first - skipped < CHUNK ? first - skipped : CHUNK;
      if (source_next (&src, n, &p, &got) < 0)
        goto done;
      if (got == 0)
        break;
      skipped += got;
    }
    if (skipped < first) {      /* the audio ended before --offset */
      w->shift = (int64_t) skipped;
      len = 0;
    }
  } else {
    src.pcm = wav.samples + first;
    src.len = len;
  }
  if (jb->vad) {
    if (join_speech (jb->vad, wav.samples + first, last - first, &speech,
            &n_speech, &map, &w->n_map) < 0) {
      fprintf (stderr, PROGRAM ": %s: the voice detector failed\n", jb->path);
      goto done;
    }
    w->map = map;
    /* the stream hears the joined speech instead */
    src.pcm = speech;
    src.len = len = shown = n_speech;
  }
  w->n_segments = 0;
  w->n_words = 0;
  w->word_len = 0;

  write_begin (w, jb->several ? jb->path : NULL);
  begun = true;
  for (pos = 0; pos < len;) {
    const float *pcm;
    size_t n;

    if (source_next (&src, len - pos < CHUNK ? len - pos : CHUNK, &pcm, &n) < 0)
      goto done;
    if (n == 0)
      break;                    /* a pipe's end */
    st = wk_stream_feed (stream, pcm, n);
    if (st != WK_OK)
      goto engine_failed;
    pos += n;
    /* (both on one terminal: the text does not follow the progress) */
    w->clear_progress = jb->progress && isatty (fileno (w->f));
    write_results (w, stream);
    w->clear_progress = 0;
    if (jb->progress && shown >= pos)
      fprintf (stderr, "\r%s: %.0f of %.0f s (%.0f%%)", jb->path,
          (double) pos / WK_SAMPLE_RATE, (double) shown / WK_SAMPLE_RATE,
          100.0 * (double) pos / (double) shown);
    else if (jb->progress)
      fprintf (stderr, "\r%s: %.0f s", jb->path, (double) pos / WK_SAMPLE_RATE);
  }
  len = pos;
  st = wk_stream_finish (stream);
  if (st != WK_OK)
    goto engine_failed;
  if (jb->progress && len > 0)
    fputs ("\r\033[K", stderr); /* the progress line goes */
  write_results (w, stream);
  write_end (w, stream);
  begun = false;
  t_done = now_seconds ();

  if (fflush (w->f) != 0 || ferror (w->f)) {
    fprintf (stderr, PROGRAM ": cannot write the output: %s\n",
        strerror (errno));
    ret = 2;
    goto done;
  }

  if (jb->stats) {
    wk_stream_stats s;
    wk_model_info info;
    double audio = (double) len / WK_SAMPLE_RATE;
    double wall = t_done - t0;

    wk_stream_get_stats (stream, &s);
    wk_model_get_info (model, &info);
    fprintf (stderr,
        "%s%s%s"
        "model: %s\n"
        "model_bytes: %" PRIu64 "\n"
        "model_params: %" PRIu64 "\n"
        "load_seconds: %.3f\n"
        "audio_seconds: %.3f\n"
        "wall_seconds: %.3f\n"
        "real_time_factor: %.4f\n"
        "mel_seconds: %.3f\n"
        "encoder_seconds: %.3f\n"
        "decoder_seconds: %.3f\n"
        "align_seconds: %.3f\n"
        "aligned_windows: %" PRId64 "\n"
        "windows: %" PRId64 "\n"
        "tokens: %" PRId64 "\n"
        "state_bytes: %" PRIu64 "\n"
        "live_runs: %" PRId64 "\n"
        "live_words: %" PRId64 "\n"
        "live_utterances: %" PRId64 "\n"
        "vad_seconds: %.3f\n"
        "speech_seconds: %.3f\n"
        "input_seconds: %.3f\n"
        "language: %s\n",
        jb->several ? "file: " : "", jb->several ? jb->path : "",
        jb->several ? "\n" : "",
        model_path, info.file_bytes, info.n_params, load_seconds,
        audio, wall, audio > 0 ? wall / audio : 0.0, s.mel_seconds,
        s.encoder_seconds, s.decoder_seconds, s.align_seconds, s.n_aligned,
        s.n_windows, s.n_tokens,
        s.state_bytes, s.n_runs, s.n_committed, s.n_utterances,
        s.vad_seconds, s.speech_seconds,
        (double) (jb->vad ? last - first : len) / WK_SAMPLE_RATE,
        wk_stream_language (stream) ? wk_stream_language (stream) : "");
  }
  ret = 0;
  goto done;

engine_failed:
  if (jb->progress)
    fputs ("\r\033[K", stderr);
  fprintf (stderr, PROGRAM ": %s: transcription failed: %s\n", jb->path,
      wk_status_str (st));
done:
  /* a JSON document the failure cut short still parses (and says so),
   * so the files after it can be read too */
  if (begun && w->format == FORMAT_JSON)
    fputs ("\n  ],\n  \"error\": \"the transcription of this file "
        "failed\"\n}\n", w->f);
  wk_wav_clear (&wav);
  wk_wav_close (src.reader);
  wk_audio_decoder_close (src.decoder);
  if (in && in != stdin)
    fclose (in);
  free (src.chunk);
  free (speech);
  free (map);
  return ret;
}

enum
{
  OPT_TRANSLATE = 256,
  OPT_LATENCY,
  OPT_TOKENS,
  OPT_STATS,
  OPT_NO_FALLBACK,
  OPT_NO_WORD_TIMES,
  OPT_MAX_CONTEXT,
  OPT_PROMPT,
  OPT_OFFSET,
  OPT_DURATION,
  OPT_VAD,
  OPT_AUDIO_CTX,
};

int
main (int argc, char **argv)
{
  static const struct option options[] = {
    {"model", required_argument, NULL, 'm'},
    {"language", required_argument, NULL, 'l'},
    {"translate", no_argument, NULL, OPT_TRANSLATE},
    {"threads", required_argument, NULL, 't'},
    {"beam-size", required_argument, NULL, 'b'},
    {"no-fallback", no_argument, NULL, OPT_NO_FALLBACK},
    {"no-word-times", no_argument, NULL, OPT_NO_WORD_TIMES},
    {"max-context", required_argument, NULL, OPT_MAX_CONTEXT},
    {"prompt", required_argument, NULL, OPT_PROMPT},
    {"offset", required_argument, NULL, OPT_OFFSET},
    {"duration", required_argument, NULL, OPT_DURATION},
    {"vad", no_argument, NULL, OPT_VAD},
    {"latency", required_argument, NULL, OPT_LATENCY},
    {"audio-ctx", required_argument, NULL, OPT_AUDIO_CTX},
    {"format", required_argument, NULL, 'f'},
    {"tokens", no_argument, NULL, OPT_TOKENS},
    {"output", required_argument, NULL, 'o'},
    {"stats", no_argument, NULL, OPT_STATS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}
  };
  const char *model_path = NULL, *out_path = NULL;
  char *resolved_path = NULL;
  wk_model_params mp = wk_model_default_params ();
  wk_stream_params sp = wk_stream_default_params ();
  wk_model *model = NULL;
  wk_stream *stream = NULL;
  writer w = { NULL, FORMAT_TXT, 0, 0 };
  wk_status st;
  char err[512] = "";
  int opt, stats = 0, rc = 1, offset_ms = 0, duration_ms = -1, n_files, i;
  int use_vad = 0;
  wk_vad_model *vad_model = NULL;
  wk_vad *vad = NULL;
  double t_start, t_loaded;

  while ((opt = getopt_long (argc, argv, "m:l:t:b:f:o:h", options, NULL)) != -1) {
    switch (opt) {
      case 'm':
        model_path = optarg;
        break;
      case 'l':
        sp.language = strcmp (optarg, "auto") ? optarg : NULL;
        break;
      case OPT_TRANSLATE:
        sp.translate = true;
        break;
      case 't':
        if (parse_int (optarg, 0, 1024, &sp.n_threads) < 0)
          goto bad_value;
        break;
      case 'b':
        if (parse_int (optarg, 1, 16, &sp.beam_size) < 0)
          goto bad_value;
        break;
      case OPT_NO_FALLBACK:
        sp.temperature_inc = 0.0f;
        break;
      case OPT_NO_WORD_TIMES:
        sp.word_times = false;
        break;
      case OPT_MAX_CONTEXT:
        if (parse_int (optarg, 0, 224, &sp.max_text_ctx) < 0)
          goto bad_value;
        break;
      case OPT_LATENCY:
        if (parse_int (optarg, 0, 30000, &sp.latency_ms) < 0)
          goto bad_value;
        break;
      case OPT_AUDIO_CTX:
        if (parse_int (optarg, WK_AUDIO_CTX_SHORT, 1 << 14, &sp.audio_ctx) < 0)
          goto bad_value;
        break;
      case OPT_PROMPT:
        sp.initial_prompt = optarg;
        break;
      case OPT_OFFSET:
        if (parse_int (optarg, 0, INT32_MAX, &offset_ms) < 0)
          goto bad_value;
        break;
      case OPT_DURATION:
        if (parse_int (optarg, 0, INT32_MAX, &duration_ms) < 0)
          goto bad_value;
        break;
      case OPT_VAD:
        use_vad = 1;
        break;
      case 'f':
        if (!strcmp (optarg, "txt"))
          w.format = FORMAT_TXT;
        else if (!strcmp (optarg, "srt"))
          w.format = FORMAT_SRT;
        else if (!strcmp (optarg, "vtt"))
          w.format = FORMAT_VTT;
        else if (!strcmp (optarg, "json"))
          w.format = FORMAT_JSON;
        else
          goto bad_value;
        break;
      case OPT_TOKENS:
        w.tokens = 1;
        break;
      case 'o':
        out_path = optarg;
        break;
      case OPT_STATS:
        stats = 1;
        break;
      case 'h':
        usage (stdout);
        return 0;
      default:
        usage (stderr);
        return 2;
    }
  }
  if (optind >= argc) {
    fprintf (stderr, PROGRAM ": expected an audio file\n");
    usage (stderr);
    return 2;
  }
  n_files = argc - optind;
  if (n_files > 1 && (out_path || w.format == FORMAT_SRT
          || w.format == FORMAT_VTT)) {
    fprintf (stderr, PROGRAM ": several files go to standard output as "
        "txt or json, one after the other; give srt, vtt or -o one file at "
        "a time\n");
    return 2;
  }
  /* a typo in a file's name should not wait for a model; -o must not
   * empty the file it is to transcribe */
  for (i = optind; i < argc; i++) {
    struct stat in_sb, out_sb;

    if (strcmp (argv[i], "-") && access (argv[i], R_OK) != 0) {
      fprintf (stderr, PROGRAM ": %s: %s\n", argv[i], strerror (errno));
      return 1;
    }
    if (out_path && stat (out_path, &out_sb) == 0 && strcmp (argv[i], "-")
        && stat (argv[i], &in_sb) == 0 && in_sb.st_dev == out_sb.st_dev
        && in_sb.st_ino == out_sb.st_ino) {
      fprintf (stderr, PROGRAM ": -o %s is the audio file %s: the text "
          "would overwrite it\n", out_path, argv[i]);
      return 2;
    }
  }
  t_start = now_seconds ();
  /* a name installed by whisperknot-model, a path, or the default model */
  if ((resolved_path = wk_model_resolve_path (model_path)))
    model_path = resolved_path;
  if (!model_path) {
    fprintf (stderr, PROGRAM ": out of memory\n");
    goto done;
  }
  st = wk_model_load (model_path, &mp, &model, err, sizeof err);
  if (st != WK_OK) {
    /* the loader's message may name the file already */
    if (strstr (err, model_path))
      fprintf (stderr, PROGRAM ": cannot load the model: %s\n", err);
    else
      fprintf (stderr, PROGRAM ": cannot load model '%s': %s\n", model_path,
          err);
    fprintf (stderr, "Convert a Whisper model with whisperknot-convert and "
        "pass it with -m (see the README).\n");
    goto done;
  }
  sp.group = WK_GROUP_UTTERANCE;        /* live: one line or cue each */
  sp.text_lines = w.format == FORMAT_TXT;       /* the engine ends lines */
  st = wk_stream_new (model, &sp, &stream, err, sizeof err);
  if (st != WK_OK) {
    fprintf (stderr, PROGRAM ": %s\n", err);
    goto done;
  }
  if (wk_stream_prompt_ignored (stream))
    fprintf (stderr, PROGRAM ": warning: --prompt is ignored: the model "
        "was never trained with a prompt (its knot has "
        "whisperknot.max_text_ctx = 0)\n");
  t_loaded = now_seconds ();

  w.live = sp.latency_ms > 0;
  if (use_vad) {
    wk_vad_params vp = wk_vad_default_params ();

    if (wk_vad_model_load (wk_default_vad_model_path (), &vad_model, err,
            sizeof err) != WK_OK
        || wk_vad_new (vad_model, &vp, &vad, err, sizeof err) != WK_OK) {
      fprintf (stderr, PROGRAM ": --vad: %s\n", err);
      rc = 1;
      goto done;
    }
  }
  /* -o is emptied only once everything before the audio worked */
  if (out_path) {
    w.f = fopen (out_path, "w");
    if (!w.f) {
      fprintf (stderr, PROGRAM ": cannot write '%s': %s\n", out_path,
          strerror (errno));
      goto done;
    }
  } else {
    w.f = stdout;
  }

  rc = 0;
  for (i = optind; i < argc; i++) {
    job jb = { argv[i], n_files > 1, offset_ms, duration_ms, stats,
      isatty (2) && !stats, vad
    };
    int r = transcribe_file (&jb, model, stream, &w, t_loaded - t_start,
        model_path);

    if (r > rc)
      rc = r;
    if (r >= 2)
      break;                    /* the output failed: no use going on */
    wk_stream_reset (stream);
  }

done:
  if (w.f && w.f != stdout && fclose (w.f) != 0 && rc == 0) {
    fprintf (stderr, PROGRAM ": cannot write '%s': %s\n", out_path,
        strerror (errno));
    rc = 1;
  }
  if (stream)
    wk_stream_free (stream);
  if (model)
    wk_model_unref (model);
  wk_vad_free (vad);
  wk_vad_model_unref (vad_model);
  wk_audio_decode_end ();
  free (resolved_path);
  if (!model)
    return 1;
  return rc > 1 ? 1 : rc;

bad_value:
  fprintf (stderr, PROGRAM ": bad value '%s'\n", optarg);
  usage (stderr);
  return 2;
}
