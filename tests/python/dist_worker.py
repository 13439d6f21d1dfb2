"""One rank of the distributed tests (test_distributed.py starts it in 4
gloo processes, or under mpirun for mpi4py).

usage: dist_worker.py {torch|mpi} SCENARIO ARCHIVE_DIR [RANK WORLD PORT]

Scenarios: "save" (uneven row shards as numpy, strided column shards as
torch tensors, a whole tensor on the last rank only, ranks with nothing of
some parameters, then a second tag where dedup finds the unchanged ones),
"invalid" (overlapping shards: the same error on every rank, the archive
unchanged), "background" (the two tags of "save" with blocking=False, the
tensors overwritten right after each call, a synchronous collective on the
training's group while the saves run), "background-invalid" ("invalid" with
blocking=False: result() raises on every rank). Exit status 0 when every
check held.
"""
import datetime
import os
import sys

import numpy as np

import modelzip
import modelzip.distributed as mzd


def model(version):
    """The whole model: values the test computes itself."""
    return {
        "w": (np.arange(10 * 6, dtype=np.float32).reshape(10, 6) + 1000 * version),
        "c": (np.arange(4 * 9, dtype=np.float64).reshape(4, 9) * 0.5),  # unchanged
        "b": np.arange(5, dtype=np.int32) + version,
    }


def staged(rank, world, version, torch):
    whole = model(version)
    out = {}
    off, shape = mzd.split(whole["w"].shape, 0, rank, world)
    out["w"] = mzd.Shard(whole["w"][off[0]:off[0] + shape[0]].copy(), whole["w"].shape, off)
    off, shape = mzd.split(whole["c"].shape, 1, rank, world)
    block = whole["c"][:, off[1]:off[1] + shape[1]].copy()
    out["c"] = mzd.Shard(torch.from_numpy(block) if torch else block, whole["c"].shape, off)
    if rank == world - 1:
        out["b"] = whole["b"]
    return out


def main():
    engine, scenario, folder = sys.argv[1:4]
    torch = None
    if engine == "torch":
        import torch
        import torch.distributed as dist
        rank, world, port = map(int, sys.argv[4:7])
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=60))
        group = None
    else:
        from mpi4py import MPI
        group = MPI.COMM_WORLD
        rank, world = group.Get_rank(), group.Get_size()
    comm = mzd.communicator(group)
    path = os.path.join(folder, "dist.zip")
    if scenario == "save":
        s1 = mzd.save(path, "step-1", staged(rank, world, 1, torch), group=comm, durable=False)
        assert s1.blobs_written == 3, s1
        s2 = mzd.save(path, "step-2", staged(rank, world, 2, torch), group=comm, durable=False)
        assert s2.appended and s2.blobs_deduplicated == 1 and s2.blobs_written == 2, s2
    elif scenario == "background":
        futures = []
        for version in (1, 2):
            tensors = staged(rank, world, version, torch)
            futures.append(mzd.save(path, f"step-{version}", tensors, group=group,
                                    durable=False, blocking=False))
            for value in tensors.values():  # the next training step: must not reach the archive
                block = value.value if isinstance(value, mzd.Shard) else value
                block[...] = -7
        assert not futures[0].cancel()
        assert comm.broadcast(b"training goes on", 0) == b"training goes on"
        s1, s2 = (f.result(timeout=120) for f in futures)
        assert s1.blobs_written == 3, s1
        assert s2.appended and s2.blobs_deduplicated == 1 and s2.blobs_written == 2, s2
    elif scenario in ("invalid", "background-invalid"):
        blocking = scenario == "invalid"
        mzd.save(path, "base", staged(rank, world, 1, torch), group=comm, durable=False)
        before = open(path, "rb").read()
        rows = np.ones((3, 6), np.float32)
        try:
            result = mzd.save(path, "bad", {"w": mzd.Shard(rows, (4, 6), (min(rank, 1), 0))},
                              group=comm if blocking else group, durable=False, blocking=blocking)
            if not blocking:
                result.result(timeout=120)
        except modelzip.Error as e:
            message = str(e)
        else:
            raise AssertionError("an overlapping save succeeded")
        assert "overlap" in message, message
        assert "failed on rank 0" in message, message
        assert comm.broadcast(message.encode(), 0).decode() == message
        assert open(path, "rb").read() == before
        assert sorted(f for f in os.listdir(folder) if not f.endswith("-lock")) == ["dist.zip"]
    comm.barrier()
    if engine == "torch":
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
