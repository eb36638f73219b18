#!/usr/bin/python3
"""Held-out WER of a checkpoint or ggml .bin in torch (greedy, no timestamps).

  eval_torch.py [--ckpt PATH | --bin model.bin] [--n 200] [--sets trainvoices,heldout-rms,heldout-en029]

Needs the evaluation sets from `synth.py eval`. WER is computed on lowercased
words with punctuation removed (the C-engine evaluation with sclite is separate).
"""
import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train  # noqa: E402
from export import default_ckpt, load_model, model_from_ggml  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=None)
    ap.add_argument("--bin", default=None)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--sets", default="trainvoices,heldout-rms,heldout-en029")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--show", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.bin:
        model = model_from_ggml(args.bin)
    else:
        model, _ = load_model(args.ckpt or default_ckpt())
    tok = train.wt.get_tokenizer()
    for name in args.sets.split(","):
        data = train.load_eval_set(name)
        if not data:
            print("%s: missing (run synth.py eval)" % name)
            continue
        errs = words = 0
        for i, (audio, ref) in enumerate(data[:args.n]):
            mel = train.wa.log_mel_spectrogram(train.wa.pad_or_trim(audio))
            hyp = tok.decode(train.greedy_decode(model, mel))
            r, h = train.norm_words(ref), train.norm_words(hyp)
            errs += train.edit_distance(r, h)
            words += len(r)
            if i < args.show:
                print("  ref: %s\n  hyp: %s" % (ref, hyp.strip()))
        print("%-14s %4d utts %5d words WER %.1f%%" % (name, min(args.n, len(data)), words,
                                                     100.0 * errs / max(1, words)), flush=True)


if __name__ == "__main__":
    main()
