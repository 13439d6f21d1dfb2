"""diff, extract and gc."""
import json
import os
import struct
import zipfile

import numpy as np
import pytest

from conftest import run


def test_diff_reports_shared_and_changed(quickstart_archive):
    p = run("diff", quickstart_archive, "step-1", "step-2", "--json", check=False)
    assert p.returncode == 1  # the tags differ (like diff and git diff --exit-code)
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    assert rows["embedding"]["change"] == "shared"
    assert rows["fc.weight"]["change"] == "shared"
    assert rows["fc.bias"]["change"] == "changed"
    assert rows["fc.bias"]["max_abs_diff"] == 0.5  # bias went from 0 to 0.5
    text = run("diff", quickstart_archive, "step-2", "step-1", check=False)
    assert text.returncode == 1
    assert b"changed\tfc.bias" in text.stdout
    assert b"0 added, 0 removed, 1 changed, 2 shared" in text.stderr


def test_extract_writes_every_entry_and_never_overwrites(quickstart_archive, tmp_path):
    out = tmp_path / "out"
    run("extract", quickstart_archive, out)
    with zipfile.ZipFile(quickstart_archive) as z:
        for name in z.namelist():
            assert (out / name).read_bytes() == z.read(name)
    again = run("extract", quickstart_archive, out, check=False)
    assert again.returncode == 1 and b"exists" in again.stderr
    run("extract", quickstart_archive, out, "--force")


def test_extract_refuses_symlinks_leading_outside(quickstart_archive, tmp_path):
    out = tmp_path / "out"
    outside = tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    os.symlink(outside, out / "step-1")
    p = run("extract", quickstart_archive, out, check=False)
    assert p.returncode == 1 and b"symbolic link" in p.stderr
    assert list(outside.iterdir()) == []


def deflated_archive(folder):
    """An archive whose tag t holds one deflated blob t/params/0.fb of 8 MiB
    (more than extract's 4 MiB piece, so a piece is written before the end);
    returns (path, the offset and size of the blob's compressed data)."""
    np.save(folder / "w.npy", np.sin(np.arange(1 << 21, dtype=np.float32)))
    path = folder / "m.zip"
    run("import", path, "--tag", "t", folder / "w.npy", "--compress")
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("t/params/0.fb")
        assert info.compress_type == zipfile.ZIP_DEFLATED and info.file_size > 4 << 20
    with open(path, "rb") as f:
        f.seek(info.header_offset + 26)
        name_len, extra_len = struct.unpack("<HH", f.read(4))
    return path, info.header_offset + 30 + name_len + extra_len, info.compress_size


@pytest.mark.parametrize("damage", ["data", "crc"])
def test_extract_of_a_damaged_deflated_entry_leaves_no_file(tmp_path, damage):
    """A damaged deflated entry (a byte of its compressed data flipped, or a
    CRC-32 that its data does not have, found once the whole entry is read)
    fails naming the entry, and its partly written file is removed; the
    entries before it stay."""
    path, data_offset, data_size = deflated_archive(tmp_path)
    raw = bytearray(path.read_bytes())
    if damage == "data":
        raw[data_offset + data_size * 3 // 4] ^= 0x55
    else:  # the CRC in the local header and the central directory
        with zipfile.ZipFile(path) as z:
            info = z.getinfo("t/params/0.fb")
        old = struct.pack("<I", info.CRC)
        assert raw.count(old) == 2
        raw = bytearray(bytes(raw).replace(old, struct.pack("<I", info.CRC ^ 1)))
    path.write_bytes(bytes(raw))
    out = tmp_path / "out"
    p = run("extract", path, out, check=False)
    assert p.returncode == 1, p.stderr
    assert b"entry 't/params/0.fb'" in p.stderr, p.stderr
    assert not (out / "t" / "params" / "0.fb").exists()
    assert (out / "modelzip.toml").exists()
    assert os.listdir(out / "t" / "params") == []


def test_gc_drops_unreferenced_blobs(quickstart_archive):
    with zipfile.ZipFile(quickstart_archive, "a") as z:
        blob = z.read("step-1/params/2.fb")
        z.writestr("step-1/params/7.fb", blob)  # nothing references it
    size_before = os.path.getsize(quickstart_archive)
    out = run("gc", quickstart_archive).stdout.decode()
    assert out.startswith("removed 1 unreferenced blob(s), 168 B")
    assert os.path.getsize(quickstart_archive) < size_before
    with zipfile.ZipFile(quickstart_archive) as z:
        assert "step-1/params/7.fb" not in z.namelist()
    assert run("verify", quickstart_archive).returncode == 0
