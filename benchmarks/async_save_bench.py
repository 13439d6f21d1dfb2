#!/usr/bin/python3
"""Background saves (modelzip.save_async) beside synchronous saves and one
memcpy of the same bytes, in one run.

A model of 200 float32 tensors (1 GiB by default) is saved as a new tag of
an archive in a scratch folder, each way --reps times (the archive removed
between runs, so every save writes the full size):

  memcpy          numpy copies of every tensor into buffers allocated once
                  beforehand (the bytes a snapshot must move), one thread
  memcpy (fresh)  the same into new buffers (page faults included)
  raw write       one sequential os.write() per tensor into a fresh file
                  (the floor issue 32 compares a non-durable save with where
                  safetensors is missing); + fsync: then fsync file and folder
  safetensors     safetensors.numpy.save_file, where importable
  save            modelzip.save, durable=False (and durable=True with --durable;
                  save_async too) (total time), with the default dedup=True
                  (every blob's CRC-32 computed before the write) and dedup=False
                  (CRC-32 computed while writing); these rows and the raw
                  writes run in turn within each repetition
  save_async      time until save_async returns (blocking) and until
                  result() (total); first = a fresh staging area, reused =
                  the staging area of the previous save (the steady state of a
                  training loop)

Goal of issue 32: blocking time <= 1.5x memcpy. Fastest and median of the
repetitions are printed; compare rows only within one run.

--train adds the training-loop row (needs torch): steps per second of a
small MLP (about --train-mib MiB of parameters and Adam state) training for
--steps steps (batch --batch) with a checkpoint (modelzip.torch.save_checkpoint) every
--every steps: none, synchronous, background (blocking=False).

Usage: PYTHONPATH=build/src/python benchmarks/async_save_bench.py
       [--mib 1024] [--reps 5] [--dir DIR] [--train] [--durable]
"""
import argparse
import os
import shutil
import statistics
import tempfile
import time

import numpy as np

import modelzip

MiB = 1 << 20


def model(total_mib, count=200):
    rng = np.random.default_rng(1)
    per = total_mib * MiB // count // 4
    return {f"layer{i:03d}.weight": rng.standard_normal(per, dtype=np.float32)
            for i in range(count)}


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def row(name, seconds, gib, baseline=None):
    fastest, median = min(seconds), statistics.median(seconds)
    ratio = f"  {fastest / baseline:5.2f}x memcpy" if baseline else ""
    print(f"{name:<34} fastest {fastest * 1000:8.1f} ms  median {median * 1000:8.1f} ms"
          f"  {gib / fastest:6.2f} GiB/s{ratio}", flush=True)


def bench_saves(args, folder):
    arrays = model(args.mib)
    nbytes = sum(a.nbytes for a in arrays.values())
    gib = nbytes / (1 << 30)
    print(f"{len(arrays)} tensors, {nbytes / MiB:.0f} MiB, {os.cpu_count()} cores, "
          f"folder {folder}; {args.reps} repetitions", flush=True)
    path = os.path.join(folder, "bench.zip")

    def fresh_archive():
        if os.path.exists(path):
            os.remove(path)

    targets = {k: np.empty_like(v) for k, v in arrays.items()}
    copy, copy_fresh = [], []
    for _ in range(args.reps):
        copy.append(timed(lambda: [np.copyto(targets[k], v) for k, v in arrays.items()])[0])
        copy_fresh.append(timed(lambda: [v.copy() for v in arrays.values()])[0])
    memcpy = min(copy)
    row("memcpy (buffers allocated before)", copy, gib)
    row("memcpy (fresh buffers)", copy_fresh, gib, memcpy)

    raw_path = os.path.join(folder, "raw.bin")

    def raw_write(sync):
        if os.path.exists(raw_path):
            os.remove(raw_path)
        fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            for a in arrays.values():
                view = memoryview(a).cast("B")
                while view:
                    view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if sync:
            dfd = os.open(folder, os.O_RDONLY)
            os.fsync(dfd)
            os.close(dfd)

    try:
        from safetensors.numpy import save_file
    except ImportError:
        save_file = None
    for durable in ((False, True) if args.durable else (False,)):
        candidates = {f"raw write{' + fsync' if durable else ''}": lambda: raw_write(durable)}
        if save_file is not None and not durable:
            candidates["safetensors save_file"] = lambda: save_file(arrays, raw_path)
        for dedup in (True, False):
            candidates[f"save durable={durable} dedup={dedup}"] = (
                lambda dedup=dedup: modelzip.save(path, "t", arrays, durable=durable, dedup=dedup))
        times = {name: [] for name in candidates}
        for _ in range(args.reps):
            for name, fn in candidates.items():
                fresh_archive()
                if os.path.exists(raw_path):
                    os.remove(raw_path)
                os.sync()  # no writeback of the previous candidate's bytes during this one
                times[name].append(timed(fn)[0])
        base = min(next(iter(times.values())))
        for name, seconds in times.items():
            row(name, seconds, gib, memcpy)
            print(f"{'':<34} fastest {base / min(seconds):5.2f}x {next(iter(times))}", flush=True)

        # A save with keep_staging=False frees the idle staging memory: the
        # first repetition below starts without any.
        modelzip.save_async(os.path.join(folder, f"tiny-{durable}.zip"), "t",
                            {"x": np.zeros(1)}, durable=False, keep_staging=False).result()
        first_block, first_total, block, total = [], [], [], []
        for rep in range(args.reps):
            fresh_archive()
            keep = rep > 0  # the first repetition starts without a staging area
            start = time.perf_counter()
            future = modelzip.save_async(path, "t", arrays, durable=durable)
            returned = time.perf_counter()
            future.result()
            done = time.perf_counter()
            (block if keep else first_block).append(returned - start)
            (total if keep else first_total).append(done - start)
        row(f"save_async durable={durable} blocking, first", first_block, gib, memcpy)
        if block:
            row(f"save_async durable={durable} blocking, reused", block, gib, memcpy)
        row(f"save_async durable={durable} total, first", first_total, gib, memcpy)
        if total:
            row(f"save_async durable={durable} total, reused", total, gib, memcpy)


def bench_training(args, folder):
    import torch
    import modelzip.torch as mzt
    torch.manual_seed(0)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    width = int((args.train_mib * MiB / 4 / 3 / 4) ** 0.5)  # 4 layers; weights, Adam M and V
    layers = []
    for _ in range(4):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    net = torch.nn.Sequential(*layers)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-4)
    x = torch.randn(args.batch, width)
    params = sum(p.numel() for p in net.parameters())
    print(f"training loop: MLP of {params * 4 / MiB:.0f} MiB of parameters (+ Adam state), "
          f"{args.steps} steps, a checkpoint every {args.every}, "
          f"{torch.get_num_threads()} torch threads", flush=True)

    def loop(mode):
        path = os.path.join(folder, f"train-{mode}.zip")
        if os.path.exists(path):
            os.remove(path)
        pending = []
        start = time.perf_counter()
        for step in range(1, args.steps + 1):
            optimizer.zero_grad()
            net(x).square().mean().backward()
            optimizer.step()
            if mode != "none" and step % args.every == 0:
                result = mzt.save_checkpoint(path, f"step-{step}", net, optimizer,
                                             durable=args.durable, blocking=(mode == "sync"))
                if mode == "background":
                    pending.append(result)
        for f in pending:
            f.result()
        return args.steps / (time.perf_counter() - start)

    loop("none")  # warm-up
    rates = {mode: loop(mode) for mode in ("none", "sync", "background")}
    print("steps/s: " + ", ".join(f"{m} {r:.1f} ({r / rates['none']:.2f}x none)"
                                  for m, r in rates.items()), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--durable", action="store_true", help="also durable saves")
    parser.add_argument("--train", action="store_true", help="the training-loop row (torch)")
    parser.add_argument("--train-mib", type=int, default=256)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--torch-threads", type=int, default=0,
                        help="torch.set_num_threads (0: torch's default)")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--skip-saves", action="store_true")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="async-save-bench-", dir=args.dir)
    try:
        if not args.skip_saves:
            bench_saves(args, folder)
        if args.train:
            bench_training(args, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
