#!/usr/bin/python3
"""Real human speech for training and evaluating the default model.

Sources (see ../../../shared/data/speech/README.md and knots/train/README.md):
  lj        LJ Speech 1.1 clips LJ001-LJ005 (one US woman reading non-fiction;
            public domain), Ogg Opus, the corpus's own transcription (second
            field of metadata.csv: numbers as the books print them)
  fsdd      Free Spoken Digit Dataset (6 speakers, isolated digits; CC BY-SA 4.0)
  asterisk  Debian's asterisk-core-sounds-en(-g722): one woman's telephone
            prompts, 16 kHz G.722, transcripts in core-sounds-en.txt.gz
            (CC BY-SA 3.0)

Split (fixed here, never tuned): nothing of a dev or test item is trained on.
  lj        LJ005-* dev (the README's suggestion), the rest train
  fsdd      speaker theo dev, speaker yweweler test, the other four train
  asterisk  md5(prompt name) % 8 == 0 dev, == 1 test, the rest train

Commands:
  real.py build     training shards -> knots/work/data/real/shard-<source>.npz
  real.py sets      evaluation sets -> knots/work/eval/<set>.npz
                    (dev-real-lj, dev-real-fsdd, dev-real-asterisk,
                    test-real-fsdd, test-real-asterisk, test-jfk)
"""
import argparse
import gzip
import hashlib
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import synth  # noqa: E402  (WORK, write_shard)

SR = 16000
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARED = os.environ.get("WK_SHARED_DATA", os.path.join(os.path.dirname(ROOT), "shared", "data"))
SPEECH = os.path.join(SHARED, "speech")
ASTERISK_DIR = "/usr/share/asterisk/sounds/en"
ASTERISK_TXT = "/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz"
REAL_DIR = os.path.join(synth.WORK, "data", "real")
JFK_TEXT = ("And so, my fellow Americans, ask not what your country can do for you, "
            "ask what you can do for your country.")
SETS = ("dev-real-lj", "dev-real-fsdd", "dev-real-asterisk", "test-real-fsdd",
        "test-real-asterisk", "test-jfk")
DIGITS = "Zero One Two Three Four Five Six Seven Eight Nine".split()


def _h(s):
    return int(hashlib.md5(s.encode("utf-8")).hexdigest()[:8], 16)


def resample(x, sr):
    """x (float) at sr Hz -> 16 kHz, by FFT (band-limited; clips are short)."""
    if sr == SR:
        return x
    n = int(round(len(x) * SR / sr))
    X = np.fft.rfft(x)
    Y = np.zeros(n // 2 + 1, dtype=complex)
    k = min(len(X), len(Y))
    Y[:k] = X[:k]
    return np.fft.irfft(Y, n) * (n / len(x))


def load_audio(path):
    """float32 mono 16 kHz samples of a clip (Opus via libsndfile, G.722 via ffmpeg)."""
    if path.endswith(".g722"):
        r = subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "g722", "-i", path,
                            "-ar", str(SR), "-ac", "1", "-f", "s16le", "-"],
                           capture_output=True, check=True)
        return np.frombuffer(r.stdout, dtype="<i2").astype(np.float32) / 32768.0
    import soundfile
    x, sr = soundfile.read(path, dtype="float32", always_2d=True)
    return resample(x.mean(axis=1), sr).astype(np.float32)


def to_int16(x, peak=0.9):
    """Peak-normalized int16 (as synth.py's utterances are)."""
    m = float(np.max(np.abs(x))) if len(x) else 0.0
    if m > 0:
        x = x * (peak / m)
    return np.clip(np.round(x * 32767), -32768, 32767).astype(np.int16)


def lj_items():
    d = os.path.join(SPEECH, "ljspeech")
    out = []
    with open(os.path.join(d, "metadata.csv"), encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("|")
            if len(parts) < 2 or not os.path.exists(os.path.join(d, parts[0] + ".opus")):
                continue
            split = "dev" if parts[0].startswith("LJ005-") else "train"
            out.append((split, os.path.join(d, parts[0] + ".opus"), parts[1].strip(),
                        "real:lj"))
    return out


def fsdd_items():
    d = os.path.join(SPEECH, "fsdd")
    split_of = {"theo": "dev", "yweweler": "test"}
    out = []
    with open(os.path.join(d, "transcripts.txt"), encoding="utf-8") as f:
        for line in f:
            name, digit, _, spk = line.rstrip("\n").split("|")
            out.append((split_of.get(spk, "train"), os.path.join(d, name + ".opus"),
                        DIGITS[int(digit)] + ".", "real:fsdd-" + spk))
    return out


def asterisk_text(t):
    """A prompt's transcript as the model should write it, or None to skip it."""
    t = re.sub(r"\[[^\]]*\]", " ", t)  # [tone], [pause] annotations
    t = t.replace("...", " ").replace("\u2019", "'")
    t = " ".join(t.split())
    if not re.search(r"[A-Za-z0-9]", t):
        return None
    if t[0].islower():
        t = t[0].upper() + t[1:]
    if t[-1] not in ".!?":
        t += "."
    return t


def asterisk_items():
    if not os.path.exists(ASTERISK_TXT):
        return []
    out = []
    with gzip.open(ASTERISK_TXT, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_/-]+):\s*(.*)$", line.strip())
            if not m:
                continue
            key, text = m.group(1), asterisk_text(m.group(2))
            path = os.path.join(ASTERISK_DIR, key + ".g722")
            if text is None or not os.path.exists(path):
                continue
            h = _h(key) % 8
            split = "dev" if h == 0 else "test" if h == 1 else "train"
            out.append((split, path, text, "real:asterisk"))
    return out


SOURCES = {"lj": lj_items, "fsdd": fsdd_items, "asterisk": asterisk_items}


def build(args):
    os.makedirs(REAL_DIR, exist_ok=True)
    for src, items in SOURCES.items():
        train = [it for it in items() if it[0] == "train"]
        if not train:
            print("%s: none found" % src)
            continue
        audios, texts, voices = [], [], []
        for _, path, text, voice in train:
            x = load_audio(path)
            if len(x) < 0.2 * SR or len(x) > 28 * SR:
                continue
            audios.append(to_int16(x))
            texts.append(text)
            voices.append(voice)
        p = os.path.join(REAL_DIR, "shard-%s.npz" % src)
        synth.write_shard(p, audios, texts, voices)
        print("%s: %d training clips, %.2f h -> %s" % (
            src, len(audios), sum(len(a) for a in audios) / SR / 3600, p), flush=True)


def set_items(name):
    """[(path, text, voice)] of an evaluation set, in a fixed order."""
    if name == "test-jfk":
        return [(os.path.join(SHARED, "jfk.wav"), JFK_TEXT, "real:jfk")]
    split, src = name.split("-real-")
    items = [it for it in SOURCES[src]() if it[0] == split]
    items.sort(key=lambda it: _h(it[1]))  # a stable mix of digits/prompts
    return [it[1:] for it in items]


def load_wav(path):
    import wave
    with wave.open(path, "rb") as w:
        assert w.getframerate() == SR and w.getnchannels() == 1 and w.getsampwidth() == 2
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").copy()


def make_set(name, path):
    audios, texts, voices = [], [], []
    for p, text, voice in set_items(name):
        a = load_wav(p) if p.endswith(".wav") else \
            np.clip(np.round(load_audio(p) * 32767), -32768, 32767).astype(np.int16)
        audios.append(a)
        texts.append(text)
        voices.append(voice)
    synth.write_shard(path, audios, texts, voices)
    return len(audios)


def sets(args):
    d = os.path.join(synth.WORK, "eval")
    os.makedirs(d, exist_ok=True)
    for name in SETS:
        n = make_set(name, os.path.join(d, name + ".npz"))
        print("%s: %d utterances" % (name, n), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("cmd", choices=["build", "sets"])
    args = ap.parse_args()
    build(args) if args.cmd == "build" else sets(args)


if __name__ == "__main__":
    main()
