#!/usr/bin/python3
"""Transcribe WAV files through a GStreamer speech-to-text element (for eval.py).

One process loads GStreamer once and loops over its files, each through

  filesrc ! wavparse ! audioconvert ! audioresample ! ELEMENT ! SINK

  pocketsphinx  Debian's gstreamer1.0-pocketsphinx with pocketsphinx-en-us (the
                element's defaults: en-us acoustic model, en-us.lm.bin, CMU
                dictionary). The element posts `pocketsphinx` element messages;
                the text of a file is its `final` hypotheses joined with
                spaces. The pipeline returns to NULL between files, so every
                file starts with a fresh decoder (in READY the live cepstral
                mean carries over from the previous file and changes results).
  whisperknot   our element (GST_PLUGIN_PATH=<build>/gst-plugin), model=KNOT,
                threads, beam-size, text-lines=true (what a filesink would
                write; here a fakesink hands the buffers over); READY between
                files keeps the model loaded, and READY -> PAUSED opens a
                fresh stream for every file.

Usage (eval.py runs it; by hand for a check):
  gstasr.py pocketsphinx OUT.jsonl FILE.wav...
  GST_PLUGIN_PATH=build/gst-plugin gstasr.py whisperknot --model M.knot OUT.jsonl FILE.wav...

With --loss P the audio instead comes from an appsrc in packets of
--packet-ms (S16LE, 16 kHz, mono: the files must be), each lost with
probability P (a generator seeded with --loss-seed and the file's number, so
every engine and build loses the same packets), as an RTP stream with lost
packets reaches a decoder: --loss-as gap sends a GAP event for each lost
packet (rtpjitterbuffer do-lost=true and a depayloader), --loss-as hole skips
it and flags the next buffer DISCONT (its timestamp shows the hole).

Writes one JSON line per file to OUT.jsonl as it goes: {"i", "wav", "text",
"seconds", "error"}; the first line is {"startup": seconds}. Requires python3-gi
and gir1.2-gstreamer-1.0 (Debian packages).
"""
import argparse
import json
import sys
import time

import gi

gi.require_version("Gst", "1.0")
from gi.repository import Gst  # noqa: E402

HEAD = "filesrc name=src ! wavparse ! audioconvert ! audioresample ! "
LOSSY_HEAD = ("appsrc name=src format=time caps=audio/x-raw,format=S16LE,"
              "rate=16000,channels=1,layout=interleaved ! audioconvert ! ")


class LossySource:
    """Plays a 16 kHz mono WAV file into an appsrc in packets, some lost."""

    def __init__(self, args):
        self.args = args

    def play(self, src, wav, index):
        import numpy as np
        import soundfile as sf
        x, sr = sf.read(wav, dtype="int16")
        if sr != 16000 or x.ndim != 1:
            raise ValueError("%s: --loss needs 16 kHz mono audio" % wav)
        rng = np.random.default_rng([self.args.loss_seed, index])
        pkt = 16 * self.args.packet_ms
        discont = True
        for i in range(0, len(x), pkt):
            k = min(pkt, len(x) - i)
            ts, dur = i * Gst.SECOND // 16000, k * Gst.SECOND // 16000
            if i > 0 and rng.random() < self.args.loss:
                if self.args.loss_as == "gap":
                    src.send_event(Gst.Event.new_gap(ts, dur))
                else:
                    discont = True
                continue
            buf = Gst.Buffer.new_wrapped(x[i:i + k].tobytes())
            buf.pts, buf.duration = ts, dur
            if discont:
                buf.set_flags(Gst.BufferFlags.DISCONT)
                discont = False
            if src.emit("push-buffer", buf) != Gst.FlowReturn.OK:
                break
        src.emit("end-of-stream")


def _wait(pipe, on_element, timeout_s, feed=None):
    """Runs pipe to EOS (feed(), if given, pushes the input once the
    pipeline plays); on_element(structure) for each element message.
    Returns None or an error string."""
    bus = pipe.get_bus()
    if pipe.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
        return "cannot start the pipeline"
    if feed is not None:
        feed()
    deadline = time.time() + timeout_s
    types = Gst.MessageType.ELEMENT | Gst.MessageType.EOS | Gst.MessageType.ERROR
    while True:
        left = deadline - time.time()
        if left <= 0:
            return "timed out after %d s" % timeout_s
        m = bus.timed_pop_filtered(int(left * Gst.SECOND), types)
        if m is None:
            continue
        if m.type == Gst.MessageType.EOS:
            return None
        if m.type == Gst.MessageType.ERROR:
            err, dbg = m.parse_error()
            return "%s (%s)" % (err.message, dbg)
        s = m.get_structure()
        if s is not None:
            on_element(s)


def _feeder(lossy, src, wav, index):
    """The input of one file: filesrc's location, or an appsrc's feed."""
    if lossy is None:
        src.set_property("location", wav)
        return None
    return lambda: lossy.play(src, wav, index)


class PocketSphinx:
    def __init__(self, args):
        self.lossy = LossySource(args) if args.loss else None
        self.pipe = Gst.parse_launch((LOSSY_HEAD if self.lossy else HEAD) +
                                     "pocketsphinx name=asr ! fakesink")
        self.src = self.pipe.get_by_name("src")

    def run(self, wav, timeout_s, index=0):
        finals = []

        def on_element(s):
            if s.get_name() == "pocketsphinx" and s.get_value("final"):
                finals.append(s.get_value("hypothesis") or "")

        err = _wait(self.pipe, on_element, timeout_s,
                    _feeder(self.lossy, self.src, wav, index))
        self.pipe.set_state(Gst.State.NULL)  # a fresh decoder for the next file
        return " ".join(" ".join(finals).split()), err


class WhisperKnot:
    def __init__(self, args):
        self.lossy = LossySource(args) if args.loss else None
        self.pipe = Gst.parse_launch(
            (LOSSY_HEAD if self.lossy else HEAD) +
            "whisperknot name=asr text-lines=true ! "
            "fakesink name=sink signal-handoffs=true sync=false")
        asr = self.pipe.get_by_name("asr")
        if args.model:
            asr.set_property("model", args.model)
        asr.set_property("threads", args.threads)
        asr.set_property("beam-size", args.beam_size)
        self.src = self.pipe.get_by_name("src")
        self.chunks = []
        self.pipe.get_by_name("sink").connect("handoff", self._handoff)

    def _handoff(self, sink, buf, pad):
        self.chunks.append(buf.extract_dup(0, buf.get_size()))

    def run(self, wav, timeout_s, index=0):
        self.chunks = []
        err = _wait(self.pipe, lambda s: None, timeout_s,
                    _feeder(self.lossy, self.src, wav, index))
        self.pipe.set_state(Gst.State.READY)  # the model stays loaded
        text = b"".join(self.chunks).decode("utf-8", errors="replace")
        return " ".join(text.split()), err

    def close(self):
        self.pipe.set_state(Gst.State.NULL)


ENGINES = {"pocketsphinx": PocketSphinx, "whisperknot": WhisperKnot}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("engine", choices=sorted(ENGINES))
    ap.add_argument("out", help="JSON lines, one per file")
    ap.add_argument("wavs", nargs="+")
    ap.add_argument("--index", type=int, nargs="*",
                    help="the files' numbers in the caller's list (default 0..)")
    ap.add_argument("--model", help="whisperknot: the knot")
    ap.add_argument("--threads", type=int, default=1, help="whisperknot: threads (default 1)")
    ap.add_argument("--beam-size", type=int, default=0,
                    help="whisperknot: beam width (default 0: the engine's choice)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per file at most")
    ap.add_argument("--loss", type=float, default=0.0,
                    help="lose each packet with this probability (appsrc input)")
    ap.add_argument("--loss-as", choices=("gap", "hole"), default="gap",
                    help="a lost packet: a GAP event, or a timestamp hole and DISCONT")
    ap.add_argument("--loss-seed", type=int, default=1, help="the losses' seed")
    ap.add_argument("--packet-ms", type=int, default=20, help="packet length, ms")
    args = ap.parse_args()
    index = args.index if args.index else list(range(len(args.wavs)))
    if len(index) != len(args.wavs):
        sys.exit("gstasr.py: --index must give one number per file")

    t0 = time.time()
    Gst.init(None)
    name = "pocketsphinx" if args.engine == "pocketsphinx" else "whisperknot"
    if Gst.ElementFactory.find(name) is None:
        sys.exit("gstasr.py: no GStreamer element %s (%s)" % (
            name, "apt-get install gstreamer1.0-pocketsphinx pocketsphinx-en-us"
            if name == "pocketsphinx" else "set GST_PLUGIN_PATH=<build>/gst-plugin"))
    eng = ENGINES[args.engine](args)
    with open(args.out, "w") as f:
        f.write(json.dumps({"startup": time.time() - t0}) + "\n")
        f.flush()
        for i, wav in zip(index, args.wavs):
            t1 = time.time()
            text, err = eng.run(wav, args.timeout, i)
            f.write(json.dumps({"i": i, "wav": wav, "text": text,
                                "seconds": time.time() - t1, "error": err}) + "\n")
            f.flush()
    if hasattr(eng, "close"):
        eng.close()


if __name__ == "__main__":
    main()
