#!/usr/bin/python3
"""Word end times of the training utterances, by CTC forced alignment.

  wordtimes.py [--ckpt knots/work/model.pt] [--dirs real,train] [--threads 2]

The live policy decodes windows that end where the audio has arrived, in the
middle of an utterance, and commits what the model writes for the words heard so
far. Training windows never ended that way with text (train.py's plan_window_target
gave a cut utterance its start timestamp only), because the text of a partly heard
utterance needs to know where each word ends. This tool finds out with the model's
own auxiliary character CTC head (train.py's CTCHead, trained beside the decoder):
for every utterance of every shard in knots/work/data/{real,train}/, the encoder
runs on the utterance alone (the shortened audio context, as short windows train
it), and a Viterbi alignment of the utterance's characters to the CTC frames
(20 ms each) gives each word's last character's frame.

Writes next to each shard.npz a shard.words.npz: `woff` (per utterance, the
offset of its first word; len = utterances + 1) and `wend` (per whitespace word of
the utterance's text, the sample just after its last character's frame, or -1 for
a word with no CTC characters, such as digits or a lone dash). Existing files are
kept unless --force. train.py --p-cut-text uses them.
"""
import argparse
import glob
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import train  # noqa: E402  (the trainer's model, CTC labels and paths)
from whisper_ref import audio as wa  # noqa: E402

FRAME = 2 * wa.HOP_LENGTH  # samples per encoder position (20 ms)


def word_labels(text):
    """(CTC labels of the whole text, for each whitespace word the index of its last
    label or -1): the same characters train.ctc_labels gives for the text."""
    labels, last = [], []
    for w in text.split():
        lab = train.ctc_labels([w])
        if not lab:
            last.append(-1)
            continue
        if labels:
            labels.append(train._CTC_INDEX[" "])
        labels.extend(lab)
        last.append(len(labels) - 1)
    return labels, last


def viterbi(lp, labels):
    """Best CTC path of labels through log-probs lp (T, C), blank 0: for each label
    the last frame the path spends on it, or None if no path fits in T frames."""
    T = lp.shape[0]
    L = len(labels)
    S = 2 * L + 1
    if L == 0 or T < L:
        return None
    ext = np.zeros(S, dtype=np.int64)
    ext[1::2] = labels
    skip = np.zeros(S, dtype=bool)  # s may come from s - 2 (a label unlike the one before)
    skip[3::2] = np.asarray(labels[1:]) != np.asarray(labels[:-1])
    neg = -1e30
    alpha = np.full(S, neg)
    alpha[0] = lp[0, 0]
    alpha[1] = lp[0, ext[1]]
    back = np.zeros((T, S), dtype=np.int8)
    for t in range(1, T):
        a1 = np.concatenate(([neg], alpha[:-1]))
        a2 = np.where(skip, np.concatenate(([neg, neg], alpha[:-2])), neg)
        best = np.maximum(alpha, np.maximum(a1, a2))
        back[t] = np.where(best == alpha, 0, np.where(best == a1, 1, 2))
        alpha = best + lp[t, ext]
    s = S - 1 if alpha[S - 1] >= alpha[S - 2] else S - 2
    if alpha[s] <= neg / 2:
        return None
    last = [None] * L
    for t in range(T - 1, -1, -1):
        if s % 2 == 1 and last[s // 2] is None:
            last[s // 2] = t
        s -= int(back[t, s])
    return last


def align_shard(model, head, path, dev, batch_s=240.0):
    with np.load(path) as z:
        audio, off, texts = z["audio"], z["offsets"], [str(t) for t in z["text"]]
    n = len(texts)
    woff = [0]
    wend_all = [None] * n
    order = sorted(range(n), key=lambda i: int(off[i + 1] - off[i]))
    k = 0
    while k < n:  # batches of similar length, about batch_s seconds of audio
        lens = []
        j = k
        while j < n:
            ln = int(off[order[j] + 1] - off[order[j]])
            if lens and (j - k + 1) * max(ln, lens[-1]) > batch_s * train.SR:
                break
            lens.append(ln)
            j += 1
        idx = order[k:j]
        m = max(lens)
        m = (m + FRAME - 1) // FRAME * FRAME
        x = np.zeros((len(idx), m), dtype=np.float32)
        for b, i in enumerate(idx):
            u = audio[off[i]:off[i + 1]].astype(np.float32) / 32768.0
            x[b, :len(u)] = u
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            mel = wa.log_mel_spectrogram(torch.from_numpy(x))[..., :m // wa.HOP_LENGTH]
            lp = head(model.encoder(mel.to(dev)).float()).float().cpu().numpy()
        for b, i in enumerate(idx):
            labels, last = word_labels(texts[i])
            T = min(lp.shape[1], (lens[b] + FRAME - 1) // FRAME)
            frames = viterbi(lp[b, :T], labels) if labels else None
            wend_all[i] = [-1 if (li < 0 or frames is None) else (frames[li] + 1) * FRAME
                           for li in last]
        k = j
    for i in range(n):
        woff.append(woff[-1] + len(wend_all[i]))
    wend = np.array([e for w in wend_all for e in w], dtype=np.int32)
    return np.array(woff, dtype=np.int64), wend


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ckpt", default=None, help="weights with a ctc_head (default: the "
                    "committed knot + side file)")
    ap.add_argument("--dirs", default="real,train")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    # oneDNN: its convolution gradients are wrong (train.py), its forward pass is right,
    # and bf16 without it is 7x slower than f32 here
    torch.backends.mkldnn.enabled = True
    dev = torch.device("cpu")
    model = train.wm.Whisper(train.DIMS)
    head = train.CTCHead(train.DIMS.n_audio_state)
    if args.ckpt:
        ck = train.load_weights(model, args.ckpt)
    else:
        ck = train.load_weights(model, train.COMMITTED, train.COMMITTED_STATE)
    if "ctc_head" not in ck:
        sys.exit("%s has no ctc_head" % (args.ckpt or train.COMMITTED))
    head.load_state_dict({k: v.float() for k, v in ck["ctc_head"].items()})
    model.eval()
    dirs = {"real": train.REAL, "train": train.DATA}
    for d in args.dirs.split(","):
        for p in sorted(glob.glob(os.path.join(dirs[d], "shard-*.npz"))):
            if p.endswith(".words.npz") or ".tmp" in p:
                continue
            out = train.words_path(p)
            if os.path.exists(out) and not args.force:
                continue
            t0 = time.time()
            woff, wend = align_shard(model, head, p, dev)
            np.savez(out + ".tmp.npz", woff=woff, wend=wend)
            os.replace(out + ".tmp.npz", out)
            print("%s: %d utterances, %d words (%d without a time), %.0f s" % (
                os.path.basename(p), len(woff) - 1, len(wend), int((wend < 0).sum()),
                time.time() - t0), flush=True)


if __name__ == "__main__":
    main()
