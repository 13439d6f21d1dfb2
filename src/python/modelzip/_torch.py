"""Conversion of loaded arrays to torch tensors (Archive.load_torch, modelzip.torch)."""
from __future__ import annotations

import collections
import json
from typing import Any, Iterable, Mapping, NamedTuple, Optional

import numpy as np

from . import _values
from ._ties import read_ties
from ._values import (MAX_PYTHON_ELEMENTS, MAX_SEQUENCE_DEPTH, NUMPY_SCALAR_TYPES,
                      PYTHON_TYPES_MARK, PYTHON_TYPES_NAME, RAW_BITS_DTYPES, TORCH_DTYPE_MARK,
                      TORCH_METADATA_MARK, TORCH_TUPLE_MARK, QuantizedTensor, SparseCOO)


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

    ``dtype`` is the modelzip dtype, so bfloat16 (loaded as uint16 bits) becomes
    ``torch.bfloat16`` again, float8_e4m3fn, float8_e5m2 and float8_e8m0fnu (uint8 bits)
    ``torch.float8_*``, float4_e2m1fn_x2 (uint8, one byte per pair) ``torch.float4_e2m1fn_x2``
    of the same shape. Raises TypeError, naming ``name``, for what torch cannot hold (strings,
    unsigned types it lacks, float8 types before torch 2.1, float8_e8m0fnu before 2.7,
    float4_e2m1fn_x2 before 2.8).
    """
    import torch

    if isinstance(value, QuantizedTensor):
        return _quantized_to_torch(name, value)
    if isinstance(value, SparseCOO):
        values = to_torch(name, value.values, dtype)
        indices = torch.from_numpy(value.indices).T
        return torch.sparse_coo_tensor(indices, values, value.shape)
    if dtype in RAW_BITS_DTYPES:
        torch_type = _values.torch_raw_bits_types(torch).get(dtype)
        if torch_type is None:
            raise TypeError(f"parameter {name!r} is {dtype}, a type torch {torch.__version__} "
                            "does not have: loading it as a torch tensor needs torch >= "
                            f"{_values.TORCH_RAW_BITS_SINCE[dtype]} (modelzip.load() gives its "
                            "raw bits as uint8)")
        bits = np.int16 if RAW_BITS_DTYPES[dtype] == 2 else np.uint8  # torch has no uint16
        return _contiguous_if_empty(torch.from_numpy(value.view(bits)).view(torch_type))
    if dtype == "string":
        raise TypeError(f"parameter {name!r}: torch has no string tensors; use Archive.load()")
    try:
        return _contiguous_if_empty(torch.from_numpy(value))
    except TypeError as e:
        raise TypeError(f"parameter {name!r}: torch cannot hold {dtype} ({e}); "
                        "use Archive.load()") from None


def _contiguous_if_empty(tensor: Any) -> Any:
    """``tensor``, or for one without elements a new one with the contiguous strides torch.load
    gives it ([0, 3]: (3, 1)); torch.from_numpy gives such an array's strides as 0."""
    return tensor.new_empty(tensor.shape) if tensor.numel() == 0 else tensor


def load_state_dict(archive: Any, tag: Optional[str] = None, dequantize: bool = False,
                    names: Optional[Iterable[str]] = None, verify: bool = False) -> Any:
    """Parameters of ``tag`` (None: the newest) of ``archive`` as torch CPU tensors viewing a
    private copy-on-write mapping of the file (Archive.load(writable=True)); ``names``: only
    these (in this order). Weights tied in the saved state dict (ties.json) are one tensor;
    every other name is its own tensor."""
    tag = archive.newest_tag if tag is None else tag
    infos = archive.params(tag)
    stored = archive.find_tag(tag)
    tensors = {p.name: p for p in infos if p.kind == "tensor"}
    ties = read_ties(archive, stored, {name: p.blob for name, p in tensors.items()})
    wanted = [p.name for p in infos if p.kind == "tensor"] if names is None else list(names)
    if names is not None:
        _refuse_hidden(archive, stored, wanted, {name: p.dtype for name, p in tensors.items()})
        wanted = _with_elements(archive, tag, wanted,
                                {name: p.dtype for name, p in tensors.items()})
    to_read = list(dict.fromkeys(ties.get(name, name) for name in wanted))
    if PYTHON_TYPES_NAME in tensors and PYTHON_TYPES_NAME not in to_read:
        to_read.append(PYTHON_TYPES_NAME)  # the Python types of the names wanted
    arrays = archive.load(tag, names=to_read, writable=True, dequantize=dequantize, verify=verify)
    out = state_dict(arrays, {name: p.dtype for name, p in tensors.items()}, wanted, ties)
    versions = archive._torch_metadata(stored).get("state_dict_metadata")
    if versions is not None:  # the saved state_dict()._metadata (FORMAT.md section 3.1)
        try:
            metadata = json.loads(versions)
        except (ValueError, RecursionError):
            metadata = None
        if not isinstance(metadata, dict):
            raise ValueError(f"{archive.name}: tag {stored!r}: malformed state_dict_metadata in "
                             f"{stored}/metadata.toml: {versions[:200]!r} (a JSON object of the "
                             "module versions)")
        out._metadata = collections.OrderedDict(metadata)  # the type state_dict() gives
    return out


def _refuse_hidden(archive: Any, tag: str, names: list[str], dtypes: Mapping[str, str]) -> None:
    """Raises NotFoundError, as for a missing name, for a name among ``names`` that the torch
    loads never give as a key: the _python_types record and the "_metadata" marker of module
    versions (state_dict_keys' hidden names)."""
    from ._errors import NotFoundError

    hidden = {PYTHON_TYPES_NAME, "_metadata"}.intersection(names).intersection(dtypes)
    if not hidden:
        return
    marks = {name: _torch_mark(value, dtypes[name])
             for name, value in archive.load(tag, names=sorted(hidden)).items()}
    for name in names:
        mark = marks.get(name)
        if mark is not None and ((name == "_metadata" and mark.startswith(TORCH_METADATA_MARK))
                                 or (name == PYTHON_TYPES_NAME
                                     and mark.startswith(PYTHON_TYPES_MARK))):
            what = ("the record of the Python values saved" if name == PYTHON_TYPES_NAME
                    else "the module versions saved (the state dict's _metadata attribute)")
            message = (f"no parameter {name!r} in the torch state dict: the name is reserved "
                       f"for {what}, which modelzip.load() gives as text")
            raise NotFoundError(f"{archive.name}: tag {tag!r}: {message}", code="not_found",
                                message=message, archive=archive.name, tag=tag)


def state_dict_keys(archive: Any, tag: str, infos: Mapping[str, Any]) -> tuple[list[str], set[str]]:
    """The keys of the state dict load_state_dict gives of tag ``tag``, whose tensor parameters
    are ``infos`` (name -> ParamInfo, in stored order), reading only its 0-d texts (markers) and
    the lengths of its lists: every
    parameter but the elements of lists, tuples and sets (and of the tuple-of-tensors markers),
    the module versions (a "_metadata" marker) and the _python_types record; and the keys among
    them whose values are not tensors (Python values, text, torch dtypes and tuples)."""
    dtypes = {name: p.dtype for name, p in infos.items()}
    recorded = (python_types(archive.load(tag, names=[PYTHON_TYPES_NAME]), dtypes)
                if PYTHON_TYPES_NAME in dtypes else {})
    texts = [name for name, p in infos.items()
             if p.dtype == "string" and tuple(p.shape) == () and name not in recorded]
    marks = {name: _torch_mark(value, "string")
             for name, value in (archive.load(tag, names=texts).items() if texts else ())}
    containers = [name for name in dtypes if (name in recorded and recorded[name].separate)
                  or (marks.get(name) or "").startswith(TORCH_TUPLE_MARK)]
    elements = set(_with_elements(archive, tag, containers, dtypes)) - set(containers)
    hidden = {name for name, mark in marks.items() if mark is not None and (
        (name == "_metadata" and mark.startswith(TORCH_METADATA_MARK))
        or (name == PYTHON_TYPES_NAME and mark.startswith(PYTHON_TYPES_MARK)))}
    keys = [name for name in dtypes if name not in elements and name not in hidden]
    return keys, {name for name in keys if name in recorded or dtypes[name] == "string"}


def _with_elements(archive: Any, tag: str, names: list[str], dtypes: dict[str, str]) -> list[str]:
    """``names`` and, for each one the tag's _python_types record records as a "list" or
    "tuple" stored element by element, or that holds a tuple-of-tensors marker
    ("torch.tuple:N"), the names of its elements (of theirs, and so on)."""
    recorded = (python_types(archive.load(tag, names=[PYTHON_TYPES_NAME]), dtypes)
                if PYTHON_TYPES_NAME in dtypes else {})

    def may_hold_elements(name: str) -> bool:
        return (name in recorded and recorded[name].separate) or dtypes.get(name) == "string"

    out = list(dict.fromkeys(names))
    pending = [name for name in out if may_hold_elements(name)]
    while pending:
        arrays = archive.load(tag, names=pending)
        pending = []
        for name, value in arrays.items():
            if name in recorded and recorded[name].separate:
                elements = _element_names(name, value, dtypes, recorded[name])
            else:
                mark = _torch_mark(value, dtypes.get(name, ""))
                if mark is None or not mark.startswith(TORCH_TUPLE_MARK):
                    continue
                # A tuple's None elements are not stored: only the stored ones are loaded.
                elements = [f"{name}.{i}" for i in range(_tuple_length(name, mark))
                            if f"{name}.{i}" in dtypes]
            for element in elements:
                if element not in out:
                    out.append(element)
                    if element in recorded and recorded[element].separate:
                        pending.append(element)
    return out


def _element_names(name: str, value: Any, dtypes: Mapping[str, str], kind: _Kind) -> list[str]:
    """The parameter names of the elements of ``name``, recorded as ``kind`` (a "list" or
    "tuple" stored element by element) and holding ``value`` (its length). Raises ValueError
    naming the parameter when the length is not a 0-d int64 array of at most as many elements
    as the tag has parameters, or an element is not in the tag."""
    what = kind.containers[0].__name__
    if what == "dict":
        if not (isinstance(value, np.ndarray) and value.ndim == 1
                and dtypes.get(name) == "string" and value.shape[0] <= len(dtypes)):
            raise ValueError(f"parameter {name!r}: {PYTHON_TYPES_NAME!r} records a dict stored "
                             f"element by element, but it holds {dtypes.get(name)} of shape "
                             f"{getattr(value, 'shape', None)}, not its keys (1-d strings, at "
                             f"most the tag's {len(dtypes)} parameters)")
        count = value.shape[0]
    elif not (isinstance(value, np.ndarray) and value.shape == () and dtypes.get(name) == "int64"
              and 0 <= int(value[()]) <= len(dtypes)):
        raise ValueError(f"parameter {name!r}: {PYTHON_TYPES_NAME!r} records a {what} stored "
                         f"element by element, but it holds {dtypes.get(name)} of shape "
                         f"{getattr(value, 'shape', None)}, not its length (a 0-d int64 of at "
                         f"most the tag's {len(dtypes)} parameters)")
    else:
        count = int(value[()])
    elements = [f"{name}.{i}" for i in range(count)]
    missing = [element for element in elements if element not in dtypes]
    if missing:
        raise ValueError(f"parameter {name!r}: {PYTHON_TYPES_NAME!r} records a {what} of "
                         f"{len(elements)} elements stored as {name}.0...{name}.{len(elements) - 1}"
                         f", but the tag has no parameter {missing[0]!r}")
    return elements


def parameter_value(name: str, value: Any, dtype: str) -> Any:
    """A parameter as the torch loads give it: ``to_torch``'s tensor, or for a string
    parameter (torch has no string tensors) the str (0-d) or nested lists of str it was saved
    as."""
    if dtype == "string" and isinstance(value, np.ndarray):
        return value.tolist()
    return to_torch(name, value, dtype)


_PYTHON_DTYPES = {"int": ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"),
                  "float": ("float16", "float32", "float64"),
                  "complex": ("complex64", "complex128"), "bool": ("bool",), "str": ("string",),
                  "numpy.str_": ("string",), **{f"numpy.{t}": (t,) for t in NUMPY_SCALAR_TYPES}}
# The types modelzip.save stores the elements of a list or tuple of each kind as
# (_values.sequence_kind): only these, so that a record cannot make a list of Python objects of
# a blob of bytes (32 bytes or more each, beside a pointer).
_SEQUENCE_DTYPES = {**_PYTHON_DTYPES, "int": ("int64", "uint64"), "float": ("float64",),
                    "complex": ("complex128",)}


_SEPARATE = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset, "slice": slice,
             "dict": dict}
"""The kinds stored element by element, and their types."""


class _Kind(NamedTuple):
    """A kind of the _python_types record (_values.py), parsed: the containers from the
    outside in (list, tuple; empty for a scalar) and the elements' kind (None: "None" when
    there are no containers, else an empty sequence)."""

    containers: tuple[type, ...]
    element: Optional[str]
    separate: bool = False
    """The "list" and "tuple" kinds: the length stored under the name, the elements as the
    parameters NAME.0, NAME.1... (containers is (list,) or (tuple,), element None)."""


def _parse_kind(kind: Any) -> Optional[_Kind]:
    """The parsed ``kind``, or None when it is none of the record's kinds."""
    if not isinstance(kind, str):
        return None
    if kind == "None":
        return _Kind((), None)
    if kind in _SEPARATE:
        return _Kind((_SEPARATE[kind],), None, True)
    if kind in ("torch.Size", "bytes", "bytearray", "numpy.bytes_", "torch.device",
                "numpy.ndarray"):
        return _Kind((), kind)
    containers: list[type] = []
    while kind.endswith("]") and len(containers) < MAX_SEQUENCE_DEPTH:
        container = list if kind.startswith("list[") else tuple if kind.startswith("tuple[") \
            else None
        if container is None and not containers:
            container = set if kind.startswith("set[") else frozenset if kind.startswith(
                "frozenset[") else None
        if container is None or (container is list and containers  # a set's elements: tuples
                                 and containers[0] in (set, frozenset)):  # or scalars
            return None
        containers.append(container)
        kind = kind[len(container.__name__) + 1:-1]
    if containers and kind == "":
        return _Kind(tuple(containers), None)
    return _Kind(tuple(containers), kind) if kind in _PYTHON_DTYPES else None


def python_types(arrays: Mapping[str, Any], dtypes: Mapping[str, str]) -> dict[str, _Kind]:
    """The record of values that are not arrays (_values.PYTHON_TYPES_NAME) among ``arrays``:
    {name: parsed kind}; empty without one. Raises ValueError naming the parameter when the
    record is not a JSON object of such kinds."""
    mark = (_torch_mark(arrays[PYTHON_TYPES_NAME], dtypes.get(PYTHON_TYPES_NAME, ""))
            if PYTHON_TYPES_NAME in arrays else None)
    if mark is None or not mark.startswith(PYTHON_TYPES_MARK):
        return {}
    try:
        record = json.loads(mark[len(PYTHON_TYPES_MARK):])
    except (ValueError, RecursionError):  # RecursionError: JSON nested too deeply
        record = None
    kinds = ({name: _parse_kind(kind) for name, kind in record.items()}
             if isinstance(record, dict) else {None: None})
    if None in kinds.values():
        shown = mark if len(mark) <= 200 else mark[:200] + "..."
        raise ValueError(f"parameter {PYTHON_TYPES_NAME!r}: malformed record {shown!r} (a JSON "
                         'object of names to "int", "float", "bool", "None", "str", '
                         '"numpy.<type>", "list[...]", "tuple[...]", "set[...]", '
                         '"frozenset[...]", the kinds stored element by element or others of '
                         'schemas/GRAPH.md section 4.2)')
    return kinds


def python_value(name: str, kind: _Kind, value: Any, dtype: str) -> Any:
    """Parameter ``name``, recorded in python_types as a value of ``kind``, as that value: None,
    the int, float, bool, str or numpy scalar its 0-d array holds, or the list, tuple or
    torch.Size its array holds. Raises ValueError when it is not stored as such a value."""
    if kind.element is None and not kind.containers:
        return None
    if kind.element == "torch.Size":
        if not (isinstance(value, np.ndarray) and value.ndim == 1 and dtype == "int64"):
            raise ValueError(f"parameter {name!r}: {PYTHON_TYPES_NAME!r} records a torch.Size, "
                             f"but it is stored as {dtype} of shape "
                             f"{getattr(value, 'shape', None)} (a torch.Size is stored 1-d as "
                             "int64)")
        import torch
        return torch.Size(value.tolist())
    if kind.element == "torch.device":
        import torch
        try:
            if not (isinstance(value, np.ndarray) and value.shape == () and dtype == "string"):
                raise ValueError("not a 0-d string")
            return torch.device(str(value[()]))
        except (ValueError, RuntimeError, TypeError) as e:
            raise ValueError(f"parameter {name!r}: {PYTHON_TYPES_NAME!r} records a torch.device, "
                             f"but it is stored as {dtype} of shape "
                             f"{getattr(value, 'shape', None)} ({e}; a torch.device is stored as "
                             "the 0-d string str(device))") from None
    if kind.element == "numpy.ndarray":
        if not isinstance(value, np.ndarray):
            raise ValueError(f"parameter {name!r}: {PYTHON_TYPES_NAME!r} records a numpy array, "
                             f"but it is stored as {dtype}")
        return value.astype(str) if dtype == "string" else value
    if kind.element in ("bytes", "bytearray", "numpy.bytes_"):
        if not (isinstance(value, np.ndarray) and value.ndim == 1 and dtype == "uint8"):
            raise ValueError(f"parameter {name!r}: {PYTHON_TYPES_NAME!r} records {kind.element}, "
                             f"but it is stored as {dtype} of shape "
                             f"{getattr(value, 'shape', None)} ({kind.element} is stored 1-d as "
                             "uint8)")
        return {"bytes": bytes, "bytearray": bytearray, "numpy.bytes_": np.bytes_}[kind.element](
            value.tobytes())
    ndim = len(kind.containers)
    shape = getattr(value, "shape", None)
    dtypes = _SEQUENCE_DTYPES if kind.containers else _PYTHON_DTYPES
    if not isinstance(value, np.ndarray) or value.ndim != ndim or (
            dtype not in dtypes[kind.element] if kind.element is not None
            else value.size != 0):
        recorded = _kind_text(kind)
        stored = ("0-d" if ndim == 0 else f"{ndim}-d") + (
            "" if kind.element is not None else " and empty") + (
            f" as {' or '.join(dtypes[kind.element])}" if kind.containers and kind.element
            else "")
        raise ValueError(f"parameter {name!r}: {PYTHON_TYPES_NAME!r} records a Python "
                         f"{recorded}, but it is stored as {dtype} of shape {shape} (a "
                         f"{recorded} is stored {stored})")
    return _rebuild(kind, value)


def _kind_text(kind: _Kind) -> str:
    """``kind`` as the record writes it."""
    if kind.separate:
        return kind.containers[0].__name__
    text = kind.element or "empty sequence"
    for container in reversed(kind.containers):
        text = f"{container.__name__}[{text}]"
    return text


def _rebuild(kind: _Kind, array: np.ndarray) -> Any:
    """The value of ``kind`` that ``array`` (of matching dimensions and type) holds."""
    if not kind.containers:
        if kind.element == "numpy.str_":
            return np.str_(array[()])
        if kind.element.startswith("numpy."):
            return array[()]  # a numpy scalar of the array's type
        return {"int": int, "float": float, "complex": complex, "bool": bool,
                "str": str}[kind.element](array[()])
    container, inner = kind.containers[0], _Kind(kind.containers[1:], kind.element)
    if not inner.containers and kind.element in ("int", "float", "complex", "bool", "str"):
        return container(array.tolist())  # Python scalars of the array's values
    if not inner.containers and kind.element == "numpy.str_":
        return container(map(np.str_, array.tolist()))
    return container(_rebuild(inner, array[i]) for i in range(array.shape[0]))


def state_dict(arrays: dict[str, Any], dtypes: dict[str, str], names: list[str],
               ties: dict[str, str]) -> dict[str, Any]:
    """Torch tensors of ``names`` sharing the memory of ``arrays`` (writable, the caller's
    alone); a name in ``ties`` is the tensor of the name it maps to. String parameters (a
    module's text extra state) are str, or nested lists of str, as ``modelzip.save`` took
    them; the values that ``arrays``' _python_types record records (Python and numpy scalars,
    None, lists, tuples, text that looks like a marker) are those values again; the markers
    (_values.py) are the torch dtypes and tuples they stand for."""
    import torch

    out: Any = collections.OrderedDict()
    tuples: dict[str, int] = {}
    sequences: dict[str, tuple[type, list[str]]] = {}
    converted: dict[str, Any] = {}
    recorded = python_types(arrays, dtypes)
    rebuilt = 0  # elements of the lists and tuples rebuilt from arrays
    for name in names:
        source = ties.get(name, name)
        value = arrays[source]
        if name in recorded and recorded[name].separate:
            elements = _element_names(name, value, dtypes, recorded[name])
            keys = value.tolist() if recorded[name].containers[0] is dict else None
            sequences[name] = (recorded[name].containers[0], elements, keys)
            out[name] = None  # keeps the state dict's order; filled in below
            continue
        if name in recorded and (recorded[name].containers
                                 or recorded[name].element == "torch.Size"):
            rebuilt += getattr(value, "size", 0)
            if rebuilt > MAX_PYTHON_ELEMENTS:
                raise ValueError(
                    f"parameter {name!r}: {PYTHON_TYPES_NAME!r} records a Python "
                    f"{_kind_text(recorded[name])} of {value.size} elements, which would take the "
                    f"lists and tuples of the tag to {rebuilt} elements, more than the "
                    f"{MAX_PYTHON_ELEMENTS} the torch loads rebuild (modelzip.load() gives the "
                    "array)")
        if name in recorded:
            out[name] = python_value(name, recorded[name], value, dtypes[source])
            continue
        mark = _torch_mark(value, dtypes[source])
        if mark is not None and name == "_metadata" and mark.startswith(TORCH_METADATA_MARK):
            try:
                out._metadata = json.loads(mark[len(TORCH_METADATA_MARK):])  # as state_dict() has
            except (ValueError, RecursionError):
                raise ValueError(f"parameter {name!r}: malformed module versions {mark[:200]!r} "
                                 "(JSON after the marker)") from None
            continue
        if mark is not None and name == PYTHON_TYPES_NAME and mark.startswith(PYTHON_TYPES_MARK):
            continue  # read above
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
        if dtypes[source] == "string":
            out[name] = parameter_value(name, value, "string")  # a list per name, never shared
            continue
        if source not in converted:
            converted[source] = to_torch(name, value, dtypes[source])
        out[name] = converted[source]
    for name, length in tuples.items():
        out[name] = tuple(out.pop(f"{name}.{i}", None) for i in range(length))
    for name in sorted(sequences, key=len, reverse=True):  # elements' names are longer
        container, elements, keys = sequences[name]
        not_loaded = [element for element in elements if element not in out]
        if not_loaded:
            raise ValueError(f"parameter {name!r}: its element {not_loaded[0]!r} was not loaded "
                             "(load the names of its elements too)")
        values = [out.pop(element) for element in elements]
        if container is dict:
            if len(set(keys)) != len(keys):
                raise ValueError(f"parameter {name!r}: {PYTHON_TYPES_NAME!r} records a dict, but "
                                 "its keys repeat a key")
            out[name] = dict(zip(keys, values))
            continue
        try:
            if container is slice and len(values) != 3:
                raise TypeError("a slice is (start, stop, step)")
            out[name] = container(*values) if container is slice else container(values)
        except TypeError as e:  # a set of unhashable elements
            raise ValueError(f"parameter {name!r}: {PYTHON_TYPES_NAME!r} records a "
                             f"{container.__name__} stored element by element, but its "
                             f"{len(values)} elements do not make one ({e})") from None
    return out


def _torch_mark(value: Any, dtype: str) -> Any:
    """The text of a 0-d string parameter that starts with "torch." (a marker), else None."""
    if dtype != "string" or not isinstance(value, np.ndarray) or value.shape != ():
        return None
    text = value[()]
    return text if isinstance(text, str) and text.startswith("torch.") else None


def _tuple_length(name: str, mark: str) -> int:
    """The length a tuple-of-tensors marker records. Raises ValueError naming the parameter
    when it is not a decimal number of at most MAX_PYTHON_ELEMENTS (a damaged or forged
    marker must not make a load build a tuple of billions of Nones)."""
    count = mark[len(TORCH_TUPLE_MARK):]
    if not count.isdigit() or len(count) > 20:
        raise ValueError(f"parameter {name!r}: malformed tuple marker {mark[:200]!r}")
    if int(count) > MAX_PYTHON_ELEMENTS:
        raise ValueError(f"parameter {name!r}: the tuple marker records {int(count)} elements, "
                         f"more than the {MAX_PYTHON_ELEMENTS} the torch loads rebuild")
    return int(count)
