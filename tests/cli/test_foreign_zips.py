"""Zips that APPNOTE allows, made by third-party writers (numpy, Python's
zipfile, Info-ZIP's zip), import; an archive comment survives modelzip's
rewrites (FORMAT.md section 1). The ZIP64 case of np.savez beyond 2 GiB is
in large_npz_check.py."""
import io
import os
import subprocess
import zipfile

import numpy as np
import pytest

from conftest import run

PROBE = os.environ["MODELZIP_TENSOR_PROBE"]


def arrays():
    rng = np.random.default_rng(13)
    return {"w": rng.standard_normal((4, 5)).astype(np.float32),
            "b": np.arange(5, dtype=np.float32)}


def check_imported(tmp_path, npz, tag="t1"):
    """Imports `npz` with the CLI and reads every array back as .npy."""
    archive = tmp_path / f"{npz.stem}.zip"
    run("import", archive, "--tag", tag, npz)
    for name, want in arrays().items():
        got = np.load(io.BytesIO(run("cat", archive, name, "--npy").stdout))
        np.testing.assert_array_equal(got, want)
    probe = subprocess.run([PROBE, "npz", npz], capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    assert sorted(line.split()[0] for line in probe.stdout.splitlines()) == ["b", "w"]
    return archive


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_npz_with_a_trailing_newline_imports(tmp_path, save):
    npz = tmp_path / "trailing.npz"
    save(npz, **arrays())
    with open(npz, "ab") as f:
        f.write(b"\n")
    with zipfile.ZipFile(npz) as z:  # Python's reader accepts it too
        assert z.testzip() is None
    check_imported(tmp_path, npz)


def test_npz_with_a_comment_from_python_zipfile_imports(tmp_path):
    npz = tmp_path / "pycomment.npz"
    np.savez(npz, **arrays())
    with zipfile.ZipFile(npz, "a") as z:
        z.comment = b"written by Python's zipfile"
    with zipfile.ZipFile(npz) as z:
        assert z.comment == b"written by Python's zipfile"
    check_imported(tmp_path, npz)


def test_npz_with_a_comment_from_info_zip_imports(tmp_path):
    npz = tmp_path / "infozip.npz"
    np.savez_compressed(npz, **arrays())
    subprocess.run(["zip", "-q", "-z", str(npz)], input=b"a comment from zip -z\n", check=True)
    with zipfile.ZipFile(npz) as z:
        assert z.comment.startswith(b"a comment from zip -z")
    check_imported(tmp_path, npz)


def comment_of(path):
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
        return z.comment


def test_archive_comment_survives_rm_tag_gc_and_import(tmp_path, quickstart_archive):
    archive = quickstart_archive
    subprocess.run(["zip", "-q", "-z", str(archive)], input=b"our model, do not delete\n",
                   check=True)
    want = comment_of(archive)
    assert want.startswith(b"our model, do not delete")
    run("verify", archive)

    npz = tmp_path / "extra.npz"
    np.savez(npz, **arrays())
    run("import", archive, "--tag", "step-3", npz)  # appends (or rewrites)
    assert comment_of(archive) == want
    run("rm-tag", archive, "step-1")  # rewrites
    assert comment_of(archive) == want
    run("gc", archive)
    assert comment_of(archive) == want
    assert run("tags", archive).stdout.decode().split() == ["step-2", "step-3"]
    run("verify", archive)
    subprocess.run(["unzip", "-tq", str(archive)], check=True, capture_output=True)


def test_archive_with_trailing_bytes_reads_and_rewrites_without_them(tmp_path,
                                                                     quickstart_archive):
    archive = quickstart_archive
    size = archive.stat().st_size
    with open(archive, "ab") as f:
        f.write(b"\ntrailing bytes\n")
    assert run("tags", archive).stdout.decode().split() == ["step-1", "step-2"]
    run("verify", archive)
    run("rm-tag", archive, "step-1")
    with open(archive, "rb") as f:
        assert f.read()[-22:-18] == b"PK\x05\x06"  # the end record ends the file again
    assert archive.stat().st_size < size
