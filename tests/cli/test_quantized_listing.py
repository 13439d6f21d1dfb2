"""Issue 18, read side, for tags made by modelzip quantize: ls and info show
how quantized parameters are stored (scheme, storage bits, axis, block size);
cat and export --dequantize give the values within half a quantization step
of the float tag's; diff reports that error per parameter."""
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


def test_cat_and_export_dequantize_within_half_a_step(archive, tmp_path):
    raw_float = np.frombuffer(run("cat", archive, "fc", "--tag", "f").stdout, np.float32)
    for scheme in SCHEMES:
        # Without --dequantize: the stored integers, as they are.
        raw = run("cat", archive, "fc", "--tag", scheme).stdout
        assert len(raw) == (64 * 96 // 2 if scheme.startswith("int4") else 64 * 96)
        out = tmp_path / f"{scheme}.npy"
        with open(out, "wb") as f:
            f.write(run("cat", archive, "fc", "--tag", scheme, "--npy", "--dequantize").stdout)
        values = np.load(out)
        assert values.dtype == np.float32 and values.shape == (64, 96)
        err = np.abs(values.reshape(-1) - raw_float)
        # Half a step (the values lie in [0, 1): a step is at most 1/127 for
        # int8, 1/7 for symmetric int4), with room for float16 scales; a
        # wrong dequantization (integers, a wrong scale) exceeds it by far.
        step = 1 / 7 if scheme.startswith("int4") else 1 / 127
        assert err.max() <= step / 2 * 1.01 + 1e-3, scheme
        assert err.max() > 0  # really quantized
        # export --dequantize writes the same values.
        npz = tmp_path / f"{scheme}.npz"
        run("export", archive, "fc", npz, "--tag", scheme, "--dequantize")
        assert np.array_equal(np.load(npz)["fc"], values)
        # Without --dequantize: integers + scales (test_quantized_export.py).
        run("export", archive, "fc", tmp_path / "x.npz", "--tag", scheme)
        assert np.load(tmp_path / "x.npz")["fc"].dtype == np.int8


def test_diff_reports_the_error_of_each_quantized_parameter(archive, tmp_path):
    raw_float = np.frombuffer(run("cat", archive, "fc", "--tag", "f").stdout, np.float32)
    for scheme in SCHEMES:
        rows = {r["name"]: r for r in json.loads(
            run("diff", archive, "f", scheme, "--json", check=False).stdout)}
        assert rows["bias"]["change"] == "shared"
        fc = rows["fc"]
        assert fc["change"] == "changed"
        values = np.frombuffer(
            run("cat", archive, "fc", "--tag", scheme, "--dequantize").stdout, np.float32)
        assert fc["max_abs_diff"] == pytest.approx(float(np.abs(values - raw_float).max()),
                                                   rel=1e-12)
        assert f"b dequantized from {SCHEMES[scheme][2]}" in fc["detail"]
