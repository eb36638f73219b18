#!/usr/bin/env python3
"""whisperknot-transcribe's options, on jfk.wav (11 s) with a given model.

  check-transcribe-cli.py TRANSCRIBE MODEL DATA_DIR [LSAN_SUPPRESSIONS]

Prints TAP. Checks:
  - -f json: every segment has a probability and words (text, start, end,
    probability in [0, 1]) inside the segment; the language with its
    probability;
  - --offset 3000 --duration 5000: only [3 s, 8 s] of the file, times still
    those of the file;
  - --vad on 5 s of silence + jfk.wav: only the speech is heard, its times
    are the file's;
  - several files in one run: txt with a "==> FILE <==" line before each,
    json with one document per file;
  - --prompt: a UTF-8 prompt runs, one that is not UTF-8 is refused
    (exit 1) with a message saying so;
  - jfk.flac and jfk.mp3 (FLAC 44.1 kHz stereo, MP3) decode through
    GStreamer to the same length as jfk.wav, from a file and from standard
    input ("-"); bytes that are no audio on standard input fail (exit 1)
    with both readers' reasons; skipped when the system's GStreamer
    plugins (decodebin, flacdec, mpg123audiodec) are missing;
  - a 16 kHz WAV stream on standard input (--latency 1000, the pipe kept
    open): text comes before the input ends.
"""
import json
import os
import subprocess
import sys
import shutil
import tempfile
import wave

from tap import check, done


def run(args, env=None, stdin=None):
    p = subprocess.run([TRANSCRIBE, "-m", MODEL, "-t", "1"] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, stdin=stdin)
    return p.returncode, p.stdout.decode("utf-8", "replace"), \
        p.stderr.decode("utf-8", "replace")


def check_json(name, out, t0, t1):
    try:
        doc = json.loads(out)
    except ValueError as e:
        check(False, name + ": valid JSON", str(e))
        return None
    segs = doc.get("segments", [])
    check(len(segs) > 0, name + ": segments", out[:200])
    bad = []
    for s in segs:
        if not (t0 - 0.02 <= s["start"] <= s["end"] <= t1 + 0.02):
            bad.append("segment %.3f-%.3f" % (s["start"], s["end"]))
        if not 0.0 <= s.get("probability", -1) <= 1.0:
            bad.append("segment probability %r" % s.get("probability"))
        words = s.get("words")
        if not words:
            bad.append("no words in %r" % s["text"])
            continue
        for w in words:
            if set(w) != {"text", "start", "end", "probability"}:
                bad.append("word fields %r" % sorted(w))
            elif not (s["start"] - 0.001 <= w["start"] <= w["end"]
                      <= s["end"] + 0.001):
                bad.append("word %r %.3f-%.3f" % (w["text"], w["start"],
                                                  w["end"]))
            elif not 0.0 <= w["probability"] <= 1.0:
                bad.append("word probability %r" % w["probability"])
        joined = "".join(w["text"] for w in words).strip()
        if joined != s["text"]:
            bad.append("words %r != text %r" % (joined, s["text"]))
    check(not bad, name + ": segments and words in range", "; ".join(bad[:5]))
    check(doc.get("language") == "en"
          and 0.0 < doc.get("language_probability", 0) <= 1.0
          and "en" in doc.get("languages", {}),
          name + ": language and its probability",
          json.dumps({k: doc.get(k) for k in
                      ("language", "language_probability", "languages")}))
    return doc


def main():
    global TRANSCRIBE, MODEL
    TRANSCRIBE, MODEL, data = sys.argv[1:4]
    supp = sys.argv[4] if len(sys.argv) > 4 else None
    wav = os.path.join(data, "jfk.wav")

    rc, out, err = run(["-f", "json", wav])
    check(rc == 0, "json: exit 0", err)
    if rc == 0:
        check_json("json", out, 0.0, 11.0)

    rc, out, err = run(["-f", "json", "--offset", "3000", "--duration",
                        "5000", wav])
    check(rc == 0, "offset/duration: exit 0", err)
    if rc == 0:
        check_json("offset/duration", out, 3.0, 8.0)
    rc, out, err = run(["--offset", "20000", wav])
    check(rc == 0 and not out.strip(), "offset past the end: exit 0, no text",
          out + err)

    rc, out, err = run(["--duration", "4000", wav, wav])
    check(rc == 0 and out.count("==> %s <==" % wav) == 2,
          "two files: both, each after its name", out + err)
    rc, out, err = run(["-f", "json", "--duration", "4000", wav, wav])
    docs, pos, dec = [], 0, json.JSONDecoder()
    try:
        while out[pos:].strip():
            while out[pos].isspace():
                pos += 1
            doc, pos = dec.raw_decode(out, pos)
            docs.append(doc)
    except ValueError as e:
        docs.append(str(e))
    check(rc == 0 and len(docs) == 2
          and all(isinstance(d, dict) and d.get("file") == wav for d in docs),
          "two files, json: a document per file",
          out[:300] + err)

    # -o naming the audio file: refused before anything is written
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "jfk.wav")
        shutil.copyfile(wav, copy)
        rc, out, err = run(["-o", copy, copy])
        check(rc == 2 and os.path.getsize(copy) == os.path.getsize(wav)
              and "overwrite" in err,
              "-o naming the audio file: exit 2, the file kept",
              "rc %d, %d bytes: %s" % (rc, os.path.getsize(copy), err))

    # --vad: 5 s of silence, then the speech: times are the file's
    with tempfile.TemporaryDirectory() as tmp:
        padded = os.path.join(tmp, "padded.wav")
        src = wave.open(wav, "rb")
        speech = src.readframes(src.getnframes())
        src.close()
        dst = wave.open(padded, "wb")
        dst.setnchannels(1)
        dst.setsampwidth(2)
        dst.setframerate(16000)
        dst.writeframes(b"\0\0" * 5 * 16000 + speech)
        dst.close()
        rc, out, err = run(["-f", "json", "--vad", "--stats", padded])
        check(rc == 0, "vad: exit 0", err)
        if rc == 0:
            doc = check_json("vad", out, 4.5, 16.0)
            heard = [l for l in err.splitlines()
                     if l.startswith("audio_seconds:")]
            heard = float(heard[0].split()[1]) if heard else -1
            check(0 < heard < 12.0,
                  "vad: the silence is not transcribed", "heard %.3f s of 16 s" % heard)

    rc, out, err = run(["--prompt", "President Kennedy spoke.", wav])
    check(rc == 0, "prompt: exit 0", err)
    rc, out, err = run([b"--prompt".decode(),
                        os.fsdecode(b"Caf\xc3 au lait"), wav])
    check(rc == 1 and "UTF-8" in err,
          "prompt not UTF-8: exit 1, says so", "rc %d: %s" % (rc, err))

    # decoding through the system's GStreamer plugins
    env = dict(os.environ)
    env.pop("GST_PLUGIN_SYSTEM_PATH_1_0", None)
    env.pop("GST_REGISTRY_1_0", None)
    if supp:
        # in a sanitizer build the system's libraries leak, not we (the
        # options do nothing elsewhere)
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") +
                               ":fast_unwind_on_malloc=0").lstrip(":")
        env["LSAN_OPTIONS"] = "suppressions=" + supp
    for name in ("jfk.flac", "jfk.mp3"):
        path = os.path.join(data, name)
        rc, out, err = run(["--stats", path], env)
        if rc != 0 and ("not installed" in err or "missing" in err
                        or "plug-in" in err or "plugin" in err):
            check(True, name + " decodes # SKIP " + err.strip()[:100])
            continue
        secs = [l for l in err.splitlines() if l.startswith("audio_seconds:")]
        dur = float(secs[0].split()[1]) if secs else -1
        check(rc == 0 and abs(dur - 11.0) < 0.1, name + " decodes to 11 s",
              "rc %d, %.3f s: %s" % (rc, dur, err[-300:]))
        with open(path, "rb") as f:
            rc, out2, err = run(["--stats", "-"], env, stdin=f)
        secs = [l for l in err.splitlines() if l.startswith("audio_seconds:")]
        dur = float(secs[0].split()[1]) if secs else -1
        check(rc == 0 and abs(dur - 11.0) < 0.1 and out2 == out,
              name + " on standard input decodes to 11 s, the same text",
              "rc %d, %.3f s: %s\n%r\n%r" % (rc, dur, err[-300:], out, out2))
        # a pipe given by name is read once too (its first bytes, read to
        # look for a WAV header, were lost: the text of a shorter file)
        with open(path, "rb") as f:
            raw = f.read()
        p = subprocess.run([TRANSCRIBE, "-m", MODEL, "-t", "1", "--stats",
                            "/dev/stdin"], input=raw, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        err = p.stderr.decode("utf-8", "replace")
        out3 = p.stdout.decode("utf-8", "replace")
        secs = [l for l in err.splitlines() if l.startswith("audio_seconds:")]
        dur = float(secs[0].split()[1]) if secs else -1
        check(p.returncode == 0 and abs(dur - 11.0) < 0.1 and out3 == out,
              name + " through a pipe named /dev/stdin: 11 s, the same text",
              "rc %d, %.3f s: %s\n%r\n%r" % (p.returncode, dur, err[-300:],
                                               out, out3))
    with tempfile.TemporaryFile() as f:
        f.write(b"these bytes are no audio file at all\n" * 20)
        f.seek(0)
        rc, out, err = run(["-"], env, stdin=f)
    check(rc == 1 and "standard input" in err and "RIFF" in err
          and "decode" in err,
          "no audio on standard input: exit 1, both readers' reasons", "rc %d: %s" % (rc, err))
    check_live_stdin(env, os.path.join(data, "jfk.wav"))


def check_live_stdin(env, wav):
    """A 16 kHz WAV stream on standard input is transcribed as it comes:
    with jfk.wav written and the pipe kept open, text appears before the
    input ends (a reader that waits for the end prints nothing until
    then)."""
    import select
    import time
    with open(wav, "rb") as f:
        data = f.read()
    p = subprocess.Popen([TRANSCRIBE, "-m", MODEL, "-t", "1", "--latency",
                          "1000", "-"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env)
    p.stdin.write(data)
    p.stdin.flush()
    deadline = time.time() + 60
    got = b""
    while time.time() < deadline and b"\n" not in got:
        r, _, _ = select.select([p.stdout], [], [], 1.0)
        if r:
            chunk = os.read(p.stdout.fileno(), 4096)
            if not chunk:
                break
            got += chunk
        if p.poll() is not None:
            break
    before_end = b"\n" in got
    p.stdin.close()
    rest = p.stdout.read()
    err = p.stderr.read()
    p.wait(timeout=120)
    check(before_end and p.returncode == 0 and len((got + rest).split()) > 5,
          "a WAV stream on standard input: text before the input ends",
          "rc %s, before the end %r, after %r: %s" % (
              p.returncode, got, rest, err.decode("utf-8", "replace")[-300:]))


if __name__ == "__main__":
    main()
    done()
