"""The complex types complex64 and complex128 (FORMAT.md section 6) in the Python package.

numpy and torch (Debian's 1.13 too) have both types: arrays and tensors of them are saved as they
are and load as complex arrays / tensors on every path (zero-copy views, device pipelines with
host stand-ins, load_into, save_async, checkpoints with Adam over complex parameters,
distributed save and load). The converter and CLI cross-checks skip with a reason while this
build's C++ side lacks the complex types; the CUDA test skips where CUDA is absent.
"""
import json
import struct
import subprocess
import zipfile

import numpy as np
import pytest

import modelzip
import modelzip.distributed
from conftest import CLI, OneRank, save

try:
    import torch
except ImportError:  # the numpy tests run without torch
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
needs_cuda = pytest.mark.skipif(torch is None or not torch.cuda.is_available(),
                                reason="needs torch with CUDA")

SPECIAL = [0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 1e-30]


def _special(dtype):
    """Every pair of SPECIAL values as (real, imaginary): NaN and infinite parts, negative zeros."""
    real = np.array([[a] * len(SPECIAL) for a in SPECIAL]).reshape(-1)
    imag = np.array(SPECIAL * len(SPECIAL))
    out = np.empty(real.size, dtype)
    out.real, out.imag = real, imag
    return out.reshape(8, 8)


def _same_bits(a, b):
    """Same dtype, shape and bits (NaN and -0.0 parts compared exactly)."""
    a, b = np.asarray(a), np.asarray(b)
    return (a.dtype == b.dtype and a.shape == b.shape
            and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes())


def _blob_bytes(path, blob):
    with zipfile.ZipFile(path) as z:
        return z.read(blob)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_arrays_round_trip_as_zero_copy_views(archive_path, dtype):
    values = _special(dtype)
    arrays = {"w": values, "t": values.T, "scalar": np.array(3 - 4j, dtype),
              "empty": np.zeros((0, 3), dtype)}
    save(archive_path, "t", arrays)
    name = np.dtype(dtype).name
    with modelzip.open(archive_path) as ar:
        infos = {p.name: p for p in ar.params()}
        assert {n: p.dtype for n, p in infos.items()} == dict.fromkeys(arrays, name)
        assert infos["w"].nbytes == values.nbytes
        loaded = ar.load()
        for key, value in arrays.items():
            assert _same_bits(loaded[key], value), key
        assert not loaded["w"].flags.writeable and not loaded["w"].flags.owndata  # a view
        # the blob's data are the array's bytes: real then imaginary part, little-endian
        assert values.tobytes() in _blob_bytes(archive_path, infos["w"].blob)
        assert ar.tensor("t", copy=True).flags.writeable  # a copy
        negative_zero = loaded["w"][1, 1]  # (-0.0, -0.0)
        assert np.signbit(negative_zero.real) and np.signbit(negative_zero.imag)


@pytest.mark.parametrize("dtype", [">c8", ">c16"])
def test_big_endian_complex_arrays_are_stored_little_endian(archive_path, dtype):
    values = _special(np.dtype(dtype).newbyteorder("<")).astype(dtype)
    save(archive_path, "t", {"w": values})
    loaded = modelzip.load(archive_path)["w"]
    assert loaded.dtype == np.dtype(dtype).newbyteorder("<")
    assert _same_bits(loaded, values.astype(loaded.dtype))


def test_writer_save_async_and_updater_state(archive_path):
    w = np.array([1 + 2j, -3.5j], np.complex64)
    with modelzip.Writer(archive_path, durable=False) as writer:
        writer.add_tag("t", {"w": w}, updater={("w", "exp_avg"): w * 2},
                       compress=["w"])
        writer.commit()
    modelzip.save_async(archive_path, "async", {"w": w.astype(np.complex128)},
                        durable=False).result()
    with modelzip.open(archive_path) as ar:
        assert ar.param("w", "t").compressed
        assert _same_bits(ar.tensor("w", "t"), w)
        (state,) = ar.updater_states("t")
        assert state.dtype == "complex64"
        assert _same_bits(ar.updater_state("w", "exp_avg", "t"), w * 2)
        assert _same_bits(ar.tensor("w", "async"), w.astype(np.complex128))
        assert ar.verify() == []


def test_sparse_complex_values(archive_path):
    coo = modelzip.SparseCOO(np.array([[0, 1], [2, 0]]), np.array([1j, -2 + 0.5j]), (3, 2))
    save(archive_path, "t", {"s": coo})
    loaded = modelzip.load(archive_path)["s"]
    assert loaded.dtype == np.complex128
    assert _same_bits(loaded.to_dense(), coo.to_dense())


def test_unsupported_types_list_the_complex_ones(archive_path):
    if np.dtype(np.clongdouble).itemsize in (8, 16):
        pytest.skip("this platform's long double complex is an ordinary complex type")
    with pytest.raises(TypeError, match="'x'.*complex256.*complex64, complex128"):
        save(archive_path, "t", {"x": np.zeros(2, np.clongdouble)})
    with pytest.raises(ValueError, match="other types are taken from the array's own dtype"):
        save(archive_path, "t", {"x": np.zeros(2, np.complex64)}, dtypes={"x": "complex64"})


def test_distributed_save_and_load(archive_path):
    mzd = modelzip.distributed
    full = (np.arange(24) - 1j * np.arange(24)).astype(np.complex64).reshape(4, 6)
    tensors = {"w": full.astype(np.complex128), "s": mzd.Shard(full, (4, 6), (0, 0))}
    mzd.save(archive_path, "t", tensors, group=OneRank(), durable=False)
    with modelzip.open(archive_path) as ar:
        assert {p.name: p.dtype for p in ar.params("t")} == {"w": "complex128", "s": "complex64"}
    stats = {}
    out = mzd.load(archive_path, {"s": ((1, 2), (2, 3))}, tag="t", stats=stats)
    assert _same_bits(out["s"], full[1:3, 2:5])
    out = mzd.load(archive_path, {"w": None}, tag="t")
    assert _same_bits(out["w"], full.astype(np.complex128))


@pytest.mark.parametrize("ext,dtype", [("npz", "complex64"), ("npz", "complex128"),
                                       ("npy", "complex128"), ("safetensors", "complex64")])
def test_tensor_files_hold_what_their_format_allows(tmp_path, ext, dtype):
    path = tmp_path / f"a.{ext}"  # a .npy file's one array is named after the file
    values = _special(dtype)
    modelzip.write_tensor_file(path, {"a": values})
    tensors, _ = modelzip.read_tensor_file(path)
    assert list(tensors) == ["a"] and _same_bits(tensors["a"], values)
    modelzip.import_tensor_files(tmp_path / "cpp.zip", "t", [path], durable=False)
    save(tmp_path / "py.zip", "t", {"a": values})
    with modelzip.open(tmp_path / "cpp.zip") as cpp, modelzip.open(tmp_path / "py.zip") as py:
        assert cpp.param("a").dtype == py.param("a").dtype == dtype
        assert (_blob_bytes(tmp_path / "cpp.zip", cpp.param("a").blob)
                == _blob_bytes(tmp_path / "py.zip", py.param("a").blob))
    if ext == "safetensors":
        data = path.read_bytes()
        (n,) = struct.unpack_from("<Q", data)
        assert json.loads(data[8:8 + n])["a"]["dtype"] == "C64"


def test_safetensors_refuses_complex128(tmp_path):
    with pytest.raises(modelzip.Error, match="complex128"):
        modelzip.write_tensor_file(tmp_path / "m.safetensors", {"a": np.zeros(2, np.complex128)})
    assert not (tmp_path / "m.safetensors").exists()


@pytest.mark.skipif(CLI is None, reason="MODELZIP_CLI is not set (meson sets it)")
def test_the_cli_reads_what_python_wrote(archive_path):
    save(archive_path, "t", {"a": _special(np.complex64), "b": _special(np.complex128)})
    done = subprocess.run([CLI, "verify", str(archive_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    listing = subprocess.run([CLI, "ls", str(archive_path)], check=True, capture_output=True,
                             text=True, timeout=60).stdout
    assert "complex64" in listing and "complex128" in listing


# torch


def _complex_tensors():
    g = torch.Generator().manual_seed(5)
    base = torch.randn(4, 6, dtype=torch.complex64, generator=g)
    special = torch.from_numpy(_special(np.complex128))
    return {"c64": base, "c128": special, "conj": base.conj(), "t_conj": base.T.conj(),
            "neg": base.conj().imag.neg(), "param": torch.nn.Parameter(base[:, :3].clone())}


def _check_torch(loaded, tensors):
    for name, value in tensors.items():
        got = loaded[name]
        assert got.dtype == value.dtype and tuple(got.shape) == tuple(value.shape), name
        assert not got.is_conj(), name
        expected = value.detach().cpu().resolve_conj().resolve_neg()
        assert _same_bits(got.detach().cpu().numpy(), expected.numpy()), name


@needs_torch
def test_torch_complex_round_trips_on_the_cpu(archive_path):
    import modelzip.torch as mzt
    tensors = _complex_tensors()
    mzt.save(tensors, archive_path, "t", durable=False)
    with modelzip.open(archive_path) as ar:
        assert ar.param("c64").dtype == "complex64" and ar.param("c128").dtype == "complex128"
        assert ar.param("conj").dtype == "complex64" and ar.param("neg").dtype == "float32"
        # the conjugated view is stored conjugated, not as the bits under it
        assert _same_bits(ar.tensor("conj"), tensors["c64"].numpy().conj())
    loaded = mzt.load(archive_path)
    _check_torch(loaded, tensors)
    loaded["c64"][0, 0] = 7j  # writable: a private copy-on-write mapping
    assert mzt.load(archive_path)["c64"][0, 0] == tensors["c64"][0, 0]
    with modelzip.open(archive_path) as ar:
        _check_torch(ar.load_torch(), tensors)


@needs_torch
def test_torch_complex_load_into_checks_and_converts(archive_path):
    import modelzip.torch as mzt
    w = torch.randn(3, 4, dtype=torch.complex64)
    mzt.save({"w": w, "b": torch.ones(2, dtype=torch.complex128)}, archive_path, "t",
             durable=False)
    module = torch.nn.Module()
    module.w = torch.nn.Parameter(torch.zeros(3, 4, dtype=torch.complex128))
    module.register_buffer("b", torch.zeros(2, dtype=torch.complex64))
    mzt.load_into(module, archive_path)
    assert module.w.dtype == torch.complex128 and torch.equal(module.w, w.to(torch.complex128))
    assert module.b.dtype == torch.complex64 and torch.equal(module.b, torch.ones(2) + 0j)
    module.w = torch.nn.Parameter(torch.zeros(4, 3, dtype=torch.complex64))
    with pytest.raises(RuntimeError, match="size mismatch for w"):
        mzt.load_into(module, archive_path)
    real = torch.nn.Module()
    real.register_buffer("b", torch.zeros(2, dtype=torch.complex64))
    with pytest.raises(RuntimeError, match='Unexpected key.*"w"'):
        mzt.load_into(real, archive_path)
    assert mzt.load_into(real, archive_path, strict=False).unexpected_keys == ["w"]


@needs_torch
def test_torch_complex_save_async_distributed_and_staging_pipelines(archive_path):
    """save_async, distributed.load(torch=True), and the device save and load pipelines with
    host targets standing for the device."""
    import modelzip.torch as mzt
    from modelzip import _device_copy, _device_save, _torch_load
    tensors = _complex_tensors()
    modelzip.save_async(archive_path, "async", tensors, durable=False).result()
    _check_torch(mzt.load(archive_path, "async"), tensors)
    fetched = dict(_device_save.host_items(tensors.items(), _device_save.HostFetchTarget()))
    _check_torch(fetched, tensors)
    save(archive_path, "fetched", fetched)
    _check_torch(mzt.load(archive_path, "fetched"), tensors)
    staged = _torch_load.load_copied(archive_path, "async", torch.device("cpu"), verify=True,
                                     staging=_device_copy.HostTarget())
    _check_torch(staged, tensors)
    _check_torch(modelzip.distributed.load(archive_path, tag="async", torch=True), tensors)
    part = modelzip.distributed.load(archive_path, {"c64": ((1, 2), (2, 3))}, tag="async",
                                     torch=True)
    assert torch.equal(part["c64"], tensors["c64"][1:3, 2:5])


class _Spectral(torch.nn.Module if torch is not None else object):
    """A Fourier-neural-operator-like layer: a complex weight multiplies the lowest modes."""

    def __init__(self, channels=3, modes=4):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.weight = torch.nn.Parameter(
            torch.randn(channels, channels, modes, dtype=torch.complex64, generator=g) / channels)
        self.lift = torch.nn.Linear(channels, channels)
        self.modes = modes

    def forward(self, x):  # x: (batch, channels, points)
        spectrum = torch.fft.rfft(x)
        low = torch.einsum("bim,iom->bom", spectrum[..., :self.modes], self.weight)
        out = torch.zeros_like(spectrum)
        out[..., :self.modes] = low
        y = torch.fft.irfft(out, n=x.shape[-1])
        return self.lift(y.transpose(1, 2)).transpose(1, 2)


def _step(model, optimizer, batch):
    optimizer.zero_grad()
    x, target = batch
    torch.nn.functional.mse_loss(model(x), target).backward()
    optimizer.step()


@needs_torch
def test_fno_checkpoint_resumes_bit_exactly_with_adam(tmp_path):
    import modelzip.torch as mzt
    g = torch.Generator().manual_seed(2)
    batches = [(torch.randn(2, 3, 16, generator=g), torch.randn(2, 3, 16, generator=g))
               for _ in range(5)]
    torch.manual_seed(0)
    model = _Spectral()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for batch in batches[:3]:
        _step(model, optimizer, batch)
    state = optimizer.state[model.weight]
    assert state["exp_avg"].dtype == torch.complex64  # torch keeps complex Adam state
    mzt.save_checkpoint(tmp_path / "run.zip", "step-3", model, optimizer, durable=False)
    with modelzip.open(tmp_path / "run.zip") as ar:
        states = {(s.name, s.state): s.dtype for s in ar.updater_states("step-3")}
        assert states[("weight", "exp_avg")] == states[("weight", "exp_avg_sq")] == "complex64"
        assert _same_bits(ar.updater_state("weight", "exp_avg", "step-3"),
                          state["exp_avg"].numpy())
    for batch in batches[3:]:
        _step(model, optimizer, batch)

    restored = _Spectral()
    restored.weight.data.zero_()
    resumed = torch.optim.Adam(restored.parameters(), lr=0.01)
    info = mzt.load_checkpoint(tmp_path / "run.zip", None, restored, resumed)
    assert info.iteration == 3
    rstate = resumed.state[restored.weight]
    assert rstate["exp_avg"].dtype == torch.complex64
    for batch in batches[3:]:
        _step(restored, resumed, batch)
    for (name, a), (_, b) in zip(model.state_dict().items(), restored.state_dict().items()):
        assert _same_bits(a.numpy(), b.numpy()), name
    for key in ("exp_avg", "exp_avg_sq"):
        assert _same_bits(state[key].numpy(), rstate[key].numpy()), key

    # modelzip.distributed.load_checkpoint: this rank's blocks (here half the complex weight)
    other = _Spectral()
    params = dict(other.named_parameters())
    half = torch.zeros(3, 3, 2, dtype=torch.complex64)
    params["weight"] = modelzip.distributed.Shard(half, (3, 3, 4), (0, 0, 2))
    adam = torch.optim.Adam([half, other.lift.weight, other.lift.bias], lr=0.01)
    modelzip.distributed.load_checkpoint(tmp_path / "run.zip", "step-3", params, adam)
    with modelzip.open(tmp_path / "run.zip") as ar:
        saved = ar.load("step-3")["weight"]
        exp_avg = ar.updater_state("weight", "exp_avg", "step-3")
    assert _same_bits(half.detach().numpy(), saved[..., 2:])
    assert _same_bits(adam.state[half]["exp_avg"].numpy(), exp_avg[..., 2:])


@needs_cuda
def test_cuda_complex_save_and_load(tmp_path):
    import modelzip.torch as mzt
    tensors = {name: t.detach().cuda() for name, t in _complex_tensors().items()}
    mzt.save(tensors, tmp_path / "a.zip", "t", durable=False)
    modelzip.save_async(tmp_path / "b.zip", "t", tensors, durable=False).result()
    for name in ("a.zip", "b.zip"):
        loaded = mzt.load(tmp_path / name, device="cuda", verify=True)
        assert all(t.device.type == "cuda" for t in loaded.values())
        _check_torch(loaded, tensors)
    module = torch.nn.Module()
    module.register_buffer("c64", torch.zeros(4, 6, dtype=torch.complex64, device="cuda"))
    mzt.load_into(module, tmp_path / "a.zip", strict=False)
    assert torch.equal(module.c64, tensors["c64"])
    model = _Spectral().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    x = torch.randn(2, 3, 16, device="cuda")
    _step(model, optimizer, (x, x))
    mzt.save_checkpoint(tmp_path / "c.zip", "s", model, optimizer, durable=False)
    restored = _Spectral().cuda()
    resumed = torch.optim.Adam(restored.parameters(), lr=0.01)
    mzt.load_checkpoint(tmp_path / "c.zip", "s", restored, resumed)
    assert resumed.state[restored.weight]["exp_avg"].device.type == "cuda"
    assert torch.equal(resumed.state[restored.weight]["exp_avg"],
                       optimizer.state[model.weight]["exp_avg"])
