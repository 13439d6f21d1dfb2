"""Ctrl-C (SIGINT) during a save: before the commit point the bindings roll
the commit back and raise KeyboardInterrupt (the archive is the previous one
byte for byte); after it the save completes and KeyboardInterrupt is raised."""
import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile

import numpy as np
import pytest

import modelzip

CHILD = textwrap.dedent("""
    import sys, numpy as np, modelzip
    big = np.full(384 << 18, 2.5, dtype=np.float32)
    try:
        with modelzip.Writer(sys.argv[1]) as w:
            w.add_tag("big", {"w": big})
            w.commit()
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
        sys.exit(42)
    print("committed", flush=True)
""")


def sigint_once_the_journal_exists(argv, journal, seconds):
    """Starts `argv` and sends it SIGINT once `journal` exists (within
    `seconds`, while it runs; else the test fails): (exit status, stdout,
    stderr) once it ended."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=os.environ.copy())
    deadline = time.monotonic() + seconds
    try:
        while not journal.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.001)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, out.decode(), err.decode()


def interrupt_commit(folder):
    """Starts CHILD on an archive of two tags in `folder` and sends it SIGINT
    once its commit's journal exists: (exit status, stdout, stderr, the
    archive's bytes before)."""
    path = folder / "m.zip"
    modelzip.save(path, "base", {"w": np.arange(10, dtype=np.int32)}, durable=False)
    modelzip.save(path, "next", {"w": np.arange(12, dtype=np.int32)}, durable=False)
    before = path.read_bytes()
    return (*sigint_once_the_journal_exists([sys.executable, "-c", CHILD, str(path)],
                                            folder / ".m.zip.modelzip-append", 60), before)


def test_sigint_during_commit_raises_keyboard_interrupt(tmp_path):
    # On a busy machine this process may run again only after the child's
    # commit point (the journal's removal), when the signal can no longer
    # stop the commit: then the child prints "committed" and the trial runs
    # again in a new folder (at most 3 times).
    for attempt in range(3):
        folder = tmp_path / f"attempt-{attempt}"
        folder.mkdir()
        code, out, err, before = interrupt_commit(folder)
        if not (code == 0 and out.strip() == "committed"):
            break
    path = folder / "m.zip"
    assert code == 42, (out, err)
    assert out.strip() == "KeyboardInterrupt"
    assert path.read_bytes() == before
    assert sorted(os.listdir(folder)) in (["m.zip"], [".m.zip.modelzip-lock", "m.zip"])
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
    with modelzip.open(path) as a:
        assert a.tags == ["base", "next"]


# A progress callback that raises KeyboardInterrupt stands for Ctrl-C at a
# chosen point of the commit: the first report (before any data), one in
# the middle and the last one (the last point that can cancel).
def interrupting(at):
    calls = []

    def progress(done, total):
        calls.append((done, total))
        if len(calls) == at(len(calls)):
            raise KeyboardInterrupt
    return progress, calls


def count_reports(save, path):
    """How many times `save` calls its progress callback on a copy of `path`."""
    copy = path.with_name("count.zip")
    copy.write_bytes(path.read_bytes())
    calls = []
    save(copy, lambda done, total: calls.append((done, total)))
    copy.unlink()
    return len(calls)


def writer_save(path, progress):
    with modelzip.Writer(path, durable=False, progress=progress) as w:
        w.add_tag("new", big_arrays())


def module_save(path, progress):
    modelzip.save(path, "new", big_arrays(), durable=False, progress=progress)


def rewriting_save(path, progress):
    modelzip.save(path, "new", big_arrays(), durable=False, append=False, progress=progress)


def torch_save(path, progress):
    torch = pytest.importorskip("torch")
    state = {k: torch.from_numpy(v) for k, v in big_arrays().items()}
    modelzip.torch.save(state, path, "new", durable=False, progress=progress)


def checkpoint_save(path, progress):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    model = torch.nn.Linear(1024, 3072)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(2, 1024)).sum().backward()
    optimizer.step()
    modelzip.torch.save_checkpoint(path, "new", model, optimizer, durable=False,
                                   progress=progress)


def big_arrays():
    return {"a": np.full(3 << 20, 1.5, np.float32), "b": np.full(3 << 20, 2.5, np.float32)}


@pytest.mark.parametrize("save", [writer_save, module_save, rewriting_save, torch_save,
                                  checkpoint_save])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_an_interrupt_at_any_report_cancels_the_save(tmp_path, save, where):
    path = tmp_path / "m.zip"
    modelzip.save(path, "base", {"w": np.arange(10, dtype=np.int32)}, durable=False)
    before = path.read_bytes()
    n = count_reports(save, path)
    assert n >= 3
    k = {"first": 1, "middle": n // 2, "last": n}[where]
    progress, calls = interrupting(lambda _: k)
    with pytest.raises(KeyboardInterrupt) as raised:
        save(path, progress)
    assert len(calls) == k  # not called again once it raised
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) in (["m.zip"], [".m.zip.modelzip-lock", "m.zip"])
    assert any("the save did not happen" in note for note in raised.value.__notes__)
    with modelzip.open(path) as a:
        assert a.tags == ["base"]


HOLDER = textwrap.dedent("""
    import sys, time, numpy as np, modelzip
    def hold(done, total):  # the commit holds the archive's lock meanwhile
        open(sys.argv[2], "w").close()
        time.sleep(300)
    modelzip.save(sys.argv[1], "held", {"w": np.zeros(4, np.float32)}, durable=False,
                  append=False, progress=hold)
""")


def blocked_lock_waiters(path):
    """The blocked lock requests (lines of /proc/locks) on the file `path`,
    told by its inode number (the device number there may be an overlay
    file system's lower one)."""
    inode = os.stat(path).st_ino
    with open("/proc/locks") as f:
        return [line for line in f
                if "->" in line and any(field.endswith(f":{inode}") for field in line.split())]


def test_ctrl_c_while_waiting_for_another_writers_lock(tmp_path):
    """A save waiting for the lock another process's commit holds stops
    waiting on Ctrl-C: KeyboardInterrupt, and the archive is untouched."""
    path = tmp_path / "m.zip"
    modelzip.save(path, "base", {"w": np.arange(10, dtype=np.int32)}, durable=False)
    before = path.read_bytes()
    holding = tmp_path / "holding"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(holding)])
    waiter = None
    try:
        deadline = time.monotonic() + 60
        while not holding.exists():
            assert holder.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        waiter = subprocess.Popen([sys.executable, "-c", CHILD, str(path)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        while not blocked_lock_waiters(path):
            assert waiter.poll() is None, waiter.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        waiter.send_signal(signal.SIGINT)
        # The holder keeps the lock for 300 s: a waiter that went on waiting
        # would still be there.
        out, err = waiter.communicate(timeout=60)
        assert waiter.returncode == 42, (out, err)
        assert out.decode().strip() == "KeyboardInterrupt"
    finally:
        for p in (waiter, holder):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    assert path.read_bytes() == before


def test_ctrl_c_stops_verify(tmp_path):
    """Archive.verify() hears Ctrl-C after each entry it checks (so a long
    check does not run to its end), and reports progress."""
    path = tmp_path / "m.zip"
    modelzip.save(path, "t", {f"w{i}": np.full(1 << 18, i, np.float32) for i in range(8)},
                  durable=False)
    calls = []
    with modelzip.open(path) as a:
        assert a.verify(progress=lambda done, total: calls.append((done, total))) == []
        assert len(calls) > 8 and calls[-1][0] == calls[-1][1]
        n = len(calls)
        calls.clear()

        def ctrl_c_at_the_third(done, total):
            calls.append(done)
            if len(calls) == 3:
                signal.raise_signal(signal.SIGINT)  # as the terminal sends it

        with pytest.raises(KeyboardInterrupt):
            a.verify(progress=ctrl_c_at_the_third)
        assert len(calls) == 3 < n
        with pytest.raises(modelzip.Error) as raised:
            a.verify(progress=lambda done, total: False)
        assert raised.value.code == "cancelled"
        assert a.verify() == []


# import_tensor_files and quantize commit like Writer.commit: Ctrl-C during
# the commit cancels it (the archive as it was) and raises KeyboardInterrupt.
IMPORTER = textwrap.dedent("""
    import sys, modelzip
    try:
        if sys.argv[2] == "import":
            modelzip.import_tensor_files(sys.argv[1], "big", [sys.argv[3]])
        else:
            modelzip.quantize(sys.argv[1], "next", "big", scheme="int8-per-tensor")
    except KeyboardInterrupt as e:
        print("KeyboardInterrupt", *getattr(e, "__notes__", []), sep="\\n", flush=True)
        sys.exit(42)
    print("committed", flush=True)
""")


def interrupt_child_commit(folder, operation):
    """Runs IMPORTER's `operation` on an archive of two tags in `folder` (the
    second one 256 MiB, for quantize) and sends it SIGINT once its commit's
    journal exists: (exit status, stdout, stderr, the archive's bytes before)."""
    path = folder / "m.zip"
    big = np.full(64 << 20, 2.5, dtype=np.float32).reshape(8 << 10, 8 << 10)
    source = folder / "big.npy"
    np.save(source, big)
    modelzip.save(path, "base", {"w": np.arange(10, dtype=np.int32)}, durable=False)
    modelzip.save(path, "next", {"w": big if operation == "quantize" else np.arange(12)},
                  durable=False)
    del big
    before = path.read_bytes()
    code, out, err = sigint_once_the_journal_exists(
        [sys.executable, "-c", IMPORTER, str(path), operation, str(source)],
        folder / ".m.zip.modelzip-append", 120)
    source.unlink()
    return code, out, err, before


@pytest.mark.parametrize("operation", ["import", "quantize"])
def test_sigint_during_an_import_or_quantize_commit(tmp_path, operation):
    # As in test_sigint_during_commit_raises_keyboard_interrupt: a child that
    # got past the commit point before the signal came tries again.
    for attempt in range(3):
        folder = tmp_path / f"attempt-{attempt}"
        folder.mkdir()
        code, out, err, before = interrupt_child_commit(folder, operation)
        if not (code == 42 and "the save completed" in out):
            break
    path = folder / "m.zip"
    assert code == 42, (out, err)
    assert out.startswith("KeyboardInterrupt\n") and "the save did not happen" in out, out
    assert path.read_bytes() == before
    assert sorted(os.listdir(folder)) in (["m.zip"], [".m.zip.modelzip-lock", "m.zip"])
    with modelzip.open(path) as a:
        assert a.tags == ["base", "next"]
        assert a.verify() == []


KILLED_SAVE = textwrap.dedent("""
    import sys, numpy as np, modelzip
    modelzip.save(sys.argv[1], "big",
                  {f"p{i}": np.full(1 << 22, i, dtype=np.float32) for i in range(16)})  # 256 MiB
""")


def interrupted_append(path):
    """Adds tag "big" to `path` in a child process killed (SIGKILL) once its
    append journal exists: the archive's next writer rolls that append back."""
    journal = path.parent / f".{path.name}.modelzip-append"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_SAVE, str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not journal.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.001)
        proc.kill()
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert journal.exists()


def test_save_async_warns_of_the_interrupted_save_it_rolls_back(tmp_path):
    """A save_async that rolls back an interrupted save (a killed process's
    append) tells it as modelzip.save does (tests/crash/rollback_notice_test.cpp):
    a UserWarning "<archive>: rolled back an interrupted save of tag big",
    given from its background thread through the bindings' one wrapper of
    calls into Python. Before, save_async rolled back without a word."""
    path = tmp_path / "m.zip"
    modelzip.save(path, "base", {"w": np.arange(10, dtype=np.int32)}, durable=False)
    interrupted_append(path)
    with pytest.warns(UserWarning) as caught:
        modelzip.save_async(path, "after", {"w": np.zeros(3)}, durable=False).result()
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert f"{path}: rolled back an interrupted save of tag big" in messages, messages
    with modelzip.open(path) as archive:
        assert archive.tags == ["base", "after"]
