#!/usr/bin/python3
"""Many-speaker real English speech for evaluating the default model (issue 13).

Source: speechocean762 (Zhang et al., Interspeech 2021; see DATA-many.md): 5,000
read English sentences by 250 speakers, all with Mandarin as mother tongue, half
of them children (ages 6-15) and half adults (19-43), 16 kHz mono WAV, with the
prompt text as transcript. Read from a snapshot of its GitHub repository
jimbozhang/speechocean762 (pinned commit below), either the bare git directory
that the search tool's `fetch` leaves (/work/.mirror/jimbozhang+speechocean762/repo)
or a plain directory with the corpus layout (WAVE/, train/, test/).

Split (fixed here, never tuned; these 100 speakers are never trained on):
  dev-many   50 speakers of the corpus's own `train` half
  test-many  50 speakers of the corpus's own `test` half (so dev and test
             speakers are disjoint), and no prompt text that dev-many uses
In each: 25 children (age < 18) and 25 adults, the first by md5(speaker id)
in each group; 3 utterances per speaker, the first by md5(utterance id),
skipping prompts made only of digit words ("ZERO THREE FIVE ONE": eval.py's
normalizer reads a hypothesis "0351" as "three hundred fifty one", so those
would score the number format, not the recognition). 150 utterances a set,
ordered round-robin over the speakers (the first 50 are 50 different
speakers, so `eval.py --n 20` already spans 20 of them).

Transcripts are the corpus's prompts (upper case, no punctuation; eval.py's
normalize() lowercases both sides). They are what the speaker was asked to
read: children sometimes misread, which counts as errors here.

Training (`many.py train`): the other 150 speakers' utterances, leaving out every
prompt text that dev-many or test-many holds (speakers read shared prompt lists,
so a held-out sentence read by a training speaker would still be learnt) and the
digit-only prompts; transcripts in sentence case with a full stop, as the model
writes, -> knots/work/data/real/shard-ocean.npz (train.py's --real-weights key
`ocean`).

Commands:
  many.py train [--mirror DIR] [--commit SHA]
  many.py sets [--mirror DIR] [--commit SHA] [--write-manifest]
      -> knots/work/eval/dev-many.npz, test-many.npz (eval.py's format) and
         knots/work/eval/<set>.tsv (manifest: file, speaker, age, gender,
         transcript); checks the manifests against the committed copies in
         knots/train/many/ (--write-manifest rewrites those)
eval.py builds a missing set itself (make_set) from $WK_MANY_MIRROR or the
default mirror path.
"""
import argparse
import hashlib
import io
import os
import subprocess
import sys
import wave

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import synth  # noqa: E402  (WORK, write_shard)

SR = 16000
REPO = "jimbozhang/speechocean762"
COMMIT = "613968e3b0b789fc33936fb5eba1973176ba7d11"  # 2023, "Update README.md"
DEFAULT_MIRROR = "/work/.mirror/jimbozhang+speechocean762/repo"
MANIFEST_DIR = os.path.join(HERE, "many")
EVAL_DIR = os.path.join(synth.WORK, "eval")
SETS = ("dev-many", "test-many")
HALF = {"dev-many": "train", "test-many": "test"}  # the corpus's own halves
N_SPK = 25          # speakers per age group (children, adults) and set
N_UTT = 3           # utterances per speaker
CHILD_AGE = 18
MAX_SECONDS = 28.0  # the 30 s window, as real.py
DIGITS = set("ZERO ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT NINE OH".split())


def _h(s):
    return hashlib.md5(s.encode("utf-8")).hexdigest()


class Corpus:
    """Files of the corpus at one commit of a git directory, or in a plain directory."""

    def __init__(self, path=None, commit=COMMIT):
        path = path or os.environ.get("WK_MANY_MIRROR") or DEFAULT_MIRROR
        self.path, self.commit, self.proc = path, None, None
        if os.path.isdir(os.path.join(path, "WAVE")) and os.path.isdir(os.path.join(path, "test")):
            return  # plain directory (a checkout or the corpus's own tarball)
        if not os.path.isdir(path):
            raise FileNotFoundError(
                "no speechocean762 at %s: fetch github:%s (the search tool), or give --mirror / "
                "$WK_MANY_MIRROR" % (path, REPO))
        r = subprocess.run(["git", "--git-dir", path, "rev-parse", "--verify", "-q",
                            commit + "^{commit}"], capture_output=True, text=True)
        if r.returncode != 0:
            raise FileNotFoundError("commit %s is not in %s (give --commit HEAD to take the "
                                    "snapshot's own, and say so)" % (commit, path))
        self.commit = r.stdout.strip()
        self.proc = subprocess.Popen(["git", "--git-dir", path, "cat-file", "--batch"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def read(self, rel):
        if self.proc is None:
            with open(os.path.join(self.path, rel), "rb") as f:
                return f.read()
        self.proc.stdin.write(("%s:%s\n" % (self.commit, rel)).encode())
        self.proc.stdin.flush()
        head = self.proc.stdout.readline().decode().split()
        if len(head) != 3 or head[1] != "blob":
            raise FileNotFoundError("%s: %s not in %s" % (" ".join(head), rel, self.path))
        data = self.proc.stdout.read(int(head[2]))
        self.proc.stdout.read(1)
        return data

    def table(self, rel):
        """Kaldi-style file: first field -> rest of the line."""
        out = {}
        for line in self.read(rel).decode("utf-8").splitlines():
            parts = line.strip().split(None, 1)
            if parts:
                out[parts[0]] = parts[1] if len(parts) > 1 else ""
        return out

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait()
            self.proc = None


def load_wav(data):
    """int16 mono 16 kHz samples of a WAV file's bytes (resampled if need be)."""
    with wave.open(io.BytesIO(data), "rb") as w:
        sr, ch, sw = w.getframerate(), w.getnchannels(), w.getsampwidth()
        raw = w.readframes(w.getnframes())
    assert sw == 2, "16-bit PCM expected"
    x = np.frombuffer(raw, dtype="<i2").reshape(-1, ch)
    if ch == 1 and sr == SR:
        return x[:, 0].copy()
    import real
    y = real.resample(x.astype(np.float32).mean(axis=1) / 32768.0, sr)
    return np.clip(np.round(y * 32767), -32768, 32767).astype(np.int16)


def digits_only(text):
    return all(w in DIGITS for w in text.split())


def select(corpus, name, avoid_texts=()):
    """[(utt, speaker, age, gender, text, rel_path)] of a set, in eval order."""
    half = HALF[name]
    text = corpus.table(half + "/text")
    spk2utt = {s: u.split() for s, u in corpus.table(half + "/spk2utt").items()}
    age = {s: int(a) for s, a in corpus.table(half + "/spk2age").items()}
    gender = corpus.table(half + "/spk2gender")
    wav = corpus.table(half + "/wav.scp")
    avoid = set(avoid_texts)
    groups = ([s for s in spk2utt if age[s] < CHILD_AGE],
              [s for s in spk2utt if age[s] >= CHILD_AGE])
    speakers = []
    for g in groups:
        speakers += sorted(g, key=_h)[:N_SPK]
    speakers.sort(key=_h)  # children and adults mixed
    per_spk = []
    for s in speakers:
        utts = [u for u in sorted(spk2utt[s], key=_h)
                if text.get(u, "").strip() and not digits_only(text[u]) and text[u] not in avoid]
        per_spk.append([(u, s, age[s], gender.get(s, "?"), text[u], wav[u]) for u in utts[:N_UTT]])
    out = []
    for i in range(N_UTT):  # round-robin: the first len(speakers) are all different speakers
        out += [p[i] for p in per_spk if i < len(p)]
    return out


def voice(age, gender):
    return "real:so762-%s-%s" % ("child" if age < CHILD_AGE else "adult", gender)


def manifest_lines(items):
    lines = ["# file\tspeaker\tage\tgender\ttranscript\t(speechocean762 @ %s)" % COMMIT[:7]]
    for u, s, a, g, t, rel in items:
        lines.append("%s\t%s\t%d\t%s\t%s" % (rel, s, a, g, t))
    return "\n".join(lines) + "\n"


def build_sets(mirror=None, commit=COMMIT, names=SETS, log=print, write_manifest=False):
    corpus = Corpus(mirror, commit)
    try:
        os.makedirs(EVAL_DIR, exist_ok=True)
        dev = select(corpus, "dev-many")
        chosen = {"dev-many": dev,
                  "test-many": select(corpus, "test-many", avoid_texts=[it[4] for it in dev])}
        for name in names:
            items = chosen[name]
            audios, texts, voices = [], [], []
            kept = []
            for it in items:
                a = load_wav(corpus.read(it[5]))
                if len(a) < 0.2 * SR or len(a) > MAX_SECONDS * SR:
                    log("%s: skipped %s (%.1f s)" % (name, it[5], len(a) / SR))
                    continue
                audios.append(a)
                texts.append(it[4])
                voices.append(voice(it[2], it[3]))
                kept.append(it)
            path = os.path.join(EVAL_DIR, name + ".npz")
            synth.write_shard(path, audios, texts, voices)
            man = manifest_lines(kept)
            with open(os.path.join(EVAL_DIR, name + ".tsv"), "w", encoding="utf-8") as f:
                f.write(man)
            committed = os.path.join(MANIFEST_DIR, name + ".tsv")
            if write_manifest:
                os.makedirs(MANIFEST_DIR, exist_ok=True)
                with open(committed, "w", encoding="utf-8") as f:
                    f.write(man)
                check = "manifest written to %s" % os.path.relpath(committed, os.getcwd())
            elif os.path.exists(committed):
                with open(committed, encoding="utf-8") as f:
                    check = ("same as the committed manifest" if f.read() == man else
                             "DIFFERS from the committed manifest %s" % committed)
            else:
                check = "no committed manifest"
            spk = sorted(set(it[1] for it in kept))
            kids = sorted(set(it[1] for it in kept if it[2] < CHILD_AGE))
            log("%s: %d utterances, %.1f min, %d speakers (%d children), %d f / %d m -> %s (%s)"
                % (name, len(kept), sum(len(a) for a in audios) / SR / 60, len(spk), len(kids),
                   len(set(it[1] for it in kept if it[3] == "f")),
                   len(set(it[1] for it in kept if it[3] == "m")), path, check))
        return {n: len(chosen[n]) for n in names}
    finally:
        corpus.close()


def sentence_case(t):
    """A prompt (upper case, no punctuation) as the model writes text."""
    words = t.lower().split()
    words = ["I" if w == "i" else "I" + w[1:] if w.startswith("i'") else w for w in words]
    out = " ".join(words)
    return out[:1].upper() + out[1:] + "."


def build_train(mirror=None, commit=COMMIT, log=print):
    """The training shard: every speaker outside dev-many/test-many, no held-out prompt."""
    corpus = Corpus(mirror, commit)
    try:
        dev = select(corpus, "dev-many")
        test = select(corpus, "test-many", avoid_texts=[it[4] for it in dev])
        held_spk = set(it[1] for it in dev + test)
        held_txt = set(it[4] for it in dev + test)
        audios, texts, voices = [], [], []
        skipped_txt = 0
        spk_used = set()
        for half in ("train", "test"):
            text = corpus.table(half + "/text")
            utt2spk = corpus.table(half + "/utt2spk")
            age = {s: int(a) for s, a in corpus.table(half + "/spk2age").items()}
            gender = corpus.table(half + "/spk2gender")
            wav = corpus.table(half + "/wav.scp")
            for u in sorted(wav):
                s, t = utt2spk.get(u), text.get(u, "").strip()
                if s is None or s in held_spk or not t or digits_only(t):
                    continue
                if t in held_txt:
                    skipped_txt += 1
                    continue
                a = load_wav(corpus.read(wav[u]))
                if len(a) < 0.2 * SR or len(a) > MAX_SECONDS * SR:
                    continue
                audios.append(a)
                texts.append(sentence_case(t))
                voices.append(voice(age[s], gender.get(s, "?")))
                spk_used.add(s)
        assert not (spk_used & held_spk)
        os.makedirs(os.path.join(synth.WORK, "data", "real"), exist_ok=True)
        path = os.path.join(synth.WORK, "data", "real", "shard-ocean.npz")
        synth.write_shard(path, audios, texts, voices)
        log("ocean: %d training clips, %.2f h, %d speakers (held-out prompts left out: %d "
            "utterances) -> %s" % (len(audios), sum(len(a) for a in audios) / SR / 3600,
                                   len(spk_used), skipped_txt, path))
        return len(audios)
    finally:
        corpus.close()


def make_set(name, path, log=print):
    """eval.py's hook: build the set (both sets, they depend on each other) into EVAL_DIR."""
    assert os.path.abspath(path) == os.path.abspath(os.path.join(EVAL_DIR, name + ".npz")), path
    build_sets(log=log)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("cmd", choices=["sets", "train"])
    ap.add_argument("--mirror", help="bare git dir of a %s snapshot, or a plain corpus "
                    "directory (default $WK_MANY_MIRROR or %s)" % (REPO, DEFAULT_MIRROR))
    ap.add_argument("--commit", default=COMMIT, help="commit to read (default the pinned one)")
    ap.add_argument("--write-manifest", action="store_true",
                    help="rewrite the committed manifests knots/train/many/<set>.tsv")
    args = ap.parse_args()
    try:
        if args.cmd == "train":
            build_train(args.mirror, args.commit)
        else:
            build_sets(args.mirror, args.commit, write_manifest=args.write_manifest)
    except FileNotFoundError as e:
        sys.exit("many.py: %s" % e)


if __name__ == "__main__":
    main()
