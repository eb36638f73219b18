#!/usr/bin/env python3
"""Writes mel-filters.txt, the reference filterbanks for tests/test-mel.c.

Reads mel_80 and mel_128 (float32, [n_mels][201]) from openai/whisper's
mel_filters.npz with the standard library only (an .npz is a zip of .npy
files), and writes for each row its non-zero range and the float32 values
as %.9g (which reads back to the same float32):

  mel N_MELS
  ROW LO HI V[LO] ... V[HI-1]      (HI exclusive; bins outside are zero)

Usage: gen-mel-filters.py [path/to/mel_filters.npz]
       (default: ../../../shared/data/mel_filters.npz from this folder)
"""
import ast
import os
import struct
import sys
import zipfile

here = os.path.dirname(os.path.abspath(__file__))
npz = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    here, "..", "..", "..", "shared", "data", "mel_filters.npz")


def read_npy(data):
    if data[:6] != b"\x93NUMPY":
        raise ValueError("not an .npy file")
    major = data[6]
    if major == 1:
        hlen = struct.unpack("<H", data[8:10])[0]
        start = 10
    else:
        hlen = struct.unpack("<I", data[8:12])[0]
        start = 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    if header["descr"] != "<f4" or header["fortran_order"]:
        raise ValueError("expected little-endian float32 in C order")
    rows, cols = header["shape"]
    body = data[start + hlen:]
    values = struct.unpack("<%df" % (rows * cols), body[:rows * cols * 4])
    return [values[r * cols:(r + 1) * cols] for r in range(rows)]


with zipfile.ZipFile(npz) as z:
    out = []
    for name in ("mel_80", "mel_128"):
        rows = read_npy(z.read(name + ".npy"))
        out.append("mel %d\n" % len(rows))
        for r, row in enumerate(rows):
            nz = [k for k, v in enumerate(row) if v != 0.0]
            lo, hi = (nz[0], nz[-1] + 1) if nz else (0, 0)
            vals = " ".join("%.9g" % v for v in row[lo:hi])
            out.append("%d %d %d %s\n" % (r, lo, hi, vals))

with open(os.path.join(here, "mel-filters.txt"), "w") as f:
    f.write("".join(out))
