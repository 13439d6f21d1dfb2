"""A real np.savez output of more than 2 GiB imports (meson test 'large_npz').

Python's zipfile writes ZIP64 end records once the central directory starts
beyond 2 GiB - 1, while the 32-bit fields of the end record still hold the
real values, and gives members whose local header lies beyond that offset a
ZIP64 extra field: FORMAT.md section 1. This file is run on its own (not
collected with the other CLI tests) so that its disk time has its own
timeout. Its two files (2.1 GB each) live in /dev/shm
when the machine has one (a memory file system: the test measures parsing,
not the disk, and fsync costs nothing there), else in pytest's tmp_path, and
are deleted as soon as they have been checked.
"""
import json
import os
import pathlib
import subprocess
import tempfile
import zipfile

import numpy as np
import pytest

from conftest import run

PROBE = os.environ["MODELZIP_TENSOR_PROBE"]

ROWS, COLS = 1000, 537_000  # float32: 2,148,000,000 bytes > 2 GiB
MARKS = {0: 1.5, 2**31 // 4 + 3: -2.0, ROWS * COLS - 1: 7.0}  # flat index -> value


def expected_lines():
    """What the probe must print, from what numpy was given."""
    big = ",".join(f"{i}:{v:g}" for i, v in sorted(MARKS.items()))
    return [
        f"big float32 [{ROWS},{COLS}] {ROWS * COLS * 4} nonzero={big}",
        "small float32 [3] 12 nonzero=0:1,1:2,2:3",
    ]


def probe(*args):
    proc = subprocess.run([PROBE, *map(str, args)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return sorted(proc.stdout.splitlines())


@pytest.fixture
def work_dir(tmp_path):
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK):
        with tempfile.TemporaryDirectory(dir=shm, prefix="modelzip-large-npz-") as d:
            yield pathlib.Path(d)
    else:
        yield tmp_path


def test_np_savez_beyond_2_gib_imports_through_the_cli_and_the_cpp_api(work_dir):
    tmp_path = work_dir
    npz = tmp_path / "big.npz"
    big = np.zeros((ROWS, COLS), dtype=np.float32)
    flat = big.reshape(-1)
    for i, v in MARKS.items():
        flat[i] = v
    np.savez(npz, big=big, small=np.array([1, 2, 3], dtype=np.float32))
    del big, flat

    # The file really has what the test is about: ZIP64 end records beside
    # real 32-bit values, and a member beyond 2 GiB with a ZIP64 offset.
    with zipfile.ZipFile(npz) as z:
        small = z.getinfo("small.npy")
        assert small.header_offset > 2**31
    with open(npz, "rb") as f:
        f.seek(-22, os.SEEK_END)
        eocd = f.read(22)
        f.seek(-42, os.SEEK_END)
        locator = f.read(4)
    assert eocd[:4] == b"PK\x05\x06" and locator == b"PK\x06\x07"
    cd_offset = int.from_bytes(eocd[16:20], "little")
    assert 2**31 <= cd_offset < 0xFFFFFFFF  # a real value, not the escape

    want = sorted(expected_lines())
    assert probe("npz", npz) == want  # the C++ converter API

    archive = tmp_path / "a.zip"
    run("import", archive, "--tag", "t1", npz)  # the CLI
    listed = {p["name"]: p for p in json.loads(run("ls", archive, "--json").stdout)}
    assert listed["big"]["shape"] == [ROWS, COLS]
    assert listed["small"]["shape"] == [3]
    assert probe("archive", archive, "t1") == want
    small_back = run("cat", archive, "small").stdout
    assert np.frombuffer(small_back, dtype="<f4").tolist() == [1.0, 2.0, 3.0]
    archive.unlink()
    npz.unlink()
