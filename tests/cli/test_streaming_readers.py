"""Appended archives read like freshly written ones in third-party readers.

Streaming zip readers walk local headers in file order and stop at the first
central directory header, so any byte that belongs to no entry (an old
tags.txt, an old central directory) hides what follows. After appends,
rm-tag, gc and appends again, Java's java.util.zip.ZipInputStream and npm's
unzipper must list every entry and read the newest tags.txt, `zipinfo -v`
must report no extra bytes, and a coverage count made here from the zip
structures must find no unused byte.
"""
import json
import os
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from conftest import run

INTEROP = Path(__file__).parent / "interop"
BUILD_DIR = Path(os.environ.get("MODELZIP_BUILD_DIR", "build"))


def unused_bytes(path):
    """Bytes of the file that no local header + data, the central directory
    or the end records cover, from the structures themselves (zipfile for
    the central directory entries, the local headers read here)."""
    data = Path(path).read_bytes()
    eocd = data.rfind(b"PK\x05\x06")
    assert eocd >= 0
    (_, _, _, _, _, cd_size, cd_offset, comment) = struct.unpack_from("<IHHHHIIH", data, eocd)
    end = eocd + 22 + comment
    ends_from = eocd
    if data[eocd - 20:eocd - 16] == b"PK\x06\x07":  # ZIP64 locator
        (z64,) = struct.unpack_from("<Q", data, eocd - 12)
        assert data[z64:z64 + 4] == b"PK\x06\x06"
        cd_size, cd_offset = struct.unpack_from("<QQ", data, z64 + 40)
        ends_from = z64
    ranges = [(cd_offset, cd_offset + cd_size), (ends_from, end)]
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            off = info.header_offset
            assert data[off:off + 4] == b"PK\x03\x04", info.filename
            name_len, extra_len = struct.unpack_from("<HH", data, off + 26)
            ranges.append((off, off + 30 + name_len + extra_len + info.compress_size))
    ranges.sort()
    for (a0, a1), (b0, _) in zip(ranges, ranges[1:]):
        assert a1 <= b0, "overlapping structures"
    return len(data) - sum(b - a for a, b in ranges)


def build_archive(tmp_path, appends_after_gc=2):
    """t0..t4 by import (appends), rm-tag t1, gc, then more appended tags.
    Returns the archive and the expected tags, oldest first."""
    path = tmp_path / "m.zip"
    shared = tmp_path / "shared.npy"
    np.save(shared, np.arange(3000, dtype=np.float32))
    appended = 0
    tags = []

    def add(tag, k):
        nonlocal appended
        own = tmp_path / f"{tag}.npy"
        np.save(own, np.full(500 + 100 * k, k, dtype=np.float64))
        out = run("import", path, "--tag", tag, own, shared)
        appended += b"(appended)" in out.stderr + out.stdout
        tags.append(tag)

    for k in range(5):
        add(f"t{k}", k)
    run("rm-tag", path, "t1")
    tags.remove("t1")
    run("gc", path)
    for k in range(5, 5 + appends_after_gc):
        add(f"t{k}", k)
    assert appended == 4 + appends_after_gc  # every import but the first appended
    return path, tags


def file_order(path):
    with zipfile.ZipFile(path) as z:
        infos = sorted(z.infolist(), key=lambda i: i.header_offset)
        return [(i.filename, i.file_size) for i in infos], z.read("tags.txt").decode()


def java_listing(path):
    """ListZip's entries [(name, size)] in file order and its tags.txt text.
    ZipInputStream reads every entry to its end and checks its CRC (an
    exception fails the run)."""
    classes = BUILD_DIR / "interop-java"
    classes.mkdir(parents=True, exist_ok=True)
    subprocess.run(["javac", "-d", classes, INTEROP / "ListZip.java"], check=True)
    out = subprocess.run(["java", "-cp", classes, "ListZip", path], check=True,
                         capture_output=True, text=True, timeout=120).stdout
    listing, tags_text = out.split("--\n")
    return [tuple(line.split("\t")) for line in listing.splitlines()], tags_text


def test_java_zip_input_stream_lists_every_entry(tmp_path):
    path, tags = build_archive(tmp_path)
    entries, tags_text = java_listing(path)
    expected, expected_tags = file_order(path)
    assert [(n, int(s)) for n, s in entries] == expected
    assert len(expected) == 15  # toml, tags.txt, 6 x (params.txt + blob), the shared blob
    assert tags_text == expected_tags == "".join(t + "\n" for t in tags)


def install_unzipper():
    """npm's unzipper 0.12.5 in build/interop-npm (installed once)."""
    prefix = BUILD_DIR / "interop-npm"
    if not (prefix / "node_modules" / "unzipper" / "package.json").exists():
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--no-save",
                        "--prefix", prefix, "unzipper@0.12.5"],
                       check=True, capture_output=True, timeout=300)
    return prefix / "node_modules"


def unzipper_listing(path):
    """list_unzipper.js's entries [{name, size, text}] in file order."""
    modules = install_unzipper()
    proc = subprocess.run(["node", INTEROP / "list_unzipper.js", path], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "NODE_PATH": str(modules)})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_npm_unzipper_streams_every_entry(tmp_path):
    path, tags = build_archive(tmp_path)
    entries = unzipper_listing(path)
    expected, expected_tags = file_order(path)
    assert [(e["name"], e["size"]) for e in entries] == expected
    assert [e["text"] for e in entries if e["name"] == "tags.txt"] == [expected_tags]
    assert expected_tags == "".join(t + "\n" for t in tags)


def test_zipinfo_reports_no_extra_bytes(tmp_path):
    path, _ = build_archive(tmp_path)
    info = subprocess.run(["zipinfo", "-v", path], capture_output=True, text=True, check=True)
    assert "Central directory entry #1" in info.stdout
    assert "bytes preceding" not in info.stdout and "extra bytes" not in info.stdout
    assert subprocess.run(["unzip", "-tq", path], capture_output=True).returncode == 0


def test_no_unused_bytes_after_twenty_appends(tmp_path):
    path = tmp_path / "m.zip"
    shared = tmp_path / "shared.npy"
    np.save(shared, np.arange(5000, dtype=np.float32))
    for k in range(21):
        own = tmp_path / f"own{k}.npy"
        np.save(own, np.full(300 + k, k, dtype=np.int32))
        out = run("import", path, "--tag", f"step-{k}", own, shared)
        assert (b"(appended)" in out.stderr + out.stdout) == (k > 0)
        assert unused_bytes(path) == 0, f"after import {k}"
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
        assert z.read("tags.txt").decode().splitlines() == [f"step-{k}" for k in range(21)]


def test_coverage_count_sees_dead_bytes(tmp_path):
    """The count above can fail: bytes between the entries and the central
    directory (as appends used to leave) are found."""
    path = tmp_path / "plain.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a", "hello")
        z.writestr("b", "world")
    assert unused_bytes(path) == 0
    data = path.read_bytes()
    eocd = data.rfind(b"PK\x05\x06")
    (cd_offset,) = struct.unpack_from("<I", data, eocd + 16)
    junk = b"JUNK!!!"
    dead = bytearray(data[:cd_offset] + junk + data[cd_offset:])
    struct.pack_into("<I", dead, eocd + len(junk) + 16, cd_offset + len(junk))
    path.write_bytes(bytes(dead))
    assert unused_bytes(path) == len(junk)


def build_rotated_archive(tmp_path):
    """t0..t5 by import, keeping the last 3 (rm-tag in place each time), a
    replaced tag and a removal whose shared blob moves: free entries between
    live ones. Returns the archive and the expected tags, oldest first."""
    path = tmp_path / "rot.zip"
    shared = tmp_path / "shared.npy"
    np.save(shared, np.arange(3000, dtype=np.float32))
    for k in range(6):
        own = tmp_path / f"r{k}.npy"
        np.save(own, np.full(4000 + 100 * k, k, dtype=np.float64))
        run("import", path, "--tag", f"t{k}", own, shared, "--keep-last", "3")
    own = tmp_path / "latest.npy"
    np.save(own, np.full(5000, 7, dtype=np.float64))
    out = run("import", path, "--tag", "T4", own, "--replace")
    assert b"freed in place" in out.stderr
    return path, ["t3", "t5", "T4"]


def free_entries(names):
    return [n for n in names if n.startswith(".modelzip-free/")]


def test_java_zip_input_stream_reads_rotated_archive(tmp_path):
    path, tags = build_rotated_archive(tmp_path)
    entries, tags_text = java_listing(path)
    names = [n for n, _ in entries]
    assert free_entries(names), "no free entry left by the in-place removals"
    expected, expected_tags = file_order(path)
    assert [(n, int(s)) for n, s in entries if not n.startswith(".modelzip-free/")] == expected
    assert tags_text == expected_tags == "".join(t + "\n" for t in tags)
    assert not any(n.startswith(("t0/", "t1/", "t2/", "t4/")) for n in names)


def test_npm_unzipper_streams_rotated_archive(tmp_path):
    path, tags = build_rotated_archive(tmp_path)
    entries = unzipper_listing(path)
    expected, expected_tags = file_order(path)
    assert free_entries([e["name"] for e in entries])
    assert [(e["name"], e["size"]) for e in entries
            if not e["name"].startswith(".modelzip-free/")] == expected
    assert [e["text"] for e in entries if e["name"] == "tags.txt"] == [expected_tags]


def test_central_directory_readers_accept_rotated_archive(tmp_path):
    path, tags = build_rotated_archive(tmp_path)
    assert subprocess.run(["unzip", "-tq", path], capture_output=True).returncode == 0
    listing = subprocess.run(["unzip", "-Z1", path], capture_output=True, text=True,
                             check=True).stdout.split()
    assert not free_entries(listing)  # free entries are in no central directory
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
        assert z.read("tags.txt").decode().splitlines() == tags
    assert unused_bytes(path) > 0  # the free entries' bytes
    assert run("verify", path).returncode == 0
    # gc rewrites them away.
    run("gc", path)
    assert unused_bytes(path) == 0
    info = subprocess.run(["zipinfo", "-v", path], capture_output=True, text=True, check=True)
    assert "extra bytes" not in info.stdout
