#!/usr/bin/python3
"""Live captioning delay and accuracy through a GStreamer pipeline.

Plays WAV files (16 kHz mono 16-bit, joined with silence) at real-time pace
into a live pipeline

    appsrc is-live=true ! whisperknot latency=MS ! appsink

and prints, per committed word buffer, the wall-clock delay from the end of
the word (its PTS + duration, in the stream's time, which is the time the
last of its audio was pushed) to the buffer reaching the appsink, and to the
first `whisperknot-partial` bus message that showed the word. Then it
transcribes the same audio offline through the element (latency 0, the
engine's defaults) and prints the word error rate of the live text against
the offline text and, with --truth, of both against the true transcripts.

It complements tools/wk-live-latency (the engine's stream API without
GStreamer): this one includes the element's own thread, queue, caps and
buffer handling, as an application sees them.

Usage:
  GST_PLUGIN_PATH=build/gst-plugin tools/gst-live-latency.py [--model K] \\
      [--latency MS] [--gap S] [--truth FILE] [--fast] FILE.wav...

--truth FILE: lines 'ID<TAB>...<TAB>text' with ID a file's base name without
.wav (knots/work/eval/<set>/transcripts.txt has that form). Text is
normalized as knots/train/eval.py does before scoring.
"""
import argparse
import os
import statistics
import sys
import threading
import time
import wave

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "knots", "train"))
from eval import edit_distance, normalize  # noqa: E402  (the evaluation's scoring)

SR = 16000
PIECE = 320  # 20 ms pushed at a time


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getframerate() != SR or w.getnchannels() != 1 or w.getsampwidth() != 2:
            sys.exit("%s: not 16 kHz mono 16-bit" % path)
        return w.readframes(w.getnframes())


def wer(ref, hyp):
    r, h = normalize(ref).split(), normalize(hyp).split()
    return 100.0 * edit_distance(r, h) / max(1, len(r)), len(r)


def run_pipeline(audio, model, latency, fast):
    """Pushes audio (bytes) through whisperknot; returns (words, partials, t0):
    words [(text, start_s, end_s, wall)], partials [(wall, text, start_s, end_s)]."""
    live = latency > 0
    props = "latency=%d" % latency + (" model=%s" % model if model else "")
    pipe = Gst.parse_launch(
        "appsrc name=src is-live=%s format=time block=false "
        "caps=audio/x-raw,format=S16LE,rate=%d,channels=1,layout=interleaved ! "
        "whisperknot name=wk %s ! appsink name=sink sync=false emit-signals=true"
        % ("true" if live else "false", SR, props))
    src, sink = pipe.get_by_name("src"), pipe.get_by_name("sink")
    words, partials = [], []

    def on_sample(s):
        now = time.monotonic()
        sample = s.emit("pull-sample")
        buf = sample.get_buffer()
        ok, info = buf.map(Gst.MapFlags.READ)
        text = bytes(info.data).decode("utf-8", "replace") if ok else ""
        if ok:
            buf.unmap(info)
        if buf.pts != Gst.CLOCK_TIME_NONE and text.strip():
            dur = buf.duration if buf.duration != Gst.CLOCK_TIME_NONE else 0
            words.append((text, buf.pts / Gst.SECOND, (buf.pts + dur) / Gst.SECOND, now))
        return Gst.FlowReturn.OK

    sink.connect("new-sample", on_sample)
    bus = pipe.get_bus()
    if pipe.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
        sys.exit("the pipeline does not start (GST_PLUGIN_PATH? --model?)")
    t0 = time.monotonic()

    def push():
        n = len(audio) // 2
        for pos in range(0, n, PIECE):
            k = min(PIECE, n - pos)
            if live and not fast:
                delay = t0 + (pos + k) / SR - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            b = Gst.Buffer.new_wrapped(audio[2 * pos:2 * (pos + k)])
            b.pts = pos * Gst.SECOND // SR
            b.duration = k * Gst.SECOND // SR
            if src.emit("push-buffer", b) != Gst.FlowReturn.OK:
                break
        src.emit("end-of-stream")

    th = threading.Thread(target=push)
    th.start()
    err = None
    while True:
        msg = bus.timed_pop_filtered(
            Gst.CLOCK_TIME_NONE, Gst.MessageType.EOS | Gst.MessageType.ERROR
            | Gst.MessageType.ELEMENT)
        if msg.type == Gst.MessageType.EOS:
            break
        if msg.type == Gst.MessageType.ERROR:
            err = msg.parse_error()
            break
        st = msg.get_structure()
        if st and st.get_name() == "whisperknot-partial":
            ts, dur = st.get_uint64("timestamp")[1], st.get_uint64("duration")[1]
            partials.append((time.monotonic(), st.get_string("text") or "",
                             ts / Gst.SECOND, (ts + dur) / Gst.SECOND))
    th.join()
    pipe.set_state(Gst.State.NULL)
    if err:
        sys.exit("pipeline error: %s (%s)" % (err[0].message, err[1]))
    return words, partials, t0


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--model", help="knot (default: the element's default model)")
    ap.add_argument("--latency", type=int, default=1000, help="ms (default 1000)")
    ap.add_argument("--gap", type=float, default=1.5, help="silence between files, s")
    ap.add_argument("--truth", help="true transcripts (see above)")
    ap.add_argument("--fast", action="store_true", help="push as fast as possible")
    ap.add_argument("-q", "--quiet", action="store_true", help="no per-word lines")
    args = ap.parse_args()
    Gst.init(None)

    gap = b"\0\0" * int(args.gap * SR)
    audio = gap.join(read_wav(f) for f in args.files) + b"\0\0" * (2 * SR)
    seconds = len(audio) / 2 / SR

    t_wall = time.monotonic()
    words, partials, t0 = run_pipeline(audio, args.model, args.latency, args.fast)
    live_wall = time.monotonic() - t_wall
    t_off = time.monotonic()
    off_words, _, _ = run_pipeline(audio, args.model, 0, True)
    off_wall = time.monotonic() - t_off

    commit_d, partial_d = [], []
    if not args.quiet:
        print("# word                 end_s  commit_delay  first_partial_delay")
    for text, start, end, wall in words:
        d = wall - (t0 + end)
        w = normalize(text)
        first = None
        for pw, ptext, ps, pe in partials:
            if pw > wall:
                break
            if w and w in normalize(ptext).split() and ps - 0.3 <= end <= pe + 0.3:
                first = pw - (t0 + end)
                break
        if first is None or first > d:
            first = d  # never shown as partial: it appeared committed
        commit_d.append(d)
        partial_d.append(first)
        if not args.quiet:
            print("%-20s %7.2f %13.2f %20.2f" % (text.strip()[:20], end, d, first))

    live_text = " ".join(t.strip() for t, _, _, _ in words)
    off_text = " ".join(t.strip() for t, _, _, _ in off_words)
    print("# %d files, %.1f s of audio; live (latency %d ms, %s): %.1f s wall; offline "
          "(latency 0): %.1f s wall" % (len(args.files), seconds, args.latency,
                                         "as fast as possible" if args.fast else "real time",
                                         live_wall, off_wall))
    print("words: %d live, %d offline; %d partial messages" % (
        len(words), len(off_words), len(partials)))
    if commit_d:
        print("delay from a word's end (its PTS + duration) to its buffer: median %.2f s, "
              "p95 %.2f s, max %.2f s" % (statistics.median(commit_d), pct(commit_d, 0.95),
                                          max(commit_d)))
        print("delay from a word's end to its first partial: median %.2f s, p95 %.2f s" % (
            statistics.median(partial_d), pct(partial_d, 0.95)))
    w, n = wer(off_text, live_text)
    print("WER live vs offline: %.1f %% (%d offline words)" % (w, n))
    if args.truth:
        truth = {}
        with open(args.truth, encoding="utf-8") as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 2:
                    truth[parts[0]] = parts[-1]
        ids = [os.path.splitext(os.path.basename(p))[0] for p in args.files]
        missing = [i for i in ids if i not in truth]
        if missing:
            sys.exit("--truth has no line for %s" % ", ".join(missing))
        ref = " ".join(truth[i] for i in ids)
        wl, n = wer(ref, live_text)
        wo, _ = wer(ref, off_text)
        print("WER vs truth: live %.1f %%, offline %.1f %% (%d words)" % (wl, wo, n))


if __name__ == "__main__":
    main()
