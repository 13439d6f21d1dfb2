"""Issue 18, export of quantized tensors as integers + scales (the default
without --dequantize) and import of such files back into quantized tensors.

The exported files are read here with numpy only (no modelzip module): npz
through np.load(allow_pickle=False), safetensors by parsing its header with
json + struct. The floats are rebuilt from the integers and scales by the
rules docs/cli.md and `export --help` document, independently of modelzip's
code, then compared with the float tag (within half a quantization step) and
with `cat --dequantize --npy` (exactly)."""
import json
import math
import struct
import zipfile

import numpy as np
import pytest

from conftest import run

SCHEMES = ["int8-per-tensor", "int8-per-channel", "int8-block32", "int4-block32"]
# conv: rows of 3*5*5 = 75 (a partial last block of 11); odd: 165 elements
# (an odd int4 count) in rows of 33.
SHAPES = {"fc": (64, 96), "conv": (8, 3, 5, 5), "odd": (5, 33)}
NP_TYPES = {"I8": "i1", "U8": "u1", "I64": "<i8", "F16": "<f2", "F32": "<f4", "F64": "<f8"}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qexport")
    rng = np.random.default_rng(18)
    arrays = {name: rng.normal(0, 0.2, shape).astype(np.float32) for name, shape in SHAPES.items()}
    arrays["bias"] = np.linspace(-1, 1, 64, dtype=np.float32)
    np.savez(folder / "w.npz", **arrays)
    path = folder / "q.zip"
    run("import", path, "--tag", "f", folder / "w.npz")
    for scheme in SCHEMES:
        run("quantize", path, "--from", "f", "--tag", scheme, "--scheme", scheme,
            "--params", "fc", "--params", "conv", "--params", "odd")
    return path, arrays


def read_safetensors(path):
    """(arrays, metadata) of a safetensors file, by the published layout."""
    data = path.read_bytes()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    arrays = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        arrays[name] = np.frombuffer(body[begin:end], NP_TYPES[entry["dtype"]]).reshape(
            entry["shape"])
    return arrays, meta


def write_safetensors(path, arrays, meta):
    """A safetensors file as the spec describes it (no ordering tricks)."""
    codes = {np.dtype(v).str: k for k, v in NP_TYPES.items()}
    codes["|i1"], codes["|u1"] = "I8", "U8"
    header, body = {}, b""
    if meta:
        header["__metadata__"] = meta
    for name, a in arrays.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": codes[a.dtype.str], "shape": list(a.shape),
                        "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)


def exported(path):
    """(arrays, descriptions) of an exported .npz or .safetensors file."""
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        desc = {k[:-len(".quantization")]: json.loads(str(arrays.pop(k)))
                for k in list(arrays) if k.endswith(".quantization")}
        return arrays, desc
    arrays, meta = read_safetensors(path)
    desc = {k[:-len(".quantization")]: json.loads(v) for k, v in meta.items()
            if k.endswith(".quantization")}
    assert len(desc) == len(meta)
    return arrays, desc


def reconstruct(arrays, name, d):
    """The documented rule: float64 (q - zero_points) * scales, broadcast per
    scheme, then rounded to the original dtype. Also returns each element's
    step (its scale)."""
    q = arrays[name].astype(np.float64)
    scales = arrays[name + ".scales"].astype(np.float64)
    if d["scheme"] == "affine-per-tensor":
        assert scales.shape == () and arrays[name + ".zero_points"].shape == ()
        x = (q - arrays[name + ".zero_points"]) * scales
        step = np.full(q.shape, float(scales))
    elif d["scheme"] == "affine-per-axis":
        shape = [1] * q.ndim
        shape[d["axis"]] = -1
        zp = arrays[name + ".zero_points"]
        assert scales.shape == zp.shape == (q.shape[d["axis"]],)
        x = (q - zp.reshape(shape)) * scales.reshape(shape)
        step = np.broadcast_to(scales.reshape(shape), q.shape)
    else:
        assert d["scheme"] == "block-symmetric" and name + ".zero_points" not in arrays
        axis, bs = d["axis"], d["block_size"]
        k = math.prod(q.shape[axis:])
        assert scales.shape == q.shape[:axis] + (-(-k // bs),)
        rows = q.reshape(q.shape[:axis] + (k,))
        per_element = np.repeat(scales, bs, axis=-1)[..., :k]
        x = (rows * per_element).reshape(q.shape)
        step = per_element.reshape(q.shape)
    return x, x.astype(d["dtype"]), step


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize("scheme", SCHEMES)
def test_numpy_alone_rebuilds_the_values(archive, tmp_path, scheme, suffix):
    path, original = archive
    out = tmp_path / ("q" + suffix)
    p = run("export", path, "--tag", scheme, out)
    assert b"3 quantized as integers" in p.stderr
    arrays, desc = exported(out)
    assert sorted(desc) == ["conv", "fc", "odd"]
    int4 = scheme.startswith("int4")
    for name in desc:
        d = desc[name]
        assert d["version"] == 1 and d["dtype"] == "float32"
        assert d["storage"] == ("int4" if int4 else "int8") and d["bits"] == (4 if int4 else 8)
        q = arrays[name]
        assert q.dtype == np.int8 and q.shape == SHAPES[name]  # int4: one per element
        if int4:
            assert q.min() >= -8 and q.max() <= 7 and q.min() < -4 and q.max() > 4
        x64, x, step = reconstruct(arrays, name, d)
        # Within half a step of the float tag, and the steps are those of
        # the scheme (max|x| / 127 or / 7; (max - min) / 255 for affine),
        # so a wrong scale or nibble order cannot pass.
        err = np.abs(x64 - original[name].astype(np.float64))
        assert np.all(err <= step / 2 * (1 + 1e-6)), name
        assert err.max() > 0
        big = float(np.abs(original[name]).max())
        assert step.max() <= big * (1 / 7 if int4 else 2 / 127) * 1.002
        # Exactly what modelzip's own dequantization gives.
        cat = tmp_path / f"{name}.npy"
        cat.write_bytes(run("cat", path, name, "--tag", scheme, "--npy", "--dequantize").stdout)
        assert np.array_equal(np.load(cat), x), name
    # Parameters left alone stay plain arrays.
    assert np.array_equal(arrays["bias"], original["bias"])
    assert set(arrays) == {"bias"} | {n + s for n in desc for s in
                                      ("", ".scales", ".zero_points")
                                      if s != ".zero_points" or "block" not in desc[n]["scheme"]}


def test_description_and_arrays_by_scheme(archive, tmp_path):
    path, _ = archive
    want = {
        "int8-per-tensor": ({"scheme": "affine-per-tensor"}, "<f8", ()),
        "int8-per-channel": ({"scheme": "affine-per-axis", "axis": 0}, "<f8", (8,)),
        "int8-block32": ({"scheme": "block-symmetric", "axis": 1, "block_size": 32}, "<f2",
                         (8, 3)),  # rows of 75: blocks of 32, 32, 11
        "int4-block32": ({"scheme": "block-symmetric", "axis": 1, "block_size": 32}, "<f2",
                         (8, 3)),
    }
    for scheme, (fields, scale_type, conv_scales) in want.items():
        run("export", path, "--tag", scheme, tmp_path / "d.npz")
        with np.load(tmp_path / "d.npz", allow_pickle=False) as z:
            assert z["conv.quantization"].shape == () and z["conv.quantization"].dtype.kind == "U"
            d = json.loads(str(z["conv.quantization"]))
            assert z["conv.scales"].dtype.str == scale_type
            assert z["conv.scales"].shape == conv_scales
        storage = "int4" if scheme.startswith("int4") else "int8"
        assert d == {"version": 1, "storage": storage, "bits": 4 if storage == "int4" else 8,
                     "dtype": "float32", **fields}


def test_dequantize_still_gives_floats_and_one_array_formats_refuse(archive, tmp_path):
    path, _ = archive
    for scheme in SCHEMES:
        run("export", path, "--tag", scheme, tmp_path / "f.safetensors", "--dequantize")
        arrays, meta = read_safetensors(tmp_path / "f.safetensors")
        assert meta == {} and sorted(arrays) == ["bias", "conv", "fc", "odd"]
        assert all(a.dtype == np.float32 for a in arrays.values())
        for suffix in (".npy", ".btf"):
            out = tmp_path / ("x" + suffix)
            p = run("export", path, "fc", "--tag", scheme, out, check=False)
            assert p.returncode == 1 and not out.exists()
            err = p.stderr.decode()
            assert "quantized tensor 'fc'" in err and ".npz or .safetensors" in err
            assert "--dequantize" in err and str(out) in err


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_import_recreates_the_quantized_tag(archive, tmp_path, suffix):
    src, _ = archive
    path = tmp_path / "r.zip"
    path.write_bytes(src.read_bytes())
    for scheme in SCHEMES:
        out = tmp_path / (scheme + suffix)
        run("export", path, "--tag", scheme, out)
        run("import", path, "--tag", "back-" + scheme, out, "--no-dedup")
        rows = json.loads(run("diff", path, scheme, "back-" + scheme, "--json").stdout)
        assert {r["name"]: r["change"] for r in rows} == {
            "fc": "same", "conv": "same", "odd": "same", "bias": "same"}, scheme
        ls_a = {r["name"]: r["quantization"] for r in
                json.loads(run("ls", path, "--tag", scheme, "--json").stdout)}
        ls_b = {r["name"]: r["quantization"] for r in
                json.loads(run("ls", path, "--tag", "back-" + scheme, "--json").stdout)}
        assert ls_a == ls_b and ls_a["odd"] is not None
    run("verify", path)


# Hostile files for import: a valid export changed in one place. Each must be
# refused with the file and the array at fault named, the archive unchanged.
def _set(name, value):
    return lambda a, m: a.__setitem__(name, value)


def _desc(name, **changes):
    def change(arrays, meta):
        d = json.loads(meta[name + ".quantization"])
        d.update(changes)
        meta[name + ".quantization"] = json.dumps({k: v for k, v in d.items() if v is not None})
    return change


def _raw_desc(name, text):
    return lambda a, m: m.__setitem__(name + ".quantization", text)


HOSTILE = {
    # (scheme exported, change, array named in the message, words in it)
    "zero scale": ("int8-per-channel",
                   lambda a, m: a.__setitem__("fc.scales", np.where(
                       np.arange(64) == 3, 0.0, a["fc.scales"])),
                   "fc.scales", "scales[3]"),
    "negative block scale": ("int4-block32",
                             lambda a, m: a.__setitem__("conv.scales", -a["conv.scales"]),
                             "conv.scales", "not positive"),
    "nan per-tensor scale": ("int8-per-tensor", _set("fc.scales", np.array(np.nan)),
                             "fc.scales", "not positive"),
    "wrong scales count": ("int8-per-channel",
                           lambda a, m: a.__setitem__("fc.scales", a["fc.scales"][:63]),
                           "fc.scales", "shape [63]"),
    "wrong block count": ("int8-block32",
                          lambda a, m: a.__setitem__("conv.scales", a["conv.scales"][:, :2]),
                          "conv.scales", "expected [8, 3]"),
    "scales of float32 for per-axis": ("int8-per-channel",
                                       lambda a, m: a.__setitem__(
                                           "fc.scales", a["fc.scales"].astype(np.float32)),
                                       "fc.scales", "expected float64"),
    "zero point out of range": ("int8-per-tensor", _set("fc.zero_points", np.array(200)),
                                "fc.zero_points", "outside the int8 range"),
    "missing scales": ("int8-block32", lambda a, m: a.pop("odd.scales"),
                       "odd.quantization", "'odd.scales' is missing"),
    "int4 value out of range": ("int4-block32",
                                lambda a, m: a.__setitem__("odd", np.full((5, 33), 9, np.int8)),
                                "odd", "outside the int4 range"),
    "axis out of range": ("int8-per-channel", _desc("conv", axis=4),
                          "conv.quantization", "axis 4"),
    "block size 0": ("int8-block32", _desc("fc", block_size=0),
                     "fc.quantization", "block_size"),
    "bits that do not match": ("int8-block32", _desc("fc", bits=4), "fc.quantization", "bits"),
    "unknown scheme": ("int8-block32", _desc("fc", scheme="k-means"),
                       "fc.quantization", "unknown scheme"),
    "later version": ("int8-block32", _desc("fc", version=2), "fc.quantization", "version 2"),
    "unknown key": ("int8-block32", _desc("fc", rounding="even"), "fc.quantization",
                    "unknown key 'rounding'"),
    "bad JSON": ("int8-block32", _raw_desc("fc", '{"version":1,'), "fc.quantization",
                 "fc.quantization"),
    "not an object": ("int8-block32", _raw_desc("fc", '[1, 2]'), "fc.quantization", "'{'"),
}


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize("case", HOSTILE)
def test_import_refuses_hostile_quantized_arrays(archive, tmp_path, case, suffix):
    src, _ = archive
    scheme, change, array, words = HOSTILE[case]
    path = tmp_path / "h.zip"
    path.write_bytes(src.read_bytes())
    good = tmp_path / ("good" + suffix)
    run("export", path, "--tag", scheme, good)
    arrays, desc = exported(good)
    meta = {k + ".quantization": json.dumps(v) for k, v in desc.items()}
    change(arrays, meta)
    bad = tmp_path / ("bad" + suffix)
    if suffix == ".npz":  # a real np.savez file, descriptions as 0-d str arrays
        np.savez(bad, **arrays, **{k: np.array(v) for k, v in meta.items()})
    else:
        write_safetensors(bad, arrays, meta)
    before = path.read_bytes()
    p = run("import", path, "--tag", "bad", bad, check=False)
    err = p.stderr.decode()
    assert p.returncode != 0, case
    assert str(bad) in err and f"'{array}'" in err and words in err, err
    assert path.read_bytes() == before


def test_npz_description_must_be_a_scalar_string(archive, tmp_path):
    src, _ = archive
    path = tmp_path / "s.zip"
    path.write_bytes(src.read_bytes())
    run("export", path, "--tag", "int8-block32", tmp_path / "g.npz")
    with np.load(tmp_path / "g.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["fc.quantization"] = np.array([str(arrays["fc.quantization"])] * 2)
    np.savez(tmp_path / "b.npz", **arrays)
    p = run("import", path, "--tag", "b", tmp_path / "b.npz", check=False)
    assert p.returncode != 0 and b"'fc.quantization' must be a 0-d string array" in p.stderr
    # A name that is only like a description (not a string) is plain data.
    arrays["fc.quantization"] = np.zeros(3, np.float32)
    del arrays["conv.quantization"], arrays["odd.quantization"]
    np.savez(tmp_path / "p.npz", **arrays)
    run("import", path, "--tag", "p", tmp_path / "p.npz")
    rows = {r["name"]: r for r in json.loads(run("ls", path, "--tag", "p", "--json").stdout)}
    assert rows["fc"]["layout"] == "dense" and rows["fc"]["dtype"] == "int8"
    assert rows["fc.quantization"]["dtype"] == "float32" and "fc.scales" in rows


def test_export_refuses_names_that_collide_with_companion_arrays(tmp_path):
    rng = np.random.default_rng(5)
    np.savez(tmp_path / "w.npz", fc=rng.normal(size=(16, 64)).astype(np.float32),
             **{"fc.scales": np.ones(3, np.float32)})
    path = tmp_path / "c.zip"
    run("import", path, "--tag", "f", tmp_path / "w.npz")
    run("quantize", path, "--from", "f", "--tag", "q", "--scheme", "int8-block32",
        "--params", "fc")
    p = run("export", path, "--tag", "q", tmp_path / "c.npz", check=False)
    assert p.returncode != 0 and b"'fc.scales' is used twice" in p.stderr
    assert not (tmp_path / "c.npz").exists()
    with zipfile.ZipFile(path) as z:  # the archive is only read
        assert z.testzip() is None


def test_the_manual_recipe_gives_the_values(tmp_path):
    """The numpy snippet of docs/cli.md, run as it is on a real export."""
    import os
    import re
    manual = open(os.path.join(os.environ.get("MODELZIP_SOURCE_DIR", "."), "docs", "cli.md")).read()
    recipes = [b for b in re.findall(r"```python\n(.*?)```", manual, re.S) if "w.quantization" in b]
    assert len(recipes) == 1
    rng = np.random.default_rng(7)
    np.savez(tmp_path / "w.npz", w=rng.normal(size=(4, 2, 20)).astype(np.float32))
    path = tmp_path / "r.zip"
    run("import", path, "--tag", "f", tmp_path / "w.npz")
    for scheme in SCHEMES:
        run("quantize", path, "--from", "f", "--tag", scheme, "--scheme", scheme, "--params", "w")
        run("export", path, "--tag", scheme, tmp_path / "q.npz")
        scope = {}
        cwd = os.getcwd()
        os.chdir(tmp_path)
        try:
            exec(recipes[0], scope)
        finally:
            os.chdir(cwd)
        (tmp_path / "w.npy").write_bytes(
            run("cat", path, "w", "--tag", scheme, "--npy", "--dequantize").stdout)
        assert scope["x"].dtype == np.float32
        assert np.array_equal(scope["x"], np.load(tmp_path / "w.npy")), scheme
