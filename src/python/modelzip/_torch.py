"""Conversion of loaded arrays to torch tensors (used by Archive.load_torch)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ._values import SparseCOO


def state_dict(arrays: dict[str, Any], dtypes: dict[str, str]) -> dict[str, Any]:
    """Torch tensors sharing the memory of ``arrays`` (which must be writable copies).

    ``dtypes`` maps each name to its modelzip dtype, so bfloat16 (loaded as
    uint16 bits) becomes ``torch.bfloat16`` again. Raises TypeError, naming the
    parameter, for what torch cannot hold (strings, unsigned types it lacks).
    """
    import torch

    def tensor(name: str, array: np.ndarray, dtype: str) -> Any:
        if dtype == "bfloat16":
            return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
        if dtype == "string":
            raise TypeError(f"parameter {name!r}: torch has no string tensors; use Archive.load()")
        try:
            return torch.from_numpy(array)
        except TypeError as e:
            raise TypeError(f"parameter {name!r}: torch cannot hold {dtype} ({e}); "
                            "use Archive.load()") from None

    out = {}
    for name, value in arrays.items():
        if isinstance(value, SparseCOO):
            values = tensor(name, value.values, dtypes[name])
            indices = torch.from_numpy(value.indices).T
            out[name] = torch.sparse_coo_tensor(indices, values, value.shape)
        else:
            out[name] = tensor(name, value, dtypes[name])
    return out
