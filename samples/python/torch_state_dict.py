#!/usr/bin/python3
"""Save a PyTorch model's state_dict as a modelzip tag, load it into a fresh model, compare.

    /usr/bin/python3 torch_state_dict.py ARCHIVE     (ARCHIVE is created anew)

Exits 0 when the reloaded model computes exactly what the original computes.
Needs the modelzip package on PYTHONPATH (meson install, or <build>/src/python).
"""
import os
import sys

import torch
from torch import nn

import modelzip


class TinyNet(nn.Module):
    """A small model with the usual parameter kinds: linear, conv, batch norm (with buffers)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, kernel_size=3, padding=1)
        self.norm = nn.BatchNorm2d(4)
        self.head = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu(self.norm(self.conv(x)))
        return self.head(x.flatten(1))


def main(path):
    if os.path.exists(path):
        os.remove(path)
    torch.manual_seed(0)
    model = TinyNet()
    model.train()
    model(torch.randn(16, 1, 8, 8))  # updates the batch-norm running statistics
    model.eval()

    # Save: the tensors' memory is handed to modelzip without a copy.
    stats = modelzip.save(path, "epoch-1", model.state_dict(),
                          metadata={"model_name": "TinyNet", "model_version": "1"})
    print(f"epoch-1: {stats.blobs_written} blobs, {stats.bytes_written} bytes")

    # A second checkpoint after fine-tuning only the head: dedup stores the
    # unchanged conv and batch-norm tensors as references to epoch-1.
    with torch.no_grad():
        model.head.bias += 0.25
    stats = modelzip.save(path, "epoch-2", model.state_dict())
    print(f"epoch-2: {stats.blobs_written} new blobs, {stats.blobs_deduplicated} shared")

    # Load into a fresh model and compare outputs.
    fresh = TinyNet()
    fresh.eval()
    x = torch.randn(5, 1, 8, 8)
    with torch.no_grad():
        assert not torch.equal(model(x), fresh(x))  # a fresh model differs before loading
    with modelzip.open(path) as archive:
        print("tags:", archive.tags)
        for p in archive.params():
            print(f"  {p.name:24} {p.dtype:8} {str(p.shape):16} {'shared' if p.shared else ''}")
        fresh.load_state_dict(archive.load_torch())  # the newest tag
    with torch.no_grad():
        same = torch.equal(model(x), fresh(x))
    print("outputs identical:", same)
    return 0 if same else 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
