"""One rank of the writes-in-flight kill trials (kill_trials.py starts three
of them: independent gloo processes, or under mpirun for mpi4py).

usage: kill_worker.py {torch|mpi} ARCHIVE STEPS ROWS COLS [RANK WORLD INIT_FILE]

Every step, the ranks save tag step-K of a float32 matrix ROWS x COLS split
by rows, unevenly (rank 0 holds few rows, the last rank most), so that the
last rank is still writing when the others are done. With mpi4py the
communicator's time-out is short (the trials kill a rank). On a failed save
the rank prints "save failed: <type>: <message>" and exits with 3;
otherwise 0 after STEPS saves. Each rank writes its pid to ARCHIVE.rank<R>.pid
first, so that the trial can kill it.
"""
import datetime
import os
import sys

import numpy as np

import modelzip
import modelzip.distributed as mzd


def rows_of(rank, world, rows):
    """Uneven row split: rank r gets a share proportional to r + 1."""
    def cut(r):
        return rows * (r * (r + 1) // 2) // (world * (world + 1) // 2)
    return cut(rank), cut(rank + 1)


def main():
    engine, path = sys.argv[1:3]
    steps, rows, cols = map(int, sys.argv[3:6])
    if engine == "torch":
        import torch.distributed as dist
        rank, world = int(sys.argv[6]), int(sys.argv[7])
        dist.init_process_group("gloo", init_method="file://" + sys.argv[8], rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=30))
        comm = mzd.communicator()
    else:
        from mpi4py import MPI
        comm = mzd.MPICommunicator(MPI.COMM_WORLD, timeout=5.0)
        rank, world = comm.rank(), comm.size()
    with open(f"{path}.rank{rank}.pid", "w") as f:
        f.write(str(os.getpid()))
    first, last = rows_of(rank, world, rows)
    for step in range(steps):
        block = np.full((last - first, cols), float(step), dtype=np.float32)
        block[:, 0] = np.arange(first, last, dtype=np.float32)
        try:
            mzd.save(path, f"step-{step}", {"w": mzd.Shard(block, (rows, cols), (first, 0))},
                     group=comm, dedup=False)
        except BaseException as e:  # noqa: BLE001 - the trial reads what each rank saw
            kind = "modelzip.Error" if isinstance(e, modelzip.Error) else type(e).__name__
            print(f"save failed: {kind}: {e}", flush=True)
            os._exit(3)  # no MPI_Finalize or gloo shutdown waiting for the lost rank
        print(f"saved step-{step}", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
