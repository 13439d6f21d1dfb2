"""Type hints of the modelzip package: tagged machine-learning checkpoints in one zip archive.

Loaded arrays and dtypes:

- Dense tensors load as numpy arrays. For stored (uncompressed) blobs they
  are read-only zero-copy views into the memory-mapped archive; each array
  keeps the mapping alive (``arr.base`` owns it), so arrays outlive
  ``Archive.close()``. ``copy=True`` gives writable arrays in owned memory
  (CRC-32 checked). Deflated blobs are decompressed (read-only unless copy).
- bool, int8..int64, uint8..uint64, float16, float32, float64, complex64,
  complex128 load as the numpy dtype of the same name (little-endian;
  ``load_torch`` gives torch.complex64 / torch.complex128).
- bfloat16 loads as **uint16** holding the raw bits (numpy has no bfloat16);
  ``ParamInfo.dtype`` says "bfloat16". ``Archive.load_torch`` restores
  ``torch.bfloat16``; ``arr.astype(np.uint32) << 16`` viewed as float32 gives
  the values in numpy.
- float8_e4m3fn and float8_e5m2 load as **uint8** holding the raw bits;
  ``ParamInfo.dtype`` says which. ``Archive.load_torch`` restores
  ``torch.float8_e4m3fn`` / ``torch.float8_e5m2`` (torch >= 2.1; older torch
  raises TypeError); ``ml_dtypes`` arrays: ``arr.view(ml_dtypes.float8_e4m3fn)``.
- The MX types float8_e8m0fnu and float4_e2m1fn_x2 load as **uint8** too
  (float4_e2m1fn_x2: one byte per pair of FP4 values, first in the low
  nibble, shape in bytes); ``load_torch`` restores ``torch.float8_e8m0fnu``
  (torch >= 2.7) / ``torch.float4_e2m1fn_x2`` (torch >= 2.8).
- Strings ("string", UTF-8) load as numpy **object** arrays of ``str`` with
  the stored shape (always a copy).
- A Python int, float, complex or bool that was saved loads as its 0-d int64
  (uint64 from 2**63 on), float64, complex128 or bool array, None as the 0-d
  string "None", a numpy scalar as a 0-d array of its type (a numpy str as
  its 0-d string), a torch.Size as 1-d int64, bytes as 1-d uint8, a
  torch.device as its 0-d string, a list, tuple or set of one kind of them
  as one array (a dimension per level of nesting), other lists, tuples, sets
  and slices element by element (NAME = the length, NAME.0...); the tag's
  "_python_types" parameter records them, and ``load_torch`` gives them back
  as the values saved (docs/python.md, docs/torch.md "Python values").
- Sparse COO tensors load as ``SparseCOO(indices, values, shape)``.
"""
from __future__ import annotations

import concurrent.futures
import io
import os
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional, Union

import numpy as np

PathLike = Union[str, os.PathLike[str]]
Similarities = list[tuple[str, float]]

__version__: str
DTYPES: tuple[str, ...]
"""The dtype names modelzip stores, in numpy style ("string" for UTF-8)."""


class Error(Exception):
    """Any failure of modelzip; ``str(e)`` is the full message with its context.

    Attributes: ``code`` ("io", "corrupt", "not_found", "invalid_argument",
    "already_exists", "unsupported", "limit_exceeded", "cancelled"),
    ``message`` (without context), ``archive``, ``entry``, ``tag`` (str or
    None), ``line`` (1-based line in a text entry) and ``offset`` (byte offset)
    (int or None).
    """

    code: str
    message: str
    archive: Optional[str]
    entry: Optional[str]
    tag: Optional[str]
    line: Optional[int]
    offset: Optional[int]

    def __init__(self, full_message: str, *, code: str = "", message: Optional[str] = None,
                 archive: Optional[str] = None, entry: Optional[str] = None,
                 tag: Optional[str] = None, line: Optional[int] = None,
                 offset: Optional[int] = None) -> None:
        """Builds an error; modelzip itself fills in every field."""


class NotFoundError(Error, KeyError):
    """A missing tag, parameter or entry (code "not_found"); also a KeyError."""

    def __str__(self) -> str:
        """The full message (not quoted as KeyError would)."""


class InvalidArgumentError(Error, ValueError):
    """An impossible request (code "invalid_argument"): a bad tag or parameter name...; also a ValueError."""


class FileError(Error, OSError):
    """The operating system refused an operation on a file (code "io"); also an OSError.

    ``errno`` (or None), ``strerror`` and ``filename`` are set. Instances are
    also the built-in OSError subclass of their errno: FileNotFoundError
    (ENOENT), PermissionError (EACCES, EPERM), IsADirectoryError,
    NotADirectoryError, FileExistsError.
    """

    errno: Optional[int]  # type: ignore[assignment]
    strerror: Optional[str]  # type: ignore[assignment]
    filename: Optional[str]

    def __str__(self) -> str:
        """The full message (not OSError's "[Errno N] ..." form)."""


class MissingFileError(FileError, FileNotFoundError):
    """A file that does not exist (ENOENT); also a FileNotFoundError."""


class PermissionDeniedError(FileError, PermissionError):
    """A file or folder modelzip may not read or write (EACCES, EPERM); also a PermissionError."""


class LoadedArrays(dict[str, Any]):
    """What load() returns: a dict of numpy arrays (SparseCOO, QuantizedTensor) by name.

    torch's Module.load_state_dict() refuses it with a TypeError that names the torch loader
    (Archive.load_torch()), which gives torch tensors."""


class SparseCOO(NamedTuple):
    """A sparse COO tensor: ``indices`` (nnz x rank int64), ``values`` (nnz), dense ``shape``."""

    indices: np.ndarray
    values: np.ndarray
    shape: tuple[int, ...]

    @property
    def nnz(self) -> int:
        """The number of stored values."""

    @property
    def dtype(self) -> np.dtype[Any]:
        """The numpy dtype of the values."""

    def to_dense(self) -> np.ndarray:
        """A new dense array; values at repeated coordinates are summed (bool: or-ed)."""


class QuantizedTensor:
    """A quantized tensor (FORMAT.md 6.1): stored integers and how they stand for ``dtype`` values.

    ``scheme``: "affine-per-tensor" (``scale``, ``zero_point``), "affine-per-axis"
    (``axis``, float64 ``scales`` and int64 ``zero_points`` per index along the
    axis) or "block-symmetric" (``axis``, ``block_size``, float16/float32
    ``scales`` per block). ``storage``: "int8", "uint8" or "int4" (``values``
    then holds the packed bytes; ``int_values()`` unpacks them). ``scales``
    has shape ``[shape[axis]]`` per axis and ``shape[:axis] + (B,)`` per block
    (B blocks per row; flat scales given with that many values take that
    shape).
    """

    values: np.ndarray
    shape: tuple[int, ...]
    dtype: str
    scheme: str
    storage: str
    scale: Optional[float]
    zero_point: Optional[int]
    axis: Optional[int]
    scales: Optional[np.ndarray]
    zero_points: Optional[np.ndarray]
    block_size: Optional[int]

    def __init__(self, values: np.ndarray, shape: tuple[int, ...], dtype: str = ...,
                 scheme: str = ..., storage: str = ..., scale: Optional[float] = ...,
                 zero_point: Optional[int] = ..., axis: Optional[int] = ...,
                 scales: Optional[np.ndarray] = ..., zero_points: Optional[np.ndarray] = ...,
                 block_size: Optional[int] = ...) -> None:
        """A quantized tensor from its parts (validated when saved)."""
    @property
    def bits(self) -> int:
        """Bits per stored integer: 8 or 4."""
    def int_values(self) -> np.ndarray:
        """The stored integers as an array of ``shape`` (int8 for int4 storage)."""
    def dequantize(self, dtype: Optional[str] = None) -> np.ndarray:
        """The values the integers stand for, as a new array (None: the original dtype)."""


LoadedValue = Union[np.ndarray, SparseCOO, QuantizedTensor]
"""What load() returns per parameter (see the module docstring for dtypes)."""


class QuantizeResult:
    """What quantize() did."""

    quantized: list[str]
    referenced: list[str]
    source_bytes: int
    quantized_bytes: int
    bytes_written: int
    appended: bool


class Metadata:
    """Archive-level metadata (the entry modelzip.toml); optional fields are None when absent."""

    @property
    def format_version(self) -> int:
        """The archive format version (set by the writer)."""
    @property
    def writer(self) -> str:
        """The software that wrote the archive last (set at commit)."""
    model_name: Optional[str]
    """Name of the model, or None."""
    model_version: Optional[str]
    """Version of the model, or None."""
    quantization: Optional[str]
    """Quantization scheme, e.g. "none" or "int8-per-channel", or None."""
    description: Optional[str]
    """Free text, or None."""

    def __init__(self, *, model_name: Optional[str] = None, model_version: Optional[str] = None,
                 quantization: Optional[str] = None, description: Optional[str] = None) -> None:
        """Metadata with the given optional fields."""
    def __eq__(self, other: object) -> bool:
        """True when every field is equal."""


class ParamInfo:
    """What an archive says about one parameter (no tensor data is read)."""

    @property
    def name(self) -> str:
        """Parameter name (for updater state: the variable)."""
    @property
    def state(self) -> str:
        """Updater state name ("M", "V"...); "" for parameters."""
    @property
    def kind(self) -> str:
        """"tensor", or "embedding" for a finalfusion embedding parameter."""
    @property
    def dtype(self) -> str:
        """numpy-style dtype name: "float32", "bfloat16", "float8_e4m3fn", "complex64", "string"..."""
    @property
    def shape(self) -> tuple[int, ...]:
        """The dense shape; (rows, dims) for an embedding (() when its file's chunk headers
        cannot be read)."""
    @property
    def layout(self) -> str:
        """"dense" or "sparse_coo"."""
    @property
    def nbytes(self) -> int:
        """Uncompressed bytes of tensor data."""
    @property
    def blob(self) -> str:
        """Entry path of the blob in the zip."""
    @property
    def owner_tag(self) -> str:
        """The tag whose folder holds the blob."""
    @property
    def shared(self) -> bool:
        """True when the blob belongs to another tag (shared or deduplicated)."""
    @property
    def compressed(self) -> bool:
        """True when the blob is deflated."""


class WriteStats:
    """Statistics of one commit."""

    @property
    def bytes_written(self) -> int:
        """Size of the archive written."""
    @property
    def blobs_written(self) -> int:
        """New blob entries written."""
    @property
    def blobs_deduplicated(self) -> int:
        """Parameters written as references to equal blobs (dedup)."""
    @property
    def blobs_collected(self) -> int:
        """Unreferenced blobs dropped by collect_garbage()."""
    @property
    def bytes_collected(self) -> int:
        """Uncompressed bytes of the blobs dropped."""
    @property
    def appended(self) -> bool:
        """True when the commit changed the archive in place instead of rewriting it."""
    @property
    def bytes_freed(self) -> int:
        """Bytes of removed entries left as free entries by an in-place commit."""


class Archive:
    """A modelzip archive opened for reading (memory-mapped; a context manager).

    Every method may be called from several threads; long reads release the GIL.
    Methods raise ValueError after close().
    """

    def __init__(self, path: PathLike) -> None:
        """Opens (maps and validates) the archive at ``path``; raises Error if it is not valid."""
    @property
    def name(self) -> str:
        """The path given at open."""
    @property
    def closed(self) -> bool:
        """True after close()."""
    def close(self) -> None:
        """Releases the archive. Arrays already loaded stay valid (they keep the mapping)."""
    def changed_since_open(self) -> bool:
        """Whether the archive may no longer be what this Archive describes: another writer
        committed to the file since the open (or is committing), a rewrite replaced it, it was
        removed, or its size or times changed otherwise; reopen() then gives it as it is now.
        False for a remote archive (not asked)."""
    def reopen(self) -> Archive:
        """A new Archive of the same path or URL: the archive as it is now (this one stays
        open as it is)."""
    def __enter__(self) -> Archive:
        """Returns the archive itself."""
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        """Closes the archive."""
    def __repr__(self) -> str:
        """``<modelzip.Archive 'm.zip': 2 tags ['a', 'b'], newest 'b': 4 parameters (1.5 MiB)>``."""
    def __contains__(self, key: object) -> bool:
        """``"t" in archive``: a tag (ignoring case) or a parameter of the newest tag;
        ``("t", "w") in archive``: parameter ``w`` of tag ``t``."""
    def __getitem__(self, key: Union[str, tuple[str, str]]) -> LoadedValue:
        """``archive["w"]``: parameter ``w`` of the newest tag, ``archive["t", "w"]``: of tag
        ``t``, as ``tensor(name, tag)`` gives it (a read-only zero-copy view). NotFoundError
        (a KeyError) for a missing one; a tag alone is no item (``load(tag)``)."""
    __iter__: None  # type: ignore[assignment]  # indexed by name: not iterable
    @property
    def tags(self) -> list[str]:
        """Tags, oldest first."""
    @property
    def newest_tag(self) -> str:
        """The newest tag; raises NotFoundError when the archive has no tags."""
    def find_tag(self, tag: str) -> Optional[str]:
        """The stored spelling of ``tag`` (compared ignoring ASCII case), or None."""
    @property
    def metadata(self) -> Metadata:
        """The archive metadata (a copy)."""
    def params(self, tag: Optional[str] = None) -> list[ParamInfo]:
        """The parameters of ``tag`` (None: the newest), in stored order."""
    def param(self, name: str, tag: Optional[str] = None) -> ParamInfo:
        """One parameter's description; raises NotFoundError if absent."""
    def tensor(self, name: str, tag: Optional[str] = None, *, copy: bool = False,
               dequantize: bool = False, writable: bool = False) -> LoadedValue:
        """One parameter of ``tag`` (None: the newest) as numpy (see load())."""
    def load(self, tag: Optional[str] = None, *, copy: bool = False,
             dequantize: bool = False, names: Optional[Iterable[str]] = None,
             writable: bool = False, verify: bool = False) -> LoadedArrays:
        """Every tensor parameter of ``tag`` (None: the newest), by name, in stored order.

        Read-only zero-copy views for stored blobs unless ``copy=True`` or
        ``writable=True``. bfloat16 loads as uint16 bits, float8_e4m3fn and
        float8_e5m2 as uint8 bits, strings as object
        arrays of str, sparse tensors as SparseCOO, quantized tensors as
        QuantizedTensor or, with ``dequantize=True``, as new arrays of their
        original dtype. Embedding parameters are skipped (use embeddings()).
        ``names``: only these, in this order (NotFoundError for a missing one).
        ``writable``: writable views of a private copy-on-write mapping made for
        this call, no copy; writes reach neither the file, nor another load,
        nor another parameter (also one deduplicated into the same blob).
        ``verify``: check every blob's CRC-32 first (``copy=True`` always does).
        """
    def load_torch(self, tag: Optional[str] = None, *, dequantize: bool = False) -> dict[str, Any]:
        """Every tensor parameter of ``tag`` as torch tensors, without copies.

        modelzip.torch.load() on this archive (docs/torch.md): writable CPU
        tensors viewing a private copy-on-write mapping of the file; writes stay
        in this process. bfloat16 comes back as torch.bfloat16, float8_e4m3fn and
        float8_e5m2 as torch.float8_* (torch >= 2.1, else TypeError), sparse tensors
        as torch sparse COO. Quantized tensors as torch quantized tensors
        (affine, int8/uint8 of float32 values: exactly as saved), or float
        tensors with ``dequantize=True`` (required for block-wise and int4
        ones). quantize_dynamic state dicts come back whole (torch dtypes and
        packed-parameter tuples). Weights tied when saved (ties.json) come
        back as one tensor; every other name is its own tensor, also when
        deduplication stored it in the same blob as another. Text comes back as
        the str or lists of str saved, the other values of a state dict (Python
        and numpy scalars, None, bytes, sets, slices, lists and tuples...:
        _python_types) as themselves.
        Raises TypeError for parameters torch cannot hold (uint16/32/64).
        """
    def training_config(self, tag: Optional[str] = None) -> Optional[dict[str, Any]]:
        """The training config of ``tag`` (None: the newest) as a dict, or None if it has none.

        The shape `modelzip info --json` prints: {"updater": {"type": "Adam",
        "learning_rate": ..., ...}, "learning_rate_schedule": schedule or None,
        "regularization": [{"type": "l1"|"l2"|"weight_decay", "coefficient":
        schedule, "apply_learning_rate": bool}], "minimize": bool,
        "feature_mapping", "label_mapping", "feature_mask_mapping",
        "label_mask_mapping", "loss_variables": [str], "iteration_count": int,
        "epoch_count": int, "properties": {str: str}}; a schedule is
        {"schedule": "StepSchedule", "type": "iteration"|"epoch", <fields>}.
        """
    def updater_states(self, tag: Optional[str] = None) -> list[ParamInfo]:
        """Optimizer state arrays of ``tag`` (name = variable, state = state name)."""
    def updater_state(self, variable: str, state: str, tag: Optional[str] = None, *,
                      copy: bool = False, writable: bool = False) -> LoadedValue:
        """One optimizer state array, as numpy (see load(): copy and writable as there)."""
    def embeddings(self, name: str, tag: Optional[str] = None) -> Embeddings:
        """An embedding parameter as Embeddings (its matrix is a zero-copy view when stored)."""
    def verify(self, *, progress: Optional[Callable[[int, int], Optional[bool]]] = None
               ) -> list[tuple[str, str]]:
        """Checks everything (zip structure, every CRC-32, blob, reference).

        In a tag with graph.fb, also the rules that tie its parameters and
        updater state to its graph and training config (schemas/GRAPH.md
        section 4), each broken one reported under params.txt, updater.txt or
        trainingConfig.fb. Returns (entry, message) problems; empty when the
        archive is valid. At most 20 per entry, then one "... and N more
        problems in this entry": problems_found(problems) counts them all.
        ``progress`` is called as progress(bytes_done, bytes_total) after each
        entry checked; returning False cancels (Error with code "cancelled");
        an exception it raises, and Ctrl-C's KeyboardInterrupt, stop the
        check and are raised.
        """
    def has_entry(self, name: str) -> bool:
        """Whether the archive has an entry of this exact name."""
    def entry(self, name: str) -> bytes:
        """The contents of entry ``name`` (CRC-checked); NotFoundError if absent."""
    def open_entry(self, name: str) -> EntryReader:
        """Entry ``name`` as a binary file object read front to back in bounded memory
        (io.RawIOBase, not seekable); the read that reaches the end checks its size and
        CRC-32 (Error "corrupt" naming the entry). NotFoundError if absent."""
    def tag_metadata(self, tag: Optional[str] = None) -> dict[str, str]:
        """The free-form metadata of ``tag`` (None: the newest), {} without: what
        save(..., tag_metadata=) stored, or the "__metadata__" of imported safetensors
        files (safe_open(...).metadata() of safetensors)."""
    def entry_names(self) -> list[str]:
        """Every zip entry name, in central directory order."""


class EntryReader(io.RawIOBase):
    """A zip entry read front to back (Archive.open_entry): read, readinto, readall,
    readline, iteration; a context manager."""

    name: str

    @property
    def size(self) -> int:
        """The entry's size in bytes (uncompressed)."""
    def readinto(self, buffer: Any) -> int:
        """Fills the start of ``buffer`` (writable, C-contiguous); 0 at the end."""
    def tell(self) -> int:
        """Bytes read so far."""


class Writer:
    """Adds tags to an archive, removes tags, sets metadata; commit() writes atomically.

    Arrays given to add_tag() are borrowed (not copied) until commit() returns:
    do not modify them before. As a context manager, a clean exit commits the
    staged changes (if any) and an exception discards them. Not thread-safe.
    """

    def __init__(self, path: PathLike, *, dedup: bool = True, durable: bool = True,
                 append: bool = True,
                 progress: Optional[Callable[[int, int], Optional[bool]]] = None) -> None:
        """Opens ``path`` for modification (a missing file starts an empty archive).

        dedup: write arrays equal to a blob already in the archive as references.
        durable: fsync the file and folder before commit() returns.
        append: let commits that only add tags grow the archive in place
        (crash-safe, cost proportional to the new data) instead of rewriting it.
        progress: called as progress(bytes_done, bytes_total) during commit();
        returning False cancels (commit() raises Error with code "cancelled");
        an exception it raises is re-raised by commit().
        """
    def add_tag(self, tag: str, arrays: Mapping[str, Any], *,
                share: Optional[Mapping[str, tuple[str, str]]] = None,
                compress: Union[bool, Iterable[Union[str, tuple[str, str]]]] = False,
                bfloat16: Iterable[Union[str, tuple[str, str]]] = (),
                dtypes: Optional[Mapping[Union[str, tuple[str, str]], str]] = None,
                updater: Optional[Mapping[tuple[str, str], Any]] = None,
                training: Optional[Mapping[str, Any]] = None, replace: bool = False,
                _overlap_fetch: bool = False,
                tag_metadata: Optional[Mapping[str, str]] = None) -> None:
        """Stages a new tag (it becomes the newest) holding ``arrays``.

        arrays: name -> numpy array, torch tensor, anything with __array__ or
        .numpy(), str / (nested) list of str, SparseCOO, Embeddings, or the
        other values of a torch state dict: a Python int, float, complex, bool or
        None (stored 0-d, its type recorded in the tag's "_python_types"
        parameter; ValueError for an int beyond 64 bits), a numpy scalar, bytes,
        a torch.Size, torch.device, torch.dtype, slice, or a list, tuple, set of
        such values (one array when they are of one kind; numbers of several
        kinds are stored as np.array stores them, unrecorded; str beside other
        kinds, None, arrays or ragged ones element by element: docs/torch.md,
        "Python values"); a dict with str keys (a get_extra_state() dict) key by key.
        tag_metadata: {str: str}, the tag's free-form metadata (safetensors'
        save_file(metadata=)): Archive.tag_metadata() gives it back.
        share: {name: (tag, param)}: ``name`` is parameter ``param`` of tag ``tag``.
        compress: True, or the names to deflate (default: stored, zero-copy reads).
        dtypes: {name: "bfloat16" | "float8_e4m3fn" | "float8_e5m2" |
        "float8_e8m0fnu" | "float4_e2m1fn_x2"}: arrays
        holding the raw bits of a type numpy lacks (uint16/int16 for bfloat16,
        uint8/int8 for the others; TypeError for another itemsize,
        ValueError for another type name). torch tensors and ml_dtypes arrays
        of these types are recognised without it.
        bfloat16: names of uint16/int16 arrays holding bfloat16 bits (the older
        shorthand of ``dtypes={name: "bfloat16"}``).
        updater: {(variable, state): array}: optimizer state arrays; compress,
        dtypes and bfloat16 name them as (variable, state) tuples.
        training: the tag's training config (trainingConfig.fb) as a dict of the
        shape Archive.training_config() returns; absent keys take the schema's
        defaults (TypeError/ValueError for a malformed dict, InvalidArgumentError
        for values the schema forbids).
        replace: replace the tag of that name if there is one at commit (same
        commit; it cannot share from the tag it replaces).
        Raises Error (code "already_exists") if the tag exists in any letter
        case, in the archive or staged by this Writer, and ``replace`` is False.
        """
    def remove_tag(self, tag: str) -> None:
        """Stages removal of ``tag`` (ignoring case). Blobs other tags share are kept."""
    def keep_last(self, n: int) -> None:
        """Stages keeping only the newest ``n`` tags (n >= 1), removing older ones at commit."""
    def set_metadata(self, metadata: Metadata) -> None:
        """Deprecated (DeprecationWarning): use update_metadata(metadata)."""
    def update_metadata(self, fields: Union[Metadata, Mapping[str, Optional[str]]], *,
                        clear: bool = False) -> None:
        """Stages a change of the metadata fields named in ``fields`` (None clears one;
        with ``clear=True`` every field is cleared first; a Metadata replaces every
        field), applied at commit under the
        archive's write lock to the metadata it has then: a change another process
        committed in between is kept. ValueError for an unknown field."""
    def collect_garbage(self) -> None:
        """Stages dropping blob entries that no tag references any more."""
    def discard(self) -> None:
        """Drops every staged change (also those a failed commit() kept staged) and
        releases the borrowed arrays; the Writer stays open for new changes."""
    @property
    def tags(self) -> list[str]:
        """Tags as they will be after commit()."""
    def commit(self) -> WriteStats:
        """Writes everything staged (GIL released); on failure the old archive is untouched."""
    @property
    def last_stats(self) -> WriteStats:
        """WriteStats of the last commit() (also after close())."""
    @property
    def path(self) -> str:
        """The archive path."""
    @property
    def closed(self) -> bool:
        """True after close()."""
    def close(self) -> None:
        """Discards the staged changes and releases the borrowed arrays."""
    def __enter__(self) -> Writer:
        """Returns the writer itself."""
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        """Commits staged changes if the block raised nothing, then closes (also when that commit fails)."""


class Embeddings:
    """finalfusion word embeddings: lookups, similarity queries, analogies, quantization.

    Immutable and thread-safe; queries release the GIL. Unknown words get
    embeddings from their subwords when the vocabulary has subwords.
    """

    @staticmethod
    def open(path: PathLike, mmap: bool = True) -> Embeddings:
        """Reads a finalfusion file (memory-mapped unless mmap=False)."""
    @staticmethod
    def from_bytes(data: bytes) -> Embeddings:
        """Parses a complete finalfusion file held in ``data`` (copied)."""
    @staticmethod
    def load(path: PathLike, format: str = "finalfusion", *, normalize: bool = True,
             lossy: bool = False, utf8: Optional[str] = None) -> Embeddings:
        """Reads embeddings in ``format``.

        Formats: "finalfusion", "word2vec" (binary), "text" (GloVe), "textdims"
        (word2vec text), "fasttext" (.bin or quantized .ftz) or "floret" (text).
        normalize: store unit rows and keep the norms (as finalfusion does).
        utf8: words that are not valid UTF-8: "strict" (default: an error),
        "lossy" (invalid bytes become U+FFFD; a UnicodeWarning gives the count)
        or "escape" (reversible: ``\\\\`` for a backslash, ``\\xNN`` for an
        invalid byte; save() restores the original bytes).
        lossy: the same as utf8="lossy".
        """
    @staticmethod
    def from_matrix(words: list[str], matrix: Any, norms: Optional[list[float]] = None) -> Embeddings:
        """Embeddings of ``words`` (simple vocabulary), one row of ``matrix`` each; optional norms."""
    def save(self, path: PathLike, format: str = "finalfusion", *,
             normalize: bool = False) -> None:
        """Writes the embeddings in ``format`` (any of load()'s but "fasttext") via a temp file.

        Text and word2vec formats hold the word rows only, as the original
        vectors (rows times their norms, as ``modelzip export`` writes them);
        normalize=True writes the rows as stored (unit rows when normalized,
        ``export --normalized``), as C++ ``WriteOptions{.normalize}``. The keyword of
        earlier releases, ``unnormalize=`` (its opposite), still works with a
        DeprecationWarning. A finalfusion file keeps rows and norms. word2vec and text files end a word at whitespace:
        a word they cannot hold (a phrase, "") raises InvalidArgumentError
        naming it, and nothing is written.
        """
    def to_bytes(self) -> bytes:
        """The embeddings as a finalfusion file."""
    @property
    def name(self) -> str:
        """The name given when reading (or "")."""
    @property
    def dims(self) -> int:
        """Components per vector."""
    @property
    def rows(self) -> int:
        """Storage rows (words and subword rows)."""
    def __len__(self) -> int:
        """The number of known words."""
    @property
    def words(self) -> list[str]:
        """The known words, in storage row order (a new list)."""
    @property
    def vocab_kind(self) -> str:
        """The vocabulary type ("simple", "bucket_subwords", "fasttext_subwords"...)."""
    @property
    def quantized(self) -> bool:
        """True for product-quantized storage."""
    @property
    def metadata(self) -> Optional[str]:
        """The metadata chunk as TOML text, or None."""
    @property
    def matrix(self) -> Optional[np.ndarray]:
        """The storage matrix (rows x dims float32, read-only, zero-copy), or None when quantized."""
    @property
    def norms(self) -> Optional[np.ndarray]:
        """Per-word norms of the original vectors (read-only), or None."""
    def word_index(self, word: str) -> Optional[int]:
        """The row of a known word, or None."""
    def embedding(self, word: str) -> Optional[np.ndarray]:
        """The word's vector (a new float32 array), from subwords for unknown words; or None."""
    def unit_embedding(self, word: str) -> Optional[np.ndarray]:
        """The word's unit vector as similar()/analogy() compare it and ``modelzip embed`` prints it.

        The same bits whether the vectors are stored as unit rows with norms or
        as read (normalize=False); None when the word has no embedding.
        """
    def __getitem__(self, word: str) -> np.ndarray:
        """The word's vector; raises KeyError when it has none."""
    def __contains__(self, word: str) -> bool:
        """True when the word has an embedding (known, or through its subwords)."""
    def embeddings(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Batch lookup: (len(words) x dims float32 matrix, bool found mask); missing rows are zero."""
    def norm(self, word: str) -> Optional[float]:
        """The norm of the word's original vector, or None when it has no embedding.

        A known word: its stored norm (the L2 norm of its row when the file has
        none). An unknown word: the L2 norm of the sum of its subword rows before
        normalisation (floret: of their mean), not a norm fastText would report.
        """
    def similar(self, word: str, k: int = 10) -> Optional[Similarities]:
        """The k words most similar (cosine) to ``word``, best first, itself excluded; or None."""
    def similar_to(self, vector: Any, k: int = 10, skip: Iterable[str] = ()) -> Similarities:
        """The k words most similar to ``vector`` (dims floats), skipping the words in ``skip``."""
    def analogy(self, a: str, b: str, c: str, k: int = 10) -> Optional[Similarities]:
        """"a is to b as c is to ?": the k words nearest to b - a + c (the three excluded); or None."""
    def quantize(self, *, n_subquantizers: int = 0, n_centroids: int = 256,
                 n_iterations: int = 25, seed: int = 42, normalize: bool = True,
                 random_rotation: bool = False) -> tuple[Embeddings, float]:
        """Product-quantizes every storage row; returns (quantized embeddings, mean squared error)."""
    def dequantize(self) -> Embeddings:
        """A dense copy of quantized embeddings (dense input is returned as is)."""


def open(path: PathLike) -> Archive:
    """Opens the archive at ``path`` for reading (same as ``Archive(path)``)."""


def quantize(path: PathLike, from_tag: str, tag: str, *, scheme: str = "int8-per-channel",
             params: list[str] = ..., min_elements: int = 1024,
             durable: bool = True) -> QuantizeResult:
    """Adds ``tag``: ``from_tag``'s parameters quantized with ``scheme`` ("int8-per-tensor",
    "int8-per-channel", "int8-block32", "int4-block32"), everything else referenced."""
def load(path: PathLike, tag: Optional[str] = None, *, copy: bool = False,
         dequantize: bool = False) -> LoadedArrays:
    """Every tensor parameter of ``tag`` (None: the newest) of the archive at ``path``."""


def save(path: PathLike, tag: str, arrays: Mapping[str, Any], *,
         share: Optional[Mapping[str, tuple[str, str]]] = None,
         compress: Union[bool, Iterable[Union[str, tuple[str, str]]]] = False,
         bfloat16: Iterable[Union[str, tuple[str, str]]] = (),
         dtypes: Optional[Mapping[Union[str, tuple[str, str]], str]] = None,
         updater: Optional[Mapping[tuple[str, str], Any]] = None,
         metadata: Union[Metadata, Mapping[str, Optional[str]], None] = None,
         tag_metadata: Optional[Mapping[str, str]] = None,
         dedup: bool = True, durable: bool = True, append: bool = True,
         replace: bool = False, keep_last: Optional[int] = None,
         progress: Optional[Callable[[int, int], Optional[bool]]] = None) -> WriteStats:
    """Adds tag ``tag`` holding ``arrays`` to the archive at ``path`` (created if missing).

    ``replace``: replace an existing tag of that name in the same commit;
    ``keep_last``: then keep only the newest ``keep_last`` tags (same commit).
    Arrays are borrowed, not copied; see Writer.add_tag for the options;
    ``metadata`` updates the archive metadata as update_metadata() does;
    ``tag_metadata`` ({str: str}) is the tag's free-form metadata, as safetensors'
    save_file(metadata=) takes it (Archive.tag_metadata() gives it back).
    Returns the WriteStats of the commit.
    """


class SaveFuture(concurrent.futures.Future[WriteStats]):
    """A background save (save_async): result() waits and returns the WriteStats or raises;
    cancel() succeeds only before the save starts writing."""

    path: str
    tag: str

    def started(self) -> bool:
        """True once the save has started writing (or ended)."""


def save_async(path: PathLike, tag: str, arrays: Mapping[str, Any], *,
               share: Optional[Mapping[str, tuple[str, str]]] = None,
               compress: Union[bool, Iterable[Union[str, tuple[str, str]]]] = False,
               bfloat16: Iterable[Union[str, tuple[str, str]]] = (),
               dtypes: Optional[Mapping[Union[str, tuple[str, str]], str]] = None,
               updater: Optional[Mapping[tuple[str, str], Any]] = None,
               training: Optional[Mapping[str, Any]] = None,
               metadata: Union[Metadata, Mapping[str, Optional[str]], None] = None,
               tag_metadata: Optional[Mapping[str, str]] = None,
               dedup: bool = True, durable: bool = True, append: bool = True,
               replace: bool = False, keep_last: Optional[int] = None,
               keep_staging: bool = True) -> SaveFuture:
    """save() in the background: returns once the arrays are copied (later changes never
    reach the archive); replace and keep_last as for save(), in the save's one commit;
    one save per archive at a time (a second one queues, a third call waits); an error
    nobody retrieved is raised by the next save_async of the archive; interpreter exit
    waits for saves in flight, and a Ctrl-C during that wait rolls them back (the
    archive as it was) unless past their commit point. See docs/saving.md.
    """


def remove_tag(path: PathLike, tag: str, *, durable: bool = True) -> WriteStats:
    """Removes ``tag`` (ignoring case); blobs other tags share are kept."""


def collect_garbage(path: PathLike, *, durable: bool = True) -> WriteStats:
    """Drops blob entries no tag references (rewrites the archive); returns the WriteStats."""


def update_metadata(path: PathLike,
                    metadata: Union[Metadata, Mapping[str, Optional[str]], None] = None, *,
                    clear: bool = False, durable: bool = True,
                    **fields: Optional[str]) -> Metadata:
    """Updates the archive metadata under its write lock; returns the metadata written.

    A mapping ``metadata`` and keyword ``fields`` both update only the fields
    they name; None clears a field; ``clear=True`` clears every field first; a
    Metadata object replaces every field. A missing archive is created.
    """


def set_metadata(path: PathLike,
                 metadata: Union[Metadata, Mapping[str, Optional[str]], None] = None, *,
                 clear: bool = False, durable: bool = True, **fields: Optional[str]) -> Metadata:
    """Deprecated (DeprecationWarning): use update_metadata (same arguments)."""


def read_tensor_file(path: PathLike) -> tuple[dict[str, LoadedValue], dict[str, str]]:
    """Reads a .npy, .npz, .safetensors or .btf file (by extension): (tensors, metadata).

    Tensors by name in file order, as Archive.load() gives them (read-only
    views into the mapped file where the data allows; bfloat16 as uint16
    bits, float8_e4m3fn and float8_e5m2 as uint8 bits). metadata is safetensors' "__metadata__" ({} for other formats). A
    .npy tensor is named after the file's stem, BTF tensors "0", "1"...
    Quantized tensors written as integers + scales (NAME, NAME.scales,
    NAME.zero_points, NAME.quantization; see write_tensor_file) come back as
    QuantizedTensor, checked as archive blobs are.
    """


def write_tensor_file(path: PathLike, arrays: Mapping[str, Any], *,
                      metadata: Optional[Mapping[str, str]] = None,
                      bfloat16: Iterable[str] = (),
                      dtypes: Optional[Mapping[str, str]] = None) -> None:
    """Writes ``arrays`` (as for Writer.add_tag) to a .npy/.npz/.safetensors/.btf file.

    The format follows the extension; .npy holds exactly one array; metadata
    is for safetensors only. Written through a temporary file renamed over
    ``path``. Raises Error (code "unsupported") for what the format cannot
    hold (e.g. strings in safetensors). A QuantizedTensor NAME goes to .npz
    and .safetensors as plain arrays (docs/cli.md, "Export and import of quantized
    tensors"): NAME (the integers; int4 unpacked to one int8 per element),
    NAME.scales, NAME.zero_points (affine schemes) and the JSON description
    NAME.quantization (a safetensors metadata entry, in .npz a 0-d str
    array); .npy and .btf refuse it (dequantize() it first).
    """


def problems_found(problems: list[tuple[str, str]]) -> int:
    """How many problems Archive.verify() found, given the (entry, message) list it returned.

    One for each problem listed and N for each "... and N more problems in
    this entry" (verify lists at most 20 per entry), as C++
    modelzip::problems_found.
    """


def import_tensor_files(archive: PathLike, tag: str, paths: list[PathLike], *,
                        compress: bool = False, dedup: bool = True, durable: bool = True,
                        append: bool = True) -> WriteStats:
    """Adds tag ``tag`` to ``archive`` made of every tensor of the tensor files ``paths``.

    Goes straight from file to archive without numpy, so data types are kept
    exactly (bfloat16 and the float8 types stay what they are). The safetensors files' ``__metadata__`` is kept
    with the tag (export_tensor_file writes it back); two files that give one key
    different values raise InvalidArgumentError.
    Quantized tensors written as integers + scales are stored quantized again.
    """


def imported_metadata(archive: PathLike, tag: Optional[str] = None) -> dict[str, str]:
    """The safetensors ``__metadata__`` kept with ``tag`` (None: the newest) of ``archive``.

    Kept by import_tensor_files or ``modelzip import``; export_tensor_file writes
    it back and ``modelzip info`` shows it. {} when the tag keeps none.
    """
def export_tensor_file(archive: PathLike, path: PathLike, tag: Optional[str] = None, *,
                       metadata: Optional[Mapping[str, str]] = None) -> None:
    """Writes every tensor parameter of ``tag`` (None: the newest) to the tensor file ``path``.

    The format follows the extension, as for write_tensor_file (quantized
    tensors as integers + scales); embedding parameters are skipped. A .safetensors
    file gets the ``__metadata__`` kept with the tag by import_tensor_files (or
    ``modelzip import``), updated by ``metadata``.
    """
