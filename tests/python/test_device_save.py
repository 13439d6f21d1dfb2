"""Saving CUDA tensors through pinned staging memory (modelzip/_device_save.py).

The pipeline is exercised without a GPU through HostFetchTarget (host tensors standing for device
ones): every dtype's bytes arrive, large tensors in several pieces, small ones packed, the
non-contiguous made contiguous, the pool bounded, errors raised. Background saves are run with a
counting target standing in for the device (_device_save.fetch_target): the fetched bytes land in
host memory once (in a staging area the save adopts), the C++ snapshot copies none of them again,
the caller's tensors may change right after return, and a failing fetch leaves the archive
unchanged. The CUDA tests save real CUDA tensors with every save function and skip where CUDA is
absent.
"""
import threading

import pytest

torch = pytest.importorskip("torch")

import modelzip  # noqa: E402
import modelzip.torch as mzt  # noqa: E402
from modelzip import _device_copy, _device_save, _modelzip, _values  # noqa: E402

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


class _Counting(_device_save.HostFetchTarget):
    """Counts the bytes fetched from the "device" and landed in host memory."""

    fetched = 0
    landed = 0

    def fetch(self, staged, source):
        type(self).fetched += source.numel()
        return super().fetch(staged, source)

    def land(self, destination, staged):
        type(self).landed += staged.numel()
        super().land(destination, staged)


@pytest.fixture
def counting(monkeypatch):
    _Counting.fetched = _Counting.landed = 0
    monkeypatch.setattr(_device_save, "fetch_target", _Counting)
    return _Counting


def _nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors.values())


def _check_tag(path, tag, expected):
    loaded = mzt.load(path, tag)
    assert set(loaded) >= set(expected)
    for name, t in expected.items():
        assert torch.equal(loaded[name], t), (tag, name)


def test_background_saves_adopt_the_fetched_bytes_instead_of_copying_them(tmp_path, counting):
    tensors = _tensors()
    expected = {k: v.clone() for k, v in tensors.items()}
    host = {"host": torch.arange(1000, dtype=torch.int32).numpy()}  # not a "device" tensor
    path = tmp_path / "a.zip"
    future = modelzip.save_async(path, "bg", {**tensors, **host})
    # The caller's "device" tensors change right after return: never in the archive.
    for t in tensors.values():
        t.logical_not_() if t.dtype == torch.bool else t.add_(1)
    future.result()
    # Each "device" byte was fetched once and landed in host memory once; the snapshot copied
    # only the host array (4000 bytes, rounded up to 64): the second host copy is gone.
    assert counting.fetched == counting.landed == _nbytes(expected)
    assert future._handle.snapshot_bytes() == 4032
    _check_tag(path, "bg", {**expected, "host": torch.from_numpy(host["host"])})
    with modelzip.open(path) as a:
        assert a.verify() == []


def test_blocking_saves_land_fetched_bytes_once(tmp_path, counting):
    tensors = _tensors()
    modelzip.save(tmp_path / "a.zip", "sync", tensors)
    assert counting.fetched == counting.landed == _nbytes(tensors)
    _check_tag(tmp_path / "a.zip", "sync", tensors)


def test_save_checkpoint_in_the_background_adopts_the_fetched_bytes(tmp_path, counting):
    torch.manual_seed(0)
    model = torch.nn.Linear(300, 200)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 300)).sum().backward()
    optimizer.step()
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    future = mzt.save_checkpoint(tmp_path / "c.zip", "bg", model, optimizer, blocking=False)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1)
    future.result()
    # Model and optimizer state went through the fetch; nothing of it was copied again.
    assert counting.fetched == counting.landed >= 3 * _nbytes(expected)
    assert future._handle.snapshot_bytes() < 4096  # small entries only (training config...)
    _check_tag(tmp_path / "c.zip", "bg", expected)


def test_distributed_background_saves_hand_the_fetched_bytes_over(tmp_path, counting,
                                                                   monkeypatch):
    # The staging areas the fetch filled go to the collective save to adopt (C++:
    # BackgroundCollectiveOptions::adopt); the tensors change right after return.
    mzd = pytest.importorskip("modelzip.distributed")
    from test_distributed import OneRank
    adopted = []
    staged_writer = mzd._staged_writer

    class Recording:
        def __init__(self, writer):
            self.writer = writer

        def start_background(self, tag, adopt=None, **options):
            adopted.append(adopt)
            return self.writer.start_background(tag, adopt=adopt, **options)

        def __getattr__(self, name):  # the rest of the staged writer, as it is
            return getattr(self.writer, name)
    monkeypatch.setattr(mzd, "_staged_writer", lambda *a, **k: Recording(staged_writer(*a, **k)))
    tensors = {"w": torch.randn(300, 40), "h": torch.arange(7, dtype=torch.float16)}
    expected = {k: v.clone() for k, v in tensors.items()}
    path = tmp_path / "d.zip"
    future = mzd.save(path, "bg", tensors, group=OneRank(), background_group=OneRank(),
                      durable=False, blocking=False)
    for t in tensors.values():
        t.add_(1)
    future.result(timeout=120)
    assert counting.fetched == counting.landed == _nbytes(expected)
    (areas,) = adopted
    assert sum(len(a) for a in areas) >= _nbytes(expected)
    _check_tag(path, "bg", expected)


def test_a_failing_fetch_in_a_background_save_leaves_the_archive_unchanged(tmp_path,
                                                                          monkeypatch):
    path = tmp_path / "a.zip"
    modelzip.save(path, "old", {"w": torch.ones(4)})
    before = path.read_bytes()
    monkeypatch.setattr(_device_save, "fetch_target", _FailingTarget)
    with pytest.raises(RuntimeError, match="device lost"):
        modelzip.save_async(path, "new", {"a": torch.ones(10), "b": torch.ones(3 * MiB)})
    assert path.read_bytes() == before
    # Nothing was started: the next save of the archive is not refused.
    monkeypatch.setattr(_device_save, "fetch_target", _Counting)
    modelzip.save_async(path, "next", {"a": torch.ones(10)}).result()
    with modelzip.open(path) as a:
        assert a.tags == ["old", "next"]


def test_blocking_saves_write_while_the_fetch_runs(tmp_path, monkeypatch):
    # The fetch of "last" is held back until the commit reports that it has written "first"
    # (at most a minute: without overlap the wait runs out and the test fails).
    first = torch.ones(MiB // 2)  # 2 MiB each: two pieces
    last = torch.full((MiB // 2,), 2.0)
    begin, end = last.data_ptr(), last.data_ptr() + last.numel() * 4
    written = threading.Event()
    held = []

    class HeldBack(_device_save.HostFetchTarget):
        def fetch(self, staged, source):
            if begin <= source.data_ptr() < end:
                held.append(written.wait(60))
            return super().fetch(staged, source)
    monkeypatch.setattr(_device_save, "fetch_target", HeldBack)

    def progress(done, total):
        if done >= first.numel() * 4:
            written.set()
    path = tmp_path / "a.zip"
    modelzip.save(path, "t", {"first": first, "last": last}, dedup=False, progress=progress)
    assert held and all(held)  # "first" was written before "last" was fetched
    _check_tag(path, "t", {"first": first, "last": last})


def test_a_failing_fetch_fails_a_blocking_save_and_leaves_the_archive(tmp_path, monkeypatch):
    path = tmp_path / "a.zip"
    modelzip.save(path, "old", {"w": torch.ones(4)})
    before = path.read_bytes()
    monkeypatch.setattr(_device_save, "fetch_target", _FailingTarget)
    for dedup in (True, False):
        with pytest.raises(RuntimeError, match="device lost"):
            modelzip.save(path, "new", {"a": torch.ones(10), "b": torch.ones(3 * MiB)},
                          dedup=dedup)
        assert path.read_bytes() == before
    with modelzip.open(path) as a:
        assert a.tags == ["old"]


def test_writer_add_tag_fetches_everything_before_it_returns(tmp_path, counting):
    tensors = _tensors()
    with modelzip.Writer(tmp_path / "a.zip") as w:
        w.add_tag("t", tensors)
        assert counting.landed == _nbytes(tensors)
        for t in tensors.values():  # changed before commit(): the archive has the fetched bytes
            t.logical_not_() if t.dtype == torch.bool else t.add_(1)
    _check_tag(tmp_path / "a.zip", "t", _tensors())


def test_blocking_checkpoints_go_through_the_fetch(tmp_path, counting):
    torch.manual_seed(0)
    model = torch.nn.Linear(30, 20)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(2, 30)).sum().backward()
    optimizer.step()
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    mzt.save_checkpoint(tmp_path / "c.zip", "s", model, optimizer)
    assert counting.fetched == counting.landed >= 2 * _nbytes(expected)
    _check_tag(tmp_path / "c.zip", "s", expected)


def test_staging_areas_are_writable_memory_that_views_keep_alive():
    area = _modelzip._StagingArea(1000)
    view = torch.from_numpy(area.array())
    assert len(area) == view.numel() == 1000
    view.fill_(7)
    del area  # the view keeps the memory alive
    assert int(view.sum()) == 7000


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
        mzt.load_checkpoint(tmp_path / "c.zip", tag, fresh, fresh_opt)
        for name, t in fresh.state_dict().items():
            assert torch.equal(t.cpu(), expected[name]), (tag, name)
