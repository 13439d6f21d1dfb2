#!/usr/bin/python3
"""Remote archives beside the local ones and beside curl, in one run.

Writes a 1 GiB archive (tag `small`: 8 tensors of 1 MiB; tag `big`, the
newest: 200 float32 tensors of 5 MiB + 1 small one), serves it with nginx on
127.0.0.1 (tests/remote/servers.py) and measures through the Python API
(modelzip.open / load, i.e. the C++ library):

  - open + list the newest tag: time, requests and bytes (nginx's access log)
  - open + one small tensor: the same
  - full load of the newest tag (zero-copy views of the cache file, every
    byte fetched), cold (empty cache) and warm (second open, same cache)
against the baseline `curl -s -o FILE URL` of the whole file from the same
server, and the local file's open + load. The cold loads also run each
right after a curl run; the median of those paired ratios is printed last
(the machine's load changes less within a pair than across the run).

Write rows (s3:// writers, issue 29), against @20minutes/s3rver on 127.0.0.1
(installed by npm into BUILD/s3rver-fork, as the tests do), in the same run:

  - a new archive of --write-mib MiB (float32 tensors of 8 MiB) saved with
    modelzip.save to s3:// (multipart upload, 8 MiB parts, 4 in flight)
    against the baseline `curl -T` (SigV4, one PUT) of the same archive's
    bytes, each run right after a curl run (paired ratios, as above), and
    against a multipart upload of the same bytes with curl (create, 8 MiB
    parts 4 at once, complete: the server's own multipart cost, its
    CompleteMultipartUpload timed alone);
  - appending a 10 MiB tag to that object: time (against the full upload's)
    and bytes uploaded (WriteStats.bytes_written: UploadPart bodies; the old
    object's bytes are copied server-side);
  - the same two saves collectively by N = 1, 2, 4 ranks (mpirun, mpi4py:
    modelzip.distributed.save; tensor i whole on rank i % N, the 10 MiB
    tensor split by rows), timed on rank 0 between barriers (process start
    and MPI set-up excluded); bytes uploaded are
    CollectiveStats.archive_bytes_written (all ranks' UploadPart bodies);
  - with --sweep, new archives by part size (5 to 32 MiB) and parts in
    flight (2, 4, 8), each paired with a run of the defaults.

Usage: PYTHONPATH=build/src/python benchmarks/remote_bench.py [--dir DIR] [--reps N]
       [--write-mib M] [--build BUILD] [--no-reads] [--no-writes] [--no-ranks] [--sweep]
(run from the source folder; needs nginx, curl, node/npm and the bindings).
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "remote"))
import servers  # noqa: E402

import modelzip  # noqa: E402

MiB = 1 << 20


def make_archive(path):
    rng = np.random.default_rng(1)
    small = {f"s{i}": rng.standard_normal(MiB // 4, dtype=np.float32) for i in range(8)}
    modelzip.save(path, "small", small, durable=False)
    big = {f"layer{i:03d}.weight": rng.standard_normal(5 * MiB // 4, dtype=np.float32)
           for i in range(200)}
    big["bias"] = np.arange(16, dtype=np.float32)
    modelzip.save(path, "big", big, durable=False)


def traffic(server, start):
    time.sleep(0.05)  # nginx logs a request when it has ended
    log = server.log_lines()[start:]
    return len(log), sum(r["bytes_sent"] for r in log)


def timed(fn, server, reps):
    """Median seconds over `reps` runs of fn(), and the traffic of the last."""
    times, req, sent = [], 0, 0
    for _ in range(reps):
        start = len(server.log_lines())
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        req, sent = traffic(server, start)
    return statistics.median(times), req, sent


def paired(fn, baseline, server, reps):
    """Like timed(), with `baseline` (curl) run just before each run of fn:
    also returns the median of the per-pair throughput ratios, which a
    machine whose load changes from minute to minute distorts much less
    than the ratio of two medians taken minutes apart."""
    times, ratios, req, sent = [], [], 0, 0
    for _ in range(reps):
        t_base = timed(baseline, server, 1)[0]
        t, req, sent = timed(fn, server, 1)
        times.append(t)
        ratios.append(t_base / t)
    return statistics.median(times), req, sent, statistics.median(ratios)


def human(n):
    return f"{n / MiB:.2f} MiB" if n >= MiB else f"{n / 1024:.1f} KiB"


def write_tensors(write_mib):
    """The tensors of the write rows: float32 tensors of 8 MiB, and the 10 MiB one appended."""
    rng = np.random.default_rng(2)
    n = max(1, write_mib // 8)
    tensors = {f"w{i:03d}": rng.standard_normal(2 * MiB, dtype=np.float32) for i in range(n)}
    extra = {"new": rng.standard_normal(10 * MiB // 4, dtype=np.float32)}
    return tensors, extra


def rank_worker(url, write_mib):
    """One rank of the N-rank rows (under mpirun): saves the tensors it owns to
    `url`, then appends its rows of the 10 MiB tensor; rank 0 prints
    "RESULT new_s new_bytes append_s append_bytes"."""
    import modelzip.distributed as mzd
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    tensors, extra = write_tensors(write_mib)
    mine = {k: v for i, (k, v) in enumerate(sorted(tensors.items())) if i % world == rank}
    new = extra["new"]
    off, shape = mzd.split(new.shape, 0, rank, world)
    rows = {"new": mzd.Shard(new[off[0]:off[0] + shape[0]], new.shape, off)}
    out = []
    for tag, staged in (("t1", mine), ("t2", rows)):
        comm.Barrier()
        t0 = time.perf_counter()
        stats = mzd.save(url, tag, staged, group=comm)
        comm.Barrier()
        out += [time.perf_counter() - t0, stats.archive_bytes_written]
    if rank == 0:
        print("RESULT", *out, flush=True)


def rank_rows(args, t_curl):
    """The N-rank rows (see the module's doc), beside curl's median time."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    rows = []
    for world in (1, 2, 4):
        runs = []
        for rep in range(args.reps):
            r = subprocess.run(["mpirun", "--oversubscribe", "-np", str(world), sys.executable,
                                os.path.abspath(__file__), "--rank-worker",
                                f"s3://bench/ranks{world}-{rep}.zip", "--write-mib",
                                str(args.write_mib)],
                               env=env, capture_output=True, text=True, timeout=1800)
            if r.returncode != 0:
                raise RuntimeError(f"mpirun -np {world} failed:\n{r.stdout}\n{r.stderr}")
            line = next(x for x in r.stdout.splitlines() if x.startswith("RESULT"))
            runs.append([float(v) for v in line.split()[1:]])
        med = [statistics.median(run[i] for run in runs) for i in range(4)]
        rows.append((world, med))
    for world, (t_new, b_new, t_app, b_app) in rows:
        print(f"| distributed.save, {world} rank(s), new archive | {t_new * 1000:.0f} ms | "
              f"{human(b_new)} | | {t_curl / t_new:.2f}x curl (medians) |")
        print(f"| distributed.save, {world} rank(s), append a 10 MiB tag | {t_app * 1000:.0f} ms "
              f"| {human(b_app)} | | {t_app / t_new:.3f}x the new archive's time |")


PART = 8 * MiB  # modelzip's default part size and parts in flight
PARALLEL = 4


def curl_multipart(fork, parts, key, parallel):
    """Uploads the files `parts` (in order) as one object by multipart upload
    with curl: CreateMultipartUpload, `parallel` UploadParts at once,
    CompleteMultipartUpload. Returns (total seconds, seconds of the
    completion alone): what the server's multipart path costs without
    modelzip."""
    base = ["curl", "-sSf", "--aws-sigv4", "aws:amz:us-east-1:s3",
            "--user", f"{fork.ACCESS_KEY}:{fork.SECRET_KEY}",
            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    url = f"{fork.endpoint}/{fork.bucket}/{key}"

    def run(*more):
        return subprocess.run([*base, *more], check=True, capture_output=True).stdout.decode()

    t0 = time.perf_counter()
    upload_id = re.search(r"<UploadId>([^<]+)</UploadId>", run("-X", "POST", url + "?uploads=")
                          ).group(1)

    def put(number):
        head = run("-D", "-", "-o", os.devnull, "-T", parts[number - 1],
                   f"{url}?partNumber={number}&uploadId={upload_id}")
        return re.search(r"(?im)^etag:\s*(\S+)", head).group(1)

    with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
        etags = list(pool.map(put, range(1, len(parts) + 1)))
    body = "<CompleteMultipartUpload>" + "".join(
        f"<Part><PartNumber>{i}</PartNumber><ETag>{e}</ETag></Part>"
        for i, e in enumerate(etags, 1)) + "</CompleteMultipartUpload>"
    t1 = time.perf_counter()
    run("-X", "POST", "--data-binary", body, "-H", "Content-Type: application/xml",
        f"{url}?uploadId={upload_id}")
    t2 = time.perf_counter()
    return t2 - t0, t2 - t1


def write_rows(work, args):
    """The s3:// write rows (see the module's doc)."""
    prefix = servers.install_s3rver_fork(args.build)
    fork = servers.S3rverFork(prefix, os.path.join(work, "s3rver"), "bench")
    saved_env = dict(os.environ)
    try:
        os.environ.update(fork.env())
        tensors, extra = write_tensors(args.write_mib)
        n = len(tensors)
        local = os.path.join(work, "write.zip")
        modelzip.save(local, "t1", tensors, durable=False)
        size = os.path.getsize(local)

        def curl(key):
            subprocess.run(["curl", "-sSf", "--aws-sigv4", "aws:amz:us-east-1:s3",
                            "--user", f"{fork.ACCESS_KEY}:{fork.SECRET_KEY}",
                            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-T", local,
                            f"{fork.endpoint}/bench/{key}"], check=True, capture_output=True)

        # The archive cut into modelzip's parts, for curl's multipart baseline.
        parts = []
        with open(local, "rb") as f:
            while chunk := f.read(PART):
                parts.append(os.path.join(work, f"part-{len(parts) + 1}"))
                with open(parts[-1], "wb") as out:
                    out.write(chunk)

        t_curl, t_new, t_app, ratios, sent_new, sent_app = [], [], [], [], 0, 0
        t_multi, t_complete, multi_ratios = [], [], []
        for rep in range(args.reps):
            t0 = time.perf_counter()
            curl(f"curl-{rep}.zip")
            t_curl.append(time.perf_counter() - t0)
            total, complete = curl_multipart(fork, parts, f"multi-{rep}.zip", PARALLEL)
            t_multi.append(total)
            t_complete.append(complete)
            url = f"s3://bench/model-{rep}.zip"
            t0 = time.perf_counter()
            stats = modelzip.save(url, "t1", tensors)
            t_new.append(time.perf_counter() - t0)
            ratios.append(t_curl[-1] / t_new[-1])
            multi_ratios.append(t_multi[-1] / t_new[-1])
            sent_new = stats.bytes_written
            t0 = time.perf_counter()
            stats = modelzip.save(url, "t2", extra)
            t_app.append(time.perf_counter() - t0)
            sent_app = stats.bytes_written
            assert modelzip.open(url).tags == ["t1", "t2"]
        med = statistics.median
        new_bytes = extra["new"].nbytes
        print(f"remote_bench writes: {size / MiB:.0f} MiB archive ({n} tensors of 8 MiB), "
              f"@20minutes/s3rver on 127.0.0.1, medians of {args.reps}")
        print("| operation | time | bytes uploaded | throughput | vs. baseline |")
        print("|---|---:|---:|---:|---:|")
        print(f"| curl -T (SigV4, one PUT) of the archive (baseline) | {med(t_curl) * 1000:.0f} ms"
              f" | {human(size)} | {size / med(t_curl) / MiB:.0f} MiB/s | |")
        print(f"| curl multipart upload of the archive: {len(parts)} parts of {PART // MiB} MiB, "
              f"{PARALLEL} at once (baseline) | {med(t_multi) * 1000:.0f} ms | {human(size)} | "
              f"{size / med(t_multi) / MiB:.0f} MiB/s | |")
        print(f"| of which CompleteMultipartUpload | {med(t_complete) * 1000:.0f} ms | | | |")
        print(f"| modelzip.save to s3://, new archive | {med(t_new) * 1000:.0f} ms | "
              f"{human(sent_new)} | {size / med(t_new) / MiB:.0f} MiB/s | "
              f"{med(ratios):.2f}x curl -T, {med(multi_ratios):.2f}x curl multipart (paired) |")
        print(f"| modelzip.save to s3://, append a 10 MiB tag | {med(t_app) * 1000:.0f} ms | "
              f"{human(sent_app)} ({sent_app / new_bytes:.2f}x the new tensor) | | "
              f"{med(t_app) / med(t_new):.3f}x the new archive's time |")
        if not args.no_ranks:
            rank_rows(args, med(t_curl))
        if args.sweep:
            print(f"new archive by part size and parts in flight (MODELZIP_S3_PART_SIZE, "
                  f"MODELZIP_S3_PARTS_IN_FLIGHT), medians of {args.reps}, paired ratio to "
                  f"the default (8 MiB, 4) run just before each")
            print("| part size | in flight | time | vs. 8 MiB x 4 (paired) |")
            print("|---:|---:|---:|---:|")

            def save_new(key, part, flight):
                os.environ["MODELZIP_S3_PART_SIZE"] = f"{part}M"
                os.environ["MODELZIP_S3_PARTS_IN_FLIGHT"] = str(flight)
                t0 = time.perf_counter()
                modelzip.save(f"s3://bench/{key}", "t1", tensors)
                return time.perf_counter() - t0

            for part in (5, 8, 16, 32):
                for flight in (2, 4, 8):
                    times, pair = [], []
                    for rep in range(args.reps):
                        base = save_new(f"sweep-base-{part}-{flight}-{rep}.zip", 8, 4)
                        times.append(save_new(f"sweep-{part}-{flight}-{rep}.zip", part, flight))
                        pair.append(base / times[-1])
                    print(f"| {part} MiB | {flight} | {med(times) * 1000:.0f} ms | "
                          f"{med(pair):.2f}x |")
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        fork.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--write-mib", type=int, default=1024)
    ap.add_argument("--build", default="build")
    ap.add_argument("--no-reads", action="store_true")
    ap.add_argument("--no-writes", action="store_true")
    ap.add_argument("--no-ranks", action="store_true")
    ap.add_argument("--rank-worker", metavar="URL", help=argparse.SUPPRESS)
    ap.add_argument("--sweep", action="store_true",
                    help="also time new archives by part size and parts in flight")
    args = ap.parse_args()
    if args.rank_worker:
        rank_worker(args.rank_worker, args.write_mib)
        return
    work = tempfile.mkdtemp(prefix="remote-bench-", dir=args.dir)
    if not args.no_writes:
        try:
            write_rows(work, args)
        finally:
            if args.no_reads:
                shutil.rmtree(work, ignore_errors=True)
    if args.no_reads:
        return
    server = None
    try:
        www = os.path.join(work, "www")
        os.makedirs(www)
        path = os.path.join(www, "model.zip")
        make_archive(path)
        size = os.path.getsize(path)
        server = servers.Nginx(os.path.join(work, "nginx"), www)
        url = server.url("model.zip")
        cache = os.path.join(work, "cache")
        os.environ.pop("MODELZIP_NO_CACHE", None)

        def fresh_cache():
            shutil.rmtree(cache, ignore_errors=True)
            os.environ["MODELZIP_CACHE_DIR"] = cache

        rows = []
        # Baseline: curl downloads the whole file (to a file, as the cache does).
        out = os.path.join(work, "curl.out")

        def curl():
            subprocess.run(["curl", "-s", "-f", "-o", out, url], check=True)
            os.remove(out)
        t_curl, req, sent = timed(curl, server, args.reps)
        rows.append(("curl -o FILE, whole file (baseline)", t_curl, req, sent, size / t_curl))

        def open_list():
            fresh_cache()
            with modelzip.open(url) as a:
                a.params(a.tags[-1])
        t, req, sent = timed(open_list, server, args.reps)
        rows.append(("open + list newest tag (cold)", t, req, sent, None))

        def one_tensor():
            fresh_cache()
            with modelzip.open(url) as a:
                a.tensor("bias")
        t, req, sent = timed(one_tensor, server, args.reps)
        rows.append(("open + one 64 B tensor (cold)", t, req, sent, None))

        loaded = sum(5 * MiB for _ in range(200))
        # Throughput against curl: each run right after a curl run (paired).
        ratios = {}

        def load_cold():
            fresh_cache()
            arrays = modelzip.load(url)
            assert len(arrays) == 201
        t_cold, req, sent, ratios["cold"] = paired(load_cold, curl, server, args.reps)
        name = "open + load newest tag, 1 GiB (cold, disk cache)"
        rows.append((name, t_cold, req, sent, loaded / t_cold))

        def load_warm():
            arrays = modelzip.load(url)
            assert len(arrays) == 201
        load_warm()  # fills the cache
        t_warm, req, sent = timed(load_warm, server, args.reps)
        rows.append(("open + load newest tag (warm cache)", t_warm, req, sent, loaded / t_warm))

        os.environ["MODELZIP_NO_CACHE"] = "1"
        t_mem, req, sent, ratios["mem"] = paired(load_cold, curl, server, args.reps)
        rows.append(("open + load newest tag (no cache: memory)", t_mem, req, sent,
                     loaded / t_mem))
        os.environ.pop("MODELZIP_NO_CACHE")

        def local():
            arrays = modelzip.load(path)
            assert len(arrays) == 201
        t_local, _, _ = timed(local, server, args.reps)
        rows.append(("local file: open + load newest tag (zero-copy)", t_local, 0, 0, None))

        print(f"remote_bench: {size / MiB:.0f} MiB archive, nginx on 127.0.0.1, "
              f"medians of {args.reps}")
        print("| operation | time | requests | bytes sent | throughput | vs. curl |")
        print("|---|---:|---:|---:|---:|---:|")
        curl_rate = size / t_curl
        for name, t, req, sent, rate in rows:
            cells = [name, f"{t * 1000:.1f} ms", str(req), human(sent) if sent else "-",
                     f"{rate / (1 << 30):.2f} GiB/s" if rate else "",
                     f"{rate / curl_rate:.2f}x" if rate and not name.startswith("curl") else ""]
            print("| " + " | ".join(cells) + " |")
        print(f"paired with a curl run just before each (median of {args.reps} ratios of "
              f"throughput): cold disk cache {ratios['cold']:.2f}x, "
              f"memory only {ratios['mem']:.2f}x")
    finally:
        if server:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
