#!/usr/bin/env python3
"""Writes vad-jfk-silero-probs.txt, the reference for tests/test-vad.c's
default (Silero) framing.

An independent, deliberately plain re-statement of the network as
silero-vad's own reference code runs it (src/silero_vad/tinygrad_model.py):
each 512-sample chunk is preceded by the last 64 samples of the previous
one (zeros at first), reflected by 64 samples on the right, put through
the STFT convolution (258 filters of 256 taps, hop 128), the magnitudes of
the 129 (re, im) pairs, four conv1d + ReLU layers (kernel 3, padding 1,
strides 1 2 2 1), an LSTM cell (gates i f g o), ReLU, a 1x1 convolution
and a sigmoid. Weights are read from the whisper.cpp ggml file with the
standard library only; the last chunk is zero-padded. Slow (pure Python,
a minute or two).

Usage: gen-vad-silero-probs.py [MODEL.bin [JFK.wav]] > vad-jfk-silero-probs.txt
       (defaults: ../../../shared/data/ from this folder)
"""
import math
import os
import struct
import sys

here = os.path.dirname(os.path.abspath(__file__))
shared = os.path.join(here, '..', '..', '..', 'shared', 'data')
model_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    shared, 'for-tests-silero-v6.2.0-ggml.bin')
wav_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
    shared, 'jfk.wav')


def read_ggml(path):
    """Tensors by name, as flat tuples in ggml order (PyTorch row-major)."""
    g = open(path, 'rb').read()
    off = 4
    (n,) = struct.unpack_from('<i', g, off)
    off += 4 + n + 5 * 4
    (layers,) = struct.unpack_from('<i', g, off)
    off += 4 + layers * 12 + 4 * 4
    tensors = {}
    while off < len(g):
        nd, nl, typ = struct.unpack_from('<3i', g, off)
        dims = struct.unpack_from('<%di' % nd, g, off + 12)
        name = g[off + 12 + 4 * nd:off + 12 + 4 * nd + nl].decode()
        off += 12 + 4 * nd + nl
        count = 1
        for d in dims:
            count *= d
        fmt = '<%d%s' % (count, 'e' if typ == 1 else 'f')
        tensors[name] = struct.unpack_from(fmt, g, off)
        off += count * (2 if typ == 1 else 4)
    return tensors


def read_wav_s16_mono(path):
    d = open(path, 'rb').read()
    off = 12
    while off + 8 <= len(d):
        cid, size = d[off:off + 4], struct.unpack_from('<I', d, off + 4)[0]
        if cid == b'data':
            raw = d[off + 8:off + 8 + size]
            return [s / 32768.0 for s in
                    struct.unpack('<%dh' % (len(raw) // 2), raw)]
        off += 8 + size + (size & 1)
    raise SystemExit('no data chunk in ' + path)


T = read_ggml(model_path)
enc = '_model.encoder.%d.reparam_conv.'
basis = T['_model.stft.forward_basis_buffer']      # [258][256]
w_ih = T['_model.decoder.rnn.weight_ih']            # [512][128]
w_hh = T['_model.decoder.rnn.weight_hh']
b_ih = T['_model.decoder.rnn.bias_ih']
b_hh = T['_model.decoder.rnn.bias_hh']
w_out = T['_model.decoder.decoder.2.weight']        # [128]
b_out = T['_model.decoder.decoder.2.bias'][0]


def conv_relu(x, c_in, layer, c_out, stride):
    """x: list of frames, each c_in values; torch weight [c_out][c_in][3]."""
    w = T[enc % layer + 'weight']
    b = T[enc % layer + 'bias']
    n_out = (len(x) + 2 - 3) // stride + 1
    y = []
    for t in range(n_out):
        frame = []
        for co in range(c_out):
            s = b[co]
            for k in range(3):
                src = t * stride + k - 1
                if 0 <= src < len(x):
                    xs = x[src]
                    base = co * c_in * 3 + k
                    s += sum(w[base + ci * 3] * xs[ci] for ci in range(c_in))
            frame.append(s if s > 0.0 else 0.0)
        y.append(frame)
    return y


def sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v))


pcm = read_wav_s16_mono(wav_path)
n_chunks = (len(pcm) + 511) // 512
pcm += [0.0] * (n_chunks * 512 - len(pcm))
h = [0.0] * 128
c = [0.0] * 128
context = [0.0] * 64

print('# Speech probability per 512-sample chunk of jfk.wav (%d chunks, the '
      'last' % n_chunks)
print('# zero-padded), Silero framing (64 samples of context, 64 reflected '
      'on the')
print('# right), from tests/data/gen-vad-silero-probs.py (a pure-Python '
      'statement')
print('# of silero-vad\'s tinygrad_model.py) with for-tests-silero-v6.2.0-'
      'ggml.bin.')
for i in range(n_chunks):
    x = context + pcm[i * 512:(i + 1) * 512]
    context = x[-64:]
    x = x + [x[574 - j] for j in range(64)]
    mags = []
    for t in range(4):
        frame = x[t * 128:t * 128 + 256]
        out = [sum(basis[f * 256 + k] * frame[k] for k in range(256))
               for f in range(258)]
        mags.append([math.sqrt(out[f] ** 2 + out[129 + f] ** 2)
                     for f in range(129)])
    a = conv_relu(mags, 129, 0, 128, 1)
    a = conv_relu(a, 128, 1, 64, 2)
    a = conv_relu(a, 64, 2, 64, 2)
    a = conv_relu(a, 64, 3, 128, 1)[0]
    gates = [b_ih[g] + b_hh[g]
             + sum(w_ih[g * 128 + j] * a[j] for j in range(128))
             + sum(w_hh[g * 128 + j] * h[j] for j in range(128))
             for g in range(512)]
    for j in range(128):
        ig = sigmoid(gates[j])
        fg = sigmoid(gates[128 + j])
        gg = math.tanh(gates[256 + j])
        og = sigmoid(gates[384 + j])
        c[j] = fg * c[j] + ig * gg
        h[j] = og * math.tanh(c[j])
    logit = b_out + sum(w_out[j] * (h[j] if h[j] > 0.0 else 0.0)
                        for j in range(128))
    print('%.6f' % sigmoid(logit))
