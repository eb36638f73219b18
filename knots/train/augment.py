"""Augmentation of training windows: a dozen voices made to sound like many
people in many rooms and on many channels.

Applied by train.py (--aug P) to each rendered 30 s (or shorter) window, real and
synthetic alike, with probability P of any augmentation at all; then each stage
is drawn on its own:

  pitch    sox `pitch` of -350..+350 cents (tempo kept; train.py's speed
           perturbation changes tempo, pitch and formants together)
  reverb   a room impulse response generated here: direct path, 3-8 early
           reflections within 5-40 ms, an exponentially decaying noise tail
           with RT60 0.15-1.0 s, direct-to-reverberant ratio -2..+15 dB
  gain     too loud, then clipped at full scale (peaks driven to 1.2-4x)
  channel  one of: telephone band (300-3400 Hz) with G.711 mu-law or A-law
           companding; a low-pass at 3.5-7.5 kHz; a real codec round trip
           through ffmpeg (Opus 6-16 kbit/s, MP3 16-32 kbit/s, GSM 06.10,
           G.722, G.726 at 16-40 kbit/s, Speex)
  noise    at 0-30 dB SNR: white, pink or brown noise, babble (3-7 other
           utterances of the pool, summed), synthetic music (chords of
           harmonic tones with envelopes and percussive bursts), or mains hum

vtlp_mel() warps a batch of log-mels along frequency (vocal tract length
perturbation, factor 0.88-1.12), which changes formants without the tempo.
"""
import math
import subprocess

import numpy as np
import torch

SR = 16000
_CODECS = [
    # (name, encoder args, container, input rate)
    ("opus", ["-c:a", "libopus", "-application", "voip"], "ogg", 16000),
    ("mp3", ["-c:a", "libmp3lame"], "mp3", 16000),
    ("gsm", ["-c:a", "libgsm"], "gsm", 8000),
    ("g722", ["-c:a", "g722"], "g722", 16000),
    ("g726", ["-c:a", "g726"], "wav", 8000),
    ("speex", ["-c:a", "libspeex"], "ogg", 16000),
]


def _db(x):
    return 10 ** (x / 20)


def _rms(x):
    return math.sqrt(float(np.mean(x * x)) + 1e-12)


def colored_noise(n, rng, beta):
    """Gaussian noise with power spectrum 1/f^beta (0 white, 1 pink, 2 brown), unit RMS."""
    w = np.random.default_rng(rng.getrandbits(32)).standard_normal(n).astype(np.float32)
    if beta == 0:
        return w
    W = np.fft.rfft(w)
    f = np.arange(len(W), dtype=np.float32)
    f[0] = 1.0
    W *= f ** (-beta / 2)
    y = np.fft.irfft(W, n).astype(np.float32)
    return y / (_rms(y) + 1e-9)


def music(n, rng):
    """Unit-RMS synthetic music: a chord progression of harmonic tones with
    attack/decay envelopes and noise-burst percussion."""
    t = np.arange(n, dtype=np.float32) / SR
    y = np.zeros(n, dtype=np.float32)
    bpm = rng.uniform(70, 160)
    beat = 60.0 / bpm
    chord_len = beat * rng.choice([2, 4])
    root = rng.uniform(110, 330)
    k = 0
    pos = 0.0
    while pos < n / SR:
        a, b = int(pos * SR), min(n, int((pos + chord_len) * SR))
        tt = t[a:b] - pos
        env = np.minimum(1.0, tt / 0.02) * np.exp(-tt * rng.uniform(0.5, 4))
        base = root * 2 ** (rng.choice([0, 3, 5, 7, 8, 10, -2]) / 12)
        for iv in rng.choice([(0, 4, 7), (0, 3, 7), (0, 5, 9), (0, 7, 12)]):
            f0 = base * 2 ** (iv / 12)
            for h in range(1, 6):
                if f0 * h < 7000:
                    y[a:b] += env * np.sin(2 * np.pi * f0 * h * tt + rng.random() * 6.28) / h
        pos += chord_len
        k += 1
    if rng.random() < 0.7:  # percussion
        burst = int(0.05 * SR)
        for i in range(int(n / SR / beat)):
            a = int(i * beat * SR)
            if a + burst > n:
                break
            y[a:a + burst] += (np.random.default_rng(i + k).standard_normal(burst) *
                               np.exp(-np.arange(burst) / (0.01 * SR))).astype(np.float32) * 2
    return y / (_rms(y) + 1e-9)


def hum(n, rng):
    t = np.arange(n, dtype=np.float32) / SR
    f0 = rng.choice([50.0, 60.0])
    y = sum(np.sin(2 * np.pi * f0 * h * t) / h for h in range(1, 8, 2)).astype(np.float32)
    return y / (_rms(y) + 1e-9)


def room_ir(rng):
    rt60 = rng.uniform(0.15, 1.0)
    n = int(min(1.2, rt60 * 1.1) * SR)
    h = np.zeros(n, dtype=np.float32)
    h[0] = 1.0
    for _ in range(rng.randint(3, 8)):
        d = int(rng.uniform(0.005, 0.04) * SR)
        if d < n:
            h[d] += rng.uniform(-0.6, 0.6)
    t0 = int(rng.uniform(0.003, 0.012) * SR)
    t = np.arange(n - t0, dtype=np.float32) / SR
    tail = colored_noise(n - t0, rng, rng.uniform(0, 1)) * np.exp(-6.9 * t / rt60)
    e_tail = float(np.sum(tail * tail))
    drr = _db(rng.uniform(-2, 15)) ** 2  # energy ratio direct / reverberant
    h[t0:] += tail * math.sqrt(float(np.sum(h[:t0] ** 2)) / (drr * e_tail + 1e-12))
    return h


def fft_filter(x, lo, hi):
    X = np.fft.rfft(x)
    f = np.fft.rfftfreq(len(x), 1 / SR)
    m = np.ones_like(f)
    if lo > 0:
        m *= 1 / (1 + (lo / np.maximum(f, 1)) ** 8)
    m *= 1 / (1 + (f / hi) ** 8)
    return np.fft.irfft(X * m, len(x)).astype(np.float32)


def companding(x, law):
    """G.711 8-bit quantization noise (mu-law or A-law) at full scale 1."""
    x = np.clip(x, -1, 1)
    if law == "mu":
        y = np.sign(x) * np.log1p(255 * np.abs(x)) / math.log(256)
        q = np.round(y * 127) / 127
        return (np.sign(q) * (np.power(256, np.abs(q)) - 1) / 255).astype(np.float32)
    A = 87.6
    ax = np.abs(x)
    y = np.where(ax < 1 / A, A * ax / (1 + math.log(A)),
                 (1 + np.log(np.maximum(A * ax, 1e-9))) / (1 + math.log(A)))
    q = np.round(y * 127) / 127
    z = np.where(q < 1 / (1 + math.log(A)), q * (1 + math.log(A)) / A,
                 np.exp(q * (1 + math.log(A)) - 1) / A)
    return (np.sign(x) * z).astype(np.float32)


def codec(x, rng):
    """A round trip through a real codec with ffmpeg; x unchanged if ffmpeg fails."""
    name, enc, fmt, rate = rng.choice(_CODECS)
    if name == "opus":
        enc = enc + ["-b:a", "%dk" % rng.choice([6, 8, 10, 12, 16])]
    elif name == "mp3":
        enc = enc + ["-b:a", "%dk" % rng.choice([16, 24, 32])]
    elif name == "g726":
        enc = enc + ["-b:a", "%dk" % rng.choice([16, 24, 32, 40])]
    elif name == "speex":
        enc = enc + ["-b:a", "%dk" % rng.choice([8, 11, 15])]
    pk = float(np.max(np.abs(x))) + 1e-9
    scale = 0.95 / pk if pk > 0.95 else 1.0
    src = (np.clip(x * scale, -1, 1)).astype("<f4").tobytes()
    try:
        e = subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "f32le", "-ar", str(SR),
                            "-ac", "1", "-i", "-", "-ar", str(rate)] + enc +
                           ["-f", fmt, "-"], input=src, capture_output=True, timeout=60)
        if e.returncode != 0 or not e.stdout:
            return x
        d = subprocess.run(["ffmpeg", "-loglevel", "error", "-f", fmt, "-i", "-", "-ar",
                            str(SR), "-ac", "1", "-f", "f32le", "-"], input=e.stdout,
                           capture_output=True, timeout=60)
        if d.returncode != 0:
            return x
    except (OSError, subprocess.SubprocessError):
        return x
    y = np.frombuffer(d.stdout, dtype="<f4")
    out = np.zeros_like(x)
    # codecs add a little delay at the start (encoder look-ahead); keep the length
    k = min(len(x), len(y))
    out[:k] = y[:k]
    return out / scale


def pitch_shift(x, rng):
    cents = rng.uniform(-350, 350)
    try:
        r = subprocess.run(["sox", "-t", "f32", "-r", str(SR), "-c", "1", "-", "-t", "f32",
                            "-", "pitch", "%.0f" % cents], input=x.astype("<f4").tobytes(),
                           capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return x
    y = np.frombuffer(r.stdout, dtype="<f4")
    if r.returncode != 0 or len(y) < len(x) // 2:
        return x
    out = np.zeros_like(x)
    k = min(len(x), len(y))
    out[:k] = y[:k]
    return out


class Augmenter:
    """Window augmentation (see the module docstring). babble() returns a random
    utterance of the pool as float32 samples."""

    def __init__(self, rng, p=0.8, babble=None):
        self.rng = rng
        self.p = p
        self.babble = babble

    def noise(self, n):
        rng = self.rng
        r = rng.random()
        if r < 0.35:
            return colored_noise(n, rng, rng.choice([0, 1, 1, 2]))
        if r < 0.7 and self.babble is not None:
            y = np.zeros(n, dtype=np.float32)
            for _ in range(rng.randint(3, 7)):
                u = self.babble()
                while len(u) < n // 2:
                    u = np.concatenate([u, self.babble()])
                a = rng.randrange(max(1, n - len(u) + 1)) if len(u) < n else 0
                u = u[:n - a]
                y[a:a + len(u)] += u / (_rms(u) + 1e-9)
            return y / (_rms(y) + 1e-9)
        if r < 0.93:
            return music(n, rng)
        return hum(n, rng)

    def __call__(self, x):
        rng = self.rng
        if rng.random() >= self.p or not x.any():
            return x
        speech_rms = _rms(x[x != 0]) if np.any(x != 0) else 0.0
        if rng.random() < 0.12:
            x = pitch_shift(x, rng)
        if rng.random() < 0.35:
            h = room_ir(rng)
            n = 1 << int(math.ceil(math.log2(len(x) + len(h))))
            y = np.fft.irfft(np.fft.rfft(x, n) * np.fft.rfft(h, n), n)[:len(x)]
            x = (y * (_rms(x) / (_rms(y) + 1e-9))).astype(np.float32)
        r = rng.random()
        if r < 0.12:
            x = fft_filter(x, 300, 3400)
            pk = float(np.max(np.abs(x))) + 1e-9
            g = rng.uniform(0.3, 0.95) / pk
            x = companding(x * g, rng.choice(["mu", "a"])) / g
        elif r < 0.22:
            x = fft_filter(x, 0, rng.uniform(3500, 7500))
        elif r < 0.40:
            x = codec(x, rng)
        if rng.random() < 0.6:
            snr = rng.uniform(0, 30) if rng.random() < 0.3 else rng.uniform(8, 30)
            x = x + self.noise(len(x)) * (speech_rms * _db(-snr))
        if rng.random() < 0.08:
            pk = float(np.max(np.abs(x))) + 1e-9
            x = np.clip(x * (rng.uniform(1.2, 4.0) / pk), -1, 1) * pk
        return x.astype(np.float32)


_MEL_HZ = None


def _mel_centers():
    """Centre frequencies (Hz) of Whisper's 80 mel bands (Slaney mel, 0-8 kHz)."""
    def hz_to_mel(f):
        return np.where(f < 1000, f / (200 / 3), 15 + np.log(np.maximum(f, 1e-9) / 1000) /
                        (math.log(6.4) / 27))

    def mel_to_hz(m):
        return np.where(m < 15, m * (200 / 3), 1000 * np.exp((m - 15) * (math.log(6.4) / 27)))
    m = np.linspace(hz_to_mel(np.array(0.0)), hz_to_mel(np.array(8000.0)), 82)[1:-1]
    return mel_to_hz(m), hz_to_mel


def vtlp_mel(mel, rng, p=0.3, lo=0.88, hi=1.12):
    """Vocal tract length perturbation on a batch of log-mels (B, 80, T), in place:
    band k takes the value the spectrum had at alpha x its centre frequency."""
    global _MEL_HZ
    if _MEL_HZ is None:
        _MEL_HZ = _mel_centers()
    hz, hz_to_mel = _MEL_HZ
    M = mel.shape[1]
    m0 = hz_to_mel(np.array(hz[0]))
    step = float(hz_to_mel(np.array(hz[1])) - m0)
    for b in range(mel.shape[0]):
        if rng.random() >= p:
            continue
        alpha = rng.uniform(lo, hi)
        src = (hz_to_mel(np.minimum(hz * alpha, 7990.0)) - m0) / step  # fractional bins
        src = np.clip(src, 0, M - 1)
        i0 = np.floor(src).astype(np.int64)
        i1 = np.minimum(i0 + 1, M - 1)
        w = torch.tensor(src - i0, dtype=mel.dtype, device=mel.device)[:, None]
        row = mel[b]
        mel[b] = row[torch.from_numpy(i0)] * (1 - w) + row[torch.from_numpy(i1)] * w
    return mel


def _companding_torch(x, law):
    """companding() in torch: G.711 8-bit quantization noise at full scale 1."""
    x = x.clamp(-1, 1)
    ax = x.abs()
    if law == "mu":
        mu = 255.0
        y = torch.log1p(mu * ax) / math.log1p(mu)
        q = torch.round(y * 127) / 127
        z = torch.expm1(q * math.log1p(mu)) / mu
    else:
        A = 87.6
        c = 1 + math.log(A)
        y = torch.where(ax < 1 / A, A * ax / c, (1 + torch.log((A * ax).clamp(min=1e-9))) / c)
        q = torch.round(y * 127) / 127
        z = torch.where(q < 1 / c, q * c / A, torch.exp(q * c - 1) / A)
    return torch.sign(x) * z


def augment_batch(x, rng, p=0.8):
    """Augmenter for a batch of windows (B, n) on their own device (a GPU), without the
    stages that need sox or ffmpeg, which a lent GPU machine lacks (pitch, codecs; the
    speed perturbation and VTLP stand in for pitch, the telephone band and low-pass for
    codecs): reverberation with room_ir() (35%), one channel (12% telephone band with
    G.711 companding, 10% low-pass at 3.5-7.5 kHz), noise at 0-30 dB SNR (60%: white,
    pink or brown noise, babble summed from 3-7 other windows of the batch, mains hum)
    and clipping (8%), each window drawn on its own with probability p of any stage."""
    B, n = x.shape
    nz = (x != 0).sum(1)
    sel = [b for b in range(B) if rng.random() < p and int(nz[b]) > 0]
    if not sel:
        return x
    dev = x.device
    x = x.clone()
    xs = x[sel]
    speech_rms = ((xs * xs).sum(1) / nz[sel].clamp(min=1)).sqrt()
    N = 1 << int(math.ceil(math.log2(n + int(1.2 * SR))))
    f = torch.fft.rfftfreq(N, 1 / SR, device=dev)
    H = torch.ones(len(sel), len(f), dtype=torch.complex64, device=dev)
    reverb, tel = [], []
    for j in range(len(sel)):
        if rng.random() < 0.35:
            h = torch.from_numpy(room_ir(rng)).to(dev)
            H[j] = torch.fft.rfft(h, N)
            reverb.append(j)
        r = rng.random()
        if r < 0.12:
            H[j] *= (1 / (1 + (300 / f.clamp(min=1)) ** 8)) * (1 / (1 + (f / 3400) ** 8))
            tel.append((j, rng.choice(["mu", "a"]), rng.uniform(0.3, 0.95)))
        elif r < 0.22:
            H[j] *= 1 / (1 + (f / rng.uniform(3500, 7500)) ** 8)
    y = torch.fft.irfft(torch.fft.rfft(xs, N) * H, N)[:, :n]
    if reverb:  # keep each window's energy through the room
        r_ = torch.tensor(reverb, device=dev)
        e0 = (xs[r_] ** 2).mean(1).sqrt()
        e1 = (y[r_] ** 2).mean(1).sqrt()
        y[r_] *= (e0 / (e1 + 1e-9))[:, None]
    for j, law, g in tel:
        pk = y[j].abs().max() + 1e-9
        y[j] = _companding_torch(y[j] * (g / pk), law) * (pk / g)
    t = torch.arange(n, device=dev, dtype=torch.float32) / SR
    for j in range(len(sel)):
        if rng.random() >= 0.6:
            continue
        snr = rng.uniform(0, 30) if rng.random() < 0.3 else rng.uniform(8, 30)
        r = rng.random()
        if r < 0.4:
            w = torch.randn(n, device=dev)
            beta = rng.choice([0, 1, 1, 2])
            if beta:
                W = torch.fft.rfft(w)
                k = torch.arange(len(W), device=dev, dtype=torch.float32).clamp(min=1)
                w = torch.fft.irfft(W * k ** (-beta / 2), n)
        elif r < 0.9 and B > 1:
            w = torch.zeros(n, device=dev)
            for _ in range(rng.randint(3, 7)):
                o = rng.randrange(B)
                u = torch.roll(x[o], rng.randrange(n))
                w += u / ((u * u).mean().sqrt() + 1e-9)
        else:
            f0 = rng.choice([50.0, 60.0])
            w = sum(torch.sin(2 * math.pi * f0 * h * t) / h for h in range(1, 8, 2))
        w = w / ((w * w).mean().sqrt() + 1e-9)
        y[j] += w * (speech_rms[j] * _db(-snr))
    for j in range(len(sel)):
        if rng.random() < 0.08:
            pk = y[j].abs().max() + 1e-9
            y[j] = (y[j] * (rng.uniform(1.2, 4.0) / pk)).clamp(-1, 1) * pk
    x[sel] = y
    return x
