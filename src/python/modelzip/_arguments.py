"""Readable TypeErrors for wrong argument types given to the compiled classes and functions.

pybind11 reports a call whose arguments it cannot convert as a multi-line
"incompatible function arguments. The following argument types are
supported: ..." dump. ``readable_type_errors`` wraps the public callables of
the extension so that such a call raises a TypeError with one sentence
instead, e.g. ``Archive.tensor() argument 'name' must be str, not int``.
Only that one pybind11 message is rewritten; every other exception passes
through unchanged, and calls that succeed cost one Python frame.
"""
from __future__ import annotations

import functools
import os
import re
import warnings
from collections.abc import Mapping
from typing import Any, Callable, Optional

_INCOMPATIBLE = "incompatible "  # "... incompatible function/constructor arguments ..."
_SIGNATURE = re.compile(r"^\s*1\. (?:[\w.]+)?\((?P<params>.*)\)(?: -> .*)?$", re.MULTILINE)


def _split_top_level(text: str) -> list[str]:
    """``text`` split at commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(text):
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    if text[start:].strip():
        parts.append(text[start:].strip())
    return parts


class _Param:
    def __init__(self, spec: str, keyword_only: bool) -> None:
        name_type, _, default = spec.partition(" = ")
        self.name, _, self.annotation = (s.strip() for s in name_type.partition(":"))
        self.has_default = bool(default)
        self.keyword_only = keyword_only


def _parse(specs: list[str]) -> list[_Param]:
    out, keyword_only = [], False
    for spec in specs:
        if spec == "*":
            keyword_only = True
        elif spec != "/":
            out.append(_Param(spec, keyword_only))
    return out


def _accepts(annotation: str, value: Any) -> Optional[str]:
    """None when ``value`` fits ``annotation`` (or the annotation is not checked), else what it must be."""
    optional = re.fullmatch(r"Optional\[(.*)\]", annotation)
    if optional:
        if value is None:
            return None
        inner = _accepts(optional.group(1), value)
        return None if inner is None else inner + " or None"
    if annotation == "str":
        return None if isinstance(value, str) else "str"
    if annotation == "bool":
        return None if isinstance(value, bool) or type(value).__name__ == "bool_" else "bool"
    if annotation == "int":
        return None if hasattr(value, "__index__") and not isinstance(value, bool) else "int"
    if annotation == "float":
        return None if isinstance(value, (int, float)) or hasattr(value, "__float__") else "a number"
    if annotation.startswith(("List[", "list[")):
        return None if isinstance(value, (list, tuple)) else "a list"
    return None


def _sentence(qualname: str, message: str, args: tuple, kwargs: dict) -> Optional[str]:
    """One sentence saying which argument of the call is wrong, or None if it cannot tell."""
    match = _SIGNATURE.search(message)
    if not match:
        return None
    specs = _split_top_level(match.group("params"))
    if specs and specs[0].startswith("self:"):
        specs = specs[1:]
    signature = "(" + ", ".join(specs) + ")"
    params = _parse(specs)
    positional = [p for p in params if not p.keyword_only]
    if len(args) > len(positional):
        return (f"{qualname}() takes {len(positional)} positional argument"
                f"{'' if len(positional) == 1 else 's'} but {len(args)} were given "
                f"(signature: {signature})")
    bound: dict[str, Any] = {p.name: v for p, v in zip(positional, args)}
    names = {p.name for p in params}
    for key, value in kwargs.items():
        if key not in names:
            return f"{qualname}() got an unexpected keyword argument {key!r} (signature: {signature})"
        if key in bound:
            return f"{qualname}() got multiple values for argument {key!r}"
        bound[key] = value
    for p in params:
        if p.name not in bound:
            if not p.has_default:
                return f"{qualname}() missing required argument {p.name!r} (signature: {signature})"
            continue
        wanted = _accepts(p.annotation, bound[p.name])
        if wanted is not None:
            return (f"{qualname}() argument {p.name!r} must be {wanted}, "
                    f"not {type(bound[p.name]).__name__}")
    # Every type fits: an int out of its C++ type's range was refused (a
    # negative count or size, or one beyond 64 bits).
    for p in params:
        value = bound.get(p.name)
        if p.name in bound and p.annotation in ("int", "Optional[int]") \
                and _accepts("int", value) is None and not -2**63 <= int(value) < 2**64:
            return f"{qualname}() argument {p.name!r} is out of range: {int(value)}"
    for p in params:
        value = bound.get(p.name)
        if p.name in bound and p.annotation in ("int", "Optional[int]") \
                and _accepts("int", value) is None and int(value) < 0:
            return f"{qualname}() argument {p.name!r} must not be negative, not {int(value)}"
    for p in params:  # a str that is no UTF-8 text (lone surrogates: os.fsdecode of bytes)
        problem = not_utf8(bound.get(p.name))
        if problem is not None:
            return _ValueSentence(f"{qualname}() argument {p.name!r} must be UTF-8 text "
                                  f"({problem})")
    return f"{qualname}() got arguments of the wrong type (signature: {signature})"


class _ValueSentence(str):
    """A sentence of _sentence about a value of the right type that is wrong: a ValueError."""


def not_utf8(value: Any) -> Optional[str]:
    """Why ``value``, a str, is no UTF-8 text (the UnicodeEncodeError's message: it holds lone
    surrogates, as os.fsdecode makes of bytes that are not UTF-8); None for anything else."""
    if not isinstance(value, str) or value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        return str(e)
    return None


def _readable(error: BaseException, qualname: str, args: tuple, kwargs: dict) -> Optional[str]:
    """The one-sentence message replacing pybind11's dump in ``error``, or None to keep it."""
    if not isinstance(error, TypeError):
        return None
    message = str(error)
    if _INCOMPATIBLE not in message or "Invoked with" not in message:
        return None
    return _sentence(qualname, message, args, kwargs)


def _wrap(function: Callable, qualname: str, method: bool, constructor: bool = False) -> Callable:
    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except BaseException as e:
            sentence = _readable(e, qualname, args[1:] if method else args, kwargs)
            if constructor:
                # The instance whose __init__ failed has no C++ object; keep it out of the
                # traceback's frame locals, which tools print (its repr says "not opened").
                del args, kwargs
            if sentence is None:
                raise
        raise (ValueError if isinstance(sentence, _ValueSentence) else TypeError)(
            str(sentence)) from None
    return call


ORDER_HINT = (" (modelzip.save takes path, tag, arrays; modelzip.torch.save takes the tensors "
              "first, as safetensors' save_file does)")
"""What a TypeError adds when a save is given the tensors where it expects the path, or the
path where it expects the tensors."""


def check_save_path(function: str, path: Any) -> None:
    """Raises a TypeError naming ``function``'s argument 'path' when ``path`` is not a str or
    os.PathLike; a mapping there (the tensors, in the other argument order) adds ORDER_HINT."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{function}() argument 'path' must be str or os.PathLike, not "
                        f"{type(path).__name__}" + (ORDER_HINT if isinstance(path, Mapping) else ""))


def check_count(function: str, argument: str, value: Any, optional: bool = True) -> None:
    """Raises a TypeError naming ``function``'s ``argument`` when ``value`` is not a count (None
    allowed when ``optional``): a bool, which Python counts as an int (keep_last=True would keep
    one tag and remove the others), anything else without ``__index__``, or a negative int."""
    if optional and value is None:
        return
    if isinstance(value, bool) or type(value).__name__ == "bool_" or \
            not hasattr(value, "__index__"):
        raise TypeError(f"{function}() argument {argument!r} must be int"
                        f"{' or None' if optional else ''}, not {type(value).__name__}")
    if value.__index__() < 0:
        raise TypeError(f"{function}() argument {argument!r} must not be negative, not "
                        f"{value.__index__()}")


_WRAPPED_DUNDERS = ("__init__", "__getitem__", "__contains__")


def readable_type_errors(*targets: Any) -> None:
    """Wraps the public methods of the given extension classes, or the given module functions'
    (passed as a module), in place."""
    for target in targets:
        if isinstance(target, type):
            for name, attribute in list(vars(target).items()):
                if name.startswith("_") and name not in _WRAPPED_DUNDERS:
                    continue
                qualname = "modelzip." + target.__name__ + ("" if name == "__init__" else "." + name)
                if isinstance(attribute, staticmethod):
                    setattr(target, name,
                            staticmethod(_wrap(attribute.__func__, qualname, method=False)))
                elif type(attribute).__name__ == "instancemethod":
                    setattr(target, name, _wrap(getattr(target, name), qualname, method=True,
                                                constructor=name == "__init__"))
        else:
            for name in dir(target):
                function = getattr(target, name)
                if not name.startswith("_") and type(function).__name__ == "builtin_function_or_method":
                    setattr(target, name, _wrap(function, "modelzip." + name, method=False))


def warn_old_order(old: str, new: str, stacklevel: int = 3) -> None:
    """The DeprecationWarning of a checkpoint load called in the argument order of earlier
    releases (tag last), ``stacklevel`` as warnings.warn counts it from here."""
    warnings.warn(f"{old} is deprecated: call {new} (tag second, as in save_checkpoint; "
                  "tag None: the newest)", DeprecationWarning, stacklevel=stacklevel)


def old_order_with_tag_keyword(is_old: Callable[[Any], bool], old: str,
                               new: str) -> Callable[[Callable], Callable]:
    """Decorates a checkpoint load taking ``(path, tag, X, optimizer, ...)`` so that it also takes
    the order of earlier releases with the tag as a keyword, ``(path, X, optimizer, tag=...)``,
    where Python raises "got multiple values for argument 'tag'" before the function could
    tell: when the argument after ``path`` ``is_old`` (an X: a model, a mapping of parameters)
    and ``tag`` comes by keyword, the function is called in the new order, with the
    DeprecationWarning of warn_old_order(old, new). help() and inspect show the function's own
    signature."""
    def decorate(function: Callable) -> Callable:
        @functools.wraps(function)
        def call(path: Any, *args: Any, **kwargs: Any) -> Any:
            if args and "tag" in kwargs and is_old(args[0]):
                args = (kwargs.pop("tag"), *args)
                warn_old_order(old, new)
            return function(path, *args, **kwargs)
        return call
    return decorate
