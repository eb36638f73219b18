"""Whisper's log-mel front end (80 mels, 16 kHz, 25 ms / 10 ms frames)."""
import os

import numpy as np
import torch
import torch.nn.functional as F

SAMPLE_RATE = 16000
N_FFT = 400
HOP_LENGTH = 160
CHUNK_LENGTH = 30
N_SAMPLES = CHUNK_LENGTH * SAMPLE_RATE  # 480000
N_FRAMES = N_SAMPLES // HOP_LENGTH  # 3000
SECONDS_PER_TOKEN = 0.02  # 2 mel frames per encoder position

DATA_DIR = os.environ.get("WK_SHARED_DATA", "/work/shared/data")

_filters = {}
_windows = {}


def mel_filters(n_mels=80, path=None):
    """(n_mels, 201) float32 filterbank from mel_filters.npz."""
    key = (n_mels, path)
    if key not in _filters:
        p = path or os.path.join(DATA_DIR, "mel_filters.npz")
        with np.load(p) as f:
            _filters[key] = torch.from_numpy(np.asarray(f[f"mel_{n_mels}"], dtype=np.float32))
    return _filters[key]


def pad_or_trim(audio, length=N_SAMPLES, axis=-1):
    """Zero-pad or cut the last axis to `length` samples (numpy or torch)."""
    if torch.is_tensor(audio):
        if audio.shape[axis] > length:
            audio = audio.index_select(axis, torch.arange(length, device=audio.device))
        if audio.shape[axis] < length:
            pad = [(0, 0)] * audio.ndim
            pad[axis] = (0, length - audio.shape[axis])
            audio = F.pad(audio, [p for sizes in pad[::-1] for p in sizes])
        return audio
    audio = np.asarray(audio)
    if audio.shape[axis] > length:
        audio = audio.take(indices=range(length), axis=axis)
    if audio.shape[axis] < length:
        pad = [(0, 0)] * audio.ndim
        pad[axis] = (0, length - audio.shape[axis])
        audio = np.pad(audio, pad)
    return audio


def log_mel_spectrogram(audio, n_mels=80, padding=0):
    """audio: float waveform at 16 kHz, shape (n,) or (batch, n), numpy or torch.

    Returns float32 torch tensor (n_mels, frames) or (batch, n_mels, frames),
    frames = n // 160 (STFT with center=True, last frame dropped).
    """
    if not torch.is_tensor(audio):
        audio = torch.from_numpy(np.asarray(audio, dtype=np.float32))
    audio = audio.float()
    if padding > 0:
        audio = F.pad(audio, (0, padding))
    dev = audio.device
    if dev not in _windows:
        _windows[dev] = torch.hann_window(N_FFT, periodic=True, device=dev)
    stft = torch.stft(audio, N_FFT, HOP_LENGTH, window=_windows[dev], center=True,
                      pad_mode="reflect", return_complex=True)
    magnitudes = stft[..., :-1].abs() ** 2
    filters = mel_filters(n_mels).to(dev)
    mel = filters @ magnitudes
    log_spec = torch.clamp(mel, min=1e-10).log10()
    if log_spec.dim() == 3:
        mx = log_spec.amax(dim=(1, 2), keepdim=True)
    else:
        mx = log_spec.max()
    log_spec = torch.maximum(log_spec, mx - 8.0)
    return (log_spec + 4.0) / 4.0


def load_wav(path):
    """Read a 16-bit PCM WAV (any chunk layout) as float32 mono in [-1, 1]."""
    import wave
    with wave.open(path, "rb") as w:
        n = w.getnframes()
        ch = w.getnchannels()
        sw = w.getsampwidth()
        sr = w.getframerate()
        raw = w.readframes(n)
    if sw != 2:
        raise ValueError("only 16-bit PCM supported")
    x = np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0
    if ch > 1:
        x = x.reshape(-1, ch).mean(axis=1)
    if sr != SAMPLE_RATE:
        raise ValueError(f"expected 16000 Hz, got {sr}")
    return x
