"""The exceptions raised by modelzip (re-exported as modelzip.Error, modelzip.NotFoundError)."""
from __future__ import annotations


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
        super().__init__(full_message)
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


Error.__module__ = "modelzip"
NotFoundError.__module__ = "modelzip"
