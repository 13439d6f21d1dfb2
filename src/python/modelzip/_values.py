"""Conversions of Python values to what the compiled writer stores, SparseCOO and QuantizedTensor.

``to_savable`` turns a value of a dict given to ``save``/``Writer.add_tag``
into one tuple the extension understands. It never copies array data unless
it must (non-contiguous, big-endian, or a torch bfloat16 or float8 tensor that is
not contiguous); the extension then borrows the array's buffer until commit.

numpy has no bfloat16 or 8-bit float types: arrays of them are given as their raw
bits (uint16/int16, uint8/int8) marked with the type (``dtypes=``, or the older
``bfloat16=``), as ml_dtypes' types, or as torch tensors of those types.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import sys
from collections.abc import Mapping
from typing import Any, NamedTuple, Optional

import numpy as np

from . import _modelzip
from ._arguments import not_utf8


class LoadedArrays(dict):
    """What ``load()`` returns: a plain dict of numpy arrays (and QuantizedTensor, SparseCOO) by
    parameter name, in stored order.

    It differs from a dict in one way: torch's ``Module.load_state_dict()``, which needs torch
    tensors, raises a TypeError that names the torch loader instead of one error per parameter.
    (load_state_dict reads the state dict's attribute ``_metadata`` before anything else; a
    dict has no such attribute, so nothing else that takes a dict reads it.)
    """

    __slots__ = ()

    @property
    def _metadata(self) -> Any:
        raise TypeError(
            "modelzip.load() and Archive.load() give numpy arrays, which "
            "torch's load_state_dict() cannot copy into a model: load torch tensors with "
            f"{_torch_loader()} instead")


LoadedArrays.__module__ = "modelzip"


def _torch_loader() -> str:
    """How the torch loader is called (modelzip.torch.load where this version has it)."""
    try:
        from . import torch as modelzip_torch
    except ImportError:  # no torch
        modelzip_torch = None
    if modelzip_torch is not None and hasattr(modelzip_torch, "load"):
        return "modelzip.torch.load(path, tag) or modelzip.open(path).load_torch(tag)"
    return "modelzip.open(path).load_torch(tag)"


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


@dataclasses.dataclass(frozen=True, eq=False)
class QuantizedTensor:
    """A quantized tensor: stored integers and how they stand for values of ``dtype``.

    (schemas/FORMAT.md section 6.1; ``modelzip quantize`` and torch's quantized
    tensors make them.) ``scheme`` is "affine-per-tensor" (x = (q - zero_point) *
    scale), "affine-per-axis" (x = (q - zero_points[c]) * scales[c], c the index
    along ``axis``) or "block-symmetric" (x = q * scales[block]; rows are the
    dimensions from ``axis`` on, cut into blocks of ``block_size`` elements, the
    last block of a row may be shorter). ``storage`` is "int8", "uint8" or
    "int4". ``values`` holds the integers: an int8/uint8 array of ``shape``, or
    for int4 the packed bytes (uint8, ceil(n / 2); element 2k in the low
    nibble of byte k, 2k+1 in the high one; ``int_values()`` unpacks them).
    ``scales`` (float64 per axis; float16 or float32 per block) and
    ``zero_points`` (int64) are arrays for the per-axis and block schemes, of
    the shape FORMAT.md gives them as plain arrays: ``[C]`` per axis (C =
    ``shape[axis]``, as torch's ``q_per_channel_scales()``), ``shape[:axis] +
    (B,)`` per block (B blocks per row: ``scales[..., b]`` scales block b of
    the row ``...`` names). Scales given flat in row-major order, with that
    many values, take that shape; other counts are refused when saved.
    Arrays loaded from an archive are read-only zero-copy views.
    """

    values: np.ndarray
    shape: tuple[int, ...]
    dtype: str = "float32"
    scheme: str = "affine-per-tensor"
    storage: str = "int8"
    scale: Optional[float] = None
    zero_point: Optional[int] = None
    axis: Optional[int] = None
    scales: Optional[np.ndarray] = None
    zero_points: Optional[np.ndarray] = None
    block_size: Optional[int] = None

    def __post_init__(self) -> None:
        if self.scales is None or self.scheme != "block-symmetric":
            return
        shape = self._scales_shape()
        scales = np.asarray(self.scales)
        if shape is not None and scales.shape != shape and scales.size == np.prod(shape):
            object.__setattr__(self, "scales", scales.reshape(shape))

    def _scales_shape(self) -> Optional[tuple[int, ...]]:
        """shape[:axis] + (B,) of block-wise scales; None when axis or block_size is invalid
        (refused when saved)."""
        try:
            shape, axis, block = tuple(int(d) for d in self.shape), int(self.axis), int(
                self.block_size)
        except (TypeError, ValueError):
            return None
        if not 0 <= axis < len(shape) or block < 1:
            return None
        row = int(np.prod(shape[axis:], dtype=np.int64))
        return shape[:axis] + (-(-row // block),)

    @property
    def bits(self) -> int:
        """Bits per stored integer: 8 or 4."""
        return 4 if self.storage == "int4" else 8

    def int_values(self) -> np.ndarray:
        """The stored integers as an array of ``shape`` (int8 for int4 storage)."""
        if self.storage != "int4":
            return np.asarray(self.values).reshape(self.shape)
        packed = np.asarray(self.values, dtype=np.uint8)
        n = int(np.prod(self.shape, dtype=np.int64))
        nibbles = np.empty(packed.size * 2, dtype=np.int8)
        nibbles[0::2] = (packed & 0x0F).astype(np.int8)
        nibbles[1::2] = (packed >> 4).astype(np.int8)
        nibbles[nibbles >= 8] -= 16
        return nibbles[:n].reshape(self.shape)

    def dequantize(self, dtype: Optional[str] = None) -> np.ndarray:
        """The values the integers stand for, as a new array of ``dtype`` (None: the original
        type; bfloat16 as uint16 bits), computed as the library does (float64, rounded once)."""
        return _modelzip._dequantize(self._savable(), dtype)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QuantizedTensor):
            return NotImplemented
        def same(a: Any, b: Any) -> bool:
            if a is None or b is None:
                return a is None and b is None
            a, b = np.asarray(a), np.asarray(b)
            return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
        return (self.shape == other.shape and self.dtype == other.dtype
                and self.scheme == other.scheme and self.storage == other.storage
                and self.scale == other.scale and self.zero_point == other.zero_point
                and self.axis == other.axis and self.block_size == other.block_size
                and same(self.values, other.values) and same(self.scales, other.scales)
                and same(self.zero_points, other.zero_points))

    def __repr__(self) -> str:
        if self.scheme == "affine-per-tensor":
            params = f"scale={self.scale!r}, zero_point={self.zero_point!r}"
        elif self.scheme == "affine-per-axis":
            params = f"axis={self.axis}"
        else:
            params = f"axis={self.axis}, block_size={self.block_size}"
        return (f"modelzip.QuantizedTensor(shape={tuple(self.shape)!r}, dtype={self.dtype!r}, "
                f"scheme={self.scheme!r}, storage={self.storage!r}, {params})")

    def _savable(self) -> tuple:
        storage_type = {"int8": np.int8, "uint8": np.uint8, "int4": np.uint8}.get(self.storage)
        if storage_type is None:
            raise ValueError(f"quantized storage must be int8, uint8 or int4, not {self.storage!r}")
        values = np.asarray(self.values)
        if values.dtype != storage_type:
            article = "an" if self.storage.startswith("int") else "a"
            raise TypeError(f"{self.storage} values must be {article} {np.dtype(storage_type)} array, "
                            f"not {values.dtype}")
        values = _little_endian_c_contiguous(values, "int8")
        scales = None if self.scales is None else np.asarray(self.scales)
        if scales is not None:
            if scales.dtype.kind != "f":
                raise TypeError(f"scales must be a float array, not {scales.dtype}")
            scales = _little_endian_c_contiguous(scales.reshape(-1), "float")
        zero_points = None if self.zero_points is None else np.asarray(self.zero_points)
        if zero_points is not None:
            if zero_points.dtype.kind not in "iu":
                raise TypeError(f"zero points must be an integer array, not {zero_points.dtype}")
            zero_points = _little_endian_c_contiguous(
                zero_points.reshape(-1).astype(np.int64, copy=False), "int64")
        return ("quantized", values, str(self.dtype), tuple(int(d) for d in self.shape),
                self.scheme, self.storage,
                1.0 if self.scale is None else float(self.scale),
                0 if self.zero_point is None else int(self.zero_point),
                0 if self.axis is None else int(self.axis),
                0 if self.block_size is None else int(self.block_size),
                scales, None if scales is None else _dtype_name(scales, None), zero_points)


QuantizedTensor.__module__ = "modelzip"

# The types numpy lacks, stored from arrays of their raw bits (or ml_dtypes' types of the same
# name): modelzip dtype name -> bytes per element. A float4_e2m1fn_x2 element is one byte holding
# two FP4 values (the first in the low nibble), as torch.float4_e2m1fn_x2 viewed as uint8; the
# array's shape counts those bytes (ml_dtypes' float4_e2m1fn, one value per byte, is not it).
RAW_BITS_DTYPES = {"bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e8m0fnu": 1,
                   "float4_e2m1fn_x2": 1}

# The first torch version with each raw-bits type, for the message of an older torch.
TORCH_RAW_BITS_SINCE = {"bfloat16": "1.0", "float8_e4m3fn": "2.1", "float8_e5m2": "2.1",
                        "float8_e8m0fnu": "2.7", "float4_e2m1fn_x2": "2.8"}

_SUPPORTED = ("bool, int8..int64, uint8..uint64, float16, float32, float64, complex64, "
              "complex128, "
              "str (strings), raw bits marked with dtypes= (" + ", ".join(RAW_BITS_DTYPES) + ")")


def raw_bits_marks(bfloat16: Any = (), dtypes: Any = None) -> dict:
    """The arrays the caller gives as raw bits, ``{name or (variable, state): dtype name}``, from
    ``bfloat16=`` (a collection of names, each marked "bfloat16") and ``dtypes=`` (a mapping of
    names to a key of RAW_BITS_DTYPES: "bfloat16", "float8_e4m3fn", "float8_e5m2",
    "float8_e8m0fnu" or "float4_e2m1fn_x2"). Keys are checked by the caller
    (tag_contents.cpp). Raises TypeError for arguments of the wrong kind, ValueError for an
    unknown type name or a name that the two arguments mark differently."""
    if isinstance(bfloat16, (bool, str)):
        raise TypeError(f"bfloat16 must be a collection of names, not a {type(bfloat16).__name__}")
    marks = {key: "bfloat16" for key in bfloat16}
    if dtypes is None:
        return marks
    if not isinstance(dtypes, Mapping):
        raise TypeError("dtypes must be a mapping of names to dtype names, not "
                        f"{type(dtypes).__name__}")
    for key, name in dtypes.items():
        if not isinstance(name, str):
            raise TypeError(f"dtypes[{key!r}] must be a dtype name (str), not "
                            f"{type(name).__name__}")
        if name not in RAW_BITS_DTYPES:
            raise ValueError(f"dtypes[{key!r}] is {name!r}: dtypes= names the types numpy lacks "
                             f"({', '.join(RAW_BITS_DTYPES)}); other types are taken from the "
                             "array's own dtype")
        if marks.get(key, name) != name:
            raise ValueError(f"{key!r} is marked bfloat16 by bfloat16= and {name} by dtypes=")
        marks[key] = name
    return marks


# How a torch state dict's non-tensor values are stored (quantize_dynamic models have them): a
# torch.dtype as a 0-d string parameter "torch.dtype:<name>"; a tuple of tensors (and None) as
# a 0-d string "torch.tuple:<length>" plus parameters NAME.0, NAME.1... for the elements that
# are not None. load_torch() turns them back into the dtype and the tuple. Such a state dict's
# module versions (its _metadata, which quantized modules need to read it back) go into a 0-d
# string parameter "_metadata" holding "torch.metadata:<JSON>".
TORCH_DTYPE_MARK = "torch.dtype:"
TORCH_TUPLE_MARK = "torch.tuple:"
TORCH_METADATA_MARK = "torch.metadata:"

# Python values that are not arrays, in a dict to save, and the 0-d string parameter
# "_python_types" holding "torch.python_types:<JSON>": a JSON object {name: kind} of the names
# that hold such values, which the torch loads give back as they were; every other reader sees
# the arrays. The kinds (docs/torch.md, "Python values"):
#   "int", "float", "complex", "bool": a Python scalar, stored 0-d int64 (uint64 from 2**63
#     on), float64, complex128, bool; "None": None, stored as the 0-d string "None";
#   "str": a str stored 0-d that the torch loads would otherwise read as a marker (one that
#     starts with "torch.dtype:" or "torch.tuple:", or "torch.metadata:" under the name
#     "_metadata"; reads_as_marker);
#   "numpy.<type>": a numpy scalar of that type (bool, int8..uint64, float16..float64,
#     complex64, complex128), stored 0-d of that type; "numpy.str_": a numpy str, stored as the
#     0-d string it holds;
#   "list[K]", "tuple[K]": a list or tuple (exactly those types) of elements of kind K ("int",
#     "float", "complex", "bool", "str", "numpy.<type>", "numpy.str_" or again
#     "list[...]"/"tuple[...]"),
#     stored as one array with a dimension per level of nesting, its elements as the scalar
#     kinds are; "list[]" and "tuple[]": empty ones, stored float64 (a dimension of length 0).
#     Lists of str (lists of lists of str...) are not recorded: the torch loads give a string
#     array as nested lists.
#   "torch.Size": a torch.Size, stored 1-d int64;
#   "bytes", "bytearray": one of those (exactly those types), stored 1-d uint8; "numpy.bytes_": a
#     numpy bytes, stored so too;
#   "list", "tuple": a list or tuple (exactly those types) holding a tensor, array, SparseCOO,
#     QuantizedTensor, Embeddings, set, frozenset, slice or torch.device at any depth
#     (_holds_arrays), or one that one array could not give back as it was (sequence_kind:
#     None, str beside other kinds, ragged), stored element by element: the name holds its
#     length n (0-d int64) and its elements are the parameters NAME.0 ... NAME.<n-1>, each
#     stored (and recorded) as a value of the dict would be, so an element that is such a list
#     again is "list"/"tuple" with elements NAME.i.0...; a None element is "None". (A tuple of
#     tensors and None only is the "torch.tuple:" marker above.)
#   "set[K]", "frozenset[K]": a set or frozenset (exactly those types) whose elements, sorted
#     (in iteration order when they do not sort), a tuple of kind "tuple[K]" would store as
#     one array; "set", "frozenset": any other, stored element by element as a "tuple" is;
#     "slice": a slice, stored element by element as the tuple (start, stop, step);
#   "numpy.ndarray": a numpy array (exactly that type) that is an element of a list, tuple or
#     set stored element by element (at the top level an array is the state dict's tensor),
#     stored as the array;
#   "torch.device": a torch.device, stored as the 0-d string str(device);
#   "dict": a mapping with str keys (a module's get_extra_state() dict), stored element by
#     element: the name holds its keys (1-d strings, in the mapping's order) and its values are
#     the parameters NAME.0 ... NAME.<n-1>, as a "list"'s elements; loads as a dict.
# Sequences that cannot be stored at all (ints beyond 64 bits, nested too deeply) are refused.
PYTHON_TYPES_NAME = "_python_types"
PYTHON_TYPES_MARK = "torch.python_types:"

# The numpy scalar types the record names ("numpy.<name>"): those whose dtype name is a
# modelzip dtype.
NUMPY_SCALAR_TYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                      "uint64", "float16", "float32", "float64", "complex64", "complex128")

# The deepest nesting of lists a record kind describes (numpy's arrays have at most 32
# dimensions).
MAX_SEQUENCE_DEPTH = 32

# The most elements the lists and tuples of kind "list[K]"/"tuple[K]" and the torch.Size values
# of one tag hold in all: the torch loads rebuild them as Python objects (some 40 bytes each,
# from an array of 1 to 16 bytes each), so a record cannot make a tag of a few GiB take tens
# of GiB. modelzip.save refuses more.
MAX_PYTHON_ELEMENTS = 2**24


def new_fetches(overlap: bool = False) -> Any:
    """A _device_save.Fetches for one save (see fetch_device_tensors); None while torch is not
    imported (there are no CUDA tensors then, and torch is not imported for that)."""
    if "torch" not in sys.modules:
        return None
    from . import _device_save
    return _device_save.Fetches(overlap)


def fetch_device_tensors(items: Any, fetches: Any = None) -> Any:
    """(name, value) pairs with every dense CUDA tensor replaced by a host tensor of the same
    bytes, fetched through pinned staging memory (_device_save.py); ``items`` as they are when
    none is on a CUDA device (torch is not imported for that). ``fetches``: a
    _device_save.Fetches of the save: the host tensors are views of staging areas it collects
    (adopted by background saves; written while they fill by blocking ones)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return items
    items = list(items)
    device_save = sys.modules.get("modelzip._device_save")
    target = device_save.fetch_target() if device_save is not None else None
    if target is None and not any(isinstance(v, torch.Tensor) and v.is_cuda for _, v in items):
        return items
    from . import _device_save
    return _device_save.host_items(items, target, fetches)


def python_kind(value: Any) -> Optional[str]:
    """The kind the _python_types record gives ``value`` as an element of a list: "int",
    "float", "complex", "bool" or "None" for a Python scalar, "numpy.<type>" for a numpy scalar of
    NUMPY_SCALAR_TYPES, "numpy.str_" for a numpy str, "str" for another str; else None."""
    if value is None:
        return "None"
    if isinstance(value, np.str_):  # a str too: given back as a numpy str, as torch.load does
        return "numpy.str_"
    if isinstance(value, str):
        return "str"
    if isinstance(value, np.generic):
        name = value.dtype.name
        return f"numpy.{name}" if name in NUMPY_SCALAR_TYPES else None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, complex):
        return "complex"
    return None


def reads_as_marker(name: str, text: str) -> bool:
    """Whether the torch loads read the 0-d string ``text`` of parameter ``name`` as one of the
    markers above (unless the _python_types record says it is a "str")."""
    return (text.startswith((TORCH_DTYPE_MARK, TORCH_TUPLE_MARK))
            or (name == "_metadata" and text.startswith(TORCH_METADATA_MARK))
            or (name == PYTHON_TYPES_NAME and text.startswith(PYTHON_TYPES_MARK)))


# The record kinds of elements of exactly these types (sequence_kind's common case).
_PLAIN_KINDS = {int: "int", float: "float", complex: "complex", bool: "bool", str: "str",
                type(None): "None"}


def sequence_kind(value: Any) -> Optional[tuple[str, Any]]:
    """(record kind, value to store) of a list or tuple of scalars (see above), else None (not
    such a sequence: stored as before, by to_savable). The value to store is an array, or
    ``value`` itself for elements of str. None too for numbers of several kinds (1 and 0.5, a
    bool and an int) or lists beside tuples at one level: to_savable stores them as numpy does,
    as they were stored before the record had sequences, and they load as arrays. ("list" or
    "tuple", ``value``), to store element by element, for a sequence that one array could not
    give back as it was: str beside other kinds (numpy made ['1', 'a'] of [1, 'a']), None
    elements, lengths that differ at one level or elements nested to different depths. Raises
    ValueError, without the parameter's name, for ints beyond 64 bits and nesting deeper than
    MAX_SEQUENCE_DEPTH."""
    containers: list[set] = []
    leaves: set[tuple[int, str]] = set()
    ints: list[int] = []

    def walk(item: Any, depth: int) -> bool:
        if type(item) in (list, tuple):
            if depth == MAX_SEQUENCE_DEPTH:
                raise ValueError(f"lists nested deeper than {MAX_SEQUENCE_DEPTH} levels cannot "
                                 "be stored")
            if len(containers) == depth:
                containers.append(set())
            containers[depth].add(type(item))
            types = {type(v) for v in item}
            if types and types <= _PLAIN_KINDS.keys():  # the common case, without a call each
                leaves.update((depth + 1, _PLAIN_KINDS[t]) for t in types)
                if int in types:
                    ints.extend(item)
                return True
            return all(walk(v, depth + 1) for v in item)
        kind = python_kind(item)
        if kind is None:
            return False
        leaves.add((depth, kind))
        if kind == "int":
            ints.append(item)
        return True

    if type(value) not in (list, tuple) or not walk(value, 0):
        return None
    kinds = sorted({kind for _, kind in leaves})
    what = "a list" if type(value) is list else "a tuple"
    separate = (type(value).__name__, value)
    if "None" in kinds:
        return separate
    if len(kinds) > 1 and "str" not in kinds:
        return None  # numbers of several kinds: stored as numpy stores them, loading as an array
    if len(kinds) > 1:
        return separate
    depths = {depth for depth, _ in leaves}
    for depth, types in enumerate(containers):
        if len(types) > 1:
            return None  # lists beside tuples: stored as numpy stores them, as an array
    kind = kinds[0] if kinds else None
    depth = len(containers) if not depths else depths.pop()
    if depths or (kind is not None and depth != len(containers)):
        return separate
    if kind == "int":
        low, high = min(ints, default=0), max(ints, default=0)
        dtype: Any = (np.int64 if -2**63 <= low and high < 2**63 else
                      np.uint64 if 0 <= low and high < 2**64 else None)
        if dtype is None:
            raise ValueError(f"{what} of ints beyond int64 (or uint64, none negative) cannot be "
                             "stored: store them as str")
    elif kind == "numpy.str_":
        dtype = object  # strings, as for "str"
    elif kind is not None and kind.startswith("numpy."):
        dtype = np.dtype(kind.removeprefix("numpy."))
    else:  # empty: float64, as np.array([]) has it
        dtype = {None: np.float64, "float": np.float64, "complex": np.complex128,
                 "bool": np.bool_, "str": object}[kind]
    try:
        array = np.array(value, dtype=dtype)
    except ValueError:
        array = None
    if array is None or array.ndim != len(containers):
        return separate
    record = "".join(("list[" if list in types else "tuple[") for types in containers) + (
        kind or "") + "]" * len(containers)
    return record, (value if kind in ("str", "numpy.str_") else array)


def _stored_value(name: str, value: Any) -> tuple[Optional[str], Any]:
    """(_python_types kind or None, value to store) of parameter ``name``; ValueError naming it
    for a sequence that cannot be stored (sequence_kind)."""
    if isinstance(value, np.str_):
        return "numpy.str_", str(value)
    if isinstance(value, np.bytes_):
        return "numpy.bytes_", np.frombuffer(bytes(value), dtype=np.uint8)
    if isinstance(value, str):
        return ("str" if reads_as_marker(name, value) else None), value
    if value is None:
        return "None", "None"
    if type(value) in (bytes, bytearray):
        return type(value).__name__, np.frombuffer(value, dtype=np.uint8)
    kind = python_kind(value)
    if kind is not None:
        return kind, value
    try:
        sequence = sequence_kind(value)
    except ValueError as e:
        raise ValueError(f"parameter {name!r}: {e}") from None
    if sequence is None:
        return None, value
    kind, stored = sequence
    if "tuple[" not in kind and kind.endswith("[str]" + "]" * (kind.count("[") - 1)):
        return None, stored  # lists of str load as lists of str without a record
    return kind, stored


_ELEMENTWISE = ("list", "tuple", "set", "frozenset", "slice")
"""The kinds stored element by element."""


def _holds_arrays(value: Any, depth: int = 0) -> bool:
    """Whether ``value``, a list or tuple (exactly those types), holds a tensor, numpy array,
    SparseCOO, QuantizedTensor, Embeddings, bytes, bytearray, set, frozenset, slice, mapping or
    torch.device at any depth: stored element by element (the "list" and "tuple" kinds
    above)."""
    torch = sys.modules.get("torch")
    arrays = (np.ndarray, SparseCOO, QuantizedTensor, _modelzip.Embeddings, bytes, bytearray,
              set, frozenset, slice, Mapping) + (
        (torch.Tensor, torch.device) if torch is not None else ())
    for item in value:
        if isinstance(item, arrays):
            return True
        if type(item) in (list, tuple) and depth < MAX_SEQUENCE_DEPTH and _holds_arrays(
                item, depth + 1):
            return True
    return False


def _unordered_value(name: str, value: Any) -> tuple[str, Any]:
    """(_python_types kind, value to store) of a set, frozenset or slice (see above): a tuple of
    its elements to store element by element, or ("set[K]"..., one array)."""
    kind = type(value).__name__
    if kind == "slice":
        return kind, (value.start, value.stop, value.step)
    try:
        items = tuple(sorted(value))
    except TypeError:  # elements that do not sort (several types): iteration order
        items = tuple(value)
    if _holds_arrays(items):
        return kind, items
    try:
        sequence = sequence_kind(items)
    except ValueError as e:
        raise ValueError(f"parameter {name!r}: {e}") from None
    if sequence is None or sequence[0] == "tuple":
        return kind, items
    return kind + sequence[0][len("tuple"):], sequence[1]


def expand_torch_objects(arrays: Mapping[str, Any], raw_bits: Mapping[Any, str] = {}) -> Any:
    """``arrays.items()``, with torch dtypes and tuples of tensors replaced by their markers
    and elements, lists and tuples holding arrays by their lengths and elements, and Python
    values that are not arrays recorded in "_python_types" (see above); the names of
    ``raw_bits`` (raw_bits_marks: stored as the type marked) as given, not recorded. Raises
    ValueError naming the parameter when ``arrays`` holds a value that needs the record and a
    parameter of that name, a sequence that cannot come back as it was (sequence_kind), or a
    tuple or list whose element names ("NAME.0"...) it also holds."""
    torch = sys.modules.get("torch")
    for name in arrays:
        if name == "":
            from ._errors import InvalidArgumentError
            message = ("parameter '': a name cannot be empty (the format has no empty names; "
                       "torch.save keeps one, but no module's state_dict() makes one: "
                       "register_buffer and register_parameter refuse it)")
            raise InvalidArgumentError(message, code="invalid_argument")
        problem = not_utf8(name)
        if problem is not None:  # the extension could not convert it, saying so without the name
            raise ValueError(f"parameter {name!r}: a name must be UTF-8 text ({problem})")
    out = []
    kinds = {}
    torch_objects = False
    elements = 0  # of the lists and tuples of kind "list[K]" or "tuple[K]", and torch.Size

    def is_tensor_tuple(value: Any) -> bool:
        return (torch is not None and isinstance(value, tuple)
                and any(isinstance(v, torch.Tensor) for v in value)
                and all(v is None or isinstance(v, torch.Tensor) for v in value))

    def element_name(name: str, i: int, what: str) -> str:
        element = f"{name}.{i}"
        if element in arrays:
            raise ValueError(f"parameter {name!r}: element {i} of its {what} is stored as "
                             f"{element}, a name the dict holds too")
        return element

    # Depth first, each list's elements right after it, without recursive closures (a cycle
    # of closures would keep the dict and its arrays alive until the garbage collector runs).
    pending = [(name, value, 0) for name, value in reversed(list(arrays.items()))]
    as_given = (torch.Tensor, torch.nn.Parameter) if torch is not None else ()
    while pending:
        name, value, depth = pending.pop()
        if type(value) in as_given or (depth == 0 and type(value) is np.ndarray):
            out.append((name, value))  # what the checks below would do with it
            continue
        if torch is not None and isinstance(value, torch.dtype):
            torch_objects = True
            out.append((name, TORCH_DTYPE_MARK + str(value).removeprefix("torch.")))
            continue
        if is_tensor_tuple(value):
            torch_objects = True
            out.append((name, f"{TORCH_TUPLE_MARK}{len(value)}"))
            for i, v in enumerate(value):
                element = element_name(name, i, "tuple of tensors")
                if v is not None:
                    out.append((element, v))
            continue
        if name in raw_bits:
            out.append((name, value))
            continue
        if depth == 0 and name in _OPTIMIZER_NAMES and (
                isinstance(value, Mapping) or (type(value) in (list, tuple) and value and all(
                    isinstance(v, Mapping) for v in value))):
            raise TypeError(f"parameter {name!r}: {_OPTIMIZER_HINT}")
        if isinstance(value, Mapping):
            if depth == MAX_SEQUENCE_DEPTH:
                raise ValueError(f"parameter {name!r}: dicts nested deeper than "
                                 f"{MAX_SEQUENCE_DEPTH} levels cannot be stored")
            keys = list(value)
            odd = next((key for key in keys if not isinstance(key, str)), None)
            if odd is not None:
                raise TypeError(f"parameter {name!r}: a dict is stored with its keys as text, "
                                f"and this one has the key {odd!r} ({type(odd).__name__}): "
                                "only str keys can be stored")
            for key in keys:
                problem = not_utf8(key)
                if problem is not None:
                    raise ValueError(f"parameter {name!r}: dict key {key!r} must be UTF-8 text "
                                     f"({problem})")
            kinds[name] = "dict"
            out.append((name, np.array(keys, dtype=object).reshape(len(keys))))
            pending.extend((element_name(name, i, "dict"), value[keys[i]], depth + 1)
                           for i in reversed(range(len(keys))))
            continue
        if torch is not None and type(value) is torch.Size:
            elements += len(value)
            kinds[name] = "torch.Size"
            out.append((name, np.array(value, dtype=np.int64).reshape(-1)))
            continue
        if torch is not None and type(value) is torch.device:
            kinds[name] = "torch.device"
            out.append((name, str(value)))
            continue
        if depth > 0 and type(value) is np.ndarray:  # an element: given back as an array
            kinds[name] = "numpy.ndarray"
            out.append((name, value))
            continue
        if type(value) in (set, frozenset, slice):
            kind, stored = _unordered_value(name, value)
        else:
            kind, stored = ((type(value).__name__, value)
                            if type(value) in (list, tuple) and _holds_arrays(value)
                            else _stored_value(name, value))
        if kind in _ELEMENTWISE:  # element by element
            if depth == MAX_SEQUENCE_DEPTH:
                raise ValueError(f"parameter {name!r}: lists nested deeper than "
                                 f"{MAX_SEQUENCE_DEPTH} levels cannot be stored")
            kinds[name] = kind
            out.append((name, np.array(len(stored), dtype=np.int64)))
            pending.extend((element_name(name, i, kind), stored[i], depth + 1)
                           for i in reversed(range(len(stored))))
            continue
        if kind is not None and "[" in kind:
            elements += int(np.size(stored))
            if elements > MAX_PYTHON_ELEMENTS:
                raise ValueError(f"parameter {name!r}: the lists and tuples of Python values of "
                                 f"this dict hold {elements} elements with this one, more than "
                                 f"the {MAX_PYTHON_ELEMENTS} the torch loads rebuild: store long "
                                 "ones as np.array(...) or a tensor (they load as arrays)")
        if kind is not None:
            kinds[name] = kind
        out.append((name, stored))
    if kinds:
        if kinds.keys() == {PYTHON_TYPES_NAME}:
            raise ValueError(f"parameter {PYTHON_TYPES_NAME!r}: the name is reserved for the "
                             "record of the values that are not arrays, and this text would "
                             "read as such a record")
        if PYTHON_TYPES_NAME in arrays:
            raise ValueError(f"parameter {PYTHON_TYPES_NAME!r}: the name is reserved for the "
                             "record of the values that are not arrays (Python scalars, None, "
                             "numpy scalars, lists, tuples, text read as markers), which this "
                             f"dict holds ({', '.join(map(repr, kinds))})")
        out.append((PYTHON_TYPES_NAME, PYTHON_TYPES_MARK + json.dumps(kinds, ensure_ascii=False)))
    metadata = None if isinstance(arrays, LoadedArrays) else getattr(arrays, "_metadata", None)
    if torch_objects and isinstance(metadata, Mapping) and "_metadata" not in arrays:
        out.append(("_metadata", TORCH_METADATA_MARK + json.dumps(dict(metadata))))
    return out


def checked_tag_metadata(metadata: Any) -> dict[str, str]:
    """``metadata`` (the ``tag_metadata=`` of a save: a tag's free-form metadata, as safetensors'
    ``save_file(metadata=)`` takes it) as a dict of str. Raises TypeError for what is not a
    mapping of str to str, ValueError naming the key for text that is not UTF-8."""
    if not isinstance(metadata, Mapping):
        raise TypeError(f"tag_metadata must be a mapping of str to str, not "
                        f"{type(metadata).__name__}")
    out = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"tag_metadata must be a mapping of str to str (as safetensors' "
                            f"metadata=): {key!r} -> {type(value).__name__}")
        for text in (key, value):
            problem = not_utf8(text)
            if problem is not None:
                raise ValueError(f"tag_metadata[{key!r}]: metadata must be UTF-8 text "
                                 f"({problem})")
        out[key] = value
    return out


def state_dict_metadata(arrays: Any) -> Optional[str]:
    """The module versions of a torch state dict (``state_dict()._metadata``, which
    ``load_state_dict`` hands to each module's ``_load_from_state_dict``) as JSON text, kept in
    the tag's metadata.toml (table ``torch``, key ``state_dict_metadata``: FORMAT.md section
    3.1); None for a dict without them. Raises ValueError when they are not JSON (torch's are
    {prefix: {"version": int}})."""
    if isinstance(arrays, LoadedArrays):
        return None  # its _metadata raises: it is no torch state dict
    metadata = getattr(arrays, "_metadata", None)
    if not isinstance(metadata, Mapping):
        return None
    try:
        return json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"the state dict's _metadata (module versions) cannot be stored as "
                         f"JSON: {e}") from None


def not_a_mapping(arrays: Any) -> str:
    """The TypeError message for ``arrays`` (of a save or add_tag) that is not a mapping."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(arrays, torch.nn.Module):
        hint = " (save module.state_dict())"
    elif isinstance(arrays, (np.ndarray, list, tuple)) or (
            torch is not None and isinstance(arrays, torch.Tensor)):
        hint = " (name each array: {'weight': array})"
    else:
        hint = ""
    return f"arrays must be a mapping of names to arrays, not {type(arrays).__name__}{hint}"


_OPTIMIZER_NAMES = ("state", "param_groups")
"""The keys of an optimizer's state_dict(): a dict under such a name is refused with
_OPTIMIZER_HINT (save_checkpoint stores optimizer state), not stored as a "dict"."""

_OPTIMIZER_HINT = ("an optimizer's state_dict() is not a mapping of arrays: save model and "
                   "optimizer together with modelzip.torch.save_checkpoint(path, tag, model, "
                   "optimizer), which stores the optimizer state by parameter name")


def to_savable(name: str, value: Any, raw_bits: Optional[str] = None) -> tuple:
    """The tuple the extension stores for parameter ``name`` (see module doc). ``raw_bits``: the
    type (a key of RAW_BITS_DTYPES) whose raw bits the caller marked ``value`` as holding.

    Raises TypeError (unsupported type) or ValueError (inconsistent sparse parts),
    naming the parameter.
    """
    torch = sys.modules.get("torch")
    array = type(value) is np.ndarray or (torch is not None and isinstance(value, torch.Tensor))
    if not array and (
            isinstance(value, Mapping) or (isinstance(value, (list, tuple)) and value
                                           and all(isinstance(v, Mapping) for v in value))):
        if name in _OPTIMIZER_NAMES:
            raise TypeError(f"parameter {name!r}: {_OPTIMIZER_HINT}")
        raise TypeError(f"parameter {name!r}: {_nested_names(name, value)}")
    try:
        return _to_savable(value, raw_bits)
    except (TypeError, ValueError) as e:
        raise type(e)(f"parameter {name!r}: {e}") from None


def _nested_names(name: str, value: Any) -> str:
    """The TypeError message for a mapping, or list of mappings, ``value`` of parameter
    ``name``: the names its entries could be stored under."""
    if isinstance(value, Mapping):
        what, prefix, first = "a mapping", name, value
    else:
        what, prefix, first = "a list of mappings", f"{name}.0", value[0]
    keys = list(itertools.islice(first, 3))
    shown = ", ".join(repr(f"{prefix}.{key}") for key in keys[:2]) + (
        "..." if len(keys) > 2 or what != "a mapping" else "")
    return (f"{what} is not an array; store each of its values under a name of its own, the "
            "keys joined with '.' as state_dict() names a submodule's tensors"
            + (f" ({shown})" if keys else " ('block.weight')"))


def _to_savable(value: Any, raw_bits: Optional[str]) -> tuple:
    if isinstance(value, _modelzip.Embeddings):
        return ("embedding", value)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        value, torch_bits = _from_torch(torch, value)
        if torch_bits is not None:
            if raw_bits is not None and raw_bits != torch_bits:
                raise TypeError(f"a torch {torch_bits} tensor cannot be stored as {raw_bits}")
            raw_bits = torch_bits
    if type(value) is np.ndarray:  # what every check below would let through unchanged
        return _dense(value, raw_bits)
    if isinstance(value, SparseCOO):
        return _sparse(value, raw_bits)
    if isinstance(value, QuantizedTensor):
        return value._savable()
    if isinstance(value, str):
        return ("strings", [value], ())
    if value is None:
        raise TypeError("None cannot be stored (leave the name out, or store an empty array)")
    if isinstance(value, int) and not isinstance(value, np.generic) and \
            not -2**63 <= value < 2**64:
        raise ValueError(f"the int {value} does not fit in 64 bits (int64, or uint64 from 2**63 "
                         "on): store it as str(value)")
    if isinstance(value, np.ma.MaskedArray):  # np.asarray would drop the mask
        raise TypeError("a masked array cannot be stored: its mask would be lost (store "
                        ".filled(), or .data and .mask as two parameters)")
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
    array = np.asarray(value)
    if array.dtype.kind == "O" and array.ndim == 0 and array.item() is value:
        raise TypeError(_not_an_array(value))
    return _dense(array, raw_bits)


def _not_an_array(value: Any) -> str:
    """The TypeError message for a value that numpy can only wrap as a 0-d object array."""
    cls = type(value)
    module = "" if cls.__module__ == "builtins" else cls.__module__ + "."
    message = f"a {module}{cls.__name__} is not an array"
    if module == "torch." and cls.__name__ == "ScriptObject":
        return message + (" (TorchScript objects, such as the packed weights of "
                          "quantize_dynamic's LSTM and GRU modules, cannot be stored; "
                          "quantize_dynamic's nn.Linear modules can)")
    return message + (" (save numpy arrays, torch tensors, objects with __array__ or .numpy(), "
                      "str or lists of str, SparseCOO, QuantizedTensor or Embeddings)")


@functools.lru_cache(maxsize=None)
def torch_raw_bits_types(torch: Any) -> dict:
    """The torch dtypes numpy lacks that this torch has, by modelzip dtype name (torch before
    2.1 has no float8 types, before 2.7 no float8_e8m0fnu, before 2.8 no float4_e2m1fn_x2). Cached: asking torch 1.13 for a type it lacks costs microseconds,
    and every saved and loaded tensor asks."""
    out = {}
    for name in RAW_BITS_DTYPES:
        dtype = getattr(torch, name, None)
        if isinstance(dtype, torch.dtype):
            out[name] = dtype
    return out


@functools.lru_cache(maxsize=None)
def torch_numpy_types(torch: Any) -> frozenset:
    """The torch dtypes whose tensors ``Tensor.numpy()`` gives as arrays of the same type (bool,
    the integers numpy and torch share, float16/32/64, complex64/128)."""
    return frozenset((torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                      torch.float16, torch.float32, torch.float64, torch.complex64,
                      torch.complex128))


def _from_torch(torch: Any, tensor: Any) -> tuple[Any, Optional[str]]:
    """A torch tensor as numpy (sharing memory when possible) or SparseCOO, and the modelzip
    dtype whose raw bits that numpy array holds (bfloat16, float8_*, float4_e2m1fn_x2), else
    None."""
    if (tensor.layout == torch.strided and tensor.dtype in torch_numpy_types(torch)
            and tensor.dtype not in torch_raw_bits_types(torch).values()):
        try:  # a CPU tensor without the conjugate or negative bit: numpy shares its memory
            return tensor.detach().numpy(), None
        except (TypeError, RuntimeError):  # another device, such a bit: as below
            pass
    tensor = tensor.detach()
    if tensor.is_quantized:
        return _from_torch_quantized(torch, tensor.cpu().contiguous()), None
    if tensor.layout == torch.sparse_coo:
        tensor = tensor.coalesce().cpu()
        values, raw_bits = _from_torch(torch, tensor.values())
        indices = tensor.indices().T.contiguous().numpy()
        return SparseCOO(indices, values, tuple(tensor.shape)), raw_bits
    if tensor.layout != torch.strided:
        raise TypeError(f"torch layout {tensor.layout} is not supported (dense or sparse COO only)")
    if tensor.is_meta:
        raise TypeError("a tensor on the meta device has no data to store (materialize it first)")
    tensor = tensor.cpu().resolve_conj().resolve_neg()
    for name, dtype in torch_raw_bits_types(torch).items():
        if tensor.dtype == dtype:
            bits = torch.int16 if RAW_BITS_DTYPES[name] == 2 else torch.uint8
            array = tensor.view(bits).contiguous().numpy()  # the copy, if any, of integers
            return (array.view(np.uint16) if RAW_BITS_DTYPES[name] == 2 else array), name
    try:
        return tensor.numpy(), None
    except TypeError as e:  # e.g. torch dtypes numpy lacks
        raise TypeError(f"torch dtype {tensor.dtype} cannot be stored: {e}") from None


def _from_torch_quantized(torch: Any, tensor: Any) -> QuantizedTensor:
    """torch's per-tensor and per-channel affine qint8/quint8 tensors, exactly (their integers,
    float64 scales and int64 zero points; they dequantize to float32)."""
    storage = {torch.qint8: "int8", torch.quint8: "uint8"}.get(tensor.dtype)
    if storage is None:
        raise TypeError(f"torch quantized dtype {tensor.dtype} cannot be stored "
                        "(qint8 and quint8 only)")
    values = tensor.int_repr().numpy()
    shape = tuple(tensor.shape)
    scheme = tensor.qscheme()
    if scheme == torch.per_tensor_affine:
        return QuantizedTensor(values, shape, "float32", "affine-per-tensor", storage,
                               scale=float(tensor.q_scale()),
                               zero_point=int(tensor.q_zero_point()))
    if scheme == torch.per_channel_affine:
        return QuantizedTensor(
            values, shape, "float32", "affine-per-axis", storage,
            axis=int(tensor.q_per_channel_axis()),
            scales=tensor.q_per_channel_scales().to(torch.float64).numpy(),
            zero_points=tensor.q_per_channel_zero_points().to(torch.int64).numpy())
    raise TypeError(f"torch quantization scheme {scheme} cannot be stored (per-tensor and "
                    "per-channel affine only)")


def _dtype_name(array: np.ndarray, raw_bits: Optional[str]) -> str:
    return _dtype_name_of(array.dtype, raw_bits)


@functools.lru_cache(maxsize=256)
def _dtype_name_of(dt: np.dtype, raw_bits: Optional[str]) -> str:
    """The modelzip dtype name of arrays of ``dt`` (numpy computes ``dtype.name`` in Python: a
    few microseconds for each array otherwise)."""
    if raw_bits is not None:
        size = RAW_BITS_DTYPES.get(raw_bits)
        if size is None:
            raise ValueError(f"{raw_bits!r} is not a type given as raw bits "
                             f"({', '.join(RAW_BITS_DTYPES)})")
        if (dt.kind in "iu" or dt.name == raw_bits) and dt.itemsize == size:
            return raw_bits
        raise TypeError(f"only uint{size * 8}/int{size * 8} arrays can be stored as {raw_bits}, "
                        f"not {dt}")
    # ml_dtypes.bfloat16, float8_e4m3fn, float8_e5m2, float8_e8m0fnu. Their numpy kind is not
    # one to rely on: ml_dtypes gives float8_e5m2 the kind "f" (numpy's own floats are never
    # named like these), the others "V".
    if dt.kind not in "biu" and RAW_BITS_DTYPES.get(dt.name) == dt.itemsize:
        return dt.name
    if dt.name == "float4_e2m1fn":
        raise TypeError("ml_dtypes float4_e2m1fn arrays (one FP4 value per byte) cannot be stored: "
                        "modelzip's float4_e2m1fn_x2 packs two values per byte (the first in the "
                        "low nibble); pack them into uint8 and pass dtypes={name: "
                        "\"float4_e2m1fn_x2\"}")
    if dt.kind == "b":
        return "bool"
    if dt.kind in "iu" and dt.itemsize in (1, 2, 4, 8):
        return ("int" if dt.kind == "i" else "uint") + str(dt.itemsize * 8)
    if dt.kind == "f" and dt.itemsize in (2, 4, 8) and dt.name == f"float{dt.itemsize * 8}":
        return dt.name  # numpy's own: another package's type of kind "f" is not a float16
    if dt.kind == "c" and dt.itemsize in (8, 16):
        return "complex" + str(dt.itemsize * 8)
    raise TypeError(f"numpy dtype {dt} cannot be stored (supported: {_SUPPORTED})")


def _little_endian_c_contiguous(array: np.ndarray, name: str) -> np.ndarray:
    """The array itself when it already is C-contiguous little-endian, else a converted copy."""
    if name in RAW_BITS_DTYPES and array.dtype.kind not in "iu":  # ml_dtypes' types: the raw bits
        array = array.view(np.uint16 if RAW_BITS_DTYPES[name] == 2 else np.uint8)
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big"):
        array = array.astype(array.dtype.newbyteorder("<"))
    if not array.flags.c_contiguous:
        array = np.array(array, order="C")
    return array


def _dense(array: np.ndarray, raw_bits: Optional[str]) -> tuple:
    if array.dtype.kind in "UO":
        if array.dtype.kind == "O" and not all(isinstance(v, str) for v in array.flat):
            raise TypeError("object arrays can only be stored when every element is a str")
        return ("strings", [str(v) for v in array.flat], array.shape)
    name = _dtype_name(array, raw_bits)
    return ("dense", _little_endian_c_contiguous(array, name), name)


def _sparse(value: SparseCOO, raw_bits: Optional[str]) -> tuple:
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
    name = _dtype_name(values, raw_bits)
    return ("sparse", indices, _little_endian_c_contiguous(values, name), shape, name)
