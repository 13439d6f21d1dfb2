"""Copying loaded tensors to where they are used: the pipeline behind modelzip.torch.load(device=...)
and load_into().

A copy is a list of (source, destination) pairs of dense tensors of one dtype and element count;
sources are CPU tensors (views of the archive's mapping), destinations tensors of their own.

- Destinations in host memory are filled by several threads, each copying whole pieces straight
  from the mapping (the page faults of a cold file are taken by all threads at once).
- Destinations on a CUDA device go through *staging*: several threads copy pieces from the
  mapping into pinned host buffers, each staged buffer is sent at once with a non-blocking
  host-to-device copy on a side stream, and a buffer is reused only after the event recorded
  behind its copy has completed. Large tensors are cut into pieces of one buffer; small ones are
  packed several to a buffer (each still gets its own host-to-device copy). The buffers are a
  bounded pool (at most MAX_STAGING_BYTES, sized from the load), kept between loads because
  pinning memory is slow.

The staging steps talk to the device through a Target (CudaTarget; HostTarget does the same in
host memory without CUDA, so that tests exercise the staging logic on machines without a GPU).

Thread safety: the pools are kept under a lock; copies running at once on one device share its
pool (each job holds one buffer while it stages and sends). Errors: the first exception of any thread is raised after the other threads have stopped
and the side stream has finished.
"""
from __future__ import annotations

import concurrent.futures
import os
import queue
import threading
from typing import Any, Iterable, Optional, Sequence

import torch

MAX_STAGING_BYTES = 256 << 20
"""The most pinned memory a staged copy uses, whatever the size of the checkpoint."""
_MIN_PIECE = 1 << 20
_MAX_PIECE = 32 << 20
_MAX_BUFFERS = 16


def thread_count() -> int:
    """Threads copying from the mapping: one per core, at most 16."""
    return max(1, min(16, os.cpu_count() or 1))


def as_bytes(tensor: Any) -> Any:
    """A contiguous tensor's memory as a flat uint8 tensor (no copy)."""
    return tensor.reshape(-1).view(torch.uint8)


class CudaTarget:
    """Staging buffers in pinned memory; sends on a side stream of ``device``."""

    def __init__(self, device: Any) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device)

    def buffer(self, size: int) -> Any:
        return torch.empty(size, dtype=torch.uint8, pin_memory=True)

    def send(self, destination: Any, staged: Any) -> Any:
        """Starts copying ``staged`` into ``destination``; returns what to wait for before the
        staging buffer is written again."""
        with torch.cuda.stream(self.stream):
            destination.copy_(staged, non_blocking=True)
            event = torch.cuda.Event()
            event.record(self.stream)
        return event

    def wait(self, pending: Any) -> None:
        pending.synchronize()

    def finish(self) -> None:
        """Every copy sent is complete, and the caller's stream is ordered after them."""
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
        self.stream.synchronize()


class HostTarget:
    """The staging steps in host memory: ordinary buffers, synchronous sends."""

    device = torch.device("cpu")

    def buffer(self, size: int) -> Any:
        return torch.empty(size, dtype=torch.uint8)

    def send(self, destination: Any, staged: Any) -> Any:
        destination.copy_(staged)
        return None

    def wait(self, pending: Any) -> None:
        pass

    def finish(self) -> None:
        pass


class _BufferPool:
    """``count`` staging buffers of ``piece`` bytes; acquire() hands out a buffer whose last send
    has completed."""

    def __init__(self, target: Any, piece: int, count: int) -> None:
        self.piece = piece
        self.count = count
        self._free: queue.Queue = queue.Queue()
        for _ in range(count):
            self._free.put((target.buffer(piece), None))

    def acquire(self, target: Any) -> Any:
        buffer, pending = self._free.get()
        if pending is not None:
            target.wait(pending)
        return buffer

    def release(self, buffer: Any, pending: Any) -> None:
        self._free.put((buffer, pending))


_pools: dict[Any, _BufferPool] = {}
_pools_lock = threading.Lock()


def staging_shape(total_bytes: int) -> tuple[int, int]:
    """(piece bytes, buffer count) for staging ``total_bytes``: pieces of 1 to 32 MiB (about a
    64th of the load, whole MiB), as many buffers as fit MAX_STAGING_BYTES, at most 16, and no
    more than the load needs."""
    piece = min(_MAX_PIECE, max(_MIN_PIECE, -(-total_bytes // 64 // _MIN_PIECE) * _MIN_PIECE))
    count = max(1, min(_MAX_BUFFERS, MAX_STAGING_BYTES // piece, -(-total_bytes // piece)))
    return piece, count


def _pool_for(target: Any, total_bytes: int) -> _BufferPool:
    """The pool of ``target``'s device, kept from an earlier copy when it has the shape this one
    wants or a larger one; one pool per device and kind of target."""
    piece, count = staging_shape(total_bytes)
    key = (type(target).__name__, str(target.device))
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None or pool.piece < piece or pool.count < count:
            _pools.pop(key, None)  # its buffers are freed before the new ones are made
            pool = _BufferPool(target, piece, count)
            _pools[key] = pool
        return pool


def _jobs(pairs: Sequence[tuple[Any, Any]], piece: int) -> list[list[tuple[Any, Any]]]:
    """The pairs' bytes cut into jobs of at most ``piece`` bytes: a large tensor in consecutive
    pieces, small ones packed together."""
    jobs: list[list[tuple[Any, Any]]] = []
    packed: list[tuple[Any, Any]] = []
    packed_bytes = 0
    for source, destination in pairs:
        if source.numel() == 0:
            continue
        src, dst = as_bytes(source), as_bytes(destination)
        n = src.numel()
        if n >= piece:
            jobs.extend([(src[i:i + piece], dst[i:i + piece])] for i in range(0, n, piece))
            continue
        if packed_bytes + n > piece:
            jobs.append(packed)
            packed, packed_bytes = [], 0
        packed.append((src, dst))
        packed_bytes += n
    if packed:
        jobs.append(packed)
    return jobs


def _run(jobs: Iterable[Any], work: Any, threads: int) -> None:
    """Runs ``work(job)`` for every job on ``threads`` threads; re-raises the first failure after
    cancelling the jobs not started."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as executor:
        futures = [executor.submit(work, job) for job in jobs]
        try:
            for future in futures:
                future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def copy_direct(pairs: Sequence[tuple[Any, Any]], threads: Optional[int] = None) -> None:
    """Copies every source into its destination (both addressable by the CPU) on several
    threads, in pieces of at most 32 MiB."""
    def work(job: list[tuple[Any, Any]]) -> None:
        for src, dst in job:
            dst.copy_(src)
    _run(_jobs(pairs, _MAX_PIECE), work, threads or thread_count())


def copy_staged(pairs: Sequence[tuple[Any, Any]], target: Any,
                threads: Optional[int] = None) -> None:
    """Copies every source into its destination on ``target``'s device through the staging
    pipeline (module documentation). Returns when every copy is complete."""
    total = sum(src.numel() * src.element_size() for src, _ in pairs)
    pool = _pool_for(target, total)

    def work(job: list[tuple[Any, Any]]) -> None:
        buffer = pool.acquire(target)
        pending = None
        try:
            offset = 0
            for src, dst in job:
                n = src.numel()
                staged = buffer[offset:offset + n]
                staged.copy_(src)
                pending = target.send(dst, staged)
                offset += n
        finally:
            pool.release(buffer, pending)

    try:
        _run(_jobs(pairs, pool.piece), work, threads or thread_count())
    finally:
        target.finish()


def stageable(source: Any, destination: Any) -> bool:
    """Whether the pair can go through the byte copies above: dense, contiguous, the same dtype
    and shape (else the caller copies it with ``destination.copy_(source)``)."""
    return (source.layout == torch.strided and destination.layout == torch.strided
            and not source.is_quantized and not destination.is_quantized
            and source.dtype == destination.dtype and source.shape == destination.shape
            and source.is_contiguous() and destination.is_contiguous())


def target_for(device: Any) -> Any:
    """The staging target of a CUDA ``device``; None for host memory."""
    if device.type == "cuda":
        return CudaTarget(device)
    return None


def copy_pairs(pairs: Sequence[tuple[Any, Any]], *, target: Any = None) -> None:
    """Copies each (source, destination): pairs on CUDA devices through the staged pipeline (one
    run per device), host ones directly on several threads, the rest (other devices, dtype or
    layout conversions) one by one with ``copy_``. ``target``: use this target for every
    stageable pair instead (the tests' HostTarget)."""
    by_device: dict[Any, list[tuple[Any, Any]]] = {}
    for source, destination in pairs:
        if stageable(source, destination) and (target is not None
                                               or destination.device.type in ("cpu", "cuda")):
            by_device.setdefault(destination.device, []).append((source, destination))
        else:
            destination.copy_(source)
    for device, device_pairs in by_device.items():
        staging = target if target is not None else target_for(device)
        if staging is None:
            copy_direct(device_pairs)
        else:
            copy_staged(device_pairs, staging)
