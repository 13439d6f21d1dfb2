"""Conversion of loaded arrays to torch tensors (Archive.load_torch, modelzip.torch)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ._values import SparseCOO


def to_torch(name: str, value: Any, dtype: str) -> Any:
    """A torch tensor sharing the memory of ``value`` (a writable numpy copy, or SparseCOO).

    ``dtype`` is the modelzip dtype, so bfloat16 (loaded as uint16 bits)
    becomes ``torch.bfloat16`` again. Raises TypeError, naming ``name``, for
    what torch cannot hold (strings, unsigned types it lacks).
    """
    import torch

    if isinstance(value, SparseCOO):
        values = to_torch(name, value.values, dtype)
        indices = torch.from_numpy(value.indices).T
        return torch.sparse_coo_tensor(indices, values, value.shape)
    if dtype == "bfloat16":
        return torch.from_numpy(value.view(np.int16)).view(torch.bfloat16)
    if dtype == "string":
        raise TypeError(f"parameter {name!r}: torch has no string tensors; use Archive.load()")
    try:
        return torch.from_numpy(value)
    except TypeError as e:
        raise TypeError(f"parameter {name!r}: torch cannot hold {dtype} ({e}); "
                        "use Archive.load()") from None


def state_dict(arrays: dict[str, Any], dtypes: dict[str, str], blobs: dict[str, str]) -> dict[str, Any]:
    """Torch tensors sharing the memory of ``arrays`` (which must be writable copies).

    Parameters stored as one blob (``blobs`` maps each name to its blob
    entry) come back as one tensor, so weights tied in the saved model (two
    state-dict names, one storage) are tied again.
    """
    out: dict[str, Any] = {}
    by_blob: dict[str, Any] = {}
    for name, value in arrays.items():
        blob = blobs[name]
        if blob not in by_blob:
            by_blob[blob] = to_torch(name, value, dtypes[name])
        out[name] = by_blob[blob]
    return out
