#!/usr/bin/python3
"""Concurrent writers and readers of one archive: no commit is lost or mixed.

Not a CI test (it is timed by nature and runs for seconds to minutes): a
driver to hunt for races between writer processes, run by hand:

  PYTHONPATH=build/src/python /usr/bin/python3 benchmarks/concurrent_stress.py \
      --runs 10 --writers 6 --readers 2 --ops 30 [--kill] [--keep-last]

Each run uses a fresh archive in a scratch folder. Writer process i does
--ops random operations, only on tags it owns (named w<i>-...), so that the
expected tag set does not depend on the order in which the processes'
commits happened: add a tag (modelzip.save, Writer, or save_async), replace
its tag w<i>-latest (replace=True), remove one of its own tags, add a tag
that shares a parameter of one of its own tags (share=), collect garbage,
update metadata; durable on or off and append on or off at random. Arrays
are drawn partly from a small common pool, so dedup makes references across
tags (and removals move blobs). With --keep-last, some adds also keep the
last N tags (which may remove tags of other writers); a tag may then be
missing only if such a commit ended after that tag's save began.

Every operation's start and end (CLOCK_MONOTONIC, system-wide) are logged
per process. Afterwards the driver checks, independently of the library:
every tag whose save returned is present unless its owner removed it later
(or a keep-last commit may have); no other tag is there except those of an
operation a kill interrupted; every tensor holds the bytes saved under that
tag (for w<i>-latest: those of its owner's last successful replace);
verify() finds nothing. Reader processes meanwhile open the archive, load a
random tag and check that all its tensors belong to one save (never a mix),
and verify() now and then; the only errors they accept are a tag removed
between listing and loading. With --kill, the driver kills a random writer
with SIGKILL at a random moment during each run; the next writer rolls its
save back, and its interrupted operation is the only one whose effect is
unknown.

With --s3, the archive is one object, s3://stress/run<N>/m.zip, on
@20minutes/s3rver (npm, installed into --build once) started on 127.0.0.1,
behind the test proxy of tests/remote/servers.py with its conditions
enforced (S3Proxy(enforce_conditions=True)): s3rver ignores If-Match and
If-None-Match, so without the proxy a lost commit would go unseen. Writers
then also use a fresh modelzip cache each (MODELZIP_CACHE_DIR), readers a
shared one. A commit refused because another writer's commit came first
("archive changed on the server by another writer", or "... while reading"
for a read of the old object during the commit) is the documented outcome
of a race: the checker counts it, requires that it left no trace, and
accepts it; readers accept "archive changed on the server while reading"
and a missing object before the first commit. Every other check is as for
a local file (--kill included: a killed writer's upload is never completed,
so its operation simply did not happen). The proxy's log is checked too:
every completion carried If-Match or If-None-Match, every copy
x-amz-copy-source-if-match, and the refusals are counted. With
--s3-server-conditions the proxy only forwards: the same runs against
s3rver alone lose commits (the last completion wins), which shows that
the checks can fail.

Exit status 0 when every run passed; the first failures are printed.
"""
import argparse
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
import warnings
import zlib

import numpy as np

import modelzip

# Refusals a commit meets when another writer's commit came first (S3).
CONFLICTS = ("archive changed on the server by another writer",
             "archive changed on the server while reading")

POOL = [np.full(4096, k, dtype=np.float32) for k in range(4)]


def contents(tag: str, version: int):
    """The arrays saved under `tag` in its `version`-th save, derived from
    both, plus one from the common pool (dedup across tags)."""
    seed = zlib.crc32(f"{tag}/{version}".encode())
    rng = np.random.default_rng(seed)
    arrays = {
        "ver": np.array([version], dtype=np.int64),
        "a": rng.standard_normal(rng.integers(1, 40000)).astype(np.float32),
        "b": rng.integers(0, 255, size=int(rng.integers(1, 5000)), dtype=np.uint8),
        "pool": POOL[seed % len(POOL)],
    }
    return arrays


def check_loaded(tag: str, loaded) -> str:
    """'' if the loaded arrays are exactly those of one save of `tag`."""
    if "ver" not in loaded:
        return f"{tag}: no 'ver' ({sorted(loaded)})"
    version = int(np.asarray(loaded["ver"])[0])
    expected = contents(tag, version)
    for name, value in expected.items():
        if name not in loaded:
            return f"{tag} v{version}: {name} missing"
        if not np.array_equal(np.asarray(loaded[name]), value):
            return f"{tag} v{version}: {name} differs"
    return ""


def log(handle, record):
    handle.write(json.dumps(record) + "\n")
    handle.flush()


def writer(path: str, index: int, ops: int, seed: int, keep_last: bool, log_path: str):
    warnings.simplefilter("ignore")
    rng = random.Random(seed)
    mine = []  # tags this writer added and did not remove (oldest first)
    latest_version = 0
    counter = 0
    with open(log_path, "a") as out:
        for _ in range(ops):
            kind = rng.choice(["add", "add", "add", "writer", "async", "replace", "remove",
                               "share", "gc", "metadata"])
            durable = rng.random() < 0.3
            append = rng.random() < 0.8
            record = {"w": index, "kind": kind, "start": time.monotonic_ns()}
            try:
                if kind in ("add", "writer", "async", "share"):
                    counter += 1
                    tag = f"w{index}-{counter}"
                    arrays = contents(tag, 1)
                    record["tag"] = tag
                    keep = rng.choice([None, None, 4, 8]) if keep_last else None
                    record["keep_last"] = keep
                    share = None
                    if kind == "share" and mine:
                        source = rng.choice(mine)
                        share = {"shared": (source, "a")}
                        record["share"] = source
                    log(out, dict(record, phase="start"))
                    if kind == "async":
                        modelzip.save_async(path, tag, arrays, durable=durable, append=append,
                                            keep_last=keep).result(timeout=120)
                    elif kind == "writer":
                        with modelzip.Writer(path, durable=durable, append=append) as w:
                            w.add_tag(tag, arrays)
                            if keep:
                                w.keep_last(keep)
                    else:
                        modelzip.save(path, tag, arrays, share=share, durable=durable,
                                      append=append, keep_last=keep)
                    mine.append(tag)
                elif kind == "replace":
                    latest_version += 1
                    tag = f"w{index}-latest"
                    record.update(tag=tag, version=latest_version)
                    log(out, dict(record, phase="start"))
                    modelzip.save(path, tag, contents(tag, latest_version), replace=True,
                                  durable=durable, append=append)
                elif kind == "remove":
                    if not mine:
                        continue
                    tag = mine.pop(rng.randrange(len(mine)))
                    record["tag"] = tag
                    log(out, dict(record, phase="start"))
                    modelzip.remove_tag(path, tag, durable=durable)
                elif kind == "gc":
                    log(out, dict(record, phase="start"))
                    modelzip.collect_garbage(path, durable=durable)
                else:
                    value = f"w{index}-{counter}-{rng.random()}"
                    record["value"] = value
                    log(out, dict(record, phase="start"))
                    modelzip.update_metadata(path, description=value, durable=durable)
                record["ok"] = True
            except Exception as error:  # logged and judged by the checker
                record["ok"] = False
                record["error"] = f"{type(error).__name__}: {error}"
            record["end"] = time.monotonic_ns()
            log(out, dict(record, phase="end"))


def reader(path: str, seed: int, stop, log_path: str):
    warnings.simplefilter("ignore")
    rng = random.Random(seed)
    problems = []
    reads = changed = 0
    while not stop.is_set() and len(problems) < 5:
        try:
            if not is_url(path) and not os.path.exists(path):
                time.sleep(0.01)
                continue
            with modelzip.open(path) as archive:
                tags = archive.tags
                if tags:
                    tag = rng.choice(list(tags))
                    problem = check_loaded(tag, archive.load(tag, copy=True))
                    if problem:
                        problems.append("reader: " + problem)
                if rng.random() < 0.1:
                    found = archive.verify()
                    # Documented (docs/crash-safety.md): after an in-place removal,
                    # verify() of a reader that opened before it may report a
                    # params.txt that the removal freed as changed by another
                    # writer since the open; the archive itself is sound.
                    freed = [(entry, message) for entry, message in found
                             if entry.endswith(("/params.txt", "/updater.txt"))
                             and "changed by another writer" in message]
                    if freed and len(freed) == len(found):
                        with modelzip.open(path) as now:
                            found = now.verify()
                    if found:
                        problems.append(f"reader: verify: {found[:3]}")
            reads += 1
        except Exception as error:
            if is_url(path) and (any(c in str(error) for c in CONFLICTS[1:])
                                 or (isinstance(error, modelzip.NotFoundError)
                                     and ("no such key" in str(error)
                                          or str(error).endswith("HTTP 404 (Not Found)")))):
                # The object changed while read, or is not there yet (a HEAD
                # answered 404, the GET that asks S3 why found it created).
                changed += 1
                continue
            problems.append(f"reader: {type(error).__name__}: {error}")
    with open(log_path, "w") as out:
        json.dump({"reads": reads, "changed": changed, "problems": problems}, out)


def is_url(path: str) -> bool:
    return path.startswith("s3://")


def check(path: str, records: list, keep_last: bool) -> list:
    problems = []
    ends = [r for r in records if r["phase"] == "end"]
    starts = {(r["w"], r["start"]): r for r in records if r["phase"] == "start"}
    ended = {(r["w"], r["start"]) for r in ends}
    interrupted = [r for k, r in starts.items() if k not in ended]
    uncertain = {r.get("tag") for r in interrupted}
    for r in ends:
        if not r["ok"]:
            error = r["error"]
            benign = error.startswith("NotFoundError") and keep_last
            benign = benign or (is_url(path) and any(c in error for c in CONFLICTS))
            if not benign:
                problems.append(f"w{r['w']} {r['kind']} {r.get('tag', '')}: {error}")
    keep_ends = [r["end"] for r in ends if r.get("keep_last") and r["ok"]]
    expected, maybe = set(), set(uncertain)
    latest = {}
    shared_from = {r["tag"]: r["share"] for r in ends if r.get("share") and r["ok"]}
    for r in sorted(ends, key=lambda r: r["end"]):  # one writer's ops are sequential
        tag = r.get("tag")
        if r["kind"] in ("add", "writer", "async", "share") and r["ok"]:
            if any(e > r["start"] for e in keep_ends):
                maybe.add(tag)
            else:
                expected.add(tag)
        elif r["kind"] == "remove" and not r["ok"] and any(c in r["error"] for c in CONFLICTS):
            if keep_last and tag in expected:  # refused: still there, unless rotated away
                expected.discard(tag)
                maybe.add(tag)
        elif r["kind"] == "remove" and (r["ok"] or keep_last):
            expected.discard(tag)
            maybe.discard(tag)
        elif r["kind"] == "replace" and r["ok"]:
            latest[tag] = r["version"]
    try:
        archive = modelzip.open(path)
    except Exception as error:
        return problems + [f"final open: {error}"]
    with archive:
        present = set(archive.tags)
        for tag in sorted(expected - present):
            problems.append(f"lost: {tag}")
        unexpected = present - expected - maybe - set(latest)
        unexpected = {t for t in unexpected if t not in uncertain and not t.endswith("-latest")}
        for tag in sorted(unexpected):
            history = [(r["kind"], r["phase"], r.get("ok"), r.get("error", "")[:120])
                       for r in records if r.get("tag") == tag]
            problems.append(f"unexpected tag: {tag} ({history})")
        for tag in sorted(present):
            loaded = archive.load(tag, copy=True)
            problem = check_loaded(tag, loaded)
            if tag in shared_from and not problem:
                if not np.array_equal(np.asarray(loaded["shared"]), contents(shared_from[tag], 1)["a"]):
                    problem = f"{tag}: 'shared' is not {shared_from[tag]}'s 'a'"
            if problem:
                problems.append("final: " + problem)
            elif tag in latest and not keep_last:
                version = int(np.asarray(archive.load(tag, copy=True)["ver"])[0])
                owner_uncertain = tag in uncertain
                if version != latest[tag] and not owner_uncertain:
                    problems.append(f"final: {tag} is v{version}, last replace v{latest[tag]}")
        for tag in sorted(set(latest) - present):
            if keep_last or tag in uncertain:
                continue
            problems.append(f"lost: {tag}")
        found = archive.verify()
        if found:
            problems.append(f"final verify: {found[:5]}")
    return problems


def check_requests(proxy) -> tuple:
    """(problems, refusals) from the proxy's log of one run."""
    problems, refused = [], 0
    for r in proxy.requests():
        query = r["path"].partition("?")[2]
        if r["method"] == "POST" and "uploadId=" in query:
            if "if-match" not in r["headers"] and r["headers"].get("if-none-match") != "*":
                problems.append(f"a completion without If-Match or If-None-Match: {r['path']}")
        elif r["method"] == "PUT" and "x-amz-copy-source" in r["headers"]:
            if "x-amz-copy-source-if-match" not in r["headers"]:
                problems.append(f"a copy without x-amz-copy-source-if-match: {r['path']}")
        refused += bool(r.get("refused"))
    return problems, refused


def run_once(args, run: int, s3=None) -> list:
    folder = tempfile.mkdtemp(prefix="mz-stress-")
    try:
        path = os.path.join(folder, "m.zip")
        if s3:
            path = f"s3://{s3['bucket']}/run{run}/m.zip"
            os.environ["MODELZIP_CACHE_DIR"] = os.path.join(folder, "cache")
            s3["proxy"].clear()
        context = mp.get_context("fork")
        stop = context.Event()
        logs = [os.path.join(folder, f"w{i}.log") for i in range(args.writers)]
        base = args.seed * 1000 + run
        writers = [context.Process(target=writer,
                                   args=(path, i, args.ops, base * 31 + i, args.keep_last, logs[i]))
                   for i in range(args.writers)]
        reader_logs = [os.path.join(folder, f"r{i}.json") for i in range(args.readers)]
        readers = [context.Process(target=reader, args=(path, base * 97 + i, stop, reader_logs[i]))
                   for i in range(args.readers)]
        for p in writers + readers:
            p.start()
        if args.kill:
            rng = random.Random(base)
            time.sleep(rng.uniform(0.05, 0.8))
            victim = rng.choice(writers)
            if victim.is_alive():
                os.kill(victim.pid, signal.SIGKILL)
        deadline = time.monotonic() + args.timeout
        for p in writers:
            p.join(max(0.1, deadline - time.monotonic()))
        stop.set()
        for p in readers:
            p.join(max(0.1, deadline + 30 - time.monotonic()))
        problems = []
        for p in writers + readers:
            if p.is_alive():
                problems.append(f"process {p.pid} still running at the time-out")
                p.kill()
        if problems:
            return problems
        # a writer after a kill: rolls back an interrupted save, if any
        modelzip.update_metadata(path, model_name="checked")
        records = []
        for name in logs:
            if os.path.exists(name):
                with open(name) as f:
                    records += [json.loads(line) for line in f if line.endswith("\n")]
        problems = check(path, records, args.keep_last)
        reads = 0
        for name in reader_logs:
            if os.path.exists(name):
                with open(name) as f:
                    result = json.load(f)
                problems += result["problems"]
                reads += result["reads"]
            else:
                problems.append(f"reader {name} left no result")
        leftovers = [n for n in os.listdir(folder) if n.startswith(".m.zip")]
        if leftovers:
            problems.append(f"files left beside the archive: {leftovers}")
        ends = [r for r in records if r["phase"] == "end"]
        s3_note = ""
        if s3:
            request_problems, refused = check_requests(s3["proxy"])
            problems += request_problems
            conflicts = sum(not r["ok"] and any(c in r["error"] for c in CONFLICTS) for r in ends)
            s3_note = (f", {conflicts} refused as conflicts ({refused} requests refused by the "
                       f"proxy's conditions)")
        print(f"  {len(ends)} operations ended ({sum(r['ok'] for r in ends)} succeeded), "
              f"{sum(r['phase'] == 'start' for r in records) - len(ends)} interrupted by the kill, "
              f"{reads} reads{s3_note}", flush=True)
        if problems and args.keep_failed:
            kept = shutil.copytree(folder, folder + "-failed")
            problems.append(f"(kept in {kept})")
        return problems
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def start_s3(build: str, enforce: bool) -> dict:
    """s3rver (bucket 'stress') behind a condition-enforcing proxy; the
    AWS_* variables pointing at the proxy are set for this process and the
    ones it forks."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                    "remote"))
    import servers
    folder = tempfile.mkdtemp(prefix="mz-stress-s3-")
    server = servers.S3rverFork(servers.install_s3rver_fork(build),
                                os.path.join(folder, "s3rver"), "stress")
    proxy = servers.S3Proxy(server.port, enforce_conditions=enforce)
    os.environ.update({"AWS_ACCESS_KEY_ID": server.ACCESS_KEY,
                       "AWS_SECRET_ACCESS_KEY": server.SECRET_KEY, "AWS_REGION": "us-east-1",
                       "AWS_ENDPOINT_URL": proxy.endpoint})
    return {"server": server, "proxy": proxy, "folder": folder, "bucket": "stress"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--writers", type=int, default=6)
    parser.add_argument("--readers", type=int, default=2)
    parser.add_argument("--ops", type=int, default=25)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--kill", action="store_true")
    parser.add_argument("--keep-last", action="store_true")
    parser.add_argument("--keep-failed", action="store_true")
    parser.add_argument("--timeout", type=float, default=300.0, help="per run, seconds")
    parser.add_argument("--s3", action="store_true",
                        help="one s3:// object on s3rver behind a condition-enforcing proxy")
    parser.add_argument("--build", default="build", help="--s3: where s3rver is installed")
    parser.add_argument("--s3-server-conditions", action="store_true",
                        help="--s3 without the proxy's conditions: s3rver's own (none), which "
                             "loses commits")
    args = parser.parse_args()
    s3 = start_s3(args.build, not args.s3_server_conditions) if args.s3 else None
    failed = 0
    try:
        for run in range(args.runs):
            begin = time.monotonic()
            try:
                problems = run_once(args, run, s3)
            except Exception:
                problems = [traceback.format_exc()]
            status = "ok" if not problems else f"FAILED ({len(problems)} problems)"
            print(f"run {run}: {status} in {time.monotonic() - begin:.1f} s", flush=True)
            for p in problems[:10]:
                print("  " + p, flush=True)
            failed += bool(problems)
    finally:
        if s3:
            s3["proxy"].stop()
            s3["server"].stop()
            shutil.rmtree(s3["folder"], ignore_errors=True)
    print(f"{args.runs - failed} of {args.runs} runs passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
