#!/usr/bin/env python3
"""Malformed inputs for whisperknot's programs (issue 14), case by case.

Every case says which program reads it (whisperknot-transcribe,
whisperknot-convert, or wk-hostile-gst for the element), how it is called,
and what counts as correct: a clear error (non-zero exit, a message that
names the problem) or well-defined output. run.py runs them; this module
only writes the files, so it can also be used by hand:

    gen.py --list                 the cases, one per line
    gen.py OUTDIR [NAME...]       write the cases' files into OUTDIR

Classes: knot (the model file: magic, truncation at every section
boundary, counts, offsets, shapes, types, hyper-parameters, NaN/Inf,
vocabulary), vad (the Silero VAD knot through whisperknot-transcribe
--vad, the shipped one damaged in the same ways, and Silero's ggml file
through the converter and, refused, the transcriber), path (FIFO, directory, device, a file that shrinks while
mapped), ggml (.bin input of the converter), safetensors (Hugging Face
checkpoint directories), torch-pt (OpenAI's .pt checkpoints), wav (the transcriber's input) and element (caps,
appsrc buffers, models through the element). Bases: a small random-weight
knot and .bin made with the build's wk-make-test-model and converter
(ctx.small_knot, ctx.small_bin), the default model, and jfk.wav.

Python 3 standard library only.
"""

import json
import math
import os
import re
import struct
import sys
import wave

# ---- expectations -----------------------------------------------------------

# "error": non-zero exit (no signal) and stderr matching `want`
# "text":  exit 0 and some text out (just exit 0 with an untrained model)
# "ok":    exit 0, any output, even none
# "error-or-text", "error-or-ok": either of the two
EXPECTS = ("error", "text", "ok", "error-or-text", "error-or-ok")


class Case:
    """One input. make(dir) writes the files and returns the argv, whose
    first item is a program key (transcribe, convert, gst) that run.py
    maps to a path."""

    def __init__(self, cls, name, make, expect, want=None, xfail=None,
                 stdin=None, during=None, no_output=None, check=None,
                 timeout=None, xfail_under=None, env=None, racy=False):
        assert expect in EXPECTS
        self.cls = cls
        self.name = cls + "/" + name
        self.make = make
        self.expect = expect
        self.want = want        # regex the error message must match
        self.xfail = xfail      # why it fails today (an issue item)
        # {b_sanitize value: why} where only that build fails
        self.xfail_under = xfail_under or {}
        # the xfail is a race the run may or may not hit: a run that misses
        # it and passes is a plain pass, not a sign the fix landed
        self.racy = racy
        self.stdin = stdin      # file name in the case dir to feed on stdin
        self.during = during    # callable(proc, dir) while it runs
        self.no_output = no_output  # file that must not exist after an error
        self.check = check      # callable(dir) -> argv that must then work
        self.timeout = timeout  # seconds, before run.py's sanitizer scale
        # extra environment; "{dir}" in a value stands for the case folder
        self.env = env or {}


# ---- little-endian helpers ---------------------------------------------------

def u32(v):
    return struct.pack("<I", v & 0xFFFFFFFF)


def u64(v):
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF)


def rd32(b, o):
    return struct.unpack_from("<I", b, o)[0]


def rd64(b, o):
    return struct.unpack_from("<Q", b, o)[0]


def patch(b, off, new):
    b = bytearray(b)
    b[off:off + len(new)] = new
    return bytes(b)


def f16_bits(x):
    return struct.unpack("<H", struct.pack("<e", x))[0]


# ---- knots (GGUF v3) -------------------------------------------------------

GGUF_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8,
               12: 8}
T_STR, T_ARR, T_U32, T_F32 = 8, 9, 4, 6
TYPE_F32, TYPE_F16, TYPE_Q4_0, TYPE_Q8_0 = 0, 1, 2, 8
BLOCK = {TYPE_F32: (1, 4), TYPE_F16: (1, 2), TYPE_Q4_0: (32, 18),
         TYPE_Q8_0: (32, 34)}


def tensor_nbytes(ttype, ne):
    blk, size = BLOCK[ttype]
    n = size * (ne[0] // blk)
    for d in ne[1:]:
        n *= d
    return n


def align_up(x, a):
    return (x + a - 1) // a * a


class Knot:
    """A parsed knot: the metadata values as raw bytes (after the type),
    the tensors with their data, and where each part started in the file,
    so that cases can either patch bytes in place or rebuild the file."""

    def __init__(self, data):
        b = data
        self.data = data
        assert b[:4] == b"GGUF" and rd32(b, 4) == 3
        n_t, n_kv = rd64(b, 8), rd64(b, 16)
        o = 24
        self.kvs = []           # [key, vtype, raw, start, key_end, val_start]
        for _ in range(n_kv):
            start = o
            klen = rd64(b, o)
            key = b[o + 8:o + 8 + klen].decode()
            o += 8 + klen
            key_end = o
            vt = rd32(b, o)
            o += 4
            vs = o
            o = self._skip(b, o, vt)
            self.kvs.append([key, vt, b[vs:o], start, key_end, vs])
        self.infos_start = o
        self.tensors = []       # dicts: name ne type offset start fields
        for _ in range(n_t):
            t = {"start": o}
            nlen = rd64(b, o)
            t["name"] = b[o + 8:o + 8 + nlen].decode()
            o += 8 + nlen
            t["ndims_at"] = o
            nd = rd32(b, o)
            o += 4
            t["ne_at"] = o
            t["ne"] = [rd64(b, o + 8 * i) for i in range(nd)]
            o += 8 * nd
            t["type_at"] = o
            t["type"] = rd32(b, o)
            o += 4
            t["offset_at"] = o
            t["offset"] = rd64(b, o)
            o += 8
            self.tensors.append(t)
        self.infos_end = o
        self.alignment = 32
        for kv in self.kvs:
            if kv[0] == "general.alignment":
                self.alignment = struct.unpack("<I", kv[2])[0]
        self.data_start = align_up(o, self.alignment)
        for t in self.tensors:
            t["data_at"] = self.data_start + t["offset"]
            n = tensor_nbytes(t["type"], t["ne"])
            t["data"] = b[t["data_at"]:t["data_at"] + n]

    @staticmethod
    def _skip(b, o, vt):
        if vt in GGUF_SCALAR:
            return o + GGUF_SCALAR[vt]
        if vt == T_STR:
            return o + 8 + rd64(b, o)
        assert vt == T_ARR
        et, n = rd32(b, o), rd64(b, o + 4)
        o += 12
        if et in GGUF_SCALAR:
            return o + n * GGUF_SCALAR[et]
        for _ in range(n):
            o += 8 + rd64(b, o)
        return o

    def kv(self, key):
        for kv in self.kvs:
            if kv[0] == key:
                return kv
        raise KeyError(key)

    def tensor(self, name):
        for t in self.tensors:
            if t["name"] == name:
                return t
        raise KeyError(name)

    def hp(self, key):
        return struct.unpack("<I", self.kv("whisper." + key)[2])[0]

    def model(self):
        """An editable copy: kvs as {key: (vtype, raw)} in order, tensors as
        a list of [name, ne, type, data]."""
        return Model([(k[0], k[1], k[2]) for k in self.kvs],
                     [[t["name"], list(t["ne"]), t["type"], t["data"]]
                      for t in self.tensors], self.alignment)


class Model:
    def __init__(self, kvs, tensors, alignment):
        self.kvs = list(kvs)
        self.tensors = tensors
        self.alignment = alignment

    def set_kv(self, key, vtype, raw):
        for i, kv in enumerate(self.kvs):
            if kv[0] == key:
                self.kvs[i] = (key, vtype, raw)
                return self
        self.kvs.append((key, vtype, raw))
        return self

    def del_kv(self, key):
        self.kvs = [kv for kv in self.kvs if kv[0] != key]
        return self

    def set_u32(self, key, v):
        return self.set_kv(key, T_U32, u32(v))

    def set_str(self, key, s):
        s = s.encode() if isinstance(s, str) else s
        return self.set_kv(key, T_STR, u64(len(s)) + s)

    def t(self, name):
        for t in self.tensors:
            if t[0] == name:
                return t
        raise KeyError(name)

    def drop(self, name):
        self.tensors = [t for t in self.tensors if t[0] != name]
        return self

    def reshape(self, name, ne, ttype=None):
        """New shape (and type) with zero data of the right size."""
        t = self.t(name)
        t[1] = list(ne)
        if ttype is not None:
            t[2] = ttype
        t[3] = bytes(tensor_nbytes(t[2], t[1]))
        return self

    def bytes(self):
        a = self.alignment
        out = bytearray(b"GGUF" + u32(3) + u64(len(self.tensors)) +
                        u64(len(self.kvs)))
        for key, vt, raw in self.kvs:
            k = key.encode()
            out += u64(len(k)) + k + u32(vt) + raw
        off = 0
        offs = []
        for name, ne, ttype, data in self.tensors:
            n = name.encode()
            out += u64(len(n)) + n + u32(len(ne))
            for d in ne:
                out += u64(d)
            out += u32(ttype) + u64(off)
            offs.append(off)
            off = align_up(off + len(data), a)
        out += bytes(align_up(len(out), a) - len(out))
        start = len(out)
        for (name, ne, ttype, data), o in zip(self.tensors, offs):
            out += bytes(start + o - len(out))
            out += data
        return bytes(out)


def f32_array(values):
    return u32(T_F32) + u64(len(values)) + struct.pack("<%df" % len(values),
                                                       *values)


def str_array(strings):
    raw = bytearray(u32(T_STR) + u64(len(strings)))
    for s in strings:
        raw += u64(len(s)) + s
    return bytes(raw)


def token_list(knot):
    raw = knot.kv("tokenizer.ggml.tokens")[2]
    n = rd64(raw, 4)
    o = 12
    out = []
    for _ in range(n):
        ln = rd64(raw, o)
        out.append(raw[o + 8:o + 8 + ln])
        o += 8 + ln
    return out


def set_floats(data, idx, value):
    """f32 data with element(s) idx set to value."""
    b = bytearray(data)
    for i in idx:
        struct.pack_into("<f", b, 4 * i, value)
    return bytes(b)


def set_block_scale(ttype, data, value, block=0):
    """The scale d of one q8_0/q4_0 block (or one element of f32/f16)."""
    b = bytearray(data)
    if ttype in (TYPE_Q8_0, TYPE_Q4_0):
        struct.pack_into("<H", b, BLOCK[ttype][1] * block, f16_bits(value))
    elif ttype == TYPE_F16:
        struct.pack_into("<H", b, 2 * block, f16_bits(value))
    else:
        struct.pack_into("<f", b, 4 * block, value)
    return bytes(b)


# ---- WAV -------------------------------------------------------------------

def chunk(tag, payload, size=None, pad=True):
    size = len(payload) if size is None else size
    out = tag + u32(size) + payload
    if pad and len(payload) % 2:
        out += b"\0"
    return out


def fmt_payload(tag=1, channels=1, rate=16000, bits=16, block_align=None,
                byte_rate=None, extra=b""):
    block_align = channels * bits // 8 if block_align is None else block_align
    block_align &= 0xFFFF
    byte_rate = (rate * block_align if byte_rate is None else byte_rate) \
        & 0xFFFFFFFF
    p = struct.pack("<HHIIHH", tag, channels, rate, byte_rate, block_align,
                    bits)
    return p + extra


def riff(chunks, riff_size=None, form=b"WAVE", magic=b"RIFF"):
    body = form + b"".join(chunks)
    return magic + u32(len(body) if riff_size is None else riff_size) + body


def wav_bytes(pcm, channels=1, rate=16000, bits=16, tag=1, data_size=None,
              before=(), after=(), fmt=None):
    f = fmt if fmt is not None else fmt_payload(tag, channels, rate, bits)
    return riff([chunk(b"fmt ", f)] + list(before) +
                [chunk(b"data", pcm, data_size)] + list(after))


def extensible(sub_guid_tag, channels=1, bits=16, valid=16, cb=22):
    guid = struct.pack("<H", sub_guid_tag) + \
        b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
    ext = struct.pack("<HHI", cb, valid, 4 if channels == 1 else 3) + guid
    return fmt_payload(0xFFFE, channels, 16000, bits, extra=ext)


def s16_to_f32(pcm):
    n = len(pcm) // 2
    v = struct.unpack("<%dh" % n, pcm)
    return struct.pack("<%df" % n, *[x / 32768.0 for x in v])


def stereo(pcm):
    n = len(pcm) // 2
    v = struct.unpack("<%dh" % n, pcm)
    out = []
    for x in v:
        out += (x, x // 2)
    return struct.pack("<%dh" % (2 * n), *out)


def s24(pcm):
    n = len(pcm) // 2
    v = struct.unpack("<%dh" % n, pcm)
    return b"".join(struct.pack("<i", x * 256)[:3] for x in v)


# ---- context -----------------------------------------------------------------

class Ctx:
    """What the cases are made from: paths and the bytes of the bases."""

    def __init__(self, small_knot, small_bin, default_model, jfk,
                 gst_ok=True):
        self.small_knot_path = small_knot
        self.small_knot = open(small_knot, "rb").read()
        self.knot = Knot(self.small_knot)
        self.small_bin = open(small_bin, "rb").read()
        self.default_model = default_model
        self.jfk = jfk
        w = wave.open(jfk, "rb")
        assert w.getframerate() == 16000 and w.getsampwidth() == 2
        pcm = w.readframes(w.getnframes())
        w.close()
        self.clip = pcm[:4 * 16000 * 2]     # "And so, my fellow Americans"
        self.gst_ok = gst_ok


def write(d, name, data):
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(data)
    return p


# the ways the readers say a file ends too soon
TRUNCATED = "truncat|past|end of file|too short|magic|size|cannot fit|empty"


# ---- knot cases ----------------------------------------------------------------

def knot_cases(ctx):
    k = ctx.knot
    b = ctx.small_knot
    cases = []
    clip_wav = wav_bytes(ctx.clip[:16000 * 2])

    def run_knot(data_fn):
        def make(d):
            model = write(d, "model.knot", data_fn())
            wav = write(d, "in.wav", clip_wav)
            return ["transcribe", "-m", model, "-t", "1", wav]
        return make

    def add(name, data_fn, expect="error", want=None, xfail=None):
        cases.append(Case("knot", name, run_knot(data_fn), expect, want,
                          xfail))

    add("control-unchanged", lambda: b, "ok")
    add("control-rebuilt", lambda: k.model().bytes(), "ok")

    # magic and version
    for tag, m in (("GGUX", b"GGUX"), ("zeros", b"\0\0\0\0"),
                   ("ggml-magic", b"lmgg"), ("text", b"knot")):
        add("magic-" + tag, lambda m=m: patch(b, 0, m), want="magic|GGUF")
    for v in (0, 2, 4, 0xFFFFFFFF):
        add("version-%d" % v, lambda v=v: patch(b, 4, u32(v)),
            want="version")
    # what whisperknot-convert reads, given as the model: named, with what
    # to do (the same weights as an OpenAI .pt, a pytorch_model.bin, a
    # model.safetensors, a pre-1.6 pickle, whisper.cpp's .bin)
    add("foreign-openai-pt", lambda: PtCheckpoint(ctx.small_bin).zip(),
        want="PyTorch checkpoint.*whisperknot-convert")
    add("foreign-pytorch-model-bin", lambda: PtCheckpoint(ctx.small_bin).zip(
        pkl=PtCheckpoint(ctx.small_bin).pickle(hf=True)),
        want="PyTorch checkpoint.*whisperknot-convert")
    add("foreign-safetensors", lambda: HfCheckpoint(ctx.small_bin)
        .safetensors(), want="safetensors file.*whisperknot-convert")
    add("foreign-legacy-pickle", lambda: PtCheckpoint(ctx.small_bin)
        .pickle(), want="before PyTorch 1.6")
    add("foreign-ggml-bin", lambda: ctx.small_bin,
        want="whisper.cpp ggml.*whisperknot-convert")

    # truncated at every section boundary: the header fields, each key/value
    # (its start, after the key length, after the key, after the type), each
    # tensor info and its fields, the data section and each tensor's data
    cuts = {0: "empty", 3: "in-magic", 4: "after-magic", 8: "after-version",
            16: "after-n-tensors", 24: "after-n-kv"}
    for kv in k.kvs:
        key, _, raw, start, key_end, vs = kv
        cuts.setdefault(start, "kv-" + key)
        cuts.setdefault(start + 8, "kv-" + key + "-after-len")
        cuts.setdefault(key_end, "kv-" + key + "-after-key")
        cuts.setdefault(vs, "kv-" + key + "-after-type")
        if len(raw) > 16:
            cuts.setdefault(vs + len(raw) // 2, "kv-" + key + "-mid-value")
    for t in k.tensors:
        cuts.setdefault(t["start"], "info-" + t["name"])
    t0 = k.tensors[0]
    for f in ("ndims_at", "ne_at", "type_at", "offset_at"):
        cuts.setdefault(t0[f], "info-" + t0["name"] + "-" + f[:-3])
    cuts.setdefault(k.infos_end, "end-of-infos")
    cuts.setdefault(k.data_start, "data-start")
    for t in k.tensors:
        cuts.setdefault(t["data_at"], "data-" + t["name"])
        cuts.setdefault(t["data_at"] + len(t["data"]) // 2,
                        "data-" + t["name"] + "-mid")
    cuts.pop(len(b), None)
    cuts[len(b) - 1] = "last-byte"
    for at in sorted(cuts):
        add("truncated-%07d-%s" % (at, cuts[at]), lambda at=at: b[:at],
            want=TRUNCATED)

    # counts
    n_t, n_kv = len(k.tensors), len(k.kvs)
    for v in (0, n_t + 1, 1 << 63, (1 << 64) - 1):
        add("n-tensors-%d" % v, lambda v=v: patch(b, 8, u64(v)),
            want="tensor|truncat|count|past")
    for v in (0, n_kv - 1, n_kv + 1, 1 << 62, (1 << 64) - 1):
        add("n-kv-%d" % v, lambda v=v: patch(b, 16, u64(v)),
            want="key|kv|truncat|count|past|metadata|missing|n_|type|"
            "tensor|dimension|cannot fit")
    first = k.kvs[0]
    for v in (0, 70000, 1 << 63, (1 << 64) - 1):
        add("key-length-%d" % v, lambda v=v: patch(b, first[3], u64(v)),
            want="key|truncat|past|length")
    for v in (13, 0xFFFFFFFF):
        add("value-type-%d" % v, lambda v=v: patch(b, first[4], u32(v)),
            want="type")
    toks = k.kv("tokenizer.ggml.tokens")
    for tag, new in (("nested", u32(T_ARR)), ("elem-type-13", u32(13)),
                     ("count-2^62", u32(T_STR) + u64(1 << 62)),
                     ("count-max", u32(T_STR) + u64((1 << 64) - 1)),
                     ("first-len-max", u32(T_STR) + u64(rd64(toks[2], 4)) +
                      u64((1 << 64) - 1))):
        add("tokens-" + tag, lambda new=new: patch(b, toks[5], new),
            want="array|type|nest|truncat|past|count|token|length")
    mel = k.kv("whisper.mel_filters")
    n_mel = rd64(mel[2], 4)
    for tag, v in (("huge", 1 << 61), ("short", n_mel - 1), ("zero", 0)):
        add("mel-count-" + tag, lambda v=v: patch(b, mel[5] + 4, u64(v)),
            want="mel|filter|truncat|past|array|count|n_mels|key|type")

    # alignment
    al = k.kv("general.alignment")
    for v in (0, 3, 1 << 31):
        add("alignment-%d" % v, lambda v=v: patch(b, al[5], u32(v)),
            want="align")
    for v in (16, 1 << 30):
        add("alignment-%d" % v, lambda v=v: patch(b, al[5], u32(v)),
            "error-or-ok", want="align|offset|past|truncat|extends")

    # tensor infos, patched in place
    def tpatch(t, field, new):
        return lambda: patch(b, t[field], new)
    one_d = k.tensor("encoder.ln_post.weight")
    two_d = k.tensor("decoder.token_embedding.weight")
    for t, tag in ((one_d, "1d"), (two_d, "2d")):
        for v in (0, 5, 0xFFFFFFFF):
            add("info-%s-n-dims-%d" % (tag, v), tpatch(t, "ndims_at", u32(v)),
                want="dim|truncat|past|n_dims|shape")
        for tag2, v in (("zero", 0), ("huge", (1 << 63) - 1),
                        ("max", (1 << 64) - 1)):
            add("info-%s-ne0-%s" % (tag, tag2), tpatch(t, "ne_at", u64(v)),
                want="ne|dimension|size|overflow|past|extends|shape|block|"
                "elements")
        for v in (3, 99, 0xFFFFFFFF):
            add("info-%s-type-%d" % (tag, v), tpatch(t, "type_at", u32(v)),
                want="type")
        for tag2, v in (("misaligned", t["offset"] + 1),
                        ("huge", (1 << 64) - 64),
                        ("past-end", align_up(len(b), 64)),
                        ("overflow", (1 << 64) - 1 - 63)):
            add("info-%s-offset-%s" % (tag, tag2),
                tpatch(t, "offset_at", u64(v)),
                want="offset|align|past|extends|end of file")
    add("info-2d-ne-overflow",
        lambda: patch(b, two_d["ne_at"], u64(1 << 32) + u64(1 << 32)),
        want="overflow|size|past|extends|ne|shape|element")
    # a tensor pointing at another's data: allowed (read-only), a model
    add("info-offset-overlap",
        tpatch(one_d, "offset_at", u64(k.tensor("encoder.ln_post.bias")
                                       ["offset"])), "ok")
    add("info-1d-type-f16", tpatch(one_d, "type_at", u32(TYPE_F16)),
        "error", want="type|f32|f16")

    # rebuilt: missing and duplicate tensors, wrong shapes and types
    d = k.hp("n_audio_state")
    nv = k.hp("n_vocab")

    def edit(fn):
        def data():
            m = k.model()
            fn(m)
            return m.bytes()
        return data

    for name in ("encoder.ln_post.weight", "decoder.token_embedding.weight",
                 "encoder.blocks.0.attn.query.weight", "encoder.conv1.weight",
                 "decoder.blocks.0.cross_attn.key.weight"):
        add("missing-" + name, edit(lambda m, n=name: m.drop(n)),
            want="missing|tensor|not found|no tensor")
    add("duplicate-tensor", edit(lambda m: m.tensors.append(
        list(m.t("encoder.ln_post.weight")))), want="duplicate|twice")
    shapes = (
        ("ln-post-half", "encoder.ln_post.weight", [d // 2], TYPE_F32),
        ("ln-post-2d", "encoder.ln_post.weight", [d, 1, 2], TYPE_F32),
        ("conv1-bias-long", "encoder.conv1.bias", [d + 32], TYPE_F32),
        ("conv1-81-mels", "encoder.conv1.weight", [3, 81, d], TYPE_F16),
        ("token-embedding-short", "decoder.token_embedding.weight",
         [d, nv - 1], TYPE_Q8_0),
        ("token-embedding-wide", "decoder.token_embedding.weight",
         [2 * d, nv], TYPE_Q8_0),
        ("audio-positions-short", "encoder.positional_embedding",
         [d, 1499], None),
        ("mlp-transposed", "encoder.blocks.0.mlp.0.weight", [4 * d, d], None),
        ("query-3d", "encoder.blocks.0.attn.query.weight", [d, d, 2], None),
    )
    for tag, name, ne, tt in shapes:
        add("shape-" + tag, edit(lambda m, n=name, ne=ne, tt=tt:
                                 m.reshape(n, ne, tt)),
            want="shape|ne|size|dimension|expected|%s" % name.split(".")[-2])
    types = (
        ("ln-post-q8_0", "encoder.ln_post.weight", [d], TYPE_Q8_0),
        ("conv1-bias-f16", "encoder.conv1.bias", [d], TYPE_F16),
        ("conv1-q8_0-unflattened", "encoder.conv1.weight", [3, 80, d],
         TYPE_Q8_0),
    )
    for tag, name, ne, tt in types:
        add("type-" + tag, edit(lambda m, n=name, ne=ne, tt=tt:
                                m.reshape(n, ne, tt)),
            want="type|f32|block|whole|shape|ne")

    # hyper-parameters
    hps = (("n_audio_state", 0), ("n_audio_state", 0xFFFFFFFF),
           ("n_audio_state", d + 32), ("n_audio_head", 0),
           ("n_audio_head", 3), ("n_audio_layer", 0),
           ("n_audio_layer", k.hp("n_audio_layer") + 1),
           ("n_text_layer", 1000), ("n_text_ctx", 0),
           ("n_text_ctx", k.hp("n_text_ctx") + 1), ("n_audio_ctx", 1501),
           ("n_audio_ctx", 750), ("n_mels", 128), ("n_mels", 0),
           ("n_vocab", 51866), ("n_vocab", 100), ("n_vocab", 0),
           ("n_text_head", 0xFFFFFFFF))
    for key, v in hps:
        add("hparam-%s-%d" % (key, v),
            edit(lambda m, key=key, v=v: m.set_u32("whisper." + key, v)),
            want="%s|shape|tensor|vocab|mel|head|layer|positional|missing|"
            "range|invalid|expected" % key)
    add("hparam-n_vocab-string", edit(lambda m: m.set_str("whisper.n_vocab",
                                                          "51864")),
        want="n_vocab")
    add("hparam-n_mels-f32", edit(lambda m: m.set_kv(
        "whisper.n_mels", T_F32, struct.pack("<f", 80.0))), want="n_mels")
    add("hparam-n_vocab-missing", edit(lambda m: m.del_kv("whisper.n_vocab")),
        want="n_vocab")
    for key, v in (("whisperknot.pad_window", "bogus"),
                   ("whisperknot.timestamp_rule", "median"),
                   ("tokenizer.ggml.model", "llama")):
        add("meta-%s-%s" % (key.split(".")[1], v),
            edit(lambda m, key=key, v=v: m.set_str(key, v)),
            "error" if key.startswith("whisperknot") else "error-or-ok",
            want=key.split(".")[1] + "|" + v)
    add("meta-max_text_ctx-1000", edit(lambda m: m.set_u32(
        "whisperknot.max_text_ctx", 1000)), want="max_text_ctx")
    add("meta-unknown-key", edit(lambda m: m.set_u32("x.unknown", 7)), "ok")
    add("meta-extra-tensor", edit(lambda m: m.tensors.append(
        ["x.extra", [4], TYPE_F32, bytes(16)])), "ok")

    # NaN / Inf weights and filters (issue 14 item 6: load-time check)
    nan, inf = float("nan"), float("inf")
    n_filt = rd64(mel[2], 4)
    filt = list(struct.unpack_from("<%df" % n_filt, mel[2], 12))

    def filters(fn):
        def f(m):
            v = list(filt)
            fn(v)
            m.set_kv("whisper.mel_filters", T_ARR, f32_array(v))
        return f

    def all_nan(v):
        v[:] = [nan] * len(v)

    def one_nan(v):
        v[201 * 10 + 5] = nan

    def one_inf(v):
        v[7] = inf

    def huge(v):
        v[201 * 3 + 3] = 3e38
    add("nan-mel-filters-all", edit(filters(all_nan)), want="mel|filter|NaN|"
        "finite|Inf")
    add("nan-mel-filters-one", edit(filters(one_nan)), want="mel|filter|NaN|"
        "finite|Inf")
    add("inf-mel-filter", edit(filters(one_inf)), want="mel|filter|NaN|"
        "finite|Inf")
    add("huge-mel-filter", edit(filters(huge)), "error-or-ok",
        want="mel|filter|range")

    def weight(name, value, block=0):
        def f(m):
            t = m.t(name)
            t[3] = set_block_scale(t[2], t[3], value, block)
        return f
    for name in ("encoder.ln_post.weight", "encoder.ln_post.bias",
                 "decoder.ln.weight", "encoder.conv1.bias",
                 "encoder.blocks.0.attn_ln.weight",
                 "decoder.token_embedding.weight",
                 "encoder.positional_embedding",
                 "decoder.positional_embedding", "encoder.conv1.weight"):
        for tag, v in (("nan", nan), ("inf", inf)):
            add("%s-%s" % (tag, name), edit(weight(name, v, 3)),
                want="NaN|Inf|finite|%s" % name)
    # deep inside a matrix the check may not look (cost); the model then
    # runs on garbage, which is output, not a crash
    add("nan-encoder.blocks.0.mlp.0.weight",
        edit(weight("encoder.blocks.0.mlp.0.weight", nan, 17)),
        "error-or-ok", want="NaN|Inf|finite|mlp")

    # vocabulary
    tl = token_list(k)
    for tag, toks2 in (("short-50000", tl[:50000]), ("short-1000", tl[:1000]),
                       ("empty", []), ("long-51864", tl + [b"x"] * 1607)):
        add("vocab-" + tag, edit(lambda m, t=toks2: m.set_kv(
            "tokenizer.ggml.tokens", T_ARR, str_array(t))),
            want="vocab|token|n_vocab")
    add("vocab-missing", edit(lambda m: m.del_kv("tokenizer.ggml.tokens")),
        want="vocab|token")
    add("vocab-u32-array", edit(lambda m: m.set_kv(
        "tokenizer.ggml.tokens", T_ARR, u32(T_U32) + u64(len(tl)) +
        bytes(4 * len(tl)))), want="vocab|token|string|type")
    add("vocab-odd-bytes", edit(lambda m: m.set_kv(
        "tokenizer.ggml.tokens", T_ARR, str_array(
            [b"\xff\x00\xfe" if i % 97 == 0 else t
             for i, t in enumerate(tl)]))), "ok")
    add("vocab-huge-token", edit(lambda m: m.set_kv(
        "tokenizer.ggml.tokens", T_ARR, str_array(
            tl[:100] + [b"a" * (1 << 20)] + tl[101:]))), "error-or-ok",
        want="token|vocab|long")
    return cases


# ---- model paths: special files --------------------------------------------

def wait_mapped(proc, path, limit=600.0):
    """Wait until process proc has file path mapped (or has exited)."""
    import time
    real = os.path.realpath(path)
    maps = "/proc/%d/maps" % proc.pid
    t_end = time.monotonic() + limit
    while proc.poll() is None and time.monotonic() < t_end:
        try:
            with open(maps) as f:
                if any(line.rstrip("\n").endswith(real) for line in f):
                    return
        except OSError:
            return
        time.sleep(0.01)


def path_cases(ctx):
    cases = []
    clip_wav = wav_bytes(ctx.clip[:16000 * 2])

    # special files must fail within a second (10 s on a loaded machine)
    def add(name, model_fn, expect="error", want=None, xfail=None,
            during=None, wav=clip_wav, timeout=10, racy=False):
        def make(d):
            w = write(d, "in.wav", wav)
            return ["transcribe", "-m", model_fn(d), "-t", "1", w]
        cases.append(Case("path", name, make, expect, want, xfail,
                          during=during, timeout=timeout, racy=racy))

    def fifo(d):
        p = os.path.join(d, "model.knot")
        os.mkfifo(p)
        return p
    add("fifo", fifo, want="model.knot")
    add("directory", lambda d: d, want="director|regular|" + "model")
    add("dev-zero", lambda d: "/dev/zero", want="/dev/zero")
    add("dev-null", lambda d: "/dev/null", want="/dev/null")
    add("missing", lambda d: os.path.join(d, "none.knot"), want="none.knot")
    add("empty-file", lambda d: write(d, "empty.knot", b""),
        want="empty.knot")

    def loop(d):
        p = os.path.join(d, "loop.knot")
        os.symlink(p, p)
        return p
    add("symlink-loop", loop, want="loop.knot")

    # the model shrinks while the transcriber runs (issue 14 item 2):
    # an error or the text, never SIGBUS
    def shrinking(d):
        return write(d, "model.knot", ctx.small_knot)

    def shrink(proc, d):
        import time
        time.sleep(0.3)
        os.truncate(os.path.join(d, "model.knot"), len(ctx.small_knot) // 3)
    add("shrinks-while-running", shrinking, "error-or-ok",
        want="model.knot|changed|shr|truncat", during=shrink,
        wav=wav_bytes(ctx.clip * 8), timeout=None, racy=True,
        xfail="issue 14 item 2: a truncation racing a run already reading "
        "the weights raises SIGBUS (FORMAT.md: what remains)")

    def replace(proc, d):
        # replace the file only once the transcriber has mapped it: a
        # fixed delay raced a slow start (under TSan the program had not
        # opened the model after 0.3 s and read the half-written one)
        p = os.path.join(d, "model.knot")
        wait_mapped(proc, p)
        write(d, "new.knot", ctx.small_knot[:len(ctx.small_knot) // 2])
        os.replace(os.path.join(d, "new.knot"), p)
    add("replaced-while-running", shrinking, "ok", during=replace,
        wav=wav_bytes(ctx.clip * 8), timeout=None)
    return cases


def loads(ctx):
    """A converter case's follow-up: the knot it wrote must load and run."""
    def argv(d):
        wav = write(d, "check.wav", wav_bytes(ctx.clip[:16000 * 2]))
        return ["transcribe", "-m", os.path.join(d, "out.knot"), "-t", "1",
                wav]
    return argv


# ---- the VAD model ------------------------------------------------------------

HERE = os.path.dirname(os.path.abspath(__file__))
VAD_KNOT = os.path.join(HERE, "..", "..", "knots", "vad", "silero-v6.2.0.knot")
VAD_GGML = "for-tests-silero-v6.2.0-ggml.bin"   # in WK_SHARED_DATA
VAD_KEYS = ("silero-vad.sample_rate", "silero-vad.window",
            "silero-vad.context")


def vad_cases(ctx):
    b = open(VAD_KNOT, "rb").read()
    k = Knot(b)
    cases = []
    clip_wav = wav_bytes(ctx.clip[:16000 * 2])
    env = {"WHISPERKNOT_VAD_MODEL": "{dir}/vad.knot"}

    def add(name, data_fn, expect="error", want="VAD|knot", xfail=None):
        def make(d):
            write(d, "vad.knot", data_fn())
            wav = write(d, "in.wav", clip_wav)
            return ["transcribe", "-m", ctx.small_knot_path, "-t", "1",
                    "--vad", wav]
        cases.append(Case("vad", name, make, expect, want, xfail, env=env))

    add("control", lambda: b, "ok")
    add("magic-zeros", lambda: patch(b, 0, b"\0\0\0\0"), want="magic")
    add("empty", lambda: b"", want="empty")
    marks = {4: "version", 24: "counts", k.infos_start: "infos",
             k.infos_end: "infos-end", k.data_start: "data", len(b) - 1:
             "last-byte"}
    for kv in k.kvs:
        marks[kv[3]] = "kv-" + kv[0]
        marks[kv[5]] = "value-" + kv[0]
    for t in k.tensors:
        marks[t["start"]] = "info-" + t["name"]
        marks[t["data_at"] + 2] = "data-" + t["name"]
    for at in sorted(marks):
        add("truncated-%08d-%s" % (at, marks[at]), lambda at=at: b[:at],
            want=TRUNCATED)
    m = k.model
    add("arch-whisper",
        lambda: m().set_str("general.architecture", "whisper").bytes(),
        want="not a Silero VAD")
    add("arch-missing", lambda: m().del_kv("general.architecture").bytes(),
        want="architecture")
    for key in VAD_KEYS:
        short = key.split(".")[1]
        for v in (0, 1 << 30):
            add("key-%s-%d" % (short, v),
                lambda key=key, v=v: m().set_u32(key, v).bytes(), want=key)
        add("key-%s-missing" % short, lambda key=key: m().del_kv(key).bytes(),
            want=key + " is missing")
        add("key-%s-string" % short,
            lambda key=key: m().set_str(key, "512").bytes(),
            want=key + " is missing")
    add("version-missing", lambda: m().del_kv("silero-vad.version").bytes(),
        want="version")
    add("version-two", lambda: m().set_kv(
        "silero-vad.version", T_ARR, u32(T_U32) + u64(2) + u32(6) +
        u32(2)).bytes(), want="version")
    for t in k.tensors:
        name, ne = t["name"], t["ne"]
        add("tensor-%s-missing" % name, lambda name=name: m().drop(
            name).bytes(), want="'%s' is missing" % re.escape(name))
        add("tensor-%s-f16" % name, lambda name=name, ne=ne: m().reshape(
            name, ne, TYPE_F16).bytes(), want="not f32")
        add("tensor-%s-wider" % name, lambda name=name, ne=ne: m().reshape(
            name, [ne[0] + 8] + ne[1:]).bytes(), want="shape")
        if len(ne) == 2:
            add("tensor-%s-transposed" % name,
                lambda name=name, ne=ne: m().reshape(
                    name, [ne[1], ne[0]]).bytes(), want="shape")
        for tag, bits, where in (("nan", 0x7FC00000, 0),
                                 ("inf", 0x7F800000, len(t["data"]) - 4)):
            add("tensor-%s-%s-at-%d" % (name, tag, where // 4),
                lambda t=t, bits=bits, where=where: patch(
                    b, t["data_at"] + where, u32(bits)), want="not finite")

    def misaligned():
        # general.alignment 2, with a label that puts the data section at
        # 2 mod 4: every f32 tensor then starts off its 4-byte grid
        for n in range(8):
            out = m().set_u32("general.alignment", 2).set_str(
                "general.name", "x" * (n + 1)).bytes()
            if Knot(out).data_start % 4 == 2:
                return out
        raise AssertionError("no misaligned layout")
    add("misaligned", misaligned, want="misaligned")

    ggml_path = os.path.join(os.environ.get("WK_SHARED_DATA", ""), VAD_GGML)
    if not os.path.exists(ggml_path):
        return cases
    g = open(ggml_path, "rb").read()
    add("ggml-file", lambda: g, want="whisperknot-convert")

    def add_conv(name, data_fn, expect="error", want="VAD"):
        def make(d):
            src = write(d, "vad.bin", data_fn())
            return ["convert", "--quiet", src, os.path.join(d, "out.knot")]
        cases.append(Case("vad", "convert-" + name, make, expect, want,
                          no_output="out.knot"))

    add_conv("control", lambda: g, "ok")
    # the header fields after the type string: version (3), window,
    # context, encoder layers and their 4 x 3 sizes, LSTM and output (4)
    for i, at in enumerate(range(18, 106, 4)):
        for v in (-1, 1 << 30) + ((0,) if i >= 3 else ()):
            add_conv("header-%02d-%d" % (i, v),
                     lambda at=at, v=v: patch(g, at, u32(v & 0xFFFFFFFF)),
                     want="VAD|version|bad|unsupported")
    add_conv("type-8k", lambda: patch(g, 8, b"silero-8kX"),
             want="unsupported VAD model type")
    o = 106
    for i in range(15):
        nd, nl, tt = rd32(g, o), rd32(g, o + 4), rd32(g, o + 8)
        n = 1
        for j in range(nd):
            n *= rd32(g, o + 12 + 4 * j)
        data = o + 12 + 4 * nd + nl
        for at, tag in ((o + 6, "record-mid"), (data + 2, "data-mid")):
            add_conv("truncated-tensor%02d-%s" % (i, tag),
                     lambda at=at: g[:at],
                     want="truncated|missing|larger than the file")
        if i < 3:
            add_conv("tensor%02d-ndims" % i,
                     lambda o=o: patch(g, o, u32(5)), want="dimensions")
            add_conv("tensor%02d-type-q4" % i,
                     lambda o=o: patch(g, o + 8, u32(2)), want="type")
            add_conv("tensor%02d-dim-huge" % i,
                     lambda o=o: patch(g, o + 12, u32(0x7FFFFFFF)),
                     want="dimension|larger")
            add_conv("tensor%02d-nan" % i, lambda data=data, tt=tt: patch(
                g, data, u32(0x7FC00000) if tt == 0 else bytes(
                    [0x00, 0x7E])), want="not finite")
        o = data + n * (4 if tt == 0 else 2)
    return cases


# ---- ggml .bin --------------------------------------------------------------

def bin_layout(b):
    """Offsets of the .bin's parts: the hyper-parameters, filters,
    vocabulary and the first tensor records."""
    o = 4
    marks = {0: "empty", 4: "after-magic"}
    names = ("n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head",
             "n_audio_layer", "n_text_ctx", "n_text_state", "n_text_head",
             "n_text_layer", "n_mels", "ftype")
    for n in names:
        marks[o] = "hparam-" + n
        o += 4
    marks[o] = "filters"
    n_mel, n_fft = rd32(b, o), rd32(b, o + 4)
    marks[o + 8] = "filter-values"
    marks[o + 8 + 4 * n_mel * n_fft // 2] = "filters-mid"
    o += 8 + 4 * n_mel * n_fft
    vocab = o
    marks[o] = "vocab-count"
    n_tok = rd32(b, o)
    o += 4
    marks[o] = "vocab-first-token"
    marks[o + 2] = "vocab-first-token-len"
    for i in range(n_tok):
        if i == n_tok // 2:
            marks[o] = "vocab-mid"
            marks[o + 5] = "vocab-mid-token"
        o += 4 + rd32(b, o)
    tensors = o
    for i in range(3):
        nd, nl, tt = rd32(b, o), rd32(b, o + 4), rd32(b, o + 8)
        marks[o] = "tensor%d" % i
        marks[o + 4] = "tensor%d-name-len" % i
        marks[o + 8] = "tensor%d-type" % i
        marks[o + 12] = "tensor%d-ne" % i
        ne = [rd32(b, o + 12 + 4 * j) for j in range(nd)]
        o += 12 + 4 * nd
        marks[o] = "tensor%d-name" % i
        o += nl
        marks[o] = "tensor%d-data" % i
        n = tensor_nbytes(tt, ne)
        marks[o + n // 2] = "tensor%d-data-mid" % i
        o += n
    marks[len(b) - 1] = "last-byte"
    return marks, vocab, tensors


def ggml_cases(ctx):
    b = ctx.small_bin
    cases = []

    def add(name, data_fn, expect="error", want="ggml|bin", xfail=None):
        def make(d):
            src = write(d, "model.bin", data_fn())
            return ["convert", "--quiet", src, os.path.join(d, "out.knot")]
        cases.append(Case("ggml", name, make, expect, want, xfail,
                          no_output="out.knot", check=loads(ctx)))

    add("control", lambda: b, "ok")
    for tag, m in (("zeros", b"\0\0\0\0"), ("gguf", b"GGUF"),
                   ("byte-swapped", b"ggml"), ("text", b"hell")):
        add("magic-" + tag, lambda m=m: patch(b, 0, m),
            want="magic|knot|GGUF|neither|not a")
    add("text-file", lambda: b"hello, world\n", want="magic|neither|not a")
    marks, vocab, tensors = bin_layout(b)
    for at in sorted(marks):
        # cut at a record boundary: the file is whole, but tensors are missing
        add("truncated-%08d-%s" % (at, marks[at]), lambda at=at: b[:at],
            want=TRUNCATED + "|fit|neither|missing")
    for i, n in ((0, "n_vocab"), (2, "n_audio_state"), (3, "n_audio_head"),
                 (9, "n_mels")):
        for v in (-1, 0, 1 << 30):
            add("hparam-%s-%d" % (n, v),
                lambda i=i, v=v: patch(b, 4 + 4 * i, u32(v)),
                want="%s|range|shape|tensor|vocab|mel|filter" % n)
    filt = 4 + 44
    for tag, nm, nf in (("huge", 1 << 20, 1 << 20), ("negative", -1, 201),
                        ("zero", 0, 0)):
        add("filters-" + tag, lambda nm=nm, nf=nf: patch(
            b, filt, u32(nm) + u32(nf)), want="filter|mel|fit|range|past|"
            # an empty filterbank parses; what follows is then misread
            "tensor record|dimension")
    for tag, v in (("huge", 0x7FFFFFFF), ("negative", -1), ("zero", 0)):
        add("vocab-count-" + tag, lambda v=v: patch(b, vocab, u32(v)),
            # a count of 0 parses, and the tokens are then read as tensors
            want="vocab|token|fit|past|range|count|tensor record")
    add("token-length-huge", lambda: patch(b, vocab + 4, u32(0xFFFFFFF0)),
        want="token|length|past")
    t = tensors
    for tag, off, v in (("n-dims-5", 0, 5), ("n-dims-negative", 0, -1),
                        ("name-len-huge", 4, 1 << 30),
                        ("name-len-zero", 4, 0), ("type-99", 8, 99),
                        ("ne-negative", 12, -5), ("ne-huge", 12, 0x7FFFFFFF)):
        add("tensor-" + tag, lambda off=off, v=v: patch(b, t + off, u32(v)),
            want="tensor|dimension|name|type|past|size|record")
    return cases


# ---- safetensors directories ----------------------------------------------

def bytes_to_unicode():
    bs = (list(range(33, 127)) + list(range(161, 173)) +
          list(range(174, 256)))
    cs = list(bs)
    n = 0
    for c in range(256):
        if c not in bs:
            bs.append(c)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def openai_to_hf(name):
    layer = {"attn.query.": "self_attn.q_proj.",
             "attn.key.": "self_attn.k_proj.",
             "attn.value.": "self_attn.v_proj.",
             "attn.out.": "self_attn.out_proj.",
             "attn_ln.": "self_attn_layer_norm.",
             "cross_attn.query.": "encoder_attn.q_proj.",
             "cross_attn.key.": "encoder_attn.k_proj.",
             "cross_attn.value.": "encoder_attn.v_proj.",
             "cross_attn.out.": "encoder_attn.out_proj.",
             "cross_attn_ln.": "encoder_attn_layer_norm.",
             "mlp.0.": "fc1.", "mlp.2.": "fc2.",
             "mlp_ln.": "final_layer_norm."}
    part, rest = name.split(".", 1)
    if rest.startswith("blocks."):
        _, idx, tail = rest.split(".", 2)
        for a, h in layer.items():
            if tail.startswith(a):
                return "model.%s.layers.%s.%s%s" % (part, idx, h,
                                                    tail[len(a):])
    if rest == "positional_embedding":
        return "model.%s.embed_positions.weight" % part
    if rest == "token_embedding.weight":
        return "model.decoder.embed_tokens.weight"
    if rest.startswith("ln_post."):
        return "model.encoder.layer_norm." + rest[8:]
    if rest.startswith("ln."):
        return "model.decoder.layer_norm." + rest[3:]
    return "model." + name


def read_f32_bin(b):
    """The small .bin's hyper-parameters, tokens and tensors: (OpenAI name,
    PyTorch shape, f32 bytes), conv biases 1-D as PyTorch holds them."""
    hp = struct.unpack_from("<11i", b, 4)
    o = 48
    n_mel, n_fft = rd32(b, o), rd32(b, o + 4)
    o += 8 + 4 * n_mel * n_fft
    n_tok = rd32(b, o)
    o += 4
    tokens = []
    for _ in range(n_tok):
        ln = rd32(b, o)
        tokens.append(b[o + 4:o + 4 + ln])
        o += 4 + ln
    tensors = []
    while o < len(b):
        nd, nl, tt = struct.unpack_from("<3i", b, o)
        ne = list(struct.unpack_from("<%di" % nd, b, o + 12))
        o += 12 + 4 * nd
        name = b[o:o + nl].decode()
        o += nl
        n = tensor_nbytes(tt, ne)
        data = b[o:o + n]
        o += n
        assert tt == TYPE_F32, "the base .bin must be f32"
        shape = list(reversed(ne))
        if "conv" in name and name.endswith(".bias"):
            shape = [ne[0] * ne[1]]
        tensors.append((name, shape, data))
    return hp, tokens, tensors


class HfCheckpoint:
    """A Hugging Face directory made from the small .bin (f32): its
    tensors, config and vocabulary, each part editable before writing."""

    def __init__(self, b):
        hp, self.tokens, tensors = read_f32_bin(b)
        self.hp = hp
        self.tensors = {}       # hf name -> [dtype, shape, data]
        for name, shape, data in tensors:
            self.tensors[openai_to_hf(name)] = ["F32", shape, data]
        self.config = {
            "vocab_size": hp[0], "max_source_positions": hp[1],
            "d_model": hp[2], "encoder_attention_heads": hp[3],
            "encoder_layers": hp[4], "max_target_positions": hp[5],
            "decoder_attention_heads": hp[7], "decoder_layers": hp[8],
            "num_mel_bins": hp[9], "activation_function": "gelu"}
        b2u = bytes_to_unicode()
        self.vocab = {}
        for i, t in enumerate(self.tokens):
            s = t.decode("latin-1") if i == 50256 else \
                "".join(b2u[c] for c in t)
            self.vocab.setdefault(s, i)

    def safetensors(self, header_fn=None, order=None):
        hdr = {"__metadata__": {"format": "pt"}}
        blobs = []
        off = 0
        for name in (order or self.tensors):
            dt, shape, data = self.tensors[name]
            hdr[name] = {"dtype": dt, "shape": shape,
                         "data_offsets": [off, off + len(data)]}
            blobs.append(data)
            off += len(data)
        if header_fn:
            header_fn(hdr)
        h = json.dumps(hdr).encode() if not isinstance(hdr, bytes) else hdr
        return u64(len(h)) + h + b"".join(blobs)

    def write(self, d, st=None, config=None, vocab=None):
        write(d, "model.safetensors", st if st is not None
              else self.safetensors())
        write(d, "config.json", config if config is not None
              else json.dumps(self.config).encode())
        if vocab is not False:
            write(d, "vocab.json", vocab if vocab is not None
                  else json.dumps(self.vocab, ensure_ascii=False).encode())


# ---- OpenAI .pt checkpoints ---------------------------------------------------

PT_DIMS = ("n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head",
           "n_audio_layer", "n_text_ctx", "n_text_state", "n_text_head",
           "n_text_layer", "n_mels")


def pk_str(s):
    b = s.encode() if isinstance(s, str) else s
    return b"X" + u32(len(b)) + b


def pk_int(v):
    return b"J" + struct.pack("<i", v)


class PtCheckpoint:
    """The small .bin's weights as torch.save writes openai-whisper's
    checkpoints (a zip of NAME/data.pkl, NAME/data/KEY per storage and
    NAME/version; the pickle's opcodes as in tests/data/torch-mix.pt),
    each part editable before writing."""

    def __init__(self, b):
        hp, _, tensors = read_f32_bin(b)
        self.dims = dict(zip(PT_DIMS, hp[:10]))
        # name -> storage class, key, numel, offset, shape, strides, bytes
        self.tensors = {}
        for i, (name, shape, data) in enumerate(tensors):
            strides, st = [], 1
            for x in reversed(shape):
                strides.insert(0, st)
                st *= x
            self.tensors[name] = dict(cls="FloatStorage", key=str(i),
                                      numel=len(data) // 4, offset=0,
                                      shape=shape, strides=strides,
                                      data=data)

    def pickle(self, dims=None, tensors=None, rebuild=None, hf=False):
        """hf: transformers' pytorch_model.bin instead, the bare state dict
        under Hugging Face names."""
        dims = self.dims if dims is None else dims
        tensors = self.tensors if tensors is None else tensors
        rebuild = rebuild or b"ctorch._utils\n_rebuild_tensor_v2\n"
        out = b"\x80\x02"
        if not hf:
            out += b"}(" + pk_str("dims") + b"}("
            for k, v in dims.items():
                out += pk_str(k) + (pk_int(v) if isinstance(v, int)
                                    else pk_str(v))
            out += b"u" + pk_str("model_state_dict")
        out += b"ccollections\nOrderedDict\n)R("
        for name, t in tensors.items():
            out += pk_str(openai_to_hf(name) if hf else name)
            out += rebuild + b"((" + pk_str("storage")
            out += b"ctorch\n" + t["cls"].encode() + b"\n" + pk_str(t["key"])
            out += pk_str("cpu") + pk_int(t["numel"]) + b"tQ" + pk_int(t["offset"])
            out += b"(" + b"".join(pk_int(x) for x in t["shape"]) + b"t("
            out += b"".join(pk_int(x) for x in t["strides"])
            out += b"t\x89ccollections\nOrderedDict\n)RtR"
        return out + (b"u." if hf else b"uu.")

    def zip(self, pkl=None, entries=None, compress=(), extra=()):
        """The archive; entries: name -> bytes (default: the storages)."""
        import io
        import zipfile
        if entries is None:
            entries = {"data/" + t["key"]: t["data"]
                       for t in self.tensors.values()}
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
            items = [("data.pkl", self.pickle() if pkl is None else pkl)]
            items += list(entries.items()) + [("version", b"3\n")]
            items += list(extra)
            for name, data in items:
                # ("/NAME": at the archive's top, outside ckpt/)
                z.writestr(name[1:] if name[0] == "/" else "ckpt/" + name,
                           data, zipfile.ZIP_DEFLATED if name in compress
                           else zipfile.ZIP_STORED)
        return buf.getvalue()


def torch_pt_cases(ctx):
    pt = PtCheckpoint(ctx.small_bin)
    cases = []
    vocab_tok = os.path.join(os.path.dirname(ctx.jfk), "gpt2.tiktoken")

    def add(name, data_fn, expect="error", want=None, vocab=True):
        def make(d):
            src = write(d, "ckpt.pt", data_fn())
            argv = ["convert", "--quiet"]
            if vocab:
                argv += ["--vocab", vocab_tok]
            return argv + [src, os.path.join(d, "out.knot")]
        cases.append(Case("torch-pt", name, make, expect, want,
                          no_output="out.knot", check=loads(ctx)))

    def edited(fn, **kw):
        """The archive with a deep copy of the tensors edited by fn."""
        def data():
            t = {k: dict(v) for k, v in pt.tensors.items()}
            fn(t)
            return pt.zip(pkl=pt.pickle(tensors=t, **kw), entries={
                "data/" + v["key"]: v["data"] for v in t.values()})
        return data

    first = next(iter(pt.tensors))
    z = pt.zip()
    eocd = z.rfind(b"PK\x05\x06")
    cd = z.rfind(b"PK\x01\x02")
    add("control", pt.zip, "ok")
    add("no-vocab", pt.zip, want="--vocab gpt2.tiktoken", vocab=False)
    add("empty", lambda: b"", want="empty|short|non-empty")
    add("legacy-format", lambda: b"\x80\x02\x8a\x0alZ\xfc\x9cF\xf9 j\xa8P\x19."
        + b"\0" * 64, want="PyTorch 1.6|legacy|save it again")
    add("zip-magic-only", lambda: b"PK\x03\x04" + b"\0" * 40,
        want="zip|truncat|end")
    add("truncated-half", lambda: z[:len(z) // 2], want="zip|truncat|end")
    add("truncated-in-eocd", lambda: z[:-10], want="zip|truncat|end")
    add("cd-offset-past-end", lambda: patch(z, eocd + 16, u32(len(z) + 100)),
        want="directory|outside")
    add("entries-zip64-without-locator",
        lambda: patch(z, eocd + 10, b"\xff\xff"), want="zip64")
    add("entries-more-than-fit", lambda: patch(z, eocd + 10, b"\xfe\xff"),
        want="directory|entries|damaged")
    add("local-header-offset-bad", lambda: patch(z, cd + 42, u32(len(z) - 8)),
        want="local header|past|truncat")
    add("encrypted-entry", lambda: patch(z, cd + 8, b"\x01\x00"),
        want="encrypted")
    add("pickle-compressed", lambda: pt.zip(compress=("data.pkl",)),
        want="compressed")
    add("storage-compressed",
        lambda: pt.zip(compress=("data/" + pt.tensors[first]["key"],)),
        want="compressed")
    add("storage-missing", lambda: pt.zip(entries={
        "data/" + t["key"]: t["data"] for n, t in pt.tensors.items()
        if n != first}), want="not in the archive")
    add("two-pickles", lambda: pt.zip(extra=(("/other/data.pkl", b"."),)),
        want="two pickles")
    add("byteorder-big", lambda: pt.zip(extra=(("byteorder", b"big"),)),
        want="byte order")
    add("byteorder-little", lambda: pt.zip(extra=(("byteorder", b"little"),)),
        "ok")
    add("zip64-extra-fields", lambda: zip64(pt), "ok")
    add("storage-numel-inflated",
        edited(lambda t: t[first].update(numel=t[first]["numel"] + 1)),
        want="claims")
    add("shape-past-storage",
        edited(lambda t: t[first].update(shape=[t[first]["shape"][0] + 1]
                                         + t[first]["shape"][1:])),
        want="runs past|storage")
    add("offset-past-storage", edited(lambda t: t[first].update(offset=1)),
        want="runs past|storage")
    add("shape-negative", edited(lambda t: t[first].update(shape=[-1, 3, 3])),
        want="size|dimension")
    add("shape-5d", edited(lambda t: t[first].update(shape=[1] * 5,
                                                     strides=[1] * 5)),
        want="dimensions")
    add("transposed",
        edited(lambda t: t[first].update(strides=list(reversed(
            t[first]["strides"])))), want="contiguous")
    # (a dtype a knot cannot take: the tensor is skipped, so missing)
    add("storage-f64", edited(lambda t: t[first].update(
        cls="DoubleStorage", data=t[first]["data"] * 2)),
        want="conv1.weight' is missing")
    add("storage-unknown", edited(lambda t: t[first].update(
        cls="QUInt8Storage")), want="storage type")
    add("storage-bf16", edited(lambda t: [v.update(
        cls="BFloat16Storage", data=bf16_bytes(v["data"]))
        for v in t.values()]), "ok")
    add("rebuild-os-system", edited(lambda t: None,
                                    rebuild=b"cposix\nsystem\n"),
        want="does not hold")
    add("rebuild-eval", edited(lambda t: None, rebuild=b"cbuiltins\neval\n"),
        want="does not hold")
    add("duplicate-name", lambda: pt.zip(pkl=pt.pickle().replace(
        pk_str("encoder.conv1.bias"), pk_str("encoder.conv1.weight"))),
        want="twice")
    pk = pt.pickle()
    for tag, raw, want in (
            ("protocol-9", b"\x80\x09" + pk[2:], "protocol"),
            ("opcode-text-int", pk[:-1] + b"I1\n.", "opcode"),
            ("no-stop", pk[:-1], "ends"),
            ("cut-in-string", pk[:len(pk) // 3], "ends"),
            ("stop-at-start", pk[:2] + b".", "STOP"),
            ("memo-get-unset", pk[:2] + b"h\x05" + pk[2:], "memo"),
            ("memo-put-huge", pk[:3] + b"r\xff\xff\xff\x7f" + pk[3:], "memo"),
            ("setitems-without-mark", pk[:2] + b"}u" + pk[2:], "mark"),
            ("tuple-of-nothing", b"\x80\x02\x85.", "stack|more values"),
            ("marks-without-end", b"\x80\x02" + b"(" * 2000000 + b".",
             "marks|STOP"),
            ("string-length-huge", b"\x80\x02X\xff\xff\xff\x7f", "ends"),
            ("not-a-dict", b"\x80\x02K\x05.", "not a dict"),
            ("state-dict-not-tensors", b"\x80\x02}(X\x01\0\0\0aK\x01u.",
             "tensor"),
            ("reduce-list", pk[:2] + b"]]R" + pk[2:], "REDUCE|callable")):
        add("pickle-" + tag, lambda raw=raw: pt.zip(pkl=raw), want=want)
    for tag, dims, want in (
            ("missing", {}, "dims"),
            ("negative", dict(pt.dims, n_mels=-80), "n_mels"),
            ("string", dict(pt.dims, n_mels="80"), "n_mels"),
            ("huge", dict(pt.dims, n_audio_state=1 << 30), "n_audio_state|"
             "width|shape|expected")):
        add("dims-" + tag, lambda dims=dims: pt.zip(pkl=pt.pickle(dims=dims)),
            want=want)
    add("tensor-missing", lambda: pt.zip(pkl=pt.pickle(tensors={
        k: v for k, v in pt.tensors.items() if k != first})),
        want="conv1")
    return cases


def bf16_bytes(f32):
    """f32 values as bfloat16, truncated (each value's upper 16 bits)."""
    return b"".join(f32[i + 2:i + 4] for i in range(0, len(f32), 4))


def zip64(pt):
    """The checkpoint with zip64 extra fields on every entry (as a writer
    that does not know the sizes ahead writes them)."""
    import io
    import zipfile
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        items = [("data.pkl", pt.pickle())]
        items += [("data/" + t["key"], t["data"]) for t in pt.tensors.values()]
        for name, data in items:
            with z.open(zipfile.ZipInfo("ckpt/" + name), "w",
                        force_zip64=True) as f:
                f.write(data)
    return buf.getvalue()


def safetensors_cases(ctx):
    hf = HfCheckpoint(ctx.small_bin)
    cases = []
    vocab_tok = os.path.join(os.path.dirname(ctx.jfk), "gpt2.tiktoken")

    def add(name, fn, expect="error", want=None, xfail=None, vocab=None):
        def make(d):
            src = os.path.join(d, "ckpt")
            os.mkdir(src)
            fn(src)
            argv = ["convert", "--quiet"]
            if vocab:
                argv += ["--vocab", vocab]
            return argv + [src, os.path.join(d, "out.knot")]
        cases.append(Case("safetensors", name, make, expect, want, xfail,
                          no_output="out.knot", check=loads(ctx)))

    add("control", lambda d: hf.write(d), "ok")
    st = hf.safetensors()
    for tag, v in (("zero", 0), ("seven", 7), ("past-end", len(st)),
                   ("huge", 1 << 62), ("max", (1 << 64) - 1)):
        add("header-length-" + tag,
            lambda d, v=v: hf.write(d, st=patch(st, 0, u64(v))),
            want="header|length|safetensors")
    add("file-empty", lambda d: hf.write(d, st=b""),
        want="safetensors|short|header|empty|truncat")
    add("file-4-bytes", lambda d: hf.write(d, st=b"\x08\0\0\0"),
        want="safetensors|short|header|truncat")
    hlen = rd64(st, 0)
    add("truncated-in-header", lambda d: hf.write(d, st=st[:8 + hlen // 2]),
        want="header|length|safetensors|truncat|past")
    add("truncated-in-data", lambda d: hf.write(d, st=st[:len(st) - 1000]),
        want="offset|past|end|truncat|data|size")

    def hdr_bytes(raw):
        return u64(len(raw)) + raw + st[8 + hlen:]
    head = st[8:8 + hlen]
    bad_json = (("not-json", b"x" * hlen),
                ("trailing-garbage", head[:-1] + b"}}"),
                ("unterminated", head[:-1] + b" "),
                ("invalid-utf8", head.replace(b"format", b"f\xffrmat", 1)),
                ("deep-nesting", b"[" * (hlen // 2) + b"]" * (hlen - hlen // 2)),
                ("top-level-array", b"[" + head[1:-1] + b"]"),
                ("nul-byte", head.replace(b"format", b"f\0rmat", 1)))
    for tag, raw in bad_json:
        add("json-" + tag, lambda d, raw=raw: hf.write(d, st=hdr_bytes(raw)),
            want="json|JSON|header|safetensors|parse|expected|UTF|nest")
    first = next(iter(hf.tensors))

    def edit_hdr(fn):
        return lambda d: hf.write(d, st=hf.safetensors(header_fn=fn))

    hdr_edits = (
        ("offsets-reversed", lambda h: h[first].update(
            data_offsets=list(reversed(h[first]["data_offsets"])))),
        ("offsets-past-end", lambda h: h[first].update(
            data_offsets=[0, 1 << 40])),
        ("offsets-huge", lambda h: h[first].update(
            data_offsets=[(1 << 64) - 8, (1 << 64) - 4])),
        ("offsets-negative", lambda h: h[first].update(data_offsets=[-4, 0])),
        ("offsets-float", lambda h: h[first].update(data_offsets=[0.5, 4])),
        ("shape-mismatch", lambda h: h[first].update(
            shape=[x + 1 for x in h[first]["shape"]])),
        ("shape-overflow", lambda h: h[first].update(
            shape=[1 << 40, 1 << 40])),
        ("shape-negative", lambda h: h[first].update(shape=[-1, 4])),
        ("shape-5d", lambda h: h[first].update(shape=[1, 1, 1, 1, 1])),
        ("dtype-f64", lambda h: h[first].update(dtype="F64")),
        ("dtype-number", lambda h: h[first].update(dtype=3)),
        ("no-dtype", lambda h: h[first].pop("dtype")),
        ("tensor-not-object", lambda h: h.update({first: [1, 2]})),
    )
    for tag, fn in hdr_edits:
        add("tensor-" + tag, edit_hdr(fn),
            want="offset|shape|dtype|tensor|safetensors|size|overflow|dim")

    def drop(name):
        def fn(d):
            keep = [n for n in hf.tensors if n != name]
            hf.write(d, st=hf.safetensors(order=keep))
        return fn
    for name in ("model.encoder.conv1.weight",
                 "model.decoder.embed_tokens.weight",
                 "model.encoder.layers.0.fc1.weight",
                 "model.decoder.layer_norm.bias"):
        add("missing-" + name, drop(name), want="missing|tensor|not found|"
            "no tensor|" + name.split(".")[-2])
    add("missing-model.safetensors", lambda d: (
        hf.write(d), os.unlink(os.path.join(d, "model.safetensors"))),
        want="model.safetensors|safetensors|no such|cannot")
    add("model.safetensors-is-a-directory", lambda d: (
        hf.write(d, st=b""), os.unlink(os.path.join(d, "model.safetensors")),
        os.mkdir(os.path.join(d, "model.safetensors"))),
        want="model.safetensors|director|regular|cannot")
    add("empty-directory", lambda d: None,
        want="safetensors|config|no such|cannot|empty")

    # sharded checkpoints (model.safetensors.index.json) and
    # pytorch_model.bin, as transformers also saves them
    names = list(hf.tensors)
    half = len(names) // 2
    shard = ("model-00001-of-00002.safetensors",
             "model-00002-of-00002.safetensors")

    def shards(d, edit=None, raw=None, second=half):
        hf.write(d)
        os.unlink(os.path.join(d, "model.safetensors"))
        write(d, shard[0], hf.safetensors(order=names[:half]))
        write(d, shard[1], hf.safetensors(order=names[second:]))
        wm = {n: shard[i >= half] for i, n in enumerate(names)}
        if edit:
            edit(wm)
        write(d, "model.safetensors.index.json", raw if raw is not None
              else json.dumps({"metadata": {}, "weight_map": wm}).encode())
    add("shards", shards, "ok")
    add("shards-path-outside", lambda d: shards(d, edit=lambda wm: wm.update(
        {names[0]: "../" + shard[0]})), want="file name")
    add("shards-absolute-path", lambda d: shards(d, edit=lambda wm: wm.update(
        {names[0]: "/etc/passwd"})), want="file name")
    add("shards-file-missing", lambda d: (shards(d), os.unlink(
        os.path.join(d, shard[1]))), want="model-00002|cannot|no such")
    add("shards-tensor-twice", lambda d: shards(d, second=half - 1),
        want="again")
    add("shards-index-no-weight-map", lambda d: shards(d, raw=b"{}"),
        want="weight_map")
    add("shards-index-not-json", lambda d: shards(d, raw=b"{weight_map"),
        want="JSON|json|expected")
    # generation_config.json's alignment_heads: another model's set is
    # not used (a note), a malformed one is an error
    for tag, raw, expect in (
            ("outside-decoder", b'{"alignment_heads": [[31, 19], [0, 0]]}',
             "ok"),
            # a pair named twice is used once (a knot may not repeat one)
            ("repeated", b'{"alignment_heads": [[0, 0], [0, 0]]}', "ok"),
            ("not-pairs", b'{"alignment_heads": [[1, 0, 3]]}', "error"),
            ("negative", b'{"alignment_heads": [[-1, 0]]}', "error"),
            ("strings", b'{"alignment_heads": [["1", "0"]]}', "error"),
            ("object", b'{"alignment_heads": {"1": 0}}', "error")):
        add("alignment-heads-" + tag, lambda d, raw=raw: (
            hf.write(d), write(d, "generation_config.json", raw)), expect,
            want="alignment_heads" if expect == "error" else None)
    pt = PtCheckpoint(ctx.small_bin)
    add("pytorch-model-bin", lambda d: (
        hf.write(d), os.unlink(os.path.join(d, "model.safetensors")),
        write(d, "pytorch_model.bin", pt.zip(pkl=pt.pickle(hf=True)))), "ok")
    add("pytorch-model-bin-legacy-format", lambda d: (
        hf.write(d), os.unlink(os.path.join(d, "model.safetensors")),
        write(d, "pytorch_model.bin", b"\x80\x02\x8a\x0alZ\xfc\x9cF\xf9 j"
              + b"\0" * 64)), want="PyTorch 1.6")
    add("pytorch-model-bin-unknown-names", lambda d: (
        hf.write(d), os.unlink(os.path.join(d, "model.safetensors")),
        write(d, "pytorch_model.bin", pt.zip(pkl=pt.pickle(tensors={
            "x." + k: v for k, v in pt.tensors.items()}, hf=True)))),
        want="missing|tensor")

    # config.json
    cfgs = (("missing", None), ("not-json", b"{vocab_size: 5"),
            ("array", b"[]"),
            ("d-model-zero", dict(hf.config, d_model=0)),
            ("d-model-negative", dict(hf.config, d_model=-64)),
            ("d-model-string", dict(hf.config, d_model="64")),
            ("d-model-huge", dict(hf.config, d_model=1 << 40)),
            ("d-model-float", dict(hf.config, d_model=64.5)),
            ("layers-more", dict(hf.config, encoder_layers=3)),
            ("vocab-size-small", dict(hf.config, vocab_size=1000)),
            ("mels-128", dict(hf.config, num_mel_bins=128)))
    for tag, cfg in cfgs:
        def fn(d, cfg=cfg):
            if cfg is None:
                hf.write(d)
                os.unlink(os.path.join(d, "config.json"))
            else:
                hf.write(d, config=cfg if isinstance(cfg, bytes)
                         else json.dumps(cfg).encode())
        add("config-" + tag, fn, want="config|d_model|vocab|layer|mel|"
            "shape|tensor|missing|integer|JSON|json")

    # vocab.json: a token named like a tokenizer.json member is a token
    # (issue 14 item 1), damage is an error naming the file
    def vocab_with(tokens):
        def fn(d):
            v = dict(hf.vocab)
            inv = {i: s for s, i in v.items()}
            for tok, i in tokens:
                v.pop(inv.get(i), None)
                v[tok] = i
            hf.write(d, vocab=json.dumps(v, ensure_ascii=False).encode())
        return fn
    add("vocab-token-model", vocab_with([("model", 19849)]), "ok")
    add("vocab-tokens-model-version-added_tokens", vocab_with(
        [("model", 19849), ("version", 9641), ("added_tokens", 50255)]), "ok")
    add("vocab-first-key-model", lambda d: hf.write(d, vocab=(
        b'{"model": 19849, ' + json.dumps(
            {s: i for s, i in hf.vocab.items() if i != 19849},
            ensure_ascii=False).encode()[1:])), "ok")
    bad_vocab = (
        ("missing", False), ("not-json", b'{"a": '), ("array", b"[1, 2]"),
        ("empty-object", b"{}"),
        ("id-string", b'{"a": "0"}'),
        ("id-negative", json.dumps(dict(hf.vocab, **{"zz": -1})).encode()),
        ("duplicate-id", json.dumps(dict(hf.vocab, **{"zz": 5})).encode()),
        ("tokenizer-json-shape", b'{"model": {"vocab": 5}, "version": "1"}'),
    )
    for tag, v in bad_vocab:
        add("vocab-" + tag, lambda d, v=v: hf.write(d, vocab=v),
            want="vocab|token|tokenizer|json|JSON|id|--vocab")
    # an id past n_vocab, or a token that is not GPT-2's byte-level text:
    # refused, or left out of a knot that still loads
    for tag, tok, i in (("id-huge", "zz", 1 << 40),
                        ("not-byte-level", "\u4e00", 7)):
        v = dict(hf.vocab)
        if tag == "not-byte-level":
            v = {s2: j for s2, j in v.items() if j != i}
        v[tok] = i
        add("vocab-" + tag, lambda d, v=v: hf.write(
            d, vocab=json.dumps(v, ensure_ascii=False).encode()),
            "error-or-ok", want="vocab|token|id|byte")
    # a vocabulary shorter than n_vocab needs must be refused
    add("vocab-short", lambda d: hf.write(d, vocab=json.dumps(
        {s2: i for s2, i in hf.vocab.items() if i < 1000}).encode()),
        want="vocab|token|n_vocab")
    add("vocab-missing-with-tiktoken", lambda d: hf.write(d, vocab=False),
        "ok", vocab=vocab_tok)
    add("tokenizer-json-broken", lambda d: (
        hf.write(d, vocab=False),
        write(d, "tokenizer.json", b'{"model": {"type": "BPE", "vocab": [')),
        want="tokenizer|json|JSON|vocab")
    return cases


# ---- WAV ----------------------------------------------------------------------

def wav_cases(ctx):
    clip = ctx.clip
    cases = []

    def add(name, data_fn, expect="error", want="wav|WAV|RIFF|fmt|data|"
            "chunk|sample|channel|bits|format|truncat", stdin=False):
        def make(d):
            p = write(d, "in.wav", data_fn())
            return ["transcribe", "-m", ctx.default_model, "-t", "1",
                    "-" if stdin else p]
        cases.append(Case("wav", name, make, expect, want,
                          stdin="in.wav" if stdin else None))

    good = wav_bytes(clip)
    add("control", lambda: good, "text")
    add("stdin", lambda: good, "text", stdin=True)
    add("empty-file", lambda: b"", want="empty|short|RIFF|WAVE|data|no")
    for at in (4, 8, 11, 12, 16, 20, 30, 36, 40, 43):
        add("truncated-%02d" % at, lambda at=at: good[:at])
    add("header-only", lambda: good[:44], "ok")
    add("zero-length-data", lambda: wav_bytes(b""), "ok")
    add("one-sample", lambda: wav_bytes(clip[:2]), "ok")
    add("data-size-past-end", lambda: wav_bytes(clip, data_size=len(clip) * 2),
        "error-or-text")
    add("data-size-max", lambda: wav_bytes(clip, data_size=0xFFFFFFFF),
        "error-or-text")
    add("riff-size-max", lambda: riff([chunk(b"fmt ", fmt_payload()),
                                       chunk(b"data", clip)],
                                      riff_size=0xFFFFFFFF), "error-or-text")
    add("riff-size-zero", lambda: riff([chunk(b"fmt ", fmt_payload()),
                                        chunk(b"data", clip)], riff_size=0),
        "error-or-text")
    add("fmt-size-max", lambda: riff([chunk(b"fmt ", fmt_payload(),
                                            size=0xFFFFFFFF),
                                      chunk(b"data", clip)]))
    add("fmt-size-14", lambda: riff([chunk(b"fmt ", fmt_payload()[:14]),
                                     chunk(b"data", clip)]))
    add("fmt-size-odd-17", lambda: riff([chunk(b"fmt ", fmt_payload() + b"x"),
                                         chunk(b"data", clip)]),
        "error-or-text")
    add("unknown-chunk-huge", lambda: wav_bytes(
        clip, before=[b"junk" + u32(0xFFFFFFF0) + b"abcd"]))
    add("odd-chunk-padded", lambda: wav_bytes(
        clip, before=[chunk(b"LIST", b"abc")]), "text")
    add("odd-chunk-unpadded", lambda: wav_bytes(
        clip, before=[chunk(b"LIST", b"abc", pad=False)]), "error-or-text")
    add("odd-data-bytes", lambda: wav_bytes(clip + b"\x01"), "text")
    add("odd-data-bytes-stereo", lambda: wav_bytes(
        stereo(clip) + b"\x01\x02\x03", channels=2), "text")
    add("two-data-chunks", lambda: wav_bytes(
        clip, after=[chunk(b"data", clip)]), "text")
    add("fmt-after-data", lambda: riff([chunk(b"data", clip),
                                        chunk(b"fmt ", fmt_payload())]),
        "text")
    add("no-fmt", lambda: riff([chunk(b"data", clip)]), want="fmt")
    add("no-data", lambda: riff([chunk(b"fmt ", fmt_payload())]),
        want="data")
    add("fmt-twice-different", lambda: riff([
        chunk(b"fmt ", fmt_payload()),
        chunk(b"fmt ", fmt_payload(rate=8000)), chunk(b"data", clip)]),
        "error-or-text", want="fmt|rate|sample|16")
    for rate in (8000, 22050, 44100, 48000, 0, 0xFFFFFFFF):
        add("rate-%d" % rate, lambda r=rate: wav_bytes(clip, rate=r),
            want="rate|Hz|16")
    add("channels-0", lambda: wav_bytes(clip, channels=0), want="channel")
    add("channels-2", lambda: wav_bytes(stereo(clip), channels=2), "text")
    add("channels-8", lambda: wav_bytes(clip * 8, channels=8), "error-or-text",
        want="channel")
    add("channels-65535", lambda: wav_bytes(clip[:65535 * 2 * 2],
                                            channels=65535),
        "error-or-ok", want="channel")
    add("bits-8", lambda: wav_bytes(bytes((x + 128) & 255 for x in
                                          clip[1::2]), bits=8),
        "error-or-text", want="bits|8")
    add("bits-12", lambda: wav_bytes(clip, bits=12), want="bits|12")
    add("bits-0", lambda: wav_bytes(clip, bits=0), want="bits|0|block")
    add("bits-24", lambda: wav_bytes(s24(clip), bits=24), "text")
    add("bits-32-int", lambda: wav_bytes(b"".join(
        struct.pack("<i", x * 65536) for x in struct.unpack(
            "<%dh" % (len(clip) // 2), clip)), bits=32), "text")
    add("float-32", lambda: wav_bytes(s16_to_f32(clip), bits=32, tag=3),
        "text")
    add("float-16", lambda: wav_bytes(clip, bits=16, tag=3),
        want="float|bits|16|format")
    add("float-64", lambda: wav_bytes(b"".join(
        struct.pack("<d", x / 32768.0) for x in struct.unpack(
            "<%dh" % (len(clip) // 2), clip)), bits=64, tag=3),
        "error-or-text", want="bits|64|float")
    add("float-nonfinite-before-speech", lambda: wav_bytes(
        struct.pack("<4f", float("nan"), float("inf"), -float("inf"),
                    1e30) * 4000 + s16_to_f32(clip), bits=32, tag=3), "text")
    add("block-align-wrong", lambda: wav_bytes(clip, fmt=fmt_payload(
        block_align=3)), "error-or-text", want="block|align")
    add("byte-rate-wrong", lambda: wav_bytes(clip, fmt=fmt_payload(
        byte_rate=1)), "error-or-text", want="rate")
    for tag, name in ((2, "adpcm"), (6, "alaw"), (7, "mulaw"), (0x55, "mp3"),
                      (0, "zero")):
        add("format-" + name, lambda t=tag: wav_bytes(clip, tag=t),
            want="format|encoding|unsupported|PCM|0x|tag")
    add("extensible-pcm", lambda: wav_bytes(clip, fmt=extensible(1)), "text")
    add("extensible-unknown-guid", lambda: wav_bytes(
        clip, fmt=extensible(0x1234)), want="format|subformat|GUID|"
        "unsupported|extensible|encoding")
    add("extensible-cb-short", lambda: wav_bytes(
        clip, fmt=extensible(1)[:20]), "error-or-text",
        want="format|extensible|fmt|short")
    add("rifx", lambda: riff([chunk(b"fmt ", fmt_payload()),
                              chunk(b"data", clip)], magic=b"RIFX"),
        want="RIFF|WAVE|RIFX|big")
    add("rf64", lambda: riff([chunk(b"fmt ", fmt_payload()),
                              chunk(b"data", clip)], magic=b"RF64"),
        want="RIFF|WAVE|RF64")
    add("not-wave", lambda: riff([chunk(b"fmt ", fmt_payload()),
                                  chunk(b"data", clip)], form=b"AVI "),
        want="WAVE|RIFF")
    add("text-file", lambda: b"hello, this is not audio\n", want="RIFF|WAVE")
    data_dir = os.path.dirname(ctx.jfk)
    for ext in ("flac", "mp3"):
        p = os.path.join(data_dir, "jfk." + ext)
        if os.path.exists(p):
            add("jfk-" + ext, lambda p=p: open(p, "rb").read(),
                want="RIFF|WAVE")
    add("silence-30s", lambda: wav_bytes(bytes(30 * 16000 * 2)), "ok")
    add("clipped-square", lambda: wav_bytes(
        (u32(0x7FFF7FFF) + u32(0x80008000)) * 8000), "ok")
    return cases


# ---- the element ---------------------------------------------------------------

def element_cases(ctx):
    cases = []
    model = ctx.default_model
    raw_name = "clip.raw"

    def launch(name, desc_fn, expect, want=None, xfail=None, timeout=None):
        def make(d):
            write(d, raw_name, ctx.clip)
            write(d, "clip.wav", wav_bytes(ctx.clip))
            return ["gst", "launch", desc_fn(d)]
        cases.append(Case("element", name, make, expect, want, xfail,
                          timeout=timeout))

    def appsrc(mode, expect, want=None, xfail=None):
        def make(d):
            return ["gst", "appsrc", mode, model, write(d, raw_name,
                                                        ctx.clip)]
        cases.append(Case("element", "appsrc-" + mode, make, expect, want,
                          xfail))

    wk = 'whisperknot model="%s"' % model
    sink = "fakesink name=out sync=false"
    caps_bad = (("rate-44100", "rate=44100,channels=1,format=S16LE"),
                ("rate-8000", "rate=8000,channels=1,format=S16LE"),
                ("channels-2", "rate=16000,channels=2,format=S16LE"),
                ("format-S8", "rate=16000,channels=1,format=S8"),
                ("format-U8", "rate=16000,channels=1,format=U8"),
                ("format-F64LE", "rate=16000,channels=1,format=F64LE"),
                ("format-S16BE", "rate=16000,channels=1,format=S16BE"),
                ("format-S32LE", "rate=16000,channels=1,format=S32LE"),
                ("non-interleaved", "rate=16000,channels=1,format=S16LE,"
                 "layout=non-interleaved"))
    for tag, caps in caps_bad:
        launch("caps-" + tag, lambda d, c=caps: "audiotestsrc num-buffers=5 "
               "! audio/x-raw,%s ! %s ! %s" % (c, wk, sink), "error",
               want="link|caps|negotiat")
    launch("no-caps-bytes", lambda d: "filesrc location=%s ! %s ! %s" % (
        os.path.join(d, raw_name), wk, sink), "error",
        want="format|segment|caps|negotiat")
    launch("odd-blocksize-bytes", lambda d: "filesrc location=%s blocksize="
           "4001 ! audio/x-raw,format=S16LE,rate=16000,channels=1,layout="
           "interleaved ! %s ! %s" % (os.path.join(d, raw_name), wk, sink),
           "error", want="format|segment|TIME")
    launch("rawaudioparse", lambda d: "filesrc location=%s ! rawaudioparse "
           "pcm-format=s16le sample-rate=16000 num-channels=1 ! %s ! %s" % (
               os.path.join(d, raw_name), wk, sink), "text")
    launch("wavparse-resampled-44100-stereo", lambda d: "filesrc location=%s "
           "! wavparse ! audioconvert ! audioresample ! audio/x-raw,rate=44100,"
           "channels=2 ! audioconvert ! audioresample ! %s ! %s" % (
               os.path.join(d, "clip.wav"), wk, sink), "text")
    launch("eos-with-nothing", lambda d: "audiotestsrc num-buffers=0 ! "
           "audio/x-raw,rate=16000,channels=1,format=S16LE ! %s ! %s" % (
               wk, sink), "ok")
    launch("empty-file", lambda d: "filesrc location=/dev/null ! "
           "rawaudioparse pcm-format=s16le sample-rate=16000 num-channels=1 "
           "! %s ! %s" % (wk, sink), "ok")
    launch("noise-full-scale", lambda d: "audiotestsrc num-buffers=20 "
           "wave=white-noise volume=1.0 ! audio/x-raw,rate=16000,channels=1,"
           "format=F32LE ! %s ! %s" % (wk, sink), "ok")
    launch("live-silence-latency-1000", lambda d: "audiotestsrc is-live=true "
           "num-buffers=30 wave=silence ! audio/x-raw,rate=16000,channels=1,"
           "format=S16LE ! %s latency=1000 ! %s" % (wk, sink), "ok")
    launch("concat-s16-then-f32", lambda d: "concat name=c ! %s ! %s "
           "audiotestsrc num-buffers=10 ! audio/x-raw,rate=16000,channels=1,"
           "format=S16LE ! c. audiotestsrc num-buffers=10 ! audio/x-raw,"
           "rate=16000,channels=1,format=F32LE ! c." % (wk, sink),
           "error-or-ok", want="caps|format|negotiat")

    # models through the element: errors within the timeout, naming the file
    def model_case(tag, path_fn, want, xfail=None):
        def desc(d):
            return ('audiotestsrc num-buffers=5 ! audio/x-raw,rate=16000,'
                    'channels=1,format=S16LE ! whisperknot model="%s" ! %s'
                    % (path_fn(d), sink))
        launch("model-" + tag, desc, "error", want=want, xfail=xfail,
               timeout=10)

    def fifo(d):
        p = os.path.join(d, "fifo.knot")
        os.mkfifo(p)
        return p
    model_case("fifo", fifo, "fifo.knot")
    model_case("directory", lambda d: d, os.path.basename("model") + "|" +
               "director|regular")
    model_case("dev-zero", lambda d: "/dev/zero", "/dev/zero")
    model_case("missing", lambda d: os.path.join(d, "none.knot"), "none.knot")
    model_case("empty", lambda d: write(d, "empty.knot", b""), "empty.knot")
    model_case("truncated", lambda d: write(
        d, "cut.knot", ctx.small_knot[:len(ctx.small_knot) // 2]),
        "cut.knot")

    def nan_filters(d):
        m = ctx.knot.model()
        mel = ctx.knot.kv("whisper.mel_filters")[2]
        n = rd64(mel, 4)
        m.set_kv("whisper.mel_filters", T_ARR, f32_array([math.nan] * n))
        return write(d, "nan.knot", m.bytes())
    model_case("nan-mel-filters", nan_filters, "nan.knot|NaN|mel|finite")

    # a model truncated after the element loaded it, before the stream
    # starts: the engine's file check must refuse it (no SIGBUS)
    def shrink_case(d):
        m = write(d, "model.knot", ctx.small_knot)
        return ["gst", "appsrc", "shrink-after-load", m, write(
            d, raw_name, ctx.clip)]
    # (it polls the stats property while the model loads, which TSan
    # checks: issue 15 item 3)
    cases.append(Case("element", "appsrc-shrink-after-load", shrink_case,
                      "error", want="model.knot|changed|shr|truncat"))
    for mode, expect, want in (
            ("odd-s16", "error-or-text", "sample|whole|size|odd|multiple"),
            ("odd-f32", "error-or-text", "sample|whole|size|odd|multiple"),
            ("tiny-buffers", "error-or-text",
             "sample|whole|size|odd|multiple"),
            ("empty-buffers", "text", None),
            ("no-timestamps", "text", None),
            ("backwards-pts", "ok", None),
            ("huge-pts", "ok", None),
            ("no-caps", "error", "caps|negotiat|format"),
            ("eos-only", "ok", None),
            ("eos-no-caps", "ok", None),
            ("caps-change", "error-or-text", "caps|format|negotiat"),
            ("rate-change", "error", "caps|rate|negotiat|format"),
            ("one-buffer", "text", None),
            ("nonfinite-f32", "text", None),
            ("silence", "ok", None)):
        appsrc(mode, expect, want)
    return cases


# ---- all ----------------------------------------------------------------------

CLASSES = (("knot", knot_cases), ("vad", vad_cases), ("path", path_cases),
           ("ggml", ggml_cases),
           ("safetensors", safetensors_cases), ("torch-pt", torch_pt_cases),
           ("wav", wav_cases),
           ("element", element_cases))


def all_cases(ctx):
    out = []
    for cls, fn in CLASSES:
        if cls == "element" and not ctx.gst_ok:
            continue
        out += fn(ctx)
    names = [c.name for c in out]
    assert len(names) == len(set(names)), "duplicate case names"
    return out


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small-knot", required=True)
    ap.add_argument("--small-bin", required=True)
    ap.add_argument("--default-model", required=True)
    ap.add_argument("--jfk", required=True)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("outdir", nargs="?")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args(argv)
    ctx = Ctx(a.small_knot, a.small_bin, a.default_model, a.jfk)
    for c in all_cases(ctx):
        if a.list:
            print("%-60s %s" % (c.name, c.expect))
        elif a.outdir and (not a.names or c.name in a.names):
            d = os.path.join(a.outdir, c.name)
            os.makedirs(d, exist_ok=True)
            argv = c.make(d)
            with open(os.path.join(d, "argv.json"), "w") as f:
                json.dump({"argv": argv, "expect": c.expect,
                           "want": c.want}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
