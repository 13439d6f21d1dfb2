"""Copying loaded tensors to where they are used: the pipeline behind modelzip.torch.load(device=...)
and load_into().

A copy is a list of (source, destination) pairs of dense tensors of one dtype and element count,
or (source, destination, located) triples; sources are CPU tensors (views of the archive's
mapping), destinations tensors of their own. ``located`` (a Located or None) says where the
source's bytes lie in the archive file: such a source can be read with read() instead of through
the mapping, and its CRC-32 checked while it is copied.

*Where the bytes come from* (``source``, default SOURCE): "read" reads each piece of a located
source with os.preadv (the GIL is released) straight into the pinned buffer or host destination,
asking the kernel to read ahead (posix_fadvise WILLNEED) the next round of jobs, so that a cold
file keeps the disk queue full and a warm one takes no page faults; "mapping" copies from
the mapped views (page faults bring the pages in). Sources without a location (remote archives'
cache files, deflated blobs) always come from their tensors.

- Destinations in host memory are filled by several threads, each copying whole pieces straight
  from the file or the mapping.
- Destinations on a CUDA device go through *staging*: several threads copy pieces from the
  file or the mapping into pinned host buffers, each staged buffer is sent at once with a
  non-blocking host-to-device copy on a side stream, and a buffer is reused only after the event recorded
  behind its copy has completed. Large tensors are cut into pieces of one buffer; small ones are
  packed several to a buffer (each still gets its own host-to-device copy). The buffers are a
  bounded pool (at most MAX_STAGING_BYTES, sized from the load), kept between loads because
  pinning memory is slow.

The staging steps talk to the device through a Target (CudaTarget; HostTarget does the same in
host memory without CUDA, so that tests exercise the staging logic on machines without a GPU).

*Verification* (``verify=True``): the CRC-32 of each staged or copied piece of a located source
is computed as it is copied (zlib.crc32, which releases the GIL), and the entry's CRC-32 is put
together from them and the CRC-32 of the entry's bytes around the data (crc32_concat); a
mismatch raises modelzip.Error (code "corrupt", naming archive, tag and entry; FileError, code
"io", "the archive was changed by another writer since this reader opened it", when a commit
since the archive was opened may have overwritten the entry, as the archive's own reads say)
once every copy has finished, before the caller hands anything out. Sources without a location
are not checked here (their loads check them).

Thread safety: the pools are kept under a lock; copies running at once on one device share its
pool (each job holds one buffer while it stages and sends). Errors: the first exception of any
thread is raised after the other threads have stopped and the side stream has finished.
"""
from __future__ import annotations

import concurrent.futures
import functools
import os
import queue
import threading
import zlib
from typing import Any, Iterable, NamedTuple, Optional, Sequence

import torch

from . import _modelzip
from ._errors import Error

MAX_STAGING_BYTES = 256 << 20
"""The most pinned memory a staged copy uses, whatever the size of the checkpoint."""
_MIN_PIECE = 1 << 20
_MAX_PIECE = 32 << 20
_MAX_BUFFERS = 16
SOURCE = "read"
"""Where located sources are copied from by default: "read" (os.preadv of the file) or "mapping"
(the mapped views). An internal knob: benchmarks/torch_bench.py compares the two."""
READ_AHEAD_ROUNDS = 1
"""Source "read": as a thread starts a job, the kernel is asked to read ahead the job this many
rounds (one job per thread) further on, so that the disk has the next round queued."""


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


class Located(NamedTuple):
    """Where a source's bytes lie in the archive file (from Archive._data_ranges, whose entries
    the archive validated): for reading them with read() and checking their CRC-32."""

    fd: int
    """A descriptor of the archive's file (the load's FileData owns it)."""
    offset: int
    """The file offset of the source's first byte."""
    nbytes: int
    crc32: int
    """The entry's CRC-32 (zip directory)."""
    crc_before: int
    """CRC-32 of the entry's bytes before the data (blob header, padding)."""
    crc_after: int
    """CRC-32 of the entry's bytes after the data."""
    after: int
    """Their count."""
    where: str
    """The archive, tag and entry, for error messages ("a.zip: tag 't': entry 'e'")."""
    mismatch: Any = None
    """Called with the message of a CRC-32 mismatch, raises the error to report (damage, or
    FileError when another writer's commit since the archive was opened may have overwritten the
    entry: FileData's archive decides); None: modelzip.Error (corrupt)."""


class FileData:
    """The file side of one load: a descriptor of the archive's file and the archive's opened
    state (both kept until close(), also after the archive is closed), and the Located of each
    name whose blob a read() of the file can serve (stored dense tensors of a local archive; none
    for remote and in-memory ones)."""

    def __init__(self, archive: Any, tag: str, blobs: dict[str, str]) -> None:
        """``blobs``: parameter name -> blob entry, as Archive.params gives them."""
        self.fd = archive._data_fd()
        self.archive: Any = None
        self.located: dict[str, Located] = {}
        if self.fd is None:
            return
        try:
            self.archive = archive._share()
            entries = list(dict.fromkeys(blobs.values()))
            ranges = dict(zip(entries, archive._data_ranges(entries)))
        except BaseException:
            self.close()
            raise
        for name, entry in blobs.items():
            r = ranges[entry]
            if r is not None:
                self.located[name] = Located(
                    self.fd, *r, f"{archive.name}: tag '{tag}': entry '{entry}'",
                    functools.partial(self.archive._raise_mismatch, entry, tag))

    def get(self, name: str) -> Optional[Located]:
        return self.located.get(name)

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)
        archive, self.archive = getattr(self, "archive", None), None
        if archive is not None:
            archive.close()

    def __enter__(self) -> "FileData":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


class _Piece(NamedTuple):
    """A run of at most one buffer of a pair's bytes."""

    src: Any
    dst: Any
    located: Optional[Located]
    start: int
    """The run's first byte within the pair's source."""
    pair: int
    """The pair's position in the copy."""


def _triples(pairs: Sequence[Any]) -> list[tuple[Any, Any, Optional[Located]]]:
    return [(p[0], p[1], p[2] if len(p) > 2 else None) for p in pairs]


def _jobs(pairs: Sequence[Any], piece: int) -> list[list[_Piece]]:
    """The bytes of the pairs (or triples with a Located) cut into jobs of at most ``piece``
    bytes: a large tensor in consecutive pieces, small ones packed together."""
    jobs: list[list[_Piece]] = []
    packed: list[_Piece] = []
    packed_bytes = 0
    for index, (source, destination, located) in enumerate(_triples(pairs)):
        if source.numel() == 0:
            continue
        src, dst = as_bytes(source), as_bytes(destination)
        n = src.numel()
        if located is not None and located.nbytes != n:
            located = None  # not the whole blob's data: copied from the tensor, not checked
        if n >= piece:
            jobs.extend([_Piece(src[i:i + piece], dst[i:i + piece], located, i, index)]
                        for i in range(0, n, piece))
            continue
        if packed_bytes + n > piece:
            jobs.append(packed)
            packed, packed_bytes = [], 0
        packed.append(_Piece(src, dst, located, 0, index))
        packed_bytes += n
    if packed:
        jobs.append(packed)
    return jobs


def _run(jobs: Iterable[Any], work: Any, threads: int) -> None:
    """Runs ``work(index, job)`` for every job on ``threads`` threads; re-raises the first
    failure after cancelling the jobs not started."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as executor:
        futures = [executor.submit(work, i, job) for i, job in enumerate(jobs)]
        try:
            for future in futures:
                future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def _read_exactly(located: Located, start: int, into: Any) -> None:
    """Fills ``into`` (a uint8 host tensor) with the located bytes from ``start`` on, by
    os.preadv (which releases the GIL). A file that ends before them (cut since the archive was
    opened, whose entries all lay inside the file) raises what its Located's ``mismatch`` raises
    (FileError: the archive changed since it was opened), else modelzip.Error (corrupt)."""
    view = memoryview(into.numpy()).cast("B")
    done = 0
    while done < len(view):
        got = os.preadv(located.fd, [view[done:]], located.offset + start + done)
        if got <= 0:
            message = "the file ended inside the entry's data"
            if located.mismatch is not None:
                located.mismatch(message)
            raise Error(f"{located.where}: {message}", code="corrupt", message=message)
        done += got


class _Copier:
    """The per-piece steps shared by the direct and staged copies: filling from the file or the
    mapping, read-ahead, and CRC-32 of the pieces (``verify``)."""

    def __init__(self, jobs: list[list[_Piece]], source: Optional[str], verify: bool,
                 threads: int) -> None:
        self.jobs = jobs
        self.read = (source or SOURCE) == "read"
        self.verify = verify
        self.ahead = threads * READ_AHEAD_ROUNDS
        self.crcs: dict[int, list[tuple[int, int, int]]] = {}
        self.located: dict[int, Located] = {}

    def fill(self, piece: _Piece, into: Any) -> None:
        """Copies ``piece``'s source bytes into ``into`` (host memory of its size)."""
        if self.read and piece.located is not None:
            _read_exactly(piece.located, piece.start, into)
        else:
            into.copy_(piece.src)
        if self.verify and piece.located is not None:
            crc = zlib.crc32(memoryview(into.numpy()).cast("B"))
            self.located[piece.pair] = piece.located
            self.crcs.setdefault(piece.pair, []).append((piece.start, into.numel(), crc))

    def read_ahead(self, index: int) -> None:
        """Asks the kernel to start reading the file range of job ``index + ahead``."""
        if not self.read or index + self.ahead >= len(self.jobs):
            return
        located = [p for p in self.jobs[index + self.ahead] if p.located is not None]
        if located:
            first, last = located[0], located[-1]
            if first.located.fd == last.located.fd:
                begin = first.located.offset + first.start
                end = last.located.offset + last.start + last.src.numel()
                if end > begin:
                    os.posix_fadvise(first.located.fd, begin, end - begin,
                                     os.POSIX_FADV_WILLNEED)

    def check(self) -> None:
        """Raises for the first located source whose CRC-32 is not its entry's (verify): what
        its Located's ``mismatch`` raises, else modelzip.Error (corrupt)."""
        concat = _modelzip._crc32_concat
        for pair, pieces in sorted(self.crcs.items()):
            located = self.located[pair]
            crc, covered = 0, 0
            for start, n, piece_crc in sorted(pieces):
                if start != covered:
                    break
                crc = concat(crc, piece_crc, n)
                covered += n
            if covered != located.nbytes:
                continue  # not every byte was copied: nothing to compare
            whole = concat(concat(located.crc_before, crc, located.nbytes), located.crc_after,
                           located.after)
            if whole != located.crc32:
                message = "CRC-32 mismatch: the entry data is damaged"
                if located.mismatch is not None:
                    located.mismatch(message)
                raise Error(f"{located.where}: {message}", code="corrupt", message=message)


def copy_direct(pairs: Sequence[Any], threads: Optional[int] = None, *,
                source: Optional[str] = None, verify: bool = False) -> None:
    """Copies every source into its destination (both addressable by the CPU) on several
    threads, in pieces of at most 32 MiB, from the file or the mapping (``source``); with
    ``verify``, raises for a located source whose CRC-32 is not its entry's (after copying)."""
    threads = threads or thread_count()
    copier = _Copier(_jobs(pairs, _MAX_PIECE), source, verify, threads)

    def work(index: int, job: list[_Piece]) -> None:
        copier.read_ahead(index)
        for piece in job:
            copier.fill(piece, piece.dst)
    _run(copier.jobs, work, threads)
    copier.check()


def copy_staged(pairs: Sequence[Any], target: Any, threads: Optional[int] = None, *,
                source: Optional[str] = None, verify: bool = False) -> None:
    """Copies every source into its destination on ``target``'s device through the staging
    pipeline (module documentation), from the file or the mapping (``source``). Returns when
    every copy is complete; with ``verify``, then raises for a located source whose CRC-32 is not
    its entry's."""
    pairs = _triples(pairs)
    total = sum(src.numel() * src.element_size() for src, _, _ in pairs)
    pool = _pool_for(target, total)
    threads = threads or thread_count()
    copier = _Copier(_jobs(pairs, pool.piece), source, verify, threads)

    def work(index: int, job: list[_Piece]) -> None:
        copier.read_ahead(index)
        buffer = pool.acquire(target)
        pending = None
        try:
            offset = 0
            for piece in job:
                n = piece.src.numel()
                staged = buffer[offset:offset + n]
                copier.fill(piece, staged)
                pending = target.send(piece.dst, staged)
                offset += n
        finally:
            pool.release(buffer, pending)

    try:
        _run(copier.jobs, work, threads)
    finally:
        target.finish()
    copier.check()


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


def _span(tensor: Any) -> Optional[tuple[Any, int, int]]:
    """(device, first byte, byte after the last) of the memory a dense tensor's elements occupy;
    None for an empty or non-dense one."""
    if tensor.layout != torch.strided or tensor.is_quantized or tensor.numel() == 0:
        return None
    last = sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))
    start = tensor.data_ptr()
    return tensor.device, start, start + (last + 1) * tensor.element_size()


def _rounds(triples: list[tuple[Any, Any, Optional[Located]]]) -> list[list[Any]]:
    """The triples in rounds to copy one after another, so that where destinations overlap (tied
    weights, a flat buffer and views of it) the later triple's bytes are what remain: each triple
    goes one round after the latest earlier triple whose destination it overlaps. An earlier
    triple whose destination a later one writes entirely (the same tensor) is left out. One round
    when no destinations overlap (the common case: found by sorting, not by comparing pairs)."""
    spans = sorted(((span[0].type, span[0].index or 0, span[1], span[2], i)
                    for i, span in ((i, _span(t[1])) for i, t in enumerate(triples))
                    if span is not None), key=lambda s: s[:3])
    groups: list[list[tuple]] = []
    end = 0  # of the last group's memory
    for span in spans:
        if groups and groups[-1][-1][:2] == span[:2] and span[2] < end:
            groups[-1].append(span)
            end = max(end, span[3])
        else:
            groups.append([span])
            end = span[3]
    round_of = [0] * len(triples)
    dropped: set[int] = set()
    for group in groups:
        if len(group) < 2:
            continue
        group.sort(key=lambda s: s[4])
        for n, (_, _, start, end, i) in enumerate(group):
            destination = triples[i][1]
            later = [s for s in group[n + 1:] if triples[s[4]][1].shape == destination.shape
                     and triples[s[4]][1].stride() == destination.stride()
                     and triples[s[4]][1].dtype == destination.dtype and s[2] == start]
            if later:
                dropped.add(i)
                continue
            round_of[i] = 1 + max((round_of[j] for _, _, other_start, other_end, j in group[:n]
                                   if j not in dropped and other_start < end
                                   and start < other_end), default=-1)
    rounds: list[list[Any]] = [[] for _ in range(max(round_of, default=0) + 1)]
    for i, triple in enumerate(triples):
        if i not in dropped:
            rounds[round_of[i]].append(triple)
    return rounds


def copy_pairs(pairs: Sequence[Any], *, target: Any = None, source: Optional[str] = None,
               verify: bool = False) -> None:
    """Copies each (source, destination[, located]): pairs on CUDA devices through the staged
    pipeline (one run per device), host ones directly on several threads, the rest (other
    devices, dtype or layout conversions) one by one with ``copy_``. ``target``: use this target
    for every stageable pair instead (the tests' HostTarget). ``source``: "read" or "mapping"
    (default SOURCE) for located sources. ``verify``: check located sources' CRC-32 while
    copying (modelzip.Error after the copies, before the caller returns anything).
    Destinations that overlap are written in the order of ``pairs``: what remains is what
    copying the pairs one by one would leave (load_state_dict's order: the later name wins)."""
    for each_round in _rounds(_triples(pairs)):
        _copy_round(each_round, target, source, verify)


def _copy_round(triples: list[tuple[Any, Any, Optional[Located]]], target: Any,
                source: Optional[str], verify: bool) -> None:
    """copy_pairs of triples whose destinations do not overlap."""
    by_device: dict[Any, list[Any]] = {}
    for source_tensor, destination, located in triples:
        if stageable(source_tensor, destination) and (
                target is not None or destination.device.type in ("cpu", "cuda")):
            by_device.setdefault(destination.device, []).append(
                (source_tensor, destination, located))
        else:
            destination.copy_(source_tensor)
    for device, device_pairs in by_device.items():
        staging = target if target is not None else target_for(device)
        if staging is None:
            copy_direct(device_pairs, source=source, verify=verify)
        else:
            copy_staged(device_pairs, staging, source=source, verify=verify)
