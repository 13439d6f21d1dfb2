"""modelzip: tagged machine-learning checkpoints in one zip archive.

Reading::

    with modelzip.open("model.zip") as archive:
        print(archive.tags)                  # oldest first
        weights = archive.load()             # newest tag: read-only zero-copy numpy views
        state = archive.load_torch("step-1")  # torch tensors (private zero-copy views)

Writing (arrays are borrowed, not copied; dedup on by default)::

    modelzip.save("model.zip", "step-2", model.state_dict())

Errors are raised as modelzip.Error (modelzip.NotFoundError for missing tags,
parameters and entries), with the full message and its context.
See __init__.pyi for the typed API.
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Callable, Iterable, Mapping, Optional, Union

from . import _modelzip
from . import _exit_wait  # noqa: F401 (registers its atexit hook)
from ._arguments import check_count, check_save_path, readable_type_errors

readable_type_errors(_modelzip.Archive, _modelzip.Writer, _modelzip.Embeddings,
                     _modelzip.Metadata, _modelzip)


def _wrap_keep_last(keep_last: Callable) -> Callable:
    """Writer.keep_last refusing a bool, which the extension takes as the int 1."""
    import functools

    @functools.wraps(keep_last)
    def checked(self: Any, n: int) -> None:
        check_count("modelzip.Writer.keep_last", "n", n, optional=False)
        keep_last(self, n)
    return checked


_modelzip.Writer.keep_last = _wrap_keep_last(_modelzip.Writer.keep_last)


def _wrap_embeddings_save(save: Callable) -> Callable:
    """Embeddings.save taking normalize= (the extension's) and the keyword of earlier releases,
    unnormalize= (its opposite), with a DeprecationWarning."""
    import functools

    @functools.wraps(save)
    def checked(self: Any, *args: Any, unnormalize: Any = None, **kwargs: Any) -> None:
        if unnormalize is not None:
            if "normalize" in kwargs:
                raise TypeError("modelzip.Embeddings.save() takes normalize= or its deprecated "
                                "opposite unnormalize=, not both")
            if not isinstance(unnormalize, bool) and type(unnormalize).__name__ != "bool_":
                raise TypeError("modelzip.Embeddings.save() argument 'unnormalize' must be bool, "
                                f"not {type(unnormalize).__name__}")
            warnings.warn("Embeddings.save: unnormalize= is deprecated: pass normalize="
                          f"{not unnormalize} (normalize=True writes the stored unit rows, as "
                          "Embeddings.load(normalize=) and C++ WriteOptions{.normalize})",
                          DeprecationWarning, stacklevel=2)
            kwargs["normalize"] = not unnormalize
        save(self, *args, **kwargs)
    return checked


_modelzip.Embeddings.save = _wrap_embeddings_save(_modelzip.Embeddings.save)

from ._errors import (Error, FileError, InvalidArgumentError, MissingFileError,  # noqa: E402
                      NotFoundError, PermissionDeniedError)
from ._modelzip import (Archive, Embeddings, Metadata, ParamInfo, QuantizeResult,  # noqa: E402
                        Writer, WriteStats, export_tensor_file, import_tensor_files,
                        imported_metadata, problems_found, quantize, read_tensor_file,
                        write_tensor_file)
from ._entry_reader import EntryReader  # noqa: E402
from ._values import LoadedArrays, QuantizedTensor, SparseCOO  # noqa: E402


def _archive_item(self: Archive, key: Any) -> Any:
    """``archive[name]``: parameter ``name`` of the newest tag, ``archive[tag, name]``: of tag
    ``tag``, as ``archive.tensor(name, tag)`` gives it (a read-only zero-copy view): the
    parameters ``in`` finds. A tag is no item: NotFoundError (a KeyError) says to load it."""
    tag, name = key if isinstance(key, tuple) and len(key) == 2 else (None, key)
    if not isinstance(name, str) or not isinstance(tag, (str, type(None))):
        what = f"a tuple of {len(key)}" if isinstance(key, tuple) else type(key).__name__
        raise TypeError("modelzip.Archive indices are a parameter name or a (tag, name) pair, "
                        f"not {what}")
    try:
        return self.tensor(name, tag)
    except NotFoundError as e:
        if tag is not None or self.find_tag(name) is None:
            raise
        hint = (f": {name!r} is a tag: archive.load({name!r}) gives its parameters, "
                f"archive[{name!r}, NAME] one of them")
        raise NotFoundError(f"{e}{hint}", code=e.code, message=f"{e.message}{hint}",
                            archive=e.archive, entry=e.entry, tag=e.tag) from None


Archive.__getitem__ = _archive_item
Archive.__iter__ = None  # indexing takes names, not positions: not iterable (use .tags, .params())
from ._async import SaveFuture, save_async  # noqa: E402

__version__: str = _modelzip.__version__
DTYPES: tuple[str, ...] = _modelzip.DTYPES

# `open` is left out on purpose: a star import would shadow the builtin open
# (use modelzip.open or modelzip.Archive).
__all__ = [
    "Archive", "DTYPES", "Embeddings", "EntryReader", "Error", "FileError", "InvalidArgumentError", "LoadedArrays",
    "Metadata",
    "MissingFileError", "NotFoundError", "ParamInfo", "PermissionDeniedError",
    "QuantizeResult", "QuantizedTensor", "SparseCOO", "WriteStats", "Writer", "collect_garbage",
    "export_tensor_file", "import_tensor_files", "imported_metadata", "load", "problems_found", "quantize",
    "read_tensor_file",
    "remove_tag", "save", "save_async", "SaveFuture",
    "update_metadata", "write_tensor_file",
]

PathLike = Union[str, "os.PathLike[str]"]
Similarities = list[tuple[str, float]]
"""What Embeddings.similar/similar_to/analogy return: (word, cosine similarity), best first."""
LoadedValue = Union["numpy.ndarray", SparseCOO, QuantizedTensor]
"""What load() returns per parameter: a numpy array, SparseCOO for sparse tensors, or
QuantizedTensor for quantized ones (unless dequantize=True)."""


def open(path: PathLike) -> Archive:  # noqa: A001 (mirrors builtins.open on purpose)
    """Opens the archive at ``path`` for reading (same as ``Archive(path)``).

    ``path`` may be an ``http://``, ``https://`` or ``s3://bucket/key`` URL: the
    archive is then read by byte ranges into a local cache (docs/remote.md, "Remote
    archives"; settings from ``MODELZIP_CACHE_DIR``, ``MODELZIP_NO_CACHE``...).
    """
    return Archive(path)


def load(path: PathLike, tag: Optional[str] = None, *, copy: bool = False,
         dequantize: bool = False) -> LoadedArrays:
    """Every tensor parameter of ``tag`` (None: the newest) of the archive at ``path``.

    Same as ``Archive(path).load(tag, copy=copy, dequantize=dequantize)``; zero-copy
    arrays keep the file mapped after the archive is closed. ``path`` may be a URL
    (see open()).
    """
    with Archive(path) as archive:
        return archive.load(tag, copy=copy, dequantize=dequantize)


_METADATA_FIELDS = ("model_name", "model_version", "quantization", "description")
MetadataUpdate = Union[Metadata, Mapping[str, Optional[str]]]


def _metadata_patch(update: Optional[MetadataUpdate], fields: Mapping[str, Optional[str]],
                    clear: bool) -> tuple[dict[str, Optional[str]], bool]:
    """``update`` and ``fields`` (see update_metadata) as the arguments of
    Writer.update_metadata: the fields to change, and whether to clear every
    field first. Raises TypeError / ValueError before anything is staged."""
    changes: dict[str, Optional[str]] = {}
    if isinstance(update, Metadata):  # a whole value: replaces every field
        changes = {f: getattr(update, f) for f in _METADATA_FIELDS}
        clear, update = True, None
    if update is not None and not isinstance(update, Mapping):
        raise TypeError(f"metadata must be a mapping or modelzip.Metadata, not {type(update).__name__}")
    for source, items in (("metadata", dict(update or {})), ("keyword", dict(fields))):
        for name, value in items.items():
            if name not in _METADATA_FIELDS:
                error = TypeError if source == "keyword" else ValueError
                hint = ("" if source == "keyword" else "; metadata= takes these: free-form pairs, "
                        "as safetensors' metadata= takes them, go in tag_metadata=")
                raise error(f"unknown metadata field {name!r} (fields: "
                            f"{', '.join(_METADATA_FIELDS)}{hint})")
            if value is not None and not isinstance(value, str):
                raise TypeError(f"metadata field {name!r} must be str or None (None clears it), "
                                f"not {type(value).__name__}")
            changes[name] = value
    return changes, clear


def save(path: PathLike, tag: str, arrays: Mapping[str, Any], *,
         share: Optional[Mapping[str, tuple[str, str]]] = None,
         compress: Union[bool, Iterable[Union[str, tuple[str, str]]]] = False,
         bfloat16: Iterable[Union[str, tuple[str, str]]] = (),
         dtypes: Optional[Mapping[Union[str, tuple[str, str]], str]] = None,
         updater: Optional[Mapping[tuple[str, str], Any]] = None,
         metadata: Optional[MetadataUpdate] = None,
         tag_metadata: Optional[Mapping[str, str]] = None,
         dedup: bool = True, durable: bool = True, append: bool = True,
         replace: bool = False, keep_last: Optional[int] = None,
         progress: Optional[Callable[[int, int], Optional[bool]]] = None) -> WriteStats:
    """Adds tag ``tag`` holding ``arrays`` to the archive at ``path`` (created if missing).

    ``arrays`` maps names to numpy arrays, torch tensors (a ``state_dict()``
    works as is), anything with ``__array__``/``.numpy()``, str or lists of
    str, SparseCOO, or Embeddings. Array data is not copied. With ``dedup``,
    arrays equal to a blob already in the archive are stored as references.
    With ``append`` the new tag is appended to the file in place (crash-safe)
    instead of rewriting the archive. ``replace`` replaces an existing tag of
    that name (any letter case) in the same commit; ``keep_last=N`` then keeps
    only the newest N tags, removing older ones in the same commit (in place:
    their bytes stay as free entries until collect_garbage()).
    See Writer.add_tag for ``share``, ``compress``, ``dtypes`` (arrays holding the raw bits of
    bfloat16, the float8 types or float4_e2m1fn_x2), ``bfloat16`` and ``updater``;
    ``metadata`` updates the archive metadata as update_metadata() does;
    ``tag_metadata`` ({str: str}) is the tag's free-form metadata, as safetensors'
    ``save_file(metadata=)`` takes it (``Archive.tag_metadata(tag)`` gives it back).
    Returns the WriteStats of the commit.
    """
    check_save_path("modelzip.save", path)
    check_count("modelzip.save", "keep_last", keep_last)
    # Checked before any array is read (or fetched from a device).
    patch = None if metadata is None else _metadata_patch(metadata, {}, False)
    writer = Writer(path, dedup=dedup, durable=durable, append=append, progress=progress)
    try:
        # CUDA tensors: written while they are fetched (commit follows at once).
        writer.add_tag(tag, arrays, share=share, compress=compress, bfloat16=bfloat16,
                       dtypes=dtypes, updater=updater, replace=replace, _overlap_fetch=True,
                       tag_metadata=tag_metadata)
        if keep_last is not None:
            writer.keep_last(keep_last)
        if patch is not None:
            writer.update_metadata(patch[0], clear=patch[1])
        return writer.commit()
    finally:
        writer.close()


def remove_tag(path: PathLike, tag: str, *, durable: bool = True) -> WriteStats:
    """Removes ``tag`` (ignoring case) from the archive at ``path``.

    Blobs that other tags share move to the oldest remaining tag that uses them.
    """
    writer = Writer(path, durable=durable)
    try:
        writer.remove_tag(tag)
        return writer.commit()
    finally:
        writer.close()


def collect_garbage(path: PathLike, *, durable: bool = True) -> WriteStats:
    """Drops blob entries that no tag references any more (rewrites the archive).

    Returns the WriteStats (``blobs_collected``, ``bytes_collected``).
    """
    writer = Writer(path, durable=durable)
    try:
        writer.collect_garbage()
        return writer.commit()
    finally:
        writer.close()


def update_metadata(path: PathLike, metadata: Optional[MetadataUpdate] = None, *,
                    clear: bool = False, durable: bool = True,
                    **fields: Optional[str]) -> Metadata:
    """Updates the archive metadata (model_name, model_version, quantization, description).

    ``metadata`` (a mapping) and keyword ``fields`` both update only the
    fields they name and keep the others; a value of None clears that field.
    ``clear=True`` clears every field first. A ``modelzip.Metadata`` object
    is a whole value: it replaces every field. A missing archive is created
    (with no tags). The change is applied under the archive's write lock to
    the metadata it has then, so fields another process changes at the same
    time are kept. Returns the metadata as read after the commit.
    """
    changes, clear = _metadata_patch(metadata, fields, clear)
    writer = Writer(path, durable=durable)
    try:
        writer.update_metadata(changes, clear=clear)
        writer.commit()
    finally:
        writer.close()
    with Archive(path) as archive:
        return archive.metadata


def set_metadata(path: PathLike, metadata: Optional[MetadataUpdate] = None, *,
                 clear: bool = False, durable: bool = True, **fields: Optional[str]) -> Metadata:
    """Deprecated spelling of update_metadata() (same arguments, same result);
    emits a DeprecationWarning. Kept for one release."""
    warnings.warn("modelzip.set_metadata is deprecated: use modelzip.update_metadata "
                  "(same arguments)", DeprecationWarning, stacklevel=2)
    return update_metadata(path, metadata, clear=clear, durable=durable, **fields)


def __getattr__(name: str) -> Any:
    """``modelzip.torch`` is imported on first use (importing torch takes a while)."""
    if name == "torch":
        import importlib
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'modelzip' has no attribute {name!r}")
