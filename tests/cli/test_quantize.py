"""modelzip quantize: a quantized tag beside the float one in one append, with
references (not copies) for what it leaves alone; checked with unzip -t,
Python's zipfile, flatc-free reading of the blob headers by hand (FORMAT.md
section 6), and the library's own reads through `modelzip verify`."""
import json
import shutil
import struct
import subprocess
import zipfile

import numpy as np
import pytest

from conftest import run


def make_archive(tmp_path):
    """A float tag 'float' imported from a real np.savez file."""
    rng = np.random.default_rng(3)
    arrays = {
        "conv.weight": rng.normal(0, 0.1, (32, 16, 3, 3)).astype(np.float32),
        "conv.bias": rng.normal(0, 0.1, (32,)).astype(np.float32),
        "bn.weight": np.ones(32, np.float32),
        "fc.weight": rng.normal(0, 0.05, (10, 300)).astype(np.float32),
        "fc.bias": np.zeros(10, np.float32),
        "small.weight": rng.normal(0, 1, (4, 4)).astype(np.float32),
        "steps": np.arange(2048, dtype=np.int64).reshape(32, 64),
    }
    npz = tmp_path / "w.npz"
    np.savez(npz, **arrays)
    path = tmp_path / "m.zip"
    run("import", path, "--tag", "float", npz)
    return path, arrays


def params_txt(path, tag):
    with zipfile.ZipFile(path) as z:
        text = z.read(f"{tag}/params.txt").decode()
    return dict(line.split(" ") for line in text.splitlines())


def blob_header(data):
    """(layout byte offset is not fixed) -- decode only what the test needs:
    the FlatBuffer size prefix and the 'MZTB' identifier."""
    size = struct.unpack_from("<I", data, 0)[0]
    assert data[8:12] == b"MZTB"
    return size


# Quantized bytes of conv.weight [32, 16, 3, 3] and fc.weight [10, 300]:
# integers (7608 elements: 1 byte each, or half a byte for int4) plus
# per-channel: 32 + 10 channels x (8-byte scale + 8-byte zero point);
# blocks of 32 along rows of 144 and 300: 32 x 5 + 10 x 10 float16 scales.
@pytest.mark.parametrize("scheme,expected",
                         [("int8-per-tensor", 7608), ("int8-per-channel", 7608 + 42 * 16),
                          ("int8-block32", 7608 + 260 * 2), ("int4-block32", 3804 + 260 * 2)])
def test_quantize_appends_only_quantized_weights(tmp_path, scheme, expected):
    path, arrays = make_archive(tmp_path)
    before = path.read_bytes()
    out = json.loads(run("quantize", path, "--from", "float", "--tag", "q", "--scheme", scheme,
                         "--json").stdout)
    after = path.read_bytes()
    # One append: every byte of the old archive before its tail is unchanged.
    with zipfile.ZipFile(path) as z:
        tail = z.getinfo("float/params.txt").header_offset
    assert after[:tail] == before[:tail]
    assert out["appended"] is True
    assert out["quantized"] == ["conv.weight", "fc.weight"]
    assert sorted(out["referenced"]) == ["bn.weight", "conv.bias", "fc.bias", "small.weight",
                                         "steps"]
    weight_bytes = arrays["conv.weight"].nbytes + arrays["fc.weight"].nbytes
    assert out["source_bytes"] == weight_bytes
    # Bytes added: the quantized blobs (integers + scales, ~1/4 or ~1/8) plus
    # headers, two small tables and the central directory entries.
    assert out["bytes_added"] == len(after) - len(before)
    assert out["quantized_bytes"] == expected
    assert out["bytes_added"] < out["quantized_bytes"] + 8192

    # Third-party readers: unzip -t and Python's zipfile accept the archive.
    assert shutil.which("unzip"), "unzip is required"
    t = subprocess.run(["unzip", "-t", str(path)], capture_output=True)
    assert t.returncode == 0, t.stdout + t.stderr
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
        names = set(z.namelist())
        assert z.read("tags.txt").decode().splitlines() == ["float", "q"]
    # The references point at the float tag's blobs; only the quantized
    # parameters have blobs in q/.
    table = params_txt(path, "q")
    float_table = params_txt(path, "float")
    for name in out["referenced"]:
        assert table[name] == "float/" + float_table[name], name
    own = sorted(n for n in names if n.startswith("q/params/"))
    assert own == sorted(f"q/params/{table[n]}.fb" for n in out["quantized"])
    with zipfile.ZipFile(path) as z:
        for n in own:
            blob_header(z.read(n))
    assert run("verify", path).returncode == 0


def test_quantize_globs_and_errors(tmp_path):
    path, _ = make_archive(tmp_path)
    out = json.loads(run("quantize", path, "--from", "FLOAT", "--tag", "b", "--scheme",
                         "int4-block32", "--params", "*.bias", "--params", "small.*",
                         "--json").stdout)
    assert out["quantized"] == ["conv.bias", "fc.bias", "small.weight"]
    size = path.stat().st_size
    # Errors: exit 1 with the reason, the archive untouched.
    for args, message in [
        (["--from", "float", "--tag", "c", "--scheme", "int8-block32", "--params", "nope*"],
         # the tag once, from the error's context (it said "tag 'float': --params 'nope*'
         # matches no parameter of tag 'float'")
         "tag 'float': --params 'nope*' matches no parameter\n"),
        (["--from", "float", "--tag", "c", "--scheme", "int8-block32", "--params", "steps"],
         "parameter 'steps': quantize: only float16, bfloat16, float32 and float64"),
        (["--from", "missing", "--tag", "c", "--scheme", "int8-block32"], "no tag 'missing'"),
        (["--from", "float", "--tag", "B", "--scheme", "int8-block32"], "exists"),
    ]:
        r = run("quantize", path, *args, check=False)
        assert r.returncode == 1, args
        assert message in r.stderr.decode(), r.stderr
        assert path.stat().st_size == size
    for args in (["--from", "float", "--tag", "c", "--scheme", "int3"],
                 ["--tag", "c", "--scheme", "int8-block32"],
                 ["--from", "float", "--scheme", "int8-block32"]):
        r = run("quantize", path, *args, check=False)
        assert r.returncode == 2, args
    assert path.stat().st_size == size


def test_cat_npy_of_a_quantized_tensor_names_it_and_the_way_out(tmp_path):
    path, arrays = make_archive(tmp_path)
    run("quantize", path, "--from", "float", "--tag", "q", "--scheme", "int8-per-tensor")
    p = run("cat", path, "fc.weight", "--npy", check=False)
    assert p.returncode == 1 and p.stdout == b"" and p.stderr.decode() == (
        f"modelzip: {path}: tag 'q': 'fc.weight' is quantized: .npy cannot hold its integers "
        "and scales (add --dequantize for its values, or export it to .npz or .safetensors)\n")
    raw = run("cat", path, "fc.weight", "--npy", "--dequantize").stdout
    assert raw.startswith(b"\x93NUMPY") and len(raw) > arrays["fc.weight"].nbytes


def test_quantize_refuses_urls_and_missing_archives_like_every_writer(tmp_path):
    """A URL is refused with the writers' sentence before anything is fetched (nothing listens
    on the port), a missing archive by name; neither is created."""
    url = "http://127.0.0.1:9/r18.zip"
    r = run("quantize", url, "--from", "float", "--tag", "q", "--scheme", "int8-per-tensor",
            check=False)
    assert (r.returncode, r.stderr.decode()) == \
        (1, f"modelzip: remote archives are read-only: {url}\n")
    missing = tmp_path / "missing.zip"
    r = run("quantize", missing, "--from", "float", "--tag", "q", "--scheme", "int8-per-tensor",
            check=False)
    assert r.returncode == 1 and str(missing) in r.stderr.decode() and \
        "no such archive" in r.stderr.decode(), r.stderr
    assert "filesystem error" not in r.stderr.decode() and not missing.exists()


def test_quantize_human_output(tmp_path):
    path, _ = make_archive(tmp_path)
    out = run("quantize", path, "--from", "float", "--tag", "q8", "--scheme",
              "int8-per-channel").stdout.decode()
    assert "tag 'q8' from 'float' (int8-per-channel): 2 parameter(s) quantized, 5 referenced" in out
    assert "  quantized  conv.weight\n" in out
    assert "(appended)" in out
