"""Loads are zero-copy views into the mapping that keep it alive; copies are owned and writable;
saves borrow the caller's buffers instead of copying them."""
import gc
import subprocess
import sys
import weakref

import numpy as np
import pytest

import modelzip
from conftest import save


@pytest.fixture
def saved(archive_path):
    arrays = {"w": np.arange(1000, dtype=np.float32).reshape(10, 100),
              "z": np.linspace(0, 1, 64).astype(np.float64)}
    save(archive_path, "t", arrays)
    return archive_path, arrays


def test_two_loads_share_the_mapped_memory(saved):
    path, _ = saved
    with modelzip.open(path) as ar:
        a, b = ar.tensor("w"), ar.load()["w"]
        c = ar.tensor("w", copy=True)
    assert np.shares_memory(a, b)
    assert not np.shares_memory(a, c)


def test_views_are_read_only_and_copies_are_writable(saved):
    path, arrays = saved
    with modelzip.open(path) as ar:
        view, copy = ar.tensor("w"), ar.tensor("w", copy=True)
    assert not view.flags.writeable and not view.flags.owndata
    with pytest.raises(ValueError, match="read-only"):
        view[0, 0] = 1
    with pytest.raises(ValueError):
        view.setflags(write=True)  # the base is not writable either
    assert copy.flags.writeable
    copy[0, 0] = 42
    assert copy[0, 0] == 42 and view[0, 0] == 0
    assert modelzip.load(path)["w"][0, 0] == 0


def test_views_keep_the_mapping_alive_after_close_and_gc(saved):
    path, arrays = saved
    ar = modelzip.open(path)
    view = ar.tensor("w")
    ref = weakref.ref(ar)
    ar.close()
    del ar
    gc.collect()
    assert ref() is None
    assert view.base is not None  # the capsule owning the mapping
    np.testing.assert_array_equal(view, arrays["w"])
    # Views of the view (slices, reshapes) keep it alive too.
    row = view[3]
    del view
    gc.collect()
    np.testing.assert_array_equal(row, arrays["w"][3])


def test_loaded_arrays_survive_deleting_the_file(saved):
    path, arrays = saved
    loaded = modelzip.load(path)
    path.unlink()
    gc.collect()
    np.testing.assert_array_equal(loaded["z"], arrays["z"])


def test_compressed_blobs_load_as_read_only_owned_memory(archive_path):
    w = np.zeros((50, 50), np.int32)  # compresses well
    save(archive_path, "t", {"w": w, "s": np.ones(3)}, compress=["w"])
    with modelzip.open(archive_path) as ar:
        assert ar.param("w").compressed and not ar.param("s").compressed
        a, b = ar.tensor("w"), ar.tensor("w")
    assert not a.flags.writeable
    assert not np.shares_memory(a, b)  # each read decompresses
    np.testing.assert_array_equal(a, w)


def test_closed_archive_raises_value_error(saved):
    path, _ = saved
    ar = modelzip.open(path)
    ar.close()
    assert ar.closed and "closed" in repr(ar)
    with pytest.raises(ValueError, match="closed archive"):
        ar.load()
    with pytest.raises(ValueError, match="closed archive"):
        ar.tags


def test_context_manager_closes(saved):
    path, _ = saved
    with modelzip.open(path) as ar:
        assert not ar.closed and ar.tags == ["t"]
    assert ar.closed
    with pytest.raises(ZeroDivisionError):
        with modelzip.Archive(path) as ar2:
            1 / 0
    assert ar2.closed


def test_save_borrows_the_arrays_until_commit(archive_path):
    data = np.arange(100000, dtype=np.float64)
    before = sys.getrefcount(data)
    writer = modelzip.Writer(archive_path, durable=False)
    writer.add_tag("t", {"d": data})
    assert sys.getrefcount(data) == before + 1  # held by the staged tag, not copied
    expected = data.copy()
    del data
    gc.collect()  # the Writer still holds the buffer
    writer.commit()
    writer.close()
    np.testing.assert_array_equal(modelzip.load(archive_path)["d"], expected)


def test_save_reads_the_buffer_at_commit_time(archive_path):
    """Proof that nothing was copied at add_tag: a change made after it is what gets written."""
    data = np.zeros(8, np.int32)
    with modelzip.Writer(archive_path, durable=False) as w:
        w.add_tag("t", {"d": data})
        data[:] = 5
    assert modelzip.load(archive_path)["d"].tolist() == [5] * 8


def test_borrowed_arrays_are_released_after_commit_and_close(archive_path):
    data = np.arange(10, dtype=np.int8)
    before = sys.getrefcount(data)
    with modelzip.Writer(archive_path, durable=False) as w:
        w.add_tag("a", {"d": data})
        w.commit()
        assert sys.getrefcount(data) == before
        w.add_tag("b", {"d": data})
        assert sys.getrefcount(data) == before + 1
        w.close()  # discards "b"
    assert sys.getrefcount(data) == before
    assert modelzip.open(archive_path).tags == ["a"]


def test_only_non_contiguous_inputs_are_copied(archive_path):
    contiguous = np.arange(20, dtype=np.float32)
    strided = contiguous[::2]
    before_c, before_s = sys.getrefcount(contiguous), sys.getrefcount(strided)
    w = modelzip.Writer(archive_path, durable=False)
    w.add_tag("t", {"c": contiguous, "s": strided})
    assert sys.getrefcount(contiguous) == before_c + 1  # borrowed as is
    assert sys.getrefcount(strided) == before_s  # a contiguous copy was borrowed instead
    w.commit()
    w.close()


SAVE_PEAK = """
import resource, sys
import numpy as np
import modelzip
kind, path = sys.argv[1], sys.argv[2]
array = np.ones(256 << 18, dtype=np.float32)  # 256 MiB, every page touched
value = array
if kind == "torch":
    import torch
    value = torch.from_numpy(array)
modelzip.save(path, "t", {"x": np.ones(4, np.float32)}, durable=False)  # imports, first use
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
modelzip.save(path, "u", {"w": value}, durable=False)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_save_of_a_256_mib_array_adds_no_copy_to_peak_memory(archive_path, kind):
    """modelzip.save (dedup, staging of device tensors, commit) writes a contiguous host array
    from its own buffer: the process's peak resident memory grows by far less than the array."""
    if kind == "torch":
        pytest.importorskip("torch")
    out = subprocess.run([sys.executable, "-c", SAVE_PEAK, kind, str(archive_path)], check=True,
                         capture_output=True, text=True, timeout=300).stdout
    grown = int(out.split()[-1])
    assert grown < 32 << 20, f"saving 256 MiB grew the peak resident memory by {grown} bytes"
    with modelzip.open(archive_path) as ar:
        assert ar.tensor("w", tag="u").shape == (256 << 18,)
