#!/usr/bin/python3
"""Carry the real training speech to a lent GPU machine in few bytes.

  speechpack.py pack OUT.tar [--kbps 12] [--sources lj,fsdd,asterisk]
  speechpack.py unpack IN.tar OUT_DIR
  speechpack.py check IN.tar            decode again here, report the log-mel change

`pack` reads the training shards `real.py build` writes (knots/work/data/real/
shard-<source>.npz: 16 kHz int16, the training split only: nothing of a dev or
test item), encodes every utterance with libopus (16 kHz mono, VBR at --kbps,
20 ms frames, complexity 10, signal=voice) through ctypes, and writes OUT.tar
holding speech.npz (per source: the Opus packets, their lengths, frames and
samples per utterance, texts, voices) and the libopus.so.0 it used. `unpack`
decodes with that library (the machine needs nothing but Python and numpy) into
OUT_DIR/shard-<source>.npz, in real.py's shard format (audio, offsets, text,
voice), with the word ends of wordtimes.py (shard-<source>.words.npz, for
train.py --p-cut-text) where the packed shard had them: decoding keeps every
utterance's length, so their sample positions hold. The sources already went
through a lossy codec (Opus 24-32 kbit/s,
G.722); one more pass at 12 kbit/s changes the log-mel the model sees by 0.066 on
average (normalised units, 2026-12-01, 15 LJ clips), about what white noise at 30 dB
SNR does (0.070); 8 kbit/s (narrowband) 0.19, 16 kbit/s 0.055. `check` measures it.

libopus is BSD-3-clause (Xiph.Org); the speech keeps its own licences
(../../../shared/data/speech/README.md, asterisk-core-sounds-en: CC BY-SA 3.0).
"""
import argparse
import ctypes
import ctypes.util
import io
import os
import sys
import tarfile
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
KNOTS = os.path.dirname(HERE)
WORK = os.environ.get("WK_TRAIN_WORK", os.path.join(KNOTS, "work"))
REAL_DIR = os.path.join(WORK, "data", "real")
SR = 16000
FRAME = 320  # 20 ms
# opus_defines.h
APPLICATION_VOIP = 2048
SET_BITRATE, SET_VBR, SET_COMPLEXITY, SET_SIGNAL = 4002, 4006, 4010, 4024
GET_LOOKAHEAD, RESET_STATE = 4027, 4028
SIGNAL_VOICE = 3001


def find_libopus(path=None):
    for p in ([path] if path else []) + ["libopus.so.0", ctypes.util.find_library("opus")]:
        if not p:
            continue
        try:
            lib = ctypes.CDLL(p)
        except OSError:
            continue
        lib.opus_encoder_create.restype = ctypes.c_void_p
        lib.opus_decoder_create.restype = ctypes.c_void_p
        lib.opus_encode.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                    ctypes.c_void_p, ctypes.c_int32]
        lib.opus_decode.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32,
                                    ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        lib.opus_encoder_destroy.argtypes = [ctypes.c_void_p]
        lib.opus_decoder_destroy.argtypes = [ctypes.c_void_p]
        return lib, p
    raise SystemExit("libopus not found (Debian: libopus0)")


def _lib_file(lib_name):
    """The file a loaded library name resolves to (to put it into the tar)."""
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if os.path.basename(p).startswith("libopus.so"):
                return p
    raise SystemExit("cannot locate %s on disk" % lib_name)


class Encoder:
    def __init__(self, lib, kbps):
        err = ctypes.c_int()
        self.lib = lib
        self.enc = lib.opus_encoder_create(SR, 1, APPLICATION_VOIP, ctypes.byref(err))
        if err.value != 0 or not self.enc:
            raise RuntimeError("opus_encoder_create: %d" % err.value)
        for req, val in ((SET_BITRATE, int(kbps * 1000)), (SET_VBR, 1), (SET_COMPLEXITY, 10),
                         (SET_SIGNAL, SIGNAL_VOICE)):
            if lib.opus_encoder_ctl(ctypes.c_void_p(self.enc), ctypes.c_int(req),
                                    ctypes.c_int(val)) != 0:
                raise RuntimeError("opus_encoder_ctl %d" % req)
        la = ctypes.c_int()
        lib.opus_encoder_ctl(ctypes.c_void_p(self.enc), ctypes.c_int(GET_LOOKAHEAD),
                             ctypes.byref(la))
        self.lookahead = la.value
        self.buf = ctypes.create_string_buffer(1500)

    def encode(self, x):
        """int16 samples -> list of packets (bytes); the decoder drops `lookahead`."""
        self.lib.opus_encoder_ctl(ctypes.c_void_p(self.enc), ctypes.c_int(RESET_STATE))
        n = len(x) + self.lookahead
        pad = np.zeros((n + FRAME - 1) // FRAME * FRAME, dtype=np.int16)
        pad[:len(x)] = x
        out = []
        for i in range(0, len(pad), FRAME):
            fr = np.ascontiguousarray(pad[i:i + FRAME])
            r = self.lib.opus_encode(ctypes.c_void_p(self.enc), fr.ctypes.data, FRAME, self.buf,
                                     len(self.buf))
            if r < 0:
                raise RuntimeError("opus_encode: %d" % r)
            out.append(self.buf.raw[:r])
        return out

    def close(self):
        self.lib.opus_encoder_destroy(self.enc)


class Decoder:
    def __init__(self, lib):
        err = ctypes.c_int()
        self.lib = lib
        self.dec = lib.opus_decoder_create(SR, 1, ctypes.byref(err))
        if err.value != 0 or not self.dec:
            raise RuntimeError("opus_decoder_create: %d" % err.value)
        self.pcm = np.zeros(FRAME * 6, dtype=np.int16)

    def decode(self, packets, n_samples, lookahead):
        self.lib.opus_decoder_ctl(ctypes.c_void_p(self.dec), ctypes.c_int(RESET_STATE))
        out = np.empty(len(packets) * FRAME, dtype=np.int16)
        pos = 0
        for p in packets:
            r = self.lib.opus_decode(ctypes.c_void_p(self.dec), p, len(p), self.pcm.ctypes.data,
                                     len(self.pcm), 0)
            if r < 0:
                raise RuntimeError("opus_decode: %d" % r)
            out[pos:pos + r] = self.pcm[:r]
            pos += r
        return out[lookahead:lookahead + n_samples]

    def close(self):
        self.lib.opus_decoder_destroy(self.dec)


def words_path(p):
    """wordtimes.py's word ends beside shard p (train.words_path; unpack needs numpy only)."""
    return p[:-len(".npz")] + ".words.npz"


def load_shard(p):
    with np.load(p) as z:
        return z["audio"], z["offsets"], [str(t) for t in z["text"]], [str(v) for v in z["voice"]]


def write_shard(path, audios, texts, voices):
    """real.py's / synth.py's shard format."""
    offsets = np.zeros(len(audios) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(a) for a in audios])
    tmp = os.path.join(os.path.dirname(path), ".tmp-" + os.path.basename(path))
    np.savez(tmp, audio=np.concatenate(audios).astype(np.int16), offsets=offsets,
             text=np.array(texts), voice=np.array(voices))
    os.replace(tmp if tmp.endswith(".npz") else tmp + ".npz", path)


def pack(args):
    lib, name = find_libopus(args.libopus)
    enc = Encoder(lib, args.kbps)
    arrays = {"lookahead": np.array(enc.lookahead), "kbps": np.array(args.kbps)}
    sources = []
    t0 = time.time()
    for src in args.sources.split(","):
        p = os.path.join(args.real_dir, "shard-%s.npz" % src)
        if not os.path.exists(p):
            print("%s: no %s (real.py build)" % (src, p))
            continue
        audio, off, texts, voices = load_shard(p)
        pk, n_pk, n_smp = [], [], []
        for i in range(len(texts)):
            x = audio[off[i]:off[i + 1]]
            ps = enc.encode(x)
            pk += ps
            n_pk.append(len(ps))
            n_smp.append(len(x))
        lens = np.array([len(q) for q in pk])
        arrays[src + ".packets"] = np.frombuffer(b"".join(pk), dtype=np.uint8)
        arrays[src + ".lens"] = lens.astype(np.uint8 if lens.max() < 256 else np.uint16)
        arrays[src + ".n_packets"] = np.array(n_pk, dtype=np.int32)
        arrays[src + ".n_samples"] = np.array(n_smp, dtype=np.int64)
        arrays[src + ".text"] = np.array(texts)
        arrays[src + ".voice"] = np.array(voices)
        if os.path.exists(words_path(p)):
            with np.load(words_path(p)) as w:
                if len(w["woff"]) == len(texts) + 1:
                    arrays[src + ".woff"], arrays[src + ".wend"] = w["woff"], w["wend"]
        sources.append(src)
        print("%s: %d utterances, %.2f h -> %.2f MB of Opus (%.1f kbit/s with lengths)%s, %.0f s"
              % (src, len(texts), len(audio) / SR / 3600, (lens.sum() + lens.size) / 1e6,
                 (lens.sum() + lens.size) * 8 / (len(audio) / SR) / 1000,
                 ", word ends" if src + ".woff" in arrays else "", time.time() - t0),
              flush=True)
    enc.close()
    arrays["sources"] = np.array(sources)
    bio = io.BytesIO()
    np.savez_compressed(bio, **arrays)
    with tarfile.open(args.out, "w") as tar:
        ti = tarfile.TarInfo("speech.npz")
        ti.size = bio.tell()
        bio.seek(0)
        tar.addfile(ti, bio)
        tar.add(_lib_file(name), arcname="libopus.so.0")
    print("wrote %s (%d bytes)" % (args.out, os.path.getsize(args.out)))


def _open(tar_path, tmp):
    with tarfile.open(tar_path) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tmp, filter="data")
        else:
            tar.extractall(tmp)
    lib, _ = find_libopus(os.path.join(tmp, "libopus.so.0"))
    return lib, np.load(os.path.join(tmp, "speech.npz"))


def _utterances(z, src):
    pk, lens = z[src + ".packets"].tobytes(), z[src + ".lens"].astype(np.int64)
    ends = np.cumsum(lens)
    starts = ends - lens
    k = 0
    for n_p, n_s in zip(z[src + ".n_packets"], z[src + ".n_samples"]):
        yield [pk[starts[j]:ends[j]] for j in range(k, k + n_p)], int(n_s)
        k += n_p


def unpack(args):
    t0 = time.time()
    os.makedirs(args.out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        lib, z = _open(args.tar, tmp)
        dec = Decoder(lib)
        la = int(z["lookahead"])
        for src in [str(s) for s in z["sources"]]:
            audios = [dec.decode(p, n, la) for p, n in _utterances(z, src)]
            out = os.path.join(args.out_dir, "shard-%s.npz" % src)
            write_shard(out, audios, [str(t) for t in z[src + ".text"]],
                        [str(v) for v in z[src + ".voice"]])
            if src + ".woff" in z.files:
                np.savez(words_path(out), woff=z[src + ".woff"], wend=z[src + ".wend"])
            print("%s: %d utterances, %.2f h -> %s (%.0f s)" % (
                src, len(audios), sum(len(a) for a in audios) / SR / 3600, out,
                time.time() - t0), flush=True)
        dec.close()


def check(args):
    """Log-mel change (Whisper's normalised units) of the round trip, per source."""
    sys.path.insert(0, KNOTS)
    import torch
    from whisper_ref import audio as wa
    with tempfile.TemporaryDirectory() as tmp:
        lib, z = _open(args.tar, tmp)
        dec = Decoder(lib)
        la = int(z["lookahead"])
        print("%s: %s kbit/s" % (args.tar, z["kbps"]))
        for src in [str(s) for s in z["sources"]]:
            audio, off, _, _ = load_shard(os.path.join(args.real_dir, "shard-%s.npz" % src))
            diffs = []
            for i, (p, n) in enumerate(_utterances(z, src)):
                if i % max(1, len(off) // args.n) or len(diffs) >= args.n:
                    continue
                a = audio[off[i]:off[i + 1]].astype(np.float32) / 32768
                b = dec.decode(p, n, la).astype(np.float32) / 32768
                ma = wa.log_mel_spectrogram(torch.from_numpy(a))
                mb = wa.log_mel_spectrogram(torch.from_numpy(b))
                diffs.append(float((ma - mb).abs().mean()))
            print("  %-9s mean |log-mel change| %.4f over %d utterances (normalised units: "
                  "the model's input spans about 2)" % (src, np.mean(diffs), len(diffs)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("out")
    p.add_argument("--kbps", type=float, default=12)
    p.add_argument("--sources", default="lj,fsdd,asterisk")
    p.add_argument("--real-dir", default=REAL_DIR)
    p.add_argument("--libopus", default=None)
    p = sub.add_parser("unpack")
    p.add_argument("tar")
    p.add_argument("out_dir")
    p = sub.add_parser("check")
    p.add_argument("tar")
    p.add_argument("--real-dir", default=REAL_DIR)
    p.add_argument("--n", type=int, default=20)
    args = ap.parse_args()
    {"pack": pack, "unpack": unpack, "check": check}[args.cmd](args)


if __name__ == "__main__":
    main()
