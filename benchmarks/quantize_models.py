"""Quantized variants of real model shapes: torchvision models (random init,
seeded) saved as a float tag, quantized with each scheme by modelzip, and
measured per scheme: bytes the quantized tag added against the float tag's
weight bytes (goals: int8 <= 0.27x, int4-block32 <= 0.16x), the largest
error of a quantized element in units of its bound (half a quantization
step; must be <= 1), and the relative error of the model's outputs after
loading the dequantized weights. Not a test: numbers only.

    /usr/bin/python3 benchmarks/quantize_models.py [BUILD_DIR] [--models resnet18,mobilenet_v2]
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torchvision


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    build = args[0] if args else "build"
    models = "resnet18,mobilenet_v2,resnet50"
    if "--models" in sys.argv:
        models = sys.argv[sys.argv.index("--models") + 1]
    cli = os.path.join(build, "src", "cli", "modelzip")
    bench = os.path.join(build, "benchmarks", "quantize_bench")
    torch.manual_seed(0)
    x = torch.randn(4, 3, 224, 224)
    print(f"{'model':14} {'scheme':17} {'quantized':>9} {'added/weights':>13} "
          f"{'max err/bound':>13} {'output rel. err':>15}")
    for name in models.split(","):
        model = getattr(torchvision.models, name)().eval()
        with torch.no_grad():
            reference = model(x)
        state = {k: v.numpy() for k, v in model.state_dict().items()}
        with tempfile.TemporaryDirectory() as tmp:
            npz = os.path.join(tmp, "model.npz")
            np.savez(npz, **state)
            archive = os.path.join(tmp, "model.zip")
            subprocess.run([cli, "import", archive, "--tag", "float", npz], check=True,
                           capture_output=True)
            out = subprocess.run([bench, "--model", archive, "--from", "float", "--dir", tmp],
                                 check=True, capture_output=True, text=True).stdout
            for line in out.splitlines():
                r = json.loads(line)
                with np.load(os.path.join(tmp, r["scheme"] + ".npz")) as z:
                    loaded = {k: torch.from_numpy(z[k]) for k in z.files}
                model.load_state_dict(loaded)
                with torch.no_grad():
                    y = model(x)
                rel = (torch.linalg.norm(y - reference) / torch.linalg.norm(reference)).item()
                model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
                print(f"{name:14} {r['scheme']:17} {r['quantized']:9d} {r['added_ratio']:12.3f}x "
                      f"{r['max_error_over_bound']:13.3f} {rel:15.4f}")


if __name__ == "__main__":
    main()
