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

from typing import Any, Optional, Sequence

import torch

from . import _device_copy


class FetchTarget(_device_copy.CudaTarget):
    """Pinned buffers; device-to-host copies on a side stream of ``device``, ordered after the
    work already queued on the caller's current stream."""

    def __init__(self, device: Any) -> None:
        super().__init__(device)
        self.stream.wait_stream(torch.cuda.current_stream(device))

    def fetch(self, staged: Any, source: Any) -> Any:
        """Starts copying ``source`` (device bytes) into ``staged``; returns what to wait for
        before reading ``staged``."""
        with torch.cuda.stream(self.stream):
            staged.copy_(source, non_blocking=True)
            event = torch.cuda.Event()
            event.record(self.stream)
        return event


class HostFetchTarget(_device_copy.HostTarget):
    """The same steps in host memory: ordinary buffers, synchronous fetches."""

    def fetch(self, staged: Any, source: Any) -> Any:
        staged.copy_(source)
        return None


def fetch_to_host(sources: Sequence[Any], target: Any, threads: Optional[int] = None) -> list:
    """New host tensors holding the bytes of ``sources`` (dense tensors on ``target``'s device),
    fetched through the staging pipeline (module documentation)."""
    sources = [s.resolve_conj().resolve_neg().contiguous() for s in sources]
    destinations = [torch.empty(s.shape, dtype=s.dtype, device="cpu") for s in sources]
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
                dst.copy_(piece)
        finally:
            pool.release(buffer, pending)  # waited for again before the buffer's next use

    try:
        _device_copy._run(_device_copy._jobs(pairs, pool.piece), work,
                          threads or _device_copy.thread_count())
    finally:
        target.finish()
    return destinations


def _on_cuda(value: Any) -> bool:
    return (isinstance(value, torch.Tensor) and value.device.type == "cuda"
            and value.layout == torch.strided and not value.is_quantized)


def host_items(items: Any, target: Any = None) -> Any:
    """``items`` (name, value) pairs with each dense CUDA tensor replaced by a host tensor of the
    same bytes (one pipeline run per device); ``items`` itself when there is none. ``target``:
    fetch every dense host tensor through this target instead (the tests' HostFetchTarget)."""
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
        host = fetch_to_host(sources, target if target is not None else FetchTarget(device))
        for i, tensor in zip(indices, host):
            out[i] = (items[i][0], tensor)
    return out
