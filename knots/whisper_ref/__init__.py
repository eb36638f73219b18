"""Reference (torch/numpy) implementation of Whisper pieces used by whisperknot.

Import with `sys.path.insert(0, "<repo>/knots")` then `from whisper_ref import model, audio, tokenizer, ggml`.
"""
