"""Issue 18, read side: ls and info show how quantized parameters are stored
(scheme, storage bits, axis, block size), for tags made by modelzip quantize."""
import json

import numpy as np
import pytest

from conftest import run

SCHEMES = {
    # scheme: (ls text, ls --json "quantization", info key)
    "int8-per-tensor": ("quantized int8 affine-per-tensor",
                        {"scheme": "affine-per-tensor", "storage": "int8", "bits": 8},
                        "int8 affine-per-tensor"),
    "int8-per-channel": ("quantized int8 affine-per-axis axis 0",
                         {"scheme": "affine-per-axis", "storage": "int8", "bits": 8, "axis": 0},
                         "int8 affine-per-axis"),
    "int8-block32": ("quantized int8 block-symmetric block 32 float16 scales",
                     {"scheme": "block-symmetric", "storage": "int8", "bits": 8, "axis": 1,
                      "block_size": 32, "scale_dtype": "float16"},
                     "int8 block-symmetric"),
    "int4-block32": ("quantized int4 block-symmetric block 32 float16 scales",
                     {"scheme": "block-symmetric", "storage": "int4", "bits": 4, "axis": 1,
                      "block_size": 32, "scale_dtype": "float16"},
                     "int4 block-symmetric"),
}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    folder = tmp_path_factory.mktemp("quantized")
    rng = np.random.default_rng(3)
    np.savez(folder / "w.npz", fc=rng.random((64, 96), dtype=np.float32),
             bias=np.ones(64, np.float32))
    path = folder / "q.zip"
    run("import", path, "--tag", "f", folder / "w.npz")
    for scheme in SCHEMES:
        run("quantize", path, "--from", "f", "--tag", scheme, "--scheme", scheme,
            "--params", "fc")
    return path


@pytest.mark.parametrize("scheme", SCHEMES)
def test_ls_shows_the_scheme_and_its_parameters(archive, scheme):
    text, as_json, _ = SCHEMES[scheme]
    lines = run("ls", archive, "--tag", scheme).stdout.decode().splitlines()
    fc = [line.split("\t") for line in lines if line.startswith("fc\t")][0]
    assert fc[1] == "float32" and fc[2] == "[64, 96]"  # the original type and shape
    assert fc[-1] == text
    bias = [line for line in lines if line.startswith("bias\t")][0]
    assert "quantized" not in bias and bias.endswith("\tshared")
    rows = {r["name"]: r for r in json.loads(run("ls", archive, "--tag", scheme, "--json").stdout)}
    assert rows["fc"]["layout"] == "quantized" and rows["fc"]["quantization"] == as_json
    assert rows["bias"]["quantization"] is None
    # The float tag has none.
    rows = json.loads(run("ls", archive, "--tag", "f", "--json").stdout)
    assert all(r["quantization"] is None and r["layout"] == "dense" for r in rows)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_info_counts_quantized_parameters_by_scheme(archive, scheme):
    key = SCHEMES[scheme][2]
    info = json.loads(run("info", archive, "--tag", scheme, "--json").stdout)
    assert info["params"]["quantized"] == {key: 1}
    line = [l for l in run("info", archive, "--tag", scheme).stdout.decode().splitlines()
            if l.startswith("params")][0]
    assert line.endswith(f"; quantized: 1 {key}"), line
    assert json.loads(run("info", archive, "--tag", "f", "--json").stdout)["params"][
        "quantized"] == {}
