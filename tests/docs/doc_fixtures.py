"""What the manuals' examples presuppose, kept tiny (a few KiB): the hidden
setups of README.md and docs/*.md import this module (run_doc_examples.py
puts its folder on PYTHONPATH). Files are written into the current folder,
the page's temporary folder."""

from __future__ import annotations

import json
import struct

import numpy as np

WORDS = ["Berlin", "Paris", "France", "Germany", "Rome", "Italy", "chat", "chien"]


def write_safetensors(path: str, arrays: dict) -> None:
    """A .safetensors file (float32 arrays), written as its specification says."""
    header, offset, data = {}, 0, b""
    for name, array in arrays.items():
        raw = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(array)),
                        "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def write_fp8_safetensors(path: str) -> None:
    """An FP8 layer as DeepSeek-V3-style releases ship it: a float8_e4m3fn
    weight (safetensors F8_E4M3, 1.0 everywhere: 0x38) and its float32
    scale, written as the safetensors library writes (compact JSON, F32
    before F8_E4M3, header padded to 8 bytes), so an export gives the same
    bytes."""
    scale = np.float32(0.5).tobytes()
    weight = bytes([0x38]) * 32
    header = {"fc.weight_scale_inv": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
              "fc.weight": {"dtype": "F8_E4M3", "shape": [4, 8], "data_offsets": [4, 36]}}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + scale + weight)


def write_mxfp4_safetensors(path: str) -> None:
    """An MXFP4 layer: a 4 x 64 F4 weight (one byte per pair of FP4 values, 0x22 = (1.0, 1.0))
    and its F8_E8M0 block scales, one per 32 values (0x7E = 2^-1), written as the safetensors
    library writes (F8_E8M0 before F4, compact JSON padded to 8 bytes)."""
    scales = bytes([0x7E]) * 8
    weight = bytes([0x22]) * 128
    header = {"fc.weight_scale": {"dtype": "F8_E8M0", "shape": [4, 2], "data_offsets": [0, 8]},
              "fc.weight": {"dtype": "F4", "shape": [4, 64], "data_offsets": [8, 136]}}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + scales + weight)


def layer_arrays(bias: float = 0.0) -> dict:
    """fc.weight (64 x 10) and fc.bias, as the README's examples name them."""
    return {"fc.weight": np.ones((64, 10), np.float32),
            "fc.bias": np.full(64, bias, np.float32)}


def write_word2vec(path: str, dims: int = 4) -> None:
    """A word2vec binary file over WORDS with made-up vectors."""
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((len(WORDS), dims)).astype(np.float32)
    with open(path, "wb") as f:
        f.write(f"{len(WORDS)} {dims}\n".encode())
        for word, vector in zip(WORDS, vectors):
            f.write(word.encode() + b" " + vector.tobytes() + b"\n")


def torch_training():
    """A tiny model with parameters emb, fc.weight and fc.bias, an Adam optimizer
    that took one step, a scheduler: (model, optimizer, scheduler)."""
    import torch

    torch.manual_seed(0)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Parameter(torch.randn(8, 10))
            self.fc = torch.nn.Linear(10, 64)

        def forward(self, x):
            return self.fc(self.emb[x])

    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
    model(torch.tensor([1, 2])).sum().backward()
    optimizer.step()
    scheduler.step()
    return model, optimizer, scheduler
