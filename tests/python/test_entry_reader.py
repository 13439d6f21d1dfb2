"""Archive.open_entry(): a zip entry as a binary file object read in bounded memory (the C++
EntryStream, Java's entryStream), compared with Python's zipfile reading the same entry."""
import io
import threading
import zipfile

import numpy as np
import pytest

import modelzip


@pytest.fixture
def saved(archive_path):
    rng = np.random.default_rng(7)
    arrays = {"big": rng.standard_normal(300_000).astype(np.float32),  # stored
              "packed": np.arange(200_000, dtype=np.int64) % 7}       # deflated
    modelzip.save(archive_path, "t", arrays, compress=["packed"], durable=False)
    return archive_path


def entries_by_zipfile(path):
    with zipfile.ZipFile(path) as z:
        return {info.filename: (z.read(info), info.compress_type) for info in z.infolist()
                if not info.is_dir()}


def test_every_entry_reads_as_zipfile_reads_it(saved):
    expected = entries_by_zipfile(saved)
    assert {method for _, method in expected.values()} == {zipfile.ZIP_STORED,
                                                           zipfile.ZIP_DEFLATED}
    with modelzip.open(saved) as archive:
        for name, (data, _) in expected.items():
            with archive.open_entry(name) as entry:
                assert isinstance(entry, io.RawIOBase) and entry.readable()
                assert not entry.seekable()
                assert entry.size == len(data)
                assert entry.read() == data, name
                assert entry.read(10) == b""  # at the end
                assert entry.tell() == len(data)


def test_parts_of_any_size_make_up_the_entry(saved):
    with zipfile.ZipFile(saved) as z:
        name = next(n for n in z.namelist() if n.startswith("t/params/")
                    and z.getinfo(n).compress_type == zipfile.ZIP_DEFLATED)
        data = z.read(name)
    with modelzip.open(saved) as archive:
        entry = archive.open_entry(name)
    # the Archive is closed: the stream keeps what it needs
    parts, buffer = [], bytearray(4093)
    while (n := entry.readinto(buffer)) > 0:
        assert n <= len(buffer)
        parts.append(bytes(buffer[:n]))
    assert b"".join(parts) == data
    entry.close()
    assert entry.closed
    with pytest.raises(ValueError, match="closed"):
        entry.read()


def test_io_wrappers_work_on_top(saved):
    with modelzip.open(saved) as archive:
        with io.BufferedReader(archive.open_entry("tags.txt")) as buffered:
            assert buffered.read().decode() == "t\n"
        with io.TextIOWrapper(io.BufferedReader(archive.open_entry("t/params.txt")),
                              encoding="utf-8") as text:
            assert [line.split(" ")[0] for line in text] == ["big", "packed"]


def test_a_damaged_entry_fails_at_its_end_naming_it(saved):
    with zipfile.ZipFile(saved) as z:
        info = next(i for i in z.infolist() if i.filename.startswith("t/params/")
                    and i.compress_type == zipfile.ZIP_STORED)
    raw = bytearray(saved.read_bytes())
    name_len = int.from_bytes(raw[info.header_offset + 26:info.header_offset + 28], "little")
    extra_len = int.from_bytes(raw[info.header_offset + 28:info.header_offset + 30], "little")
    data_end = info.header_offset + 30 + name_len + extra_len + info.file_size
    raw[data_end - 1] ^= 0xFF  # the last byte of the tensor data
    saved.write_bytes(bytes(raw))
    with modelzip.open(saved) as archive:
        entry = archive.open_entry(info.filename)
        first = entry.read(1000)
        assert len(first) == 1000  # the damage is further on
        with pytest.raises(modelzip.Error, match="CRC") as caught:
            entry.read()
        assert caught.value.code == "corrupt" and caught.value.entry == info.filename


def test_missing_entries_are_key_errors(saved):
    with modelzip.open(saved) as archive:
        with pytest.raises(KeyError):
            archive.open_entry("t/params/99.fb")
        with pytest.raises(modelzip.NotFoundError):
            archive.open_entry("nope")


def test_threads_reading_one_entry_get_every_byte_once(saved):
    with zipfile.ZipFile(saved) as z:
        name = max(z.namelist(), key=lambda n: z.getinfo(n).file_size)
        size = z.getinfo(name).file_size
    with modelzip.open(saved) as archive:
        entry = archive.open_entry(name)
    counts = []

    def drain():
        total, buffer = 0, bytearray(1 << 12)
        while (n := entry.readinto(buffer)) > 0:
            total += n
        counts.append(total)

    threads = [threading.Thread(target=drain) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sum(counts) == size
