#!/usr/bin/env python3
"""N-rank durable saves side by side, in one run: what a training loop's checkpoint costs it.

Every rank (torch.multiprocessing, spawn; one gloo process group) owns MIB MiB of float32 tensors
(8 tensors) and saves them, each method once per repetition, between barriers:

- raw files + fsync: every rank writes its bytes into its own file and fsyncs it (the floor);
- torch.distributed.checkpoint save, and async_save (the time it blocks the caller, and until
  its future is done), where this torch has them (2.2+ / 2.3+);
- modelzip.distributed.save (durable, one archive), and with blocking=False: the time the call
  blocks (the snapshot into staging memory) and until result() returns.

A method's time is the slowest rank's, from the barrier before to the barrier after (for the
blocking rows: until the call returns on every rank). Prints one row per method (median over
--reps, GiB/s of all ranks' bytes) and, last, the headline ratio of issue 32: modelzip's
background-save blocking time over DCP async_save's (goal <= 0.25 on a many-core machine).

Usage: PYTHONPATH=build/src/python python3 benchmarks/dist_save_bench.py --ranks 16 --mib 128
"""
import argparse
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank: int, world: int, args: argparse.Namespace, port: int, queue) -> None:
    import warnings
    warnings.filterwarnings("ignore")  # torch's deprecation notes, once per rank
    import torch
    import torch.distributed as dist
    import datetime
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=args.timeout))
    torch.set_num_threads(1)
    torch.manual_seed(rank)
    per = args.mib * 2**20 // 8 // 4
    state = {f"r{rank}.w{i}": torch.randn(per) for i in range(8)}
    import modelzip.distributed as mzd
    try:
        import torch.distributed.checkpoint as dcp
    except Exception:  # noqa: BLE001 - an old torch: the DCP rows say why they are missing
        dcp = None
    base = args.dir

    def raw(r):
        folder = f"{base}/raw{r}"
        os.makedirs(folder, exist_ok=True)
        with open(f"{folder}/{rank}.bin", "wb") as f:
            for t in state.values():
                f.write(memoryview(t.numpy()))
            f.flush()
            os.fsync(f.fileno())

    def mz_sync(r):
        mzd.save(f"{base}/m{r}.zip", "t", state)

    pending = []

    def mz_background(r):
        pending.append(mzd.save(f"{base}/mb{r}.zip", "t", state, blocking=False))

    def mz_background_wait(r):
        pending.pop().result()

    def dcp_save(r):
        dcp.save(state, checkpoint_id=f"{base}/dcp{r}")

    def dcp_async(r):
        pending.append(dcp.async_save(state, checkpoint_id=f"{base}/dcpa{r}"))

    def dcp_async_wait(r):
        pending.pop().result()

    # (row, the call timed for it, a call after it that completes it: timed with it for "total")
    methods = [("raw files + fsync", raw, None),
               ("modelzip.distributed.save", mz_sync, None),
               ("modelzip blocking=False", mz_background, mz_background_wait)]
    skipped = {}
    if dcp is None or not hasattr(dcp, "save"):
        skipped["DCP save / async_save"] = f"torch {torch.__version__} has no " \
            "torch.distributed.checkpoint.save (2.2+)"
    else:
        methods.append(("DCP save", dcp_save, None))
        if hasattr(dcp, "async_save"):
            methods.append(("DCP async_save", dcp_async, dcp_async_wait))
        else:
            skipped["DCP async_save"] = f"torch {torch.__version__} has no async_save (2.3+)"
    times = {}
    for r in range(args.reps):
        for name, call, finish in methods:
            dist.barrier()
            start = time.perf_counter()
            try:
                call(r)
                dist.barrier()
                blocked = time.perf_counter() - start
                if finish is not None:
                    finish(r)
                    dist.barrier()
                    times.setdefault(name + " (blocking)", []).append(blocked)
                    times.setdefault(name + " (total)", []).append(time.perf_counter() - start)
                else:
                    times.setdefault(name, []).append(blocked)
            except Exception as e:  # noqa: BLE001 - reported as the row's failure
                times.setdefault(name, []).append(f"failed: {e!r}"[:300])
                pending.clear()
            if rank == 0:  # progress, so that a run cut short still shows where it was
                print(f"repetition {r + 1}: {name}: {time.perf_counter() - start:.3f} s", flush=True)
        dist.barrier()
        if rank == 0:
            shutil.rmtree(base, ignore_errors=True)
            os.makedirs(base, exist_ok=True)
        dist.barrier()
    if rank == 0:
        queue.put((times, skipped))
    dist.destroy_process_group()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--mib", type=int, default=128, help="MiB per rank")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--dir", default=None, help="folder for the files (default: a temp dir)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds for any collective")
    args = parser.parse_args()
    import torch
    import torch.multiprocessing as mp
    own_dir = args.dir is None
    args.dir = tempfile.mkdtemp(prefix="dist_save_bench_") if own_dir else \
        os.path.join(args.dir, "dist_save_bench")
    os.makedirs(args.dir, exist_ok=True)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, args.ranks, args, port, queue))
             for r in range(args.ranks)]
    for p in procs:
        p.start()
    import queue as queues
    deadline = time.monotonic() + args.timeout * (args.reps + 1)
    try:
        while True:  # a rank that died (an import error, a crash) ends the wait at once
            try:
                times, skipped = queue.get(timeout=2)
                break
            except queues.Empty:
                dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                if dead or time.monotonic() > deadline:
                    print(f"no results: ranks exited with {dead}" if dead else
                          "no results before the deadline", file=sys.stderr)
                    return 1
    finally:
        for p in procs:
            p.join(60)
            if p.is_alive():
                p.kill()
        shutil.rmtree(args.dir, ignore_errors=True)
    total = args.ranks * args.mib * 2**20
    print(f"{args.ranks} ranks x {args.mib} MiB = {total / 2**30:.2f} GiB, durable, "
          f"{args.reps} repetitions, torch {torch.__version__}, {os.cpu_count()} cores")
    print("| method | median | GiB/s | runs |")
    print("|---|---:|---:|---|")
    medians = {}
    for name, runs in times.items():
        good = [t for t in runs if isinstance(t, float)]
        if len(good) < len(runs):
            print(f"| {name} | failed | | {next(t for t in runs if not isinstance(t, float))} |")
            continue
        medians[name] = statistics.median(good)
        print(f"| {name} | {medians[name]:.3f} s | {total / medians[name] / 2**30:.2f} | "
              f"{', '.join(f'{t:.3f}' for t in good)} |")
    for name, why in skipped.items():
        print(f"| {name} | skipped: {why} | | |")
    raw = medians.get("raw files + fsync")
    sync = medians.get("modelzip.distributed.save")
    if raw and sync:
        print(f"modelzip.distributed.save: {raw / sync:.2f}x raw files + fsync")
    ours = medians.get("modelzip blocking=False (blocking)")
    theirs = medians.get("DCP async_save (blocking)")
    if ours and theirs:
        print(f"headline: modelzip background save blocks {ours:.3f} s, DCP async_save {theirs:.3f} s: "
              f"{ours / theirs:.2f}x (goal <= 0.25)")
    else:
        print(f"headline: modelzip background save blocks "
              f"{f'{ours:.3f} s' if ours else 'n/a'}; no DCP async_save row to compare with")
    return 0


if __name__ == "__main__":
    sys.exit(main())
