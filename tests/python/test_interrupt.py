"""Ctrl-C (SIGINT) during a commit: the bindings roll the commit back and
raise KeyboardInterrupt; the archive is the previous one byte for byte."""
import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile

import numpy as np

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


def interrupt_commit(folder):
    """Starts CHILD on an archive of two tags in `folder` and sends it SIGINT
    once its commit's journal exists: (exit status, stdout, stderr, the
    archive's bytes before)."""
    path = folder / "m.zip"
    modelzip.save(path, "base", {"w": np.arange(10, dtype=np.int32)}, durable=False)
    modelzip.save(path, "next", {"w": np.arange(12, dtype=np.int32)}, durable=False)
    before = path.read_bytes()
    journal = folder / ".m.zip.modelzip-append"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=os.environ.copy())
    deadline = time.monotonic() + 60
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
    return proc.returncode, out.decode(), err.decode(), before


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
