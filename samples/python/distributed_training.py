"""Trains a small MLP data-parallel and tensor-parallel in several gloo
processes, checkpointing every step into ONE modelzip archive, then resumes
on a different number of processes.

    python3 distributed_training.py model.zip --procs 4 --tp 2 --steps 4
    python3 distributed_training.py model.zip --procs 2 --tp 1 --steps 3 --resume
    python3 distributed_training.py model.zip --demo   # both: 4 procs, then 2 (a fresh archive)

The model: y = fc2(relu(fc1(x))). With tensor parallelism tp, fc1 is split
by output rows (each rank holds 32/tp rows: a row shard) and fc2 by input
columns (a column shard, strided in the archive); the partial outputs are
summed over the tp group. Data parallelism: the dp = procs/tp replicas see
different batches and average their gradients. Every step, the ranks with
dp rank 0 commit their shards of every parameter as one tag (mzd.save): each
writes only its bytes, and each parameter lands as one ordinary entry.
Resuming, each rank loads just the blocks its (possibly different) tp
layout needs.
"""
import argparse
import datetime
import os
import socket

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import modelzip
import modelzip.distributed as mzd

IN, HIDDEN, OUT = 16, 32, 4


def layout(rank, tp):
    """(tp rank, dp rank) of a process."""
    return rank % tp, rank // tp


def blocks(tp_rank, tp):
    """(offset, shape) of this tp rank's block of every parameter."""
    return {
        "fc1.weight": mzd.split((HIDDEN, IN), 0, tp_rank, tp),
        "fc1.bias": mzd.split((HIDDEN,), 0, tp_rank, tp),
        "fc2.weight": mzd.split((OUT, HIDDEN), 1, tp_rank, tp),
        "fc2.bias": ([0], [OUT]),
    }


GLOBAL = {"fc1.weight": (HIDDEN, IN), "fc1.bias": (HIDDEN,), "fc2.weight": (OUT, HIDDEN),
          "fc2.bias": (OUT,)}


def batch(step, dp_rank):
    """Synthetic regression data of a fixed teacher, different per replica."""
    g = torch.Generator().manual_seed(1000 * step + dp_rank)
    x = torch.randn(64, IN, generator=g)
    teacher = torch.Generator().manual_seed(7)
    w = torch.randn(OUT, IN, generator=teacher)
    return x, torch.tanh(x @ w.T)


def worker(rank, procs, tp, steps, resume, archive, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=procs, timeout=datetime.timedelta(seconds=120))
    tp_rank, dp_rank = layout(rank, tp)
    dp = procs // tp
    tp_groups = [dist.new_group([d * tp + t for t in range(tp)]) for d in range(dp)]
    dp_groups = [dist.new_group([d * tp + t for d in range(dp)]) for t in range(tp)]
    tp_group, dp_group = tp_groups[dp_rank], dp_groups[tp_rank]
    mine = blocks(tp_rank, tp)

    if resume:
        # Each rank reads only its blocks, whatever layout wrote them.
        tag = modelzip.open(archive).tags[-1]
        start = int(tag.split("-")[1]) + 1
        loaded = mzd.load(archive, mine, tag=tag)
        params = {n: torch.tensor(np.array(a), requires_grad=True) for n, a in loaded.items()}
    else:
        start = 0
        g = torch.Generator().manual_seed(0)
        full = {n: torch.randn(*s, generator=g) * 0.3 for n, s in GLOBAL.items()}
        params = {}
        for n, (off, shape) in mine.items():
            index = tuple(slice(o, o + s) for o, s in zip(off, shape))
            params[n] = full[n][index].clone().requires_grad_(True)

    for step in range(start, start + steps):
        x, y = batch(step, dp_rank)
        h = torch.relu(x @ params["fc1.weight"].T + params["fc1.bias"])
        partial = h @ params["fc2.weight"].T
        out = partial.detach().clone()
        dist.all_reduce(out, group=tp_group)  # sum of the tp partial outputs
        # The forward value is the reduced sum itself, the same bits on every
        # tp rank (partial - partial.detach() is exactly 0 and carries the
        # gradient to this rank's partial). Writing it partial + (sum -
        # partial) rounded differently per rank, so the replicated fc2.bias
        # drifted apart on the tp ranks.
        out = out + (partial - partial.detach()) + params["fc2.bias"]
        loss = torch.mean((out - y) ** 2)
        loss.backward()
        with torch.no_grad():
            for n, p in params.items():  # fc2.bias: replicated over tp, same gradient
                dist.all_reduce(p.grad, group=dp_group)
                p -= 0.1 * p.grad / dp
                p.grad = None
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        if rank == 0:
            print(f"step {step}: loss {mean_loss.item() / procs:.4f}", flush=True)
        # Checkpoint: the dp rank 0 replicas hold every block exactly once.
        staged = {}
        if dp_rank == 0:
            for n, p in params.items():
                if n == "fc2.bias":
                    if tp_rank == 0:
                        staged[n] = p.detach()
                else:
                    staged[n] = mzd.Shard(p.detach(), GLOBAL[n], mine[n][0])
        mzd.save(archive, f"step-{step}", staged)

    # The last checkpoint holds exactly this process's parameters.
    last = mzd.load(archive, mine)
    for n, p in params.items():
        assert np.array_equal(last[n], p.detach().numpy()), n
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("archive")
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--demo", action="store_true",
                    help="train 3 steps on 4 processes (tp 2, dp 2), resume 2 on 2 (tp 1, dp 2)")
    args = ap.parse_args()
    if args.procs % args.tp:
        ap.error("--procs must be a multiple of --tp")
    runs = [(args.procs, args.tp, args.steps, args.resume)]
    if args.demo:
        if os.path.exists(args.archive):
            os.remove(args.archive)
        runs = [(4, 2, 3, False), (2, 1, 2, True)]
    for procs, tp, steps, resume in runs:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(worker, args=(procs, tp, steps, resume, args.archive, port), nprocs=procs)
    with modelzip.open(args.archive) as a:
        problems = a.verify()
        print(f"{args.archive}: tags {a.tags}; {len(a.params())} parameters per tag; "
              f"verify: {problems or 'ok'}")
        if args.demo:
            assert a.tags == [f"step-{i}" for i in range(5)] and not problems


if __name__ == "__main__":
    main()
