#!/usr/bin/python3
"""Held-out word error rate of whisperknot models, measured through the C engine.

The evaluation sets are held-out sentences (knots/train/heldout/sentences.txt,
never trained on) spoken by
  trainvoices     the training voices (espeak-ng accents, flite, festival)
  heldout-rms     flite rms, a voice never trained on
  heldout-en029   espeak-ng en-029 (Caribbean accent), never trained on
(dev-trainvoices, dev-heldout-rms, dev-heldout-en029: the same voices on other
held-out sentences, for tuning). They are synthesized deterministically
(synth.py's voices and seeds; the first N utterances of a set are the same
whatever N) or loaded from the cache knots/work/eval/<set>.npz that `synth.py
eval` writes.

Real speech (real.py's split: speakers and prompts never trained on), never
synthesized: read from knots/work/eval/<set>.npz, which `real.py sets` writes
(built here with real.make_set when missing); --n takes the first n:
  dev-real-lj        LJ Speech LJ005-* (103 clips, one US woman reading)
  dev-real-fsdd      FSDD speaker theo (500 isolated digits)
  dev-real-asterisk  held-out asterisk prompts (80, one woman, 16 kHz G.722)
  test-real-fsdd     FSDD speaker yweweler (500)
  test-real-asterisk other held-out asterisk prompts
  test-jfk           ../shared/data/jfk.wav (1)
Many speakers (many.py, issue 13): speechocean762, read sentences by non-native
speakers (Mandarin mother tongue, half of them children), never trained on;
knots/work/eval/<set>.npz, which `many.py sets` writes (built here when missing,
from the jimbozhang/speechocean762 snapshot at $WK_MANY_MIRROR or many.py's
default mirror path):
  dev-many           50 speakers (25 children), 3 sentences each (150)
  test-many          50 other speakers, other prompts (150)
--sets takes set names and these groups, mixed: dev-synth (the three synthetic
dev sets), dev-real (the three dev-real sets), dev-all (both), test-synth (the
default), test-real (test-real-fsdd, test-real-asterisk, test-jfk), test-all.

Every utterance becomes a 16 kHz mono WAV under knots/work/eval/wav/<set>/ and
is transcribed by the C engine through `whisperknot-transcribe` (one process
per utterance, 1 thread, the engine's defaults otherwise: beam 5, temperature
fallback), never through torch. `--element` (= `--via element`) runs our
models through the GStreamer element instead, as users and the issue's checks
do: `filesrc ! wavparse ! audioconvert ! audioresample ! whisperknot
text-lines=true ! fakesink` with GST_PLUGIN_PATH=<build>/gst-plugin (gstasr.py:
one Python GStreamer process per --jobs slot that keeps the model loaded and
opens a fresh stream per file); `--via both` gives both columns (label and
label:element) and counts the files where their texts are identical.

Baseline: `--pocketsphinx` adds a column with Debian's pocketsphinx GStreamer
element (gstreamer1.0-pocketsphinx, pocketsphinx-en-us; its default en-us
acoustic model, language model and dictionary) on the same WAV files in the
same run: `filesrc ! wavparse ! audioconvert ! audioresample ! pocketsphinx !
fakesink`, a fresh decoder per file (the pipeline goes back to NULL: in READY
its live cepstral mean would carry over from the previous file), the `final`
hypotheses of its `pocketsphinx` element messages joined with spaces, scored by
the same normalize() + sclite path. It is slow: it reloads its model for every
file, and decodes at 1.5-3x real time here (2026-12-01, --jobs 2 on the busy
2-core machine: 1165 s for dev-real-lj's first 100 clips, 9.3 min of audio;
2.8 s a clip on dev-real-fsdd, against 2.2 and 1.5 s for whisperknot);
--jobs N runs N such processes.

Scoring: both sides go through normalize() (below), then sclite (Debian
package sctk) aligns them; the table gives WER = (S + D + I) / N for each set
(rows) and model (columns), and the same per voice.

Models:
  --ckpt PATH|last      export a training checkpoint to a ggml .bin (f16) with
                        export.py, then as --bin
  --bin MODEL.bin       convert a whisper.cpp ggml .bin to knots of --types
                        (default f16,q8_0,q4_0) with whisperknot-convert
                        --pad-window silence (--pad-window zeros for a real
                        OpenAI model); q4_0-gptq: gptq.py's q4_0 made from
                        the f16 knot (the q4_0 of issue 13's gate)
  --knot [LABEL=]PATH   evaluate an existing knot (repeatable)
  --whisper-cli PATH    also run whisper.cpp's whisper-cli on the .bin (greedy,
                        no fallback on both sides) and report the fraction of
                        identical transcripts and both WERs

Examples:
  nice -n 10 /usr/bin/python3 knots/train/eval.py --ckpt last --n 20
  /usr/bin/python3 knots/train/eval.py --knot knots/model/default.knot --n 200 \\
      --markdown knots/work/eval/wer.md
  # real-speech development sets with the pocketsphinx baseline beside
  nice -n 10 /usr/bin/python3 knots/train/eval.py --knot knots/model/default.knot \\
      --sets dev-real,test-jfk --pocketsphinx --n 100 --jobs 2
  # through the element, and both ways at once to check they agree
  /usr/bin/python3 knots/train/eval.py --knot knots/model/default.knot --sets dev-all --element
  /usr/bin/python3 knots/train/eval.py --knot knots/model/default.knot --sets test-jfk --via both
  /usr/bin/python3 knots/train/eval.py --bin model-f16.bin --types f16 \\
      --whisper-cli /work/thirdparty/whisper.cpp/build/bin/whisper-cli --n 50
  # both engines in f32 (export.py --ftype f32; whisper.cpp's flash attention
  # accumulates in f16, -nfa turns it off)
  /usr/bin/python3 knots/train/eval.py --bin model-f32.bin --types f32 \\
      --compare-type f32 --whisper-cli .../whisper-cli --whisper-cli-args=-nfa

Text normalization (normalize(); in the spirit of Whisper's
EnglishTextNormalizer, much simpler, applied identically to references and
hypotheses):
  1. Unicode compatibility decomposition, accents dropped, typographic quotes
     and dashes made ASCII; lowercase.
  2. Text in brackets or parentheses ([BLANK_AUDIO], (music)) is removed, as
     are the hesitations uh, um, hmm, mm, mhm.
  3. Symbols that are read as words: & -> and, % -> percent, $N -> N dollars,
     @ -> at, + -> plus.
  4. Numbers are written as words: integers (with thousands separators),
     decimals (3.5 -> three point five), ordinals (21st -> twenty first).
     The references contain no digits, so this only matters for hypotheses.
  5. Apostrophes are deleted (don't -> dont, Lord's -> lords, 'tis -> tis),
     so contractions and possessives count as one word on both sides.
  6. Every other character that is not a letter or digit (hyphens included)
     becomes a space; runs of spaces collapse.
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
KNOTS = os.path.dirname(HERE)
ROOT = os.path.dirname(KNOTS)
sys.path.insert(0, HERE)
import synth  # noqa: E402  (voices, synthesis, held-out sentences)
import texts  # noqa: E402  (number words)
import real  # noqa: E402  (real-speech evaluation sets)
import many  # noqa: E402  (many-speaker real-speech evaluation sets)

EVAL_DIR = os.path.join(synth.WORK, "eval")
SR = synth.SR
SETS = {"trainvoices": None, "heldout-rms": "rms", "heldout-en029": "en-029"}
# development sets: the same voices on other held-out sentences (synth.py's
# load_dev_sentences), with other voice draws; tune on these, report the others
SETS.update({"dev-" + k: v for k, v in list(SETS.items())})
# real speech (real.py's split: speakers and prompts never trained on)
REAL_SETS = real.SETS
SETS.update({k: "real" for k in REAL_SETS})
MANY_SETS = many.SETS
SETS.update({k: "many" for k in MANY_SETS})
DEFAULT_SETS = "trainvoices,heldout-rms,heldout-en029"
# --sets shortcuts (mixable with set names: --sets dev-real,test-jfk)
GROUPS = {
    "dev-synth": ["dev-trainvoices", "dev-heldout-rms", "dev-heldout-en029"],
    "dev-real": ["dev-real-lj", "dev-real-fsdd", "dev-real-asterisk"],
    "test-synth": ["trainvoices", "heldout-rms", "heldout-en029"],
    "test-real": ["test-real-fsdd", "test-real-asterisk", "test-jfk"],
}
GROUPS["dev-all"] = GROUPS["dev-synth"] + GROUPS["dev-real"]
GROUPS["test-all"] = GROUPS["test-synth"] + GROUPS["test-real"]
SCLITE_CANDIDATES = ["sclite", "/usr/lib/sctk/bin/sclite"]

# ------------------------------------------------------------ normalizer ----

_ONES = texts._ONES
number_words = texts.words
ordinal_words = texts.ordinal


def _number_sub(m):
    whole, frac, suffix = m.group(1), m.group(2), m.group(3)
    digits = whole.replace(",", "")
    if len(digits) > 15:
        out = " ".join(_ONES[int(d)] for d in digits)
    elif suffix and not frac:
        out = ordinal_words(int(digits))
    else:
        out = number_words(int(digits))
    if frac:
        out += " point " + " ".join(_ONES[int(d)] for d in frac)
    return " " + out + " "


_NUM = re.compile(r"(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(st|nd|rd|th)?\b")
_FILLERS = re.compile(r"\b(?:uh|um|umm|hmm|mm|mhm|hm)\b")


def normalize(text):
    """Words of a transcript for scoring (see the module docstring)."""
    s = unicodedata.normalize("NFKD", text)
    s = "".join(c for c in s if not unicodedata.combining(c))
    s = (s.replace("\u2018", "'").replace("\u2019", "'").replace("\u201c", '"')
         .replace("\u201d", '"').replace("\u2013", "-").replace("\u2014", "-"))
    s = s.lower()
    s = re.sub(r"\[[^\]]*\]|\([^)]*\)|<[^>]*>|\{[^}]*\}", " ", s)
    s = s.replace("&", " and ").replace("%", " percent ").replace("@", " at ")
    s = s.replace("+", " plus ")
    s = re.sub(r"\$\s*(\d[\d,]*(?:\.\d+)?)", r"\1 dollars", s)
    s = _NUM.sub(_number_sub, s)
    s = s.replace("'", "")
    s = re.sub(r"[^a-z0-9]+", " ", s)
    s = _FILLERS.sub(" ", s)
    return " ".join(s.split())


# ------------------------------------------------------------- data sets ----

def edit_distance(a, b):
    """Levenshtein distance between two word lists (substitutions, deletions and
    insertions all cost 1): the errors in WER when sclite is not at hand."""
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
        prev = cur
    return prev[len(b)]


def _load_npz(path):
    with np.load(path) as z:
        audio, off = z["audio"], z["offsets"]
        text = [str(t) for t in z["text"]]
        voice = [str(v) for v in z["voice"]]
    return [(audio[off[i]:off[i + 1]], text[i], voice[i]) for i in range(len(text))]


def set_sentences(name):
    if name.startswith("dev-"):
        return synth.load_dev_sentences()
    return synth.load_eval_sentences()


def _generate_set(name, n, path):
    """Same voices, seeds and order as synth.py's make_eval (dev sets: other
    sentences and seeds)."""
    sents = set_sentences(name)
    n = min(n, len(sents))
    rng = random.Random(1234 + len(name))  # dev-*: longer names, other seeds
    audios, tx, vs = [], [], []
    with tempfile.TemporaryDirectory(prefix="wkeval-") as tmpdir:
        for i in range(n):
            voice = synth.random_voice(rng, SETS[name])
            w = synth.synth_batch(voice, [sents[i]], tmpdir)[0]
            if w is None:
                continue
            w = synth.trim(w, margin=0.2)
            audios.append(w)
            tx.append(sents[i])
            vs.append(synth.voice_name(voice))
    synth.write_shard(path, audios, tx, vs)


def expand_sets(spec):
    """Set names of a --sets value (groups expanded, duplicates dropped)."""
    out = []
    for s in [s.strip() for s in spec.split(",") if s.strip()]:
        for name in GROUPS.get(s, [s]):
            if name not in SETS:
                sys.exit("unknown set %s (sets: %s; groups: %s)" % (
                    name, ", ".join(SETS), ", ".join(GROUPS)))
            if name not in out:
                out.append(name)
    return out


def load_set(name, n, log):
    """First n utterances of a set: [(int16 audio, text, voice)], cached."""
    os.makedirs(EVAL_DIR, exist_ok=True)
    if name in REAL_SETS:
        # real speech is never synthesized: real.py's npz, built when missing
        p = os.path.join(EVAL_DIR, name + ".npz")
        if not os.path.exists(p):
            if not real.set_items(name):
                sys.exit("eval.py: no audio for %s (see real.py: ../shared/data/speech, "
                         "asterisk-core-sounds-en-g722)" % name)
            log("building %s with real.py -> %s" % (name, p))
            t0 = time.time()
            real.make_set(name, p)
            log("  %.0f s" % (time.time() - t0))
        return _load_npz(p)[:n], p
    if name in MANY_SETS:
        # speechocean762, never synthesized: many.py's npz, built when missing
        p = os.path.join(EVAL_DIR, name + ".npz")
        if not os.path.exists(p):
            log("building %s with many.py -> %s" % (name, p))
            t0 = time.time()
            try:
                many.make_set(name, p, log=log)
            except FileNotFoundError as e:
                sys.exit("eval.py: no audio for %s: %s" % (name, e))
            log("  %.0f s" % (time.time() - t0))
        return _load_npz(p)[:n], p
    cands = [os.path.join(EVAL_DIR, name + ".npz")]
    for f in sorted(os.listdir(EVAL_DIR)):
        m = re.match(re.escape(name) + r"-n(\d+)\.npz$", f)
        if m:
            cands.append(os.path.join(EVAL_DIR, f))
    sents = set_sentences(name)
    index = {s: i for i, s in enumerate(sents)}
    for p in cands:
        if not os.path.exists(p):
            continue
        data = _load_npz(p)
        # enough when it holds n utterances, or when it covers the first n
        # sentences (utterances that failed to synthesize are absent)
        covered = index.get(data[-1][1], -1) + 1 if data else 0
        if len(data) >= n or covered >= min(n, len(sents)):
            return data[:n], p
    p = os.path.join(EVAL_DIR, "%s-n%d.npz" % (name, n))
    log("synthesizing %s (%d sentences) -> %s" % (name, n, p))
    t0 = time.time()
    _generate_set(name, n, p)
    log("  %.0f s" % (time.time() - t0))
    return _load_npz(p)[:n], p


def write_wavs(name, data):
    """WAV files for a set; rewritten only when missing or different."""
    d = os.path.join(EVAL_DIR, "wav", name)
    os.makedirs(d, exist_ok=True)
    paths = []
    for i, (a, _, _) in enumerate(data):
        p = os.path.join(d, "%04d.wav" % i)
        if not (os.path.exists(p) and os.path.getsize(p) == 44 + 2 * len(a)):
            tmp = p + ".tmp"
            synth._write_wav(tmp, a)
            os.replace(tmp, p)
        paths.append(p)
    return paths


def _shown_path(p):
    """Relative to the repository when inside it, else absolute."""
    p = os.path.abspath(p)
    return os.path.relpath(p, ROOT) if p.startswith(ROOT + os.sep) else p


def voice_group(v):
    """espeak-ng voices grouped by accent (variants pooled); others as is."""
    if v.startswith("espeak-ng:"):
        return v.split("+", 1)[0]
    return v


# ----------------------------------------------------------- recognizers ----

def find_tool(build, rel, name):
    for b in ([build] if build else []) + ["build-eval", "build"]:
        p = os.path.join(b if os.path.isabs(b) else os.path.join(ROOT, b), rel)
        if os.path.exists(p):
            return p
    w = shutil.which(name)
    if w:
        return w
    sys.exit("eval.py: cannot find %s (build it, or give --build)" % name)


def transcribe_knot(tool, knot, wav, no_fallback, threads, beam):
    cmd = [tool, "-m", knot, "-t", str(threads), "-f", "txt"]
    if no_fallback:
        cmd.append("--no-fallback")
    if beam:
        cmd += ["--beam-size", str(beam)]
    r = subprocess.run(cmd + [wav], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode,
                                                   r.stderr.strip()[-500:]))
    return " ".join(r.stdout.split())


def run_knot(tool, knot, wavs, jobs, no_fallback, threads, beam=0):
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
        return list(ex.map(lambda w: transcribe_knot(tool, knot, w, no_fallback, threads, beam),
                           wavs))


GSTASR = os.path.join(HERE, "gstasr.py")


def run_gst(engine, wavs, jobs, outdir, extra=(), env=None, timeout_s=600):
    """Texts of wavs through a GStreamer element (gstasr.py): `jobs` processes,
    each loading GStreamer (and its model) once and looping over every
    jobs-th file. Returns (texts, info): info holds the slowest startup, the
    summed per-file seconds and the files that failed."""
    os.makedirs(outdir, exist_ok=True)
    jobs = max(1, min(jobs, len(wavs)))
    procs = []
    for j in range(jobs):
        idx = list(range(j, len(wavs), jobs))
        if not idx:
            continue
        res = os.path.join(outdir, "part%d.jsonl" % j)
        errf = open(os.path.join(outdir, "part%d.stderr.txt" % j), "w")
        cmd = ([sys.executable, GSTASR, engine] + list(extra) +
               ["--timeout", str(timeout_s), res] + [wavs[i] for i in idx] +
               ["--index"] + [str(i) for i in idx])
        procs.append((subprocess.Popen(cmd, stdout=errf, stderr=errf, env=env), res, errf))
    texts = [None] * len(wavs)
    info = {"startup": 0.0, "file_seconds": 0.0, "errors": []}
    for pr, res, errf in procs:
        rc = pr.wait()
        errf.close()
        if rc != 0:
            with open(errf.name, errors="replace") as f:
                tail = f.read()[-1500:]
            raise RuntimeError("gstasr.py %s failed (%d): %s" % (engine, rc, tail))
        with open(res) as f:
            for line in f:
                r = json.loads(line)
                if "startup" in r:
                    info["startup"] = max(info["startup"], r["startup"])
                    continue
                texts[r["i"]] = r["text"]
                info["file_seconds"] += r["seconds"]
                if r.get("error"):
                    info["errors"].append("%s: %s" % (r["wav"], r["error"]))
    missing = [wavs[i] for i, t in enumerate(texts) if t is None]
    if missing:
        raise RuntimeError("gstasr.py %s gave no text for %d files (%s ...)" % (
            engine, len(missing), missing[0]))
    return texts, info


def run_whisper_cli(cli, model_bin, wavs, threads, outdir, extra=()):
    """All files of a set in one whisper-cli process (the model loads once)."""
    os.makedirs(outdir, exist_ok=True)
    # -sns: suppress non-speech tokens, as openai's default suppress_tokens="-1"
    # does and as whisperknot always does (whisper.cpp's default lets ; : and
    # such through)
    cmd = [cli, "-m", model_bin, "-t", str(threads), "-l", "en", "-bs", "1", "-bo", "1",
           "-nf", "-sns", "-np", "-otxt"] + list(extra)
    for i in range(len(wavs)):
        cmd += ["-of", os.path.join(outdir, "%04d" % i)]
    for w in wavs:
        cmd += ["-f", w]
    for i in range(len(wavs)):
        p = os.path.join(outdir, "%04d.txt" % i)
        if os.path.exists(p):
            os.remove(p)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=24 * 3600)
    if r.returncode != 0:
        raise RuntimeError("whisper-cli failed (%d): %s" % (r.returncode, r.stderr[-1000:]))
    out = []
    for i in range(len(wavs)):
        p = os.path.join(outdir, "%04d.txt" % i)
        if os.path.exists(p):
            with open(p, encoding="utf-8", errors="replace") as f:
                out.append(" ".join(f.read().split()))
        else:
            out.append("")
    return out


def deb_version(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                       text=True)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else "?"


# --------------------------------------------------------------- scoring ----

_ROW = re.compile(r"^\s*\|\s*(\S+)\s*\|\s*(\d+)\s+(\d+)\s*\|\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)"
                  r"\s+(\d+)\s+(\d+)\s*\|")


def sclite_score(sclite, refs, hyps, groups, outdir, tag):
    """Per-group and total counts from sclite: {group|'Sum': dict}."""
    os.makedirs(outdir, exist_ok=True)
    gid = {g: "g%02d" % i for i, g in enumerate(sorted(set(groups)))}
    back = {v: k for k, v in gid.items()}
    rp, hp = os.path.join(outdir, tag + ".ref.trn"), os.path.join(outdir, tag + ".hyp.trn")
    with open(rp, "w") as fr, open(hp, "w") as fh:
        for i, (r, h, g) in enumerate(zip(refs, hyps, groups)):
            uid = "(%s_%04d)" % (gid[g], i)
            fr.write("%s %s\n" % (normalize(r), uid))
            fh.write("%s %s\n" % (normalize(h), uid))
    r = subprocess.run([sclite, "-r", rp, "trn", "-h", hp, "trn", "-i", "rm", "-o", "rsum",
                        "stdout"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError("sclite failed: " + r.stderr[-1000:])
    with open(os.path.join(outdir, tag + ".rsum.txt"), "w") as f:
        f.write(r.stdout)
    res = {}
    for line in r.stdout.splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        spk = m.group(1)
        snt, wrd, corr, sub, dele, ins, err, serr = map(int, m.groups()[1:])
        key = "Sum" if spk == "Sum" else back.get(spk, spk)
        res[key] = {"utts": snt, "words": wrd, "corr": corr, "sub": sub, "del": dele,
                    "ins": ins, "err": err, "sent_err": serr,
                    "wer": 100.0 * err / wrd if wrd else 0.0}
    if "Sum" not in res:
        raise RuntimeError("no Sum row in sclite output:\n" + r.stdout[-2000:])
    return res


# ---------------------------------------------------------------- models ----

def export_ckpt(ckpt, outdir, log):
    os.makedirs(outdir, exist_ok=True)
    out = os.path.join(outdir, "model-f16.bin")
    cmd = ["/usr/bin/python3", os.path.join(HERE, "export.py"), "--out", out]
    if ckpt != "last":
        cmd += ["--ckpt", ckpt]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode != 0:
        sys.exit("export failed:\n" + r.stdout + r.stderr)
    log(r.stdout.strip() + "  (%.0f s)" % (time.time() - t0))
    m = re.search(r"from (\S+), step (\S+)", r.stdout)
    return out, (m.group(1) if m else ckpt), (m.group(2) if m else "?")


def ckpt_info(path):
    """Step, windows and training time recorded in a checkpoint (torch in a child)."""
    code = ("import json, os, sys, torch\n"
            "torch.set_num_threads(1)\n"
            "sys.path.insert(0, sys.argv[2])\n"
            "import knotio\n"  # a torch checkpoint, or a knot with its side file
            "print(json.dumps(knotio.checkpoint_info(sys.argv[1])))\n")
    r = subprocess.run(["/usr/bin/python3", "-c", code, path, HERE], capture_output=True,
                       text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)
    try:
        info = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {}
    info["mtime"] = datetime.datetime.utcfromtimestamp(os.path.getmtime(path)).strftime(
        "%Y-%m-%d %H:%M UTC")
    return info


# the default model's alignment heads (d=256, 4 decoder layers x 4 heads),
# chosen on 40 festival sentences (kal_diphone, cmu_us_slt_arctic_hts) with
# tools/word-times.c --search-heads (2026-12-01; chosen again for step 19042
# on 2026-12-02: knots/MODEL.md); a retrained model should have them chosen
# again
OWN_ALIGNMENT_HEADS = "2:3,2:2,1:2,3:0"


def convert(tool, src, dst, qtype, pad_window, ts_rule="max"):
    # our model never saw a <|startofprev|> prompt: --max-text-ctx 0 (ignored by
    # single-window utterances; long files and the live policy need it); its
    # timestamps decode better without openai's sum rule (--timestamp-rule max);
    # it was trained on short windows with a shortened encoder context
    # (--live-audio-ctx short); its word times come from the decoder heads
    # chosen on synthesized speech with known word boundaries
    # (tools/word-times.c --search-heads; knots/MODEL.md, "Word times")
    extra = (["--max-text-ctx", "0", "--timestamp-rule", ts_rule,
              "--live-audio-ctx", "short",
              "--alignment-heads", OWN_ALIGNMENT_HEADS]
             if pad_window == "silence" else [])
    r = subprocess.run([tool, "--type", qtype, "--pad-window", pad_window] + extra + [src, dst],
                       capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        sys.exit("whisperknot-convert --type %s failed:\n%s%s" % (qtype, r.stdout, r.stderr))


# ---------------------------------------------------------------- report ----

def fmt_cell(c):
    return "%.1f%% (%d/%d/%d of %d)" % (c["wer"], c["sub"], c["del"], c["ins"], c["words"])


def markdown(results, labels, sets, per_voice, meta, compare, timing=None, same_text=None):
    L = []
    L.append("Held-out WER through the C engine (`knots/train/eval.py`), %s." % meta["date"])
    names = {"model": "Model", "step": "Checkpoint step", "training": "Training",
             "n": "Set size", "decoding": "Decoding", "baseline": "Baseline",
             "normalizer": "Normalizer", "time": "Evaluation time", "input": "Input"}
    for k in ("model", "step", "training", "n", "decoding", "input", "baseline", "normalizer",
              "time"):
        if k in meta:
            L.append("%s: %s  " % (names[k], meta[k]))
    L.append("")
    L.append("Cells: WER (substitutions/deletions/insertions of N reference words).")
    L.append("")
    L.append("| set | utts | " + " | ".join(labels) + " |")
    L.append("|---|---:|" + "---:|" * len(labels))
    for s in sets:
        row = results[labels[0]][s]["Sum"]
        L.append("| %s | %d | " % (s, row["utts"]) +
                 " | ".join(fmt_cell(results[lb][s]["Sum"]) for lb in labels) + " |")
    L.append("")
    L.append("Per voice (espeak-ng variants pooled by accent), WER %:")
    L.append("")
    L.append("| set | voice | utts | words | " + " | ".join(labels) + " |")
    L.append("|---|---|---:|---:|" + "---:|" * len(labels))
    for s in sets:
        for g in per_voice[s]:
            c0 = results[labels[0]][s][g]
            L.append("| %s | %s | %d | %d | " % (s, g, c0["utts"], c0["words"]) +
                     " | ".join("%.1f" % results[lb][s][g]["wer"] for lb in labels) + " |")
    if timing:
        L.append("")
        L.append("Wall time in seconds (real-time factor), all utterances of a set:")
        L.append("")
        L.append("| set | audio s | " + " | ".join(labels) + " |")
        L.append("|---|---:|" + "---:|" * len(labels))
        for s in sets:
            L.append("| %s | %.0f | " % (s, timing[labels[0]][s][1]) + " | ".join(
                "%.0f (%.2f)" % (timing[lb][s][0], timing[lb][s][0] / max(1e-9, timing[lb][s][1]))
                for lb in labels) + " |")
    if same_text:
        L.append("")
        L.append("whisperknot-transcribe against the element, same knot, same files:")
        L.append("")
        L.append("| model | set | utts | identical text | identical normalized |")
        L.append("|---|---|---:|---:|---:|")
        for lb, per in same_text.items():
            for s, (same, same_n, n) in per.items():
                L.append("| %s | %s | %d | %d | %d |" % (lb, s, n, same, same_n))
    if compare:
        L.append("")
        L.append("Against whisper.cpp (`whisper-cli -bs 1 -bo 1 -nf -sns%s` on the ggml .bin; "
                 "ours `--beam-size 1 --no-fallback` on a %s knot with openai's timestamp rule, "
                 "as whisper.cpp decodes):" % ("".join(" " + a for a in compare["cli_args"]),
                                               compare["label"]))
        L.append("")
        L.append("| set | utts | identical text | identical normalized | WER ours | "
                 "WER whisper.cpp |")
        L.append("|---|---:|---:|---:|---:|---:|")
        for s in sets:
            c = compare["sets"][s]
            L.append("| %s | %d | %.1f%% | %.1f%% | %.1f%% | %.1f%% |" % (
                s, c["utts"], c["identical"], c["identical_norm"], c["wer_ours"], c["wer_cpp"]))
    L.append("")
    return "\n".join(L)


def print_table(results, labels, sets, per_voice, timing):
    w = max(20, max(len(lb) for lb in labels) + 2)
    print()
    print("%-18s %5s  " % ("set", "utts") + "".join("%-*s" % (w + 12, lb) for lb in labels))
    for s in sets:
        row = "%-18s %5d  " % (s, results[labels[0]][s]["Sum"]["utts"])
        for lb in labels:
            row += "%-*s" % (w + 12, fmt_cell(results[lb][s]["Sum"]))
        print(row)
    print()
    print("per voice, WER %:")
    print("%-18s %-30s %5s %6s  " % ("set", "voice", "utts", "words") +
          "".join("%17s" % lb[-16:] for lb in labels))
    for s in sets:
        for g in per_voice[s]:
            c0 = results[labels[0]][s][g]
            print("%-18s %-30s %5d %6d  " % (s, g, c0["utts"], c0["words"]) +
                  "".join("%17.1f" % results[lb][s][g]["wer"] for lb in labels))
    print()
    print("time (wall, s) and real-time factor per model and set:")
    for lb in labels:
        print("  %-24s " % lb + "  ".join(
            "%s %.1f s (RTF %.3f)" % (s, timing[lb][s][0], timing[lb][s][0] / timing[lb][s][1])
            for s in sets))


# ------------------------------------------------------------------ main ----

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200, help="utterances per set (default 200)")
    ap.add_argument("--sets", default=DEFAULT_SETS,
                    help="comma-separated sets and groups (default %s; groups: %s)" % (
                        DEFAULT_SETS, ", ".join(GROUPS)))
    ap.add_argument("--ckpt", help="checkpoint to export first ('last' = knots/work/ckpt/last.pt "
                    "or the committed one)")
    ap.add_argument("--bin", help="whisper.cpp ggml .bin to convert to knots")
    ap.add_argument("--types", default="f16,q8_0,q4_0",
                    help="knot types made from --bin/--ckpt: f32, f16, q8_0, q4_0 (the "
                    "converter's) and q4_0-gptq (knots/train/gptq.py's, which needs the real "
                    "training shards)")
    ap.add_argument("--pad-window", choices=["silence", "zeros"], default="silence",
                    help="whisperknot-convert --pad-window for knots made from --bin/--ckpt "
                    "(default silence: how our model was trained; zeros for OpenAI's models)")
    ap.add_argument("--knot", action="append", default=[], help="[LABEL=]PATH of a knot")
    ap.add_argument("--models-dir", help="where exported/converted models go (default: a "
                    "temporary directory, removed afterwards)")
    ap.add_argument("--build", help="meson build dir with the tools (default build-eval, build)")
    ap.add_argument("--whisper-cli", help="whisper.cpp's whisper-cli: compare on the .bin")
    ap.add_argument("--whisper-cli-args", default="",
                    help="more whisper-cli options, given with '=' since they start with a "
                    "dash: --whisper-cli-args=-nfa (no flash attention)")
    ap.add_argument("--compare-type", default="f16", help="our knot type compared (default f16)")
    ap.add_argument("--no-fallback", action="store_true",
                    help="WER runs without the engine's temperature fallback (default: with it, "
                         "as users get it)")
    ap.add_argument("--beam-size", type=int, default=0,
                    help="our engine's beam width (default 0: the engine's default)")
    ap.add_argument("--via", choices=["tool", "element", "both"], default="tool",
                    help="our models through whisperknot-transcribe (default), through the "
                    "GStreamer element (filesrc ! wavparse ! audioconvert ! audioresample ! "
                    "whisperknot, <build>/gst-plugin), or both side by side")
    ap.add_argument("--element", dest="via", action="store_const", const="element",
                    help="same as --via element")
    ap.add_argument("--pocketsphinx", action="store_true",
                    help="add a column: Debian's pocketsphinx GStreamer element (en-us) on "
                    "the same WAV files, scored the same way")
    ap.add_argument("--loss", type=float, default=0.0,
                    help="element and pocketsphinx: feed the audio as 20 ms packets "
                    "(appsrc), each lost with this probability (gstasr.py --loss)")
    ap.add_argument("--loss-as", choices=("gap", "hole"), default="gap",
                    help="a lost packet: a GAP event (default), or a timestamp hole and DISCONT")
    ap.add_argument("--loss-seed", type=int, default=1, help="the losses' seed (default 1)")
    ap.add_argument("--jobs", type=int, default=1, help="transcriber processes at once")
    ap.add_argument("--threads", type=int, default=1, help="threads per transcriber process")
    ap.add_argument("--nice", type=int, default=10, help="niceness to run at (default 10)")
    ap.add_argument("--out", help="results directory (default knots/work/eval/results/<time>)")
    ap.add_argument("--markdown", help="also write the table here (default <out>/wer.md)")
    ap.add_argument("--step", help="checkpoint step for the report when not known")
    args = ap.parse_args()

    if args.nice:
        try:
            os.nice(args.nice)
        except OSError:
            pass
    t_start = time.time()
    stamp = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
    out = args.out or os.path.join(EVAL_DIR, "results",
                                   datetime.datetime.utcnow().strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    logf = open(os.path.join(out, "log.txt"), "a")

    def log(msg):
        line = "%s %s" % (time.strftime("%H:%M:%S"), msg)
        print(line, flush=True)
        logf.write(line + "\n")
        logf.flush()

    sclite = next((shutil.which(c) for c in SCLITE_CANDIDATES if shutil.which(c)), None)
    if not sclite:
        sys.exit("eval.py: sclite not found (apt-get install sctk)")
    transcribe = find_tool(args.build, "tools/whisperknot-transcribe", "whisperknot-transcribe")
    sets = expand_sets(args.sets)
    gst_env = None
    if args.via != "tool":
        plugin = find_tool(args.build, "gst-plugin/libgstwhisperknot.so", "libgstwhisperknot.so")
        gst_env = dict(os.environ)
        gst_env["GST_PLUGIN_PATH"] = os.pathsep.join(
            [os.path.dirname(plugin)] + [x for x in [os.environ.get("GST_PLUGIN_PATH")] if x])
        if args.no_fallback:
            sys.exit("eval.py: the element has no --no-fallback (use --via tool)")

    tmp_models = None
    models_dir = args.models_dir
    if not models_dir and (args.ckpt or args.bin):
        tmp_models = tempfile.mkdtemp(prefix="wk-eval-models-")
        models_dir = tmp_models
    meta = {"date": stamp, "n": "%d utterances per set (at most)" % args.n}
    step = args.step
    model_bin = args.bin
    if args.ckpt:
        model_bin, ck_path, step = export_ckpt(args.ckpt, models_dir, log)
        meta["model"] = "%s exported to ggml f16" % _shown_path(ck_path)
        info = ckpt_info(ck_path)
        if info.get("train_seconds") is not None:
            meta["training"] = ("checkpoint of %s: step %s, %s windows of 30 s seen, %.2f h "
                                "of training compute" % (info["mtime"], info.get("step"),
                                                         info.get("windows_seen"),
                                                         info["train_seconds"] / 3600))
            log(meta["training"])
    labels, knots = [], {}
    if model_bin:
        conv = find_tool(args.build, "knots/whisperknot-convert", "whisperknot-convert")
        stem = os.path.splitext(os.path.basename(model_bin))[0]
        for t in [t for t in args.types.split(",") if t]:
            dst = os.path.join(models_dir, "%s.%s.knot" % (stem, t))
            t0 = time.time()
            if t == "q4_0-gptq":
                # gptq.py's q4_0 (knots/MODEL.md): from the f16 knot, with the
                # real training shards as calibration
                src = os.path.join(models_dir, "%s.gptq-src.knot" % stem)
                convert(conv, model_bin, src, "f16", args.pad_window)
                subprocess.run(["/usr/bin/python3", os.path.join(HERE, "gptq.py"), "--knot", src,
                                "--out", dst, "--convert", conv], check=True,
                               stdout=subprocess.DEVNULL)
                os.unlink(src)
            else:
                convert(conv, model_bin, dst, t, args.pad_window)
            log("converted %s -> %s (%.1f MB, %.1f s)" % (t, dst, os.path.getsize(dst) / 1e6,
                                                          time.time() - t0))
            labels.append(t)
            knots[t] = dst
        meta.setdefault("model", os.path.basename(model_bin))
    for k in args.knot:
        lb, _, p = k.rpartition("=")
        lb = lb or os.path.splitext(os.path.basename(p))[0]
        labels.append(lb)
        knots[lb] = p
        meta.setdefault("model", _shown_path(p))
    if not labels:
        sys.exit("nothing to evaluate: give --ckpt, --bin or --knot")
    if step:
        meta["step"] = str(step)
    no_fb = args.no_fallback
    meta["decoding"] = ("%s, %s, %s, %d thread(s)" %
                        ({"tool": "whisperknot-transcribe",
                          "element": "the whisperknot element (`filesrc ! wavparse ! "
                          "audioconvert ! audioresample ! whisperknot text-lines=true`)",
                          "both": "whisperknot-transcribe and (`:element` columns) the "
                          "whisperknot element"}[args.via],
                         "beam search of %d" % args.beam_size if args.beam_size
                         else "the engine's default search",
                         "no temperature fallback" if no_fb else "temperature fallback 0.2",
                         args.threads))
    # columns: (label, kind, knot); kind tool, element or pocketsphinx
    columns = []
    for lb in labels:
        if args.via in ("tool", "both"):
            columns.append((lb, "tool", knots[lb]))
        if args.via in ("element", "both"):
            columns.append((lb + ":element" if args.via == "both" else lb, "element",
                            knots[lb]))
    if args.pocketsphinx:
        columns.append(("pocketsphinx", "pocketsphinx", None))
        meta["baseline"] = ("pocketsphinx: Debian's GStreamer element (gstreamer1.0-pocketsphinx "
                            "%s, pocketsphinx-en-us: en-us acoustic model, en-us.lm.bin, "
                            "cmudict-en-us.dict, the element's default properties) on the same "
                            "WAV files (`filesrc ! wavparse ! audioconvert ! audioresample ! "
                            "pocketsphinx`, a fresh decoder per file), its final hypotheses "
                            "joined" % deb_version("gstreamer1.0-pocketsphinx"))
    if args.loss > 0:
        if args.via == "tool":
            sys.exit("eval.py: --loss needs --element (or --pocketsphinx alone)")
        meta["input"] = ("every file as 20 ms packets from an appsrc, each lost with p = %g "
                         "(seed %d), sent as %s" % (
                             args.loss, args.loss_seed,
                             "a GAP event" if args.loss_as == "gap"
                             else "a timestamp hole with DISCONT on the next buffer"))
    model_labels = labels
    labels = [c[0] for c in columns]
    meta["normalizer"] = "eval.py normalize() (lowercase, no punctuation, numbers as words)"

    data, wavs, per_voice = {}, {}, {}
    for s in sets:
        d, src = load_set(s, args.n, log)
        data[s] = d
        wavs[s] = write_wavs(s, d)
        groups = sorted(set(voice_group(v) for _, _, v in d))
        per_voice[s] = groups
        log("%s: %d utterances, %.1f min of audio, %d voice groups (from %s)" % (
            s, len(d), sum(len(a) for a, _, _ in d) / SR / 60, len(groups),
            os.path.relpath(src, ROOT)))

    results, timing, hyps_all, gst_info = {}, {}, {}, {}
    for lb, kind, knot in columns:
        results[lb], timing[lb], hyps_all[lb] = {}, {}, {}
        for s in sets:
            t0 = time.time()
            if kind == "tool":
                hyps = run_knot(transcribe, knot, wavs[s], args.jobs, no_fb, args.threads,
                                args.beam_size)
            else:
                if kind == "element":
                    extra = ["--model", knot, "--threads", str(args.threads),
                             "--beam-size", str(args.beam_size)]
                    engine, env = "whisperknot", gst_env
                else:
                    extra, engine, env = [], "pocketsphinx", None
                if args.loss > 0:
                    extra += ["--loss", str(args.loss), "--loss-as", args.loss_as,
                              "--loss-seed", str(args.loss_seed)]
                hyps, info = run_gst(engine, wavs[s], args.jobs,
                                     os.path.join(out, lb.replace(":", "-"), s + ".gst"),
                                     extra, env)
                gst_info.setdefault(lb, {})[s] = info
                for e in info["errors"]:
                    log("%s %s: %s" % (lb, s, e))
            dt = time.time() - t0
            audio_s = sum(len(a) for a, _, _ in data[s]) / SR
            timing[lb][s] = (dt, audio_s)
            hyps_all[lb][s] = hyps
            refs = [t for _, t, _ in data[s]]
            groups = [voice_group(v) for _, _, v in data[s]]
            d = os.path.join(out, lb.replace(":", "-"))
            res = sclite_score(sclite, refs, hyps, groups, d, s)
            results[lb][s] = res
            with open(os.path.join(d, s + ".jsonl"), "w") as f:
                for (a, r, v), h, w in zip(data[s], hyps, wavs[s]):
                    f.write(json.dumps({"wav": os.path.relpath(w, ROOT), "voice": v, "ref": r,
                                        "hyp": h}) + "\n")
            extra_t = ""
            if kind != "tool":
                gi_ = gst_info[lb][s]
                extra_t = ", startup %.1f s, %d error(s)" % (gi_["startup"], len(gi_["errors"]))
            log("%-12s %-18s WER %s  %.1f s for %.1f s of audio (%.2f s/utt%s)" % (
                lb, s, fmt_cell(res["Sum"]), dt, audio_s, dt / max(1, len(hyps)), extra_t))

    same_text = {}
    if args.via == "both":
        for lb in model_labels:
            for s in sets:
                a, b = hyps_all[lb][s], hyps_all[lb + ":element"][s]
                same_text.setdefault(lb, {})[s] = (
                    sum(x == y for x, y in zip(a, b)),
                    sum(normalize(x) == normalize(y) for x, y in zip(a, b)), len(a))
                diffs = [(w, x, y) for w, x, y in zip(wavs[s], a, b) if x != y]
                for w, x, y in diffs[:3]:
                    log("tool/element differ on %s:\n  tool:    %s\n  element: %s" % (
                        os.path.relpath(w, ROOT), x, y))

    compare = None
    if args.whisper_cli:
        if not model_bin:
            sys.exit("--whisper-cli needs the .bin (--bin or --ckpt)")
        ct = args.compare_type
        if ct not in knots:
            sys.exit("--compare-type %s was not converted (--types)" % ct)
        compare = {"label": ct, "sets": {}, "cli_args": args.whisper_cli_args.split()}
        # like for like: whisper-cli decodes greedily (-bs 1 -bo 1 -nf) with openai's
        # timestamp rules, so ours runs on a knot converted with the sum rule,
        # greedy, without fallback
        cmp_knot = os.path.join(models_dir, "compare.%s.knot" % ct)
        convert(conv, model_bin, cmp_knot, ct, args.pad_window, ts_rule="sum")
        for s in sets:
            refs = [t for _, t, _ in data[s]]
            groups = [voice_group(v) for _, _, v in data[s]]
            t0 = time.time()
            ours = run_knot(transcribe, cmp_knot, wavs[s], args.jobs, True, args.threads,
                            beam=1)
            log("ours %s %s greedy --no-fallback: %.1f s" % (ct, s, time.time() - t0))
            t0 = time.time()
            cpp = run_whisper_cli(args.whisper_cli, model_bin, wavs[s], args.threads,
                                  os.path.join(out, "whisper.cpp", s), compare["cli_args"])
            log("whisper-cli %s: %.1f s" % (s, time.time() - t0))
            r_ours = sclite_score(sclite, refs, ours, groups, os.path.join(out, "cmp-ours"), s)
            r_cpp = sclite_score(sclite, refs, cpp, groups, os.path.join(out, "whisper.cpp"), s)
            same = sum(a == b for a, b in zip(ours, cpp))
            same_n = sum(normalize(a) == normalize(b) for a, b in zip(ours, cpp))
            n = max(1, len(ours))
            compare["sets"][s] = {"utts": len(ours), "identical": 100.0 * same / n,
                                  "identical_norm": 100.0 * same_n / n,
                                  "wer_ours": r_ours["Sum"]["wer"],
                                  "wer_cpp": r_cpp["Sum"]["wer"]}
            with open(os.path.join(out, "whisper.cpp", s + ".diff.jsonl"), "w") as f:
                for (a, r, v), o, c in zip(data[s], ours, cpp):
                    if o != c:
                        f.write(json.dumps({"ref": r, "ours": o, "whisper.cpp": c}) + "\n")
            log("compare %-14s identical %d/%d (normalized %d), WER ours %.1f%% whisper.cpp "
                "%.1f%%" % (s, same, len(ours), same_n, r_ours["Sum"]["wer"],
                            r_cpp["Sum"]["wer"]))

    wall = sum(t[0] for v in timing.values() for t in v.values())
    n_utts = sum(len(hyps_all[lb][s]) for lb in labels for s in sets)
    meta["time"] = ("%.0f s of transcription for %d utterance runs (%.2f s each, 1 process at "
                    "a time x %d thread(s); %s)" % (wall, n_utts, wall / max(1, n_utts),
                                                    args.threads, os.uname().nodename)
                    if args.jobs <= 1 else
                    "%.0f s of transcription for %d utterance runs, %d processes at a time" % (
                        wall, n_utts, args.jobs))
    print_table(results, labels, sets, per_voice, timing)
    if compare:
        print()
        print("whisper.cpp comparison (%s knot, greedy, no fallback):" % compare["label"])
        for s in sets:
            c = compare["sets"][s]
            print("  %-14s identical %.1f%% (normalized %.1f%%) of %d; WER ours %.1f%%, "
                  "whisper.cpp %.1f%%" % (s, c["identical"], c["identical_norm"], c["utts"],
                                          c["wer_ours"], c["wer_cpp"]))
    if same_text:
        print()
        print("whisperknot-transcribe against the element (identical text, normalized, of n):")
        for lb, per in same_text.items():
            for s, (same, same_n, n) in per.items():
                print("  %-12s %-18s %d, %d of %d" % (lb, s, same, same_n, n))
    md = markdown(results, labels, sets, per_voice, meta, compare, timing, same_text)
    md_path = args.markdown or os.path.join(out, "wer.md")
    with open(md_path, "w") as f:
        f.write(md)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"meta": meta, "results": results, "compare": compare,
                   "same_text": same_text, "gst": gst_info,
                   "timing": {lb: {s: {"wall_s": t[0], "audio_s": t[1]}
                                   for s, t in v.items()} for lb, v in timing.items()}},
                  f, indent=1)
    log("markdown table: %s; results: %s; total %.0f s" % (md_path, out, time.time() - t_start))
    if tmp_models:
        shutil.rmtree(tmp_models, ignore_errors=True)


if __name__ == "__main__":
    main()
