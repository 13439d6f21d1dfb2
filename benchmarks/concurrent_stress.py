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
    reads = 0
    while not stop.is_set() and len(problems) < 5:
        try:
            if not os.path.exists(path):
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
                    # verify() of a reader that opened before it may report the CRC of
                    # a params.txt that the removal freed; the archive itself is sound.
                    freed = [(entry, message) for entry, message in found
                             if entry.endswith(("/params.txt", "/updater.txt"))
                             and "CRC-32 mismatch" in message]
                    if freed and len(freed) == len(found):
                        with modelzip.open(path) as now:
                            found = now.verify()
                    if found:
                        problems.append(f"reader: verify: {found[:3]}")
            reads += 1
        except Exception as error:
            problems.append(f"reader: {type(error).__name__}: {error}")
    with open(log_path, "w") as out:
        json.dump({"reads": reads, "problems": problems}, out)


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
            problems.append(f"unexpected tag: {tag}")
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


def run_once(args, run: int) -> list:
    folder = tempfile.mkdtemp(prefix="mz-stress-")
    try:
        path = os.path.join(folder, "m.zip")
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
        print(f"  {len(ends)} operations ended ({sum(r['ok'] for r in ends)} succeeded), "
              f"{sum(r['phase'] == 'start' for r in records) - len(ends)} interrupted by the kill, "
              f"{reads} reads", flush=True)
        if problems and args.keep_failed:
            kept = shutil.copytree(folder, folder + "-failed")
            problems.append(f"(kept in {kept})")
        return problems
    finally:
        shutil.rmtree(folder, ignore_errors=True)


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
    args = parser.parse_args()
    failed = 0
    for run in range(args.runs):
        begin = time.monotonic()
        try:
            problems = run_once(args, run)
        except Exception:
            problems = [traceback.format_exc()]
        status = "ok" if not problems else f"FAILED ({len(problems)} problems)"
        print(f"run {run}: {status} in {time.monotonic() - begin:.1f} s", flush=True)
        for p in problems[:10]:
            print("  " + p, flush=True)
        failed += bool(problems)
    print(f"{args.runs - failed} of {args.runs} runs passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
