#!/usr/bin/python3
"""Golden vectors for the engine's parity test (tests/test-parity.c).

A random-weight model is made by the C generator (tools/make-test-model.c,
deterministic for a seed), read here, and run through the Python reference
of Whisper (whisper_ref.model / whisper_ref.audio, the module the training
pipeline uses). What comes out is written to tests/data/golden/ so that the
test, which re-creates the same model at test time, can compare the engine
stage by stage without torch and without committed weights.

Regenerate everything (needs Debian's python3-torch, hence /usr/bin/python3,
and a build tree with wk-make-test-model):

    /usr/bin/python3 knots/golden.py --builddir build

Golden file format (all little endian)
--------------------------------------
    char   magic[4] = "WKGD"
    u32    version = 1
    u32    n_arrays
    u32    reserved = 0
    then n_arrays times:
        char   name[48]     NUL-padded ASCII
        u32    dtype        0 = f32, 1 = i32, 2 = u8 (strings, raw bytes)
        u32    n_dims       1..4
        u32    shape[4]     outermost dimension first (C order); unused = 1
        data               prod(shape) elements, 4 bytes each (1 for u8),
                           then zero padding to a multiple of 4 bytes

Arrays of a model file (<config>.gold):
    dims            i32[10] n_vocab n_audio_ctx n_audio_state n_audio_head
                            n_audio_layer n_text_ctx n_text_state n_text_head
                            n_text_layer n_mels
    gen_dims        u8[]    --dims argument of wk-make-test-model
    gen_type        u8[]    --type argument of wk-make-test-model
    gen_seed        i32[1]  --seed argument
    conv_type       u8[]    --type of whisperknot-convert ("keep": none given,
                            the .bin types are kept)
    bin_size        i32[2]  size of the generated .bin, low/high 32 bits
    bin_sum         i32[4]  checksums of the .bin (file_checksum below),
                            each 64-bit sum as low/high 32 bits (the test
                            says "stale golden" when the generator changed
                            instead of reporting odd diffs)
    mel_frames      i32[1]  encoder input frames: the first 2*n_audio_ctx
                            frames of the 3000-frame window of
                            jfk-mel.gold (mel, then 0.0)
    enc_rows        i32[R]  encoder output rows kept (every 37th, and the
                            last)
    enc             f32[R][n_audio_state]
    enc_row_sum     f32[n_audio_ctx]  sum of each encoder output row
    enc_row_sumsq   f32[n_audio_ctx]  sum of squares of each row
    tf_tokens       i32[T]  teacher-forced sequence
    tf_full         f32[F][n_vocab]  logits at positions 0..F-1 (F = 3, or 1
                                     for the optional configurations)
    tf_stride       i32[1]  S (7, or 17 for the optional configurations)
    tf_sub          f32[T][ceil(n_vocab/S)]  logits[t][0], [S], [2S], ...
    tf_sum          f32[T]  sum of the logits of each position
    tf_sumsq        f32[T]  sum of squares
    tf_top_id       i32[T][16]  ids of the 16 largest logits, descending
    tf_top_val      f32[T][16]
    greedy_prompt   i32[P]
    greedy_tokens   i32[N]  raw argmax decoding: no suppression, no
                            timestamp rules, not stopped at end-of-text
    greedy_margin   f32[N]  top1 - top2 logit at each step
    ref_err_*       f32[1]  max abs difference between the float32 torch
                            reference (what is stored) and an independent
                            float64 reference in this file, per stage: the
                            reference's own rounding noise

jfk-mel.gold:
    mel             f32[n_mels][M]  window 0 of Whisper's transcribe() on
                                    jfk.wav: log-mel of the audio followed
                                    by 30 s of zeros, normalized over all
                                    of it, the M = 176000 / 160 = 1100
                                    frames that hold audio; the window's
                                    other frames are 0.0
    mel_n_samples   i32[1]  samples in jfk.wav (176000)
    mel_pad_value   f32[1]  what the frames past the audio hold when the
                            audio is cut/padded to 30 s before the log-mel
                            (decode()'s convention): the clamped silence

Float64 cross-check: besides the torch module, this file holds a short
functional Whisper forward pass in float64 written independently from
whisper_ref; the two must agree (ref_err_* above), which guards the
reference itself against a slip.
"""
import argparse
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from whisper_ref import audio as ref_audio  # noqa: E402
from whisper_ref import model as ref_model  # noqa: E402

REPO = os.path.dirname(HERE)
DATA_DIR = os.environ.get("WK_SHARED_DATA",
                          os.path.join(os.path.dirname(REPO), "shared", "data"))
OUT_DIR = os.path.join(REPO, "tests", "data", "golden")

DTYPE_F32, DTYPE_I32, DTYPE_U8 = 0, 1, 2
NAME_LEN = 48

# English-only vocabulary layout (both configurations use tiny.en's).
SOT = 50257
NO_TIMESTAMPS = 50362
TIMESTAMP_BEGIN = 50363

# (file stem, --dims, --type of the generator, seed, --type of the
# converter, logits positions kept in full, stride of the logit subset)
CONFIGS = [
    ("small-test", "small-test", "f32", 1234, "keep", 3, 7),
    ("tiny", "tiny", "f32", 4321, "keep", 3, 7),
]
# f16 / quantized weights: the reference runs on the same weights
# dequantized, so these measure the engine's kernels on those types.
OPTIONAL_CONFIGS = [
    ("tiny-f16", "tiny", "f16", 4321, "keep", 1, 17),
    ("tiny-q8_0", "tiny", "q8_0", 4321, "keep", 1, 17),
    ("small-test-q4_0", "small-test", "q4_0", 1234, "keep", 1, 17),
]

ENC_ROW_STRIDE = 37
TOP_K = 16
GREEDY_STEPS = 24
TF_WORDS = [" And", " so", " my", " fellow", " Americans", ",", " ask", " not"]


# ---- golden file writer / reader ----------------------------------------

def write_golden(path, arrays):
    """arrays: list of (name, numpy array); dtype from the array."""
    out = bytearray()
    out += b"WKGD" + struct.pack("<3I", 1, len(arrays), 0)
    for name, a in arrays:
        if isinstance(a, (bytes, str)):
            a = np.frombuffer(a.encode() if isinstance(a, str) else a, dtype=np.uint8)
        a = np.asarray(a)
        if a.dtype.kind == "f":
            dt, a = DTYPE_F32, np.ascontiguousarray(a, dtype="<f4")
        elif a.dtype == np.uint8:
            dt = DTYPE_U8
        elif a.dtype.kind in "iu":
            assert a.size == 0 or (a.min() >= -2**31 and a.max() < 2**31), name
            dt, a = DTYPE_I32, np.ascontiguousarray(a, dtype="<i4")
        else:
            raise TypeError(name)
        if a.ndim == 0:
            a = a.reshape(1)
        assert 1 <= a.ndim <= 4 and len(name) < NAME_LEN, name
        shape = list(a.shape) + [1] * (4 - a.ndim)
        out += name.encode().ljust(NAME_LEN, b"\0")
        out += struct.pack("<6I", dt, a.ndim, *shape)
        data = a.tobytes()
        out += data + b"\0" * (-len(data) % 4)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out)
    os.replace(tmp, path)


def read_golden(path):
    with open(path, "rb") as f:
        b = f.read()
    assert b[:4] == b"WKGD"
    version, n, _ = struct.unpack_from("<3I", b, 4)
    assert version == 1
    off, arrays = 16, {}
    for _ in range(n):
        name = b[off:off + NAME_LEN].rstrip(b"\0").decode()
        dt, nd, *shape = struct.unpack_from("<6I", b, off + NAME_LEN)
        off += NAME_LEN + 24
        shape = shape[:nd]
        count = int(np.prod(shape))
        np_dt = {DTYPE_F32: "<f4", DTYPE_I32: "<i4", DTYPE_U8: "u1"}[dt]
        size = count * np.dtype(np_dt).itemsize
        arrays[name] = np.frombuffer(b, np_dt, count, off).reshape(shape)
        off += size + (-size % 4)
    return arrays


# ---- whisper.cpp .bin reader (with the quantized types) -----------------

HPARAMS = ["n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer",
           "n_text_ctx", "n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype"]


def _f16(u16):
    return np.asarray(u16, dtype="<u2").view("<f2").astype(np.float32)


def _dequant(ttype, raw, count):
    """ggml type id -> float32 values (reference dequantizers)."""
    if ttype == 0:
        return np.frombuffer(raw, "<f4", count).copy()
    if ttype == 1:
        return np.frombuffer(raw, "<f2", count).astype(np.float32)
    if ttype == 8:    # q8_0: f16 d, 32 x int8
        blk = np.frombuffer(raw, np.dtype([("d", "<u2"), ("qs", "i1", 32)]), count // 32)
        return (_f16(blk["d"])[:, None] * blk["qs"].astype(np.float32)).reshape(-1)
    if ttype == 2:    # q4_0: f16 d, 16 bytes: low nibbles = 0..15, high = 16..31
        blk = np.frombuffer(raw, np.dtype([("d", "<u2"), ("qs", "u1", 16)]), count // 32)
        q = np.concatenate([blk["qs"] & 15, blk["qs"] >> 4], axis=1).astype(np.float32) - 8
        return (_f16(blk["d"])[:, None] * q).reshape(-1)
    raise ValueError("unsupported ggml type %d" % ttype)


def _type_bytes(ttype, count):
    if ttype in (2, 8):
        assert count % 32 == 0
    return {0: 4 * count, 1: 2 * count, 8: count // 32 * 34, 2: count // 32 * 18}[ttype]


def read_bin(path):
    """hparams dict, mel filters (n_mels, 201), vocab list, and a state dict
    of float32 numpy arrays in OpenAI shapes (quantized weights dequantized
    with ggml's reference rules), plus the stored type of each tensor."""
    with open(path, "rb") as f:
        b = f.read()
    off = 0

    def take(fmt):
        nonlocal off
        v = struct.unpack_from(fmt, b, off)
        off += struct.calcsize(fmt)
        return v

    assert take("<I")[0] == 0x67676D6C, "not a ggml .bin"
    hp = dict(zip(HPARAMS, take("<11i")))
    n_mel, n_fft = take("<2i")
    filters = np.frombuffer(b, "<f4", n_mel * n_fft, off).reshape(n_mel, n_fft).copy()
    off += 4 * n_mel * n_fft
    vocab = []
    for _ in range(take("<i")[0]):
        ln = take("<i")[0]
        vocab.append(b[off:off + ln])
        off += ln
    sd, types = {}, {}
    while off < len(b):
        n_dims, name_len, ttype = take("<3i")
        ne = take("<%di" % n_dims)
        name = b[off:off + name_len].decode()
        off += name_len
        count = int(np.prod(ne))
        nbytes = _type_bytes(ttype, count)
        assert off + nbytes <= len(b), "truncated " + name
        a = _dequant(ttype, b[off:off + nbytes], count).reshape(tuple(reversed(ne)))
        off += nbytes
        if name in ("encoder.conv1.bias", "encoder.conv2.bias"):
            a = a.reshape(-1)
        sd[name], types[name] = a, ttype
    return hp, filters, vocab, sd, types


def file_checksum(data):
    """Two 64-bit sums over the file's little-endian u32 words w[i] (zero
    padded): sum w[i] and sum (i + 1) * w[i], both mod 2^64. Cheap in numpy
    and in C; any change to the generator's output changes them."""
    data = data + b"\0" * (-len(data) % 4)
    w = np.frombuffer(data, "<u4").astype(np.uint64)
    i = np.arange(1, len(w) + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return int(w.sum(dtype=np.uint64)), int((w * i).sum(dtype=np.uint64))


# ---- independent float64 reference ---------------------------------------

def _ln(x, w, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + 1e-5) * w + b


def _gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def _attn(p, x, xa, n_head, causal):
    q = x @ p["query.weight"].T + p["query.bias"]
    k = xa @ p["key.weight"].T
    v = xa @ p["value.weight"].T + p["value.bias"]
    n, d = q.shape
    m = k.shape[0]
    hd = d // n_head
    q = q.view(n, n_head, hd).transpose(0, 1)
    k = k.view(m, n_head, hd).transpose(0, 1)
    v = v.view(m, n_head, hd).transpose(0, 1)
    s = (q @ k.transpose(1, 2)) / math.sqrt(hd)
    if causal:
        s = s + torch.full((n, m), float("-inf"), dtype=s.dtype).triu(1)
    w = torch.softmax(s, dim=-1)
    o = (w @ v).transpose(0, 1).reshape(n, d)
    return o @ p["out.weight"].T + p["out.bias"]


def _sub(sd, prefix):
    return {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}


def _block(sd, pre, x, xa, n_head, causal):
    g = lambda name: sd[pre + name]  # noqa: E731
    h = _ln(x, g("attn_ln.weight"), g("attn_ln.bias"))
    x = x + _attn(_sub(sd, pre + "attn."), h, h, n_head, causal)
    if xa is not None:
        h = _ln(x, g("cross_attn_ln.weight"), g("cross_attn_ln.bias"))
        x = x + _attn(_sub(sd, pre + "cross_attn."), h, xa, n_head, False)
    h = _ln(x, g("mlp_ln.weight"), g("mlp_ln.bias"))
    h = _gelu(h @ g("mlp.0.weight").T + g("mlp.0.bias"))
    return x + h @ g("mlp.2.weight").T + g("mlp.2.bias")


def ref64_encoder(sd, hp, mel):
    x = _gelu(F.conv1d(mel[None], sd["encoder.conv1.weight"], sd["encoder.conv1.bias"],
                       padding=1))
    x = _gelu(F.conv1d(x, sd["encoder.conv2.weight"], sd["encoder.conv2.bias"],
                       stride=2, padding=1))[0].T
    x = x + sd["encoder.positional_embedding"]
    for i in range(hp["n_audio_layer"]):
        x = _block(sd, "encoder.blocks.%d." % i, x, None, hp["n_audio_head"], False)
    return _ln(x, sd["encoder.ln_post.weight"], sd["encoder.ln_post.bias"])


def ref64_logits(sd, hp, tokens, xa):
    t = torch.tensor(tokens)
    x = sd["decoder.token_embedding.weight"][t] + sd["decoder.positional_embedding"][:len(tokens)]
    for i in range(hp["n_text_layer"]):
        x = _block(sd, "decoder.blocks.%d." % i, x, xa, hp["n_text_head"], True)
    x = _ln(x, sd["decoder.ln.weight"], sd["decoder.ln.bias"])
    return x @ sd["decoder.token_embedding.weight"].T


def ref64_mel(samples, filters):
    x = torch.from_numpy(ref_audio.pad_or_trim(samples).astype(np.float64))
    win = torch.hann_window(400, periodic=True, dtype=torch.float64)
    st = torch.stft(x, 400, 160, window=win, center=True, pad_mode="reflect",
                    return_complex=True)
    p = st[:, :-1].abs() ** 2
    m = torch.from_numpy(filters.astype(np.float64)) @ p
    ls = torch.clamp(m, min=1e-10).log10()
    ls = torch.maximum(ls, ls.max() - 8.0)
    return (ls + 4.0) / 4.0


# ---- golden generation ----------------------------------------------------

def jfk_samples():
    return ref_audio.load_wav(os.path.join(DATA_DIR, "jfk.wav"))


def make_mel_golden(out_dir):
    """Whisper's transcribe() window 0 of jfk.wav: the log-mel of the audio
    followed by 30 s of zeros (normalized over all of it), the frames that
    hold audio (len // 160), then 0.0 up to 3000 frames."""
    samples = jfk_samples()
    n = len(samples) // ref_audio.HOP_LENGTH
    full = ref_audio.log_mel_spectrogram(samples, padding=ref_audio.N_SAMPLES).numpy()
    mel = np.ascontiguousarray(full[:, :n])
    # decode()-style window of the same audio (pad_or_trim to 30 s first):
    # the frames past the audio hold the normalized log of silence.
    padded = ref_audio.log_mel_spectrogram(ref_audio.pad_or_trim(samples)).numpy()
    assert np.array_equal(padded[:, :n - 2], mel[:, :n - 2])
    pad_value = float(padded[:, n + 2:].max())
    assert pad_value == float(padded[:, n + 2:].min())
    filters = np.load(os.path.join(DATA_DIR, "mel_filters.npz"))["mel_80"]
    m64 = ref64_mel(samples, filters).numpy()[:, :n]
    err = float(np.abs(mel - m64).max())
    print("mel: %s, f32 torch vs f64 max abs diff %.3g, silence %.6g"
          % (mel.shape, err, pad_value))
    assert err < 1e-3, err
    write_golden(os.path.join(out_dir, "jfk-mel.gold"), [
        ("mel", mel),
        ("mel_n_samples", np.array([len(samples)])),
        ("mel_pad_value", np.array([pad_value], np.float32)),
        ("ref_err_mel", np.array([err], np.float32)),
    ])
    out = np.zeros((mel.shape[0], ref_audio.N_FRAMES), np.float32)
    out[:, :n] = mel
    return out


def vocab_id(vocab, text):
    return vocab.index(text.encode())


def top_k(v, k):
    ids = np.argsort(-v, kind="stable")[:k]
    return ids, v[ids]


def make_model_golden(out_dir, stem, bin_path, gen_dims, gen_type, seed, conv_type, mel,
                      tf_full=3, tf_stride=7):
    hp, filters, vocab, sd, types = read_bin(bin_path)
    dims = ref_model.ModelDims(**{k: hp[k] for k in HPARAMS[:-1]})
    mel_ref = np.load(os.path.join(DATA_DIR, "mel_filters.npz"))["mel_%d" % hp["n_mels"]]
    assert np.array_equal(filters, mel_ref), "model filters differ from mel_filters.npz"

    m = ref_model.Whisper(dims)
    missing, unexpected = m.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()},
                                            strict=False)
    assert not unexpected and not missing, (missing, unexpected)
    m.eval()

    n_frames = 2 * hp["n_audio_ctx"]
    x_mel = torch.from_numpy(np.ascontiguousarray(mel[:, :n_frames]))
    sd64 = {k: torch.from_numpy(v.astype(np.float64)) for k, v in sd.items()}

    with torch.no_grad():
        enc = m.embed_audio(x_mel[None])[0]
        enc64 = ref64_encoder(sd64, hp, x_mel.double())
        err_enc = float((enc.double() - enc64).abs().max())

        sot_seq = [SOT, NO_TIMESTAMPS]
        tf_tokens = sot_seq + [vocab_id(vocab, w) for w in TF_WORDS] + [TIMESTAMP_BEGIN + 100]
        tf_tokens = tf_tokens[:hp["n_text_ctx"]]
        logits = m.logits(torch.tensor([tf_tokens]), enc[None])[0].numpy()
        l64 = ref64_logits(sd64, hp, tf_tokens, enc64).numpy()
        err_tf = float(np.abs(logits - l64).max())

        greedy, margins = [], []
        n_greedy = min(GREEDY_STEPS, hp["n_text_ctx"] - len(sot_seq))
        seq = list(sot_seq)
        for _ in range(n_greedy):
            lg = m.logits(torch.tensor([seq]), enc[None])[0, -1].numpy()
            ids, vals = top_k(lg, 2)
            greedy.append(int(ids[0]))
            margins.append(float(vals[0] - vals[1]))
            seq.append(int(ids[0]))
        l64g = ref64_logits(sd64, hp, seq[:-1], enc64).numpy()
        err_greedy = float(np.abs(
            m.logits(torch.tensor([seq[:-1]]), enc[None])[0].numpy() - l64g).max())
        greedy64 = [int(np.argmax(l64g[i])) for i in range(len(sot_seq) - 1, len(seq) - 1)]

    enc = enc.numpy()
    rows = list(range(0, hp["n_audio_ctx"], ENC_ROW_STRIDE))
    if rows[-1] != hp["n_audio_ctx"] - 1:
        rows.append(hp["n_audio_ctx"] - 1)
    enc64n = enc64.numpy()
    T = len(tf_tokens)
    top_ids = np.zeros((T, TOP_K), np.int32)
    top_vals = np.zeros((T, TOP_K), np.float32)
    for t in range(T):
        top_ids[t], top_vals[t] = top_k(logits[t], TOP_K)
    l64d = l64.astype(np.float64)

    with open(bin_path, "rb") as f:
        data = f.read()
    s1, s2 = file_checksum(data)
    size = len(data)

    print("%s: dims %s" % (stem, dims.to_dict()))
    print("  f32 torch vs f64: encoder %.3g, tf logits %.3g, greedy logits %.3g"
          % (err_enc, err_tf, err_greedy))
    print("  encoder |x| max %.3g, logits std %.3g, min greedy margin %.3g"
          % (np.abs(enc).max(), logits.std(), min(margins)))
    print("  greedy tokens %s" % greedy)
    for t, g in enumerate(greedy):
        if g != greedy64[t]:
            print("  note: f64 greedy differs at step %d (margin %.3g)" % (t, margins[t]))
            break
    assert err_enc < 1e-3 and err_tf < 1e-3, "reference disagrees with its f64 cross-check"

    write_golden(os.path.join(out_dir, stem + ".gold"), [
        ("dims", np.array([hp[k] for k in HPARAMS[:-1]])),
        ("gen_dims", gen_dims),
        ("gen_type", gen_type),
        ("gen_seed", np.array([seed])),
        ("conv_type", conv_type),
        ("bin_size", np.array([size & 0xFFFFFFFF, size >> 32], np.uint32).view(np.int32)),
        ("bin_sum", np.array([s1 & 0xFFFFFFFF, s1 >> 32, s2 & 0xFFFFFFFF, s2 >> 32],
                             np.uint32).view(np.int32)),
        ("mel_frames", np.array([n_frames])),
        ("enc_rows", np.array(rows)),
        ("enc", enc[rows]),
        ("enc_row_sum", enc64n.sum(1)),
        ("enc_row_sumsq", (enc64n ** 2).sum(1)),
        ("tf_tokens", np.array(tf_tokens)),
        ("tf_full", logits[:tf_full]),
        ("tf_stride", np.array([tf_stride])),
        ("tf_sub", logits[:, ::tf_stride]),
        ("tf_sum", l64d.sum(1)),
        ("tf_sumsq", (l64d ** 2).sum(1)),
        ("tf_top_id", top_ids),
        ("tf_top_val", top_vals),
        ("greedy_prompt", np.array(sot_seq)),
        ("greedy_tokens", np.array(greedy)),
        ("greedy_margin", np.array(margins, np.float32)),
        ("ref_err_enc", np.array([err_enc], np.float32)),
        ("ref_err_logits", np.array([max(err_tf, err_greedy)], np.float32)),
    ])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--builddir", default=os.path.join(REPO, "build"),
                    help="meson build tree with tools/wk-make-test-model")
    ap.add_argument("--out", default=OUT_DIR)
    ap.add_argument("--only", action="append", help="config stem(s) to regenerate")
    ap.add_argument("--optional", action="store_true",
                    help="also the f16/q8_0/q4_0 configurations")
    args = ap.parse_args()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    gen = os.path.join(args.builddir, "tools", "wk-make-test-model")
    vocab_bin = os.path.join(DATA_DIR, "for-tests-ggml-tiny.en.bin")
    os.makedirs(args.out, exist_ok=True)
    mel = make_mel_golden(args.out)
    configs = CONFIGS + (OPTIONAL_CONFIGS if args.optional else [])
    with tempfile.TemporaryDirectory() as tmp:
        for stem, gdims, gtype, seed, ctype, tf_full, tf_stride in configs:
            if args.only and stem not in args.only:
                continue
            bin_path = os.path.join(tmp, stem + ".bin")
            subprocess.run([gen, "--dims", gdims, "--type", gtype, "--seed", str(seed),
                            "--vocab", vocab_bin, bin_path], check=True)
            make_model_golden(args.out, stem, bin_path, gdims, gtype, seed, ctype, mel,
                              tf_full, tf_stride)
            os.unlink(bin_path)


if __name__ == "__main__":
    main()
