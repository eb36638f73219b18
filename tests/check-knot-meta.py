#!/usr/bin/env python3
"""Checks that a knot carries the metadata its model was trained with.

  check-knot-meta.py KNOT KEY=VALUE|KEY...

Reads the knot's GGUF key/value section (knots/FORMAT.md) with nothing but the
standard library and fails, naming each, when a KEY is missing or holds
another VALUE (strings compared as text, numbers in decimal, arrays as their
elements joined by commas); a bare KEY only has to be there.

It does not use knots/train/knotio.py, which needs numpy: the test suite runs
where only the build's packages are installed.

Why: the default model's training choices live in keys that no weight shows.
The knot shipped on 2026-12-03 (0d65bd4) was converted without
`--live-audio-ctx short`, so every live run encoded the full 30 s context:
five times the CPU, 41 of 192 words late at 1000 ms on a 2-core Xeon and
74.5% WER against 60.7% with the key. Nothing failed; this check would have.
"""
import struct
import sys

# GGUF scalar value types -> struct codes; 8 string, 9 array
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
          10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError("truncated at byte %d" % self.pos)
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def value(self, vtype):
        if vtype in SCALAR:
            return self.unpack(SCALAR[vtype])
        if vtype == 8:
            # token strings are raw bytes, not always UTF-8
            return self.take(self.unpack("<Q")).decode("utf-8", "replace")
        if vtype == 9:
            etype, n = self.unpack("<I"), self.unpack("<Q")
            return [self.value(etype) for _ in range(n)]
        raise ValueError("unknown value type %d" % vtype)


def read_meta(path):
    with open(path, "rb") as f:
        r = Reader(f.read())
    if r.take(4) != b"GGUF":
        raise ValueError("%s: not a knot (no GGUF magic)" % path)
    r.unpack("<I")  # version
    r.unpack("<Q")  # tensors
    meta = {}
    for _ in range(r.unpack("<Q")):
        key = r.take(r.unpack("<Q")).decode("utf-8")
        meta[key] = r.value(r.unpack("<I"))
    return meta


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.strip().split("\n\n")[1])
    meta = read_meta(sys.argv[1])
    bad = 0
    for want in sys.argv[2:]:
        key, eq, value = want.partition("=")
        got = meta.get(key)
        if isinstance(got, list):
            got = ",".join(str(x) for x in got)
        shown = "(missing)" if got is None else str(got)
        ok = got is not None and (not eq or shown == value)
        print("%s %s = %s (want %s)" % ("ok  " if ok else "FAIL", key, shown,
                                        value if eq else "any value"))
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
