"""Tied weights: the tag entry ``ties.json`` (schemas/FORMAT.md, section 5.1).

Saving records which names of a torch state dict are one tensor (the same
storage, offset, shape and strides: ``lm_head.weight`` tied to
``embed.weight``); deduplication then stores them as one blob. Loading gives
each recorded group one tensor and every other name its own memory, so
byte-equal tensors that deduplication stored once never alias by accident.
"""
from __future__ import annotations

import json
import sys
from typing import Any, Iterable, Mapping, Optional

from ._errors import Error

ENTRY = "ties.json"
"""The entry's name inside the tag folder."""
MAX_BYTES = 64 << 20
"""Readers refuse a larger ties.json (FORMAT.md 5.1)."""


def torch_ties(items: Iterable[tuple[str, Any]]) -> Optional[str]:
    """The text of ties.json for the (name, value) pairs to save, or None when no two torch
    tensors among them are one tensor."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    groups: dict[tuple, list[str]] = {}
    for name, value in items:
        if (not isinstance(value, torch.Tensor) or value.layout != torch.strided
                or value.is_quantized or value.numel() == 0):
            continue
        key = (value.device, value.data_ptr(), value.dtype, tuple(value.shape), value.stride())
        groups.setdefault(key, []).append(name)
    tied = [names for names in groups.values() if len(names) > 1]
    return json.dumps(tied, ensure_ascii=False) if tied else None


def _corrupt(archive: Any, entry: str, tag: str, message: str) -> Error:
    return Error(f"{archive.name}: entry '{entry}': {message}", code="corrupt", message=message,
                 archive=archive.name, entry=entry, tag=tag)


def read_ties(archive: Any, tag: str, blobs: Mapping[str, str]) -> dict[str, str]:
    """Tag ``tag``'s tied names (its stored spelling), as {name: the first name of its group}
    for every name but the first of each group; names of a group that do not reference the same
    blob (``blobs``: name -> blob entry of the tensor parameters) stay untied. Empty when the
    tag has no ties.json (every archive before it). Raises modelzip.Error ("corrupt", naming
    the entry) when the entry is not a JSON array of groups of distinct parameter names."""
    entry = f"{tag}/{ENTRY}"
    if not archive.has_entry(entry):
        return {}
    raw = archive.entry(entry)
    if len(raw) > MAX_BYTES:
        raise _corrupt(archive, entry, tag, f"larger than {MAX_BYTES} bytes")
    try:
        groups = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _corrupt(archive, entry, tag, f"not JSON text: {e}") from None
    if not isinstance(groups, list):
        raise _corrupt(archive, entry, tag, "not a JSON array of groups")
    out: dict[str, str] = {}
    seen: set[str] = set()
    for g, group in enumerate(groups):
        if (not isinstance(group, list) or len(group) < 2
                or not all(isinstance(n, str) for n in group)):
            raise _corrupt(archive, entry, tag,
                           f"group {g} is not an array of at least 2 parameter names")
        for name in group:
            if name in seen:
                raise _corrupt(archive, entry, tag, f"group {g}: {name!r} is named twice")
            if name not in blobs:
                raise _corrupt(archive, entry, tag,
                               f"group {g}: {name!r} is not a tensor parameter of the tag")
            seen.add(name)
        for name in group[1:]:
            if blobs[name] == blobs[group[0]]:
                out[name] = group[0]
    return out
