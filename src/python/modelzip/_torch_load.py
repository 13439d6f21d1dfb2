"""Torch state dicts in and out of archives: modelzip.torch.load, save and load_into.

Loads are zero-copy on the CPU (tensors view a private copy-on-write mapping of the archive file,
Archive.load(writable=True)) and go through the staged pipeline of _device_copy for a device.
Importing this module imports torch.
"""
from __future__ import annotations

import collections
import os
from typing import Any, Iterable, Mapping, NamedTuple, Optional

import torch

from . import Archive, WriteStats, _device_copy, _torch
from . import save as _save
from ._arguments import ORDER_HINT


def save(tensors: Mapping[str, Any], path: Any, tag: str, **options: Any) -> WriteStats:
    """Adds tag ``tag`` holding ``tensors`` (a state dict) to the archive at ``path``: the
    argument order of safetensors' ``save_file``. ``options`` are modelzip.save's (dedup,
    durable, compress...). Tensors that are one tensor in ``tensors`` (tied weights) are
    recorded as tied and load as one tensor again."""
    if not isinstance(tensors, Mapping):
        hint = (ORDER_HINT if isinstance(tensors, (str, os.PathLike)) else
                " (save module.state_dict())" if isinstance(tensors, torch.nn.Module) else "")
        raise TypeError("modelzip.torch.save() argument 'tensors' must be a mapping of names to "
                        f"tensors, not {type(tensors).__name__}{hint}")
    return _save(path, tag, tensors, **options)


def load(path: Any, tag: Optional[str] = None, *, device: Any = "cpu",
         names: Optional[Iterable[str]] = None, verify: bool = False,
         dequantize: bool = False) -> dict[str, Any]:
    """The tensors of ``tag`` (None: the newest) of the archive at ``path``, by name.

    device "cpu" (or None): writable tensors viewing a private copy-on-write mapping of the
      file, no copy (writes stay in this process and never reach the file); they keep the
      mapping alive. Another device ("cuda", "cuda:1", 0, a torch.device): each tensor in its
      own allocation there, copied through pinned staging buffers (at most 256 MiB, reused
      between loads); RuntimeError, before anything is read, for a device that is not there.
    names: only these parameters (in this order); NotFoundError (a KeyError) for a missing one.
    verify: check every blob's CRC-32 before any tensor is handed out (default: not checked, as
      for every zero-copy load; modelzip verify and copying loads check it). Device loads
      compute it while staging.
    dequantize: quantized tensors as floats of their original type (see Archive.load_torch).
    Weights tied when saved come back as one tensor; every other name is its own tensor.
    """
    check_tag("modelzip.torch.load", tag)
    if isinstance(names, (str, bytes)):  # a str is iterable: it would ask for each character
        raise TypeError("modelzip.torch.load() argument 'names' must be a list of parameter "
                        f"names or None, not {type(names).__name__} (one name: names=[{names!r}])")
    target = target_device(device, "modelzip.torch.load")
    if target.type == "cpu":
        with Archive(path) as archive:
            return _torch.load_state_dict(archive, tag, dequantize, names, verify)
    return load_copied(path, tag, target, names=names, verify=verify, dequantize=dequantize)


def check_tag(function: str, tag: Any) -> None:
    """Raises a TypeError naming ``function``'s argument 'tag' when ``tag`` is not a str or
    None."""
    if tag is not None and not isinstance(tag, str):
        raise TypeError(f"{function}() argument 'tag' must be str or None, not "
                        f"{type(tag).__name__}")


def target_device(device: Any, function: str) -> Any:
    """``device`` (a str, an int: a CUDA device's index, a torch.device; None: "cpu") as a
    torch.device, checked as torch.load checks its ``map_location`` before anything is read: a
    CUDA device must exist. Raises TypeError for another type, RuntimeError for a string that
    names no device or a device that is not there, naming ``function`` and the argument."""
    if device is None:
        return torch.device("cpu")
    if not isinstance(device, (str, int, torch.device)) or isinstance(device, bool):
        raise TypeError(f"{function}() argument 'device' must be a str, int or torch.device "
                        f'("cpu", "cuda", "cuda:1"), not {type(device).__name__}')
    try:
        target = torch.device(device)
    except RuntimeError as e:
        raise RuntimeError(f"{function}() argument 'device': {e}") from None
    if target.type == "cuda":
        where = f"{function}(): device {str(target)!r} is not available: "
        if not torch.cuda.is_available():
            why = (f"this torch, {torch.__version__}, is built without CUDA"
                   if torch.version.cuda is None else "no CUDA device is visible")
            raise RuntimeError(f"{where}torch.cuda.is_available() is False ({why}); load onto "
                               "the CPU with device='cpu'")
        count = torch.cuda.device_count()
        if target.index is not None and target.index >= count:
            raise RuntimeError(f"{where}torch.cuda.device_count() is {count} (devices "
                               f"'cuda:0' to 'cuda:{count - 1}')")
    return target


def load_copied(path: Any, tag: Optional[str], device: Any, *,
                names: Optional[Iterable[str]] = None, verify: bool = False,
                dequantize: bool = False, staging: Any = None,
                source: Optional[str] = None) -> dict[str, Any]:
    """load() into new tensors on ``device`` through _device_copy (staged for CUDA or with
    ``staging``, else copied directly), from the file or the mapping (``source``, see
    _device_copy.SOURCE). With ``verify``, the blobs copied from the file's data ranges are
    CRC-checked while they are copied, the others (quantized, sparse, markers) before."""
    with Archive(path) as archive:
        tag = archive.newest_tag if tag is None else tag
        state = _torch.load_state_dict(archive, tag, dequantize, names, False)
        wanted = None if names is None else set(state_names(state))
        blobs = {p.name: p.blob for p in archive.params(tag)
                 if p.kind == "tensor" and (wanted is None or p.name in wanted)}
        files = _device_copy.FileData(archive, tag, blobs)
        try:
            if verify:
                staged = {name for name, value in state.items()
                          if isinstance(value, torch.Tensor) and files.get(name) is not None
                          and _device_copy.stageable(value, value)}
                rest = [name for name in blobs if name not in staged]
                if rest:  # checked now: they are not copied from located data
                    archive.load(tag, names=rest, writable=True, verify=True)
        except BaseException:
            files.close()
            raise
    with files:
        return to_device(state, device, staging=staging, files=files, source=source,
                         verify=verify)


def state_names(state: Mapping[str, Any]) -> list[str]:
    """The parameter names a loaded state dict came from: its keys, the elements of its lists
    and tuples as ``name.i`` (theirs as ``name.i.j``...)."""
    out = []

    def add(name: str, value: Any) -> None:
        if type(value) in (list, tuple):
            for i, v in enumerate(value):
                add(f"{name}.{i}", v)
        out.append(name)
    for name, value in state.items():
        add(name, value)
    return out


def to_device(state: Mapping[str, Any], device: Any, *, staging: Any = None,
              files: Optional[_device_copy.FileData] = None, source: Optional[str] = None,
              verify: bool = False) -> Any:
    """``state`` with its tensors copied to ``device`` (one new tensor each; tied names stay one
    tensor); other values (torch dtypes, tuples of packed parameters) as they are, lists and
    tuples with their tensors moved (an element's bytes located in ``files`` as ``name.i``).
    ``staging``: the _device_copy target to stage through (tests).
    ``files``: where the tensors' bytes lie in the archive file, by name (read() staging, CRC
    checks); ``source``, ``verify``: as for _device_copy.copy_pairs."""
    moved: dict[int, Any] = {}
    pairs = []

    def destination(tensor: Any, name: Optional[str] = None) -> Any:
        if id(tensor) not in moved:
            if _device_copy.stageable(tensor, tensor):
                moved[id(tensor)] = torch.empty(tensor.shape, dtype=tensor.dtype, device=device)
                located = files.get(name) if files is not None and name is not None else None
                pairs.append((tensor, moved[id(tensor)], located))
            else:
                moved[id(tensor)] = tensor.to(device)
        return moved[id(tensor)]

    def moved_value(value: Any, name: Optional[str]) -> Any:
        if isinstance(value, torch.Tensor):
            return destination(value, name)
        if type(value) in (list, tuple):
            return type(value)(moved_value(v, None if name is None else f"{name}.{i}")
                               for i, v in enumerate(value))
        return value

    out: Any = collections.OrderedDict()
    for name, value in state.items():
        out[name] = moved_value(value, name)
    if hasattr(state, "_metadata"):
        out._metadata = state._metadata
    _device_copy.copy_pairs(pairs, target=staging, source=source, verify=verify)
    return out


class LoadPlan(NamedTuple):
    """What load_into checked and will copy."""

    pairs: list[tuple[Any, Any]]
    """(loaded tensor, the module's tensor) for every name in both."""
    missing_keys: list[str]
    unexpected_keys: list[str]
    fallback: Optional[tuple[Any, Any, bool]] = None
    """(module, whole loaded state dict, strict) for modules whose state dict holds values that
    are not tensors (quantized modules' packed parameters) or that have state-dict load hooks:
    given to ``load_state_dict``."""
    files: Optional[_device_copy.FileData] = None
    """Where the loaded tensors' bytes lie in the file (closed by apply_plan)."""


def _module_name(module: Any) -> str:
    return type(module).__name__


def plan_load_into(archive: Archive, tag: str, module: Any, strict: bool,
                   verify: bool = False) -> LoadPlan:
    """Checks that tag ``tag`` fits ``module`` (keys when ``strict``; shapes always) and loads
    its tensors zero-copy, copying nothing into the module. Raises RuntimeError worded as
    ``load_state_dict`` words it."""
    targets = module.state_dict(keep_vars=True)
    if _has_load_hooks(module) or not all(isinstance(t, torch.Tensor) for t in targets.values()):
        state = _torch.load_state_dict(archive, tag, False, None, verify)
        return LoadPlan([], [], [], (module, state, strict))
    infos = {p.name: p for p in archive.params(tag) if p.kind == "tensor"}
    keys, values = _torch.state_dict_keys(archive, tag, infos)
    stored = set(keys)
    missing = [name for name in targets if name not in stored]
    unexpected = [name for name in keys if name not in targets]
    errors = []  # in load_state_dict's order: missing keys, unexpected ones, then shapes
    if strict and missing:
        errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing)
                      + ". ")
    if strict and unexpected:
        errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected)
                      + ". ")
    common = [name for name in targets if name in stored]
    for name in common:
        info, target = infos[name], targets[name]
        if name in values:
            value = _torch.load_state_dict(archive, tag, False, [name])[name]
            errors.append(f'While copying the parameter named "{name}", expected torch.Tensor or '
                          f"Tensor-like object from checkpoint but received {type(value)}")
        elif tuple(info.shape) != tuple(target.shape):
            errors.append(f"size mismatch for {name}: copying a param with shape "
                          f"{torch.Size(info.shape)} from checkpoint, the shape in current model "
                          f"is {target.shape}.")
        elif target.is_meta:  # copy_ into it would do nothing, silently
            errors.append(f'While copying the parameter named "{name}": the tensor in the current '
                          "model is on the meta device, which has no memory to copy into; "
                          "materialize the module first (module.to_empty(device=...)).")
        elif any(stride == 0 and size > 1 for size, stride in zip(target.shape, target.stride())):
            errors.append(f'While copying the parameter named "{name}": the tensor in the current '
                          "model has elements that share memory (an expand()ed tensor), which "
                          "cannot be written; clone() it first.")
    if errors:
        raise RuntimeError(f"Error(s) in loading state_dict for {_module_name(module)} from "
                           f"{archive.name}, tag {tag!r}:\n\t"
                           + "\n\t".join(errors))
    state = _torch.load_state_dict(archive, tag, False, common, verify)
    files = _device_copy.FileData(archive, tag, {name: infos[name].blob for name in common})
    pairs = [(state[name], targets[name].detach(), files.get(name)) for name in common]
    return LoadPlan(pairs, missing, unexpected, files=files)


def _has_load_hooks(module: Any) -> bool:
    """Whether a module of the tree has state-dict load hooks (pre-hooks, which may rewrite the
    state dict, or post-hooks, which may change the keys reported): load_state_dict runs them."""
    return any(getattr(m, "_load_state_dict_pre_hooks", None)
               or getattr(m, "_load_state_dict_post_hooks", None) for m in module.modules())


def apply_plan(plan: LoadPlan) -> Any:
    """Copies what plan_load_into checked into the module's tensors; returns load_state_dict's
    (missing_keys, unexpected_keys)."""
    if plan.fallback is not None:
        module, state, strict = plan.fallback
        return module.load_state_dict(state, strict=strict)
    try:
        with torch.no_grad():
            _device_copy.copy_pairs(plan.pairs)
    finally:
        if plan.files is not None:
            plan.files.close()
    return torch.nn.modules.module._IncompatibleKeys(plan.missing_keys, plan.unexpected_keys)


def load_into(module: Any, path: Any, tag: Optional[str] = None, *, strict: bool = True,
              verify: bool = False) -> Any:
    """Copies tag ``tag`` (None: the newest) into ``module``'s existing parameters and buffers,
    wherever they live (CPU or GPU), without a second copy of the model: from the mapping
    straight into host tensors, through the staging pipeline into device ones.

    strict: every key of the module's state dict must be in the tag and no other; shapes must
    match either way (as ``load_state_dict``: RuntimeError "Error(s) in loading state_dict...",
    raised before anything is copied). Values are converted to the module's dtypes. Returns
    ``(missing_keys, unexpected_keys)`` as ``load_state_dict`` does. A module with state-dict
    load hooks (``_register_load_state_dict_pre_hook``, ``register_load_state_dict_post_hook``)
    anywhere in its tree, or whose state dict holds values that are not tensors (quantized
    modules' packed parameters), is given the loaded zero-copy state dict with
    ``load_state_dict`` instead, which runs the hooks (and copies as it does). verify: as for
    load(), checked before anything is copied.
    """
    if not isinstance(module, torch.nn.Module):
        hint = (" (the module comes first: load_into(module, path, tag))"
                if isinstance(path, torch.nn.Module) else "")
        raise TypeError("modelzip.torch.load_into() argument 'module' must be a torch.nn.Module, "
                        f"not {type(module).__name__}{hint}")
    check_tag("modelzip.torch.load_into", tag)
    with Archive(path) as archive:
        tag = archive.newest_tag if tag is None else tag
        plan = plan_load_into(archive, tag, module, strict, verify)
    return apply_plan(plan)


def to_param_devices(optimizer_state: Mapping[str, Any], optimizer: Any) -> None:
    """Moves the state tensors of ``optimizer_state`` (an ``optimizer.state_dict()`` to load,
    in place) onto their parameters' devices and, for floating-point parameters, their types,
    as ``optimizer.load_state_dict`` casts them, through _device_copy (staged for CUDA) instead
    of one ``.to()`` each; ``step`` and state of parameters on the CPU stay as they are
    (load_state_dict handles them)."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    index = [i for group in optimizer_state["param_groups"] for i in group["params"]]
    by_index = dict(zip(index, params))
    pairs = []
    for i, values in optimizer_state["state"].items():
        param = by_index.get(i)
        if param is None or param.device.type == "cpu" or not isinstance(values, dict):
            continue
        for key, value in values.items():
            if key == "step" or not isinstance(value, torch.Tensor) or value.device == param.device:
                continue
            # as load_state_dict casts: to a floating parameter's dtype; complex and integer
            # parameters' state keeps its own
            dtype = param.dtype if param.is_floating_point() else value.dtype
            moved = torch.empty(value.shape, dtype=dtype, device=param.device)
            pairs.append((value, moved))
            values[key] = moved
    _device_copy.copy_pairs(pairs)
