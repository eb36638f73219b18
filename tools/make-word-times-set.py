#!/usr/bin/env python3
"""Synthesizes speech with known word boundaries, for tools/word-times.c.

festival says where each word it speaks starts and ends (its Word
relation: word_start / word_end, seconds), so its voices give a set of
WAV files with exact reference times:

  DIR/NNN.wav    16 kHz mono s16 (festival's output resampled with sox)
  DIR/NNN.words  one word per line: start<TAB>end<TAB>word (seconds)
  DIR/list.tsv   wav<TAB>words, the list wk-word-times reads

Sentences come from knots/train/heldout/sentences.txt (never trained on);
--first/--count pick which, --voices which festival voices (round robin),
--stretch festival's Duration_Stretch (1 = its own pace).

  tools/make-word-times-set.py --voices kal_diphone --first 0 --count 40 dev
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SENTENCES = os.path.join(HERE, "..", "knots", "train", "heldout", "sentences.txt")


def sentences():
    out = []
    with open(SENTENCES, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#") or "\t" not in line:
                continue
            out.append(line.rstrip("\n").split("\t", 1)[1])
    return out


def scheme_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--voices", default="kal_diphone")
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--stretch", type=float, default=1.0)
    ap.add_argument("dir")
    a = ap.parse_args()
    voices = a.voices.split(",")
    texts = sentences()[a.first:a.first + a.count]
    if not texts:
        sys.exit("no sentences in that range")
    os.makedirs(a.dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="wk-wt-")
    scm = ["(Parameter.set 'Duration_Stretch %g)" % a.stretch]
    for i, text in enumerate(texts):
        raw = os.path.join(tmp, "%03d.wav" % i)
        scm.append("(voice_%s)" % voices[i % len(voices)])
        scm.append("(set! utt (utt.synth (Utterance Text %s)))" % scheme_str(text))
        scm.append("(utt.save.wave utt %s 'riff)" % scheme_str(raw))
        scm.append('(format t "#%d\\n")' % i)
        scm.append("(mapcar (lambda (w) (format t \"%f %f %s\\n\" "
                   "(item.feat w \"word_start\") (item.feat w \"word_end\") "
                   "(item.name w))) (utt.relation.items utt 'Word))")
    path = os.path.join(tmp, "set.scm")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(scm) + "\n")
    out = subprocess.run(["festival", "-b", path], check=True,
                         capture_output=True, text=True).stdout
    words, cur = {}, None
    for line in out.splitlines():
        if line.startswith("#") and line[1:].isdigit():
            cur = int(line[1:])
            words[cur] = []
        elif cur is not None and line.count(" ") == 2:
            s, e, w = line.split(" ")
            words[cur].append((float(s), float(e), w))
    with open(os.path.join(a.dir, "list.tsv"), "w") as lst:
        for i in range(len(texts)):
            wav = os.path.join(a.dir, "%03d.wav" % i)
            ref = os.path.join(a.dir, "%03d.words" % i)
            subprocess.run(["sox", os.path.join(tmp, "%03d.wav" % i), "-r", "16000",
                            "-c", "1", "-b", "16", wav], check=True)
            with open(ref, "w") as f:
                for s, e, w in words.get(i, []):
                    f.write("%.3f\t%.3f\t%s\n" % (s, e, w))
            lst.write("%s\t%s\n" % (os.path.abspath(wav), os.path.abspath(ref)))
    shutil.rmtree(tmp)
    print("%s: %d sentences, voices %s, stretch %g" % (a.dir, len(texts), a.voices,
                                                       a.stretch))


if __name__ == "__main__":
    main()
