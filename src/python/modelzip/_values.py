"""Conversions of Python values to what the compiled writer stores, and SparseCOO.

``to_savable`` turns a value of a dict given to ``save``/``Writer.add_tag``
into one tuple the extension understands. It never copies array data unless
it must (non-contiguous, big-endian, or a torch bfloat16 tensor that is not
contiguous); the extension then borrows the array's buffer until commit.
"""
from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from . import _modelzip


class SparseCOO(NamedTuple):
    """A sparse tensor in coordinate format (also a plain ``(indices, values, shape)`` tuple).

    ``indices`` is an ``(nnz, rank)`` int64 array: row ``i`` holds the
    coordinates of ``values[i]``. ``values`` is a 1-D array of ``nnz``
    elements. ``shape`` is the dense shape. Arrays loaded from an archive are
    read-only zero-copy views, like dense ones.
    """

    indices: np.ndarray
    values: np.ndarray
    shape: tuple[int, ...]

    @property
    def nnz(self) -> int:
        """The number of stored values."""
        return int(self.values.shape[0])

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of the values."""
        return self.values.dtype

    def to_dense(self) -> np.ndarray:
        """A new dense array; values at repeated coordinates are summed (bool: or-ed)."""
        dense = np.zeros(self.shape, dtype=self.values.dtype)
        if self.nnz == 0:
            return dense
        if len(self.shape) == 0:
            dense[()] = np.add.reduce(self.values)
            return dense
        np.add.at(dense, tuple(np.asarray(self.indices).T), self.values)
        return dense


SparseCOO.__module__ = "modelzip"

_SUPPORTED = ("bool, int8..int64, uint8..uint64, float16, float32, float64, "
              "str (strings), uint16/int16 marked bfloat16")


_OPTIMIZER_HINT = ("an optimizer's state_dict() is not a mapping of arrays: save model and "
                   "optimizer together with modelzip.torch.save_checkpoint(path, tag, model, "
                   "optimizer), which stores the optimizer state by parameter name")


def to_savable(name: str, value: Any, bfloat16: bool = False) -> tuple:
    """The tuple the extension stores for parameter ``name`` (see module doc).

    Raises TypeError (unsupported type) or ValueError (inconsistent sparse parts),
    naming the parameter.
    """
    if isinstance(value, Mapping) or (isinstance(value, (list, tuple)) and value
                                      and all(isinstance(v, Mapping) for v in value)):
        if name in ("state", "param_groups"):
            raise TypeError(f"parameter {name!r}: {_OPTIMIZER_HINT}")
        what = "a mapping" if isinstance(value, Mapping) else "a list of mappings"
        raise TypeError(f"parameter {name!r}: {what} is not an array; give each array its own "
                        "name (e.g. 'block.weight')")
    try:
        return _to_savable(value, bfloat16)
    except (TypeError, ValueError) as e:
        raise type(e)(f"parameter {name!r}: {e}") from None


def _to_savable(value: Any, bfloat16: bool) -> tuple:
    if isinstance(value, _modelzip.Embeddings):
        return ("embedding", value)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        value, from_bf16 = _from_torch(torch, value)
        bfloat16 = bfloat16 or from_bf16
    if isinstance(value, SparseCOO):
        return _sparse(value, bfloat16)
    if isinstance(value, str):
        return ("strings", [value], ())
    if isinstance(value, (bytes, bytearray)):
        raise TypeError("bytes cannot be stored: decode them to str, or wrap them in "
                        "np.frombuffer(..., dtype=np.uint8)")
    if isinstance(value, (list, tuple)):
        objects = np.array(value, dtype=object)
        if objects.size > 0 and all(isinstance(v, str) for v in objects.flat):
            return ("strings", list(objects.flat), objects.shape)
    if not isinstance(value, np.ndarray) and not hasattr(value, "__array__") \
            and callable(getattr(value, "numpy", None)):
        value = value.numpy()
    return _dense(np.asarray(value), bfloat16)


def _from_torch(torch: Any, tensor: Any) -> tuple[Any, bool]:
    """A torch tensor as numpy (sharing memory when possible) or SparseCOO, and whether bf16."""
    tensor = tensor.detach()
    if tensor.layout == torch.sparse_coo:
        tensor = tensor.coalesce().cpu()
        values, bf16 = _from_torch(torch, tensor.values())
        indices = tensor.indices().T.contiguous().numpy()
        return SparseCOO(indices, values, tuple(tensor.shape)), bf16
    if tensor.layout != torch.strided:
        raise TypeError(f"torch layout {tensor.layout} is not supported (dense or sparse COO only)")
    tensor = tensor.cpu().resolve_conj().resolve_neg()
    if tensor.dtype == torch.bfloat16:
        return tensor.contiguous().view(torch.int16).numpy().view(np.uint16), True
    try:
        return tensor.numpy(), False
    except TypeError as e:  # e.g. torch dtypes numpy lacks
        raise TypeError(f"torch dtype {tensor.dtype} cannot be stored: {e}") from None


def _dtype_name(array: np.ndarray, bfloat16: bool) -> str:
    dt = array.dtype
    if bfloat16:
        if dt.kind in "iu" and dt.itemsize == 2:
            return "bfloat16"
        raise TypeError(f"only uint16/int16 arrays can be stored as bfloat16, not {dt}")
    if dt.name == "bfloat16" and dt.itemsize == 2:  # ml_dtypes.bfloat16
        return "bfloat16"
    if dt.kind == "b":
        return "bool"
    if dt.kind in "iu" and dt.itemsize in (1, 2, 4, 8):
        return ("int" if dt.kind == "i" else "uint") + str(dt.itemsize * 8)
    if dt.kind == "f" and dt.itemsize in (2, 4, 8):
        return "float" + str(dt.itemsize * 8)
    raise TypeError(f"numpy dtype {dt} cannot be stored (supported: {_SUPPORTED})")


def _little_endian_c_contiguous(array: np.ndarray, name: str) -> np.ndarray:
    """The array itself when it already is C-contiguous little-endian, else a converted copy."""
    if name == "bfloat16" and array.dtype.kind not in "iu":  # ml_dtypes.bfloat16: the raw bits
        array = array.view(np.uint16)
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big"):
        array = array.astype(array.dtype.newbyteorder("<"))
    if not array.flags.c_contiguous:
        array = np.array(array, order="C")
    return array


def _dense(array: np.ndarray, bfloat16: bool) -> tuple:
    if array.dtype.kind in "UO":
        if array.dtype.kind == "O" and not all(isinstance(v, str) for v in array.flat):
            raise TypeError("object arrays can only be stored when every element is a str")
        return ("strings", [str(v) for v in array.flat], array.shape)
    name = _dtype_name(array, bfloat16)
    return ("dense", _little_endian_c_contiguous(array, name), name)


def _sparse(value: SparseCOO, bfloat16: bool) -> tuple:
    shape = tuple(int(d) for d in value.shape)
    values = np.asarray(value.values)
    if values.ndim != 1:
        raise ValueError(f"sparse values must be 1-D, not of shape {values.shape}")
    indices = np.asarray(value.indices)
    if indices.dtype.kind not in "iu":
        raise TypeError(f"sparse indices must be integers, not {indices.dtype}")
    if indices.shape != (values.shape[0], len(shape)):
        raise ValueError(f"sparse indices must have shape (nnz, rank) = "
                         f"({values.shape[0]}, {len(shape)}), not {indices.shape} "
                         f"(torch-style (rank, nnz) indices need .T)")
    if values.dtype.kind in "UO":
        raise TypeError("sparse tensors of strings are not supported")
    indices = _little_endian_c_contiguous(indices.astype(np.int64, copy=False), "int64")
    name = _dtype_name(values, bfloat16)
    return ("sparse", indices, _little_endian_c_contiguous(values, name), shape, name)
