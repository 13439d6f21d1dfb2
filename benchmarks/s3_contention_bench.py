#!/usr/bin/python3
"""Writers that commit back to back to one s3:// object: how many commits are
refused after the new plans, and what a commit costs, by re-planning policy.

Each run starts W writer processes (--writers, e.g. 2 and 4) that each commit
--commits tags of their own to one new s3:// key, one right after the other
(modelzip.save of a small tensor: an append, server-side copy of the old
object plus the new bytes), against @20minutes/s3rver on 127.0.0.1 behind the
tests' proxy enforcing If-Match / If-None-Match as AWS S3 does
(tests/remote/servers.py, S3Proxy(enforce_conditions=True)); s3rver alone
enforces nothing. A commit refused because another writer came first is
planned again (docs/s3-writes.md, "Concurrent writers") up to the policy's
bound; one still refused after that is counted as refused.

Policies (--policy NAME=REPLANS:BACKOFF, repeatable; the defaults compare
the library's own against the earlier ones): REPLANS is the bound of new
plans (MODELZIP_BENCHMARK_S3_REPLANS), BACKOFF the pause before each new plan
(MODELZIP_BENCHMARK_S3_BACKOFF): "0" none, a number of ms for a random pause
up to that many ms times 2^(plan - 1), "attempt" (the library's default) the
refused attempt's own duration as that base. The policies run interleaved,
run by run, so that the machine's load falls on all alike.

Printed per policy and writer count: commits, refused (%), new plans per
commit, commit latency (median, 90th percentile, of the commits that
succeeded; from the call to its return, new plans and pauses included), and
commits per second over the run (all writers).

With --ranks R each writer is a collective save instead: an mpirun job of R
ranks (mpi4py, modelzip.distributed.save, each rank its rows of the tensor),
W such jobs committing to the one object.

Usage: PYTHONPATH=build/src/python benchmarks/s3_contention_bench.py
       [--writers 2,4] [--commits 8] [--runs 3] [--ranks R] [--build build]
       [--policy ...]
(run from the source folder; needs node/npm and the bindings; --ranks needs
mpirun and mpi4py).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "remote"))

DEFAULT_POLICIES = ["none-3=3:0", "attempt-3=3:attempt", "100ms-3=3:100", "none-6=6:0",
                    "attempt-6=6:attempt"]
CHANGED = "archive changed on the server"


def writer(url, name, commits, start_at, collective):
    """One writer: `commits` saves of its own tags, back to back from
    `start_at` (time.time()); one JSON line per commit on stdout. With
    `collective`, one rank of an mpirun job: the ranks save one tag together
    (modelzip.distributed.save, each rank its rows of the tensor), and rank 0
    prints."""
    import warnings

    import numpy as np

    import modelzip
    weights = np.arange(4096, dtype=np.float32).reshape(64, 64)
    comm = None
    if collective:
        import modelzip.distributed as mzd
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        off, shape = mzd.split(weights.shape, 0, comm.Get_rank(), comm.Get_size())
        staged = {"w": mzd.Shard(weights[off[0]:off[0] + shape[0]], weights.shape, off)}

        def save(tag):
            mzd.save(url, tag, staged, group=comm)
    else:
        def save(tag):
            modelzip.save(url, tag, {"w": weights}, durable=False)
    time.sleep(max(0.0, start_at - time.time()))
    for k in range(commits):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            began = time.perf_counter()
            outcome = "ok"
            try:
                save(f"{name}-{k}")
            except modelzip.Error as e:
                outcome = "refused" if CHANGED in str(e) else f"error: {e}"
            took = time.perf_counter() - began
        plans = sum("planned again" in str(w.message) for w in seen)
        if comm is None or comm.Get_rank() == 0:
            print(json.dumps({"outcome": outcome, "seconds": took, "new_plans": plans,
                              "ended": time.time()}), flush=True)


def one_run(bucket, key, writers, commits, policy_env, ranks):
    """Starts the writers together (with `ranks`, each an mpirun job of that
    many ranks); returns their records and the run's span."""
    env = dict(os.environ, **policy_env)
    if ranks:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    # After every process has imported modelzip (and mpirun started its ranks).
    start_at = time.time() + 1.0 + 0.2 * writers * max(1, ranks) + (2.0 if ranks else 0.0)
    launcher = ["mpirun", "--oversubscribe", "-np", str(ranks)] if ranks else []
    procs = [subprocess.Popen([*launcher, sys.executable, os.path.abspath(__file__), "--writer",
                               f"s3://{bucket}/{key}", f"w{i}", str(commits), repr(start_at),
                               *(["--collective"] if ranks else [])],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(writers)]
    records = []
    for p in procs:
        out, err = p.communicate(timeout=60 + 30 * commits)
        if p.returncode != 0:
            raise SystemExit(f"writer failed ({p.returncode}): {err.decode()}")
        records += [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    span = max(r["ended"] for r in records) - start_at
    return records, span


def parse_policy(text):
    name, _, rest = text.partition("=")
    replans, _, backoff = rest.partition(":")
    env = {"MODELZIP_BENCHMARK_S3_REPLANS": replans}
    if backoff != "attempt":
        env["MODELZIP_BENCHMARK_S3_BACKOFF"] = backoff
    return name, env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--writers", default="2,4")
    ap.add_argument("--commits", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--build", default="build")
    ap.add_argument("--policy", action="append")
    ap.add_argument("--ranks", type=int, default=0,
                    help="each writer a collective save of this many ranks (mpirun, mpi4py)")
    ap.add_argument("--writer", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--collective", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.writer:
        url, name, commits, start_at = args.writer
        writer(url, name, int(commits), float(start_at), args.collective)
        return
    import servers
    policies = [parse_policy(p) for p in (args.policy or DEFAULT_POLICIES)]
    counts = [int(w) for w in args.writers.split(",")]
    folder = tempfile.mkdtemp(prefix="mz-contention-")
    server = servers.S3rverFork(servers.install_s3rver_fork(args.build),
                                os.path.join(folder, "s3rver"), "bench")
    proxy = servers.S3Proxy(server.port, enforce_conditions=True)
    os.environ.update({"AWS_ACCESS_KEY_ID": server.ACCESS_KEY,
                       "AWS_SECRET_ACCESS_KEY": server.SECRET_KEY, "AWS_REGION": "us-east-1",
                       "AWS_ENDPOINT_URL": proxy.endpoint, "MODELZIP_NO_CACHE": "1"})
    results = {}
    try:
        for run in range(args.runs):
            for writers in counts:
                for name, env in policies:
                    records, span = one_run("bench", f"r{run}/{name}/{writers}.zip", writers,
                                            args.commits, env, args.ranks)
                    proxy.clear()
                    r = results.setdefault((name, writers), {"records": [], "span": 0.0})
                    r["records"] += records
                    r["span"] += span
                    print(f"run {run + 1}/{args.runs} {name} x{writers}: "
                          f"{sum(x['outcome'] != 'ok' for x in records)} of {len(records)} "
                          f"refused, {span:.1f} s", file=sys.stderr, flush=True)
    finally:
        proxy.stop()
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{'policy':<14} {'writers' if not args.ranks else f'jobs x{args.ranks}':>7} {'commits':>7} {'refused':>12} {'plans/commit':>12} "
          f"{'median s':>9} {'p90 s':>7} {'commits/s':>9}")
    for (name, writers), r in results.items():
        recs = r["records"]
        ok = sorted(x["seconds"] for x in recs if x["outcome"] == "ok")
        refused = sum(x["outcome"] == "refused" for x in recs)
        other = [x["outcome"] for x in recs if x["outcome"] not in ("ok", "refused")]
        p90 = ok[min(len(ok) - 1, int(0.9 * len(ok)))] if ok else float("nan")
        print(f"{name:<14} {writers:>7} {len(recs):>7} "
              f"{refused:>5} ({100 * refused / len(recs):4.1f}%) "
              f"{sum(x['new_plans'] for x in recs) / len(recs):>12.2f} "
              f"{statistics.median(ok) if ok else float('nan'):>9.3f} {p90:>7.3f} "
              f"{len(ok) / r['span']:>9.2f}")
        for o in other[:3]:
            print(f"  other failure: {o}")


if __name__ == "__main__":
    main()
