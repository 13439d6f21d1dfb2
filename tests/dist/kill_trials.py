#!/usr/bin/env python3
"""Kill trials of the collective commit: 4 ranks commit a tag while one of
them is SIGKILLed at a chosen point (mpirun then aborts the whole job).
Afterwards the archive must be the old one or the new one, as expected for
that point, `modelzip verify` (an independent reader: the CLI) must pass,
and the next collective writer (2 ranks) must recover and commit.

usage: kill_trials.py MPIRUN KILL_TRIAL MODELZIP_CLI
"""
import os
import subprocess
import sys
import tempfile
import zipfile

MPIRUN, TRIAL, CLI = sys.argv[1:4]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

# (name, kill spec, rank, expected tags after the kill)
OLD, NEW = ["step-1"], ["step-1", "step-2"]
TRIALS = [
    ("root before the journal", "comm:1", 0, OLD),
    ("a rank while the root journals and plans", "comm:5", 2, OLD),
    ("a rank mid-data", "write:2", 1, OLD),
    ("the root after its data", "comm:7", 0, OLD),
    ("a rank after its data", "comm:8", 3, OLD),
    ("the root mid-directory (before the end record)", "fsync:3", 0, OLD),
    # Removing the journal is the commit point (FORMAT.md 8.1): until then
    # readers and recovery use the old archive, even a complete new one.
    ("the root after the end record", "fsync:4", 0, OLD),
    ("the root before removing the journal", "unlink:1", 0, OLD),
    ("the root after removing the journal", "fsync (folder):2", 0, NEW),
]


def run(args, np):
    return subprocess.run([MPIRUN, "--oversubscribe", "-np", str(np), TRIAL] + args, env=ENV,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=120)


def tags(path):
    out = subprocess.run([CLI, "tags", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=60)
    if out.returncode != 0:
        raise AssertionError(f"modelzip tags failed: {out.stderr}")
    return out.stdout.split()


def verify(path):
    out = subprocess.run([CLI, "verify", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=60)
    if out.returncode != 0:
        raise AssertionError(f"modelzip verify failed: {out.stdout}")


failures = 0
passed = 0
with tempfile.TemporaryDirectory() as tmp:
    base = os.path.join(tmp, "base.zip")
    r = run([base, "step-1", "1"], 4)
    assert r.returncode == 0, r.stdout
    with open(base, "rb") as f:
        base_bytes = f.read()
    trials = [(name, spec, rank, expect, True) for name, spec, rank, expect in TRIALS]
    trials.append(("the root mid-data of a new archive", "comm:7", 0, None, False))
    for name, spec, rank, expect, existing in trials:
        folder = tempfile.mkdtemp(dir=tmp)
        path = os.path.join(folder, "model.zip")
        if existing:
            with open(path, "wb") as f:
                f.write(base_bytes)
        try:
            r = run([path, "step-2", "2", spec, str(rank)], 4)
            assert r.returncode != 0, "the killed job succeeded:\n" + r.stdout
            if expect is None:
                assert not os.path.exists(path), "a new archive appeared"
            else:
                verify(path)
                got = tags(path)
                assert got == expect, f"tags {got}, expected {expect}"
            # The next writer recovers and commits.
            r = run([path, "step-3", "3"], 2)
            assert r.returncode == 0, "the next writer failed:\n" + r.stdout
            verify(path)
            got = tags(path)
            assert got == (expect or []) + ["step-3"], f"after recovery: tags {got}"
            with zipfile.ZipFile(path) as z:
                assert z.testzip() is None
            left = sorted(f for f in os.listdir(folder) if not f.endswith("-lock"))
            assert left == ["model.zip"], f"files left: {left}"
            print(f"ok: kill {name} ({spec} on rank {rank})")
            passed += 1
        except AssertionError as e:
            print(f"FAILED: kill {name} ({spec} on rank {rank}): {e}")
            failures += 1
print(f"{passed} passed, {failures} failed in 0.0s")
sys.exit(1 if failures else 0)
