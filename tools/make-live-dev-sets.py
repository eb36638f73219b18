#!/usr/bin/python3
"""The development sets of the live latency/WER table (issue: captions on time).

Links the first utterances of knots/train/eval.py's development sets into two
folders, with a truth file in the form wk-live-latency --truth and
tools/gst-live-latency.py --truth read ('ID<TAB>-<TAB>text'):

  knots/work/eval/wav/live-dev-real   dev-real-lj 0-7 (LJ005-*) and
                                      dev-real-asterisk 0-11: 70 s of speech
  knots/work/eval/wav/live-dev-synth  dev-trainvoices 0-7: 45 s
  knots/work/eval/wav/live-dev-real-b the next ones: dev-real-lj 8-39,
                                      dev-real-asterisk 12-43 and dev-many
                                      0-39 (40 speakers of speechocean762):
                                      a larger set (about 7 minutes) for
                                      `wk-live-latency --virtual`, to see
                                      whether a change to the live policy
                                      helps beyond the first set's 200 words

and, with --test, the recordings never used for a decision, for measuring
a policy once it is chosen (written from the .npz files, 16-bit WAV):

  knots/work/eval/wav/live-test-real  test-real-asterisk 0-11, test-many
                                      0-7 and ../shared/data/jfk.wav: 86 s

The utterances are the first of each set, as eval.py wrote them; nothing was
chosen by listening. Run eval.py once on the sets first (it writes the WAV
files), e.g. `eval.py --knot knots/model/default.knot --sets dev-all --n 100`.

Usage: /usr/bin/python3 tools/make-live-dev-sets.py [--test]
"""
import os
import shutil
import sys
import wave

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVAL = os.path.join(ROOT, "knots", "work", "eval")
SETS = {
    "live-dev-real": [("lj", "dev-real-lj", "dev-real-lj", 0, 8),
                      ("ast", "dev-real-asterisk", "dev-real-asterisk", 0, 12)],
    "live-dev-synth": [("tv", "dev-trainvoices", "dev-trainvoices-n100", 0, 8)],
    "live-dev-real-b": [("lj", "dev-real-lj", "dev-real-lj", 8, 32),
                        ("ast", "dev-real-asterisk", "dev-real-asterisk", 12, 32),
                        ("many", "dev-many", "dev-many", 0, 40)],
}


TEST_PARTS = [("ast", "test-real-asterisk", 12), ("many", "test-many", 8)]


def truth_line(name, text):
    """A truth.txt line as wk-live-latency --truth reads it."""
    return "%s\t-\t%s\n" % (name, text)


def write_truth(out, lines):
    with open(os.path.join(out, "truth.txt"), "w", encoding="utf-8") as f:
        f.writelines(lines)
    print("%s: %d utterances" % (out, len(lines)))


def make_test_set():
    out = os.path.join(EVAL, "wav", "live-test-real")
    os.makedirs(out, exist_ok=True)
    lines = []
    for prefix, npz, n in TEST_PARTS:
        path = os.path.join(EVAL, npz + ".npz")
        if not os.path.exists(path):
            sys.exit("%s missing: run knots/train/real.py sets and many.py sets" % path)
        with np.load(path) as z:
            audio, off = z["audio"], z["offsets"]
            texts = [str(t) for t in z["text"]]
        if audio.dtype != np.int16:
            sys.exit("%s: 16-bit audio expected, got %s" % (path, audio.dtype))
        for i in range(n):
            with wave.open(os.path.join(out, "%s-%04d.wav" % (prefix, i)), "wb") as w:
                w.setnchannels(1)
                w.setsampwidth(2)
                w.setframerate(16000)
                w.writeframes(audio[off[i]:off[i + 1]].tobytes())
            lines.append(truth_line("%s-%04d" % (prefix, i), texts[i]))
    # jfk.wav itself (test-jfk.npz holds its samples and its text)
    shutil.copyfile(os.path.join(ROOT, "..", "shared", "data", "jfk.wav"),
                    os.path.join(out, "jfk.wav"))
    with np.load(os.path.join(EVAL, "test-jfk.npz")) as z:
        lines.append(truth_line("jfk", str(z["text"][0])))
    write_truth(out, lines)


def main():
    if "--test" in sys.argv[1:]:
        make_test_set()
        return
    for name, parts in SETS.items():
        out = os.path.join(EVAL, "wav", name)
        os.makedirs(out, exist_ok=True)
        lines = []
        missing = [npz for _, _, npz, _, _ in parts
                   if not os.path.exists(os.path.join(EVAL, npz + ".npz"))]
        if missing:
            print("%s: skipped, no %s (run knots/train/eval.py on it first)"
                  % (name, ", ".join(missing)))
            continue
        for prefix, wavset, npz, first, n in parts:
            texts = np.load(os.path.join(EVAL, npz + ".npz"), allow_pickle=True)["text"]
            for i in range(first, first + n):
                src = os.path.join(EVAL, "wav", wavset, "%04d.wav" % i)
                if not os.path.exists(src):
                    sys.exit("%s missing: run knots/train/eval.py on %s first" % (src, wavset))
                dst = os.path.join(out, "%s-%04d.wav" % (prefix, i))
                if os.path.lexists(dst):
                    os.remove(dst)
                os.symlink(os.path.relpath(src, out), dst)
                lines.append(truth_line("%s-%04d" % (prefix, i), texts[i]))
        write_truth(out, lines)


if __name__ == "__main__":
    main()
