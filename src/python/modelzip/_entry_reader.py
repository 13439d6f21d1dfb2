"""Archive.open_entry(): one zip entry as a binary file object read front to back."""
from __future__ import annotations

import io
from typing import Any


class EntryReader(io.RawIOBase):
    """Zip entry ``name`` of an archive, read front to back in bounded memory (the C++
    ``modelzip::EntryStream``). io.RawIOBase gives ``read``, ``readall``, ``readline`` and
    iteration on top of ``readinto``; it is not seekable. The read that reaches the end checks
    the entry's size and CRC-32 and raises ``modelzip.Error`` (code "corrupt", naming the
    entry) when they differ; after a failed read every read raises again."""

    def __init__(self, stream: Any, name: str) -> None:
        super().__init__()
        self._stream = stream
        self.name = name

    def readable(self) -> bool:
        self._check_open()
        return True

    def readinto(self, buffer: Any) -> int:
        self._check_open()
        return self._stream.readinto(buffer)

    @property
    def size(self) -> int:
        """The entry's size in bytes (uncompressed)."""
        self._check_open()
        return self._stream.size

    def tell(self) -> int:
        """Bytes read so far."""
        self._check_open()
        return self._stream.position

    def close(self) -> None:
        super().close()
        self._stream = None  # releases the entry (and the archive state it keeps)

    def _check_open(self) -> None:
        if self.closed:
            raise ValueError(f"I/O operation on closed entry {self.name!r}")

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.tell()} of {self.size} bytes read"
        return f"<modelzip entry {self.name!r}: {state}>"


EntryReader.__module__ = "modelzip"
