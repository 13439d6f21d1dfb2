"""The Python API on remote archives: modelzip.open(url), modelzip.load(url,
tag), and an archive replaced on the server while it is open."""
import os
import shutil
import time

import numpy as np
import pytest

import modelzip


@pytest.fixture(autouse=True)
def no_cache(monkeypatch):
    monkeypatch.setenv("MODELZIP_NO_CACHE", "1")


def test_load_same_arrays_as_local(nginx, site):
    for tag in ("step-1", "step-2"):
        local = modelzip.load(site / "qs.zip", tag)
        remote = modelzip.load(nginx.url("qs.zip"), tag)
        assert sorted(local) == sorted(remote)
        for name in local:
            assert remote[name].dtype == local[name].dtype
            np.testing.assert_array_equal(remote[name], local[name])


def test_open_lists_and_reads(nginx, site):
    with modelzip.open(nginx.url("big.zip")) as a, modelzip.open(site / "big.zip") as b:
        assert a.tags == b.tags
        assert a.name == nginx.url("big.zip")
        np.testing.assert_array_equal(a.tensor("small"), b.tensor("small"))


def test_replaced_while_open_gives_changed_error(nginx, site):
    shutil.copyfile(site / "qs.zip", site / "moving-py.zip")
    archive = modelzip.open(nginx.url("moving-py.zip"))
    assert archive.tags == ["step-1", "step-2"]
    # Replaced on the server (new ETag) before the tensor data is read.
    shutil.copyfile(site / "emb.zip", site / "moving-py.tmp")
    os.utime(site / "moving-py.tmp", (1, 1))
    os.replace(site / "moving-py.tmp", site / "moving-py.zip")
    with pytest.raises(Exception, match="archive changed on the server while reading"):
        archive.load("step-1")


def test_changed_since_open_asks_the_server_and_reopen_reads_the_new_version(nginx, site):
    """One HEAD compares the object's ETag (nginx: modification time and
    size) and size with those pinned at open (before: always False for a
    URL): False while it is the same, True once replaced or removed; reopen()
    reads what is there now."""
    path = site / "asked-py.zip"
    shutil.copyfile(site / "qs.zip", path)
    os.utime(path, (1000, 1000))
    url = nginx.url("asked-py.zip")
    with modelzip.open(url) as archive:
        assert not archive.changed_since_open()
        assert not archive.changed_since_open()  # asking changes nothing
        assert archive.changed_since_open() is False
        # Replaced on the server: the same bytes, another modification time.
        os.utime(path, (2000, 2000))
        assert archive.changed_since_open()
        with archive.reopen() as now:
            assert not now.changed_since_open()
        # Replaced by another archive.
        shutil.copyfile(site / "emb.zip", site / "asked-py.tmp")
        os.utime(site / "asked-py.tmp", (3000, 3000))
        os.replace(site / "asked-py.tmp", path)
        assert archive.changed_since_open()
        assert archive.tags == ["step-1", "step-2"]  # still the version it opened
        with archive.reopen() as now:
            assert now.tags == modelzip.open(site / "emb.zip").tags != archive.tags
            assert not now.changed_since_open()
            for name, value in modelzip.load(site / "emb.zip", "step-2").items():
                np.testing.assert_array_equal(now.load("step-2")[name], value)
            os.remove(path)
            assert now.changed_since_open()  # gone: 404
        with pytest.raises(modelzip.Error, match="404"):
            archive.reopen()


def test_writing_a_url_is_refused(nginx, site):
    """Every writing entry point names the URL and says why, fetching nothing."""
    url = nginx.url("qs.zip")
    start = len(nginx.log_lines())
    expected = f"remote archives are read-only: {url}"
    arrays = {"a": np.zeros(3, dtype=np.float32)}
    for write in (lambda: modelzip.save(url, "t9", arrays),
                  lambda: modelzip.remove_tag(url, "step-1"),
                  lambda: modelzip.collect_garbage(url),
                  lambda: modelzip.update_metadata(url, {"model_name": "x"}),
                  lambda: modelzip.Writer(url),
                  lambda: modelzip.quantize(url, "step-1", "q", scheme="int8-per-tensor")):
        with pytest.raises(modelzip.Error) as info:
            write()
        assert str(info.value) == expected
    time.sleep(0.2)
    assert nginx.log_lines()[start:] == []
    assert not os.path.exists("http:")
