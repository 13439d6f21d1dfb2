"""modelzip.distributed: many ranks save one tag of one archive together, and
any number of ranks load blocks of it back.

Saving is collective: every rank of a ``torch.distributed`` process group or
of an ``mpi4py`` communicator calls :func:`save` with the tensors it owns:
whole parameters (numpy arrays, torch tensors) or :class:`Shard` blocks of
sharded ones, and text (str or lists of str), which one rank writes. Each
rank writes only its own bytes, in parallel, into the one archive; every
sharded parameter becomes one ordinary tensor entry::

    import torch.distributed as dist, modelzip.distributed as mzd
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rows = mzd.split(w.shape, 0, dist.get_rank(), dist.get_world_size())
    mzd.save("model.zip", "step-10", {
        "fc.weight": mzd.Shard(local_rows, global_shape=w.shape, offset=rows[0]),
        "fc.bias": bias,                  # whole: exactly one rank passes it
    })

Loading needs no collective: each rank names the block of each parameter it
wants and reads only those bytes (zero-copy when the block is contiguous)::

    offset, shape = mzd.split((4096, 1024), 0, rank, world)
    part = mzd.load("model.zip", {"fc.weight": (offset, shape)})["fc.weight"]

Training checkpoints (model, optimizer state sharded like the parameters,
hyperparameters and counters in one tag, as modelzip.torch.save_checkpoint
writes them from one process): :func:`save_checkpoint` collectively, and
:func:`load_checkpoint` on any world size, each rank reading the blocks of
parameters and optimizer state its new layout needs (docs/distributed.md).

Errors: a commit that fails on any rank raises the same modelzip.Error on
every rank, naming the rank; the archive is left as it was. The engines'
time-outs apply: pass ``timeout=`` to ``init_process_group`` (gloo); the
MPI communicator polls non-blocking collectives until its ``timeout``.
Ctrl-C of one rank during a blocking save fails the commit on every rank
at its next agreement (KeyboardInterrupt there, modelzip.Error naming that
rank elsewhere): see _CommitInterrupt and docs/python.md.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import signal
import sys
import threading
import time
import warnings
from typing import Any, Iterator, Mapping, NamedTuple, Optional, Sequence, Union

import numpy as np

from . import _modelzip
from ._arguments import old_order_with_tag_keyword
from ._errors import Error, InvalidArgumentError
from ._modelzip import CollectiveStats, CollectiveWriter, Communicator

__all__ = ["Communicator", "CollectiveStats", "CollectiveWriter", "MPICommunicator", "Shard",
           "TorchCommunicator", "communicator", "load", "load_checkpoint", "save",
           "save_checkpoint", "split"]

PathLike = Union[str, "os.PathLike[str]"]
Block = tuple[Sequence[int], Sequence[int]]


class Shard(NamedTuple):
    """This rank's block ``value`` of a parameter whose whole shape is
    ``global_shape``; ``offset`` is the block's first index in each dimension."""
    value: Any
    global_shape: Sequence[int]
    offset: Sequence[int]


def split(global_shape: Sequence[int], dim: int, part: int, parts: int) -> tuple[list, list]:
    """(offset, shape) of part ``part`` of ``parts`` of ``global_shape`` split
    along ``dim`` as evenly as possible (the first ``n % parts`` get one more)."""
    shape = [int(d) for d in global_shape]
    if not 0 <= dim < len(shape) or parts <= 0 or not 0 <= part < parts:
        raise ValueError(f"cannot take part {part} of {parts} along dimension {dim} of {shape}")
    base, extra = divmod(shape[dim], parts)
    offset = [0] * len(shape)
    offset[dim] = part * base + min(part, extra)
    shape[dim] = base + (1 if part < extra else 0)
    return offset, shape


class TorchCommunicator(Communicator):
    """The collectives over a ``torch.distributed`` process group (gloo).
    Time-outs are the group's (``init_process_group(timeout=...)``).

    gather() and broadcast() send messages of any size in rounds of at most
    ``_max_message_bytes`` (1 GiB) over all ranks: torch's object collectives
    copy each message several times and pad every rank's to the largest, so
    the root of a gather would otherwise hold world size times the largest."""

    _max_message_bytes = 1 << 30  # tests lower it

    def __init__(self, group: Any = None) -> None:
        super().__init__()
        import torch.distributed as dist
        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialized (init_process_group)")
        self._dist = dist
        self._group = group
        self._rank = dist.get_rank(group)
        self._size = dist.get_world_size(group)

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def _global(self, rank: int) -> int:
        if self._group is None:
            return rank
        return self._dist.distributed_c10d._get_global_rank(self._group, rank)

    def _all(self, obj: Any) -> list:
        out = [None] * self._size
        self._dist.all_gather_object(out, obj, group=self._group)
        return out

    def gather(self, data: bytes, root: int) -> Optional[list]:
        import torch
        data = bytes(data)
        counts = [torch.zeros(1, dtype=torch.int64) for _ in range(self._size)]
        self._dist.all_gather(counts, torch.tensor([len(data)], dtype=torch.int64),
                              group=self._group)
        chunk, rounds = _rounds([int(c.item()) for c in counts], self._max_message_bytes)
        parts: Optional[list] = [[] for _ in range(self._size)] if self._rank == root else None
        for i in range(rounds):
            out = [None] * self._size if self._rank == root else None
            self._dist.gather_object(data[i * chunk:(i + 1) * chunk], out,
                                     dst=self._global(root), group=self._group)
            if parts is not None:
                for part, piece in zip(parts, out):
                    part.append(piece)
        return None if parts is None else [b"".join(part) for part in parts]

    def broadcast(self, data: bytes, root: int) -> bytes:
        import torch
        data = bytes(data) if self._rank == root else b""
        count = torch.tensor([len(data)], dtype=torch.int64)
        self._dist.broadcast(count, src=self._global(root), group=self._group)
        chunk, rounds = _rounds([int(count.item())], self._max_message_bytes)
        pieces = []
        for i in range(rounds):
            box = [data[i * chunk:(i + 1) * chunk] if self._rank == root else None]
            self._dist.broadcast_object_list(box, src=self._global(root), group=self._group)
            pieces.append(box[0])
        return data if self._rank == root else b"".join(pieces)

    def agree(self, error: str) -> Optional[tuple[int, str]]:
        for rank, message in enumerate(self._all(str(error))):
            if message:
                return rank, message
        return None


class MPICommunicator(Communicator):
    """The collectives over an ``mpi4py`` communicator, as non-blocking MPI
    operations polled until ``timeout`` seconds (then modelzip.Error names
    the operation and rank: a rank that died or never called). The time-out
    bounds each phase of a commit: it must exceed the slowest rank's write.

    gather() and broadcast() send messages of any size in rounds of at most
    ``_max_message_bytes`` over all ranks: MPI counts and displacements are C
    ints, so one MPI call moves less than 2 GiB (mpi4py 3 raises
    OverflowError beyond, on the rank that holds the large message alone,
    and the others would wait for it until the time-out)."""

    _max_message_bytes = (1 << 31) - 1  # tests lower it

    def __init__(self, comm: Any = None, timeout: float = 1800.0) -> None:
        super().__init__()
        from mpi4py import MPI
        self._MPI = MPI
        self._comm = (comm if comm is not None else MPI.COMM_WORLD).Dup()
        self._timeout = timeout

    def rank(self) -> int:
        return self._comm.Get_rank()

    def size(self) -> int:
        return self._comm.Get_size()

    def _wait(self, request: Any, op: str) -> None:
        deadline = time.monotonic() + self._timeout
        spins = 0
        while not request.Test():
            if time.monotonic() > deadline:
                raise Error(f"MPI {op} timed out after {self._timeout} s on rank "
                                      f"{self.rank()} (another rank failed or never called it)")
            spins += 1
            if spins > 100:
                time.sleep(0.00005 if spins < 2000 else 0.001)

    def gather(self, data: bytes, root: int) -> Optional[list]:
        mine = np.frombuffer(bytes(data), dtype=np.uint8)
        counts = np.zeros(self.size(), dtype=np.int64)
        self._wait(self._comm.Iallgather(np.array([mine.size], dtype=np.int64), counts),
                   "Iallgather")
        chunk, rounds = _rounds([int(c) for c in counts], self._max_message_bytes)
        is_root = self.rank() == root
        parts = ([np.empty(int(c), dtype=np.uint8) for c in counts] if is_root and rounds > 1
                 else [])
        for i in range(rounds):
            start = i * chunk
            sizes = np.clip(counts - start, 0, chunk)
            if is_root:
                total = np.empty(int(sizes.sum()), dtype=np.uint8)
                displs = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
                recv = [total, (sizes, displs), self._MPI.BYTE]
            else:
                recv = None
            self._wait(self._comm.Igatherv(mine[start:start + chunk], recv, root=root),
                       "Igatherv")
            if is_root and rounds == 1:
                return [total[d:d + c].tobytes() for d, c in zip(displs, sizes)]
            for part, d, c in zip(parts, displs if is_root else (), sizes):
                part[start:start + c] = total[d:d + c]
        return [part.tobytes() for part in parts] if is_root else None

    def broadcast(self, data: bytes, root: int) -> bytes:
        count = np.array([len(data) if self.rank() == root else 0], dtype=np.int64)
        self._wait(self._comm.Ibcast(count, root=root), "Ibcast")
        buf = (np.frombuffer(bytearray(data), dtype=np.uint8) if self.rank() == root
               else np.zeros(int(count[0]), dtype=np.uint8))
        chunk, rounds = _rounds([buf.size], self._max_message_bytes)
        for i in range(rounds):
            self._wait(self._comm.Ibcast(buf[i * chunk:(i + 1) * chunk], root=root), "Ibcast")
        return buf.tobytes()

    def agree(self, error: str) -> Optional[tuple[int, str]]:
        big = np.iinfo(np.int32).max
        mine = np.array([self.rank() if error else big], dtype=np.int32)
        first = np.zeros(1, dtype=np.int32)
        self._wait(self._comm.Iallreduce(mine, first, op=self._MPI.MIN), "Iallreduce")
        if int(first[0]) == big:
            return None
        rank = int(first[0])
        return rank, self.broadcast(error.encode() if self.rank() == rank else b"", rank).decode()


def _rounds(counts: Sequence[int], limit: int) -> tuple[int, int]:
    """(chunk, rounds): the bytes each rank sends per round and the number of
    rounds (at least 1) for messages of `counts` bytes, one per rank, so
    that no round moves more than `limit` bytes over all ranks."""
    chunk = max(1, int(limit) // max(1, len(counts)))
    return chunk, max(1, max((-(-c // chunk) for c in counts), default=1))


def communicator(group: Any = None) -> Communicator:
    """The Communicator for ``group``: a Communicator as is, an mpi4py
    communicator (anything with ``Get_rank``), a torch.distributed process
    group, or None: torch's default group when torch.distributed is
    initialized, else mpi4py's COMM_WORLD."""
    if isinstance(group, Communicator):
        return group
    if group is not None and hasattr(group, "Get_rank"):
        return MPICommunicator(group)
    if group is None:
        return TorchCommunicator() if _torch_default_group() else MPICommunicator()
    return TorchCommunicator(group)


def _torch_default_group() -> bool:
    """Whether torch.distributed's default group is initialized. A process that
    never imported torch.distributed has none: it is not imported here for the
    question (importing torch takes seconds, the first save of an mpi4py run
    would pay them)."""
    dist = sys.modules.get("torch.distributed")
    return dist is not None and dist.is_available() and dist.is_initialized()


def save(path: PathLike, tag: str, tensors: Mapping[str, Any], *, group: Any = None,
         share: Optional[Mapping[str, tuple[str, str]]] = None, dedup: bool = True,
         durable: bool = True, root: int = 0, blocking: bool = True,
         background_group: Any = None, rank_lock_timeout: Optional[float] = None,
         dtypes: Optional[Mapping[str, str]] = None, replace: bool = False,
         keep_last: Optional[int] = None,
         tag_metadata: Optional[Mapping[str, str]] = None) -> Any:
    """Collective: every rank calls it with the parameters it owns (possibly
    none). ``tensors`` maps names to arrays/tensors (whole parameters, owned
    by this rank alone), :class:`Shard` blocks, or text: a str or (nested)
    lists of str, as modelzip.save takes them (a tokenizer's vocabulary, a run
    id), which any number of ranks may pass under one name with the same value
    (written once, by one rank; different values, or text on one rank and an
    array of that name on another, raise InvalidArgumentError on every rank
    naming the ranks); Python scalars, None, torch dtypes and tuples of tensors
    as modelzip.save stores them (docs/distributed.md). ``share`` maps names to
    (tag, parameter) of an existing tag. Arrays are borrowed, not copied.
    ``dtypes``: {name: "bfloat16" | "float8_*" | "float4_e2m1fn_x2"} for
    arrays of this rank holding raw bits of those types, as for
    modelzip.save (torch tensors of these types need none).
    Returns this rank's CollectiveStats.

    ``path`` may be ``s3://BUCKET/KEY``: the ranks upload the parts of one
    multipart upload and the root completes it (docs/s3-writes.md).

    CUDA tensors (whole or a Shard's block) are fetched to host memory
    through the pinned staging pipeline of modelzip.save (device-to-host
    copies of one piece overlapped with the host copy of the previous one),
    not one ``.cpu()`` per tensor; host arrays are used as they are.

    ``blocking=False``: snapshots this rank's tensors (a copy into staging
    memory, several threads, GIL released; CUDA tensors fetched as above
    first) and returns a concurrent.futures.Future of the CollectiveStats;
    the collective commit runs in a background thread
    (modelzip::BackgroundCollectiveSave) over a communicator of its own, so
    that the training's collectives never mix with it: ``background_group``
    if given, else one made once per group (for torch.distributed's default
    group a gloo group from ``dist.new_group``; for mpi4py a ``Dup()`` of the
    communicator, which needs MPI_THREAD_MULTIPLE, mpi4py's default; torch
    subgroups need ``background_group``). Every rank must call it in the
    same order; background saves run one after another, in call order.
    result() raises the error of a failed commit on every rank; the future
    cannot be cancelled (one rank alone cannot leave a collective).
    Interpreter exit waits for background saves in flight; a Ctrl-C while
    it waits stops them on every rank at the commit's next agreement (the
    archive as it was, unless past the last agreement), and exit waits only
    for that (docs/saving.md).

    ``rank_lock_timeout``: seconds the root, undoing a failed commit, waits
    for ranks still writing into the archive before it leaves the append
    journal to the next writer instead (None: the environment variable
    MODELZIP_RANK_LOCK_TIMEOUT, else 60; see docs/distributed.md).

    ``replace=True`` replaces the tag of that name (any letter case) in the
    same commit; ``keep_last=N`` then keeps only the newest N tags, also in
    that commit (as for modelzip.save; docs/rotation.md). Every rank passes
    the same values; ``keep_last=0`` (or values that differ between ranks)
    raises InvalidArgumentError on every rank, before anything is written.
    ``s3://`` archives too: the tags are removed in the commit's one upload
    (docs/s3-writes.md).

    ``tag_metadata`` ({str: str}): the tag's free-form metadata, as for modelzip.save
    (``Archive.tag_metadata(tag)`` gives it back). Every rank passes the same (None and {} are
    the same); values that differ raise InvalidArgumentError on every rank, naming the ranks,
    before anything is written. A torch state dict's module versions (``state_dict()._metadata``)
    are kept as modelzip.torch.save keeps them: the ranks' state dicts' versions together (a
    module prefix whose versions differ between ranks raises as above). With
    ``blocking=False``, the ranks compare them in the call, over ``group`` (one gather and
    one agreement), before the background commit starts; a rank whose tensors do not stage
    then fails every rank in the call (InvalidArgumentError naming it), as a blocking save
    does, and so does a Ctrl-C while it stages (KeyboardInterrupt there, modelzip.Error
    "cancelled" naming it on the others)."""
    if blocking:
        return _commit(path, tag, tensors, communicator(group), share, dedup, durable, root,
                       rank_lock_timeout, dtypes, replace, keep_last, tag_metadata)
    comm = (communicator(background_group) if background_group is not None
            else _background_communicator(group))
    from ._values import new_fetches
    fetches = new_fetches()  # CUDA tensors land in staging areas that the save adopts

    def stage() -> tuple[CollectiveWriter, list]:
        writer = _staged_writer(path, _host_values(tensors, fetches), comm, share, dedup,
                                durable, root, rank_lock_timeout, _raw_bits_marks(tensors, dtypes))
        return writer, _tag_metadata_part(tensors, tag_metadata, True)

    # A Ctrl-C during the staging fails it on every rank at its agreement, as
    # for a blocking save; one noted after it is raised once the save started
    # (by _CommitInterrupt's exit), which stops it below.
    background = None
    try:
        staging_comm = communicator(group)
        with _CommitInterrupt(staging_comm, path, note_completion=False) as interrupt:
            writer = _agreed_staging(staging_comm, root, path, tag, stage, interrupt)
            adopt = fetches.areas if fetches is not None else None
            # Registered before the save starts, and given its handle by the C++
            # call itself: a KeyboardInterrupt raised as the call returns (or
            # anywhere up to the return below) finds the save registered
            # (_BackgroundCommits.abandon).
            background = _BackgroundCommits.register(comm, os.fspath(path), tag)
            writer.start_background(tag, adopt=adopt, replace=replace, keep_last=keep_last,
                                    into=background)
            background.start_completion()
    except BaseException as error:  # noqa: B902 (a KeyboardInterrupt too)
        if background is not None:
            _BackgroundCommits.abandon(background, error)
        raise
    return background.future


def _staged_writer(path: PathLike, tensors: Mapping[str, Any], comm: Communicator,
                   share: Optional[Mapping[str, tuple[str, str]]], dedup: bool, durable: bool,
                   root: int, rank_lock_timeout: Optional[float],
                   raw_bits: Optional[Mapping[str, str]] = None) -> CollectiveWriter:
    writer = CollectiveWriter(path, comm, dedup=dedup, durable=durable, root=root,
                              rank_lock_timeout=rank_lock_timeout)
    _stage_tensors(writer, tensors, raw_bits or {})
    for name, (from_tag, from_param) in (share or {}).items():
        writer.share(name, from_tag, from_param)
    return writer


def _commit(path: PathLike, tag: str, tensors: Mapping[str, Any], comm: Communicator,
            share: Optional[Mapping[str, tuple[str, str]]], dedup: bool, durable: bool,
            root: int, rank_lock_timeout: Optional[float] = None,
            dtypes: Optional[Mapping[str, str]] = None, replace: bool = False,
            keep_last: Optional[int] = None,
            tag_metadata: Optional[Mapping[str, str]] = None) -> CollectiveStats:
    """Stages this rank's tensors, agrees with every rank that they staged, then
    commits. A rank whose tensors do not stage (a block outside its global
    shape, data not of its block's shape, a value that is no tensor) raises its
    own exception, as a single process would, and every other rank
    InvalidArgumentError "collective commit failed on rank R: ..." naming the
    lowest such rank, instead of waiting in the commit for the engine's
    time-out. The ranks' tag metadata is compared at the root first (_merged_tag_metadata),
    which stages it: differing values fail there, before the agreement."""
    def stage() -> tuple[CollectiveWriter, list]:
        _check_keep_last(keep_last)
        part = _tag_metadata_part(tensors, tag_metadata, True)
        return _staged_writer(path, _host_values(tensors), comm, share, dedup, durable, root,
                              rank_lock_timeout, _raw_bits_marks(tensors, dtypes)), part

    with _CommitInterrupt(comm, path) as interrupt:
        writer = _agreed_staging(comm, root, path, tag, stage, interrupt)
        return writer.commit(tag, replace=replace, keep_last=keep_last)


class _CommitInterrupt:
    """Ctrl-C during a blocking collective commit on the main thread. A rank
    that left the commit's collectives mid-way would leave the others waiting
    for it until the engine's time-out, so SIGINT (while Python's default
    handler is installed) is only noted meanwhile; the commit reports it at its
    next agreement of the ranks (the binding passes it to the communicator's
    agree() as this rank's error, whatever the Communicator subclass), where every
    rank fails the commit (the archive unchanged) with modelzip.Error (code
    "cancelled") "collective commit failed on rank R: rank R was interrupted
    (Ctrl-C)", and the interrupted rank raises KeyboardInterrupt instead. One
    noted after the last agreement cannot stop the commit: it completes and
    KeyboardInterrupt is raised then. A note on the KeyboardInterrupt says
    which happened, as for modelzip.save. Within staging(), while this rank
    works alone before an agreement, SIGINT also raises KeyboardInterrupt at
    once (the caller catches it and goes on to the agreement).
    ``note_completion=False`` (a background save, which its caller stops when
    a KeyboardInterrupt leaves the block after it started): a Ctrl-C noted
    in a block that ends without error raises a KeyboardInterrupt without
    the note."""

    def __init__(self, comm: Communicator, path: PathLike, note_completion: bool = True) -> None:
        self._comm, self._path = comm, os.fspath(path)
        self._note_completion = note_completion
        self._previous: Any = None
        self._staging = False
        self.noted = False

    def __enter__(self) -> "_CommitInterrupt":
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            self._previous = signal.signal(signal.SIGINT, self._note)
            self._comm._commit_interrupt = self
        return self

    def _note(self, signum: int, frame: Any) -> None:
        self.noted = True
        if self._staging:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def staging(self) -> Iterator[None]:
        """A step of this rank alone (no collective under way), which Ctrl-C
        stops with KeyboardInterrupt."""
        self._staging = True
        try:
            yield
        finally:
            self._staging = False

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if self._previous is None:
            return
        signal.signal(signal.SIGINT, self._previous)
        self._comm._commit_interrupt = None
        if not self.noted:
            return
        interrupt = KeyboardInterrupt()
        if kind is None and not self._note_completion:
            raise interrupt
        interrupt.add_note(f"{self._path}: " + (
            "the save completed before the interrupt could stop it" if kind is None
            else f"the save did not happen: {value}"))
        raise interrupt from value

    @staticmethod
    def error_of(comm: Communicator, error: str) -> str:
        """`error`, or this rank's interrupt if one was noted during a commit
        (the binding asks it before each agree() the commit calls)."""
        interrupt = getattr(comm, "_commit_interrupt", None)
        if error or interrupt is None or not interrupt.noted:
            return error
        return _modelzip._cancelled_error_text(_CommitInterrupt._text(comm.rank()))

    @staticmethod
    def cancelled(failure: tuple[int, str], what: str, path: PathLike,
                  tag: str) -> Optional[Error]:
        """The modelzip.Error (code "cancelled") "`what` failed on rank R: rank R
        was interrupted (Ctrl-C)" when the failure an agreement returned is
        rank R's interrupt (error_of), else None."""
        rank, message = failure
        if message != _modelzip._cancelled_error_text(_CommitInterrupt._text(rank)):
            return None
        text = f"{what} failed on rank {rank}: {_CommitInterrupt._text(rank)}"
        return Error(f"{os.fspath(path)}: tag '{tag}': {text}", code="cancelled", message=text,
                     archive=os.fspath(path), tag=tag)

    @staticmethod
    def _text(rank: int) -> str:
        return f"rank {rank} was interrupted (Ctrl-C)"


def _tag_metadata_part(tensors: Mapping[str, Any], tag_metadata: Optional[Mapping[str, str]],
                       versions: bool) -> list:
    """What this rank sends the root for the tag's metadata.toml (JSON-able): [its
    ``tag_metadata`` checked as modelzip.save checks it ({} for None), the module versions
    of ``tensors`` (a torch state dict's _metadata, as modelzip.torch.save keeps them) or None,
    when ``versions``]. Raises TypeError / ValueError as modelzip.save does."""
    from ._values import checked_tag_metadata, state_dict_metadata
    checked = {} if tag_metadata is None else checked_tag_metadata(tag_metadata)
    text = state_dict_metadata(tensors) if versions else None
    return [checked, None if text is None else json.loads(text)]


def _merged_tag_metadata(parts: Sequence[Optional[list]],
                         root: int) -> tuple[dict, Optional[str]]:
    """The root's (tag_metadata, module versions as JSON text or None) of the ranks'
    _tag_metadata_part ``parts`` (by rank; None for a rank whose staging failed, which fails
    the commit anyway): the tag metadata every rank passed, and every rank's module
    versions together (the root's first, then each other rank's new module prefixes).
    InvalidArgumentError, naming the ranks, when the tag metadata differs between ranks or
    one module prefix has different versions."""
    ranks = [(rank, part) for rank, part in enumerate(parts) if part is not None]
    ranks.sort(key=lambda each: each[0] != root)  # the root's first
    if not ranks:
        return {}, None
    (first_rank, (metadata, _)), *_ = ranks
    versions: dict[str, Any] = {}
    owners: dict[str, int] = {}
    with_versions = False
    for rank, (theirs, their_versions) in ranks:
        if theirs != metadata:
            raise InvalidArgumentError(
                f"rank {rank} passes tag_metadata={theirs!r}, rank {first_rank} "
                f"tag_metadata={metadata!r} (every rank passes the same)",
                code="invalid_argument")
        with_versions = with_versions or their_versions is not None
        for prefix, version in (their_versions or {}).items():
            if versions.setdefault(prefix, version) != version:
                raise InvalidArgumentError(
                    f"the state dicts' module versions (_metadata) of {prefix!r} differ: "
                    f"{versions[prefix]!r} on rank {owners[prefix]}, {version!r} on rank {rank}",
                    code="invalid_argument")
            owners.setdefault(prefix, rank)
    return metadata, (json.dumps(versions, ensure_ascii=False, allow_nan=False)
                      if with_versions else None)


def _root_stages_tag_metadata(comm: Communicator, root: int, writer: Optional[CollectiveWriter],
                              part: Optional[list]) -> Optional[Exception]:
    """Collective: gathers every rank's _tag_metadata_part ``part`` (None, and ``writer`` None,
    for a rank whose staging failed) at the root, which stages what they agree on in its
    ``writer``. Returns the root's error (_merged_tag_metadata's InvalidArgumentError), for the
    caller's agreement of the ranks; None elsewhere."""
    parts = comm.gather(json.dumps(None if writer is None else part).encode(), root)
    if parts is None or writer is None:
        return None
    try:
        writer._set_tag_metadata(*_merged_tag_metadata([json.loads(p) for p in parts], root))
    except Exception as e:  # the caller's agreement tells every rank
        return e
    return None


def _agreed_staging(comm: Communicator, root: int, path: PathLike, tag: str, stage: Any,
                    interrupt: "_CommitInterrupt") -> CollectiveWriter:
    """Collective, over ``comm``: this rank's ``stage()`` (its staged writer and
    _tag_metadata_part), the ranks' tag metadata to the root, which stages what they agree on
    in its writer, and an agreement. Returns the writer; raises on every rank when a rank's
    staging raised (its own exception there, InvalidArgumentError naming it elsewhere: no rank
    goes on to a commit that another will never join), was interrupted by a Ctrl-C that
    ``interrupt`` (entered, over ``comm``) noted (modelzip.Error "cancelled" naming it, which
    ``interrupt``'s exit turns into KeyboardInterrupt on that rank), or the tag metadata
    differs (the root's InvalidArgumentError)."""
    error, cause, writer, part = "", None, None, None
    try:
        with interrupt.staging():
            writer, part = stage()
    except Exception as e:  # every rank must reach the agreement, whatever failed here
        error, cause = f"{type(e).__name__}: {e}", e
    except KeyboardInterrupt:
        if not interrupt.noted:  # not Ctrl-C noted here (a handler of the caller's own)
            raise
        writer = None
    failed = _root_stages_tag_metadata(comm, root, writer, part)
    if failed is not None:
        error, cause = f"{type(failed).__name__}: {failed}", failed
    failure = comm.agree(_CommitInterrupt.error_of(comm, error))
    if cause is not None:
        raise cause
    if failure is not None:
        what = "collective commit"
        cancelled = _CommitInterrupt.cancelled(failure, what, path, tag)
        if cancelled is not None:
            raise cancelled
        text = f"{what} failed on rank {failure[0]}: {failure[1]}"
        raise InvalidArgumentError(f"{os.fspath(path)}: tag '{tag}': {text}",
                                   code="invalid_argument", message=text,
                                   archive=os.fspath(path), tag=tag)
    return writer


def _check_keep_last(keep_last: Optional[int]) -> None:
    """A keep_last that cannot be a count raises here, where every rank agrees on
    the failure (0 is the commit's own error, the same on every rank)."""
    if keep_last is not None and (isinstance(keep_last, bool) or not isinstance(keep_last, int)
                                  or keep_last < 0):
        raise ValueError(f"keep_last must be a number of tags >= 1, not {keep_last!r}")


def _raw_bits_marks(tensors: Mapping[str, Any], dtypes: Optional[Mapping[str, str]]) -> dict:
    """save()'s ``dtypes``, checked (_values.raw_bits_marks): names of this rank's tensors only."""
    from ._values import raw_bits_marks
    marks = raw_bits_marks((), dtypes)
    for name in marks:
        if name not in tensors:
            raise ValueError(f"dtypes names {name!r}, which is not among this rank's tensors")
    return marks


def _fetch_target() -> Any:
    """The staging target _host_values fetches through: None, the pinned pipeline for CUDA
    tensors only (tests substitute _device_save.HostFetchTarget, which sends host tensors
    through the same pipeline)."""
    return None


def _host_values(tensors: Mapping[str, Any], fetches: Any = None) -> Mapping[str, Any]:
    """``tensors`` with each dense CUDA tensor (whole or a Shard's block) replaced by a host
    tensor of the same bytes, fetched through pinned staging memory (_device_save.py);
    ``tensors`` itself when there is none (torch is not imported for that). ``fetches``: a
    _device_save.Fetches collecting the staging areas the host tensors view (a background save
    adopts them)."""
    if "torch" not in sys.modules:
        return tensors
    items = [(name, v.value if isinstance(v, Shard) else v) for name, v in tensors.items()]
    target = _fetch_target()
    if target is None:
        from ._values import fetch_device_tensors
        fetched = fetch_device_tensors(items, fetches)
    else:
        from ._device_save import host_items
        fetched = host_items(items, target, fetches)
    if all(new is old for (_, new), (_, old) in zip(fetched, items)):
        return tensors
    return {name: (Shard(host, value.global_shape, value.offset) if isinstance(value, Shard)
                   else host)
            for (name, value), (_, host) in zip(tensors.items(), fetched)}


# Communicators of background commits, by the group they stand for (kept
# with that group, so that its id is not reused).
_background_comms: dict[int, tuple[Any, Communicator]] = {}
# The process groups _background_communicator made (dist.new_group), which
# _destroy_made_groups destroys at exit.
_made_groups: list[Any] = []


def _destroy_made_groups() -> None:
    """An atexit hook (registered when modelzip makes its first process group):
    destroys the process groups modelzip made, as torch asks of a process
    before it exits (torch 1.13's gloo could abort the process at exit,
    "terminate called without an active exception", when a group was left
    to the interpreter's finalization). atexit hooks run after threading's
    exit hooks, where _BackgroundCommits._wait_at_exit waits for the
    background saves; a save still in flight (exit stopped waiting for it)
    uses its group until it ends, so then none is destroyed. Groups the
    caller made (the default one, ``background_group``) are the caller's
    to destroy. Leaves a group torch destroyed already (the caller's
    destroy_process_group() of the default group destroys them all)."""
    with _BackgroundCommits._lock:
        if _BackgroundCommits._in_flight:
            return
    import torch.distributed as dist
    for key, (_, made) in list(_background_comms.items()):
        if isinstance(made, TorchCommunicator) and any(made._group is g for g in _made_groups):
            del _background_comms[key]
    while _made_groups:
        group = _made_groups.pop()
        try:
            dist.destroy_process_group(group)
        except Exception:  # destroyed already ("Invalid process group"): exit goes on
            pass


def _background_communicator(group: Any) -> Communicator:
    """A communicator for background commits over the ranks of ``group``, made
    once per group (collectively: every rank is in this call)."""
    if isinstance(group, MPICommunicator):
        group = group._comm
    if isinstance(group, Communicator) and not isinstance(group, TorchCommunicator):
        raise ValueError("blocking=False with a Communicator of your own needs background_group= "
                         "(a second communicator over the same ranks, used only by modelzip)")
    if isinstance(group, TorchCommunicator):
        group = group._group
    if group is None and not _torch_default_group():
        from mpi4py import MPI
        group = MPI.COMM_WORLD
    key = id(group)
    if key not in _background_comms:
        if group is None:
            import torch.distributed as dist
            made_group = dist.new_group(backend="gloo")
            if not _made_groups:
                import atexit
                atexit.register(_destroy_made_groups)
            _made_groups.append(made_group)
            made: Communicator = TorchCommunicator(made_group)
        elif hasattr(group, "Get_rank"):
            made = MPICommunicator(group)  # a Dup() of it
        else:
            raise ValueError("blocking=False with a torch.distributed subgroup needs "
                             "background_group= (make one with dist.new_group, which every "
                             "process of the default group must call)")
        _background_comms[key] = (group, made)
    return _background_comms[key][1]


class _CollectiveFuture(concurrent.futures.Future):
    """A background collective save: cancel() always returns False."""

    def cancel(self) -> bool:
        return False


class _BackgroundSave:
    """One background collective save of this rank, registered before it
    starts: the C++ start gives it its handle (_handle) as it returns."""

    def __init__(self, comm: Communicator, path: str, tag: str) -> None:
        self.future = _CollectiveFuture()
        self.future.set_running_or_notify_cancel()
        self.comm, self.path, self.tag = comm, path, tag  # holds the communicator until the end
        self._handle: Any = None
        self._claim = threading.Lock()  # held by whoever completes the future

    def start_completion(self) -> None:
        """Starts a non-daemon thread running complete (which only one runs)."""
        threading.Thread(target=self.complete, daemon=False,
                         name=f"modelzip collective save {self.tag}").start()

    def complete(self) -> None:
        """Waits for the save (GIL released) and completes the future, unless
        another thread has claimed that."""
        if not self._claim.acquire(blocking=False):
            return
        try:
            stats = self._handle.wait()
        except BaseException as error:  # noqa: B902 (handed to the future)
            _BackgroundCommits._ended(self)
            self.future.set_exception(error)
        else:
            _BackgroundCommits._ended(self)
            self.future.set_result(stats)


class _BackgroundCommits:
    """Completes the futures of background collective saves: a non-daemon thread per save
    waits for it (GIL released). The saves themselves run in C++ threads, one after another
    in start order. Interpreter exit waits for the saves in flight (_wait_at_exit, with
    threading's exit hooks, before Python joins its threads); a Ctrl-C there stops them
    at the ranks' next agreement, as a Ctrl-C stops a blocking save (_CommitInterrupt)."""

    _lock = threading.Lock()
    # The saves in flight, oldest first.
    _in_flight: list[_BackgroundSave] = []
    _exit_wait_registered = False

    @staticmethod
    def register(comm: Communicator, path: str, tag: str) -> _BackgroundSave:
        save = _BackgroundSave(comm, path, tag)
        _BackgroundCommits._register_exit_wait()
        with _BackgroundCommits._lock:
            _BackgroundCommits._in_flight.append(save)
        return save

    @staticmethod
    def abandon(save: _BackgroundSave, error: BaseException) -> None:
        """save() raises `error` after registering `save`. One that did not
        start is forgotten. One that started (a Ctrl-C as the C++ call
        returned) is stopped as exit's interrupted wait stops saves: once the
        saves before it on its communicator have ended, its commit fails on
        every rank at the ranks' next agreement (unless past the last one),
        and a note on `error` says which happened."""
        if save._handle is None:
            _BackgroundCommits._ended(save)
            return
        with _BackgroundCommits._lock:
            in_flight = _BackgroundCommits._in_flight
            earlier = [s.future for s in in_flight[:in_flight.index(save)] if s.comm is save.comm]
        concurrent.futures.wait(earlier)  # they run first: only this save is stopped
        stop = _StopCommits()
        save.comm._commit_interrupt = stop  # error_of() tells it at the commit's next agree()
        try:
            save.complete()  # unless its thread has claimed it
            concurrent.futures.wait([save.future])
        finally:
            if getattr(save.comm, "_commit_interrupt", None) is stop:
                save.comm._commit_interrupt = None
        failure = save.future.exception()
        note = ("the save completed before the interrupt could stop it" if failure is None
                else f"the save did not happen: {failure}")
        error.add_note(f"{save.path}: {note}")

    @staticmethod
    def _ended(save: _BackgroundSave) -> None:
        with _BackgroundCommits._lock:
            if save in _BackgroundCommits._in_flight:
                _BackgroundCommits._in_flight.remove(save)

    @staticmethod
    def _register_exit_wait() -> None:
        if _BackgroundCommits._exit_wait_registered:
            return
        _BackgroundCommits._exit_wait_registered = True
        register = getattr(threading, "_register_atexit", None)
        try:
            if register is not None:
                register(_BackgroundCommits._wait_at_exit)
                return
        except RuntimeError:  # interpreter shutting down: its threads are being joined
            return
        import atexit
        atexit.register(_BackgroundCommits._wait_at_exit)

    @staticmethod
    def _wait_at_exit() -> None:
        """Waits for every rank's commit of the saves in flight. A Ctrl-C
        during that wait stops them: this rank tells the interrupt at the
        next agreement of the ranks, where every rank fails the commit
        (modelzip.Error "cancelled": "collective commit failed on rank R:
        rank R was interrupted (Ctrl-C)") and the archive stays as it was,
        unless the commit is past its last agreement (it then completes);
        exit waits only for that. Another Ctrl-C leaves at once (the next
        writer rolls an interrupted save back)."""
        from ._async import _say
        with _BackgroundCommits._lock:
            saves = [s for s in _BackgroundCommits._in_flight if s._handle is not None]
        if not saves:
            return
        for s in saves:
            if not s._claim.locked():  # a Ctrl-C in save() came before its thread started
                s.start_completion()
        futures = [s.future for s in saves]
        if isinstance(getattr(sys, "last_value", None), KeyboardInterrupt):
            for s in saves:
                _say(f"waiting for the background collective save of tag {s.tag!r} to {s.path}: "
                     f"every rank's part of its commit (Ctrl-C again stops it on every rank "
                     f"at their next agreement: the archive stays as it was)")
        try:
            concurrent.futures.wait(futures)
            return
        except KeyboardInterrupt:
            pass
        for s in saves:  # error_of() tells it at the commit's next agree()
            s.comm._commit_interrupt = _StopCommits()
        try:
            concurrent.futures.wait(futures)
        except KeyboardInterrupt:
            _say("leaving without waiting for the background collective saves: the next writer "
                 "of an archive rolls an interrupted save back")
            return
        for s in saves:
            error = s.future.exception()
            what = f"the background collective save of tag {s.tag!r} to {s.path}"
            if getattr(error, "code", None) == "cancelled" and "(Ctrl-C)" in str(error):
                _say(f"{what} was stopped (Ctrl-C): its commit failed on every rank, the "
                     f"archive is as it was")
            elif error is None:
                _say(f"{what} completed before Ctrl-C could stop it")
            else:
                _say(f"{what} failed: {error}")


class _StopCommits:
    """A background communicator's _commit_interrupt once exit's wait was
    interrupted, or while save() stops the save a Ctrl-C interrupted as it
    started: its commits fail at their next agreement (error_of)."""

    noted = True


def load(path: PathLike, blocks: Optional[Mapping[str, Optional[Block]]] = None, *,
         tag: Optional[str] = None, torch: bool = False, device: Any = None,
         stats: Optional[dict] = None) -> dict[str, Any]:
    """This rank's blocks, by parameter name: ``blocks`` maps each name to
    (offset, shape) or None for the whole tensor; without ``blocks``, every
    parameter of the tag whole. No collective: any number of ranks may load.
    Contiguous blocks are read-only zero-copy numpy views; others are copies
    of just the block's bytes. ``torch=True`` gives torch tensors (copies).
    ``device`` (implies torch): the blocks as torch tensors on that device
    ("cuda", "cuda:1", a torch.device), copied from the mapping through the
    staging pipeline of modelzip.torch.load ("cpu": as torch=True).
    ``stats``, if given, receives per name (bytes read, zero_copy).
    Torch tensors have the stored dtype (bfloat16, float8_* too: TypeError for float8 before
    torch 2.1); numpy arrays hold the raw bits of the types numpy lacks, as Archive.load().
    With torch (or ``device``), the values that are not tensors come back as modelzip.torch.load
    gives them (one code path, modelzip._torch.state_dict): text as the str or nested lists of
    str saved (torch has no string tensors), Python int, float, bool and None as themselves, a
    state dict's torch dtypes and tuples of packed parameters as those."""
    from . import _torch, _values
    dtypes: dict[str, str] = {}
    if blocks is None or torch or device is not None:
        with _modelzip.Archive(path) as archive:
            dtypes = {p.name: p.dtype for p in archive.params(tag)}
    if blocks is None:
        blocks = {name: None for name in dtypes}
    names = list(blocks)
    if dtypes and _values.PYTHON_TYPES_NAME in dtypes:  # read with the torch loads' values
        blocks = {**blocks, _values.PYTHON_TYPES_NAME: None}
    requests = [(name, "", None if b is None else ([int(o) for o in b[0]], [int(s) for s in b[1]]))
                for name, b in blocks.items()]
    results = _modelzip.read_blocks(path, requests, tag)
    out = {}
    for (name, _, _), (array, nbytes, zero_copy) in zip(requests, results):
        if stats is not None and name in names:
            stats[name] = (nbytes, zero_copy)
        out[name] = array
    if device is not None and _torch_device(device).type != "cpu":
        from ._torch_load import to_device
        with warnings.catch_warnings():  # the pipeline only reads the read-only views
            warnings.simplefilter("ignore", UserWarning)
            views = _torch.state_dict(out, dtypes, names, {})
        return to_device(views, _torch_device(device))  # text and Python values stay as they are
    if torch or device is not None:
        return _torch.state_dict({name: np.array(a) for name, a in out.items()}, dtypes, names, {})
    return {name: out[name] for name in names}


def _stage_tensors(writer: CollectiveWriter, tensors: Mapping[str, Any],
                   raw_bits: Mapping[str, str]) -> None:
    """Stages ``tensors`` as modelzip.save takes a dict: Python scalars, None, torch dtypes and
    tuples of tensors as their markers and the _python_types record (_values.py), which every
    rank passing such values stages alike (a record that differs between ranks fails the save
    as text of one name with different values does)."""
    from ._values import expand_torch_objects
    for name, value in expand_torch_objects(tensors, raw_bits):
        if isinstance(value, Shard):
            writer.add_shard(name, value.value, [int(d) for d in value.global_shape],
                             [int(o) for o in value.offset], dtype=raw_bits.get(name))
        else:
            writer.add(name, value, dtype=raw_bits.get(name))


def _names_by_id(params: Mapping[str, Any]) -> dict[int, str]:
    return {id(v.value if isinstance(v, Shard) else v): name for name, v in params.items()}


def _stage_optimizer(writer: CollectiveWriter, params: Mapping[str, Any], optimizer: Any) -> dict:
    """Stages the updater state of the tensors of ``params`` (by name) held by
    ``optimizer``: a state shaped like the tensor's block is staged as the same
    block of a state of the parameter's global shape; any other state (a scalar
    ``step``) whole, by the rank whose block starts at the origin. Returns
    what the root needs for the training config (JSON-able)."""
    from . import torch as mzt
    by_id = _names_by_id(params)
    names = [[by_id[id(p)] for p in group["params"] if id(p) in by_id]
             for group in optimizer.param_groups]
    packed = optimizer.state_dict()
    by_index = {i: by_id[id(p)] for group, packed_group in
                zip(optimizer.param_groups, packed["param_groups"])
                for p, i in zip(group["params"], packed_group["params"]) if id(p) in by_id}
    updater, other_state = mzt._split_state(packed["state"], by_index)
    for (name, state), tensor in updater.items():
        spec = params[name]
        if not isinstance(spec, Shard):
            writer.add_updater_state(name, state, tensor)
        elif tensor.dim() > 0 and tuple(tensor.shape) == tuple(spec.value.shape):
            writer.add_updater_shard(name, state, tensor, [int(d) for d in spec.global_shape],
                                     [int(o) for o in spec.offset])
        elif all(int(o) == 0 for o in spec.offset):
            writer.add_updater_state(name, state, tensor)
    return {"class": mzt._class_path(optimizer),
            "groups": mzt._named_groups(packed["param_groups"], names),
            "other": other_state,
            "steps": mzt._completed_steps({i: packed["state"][i] for i in by_index
                                           if i in packed["state"]})}


def _stage_optimizers(writer: CollectiveWriter, params: Mapping[str, Any],
                      optimizer: Any) -> dict:
    """Stages the updater state of ``optimizer``: one optimizer (its _stage_optimizer
    summary), or a mapping name -> optimizer or a list (named "0", "1"... by position):
    {"several": [[name, summary], ...]} in the order given. ValueError when a tensor of
    ``params`` is in two of them (its state is stored under its name)."""
    from . import torch as mzt
    several = mzt._named_objects("modelzip.distributed.save_checkpoint", "optimizer", optimizer,
                                 mzt._is_optimizer, mzt._AN_OPTIMIZER)
    if several is None:
        return _stage_optimizer(writer, params, optimizer)
    summaries: list = []
    held: dict[str, str] = {}  # parameter name -> the optimizer holding it
    for name, each in several:
        summary = _stage_optimizer(writer, params, each)
        for param in (n for group in summary["groups"] for n in group["params"]):
            if held.setdefault(param, name) != name:
                raise ValueError(f"parameter {param!r} is held by optimizers {held[param]!r} and "
                                 f"{name!r}: a checkpoint stores one optimizer state per parameter")
        summaries.append([name, summary])
    return {"several": summaries}


def _merged_config(optimizer: Any, parts: list, iteration: Optional[int], *, scheduler: Any,
                  epoch: int, properties: Optional[Mapping[str, str]]) -> dict:
    """The root's training config from the ranks' _stage_optimizers summaries ``parts``
    [(rank, summary)], the root's first, and the root's ``optimizer`` (one, a mapping or a
    list): the config modelzip.torch.save_checkpoint writes for the same optimizers over the
    whole tensors. ValueError when the ranks' optimizers differ in kind, names, class, groups or
    hyperparameters, or hold one parameter in two optimizers."""
    from . import torch as mzt
    (root_rank, first), *_ = parts
    if "several" not in first:
        for rank, part in parts:
            if "several" in part:
                raise ValueError(f"rank {rank} passes several optimizers "
                                 f"{[name for name, _ in part['several']]}, rank {root_rank} one")
        groups, other, steps = _merged_groups(parts)
        return mzt._training_config(optimizer, groups, other,
                                    steps if iteration is None else iteration,
                                    scheduler=scheduler, epoch=epoch, properties=properties)
    names = [name for name, _ in first["several"]]
    for rank, part in parts:
        if "several" not in part:
            raise ValueError(f"rank {rank} passes one optimizer, rank {root_rank} several {names}")
        theirs = [name for name, _ in part["several"]]
        if sorted(theirs) != sorted(names):
            raise ValueError(f"rank {rank} passes optimizers named {theirs}, rank {root_rank} "
                             f"{names}")
    entries = []
    held: dict[str, str] = {}  # parameter name -> the optimizer holding it, over every rank
    steps = 0
    for name in names:
        groups, other, own_steps = _merged_groups(
            [(rank, dict(part["several"])[name]) for rank, part in parts], f"optimizer {name!r}: ")
        for param in (n for group in groups for n in group["params"]):
            if held.setdefault(param, name) != name:
                raise ValueError(f"parameter {param!r} is held by optimizers {held[param]!r} and "
                                 f"{name!r} (on different ranks): a checkpoint stores one "
                                 "optimizer state per parameter")
        entries.append({"name": name, "optimizer": dict(first["several"])[name]["class"],
                        "param_groups": groups, "optimizer_state": other})
        steps = max(steps, own_steps)
    objects = [each for _, each in mzt._named_objects("save_checkpoint", "optimizer", optimizer,
                                                      mzt._is_optimizer, mzt._AN_OPTIMIZER)]
    return mzt._config(mzt._standard_updater(objects[0], objects[1:]),
                       {mzt.OPTIMIZERS: mzt._dumps(entries)},
                       steps if iteration is None else iteration, scheduler=scheduler,
                       epoch=epoch, properties=properties)


def _merged_groups(parts: Sequence[tuple[int, dict]], what: str = "") -> tuple[list, dict, int]:
    """The param groups (names of every rank, in rank order), non-tensor state
    and step count of the ranks' _stage_optimizer summaries; ValueError when
    the ranks' optimizers disagree on class, groups or hyperparameters (its message
    starting with ``what``)."""
    (root_rank, first), *_ = parts
    groups = [dict(g, params=[]) for g in first["groups"]]
    other: dict[str, Any] = {}
    steps = 0
    for rank, part in parts:
        if part["class"] != first["class"] or len(part["groups"]) != len(groups):
            raise ValueError(f"{what}rank {rank} has a {part['class']} with "
                             f"{len(part['groups'])} param groups, rank {root_rank} a "
                             f"{first['class']} with {len(groups)}")
        for g, (merged, group) in enumerate(zip(groups, part["groups"])):
            if {k: v for k, v in group.items() if k != "params"} != \
                    {k: v for k, v in merged.items() if k != "params"}:
                raise ValueError(f"{what}param group {g}: the hyperparameters of rank {rank} "
                                 f"differ from those of rank {root_rank}")
            merged["params"] += [n for n in group["params"] if n not in merged["params"]]
        other.update(part["other"])
        steps = max(steps, int(part["steps"]))
    return groups, other, steps


def _agreed(comm: Communicator, error: str, what: str, path: PathLike, tag: str) -> None:
    """Agrees with every rank on this rank's ``error`` ("": none) or its Ctrl-C
    noted meanwhile (_CommitInterrupt.error_of); on every rank, raises the lowest
    failing rank's: InvalidArgumentError (a ValueError) "``what`` failed on rank R: ...",
    or modelzip.Error (code "cancelled") when rank R was interrupted."""
    failure = comm.agree(_CommitInterrupt.error_of(comm, error))
    if failure is not None:
        cancelled = _CommitInterrupt.cancelled(failure, what, path, tag)
        if cancelled is not None:
            raise cancelled
        raise InvalidArgumentError(f"{what} failed on rank {failure[0]}: {failure[1]}",
                                   code="invalid_argument", archive=os.fspath(path), tag=tag)


def save_checkpoint(path: PathLike, tag: str, params: Mapping[str, Any], optimizer: Any = None, *,
                    group: Any = None, scheduler: Any = None, epoch: int = 0,
                    iteration: Optional[int] = None, properties: Optional[Mapping[str, str]] = None,
                    extra: Optional[Mapping[str, Any]] = None,
                    dedup: bool = True, durable: bool = True, root: int = 0,
                    rank_lock_timeout: Optional[float] = None, replace: bool = False,
                    keep_last: Optional[int] = None,
                    tag_metadata: Optional[Mapping[str, str]] = None) -> CollectiveStats:
    """Collective: adds tag ``tag`` holding a training checkpoint of a sharded
    run, the tag modelzip.torch.save_checkpoint writes from one process holding
    the whole model (modelzip.torch.load_checkpoint reads it too).

    params: the parameters this rank writes, as for :func:`save` (whole
      tensors or :class:`Shard` blocks; a replica that another rank writes is
      left out; text, which ranks holding the same value may all pass).
    optimizer: this rank's torch optimizer over (some of) those tensors, or
      None. The state of each tensor of ``params`` it holds is written as
      updater state sharded like the parameter (Adam's ``exp_avg``,
      ``exp_avg_sq`` as the same blocks; the scalar ``step`` whole, by the rank
      whose block starts at index 0). Its other tensors are ignored. Several
      (an FSDP-like GAN's generator and discriminator optimizers): a mapping
      name -> optimizer or a list (named "0", "1"... by position), the same
      names on every rank that passes optimizers, each tensor of ``params`` in
      one of them at most; the tag is the one modelzip.torch.save_checkpoint
      writes for them (``torch.optimizers``, schemas/GRAPH.md section 4.1).
    The training config is written by the root: each optimizer's class, updater
    and hyperparameters (which every rank's optimizer of that name must share), the param
    groups by name over all ranks, ``scheduler`` (the root's: one, a mapping or a list), ``epoch``,
    ``iteration`` (default: the largest per-parameter ``step``) and
    ``properties``. Without an optimizer on any rank, only parameters are saved.
    extra: this rank's own rest of the training loop's state (its RNG states: they differ per
    rank), of the kinds modelzip.torch.save_checkpoint(extra=) takes, or None; the root stores
    every rank's in the training config (property ``torch.rank_extras``, by rank), and
    :func:`load_checkpoint` gives each rank its own back (``extra_rank``: another's). Needs an
    optimizer (the training config holds it).
    tag_metadata: the tag's free-form metadata, as for :func:`save` (every rank passes the
      same). The module versions of a state dict in ``params`` (its ``_metadata``) are kept
      as modelzip.torch.save_checkpoint keeps them: for a state dict holding torch dtypes or
      tuples of tensors (quantize_dynamic's), whose modules need them to read it back.
    Raises InvalidArgumentError (a ValueError; on every rank, naming the rank) for arguments
    that do not fit together; the commit's errors as :func:`save`; ``rank_lock_timeout``,
    ``replace`` and ``keep_last`` as for :func:`save`. Returns this rank's stats.
    """
    comm = communicator(group)
    with _CommitInterrupt(comm, path) as interrupt:
        writer = CollectiveWriter(path, comm, dedup=dedup, durable=durable, root=root,
                                  rank_lock_timeout=rank_lock_timeout)
        from . import torch as mzt
        summary: dict = {}
        extra_json = None
        error = ""
        metadata_part: list = []
        try:
            with interrupt.staging():
                _check_keep_last(keep_last)
                metadata_part = _tag_metadata_part(params, tag_metadata,
                                                   mzt._keeps_versions(params))
                _stage_tensors(writer, _host_values(params), {})
                if optimizer is not None:
                    summary = _stage_optimizers(writer, params, optimizer)
                if extra is not None:
                    extra_json = mzt._extra_json(extra, "modelzip.distributed.save_checkpoint")
        except Exception as e:  # every rank must reach the agreement, whatever failed here
            error = f"{type(e).__name__}: {e}"
        except KeyboardInterrupt:
            if not interrupt.noted:  # not Ctrl-C noted here (a handler of the caller's own)
                raise
        _agreed(comm, error, "save_checkpoint", path, tag)
        gathered = comm.gather(json.dumps([summary, extra_json, metadata_part]).encode(), root)
        if comm.rank() == root:
            try:
                ranks = [json.loads(p) for p in gathered]
                writer._set_tag_metadata(*_merged_tag_metadata([each for _, _, each in ranks],
                                                               root))
                parts = [(r, part) for r, (part, _, _) in enumerate(ranks) if part]
                extras = [each for _, each, _ in ranks]
                if parts and not summary:
                    raise ValueError(f"rank {parts[0][0]} passes an optimizer, the root rank "
                                     f"{root} none (the root writes the training config from its "
                                     "optimizer)")
                if not parts and any(each is not None for each in extras):
                    raise ValueError(
                        f"rank {next(r for r, e in enumerate(extras) if e is not None)} passes "
                        "extra=, and no rank an optimizer: the extras are stored in the training "
                        "config, which a save without an optimizer does not write")
                if parts:
                    parts.sort(key=lambda part: part[0] != root)  # the root's first
                    config = _merged_config(optimizer, parts, iteration, scheduler=scheduler,
                                            epoch=epoch, properties=properties)
                    if any(each is not None for each in extras):
                        config["properties"][mzt.RANK_EXTRAS] = (
                            "[" + ",".join("null" if each is None else each for each in extras)
                            + "]")
                    writer.set_training_config(config)
            except Exception as e:  # as above
                error = f"{type(e).__name__}: {e}"
        _agreed(comm, error, "save_checkpoint", path, tag)
        return writer.commit(tag, replace=replace, keep_last=keep_last)


@old_order_with_tag_keyword(lambda value: isinstance(value, Mapping),
                            "modelzip.distributed.load_checkpoint(path, params, optimizer, tag=)",
                            "load_checkpoint(path, tag, params, optimizer)")
def load_checkpoint(path: PathLike, tag: Optional[str] = None,
                    params: Optional[Mapping[str, Any]] = None, optimizer: Any = None, *,
                    scheduler: Any = None, group: Any = None,
                    extra_rank: Optional[int] = None) -> Any:
    """Restores this rank's part of a training checkpoint (saved by
    :func:`save_checkpoint` on any number of ranks, or by
    modelzip.torch.save_checkpoint) from tag ``tag`` (None: the newest).
    No collective: every rank reads only its blocks. ``path, tag`` come first,
    as for :func:`save_checkpoint`; the order of earlier releases,
    ``(path, params, optimizer, tag)`` with the tag positional or a keyword
    (``tag="t"``), still works with a DeprecationWarning.

    params: name -> torch tensor to fill in place, whole or as the
      :class:`Shard` (block, global shape, offset) this rank holds now, in any
      layout.
    optimizer: a torch optimizer of the saved class over tensors of
      ``params``, grouped as saved; gets the saved hyperparameters and, for
      each of its tensors, the same block of every updater state sharded like
      the parameter (other states, such as ``step``, whole). Several, as saved:
      a mapping with the saved names (any order) or a list of the saved count,
      each optimizer checked as one is, all before anything changes.
    scheduler: gets the saved scheduler state (several: a mapping or list, as saved).
    Returns modelzip.torch.TrainingState (tag, iteration, epoch, properties, extra: what
    modelzip.torch.save_checkpoint(extra=) stored, or of a tag of :func:`save_checkpoint` with
    ``extra=``, this rank's own: rank r of a load on as many ranks as saved gets what rank r
    passed). On another world size that raises ValueError before anything changes, unless
    ``extra_rank`` names the saved rank whose extra this rank gets. ``group``: where this rank's
    rank and the world size come from, as for :func:`save` (None: torch's default group when
    initialized, else mpi4py's COMM_WORLD when mpi4py is initialized, else one process); asked
    only for such a tag, with no collective.
    Raises ValueError when the checkpoint does not fit, modelzip errors for a
    missing tag, parameter or block outside the saved shape.
    """
    from . import torch as mzt
    if isinstance(tag, Mapping):
        tag, params, optimizer = optimizer, tag, params
        mzt._warn_old_order("modelzip.distributed.load_checkpoint(path, params, optimizer, tag)",
                            "load_checkpoint(path, tag, params, optimizer)")
    if params is None:
        raise TypeError("load_checkpoint() needs params: name -> tensor or Shard to fill")
    several = mzt._named_objects("modelzip.distributed.load_checkpoint", "optimizer", optimizer,
                                 mzt._is_optimizer, mzt._AN_OPTIMIZER)
    with _modelzip.Archive(path) as archive:
        tag, config, properties = mzt._checkpoint_tag(
            archive, tag, optimizer is not None or scheduler is not None)
        infos = {p.name: p for p in archive.params(tag)}
        dtypes = {name: p.dtype for name, p in infos.items()}
        for name, value in params.items():
            if isinstance(value, Shard) and name in infos and \
                    tuple(infos[name].shape) != tuple(int(d) for d in value.global_shape):
                raise ValueError(f"parameter {name!r}: the Shard's global shape is "
                                 f"{tuple(value.global_shape)}, the stored one "
                                 f"{tuple(infos[name].shape)}")
        states = [(s.name, s.state, s.dtype, tuple(s.shape)) for s in archive.updater_states(tag)]

        def blocks(requests: list) -> list:
            tensors = []
            for (name, state, block), (array, _, _) in zip(
                    requests, _modelzip.read_blocks(path, requests, tag)):
                tensors.append(_torch_of(name, state, np.array(array), dtypes, states))
            return tensors

        def block_of(value: Any, shape: tuple) -> Any:
            if isinstance(value, Shard) and len(shape) > 0 and \
                    shape == tuple(int(d) for d in value.global_shape):
                return [int(o) for o in value.offset], [int(d) for d in value.value.shape]
            return None

        requests = [(name, "", block_of(value, tuple(int(d) for d in value.global_shape))
                     if isinstance(value, Shard) else None) for name, value in params.items()]
        # Everything is read and checked before the first tensor changes.
        loaded_params = blocks(requests)
        for (name, value), loaded in zip(params.items(), loaded_params):
            target = value.value if isinstance(value, Shard) else value
            if tuple(target.shape) != tuple(loaded.shape):
                raise ValueError(f"parameter {name!r}: the tensor to fill has shape "
                                 f"{tuple(target.shape)}, the block read {tuple(loaded.shape)}")
        optimizer_states = []
        if optimizer is not None:
            by_id = _names_by_id(params)

            def names_of(each: Any) -> list:
                names = []
                for g, group in enumerate(each.param_groups):
                    missing = [tuple(p.shape) for p in group["params"] if id(p) not in by_id]
                    if missing:
                        raise ValueError(f"param group {g} of the optimizer holds tensors of shapes "
                                         f"{missing} that are not in params")
                    names.append([by_id[id(p)] for p in group["params"]])
                return names

            def tensors_of(names: list) -> dict:
                wanted = {n for group in names for n in group}
                requests = [(name, state, block_of(params[name], shape))
                            for name, state, _, shape in states if name in wanted]
                out: dict[str, dict[str, Any]] = {}
                for (name, state, _), tensor in zip(requests, blocks(requests)):
                    out.setdefault(name, {})[state] = tensor
                return out

            where = f"{archive.name}: tag {tag!r}"
            if several is None:
                optimizer_states = [(optimizer, mzt._optimizer_state(
                    where, properties, optimizer, lambda: names_of(optimizer), tensors_of,
                    part=True))]
            else:
                optimizer_states = _several_optimizer_states(where, properties, several, names_of,
                                                             tensors_of)
        scheduler_states = mzt._scheduler_states(archive.name, tag, properties, scheduler)
        training_state = mzt._training_state(tag, config, f"{archive.name}: tag {tag!r}",
                                             lambda: _rank_and_size(group), extra_rank)
    import torch
    from . import _device_copy, _torch_load
    for each, state in optimizer_states:  # new tensors on the parameters' devices: no change yet
        _torch_load.to_param_devices(state, each)
    targets = [(value.value if isinstance(value, Shard) else value).detach()
               for value in params.values()]
    with torch.no_grad():  # staged for device tensors, several threads for host ones
        _device_copy.copy_pairs(list(zip(loaded_params, targets)))
    for each, state in optimizer_states:
        each.load_state_dict(state)
    for each, state in scheduler_states:
        each.load_state_dict(state)
    return training_state


def _rank_and_size(group: Any) -> tuple[int, int]:
    """(rank, world size) of this process in ``group`` (see load_checkpoint), without a
    collective."""
    if isinstance(group, Communicator):
        return group.rank(), group.size()
    if group is not None and hasattr(group, "Get_rank"):
        return group.Get_rank(), group.Get_size()
    if group is not None or _torch_default_group():
        import torch.distributed as dist
        return dist.get_rank(group), dist.get_world_size(group)
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        return mpi.COMM_WORLD.Get_rank(), mpi.COMM_WORLD.Get_size()
    return 0, 1


def _several_optimizer_states(where: str, properties: Mapping[str, str],
                              several: list[tuple[str, Any]], names_of: Any,
                              tensors_of: Any) -> list[tuple[Any, dict]]:
    """(optimizer, the ``state_dict()`` to load) of each of ``several`` (name, optimizer), each
    holding part of its saved groups' parameters, checked against a checkpoint of several
    optimizers (modelzip.torch.OPTIMIZERS) before anything changes: ``names_of(optimizer)``
    names its parameters per group, ``tensors_of(names)`` reads this rank's blocks of their
    updater state. ValueError, starting with ``where``, when the checkpoint does not fit."""
    from . import torch as mzt
    if mzt.OPTIMIZERS not in properties:
        raise ValueError(f"{where} holds the state of one optimizer (a "
                         f"{properties.get(mzt.OPTIMIZER)}), not of a mapping or list of them: "
                         "pass optimizer= that one optimizer")
    saved = mzt._named_entries(where, properties, mzt.OPTIMIZERS, mzt._OPTIMIZER_FIELDS)
    mzt._same_names(f"{where}: optimizers", list(saved), [name for name, _ in several])
    out = []
    for name, each in several:
        entry = saved[name]
        own = {mzt.OPTIMIZER: entry["optimizer"],
               mzt.PARAM_GROUPS: mzt._dumps(entry["param_groups"]),
               mzt.OPTIMIZER_STATE: mzt._dumps(entry["optimizer_state"])}
        out.append((each, mzt._optimizer_state(f"{where}, optimizer {name!r}", own, each,
                                               lambda each=each: names_of(each), tensors_of,
                                               part=True)))
    return out


def _torch_of(name: str, state: str, array: np.ndarray, dtypes: Mapping[str, str],
              states: Sequence[tuple]) -> Any:
    from . import _torch
    if not state:
        return _torch.to_torch(name, array, dtypes[name])
    dtype = next(d for n, s, d, _ in states if n == name and s == state)
    return _torch.to_torch(f"{name}/{state}", array, dtype)


def _torch_device(device: Any) -> Any:
    from ._torch_load import target_device
    return target_device(device, "modelzip.distributed.load")
