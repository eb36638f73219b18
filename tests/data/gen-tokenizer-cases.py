#!/usr/bin/env python3
"""Writes tokenizer-cases.txt: reference token ids for tests/test-tokenizer.c.

The ids come from a separate implementation of tiktoken's encoding: the
GPT-2 pattern applied with the `regex` module (full Unicode classes), then
byte-pair merges by rank from Whisper's gpt2.tiktoken / multilingual.tiktoken.
Each line is: VOCAB<TAB>hex(utf-8 text)<TAB>ids (space-separated).

Usage: gen-tokenizer-cases.py [shared-data-dir]   (needs python3-regex)
"""
import base64
import os
import sys

import regex

here = os.path.dirname(os.path.abspath(__file__))
data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    here, "..", "..", "..", "shared", "data")

PAT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

TEXTS = [
    "Hello world",
    " And so my fellow Americans, ask not what your country can do for you,"
    " ask what you can do for your country.",
    "I'm sure they'll say it's fine, we've done what we'd planned; you're "
    "right, don't worry.",
    "I'M SHOUTING 'QUOTES' ''s '''",
    "Numbers: 3.14159, 1,000,000 and 42nd; 2024-06-25 12:30:59",
    "  leading spaces, trailing spaces   ",
    "tabs\tand\nnew lines\r\n\r\nand  \n  mixed \u3000 spaces",
    "caf\u00e9 na\u00efve \u6771\u4eac \u00fcber Stra\u00dfe",
    "emoji \U0001F600\U0001F44D\U0001F3FD and \U0001F468\u200D\U0001F469\u200D\U0001F467 family",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! "
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 "
    "\u0661\u0662\u0663",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e",
    "\ud55c\uad6d\uc5b4 \ud14c\uc2a4\ud2b8 \u3053\u3093\u306b\u3061\u306f\u4e16\u754c",
    "fractions \u00bd \u2460\u2461 superscript x\u00b2 \u2167",
    "non\u00a0breaking\u00a0space and\u2009thin",
    "(parenthesis) [brackets] {braces} <angle> \"double\" --- ... !!! ??",
    "\u266a\u266a\u266a music \u266b",
    "a" * 300,
    " " * 20 + "x",
    "!@#$%^&*()_+-=~`|\\/<>,.?:;",
    "",
    "'",
    "x'",
    " 's",
    "\u00a0\u00a0hi",
    "end with space ",
]


def load(name):
    ranks = {}
    with open(os.path.join(data, name)) as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def bpe(ranks, piece):
    if piece in ranks:
        return [ranks[piece]]
    parts = [bytes([b]) for b in piece]
    while len(parts) > 1:
        best, best_rank = None, None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best is None:
            break
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    return [ranks[p] for p in parts]


def encode(ranks, text):
    ids = []
    for m in PAT.finditer(text):
        ids += bpe(ranks, m.group().encode("utf-8"))
    return ids


lines = []
for vocab, fname in (("gpt2", "gpt2.tiktoken"),
                     ("multilingual", "multilingual.tiktoken")):
    ranks = load(fname)
    for t in TEXTS:
        ids = encode(ranks, t)
        assert b"".join({v: k for k, v in ranks.items()}[i] for i in ids) \
            == t.encode("utf-8")
        lines.append("%s\t%s\t%s\n" % (vocab, t.encode("utf-8").hex(),
                                       " ".join(map(str, ids))))

with open(os.path.join(here, "tokenizer-cases.txt"), "w") as f:
    f.write("".join(lines))
