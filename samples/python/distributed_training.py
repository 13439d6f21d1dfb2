"""Trains a small MLP with Adam in several gloo processes, its parameters and
Adam state sharded over the processes, checkpointing every step into ONE
modelzip archive (parameters, optimizer state, training config), then
resumes on a different number of processes, bit-exactly.

    python3 distributed_training.py model.zip --procs 4 --tp 2 --steps 3
    python3 distributed_training.py model.zip --procs 2 --tp 1 --steps 2 --resume
    python3 distributed_training.py model.zip --demo   # both, and an uninterrupted
                                                       # run on 3 processes to compare

The model: y = fc2(relu(fc1(x))). Each parameter is sharded over --tp ranks
the way tensor parallelism splits it: fc1 by output rows (a row shard), fc2
by input columns (a column shard, strided in the archive); fc2.bias is
replicated. procs/tp replicas hold the same shards. Each rank keeps an Adam
optimizer over its own blocks only, so Adam's exp_avg and exp_avg_sq are
sharded exactly like the parameters (ZeRO/FSDP style).

A step: the ranks gather the whole weights from the shards (FSDP style), each
computes the gradients of its microbatches of the global batch, the
gradients are summed in microbatch order, and each rank applies Adam to its
blocks. Every rank thus computes the same bits whatever the layout, which
is what makes a resume on another number of processes bit-exact.

Checkpoint: the replicas with dp rank 0 hold every block exactly once and
pass it, with their optimizer, to mzd.save_checkpoint; each rank writes only
its bytes, each parameter and each state lands as one ordinary entry, and
the root writes the training config. Resuming, each rank loads just the
blocks of parameters and Adam state its (possibly different) layout needs
(mzd.load_checkpoint).
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
MICROBATCHES, MICROBATCH = 12, 8  # the global batch of a step: at most 12 processes
GLOBAL = {"fc1.weight": (HIDDEN, IN), "fc1.bias": (HIDDEN,), "fc2.weight": (OUT, HIDDEN),
          "fc2.bias": (OUT,)}


def layout(rank, tp):
    """(tp rank, dp rank) of a process."""
    return rank % tp, rank // tp


def blocks(tp_rank, tp):
    """(offset, shape) of this tp rank's block of every parameter."""
    return {
        "fc1.weight": mzd.split(GLOBAL["fc1.weight"], 0, tp_rank, tp),
        "fc1.bias": mzd.split(GLOBAL["fc1.bias"], 0, tp_rank, tp),
        "fc2.weight": mzd.split(GLOBAL["fc2.weight"], 1, tp_rank, tp),
        "fc2.bias": ([0], [OUT]),
    }


def index_of(offset, shape):
    return tuple(slice(o, o + s) for o, s in zip(offset, shape))


def batch(step, micro):
    """Microbatch `micro` of step `step`: synthetic data of a fixed teacher."""
    g = torch.Generator().manual_seed(1000 * step + micro)
    x = torch.randn(MICROBATCH, IN, generator=g)
    teacher = torch.Generator().manual_seed(7)
    w = torch.randn(OUT, IN, generator=teacher)
    return x, torch.tanh(x @ w.T)


def gather_weights(params, mine, tp, tp_rank, dp_rank):
    """The whole parameters, assembled from the blocks of the dp rank 0 replica."""
    everyone = [None] * dist.get_world_size()
    dist.all_gather_object(everyone, (tp_rank, dp_rank, {n: p.detach() for n, p in params.items()}))
    full = {n: torch.zeros(s) for n, s in GLOBAL.items()}
    for t, d, parts in everyone:
        if d == 0:
            for n, block in parts.items():
                full[n][index_of(*blocks(t, tp)[n])] = block
    return full


def gradients(full, step, rank, procs):
    """(mean loss, gradients) of the global batch, summed over microbatches in order."""
    mine = {}
    for m in range(rank, MICROBATCHES, procs):
        w = {n: t.clone().requires_grad_(True) for n, t in full.items()}
        x, y = batch(step, m)
        out = torch.relu(x @ w["fc1.weight"].T + w["fc1.bias"]) @ w["fc2.weight"].T + w["fc2.bias"]
        loss = torch.mean((out - y) ** 2)
        loss.backward()
        mine[m] = (loss.item(), {n: t.grad for n, t in w.items()})
    everyone = [None] * procs
    dist.all_gather_object(everyone, mine)
    by_micro = {m: g for part in everyone for m, g in part.items()}
    total = {n: torch.zeros(s) for n, s in GLOBAL.items()}
    for m in range(MICROBATCHES):
        for n in total:
            total[n] += by_micro[m][1][n]
    loss = sum(by_micro[m][0] for m in range(MICROBATCHES)) / MICROBATCHES
    return loss, {n: g / MICROBATCHES for n, g in total.items()}


def shards(params, mine):
    return {n: mzd.Shard(p, GLOBAL[n], mine[n][0]) for n, p in params.items()}


def worker(rank, procs, tp, steps, resume, archive, port):
    torch.set_num_threads(1)  # the same arithmetic in every process
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=procs, timeout=datetime.timedelta(seconds=120))
    tp_rank, dp_rank = layout(rank, tp)
    mine = blocks(tp_rank, tp)
    params = {n: torch.nn.Parameter(torch.zeros(shape)) for n, (_, shape) in mine.items()}
    optimizer = torch.optim.Adam(params.values(), lr=0.01)

    if resume:
        # Each rank reads only its blocks of parameters and Adam state,
        # whatever layout wrote them.
        start = mzd.load_checkpoint(archive, None, shards(params, mine), optimizer).iteration
    else:
        start = 0
        g = torch.Generator().manual_seed(0)
        full = {n: torch.randn(*s, generator=g) * 0.3 for n, s in GLOBAL.items()}
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(full[n][index_of(*mine[n])])

    for step in range(start, start + steps):
        full = gather_weights(params, mine, tp, tp_rank, dp_rank)
        loss, grads = gradients(full, step, rank, procs)
        for n, p in params.items():
            p.grad = grads[n][index_of(*mine[n])].clone()
        optimizer.step()
        if rank == 0:
            print(f"step {step}: loss {loss:.4f}", flush=True)
        # Checkpoint: the dp rank 0 replicas hold every block exactly once.
        staged = {}
        if dp_rank == 0:
            staged = shards(params, mine)
            if tp_rank != 0:
                del staged["fc2.bias"]  # replicated: tp rank 0 writes it
        mzd.save_checkpoint(archive, f"step-{step}", staged, optimizer if dp_rank == 0 else None)

    # The last checkpoint holds exactly this process's parameters and Adam state.
    check = {n: torch.nn.Parameter(torch.zeros(shape)) for n, (_, shape) in mine.items()}
    check_optimizer = torch.optim.Adam(check.values(), lr=0.01)
    state = mzd.load_checkpoint(archive, None, shards(check, mine), check_optimizer)
    assert state.iteration == start + steps, state
    for n, p in params.items():
        assert torch.equal(check[n], p), n
        for key, value in optimizer.state[p].items():
            assert torch.equal(check_optimizer.state[check[n]][key], value), (n, key)
    dist.barrier()
    dist.destroy_process_group()


def run(archive, procs, tp, steps, resume):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(procs, tp, steps, resume, archive, port), nprocs=procs)


def same_checkpoint(a, b, tag):
    """Whether tag `tag` of archives a and b holds the same bits (parameters and
    optimizer state) and counters."""
    with modelzip.open(a) as x, modelzip.open(b) as y:
        same = x.training_config(tag)["iteration_count"] == y.training_config(tag)["iteration_count"]
        for p in x.params(tag):
            same = same and x.tensor(p.name, tag).tobytes() == y.tensor(p.name, tag).tobytes()
        for s in x.updater_states(tag):
            same = same and (x.updater_state(s.name, s.state, tag).tobytes() ==
                             y.updater_state(s.name, s.state, tag).tobytes())
        return same and len(x.updater_states(tag)) == len(y.updater_states(tag)) > 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("archive")
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--tp", type=int, default=2, help="ranks each parameter is sharded over")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--demo", action="store_true",
                    help="train 3 steps on 4 processes (tp 2, dp 2), resume 2 on 2 (tp 1, dp 2), "
                         "and compare with 5 uninterrupted steps on 3 processes (tp 3)")
    args = ap.parse_args()
    if args.procs % args.tp or args.procs > MICROBATCHES:
        ap.error(f"--procs must be a multiple of --tp and at most {MICROBATCHES}")
    if not args.demo:
        run(args.archive, args.procs, args.tp, args.steps, args.resume)
    else:
        reference = args.archive + ".uninterrupted.zip"
        for path in (args.archive, reference):
            if os.path.exists(path):
                os.remove(path)
        run(args.archive, 4, 2, 3, False)
        run(args.archive, 2, 1, 2, True)
        run(reference, 3, 3, 5, False)
        assert same_checkpoint(args.archive, reference, "step-4"), "the resumed run differs"
        print("resumed on another world size: bit-exact with the uninterrupted run")
    with modelzip.open(args.archive) as a:
        problems = a.verify()
        print(f"{args.archive}: tags {a.tags}; {len(a.params())} parameters and "
              f"{len(a.updater_states())} optimizer states per tag; verify: {problems or 'ok'}")
        if args.demo:
            assert a.tags == [f"step-{i}" for i in range(5)] and not problems


if __name__ == "__main__":
    main()
