#!/usr/bin/env python3
"""Word times of the default model from its alignment heads, end to end.

  check-word-times.py TRANSCRIBE MODEL SAMPLE.wav REF.wav REF.words

Through whisperknot-transcribe (one thread):
  1. -f json on SAMPLE.wav (examples/data/sample.wav): every word at least
     20 ms long, inside its segment, after the word before it;
  2. the same on REF.wav, a festival recording whose word boundaries are
     known (REF.words: start, end, word; tests/data/word-times/README):
     the words matched to the reference (same spelling, in order) start
     and end within TOLERANCE of it on average, and closer than the times
     shared out by byte length (--no-word-times) are;
  3. --latency 1000 (the live policy) -f vtt and -f json on SAMPLE.wav: no
     cue and no word of zero length, words in order.
Prints TAP.
"""
import json
import re
import subprocess
import sys

from tap import check, done

TOLERANCE = 0.15    # seconds, mean of start and end errors (measured 0.06)
MIN_LEN = 0.02 - 1e-6


def run(args):
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise SystemExit("%s failed (%d)" % (" ".join(args), r.returncode))
    return r.stdout


def norm(w):
    return re.sub(r"[^a-z0-9]", "", w.lower())


def words_ok(segments, live):
    """None, or what is wrong with the words of these segments."""
    prev_end = -1.0
    n = 0
    for s in segments:
        for w in s.get("words", []):
            n += 1
            if w["end"] - w["start"] < MIN_LEN:
                return "word %r %.3f..%.3f shorter than 20 ms" % (
                    w["text"], w["start"], w["end"])
            if not live and (w["start"] < s["start"] - 1e-6
                             or w["end"] > s["end"] + 1e-6):
                return "word %r %.3f..%.3f outside its segment %.3f..%.3f" % (
                    w["text"], w["start"], w["end"], s["start"], s["end"])
            if w["start"] < prev_end - 1e-6:
                return "word %r starts at %.3f, before the last ended (%.3f)" % (
                    w["text"], w["start"], prev_end)
            prev_end = w["end"]
    if n == 0:
        return "no words"
    return None


def matched_errors(ref, segments):
    hyp = [(norm(w["text"]), w["start"], w["end"])
           for s in segments for w in s.get("words", []) if norm(w["text"])]
    R, H = len(ref), len(hyp)
    L = [[0] * (H + 1) for _ in range(R + 1)]
    for i in range(R - 1, -1, -1):
        for j in range(H - 1, -1, -1):
            L[i][j] = L[i + 1][j + 1] + 1 if ref[i][2] == hyp[j][0] else \
                max(L[i + 1][j], L[i][j + 1])
    i = j = 0
    pairs = []
    while i < R and j < H:
        if ref[i][2] == hyp[j][0]:
            pairs.append((i, j))
            i += 1
            j += 1
        elif L[i + 1][j] >= L[i][j + 1]:
            i += 1
        else:
            j += 1
    # only pairs with a matched neighbour (the word before or after is the
    # next one in both texts): a lone match across a misheard stretch pairs
    # two different utterances of a common word (a hypothesis "a" inside a
    # misheard "Enterprise" with the reference's "a" 1.4 s later) and
    # measures the mismatch, not the alignment
    matched = set(pairs)
    errs = []
    for i, j in pairs:
        if (i - 1, j - 1) in matched or (i + 1, j + 1) in matched:
            errs.append(abs(hyp[j][1] - ref[i][0]))
            errs.append(abs(hyp[j][2] - ref[i][1]))
    return errs


def main():
    if len(sys.argv) != 6:
        raise SystemExit(__doc__)
    tr, model, sample, ref_wav, ref_words = sys.argv[1:]
    base = [tr, "-m", model, "-t", "1", "-f", "json"]

    segs = json.loads(run(base + [sample]))["segments"]
    why = words_ok(segs, False)
    check(why is None, "offline words of sample.wav: >= 20 ms, in order, "
          "inside their segments", why or "")

    ref = []
    with open(ref_words) as f:
        for line in f:
            s, e, w = line.split("\t")
            ref.append((float(s), float(e), norm(w)))
    dtw = matched_errors(ref, json.loads(run(base + [ref_wav]))["segments"])
    share = matched_errors(ref, json.loads(
        run(base + ["--no-word-times", ref_wav]))["segments"])
    m_dtw = sum(dtw) / max(len(dtw), 1)
    m_share = sum(share) / max(len(share), 1)
    print("# %d words matched; mean boundary error %.3f s (alignment heads), "
          "%.3f s (byte share)" % (len(dtw) // 2, m_dtw, m_share))
    check(len(dtw) >= 16 and m_dtw <= TOLERANCE,
          "word boundaries within %.2f s of festival's" % TOLERANCE,
          "%d matched, mean error %.3f s" % (len(dtw) // 2, m_dtw))
    check(len(dtw) == len(share) and m_dtw < m_share,
          "alignment-head times closer than byte-share times",
          "%.3f s vs %.3f s" % (m_dtw, m_share))

    live = [tr, "-m", model, "-t", "1", "--latency", "1000"]
    vtt = run(live + ["-f", "vtt", sample])
    cues = re.findall(r"(\d+):(\d+):(\d+)\.(\d+) --> (\d+):(\d+):(\d+)\.(\d+)",
                      vtt)

    def sec(h, m, s, ms):
        return int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000.0
    zero = [c for c in cues if sec(*c[4:]) <= sec(*c[:4])]
    check(len(cues) > 0 and not zero, "live WebVTT: no cue of zero length",
          "%d cues, zero-length: %r" % (len(cues), zero[:3]))
    segs = json.loads(run(live + ["-f", "json", sample]))["segments"]
    why = words_ok(segs, True)
    check(why is None, "live words: >= 20 ms, in order", why or "")


if __name__ == "__main__":
    main()
    done()
