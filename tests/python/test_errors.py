"""modelzip.Error carries the full message, the code and the context fields."""
import io
import struct
import zipfile
import zlib

import numpy as np
import pytest

import modelzip
from conftest import save


def test_error_hierarchy():
    assert issubclass(modelzip.Error, Exception)
    assert issubclass(modelzip.NotFoundError, modelzip.Error)
    assert issubclass(modelzip.NotFoundError, KeyError)
    assert modelzip.Error.__module__ == "modelzip"


def test_missing_file(tmp_path):
    path = tmp_path / "missing.zip"
    with pytest.raises(modelzip.Error) as e:
        modelzip.open(path)
    err = e.value
    assert err.code == "io"
    assert err.archive == str(path)
    assert str(err).startswith(str(path) + ": ")
    assert err.message in str(err) and err.message != str(err)
    assert err.entry is None and err.tag is None and err.line is None
    assert not isinstance(err, KeyError)


def test_missing_parameter_and_tag(archive_path):
    save(archive_path, "step-1", {"w": np.zeros(2)})
    with modelzip.open(archive_path) as ar:
        with pytest.raises(KeyError) as e:  # NotFoundError is a KeyError
            ar.tensor("nope")
        err = e.value
        assert isinstance(err, modelzip.NotFoundError)
        assert err.code == "not_found" and err.tag == "step-1" and err.archive == str(archive_path)
        assert str(err) == f"{archive_path}: tag 'step-1': no parameter 'nope'"  # not quoted
        with pytest.raises(modelzip.NotFoundError, match="no-such-tag"):
            ar.load("no-such-tag")
        with pytest.raises(modelzip.NotFoundError):
            ar.param("w", tag="missing")


def test_corrupt_archive_reports_where(archive_path, tmp_path):
    save(archive_path, "t", {"w": np.arange(4, dtype=np.int32)})
    data = bytearray(archive_path.read_bytes())
    bad = tmp_path / "bad.zip"
    bad.write_bytes(data[: len(data) // 2])  # truncated: central directory gone
    with pytest.raises(modelzip.Error) as e:
        modelzip.open(bad)
    assert e.value.code == "corrupt" and e.value.archive == str(bad)


def replace_in_entry(data, entry, old, new):
    """`data` (a zip) with `old` replaced by `new` (same length) in `entry`, CRC-32 fixed in
    the local header and the central directory, so only the content is wrong."""
    assert len(old) == len(new)
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo(entry)
    assert info.compress_type == zipfile.ZIP_STORED
    out = bytearray(data)
    local = info.header_offset
    name_len, extra_len = struct.unpack_from("<HH", out, local + 26)
    start = local + 30 + name_len + extra_len
    content = bytes(out[start:start + info.file_size])
    assert content.count(old) == 1
    content = content.replace(old, new)
    out[start:start + info.file_size] = content
    crc = struct.pack("<I", zlib.crc32(content))
    out[local + 14:local + 18] = crc
    eocd = out.rindex(b"PK\x05\x06")
    (central,) = struct.unpack_from("<I", out, eocd + 16)  # start of the central directory
    while True:
        n, m, k = struct.unpack_from("<HHH", out, central + 28)
        if bytes(out[central + 46:central + 46 + n]) == entry.encode():
            out[central + 16:central + 20] = crc
            return bytes(out)
        central += 46 + n + m + k


def test_corrupt_text_entry_reports_entry_and_line(archive_path, tmp_path):
    """A params.txt escape broken on purpose (CRC fixed): the archive opens (the tag is
    damaged, FORMAT.md), and reading the tag fails cleanly naming the entry and the line."""
    save(archive_path, "t", {"ok": np.ones(1), "a b": np.zeros(2)})  # line 2 is a%20b
    bad = tmp_path / "bad.zip"
    bad.write_bytes(replace_in_entry(archive_path.read_bytes(), "t/params.txt", b"a%20b", b"a%G0b"))
    archive = modelzip.open(bad)
    assert archive.tags == ["t"]
    with pytest.raises(modelzip.Error) as e:
        archive.params("t")
    err = e.value
    assert err.code == "corrupt"
    assert err.entry == "t/params.txt" and err.line == 2
    assert "t/params.txt" in str(err) and "line 2" in str(err)


def test_damaged_blob_is_found_by_copy_reads_and_verify(archive_path, tmp_path):
    """Zero-copy reads skip CRC-32 checks (documented); copy=True and verify() do not."""
    w = np.arange(16, dtype=np.int32)
    save(archive_path, "t", {"w": w})
    data = bytearray(archive_path.read_bytes())
    at = bytes(data).index(w.tobytes())
    data[at] ^= 0xFF
    bad = tmp_path / "bad.zip"
    bad.write_bytes(bytes(data))
    with modelzip.open(bad) as ar:
        assert ar.tensor("w")[0] == 0xFF  # the damaged byte, seen through the view
        with pytest.raises(modelzip.Error) as e:
            ar.tensor("w", copy=True)
        assert e.value.code == "corrupt" and e.value.entry == "t/params/0.fb"
        assert "CRC" in str(e.value)
        problems = ar.verify()
    assert [entry for entry, _ in problems] == ["t/params/0.fb"]


def test_invalid_arguments(archive_path):
    with pytest.raises(modelzip.Error) as e:
        save(archive_path, "bad/tag", {"w": np.zeros(1)})
    assert e.value.code == "invalid_argument" and "bad/tag" in str(e.value)
    save(archive_path, "Step", {"w": np.zeros(1)})
    with pytest.raises(modelzip.Error) as e:
        save(archive_path, "STEP", {"w": np.zeros(1)})
    assert e.value.code == "already_exists"
    with pytest.raises(modelzip.Error) as e:
        save(archive_path, "x", {"": np.zeros(1)})
    assert e.value.code == "invalid_argument"


def test_error_can_be_raised_and_pickled_like_any_exception():
    import pickle
    err = modelzip.Error("full", code="io", message="bare", archive="a.zip", line=3)
    assert (err.code, err.message, err.archive, err.line, err.offset) == ("io", "bare", "a.zip", 3, None)
    assert str(pickle.loads(pickle.dumps(err))) == "full"
