"""A file of a Storage as a seekable binary file object, read through the storage's ranged reads:
what pyarrow's Parquet and CSV readers take, so that a reader fetches only what it needs of the
file (a Parquet footer, one row group) wherever the file lies."""

from __future__ import annotations

import io
from typing import Any

from segment_io.storage.base import Storage


class StorageFile(io.RawIOBase):
    """A file of a Storage read through its ranged reads (what pyarrow's readers take), so that
    a reader reads only what it needs of it (a Parquet footer, one row group)."""

    def __init__(self, storage: Storage, path: str, size: int) -> None:
        self._storage, self._path, self._size, self._at = storage, path, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._size}[whence]
        self._at = base + offset
        return self._at

    def readinto(self, buffer: Any) -> int:
        end = min(self._size, self._at + len(buffer))
        data = self._storage.read(self._path, self._at, end) if end > self._at else b""
        buffer[: len(data)] = data
        self._at += len(data)
        return len(data)
