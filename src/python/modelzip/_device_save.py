"""Saving tensors that live on a CUDA device: their bytes fetched into host memory through pinned
staging buffers, the step behind every save of CUDA tensors (modelzip.save, save_async,
Writer.add_tag, modelzip.torch.save and save_checkpoint) instead of one ``.cpu()`` per tensor.

``host_items`` replaces each dense CUDA tensor of a list of (name, value) pairs by a host tensor
with the same bytes. The copies run as a pipeline, on several threads (one per core, at most 16):

- a thread takes a job (a piece of a large tensor, or several small tensors packed together, as
  the loading pipeline cuts them: _device_copy._jobs), takes a pinned buffer from a bounded pool
  (at most _device_copy.MAX_STAGING_BYTES, kept between saves because pinning memory is slow),
  starts non-blocking device-to-host copies into it on a side stream, and waits for the event
  recorded behind them;
- it then copies the staged bytes into the host tensor (ordinary memory) and returns the buffer,
  so that while one thread copies out of its buffer, the device fills another.

A save that passes a ``Fetches`` gets host tensors that are views of one new
_modelzip._StagingArea per pipeline run (staging memory of the C++ saves, taken from their pool,
each tensor 64-byte aligned), collected in ``Fetches.areas``:

- a background save (save_async, save_checkpoint(blocking=False), distributed.save(
  blocking=False)) adopts the areas as its snapshot (BackgroundSaveOptions::adopt) instead of
  copying those bytes again: the device's bytes are copied once into pinned memory and once into
  the memory the background write reads;
- a blocking save (``Fetches(overlap=True)``: modelzip.save, modelzip.torch.save,
  save_checkpoint) gets the views at once while the pipeline runs on in a thread of its own;
  every piece landed is marked filled in its area, and the commit (Writer.commit, under the
  areas' FillGates) waits for each tensor's bytes before it first reads them, so the write of
  the first tensors overlaps the fetch of the next ones. A failed fetch fails its area's gate:
  the commit fails (the archive is unchanged) and raises the fetch's error. Memory: the
  checkpoint's bytes once in host memory, plus the bounded pinned pool.

The side stream first waits for the caller's current stream, so the bytes fetched are those the
tensors hold after the work queued before the save (what ``.cpu()`` would give). Tensors that are
not contiguous or have lazy conjugate/negative bits are made so on the device first. Other tensors
(host, quantized, sparse, other devices) are left as they are; the conversion to numpy handles
them as before.

The pipeline talks to the device through a target (FetchTarget for CUDA; HostFetchTarget does the
same with host tensors standing for device ones, so that tests exercise it without a GPU).

Thread safety: the pools are shared under _device_copy's lock; concurrent saves on one device
share its pool. Errors: the first exception of any thread is raised after the others stopped.
"""
from __future__ import annotations

import threading
from typing import Any, Optional, Sequence

import torch

from . import _device_copy, _modelzip


class _Landing:
    def land(self, destination: Any, staged: Any) -> None:
        """Copies staged bytes (fetched: waited for) into their host destination."""
        destination.copy_(staged)


class FetchTarget(_Landing, _device_copy.CudaTarget):
    """Pinned buffers; device-to-host copies on a side stream of ``device``, ordered after the
    work queued on the caller's current stream before begin()."""

    def begin(self) -> None:
        """Orders the fetches after the work queued so far on the calling thread's current
        stream (the sources made contiguous there included)."""
        self.stream.wait_stream(torch.cuda.current_stream(self.device))

    def fetch(self, staged: Any, source: Any) -> Any:
        """Starts copying ``source`` (device bytes) into ``staged``; returns what to wait for
        before reading ``staged``."""
        with torch.cuda.stream(self.stream):
            staged.copy_(source, non_blocking=True)
            event = torch.cuda.Event()
            event.record(self.stream)
        return event


class HostFetchTarget(_Landing, _device_copy.HostTarget):
    """The same steps in host memory: ordinary buffers, synchronous fetches."""

    def begin(self) -> None:
        pass

    def fetch(self, staged: Any, source: Any) -> Any:
        staged.copy_(source)
        return None


_ALIGNMENT = 64


def _aligned(n: int) -> int:
    return -(-n // _ALIGNMENT) * _ALIGNMENT


class Fetches:
    """The fetches of one save into staging areas (the bindings pass it to
    _values.fetch_device_tensors): ``areas`` collects the areas; with ``overlap`` the pipeline
    runs on in a thread of its own after fetch_to_host returns (one run after the other), and
    wait() joins it; the areas of such a blocking save are freed after it, those of a background
    save go back to the pool of staging memory per its keep_staging. Used by one save on one
    thread."""

    def __init__(self, overlap: bool = False) -> None:
        self.overlap = overlap
        self.areas: list = []
        self._last: Optional[threading.Thread] = None
        self._errors: list[BaseException] = []

    def start(self, run: Any) -> None:
        """Runs ``run()`` in a new thread after the runs started before; an exception it raises
        is kept for wait()."""
        before = self._last

        def body() -> None:
            if before is not None:
                before.join()
            try:
                run()
            except BaseException as error:  # noqa: B902 (raised by wait())
                self._errors.append(error)
        self._last = threading.Thread(target=body, name="modelzip fetch", daemon=True)
        self._last.start()

    def stop(self) -> None:
        """Waits for the runs, keeping their errors (the save is abandoned)."""
        if self._last is not None:
            self._last.join()

    def wait(self) -> None:
        """Waits for the runs; raises the first error of one."""
        self.stop()
        if self._errors:
            raise self._errors[0]


def _destinations(sources: Sequence[Any], fetches: Optional[Fetches]) -> tuple[list, Any]:
    """Host tensors shaped as ``sources`` and their staging area: new tensors (area None), or
    views of one new staging area collected in ``fetches`` (each at a 64-byte aligned offset)."""
    sizes = [s.numel() * s.element_size() for s in sources]
    total = sum(_aligned(n) for n in sizes)
    if fetches is None or total == 0:
        return [torch.empty(s.shape, dtype=s.dtype, device="cpu") for s in sources], None
    area = _modelzip._StagingArea(total, keep=not fetches.overlap)
    fetches.areas.append(area)
    flat = torch.from_numpy(area.array())
    out, offset = [], 0
    for source, n in zip(sources, sizes):
        out.append(flat[offset:offset + n].view(source.dtype).reshape(source.shape))
        offset += _aligned(n)
    return out, area


def fetch_target() -> Any:
    """The target saves fetch through: None, the pinned pipeline for CUDA tensors only (tests
    substitute a HostFetchTarget, which sends every dense host tensor through the pipeline)."""
    return None


def fetch_to_host(sources: Sequence[Any], target: Any, threads: Optional[int] = None,
                  fetches: Optional[Fetches] = None) -> list:
    """Host tensors holding the bytes of ``sources`` (dense tensors on ``target``'s device),
    fetched through the staging pipeline: new tensors, or views of a new staging area collected
    in ``fetches``; with ``fetches.overlap`` returned before the bytes have arrived (module
    documentation)."""
    sources = [s.resolve_conj().resolve_neg().contiguous() for s in sources]
    target.begin()
    destinations, area = _destinations(sources, fetches)
    base = area.array().ctypes.data if area is not None else 0
    pairs = list(zip(sources, destinations))
    total = sum(s.numel() * s.element_size() for s in sources)
    pool = _device_copy._pool_for(target, total)

    def work(_index: int, job: list[Any]) -> None:
        buffer = pool.acquire(target)
        pending = None
        try:
            staged, offset = [], 0
            for run in job:  # _device_copy._Piece: src and dst bytes of one run
                n = run.src.numel()
                piece = buffer[offset:offset + n]
                pending = target.fetch(piece, run.src)
                staged.append((piece, run.dst))
                offset += n
            if pending is not None:
                target.wait(pending)  # the copies of one stream complete in order
            for piece, dst in staged:
                target.land(dst, piece)
                if area is not None:
                    area.filled(dst.data_ptr() - base, dst.numel())
        finally:
            pool.release(buffer, pending)  # waited for again before the buffer's next use

    def run() -> None:
        try:
            _device_copy._run(_device_copy._jobs(pairs, pool.piece), work,
                              threads or _device_copy.thread_count())
            if area is not None:
                area.filled(0, len(area))  # every destination is complete
        except BaseException as error:
            if area is not None:
                area.fail(f"fetching the tensors from the device failed: {error}")
            raise
        finally:
            target.finish()

    if fetches is not None and fetches.overlap:
        fetches.start(run)
    else:
        run()
    return destinations


def _on_cuda(value: Any) -> bool:
    return (isinstance(value, torch.Tensor) and value.device.type == "cuda"
            and value.layout == torch.strided and not value.is_quantized)


def host_items(items: Any, target: Any = None, fetches: Optional[Fetches] = None) -> Any:
    """``items`` (name, value) pairs with each dense CUDA tensor replaced by a host tensor of the
    same bytes (one pipeline run per device); ``items`` itself when there is none. ``target``:
    fetch every dense host tensor through this target instead (the tests' HostFetchTarget).
    ``fetches``: the save's staging areas (fetch_to_host)."""
    items = list(items)
    if target is not None:
        chosen = [i for i, (_, v) in enumerate(items)
                  if isinstance(v, torch.Tensor) and v.layout == torch.strided
                  and not v.is_quantized]
        groups = {None: chosen} if chosen else {}
    else:
        groups: dict[Any, list[int]] = {}
        for i, (_, value) in enumerate(items):
            if _on_cuda(value):
                groups.setdefault(value.device, []).append(i)
    if not groups:
        return items
    out = list(items)
    for device, indices in groups.items():
        sources = [items[i][1].detach() for i in indices]
        host = fetch_to_host(sources, target if target is not None else FetchTarget(device),
                             fetches=fetches)
        for i, tensor in zip(indices, host):
            out[i] = (items[i][0], tensor)
    return out
