#!/usr/bin/python3
"""Average the weights of several checkpoints of one training run.

  average.py --out avg.pt CKPT [CKPT ...] [--weights W ...]

Each CKPT is a work checkpoint (knots/work/ckpt/last.pt, with "model"), an f16
weights-only one (knots/work/model-f16.pt, with "model_f16") or a knot (read by
knotio.py with the side file checkpoint/train-state.pt: CTC head, counters); all
must have the same dimensions. The result is an f16 weights-only checkpoint (f16
weights and CTC head, "step" and training history of the last input,
"averaged" listing the inputs and weights) that export.py, eval.py --ckpt and
train.py --init-knot read; `knotio.py side OUT` writes its side file. Write it
into knots/work/ (not tracked). Averaging checkpoints taken along one run (not of unrelated
runs) smooths out the noise of the last steps; judge the result through the
engine (eval.py) on the development sets, like any model.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import knotio  # noqa: E402


def state_dict(ck):
    sd = ck.get("model") or ck.get("model_f16")
    if sd is None:
        raise SystemExit("no weights in checkpoint (neither 'model' nor 'model_f16')")
    sd = {k: v for k, v in sd.items() if k != "encoder.positional_embedding"}
    # the auxiliary CTC head (never exported) is averaged too, so that
    # training can resume from the result with it
    for k, v in (ck.get("ctc_head") or {}).items():
        sd["ctc_head." + k] = v
    return sd


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ckpts", nargs="+")
    ap.add_argument("--weights", type=float, nargs="+",
                    help="relative weight of each checkpoint (default: equal)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    w = args.weights or [1.0] * len(args.ckpts)
    if len(w) != len(args.ckpts) or min(w) < 0 or sum(w) <= 0:
        raise SystemExit("--weights needs one non-negative weight per checkpoint, not all zero")
    w = [x / sum(w) for x in w]

    acc = None
    dims = None
    steps = []
    for path, wi in zip(args.ckpts, w):
        ck = knotio.load_checkpoint(path, warn=lambda m: print("note: " + m))
        if dims is None:
            dims = ck["dims"]
        elif ck["dims"] != dims:
            raise SystemExit("%s: dimensions %s differ from %s" % (path, ck["dims"], dims))
        sd = state_dict(ck)
        if acc is None:
            acc = {k: v.float() * wi for k, v in sd.items()}
        else:
            if sd.keys() != acc.keys():
                raise SystemExit("%s: tensor names differ from the first checkpoint" % path)
            for k, v in sd.items():
                if v.shape != acc[k].shape:
                    raise SystemExit("%s: %s has shape %s, not %s"
                                     % (path, k, tuple(v.shape), tuple(acc[k].shape)))
                acc[k] += v.float() * wi
        steps.append(int(ck["step"]))
        last = ck
        print("%s: step %d, weight %.3f" % (path, steps[-1], wi))

    head = {k[len("ctc_head."):]: v.half() for k, v in acc.items() if k.startswith("ctc_head.")}
    out = {"model_f16": {k: v.half() for k, v in acc.items() if not k.startswith("ctc_head.")},
           "step": steps[-1], "dims": dims,
           "averaged": [{"path": os.path.basename(p), "step": s, "weight": x}
                        for p, s, x in zip(args.ckpts, steps, w)]}
    if head:
        out["ctc_head"] = head
    # the training history is the last checkpoint's (the runs are one lineage)
    for k in ("windows_seen", "train_seconds", "audio_h"):
        if k in last:
            out[k] = last[k]
    torch.save(out, args.out + ".tmp")
    os.replace(args.out + ".tmp", args.out)
    print("wrote %s (average of %d checkpoints)" % (args.out, len(args.ckpts)))


if __name__ == "__main__":
    sys.exit(main())
