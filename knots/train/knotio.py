#!/usr/bin/python3
"""Read a knot (knots/FORMAT.md: a GGUF v3 file) back into torch.

  knotio.py info [KNOT] [--state F]       dimensions, tensor types and sizes, whether
                                           the side file goes with this knot
  knotio.py side CKPT [--out F]            write the side file (CTC head + counters,
                                           checkpoint/train-state.pt) from a torch checkpoint
  knotio.py compare KNOT CKPT [--utts N]   per-tensor max |knot - ckpt| against the
                                           quantization step, and greedy text of both
                                           (CKPT: a torch checkpoint or another knot)

The tensors come back under OpenAI Whisper's state_dict names and shapes (those of
knots/whisper_ref/model.py), dequantized exactly as the engine does
(engine/wk-types.c: f16 -> f32 bit for bit, q8_0 `(float) qs[i] * d`, q4_0
`(float) ((qs & 15) - 8) * d`), so training can resume from the shipped model
without a committed f16 checkpoint: a q8_0 weight is off by at most about half a
quantization step (amax/127 of its block of 32), far below what training changes.

encoder.positional_embedding is the fixed sinusoid table; a knot holds it
quantized, and model_from_knot() keeps the model's own exact table instead.
"""
import argparse
import mmap
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
KNOTS = os.path.dirname(HERE)
DEFAULT_KNOT = os.path.join(KNOTS, "model", "default.knot")

# GGUF value types -> struct codes (8 string, 9 array handled apart)
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
           10: "<Q", 11: "<q", 12: "<d"}
_NP = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1",
       10: "<u8", 11: "<i8", 12: "<f8"}
QK = 32
TYPES = {0: "f32", 1: "f16", 2: "q4_0", 8: "q8_0"}
# (block elements, block bytes)
BLOCK = {0: (1, 4), 1: (1, 2), 2: (QK, 18), 8: (QK, 34)}


class KnotError(ValueError):
    pass


class _Reader:
    def __init__(self, buf):
        self.buf = buf
        self.pos = 0

    def take(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            raise KnotError("truncated at byte %d (wanted %d more)" % (self.pos, n))
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        return bytes(self.take(self.unpack("<Q")))

    def value(self, vtype):
        if vtype in _SCALAR:
            return self.unpack(_SCALAR[vtype])
        if vtype == 8:
            return self.string()
        if vtype == 9:
            etype, n = self.unpack("<I"), self.unpack("<Q")
            if etype in _NP:
                size = np.dtype(_NP[etype]).itemsize
                return np.frombuffer(self.take(n * size), dtype=_NP[etype]).copy()
            return [self.value(etype) for _ in range(n)]
        raise KnotError("unknown metadata value type %d" % vtype)


def _meta_value(v):
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            return v
    return v


def read_knot(path, keep_tokens=False):
    """(metadata dict, {name: (ggml type id, ne tuple, raw bytes)}) of a knot.

    The token strings (tokenizer.ggml.tokens) are dropped unless keep_tokens."""
    with open(path, "rb") as f:
        buf = f.read()
    r = _Reader(memoryview(buf))
    if bytes(r.take(4)) != b"GGUF":
        raise KnotError("%s: not a knot (no GGUF magic)" % path)
    version = r.unpack("<I")
    if version != 3:
        raise KnotError("%s: GGUF version %d, not 3" % (path, version))
    n_tensors, n_kv = r.unpack("<Q"), r.unpack("<Q")
    meta = {}
    for _ in range(n_kv):
        key = r.string().decode("utf-8")
        vtype = r.unpack("<I")
        v = r.value(vtype)
        if key == "tokenizer.ggml.tokens" and not keep_tokens:
            meta[key] = len(v)
            continue
        meta[key] = _meta_value(v)
    infos = []
    for _ in range(n_tensors):
        name = r.string().decode("utf-8")
        n_dims = r.unpack("<I")
        ne = tuple(r.unpack("<Q") for _ in range(n_dims))
        ttype, off = r.unpack("<I"), r.unpack("<Q")
        infos.append((name, ne, ttype, off))
    align = int(meta.get("general.alignment", 32))
    data0 = (r.pos + align - 1) // align * align
    tensors = {}
    for name, ne, ttype, off in infos:
        if ttype not in BLOCK:
            raise KnotError("%s: tensor %s has type %d (a knot holds f32, f16, q8_0, q4_0)"
                            % (path, name, ttype))
        be, bb = BLOCK[ttype]
        if ne[0] % be:
            raise KnotError("%s: %s: row of %d is not whole blocks" % (path, name, ne[0]))
        nbytes = ne[0] // be * bb * int(np.prod(ne[1:], dtype=np.int64))
        start = data0 + off
        if start + nbytes > len(buf):
            raise KnotError("%s: tensor %s runs past the end of the file" % (path, name))
        tensors[name] = (ttype, ne, buf[start:start + nbytes])
    return meta, tensors


def dequantize(ttype, ne, raw):
    """f32 numpy array in ggml order reversed (numpy shape = ne[::-1]), as the engine
    dequantizes: d (f16) -> f32 exactly, element = (float) q * d in f32."""
    shape = tuple(reversed(ne))
    if ttype == 0:
        return np.frombuffer(raw, dtype="<f4").reshape(shape).copy()
    if ttype == 1:
        return np.frombuffer(raw, dtype="<f2").astype(np.float32).reshape(shape)
    nblk = len(raw) // BLOCK[ttype][1]
    if ttype == 8:
        blk = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "i1", (QK,))]), count=nblk)
        q = blk["qs"].astype(np.float32)
    else:
        blk = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))]),
                            count=nblk)
        lo = (blk["qs"] & 15).astype(np.int16) - 8
        hi = (blk["qs"] >> 4).astype(np.int16) - 8
        q = np.concatenate([lo, hi], axis=1).astype(np.float32)
    d = blk["d"].astype(np.float32)[:, None]
    return (q * d).astype(np.float32).reshape(shape)


def block_scales(ttype, raw):
    """The per-block scale d (f32) of a q8_0/q4_0 tensor, None for f32/f16."""
    if ttype not in (2, 8):
        return None
    nblk = len(raw) // BLOCK[ttype][1]
    bb = BLOCK[ttype][1]
    blk = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("rest", "u1", (bb - 2,))]),
                        count=nblk)
    return blk["d"].astype(np.float32)


def dims_from_meta(meta):
    """ModelDims keyword arguments from a knot's whisper.* metadata."""
    keys = ("n_mels", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer",
            "n_vocab", "n_text_ctx", "n_text_state", "n_text_head", "n_text_layer")
    missing = [k for k in keys if "whisper." + k not in meta]
    if missing:
        raise KnotError("knot lacks metadata %s" % ", ".join("whisper." + k for k in missing))
    return {k: int(meta["whisper." + k]) for k in keys}


def _torch_shape(name, arr, dims):
    """A knot tensor (numpy shape ne[::-1]) in OpenAI's shape."""
    if name in ("encoder.conv1.weight", "encoder.conv2.weight"):
        n_in = dims["n_mels"] if name == "encoder.conv1.weight" else dims["n_audio_state"]
        # {3, in, out} or flattened {3 in, out}: taps of a channel contiguous
        return arr.reshape(dims["n_audio_state"], n_in, 3)
    if name in ("encoder.conv1.bias", "encoder.conv2.bias"):
        return arr.reshape(-1)
    return arr


def knot_state_dict(path, with_scales=False):
    """(dims dict, {OpenAI name: float32 numpy array}, meta[, {name: block scales}])."""
    meta, tensors = read_knot(path)
    if meta.get("general.architecture") not in (None, "whisper"):
        raise KnotError("%s: architecture %r, not whisper" % (path, meta["general.architecture"]))
    dims = dims_from_meta(meta)
    sd, scales = {}, {}
    for name, (ttype, ne, raw) in tensors.items():
        sd[name] = _torch_shape(name, dequantize(ttype, ne, raw), dims)
        if with_scales:
            scales[name] = (TYPES[ttype], block_scales(ttype, raw))
    return (dims, sd, meta, scales) if with_scales else (dims, sd, meta)


def model_from_knot(path, keep_knot_sinusoids=False):
    """(wm.Whisper in eval mode with the knot's weights, meta)."""
    import torch
    sys.path.insert(0, KNOTS)
    from whisper_ref import model as wm
    dims, sd, meta = knot_state_dict(path)
    m = wm.Whisper(wm.ModelDims(**dims))
    tsd = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items()}
    if not keep_knot_sinusoids:
        tsd["encoder.positional_embedding"] = m.encoder.positional_embedding
    missing, unexpected = m.load_state_dict(tsd, strict=False)
    if missing:
        raise KnotError("%s: tensors missing: %s" % (path, ", ".join(missing)))
    # extra tensors are ignored, as the engine does
    m.eval()
    return m, meta


def is_knot(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False

# ------------------------------------------------- the training side file ----
# What a knot lacks to resume training: the auxiliary CTC head (a Linear(d, 29),
# never exported) and the training counters. Committed beside the knot.

TRAIN_STATE = os.path.join(HERE, "checkpoint", "train-state.pt")
COUNTERS = ("step", "windows_seen", "train_seconds", "audio_h")
# tensors that a knot stores as f32 (1-D), so their f16 values survive the export
# (f16 .pt -> ggml .bin -> knot) unchanged: they tie a side file to its weights
FINGERPRINT_TENSORS = ("encoder.ln_post.weight", "encoder.ln_post.bias",
                       "decoder.ln.weight", "decoder.ln.bias",
                       "encoder.blocks.0.attn_ln.weight", "decoder.blocks.0.attn_ln.weight")


def fingerprint(sd):
    """A short hash of the f16 values of FINGERPRINT_TENSORS in a state_dict (torch
    tensors or numpy arrays): the same for a checkpoint and the knot made from it."""
    import hashlib
    h = hashlib.sha256()
    for name in FINGERPRINT_TENSORS:
        v = sd[name]
        v = v.detach().float().cpu().numpy() if hasattr(v, "detach") else np.asarray(v)
        h.update(name.encode())
        h.update(np.ascontiguousarray(v.astype(np.float16)).tobytes())
    return h.hexdigest()[:16]


def write_train_state(path, model_sd, ctc_head_sd, counters, dims, source=None, extra=None):
    """Write the side file: CTC head in f16, counters, the dims and the fingerprint of
    the weights it goes with (model_sd). A few tens of KB."""
    import torch
    st = {"format": "whisperknot-train-state-1",
          "ctc_head": {k: v.detach().half().cpu().clone() for k, v in ctc_head_sd.items()}
          if ctc_head_sd else None,
          "dims": dict(dims), "fingerprint": fingerprint(model_sd), "source": source}
    for k in COUNTERS:
        if counters.get(k) is not None:
            st[k] = counters[k]
    st.update(extra or {})
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    torch.save(st, path + ".tmp")
    os.replace(path + ".tmp", path)
    return st


def read_train_state(path):
    import torch
    st = torch.load(path, map_location="cpu", weights_only=False)
    if st.get("format") != "whisperknot-train-state-1":
        raise KnotError("%s: not a whisperknot train-state file" % path)
    return st


def load_checkpoint(path, state=None, warn=None):
    """A checkpoint as a dict in the committed format, from a knot or a torch .pt.

    A torch .pt (knots/work/ckpt/last.pt, an f16 weights-only one) is returned as
    torch.load gives it. A knot becomes {"model_f16": f32 weights (no
    encoder.positional_embedding), "dims", "knot": path} plus, from the side file
    `state` (default: the committed checkpoint/train-state.pt), "ctc_head" and the
    counters, with "train_state" (its path) and "train_state_matches" (whether its
    fingerprint is that of the knot's weights). A side file of other dimensions, or
    none, leaves those out (step 0). warn(msg) is told of a mismatch."""
    import torch
    if not is_knot(path):
        return torch.load(path, map_location="cpu", weights_only=False)
    dims, sd, meta = knot_state_dict(path)
    sd.pop("encoder.positional_embedding", None)
    ck = {"model_f16": {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items()},
          "dims": dims, "knot": path, "step": 0}
    state = state or TRAIN_STATE
    if not os.path.exists(state):
        if warn:
            warn("%s: no side file %s: no CTC head, counters from 0" % (path, state))
        return ck
    st = read_train_state(state)
    if st.get("dims") != dims:
        if warn:
            warn("%s: side file %s is for dimensions %s, not the knot's %s: not used"
                 % (path, state, st.get("dims"), dims))
        return ck
    ck["train_state"] = state
    ck["train_state_matches"] = st.get("fingerprint") == fingerprint(ck["model_f16"])
    if not ck["train_state_matches"] and warn:
        warn("%s: side file %s (step %s) was written for other weights than this knot's "
             "(fingerprint %s, knot %s); its CTC head and counters are used anyway"
             % (path, state, st.get("step"), st.get("fingerprint"), fingerprint(ck["model_f16"])))
    if st.get("ctc_head"):
        ck["ctc_head"] = st["ctc_head"]
    for k in COUNTERS + ("averaged",):
        if k in st:
            ck[k] = st[k]
    return ck


def checkpoint_info(path, state=None):
    """step, windows_seen, train_seconds of a checkpoint or knot (+ side file)."""
    ck = load_checkpoint(path, state)
    return {k: ck.get(k) for k in ("step", "windows_seen", "train_seconds")}


# ------------------------------------------------------------------- CLI ----


def cmd_info(args):
    meta, tensors = read_knot(args.knot)
    dims = dims_from_meta(meta)
    print("%s: %s" % (args.knot, dims))
    for k in sorted(meta):
        if not k.startswith("whisper.") and k != "whisper.mel_filters":
            print("  %s = %s" % (k, meta[k]))
    count = {}
    for name, (ttype, ne, raw) in tensors.items():
        c = count.setdefault(TYPES[ttype], [0, 0])
        c[0] += 1
        c[1] += len(raw)
    for t, (n, b) in sorted(count.items()):
        print("  %-5s %3d tensors %10d bytes" % (t, n, b))
    state = args.state or TRAIN_STATE
    if os.path.exists(state):
        ck = load_checkpoint(args.knot, state)
        print("side file %s: step %s, windows_seen %s, %s" % (
            state, ck.get("step"), ck.get("windows_seen"),
            "matches this knot" if ck.get("train_state_matches") else
            "does NOT match this knot" if "train_state" in ck else "not usable (dims)"))
    return 0


def cmd_side(args):
    """Side file from a torch checkpoint (last.pt, an f16 weights-only .pt, average.py's)."""
    import torch
    ck = torch.load(args.ckpt, map_location="cpu", weights_only=False)
    sd = ck.get("model") or ck.get("model_f16")
    if sd is None or "dims" not in ck:
        raise SystemExit("%s: no weights or dims in this checkpoint" % args.ckpt)
    extra = {"averaged": ck["averaged"]} if "averaged" in ck else None
    st = write_train_state(args.out, sd, ck.get("ctc_head"), ck, ck["dims"],
                           source="%s (step %s)" % (os.path.basename(args.ckpt), ck.get("step")),
                           extra=extra)
    print("wrote %s (%d bytes): step %s, fingerprint %s%s" % (
        args.out, os.path.getsize(args.out), st.get("step"), st["fingerprint"],
        "" if st["ctc_head"] else ", no CTC head"))
    return 0


# the most a knot's weight may differ from the value it was made from, per type:
# q8_0: round to nearest, 0.5 d, plus |q| * |d - f16(d)| <= 127 * 2^-11 d = 0.062 d;
# q4_0: 0.5 |d| plus 8 * 2^-11 |d|, but an element of the block's largest magnitude with
# the sign opposite to the one that set d clamps from 16 to 15: 1.0 |d| (diff / |d|);
# f16: half an f16 ulp, 2^-11 of the value (relative; 0 from an f16 checkpoint);
# f32: exact
BOUND = {"q8_0": 0.5 + 127 * 2.0 ** -11, "q4_0": 1.0 + 8 * 2.0 ** -11, "f16": 2.0 ** -11,
         "f32": 0.0}


def cmd_compare(args):
    import torch
    dims, sd, meta, scales = knot_state_dict(args.knot, with_scales=True)
    ck = load_checkpoint(args.ckpt)  # a torch checkpoint, or another knot
    ref = ck.get("model") or ck.get("model_f16")
    worst = {}
    ok = True
    print("%-44s %-5s %11s %11s %9s" % ("tensor", "type", "max|diff|", "max |d|", "measure"))
    for name in sorted(ref):
        if name == "encoder.positional_embedding":
            continue
        r = ref[name].float().numpy()
        if name not in sd:
            print("%-44s missing from the knot" % name)
            ok = False
            continue
        k = sd[name]
        if k.shape != r.shape:
            print("%-44s shape %s in the knot, %s in the checkpoint" % (name, k.shape, r.shape))
            ok = False
            continue
        diff = np.abs(k - r)
        t, d = scales[name]
        if d is not None:
            # against each element's own block scale (q4_0's d is signed)
            ad = np.abs(d)[:, None]
            per = np.where(ad > 0, diff.reshape(-1, QK) / np.where(ad > 0, ad, 1),
                           np.where(diff.reshape(-1, QK) > 0, np.inf, 0))
            m, dmax = float(per.max()), float(np.abs(d).max())
        else:
            # relative (f16) or exact (f32)
            rel = np.where(r != 0, diff / np.where(r != 0, np.abs(r), 1),
                           np.where(diff > 0, np.inf, 0))
            m, dmax = float(rel.max()), float("nan")
        worst[t] = max(worst.get(t, 0.0), m)
        ok = ok and m <= BOUND[t]
        print("%-44s %-5s %11.3g %11.3g %9.4g%s" % (name, t, diff.max(), dmax, m,
                                                 "" if m <= BOUND[t] else "  OVER"))
    for t, m in sorted(worst.items()):
        print("worst %-5s %s: %.4g (bound %.4g)" % (
            t, "max|diff| / |block scale d|" if t in ("q8_0", "q4_0") else
            "max|diff| / |value|", m, BOUND[t]))
    print("all tensors within their type's bound" if ok else "SOME TENSORS OUT OF BOUND")
    if args.utts:
        sys.path.insert(0, HERE)
        import train
        from export import load_model
        tok = train.wt.get_tokenizer()
        m_ck, _ = load_model(args.ckpt)
        m_kn, _ = model_from_knot(args.knot)
        same = n = 0
        for set_name in args.sets.split(","):
            data = train.load_eval_set(set_name)
            for audio, reftext in (data or [])[:args.utts]:
                mel = train.wa.log_mel_spectrogram(train.wa.pad_or_trim(audio))
                a = tok.decode(train.greedy_decode(m_ck, mel))
                b = tok.decode(train.greedy_decode(m_kn, mel))
                n += 1
                same += a == b
                print("[%s] %s\n   ckpt: %s\n   knot: %s" % (
                    set_name, "same" if a == b else "DIFFERENT", a.strip(), b.strip()),
                    flush=True)
        print("greedy text identical on %d of %d utterances" % (same, n))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("info")
    p.add_argument("knot", nargs="?", default=DEFAULT_KNOT)
    p.add_argument("--state", default=None, help="side file (default %s)" % TRAIN_STATE)
    p = sub.add_parser("side", help="write the side file from a torch checkpoint")
    p.add_argument("ckpt")
    p.add_argument("--out", default=TRAIN_STATE)
    p = sub.add_parser("compare")
    p.add_argument("knot")
    p.add_argument("ckpt")
    p.add_argument("--utts", type=int, default=0, help="utterances per set to decode with both")
    p.add_argument("--sets", default="trainvoices,heldout-rms,dev-real-lj,test-jfk")
    p.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    if args.cmd == "info":
        return cmd_info(args)
    if args.cmd == "side":
        return cmd_side(args)
    import torch
    torch.set_num_threads(args.threads)
    return cmd_compare(args)


if __name__ == "__main__":
    sys.exit(main())
