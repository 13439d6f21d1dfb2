"""The exceptions raised by modelzip (re-exported as modelzip.Error, modelzip.NotFoundError...).

Every failure of the library is a ``modelzip.Error``; some are also the
built-in exception Python code already handles for the same situation:

- ``NotFoundError`` (a missing tag, parameter or entry) is a ``KeyError``;
- ``InvalidArgumentError`` (a bad tag name, an impossible request) is a
  ``ValueError``;
- ``FileError`` (the operating system refused an open, read, write...) is an
  ``OSError`` with ``errno``, ``strerror`` and ``filename`` set, and is the
  built-in subclass the errno stands for: ``FileNotFoundError`` (ENOENT),
  ``PermissionError`` (EACCES, EPERM), ``IsADirectoryError``,
  ``NotADirectoryError``, ``FileExistsError``.
"""
from __future__ import annotations

import errno as _errno
import os


class Error(Exception):
    """Any failure of modelzip: bad input files, I/O errors, invalid requests.

    ``str(error)`` is the full message with its context, e.g.
    ``"model.zip: entry 'v2/params.txt': line 3: invalid escape '%G1'"``.
    The parts are also attributes:

    - ``code``: what kind of failure, one of ``"io"``, ``"corrupt"``,
      ``"not_found"``, ``"invalid_argument"``, ``"already_exists"``,
      ``"unsupported"``, ``"limit_exceeded"``, ``"cancelled"``.
    - ``message``: the bare message, without context.
    - ``archive``, ``entry``, ``tag``: where it happened (``None`` if unknown).
    - ``line``, ``offset``: 1-based line in a text entry / byte offset in an
      entry or file (``None`` if unknown).
    """

    def __init__(self, full_message: str, *, code: str = "", message: str | None = None,
                 archive: str | None = None, entry: str | None = None, tag: str | None = None,
                 line: int | None = None, offset: int | None = None) -> None:
        """Builds an error; modelzip itself fills in every field."""
        Exception.__init__(self, full_message)
        self.code = code
        self.message = full_message if message is None else message
        self.archive = archive
        self.entry = entry
        self.tag = tag
        self.line = line
        self.offset = offset


class NotFoundError(Error, KeyError):
    """A tag, parameter or entry that does not exist (``code == "not_found"``).

    Also a ``KeyError``, so ``except KeyError`` works as for a dict lookup.
    Unlike a plain ``KeyError``, ``str(error)`` is the message itself, not its repr.
    """

    def __str__(self) -> str:
        """The full message (not quoted as KeyError would)."""
        return Exception.__str__(self)


class InvalidArgumentError(Error, ValueError):
    """A request that cannot be done (code ``"invalid_argument"``): a bad tag or
    parameter name, inconsistent options... Also a ``ValueError``."""


class FileError(Error, OSError):
    """The operating system refused an operation on a file (code ``"io"``).

    Also an ``OSError``: ``errno`` is the system's error number (``None``
    when the failure did not come from a system call), ``strerror`` its
    text and ``filename`` the file concerned. Instances are also the
    built-in ``OSError`` subclass of their errno (``FileNotFoundError``,
    ``PermissionError``...), so ``except FileNotFoundError`` works.
    ``str(error)`` is modelzip's full message.
    """

    def __init__(self, full_message: str, *, errno: int | None = None, **context: object) -> None:
        """Builds an error; modelzip itself fills in every field."""
        Error.__init__(self, full_message, **context)  # type: ignore[arg-type]
        self.errno = errno or None
        self.strerror = os.strerror(errno) if errno else None
        self.filename = self.archive

    def __str__(self) -> str:
        """The full message (not OSError's "[Errno N] ..." form)."""
        return Exception.__str__(self)


class MissingFileError(FileError, FileNotFoundError):
    """A file that does not exist (ENOENT); also a ``FileNotFoundError``."""


class PermissionDeniedError(FileError, PermissionError):
    """A file or folder modelzip may not read or write (EACCES, EPERM); also a
    ``PermissionError``."""


def _file_error_class(name: str, builtin: type) -> type:
    cls = type(name, (FileError, builtin), {"__doc__": f"A FileError that is also a {builtin.__name__}."})
    cls.__module__ = "modelzip"
    return cls


_FILE_ERRORS: dict[int, type] = {
    _errno.ENOENT: MissingFileError,
    _errno.EACCES: PermissionDeniedError,
    _errno.EPERM: PermissionDeniedError,
    _errno.EISDIR: _file_error_class("IsADirectoryFileError", IsADirectoryError),
    _errno.ENOTDIR: _file_error_class("NotADirectoryFileError", NotADirectoryError),
    _errno.EEXIST: _file_error_class("FileExistsFileError", FileExistsError),
}


def error_class(code: str, errno: int) -> type:
    """The class modelzip raises for an error of ``code`` and system error number ``errno`` (0: none)."""
    if code == "not_found":
        return NotFoundError
    if code == "invalid_argument":
        return InvalidArgumentError
    if code == "io":
        return _FILE_ERRORS.get(errno, FileError)
    return Error


for _cls in (Error, NotFoundError, InvalidArgumentError, FileError, MissingFileError,
             PermissionDeniedError):
    _cls.__module__ = "modelzip"
