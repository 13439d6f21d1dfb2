"""Torch state dicts and whole training checkpoints in modelzip archives.

State dicts (the argument order of safetensors' save_file and load_file)::

    import modelzip.torch

    modelzip.torch.save(model.state_dict(), "model.zip", "step-1")
    state = modelzip.torch.load("model.zip")                  # zero-copy CPU tensors
    state = modelzip.torch.load("model.zip", device="cuda")   # staged onto the GPU
    modelzip.torch.load_into(model, "model.zip")              # into the model's own tensors

(docs/torch.md says what each does and costs.) Whole training checkpoints: model, optimizer,
scheduler, counters and the loop's other state in one tag::

    import modelzip.torch

    modelzip.torch.save_checkpoint("run.zip", f"step-{step}", model, optimizer,
                                   scheduler=scheduler, epoch=epoch,
                                   extra={"rng": torch.get_rng_state()})
    ...
    state = modelzip.torch.load_checkpoint("run.zip", None, model, optimizer,  # None: newest
                                           scheduler=scheduler)
    step, epoch = state.iteration, state.epoch   # training resumes bit-exactly
    torch.set_rng_state(state.extra["rng"])      # dropout too (docs/torch.md)

What one tag holds (the layout is specified in schemas/GRAPH.md, section
"torch training checkpoints"):

- ``model.state_dict()`` as the parameters (buffers included);
- the optimizer's per-parameter state (Adam's ``exp_avg``/``exp_avg_sq``,
  SGD's ``momentum_buffer``, the per-parameter ``step``...) as updater state,
  keyed by **parameter name** and torch's state name (``updater.txt`` rows
  ``fc.weight exp_avg ...``), in the tensors' own dtype;
- ``trainingConfig.fb``: the optimizer as the schema's updater when an exact
  equivalent exists (Adam, AdamW, AMSGrad, SGD, SGD with Nesterov momentum,
  Adagrad, Adadelta; torch's coupled ``weight_decay`` as L2 regularization),
  ``iteration_count`` and ``epoch_count``, and in its properties everything
  needed to rebuild ``optimizer.state_dict()`` losslessly for any optimizer
  class: the class, every param group's hyperparameters with its parameters
  by name, non-tensor state values, and the scheduler's ``state_dict()``;
- in those properties too, ``extra=`` (RNG states, a GradScaler's state, the caller's values;
  tensors and numpy arrays inline), given back as ``TrainingState.extra``.

Several optimizers (a GAN's generator and discriminator optimizers) and several schedulers
are given as a mapping name -> optimizer (or a list, named "0", "1"... by position) and
restored from the same structure; their state stays keyed by parameter name (one optimizer
per parameter), their properties are listed by name (OPTIMIZERS, LR_SCHEDULERS).

Importing this module imports torch.
"""
from __future__ import annotations

import base64
import binascii
import inspect
import json
import math
import operator
import weakref
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional

import numpy as np
import torch

from . import Archive, Writer, WriteStats, _torch, _torch_load
from ._arguments import check_count, old_order_with_tag_keyword, warn_old_order
from ._torch_load import apply_plan, load, load_into, plan_load_into, save

__all__ = ["TrainingState", "load", "load_checkpoint", "load_into", "save", "save_checkpoint"]

OPTIMIZER = "torch.optimizer"
"""Property: the optimizer's class, ``module.QualifiedName`` (``torch.optim.adam.Adam``)."""
PARAM_GROUPS = "torch.param_groups"
"""Property: JSON list of the param groups, each with ``params`` as a list of parameter names."""
OPTIMIZER_STATE = "torch.optimizer_state"
"""Property: JSON {parameter name: {state key: value}} of the state values that are not tensors."""
LR_SCHEDULER = "torch.lr_scheduler"
"""Property: JSON of the learning-rate scheduler's ``state_dict()`` (only when one was given)."""
OPTIMIZERS = "torch.optimizers"
"""Property of a checkpoint of several optimizers (a mapping or sequence), in place of
OPTIMIZER, PARAM_GROUPS and OPTIMIZER_STATE: JSON list, in the order given, of objects
{"name", "optimizer", "param_groups", "optimizer_state"} holding those properties' values."""
LR_SCHEDULERS = "torch.lr_schedulers"
"""Property of a checkpoint of several schedulers, in place of LR_SCHEDULER: JSON list, in the
order given, of objects {"name", "state"}."""
UPDATER_EXACT = "torch.updater_exact"
"""Property: "true" when the config's ``updater`` is exactly the torch optimizer, else "false"."""
TORCH_VERSION = "torch.version"
"""Property: ``torch.__version__`` of the process that saved."""
EXTRA = "torch.extra"
"""Property: JSON of save_checkpoint's ``extra`` (only when given), tensors and numpy values
inline (see _encode)."""
RANK_EXTRAS = "torch.rank_extras"
"""Property of modelzip.distributed.save_checkpoint with ``extra=`` (in place of EXTRA): a JSON
array with an element per rank of the save, in rank order: what EXTRA would hold for that rank's
``extra``, or null for a rank that passed none."""
MAX_EXTRA_ARRAY_BYTES = 1 << 20
"""The largest tensor or numpy array save_checkpoint's ``extra`` holds (inline, in base64)."""


class TrainingState(NamedTuple):
    """What load_checkpoint restored besides the model and optimizer."""

    tag: str
    """The tag loaded (the stored spelling)."""
    iteration: int
    """Completed optimizer steps when the checkpoint was saved (``iteration_count``)."""
    epoch: int
    """Completed epochs when the checkpoint was saved (``epoch_count``)."""
    properties: dict[str, str]
    """The training config's properties not written by this module (``properties=`` of the save)."""
    extra: dict[str, Any]
    """``extra=`` of the save (RNG states, a GradScaler's state, the caller's own values), its
    values of the types saved (tensors on the CPU); empty when none was saved. Of a sharded
    save with ``extra=`` (RANK_EXTRAS): that of the loading rank, or of ``extra_rank``."""


# ---- JSON encoding of values that are not top-level state tensors ------------
#
# None, bool, int, str and finite floats are JSON values (floats are written by
# repr, which round-trips); other values are objects with one marker key:
# {"$float": "nan" | "inf" | "-inf"}, {"$tuple": [...]}, {"$dict": [[key, value],
# ...]} (keys of any encodable type, order kept) and {"$tensor": STATE}, a tensor
# stored as updater state STATE of the same parameter (inside containers:
# "<key>.<index>..."). Lists are JSON arrays. Only in EXTRA (inline=True), tensors and numpy
# values are stored in the JSON itself: {"$torch.Tensor": {"dtype": "uint8", "shape": [...],
# "base64": BYTES}} (torch's dtype name, the tensor's bytes in row-major order, on the CPU),
# {"$numpy.ndarray": {"dtype": "<u4", "shape": [...], "base64": BYTES}} and
# {"$numpy.generic": {"dtype": "<f4", "base64": BYTES}} (numpy's dtype.str).
# The other values torch.save keeps, as torch.load gives them: {"$complex": [real, imag]}
# (each a JSON number or a $float), {"$bytes": BASE64}, {"$bytearray": BASE64} (at most
# MAX_EXTRA_ARRAY_BYTES), {"$set": [...]} and {"$frozenset": [...]} (the elements sorted where
# they sort, else in iteration order), {"$slice": [start, stop, step]}, {"$torch.Size": [...]},
# {"$torch.device": "cuda:1"} (str(device)) and {"$torch.dtype": "bfloat16"} (torch's name).


def _encode(value: Any, path: str, tensors: Optional[dict[str, Any]],
            inline: bool = False) -> Any:
    if inline and isinstance(value, (torch.Tensor, np.ndarray, np.generic)):
        return _encode_inline(value, path)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, complex):
        return {"$complex": [_encode(value.real, path, None), _encode(value.imag, path, None)]}
    if isinstance(value, (bytes, bytearray)):
        if len(value) > MAX_EXTRA_ARRAY_BYTES:
            raise ValueError(f"{path}: {len(value)} bytes, over the {MAX_EXTRA_ARRAY_BYTES} bytes "
                             "a checkpoint's values hold inline: store them as a uint8 tensor in "
                             "the model or in a tag of their own (modelzip.torch.save)")
        kind = "$bytearray" if isinstance(value, bytearray) else "$bytes"
        return {kind: base64.b64encode(value).decode("ascii")}
    if isinstance(value, (set, frozenset)):
        try:
            items = sorted(value)
        except TypeError:  # elements that do not sort (several types): iteration order
            items = list(value)
        kind = "$frozenset" if isinstance(value, frozenset) else "$set"
        return {kind: [_encode(v, f"{path}.{i}", tensors, inline) for i, v in enumerate(items)]}
    if isinstance(value, slice):
        return {"$slice": [_encode(v, f"{path}.{i}", tensors, inline) for i, v in
                           enumerate((value.start, value.stop, value.step))]}
    if isinstance(value, torch.Size):
        return {"$torch.Size": [int(d) for d in value]}
    if isinstance(value, torch.device):
        return {"$torch.device": str(value)}
    if isinstance(value, torch.dtype):
        return {"$torch.dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.Tensor):
        if tensors is None:
            raise TypeError(f"{path}: tensors are only supported in per-parameter optimizer state")
        tensors[path] = value
        return {"$tensor": path}
    if isinstance(value, tuple):
        return {"$tuple": [_encode(v, f"{path}.{i}", tensors, inline)
                           for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(v, f"{path}.{i}", tensors, inline) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return {"$dict": [[_encode(k, path, None, inline),
                           _encode(v, f"{path}.{k}", tensors, inline)] for k, v in value.items()]}
    raise TypeError(f"{path}: values of type {type(value).__name__} cannot be stored in a "
                    "checkpoint (supported: tensors, " + ("numpy arrays and scalars, " if inline
                                                         else "")
                    + "None, bool, int, float, complex, str, bytes, bytearray, slice, "
                    "torch.Size, torch.device, torch.dtype, and lists, tuples, dicts, sets and "
                    "frozensets of them)")


def _encode_inline(value: Any, path: str) -> dict[str, Any]:
    """A tensor, numpy array or numpy scalar of EXTRA as its JSON object (see above)."""
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided or value.is_quantized:
            raise TypeError(f"{path}: a {value.layout} " + ("quantized " if value.is_quantized
                                                            else "") + "tensor cannot be stored "
                            "in extra (dense tensors only)")
        plain = value.detach().to("cpu").resolve_conj().resolve_neg().contiguous().reshape(-1)
        size = plain.numel() * plain.element_size()
        data = plain.view(torch.uint8).numpy().tobytes() if size else b""
        marker, fields = "$torch.Tensor", {"dtype": str(value.dtype).replace("torch.", "", 1),
                                           "shape": list(value.shape)}
    else:
        array = np.asarray(value)
        if array.dtype.hasobject or array.dtype.fields is not None:
            raise TypeError(f"{path}: a numpy value of dtype {array.dtype} cannot be stored in "
                            "extra (numbers, bool, str and bytes only)")
        data = np.ascontiguousarray(array).tobytes()
        size = len(data)
        marker, fields = ("$numpy.generic", {"dtype": array.dtype.str}) if isinstance(
            value, np.generic) else ("$numpy.ndarray", {"dtype": array.dtype.str,
                                                        "shape": list(array.shape)})
    if size > MAX_EXTRA_ARRAY_BYTES:
        raise ValueError(f"{path}: {size} bytes, over the {MAX_EXTRA_ARRAY_BYTES} bytes extra "
                         "holds per tensor or array (it is for RNG states and small values): "
                         "store large tensors in the model (a buffer) or in a tag of their own "
                         "(modelzip.torch.save)")
    return {marker: {**fields, "base64": base64.b64encode(data).decode("ascii")}}


def _decode_inline(marker: str, fields: Any) -> Any:
    """The value of an inline object of EXTRA (``marker``: its key); ValueError when malformed."""
    if not isinstance(fields, dict) or not isinstance(fields.get("dtype"), str) or not (
            isinstance(fields.get("base64"), str)):
        raise ValueError(f"{marker}: not an object with \"dtype\" and \"base64\"")
    shape = fields.get("shape", [])
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError(f"{marker}: \"shape\" is not a list of sizes")
    try:
        data = base64.b64decode(fields["base64"], validate=True)
    except binascii.Error as e:
        raise ValueError(f"{marker}: \"base64\" is not base64 ({e})") from None
    count = math.prod(shape)
    if marker == "$torch.Tensor":
        dtype = getattr(torch, fields["dtype"], None)
        if not isinstance(dtype, torch.dtype) or fields["dtype"].startswith(("qint", "quint")):
            raise ValueError(f"{marker}: {fields['dtype']!r} is no dense torch dtype of torch "
                             f"{torch.__version__}")
        itemsize = torch.empty((), dtype=dtype).element_size()
        if len(data) != count * itemsize:
            raise ValueError(f"{marker}: {len(data)} bytes for {count} elements of {itemsize}")
        if not data:
            return torch.empty(shape, dtype=dtype)
        return torch.from_numpy(np.frombuffer(bytearray(data), np.uint8)).view(dtype).reshape(shape)
    try:
        dtype = np.dtype(fields["dtype"])
    except TypeError:
        raise ValueError(f"{marker}: {fields['dtype']!r} names no numpy dtype") from None
    if dtype.hasobject or dtype.fields is not None or len(data) != count * dtype.itemsize:
        raise ValueError(f"{marker}: {len(data)} bytes of {fields['dtype']!r} for shape {shape}")
    array = np.frombuffer(bytearray(data), dtype).reshape(shape)
    if marker == "$numpy.generic":
        if shape:
            raise ValueError(f"{marker}: a numpy scalar has no \"shape\"")
        return array[()]
    return array


def _decode(value: Any, tensors: Mapping[str, Any]) -> Any:
    if isinstance(value, list):
        return [_decode(v, tensors) for v in value]
    if not isinstance(value, dict):
        return value
    (marker, inner), = value.items()
    if marker == "$float":
        return float(inner)
    if marker == "$tuple":
        return tuple(_decode(v, tensors) for v in inner)
    if marker == "$dict":
        return {_decode(k, tensors): _decode(v, tensors) for k, v in inner}
    if marker == "$tensor":
        return tensors[inner]
    if marker in ("$torch.Tensor", "$numpy.ndarray", "$numpy.generic"):
        return _decode_inline(marker, inner)
    if marker == "$complex" and isinstance(inner, list) and len(inner) == 2:
        real, imag = (_decode(v, tensors) for v in inner)
        if type(real) is float and type(imag) is float:
            return complex(real, imag)
    if marker in ("$bytes", "$bytearray") and isinstance(inner, str):
        try:
            data = base64.b64decode(inner, validate=True)
        except binascii.Error as e:
            raise ValueError(f"{marker}: not base64 ({e})") from None
        return data if marker == "$bytes" else bytearray(data)
    if marker in ("$set", "$frozenset") and isinstance(inner, list):
        return (set if marker == "$set" else frozenset)(_decode(v, tensors) for v in inner)
    if marker == "$slice" and isinstance(inner, list) and len(inner) == 3:
        return slice(*(_decode(v, tensors) for v in inner))
    if marker == "$torch.Size" and isinstance(inner, list) and all(
            type(d) is int and d >= 0 for d in inner):
        return torch.Size(inner)
    if marker == "$torch.device" and isinstance(inner, str):
        return torch.device(inner)  # RuntimeError for text that names no device
    if marker == "$torch.dtype" and isinstance(inner, str):
        dtype = getattr(torch, inner, None)
        if isinstance(dtype, torch.dtype):
            return dtype
        raise ValueError(f"$torch.dtype: torch {torch.__version__} has no dtype {inner!r}")
    if marker in _MARKERS:
        raise ValueError(f"{marker}: malformed value {json.dumps(inner)[:200]}")
    raise ValueError(f"unknown marker {marker!r} in a torch checkpoint property")


_MARKERS = ("$complex", "$bytes", "$bytearray", "$set", "$frozenset", "$slice", "$torch.Size",
            "$torch.device", "$torch.dtype")
"""The markers of the values _decode checks the form of after its own cases."""


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


# ---- Parameter names ----------------------------------------------------------


def _optimizer_param_names(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> list[list[str]]:
    """Per param group of ``optimizer``, the names of its parameters in ``model``."""
    by_id = {id(p): name for name, p in model.named_parameters()}
    groups = []
    for g, group in enumerate(optimizer.param_groups):
        names = []
        for p in group["params"]:
            if id(p) not in by_id:
                raise ValueError(f"param group {g} of the optimizer holds a tensor of shape "
                                 f"{tuple(p.shape)} that is not a parameter of the model")
            names.append(by_id[id(p)])
        groups.append(names)
    return groups


# ---- The schema's updater -----------------------------------------------------


def _hyperparameters(group: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in group.items() if k != "params"}


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _standard_updater(optimizer: torch.optim.Optimizer, others: Iterable[torch.optim.Optimizer] = ()
                      ) -> tuple[dict, list, bool, bool]:
    """(updater dict, regularization list, minimize, exact) for the training config.

    exact: the updater, regularization and minimize describe the optimizer's
    update rule exactly, for every param group, and that of each of ``others`` (the further
    optimizers of a checkpoint of several). Otherwise the updater is Sgd
    with the first group's learning rate (NoOp without one) and no
    regularization: only the torch.* properties describe the optimizer.
    """
    updater, regularization, minimize, exact = _equivalent_updater(optimizer)
    exact = exact and all(_equivalent_updater(other) == (updater, regularization, minimize, True)
                          for other in others)
    if exact:
        return updater, regularization, minimize, True
    lr = _number(optimizer.param_groups[0].get("lr"))
    fallback = {"type": "NoOp"} if lr is None or lr < 0 else {"type": "Sgd", "learning_rate": lr}
    return fallback, [], True, False


def _equivalent_updater(optimizer: torch.optim.Optimizer) -> tuple[dict, list, bool, bool]:
    groups = [_hyperparameters(g) for g in optimizer.param_groups]
    g = groups[0]
    exact = all(other == g for other in groups[1:])
    lr = _number(g.get("lr"))
    if lr is None or lr < 0:
        return {"type": "NoOp"}, [], True, False
    weight_decay = _number(g.get("weight_decay", 0.0)) or 0.0
    minimize = not g.get("maximize", False)
    l2 = [{"type": "l2", "coefficient": weight_decay}] if weight_decay else []

    def adam(kind: str) -> dict:
        beta1, beta2 = g["betas"]
        return {"type": kind, "learning_rate": lr, "beta1": float(beta1), "beta2": float(beta2),
                "epsilon": float(g["eps"])}

    optim = torch.optim
    if type(optimizer) is optim.AdamW:  # AMSGrad with decoupled decay has no schema equivalent
        return (adam("AdamW") | {"weight_decay": weight_decay}, [], minimize,
                exact and not g.get("amsgrad", False))
    if type(optimizer) is optim.Adam:
        return adam("AmsGrad" if g.get("amsgrad", False) else "Adam"), l2, minimize, exact
    if type(optimizer) is optim.SGD:
        momentum = _number(g.get("momentum", 0.0)) or 0.0
        if momentum == 0:
            return {"type": "Sgd", "learning_rate": lr}, l2, minimize, exact
        nesterov_exact = g.get("nesterov", False) and not g.get("dampening", 0.0)
        return ({"type": "Nesterovs", "learning_rate": lr, "momentum": momentum}, l2, minimize,
                exact and bool(nesterov_exact))
    if type(optimizer) is optim.Adagrad:
        plain = not g.get("lr_decay", 0.0) and not g.get("initial_accumulator_value", 0.0)
        return ({"type": "AdaGrad", "learning_rate": lr, "epsilon": float(g["eps"])}, l2, minimize,
                exact and plain)
    if type(optimizer) is optim.Adadelta:
        return ({"type": "AdaDelta", "rho": float(g["rho"]), "epsilon": float(g["eps"])}, l2,
                minimize, exact and lr == 1.0)
    return {"type": "Sgd", "learning_rate": lr}, [], minimize, False


def _class_path(obj: Any) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _completed_steps(state: Mapping[int, Mapping[str, Any]]) -> int:
    """The largest per-parameter ``step`` of an optimizer state (0 if none)."""
    steps = [0]
    for values in state.values():
        step = values.get("step") if isinstance(values, Mapping) else None
        if isinstance(step, torch.Tensor) and step.numel() == 1:
            steps.append(int(step.item()))
        elif isinstance(step, (int, float)) and not isinstance(step, bool):
            steps.append(int(step))
    return max(steps)


# ---- Save and load ------------------------------------------------------------


def save_checkpoint(path: Any, tag: str, model: torch.nn.Module, optimizer: Any,
                    *, scheduler: Any = None, epoch: int = 0, iteration: Optional[int] = None,
                    properties: Optional[Mapping[str, str]] = None,
                    extra: Optional[Mapping[str, Any]] = None,
                    metadata: Any = None, tag_metadata: Optional[Mapping[str, str]] = None,
                    compress: bool = False, dedup: bool = True,
                    durable: bool = True, append: bool = True, replace: bool = False,
                    keep_last: Optional[int] = None,
                    progress: Optional[Callable[[int, int], Optional[bool]]] = None,
                    blocking: bool = True) -> Any:
    """Adds tag ``tag`` holding a whole training checkpoint to the archive at ``path``.

    model: its ``state_dict()`` becomes the parameters (several models, such as a GAN's
      generator and discriminator: one ``torch.nn.ModuleDict`` of them).
    optimizer: an optimizer over parameters of ``model`` (any class); its
      state is stored by parameter name, its hyperparameters in the training
      config (see the module documentation). Several: a mapping name -> optimizer, or a list
      (named "0", "1"... by position), restored from the same names; each parameter in one
      optimizer at most (ValueError otherwise).
    scheduler: a learning-rate scheduler (anything with ``state_dict()``
      holding no tensors), restored by load_checkpoint(scheduler=...); several: a mapping
      or list, as for ``optimizer``. Methods of
      schedulers in that state (torch 1.13's OneCycleLR and CyclicLR keep their
      annealing and scale functions there) are not stored: the loading scheduler
      keeps its own, which its arguments chose.
    epoch, iteration: completed epochs and optimizer steps
      (``epoch_count``, ``iteration_count``); iteration defaults to the
      largest per-parameter ``step`` in the optimizer state (0 if none).
    properties: extra str -> str pairs for the training config (data loader
      position, seeds...); keys starting with "torch." are reserved.
    extra: the rest of a training loop's state, given back by load_checkpoint as
      ``TrainingState.extra``: a mapping of str to values of these kinds, nested: None, bool,
      int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset, slice,
      torch.Size, torch.device, torch.dtype, torch tensors (dense; given back on the CPU) and
      numpy arrays and scalars, each tensor, array or bytes at most MAX_EXTRA_ARRAY_BYTES
      (1 MiB). For the
      RNG states (``torch.get_rng_state()``, ``torch.cuda.get_rng_state_all()``,
      ``numpy.random.get_state()``, ``random.getstate()``), a GradScaler's ``state_dict()``,
      a best metric. TypeError for other types, ValueError for a larger array, before
      anything is written.
    metadata, tag_metadata, compress, dedup, durable, append, replace, keep_last, progress: as
      for modelzip.save (``replace=True`` overwrites a tag such as "latest";
      ``keep_last=N`` drops the oldest tags beyond N in the same commit).
    Tensors are read while the commit runs, without copies. Returns the WriteStats.
    blocking=False: returns once the tensors are copied (modelzip.save_async)
      and writes in the background; returns a modelzip.SaveFuture of the
      WriteStats (``replace`` and ``keep_last`` apply in its commit). No
      ``progress`` then.
    """
    if not blocking and progress is not None:
        raise ValueError("progress is not available with blocking=False")
    for argument, value in (("keep_last", keep_last), ("epoch", epoch), ("iteration", iteration)):
        check_count("modelzip.torch.save_checkpoint", argument, value, optional=argument != "epoch")
        if argument != "keep_last" and value is not None and value.__index__() >= 2**63:
            raise ValueError(f"modelzip.torch.save_checkpoint() argument {argument!r} is out of "
                             f"range (a signed 64-bit count): {value.__index__()}")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, not {type(model).__name__}")
    function = "modelzip.torch.save_checkpoint"
    several = _named_objects(function, "optimizer", optimizer, _is_optimizer, _AN_OPTIMIZER,
                             optional=False)
    _named_objects(function, "scheduler", scheduler, _has("state_dict"),
                   _A_SCHEDULER.format("state_dict()"), hint=" (more state: extra=)")
    extra_json = None if extra is None else _extra_json(extra)
    saved = []  # (name, optimizer, param groups by name, non-tensor state) of each optimizer
    updater: dict[tuple[str, str], Any] = {}
    held: dict[str, str] = {}  # parameter name -> the optimizer holding it
    steps = 0
    for name, each in several or [("", optimizer)]:
        names = _optimizer_param_names(model, each)
        for param in (n for group in names for n in group):
            if held.setdefault(param, name) != name:
                raise ValueError(f"parameter {param!r} is held by optimizers {held[param]!r} and "
                                 f"{name!r}: a checkpoint stores one optimizer state per parameter")
        packed = each.state_dict()
        by_index = {i: n for group, group_names in zip(packed["param_groups"], names)
                    for i, n in zip(group["params"], group_names)}
        own_updater, other_state = _split_state(packed["state"], by_index)
        updater.update(own_updater)
        saved.append((name, each, _named_groups(packed["param_groups"], names), other_state))
        steps = max(steps, _completed_steps(packed["state"]))
    if several is None:
        training = _training_config(optimizer, saved[0][2], saved[0][3],
                                    steps if iteration is None else iteration,
                                    scheduler=scheduler, epoch=epoch, properties=properties)
    else:
        training = _config(_standard_updater(saved[0][1], [each for _, each, _, _ in saved[1:]]),
                           {OPTIMIZERS: _dumps([{"name": name, "optimizer": _class_path(each),
                                                 "param_groups": groups, "optimizer_state": other}
                                                for name, each, groups, other in saved])},
                           steps if iteration is None else iteration, scheduler=scheduler,
                           epoch=epoch, properties=properties)
    if extra_json is not None:
        training["properties"][EXTRA] = extra_json
    if not blocking:
        from ._async import save_async
        return save_async(path, tag, _without_versions(model), updater=updater,
                          training=training,
                          compress=compress, metadata=metadata, tag_metadata=tag_metadata,
                          dedup=dedup, durable=durable, append=append, replace=replace,
                          keep_last=keep_last)
    from . import _metadata_patch
    patch = None if metadata is None else _metadata_patch(metadata, {}, False)  # before reads
    writer = Writer(path, dedup=dedup, durable=durable, append=append, progress=progress)
    try:
        writer.add_tag(tag, _without_versions(model), updater=updater, training=training,
                       compress=compress, replace=replace, _overlap_fetch=True,
                       tag_metadata=tag_metadata)
        if keep_last is not None:
            writer.keep_last(keep_last)
        if patch is not None:
            writer.update_metadata(patch[0], clear=patch[1])
        return writer.commit()
    finally:
        writer.close()


def _without_versions(model: torch.nn.Module) -> dict[str, Any]:
    """``model.state_dict()`` without its module versions (``_metadata``): a checkpoint tag
    holds what modelzip.distributed.save_checkpoint writes of the same model, byte for byte,
    and load_checkpoint copies into the model's own tensors, where the versions play no
    part (modelzip.torch.save keeps them, for load_state_dict). A quantize_dynamic model's
    state dict (torch dtypes, tuples of tensors) keeps them: its modules need them to read it
    back through load_state_dict."""
    state = model.state_dict()
    return state if _keeps_versions(state) else dict(state)


def _keeps_versions(state: Mapping[str, Any]) -> bool:
    """Whether a checkpoint tag keeps the module versions of the state dict ``state`` (see
    _without_versions; modelzip.distributed.save_checkpoint asks too): it holds torch dtypes or
    tuples of tensors."""
    return any(isinstance(v, torch.dtype) or (isinstance(v, tuple) and any(
        isinstance(x, torch.Tensor) for x in v)) for v in state.values())


def _split_state(state: Mapping[int, Mapping[str, Any]],
                 by_index: Mapping[int, str]) -> tuple[dict[tuple[str, str], Any], dict[str, Any]]:
    """The optimizer state of the parameters ``by_index`` names (packed index ->
    name; others are skipped) as updater arrays {(name, state): tensor} and
    the JSON-encoded rest {name: {key: value}} (tensors nested in containers
    become updater arrays named by their path, see _encode). A parameter's
    state whose keys a load would not give back in their order (the tensors,
    then the rest) has every key in the rest, its tensors as {"$tensor": key},
    so that the loaded state dict is the saved one key for key, as torch.load
    gives it."""
    updater: dict[tuple[str, str], Any] = {}
    other_state: dict[str, Any] = {}
    for index, values in state.items():
        if index not in by_index:
            continue
        name = by_index[index]
        rest = {}
        for key, value in values.items():
            if not isinstance(key, str):
                raise TypeError(f"optimizer state of {name!r}: keys must be str, not "
                                f"{type(key).__name__}")
            if isinstance(value, torch.Tensor):
                updater[(name, key)] = value
            else:
                nested: dict[str, Any] = {}
                rest[key] = _encode(value, key, nested)
                for state_name, tensor in nested.items():
                    updater[(name, state_name)] = tensor
        tensors_first = [k for k, v in values.items() if isinstance(v, torch.Tensor)] + list(rest)
        if rest and tensors_first != list(values):
            rest = {key: {"$tensor": key} if isinstance(value, torch.Tensor) else rest[key]
                    for key, value in values.items()}
        if rest:
            other_state[name] = rest
    return updater, other_state


def _named_groups(packed_groups: list, names: list[list[str]]) -> list[dict[str, Any]]:
    """The PARAM_GROUPS value: each group's encoded hyperparameters with its parameter names."""
    groups = []
    for g, (group, group_names) in enumerate(zip(packed_groups, names)):
        encoded = {k: _encode(v, f"param group {g} {k!r}", None) for k, v in group.items()
                   if k != "params"}
        groups.append({"params": list(group_names), **encoded})
    return groups


def _training_config(optimizer: torch.optim.Optimizer, groups: list, other_state: Mapping,
                     iteration: int, *, scheduler: Any, epoch: int,
                     properties: Optional[Mapping[str, str]]) -> dict[str, Any]:
    """The training config dict (Writer.add_tag(training=...)) of a checkpoint of
    ``optimizer``, whose param groups and non-tensor state are ``groups`` and
    ``other_state`` (by parameter name); ``scheduler``: None, one, or a mapping or sequence
    of schedulers."""
    return _config(_standard_updater(optimizer),
                   {OPTIMIZER: _class_path(optimizer), PARAM_GROUPS: _dumps(groups),
                    OPTIMIZER_STATE: _dumps(other_state)},
                   iteration, scheduler=scheduler, epoch=epoch, properties=properties)


def _config(standard: tuple[dict, list, bool, bool], optimizer_properties: Mapping[str, str],
            iteration: int, *, scheduler: Any, epoch: int,
            properties: Optional[Mapping[str, str]]) -> dict[str, Any]:
    """The training config dict of a checkpoint whose optimizers are described by
    ``standard`` (_standard_updater) and ``optimizer_properties``."""
    own = dict(properties or {})
    for key, value in own.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError("properties must map str to str")
        if key.startswith("torch."):
            raise ValueError(f"property {key!r}: keys starting with 'torch.' are reserved")
    updater_config, regularization, minimize, exact = standard
    own.update(optimizer_properties)
    own.update({UPDATER_EXACT: "true" if exact else "false", TORCH_VERSION: str(torch.__version__)})
    several = _named_objects("save_checkpoint", "scheduler", scheduler, _has("state_dict"),
                             _A_SCHEDULER.format("state_dict()"))
    if several is not None:
        own[LR_SCHEDULERS] = _dumps([{"name": name, "state": _scheduler_json(each)}
                                     for name, each in several])
    elif scheduler is not None:
        own[LR_SCHEDULER] = _dumps(_scheduler_json(scheduler))
    return {
        "updater": updater_config,
        "regularization": regularization,
        "minimize": minimize,
        "iteration_count": operator.index(iteration),
        "epoch_count": operator.index(epoch),
        "properties": own,
    }


def _extra_json(extra: Any, function: str = "modelzip.torch.save_checkpoint") -> str:
    """The EXTRA property of ``function``'s ``extra``."""
    if not isinstance(extra, Mapping):
        raise TypeError(f"{function}() argument 'extra' must be a mapping of str to values, not "
                        f"{type(extra).__name__}")
    for key in extra:
        if not isinstance(key, str):
            raise TypeError(f"{function}() argument 'extra': keys must be str, not "
                            f"{type(key).__name__}")
    return _dumps(_encode(dict(extra), "extra", None, inline=True))


def _scheduler_json(scheduler: Any) -> Any:
    """``scheduler.state_dict()`` as the JSON value stored (see _encode)."""
    return _encode(_without_scheduler_methods(scheduler.state_dict(), scheduler), "scheduler", None)


_AN_OPTIMIZER = "a torch.optim.Optimizer"
_A_SCHEDULER = "a learning-rate scheduler (an object with {})"


def _is_optimizer(value: Any) -> bool:
    return isinstance(value, torch.optim.Optimizer)


def _has(method: str) -> Callable[[Any], bool]:
    """Whether a value has a callable ``method`` (a scheduler's state_dict, load_state_dict)."""
    return lambda value: callable(getattr(value, method, None))


def _named_objects(function: str, argument: str, value: Any, fits: Callable[[Any], bool],
                   kind: str, *, optional: bool = True,
                   hint: str = "") -> Optional[list[tuple[str, Any]]]:
    """None for one object that ``fits`` (or None when ``optional``); [(name, object)] for a
    mapping name -> object, or a list or tuple of objects (named "0", "1"... by position),
    every one of which fits. Raises TypeError naming ``function``'s ``argument`` otherwise
    (``kind``: what one object must be; ``hint`` ends the message), ValueError for an empty
    collection or a mapping with names that are not str or are empty."""
    if (value is None and optional) or fits(value):
        return None
    if isinstance(value, Mapping):
        pairs = [(key, each, f"[{key!r}]") for key, each in value.items()]
    elif isinstance(value, (list, tuple)):
        pairs = [(str(i), each, f"[{i}]") for i, each in enumerate(value)]
    else:
        pairs = []
    if not any(fits(each) for _, each, _ in pairs):
        if not pairs and isinstance(value, (Mapping, list, tuple)):
            raise ValueError(f"{function}() argument {argument!r} is an empty "
                             f"{type(value).__name__}" + (" (None: none)" if optional else ""))
        raise TypeError(f"{function}() argument {argument!r} must be {kind}"
                        + (", None" if optional else "")
                        + f", a mapping of names to them or a list of them, not "
                        f"{type(value).__name__}{hint}")
    for name, each, where in pairs:
        if not isinstance(name, str) or not name:
            raise ValueError(f"{function}() argument {argument!r}: the names of a mapping must "
                             f"be non-empty str, not {name!r}")
        if not fits(each):
            raise TypeError(f"{function}() argument {argument!r}{where} must be {kind}, not "
                            f"{type(each).__name__}")
    return [(name, each) for name, each, _ in pairs]


def _scheduler_method(value: Any, scheduler: Any) -> bool:
    """Whether ``value`` is a method (or a weakref.WeakMethod of one) bound to ``scheduler`` or
    to another learning-rate scheduler, which the constructor's arguments chose: torch 1.13's
    state_dict() holds such methods (OneCycleLR's ``anneal_func``, CyclicLR's
    ``_scale_fn_ref``; later releases hold the choice by name instead)."""
    if isinstance(value, weakref.WeakMethod):
        value = value()
    if not inspect.ismethod(value):
        return False
    kinds = tuple(getattr(torch.optim.lr_scheduler, name) for name in
                  ("LRScheduler", "_LRScheduler", "ReduceLROnPlateau")
                  if hasattr(torch.optim.lr_scheduler, name))
    return value.__self__ is scheduler or isinstance(value.__self__, kinds)


def _without_scheduler_methods(state: Any, scheduler: Any) -> Any:
    """A scheduler's ``state_dict()`` without the scheduler methods in it (and in the state
    dicts of the schedulers it holds, SequentialLR's ``_schedulers``): they are not state, and
    the scheduler that loads the state keeps its own."""
    if isinstance(state, Mapping):
        return {key: _without_scheduler_methods(value, scheduler) for key, value in state.items()
                if not _scheduler_method(value, scheduler)}
    if isinstance(state, list):
        return [_without_scheduler_methods(value, scheduler) for value in state]
    return state


def _updater_tensors(archive: Archive, tag: str) -> dict[str, dict[str, Any]]:
    """Every updater state of ``tag`` as writable torch tensors of their own (views of a private
    copy-on-write mapping where stored): variable -> state -> tensor."""
    out: dict[str, dict[str, Any]] = {}
    for info in archive.updater_states(tag):
        array = archive.updater_state(info.name, info.state, tag, writable=True)
        out.setdefault(info.name, {})[info.state] = _torch.to_torch(
            f"{info.name}/{info.state}", array, info.dtype)
    return out


@old_order_with_tag_keyword(lambda value: isinstance(value, torch.nn.Module),
                            "modelzip.torch.load_checkpoint(path, model, optimizer, tag=)",
                            "load_checkpoint(path, tag, model, optimizer)")
def load_checkpoint(path: Any, tag: Optional[str] = None, model: Optional[torch.nn.Module] = None,
                    optimizer: Any = None,
                    *, scheduler: Any = None, strict: bool = True,
                    extra_rank: Optional[int] = None) -> TrainingState:
    """Restores ``model``, ``optimizer`` and ``scheduler`` from tag ``tag`` (None: the newest).

    ``path, tag`` come first, as for save_checkpoint and modelzip.save/load. The order of
    earlier releases, ``(path, model, optimizer, tag)`` with the tag positional or a keyword
    (``tag="t"``), still works with a DeprecationWarning.

    The model's tensors get the saved ones as load_into() copies them (``strict`` as for
    ``load_state_dict``). The optimizer must be of the class that was saved, over the same
    parameters by name, grouped as they were (order inside a group may differ); its state and
    hyperparameters become the saved ones (state tensors moved to their parameters' devices and
    floating types, as ``optimizer.load_state_dict`` does, through the staging pipeline).
    A scheduler's state dicts come back of the dict types the scheduler holds (MultiStepLR's
    milestones: a collections.Counter).
    Optimizers and schedulers saved as a mapping or list are given in the same structure: a
    mapping with the saved names (any order), a list of the saved count.
    Everything is checked before anything is changed:
    raises ValueError (or RuntimeError for model keys and shapes, as ``load_state_dict``) when
    the checkpoint does not fit, modelzip.NotFoundError for a missing tag; the model,
    optimizer and scheduler are then as they were. Returns the counters and the extra
    properties that were saved.
    extra_rank: for a tag of modelzip.distributed.save_checkpoint whose ranks each saved an
    ``extra`` (per-rank RNG states), the rank whose ``extra`` to return; None: the tag must hold
    the extra of one rank, or ValueError (this process is not one of several ranks).
    """
    if isinstance(tag, torch.nn.Module) or isinstance(model, torch.optim.Optimizer):
        tag, model, optimizer = optimizer, tag, model
        _warn_old_order("modelzip.torch.load_checkpoint(path, model, optimizer, tag)",
                        "load_checkpoint(path, tag, model, optimizer)")
    if tag is not None and not isinstance(tag, str):
        raise TypeError("modelzip.torch.load_checkpoint() argument 'tag' must be str or None, "
                        f"not {type(tag).__name__}")
    function = "modelzip.torch.load_checkpoint"
    _named_objects(function, "scheduler", scheduler, _has("load_state_dict"),
                   _A_SCHEDULER.format("load_state_dict()"))
    if model is not None and not isinstance(model, torch.nn.Module):
        raise TypeError(f"{function}() argument 'model' must be a torch.nn.Module or None, not "
                        f"{type(model).__name__}")
    several = _named_objects(function, "optimizer", optimizer, _is_optimizer, _AN_OPTIMIZER)
    with Archive(path) as archive:
        tag, config, properties = _checkpoint_tag(archive, tag,
                                                  optimizer is not None or scheduler is not None)
        if optimizer is not None and model is None:
            raise ValueError("load_checkpoint needs the model to match optimizer parameters by name")
        # Everything is read and checked before the first change.
        scheduler_states = _scheduler_states(archive.name, tag, properties, scheduler)
        plan = plan_load_into(archive, tag, model, strict) if model is not None else None
        where = f"{archive.name}: tag {tag!r}"
        if several is not None:
            optimizer_states = _several_optimizer_states(
                where, properties, several, lambda each: _optimizer_param_names(model, each),
                _updater_tensors(archive, tag))
        elif optimizer is not None:
            optimizer_states = [(optimizer, _optimizer_state(
                where, properties, optimizer, lambda: _optimizer_param_names(model, optimizer),
                lambda names: _updater_tensors(archive, tag)))]
        else:
            optimizer_states = []
        training_state = _training_state(tag, config, where, lambda: (0, 1), extra_rank)
    for each, state in optimizer_states:  # new tensors on the parameters' devices: no change yet
        _torch_load.to_param_devices(state, each)
    if plan is not None:
        apply_plan(plan)
    for each, state in optimizer_states:
        each.load_state_dict(state)
    for each, state in scheduler_states:
        each.load_state_dict(state)
    return training_state


def _warn_old_order(old: str, new: str) -> None:
    """The DeprecationWarning of a checkpoint load (decorated with old_order_with_tag_keyword)
    called in the argument order of earlier releases (tag last), attributed to its caller."""
    warn_old_order(old, new, stacklevel=5)


def _checkpoint_tag(archive: Archive, tag: Optional[str],
                    optimizer: bool) -> tuple[str, Optional[dict], dict[str, str]]:
    """(stored spelling of ``tag`` (None: the newest), its training config, the
    config's properties). optimizer: the caller restores an optimizer or a
    scheduler (ValueError when the tag holds no torch optimizer state)."""
    tag = archive.newest_tag if tag is None else tag
    stored = archive.find_tag(tag)
    if stored is None:
        archive.params(tag)  # raises NotFoundError with the archive's message and .tag
    config = archive.training_config(stored)
    properties = dict(config["properties"]) if config else {}
    if optimizer and PARAM_GROUPS not in properties and OPTIMIZERS not in properties:
        raise ValueError(f"{archive.name}: tag {stored!r} holds no torch optimizer state "
                         "(it was not saved by modelzip.torch.save_checkpoint)")
    return stored, config, properties


def _scheduler_states(archive_name: str, tag: str, properties: Mapping[str, str],
                      scheduler: Any) -> list[tuple[Any, dict]]:
    """(scheduler, the saved state for its ``load_state_dict``) for ``scheduler``: None (no
    pairs), one scheduler, or a mapping or sequence of them (as saved: the same names).
    ValueError, naming archive and tag, when the tag holds no scheduler state or not that of
    the schedulers given."""
    if scheduler is None:
        return []
    where = f"{archive_name}: tag {tag!r}"
    several = _named_objects("load_checkpoint", "scheduler", scheduler, _has("load_state_dict"),
                             _A_SCHEDULER.format("load_state_dict()"))
    if several is None:
        if LR_SCHEDULERS in properties:
            names = list(_named_entries(where, properties, LR_SCHEDULERS, ("state",)))
            raise ValueError(f"{where} holds the states of learning-rate schedulers named "
                             f"{names} (saved from a mapping or list), not of one scheduler: "
                             "pass scheduler= a mapping of those names to schedulers (a list "
                             "for names '0', '1'...)")
        if LR_SCHEDULER not in properties:
            raise ValueError(f"{where} holds no learning-rate scheduler state")
        return [(scheduler, _with_scheduler_types(_decode(json.loads(properties[LR_SCHEDULER]),
                                                          {}), scheduler))]
    if LR_SCHEDULERS not in properties:
        raise ValueError(f"{where} holds " + ("the state of one learning-rate scheduler, not "
                                              "of a mapping or list of them: pass scheduler= "
                                              "that one scheduler" if LR_SCHEDULER in properties
                                              else "no learning-rate scheduler state"))
    saved = {name: entry["state"] for name, entry in
             _named_entries(where, properties, LR_SCHEDULERS, ("state",)).items()}
    _same_names(f"{where}: learning-rate schedulers", list(saved), [n for n, _ in several])
    return [(each, _with_scheduler_types(_decode(saved[name], {}), each))
            for name, each in several]


def _with_scheduler_types(state: Any, scheduler: Any) -> Any:
    """A decoded scheduler state whose dicts are of the types ``scheduler`` holds under the same
    keys (MultiStepLR's ``milestones`` is a collections.Counter, which the JSON stores as a
    dict), also in the states of the schedulers it holds (SequentialLR's ``_schedulers``)."""
    live = getattr(scheduler, "__dict__", None)
    if not isinstance(state, dict) or not isinstance(live, dict):
        return state
    out = {}
    for key, value in state.items():
        current = live.get(key)
        if (key == "_schedulers" and isinstance(value, list) and isinstance(current, list)
                and len(value) == len(current)):
            value = [_with_scheduler_types(v, each) for v, each in zip(value, current)]
        elif type(value) is dict and isinstance(current, dict) and type(current) is not dict:
            typed = current.copy()  # keeps what the type holds besides items (default_factory)
            typed.clear()
            typed.update(value)
            value = typed
        out[key] = value
    return out


_OPTIMIZER_FIELDS = ("optimizer", "param_groups", "optimizer_state")


def _named_entries(where: str, properties: Mapping[str, str], key: str,
                   fields: tuple[str, ...]) -> dict[str, dict]:
    """Property ``key`` (OPTIMIZERS, LR_SCHEDULERS): {name: entry} of its JSON list of
    objects with a "name" and ``fields``; ValueError, starting with ``where``, when it is not
    such a list with distinct names."""
    try:
        entries = json.loads(properties[key])
    except ValueError:
        entries = None
    out: dict[str, dict] = {}
    for entry in entries if isinstance(entries, list) else [None]:
        if (not isinstance(entry, dict) or not isinstance(entry.get("name"), str)
                or entry["name"] in out or not all(field in entry for field in fields)):
            raise ValueError(f"{where}: property {key!r} is malformed (a JSON list of objects "
                             f"with a distinct \"name\" and {', '.join(map(repr, fields))})")
        out[entry["name"]] = entry
    return out


def _same_names(what: str, saved: list[str], given: list[str]) -> None:
    """ValueError (``what``...) unless ``given`` names what was ``saved``, in any order."""
    if sorted(saved) != sorted(given):
        missing = [n for n in saved if n not in given]
        extra = [n for n in given if n not in saved]
        raise ValueError(f"{what}: the checkpoint holds {len(saved)} {saved}, given "
                         f"{len(given)} {given} (not given: {missing}; not in the checkpoint: "
                         f"{extra})")


def _several_optimizer_states(where: str, properties: Mapping[str, str],
                              several: list[tuple[str, torch.optim.Optimizer]],
                              names_of: Callable[[torch.optim.Optimizer], list[list[str]]],
                              tensors: Mapping[str, Mapping[str, Any]]) -> list[tuple[Any, dict]]:
    """(optimizer, the ``state_dict()`` to load) of each of ``several`` (name, optimizer),
    checked against the checkpoint of several optimizers (OPTIMIZERS) as _optimizer_state
    checks one: ``names_of(optimizer)`` names its parameters per group; ``tensors``: every
    updater array of the tag (name -> state -> tensor). ValueError, starting with ``where``,
    when the checkpoint does not fit."""
    if OPTIMIZERS not in properties:
        raise ValueError(f"{where} holds the state of one optimizer (a "
                         f"{properties.get(OPTIMIZER)}), not of a mapping or list of them: pass "
                         "optimizer= that one optimizer")
    saved = _named_entries(where, properties, OPTIMIZERS, _OPTIMIZER_FIELDS)
    _same_names(f"{where}: optimizers", list(saved), [name for name, _ in several])
    out = []
    held: set[str] = set()
    for name, each in several:
        entry = saved[name]
        own = {OPTIMIZER: entry["optimizer"], PARAM_GROUPS: _dumps(entry["param_groups"]),
               OPTIMIZER_STATE: _dumps(entry["optimizer_state"])}
        names = names_of(each)
        wanted = {n for group in names for n in group}
        held |= wanted
        out.append((each, _optimizer_state(
            f"{where}, optimizer {name!r}", own, each, lambda names=names: names,
            lambda _, wanted=wanted: {n: t for n, t in tensors.items() if n in wanted})))
    unknown = sorted(set(tensors) - held)
    if unknown:
        raise ValueError(f"{where} holds optimizer state of parameters none of the optimizers "
                         f"has: {unknown}")
    return out


def _training_state(tag: str, config: Optional[Mapping[str, Any]], where: Optional[str] = None,
                    ranks: Callable[[], tuple[int, int]] = lambda: (0, 1),
                    extra_rank: Optional[int] = None) -> TrainingState:
    """The TrainingState of tag ``tag`` with training config ``config``; ValueError, starting
    with ``where`` (default: the tag), when its EXTRA or RANK_EXTRAS property is malformed. Of
    RANK_EXTRAS, the extra of rank ``extra_rank``, or (None) of the loading rank, when the
    loaders' world size is that of the save (``ranks()``: (rank, world size) of the loader);
    ValueError otherwise, or for an ``extra_rank`` the save did not have."""
    properties = config["properties"] if config else {}
    own = {k: v for k, v in properties.items() if not k.startswith("torch.")}
    where = where or f"tag {tag!r}"
    extra: dict[str, Any] = {}
    if extra_rank is not None and (isinstance(extra_rank, bool) or not isinstance(extra_rank, int)):
        raise TypeError("load_checkpoint() argument 'extra_rank' must be an int or None, not "
                        f"{type(extra_rank).__name__}")
    key = RANK_EXTRAS if RANK_EXTRAS in properties else EXTRA
    if key in properties:
        try:
            value = json.loads(properties[key])
            if key == RANK_EXTRAS:
                if not isinstance(value, list) or not value:
                    raise ValueError("not a non-empty array")
                if extra_rank is None:
                    rank, world = ranks()
                    if world != len(value):
                        raise _WorldSizeChanged(
                            f"{where} holds the extra= of each of the {len(value)} ranks that "
                            f"saved it (property {RANK_EXTRAS!r}), and this load runs on "
                            f"{world} rank{'s' if world != 1 else ''}: per-rank state (RNG "
                            "states) has no rank to go to; resume on "
                            f"{len(value)} ranks, or pass extra_rank= the saved rank whose extra "
                            "this rank is to get")
                    extra_rank = rank
                elif not 0 <= extra_rank < len(value):
                    raise _WorldSizeChanged(f"{where}: extra_rank={extra_rank}, but the tag holds "
                                            f"the extra= of ranks 0 to {len(value) - 1}")
                value = value[extra_rank] if value[extra_rank] is not None else {"$dict": []}
            extra = _decode(value, {})
            if not isinstance(extra, dict):
                raise ValueError("not an object")
        except _WorldSizeChanged as e:
            raise ValueError(str(e)) from None
        except (ValueError, TypeError, KeyError, RuntimeError, RecursionError,
                OverflowError) as e:
            raise ValueError(f"{where}: property {key!r} is malformed ({e})") from None
    return TrainingState(tag, int(config["iteration_count"]) if config else 0,
                         int(config["epoch_count"]) if config else 0, own, extra)


class _WorldSizeChanged(Exception):
    """_training_state: a RANK_EXTRAS that is well formed but has no element for the loader."""


def _optimizer_state(where: str, properties: Mapping[str, str], optimizer: torch.optim.Optimizer,
                     names_of: Callable[[], list[list[str]]],
                     tensors_of: Callable[[list[list[str]]], Mapping[str, Mapping[str, Any]]],
                     part: bool = False) -> dict[str, Any]:
    """The ``optimizer.state_dict()`` to load, checked against the optimizer
    (ValueError, its message starting with ``where``: "ARCHIVE: tag 'TAG'"): ``names_of()`` names the optimizer's parameters per group,
    ``tensors_of(names)`` reads their updater arrays (name -> state -> tensor).
    part: the optimizer holds some of each saved group's parameters (a rank of
    a sharded run), not all."""
    if OPTIMIZERS in properties:
        names = list(_named_entries(where, properties, OPTIMIZERS, _OPTIMIZER_FIELDS))
        raise ValueError(f"{where} holds the states of optimizers named {names} (saved from a "
                         "mapping or list), not of one optimizer: pass optimizer= a mapping of "
                         "those names to optimizers (a list for names '0', '1'...)")
    saved_class = properties.get(OPTIMIZER)
    if saved_class != _class_path(optimizer):
        raise ValueError(f"{where} holds the state of a {saved_class}, not of a "
                         f"{_class_path(optimizer)}")
    saved_groups = json.loads(properties[PARAM_GROUPS])
    current = names_of()
    if len(saved_groups) != len(current):
        raise ValueError(f"{where} holds {len(saved_groups)} param groups, the optimizer has "
                         f"{len(current)}")
    # Indices as optimizer.state_dict() numbers the current parameters.
    index: dict[str, int] = {}
    for names in current:
        for name in names:
            index[name] = len(index)
    tensors = tensors_of(current)
    other = json.loads(properties.get(OPTIMIZER_STATE, "{}"))
    packed_groups = []
    for g, (saved, names) in enumerate(zip(saved_groups, current)):
        missing = sorted(set(names) - set(saved["params"]))
        extra = [] if part else sorted(set(saved["params"]) - set(names))
        if missing or extra or len(set(names)) != len(names) or (
                not part and len(saved["params"]) != len(names)):
            raise ValueError(f"{where}, param group {g}: the checkpoint's parameters differ from the "
                             f"optimizer's (only in the optimizer: {missing}; only in the "
                             f"checkpoint: {extra})")
        group = {k: _decode(v, {}) for k, v in saved.items() if k != "params"}
        group["params"] = [index[name] for name in names]
        packed_groups.append(group)
    state: dict[int, dict[str, Any]] = {}
    for name in index:
        own_tensors = tensors.get(name, {})
        encoded = other.get(name, {})
        if not own_tensors and not encoded:
            continue
        nested = {ref for value in encoded.values() for ref in _tensor_refs(value)}
        values = {key: t for key, t in own_tensors.items() if key not in nested}
        values.update({key: _decode(value, own_tensors) for key, value in encoded.items()})
        state[index[name]] = values
    unknown = set(tensors) - set(index)
    if unknown:
        raise ValueError(f"{where} holds optimizer state of parameters the optimizer does not "
                         f"have: {sorted(unknown)}")
    return {"state": state, "param_groups": packed_groups}


def _tensor_refs(value: Any) -> Iterable[str]:
    if isinstance(value, list):
        for v in value:
            yield from _tensor_refs(v)
    elif isinstance(value, dict):
        (marker, inner), = value.items()
        if marker == "$tensor":
            yield inner
        elif marker in ("$tuple", "$dict", "$set", "$frozenset", "$slice"):
            yield from _tensor_refs(inner)
