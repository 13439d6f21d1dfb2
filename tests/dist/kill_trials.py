#!/usr/bin/env python3
"""Kill trials of the collective commit.

usage: kill_trials.py phases MPIRUN KILL_TRIAL MODELZIP_CLI
       kill_trials.py in-flight MPIRUN KILL_TRIAL MODELZIP_CLI KILL_WORKER

phases: 4 ranks commit a tag while one of them is SIGKILLed at a chosen
point (mpirun then aborts the whole job). Afterwards the archive must be the
old one or the new one, as expected for that point, `modelzip verify` (an
independent reader: the CLI) must pass, and the next collective writer (2
ranks) must recover and commit. Then the same for commits that remove tags
(keep_last), the root killed at points before and after the commit point.

in-flight (FORMAT.md 8.4, the rank locks): three ranks save a tag of a row-
split matrix every step; during the third save, once its journal exists, a
non-root rank is SIGKILLed after a varying delay, while the others may still
be writing. Engines: torch.distributed gloo (three independent processes,
`file://` rendezvous), mpi4py and the C++ MPI communicator (under `mpirun
--enable-recovery`, which keeps the job running when a rank dies; the
survivors' collectives then time out). Afterwards: the survivors failed with
a modelzip error naming the killed rank, the archive is the old or the new
one for modelzip, for Python's zipfile and for `unzip -t` (when installed),
and the next writer (one process) recovers, saying so when it rolled an
interrupted save back, and commits; only the archive is left.
MODELZIP_KILL_TRIALS sets the trials per engine (default 3).
"""
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile

MODE = sys.argv[1]
MPIRUN, TRIAL, CLI = sys.argv[2:5]
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


def phase_trials():
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
    return passed, failures


# The root killed at its K-th system call of a kind while a commit removes
# tags (keep_last=1 over step-1 and step-2; "empty", equal in every version,
# is referenced from step-1 by the later tags, so removing step-1 moves it;
# the archive is then mostly free, so the root rewrites it after the
# commit), before the commit point, after it while the removed entries
# become free entries, or during the rewrite: the old archive or the new
# one, verified, and the next writer recovers.
ROTATION_KILLS = ["comm:1", "comm:5", "write:1", "write:3", "write:8", "write:20", "write:40",
                  "fsync:1", "fsync:2", "fsync:3", "fsync:4", "fsync:5", "fsync:6", "fsync:7",
                  "unlink:1", "unlink:2", "fsync (folder):2", "rename:1", "fsync (folder):3"]


def rotation_trials():
    failures = 0
    passed = 0
    env = dict(ENV, MODELZIP_KILL_TRIAL_KEEP_LAST="1")

    def run_rotating(args, np):
        return subprocess.run([MPIRUN, "--oversubscribe", "-np", str(np), TRIAL] + args, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=120)

    old, new = ["step-1", "step-2"], ["step-3"]
    outcomes = {"old": 0, "new": 0}
    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "base.zip")
        for version in (1, 2):  # without keep_last
            r = run([base, f"step-{version}", str(version)], 2)
            assert r.returncode == 0, r.stdout
        with open(base, "rb") as f:
            base_bytes = f.read()
        for spec in ROTATION_KILLS:
            folder = tempfile.mkdtemp(dir=tmp)
            path = os.path.join(folder, "model.zip")
            with open(path, "wb") as f:
                f.write(base_bytes)
            try:
                r = run_rotating([path, "step-3", "3", spec, "0"], 4)
                verify(path)
                got = tags(path)
                assert got in (old, new), f"tags {got}"
                if r.returncode == 0:  # the root never made that many calls
                    assert got == new, f"tags {got} after a commit that succeeded"
                else:
                    outcomes["old" if got == old else "new"] += 1
                r = run_rotating([path, "step-4", "4"], 2)
                assert r.returncode == 0, "the next writer failed:\n" + r.stdout
                verify(path)
                after = tags(path)
                assert after == ["step-4"], f"after recovery: tags {after}"
                with zipfile.ZipFile(path) as z:
                    assert z.testzip() is None
                left = sorted(f for f in os.listdir(folder) if not f.endswith("-lock"))
                assert left == ["model.zip"], f"files left: {left}"
                print(f"ok: kill the root of a rotating commit ({spec})")
                passed += 1
            except AssertionError as e:
                print(f"FAILED: kill the root of a rotating commit ({spec}): {e}")
                failures += 1
    print(f"rotation kills: {outcomes['old']} left the old archive, {outcomes['new']} the new "
          f"one, {len(ROTATION_KILLS) - sum(outcomes.values())} came after the last such call")
    return passed, failures


# ---- writes in flight ---------------------------------------------------------

ROWS, COLS = 12288, 1024  # 48 MiB of float32: rank 2 writes half, rank 0 a sixth
KILLED = 1


def zip_tags(path):
    """The tags as Python's zipfile reads them (no modelzip code involved)."""
    with zipfile.ZipFile(path) as z:
        bad = z.testzip()
        assert bad is None, f"zipfile: bad CRC in {bad}"
        return z.read("tags.txt").decode().split()


def unzip_ok(path):
    if shutil.which("unzip") is None:
        return
    out = subprocess.run(["unzip", "-tqq", path], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=120)
    assert out.returncode == 0, f"unzip -t: {out.stdout}"


def start_ranks(engine, path, folder):
    py = sys.executable
    worker = sys.argv[5]
    args = [path, "3", str(ROWS), str(COLS)]
    if engine == "gloo":
        init = os.path.join(folder + ".pg")
        return [subprocess.Popen([py, worker, "torch"] + args + [str(r), "3", init], env=ENV,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                for r in range(3)]
    cmd = [py, worker, "mpi"] + args if engine == "mpi4py" else [TRIAL, "--in-flight"] + args
    return [subprocess.Popen([MPIRUN, "--oversubscribe", "--enable-recovery", "-np", "3"] + cmd,
                             env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)]


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


class MissedWindow(Exception):
    """This process was not scheduled between step-1's commit and step-2's:
    step-2 committed before its journal was seen, so a kill now would come
    after the writes. The trial is run again (in_flight_trials)."""


def in_flight_trial(engine, folder, delay):
    path = os.path.join(folder, "g.zip")
    journal = os.path.join(folder, ".g.zip.modelzip-append")
    procs = start_ranks(engine, path, folder)
    try:
        # step-0 makes the archive, step-1 appends; during step-2's append the
        # journal appears: then kill rank 1 after `delay`.
        def saved(tag):
            try:
                with zipfile.ZipFile(path) as z:
                    return tag in z.read("tags.txt").decode().split()
            except (OSError, zipfile.BadZipFile, KeyError):
                return False
        # (step-1's journal must be gone first: the kill belongs in step-2)
        wait_for(lambda: saved("step-1") and not os.path.exists(journal), 120, "step-1")
        wait_for(lambda: os.path.exists(journal) or saved("step-2"), 60,
                 "the journal of step-2")
        if not os.path.exists(journal) and saved("step-2"):
            raise MissedWindow()
        time.sleep(delay)
        with open(f"{path}.rank{KILLED}.pid") as f:
            os.kill(int(f.read()), signal.SIGKILL)
        outputs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    text = "\n".join(outputs)
    if os.environ.get("MODELZIP_KILL_VERBOSE"):
        print(text)
    committed = "saved step-2" in text
    expect = ["step-0", "step-1"] + (["step-2"] if committed else [])
    # Every survivor that failed names the killed rank in a modelzip error.
    failed = re.findall(r"save failed: (.*)", text)
    for message in failed:
        assert "modelzip.Error" in message or engine == "mpi", message
        assert re.search(r"\branks? (\d+, )*(\d+ and )?1\b[^:]* (was|were) lost", message), \
            f"the error does not name rank 1 as lost: {message}"
    if not committed:
        assert failed, "no survivor reported the failure:\n" + text
    # The archive, for modelzip and for other readers, before any writer.
    verify(path)
    got = tags(path)
    # Killed after the commit point (the journal's removal), before the last
    # collective: the survivors fail, but the new tag is there.
    if not committed and got == expect + ["step-2"]:
        expect = got
    assert got == expect, f"modelzip tags {got}, expected {expect}"
    zt = zip_tags(path)
    assert zt == expect, f"zipfile tags {zt}, expected {expect}"
    unzip_ok(path)
    interrupted = os.path.exists(journal)
    # The next writer (one process) recovers and commits.
    r = subprocess.run([sys.executable, "-c",
                        "import sys, numpy as np, modelzip\n"
                        "modelzip.save(sys.argv[1], 'next', {'x': np.ones(3, np.float32)})",
                        path], env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    assert r.returncode == 0, "the next writer failed:\n" + r.stdout
    if interrupted:
        assert "rolled back an interrupted save of tag step-2" in r.stdout, \
            "the next writer did not say it rolled back:\n" + r.stdout
    verify(path)
    got = tags(path)
    assert got == expect + ["next"], f"after recovery: tags {got}"
    assert zip_tags(path) == expect + ["next"]
    left = sorted(f for f in os.listdir(folder) if not f.endswith(".pid"))
    assert left == ["g.zip"], f"files left: {left}"
    return "committed before the kill" if committed else (
        f"{len(failed)} survivor(s) named rank 1" + (", journal left" if interrupted else ""))


def in_flight_trials():
    passed = failures = 0
    count = int(os.environ.get("MODELZIP_KILL_TRIALS", "3"))
    rng = random.Random(27)
    with tempfile.TemporaryDirectory() as tmp:
        for engine in os.environ.get("MODELZIP_KILL_ENGINES", "gloo mpi4py mpi").split():
            for i in range(count):
                delay = rng.uniform(0.0, 0.04)
                label = f"{engine} trial {i + 1}, kill after {delay * 1000:.0f} ms"
                try:
                    for attempt in range(1, 4):
                        try:
                            outcome = in_flight_trial(engine, tempfile.mkdtemp(dir=tmp), delay)
                            break
                        except MissedWindow:
                            print(f"{label}: attempt {attempt} missed step-2's journal "
                                  "(not scheduled in time), run again", flush=True)
                    else:
                        raise AssertionError("step-2's journal was missed in 3 attempts")
                    print(f"ok: {label}: {outcome}", flush=True)
                    passed += 1
                except AssertionError as e:
                    print(f"FAILED: {label}: {e}", flush=True)
                    failures += 1
    return passed, failures


start = time.monotonic()
if MODE == "phases":
    passed, failures = phase_trials()
    more = rotation_trials()
    passed, failures = passed + more[0], failures + more[1]
else:
    passed, failures = in_flight_trials()
print(f"{passed} passed, {failures} failed in {time.monotonic() - start:.1f}s")
sys.exit(1 if failures else 0)
