#!/usr/bin/python3
"""Train whisperknot's default model (Whisper architecture, English GPT-2 vocabulary).

Reads utterance shards written by synth.py (knots/work/data/train/*.npz), packs
several utterances into 30 s windows with Whisper's timestamp tokens, trains with
AdamW, logs to knots/train/log.txt, and checkpoints to knots/work/ckpt/ (weights
+ optimizer). Resumes from knots/work/ckpt/last.pt if present, else from the
committed knot knots/model/default.knot (or --init-knot) with the side file
knots/train/checkpoint/train-state.pt (CTC head, counters), else starts fresh.

Run (1 thread, background):
  OMP_NUM_THREADS=1 nohup /usr/bin/python3 knots/train/train.py --threads 1 &
"""
import argparse
import glob
import math
import os
import random
import re
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
KNOTS = os.path.dirname(HERE)
sys.path.insert(0, KNOTS)
from whisper_ref import audio as wa  # noqa: E402
from whisper_ref import model as wm  # noqa: E402
from whisper_ref import tokenizer as wt  # noqa: E402

sys.path.insert(0, HERE)
from eval import edit_distance  # noqa: E402,F401  (word errors; eval_torch.py uses it too)
import augment  # noqa: E402
import knotio  # noqa: E402

WORK = os.environ.get("WK_TRAIN_WORK", os.path.join(KNOTS, "work"))
DATA = os.path.join(WORK, "data", "train")
REAL = os.path.join(WORK, "data", "real")
EVAL = os.path.join(WORK, "eval")
CKPT_DIR = os.path.join(WORK, "ckpt")
# resume weights: the shipped knot (q8_0, dequantized as the engine does) and the side
# file with what it lacks (CTC head, counters); save-committed writes the side file and
# the f16 weights into WORK (not tracked), from which the knot is made (README)
COMMITTED = knotio.DEFAULT_KNOT
COMMITTED_STATE = knotio.TRAIN_STATE
WORK_F16 = os.path.join(WORK, "model-f16.pt")
LOG = os.environ.get("WK_TRAIN_LOG", os.path.join(HERE, "log.txt"))
SR = wa.SAMPLE_RATE
WIN = wa.N_SAMPLES

DIMS = wm.ModelDims(n_mels=80, n_audio_ctx=1500, n_audio_state=256, n_audio_head=4,
                    n_audio_layer=4, n_vocab=51864, n_text_ctx=448, n_text_state=256,
                    n_text_head=4, n_text_layer=4)


def log(msg):
    line = "%s %s" % (time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), msg)
    print(line, flush=True)
    with open(LOG, "a") as f:
        f.write(line + "\n")

# ------------------------------------------------------------------ data ----


def shard_paths(data_dir=DATA):
    """The complete shards synth.py (or real.py) has written so far."""
    return sorted(p for p in glob.glob(os.path.join(data_dir, "shard-*.npz"))
                  if ".tmp" not in p and not p.endswith(".words.npz"))


def load_shard(p):
    """(int16 audio, offsets, texts) of a shard, or None if it cannot be read yet."""
    try:
        with np.load(p) as z:
            return z["audio"], z["offsets"], [str(t) for t in z["text"]]
    except Exception as e:  # partially written or corrupt: skip for now
        log("skip shard %s: %s" % (p, e))
        return None


def words_path(p):
    """wordtimes.py's word ends beside shard p."""
    return p[:-len(".npz")] + ".words.npz"


def load_word_ends(p, n):
    """wordtimes.py's (woff, wend) for shard p of n utterances, or None."""
    try:
        with np.load(words_path(p)) as z:
            woff, wend = z["woff"], z["wend"]
    except (OSError, KeyError, ValueError):
        return None
    return (woff, wend) if len(woff) == n + 1 and woff[-1] == len(wend) else None


class Pool:
    """Utterances from synth.py shards, reloaded as new shards appear.

    weights: {shard-name substring: weight}: draw a shard by weight, then an
    utterance of it (real.py writes one shard per source), instead of drawing
    every utterance alike."""

    def __init__(self, tok, max_shards=300, rng=None, data_dir=DATA, weights=None):
        self.tok = tok
        self.max_shards = max_shards
        self.rng = rng or random.Random()
        self.data_dir = data_dir
        self.weights = weights
        self.shards = {}  # path -> (audio int16, offsets, token lists)
        self.index = []  # (path, i)
        self.by_shard = []  # (path, weight) when weighted

    def refresh(self):
        for p, sh in self.shards.items():  # word times written after the shard was loaded
            if sh[4] is None and os.path.exists(words_path(p)):
                self.shards[p] = sh[:4] + (load_word_ends(p, len(sh[3])),)
        new = [p for p in shard_paths(self.data_dir) if p not in self.shards]
        if not new:
            return 0
        self.rng.shuffle(new)
        for p in new:
            if len(self.shards) >= self.max_shards:
                victim = self.rng.choice(list(self.shards))
                del self.shards[victim]
            shard = load_shard(p)
            if shard is None:
                continue
            a, off, txt = shard
            toks = [self.tok.encode(" " + t) for t in txt]
            self.shards[p] = (a, off, toks, txt, load_word_ends(p, len(txt)))
        self.index = [(p, i) for p, s in self.shards.items() for i in range(len(s[2]))]
        if self.weights:
            self.by_shard = [(p, w) for p in sorted(self.shards)
                             for k, w in self.weights.items() if k in os.path.basename(p)]
        return len(new)

    def __len__(self):
        return len(self.index)

    def sample(self):
        """A random utterance: (reference for audio(), samples, tokens, text)."""
        if self.by_shard:
            p = self.rng.choices([q for q, _ in self.by_shard],
                                 [w for _, w in self.by_shard])[0]
            i = self.rng.randrange(len(self.shards[p][2]))
        else:
            p, i = self.rng.choice(self.index)
        a, off, toks, txt, _ = self.shards[p]
        return (p, i), int(off[i + 1] - off[i]), toks[i], txt[i]

    def word_ends(self, ref):
        w = self.shards[ref[0]][4]
        return None if w is None else w[1][w[0][ref[1]]:w[0][ref[1] + 1]]

    def audio(self, ref):
        a, off = self.shards[ref[0]][:2]
        return a[off[ref[1]]:off[ref[1] + 1]]


class MixPool:
    """Synthesized and real utterances: each draw is real with probability frac."""

    def __init__(self, pools, frac, rng):
        self.pools = pools  # [synthesized, real]
        self.frac = frac
        self.rng = rng

    def refresh(self):
        return sum(p.refresh() for p in self.pools)

    def __len__(self):
        return sum(len(p) for p in self.pools)

    def sample(self):
        k = 1 if len(self.pools[1]) and (not len(self.pools[0]) or
                                         self.rng.random() < self.frac) else 0
        ref, n, toks, text = self.pools[k].sample()
        return (k, ref), n, toks, text

    def audio(self, ref):
        return self.pools[ref[0]].audio(ref[1])

    def word_ends(self, ref):
        return self.pools[ref[0]].word_ends(ref[1])


class DevicePool:
    """Pool's utterances held in one int16 tensor on the training device, so that a GPU
    packs its own windows (one CPU core cannot pack them as fast as a GPU trains).
    Shards are appended as they appear until `capacity` samples are held."""

    def __init__(self, tok, device, capacity, rng=None, real_frac=0.0, real_weights=None):
        self.tok = tok
        self.rng = rng or random.Random()
        self.audio_t = torch.empty(capacity, dtype=torch.int16, device=device)
        self.used = 0
        self.starts, self.lens, self.toks, self.texts = [], [], [], []
        self.wends = []  # per utterance: its words' end samples (wordtimes.py) or None
        self.loaded = set()
        self.full = False
        # real speech (REAL, real.py's or speechpack.py's shards, loaded first) is drawn
        # with probability real_frac, shared among its sources by real_weights
        # ({shard-name substring: weight}); the rest uniformly from the synthesized
        self.real_frac = real_frac
        self.real_weights = real_weights or {}
        self.groups = {}  # real source -> utterance indices
        self.synth = []  # synthesized utterance indices

    def refresh(self):
        if self.full:
            return 0
        n_new = 0
        real = shard_paths(REAL) if self.real_frac > 0 else []
        for p in real + shard_paths():
            if p in self.loaded:
                continue
            shard = load_shard(p)
            if shard is None:
                continue
            a, off, txt = shard
            if self.used + len(a) > self.audio_t.shape[0]:
                self.full = True
                log("device pool full: %d utterances, %.1f h" % (len(self), self.used / SR / 3600))
                break
            self.loaded.add(p)
            self.audio_t[self.used:self.used + len(a)].copy_(torch.from_numpy(a))
            if p in real:
                keys = [k for k in self.real_weights if k in os.path.basename(p)]
                idx = self.groups.setdefault(keys[0] if keys else os.path.basename(p), [])
            else:
                idx = self.synth
            idx.extend(range(len(self.lens), len(self.lens) + len(txt)))
            we = load_word_ends(p, len(txt))
            for i, t in enumerate(txt):
                self.wends.append(None if we is None else we[1][we[0][i]:we[0][i + 1]])
                self.starts.append(self.used + int(off[i]))
                self.lens.append(int(off[i + 1] - off[i]))
                self.toks.append(self.tok.encode(" " + t))
                self.texts.append(t)
            self.used += len(a)
            n_new += 1
        return n_new

    def __len__(self):
        return len(self.lens)

    def word_ends(self, ref):
        return self.wends[ref]

    def sample(self):
        if self.groups and (not self.synth or self.rng.random() < self.real_frac):
            g = sorted(self.groups)
            g = self.rng.choices(g, [self.real_weights.get(k, 1.0) for k in g])[0]
            i = self.rng.choice(self.groups[g])
        else:
            i = self.rng.choice(self.synth)
        return i, self.lens[i], self.toks[i], self.texts[i]


CTC_CHARS = " abcdefghijklmnopqrstuvwxyz'"  # CTC classes 1..28, 0 = blank
_CTC_INDEX = {c: i + 1 for i, c in enumerate(CTC_CHARS)}


def ctc_labels(texts):
    """Lowercased letters/apostrophes/spaces of the texts as CTC class ids."""
    s = " ".join(norm_words(" ".join(texts)))
    return [_CTC_INDEX[c] for c in s if c in _CTC_INDEX]


class CTCHead(torch.nn.Module):
    """Auxiliary character CTC on the encoder output (training aid, never exported)."""

    def __init__(self, n_state):
        super().__init__()
        self.proj = torch.nn.Linear(n_state, len(CTC_CHARS) + 1)

    def forward(self, xa):
        return self.proj(xa).log_softmax(-1)


# (lowest, highest) dB of a window's level below the stored one (--gain-db); None: the
# per-utterance 0-12 dB the earlier runs trained with
GAIN_DB = None
# --p-cut-text: the fraction of windows cut inside an utterance whose target holds the
# words heard in full so far (wordtimes.py), not only the cut utterance's start time
P_CUT_TEXT = 0.0


_TOK = None


def heard_words(pool, ref, text, heard, n_src, rng):
    """(tokens, text, end sample) of the leading words of an utterance heard in full in
    its first `heard` source samples, by its word ends (wordtimes.py) and a margin of
    50-250 ms drawn here (the alignment's ends are early, and a word just ended may
    still be misheard); None without word ends. A word without a time (digits) ends
    with the next word that has one."""
    global _TOK
    ends = pool.word_ends(ref)
    words = text.split()
    if ends is None or len(ends) != len(words):
        return None
    eff = [0] * len(words)
    nxt = n_src
    for j in range(len(words) - 1, -1, -1):
        nxt = eff[j] = int(ends[j]) if ends[j] >= 0 else nxt
    margin = rng.uniform(0.05, 0.25) * SR
    k = 0
    while k < len(words) and eff[k] + margin <= heard:
        k += 1
    if k == 0:
        return [], "", 0
    if _TOK is None:
        _TOK = wt.get_tokenizer()
    heard_text = " ".join(words[:k])
    return _TOK.encode(" " + heard_text), heard_text, eff[k - 1]


def plan_window(pool, rng, win=WIN, p_notimestamps=0.15, p_single=0.1, max_tokens=440,
                speed=(0.0, 1.0, 1.0), p_stop=0.0, p_nospeech=0.0, p_prompt=0.0):
    """One training example, planned: (segments [(utterance ref, start sample, samples,
    gain, speed)], noise (std relative to the speech RMS, absolute std), token list,
    CTC (labels, encoder frames)).

    speed = (probability, lowest, highest): each utterance is played that much faster
    with that probability (resampled: tempo, pitch and formants together, which makes
    new voices out of the training ones). p_stop: after each complete utterance, stop
    packing with this probability (the window ends in silence, the target in <|endoftext|>
    after the last timestamp). p_nospeech: the window holds noise or silence alone and
    the target is <|nospeech|> (what Whisper's no_speech_prob reads). p_prompt: the
    tokens start with <|startofprev|> and the text of other utterances, as Whisper
    conditions on the previous text (the engine's long-file and live decoding do);
    the loss never scores the prompt.

    win is the window length in samples: Whisper's 30 s, or shorter (a multiple of 320
    samples, two mel frames) for windows that train a shortened audio context. Several
    utterances are packed with random gaps and gains; when the last one is cut by the
    window end, the target ends with its start timestamp only."""
    prompt = []
    if p_prompt > 0 and rng.random() < p_prompt:
        for _ in range(rng.randint(1, 4)):
            prompt.extend(pool.sample()[2])
        prompt = [wt.PREV] + prompt[-rng.randint(8, 223):]
    plan = plan_window_target(pool, rng, win, p_notimestamps, p_single,
                              max_tokens - len(prompt), speed, p_stop, p_nospeech)
    return plan[0], plan[1], prompt + plan[2], plan[3]


def plan_window_target(pool, rng, win, p_notimestamps, p_single, max_tokens, speed, p_stop,
                       p_nospeech):
    """plan_window without the prompt: the window's audio and its target from SOT on."""
    WIN = win
    win_s = WIN / SR
    if p_nospeech > 0 and rng.random() < p_nospeech:
        r = rng.random()  # Gaussian noise from -80 to -25 dBFS, a faint floor, or zeros
        level = 10 ** (rng.uniform(-80, -25) / 20) if r < 0.7 else (1e-5 if r < 0.85 else 0.0)
        return [], (0.0, level), [wt.SOT, wt.NOSPEECH, wt.EOT], ([], 0)
    ts = rng.random() >= p_notimestamps
    single = rng.random() < p_single
    segs = []  # (start_s, end_s, tokens)
    audio = []  # (ref, start, samples, gain)
    texts = []
    partial = None
    cut_toks = cut_text = cut_end = None
    t = rng.uniform(0.0, min(2.0, win_s / 10)) if not single else rng.uniform(0.0, win_s / 3)
    n_tok = 3
    # the window's level: --gain-db draws one per window (dB below the stored level,
    # which real.py and synth.py normalise to a -0.9 dBFS peak), each utterance then
    # 0-6 dB under it; without it, each utterance draws 0-12 dB down on its own
    level = rng.uniform(*GAIN_DB) if GAIN_DB else None
    while True:
        ref, n_src, toks, text = pool.sample()
        f = rng.uniform(speed[1], speed[2]) if rng.random() < speed[0] else 1.0
        n = int((n_src - 1) / f) + 1 if f != 1.0 else n_src
        start = int(t * SR)
        gain = 10 ** ((rng.uniform(-12, 0) if level is None else
                       level + rng.uniform(-6, 0)) / 20) / 32768.0
        if start + n <= WIN:
            if n_tok + len(toks) + 2 > max_tokens:
                break
            audio.append((ref, start, n, gain, f))
            segs.append((start / SR, (start + n) / SR, toks))
            texts.append(text)
            n_tok += len(toks) + 2
            t = (start + n) / SR + rng.uniform(0.1, 1.5)
            if single or (p_stop > 0 and rng.random() < p_stop):
                break
        else:
            if ts and not single and start < WIN - int(0.3 * SR) and \
                    (not segs or rng.random() < 0.6):
                if P_CUT_TEXT > 0 and rng.random() < P_CUT_TEXT:
                    h = heard_words(pool, ref, text, (WIN - start) * f, n_src, rng)
                    if h is not None and n_tok + len(h[0]) + 2 <= max_tokens:
                        cut_toks, cut_text = h[0], h[1]
                        cut_end = start / SR + h[2] / f / SR
                # a first utterance is cut only with its heard text (the live case)
                if segs or cut_toks is not None:
                    audio.append((ref, start, WIN - start, gain, f))
                    partial = start / SR
            break
        if t >= win_s - 0.3:
            break
    if not segs and partial is None:  # first utterance too long for the window: draw again
        return plan_window_target(pool, rng, win, p_notimestamps, p_single, max_tokens, speed,
                                  p_stop, p_nospeech)
    # Gaussian noise at 10-40 dB SNR over the speech, or a faint floor
    noise = (10 ** (-rng.uniform(10, 40) / 20), 0.0) if rng.random() < 0.5 else (0.0, 1e-5)
    tokens = [wt.SOT]
    if ts:
        for s, e, tk in segs:
            tokens.append(wt.timestamp_token(s))
            tokens.extend(tk)
            tokens.append(wt.timestamp_token(e))
        if partial is not None:
            tokens.append(wt.timestamp_token(partial))
            if cut_toks:  # the words heard so far, in a segment the window leaves open
                tokens.extend(cut_toks)
    else:
        tokens.append(wt.NO_TIMESTAMPS)
        for _, _, tk in segs:
            tokens.extend(tk)
    tokens.append(wt.EOT)
    # CTC labels cover the complete utterances; a window that ends inside a cut one
    # scores CTC only over the encoder frames (50 per second) before the cut one starts
    if cut_toks:  # (or up to the end of the last word heard in the cut one)
        ctc = (ctc_labels(texts + [cut_text]), min(WIN // 320, int(cut_end * 50) + 1))
    else:
        ctc = (ctc_labels(texts), WIN // 320 if partial is None else int(partial * 50))
    return audio, noise, tokens, ctc


def render_window(pool, audio, noise, win, aug=None):
    """A planned window's float32 samples (numpy), with its additive noise: Gaussian at
    std noise[0] times the speech RMS plus noise[1]; then aug (augment.Augmenter)."""
    x = np.zeros(win, dtype=np.float32)
    for ref, start, n, gain, f in audio:
        u = pool.audio(ref).astype(np.float32)
        if f != 1.0:  # linear interpolation at f source samples per output sample
            u = np.interp(np.arange(n) * f, np.arange(len(u)), u).astype(np.float32)
        x[start:start + n] = u[:n] * gain
    rms = math.sqrt(float(np.mean(x[x != 0] ** 2))) if noise[0] > 0 and x.any() else 0.0
    if aug is not None:
        x = aug(x)
    std = rms * noise[0] + noise[1]
    if std > 0:
        x += np.random.randn(win).astype(np.float32) * std
    return x


def render_windows_device(pool, plans, win):
    """render_window for a whole batch on the DevicePool's device: one gather of every
    segment's samples, then the noise, without a per-sample loop on the CPU."""
    dev = pool.audio_t.device
    seg_src, seg_end, seg_dst, seg_n, seg_gain, seg_f = [], [], [], [], [], []
    for b, (audio, _, _, _) in enumerate(plans):
        for ref, start, n, gain, f in audio:
            seg_src.append(pool.starts[ref])
            seg_end.append(pool.starts[ref] + pool.lens[ref] - 1)
            seg_dst.append(b * win + start)
            seg_n.append(n)
            seg_gain.append(gain)
            seg_f.append(f)
    total = sum(seg_n)
    if total == 0:  # windows without speech only
        seg_src, seg_end, seg_dst, seg_n, seg_gain, seg_f = [0], [0], [0], [0], [0.0], [1.0]
    n_t = torch.tensor(seg_n, dtype=torch.long).to(dev, non_blocking=True)
    seg = torch.repeat_interleave(torch.arange(len(seg_n), device=dev), n_t, output_size=total)
    off = torch.arange(total, device=dev) - (torch.cumsum(n_t, 0) - n_t)[seg]
    dst = torch.tensor(seg_dst, dtype=torch.long).to(dev, non_blocking=True)[seg] + off
    gain = torch.tensor(seg_gain, dtype=torch.float32).to(dev, non_blocking=True)[seg]
    # source position of each output sample, resampled by the segment's speed with
    # linear interpolation (speed 1: the samples themselves)
    pos = torch.tensor(seg_f, dtype=torch.float64).to(dev, non_blocking=True)[seg] * off
    i0 = pos.floor()
    frac = (pos - i0).float()
    first = torch.tensor(seg_src, dtype=torch.long).to(dev, non_blocking=True)[seg]
    last = torch.tensor(seg_end, dtype=torch.long).to(dev, non_blocking=True)[seg]
    a = first + i0.long()
    b = torch.minimum(a + 1, last)
    a = torch.minimum(a, last)
    au = pool.audio_t
    x = torch.zeros(len(plans) * win, dtype=torch.float32, device=dev)
    x[dst] = (au[a].float() * (1 - frac) + au[b].float() * frac) * gain
    x = x.view(len(plans), win)
    nz = (x != 0).sum(1).clamp(min=1)
    rms = ((x * x).sum(1) / nz + 1e-12).sqrt()
    rel = torch.tensor([p[1][0] for p in plans], dtype=torch.float32, device=dev)
    absolute = torch.tensor([p[1][1] for p in plans], dtype=torch.float32, device=dev)
    return x + torch.randn_like(x) * (rms * rel + absolute)[:, None]


def spec_augment(mel, rng, n_freq=2, max_freq=12, n_time=2, max_time_frac=0.02):
    """SpecAugment-style masks on a batch of log-mels (B, n_mels, T), in place: n_freq
    bands of up to max_freq mel bins and n_time spans of up to max_time_frac of the
    window each, set to the window's mean."""
    B, M, T = mel.shape
    mean = mel.mean(dim=(1, 2))
    for b in range(B):
        for _ in range(n_freq):
            w = rng.randint(0, max_freq)
            f0 = rng.randint(0, M - w)
            mel[b, f0:f0 + w, :] = mean[b]
        for _ in range(n_time):
            w = rng.randint(0, max(1, int(T * max_time_frac)))
            t0 = rng.randint(0, T - w)
            mel[b, :, t0:t0 + w] = mean[b]
    return mel


def make_batch(pool, rng, bs, win=WIN, device=None, speed=(0.0, 1.0, 1.0), specaug=False,
               p_single=0.1, p_stop=0.0, p_nospeech=0.0, p_prompt=0.0, aug=None, vtlp=0.0,
               vtlp_range=(0.88, 1.12)):
    plans = [plan_window(pool, rng, win, p_single=p_single, speed=speed, p_stop=p_stop,
                         p_nospeech=p_nospeech, p_prompt=p_prompt) for _ in range(bs)]
    if isinstance(pool, DevicePool):
        xs = render_windows_device(pool, plans, win)
        if aug is not None:
            xs = aug(xs)
    else:
        xs = torch.from_numpy(np.stack([render_window(pool, a, noise, win, aug)
                                        for a, noise, _, _ in plans]))
    toks = [p[2] for p in plans]
    ctcs = [p[3] for p in plans]
    mel = wa.log_mel_spectrogram(xs)[..., :win // wa.HOP_LENGTH]
    if vtlp > 0:
        mel = augment.vtlp_mel(mel, rng, vtlp, *vtlp_range)
    if specaug:
        mel = spec_augment(mel, rng)
    L = max(len(t) for t in toks) - 1
    inp = torch.full((bs, L), wt.EOT, dtype=torch.long)
    tgt = torch.full((bs, L), -100, dtype=torch.long)
    for b, t in enumerate(toks):
        sot = t.index(wt.SOT)
        t = torch.tensor(t)
        inp[b, :len(t) - 1] = t[:-1]
        tgt[b, :len(t) - 1] = t[1:]
        tgt[b, :sot] = -100  # the previous text and <|startoftranscript|> are given
        if t[sot + 1] == wt.NO_TIMESTAMPS:
            tgt[b, sot] = -100  # <|notimestamps|> is a prompt, not a prediction
    if device is not None:
        inp, tgt = inp.to(device, non_blocking=True), tgt.to(device, non_blocking=True)
    return mel, inp, tgt, ctcs


def ctc_loss(head, xa, ctcs):
    """Mean per-character CTC loss over the windows that have labels (0 if none).
    ctcs[b] = (labels, encoder frames they span)."""
    idx = [b for b, c in enumerate(ctcs) if c and c[0]]
    if not idx:
        return xa.new_zeros(())
    lp = head(xa[idx]).transpose(0, 1)  # (T, B, C)
    dev = xa.device
    tg = torch.tensor([t for b in idx for t in ctcs[b][0]], dtype=torch.long, device=dev)
    tl = torch.tensor([len(ctcs[b][0]) for b in idx], dtype=torch.long, device=dev)
    il = torch.tensor([min(ctcs[b][1], lp.shape[0]) for b in idx], dtype=torch.long,
                      device=dev)
    loss = F.ctc_loss(lp, tg, il, tl, blank=0, reduction="sum", zero_infinity=True)
    return loss / tl.sum()

# ------------------------------------------------------------- bf16 path ----


def cpu_has_bf16():
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def conv1d_as_matmul(self, x, weight, bias):
    """Conv1d (kernel k, stride s, zero padding p) as one matrix product over unfolded
    frames: the same sums as the convolution, without oneDNN's convolution, whose weight
    gradients are wrong in Debian's torch 1.13 (see README)."""
    k, st, pad = weight.shape[-1], self.stride[0], self.padding[0]
    cols = F.pad(x, (pad, pad)).unfold(2, k, st)  # (B, C, T', k)
    b_, c_, t_, _ = cols.shape
    cols = cols.permute(0, 2, 1, 3).reshape(b_, t_, c_ * k)
    y = cols @ weight.reshape(weight.shape[0], -1).to(cols.dtype).t()
    if bias is not None:
        y = y + bias.to(y.dtype)
    return y.permute(0, 2, 1)


def qkv_attention_bf16(self, q, k, v, mask=None):
    """Whisper's attention (scale d_head^-0.5 applied once, equal to its two ^-0.25
    factors) without the float32 round trip of the scores, which dominates a bf16 step."""
    b_, n, d = q.shape
    h = self.n_head
    hd = d // h
    q = q.view(b_, n, h, hd).transpose(1, 2) * (hd ** -0.5)
    k = k.view(b_, k.shape[1], h, hd).transpose(1, 2)
    v = v.view(b_, v.shape[1], h, hd).transpose(1, 2)
    qk = q @ k.transpose(-1, -2)
    if mask is not None:
        qk = qk + mask[:n, :n].to(qk.dtype)
    return (qk.softmax(-1) @ v).transpose(1, 2).reshape(b_, n, d)


def qkv_attention_sdpa(self, q, k, v, mask=None):
    """Whisper's attention through torch's fused scaled_dot_product_attention (GPU); the
    only mask Whisper uses is the decoder's causal one."""
    b_, n, d = q.shape
    h = self.n_head
    q = q.view(b_, n, h, -1).transpose(1, 2)
    k = k.view(b_, k.shape[1], h, -1).transpose(1, 2)
    v = v.view(b_, v.shape[1], h, -1).transpose(1, 2)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=mask is not None)
    return o.transpose(1, 2).reshape(b_, n, d)


def use_bf16(args):
    """bf16 autocast pays only where the CPU has bf16 dot products (oneDNN's bf16 GEMM is
    ~8x float32 on AVX512_BF16); elsewhere it is emulated and slower."""
    on = args.bf16 == "on" or (args.bf16 == "auto" and cpu_has_bf16())
    if on:
        torch.backends.mkldnn.enabled = True  # bf16 GEMMs; convolutions avoid oneDNN below
        wm.Conv1d._conv_forward = conv1d_as_matmul
        wm.MultiHeadAttention.qkv_attention = qkv_attention_bf16
    return on


def pick_window(args, rng):
    """(window samples, batch size) for the next step: full 30 s windows, or with
    probability --short-frac a shorter window of whole seconds with proportionally more
    windows per batch (same audio per step)."""
    if args.short_frac > 0 and rng.random() < args.short_frac:
        sec = rng.randint(args.short_min, args.short_max)
        return sec * SR, max(1, round(args.batch * 30 / sec))
    return WIN, args.batch

# ------------------------------------------------------------------ eval ----


@torch.no_grad()
def greedy_decode(model, mel, timestamps=False, max_len=120):
    """mel (n_mels, 3000) -> token list (after the prompt, without eot)."""
    dev = next(model.parameters()).device
    xa = model.encoder(mel[None].to(dev))
    dec = model.decoder
    prompt = [wt.SOT] + ([] if timestamps else [wt.NO_TIMESTAMPS])
    toks = list(prompt)
    for _ in range(max_len):
        t = torch.tensor([toks], device=dev)
        x = dec.token_embedding(t) + dec.positional_embedding[:len(toks)]
        for blk in dec.blocks:
            x = blk(x, xa, mask=dec.mask)
        x = dec.ln(x[:, -1])
        logits = x @ dec.token_embedding.weight.t()
        logits[:, wt.SOT:wt.TIMESTAMP_BEGIN] = -float("inf")
        if not timestamps:
            logits[:, wt.TIMESTAMP_BEGIN:] = -float("inf")
        nxt = int(logits.argmax())
        if nxt == wt.EOT:
            break
        toks.append(nxt)
    return toks[len(prompt):]


def norm_words(s):
    s = s.lower().replace("-", " ")
    s = re.sub(r"[^a-z0-9' ]", " ", s)
    return [w.strip("'") for w in s.split() if w.strip("'")]




def load_eval_set(name):
    p = os.path.join(EVAL, name + ".npz")
    if not os.path.exists(p):
        return None
    with np.load(p) as z:
        a, off, txt = z["audio"], z["offsets"], [str(t) for t in z["text"]]
    return [(a[off[i]:off[i + 1]].astype(np.float32) / 32768.0, txt[i]) for i in range(len(txt))]


def ctc_greedy(head, xa):
    """Best-path CTC transcript of one window's encoder output (1, T, d)."""
    best = head(xa)[0].argmax(-1).tolist()
    out, prev = [], 0
    for c in best:
        if c != prev and c != 0:
            out.append(CTC_CHARS[c - 1])
        prev = c
    return "".join(out)


def ctc_transcriber(model, head):
    """audio -> best-path CTC text of the encoder's auxiliary head, on the audio alone
    without padding: a cheap view of what the encoder has learned."""
    def run(audio_):
        m = audio_[:len(audio_) // 320 * 320]
        dev = next(model.parameters()).device
        mel = wa.log_mel_spectrogram(torch.from_numpy(m).to(dev))
        return ctc_greedy(head, model.encoder(mel[None]))
    return run


def decoder_transcriber(model, tok):
    """audio -> greedy decoding of the padded 30 s window, as the engine runs offline."""
    def run(audio_):
        return tok.decode(greedy_decode(model, wa.log_mel_spectrogram(
            torch.from_numpy(wa.pad_or_trim(audio_)).to(next(model.parameters()).device))))
    return run


EVAL_SETS = ("trainvoices", "heldout-rms", "dev-real-lj", "dev-real-asterisk")


@torch.no_grad()
def evaluate(model, n, transcribers, show=2):
    """Held-out WER of the first n utterances of each evaluation set, for every
    transcriber {label: audio -> text}; each set is loaded once."""
    model.eval()
    res = {}
    for name in EVAL_SETS:
        data = load_eval_set(name)
        if not data:
            continue
        for label, transcribe in transcribers.items():
            errs = words = 0
            for i, (audio_, ref) in enumerate(data[:n]):
                hyp = transcribe(audio_)
                r, h = norm_words(ref), norm_words(hyp)
                errs += edit_distance(r, h)
                words += len(r)
                if i < show:
                    log("  [%s%s] ref: %s" % (name, label, ref))
                    log("  [%s%s] hyp: %s" % (name, label, hyp.strip()))
            res[name + label] = 100.0 * errs / max(1, words)
    model.train()
    return res

# ----------------------------------------------------------- checkpoints ----


def save_work_ckpt(model, opt, step, extra):
    os.makedirs(CKPT_DIR, exist_ok=True)
    p = os.path.join(CKPT_DIR, "last.pt")
    extra = dict(extra)
    head = extra.pop("ctc_head")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "ctc_head": head.state_dict(),
                "dims": DIMS.to_dict(), **extra}, p + ".tmp")
    os.replace(p + ".tmp", p)


def save_committed(model, step, path=WORK_F16, extra=None, state=None):
    """Weights-only f16 checkpoint (~42 MB; knots/work/, not tracked: export.py makes the
    knot from it); with state, also the side file there (CTC head, counters; ~17 KB)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    extra = dict(extra or {})
    head = extra.pop("ctc_head", None)
    sd = {k: v.half().cpu() for k, v in model.state_dict().items()
          if k != "encoder.positional_embedding"}
    if head is not None:
        extra["ctc_head"] = {k: v.half().cpu() for k, v in head.state_dict().items()}
    torch.save({"model_f16": sd, "step": step, "dims": DIMS.to_dict(), **extra},
               path + ".tmp")
    os.replace(path + ".tmp", path)
    if state:
        knotio.write_train_state(state, sd, extra.get("ctc_head"), dict(extra, step=step),
                                 DIMS.to_dict(), source="train.py step %d" % step)


def load_weights(model, path, state=None):
    """Weights of a torch checkpoint or a knot (+ side file `state`) into model."""
    ck = knotio.load_checkpoint(path, state, warn=log)
    if ck.get("dims", DIMS.to_dict()) != DIMS.to_dict():
        raise RuntimeError("%s has dimensions %s, the trainer %s" % (path, ck["dims"], DIMS.to_dict()))
    sd = ck.get("model") or ck.get("model_f16")
    sd = {k: v.float() for k, v in sd.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [m for m in missing if m != "encoder.positional_embedding"]
    if missing or unexpected:
        raise RuntimeError("checkpoint mismatch: missing %s unexpected %s" % (missing, unexpected))
    return ck

# ------------------------------------------------------------------ main ----


def save_split(model, step, out_dir, extra, part_bytes=15 << 20):
    """save_committed into out_dir as model-f16.pt.partNN files of at most part_bytes
    (a lent GPU machine returns files of at most 16 MiB); `cat` joins them."""
    tmp = os.path.join(out_dir, ".whole.tmp")
    save_committed(model, step, tmp, extra)
    with open(tmp, "rb") as f:
        data = f.read()
    os.remove(tmp)
    for i in range(0, (len(data) + part_bytes - 1) // part_bytes):
        q = os.path.join(out_dir, "model-f16.pt.part%02d" % i)
        with open(q + ".tmp", "wb") as f:
            f.write(data[i * part_bytes:(i + 1) * part_bytes])
        os.replace(q + ".tmp", q)


def lr_at(step, args, elapsed=0.0):
    warm = min(1.0, (step - args.warm_start + 1) / args.warmup)
    if args.total_steps > 0 or args.time_budget > 0:
        prog = min(1.0, step / args.total_steps) if args.total_steps > 0 else \
            min(1.0, elapsed / args.time_budget)
        return args.lr * warm * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 *
                                 (1 + math.cos(math.pi * prog)))
    return args.lr * warm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--lr", type=float, default=6e-4)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--total-steps", type=int, default=0, help="cosine decay length; 0 = constant")
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--wd", type=float, default=0.05)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-n", type=int, default=12)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--min-utts", type=int, default=400)
    ap.add_argument("--fresh", action="store_true", help="ignore existing checkpoints")
    ap.add_argument("--init-knot", default=None, metavar="PATH",
                    help="without last.pt, resume from this knot (or torch .pt) instead of "
                         "knots/model/default.knot")
    ap.add_argument("--init-state", default=None, metavar="PATH",
                    help="side file for --init-knot (default knots/train/checkpoint/train-state.pt)")
    ap.add_argument("--ctc-weight", type=float, default=0.3,
                    help="weight of the auxiliary character CTC loss on the encoder")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--bf16", choices=["auto", "on", "off"], default="auto",
                    help="bf16 autocast (auto: where the CPU has AVX512_BF16/AMX)")
    ap.add_argument("--short-frac", type=float, default=0.0,
                    help="fraction of steps on windows shorter than 30 s (shortened audio context)")
    ap.add_argument("--short-min", type=int, default=6, help="shortest window, seconds")
    ap.add_argument("--short-max", type=int, default=15, help="longest short window, seconds")
    ap.add_argument("--rewarm", action="store_true",
                    help="on resume, warm the learning rate up again over --warmup steps "
                    "(after changing --lr)")
    ap.add_argument("--ctc-only", action="store_true",
                    help="train the encoder and its CTC head alone (no decoder): a cheap "
                    "phase that gets the encoder past the CTC plateau")
    ap.add_argument("--reinit", action="append", default=[], metavar="PREFIX",
                    help="on resume, initialise parameters with this name prefix afresh "
                    "(and drop their optimizer state); 'ctc' = the CTC head")
    ap.add_argument("--reset-opt", action="append", default=[], metavar="PREFIX",
                    help="on resume, drop the optimizer state of parameters with this name prefix")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda for a lent GPU machine")
    ap.add_argument("--time-budget", type=float, default=0,
                    help="seconds of training, then checkpoint and stop; without "
                    "--total-steps the cosine decay runs over this time")
    ap.add_argument("--out-dir", default=None,
                    help="also write the weights-only f16 checkpoint here, split in "
                    "15 MiB parts, every --save-every-s seconds and at the end")
    ap.add_argument("--save-every-s", type=float, default=120)
    ap.add_argument("--speed-perturb", type=float, nargs=3, default=[0.0, 1.0, 1.0],
                    metavar=("P", "LO", "HI"),
                    help="play each utterance faster by a factor from LO to HI with "
                    "probability P (resampling: new voices from the training ones)")
    ap.add_argument("--p-single", type=float, default=0.1,
                    help="fraction of windows holding a single utterance")
    ap.add_argument("--p-stop", type=float, default=0.0,
                    help="after each utterance, stop packing with this probability")
    ap.add_argument("--p-nospeech", type=float, default=0.0,
                    help="fraction of windows of noise or silence alone (target <|nospeech|>)")
    ap.add_argument("--p-prompt", type=float, default=0.0,
                    help="fraction of windows whose tokens start with <|startofprev|> and "
                    "earlier text (Whisper's conditioning on the previous text)")
    ap.add_argument("--gain-db", type=float, nargs=2, default=None, metavar=("LO", "HI"),
                    help="draw each window's level uniformly in LO..HI dB (negative: "
                    "quieter than the stored -0.9 dBFS peaks) and each utterance 0-6 dB "
                    "under it; real microphones are often 30 dB quieter than the "
                    "normalised training audio (FSDD theo peaks at -30 dBFS). Default: "
                    "each utterance 0-12 dB down")
    ap.add_argument("--p-cut-text", type=float, default=0.0,
                    help="of the windows cut inside an utterance, the fraction whose target "
                    "holds the words heard in full so far (the live policy's case; needs "
                    "wordtimes.py's .words.npz beside the shards); such windows may also "
                    "hold the cut utterance alone")
    ap.add_argument("--specaug", action="store_true",
                    help="SpecAugment-style frequency and time masks on the log-mel")
    ap.add_argument("--device-pool", choices=["auto", "on", "off"], default="auto",
                    help="hold the audio on the training device and pack windows there "
                    "(auto: on a GPU)")
    ap.add_argument("--pool-hours", type=float, default=60,
                    help="GPU: hours of audio the device pool holds")
    ap.add_argument("--real-frac", type=float, default=0.0,
                    help="fraction of utterances drawn from real speech (real.py build: "
                    "knots/work/data/real/), the rest synthesized")
    ap.add_argument("--real-weights", default="lj=0.5,asterisk=0.3,fsdd=0.2",
                    help="how real draws are shared among the sources (shard names)")
    ap.add_argument("--aug", type=float, default=0.0,
                    help="probability that a window goes through augment.Augmenter "
                    "(pitch, reverberation, codecs, noise, clipping)")
    ap.add_argument("--vtlp", type=float, default=0.0,
                    help="fraction of windows with vocal tract length perturbation")
    ap.add_argument("--vtlp-range", type=float, nargs=2, default=[0.88, 1.12],
                    metavar=("LO", "HI"),
                    help="warp factors drawn uniformly for VTLP (band f takes the spectrum at "
                    "alpha f: below 1 moves formants up, towards children's voices)")
    ap.add_argument("--prefetch", type=int, default=2,
                    help="batches prepared ahead by a data thread (0: none)")
    args = ap.parse_args()
    global GAIN_DB, P_CUT_TEXT
    GAIN_DB = tuple(args.gain_db) if args.gain_db else None
    P_CUT_TEXT = args.p_cut_text

    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    # Debian's torch 1.13 computes wrong conv weight gradients through oneDNN (mkldnn):
    # zeros or garbage (up to inf) for batches, wrong values even for single windows
    # (forward is fine). The native conv path is exact, so training disables oneDNN.
    torch.backends.mkldnn.enabled = False
    if dev.type == "cuda":
        bf16 = True  # autocast on the GPU; fused attention
        wm.MultiHeadAttention.qkv_attention = qkv_attention_sdpa
        torch.backends.cuda.matmul.allow_tf32 = True
    else:
        bf16 = use_bf16(args)
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    np.random.seed(seed % (2 ** 32))
    torch.manual_seed(seed)

    tok = wt.get_tokenizer()
    model = wm.Whisper(DIMS)
    model.init_weights(seed=0)
    head = CTCHead(DIMS.n_audio_state)
    model.to(dev)
    head.to(dev)
    decay, no_decay = [], []
    for n, p in list(model.named_parameters()) + list(head.named_parameters()):
        (decay if p.dim() >= 2 and "positional" not in n else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-6)
    step = 0
    windows_seen = 0
    train_seconds = 0.0
    last = os.path.join(CKPT_DIR, "last.pt")
    ck = {}
    if not args.fresh and os.path.exists(last):
        ck = load_weights(model, last)
        if "ctc_head" in ck:
            head.load_state_dict(ck["ctc_head"])
        opt.load_state_dict(ck["opt"])
        for n, p in model.named_parameters():
            if any(n.startswith(pre) for pre in args.reset_opt):
                opt.state.pop(p, None)
                log("reset optimizer state of %s" % n)
        step = ck["step"]
        windows_seen = ck.get("windows_seen", 0)
        train_seconds = ck.get("train_seconds", 0.0)
        log("resumed from %s at step %d" % (last, step))
        if args.init_knot:
            log("--init-knot %s not used: %s exists (--fresh starts afresh)" % (args.init_knot, last))
    elif not args.fresh and (args.init_knot or os.path.exists(COMMITTED)):
        init = args.init_knot or COMMITTED  # a missing --init-knot is an error
        ck = load_weights(model, init, args.init_state)
        if "ctc_head" in ck:
            head.load_state_dict({k: v.float() for k, v in ck["ctc_head"].items()})
        step = ck.get("step", 0)
        windows_seen = ck.get("windows_seen", 0)
        train_seconds = ck.get("train_seconds", 0.0)
        log("resumed weights from %s%s at step %d (fresh optimizer)" % (
            init, " + %s" % ck["train_state"] if "train_state" in ck else "", step))
    else:
        log("fresh model: %s, %d params" % (DIMS.to_dict(), sum(p.numel() for p in model.parameters())))
    if args.reinit:
        fresh = wm.Whisper(DIMS)
        fresh.init_weights(seed=seed)
        fresh_sd = {k: v.to(dev) for k, v in fresh.state_dict().items()}
        with torch.no_grad():
            for n, p in model.named_parameters():
                if any(n.startswith(pre) for pre in args.reinit):
                    p.copy_(fresh_sd[n])
                    opt.state.pop(p, None)
                    log("initialised %s afresh" % n)
            if "ctc" in args.reinit:
                fresh_head = CTCHead(DIMS.n_audio_state).to(dev)
                for p, q in zip(head.parameters(), fresh_head.parameters()):
                    p.copy_(q)
                    opt.state.pop(p, None)
                log("initialised the CTC head afresh")
    log("args: %s threads=%d bf16=%s device=%s" % (vars(args), torch.get_num_threads(), bf16,
                                                     torch.cuda.get_device_name(dev)
                                                     if dev.type == "cuda" else "cpu"))
    audio_h = ck.get("audio_h", windows_seen * 30 / 3600)
    args.warm_start = step if args.rewarm else 0

    weights = {k: float(v) for k, v in
               (kv.split("=") for kv in args.real_weights.split(",") if kv)}
    if args.device_pool == "on" or (args.device_pool == "auto" and dev.type == "cuda"):
        pool = DevicePool(tok, dev, int(args.pool_hours * 3600 * SR), rng=rng,
                          real_frac=args.real_frac, real_weights=weights)
    else:
        pool = Pool(tok, rng=rng)
        if args.real_frac > 0:
            pool = MixPool([pool, Pool(tok, rng=rng, data_dir=REAL, weights=weights)],
                           args.real_frac, rng)
    aug = None
    if args.aug > 0 and isinstance(pool, DevicePool):
        arng = random.Random(seed + 1)

        def aug(xs):  # the whole batch on the device
            return augment.augment_batch(xs, arng, args.aug)
    elif args.aug > 0:
        def babble():
            ref, _, _, _ = pool.sample()
            return pool.audio(ref).astype(np.float32) / 32768.0
        aug = augment.Augmenter(random.Random(seed + 1), args.aug, babble)
    while True:
        pool.refresh()
        if len(pool) >= args.min_utts:
            break
        log("waiting for data: %d utterances" % len(pool))
        time.sleep(30 if dev.type == "cpu" else 2)
    log("pool: %d utterances" % len(pool))

    def next_batch(step_):
        if step_ % (20 if dev.type == "cpu" else 100) == 0:
            pool.refresh()
        t0_ = time.time()
        win_, bs_ = pick_window(args, rng)
        b = make_batch(pool, rng, bs_, win_, dev, tuple(args.speed_perturb), args.specaug,
                       args.p_single, args.p_stop, args.p_nospeech, args.p_prompt, aug,
                       args.vtlp, tuple(args.vtlp_range))
        return win_, bs_, b, time.time() - t0_

    if args.prefetch > 0:
        # one data thread (numpy's FFTs, ffmpeg and sox run outside the GIL), which
        # alone touches the pool and rng from here on
        import queue
        import threading
        q = queue.Queue(maxsize=args.prefetch)

        def producer():
            k = step
            while True:
                q.put(next_batch(k))
                k += 1
        threading.Thread(target=producer, daemon=True).start()

        def fetch(step_):
            return q.get()
    else:
        fetch = next_batch

    model.train()
    t_start = t_save = t_last = time.time()
    loss_acc = n_acc = ctc_acc = 0.0
    w_acc = 0
    a_acc = 0.0
    while args.max_steps <= 0 or step < args.max_steps:
        t0 = time.time()
        win, bs, (mel, inp, tgt, ctcs), t_data = fetch(step)
        t_wait = time.time() - t0
        elapsed = time.time() - t_start
        for g in opt.param_groups:
            g["lr"] = lr_at(step, args, elapsed)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            xa = model.encoder(mel)
            if args.ctc_only:
                loss = xa.new_zeros(())
                total = lc = ctc_loss(head, xa.float(), ctcs)
                ctc_acc += lc.detach()
            else:
                logits = model.decoder(inp, xa).float()
                loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.view(-1),
                                       ignore_index=-100)
                total = loss
            if args.ctc_weight > 0 and not args.ctc_only:
                lc = ctc_loss(head, xa.float(), ctcs)
                total = loss + args.ctc_weight * lc
                ctc_acc += lc.detach()
        opt.zero_grad(set_to_none=True)
        total.backward()
        gn = torch.nn.utils.clip_grad_norm_(list(model.parameters()) + list(head.parameters()),
                                            args.clip)
        opt.step()
        step += 1
        windows_seen += bs
        audio_h += bs * win / SR / 3600
        a_acc += bs * win / SR
        dt = time.time() - t0
        train_seconds += dt
        loss_acc += loss.detach()  # summed on the device: no wait for the GPU per step
        n_acc += 1
        w_acc += bs
        if step % args.log_every == 0:
            el = time.time() - t_last
            loss_mean = float(loss_acc) / n_acc
            log("step %d loss %.4f ctc %.3f lr %.2e gnorm %.2f %.2f win/s %.1f audio s/s "
                "(data %.2fs/step, waited %.2fs) windows %d audio_h %.1f pool %d train_h %.2f" % (
                    step, loss_mean, float(ctc_acc) / n_acc, lr_at(step, args, elapsed), float(gn),
                    w_acc / el, a_acc / el, t_data, t_wait, windows_seen, audio_h, len(pool),
                    train_seconds / 3600))
            t_last = time.time()
            loss_acc = n_acc = ctc_acc = 0.0
            w_acc = 0
            a_acc = 0.0
            if not math.isfinite(loss_mean):
                log("non-finite loss, stopping (resume from last checkpoint)")
                sys.exit(1)
        extra = {"windows_seen": windows_seen, "train_seconds": train_seconds, "audio_h": audio_h,
                 "ctc_head": head}
        if step % args.ckpt_every == 0:
            save_work_ckpt(model, opt, step, extra)
        if step % args.eval_every == 0:
            te = time.time()
            transcribers = {" ctc": ctc_transcriber(model, head)}
            if not args.ctc_only:
                transcribers[""] = decoder_transcriber(model, tok)
            res = evaluate(model, args.eval_n, transcribers)
            if res:
                log("eval step %d: %s (%.0f s)" % (step, ", ".join(
                    "%s WER %.1f%%" % kv for kv in res.items()), time.time() - te))
            t_last = time.time()
        if os.path.exists(os.path.join(WORK, "save-committed")):
            os.remove(os.path.join(WORK, "save-committed"))
            save_committed(model, step, extra=extra, state=COMMITTED_STATE)
            log("wrote %s and the side file %s at step %d (the knot: export.py --ckpt %s)"
                % (WORK_F16, COMMITTED_STATE, step, WORK_F16))
        out_due = args.out_dir and time.time() - t_save >= args.save_every_s
        over = args.time_budget > 0 and time.time() - t_start >= args.time_budget
        if out_due or (over and args.out_dir):
            save_split(model, step, args.out_dir, extra)
            log("wrote %s/model-f16.pt.part* at step %d" % (args.out_dir, step))
            t_save = time.time()
        if over:
            save_work_ckpt(model, opt, step, extra)
            log("time budget spent: checkpoint saved at step %d" % step)
            break
        if os.path.exists(os.path.join(WORK, "stop")):
            os.remove(os.path.join(WORK, "stop"))
            save_work_ckpt(model, opt, step, extra)
            log("stop requested: checkpoint saved at step %d" % step)
            break


if __name__ == "__main__":
    main()
