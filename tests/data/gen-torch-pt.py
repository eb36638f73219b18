#!/usr/bin/env python3
"""Writes the real-PyTorch fixtures of tests/test-convert.c's .pt reader
test (knots/torch-pt.c), with Debian's python3-torch:

    /usr/bin/python3 tests/data/gen-torch-pt.py

torch-mix.pt: openai-whisper's layout ({"dims": ..., "model_state_dict":
an OrderedDict with _metadata}) holding every case the reader must take
or skip: f16, f32 and bf16 tensors, a Parameter (_rebuild_parameter), two
views of one storage (offsets), an int64 tensor and a 0-dim tensor
(skipped). torch-transposed.pt: a state dict holding a transposed view,
which the reader refuses. Values are small integers / 8, exact in every
dtype, so that the test can check them. Written with torch 1.13
(Debian 12); the files are committed."""
import collections
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    sd = collections.OrderedDict()
    sd["a.weight"] = (torch.arange(12, dtype=torch.float32).reshape(3, 4) / 8).half()
    sd["b.bias"] = torch.tensor([1.5, -2.0, 3.0])
    sd["c.weight"] = (torch.arange(6, dtype=torch.float32).reshape(2, 3) - 2).bfloat16()
    sd["p"] = torch.nn.Parameter(torch.tensor([[0.25, 0.5]]))
    big = torch.arange(20, dtype=torch.float32)
    sd["view.first"] = big[0:4]
    sd["view.later"] = big[5:9].view(2, 2)
    sd["ids"] = torch.arange(3)
    sd["scalar"] = torch.tensor(7.0)
    sd._metadata = collections.OrderedDict({"": {"version": 1}})
    ck = {"dims": {"n_mels": 80, "n_vocab": 51864, "n_audio_head": 6}, "model_state_dict": sd}
    torch.save(ck, os.path.join(HERE, "torch-mix.pt"))
    t = collections.OrderedDict()
    t["w"] = torch.arange(6, dtype=torch.float32).reshape(2, 3).t()
    torch.save(t, os.path.join(HERE, "torch-transposed.pt"))


if __name__ == "__main__":
    main()
