"""GPT-2 byte-level BPE as used by Whisper's English-only models.

Ids are the ranks in gpt2.tiktoken (0..50255), then the special tokens of the
English-only layout (n_vocab 51864).
"""
import base64
import os

try:
    import regex as _re
    _PAT = _re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
except ImportError:  # pragma: no cover - ASCII approximation without python3-regex
    import re as _re
    _PAT = _re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+|_+""")

DATA_DIR = os.environ.get("WK_SHARED_DATA", "/work/shared/data")

N_VOCAB = 51864
EOT = 50256
SOT = 50257
TRANSLATE = 50357
TRANSCRIBE = 50358
SOLM = 50359  # <|startoflm|>
PREV = 50360  # <|startofprev|>
NOSPEECH = 50361  # <|nospeech|> (<|nocaptions|> in older releases)
NO_TIMESTAMPS = 50362
TIMESTAMP_BEGIN = 50363  # <|0.00|>
TIMESTAMP_END = 51863  # <|30.00|>
N_TIMESTAMPS = TIMESTAMP_END - TIMESTAMP_BEGIN + 1  # 1501

SPECIAL_NAMES = {
    EOT: "<|endoftext|>", SOT: "<|startoftranscript|>", TRANSLATE: "<|translate|>",
    TRANSCRIBE: "<|transcribe|>", SOLM: "<|startoflm|>", PREV: "<|startofprev|>",
    NOSPEECH: "<|nospeech|>", NO_TIMESTAMPS: "<|notimestamps|>",
}


def timestamp_token(seconds):
    """Token for a time in seconds, quantized to 0.02 s (rounded), clamped to 0..30."""
    i = int(round(seconds / 0.02))
    return TIMESTAMP_BEGIN + max(0, min(N_TIMESTAMPS - 1, i))


def token_name(t):
    """Printable name of any token id."""
    if t in SPECIAL_NAMES:
        return SPECIAL_NAMES[t]
    if TIMESTAMP_BEGIN <= t <= TIMESTAMP_END:
        return "<|%.2f|>" % ((t - TIMESTAMP_BEGIN) * 0.02)
    if SOT < t < TRANSLATE:
        return "<|lang%d|>" % (t - SOT - 1)
    return None


class Tokenizer:
    def __init__(self, path=None):
        path = path or os.path.join(DATA_DIR, "gpt2.tiktoken")
        self.ranks = {}
        with open(path, "rb") as f:
            for line in f:
                if not line.strip():
                    continue
                b64, rank = line.split()
                self.ranks[base64.b64decode(b64)] = int(rank)
        self.tokens = [b""] * len(self.ranks)
        for b, r in self.ranks.items():
            self.tokens[r] = b
        assert len(self.tokens) == EOT
        self._cache = {}

    # -- vocabulary as whisper.cpp stores it (50257 entries, id 50256 = eot)
    def ggml_vocab(self):
        return self.tokens + [b"<|endoftext|>"]

    def _bpe(self, piece):
        if piece in self.ranks:
            return [self.ranks[piece]]
        cached = self._cache.get(piece)
        if cached is not None:
            return cached
        parts = [piece[i:i + 1] for i in range(len(piece))]
        ranks = self.ranks
        while len(parts) > 1:
            best = None
            best_i = -1
            for i in range(len(parts) - 1):
                r = ranks.get(parts[i] + parts[i + 1])
                if r is not None and (best is None or r < best):
                    best, best_i = r, i
            if best is None:
                break
            parts[best_i:best_i + 2] = [parts[best_i] + parts[best_i + 1]]
        out = [ranks[p] for p in parts]
        if len(self._cache) < 200000:
            self._cache[piece] = out
        return out

    def encode(self, text):
        """Ordinary text -> list of token ids (no special tokens)."""
        ids = []
        for m in _PAT.findall(text):
            ids.extend(self._bpe(m.encode("utf-8")))
        return ids

    def decode_bytes(self, ids):
        return b"".join(self.tokens[i] for i in ids if 0 <= i < EOT)

    def decode(self, ids):
        """Text of the ordinary tokens (special and timestamp tokens dropped)."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    def decode_with_timestamps(self, ids):
        """Text with special/timestamp tokens rendered as <|...|>."""
        out, run = [], []
        for t in ids:
            if t < EOT:
                run.append(t)
                continue
            if run:
                out.append(self.decode(run))
                run = []
            out.append(token_name(t) or "<|%d|>" % t)
        if run:
            out.append(self.decode(run))
        return "".join(out)


_default = None


def get_tokenizer():
    global _default
    if _default is None:
        _default = Tokenizer()
    return _default
