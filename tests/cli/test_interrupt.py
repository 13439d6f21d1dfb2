"""SIGINT and SIGTERM during a change of an archive roll it back.

A real signal is sent to a running `modelzip import` (an append of a large
tensor) and to running rewrites (rm-tag, gc, meta) once their journal or temporary
file shows that writing has begun. Right after the process exits (130 for
SIGINT, 143 for SIGTERM) the archive must be the previous one byte for byte,
`unzip -t` and Python's zipfile must accept it, and the folder must hold no
other file of the commit (journal, temporary file). An interrupted export
leaves its OUT file as it was and no temporary file; an interrupted extract
removes the file it was writing.
"""
import os
import signal
import subprocess
import time
import zipfile

import numpy as np
import pytest

from conftest import CLI, run

BIG_MIB = 384  # big enough that writing it takes far longer than noticing it began


def leftovers(folder):
    """Files of a commit that must not stay: the journal, temporary files."""
    return sorted(n for n in os.listdir(folder)
                  if n.endswith(".modelzip-append") or ".mztmp-" in n)


def interrupt_when(args, folder, started, sig):
    """Runs modelzip with `args`, sends `sig` once `started(folder)` holds
    (checked every millisecond for at most 60 s); returns the exit status."""
    proc = subprocess.Popen([CLI, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    try:
        while not started(folder):
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"modelzip {args} ended before the signal: {proc.returncode} {err!r}")
            assert time.monotonic() < deadline, "the commit never started writing"
            time.sleep(0.001)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err.decode()


def check_unchanged(path, before):
    assert path.read_bytes() == before
    assert subprocess.run(["unzip", "-tq", path], capture_output=True).returncode == 0
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
    assert leftovers(path.parent) == []
    run("verify", path)


@pytest.fixture(scope="module")
def big_npy(tmp_path_factory):
    """The large input (only read: every test imports it into its own archive)."""
    path = tmp_path_factory.mktemp("in") / "big.npy"
    np.save(path, np.full(BIG_MIB << 18, 1.5, dtype=np.float32))
    return path


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_during_append_restores_the_archive(tmp_path, big_npy, sig):
    folder = tmp_path / "a"
    folder.mkdir()
    path = folder / "m.zip"
    small = tmp_path / "small.npy"
    np.save(small, np.arange(100, dtype=np.int64))
    run("import", path, "--tag", "base", small)
    run("import", path, "--tag", "second", small)  # an append: the tail layout
    before = path.read_bytes()
    journal = folder / ".m.zip.modelzip-append"
    code, err = interrupt_when(["import", path, "--tag", "big", big_npy], folder,
                               lambda f: journal.exists(), sig)
    assert code == 128 + sig, err
    assert "interrupted" in err and "m.zip: tag 'big': save cancelled" in err, err
    check_unchanged(path, before)
    # The archive takes the next append as usual.
    run("import", path, "--tag", "third", small)
    assert run("tags", path).stdout.split() == [b"base", b"second", b"third"]


@pytest.mark.parametrize("command,sig", [("rm-tag", signal.SIGINT), ("gc", signal.SIGTERM),
                                         ("meta", signal.SIGINT)])
def test_signal_during_rewrite_removes_the_temporary_file(tmp_path, big_npy, command, sig):
    folder = tmp_path / "r"
    folder.mkdir()
    path = folder / "m.zip"
    small = tmp_path / "small.npy"
    np.save(small, np.arange(100, dtype=np.int64))
    run("import", path, "--tag", "big", big_npy)
    run("import", path, "--tag", "small", small)
    before = path.read_bytes()
    # --rewrite: rm-tag would otherwise remove in place (no temporary file).
    args = {"rm-tag": ["rm-tag", path, "small", "--rewrite"], "gc": ["gc", path],
            "meta": ["meta", path, "--name", "renamed"]}[command]
    code, err = interrupt_when(args, folder,
                               lambda f: any(".mztmp-" in n for n in os.listdir(f)), sig)
    assert code == 128 + sig, err
    check_unchanged(path, before)
    assert run("tags", path).stdout.split() == [b"big", b"small"]


@pytest.mark.parametrize("out_name,sig", [("out.npz", signal.SIGINT), ("out.npy", signal.SIGTERM),
                                          ("out.safetensors", signal.SIGINT)])
def test_signal_during_export_leaves_out_as_it_was(tmp_path, big_npy, out_name, sig):
    """Ctrl-C during an export: OUT keeps its old bytes and no temporary file
    (a partial copy of the tensors, hidden beside OUT) stays."""
    path = tmp_path / "m.zip"
    run("import", path, "--tag", "big", big_npy)
    folder = tmp_path / "out"
    folder.mkdir()
    out = folder / out_name
    out.write_bytes(b"the previous export")
    code, err = interrupt_when(["export", path, out], folder,
                               lambda f: any(".mztmp-" in n for n in os.listdir(f)), sig)
    assert code == 128 + sig, err
    assert f"interrupted by {sig.name}, nothing changed: {out}" in err, err
    assert out.read_bytes() == b"the previous export"
    assert os.listdir(folder) == [out_name]


def test_signal_during_extract_removes_the_partly_written_file(tmp_path, big_npy):
    """Ctrl-C during extract: the files written stay, the one being written
    does not stay cut short."""
    path = tmp_path / "m.zip"
    run("import", path, "--tag", "big", big_npy)
    target = tmp_path / "x"
    blob = target / "big" / "params" / "0.fb"
    code, err = interrupt_when(["extract", path, target], tmp_path,
                               lambda f: blob.exists(), signal.SIGINT)
    assert code == 130, err
    assert "interrupted by SIGINT: " in err and "nothing changed" not in err, err
    assert "entry 'big/params/0.fb': extract cancelled (interrupted) after 2 file(s)" in err, err
    assert not blob.exists()
    with zipfile.ZipFile(path) as z:
        assert (target / "modelzip.toml").read_bytes() == z.read("modelzip.toml")
    # Extracting again (--force) gives every file whole.
    run("extract", path, target, "--force")
    assert blob.stat().st_size == zipfile.ZipFile(path).getinfo("big/params/0.fb").file_size
