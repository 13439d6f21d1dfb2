"""The OCP Microscaling types float8_e8m0fnu and float4_e2m1fn_x2 (FORMAT.md section 6) in Python.

numpy has neither: arrays of raw bits (uint8) are saved with ``dtypes=``, and load as uint8 with
the dtype reported by ParamInfo. A float4_e2m1fn_x2 element is one byte holding two FP4 E2M1
values, the first in the low nibble, and the shape counts bytes, as torch's. torch has
torch.float8_e8m0fnu from 2.7 and torch.float4_e2m1fn_x2 from 2.8: their tensors are saved as
they are and load as those types; older torch (Debian's 1.13) refuses to load them with a
TypeError naming the version needed. The tests needing those torch types skip on older torch.
safetensors calls them F8_E8M0 and F4, F4's shape counting 4-bit values (its last dimension is
twice the pairs).
"""
import json
import struct
import subprocess

import numpy as np
import pytest

import modelzip
from conftest import CLI, blob_bytes, save, write_safetensors

try:
    import torch
except ImportError:  # the numpy tests run without torch
    torch = None

ALL_BITS = np.arange(256, dtype=np.uint8)

HAS_TORCH_E8M0 = torch is not None and hasattr(torch, "float8_e8m0fnu")
HAS_TORCH_FP4 = torch is not None and hasattr(torch, "float4_e2m1fn_x2")
needs_torch_mx = pytest.mark.skipif(
    not (HAS_TORCH_E8M0 and HAS_TORCH_FP4),
    reason=("torch is not installed" if torch is None
            else f"torch {torch.__version__} has no float8_e8m0fnu (2.7) or float4_e2m1fn_x2 "
                 "(2.8)"))
needs_old_torch = pytest.mark.skipif(
    torch is None or HAS_TORCH_E8M0 or HAS_TORCH_FP4,
    reason=("torch is not installed" if torch is None
            else f"torch {torch.__version__} has the MX dtypes (the refusal is for older torch)"))


def _decode_e8m0(bits):
    """float8_e8m0fnu bit patterns as float64, from the definition: 2^(e - 127), 0xFF NaN."""
    e = np.asarray(bits, dtype=np.uint8).astype(np.int64)
    return np.where(e == 0xFF, np.nan, np.ldexp(1.0, e - 127))


def _decode_fp4_pairs(pairs):
    """float4_e2m1fn_x2 bytes as float64 values, twice as many along the last axis: each byte's
    low nibble, then its high nibble; a nibble is sign (bit 3), 2 exponent bits (bias 1), 1
    mantissa bit (exponent 0: m * 2^-1)."""
    pairs = np.asarray(pairs, dtype=np.uint8)
    nibbles = np.stack([pairs & 0xF, pairs >> 4], axis=-1).reshape(*pairs.shape[:-1], -1)
    n = nibbles.astype(np.int64)
    sign = np.where(n & 0x8, -1.0, 1.0)
    exponent, mantissa = (n >> 1) & 0x3, n & 0x1
    value = np.where(exponent == 0, mantissa * 0.5, (1 + mantissa / 2.0) * 2.0 ** (exponent - 1))
    return sign * value


def _header(path):
    data = path.read_bytes()
    (n,) = struct.unpack_from("<Q", data)
    return json.loads(data[8:8 + n])


def test_golden_values_of_the_decoders_here():
    """The test's own decoders against values worked out by hand (FORMAT.md section 6)."""
    e8 = _decode_e8m0([0x7F, 0x80, 0x7E, 0x00, 0xFE, 0xFF])
    assert e8[:5].tolist() == [1.0, 2.0, 0.5, 2.0 ** -127, 2.0 ** 127] and np.isnan(e8[5])
    # 0x21: (0.5, 1); 0x97: (6, -0.5); 0x70: (0, 6); 0xF8: (-0, -6).
    fp4 = _decode_fp4_pairs([[0x21, 0x97], [0x70, 0xF8]])
    assert fp4.tolist() == [[0.5, 1.0, 6.0, -0.5], [0.0, 6.0, -0.0, -6.0]]
    assert np.signbit(fp4[1, 2])
    assert sorted(set(np.abs(_decode_fp4_pairs(ALL_BITS[None, :])).ravel())) == [
        0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def test_marked_raw_bits_round_trip_with_their_dtype(archive_path):
    pairs = np.array([[0x21, 0x97], [0x70, 0xF8]], np.uint8)
    arrays = {"scale": ALL_BITS, "w": pairs, "one": np.uint8(0x7F), "plain": ALL_BITS}
    save(archive_path, "t", arrays,
         dtypes={"scale": "float8_e8m0fnu", "w": "float4_e2m1fn_x2", "one": "float8_e8m0fnu"})
    with modelzip.open(archive_path) as ar:
        assert {p.name: p.dtype for p in ar.params()} == {
            "scale": "float8_e8m0fnu", "w": "float4_e2m1fn_x2", "one": "float8_e8m0fnu",
            "plain": "uint8"}
        assert ar.param("w").shape == (2, 2)  # bytes (pairs), not the 8 FP4 values
        for copy in (False, True):
            loaded = ar.load(copy=copy)
            assert loaded["scale"].dtype == np.uint8
            assert loaded["scale"].tolist() == ALL_BITS.tolist()
            assert loaded["w"].dtype == np.uint8 and loaded["w"].tolist() == pairs.tolist()
            assert loaded["one"].shape == () and loaded["one"][()] == 0x7F
    # The values those bits stand for.
    assert _decode_fp4_pairs(pairs).tolist() == [[0.5, 1.0, 6.0, -0.5], [0.0, 6.0, -0.0, -6.0]]
    assert _decode_e8m0(ALL_BITS)[0x7F] == 1.0


@pytest.mark.parametrize("kwargs, error, match", [
    ({"dtypes": {"w": "float4_e2m1fn_x2"}, "w": np.zeros(3, np.uint16)}, TypeError,
     "parameter 'w': only uint8/int8 arrays can be stored as float4_e2m1fn_x2, not uint16"),
    ({"dtypes": {"w": "float8_e8m0fnu"}, "w": np.zeros(3, np.float32)}, TypeError,
     "'w'.*float8_e8m0fnu.*float32"),
    ({"dtypes": {"w": "float4_e2m1fn"}}, ValueError,
     r"dtypes\['w'\] is 'float4_e2m1fn'.*float8_e8m0fnu, float4_e2m1fn_x2"),
    ({"dtypes": {"w": "float6_e2m3fn"}}, ValueError, "types numpy lacks"),
])
def test_dtypes_errors_name_what_is_wrong(archive_path, kwargs, error, match):
    array = kwargs.pop("w", np.zeros(3, np.uint8))
    with pytest.raises(error, match=match):
        save(archive_path, "t", {"w": array}, **kwargs)
    assert not archive_path.exists()


def test_sparse_mx_tensors_are_refused(archive_path):
    sparse = modelzip.SparseCOO(np.array([[0], [3]], np.int64), np.array([0x7F, 0x80], np.uint8),
                                (5,))
    with pytest.raises(modelzip.Error, match="sparse float8_e8m0fnu tensors are not supported"):
        save(archive_path, "t", {"s": sparse}, dtypes={"s": "float8_e8m0fnu"})


def test_safetensors_to_archive_to_safetensors_is_bitwise(tmp_path):
    """F8_E8M0 and F4 imported by the C++ converter, exported again: the same file, byte for
    byte; the blobs are the ones Python's dtypes= makes; F4's shape is halved into pairs."""
    scales = bytes([0x7F, 0x80, 0x00, 0xFF])
    fp4 = bytes([0x21, 0x97, 0x70, 0xF8, 0x12, 0x34])
    source = tmp_path / "mx.safetensors"
    # The library's order: descending dtype (F8_E8M0 before F4), then name.
    write_safetensors(source, {"s": ("F8_E8M0", [2, 2], scales), "w": ("F4", [3, 4], fp4)})
    modelzip.import_tensor_files(tmp_path / "cpp.zip", "t", [source], durable=False)
    save(tmp_path / "py.zip", "t", {"s": np.frombuffer(scales, np.uint8).reshape(2, 2),
                                    "w": np.frombuffer(fp4, np.uint8).reshape(3, 2)},
         dtypes={"s": "float8_e8m0fnu", "w": "float4_e2m1fn_x2"})
    with modelzip.open(tmp_path / "cpp.zip") as cpp, modelzip.open(tmp_path / "py.zip") as py:
        assert cpp.param("w").shape == (3, 2)
        for name, dtype in (("s", "float8_e8m0fnu"), ("w", "float4_e2m1fn_x2")):
            assert cpp.param(name).dtype == py.param(name).dtype == dtype
            assert (blob_bytes(tmp_path / "cpp.zip", cpp.param(name).blob)
                    == blob_bytes(tmp_path / "py.zip", py.param(name).blob)), name
    modelzip.export_tensor_file(tmp_path / "cpp.zip", tmp_path / "back.safetensors")
    assert (tmp_path / "back.safetensors").read_bytes() == source.read_bytes()
    modelzip.export_tensor_file(tmp_path / "py.zip", tmp_path / "py.safetensors")
    assert _header(tmp_path / "py.safetensors")["w"] == {
        "dtype": "F4", "shape": [3, 4], "data_offsets": [4, 10]}
    # read_tensor_file gives numpy the bytes, in the pair shape.
    tensors, _ = modelzip.read_tensor_file(source)
    assert tensors["w"].dtype == np.uint8 and tensors["w"].shape == (3, 2)
    assert tensors["w"].tobytes() == fp4
    # write_tensor_file doubles the last dimension back.
    modelzip.write_tensor_file(tmp_path / "w.safetensors", {"w": tensors["w"]},
                               dtypes={"w": "float4_e2m1fn_x2"})
    assert _header(tmp_path / "w.safetensors")["w"]["shape"] == [3, 4]


def test_f4_of_an_odd_last_dimension_is_refused_naming_file_and_tensor(tmp_path):
    write_safetensors(tmp_path / "odd.safetensors", {"w": ("F4", [2, 3], b"xyz")})
    with pytest.raises(modelzip.Error, match=r"odd\.safetensors.*tensor 'w' of dtype F4 has shape "
                                             r"\[2, 3\], an odd last dimension"):
        modelzip.read_tensor_file(tmp_path / "odd.safetensors")
    write_safetensors(tmp_path / "half.safetensors", {"w": ("F4", [3], b"xy")})
    with pytest.raises(modelzip.Error, match="an odd number of 4-bit values"):
        modelzip.import_tensor_files(tmp_path / "a.zip", "t", [tmp_path / "half.safetensors"])
    write_safetensors(tmp_path / "f6.safetensors", {"w": ("F6_E2M3", [4], b"xyz")})
    with pytest.raises(modelzip.Error, match="F6_E2M3, which modelzip does not support"):
        modelzip.read_tensor_file(tmp_path / "f6.safetensors")


def test_ml_dtypes_arrays(archive_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    if not hasattr(ml_dtypes, "float8_e8m0fnu"):
        pytest.skip(f"ml_dtypes {ml_dtypes.__version__} has no float8_e8m0fnu")
    scales = np.array([1.0, 2.0, 0.5], np.float32).astype(ml_dtypes.float8_e8m0fnu)
    save(archive_path, "t", {"s": scales})
    with modelzip.open(archive_path) as ar:
        assert ar.param("s").dtype == "float8_e8m0fnu"
        assert ar.tensor("s").tolist() == [0x7F, 0x80, 0x7E]
    unpacked = np.array([0.5, 1.0], np.float32).astype(ml_dtypes.float4_e2m1fn)
    with pytest.raises(TypeError, match="one FP4 value per byte.*float4_e2m1fn_x2"):
        save(archive_path, "u", {"w": unpacked})


@pytest.mark.skipif(CLI is None, reason="MODELZIP_CLI is not set (meson sets it)")
def test_the_cli_lists_verifies_and_exports_them(tmp_path, archive_path):
    save(archive_path, "t", {"s": ALL_BITS, "w": ALL_BITS.reshape(4, 64)},
         dtypes={"s": "float8_e8m0fnu", "w": "float4_e2m1fn_x2"})
    listing = subprocess.run([CLI, "ls", str(archive_path)], check=True, capture_output=True,
                             text=True, timeout=60).stdout
    assert "float8_e8m0fnu" in listing and "float4_e2m1fn_x2" in listing and "[4, 64]" in listing
    subprocess.run([CLI, "verify", str(archive_path)], check=True, capture_output=True,
                   timeout=60)
    p = subprocess.run([CLI, "export", str(archive_path), str(tmp_path / "m.npz")], check=True,
                       capture_output=True, text=True, timeout=60)
    assert "2 as their bit patterns" in p.stderr
    with np.load(tmp_path / "m.npz") as z:
        assert z["w"].dtype == np.uint8 and z["w"].shape == (4, 64)
        assert z["w"].reshape(-1).tolist() == ALL_BITS.tolist()


# --- torch without the MX types ------------------------------------------------------------


@needs_old_torch
def test_old_torch_refuses_to_load_them_naming_the_version_needed(archive_path):
    import modelzip.torch as mzt
    save(archive_path, "t", {"ok": np.ones(2, np.float32), "s": ALL_BITS,
                             "w": ALL_BITS.reshape(2, 128)},
         dtypes={"s": "float8_e8m0fnu", "w": "float4_e2m1fn_x2"})
    for name, dtype, version in (("s", "float8_e8m0fnu", "2.7"), ("w", "float4_e2m1fn_x2", "2.8")):
        match = (rf"parameter '{name}' is {dtype}, a type torch {torch.__version__} does not "
                 rf"have: loading it as a torch tensor needs torch >= {version}")
        with pytest.raises(TypeError, match=match):
            mzt.load(archive_path, names=[name])
    assert mzt.load(archive_path, names=["ok"])["ok"].tolist() == [1.0, 1.0]
    assert modelzip.load(archive_path)["w"].reshape(-1).tolist() == ALL_BITS.tolist()


@needs_old_torch
def test_old_torch_uint8_tensors_marked_mx_are_saved(archive_path):
    save(archive_path, "t", {"w": torch.arange(256, dtype=torch.uint8).reshape(16, 16)},
         dtypes={"w": "float4_e2m1fn_x2"})
    with modelzip.open(archive_path) as ar:
        assert ar.param("w").dtype == "float4_e2m1fn_x2" and ar.param("w").shape == (16, 16)
        assert ar.tensor("w").reshape(-1).tolist() == ALL_BITS.tolist()


# --- torch with the MX types (>= 2.8) ------------------------------------------------------


def _bits(tensor):
    return tensor.view(torch.uint8).cpu().reshape(-1).tolist()


@needs_torch_mx
def test_torch_mx_tensors_round_trip_bitwise(tmp_path, archive_path):
    import modelzip.torch as mzt
    bits = torch.arange(256, dtype=torch.uint8)
    tensors = {"s": bits.view(torch.float8_e8m0fnu),
               "w": bits.reshape(16, 16).view(torch.float4_e2m1fn_x2),
               "w_t": bits.reshape(16, 16).view(torch.float4_e2m1fn_x2).t(),  # not contiguous
               "f32": torch.linspace(-1, 1, 5)}
    mzt.save(tensors, archive_path, "t", durable=False)
    with modelzip.open(archive_path) as ar:
        assert {p.name: p.dtype for p in ar.params()} == {
            "s": "float8_e8m0fnu", "w": "float4_e2m1fn_x2", "w_t": "float4_e2m1fn_x2",
            "f32": "float32"}
        assert ar.param("w").shape == (16, 16)
    loaded = mzt.load(archive_path)
    for name, tensor in tensors.items():
        got = loaded[name]
        assert got.dtype == tensor.dtype and got.shape == tensor.shape, name
        if tensor.dtype == torch.float32:
            assert torch.equal(got, tensor)
        else:
            assert _bits(got) == _bits(tensor.contiguous()), name
    assert loaded["s"][0x7F:0x81].float().tolist() == [1.0, 2.0]
    # torch's safetensors integration reads what modelzip exports (F4 last dimension doubled).
    safetensors_torch = pytest.importorskip("safetensors.torch")
    modelzip.export_tensor_file(archive_path, tmp_path / "m.safetensors")
    back = safetensors_torch.load_file(str(tmp_path / "m.safetensors"))
    assert back["w"].dtype == torch.float4_e2m1fn_x2 and back["w"].shape == (16, 16)
    assert _bits(back["w"]) == _bits(tensors["w"])
    assert _bits(back["s"]) == _bits(tensors["s"])
