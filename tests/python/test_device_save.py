"""Saving CUDA tensors through pinned staging memory (modelzip/_device_save.py).

The pipeline is exercised without a GPU through HostFetchTarget (host tensors standing for device
ones): every dtype's bytes arrive, large tensors in several pieces, small ones packed, the
non-contiguous made contiguous, the pool bounded, errors raised. The CUDA tests save real CUDA
tensors with every save function and skip where CUDA is absent.
"""
import pytest

torch = pytest.importorskip("torch")

import modelzip  # noqa: E402
import modelzip.torch as mzt  # noqa: E402
from modelzip import _device_copy, _device_save, _values  # noqa: E402

MiB = 1 << 20


def _tensors():
    g = torch.Generator().manual_seed(3)
    return {
        "big": torch.randn(5 * MiB // 4, generator=g),  # several pieces
        "bf16": torch.randn(1000, generator=g).to(torch.bfloat16),
        "flags": torch.rand(77, generator=g) > 0.5,
        "ints": torch.arange(12, dtype=torch.int64).reshape(3, 4),
        "transposed": torch.randn(64, 32, generator=g).t(),  # not contiguous
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
    }


def test_fetch_to_host_copies_every_byte_through_the_bounded_pool():
    tensors = _tensors()
    out = _device_save.fetch_to_host(list(tensors.values()), _device_save.HostFetchTarget(),
                                     threads=3)
    for (name, source), copy in zip(tensors.items(), out):
        assert copy.device.type == "cpu", name
        assert copy.dtype == source.dtype and copy.shape == source.shape, name
        assert copy.is_contiguous(), name
        assert torch.equal(copy, source), name
        if source.numel():
            assert copy.data_ptr() != source.data_ptr(), name
    pool = _device_copy._pools[("HostFetchTarget", "cpu")]
    assert pool.piece * pool.count <= _device_copy.MAX_STAGING_BYTES
    assert pool.piece < tensors["big"].numel() * 4  # the big tensor went in several pieces


def test_host_items_replaces_tensors_only():
    items = [("w", torch.ones(3)), ("note", "text"), ("n", 5)]
    out = _device_save.host_items(items, target=_device_save.HostFetchTarget())
    assert [name for name, _ in out] == ["w", "note", "n"]
    assert out[0][1] is not items[0][1] and torch.equal(out[0][1], items[0][1])
    assert out[1:] == items[1:]
    # Without a target only CUDA tensors are fetched: host ones stay as they are.
    assert _device_save.host_items(items) == items
    assert _values.fetch_device_tensors(items) == items


class _FailingTarget(_device_save.HostFetchTarget):
    def fetch(self, staged, source):
        if source.numel() > 1000:
            raise RuntimeError("device lost")
        return super().fetch(staged, source)


def test_a_failing_fetch_is_raised():
    with pytest.raises(RuntimeError, match="device lost"):
        _device_save.fetch_to_host([torch.ones(10), torch.ones(3 * MiB)], _FailingTarget())


def test_saves_of_host_tensors_still_work_after_the_fetch_step(tmp_path):
    tensors = _tensors()
    modelzip.save(tmp_path / "a.zip", "t", tensors)
    loaded = mzt.load(tmp_path / "a.zip", "t")
    for name, t in tensors.items():
        assert torch.equal(loaded[name], t), name


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")


def _cuda_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 10)).cuda()
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 256, device="cuda")).sum().backward()
    optimizer.step()
    return model, optimizer


@cuda
def test_cuda_tensors_saved_directly(tmp_path):
    tensors = {k: v.cuda() for k, v in _tensors().items()}
    path = tmp_path / "c.zip"
    modelzip.save(path, "sync", tensors)
    future = modelzip.save_async(path, "async", tensors)
    # Changed on the device right after return: the archive holds the old values.
    tensors["big"].add_(1)
    future.result()
    for tag in ("sync", "async"):
        loaded = mzt.load(path, tag)
        for name, t in _tensors().items():
            assert torch.equal(loaded[name], t), (tag, name)


@cuda
def test_cuda_checkpoints_saved_directly(tmp_path):
    model, optimizer = _cuda_model()
    expected = {k: v.cpu().clone() for k, v in model.state_dict().items()}
    mzt.save(model.state_dict(), tmp_path / "m.zip", "s")
    mzt.save_checkpoint(tmp_path / "c.zip", "sync", model, optimizer)
    mzt.save_checkpoint(tmp_path / "c.zip", "bg", model, optimizer, blocking=False).result()
    loaded = mzt.load(tmp_path / "m.zip", "s")
    for name, t in expected.items():
        assert torch.equal(loaded[name], t), name
    for tag in ("sync", "bg"):
        fresh, fresh_opt = _cuda_model()
        with torch.no_grad():
            for p in fresh.parameters():
                p.zero_()
        mzt.load_checkpoint(tmp_path / "c.zip", fresh, fresh_opt, tag=tag)
        for name, t in fresh.state_dict().items():
            assert torch.equal(t.cpu(), expected[name]), (tag, name)
