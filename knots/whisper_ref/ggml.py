"""whisper.cpp legacy ggml model files (.bin): writer and reader.

Layout (all little endian):
  u32 magic 0x67676d6c
  i32 x 11 hparams: n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer,
                    n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype
  i32 n_mel, i32 n_fft(=201), f32[n_mel*n_fft] mel filterbank (row-major)
  i32 n_tokens, then per token: i32 len, bytes
  tensors until EOF: i32 n_dims, i32 name_len, i32 type (0 f32, 1 f16),
                     i32 ne[n_dims] (ggml order: fastest dimension first),
                     name bytes, raw data
In f16 files, 1-D tensors, the conv biases (stored as [n, 1]) and both
positional embeddings stay f32, as in whisper.cpp's converter.
"""
import os
import struct

import numpy as np

MAGIC = 0x67676D6C
HPARAM_NAMES = ["n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer",
                "n_text_ctx", "n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype"]
DATA_DIR = os.environ.get("WK_SHARED_DATA", "/work/shared/data")
F32_NAMES = {"encoder.conv1.bias", "encoder.conv2.bias",
             "encoder.positional_embedding", "decoder.positional_embedding"}
SKIP_NAMES = {"decoder.mask"}


def _read_exact(f, n):
    b = f.read(n)
    if len(b) != n:
        raise ValueError("truncated ggml file")
    return b


def read_ggml(path, load_tensors=True):
    """Returns dict(hparams=dict, mel_filters=np (n_mel, n_fft), vocab=list[bytes],
    tensors=dict name -> np array in torch (reversed-ne) shape, types=dict name -> 0/1)."""
    out = {"tensors": {}, "types": {}}
    with open(path, "rb") as f:
        magic, = struct.unpack("<I", _read_exact(f, 4))
        if magic != MAGIC:
            raise ValueError("bad magic 0x%08x" % magic)
        hp = struct.unpack("<11i", _read_exact(f, 44))
        out["hparams"] = dict(zip(HPARAM_NAMES, hp))
        n_mel, n_fft = struct.unpack("<2i", _read_exact(f, 8))
        if not (0 < n_mel <= 1024 and 0 < n_fft <= 4096):
            raise ValueError("bad mel filter dims")
        out["mel_filters"] = np.frombuffer(_read_exact(f, 4 * n_mel * n_fft),
                                           dtype="<f4").reshape(n_mel, n_fft).copy()
        n_tok, = struct.unpack("<i", _read_exact(f, 4))
        if not (0 <= n_tok <= 1 << 20):
            raise ValueError("bad vocab size")
        vocab = []
        for _ in range(n_tok):
            ln, = struct.unpack("<i", _read_exact(f, 4))
            if not (0 <= ln <= 1 << 16):
                raise ValueError("bad token length")
            vocab.append(_read_exact(f, ln))
        out["vocab"] = vocab
        while True:
            head = f.read(12)
            if len(head) == 0:
                break
            if len(head) != 12:
                raise ValueError("truncated tensor header")
            n_dims, name_len, ttype = struct.unpack("<3i", head)
            if not (1 <= n_dims <= 4 and 0 < name_len < 4096 and ttype in (0, 1)):
                raise ValueError("bad tensor header")
            ne = struct.unpack("<%di" % n_dims, _read_exact(f, 4 * n_dims))
            name = _read_exact(f, name_len).decode("utf-8")
            count = int(np.prod(ne))
            nbytes = count * (4 if ttype == 0 else 2)
            if load_tensors:
                dt = "<f4" if ttype == 0 else "<f2"
                arr = np.frombuffer(_read_exact(f, nbytes), dtype=dt).reshape(tuple(reversed(ne)))
                out["tensors"][name] = arr.copy()
            else:
                f.seek(nbytes, 1)
                out["tensors"][name] = tuple(reversed(ne))
            out["types"][name] = ttype
    return out


def reference_vocab(path=None):
    """The 50257 token byte strings of whisper.cpp's English models.

    Taken from gpt2.tiktoken (raw bytes, as whisper.cpp's converter writes
    them), not from for-tests-ggml-tiny.en.bin, whose vocabulary replaced the
    bytes of 344 tokens that are not valid UTF-8 on their own with U+FFFD.
    With path, the vocabulary of that .bin file is read instead."""
    if path:
        return read_ggml(path, load_tensors=False)["vocab"]
    from .tokenizer import Tokenizer
    return Tokenizer().ggml_vocab()


def write_ggml(path, dims, tensors, use_f16=True, mel_filters=None, vocab=None, raw=None,
               ftype=None):
    """Write a whisper.cpp .bin.

    dims: dict with the 10 model hparams (ModelDims.to_dict()).
    tensors: ordered dict name -> numpy array (OpenAI state_dict shapes).
    raw: {name: (ggml type, bytes)}: tensors written as those bytes of that
    type (a quantized type: rows of blocks along the first ggml dimension),
    with the shape of tensors[name].
    ftype: the header's ftype (default 1 with use_f16, else 0); with
    quantized tensors, ggml's quantization version 2 x 1000 + its file type,
    e.g. 2002 for mostly q4_0.
    """
    raw = raw or {}
    if mel_filters is None:
        with np.load(os.path.join(DATA_DIR, "mel_filters.npz")) as f:
            mel_filters = np.asarray(f["mel_%d" % dims["n_mels"]], dtype=np.float32)
    if vocab is None:
        vocab = reference_vocab()
    if ftype is None:
        ftype = 1 if use_f16 else 0
    hp = [dims[k] for k in HPARAM_NAMES[:-1]] + [ftype]
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<I", MAGIC))
        f.write(struct.pack("<11i", *hp))
        mf = np.ascontiguousarray(mel_filters, dtype="<f4")
        f.write(struct.pack("<2i", mf.shape[0], mf.shape[1]))
        f.write(mf.tobytes())
        f.write(struct.pack("<i", len(vocab)))
        for tok in vocab:
            f.write(struct.pack("<i", len(tok)))
            f.write(tok)
        for name, arr in tensors.items():
            if name in SKIP_NAMES:
                continue
            data = np.asarray(arr, dtype=np.float32).squeeze()
            if name in ("encoder.conv1.bias", "encoder.conv2.bias"):
                data = data.reshape(data.shape[0], 1)
            n_dims = data.ndim
            ttype = 0
            if use_f16 and n_dims >= 2 and name not in F32_NAMES:
                ttype = 1
            if name in raw:
                ttype, payload = raw[name]
            else:
                payload = np.ascontiguousarray(data, dtype="<f2" if ttype else "<f4").tobytes()
            nb = name.encode("utf-8")
            f.write(struct.pack("<3i", n_dims, len(nb), ttype))
            f.write(struct.pack("<%di" % n_dims, *reversed(data.shape)))
            f.write(nb)
            f.write(payload)
    os.replace(tmp, path)


def tensors_to_state_dict(tensors):
    """Inverse of the writer's reshapes: name -> float32 array in OpenAI shapes."""
    sd = {}
    for name, arr in tensors.items():
        a = np.asarray(arr, dtype=np.float32)
        if name in ("encoder.conv1.bias", "encoder.conv2.bias"):
            a = a.reshape(-1)
        sd[name] = a
    return sd
