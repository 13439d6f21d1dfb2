"""The 8-bit float types float8_e4m3fn and float8_e5m2 (FORMAT.md section 6) in the Python package.

numpy has no float8 type: arrays of raw bits (uint8/int8) are saved with ``dtypes=``, and load
as uint8 bits with the dtype reported by ParamInfo. torch >= 2.1 has torch.float8_e4m3fn and
torch.float8_e5m2: its tensors are saved as they are and load as those types on every path
(CPU views, device pipelines, load_into, save_async); older torch (Debian's 1.13) refuses to
load them with a TypeError. The tests needing torch >= 2.1 skip on older torch ("torch X has no
float8 dtypes"), the CUDA ones where CUDA is absent.
"""
import json
import struct
import subprocess

import numpy as np
import pytest

import modelzip
import modelzip.distributed
from modelzip import _values
from conftest import CLI, OneRank, blob_bytes, save, write_safetensors

try:
    import torch
except ImportError:  # the numpy tests run without torch
    torch = None

ALL_BITS = np.arange(256, dtype=np.uint8)
FLOAT8 = ("float8_e4m3fn", "float8_e5m2")

HAS_TORCH_FLOAT8 = torch is not None and hasattr(torch, "float8_e4m3fn")
needs_torch_float8 = pytest.mark.skipif(
    not HAS_TORCH_FLOAT8,
    reason=("torch is not installed" if torch is None
            else f"torch {torch.__version__} has no float8 dtypes"))
needs_old_torch = pytest.mark.skipif(
    torch is None or HAS_TORCH_FLOAT8,
    reason=("torch is not installed" if torch is None
            else f"torch {torch.__version__} has float8 dtypes (the refusal is for older torch)"))
needs_cuda = pytest.mark.skipif(not HAS_TORCH_FLOAT8 or not torch.cuda.is_available(),
                                reason="needs CUDA and torch >= 2.1")


def _decode_e4m3fn(bits):
    """float8_e4m3fn bit patterns as float64 (FORMAT.md section 6), written independently of the
    library's decoder: sign, 4 exponent bits (bias 7), 3 mantissa bits, S.1111.111 is NaN."""
    bits = np.asarray(bits, dtype=np.uint8).astype(np.int64)
    sign = np.where(bits & 0x80, -1.0, 1.0)
    exponent, mantissa = (bits >> 3) & 0xF, bits & 0x7
    value = np.where(exponent == 0, mantissa / 8.0 * 2.0 ** -6,
                     (1 + mantissa / 8.0) * 2.0 ** (exponent - 7))
    return np.where((exponent == 0xF) & (mantissa == 0x7), np.nan, sign * value)


def _decode_e5m2(bits):
    """float8_e5m2 bit patterns as float64: the high byte of an IEEE binary16."""
    return (np.asarray(bits, dtype=np.uint8).astype(np.uint16) << 8).view(np.float16).astype(
        np.float64)


def _same_floats(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


# --- numpy ---------------------------------------------------------------------------------


def test_marked_raw_bits_round_trip_with_their_dtype(archive_path):
    arrays = {"e4": ALL_BITS, "e5": ALL_BITS.view(np.int8).reshape(16, 16),
              "scalar": np.uint8(0x38), "plain": ALL_BITS}
    save(archive_path, "t", arrays,
         dtypes={"e4": "float8_e4m3fn", "e5": "float8_e5m2", "scalar": "float8_e4m3fn"})
    with modelzip.open(archive_path) as ar:
        assert {p.name: p.dtype for p in ar.params()} == {
            "e4": "float8_e4m3fn", "e5": "float8_e5m2", "scalar": "float8_e4m3fn",
            "plain": "uint8"}
        for copy in (False, True):
            loaded = ar.load(copy=copy)
            assert loaded["e4"].dtype == np.uint8 and loaded["e4"].tolist() == ALL_BITS.tolist()
            assert loaded["e5"].dtype == np.uint8 and loaded["e5"].shape == (16, 16)
            assert loaded["e5"].reshape(-1).tolist() == ALL_BITS.tolist()  # int8 in, uint8 out
            assert loaded["scalar"].shape == () and loaded["scalar"][()] == 0x38
        assert ar.param("e4").shape == (256,) and ar.param("e4").layout == "dense"
    # The values those bits stand for, as FORMAT.md defines them.
    e4 = _decode_e4m3fn(ALL_BITS)
    assert e4[0x38] == 1.0 and e4[0x7E] == 448.0 and e4[0x01] == 2.0 ** -9
    assert np.isnan(e4[0x7F]) and np.isnan(e4[0xFF]) and np.isfinite(e4[0x7E])
    e5 = _decode_e5m2(ALL_BITS)
    assert e5[0x3C] == 1.0 and e5[0x7B] == 57344.0 and np.isinf(e5[0x7C])


def test_dtypes_marks_updater_state_sparse_values_and_bfloat16(archive_path):
    bf16 = np.array([0x3F80, 0xC020], np.uint16)
    sparse = modelzip.SparseCOO(np.array([[0], [3]], np.int64), np.array([0x38, 0xB8], np.uint8),
                                (5,))
    with modelzip.Writer(archive_path, durable=False) as w:
        w.add_tag("t", {"w": ALL_BITS, "s": sparse, "b": bf16},
                  updater={("w", "M"): ALL_BITS, ("w", "V"): ALL_BITS},
                  dtypes={"w": "float8_e5m2", "s": "float8_e4m3fn", "b": "bfloat16",
                          ("w", "M"): "float8_e4m3fn"})
        w.commit()
    with modelzip.open(archive_path) as ar:
        assert {p.name: p.dtype for p in ar.params()} == {"w": "float8_e5m2",
                                                          "s": "float8_e4m3fn",
                                                          "b": "bfloat16"}
        assert {(s.state, s.dtype) for s in ar.updater_states()} == {("M", "float8_e4m3fn"),
                                                                     ("V", "uint8")}
        s = ar.tensor("s")
        assert isinstance(s, modelzip.SparseCOO) and s.values.dtype == np.uint8
        assert s.values.tolist() == [0x38, 0xB8] and s.shape == (5,)


def test_bfloat16_keyword_is_the_shorthand_of_dtypes(tmp_path):
    bits = np.array([0x3F80, 0xC020, 0], np.uint16)
    save(tmp_path / "a.zip", "t", {"w": bits}, bfloat16=["w"])
    save(tmp_path / "b.zip", "t", {"w": bits}, dtypes={"w": "bfloat16"})
    save(tmp_path / "c.zip", "t", {"w": bits}, bfloat16=["w"], dtypes={"w": "bfloat16"})
    blobs = []
    for name in ("a.zip", "b.zip", "c.zip"):
        with modelzip.open(tmp_path / name) as ar:
            assert ar.param("w").dtype == "bfloat16"
            blobs.append(blob_bytes(tmp_path / name, ar.param("w").blob))
    assert blobs[0] == blobs[1] == blobs[2]


@pytest.mark.parametrize("kwargs, error, match", [
    ({"dtypes": {"w": "float8_e5m2"}, "w": np.zeros(3, np.uint16)}, TypeError,
     "parameter 'w': only uint8/int8 arrays can be stored as float8_e5m2, not uint16"),
    ({"dtypes": {"w": "float8_e4m3fn"}, "w": np.zeros(3, np.float32)}, TypeError,
     "'w'.*float8_e4m3fn.*float32"),
    ({"dtypes": {"w": "bfloat16"}, "w": np.zeros(3, np.uint8)}, TypeError,
     "'w'.*uint16/int16.*bfloat16"),
    ({"dtypes": {"w": "float8"}}, ValueError, r"dtypes\['w'\] is 'float8'.*float8_e4m3fn"),
    ({"dtypes": {"w": "float32"}}, ValueError, "types numpy lacks"),
    ({"dtypes": {"w": 8}}, TypeError, "must be a dtype name"),
    ({"dtypes": ["w"]}, TypeError, "dtypes must be a mapping"),
    ({"dtypes": {"typo": "float8_e5m2"}}, ValueError, "dtypes names 'typo', which is not among"),
    ({"dtypes": {("w", "M"): "float8_e5m2"}}, ValueError, r"updater state \('w', 'M'\)"),
    ({"dtypes": {"w": "float8_e5m2"}, "bfloat16": ["w"]}, ValueError,
     "marked bfloat16 by bfloat16= and float8_e5m2 by dtypes="),
])
def test_dtypes_errors_name_what_is_wrong(archive_path, kwargs, error, match):
    array = kwargs.pop("w", np.zeros(3, np.uint8))
    with pytest.raises(error, match=match):
        save(archive_path, "t", {"w": array}, **kwargs)
    assert not archive_path.exists()  # nothing was written


def test_save_async_and_write_tensor_file_take_dtypes(tmp_path, archive_path):
    modelzip.save_async(archive_path, "t", {"w": ALL_BITS}, dtypes={"w": "float8_e5m2"},
                        durable=False).result()
    with modelzip.open(archive_path) as ar:
        assert ar.param("w").dtype == "float8_e5m2"
        assert ar.tensor("w").tolist() == ALL_BITS.tolist()
    with pytest.raises(ValueError, match="'e4m3'"):
        modelzip.save_async(archive_path, "u", {"w": ALL_BITS}, dtypes={"w": "e4m3"}).result()
    bits = np.array([0x3F80, 0xC020], np.uint16)
    modelzip.write_tensor_file(tmp_path / "m.safetensors", {"h": bits},
                               dtypes={"h": "bfloat16"})
    data = (tmp_path / "m.safetensors").read_bytes()
    (n,) = struct.unpack_from("<Q", data)
    assert json.loads(data[8:8 + n])["h"]["dtype"] == "BF16"
    with pytest.raises(ValueError, match="'float16'"):
        modelzip.write_tensor_file(tmp_path / "x.npz", {"h": bits}, dtypes={"h": "float16"})


def test_distributed_load_gives_the_bits_in_numpy(archive_path):
    save(archive_path, "t", {"w": ALL_BITS.reshape(4, 64)}, dtypes={"w": "float8_e4m3fn"})
    stats = {}
    out = modelzip.distributed.load(archive_path, {"w": ((1, 0), (2, 64))}, stats=stats)
    assert out["w"].dtype == np.uint8 and out["w"].reshape(-1).tolist() == list(range(64, 192))
    assert stats["w"][1]  # a zero-copy view


def test_distributed_save_takes_dtypes(archive_path):
    mzd = modelzip.distributed
    tensors = {"w": ALL_BITS[:128], "s": mzd.Shard(ALL_BITS.reshape(2, 128), (2, 128), (0, 0))}
    mzd.save(archive_path, "t", tensors, group=OneRank(), durable=False,
             dtypes={"w": "float8_e5m2"})
    with pytest.raises(ValueError, match="'nope', which is not among this rank's tensors"):
        mzd.save(archive_path, "u", tensors, group=OneRank(), dtypes={"nope": "float8_e5m2"})
    with pytest.raises(TypeError, match="'w'.*uint8/int8.*float8_e4m3fn"):
        mzd.save(archive_path, "u", {"w": np.zeros(2, np.float16)}, group=OneRank(),
                 dtypes={"w": "float8_e4m3fn"})
    mzd.save(archive_path, "shards", {"s": tensors["s"]}, group=OneRank(), durable=False,
             dtypes={"s": "float8_e4m3fn"})
    with modelzip.open(archive_path) as ar:
        assert ar.tags == ["t", "shards"]
        assert {p.name: p.dtype for p in ar.params("t")} == {"w": "float8_e5m2", "s": "uint8"}
        assert ar.param("s", "shards").dtype == "float8_e4m3fn"
        assert ar.tensor("w", "t").reshape(-1).tolist() == list(range(128))


def test_the_converters_store_the_same_blobs_as_python(tmp_path):
    """A safetensors F8_E4M3/F8_E5M2 file imported by the C++ converter (no numpy on the way) and
    the same bits saved from Python with dtypes= make identical blobs."""
    write_safetensors(tmp_path / "m.safetensors", {"a": ("F8_E4M3", [16, 16], ALL_BITS.tobytes()),
                                                   "b": ("F8_E5M2", [256], ALL_BITS.tobytes())})
    modelzip.import_tensor_files(tmp_path / "cpp.zip", "t", [tmp_path / "m.safetensors"],
                                 durable=False)
    save(tmp_path / "py.zip", "t", {"a": ALL_BITS.reshape(16, 16), "b": ALL_BITS},
         dtypes={"a": "float8_e4m3fn", "b": "float8_e5m2"})
    with modelzip.open(tmp_path / "cpp.zip") as cpp, modelzip.open(tmp_path / "py.zip") as py:
        for name, dtype in (("a", "float8_e4m3fn"), ("b", "float8_e5m2")):
            assert cpp.param(name).dtype == py.param(name).dtype == dtype
            assert (blob_bytes(tmp_path / "cpp.zip", cpp.param(name).blob)
                    == blob_bytes(tmp_path / "py.zip", py.param(name).blob)), name
    tensors, _ = modelzip.read_tensor_file(tmp_path / "m.safetensors")
    assert tensors["a"].dtype == np.uint8 and tensors["a"].reshape(-1).tolist() == list(range(256))


@pytest.mark.skipif(CLI is None, reason="MODELZIP_CLI is not set (meson sets it)")
def test_the_cli_reads_what_python_wrote(archive_path):
    save(archive_path, "t", {"w": ALL_BITS, "v": ALL_BITS.reshape(2, 128)},
         dtypes={"w": "float8_e4m3fn", "v": "float8_e5m2"})
    listing = subprocess.run([CLI, "ls", str(archive_path)], check=True, capture_output=True,
                             text=True, timeout=60).stdout
    assert "float8_e4m3fn" in listing and "float8_e5m2" in listing
    subprocess.run([CLI, "verify", str(archive_path)], check=True, capture_output=True,
                   timeout=60)


def test_ml_dtypes_arrays_are_recognised(archive_path):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    values = np.array([1.0, -2.0, 448.0, 0.015625], dtype=np.float32)
    arrays = {"e4": values.astype(ml_dtypes.float8_e4m3fn),
              "e5": values[:2].astype(ml_dtypes.float8_e5m2),
              "bf": values.astype(ml_dtypes.bfloat16)}
    save(archive_path, "t", arrays)
    with modelzip.open(archive_path) as ar:
        assert {p.name: p.dtype for p in ar.params()} == {
            "e4": "float8_e4m3fn", "e5": "float8_e5m2", "bf": "bfloat16"}
        loaded = ar.load()
    for name, array in arrays.items():
        assert loaded[name].tobytes() == array.tobytes(), name
    assert _same_floats(loaded["e4"].view(ml_dtypes.float8_e4m3fn).astype(np.float32), values)



class _ForeignDtype:
    """What numpy reports for a type another package registered (ml_dtypes): a name, a size and
    a kind of that package's choosing; hashable, as numpy's dtypes are."""

    def __init__(self, name: str, kind: str, itemsize: int) -> None:
        self.name, self.kind, self.itemsize = name, kind, itemsize

    def __hash__(self) -> int:
        return hash((self.name, self.kind, self.itemsize))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ForeignDtype) and \
            (self.name, self.kind, self.itemsize) == (other.name, other.kind, other.itemsize)


@pytest.mark.parametrize("kind", ["V", "f"])
def test_foreign_raw_bits_types_are_known_by_name_whatever_their_kind(kind):
    # ml_dtypes gives float8_e5m2 the numpy kind "f" and the other types "V": the accelerator
    # machine's run refused ml_dtypes float8_e5m2 arrays while the kind was part of the test.
    for name, size in _values.RAW_BITS_DTYPES.items():
        assert _values._dtype_name_of(_ForeignDtype(name, kind, size), None) == name
    with pytest.raises(TypeError, match="cannot be stored"):
        _values._dtype_name_of(_ForeignDtype("float8_e5m2", kind, 2), None)  # not its size
    with pytest.raises(TypeError, match="cannot be stored"):
        _values._dtype_name_of(_ForeignDtype("float8_e3m4", kind, 1), None)  # not a known one

# --- torch before 2.1 ----------------------------------------------------------------------


@needs_old_torch
def test_old_torch_refuses_to_load_float8_naming_the_parameter(archive_path):
    import modelzip.torch as mzt
    save(archive_path, "t", {"ok": np.ones(2, np.float32), "w": ALL_BITS},
         dtypes={"w": "float8_e5m2"})
    match = (rf"parameter 'w' is float8_e5m2, a type torch {torch.__version__} does not have: "
             r"loading it as a torch tensor needs torch >= 2\.1")
    with pytest.raises(TypeError, match=match):
        mzt.load(archive_path)
    with pytest.raises(TypeError, match=match):
        with modelzip.open(archive_path) as ar:
            ar.load_torch()
    module = torch.nn.Module()
    module.register_buffer("w", torch.zeros(256, dtype=torch.uint8))
    module.register_buffer("ok", torch.zeros(2))
    with pytest.raises(TypeError, match=match):
        mzt.load_into(module, archive_path)
    assert module.ok.tolist() == [0.0, 0.0]  # nothing copied
    with pytest.raises(TypeError, match=match):
        modelzip.distributed.load(archive_path, torch=True)
    # The float tensor alone still loads, and numpy gets the bits.
    assert mzt.load(archive_path, names=["ok"])["ok"].tolist() == [1.0, 1.0]
    assert modelzip.load(archive_path)["w"].tolist() == ALL_BITS.tolist()


@needs_old_torch
def test_old_torch_uint8_tensors_marked_float8_are_saved(archive_path):
    save(archive_path, "t", {"w": torch.arange(256, dtype=torch.uint8)},
         dtypes={"w": "float8_e4m3fn"})
    with modelzip.open(archive_path) as ar:
        assert ar.param("w").dtype == "float8_e4m3fn"
        assert ar.tensor("w").tolist() == ALL_BITS.tolist()


# --- torch >= 2.1 --------------------------------------------------------------------------


def _float8_tensors():
    """Every bit pattern of both types, a non-contiguous one, converted values and a float32."""
    bits = torch.arange(256, dtype=torch.uint8)
    return {
        "e4": bits.view(torch.float8_e4m3fn),
        "e5": bits.reshape(16, 16).view(torch.float8_e5m2),
        "e5_t": bits.reshape(16, 16).view(torch.float8_e5m2).t(),  # not contiguous
        "conv": torch.tensor([1.0, -0.5, 448.0, 3.0]).to(torch.float8_e4m3fn),
        "scalar": torch.tensor(2.0).to(torch.float8_e5m2),
        "f32": torch.linspace(-1, 1, 5),
    }


def _bits(tensor):
    """A float8 tensor's bytes as a list (float8 tensors have no comparison operators)."""
    if tensor.dtype in _values.torch_raw_bits_types(torch).values():
        tensor = tensor.view(torch.uint8)  # same itemsize: any strides
    return tensor.cpu().reshape(-1).tolist()


def _check_loaded(loaded, saved):
    assert list(loaded) == list(saved)
    for name, tensor in saved.items():
        got = loaded[name]
        assert got.dtype == tensor.dtype and got.shape == tensor.shape, name
        assert _bits(got) == _bits(tensor), name


@needs_torch_float8
def test_torch_float8_round_trips_on_the_cpu(archive_path):
    import modelzip.torch as mzt
    tensors = _float8_tensors()
    mzt.save(tensors, archive_path, "t", durable=False)
    with modelzip.open(archive_path) as ar:
        assert {p.name: p.dtype for p in ar.params()} == {
            "e4": "float8_e4m3fn", "e5": "float8_e5m2", "e5_t": "float8_e5m2",
            "conv": "float8_e4m3fn", "scalar": "float8_e5m2", "f32": "float32"}
        numpy_loaded = ar.load()
        assert numpy_loaded["e4"].dtype == np.uint8
        assert numpy_loaded["e4"].tolist() == ALL_BITS.tolist()
        assert numpy_loaded["conv"].tolist() == _bits(tensors["conv"])
        _check_loaded(ar.load_torch(), tensors)
    loaded = mzt.load(archive_path)
    _check_loaded(loaded, tensors)
    assert loaded["conv"].float().tolist() == [1.0, -0.5, 448.0, 3.0]
    assert _same_floats(loaded["e4"].float().numpy(), _decode_e4m3fn(ALL_BITS))
    assert _same_floats(loaded["e5"].float().reshape(-1).numpy(), _decode_e5m2(ALL_BITS))
    # CPU loads view the mapping: writes to the bits stay in this process's copy.
    loaded["e4"].view(torch.uint8)[0] = 0x38
    assert mzt.load(archive_path)["e4"].view(torch.uint8)[0].item() == 0


@needs_torch_float8
def test_torch_float8_marked_and_mismatched(archive_path):
    tensor = torch.arange(4, dtype=torch.uint8).view(torch.float8_e4m3fn)
    save(archive_path, "t", {"w": tensor}, dtypes={"w": "float8_e4m3fn"})  # agreeing: fine
    with pytest.raises(TypeError, match="'w'.*float8_e4m3fn.*cannot be stored as float8_e5m2"):
        save(archive_path, "u", {"w": tensor}, dtypes={"w": "float8_e5m2"})


@needs_torch_float8
def test_torch_float8_load_into_and_conversions(archive_path):
    import modelzip.torch as mzt
    tensors = {"w": torch.arange(256, dtype=torch.uint8).view(torch.float8_e5m2),
               "c": torch.tensor([0.5, 2.0, -4.0]).to(torch.float8_e4m3fn)}
    mzt.save(tensors, archive_path, "t", durable=False)
    module = torch.nn.Module()
    module.register_buffer("w", torch.zeros(256, dtype=torch.uint8).view(torch.float8_e5m2))
    module.register_buffer("c", torch.zeros(3))  # float32: converted from float8
    result = mzt.load_into(module, archive_path)
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    assert module.w.dtype == torch.float8_e5m2 and _bits(module.w) == ALL_BITS.tolist()
    assert module.c.dtype == torch.float32 and module.c.tolist() == [0.5, 2.0, -4.0]


@needs_torch_float8
def test_torch_float8_save_async_and_checkpoints(tmp_path):
    import modelzip.torch as mzt
    tensors = _float8_tensors()
    modelzip.save_async(tmp_path / "a.zip", "t", tensors, durable=False).result()
    _check_loaded(mzt.load(tmp_path / "a.zip"), tensors)
    model = torch.nn.Linear(3, 2)
    model.register_buffer("scale_bits", tensors["e4"].clone())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    mzt.save_checkpoint(tmp_path / "c.zip", "step1", model, optimizer, durable=False)
    restored = torch.nn.Linear(3, 2)
    restored.register_buffer("scale_bits",
                             torch.zeros(256, dtype=torch.uint8).view(torch.float8_e4m3fn))
    mzt.load_checkpoint(tmp_path / "c.zip", "step1", restored,
                        torch.optim.SGD(restored.parameters(), lr=0.1))
    assert _bits(restored.scale_bits) == ALL_BITS.tolist()
    assert torch.equal(restored.weight, model.weight)


@needs_torch_float8
def test_torch_float8_through_the_host_staging_pipelines(archive_path):
    """The device save and load pipelines, with host targets standing for the device."""
    import modelzip.torch as mzt
    from modelzip import _device_copy, _device_save, _torch_load
    tensors = _float8_tensors()
    fetched = _device_save.fetch_to_host(list(tensors.values()), _device_save.HostFetchTarget())
    for (name, source), copy in zip(tensors.items(), fetched):
        assert copy.dtype == source.dtype and copy.is_contiguous(), name
        assert _bits(copy) == _bits(source), name
    mzt.save(tensors, archive_path, "t", durable=False)
    staged = _torch_load.load_copied(archive_path, None, torch.device("cpu"), verify=True,
                                     staging=_device_copy.HostTarget())
    _check_loaded(staged, tensors)
    _check_loaded(modelzip.distributed.load(archive_path, torch=True), tensors)


@needs_cuda
def test_cuda_float8_save_and_load(tmp_path):
    import modelzip.torch as mzt
    tensors = {name: t.cuda() for name, t in _float8_tensors().items()}
    mzt.save(tensors, tmp_path / "a.zip", "t", durable=False)
    modelzip.save_async(tmp_path / "b.zip", "t", tensors, durable=False).result()
    for name in ("a.zip", "b.zip"):
        with modelzip.open(tmp_path / name) as ar:
            assert ar.param("e4").dtype == "float8_e4m3fn"
            assert ar.tensor("e4").tolist() == ALL_BITS.tolist()
        loaded = mzt.load(tmp_path / name, device="cuda", verify=True)
        assert all(t.device.type == "cuda" for t in loaded.values())
        _check_loaded(loaded, tensors)
    module = torch.nn.Module()
    module.register_buffer("e4", torch.zeros(256, dtype=torch.uint8, device="cuda").view(
        torch.float8_e4m3fn))
    mzt.load_into(module, tmp_path / "a.zip", strict=False)
    assert _bits(module.e4) == ALL_BITS.tolist()
    on_device = modelzip.distributed.load(tmp_path / "a.zip", {"e5": None}, device="cuda")
    assert on_device["e5"].device.type == "cuda" and on_device["e5"].dtype == torch.float8_e5m2
    assert _bits(on_device["e5"]) == ALL_BITS.tolist()


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_every_torch_path_maps_the_float8_types(archive_path, monkeypatch):
    """The torch save and load paths with stand-ins for the float8 types, so that they run on
    any torch: uint8 tensors play torch.float8_e4m3fn and int8 ones torch.float8_e5m2 (both
    1-byte, as the float8 types are). Each path must store the float8 dtype and hand out the
    stand-in type again, never the raw bits of another type."""
    import modelzip.torch as mzt
    from modelzip import _device_copy, _device_save, _torch_load
    monkeypatch.setattr(_values, "torch_raw_bits_types", lambda _torch: {
        "float8_e4m3fn": torch.uint8, "float8_e5m2": torch.int8})
    tensors = {"e4": torch.arange(256, dtype=torch.uint8),
               "e5": torch.arange(256, dtype=torch.uint8).view(torch.int8).reshape(16, 16),
               "e5_t": torch.arange(256, dtype=torch.uint8).view(torch.int8).reshape(16, 16).t(),
               "f32": torch.linspace(-1, 1, 5)}
    stored = {"e4": "float8_e4m3fn", "e5": "float8_e5m2", "e5_t": "float8_e5m2",
              "f32": "float32"}
    mzt.save(tensors, archive_path, "t", durable=False)
    modelzip.save_async(archive_path, "async", tensors, durable=False).result()
    fetched = dict(_device_save.host_items(tensors.items(), _device_save.HostFetchTarget()))
    save(archive_path, "fetched", fetched)
    with modelzip.open(archive_path) as ar:
        for tag in ("t", "async", "fetched"):
            assert {p.name: p.dtype for p in ar.params(tag)} == stored, tag
        assert ar.load("t")["e5"].dtype == np.uint8  # numpy: the bits
        _check_loaded(ar.load_torch("async"), tensors)
    _check_loaded(mzt.load(archive_path, "fetched"), tensors)
    _check_loaded(_torch_load.load_copied(archive_path, "t", torch.device("cpu"), verify=True,
                                          staging=_device_copy.HostTarget()), tensors)
    _check_loaded(modelzip.distributed.load(archive_path, tag="t", torch=True), tensors)
    module = torch.nn.Module()
    for name, t in tensors.items():
        module.register_buffer(name, torch.zeros_like(t))
    mzt.load_into(module, archive_path, "t")
    _check_loaded(dict(module.state_dict()), tensors)
    model = torch.nn.Linear(3, 2)
    model.register_buffer("scale_bits", tensors["e4"].clone())
    mzt.save_checkpoint(archive_path, "ckpt", model, torch.optim.SGD(model.parameters(), lr=0.1),
                        durable=False)
    with modelzip.open(archive_path) as ar:
        assert ar.param("scale_bits", "ckpt").dtype == "float8_e4m3fn"
    restored = torch.nn.Linear(3, 2)
    restored.register_buffer("scale_bits", torch.zeros_like(tensors["e4"]))
    mzt.load_checkpoint(archive_path, "ckpt", restored,
                        torch.optim.SGD(restored.parameters(), lr=0.1))
    _check_loaded(dict(restored.state_dict()), dict(model.state_dict()))
