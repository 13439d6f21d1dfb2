"""modelzip.distributed: 4 torch.distributed (gloo) processes and 2 mpi4py
ranks commit one archive; then 1, 2 and 3 readers load it back block by
block. The model's values are computed here (dist_worker.model)."""
import os
import socket
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import modelzip
import modelzip.distributed as mzd

sys.path.insert(0, os.path.dirname(__file__))
from dist_worker import model  # noqa: E402

WORKER = os.path.join(os.path.dirname(__file__), "dist_worker.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_torch(scenario, folder, world=4):
    port = free_port()
    procs = [subprocess.Popen([sys.executable, WORKER, "torch", scenario, str(folder), str(r),
                               str(world), str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(world)]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    for r, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {r}:\n{out}"


def run_mpi(scenario, folder, world=2):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(["mpirun", "--oversubscribe", "-np", str(world), sys.executable, WORKER,
                        "mpi", scenario, str(folder)], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=240)
    assert r.returncode == 0, r.stdout


def check_archive(path, tmp_path):
    with modelzip.open(path) as a:
        assert a.tags == ["step-1", "step-2"]
        assert a.verify() == []
        for version, tag in ((1, "step-1"), (2, "step-2")):
            for name, value in model(version).items():
                np.testing.assert_array_equal(a.tensor(name, tag), value)
        assert {p.name: p.shared for p in a.params("step-2")} == {"w": False, "c": True,
                                                                  "b": False}
    # Every stored entry's data starts at a multiple of 64 (zipfile's own offsets).
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
        for info in z.infolist():
            with open(path, "rb") as f:
                f.seek(info.header_offset + 26)
                n, m = np.frombuffer(f.read(4), dtype="<u2")
            assert (info.header_offset + 30 + n + m) % 64 == 0, info.filename
    # Byte-exact: a single-process save of the same tags writes the same entries.
    single = tmp_path / "single.zip"
    modelzip.save(single, "step-1", model(1))
    modelzip.save(single, "step-2", model(2))
    assert path.read_bytes() == single.read_bytes()  # the whole file, byte for byte
    with zipfile.ZipFile(path) as a, zipfile.ZipFile(single) as b:
        assert sorted(a.namelist()) == sorted(b.namelist())
        for name in a.namelist():
            assert a.read(name) == b.read(name), name
    # Any number of readers, each reading only its block.
    for readers in (1, 2, 3):
        for name, value in model(2).items():
            for dim in range(value.ndim):
                for part in range(readers):
                    offset, shape = mzd.split(value.shape, dim, part, readers)
                    stats = {}
                    got = mzd.load(path, {name: (offset, shape)}, stats=stats)[name]
                    index = tuple(slice(o, o + s) for o, s in zip(offset, shape))
                    np.testing.assert_array_equal(got, value[index])
                    assert stats[name][0] == got.nbytes
                    if dim == 0:
                        assert stats[name][1]  # contiguous: zero-copy
    whole = mzd.load(path, torch=True)
    assert set(whole) == {"w", "c", "b"}
    np.testing.assert_array_equal(whole["w"].numpy(), model(2)["w"])


def test_torch_gloo_four_processes(tmp_path):
    run_torch("save", tmp_path)
    check_archive(tmp_path / "dist.zip", tmp_path)


def test_mpi4py_two_ranks(tmp_path):
    run_mpi("save", tmp_path)
    check_archive(tmp_path / "dist.zip", tmp_path)


@pytest.mark.parametrize("engine", ["torch", "mpi"])
def test_invalid_shards_fail_on_every_rank(tmp_path, engine):
    (run_torch if engine == "torch" else run_mpi)("invalid", tmp_path)


@pytest.mark.parametrize("engine,world", [("torch", 4), ("mpi", 2), ("mpi", 4)])
def test_background_collective_saves(tmp_path, engine, world):
    (run_torch if engine == "torch" else run_mpi)("background", tmp_path, world=world)
    check_archive(tmp_path / "dist.zip", tmp_path)


@pytest.mark.parametrize("engine", ["torch", "mpi"])
def test_a_failing_background_collective_save_raises_on_every_rank(tmp_path, engine):
    (run_torch if engine == "torch" else run_mpi)("background-invalid", tmp_path)


def test_split_and_local_errors():
    assert mzd.split((10, 3), 0, 3, 4) == ([8, 0], [2, 3])
    assert mzd.split((10, 3), 0, 0, 4) == ([0, 0], [3, 3])
    with pytest.raises(ValueError):
        mzd.split((10,), 1, 0, 2)
