"""Torch state dicts saved and loaded by modelzip beside torch.save/torch.load and safetensors,
and beside the limits of the machine, in one run.

    python3 benchmarks/torch_bench.py [--size-mib 3072] [--dir DIR] [--reps 3] [--no-cold]
                                      [--no-sources]

The state dict: bfloat16 matrices [4096, 8192] (64 MiB each) plus one float32 vector [8192] per
matrix, --size-mib in all. Rows:
- saves (page cache, no fsync): modelzip.torch.save, torch.save, safetensors save_file;
- limits: read() of the archive file into one reused buffer (sequential read), a parallel
  memcpy of the same bytes (16 threads at most), and with CUDA the pinned and pageable
  host-to-device copies of the same bytes;
- CPU load + touch (one byte per 4 KiB page of every tensor): modelzip.torch.load,
  torch.load (mmap=True where this torch has it), safetensors load_file;
- device loads (CUDA only; the rows say why they are skipped): modelzip.torch.load(device=),
  torch.load(mmap)+.cuda(), safetensors load_file(device=);
- cold rows: the same after evicting the files from the page cache (posix_fadvise DONTNEED
  after fsync: only these files, no root needed), beside a cold sequential read;
- copy sources (unless --no-sources): the modelzip copy pipeline reading the tensors' bytes with
  read() (os.preadv into the buffers) against copying them from the mapping, warm and cold:
  into new host tensors (several threads), through the staging steps in host memory
  (HostTarget: runs without CUDA), and with CUDA onto the device over a small grid of
  threads {8, 16} x pieces {8, 32} MiB, beside staging alone (no host-to-device copy) and the
  allocation of the destinations.
Times are medians of --reps (cold rows: one run each). The last line is the headline ratio:
with CUDA, the warm modelzip device load against the pinned host-to-device limit (the goal is
>= 0.6x); without, the warm CPU load + touch against the sequential read.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import inspect
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings

import torch

import modelzip
import modelzip.torch as mzt
from modelzip import _device_copy
from modelzip._torch_load import load_copied

warnings.filterwarnings("ignore")
try:
    import safetensors.torch as safetensors_torch
except ImportError:
    safetensors_torch = None
TORCH_MMAP = "mmap" in inspect.signature(torch.load).parameters
CUDA = torch.cuda.is_available()


def state_dict(size_mib: int) -> dict:
    torch.manual_seed(0)
    out = {}
    for i in range(max(1, size_mib // 64)):
        out[f"layers.{i}.weight"] = torch.randn(4096, 8192).to(torch.bfloat16)
        out[f"layers.{i}.bias"] = torch.randn(8192)
    return out


def median(fn, reps: int, before=None) -> float:
    times = []
    for _ in range(reps):
        if before:
            before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def evict(path: str) -> None:
    """Drops the file's pages from the page cache (it was fsynced, so they are clean)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def touch(state: dict) -> None:
    for tensor in state.values():
        flat = tensor.reshape(-1)
        step = max(1, 4096 // flat.element_size())
        float(flat[::step].float().sum())


def sequential_read(path: str) -> None:
    buffer = bytearray(16 << 20)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(view):
            pass


def parallel_memcpy(source, destination, threads: int) -> None:
    piece = -(-source.numel() // threads)
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda i: destination[i:i + piece].copy_(source[i:i + piece]),
                      range(0, source.numel(), piece)))


class Table:
    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.rows: dict[str, float] = {}

    def row(self, name: str, seconds: float, baseline: str = "") -> None:
        self.rows[name] = seconds
        rate = self.nbytes / seconds / 2**30
        ratio = ""
        if baseline and baseline in self.rows:
            ratio = f"{self.rows[baseline] / seconds:6.2f}x {baseline}"
        print(f"{name:46s} {seconds:8.3f} s {rate:8.2f} GiB/s   {ratio}", flush=True)

    def skip(self, name: str, why: str) -> None:
        print(f"{name:46s}        - skipped: {why}", flush=True)


@contextlib.contextmanager
def staging_config(threads: int = 0, piece_mib: int = 0):
    """The copy pipeline with ``threads`` threads and staging pieces of ``piece_mib`` MiB (0: its
    defaults); fresh buffer pools before and after."""
    saved = (_device_copy.thread_count, _device_copy._MIN_PIECE, _device_copy._MAX_PIECE)
    if threads:
        _device_copy.thread_count = lambda: threads
    if piece_mib:
        _device_copy._MIN_PIECE = _device_copy._MAX_PIECE = piece_mib << 20
    _device_copy._pools.clear()
    try:
        yield
    finally:
        _device_copy.thread_count, _device_copy._MIN_PIECE, _device_copy._MAX_PIECE = saved
        _device_copy._pools.clear()


class StageOnly(_device_copy.CudaTarget if CUDA else _device_copy.HostTarget):
    """Staging into pinned buffers without sending anything to the device."""

    def __init__(self) -> None:
        if CUDA:
            super().__init__(torch.device("cuda"))

    def send(self, destination, staged):
        return None


def copy_source_rows(table: "Table", args, path: str) -> None:
    """The copy pipeline from read() against from the mapping (module documentation)."""
    sources = ("read", "mapping")
    cpu = torch.device("cpu")
    warm = {}
    for source in sources:
        warm[f"host tensors from {source}"] = lambda s=source: load_copied(path, None, cpu,
                                                                           source=s)
        warm[f"host staging (HostTarget) from {source}"] = lambda s=source: load_copied(
            path, None, cpu, source=s, staging=_device_copy.HostTarget())
    for name, fn in warm.items():
        table.row(f"copy {name}", median(fn, args.reps), "limit: read() of the archive file")
    if not CUDA:
        table.skip("device copy grid (read() vs mapping)", "no CUDA device")
    else:
        device = torch.device("cuda")

        def synced(fn):
            def run_it():
                fn()
                torch.cuda.synchronize()
            return run_it
        views = mzt.load(path)
        table.row("device: allocate the destinations", median(synced(lambda: {
            k: torch.empty(v.shape, dtype=v.dtype, device=device) for k, v in views.items()}),
            args.reps, torch.cuda.empty_cache))
        for source in sources:
            with staging_config(16, 32):
                table.row(f"device: staging only from {source} (16x32 MiB)", median(
                    lambda s=source: load_copied(path, None, device, source=s,
                                                 staging=StageOnly()), args.reps),
                    "limit: pinned host-to-device copy")
        for threads in (8, 16):
            for piece in (8, 32):
                for source in sources:
                    with staging_config(threads, piece):
                        table.row(f"device load {source} {threads} threads {piece} MiB", median(
                            synced(lambda s=source: load_copied(path, None, device, source=s)),
                            args.reps, torch.cuda.empty_cache),
                            "limit: pinned host-to-device copy")
        for source in sources:
            table.row(f"device load {source} verify=True", median(synced(
                lambda s=source: load_copied(path, None, device, source=s, verify=True)),
                args.reps, torch.cuda.empty_cache), "limit: pinned host-to-device copy")
    if args.no_cold:
        return
    cold = dict(warm)
    if CUDA:
        for source in sources:
            cold[f"device load from {source}"] = lambda s=source: (
                load_copied(path, None, torch.device("cuda"), source=s), torch.cuda.synchronize())
    for name, fn in cold.items():
        table.row(f"cold copy {name}", median(fn, 1, lambda: evict(path)),
                  "limit: cold read() of the archive file")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=3072)
    parser.add_argument("--dir", default=None, help="folder for the files (default: a temp dir)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-cold", action="store_true", help="skip the cold-cache rows")
    parser.add_argument("--no-sources", action="store_true",
                        help="skip the read() vs mapping rows of the copy pipeline")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="torch_bench.", dir=args.dir)
    try:
        return run(args, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(args, folder: str) -> int:
    sd = state_dict(args.size_mib)
    nbytes = sum(t.numel() * t.element_size() for t in sd.values())
    threads = min(16, os.cpu_count() or 1)
    print(f"torch {torch.__version__}, modelzip {modelzip.__version__}, CUDA: "
          f"{torch.cuda.get_device_name() if CUDA else 'no'}, {os.cpu_count()} cores; "
          f"state dict {nbytes / 2**30:.2f} GiB, {len(sd)} tensors; medians of {args.reps}")
    table = Table(nbytes)
    paths = {"modelzip": f"{folder}/m.zip", "torch": f"{folder}/t.pt",
             "safetensors": f"{folder}/s.safetensors"}

    saves = {"modelzip": lambda: mzt.save(sd, paths["modelzip"], "t", durable=False, append=False),
             "torch": lambda: torch.save(sd, paths["torch"])}
    if safetensors_torch:
        saves["safetensors"] = lambda: safetensors_torch.save_file(sd, paths["safetensors"])
    else:
        table.skip("save safetensors", "safetensors is not installed")

    def fresh(name):
        return lambda: os.path.exists(paths[name]) and os.unlink(paths[name])
    for name, fn in saves.items():
        table.row(f"save {name}", median(fn, args.reps, fresh(name)))

    table.row("limit: read() of the archive file", median(
        lambda: sequential_read(paths["modelzip"]), args.reps))
    source = torch.empty(nbytes, dtype=torch.uint8).fill_(1)
    destination = torch.empty(nbytes, dtype=torch.uint8).fill_(0)
    table.row(f"limit: parallel memcpy ({threads} threads)", median(
        lambda: parallel_memcpy(source, destination, threads), args.reps))
    del destination
    if CUDA:
        device = torch.device("cuda")
        pinned = source.pin_memory()

        def h2d(host):
            copy = host.to(device, non_blocking=True)
            torch.cuda.synchronize()
            del copy
        table.row("limit: pinned host-to-device copy", median(lambda: h2d(pinned), args.reps))
        table.row("limit: pageable host-to-device copy", median(lambda: h2d(source), args.reps))
        del pinned
    del source

    def keep(fn):
        return lambda: touch(fn())
    cpu_loads = {"modelzip.torch.load": keep(lambda: mzt.load(paths["modelzip"]))}
    torch_load = ("torch.load(mmap=True)" if TORCH_MMAP else "torch.load (no mmap in this torch)")
    cpu_loads[torch_load] = keep(lambda: torch.load(paths["torch"], **(
        {"mmap": True} if TORCH_MMAP else {})))
    if safetensors_torch:
        cpu_loads["safetensors load_file"] = keep(lambda: safetensors_torch.load_file(
            paths["safetensors"]))
    for name, fn in cpu_loads.items():
        table.row(f"CPU load+touch {name}", median(fn, args.reps),
                  "limit: read() of the archive file")

    device_loads = {}
    if CUDA:
        def synced(fn):
            def run_it():
                fn()
                torch.cuda.synchronize()
            return run_it
        device_loads["modelzip.torch.load(device=cuda)"] = synced(
            lambda: mzt.load(paths["modelzip"], device="cuda"))
        device_loads["torch.load(mmap)+.cuda()" if TORCH_MMAP else "torch.load+.cuda()"] = synced(
            lambda: {k: v.cuda() for k, v in torch.load(
                paths["torch"], **({"mmap": True} if TORCH_MMAP else {})).items()})
        if safetensors_torch:
            device_loads["safetensors load_file(device=cuda)"] = synced(
                lambda: safetensors_torch.load_file(paths["safetensors"], device="cuda"))
        for name, fn in device_loads.items():
            table.row(f"device load warm {name}", median(fn, args.reps, torch.cuda.empty_cache),
                      "limit: pinned host-to-device copy")
    else:
        table.skip("device loads", "no CUDA device (torch.cuda.is_available() is False)")

    if args.no_cold:
        table.skip("cold rows", "--no-cold")
    else:
        for name in paths:
            if os.path.exists(paths[name]):
                evict(paths[name])
        table.row("limit: cold read() of the archive file", median(
            lambda: sequential_read(paths["modelzip"]), 1,
            lambda: evict(paths["modelzip"])))
        files = {"modelzip.torch.load": "modelzip", torch_load: "torch",
                 "safetensors load_file": "safetensors"}
        for name, fn in cpu_loads.items():
            path = paths[files[name]]
            table.row(f"cold CPU load+touch {name}", median(fn, 1, lambda: evict(path)),
                      "limit: cold read() of the archive file")
        for name, fn in device_loads.items():
            path = paths["modelzip" if "modelzip" in name else
                         "torch" if "torch.load" in name else "safetensors"]
            table.row(f"cold device load {name}", median(fn, 1, lambda: evict(path)),
                      "limit: cold read() of the archive file")

    if args.no_sources:
        table.skip("copy sources (read() vs mapping)", "--no-sources")
    else:
        copy_source_rows(table, args, paths["modelzip"])

    if CUDA:
        ratio = table.rows["limit: pinned host-to-device copy"] / table.rows[
            "device load warm modelzip.torch.load(device=cuda)"]
        print(f"headline: warm modelzip device load = {ratio:.2f}x the pinned host-to-device "
              "limit (goal >= 0.6x)")
    else:
        ratio = table.rows["limit: read() of the archive file"] / table.rows[
            "CPU load+touch modelzip.torch.load"]
        print(f"headline: warm modelzip CPU load+touch = {ratio:.2f}x the speed of read() of the "
              "same file (no CUDA here: no device rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
