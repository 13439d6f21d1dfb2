"""Conversion of loaded arrays to torch tensors (Archive.load_torch, modelzip.torch)."""
from __future__ import annotations

import collections
import json
from typing import Any

import numpy as np

from ._values import (TORCH_DTYPE_MARK, TORCH_METADATA_MARK, TORCH_TUPLE_MARK, QuantizedTensor,
                      SparseCOO)


def _quantized_to_torch(name: str, value: QuantizedTensor) -> Any:
    """The torch quantized tensor holding exactly ``value``'s integers, scales and zero points."""
    import torch

    def refuse(why: str) -> TypeError:
        return TypeError(f"parameter {name!r}: torch has no quantized tensor {why}; "
                         "load it with dequantize=True")

    if value.scheme not in ("affine-per-tensor", "affine-per-axis"):
        raise refuse(f"of the {value.scheme} scheme")
    if value.storage not in ("int8", "uint8"):
        raise refuse(f"of {value.storage} storage")
    if value.dtype != "float32":
        raise refuse(f"of {value.dtype} values (its quantized tensors stand for float32)")
    integers = torch.from_numpy(np.ascontiguousarray(value.values))
    if value.scheme == "affine-per-tensor":
        return torch._make_per_tensor_quantized_tensor(integers, float(value.scale),
                                                        int(value.zero_point))
    return torch._make_per_channel_quantized_tensor(
        integers, torch.from_numpy(np.asarray(value.scales, dtype=np.float64)),
        torch.from_numpy(np.asarray(value.zero_points, dtype=np.int64)), int(value.axis))


def to_torch(name: str, value: Any, dtype: str) -> Any:
    """A torch tensor sharing the memory of ``value`` (a writable numpy copy, or SparseCOO).

    ``dtype`` is the modelzip dtype, so bfloat16 (loaded as uint16 bits)
    becomes ``torch.bfloat16`` again. Raises TypeError, naming ``name``, for
    what torch cannot hold (strings, unsigned types it lacks).
    """
    import torch

    if isinstance(value, QuantizedTensor):
        return _quantized_to_torch(name, value)
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
    import torch

    out: Any = collections.OrderedDict()
    by_blob: dict[str, Any] = {}
    tuples: dict[str, int] = {}
    for name, value in arrays.items():
        mark = _torch_mark(value, dtypes[name])
        if mark is not None and name == "_metadata" and mark.startswith(TORCH_METADATA_MARK):
            out._metadata = json.loads(mark[len(TORCH_METADATA_MARK):])  # as state_dict() has it
            continue
        if mark is not None and mark.startswith(TORCH_DTYPE_MARK):
            dtype = getattr(torch, mark[len(TORCH_DTYPE_MARK):], None)
            if not isinstance(dtype, torch.dtype):
                raise ValueError(f"parameter {name!r}: {mark!r} names no torch dtype")
            out[name] = dtype
            continue
        if mark is not None and mark.startswith(TORCH_TUPLE_MARK):
            tuples[name] = _tuple_length(name, mark)
            out[name] = None  # keeps the state dict's order; filled in below
            continue
        blob = blobs[name]
        if blob not in by_blob:
            by_blob[blob] = to_torch(name, value, dtypes[name])
        out[name] = by_blob[blob]
    for name, length in tuples.items():
        out[name] = tuple(out.pop(f"{name}.{i}", None) for i in range(length))
    return out


def _torch_mark(value: Any, dtype: str) -> Any:
    """The text of a 0-d string parameter that starts with "torch." (a marker), else None."""
    if dtype != "string" or not isinstance(value, np.ndarray) or value.shape != ():
        return None
    text = value[()]
    return text if isinstance(text, str) and text.startswith("torch.") else None


def _tuple_length(name: str, mark: str) -> int:
    count = mark[len(TORCH_TUPLE_MARK):]
    if not count.isdigit():
        raise ValueError(f"parameter {name!r}: malformed tuple marker {mark!r}")
    return int(count)
