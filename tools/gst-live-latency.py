#!/usr/bin/python3
"""Live captioning delay and accuracy through a GStreamer pipeline.

Plays WAV files (16 kHz mono 16-bit, joined with silence) at real-time pace
into a live pipeline

    appsrc is-live=true ! whisperknot latency=MS ! appsink

and prints, per committed word buffer, the wall-clock delay from the end of
the word (its PTS + duration, in the stream's time, which is the time the
last of its audio was pushed) to the buffer reaching the appsink, and to the
first `whisperknot-partial` bus message that showed the word, and counts the
buffers that came later than a synchronised sink allows: after their PTS +
the latency, on the pipeline's clock. Then it
transcribes the same audio offline through the element (latency 0, the
engine's defaults) and prints the word error rate of the live text against
the offline text and, with --truth, of both against the true transcripts.

It complements tools/wk-live-latency (the engine's stream API without
GStreamer): this one includes the element's own thread, queue, caps and
buffer handling, as an application sees them.

Usage:
  GST_PLUGIN_PATH=build/gst-plugin tools/gst-live-latency.py [--model K] \\
      [--latency MS] [--commit deadline|agreement] [--gap S] [--truth FILE] \\
      [--fast] [--sweep [--latencies MS,...]] [--streams N] [--source live|identity] \\
      [--sink-sync] [--texts] [--loss P [--loss-seed S]] [-t N] FILE.wav...

Arrival is timed by a probe on the appsink's pad; --sink-sync makes the
appsink synchronised (it then holds each buffer until its PTS + latency, and
the element's pushes wait for it, as behind textoverlay or a muxer). Beside
the buffers late at the sink it prints the words the engine itself committed
late (its `stats`: after start + latency), so a buffer late at the sink but
not in the engine was late in the hand-on (the element's push, the thread
waking).

--sweep: a table instead, latency 500, 1000, 2000 and 3000 ms with both
commit policies (the element's `commit` property): WER against the offline
text and the truth, late buffers, p95 delay from a word's start to its buffer.

--loss P: each 20 ms piece after the first is lost with probability P and
sent as a GAP event instead (as rtpjitterbuffer do-lost=true and a
depayloader report a lost RTP packet); the offline reference hears it all.

--texts: per file, the truth, the offline text and the first pipeline's live text with
their errors against the truth, to see where a policy or a run loses words (one run, not
with --sweep).

--truth FILE: lines 'ID<TAB>...<TAB>text' with ID a file's base name without
.wav (knots/work/eval/<set>/transcripts.txt has that form). Text is
normalized as knots/train/eval.py does before scoring.
"""
import argparse
import os
import random
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


class Pipeline:
    """One `appsrc ! whisperknot ! appsink` pipeline playing audio (bytes).

    After run(): words [(text, start_s, end_s, wall)], partials [(wall, text,
    start_s, end_s)], wall times on the pipeline's clock (the system clock:
    time.monotonic()), t0 its base time, and reported: the latency the
    element answers (the pipeline's, its source adding none), so a buffer
    is late when wall > t0 + start + reported.

    source "live": appsrc is-live=true, each 20 ms buffer pushed when its
    last sample is in (a capture card); "identity": a non-live appsrc
    pushed as fast as it takes, paced by `identity sync=true` (a file
    played at real time)."""

    def __init__(self, audio, model, latency, fast, commit="deadline", source="live",
                 threads=0, sink_sync=False):
        self.audio, self.latency, self.fast = audio, latency, fast
        live = latency > 0
        self.paced = live and not fast and source == "live"
        props = "latency=%d commit=%s threads=%d" % (latency, commit, threads) + (
            " model=%s" % model if model else "")
        pace = " ! identity sync=true" if live and not fast and source == "identity" else ""
        self.pipe = Gst.parse_launch(
            "appsrc name=src is-live=%s format=time block=%s "
            "caps=audio/x-raw,format=S16LE,rate=%d,channels=1,layout=interleaved%s ! "
            "whisperknot name=wk %s ! appsink name=sink sync=%s emit-signals=true"
            % ("true" if self.paced else "false", "false" if self.paced else "true",
               SR, pace, props, "true" if sink_sync and live and not fast else "false"))
        self.words, self.partials, self.t0, self.err = [], [], 0.0, None
        self.reported = latency / 1000.0
        self.engine_late = (0, 0.0, 0.0)
        self.loss, self.loss_seed = 0.0, 1

    def run(self):
        self.words, self.partials, self.t0 = run_pipeline(self)
        return self

    def check(self):
        if self.err:
            sys.exit(self.err)
        return self


def run_pipeline(pl):
    """Plays pl.audio through pl.pipe; returns (words, partials, t0)."""
    audio, pipe = pl.audio, pl.pipe
    src, sink = pipe.get_by_name("src"), pipe.get_by_name("sink")
    words, partials = [], []

    # a buffer arrives when it reaches the sink's pad, before a synchronised
    # sink waits there for its time
    def on_arrival(pad, info):
        now = time.monotonic()
        buf = info.get_buffer()
        ok, m = buf.map(Gst.MapFlags.READ)
        text = bytes(m.data).decode("utf-8", "replace") if ok else ""
        if ok:
            buf.unmap(m)
        if buf.pts != Gst.CLOCK_TIME_NONE and text.strip():
            dur = buf.duration if buf.duration != Gst.CLOCK_TIME_NONE else 0
            words.append((text, buf.pts / Gst.SECOND, (buf.pts + dur) / Gst.SECOND, now))
        return Gst.PadProbeReturn.OK

    sink.get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, on_arrival)
    sink.connect("new-sample", lambda s: (s.emit("pull-sample"), Gst.FlowReturn.OK)[1])
    bus = pipe.get_bus()
    if pipe.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
        pl.err = "the pipeline does not start (GST_PLUGIN_PATH? --model?)"
        return words, partials, 0.0
    # (no waiting for the state: a live pipeline completes it with data)
    t0 = time.monotonic()

    def push():
        n = len(audio) // 2
        rng = random.Random(pl.loss_seed)
        for pos in range(0, n, PIECE):
            k = min(PIECE, n - pos)
            if pl.paced:
                delay = t0 + (pos + k) / SR - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            if pos > 0 and pl.loss > 0 and rng.random() < pl.loss:
                # a lost packet, as rtpjitterbuffer do-lost=true and a
                # depayloader report it
                src.send_event(Gst.Event.new_gap(pos * Gst.SECOND // SR,
                                                 k * Gst.SECOND // SR))
                continue
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
    q = Gst.Query.new_latency()
    if sink.get_static_pad("sink").peer_query(q):
        pl.reported = q.parse_latency()[1] / Gst.SECOND
    # lateness counts on the pipeline's clock, the system clock
    # (CLOCK_MONOTONIC, as time.monotonic()): running time 0 is its base time
    clock = pipe.get_clock()
    if clock and pipe.get_base_time() > 0:
        if abs(clock.get_time() / Gst.SECOND - time.monotonic()) > 0.01:
            pl.err = "the pipeline clock is not the monotonic system clock"
        t0 = pipe.get_base_time() / Gst.SECOND
    # the engine's own count: words it committed after their start +
    # latency, so that a buffer late here but not there was late in the
    # hand-on
    st = pipe.get_by_name("wk").get_property("stats")
    if st:
        pl.engine_late = (st.get_uint64("late-words")[1], st.get_double("max-lateness")[1],
                          st.get_double("run-estimate")[1])
    pipe.set_state(Gst.State.NULL)
    if err:
        pl.err = "pipeline error: %s (%s)" % (err[0].message, err[1])
    return words, partials, t0


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))] if xs else float("nan")


def measure(audio, args, latency, commit, off_text, truth_ref):
    """One live run of args.streams pipelines started together: a dict of the
    figures over all of them (WER: the mean of the streams'). Late: after
    PTS + the latency the element reported."""
    pls = [Pipeline(audio, args.model, latency, args.fast, commit, args.source, args.threads,
                    args.sink_sync) for _ in range(args.streams)]
    for i, p in enumerate(pls):
        p.loss, p.loss_seed = args.loss, args.loss_seed + i
    ths = [threading.Thread(target=p.run) for p in pls]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    for p in pls:
        p.check()
    r = {"words": [], "late": [], "start_d": [], "worst": 0.0, "wer_off": 0.0,
         "wer_truth": 0.0 if truth_ref is not None else None,
         "reported": max(p.reported for p in pls)}
    for p in pls:
        words, t0, lat = p.words, p.t0, p.reported
        r["words"] += words
        r["late"] += [w for w in words if w[3] > t0 + w[1] + lat]
        r["worst"] = max([r["worst"]] + [w[3] - (t0 + w[1] + lat) for w in words])
        r["start_d"] += [w[3] - (t0 + w[1]) for w in words]
        live_text = " ".join(t.strip() for t, _, _, _ in words)
        r["wer_off"] += wer(off_text, live_text)[0] / len(pls)
        if truth_ref is not None:
            r["wer_truth"] += wer(truth_ref, live_text)[0] / len(pls)
    r["engine_late"] = sum(p.engine_late[0] for p in pls)
    r["engine_worst"] = max(p.engine_late[1] for p in pls)
    r["run_est"] = max(p.engine_late[2] for p in pls)
    p = pls[0]
    r["partials"], r["t0"] = p.partials, p.t0
    r["words0"] = p.words
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--model", help="knot (default: the element's default model)")
    ap.add_argument("--latency", type=int, default=1000, help="ms (default 1000)")
    ap.add_argument("--commit", choices=["deadline", "agreement"], default="deadline",
                    help="the element's commit policy (default deadline)")
    ap.add_argument("--gap", type=float, default=1.5, help="silence between files, s")
    ap.add_argument("--truth", help="true transcripts (see above)")
    ap.add_argument("--fast", action="store_true", help="push as fast as possible")
    ap.add_argument("--sweep", action="store_true",
                    help="latency 500-3000 ms, both policies: a table")
    ap.add_argument("--latencies", default="500,1000,2000,3000",
                    help="--sweep: the latencies, ms (default 500,1000,2000,3000)")
    ap.add_argument("-t", "--threads", type=int, default=0,
                    help="the element's threads (default 0: its choice)")
    ap.add_argument("--streams", type=int, default=1,
                    help="pipelines on the one model, started together (default 1)")
    ap.add_argument("--source", choices=["live", "identity"], default="live",
                    help="live: appsrc is-live=true pushed at real time (default); "
                    "identity: a non-live appsrc ! identity sync=true")
    ap.add_argument("--sink-sync", action="store_true",
                    help="a synchronised appsink (sync=true), which holds each text "
                    "buffer until its PTS + the latency; arrival is still timed at its pad")
    ap.add_argument("--loss", type=float, default=0.0,
                    help="lose each 20 ms piece with this probability, sent as a GAP "
                    "event (RTP packet loss); the offline reference hears all")
    ap.add_argument("--loss-seed", type=int, default=1, help="the losses' seed (default 1)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no per-word lines")
    ap.add_argument("--texts", action="store_true",
                    help="per file: the truth, the offline text and the live text (the "
                    "first pipeline's) with their errors, to see where two runs differ")
    args = ap.parse_args()
    if args.texts and args.sweep:
        ap.error("--texts prints one run's texts; it does not go with --sweep")
    Gst.init(None)

    gap = b"\0\0" * int(args.gap * SR)
    pcm = [read_wav(f) for f in args.files]
    audio = gap.join(pcm) + b"\0\0" * (2 * SR)
    # each file's span of the joined audio (s), its gap after it included
    spans, t = [], 0.0
    for f, x in zip(args.files, pcm):
        d = len(x) / 2 / SR + args.gap
        spans.append((os.path.splitext(os.path.basename(f))[0], t, t + d))
        t += d
    seconds = len(audio) / 2 / SR

    truth_ref = None
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
        truth_ref = " ".join(truth[i] for i in ids)

    t_off = time.monotonic()
    off_words = Pipeline(audio, args.model, 0, True, threads=args.threads).run().check().words
    off_wall = time.monotonic() - t_off
    off_text = " ".join(t.strip() for t, _, _, _ in off_words)
    print("# %d files, %.1f s of audio; offline (latency 0): %d words in %d segments, "
          "%.1f s wall%s" % (
              len(args.files), seconds, len(off_text.split()), len(off_words), off_wall,
              ", WER vs truth %.1f %%" % wer(truth_ref, off_text)[0] if truth_ref else ""))

    if args.sweep:
        print("# %d pipeline%s started together, source %s; late = after PTS + the "
              "reported latency" % (args.streams, "s" if args.streams > 1 else "",
                                    args.source))
        print("| latency | reported | commit | WER vs offline | WER vs truth | late buffers "
              "| worst late | p95 start-to-buffer | late in the engine |")
        print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
        sys.stdout.flush()
        for latency in [int(x) for x in args.latencies.split(",")]:
            for commit in ("agreement", "deadline"):
                r = measure(audio, args, latency, commit, off_text, truth_ref)
                print("| %d | %d | %s | %.1f %% | %s | %d / %d | %.2f s | %.2f s | %d |" % (
                    latency, round(r["reported"] * 1000), commit, r["wer_off"],
                    "%.1f %%" % r["wer_truth"] if truth_ref else "-", len(r["late"]),
                    len(r["words"]), max(0.0, r["worst"]), pct(r["start_d"], 0.95),
                    r["engine_late"]))
                sys.stdout.flush()
        return

    t_wall = time.monotonic()
    r = measure(audio, args, args.latency, args.commit, off_text, truth_ref)
    live_wall = time.monotonic() - t_wall
    words, partials, t0 = r["words0"], r["partials"], r["t0"]

    if args.texts:
        def text_in(ws, a, b):
            return " ".join(x.strip() for x, _, e, _ in ws if a <= e < b)
        for i, a, b in spans:
            ref = truth[i] if truth_ref is not None else None
            print("# %s" % i + (": %s" % normalize(ref) if ref is not None else ""))
            for label, ws in (("offline", off_words), ("live", words)):
                hyp = text_in(ws, a, b)
                errs = "%3d" % edit_distance(normalize(ref).split(), normalize(hyp).split()) \
                    if ref is not None else "  -"
                print("#   %s %-7s %s" % (errs, label, normalize(hyp)))

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

    print("# live (latency %d ms, commit %s, %s): %.1f s wall" % (
        args.latency, args.commit, "as fast as possible" if args.fast else "real time",
        live_wall))
    print("text buffers: %d live (words), %d offline (segments); %d partial messages" % (
        len(words), len(off_words), len(partials)))
    if commit_d:
        print("delay from a word's end (its PTS + duration) to its buffer: median %.2f s, "
              "p95 %.2f s, max %.2f s" % (statistics.median(commit_d), pct(commit_d, 0.95),
                                          max(commit_d)))
        print("delay from a word's end to its first partial: median %.2f s, p95 %.2f s" % (
            statistics.median(partial_d), pct(partial_d, 0.95)))
    print("late buffers (after PTS + the reported %d ms), all pipelines: %d of %d, "
          "worst %.2f s late" % (round(r["reported"] * 1000), len(r["late"]),
                                 len(r["words"]), max(0.0, r["worst"])))
    print("late in the engine (committed after start + latency), all pipelines: %d, "
          "worst %.2f s; largest run estimate %.3f s" % (
              r["engine_late"], r["engine_worst"], r["run_est"]))
    print("WER live vs offline: %.1f %%" % r["wer_off"])
    if truth_ref is not None:
        print("WER vs truth: live %.1f %%, offline %.1f %%" % (
            r["wer_truth"], wer(truth_ref, off_text)[0]))


if __name__ == "__main__":
    main()
