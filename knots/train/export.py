#!/usr/bin/python3
"""Export trained weights to whisper.cpp's legacy ggml .bin (f32 or f16).

  export.py [--ckpt PATH] --out model.bin [--ftype f16|f32] [--check]

--ckpt is a torch checkpoint (knots/work/ckpt/last.pt, the f16 weights-only
knots/work/model-f16.pt that train.py's save-committed hook writes, average.py's)
or a knot (knotio.py reads it back, dequantized as the engine does: exporting the
shipped q8_0 knot gives its q8_0 values in f16, not the f16 weights it was made
from). It defaults to knots/work/ckpt/last.pt if present, else the committed
knots/model/default.knot. The .bin is what whisper.cpp loads and what
`whisperknot-convert --type q8_0 in.bin out.knot` turns into a knot.
--check reads the file back, rebuilds the torch model from it and greedy-decodes
jfk.wav (and the first held-out utterances if generated) from both models.
"""
import argparse
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
KNOTS = os.path.dirname(HERE)
sys.path.insert(0, KNOTS)
sys.path.insert(0, HERE)
from whisper_ref import audio as wa  # noqa: E402
from whisper_ref import ggml  # noqa: E402
from whisper_ref import model as wm  # noqa: E402
from whisper_ref import tokenizer as wt  # noqa: E402
import knotio  # noqa: E402


def load_model(path):
    """(model, checkpoint dict) of a torch checkpoint or a knot (+ its side file)."""
    ck = knotio.load_checkpoint(path, warn=lambda m: print("note: " + m, file=sys.stderr))
    dims = wm.ModelDims(**ck["dims"])
    m = wm.Whisper(dims)
    sd = ck.get("model") or ck.get("model_f16")
    sd = {k: v.float() for k, v in sd.items()}
    sd["encoder.positional_embedding"] = m.encoder.positional_embedding
    m.load_state_dict(sd)
    m.eval()
    return m, ck


def model_from_ggml(path):
    r = ggml.read_ggml(path)
    hp = dict(r["hparams"])
    hp.pop("ftype")
    m = wm.Whisper(wm.ModelDims(**hp))
    sd = {k: torch.from_numpy(v) for k, v in ggml.tensors_to_state_dict(r["tensors"]).items()}
    m.load_state_dict(sd)
    m.eval()
    return m


def default_ckpt():
    last = os.path.join(KNOTS, "work", "ckpt", "last.pt")
    if os.path.exists(last):
        return last
    return knotio.DEFAULT_KNOT


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=None)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ftype", choices=["f16", "f32"], default="f16")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ck_path = args.ckpt or default_ckpt()
    model, ck = load_model(ck_path)
    sd = wm.state_dict_for_export(model)
    ggml.write_ggml(args.out, model.dims.to_dict(), sd, use_f16=(args.ftype == "f16"))
    print("wrote %s (%d bytes) from %s, step %s" % (args.out, os.path.getsize(args.out), ck_path,
                                                    ck.get("step")))
    if args.check:
        from train import greedy_decode
        tok = wt.get_tokenizer()
        m2 = model_from_ggml(args.out)
        x = wa.load_wav(os.path.join(wa.DATA_DIR, "jfk.wav"))
        clips = [("jfk", x)]
        from train import load_eval_set
        for name in ("trainvoices", "heldout-rms"):
            d = load_eval_set(name)
            if d:
                clips += [(name, d[0][0]), (name, d[1][0])]
        for name, a in clips:
            mel = wa.log_mel_spectrogram(wa.pad_or_trim(a))
            for ts in (False, True):
                h1 = greedy_decode(model, mel, timestamps=ts)
                h2 = greedy_decode(m2, mel, timestamps=ts)
                print("%-12s ts=%d torch: %s" % (name, ts, tok.decode_with_timestamps(h1)))
                if h1 != h2:
                    print("%-12s ts=%d ggml : %s" % (name, ts, tok.decode_with_timestamps(h2)))
                else:
                    print("%-12s ts=%d ggml : identical" % (name, ts))


if __name__ == "__main__":
    main()
