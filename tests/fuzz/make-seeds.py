#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets that have no generated
seeds elsewhere: tokenizer, tiktoken, model, vad, wav, and the JSON
side-file readers of safetensors. Run from the repository root:

    python3 tests/fuzz/make-seeds.py [SHARED_DATA_DIR]

SHARED_DATA_DIR (default ../shared/data) gives gpt2.tiktoken's first lines;
without it a short hand-written rank file is used. The output is
deterministic."""
import math
import os
import struct
import sys

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def tokenizer_seeds():
    # byte 0: number of extra tokens; then (length-1, bytes) per token
    def seed(tokens, text):
        out = bytes([len(tokens)])
        for t in tokens:
            out += bytes([len(t) - 1]) + t
        return out + text

    jfk = b"And so, my fellow Americans: ask not what your country can do " \
          b"for you, ask what you can do for your country."
    write("tokenizer", "seed-bytes-only.bin", seed([], jfk))
    merges = [b" t", b"he", b" the", b"in", b"er", b" a", b"an", b"ing",
              b" c", b"ou", b" you", b"'s", b" 1", b"00", b"\xc3\xa9",
              b"\xe2\x99\xaa"]
    write("tokenizer", "seed-merges.bin", seed(
        merges, b"He's singing \xe2\x99\xaa in the caf\xc3\xa9, they're "
        b"100% sure  \n\n\tit's 3.14159 -- OK?!  " + jfk))
    write("tokenizer", "seed-unicode.bin", seed(
        [b"\xe6\x97\xa5", b"\xe6\x9c\xac"],
        "日本語のテキスト、Ünïcödé façade — «quotes» 🎵 \u00a0end".encode()))
    # 255: Whisper's real vocabulary (gpt2.tiktoken), when the target finds it
    write("tokenizer", "seed-real-vocab.bin", b"\xff" + jfk +
          b" He's 3.14 caf\xc3\xa9 \xe2\x99\xaa  \n\n--OK?!")
    # invalid UTF-8: stray continuation, truncated sequences, overlong
    write("tokenizer", "seed-invalid-utf8.bin", seed(
        [b"\xff\xfe"], b"ab\x80cd\xc3\xe2\x99 \xf0\x9f\x8e \xc0\xaf \xed\xa0"
        b"\x80 \xf4\x90\x80\x80\xff"))


def tiktoken_seeds(shared):
    path = os.path.join(shared, "gpt2.tiktoken")
    lines = None
    if os.path.exists(path):
        with open(path, "rb") as f:
            lines = f.read().split(b"\n")[:64]
    if not lines:
        lines = [b"IQ== 0", b"Ig== 1", b"Iw== 2", b"JA== 3", b"IGI= 4"]
    # starts with 'I' (odd): Whisper's limit of 50257 ranks
    write("tiktoken", "seed-gpt2-head.tiktoken", b"\n".join(lines) + b"\n")
    # starts with '\n' (even): the 16-rank limit; CRLF, blank lines, the
    # empty token "=", multi-byte tokens
    write("tiktoken", "seed-small.tiktoken",
          b"\nIQ== 1\r\n\nIg== 0\n= 2\nw6k= 3\n4pmq 4\nIHRoZQ== 5\n")


def model_seeds():
    # see fuzz-model.c: flags, hyper-parameter bytes, rng (2), victim, op,
    # matrix type, filter damage, vocabulary count, vocabulary trim
    def small(ah, th, vocab, actx, dw, alayer, tctx, tw, tlayer, mels,
              victim=255, op=0, mat=0, mel=0, ntok=1, trim=1, flags=0):
        return bytes([flags, ah - 1, th - 1, vocab - 51864, actx - 1,
                      dw - 1, alayer, tctx - 12, tw - 1, tlayer,
                      1 if mels == 128 else 0, 7, 1, victim, op, mat, mel,
                      ntok, trim])

    write("model", "seed-f32-en.bin", small(1, 1, 51864, 4, 8, 1, 16, 8, 1,
                                            80))
    write("model", "seed-q8-multilingual.bin",
          small(4, 4, 51865, 8, 8, 1, 20, 8, 1, 128, mat=2))
    write("model", "seed-q4-v3.bin",
          small(4, 4, 51866, 3, 8, 2, 16, 8, 2, 128, mat=3))
    write("model", "seed-f16-nan.bin",
          small(2, 2, 51864, 4, 4, 1, 16, 4, 1, 80, victim=20, op=1, mat=1,
                flags=2))
    write("model", "seed-damaged-shape.bin",
          small(2, 2, 51864, 4, 4, 1, 16, 4, 1, 80, victim=7, op=1))
    # raw hyper-parameters (flag 1): 10 little-endian u16 values
    raw = struct.pack("<10H", 51864, 2, 8, 2, 1, 16, 8, 2, 1, 80)
    write("model", "seed-raw.bin", bytes([1]) + raw + bytes([3, 0, 255, 0, 0,
                                                             0, 1, 1]))
    # keys: max_text_ctx (flag 32), pad_window / timestamp_rule (flag 64)
    write("model", "seed-keys.bin",
          small(1, 1, 51864, 4, 8, 1, 16, 8, 1, 80, flags=96) +
          bytes([4, 0, 1, 1]))
    # alignment heads (flag 64 too): 4 values, (1, 0) (1, 1), in range
    write("model", "seed-align-heads.bin",
          small(2, 2, 51864, 4, 4, 1, 16, 4, 2, 80, flags=64) +
          bytes([1, 1, 4, 1, 0, 1, 1]))


def gguf_str(b):
    return struct.pack("<Q", len(b)) + b


def vad_knot(kvs, tensors, data_size, alignment=64):
    """A VAD knot (knots/FORMAT.md): kvs as (key, type, raw value bytes),
    tensors as (name, ne, offset), all f32, over data_size zero bytes."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs) + 1)
    out += gguf_str(b"general.alignment") + struct.pack("<II", 4, alignment)
    for key, vtype, raw in kvs:
        out += gguf_str(key) + struct.pack("<I", vtype) + raw
    for name, ne, off in tensors:
        out += gguf_str(name) + struct.pack("<I", len(ne))
        out += b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", 0, off)
    out += bytes(-len(out) % alignment)
    return out + bytes(data_size)


def vad_seeds():
    # the shapes of engine/vad.h; every tensor at offset 0 of one block of
    # zeros as large as the largest (tensors may overlap): a valid model
    # (all weights 0) in 271 KB instead of the shipped 1.2 MB
    enc = [(129, 128), (128, 64), (64, 64), (64, 128)]
    tensors = [(b"stft.basis", (264, 256))]
    for i, (ci, co) in enumerate(enc):
        tensors.append((b"encoder.%d.weight" % i, (co, 3 * ci)))
        tensors.append((b"encoder.%d.bias" % i, (co,)))
    tensors += [(b"lstm.weight_ih", (512, 128)),
                (b"lstm.weight_hh", (512, 128)), (b"lstm.bias", (512,)),
                (b"decoder.weight", (128,)), (b"decoder.bias", (1,))]
    kvs = [(b"general.architecture", 8, gguf_str(b"silero-vad")),
           (b"silero-vad.version", 9, struct.pack("<IQ3I", 4, 3, 6, 2, 0)),
           (b"silero-vad.sample_rate", 4, struct.pack("<I", 16000)),
           (b"silero-vad.window", 4, struct.pack("<I", 512)),
           (b"silero-vad.context", 4, struct.pack("<I", 64))]
    largest = max(4 * math.prod(ne) for _, ne, in tensors)
    placed = [(name, ne, 0) for name, ne in tensors]
    write("vad", "seed-zeros-overlapping.knot", vad_knot(kvs, placed, largest))
    # the header alone (the loader reports the data past the end)
    write("vad", "seed-header.knot", vad_knot(kvs, placed, 0))
    # another architecture's knot, and a ggml file (its magic and type)
    write("vad", "seed-whisper-arch.knot",
          vad_knot([(b"general.architecture", 8, gguf_str(b"whisper"))],
                   [(b"decoder.bias", (1,), 0)], 64))
    write("vad", "seed-ggml.bin", struct.pack("<II", 0x67676d6c, 10) +
          b"silero-16k" + struct.pack("<5i", 6, 2, 0, 512, 64))


def wav(fmt_tag, channels, rate, bits, frames, extra_chunks=b"",
        extensible=False):
    block = channels * bits // 8
    if extensible:
        fmt = struct.pack("<HHIIHH", 0xFFFE, channels, rate, rate * block,
                          block, bits)
        guid = struct.pack("<H", fmt_tag) + \
            b"\x00\x00\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71"
        fmt += struct.pack("<HHI", 22, bits, 0) + guid
    else:
        fmt = struct.pack("<HHIIHH", fmt_tag, channels, rate, rate * block,
                          block, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt
    body += extra_chunks
    body += b"data" + struct.pack("<I", len(frames)) + frames
    if len(frames) % 2:
        body += b"\x00"
    return b"RIFF" + struct.pack("<I", len(body)) + body


def wav_seeds():
    n = 160
    s16 = b"".join(struct.pack("<h", int(8000 * math.sin(i / 5.0)))
                   for i in range(n))
    write("wav", "seed-s16-mono.wav", wav(1, 1, 16000, 16, s16))
    stereo24 = b"".join(struct.pack("<i", i * 4096)[:3] * 2 for i in range(n))
    write("wav", "seed-s24-stereo-list.wav",
          wav(1, 2, 16000, 24, stereo24,
              extra_chunks=b"LIST" + struct.pack("<I", 5) + b"INFOx\x00"))
    f32 = b"".join(struct.pack("<f", math.sin(i / 3.0)) for i in range(n))
    write("wav", "seed-f32-extensible.wav",
          wav(3, 1, 16000, 32, f32, extensible=True))
    s32 = b"".join(struct.pack("<i", i << 20) for i in range(33))
    write("wav", "seed-s32-44k-odd.wav", wav(1, 3, 44100, 32, s32[:99]))


def safetensors_json_seeds():
    # first byte 5: added_tokens.json / tokenizer.json added_tokens;
    # 6: generation_config.json ids
    write("safetensors", "seed-added-tokens.json",
          b"\x05{\"<|endoftext|>\": 50257, \"<|startoftranscript|>\": 50258,"
          b" \"added_tokens\": 50300}")
    write("safetensors", "seed-tokenizer-added.json",
          b"\x05{\"version\": \"1.0\", \"added_tokens\": [{\"id\": 50257, "
          b"\"content\": \"<|endoftext|>\", \"special\": true}], \"model\": "
          b"{\"vocab\": {\"model\": 0}}}")
    write("safetensors", "seed-generation-config.json",
          b"\x06{\"decoder_start_token_id\": 50258, \"eos_token_id\": 50257, "
          b"\"no_timestamps_token_id\": 50363, \"pad_token_id\": null, "
          b"\"forced_decoder_ids\": [[1, null], [2, 50359]], "
          b"\"alignment_heads\": [[1, 0], [2, 0], [2, 5], [3, 0]]}")
    write("safetensors", "seed-vocab-model-token.json",
          b"\x03{\"model\": 2, \"version\": 0, \"added_tokens\": 1}")
    # 4: a shard index (model.safetensors.index.json)
    write("safetensors", "seed-shard-index.json",
          b"\x04{\"metadata\": {\"total_size\": 10}, \"weight_map\": "
          b"{\"model.encoder.conv1.weight\": "
          b"\"model-00001-of-00002.safetensors\", \"proj_out.weight\": "
          b"\"model-00002-of-00002.safetensors\"}}")


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(CORPUS), "..", "..", "..", "shared", "data")
    tokenizer_seeds()
    tiktoken_seeds(shared)
    model_seeds()
    vad_seeds()
    wav_seeds()
    safetensors_json_seeds()


if __name__ == "__main__":
    main()
