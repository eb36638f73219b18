#!/usr/bin/python3
"""Speech data generator for whisperknot's default model (offline, Debian TTS).

Text: fortunes / fortunes-min (/usr/share/games/fortunes) and the King James
Bible (bible-kjv), split into short normalized sentences; WordNet's example
sentences and generated sentences with numbers, dates and names (texts.py).
A fixed subset of sentences (by hash) is held out and never trained on.

Voices: espeak-ng accents x variants x speed x pitch, flite kal16/awb/slt,
festival kal_diphone/ked_diphone/cmu_us_slt_arctic_hts. Held-out voices
(never trained on): flite rms, espeak-ng en-029 (Caribbean accent).

Commands:
  synth.py texts                       build the sentence pools (knots/work/text/)
  synth.py produce [--hours H]         keep writing training shards to knots/work/data/train/
  synth.py eval [--n N]                write the held-out evaluation sets
                                       (npz + wav + transcripts) to knots/work/eval/
Everything is deterministic given --seed, except the producer's random stream
(seeded by pid/time unless --seed is given).
"""
import argparse
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import texts  # noqa: E402  (everyday sentences, numbers)

HERE = os.path.dirname(os.path.abspath(__file__))
KNOTS = os.path.dirname(HERE)
WORK = os.environ.get("WK_TRAIN_WORK", os.path.join(KNOTS, "work"))
TEXT_DIR = os.path.join(WORK, "text")
HELDOUT_DIR = os.path.join(HERE, "heldout")
SR = 16000

FORTUNE_DIR = "/usr/share/games/fortunes"
HELDOUT_MOD = 40  # sentences with md5 % 40 == 0 are never trained on

# ---------------------------------------------------------------- text ----

_ALLOWED = re.compile(r"^[A-Za-z ,.;:!?'\"-]+$")
_SPLIT = re.compile(r"(?<=[.!?])[\"']?\s+(?=[\"']?[A-Z])")


def _fix_caps(s):
    # KJV prints LORD / GOD in small caps; read and write them as words.
    return re.sub(r"\b([A-Z])([A-Z]+)\b", lambda m: m.group(1) + m.group(2).lower()
                  if len(m.group(0)) > 1 else m.group(0), s)


def clean_sentence(s, fix_caps=False):
    s = s.replace("``", '"').replace("''", '"').replace("`", "'")
    s = s.replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"')
    s = re.sub(r"\s+", " ", s).strip()
    if fix_caps:
        s = _fix_caps(s)
    if not s or not _ALLOWED.match(s):
        return None
    if "--" in s or " - " in s or s.count('"') % 2:
        return None
    if re.search(r"\b[A-Z]{2,}\b", s):
        return None  # acronyms / shouting are read inconsistently by the engines
    if s[-1] not in ".!?":
        return None
    if not s[0].isupper() and not (s[0] in "\"'" and len(s) > 1 and s[1].isupper()):
        return None
    n = len(s.split())
    if n < 3 or n > 30:
        return None
    return s


def fortune_sentences():
    out = []
    for name in sorted(os.listdir(FORTUNE_DIR)):
        p = os.path.join(FORTUNE_DIR, name)
        if "." in name or not os.path.isfile(p):
            continue
        with open(p, encoding="utf-8", errors="replace") as f:
            data = f.read()
        for fortune in data.split("\n%\n"):
            lines = []
            for ln in fortune.split("\n"):
                st = ln.strip()
                if st.startswith("--") or st.startswith("-- ") or st == "%":
                    break  # attribution follows
                lines.append(st)
            para = " ".join(lines)
            for s in _SPLIT.split(para):
                c = clean_sentence(s)
                if c:
                    out.append(c)
    return out


def bible_sentences():
    cache = os.path.join(TEXT_DIR, "kjv.txt")
    if not os.path.exists(cache):
        os.makedirs(TEXT_DIR, exist_ok=True)
        r = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True,
                           text=True, input="", timeout=600)
        with open(cache + ".tmp", "w") as f:
            f.write(r.stdout)
        os.replace(cache + ".tmp", cache)
    out = []
    with open(cache) as f:
        for line in f:
            m = re.match(r"^\S+\d+:\d+ (.*)$", line.strip())
            if not m:
                continue
            for s in _SPLIT.split(m.group(1)):
                c = clean_sentence(s, fix_caps=True)
                if c:
                    out.append(c)
    return out


def _h(s):
    return int(hashlib.md5(s.encode("utf-8")).hexdigest()[:8], 16)


def is_heldout(s):
    return _h(s) % HELDOUT_MOD == 0


def build_texts():
    os.makedirs(TEXT_DIR, exist_ok=True)
    pools = {"fortunes": fortune_sentences(), "bible": bible_sentences()}
    pools.update(extra_pools())
    seen = set()
    train, held = {}, {}
    for src, sents in pools.items():
        tr, he = [], []
        for s in sents:
            if s in seen:
                continue
            seen.add(s)
            (he if is_heldout(texts.written(s)) else tr).append(s)
        train[src], held[src] = tr, he
        with open(os.path.join(TEXT_DIR, "train-%s.txt" % src), "w") as f:
            f.write("\n".join(tr) + "\n")
        with open(os.path.join(TEXT_DIR, "heldout-%s.txt" % src), "w") as f:
            f.write("\n".join(he) + "\n")
        print("%s: %d train, %d held out" % (src, len(tr), len(he)))
    # fixed evaluation list: 100 per source, sorted by hash (stable across runs)
    os.makedirs(HELDOUT_DIR, exist_ok=True)
    ev = []
    for src in ("bible", "fortunes"):  # the fixed list predates the other sources
        picks = sorted(held[src], key=_h)[:100]
        ev.extend((src, s) for s in picks)
    with open(os.path.join(HELDOUT_DIR, "sentences.txt"), "w") as f:
        f.write("# source<TAB>sentence; held-out sentences (md5 %% %d == 0 are never trained on)\n"
                % HELDOUT_MOD)
        for src, s in ev:
            f.write("%s\t%s\n" % (src, s))
    return train


def extra_pools():
    """texts.py's sources (everyday sentences, numbers), where their data is installed."""
    out = {"numbers": texts.number_sentences()}
    wn = texts.wordnet_sentences()
    if wn:
        out["wordnet"] = wn
    return out


# share of each text source in produced utterances (sources whose pool is
# missing are skipped)
SOURCE_WEIGHTS = {"bible": 0.25, "fortunes": 0.3, "wordnet": 0.25, "numbers": 0.2}


def load_train_texts():
    out = {}
    for src in SOURCE_WEIGHTS:
        p = os.path.join(TEXT_DIR, "train-%s.txt" % src)
        if not os.path.exists(p):
            build_texts()
        if not os.path.exists(p):
            continue
        with open(p) as f:
            out[src] = [l.rstrip("\n") for l in f if l.strip()]
    return out


def load_dev_sentences(per_source=100):
    """Held-out sentences for tuning (decoding settings, checkpoint choice): the
    next per_source of each source in the evaluation list's hash order, so never
    trained on and disjoint from the evaluation sentences."""
    used = set(load_eval_sentences())
    out = []
    for src in ("bible", "fortunes"):
        p = os.path.join(TEXT_DIR, "heldout-%s.txt" % src)
        if not os.path.exists(p):
            build_texts()
        with open(p) as f:
            held = [l.rstrip("\n") for l in f if l.strip()]
        picks = [x for x in sorted(held, key=_h) if x not in used][:per_source]
        out.extend(picks)
    return out


def load_eval_sentences():
    p = os.path.join(HELDOUT_DIR, "sentences.txt")
    out = []
    with open(p) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            src, s = line.rstrip("\n").split("\t", 1)
            out.append(s)
    return out

# -------------------------------------------------------------- voices ----

ESPEAK_TRAIN_LANGS = ["en-us", "en-us", "en-gb", "en-gb-x-rp", "en-gb-scotland",
                      "en-gb-x-gbclan", "en-gb-x-gbcwmd"]
ESPEAK_HELDOUT_LANGS = ["en-029"]
ESPEAK_VARIANTS = ["", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "f1", "f2", "f3", "f4",
                   "f5", "klatt", "klatt2", "klatt3", "klatt4", "Alex", "Andy", "Annie",
                   "Michael", "Storm", "Lee", "linda", "steph", "paul", "rob", "robert",
                   "edward", "john", "max", "zac", "belinda", "david", "benjamin", "caleb"]
FLITE_TRAIN = ["kal16", "awb", "slt"]
FLITE_HELDOUT = ["rms"]
FESTIVAL_TRAIN = ["kal_diphone", "ked_diphone", "cmu_us_slt_arctic_hts"]

HELDOUT_VOICES = ["flite:rms", "espeak-ng:en-029 (any variant)"]


def _festival_has(voice):
    if not shutil.which("festival", path=(TTS_ENV or os.environ).get("PATH")):
        return False
    share = os.path.join(os.environ["WK_TTS_PREFIX"], "festival") if TTS_ENV else \
        "/usr/share/festival"
    for root in (os.path.join(share, "voices/english"), os.path.join(share, "voices/us")):
        if os.path.isdir(os.path.join(root, voice)):
            return True
    return False


def random_voice(rng, heldout=None):
    """A voice config dict. heldout: None (training voices) or 'rms' / 'en-029'."""
    if heldout == "rms":
        return {"engine": "flite", "voice": "rms", "stretch": rng.uniform(0.85, 1.15)}
    if heldout == "en-029":
        return {"engine": "espeak", "voice": "en-029", "variant": rng.choice(ESPEAK_VARIANTS),
                "speed": rng.randint(130, 200), "pitch": rng.randint(25, 75)}
    # batch probabilities chosen so that utterances come 40% espeak-ng, 35% flite,
    # 25% festival (festival batches hold 8 utterances, the others 4)
    r = rng.random()
    if r < 0.457 or not shutil.which("flite", path=(TTS_ENV or os.environ).get("PATH")):
        # (espeak-ng alone when flite is missing: a GPU bundle may carry espeak-ng only)
        return {"engine": "espeak", "voice": rng.choice(ESPEAK_TRAIN_LANGS),
                "variant": rng.choice(ESPEAK_VARIANTS),
                "speed": rng.randint(130, 200), "pitch": rng.randint(25, 75)}
    if r < 0.857:
        return {"engine": "flite", "voice": rng.choice(FLITE_TRAIN),
                "stretch": rng.uniform(0.85, 1.15)}
    fv = [v for v in FESTIVAL_TRAIN if _festival_has(v)]
    if not fv:  # festival missing here: flite takes its share
        return {"engine": "flite", "voice": rng.choice(FLITE_TRAIN),
                "stretch": rng.uniform(0.85, 1.15)}
    return {"engine": "festival", "voice": rng.choice(fv), "stretch": rng.uniform(0.85, 1.15)}


def voice_name(v):
    if v["engine"] == "espeak":
        return "espeak-ng:%s%s" % (v["voice"], ("+" + v["variant"]) if v["variant"] else "")
    return "%s:%s" % (v["engine"], v["voice"])

# ----------------------------------------------------------- synthesis ----


def _tts_env():
    """Environment for the TTS programs: WK_TTS_PREFIX names a folder holding them
    unpacked from their Debian packages (bin/, lib/, espeak-ng-data/, festival/), for
    machines where they are not installed (a lent GPU machine has no package registry)."""
    pre = os.environ.get("WK_TTS_PREFIX")
    if not pre:
        return None
    env = dict(os.environ)
    env["PATH"] = os.path.join(pre, "bin") + os.pathsep + env.get("PATH", "")
    env["LD_LIBRARY_PATH"] = os.path.join(pre, "lib")
    env["ESPEAK_DATA_PATH"] = pre
    return env


TTS_ENV = _tts_env()
HAVE_SOX = shutil.which("sox") is not None and not os.environ.get("WK_NO_SOX")


def _to_16k(path, speed=1.0):
    if not HAVE_SOX:
        return _to_16k_py(path, speed)
    cmd = ["sox", "-q", path, "-t", "raw", "-r", str(SR), "-e", "signed", "-b", "16", "-c", "1",
           "-"]
    if abs(speed - 1.0) > 1e-3:
        cmd += ["speed", "%.3f" % speed]
    cmd += ["norm", "-1"]
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    if r.returncode != 0:
        return None
    return np.frombuffer(r.stdout, dtype="<i2").copy()


def _to_16k_py(path, speed=1.0):
    """sox's conversion above without sox: 16-bit wav -> 16 kHz mono, sped up by
    `speed` (tempo and pitch, as sox's speed effect), peak-normalized to -1 dBFS."""
    import wave
    try:
        with wave.open(path, "rb") as w:
            sr, ch, width = w.getframerate(), w.getnchannels(), w.getsampwidth()
            raw = w.readframes(w.getnframes())
    except (wave.Error, EOFError, OSError):
        return None
    if width != 2 or not raw:
        return None
    x = np.frombuffer(raw, dtype="<i2").astype(np.float64)
    x = x.reshape(-1, ch).mean(axis=1)
    src_rate = sr * speed  # playing sr*speed samples per second = sped up
    if abs(src_rate - SR) > 0.5:
        from fractions import Fraction
        fr = Fraction(SR / src_rate).limit_denominator(1000)
        try:
            from scipy.signal import resample_poly
            x = resample_poly(x, fr.numerator, fr.denominator)
        except ImportError:
            n = int(len(x) * SR / src_rate)
            x = np.interp(np.arange(n) * (src_rate / SR), np.arange(len(x)), x)
    peak = float(np.max(np.abs(x))) if len(x) else 0.0
    if peak <= 0:
        return None
    x = x * (32767 * 10 ** (-1 / 20) / peak)
    return np.clip(np.round(x), -32768, 32767).astype(np.int16)


def trim(x, margin=0.03):
    """Cut leading/trailing silence (10 ms frame energy 35 dB below peak)."""
    if len(x) < 160:
        return x
    f = x[: len(x) // 160 * 160].astype(np.float32).reshape(-1, 160)
    e = (f * f).mean(axis=1)
    thr = max(e.max() * 10 ** (-3.5), 1.0)
    idx = np.nonzero(e > thr)[0]
    if len(idx) == 0:
        return x[:0]
    m = int(margin * SR)
    a = max(0, idx[0] * 160 - m)
    b = min(len(x), (idx[-1] + 1) * 160 + m)
    return x[a:b]


def synth_batch(voice, texts, tmpdir, speed=1.0):
    """Synthesize texts with one voice config; returns list of int16 arrays (or None)."""
    out = []
    if voice["engine"] == "festival":
        scm = os.path.join(tmpdir, "b.scm")
        with open(scm, "w") as f:
            f.write("(voice_%s)\n" % voice["voice"])
            f.write("(Parameter.set 'Duration_Stretch %.3f)\n" % voice["stretch"])
            for i, t in enumerate(texts):
                esc = t.replace("\\", "\\\\").replace('"', '\\"')
                f.write('(set! u (Utterance Text "%s"))\n(utt.synth u)\n'
                        '(utt.save.wave u "%s/%d.wav" \'riff)\n' % (esc, tmpdir, i))
        lib = ["--libdir", os.path.join(os.environ["WK_TTS_PREFIX"], "festival")] \
            if TTS_ENV else []
        subprocess.run(["festival"] + lib + ["--batch", scm], capture_output=True, timeout=600,
                       env=TTS_ENV)
        for i in range(len(texts)):
            p = os.path.join(tmpdir, "%d.wav" % i)
            out.append(_to_16k(p, speed) if os.path.exists(p) else None)
            if os.path.exists(p):
                os.remove(p)
        return out
    for i, t in enumerate(texts):
        p = os.path.join(tmpdir, "%d.wav" % i)
        if voice["engine"] == "espeak":
            v = voice["voice"] + (("+" + voice["variant"]) if voice["variant"] else "")
            cmd = ["espeak-ng", "-v", v, "-s", str(voice["speed"]), "-p", str(voice["pitch"]),
                   "-w", p, t]
        else:
            cmd = ["flite", "-voice", voice["voice"], "--setf",
                   "duration_stretch=%.3f" % voice["stretch"], "-t", t, "-o", p]
        r = subprocess.run(cmd, capture_output=True, timeout=120, env=TTS_ENV)
        out.append(_to_16k(p, speed) if r.returncode == 0 and os.path.exists(p) else None)
        if os.path.exists(p):
            os.remove(p)
    return out


def write_shard(path, audios, texts, voices):
    lens = [len(a) for a in audios]
    offsets = np.zeros(len(audios) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(lens)
    tmp = os.path.join(os.path.dirname(path), ".tmp-" + os.path.basename(path))
    np.savez(tmp, audio=np.concatenate(audios).astype(np.int16), offsets=offsets,
             text=np.array(texts), voice=np.array(voices))
    os.replace(tmp, path)


def produce(args):
    pool = load_train_texts()
    rng = random.Random(args.seed if args.seed is not None else (os.getpid() ^ int(time.time())))
    outdir = os.path.join(WORK, "data", "train")
    os.makedirs(outdir, exist_ok=True)
    tag = "%d-%d" % (int(time.time()), os.getpid())
    n_shard = 0
    total_s = 0.0
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="wksynth-") as tmpdir:
        while args.hours <= 0 or total_s < args.hours * 3600:
            audios, tx, vs = [], [], []
            while len(audios) < args.shard_size:
                voice = random_voice(rng)
                n = 8 if voice["engine"] == "festival" else 4
                batch = []
                srcs = sorted(pool)
                for _ in range(n):
                    src = rng.choices(srcs, [SOURCE_WEIGHTS[k] for k in srcs])[0]
                    batch.append(rng.choice(pool[src]))
                speed = rng.uniform(0.9, 1.1) if rng.random() < 0.3 else 1.0
                wavs = synth_batch(voice, [texts.spoken(t) for t in batch], tmpdir, speed)
                batch = [texts.written(t) for t in batch]
                for w, t in zip(wavs, batch):
                    if w is None:
                        continue
                    w = trim(w)
                    if len(w) < 0.3 * SR or len(w) > 28 * SR:
                        continue
                    audios.append(w)
                    tx.append(t)
                    vs.append(voice_name(voice))
            path = os.path.join(outdir, "shard-%s-%05d.npz" % (tag, n_shard))
            write_shard(path, audios, tx, vs)
            n_shard += 1
            total_s += sum(len(a) for a in audios) / SR
            print("%s: %d utts, total %.2f h audio, %.1f s audio per s" % (
                os.path.basename(path), len(audios), total_s / 3600,
                total_s / (time.time() - t0)), flush=True)


def make_eval(args):
    sents = load_eval_sentences()
    n = min(args.n, len(sents))
    sets = {"trainvoices": None, "heldout-rms": "rms", "heldout-en029": "en-029"}
    for name, held in sets.items():
        rng = random.Random(1234 + len(name))
        odir = os.path.join(WORK, "eval", name)
        os.makedirs(odir, exist_ok=True)
        audios, tx, vs = [], [], []
        with tempfile.TemporaryDirectory(prefix="wkeval-") as tmpdir:
            for i in range(n):
                voice = random_voice(rng, held)
                w = synth_batch(voice, [sents[i]], tmpdir)[0]
                if w is None:
                    continue
                w = trim(w, margin=0.2)
                audios.append(w)
                tx.append(sents[i])
                vs.append(voice_name(voice))
                _write_wav(os.path.join(odir, "%03d.wav" % i), w)
        write_shard(os.path.join(WORK, "eval", name + ".npz"), audios, tx, vs)
        with open(os.path.join(odir, "transcripts.txt"), "w") as f:
            for i, (t, v) in enumerate(zip(tx, vs)):
                f.write("%03d\t%s\t%s\n" % (i, v, t))
        print("%s: %d utterances" % (name, len(audios)), flush=True)
    with open(os.path.join(HELDOUT_DIR, "voices.txt"), "w") as f:
        f.write("# voices never used for training\n")
        for v in HELDOUT_VOICES:
            f.write(v + "\n")


def _write_wav(path, x):
    import wave
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(np.asarray(x, dtype="<i2").tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("cmd", choices=["texts", "produce", "eval"])
    ap.add_argument("--hours", type=float, default=0, help="produce: stop after this much audio")
    ap.add_argument("--shard-size", type=int, default=200)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--n", type=int, default=200, help="eval: sentences per set")
    args = ap.parse_args()
    if args.cmd == "texts":
        build_texts()
    elif args.cmd == "produce":
        produce(args)
    else:
        make_eval(args)


if __name__ == "__main__":
    main()
