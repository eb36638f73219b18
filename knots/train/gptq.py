#!/usr/bin/python3
"""q4_0 weights chosen with GPTQ: each layer's rounding errors compensated
on the columns not yet rounded, weighted by what the layer's inputs look like.

  gptq.py --out MODEL-q4.knot [--knot IN.knot] [--windows 64] [--seed 1]
          [--real-weights SRC=W,...] [--damp 0.01] [--build build | --convert TOOL]
          [--embedding q8_0|q4_0] [--rtn]

Plain rounding (the converter's `--type q4_0`, with `--q4-scales fit` the scale
of least squared error per block) makes each weight's error as small as it
can on its own. GPTQ (Frantar et al., "GPTQ: Accurate Post-Training
Quantization for Generative Pre-trained Transformers", 2022) rounds a layer's
input columns one at a time and moves what that rounding lost onto the
columns still to come, in proportion to how the layer's inputs correlate
(H = sum of x x^T over calibration inputs), so that the layer's outputs
rather than its weights stay close. The result is the same format: q4_0
blocks of 32 inputs with an f16 scale, as the converter writes them; only
which levels and scales the blocks hold differs.

Calibration: --windows 30 s training windows drawn as train.py draws them
(several utterances with gaps, timestamps) from the real training shards
(real.py build and many.py train, knots/work/data/real: LJ Speech outside
LJ005, FSDD's four training speakers, the asterisk prompts outside the dev
and test ones, speechocean762's 150 training speakers) in the shares of
--real-weights and, when present, the synthesized shards (knots/work/data/
train) for half of the utterances. Nothing of a development or test set.
The inputs of every 2-D weight of the encoder and decoder blocks are taken
from the unquantized model in one pass.

Each block of 32 inputs gets its scale per output row when GPTQ reaches it,
chosen on the weights as updated so far by the least-squares search of the
converter's `--q4-scales fit` (wk_quantize_row_q4_0_fit), then its levels
column by column. The token embedding stays q8_0 (the README's q4_0
recipe), as do the convolution and position tables (the converter's rule).

Writes a ggml .bin with the q4_0 tensors as they are to be stored and the
rest in f16/f32 beside OUT, then `whisperknot-convert` (which keeps the q4_0
blocks bit for bit) with the metadata keys of the input knot. `--rtn` rounds
instead (no calibration): its knot is the converter's `--type q4_0
--q4-scales fit --keep decoder.token_embedding.weight=q8_0` bit for bit,
which checks the levels, scales and block layout here.
"""
import argparse
import os
import random
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
import knotio  # noqa: E402
import train  # noqa: E402
from whisper_ref import ggml  # noqa: E402
from whisper_ref import tokenizer as wt  # noqa: E402

QK = 32
GGML_Q4_0 = 2


def f16_round(x):
    return x.to(torch.float16).to(torch.float32)


def q4_levels(x, d):
    """Nearest levels of x (rows, 32) at scales d (rows, 1), as q4_levels in
    engine/wk-types.c: floor(x / d + 0.5) clamped to [-8, 7]."""
    inv = torch.where(d != 0, 1.0 / d, torch.zeros_like(d))
    return torch.clamp(torch.floor(x * inv + 0.5), -8, 7)


def fit_scales(x):
    """Per row of x (rows, 32): the f16 scale of least squared error among the
    candidates of wk_quantize_row_q4_0_fit (vmax / (-8 + 0.1 k), k = -12..12,
    each refitted by least squares for its levels and rounded to f16)."""
    amax, idx = x.abs().max(dim=1, keepdim=True)
    vmax = torch.gather(x, 1, idx)
    best_err = torch.full_like(amax, float("inf"))
    best_d = torch.zeros_like(amax)
    for k in range(-12, 13):
        d0 = vmax / (-8.0 + 0.1 * k)
        lv = q4_levels(x, d0)
        sll = (lv * lv).sum(1, keepdim=True)
        sxl = (x * lv).sum(1, keepdim=True)
        d = f16_round(torch.where(sll > 0, sxl / sll.clamp(min=1), torch.zeros_like(sll)))
        lv = q4_levels(x, d)
        err = ((x - d * lv) ** 2).sum(1, keepdim=True)
        better = (err < best_err) & (sll > 0)
        best_err = torch.where(better, err, best_err)
        best_d = torch.where(better, d, best_d)
    # an all-zero row: scale 0, levels 0 (ggml's rule gives the same)
    return best_d


def gptq_q4(w, h, damp):
    """GPTQ of w (out, in) with input Hessian h (in, in), q4_0 blocks along
    the inputs. Returns (levels int8 (out, in), scales f32 (out, in / 32))."""
    w = w.clone().double()
    h = h.clone().double()
    n_in = w.shape[1]
    dead = torch.diag(h) == 0
    h[dead, dead] = 1.0
    w[:, dead] = 0.0
    h += damp * torch.mean(torch.diag(h)) * torch.eye(n_in, dtype=h.dtype)
    hinv = torch.cholesky_inverse(torch.linalg.cholesky(h))
    hinv = torch.linalg.cholesky(hinv, upper=True)
    levels = torch.zeros_like(w)
    scales = torch.zeros(w.shape[0], n_in // QK, dtype=torch.float32)
    for g in range(0, n_in, QK):
        w1 = w[:, g:g + QK].clone()
        hi = hinv[g:g + QK, g:g + QK]
        err1 = torch.zeros_like(w1)
        d = fit_scales(w1.float()).double()
        scales[:, g // QK] = d[:, 0].float()
        for i in range(QK):
            col = w1[:, i:i + 1]
            lv = q4_levels(col.float(), d.float()).double()
            levels[:, g + i] = lv[:, 0]
            e = (col - d * lv) / hi[i, i]
            w1[:, i:] -= e @ hi[i:i + 1, i:]
            err1[:, i] = e[:, 0]
        w[:, g + QK:] -= err1 @ hinv[g:g + QK, g + QK:]
    return levels.to(torch.int8), scales


def q4_0_bytes(levels, scales):
    """ggml q4_0 blocks of rows: f16 d, then 16 bytes, byte j holding level
    j (low nibble) and level 16 + j (high nibble), each + 8."""
    out, n_in = levels.shape
    lv = (levels.numpy().astype(np.int16) + 8).astype(np.uint8).reshape(out, n_in // QK, QK)
    qs = lv[:, :, :QK // 2] | (lv[:, :, QK // 2:] << 4)
    blk = np.zeros((out, n_in // QK), dtype=np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))]))
    blk["d"] = scales.numpy().astype(np.float16)
    blk["qs"] = qs
    return blk.tobytes()


def calibration_hessians(model, names, n_windows, seed, weights, bs=4):
    """{name: (sum of x x^T over every input row, rows)} for the Linear layers
    named, from n_windows training windows through the unquantized model."""
    mods = dict(model.named_modules())
    dims = {n: mods[n].normalized_shape[0] if n == "decoder.ln" else mods[n].in_features
            for n in names}
    acc = {n: [torch.zeros(dims[n], dims[n], dtype=torch.float64), 0] for n in names}

    def hook(name):
        def f(mod, inp, out):
            # the logits' input is decoder.ln's output, not a Linear's input
            t = out if name == "decoder.ln" else inp[0]
            x = t.detach().reshape(-1, t.shape[-1]).double()
            acc[name][0] += x.t() @ x
            acc[name][1] += x.shape[0]
        return f

    handles = [mods[n].register_forward_hook(hook(n)) for n in names]
    tok = wt.Tokenizer()
    rng = random.Random(seed)
    real = train.Pool(tok, rng=rng, data_dir=train.REAL, weights=weights)
    synth = train.Pool(tok, rng=rng, data_dir=train.DATA)
    if not real.refresh():
        sys.exit("no real training shards in %s: run knots/train/real.py build and "
                 "many.py train" % train.REAL)
    pool = train.MixPool([synth, real], 0.5, rng) if synth.refresh() else real
    done = 0
    with torch.no_grad():
        while done < n_windows:
            b = min(bs, n_windows - done)
            mel, inp, _, _ = train.make_batch(pool, rng, b)
            model(mel, inp)
            done += b
            print("calibration: %d of %d windows" % (done, n_windows), flush=True)
    for h in handles:
        h.remove()
    return acc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the q4_0 knot to write")
    ap.add_argument("--knot", default=knotio.DEFAULT_KNOT, help="weights (default: the shipped knot)")
    ap.add_argument("--windows", type=int, default=64, help="calibration windows of 30 s")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--real-weights", default="lj=0.25,asterisk=0.15,fsdd=0.15,ocean=0.45",
                    help="the real sources' shares of the utterances (train.py's option; "
                    "the default is the shipped model's GPU mix)")
    ap.add_argument("--damp", type=float, default=0.01,
                    help="added to H's diagonal, times its mean (GPTQ's dampening)")
    ap.add_argument("--build", default="build", help="meson build dir with whisperknot-convert")
    ap.add_argument("--convert", help="the whisperknot-convert to run (default: --build's)")
    ap.add_argument("--embedding", choices=("q8_0", "q4_0"), default="q8_0",
                    help="the token embedding's type: q8_0 (the README's recipe) or "
                    "q4_0 by GPTQ as the logits' projection (its rows looked up as the "
                    "decoder's input embedding take what that gives them)")
    ap.add_argument("--rtn", action="store_true",
                    help="plain rounding with fitted scales instead (the same as the "
                    "converter's --q4-scales fit; a check of this program)")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)  # train.render_window's noise
    torch.set_num_threads(max(1, os.cpu_count() or 1))

    dims, sd, meta = knotio.knot_state_dict(args.knot)
    model, _ = knotio.model_from_knot(args.knot)
    names = [n for n, m in model.named_modules()
             if isinstance(m, torch.nn.Linear) and ".blocks." in n]
    # the weight each name's inputs multiply
    weight = {n: n + ".weight" for n in names}
    if args.embedding == "q4_0":
        names.append("decoder.ln")
        weight["decoder.ln"] = "decoder.token_embedding.weight"
    t0 = time.time()
    acc = {} if args.rtn else calibration_hessians(
        model, names, args.windows, args.seed,
        {k: float(v) for k, v in (kv.split("=") for kv in args.real_weights.split(",") if kv)})
    raw = {}
    for n in names:
        # the values the converter would quantize from an f16 .bin
        w = f16_round(torch.from_numpy(np.ascontiguousarray(sd[weight[n]])).float())
        if args.rtn:
            lv = torch.zeros_like(w)
            sc = torch.zeros(w.shape[0], w.shape[1] // QK)
            for g in range(0, w.shape[1], QK):
                d = fit_scales(w[:, g:g + QK])
                lv[:, g:g + QK] = q4_levels(w[:, g:g + QK], d)
                sc[:, g // QK] = d[:, 0]
            lv = lv.to(torch.int8)
        else:
            h = acc[n][0] / max(acc[n][1], 1)
            lv, sc = gptq_q4(w, h, args.damp)
        q = lv.double() * sc.double().repeat_interleave(QK, dim=1)
        rel = float(((q - w.double()) ** 2).sum().sqrt() / (w.double() ** 2).sum().sqrt())
        if not args.rtn:
            dw = (q - w.double())
            out_err = float(torch.einsum("oi,ij,oj->", dw, h, dw).sqrt())
            out_ref = float(torch.einsum("oi,ij,oj->", w.double(), h, w.double()).sqrt())
            print("%-40s weight error %.4f  output error %.4f" % (n, rel, out_err / out_ref))
        raw[weight[n]] = (GGML_Q4_0, q4_0_bytes(lv, sc))
    print("quantized %d tensors in %.0f s" % (len(raw), time.time() - t0))

    # the converter names the knot after its input
    tmp_bin = os.path.join(os.path.dirname(os.path.abspath(args.out)), "%s-q4_0-%s.bin" % (
        meta.get("general.name", "model"), "rtn" if args.rtn else "gptq"))
    ggml.write_ggml(tmp_bin, dims, sd, use_f16=True,
                    mel_filters=np.asarray(meta["whisper.mel_filters"],
                                           dtype=np.float32).reshape(dims["n_mels"], -1),
                    raw=raw, ftype=2000 + GGML_Q4_0)
    heads = meta.get("whisperknot.alignment_heads")
    conv = args.convert or os.path.join(args.build, "knots", "whisperknot-convert")
    cmd = [conv] + (["--keep", "decoder.token_embedding.weight=q8_0"]
                    if args.embedding == "q8_0" else [])
    cmd += ["--keep", "encoder.conv2.weight=q8_0",
           "--keep", "encoder.positional_embedding=q8_0",
           "--keep", "decoder.positional_embedding=q8_0"]
    for key, opt in (("whisperknot.pad_window", "--pad-window"),
                     ("whisperknot.max_text_ctx", "--max-text-ctx"),
                     ("whisperknot.timestamp_rule", "--timestamp-rule"),
                     ("whisperknot.live_audio_ctx", "--live-audio-ctx")):
        if key in meta:
            cmd += [opt, str(meta[key])]
    if heads is not None and len(heads):
        cmd += ["--alignment-heads",
                ",".join("%d:%d" % (heads[i], heads[i + 1]) for i in range(0, len(heads), 2))]
    subprocess.run(cmd + [tmp_bin, args.out], check=True)
    os.unlink(tmp_bin)


if __name__ == "__main__":
    main()
