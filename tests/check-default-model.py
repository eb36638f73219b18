#!/usr/bin/env python3
"""Quality check of the shipped default model (knots/model/default.knot).

Transcribes examples/data/sample.wav (held-out sentences, never trained on; see
examples/data/make-sample.sh) three times, as users do:
  1. with whisperknot-transcribe (the engine's defaults, 1 thread);
  2. the same with --latency 1000: the live policy, as fast as the CPU goes;
  3. with the README's main pipeline: filesrc ! wavparse ! audioconvert !
     audioresample ! whisperknot text-lines=true ! fdsink (the element with no
     model property, so it loads the default model), whose output must be
     lines;
and fails unless each word error rate against examples/data/sample.txt is at
most --max-wer percent (words lowercased, punctuation dropped); the live run's
bound is --max-live-wer (default: --max-wer).

  check-default-model.py TRANSCRIBE MODEL SAMPLE.wav SAMPLE.txt [--max-wer P]
                         [--max-live-wer P] [--no-element]
The element half needs gst-launch-1.0 and the environment of the meson tests;
sanitizer builds pass --no-element (gst-launch-1.0 is not instrumented, so it
cannot load a plugin built with AddressSanitizer) and the line says so.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys


def words(s):
    s = s.lower().replace("-", " ")
    s = re.sub(r"[^a-z0-9' ]", " ", s)
    return [w.strip("'") for w in s.split() if w.strip("'")]


def wer(ref, hyp):
    r, h = words(ref), words(hyp)
    prev = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        cur = [i] + [0] * len(h)
        for j in range(1, len(h) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r[i - 1] != h[j - 1]))
        prev = cur
    return 100.0 * prev[len(h)] / max(1, len(r))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("transcribe")
    ap.add_argument("model")
    ap.add_argument("wav")
    ap.add_argument("ref")
    ap.add_argument("--max-wer", type=float, default=10.0)
    ap.add_argument("--max-live-wer", type=float, default=None)
    ap.add_argument("--no-element", action="store_true")
    a = ap.parse_args()
    with open(a.ref) as f:
        ref = f.read()
    failed = False
    runs = [("whisperknot-transcribe", [a.transcribe, "-m", a.model, "-t", "1", a.wav]),
            # the live policy (anchored windows, LocalAgreement) on the same audio
            ("whisperknot-transcribe --latency 1000",
             [a.transcribe, "-m", a.model, "-t", "1", "--latency", "1000", a.wav])]
    gst = shutil.which("gst-launch-1.0")
    if a.no_element:
        print("element half not run: sanitizer build (gst-launch-1.0 is not instrumented)")
    elif gst:
        runs.append(("gst-launch-1.0 (element, default model)",
                     [gst, "-q", "filesrc", "location=" + a.wav, "!", "wavparse", "!",
                      "audioconvert", "!", "audioresample", "!", "whisperknot", "text-lines=true", "!",
                      "fdsink", "fd=1"]))
    else:
        print("FAIL: gst-launch-1.0 not found")
        failed = True
    # the element finds the default model itself (build tree or installed copy)
    # and the pipeline needs the system's plugins (filesrc, wavparse, ...) beside
    # the build tree's, which the meson tests' environment hides
    env = {k: v for k, v in os.environ.items()
           if k not in ("WHISPERKNOT_MODEL", "GST_PLUGIN_SYSTEM_PATH_1_0")}
    for name, cmd in runs:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        w = wer(ref, r.stdout)
        bound = a.max_wer
        if "--latency" in cmd and a.max_live_wer is not None:
            bound = a.max_live_wer
        ok = r.returncode == 0 and w <= bound
        if "text-lines=true" in cmd and not r.stdout.endswith("\n"):
            print("%s: the text does not end with a newline" % name)
            ok = False
        print("%s: exit %d, WER %.1f%% (at most %.1f%%)\n  ref: %s\n  hyp: %s%s" % (
            name, r.returncode, w, bound, " ".join(ref.split()), " ".join(r.stdout.split()),
            "" if r.returncode == 0 else "\n  stderr: " + r.stderr.strip()[-500:]))
        failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
