"""Torch state dicts saved and loaded by modelzip beside torch.save/torch.load and safetensors,
and beside the limits of the machine, in one run.

    python3 benchmarks/torch_bench.py [--size-mib 3072] [--dir DIR] [--reps 3] [--no-cold]
                                      [--no-sources] [--no-train] [--train-mib 256] [--steps 40]
                                      [--every 5]
    python3 benchmarks/torch_bench.py --many-small 20000 [--reps 3] [--dir DIR]

--many-small N measures only a state dict of N tiny float32 tensors (8 elements each: biases,
norms and their optimizer state, in a model of thousands of parameters), fastest of --reps: saves with modelzip.save (durable and not), modelzip.torch.save and torch.save; loads
with modelzip.load, modelzip.torch.load and torch.load, each tensor read once; and open alone
(the central directory and params.txt of N entries). Every row's ratio is against torch's row of
the same run.


The state dict: bfloat16 matrices [4096, 8192] (64 MiB each) plus one float32 vector [8192] per
matrix, --size-mib in all. Rows:
- saves (page cache, no fsync): modelzip.torch.save, torch.save, safetensors save_file;
  then modelzip durable, modelzip.save_async (blocking time and total time), saves of device
  tensors (with CUDA: the state dict on the GPU, blocking and background, beside .cpu() then
  save; without: through the fetch pipeline with host tensors standing for device ones,
  save_async fetching into the staging area it adopts against the path before, which fetched
  into new host tensors and copied them again), and torch.distributed.checkpoint save and
  async_save (blocking and total) where this torch has them (a gloo group of one process);
- limits: read() of the archive file into one reused buffer (sequential read), a parallel
  memcpy of the same bytes (16 threads at most), and with CUDA the pinned and pageable
  host-to-device copies of the same bytes;
- CPU load + touch (one byte per 4 KiB page of every tensor): modelzip.torch.load,
  torch.load (mmap=True where this torch has it), safetensors load_file;
- device loads (CUDA only; the rows say why they are skipped): modelzip.torch.load(device=),
  torch.load(mmap)+.cuda(), safetensors load_file(device=);
- registered mapping (CUDA only; without it the row says what it would register): the
  archive's mapped pages registered with CUDA (cudaHostRegister, flags cudaHostRegisterReadOnly
  then default flags; page-aligned ranges) and every tensor copied from them with
  non_blocking=True, timing register + copies + unregister; and registration alone (register +
  unregister). A flag the driver refuses gives a skipped row with the cudaError;
- cold rows: the same after evicting the files from the page cache (posix_fadvise DONTNEED
  after fsync: only these files, no root needed), beside a cold sequential read;
- copy sources (unless --no-sources): the modelzip copy pipeline reading the tensors' bytes with
  read() (os.preadv into the buffers) against copying them from the mapping, warm and cold:
  into new host tensors (several threads), through the staging steps in host memory
  (HostTarget: runs without CUDA), and with CUDA onto the device over a small grid of
  threads {8, 16} x pieces {8, 32} MiB, beside staging alone (no host-to-device copy) and the
  allocation of the destinations.
Times are medians of --reps (cold rows: one run each). The training-loop row (--no-train skips
it) prints steps per second of a small MLP with a checkpoint every --every steps: none,
synchronous, background. The last line is the headline ratio:
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


def background_rows(table: Table, name: str, start, reps: int, before) -> None:
    """Rows "<name> blocking" (until ``start()`` returns) and "<name> total" (until the handle it
    returns is done: ``result()``), medians of ``reps``; the first run (fresh staging memory,
    process groups) is a warm-up."""
    blocking, total = [], []
    for rep in range(reps + 1):
        before()
        began = time.perf_counter()
        handle = start()
        returned = time.perf_counter()
        handle.result()
        if rep > 0:
            blocking.append(returned - began)
            total.append(time.perf_counter() - began)
    table.row(f"{name} blocking", statistics.median(blocking), "save modelzip")
    table.row(f"{name} total", statistics.median(total), "save modelzip")


def save_rows(args, folder: str, sd: dict, table: Table) -> None:
    """The save rows beside "save modelzip" (issue 32): durable, background (blocking and total
    time), and torch.distributed.checkpoint's save and async_save where this torch has them."""
    path = f"{folder}/save-rows.zip"

    def fresh():
        if os.path.exists(path):
            os.unlink(path)
    table.row("save modelzip durable", median(
        lambda: mzt.save(sd, path, "t", append=False), args.reps, fresh), "save modelzip")
    background_rows(table, "save modelzip save_async", lambda: modelzip.save_async(
        path, "t", sd, durable=False, append=False), args.reps, fresh)
    fetch_save_rows(args, sd, table, path, fresh)
    dcp_rows(args, folder, sd, table)


def fetch_save_rows(args, sd: dict, table: Table, path: str, fresh) -> None:
    """Saves of device tensors (issue 32). Without CUDA: the state dict sent through the fetch
    pipeline with HostFetchTarget (host tensors standing for device ones): save_async as it is
    (fetched bytes land in the staging area the save adopts) against the path before (fetched
    into new host tensors, which the snapshot then copies again), blocking and total time; and
    blocking saves written while the fetch runs against fetch-then-save, with and without dedup.
    With CUDA: the state dict on the device, blocking and background saves beside .cpu() then
    save and .cpu() then save_async."""
    if CUDA:
        device_sd = {k: v.cuda() for k, v in sd.items()}
        torch.cuda.synchronize()

        def to_host_then_save():
            mzt.save({k: v.cpu() for k, v in device_sd.items()}, path, "t", durable=False,
                     append=False)
        table.row("save cuda: .cpu() then save", median(to_host_then_save, args.reps, fresh),
                  "save modelzip")
        table.row("save cuda: modelzip.torch.save", median(lambda: mzt.save(
            device_sd, path, "t", durable=False, append=False), args.reps, fresh),
            "save cuda: .cpu() then save")
        background_rows(table, "save cuda: .cpu() then save_async", lambda: modelzip.save_async(
            path, "t", {k: v.cpu() for k, v in device_sd.items()}, durable=False, append=False),
            args.reps, fresh)
        background_rows(table, "save cuda: save_async", lambda: modelzip.save_async(
            path, "t", device_sd, durable=False, append=False), args.reps, fresh)
        del device_sd
        torch.cuda.empty_cache()
        return
    from modelzip import _device_save

    def fetched(items):  # the path before: new host tensors, complete before the save
        return dict(_device_save.host_items(items, _device_save.HostFetchTarget()))
    background_rows(table, "save fetch path: save_async before (fetch+copy)",
                    lambda: modelzip.save_async(path, "t", fetched(sd.items()), durable=False,
                                                append=False), args.reps, fresh)
    with _fetch_target(_device_save.HostFetchTarget):
        background_rows(table, "save fetch path: save_async (fetch into staging)",
                        lambda: modelzip.save_async(path, "t", sd, durable=False, append=False),
                        args.reps, fresh)
    for dedup in (True, False):
        before = f"save fetch path: blocking dedup={dedup} before (fetch, then save)"
        table.row(before, median(lambda: mzt.save(
            fetched(sd.items()), path, "t", durable=False, append=False, dedup=dedup),
            args.reps, fresh), "save modelzip")
        with _fetch_target(_device_save.HostFetchTarget):
            table.row(f"save fetch path: blocking dedup={dedup} (written while fetched)",
                      median(lambda: mzt.save(sd, path, "t", durable=False, append=False,
                                              dedup=dedup), args.reps, fresh), before)


def dcp_rows(args, folder: str, sd: dict, table: Table) -> None:
    """torch.distributed.checkpoint save and async_save (one process, a gloo group of one)."""
    try:
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp
    except ImportError as e:
        table.skip("save DCP", f"torch.distributed.checkpoint cannot be imported: {e}")
        return
    if not hasattr(dcp, "save"):
        table.skip("save DCP / DCP async_save", f"torch {torch.__version__} has no "
                   "torch.distributed.checkpoint.save (torch 2.2+)")
        return
    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
        dist.init_process_group("gloo", rank=0, world_size=1)
    where = f"{folder}/dcp"

    def fresh():
        shutil.rmtree(where, ignore_errors=True)
    table.row("save DCP", median(lambda: dcp.save(sd, checkpoint_id=where), args.reps, fresh),
              "save modelzip")
    if not hasattr(dcp, "async_save"):
        table.skip("save DCP async_save", f"torch {torch.__version__} has no async_save (2.3+)")
        return
    background_rows(table, "save DCP async_save", lambda: dcp.async_save(sd, checkpoint_id=where),
                    args.reps, fresh)


def training_row(args, folder: str) -> None:
    """Steps per second of a small model with a checkpoint every --every steps: none,
    synchronous, background (async_save_bench.py's training loop)."""
    if args.no_train:
        print("training loop: skipped (--no-train)", flush=True)
        return
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from async_save_bench import bench_training
    bench_training(argparse.Namespace(train_mib=args.train_mib, batch=16, torch_threads=0,
                                      steps=args.steps, every=args.every, durable=False), folder)


@contextlib.contextmanager
def _fetch_target(target):
    """_device_save.fetch_target set to ``target`` while the block runs."""
    from modelzip import _device_save
    saved, _device_save.fetch_target = _device_save.fetch_target, target
    try:
        yield
    finally:
        _device_save.fetch_target = saved


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


# cudaHostRegisterReadOnly (CUDA 11.1+): the pages are only read by the device, which a
# read-only mapping (the archive's) needs.
CUDA_HOST_REGISTER_READ_ONLY = 8


def mapped_ranges(path: str, views: dict) -> list[tuple[int, int]]:
    """The page-aligned (address, size) ranges to register for ``views`` (tensors over the
    mapping of the file ``path``): each mapping of that file in /proc/self/maps cut to the
    pages its tensors cover. Raises RuntimeError when a tensor lies outside every one."""
    page = os.sysconf("SC_PAGE_SIZE")
    real = os.path.realpath(path)
    mappings = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].strip() == real:
                start, end = (int(x, 16) for x in fields[0].split("-"))
                mappings.append([start, end, None, None])
    for tensor in views.values():
        size = tensor.numel() * tensor.element_size()
        if not size:
            continue
        first, last = tensor.data_ptr(), tensor.data_ptr() + size
        m = next((m for m in mappings if m[0] <= first and last <= m[1]), None)
        if m is None:
            raise RuntimeError(f"a tensor at {first:#x} lies outside the mappings of {real}")
        m[2] = first if m[2] is None else min(m[2], first)
        m[3] = last if m[3] is None else max(m[3], last)
    return [(lo // page * page, -(-hi // page) * page - lo // page * page)
            for _, _, lo, hi in mappings if lo is not None]


def clear_cuda_error() -> str:
    """Resets the CUDA runtime's last error (a failed cudaHostRegister leaves one, which torch's
    next kernel-launch check would raise); returns a note when that was not possible."""
    import ctypes
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libcudart.so" in line}
    if not paths:
        return " (libcudart not found: later CUDA rows may report this error)"
    for path in paths:
        ctypes.CDLL(path).cudaGetLastError()
    return ""


def registered_mapping_rows(table: "Table", args, path: str) -> None:
    """Issue 28's path without a host copy: the archive's mapped pages registered with CUDA
    (cudaHostRegister) and every tensor copied from them with non_blocking=True, timing
    register + copies + unregister; and registration alone (register + unregister)."""
    views = mzt.load(path)  # zero-copy: tensors over the archive's mapping
    ranges = mapped_ranges(path, views)
    span = f"{sum(n for _, n in ranges) / 2**20:.0f} MiB in {len(ranges)} mapping(s)"
    if not CUDA:
        table.skip("device: registered mapping", f"no CUDA device (would register {span})")
        return
    cudart = torch.cuda.cudart()
    device = torch.device("cuda")

    def register(flags):
        done = []
        for address, size in ranges:
            code = int(cudart.cudaHostRegister(address, size, flags))
            if code != 0:
                unregister(done)
                raise RuntimeError(f"cudaHostRegister({size} bytes, flags={flags}) returned "
                                   f"cudaError {code}")
            done.append((address, size))
        return done

    def unregister(done):
        for address, _ in done:
            code = int(cudart.cudaHostUnregister(address))
            if code != 0:
                raise RuntimeError(f"cudaHostUnregister returned cudaError {code}")

    def register_only(flags):
        unregister(register(flags))

    def registered_copies(flags):
        done = register(flags)
        try:
            out = {k: v.to(device, non_blocking=True) for k, v in views.items()}
            torch.cuda.synchronize()
        finally:
            unregister(done)
        return out

    for flags, what in ((CUDA_HOST_REGISTER_READ_ONLY, "read-only"), (0, "default flags")):
        name = f"device: register mapping only ({what})"
        try:
            out = registered_copies(flags)  # a warm-up, and the check that the bytes arrive
            for key in (next(iter(views)), next(reversed(views))):
                if not torch.equal(out[key].cpu(), views[key]):
                    raise RuntimeError(f"{key} differs on the device")
            del out
            table.row(name, median(lambda: register_only(flags), args.reps),
                      "limit: pinned host-to-device copy")
            table.row(f"device load registered mapping ({what})", median(
                lambda: registered_copies(flags), args.reps, torch.cuda.empty_cache),
                "limit: pinned host-to-device copy")
        except RuntimeError as e:  # torch's CUDA errors are RuntimeErrors too
            table.skip(f"device load registered mapping ({what})",
                       str(e).splitlines()[0] + clear_cuda_error())
    del views


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=3072)
    parser.add_argument("--dir", default=None, help="folder for the files (default: a temp dir)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-cold", action="store_true", help="skip the cold-cache rows")
    parser.add_argument("--no-train", action="store_true", help="skip the training-loop row")
    parser.add_argument("--train-mib", type=int, default=256,
                        help="parameters + Adam state of the training-loop model")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--every", type=int, default=5, help="checkpoint every N steps")
    parser.add_argument("--no-sources", action="store_true",
                        help="skip the read() vs mapping rows of the copy pipeline")
    parser.add_argument("--many-small", type=int, default=0, metavar="N",
                        help="only the rows of N tiny tensors (module documentation)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="torch_bench.", dir=args.dir)
    try:
        return run(args, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def many_small_rows(args, folder: str) -> int:
    """The --many-small rows (module documentation): fastest of --reps, beside torch."""
    torch.manual_seed(0)
    sd = {f"layers.{i}.norm": torch.randn(8) for i in range(args.many_small)}
    reps = args.reps
    print(f"torch {torch.__version__}, modelzip {modelzip.__version__}, {os.cpu_count()} cores; "
          f"{len(sd)} float32 tensors of 8 elements; fastest of {reps}", flush=True)
    paths = {"modelzip": f"{folder}/m.zip", "torch": f"{folder}/t.pt"}

    def fastest(fn, before=None) -> float:
        times = []
        for _ in range(reps):
            if before:
                before()
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times)

    def fresh(name):
        return lambda: os.path.exists(paths[name]) and os.unlink(paths[name])
    rows: dict[str, float] = {}

    def row(name: str, seconds: float, baseline: str) -> None:
        rows[name] = seconds
        print(f"{name:46s} {seconds * 1e3:9.1f} ms  {rows[baseline] / seconds:6.2f}x {baseline}"
              f"{'' if name != baseline else ' (baseline)'}", flush=True)
    mz = paths["modelzip"]
    row("save torch.save", fastest(lambda: torch.save(sd, paths["torch"]), fresh("torch")),
        "save torch.save")
    row("save modelzip.save durable=False", fastest(
        lambda: modelzip.save(mz, "t", sd, durable=False, append=False), fresh("modelzip")),
        "save torch.save")
    row("save modelzip.save (durable, dedup: defaults)", fastest(
        lambda: modelzip.save(mz, "t", sd, append=False), fresh("modelzip")), "save torch.save")
    row("save modelzip.torch.save durable=False", fastest(
        lambda: mzt.save(sd, mz, "t", durable=False, append=False), fresh("modelzip")),
        "save torch.save")

    def every(state: dict) -> None:
        for tensor in state.values():
            float(tensor[0])
    row("load torch.load", fastest(lambda: every(torch.load(paths["torch"]))), "load torch.load")
    row("load modelzip.torch.load", fastest(lambda: every(mzt.load(mz))), "load torch.load")
    row("load modelzip.load (numpy)", fastest(lambda: every(modelzip.load(mz))),
        "load torch.load")

    def open_only() -> None:
        with modelzip.open(mz) as archive:
            archive.newest_tag
    row("open (tables parsed, nothing loaded)", fastest(open_only), "load torch.load")
    return 0


def run(args, folder: str) -> int:
    if args.many_small:
        return many_small_rows(args, folder)
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
    save_rows(args, folder, sd, table)

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
    registered_mapping_rows(table, args, paths["modelzip"])

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

    training_row(args, folder)
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
