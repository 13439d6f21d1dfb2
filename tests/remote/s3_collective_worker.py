"""One rank of the collective s3:// tests (test_s3_collective.py starts it
under mpirun, or in N torch gloo processes).

usage: s3_collective_worker.py mpi MIB SCENARIO URL [SCENARIO URL ...]
       s3_collective_worker.py torch RANK WORLD PORT MIB SCENARIO URL [...]

For each SCENARIO URL pair in turn (one process group for all of them, so
that a test pays for the start of the ranks once), every rank saves its row
block of the model (model(), values the test computes too) to URL with
modelzip.distributed.save, with the text "vocab" (a list of str on every rank),
tag "t1" ("append": tag "t2" of a new 10% larger
tensor on top of an existing archive; "background": the same with
blocking=False; "checkpoint": with modelzip.torch.save_checkpoint).
Scenario "rot:TAG:KEEP:REPLACE:SHIFT[:bg][:nodedup]": a rolling save, tag TAG with
keep_last=KEEP (0: none) and replace=REPLACE (0/1), "big" shifted by SHIFT
(so that its blob is new) and "small" unchanged (a dedup reference to the
blob of the tag that first saved it, which moves when that tag is removed);
with "bg", blocking=False; with "nodedup", dedup=False. Scenario "rotfail:TAG:KEEP": such a save that
must raise on every rank (the test injects a fault).
Scenario "fail": the save must raise on every rank (the test injects a
fault). After a save, every rank reads its block back from URL with
modelzip.distributed.load. A save prints "rank R uploaded N of M into URL";
"rank R ok" is printed once, and the exit status is 0, when every check of
every pair held.
"""
import atexit
import sys

import numpy as np

import modelzip.distributed as mzd

MIB = 1 << 20


def model(mib, tag="t1"):
    """The whole tensors: "big" of `mib` MiB (float32, rows of 64 KiB),
    "small" of 1000 floats; tag t2 adds "extra" (half as many rows + 1)."""
    rows = max(1, mib * MIB // (64 << 10))
    out = {"big": (np.arange(rows * 16384, dtype=np.float32) % 9973).reshape(rows, 16384),
           "small": np.arange(1000, dtype=np.float32)}
    if tag == "t2":
        out["extra"] = np.full((rows // 2 + 1, 16384), 7.5, dtype=np.float32)
    return out


VOCAB = ["<pad>", "caf\u00e9", "\u65e5\u672c"]


def shards(whole, rank, world):
    """This rank's rows of the tensors ("small" whole on the last rank) and, on every
    rank, the text "vocab": the root writes it between the ranks' rows of "big" and the
    last rank's "small"."""
    out = {}
    for name, value in whole.items():
        if name == "small":
            if rank == world - 1:
                out[name] = value
            continue
        off, shape = mzd.split(value.shape, 0, rank, world)
        out[name] = mzd.Shard(value[off[0]:off[0] + shape[0]].copy(), value.shape, off)
        if name == "big":
            out["vocab"] = VOCAB
    return out


def run(scenario, url, mib, rank, world, group):
    """One save (or failing save) of `scenario` into `url` and the read-back:
    True when every check held."""
    rotate = {}
    if scenario.startswith(("rot:", "rotfail:")):
        fields = scenario.split(":")
        dedup = fields[-1] != "nodedup"
        fields = fields if dedup else fields[:-1]
        tag, keep = fields[1], int(fields[2])
        replace = fields[0] == "rot" and fields[3] == "1"
        shift = int(fields[4]) if fields[0] == "rot" else 99
        whole = model(mib)
        whole["big"] = whole["big"] + shift
        rotate = {"keep_last": keep or None, "replace": replace, "dedup": dedup}
        scenario = "fail" if fields[0] == "rotfail" else ("background" if fields[-1] == "bg"
                                                          else "save")
    else:
        tag = "t2" if scenario in ("append", "fail") else "t1"
        whole = model(mib, tag)
    mine = shards(whole, rank, world)
    if scenario == "fail":
        try:
            mzd.save(url, tag, mine, group=group, **rotate)
        except Exception as e:  # noqa: BLE001 - every rank must see the failure
            print(f"rank {rank} raised: {e}")
            return True
        print(f"rank {rank}: the save did not fail")
        return False
    if scenario == "checkpoint":
        import torch
        def parameter(array):
            return torch.nn.Parameter(torch.from_numpy(array.copy()))
        arrays = {n: v for n, v in mine.items() if n != "vocab"}
        params = {n: mzd.Shard(parameter(v.value), v.global_shape, v.offset)
                  if isinstance(v, mzd.Shard) else parameter(v) for n, v in arrays.items()}
        tensors = [v.value if isinstance(v, mzd.Shard) else v for v in params.values()]
        optimizer = torch.optim.Adam(tensors, lr=0.01)
        for t in tensors:
            t.grad = torch.ones_like(t)
        optimizer.step()
        with torch.no_grad():  # the values the test expects back
            for t, v in zip(tensors, arrays.values()):
                t.copy_(torch.from_numpy(v.value if isinstance(v, mzd.Shard) else v))
        mzd.save_checkpoint(url, tag, dict(params, vocab=mine["vocab"]), optimizer, group=group,
                            epoch=2)
    elif scenario == "background":
        stats = mzd.save(url, tag, mine, group=group, blocking=False,
                         **rotate).result(timeout=300)
    else:
        stats = mzd.save(url, tag, mine, group=group, **rotate)
        print(f"rank {rank} uploaded {stats.bytes_written} of {stats.archive_bytes_written} "
              f"into {url}")
    # Every rank reads its own block back from the object (a resharded load:
    # blocks of the other split too), and the text.
    if mzd.load(url, {"vocab": None}, tag=tag)["vocab"].tolist() != VOCAB:
        print(f"rank {rank}: vocab of {url} differs")
        return False
    for name, value in whole.items():
        if name == "small":
            continue
        off, shape = mzd.split(value.shape, 1, rank, world)
        got = mzd.load(url, {name: (off, shape)}, tag=tag)[name]
        want = value[:, off[1]:off[1] + shape[1]]
        if not np.array_equal(np.asarray(got), want):
            print(f"rank {rank}: {name} of {url} differs")
            return False
    return True


def main():
    engine = sys.argv[1]
    group = None
    if engine == "torch":
        import datetime

        import torch.distributed as dist
        rank, world, port = map(int, sys.argv[2:5])
        args = sys.argv[5:]
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=120))
        atexit.register(dist.destroy_process_group)  # as torch asks, however the run ends
    else:
        from mpi4py import MPI
        group = MPI.COMM_WORLD
        rank, world = group.Get_rank(), group.Get_size()
        args = sys.argv[2:]
    mib, jobs = int(args[0]), args[1:]
    assert jobs and len(jobs) % 2 == 0, "SCENARIO URL pairs expected"
    for scenario, url in zip(jobs[::2], jobs[1::2]):
        if not run(scenario, url, mib, rank, world, group):
            return 1
    print(f"rank {rank} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
