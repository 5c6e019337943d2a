"""The small interface every storage offers: list, read, write whole or streamed, copy, remove.

Paths are given in full, in the storage's own form (what `open_storage` returns and `list`
lists); `url(path)` maps one back to a URL that `open_storage` understands.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import crc32c
import numpy as np

from segment_io.errors import UploadFailed


@dataclass(frozen=True)
class FileInfo:
    """One listed file: full path (in the storage's own form), size and mtime in epoch ms."""

    path: str
    name: str
    size: int
    mtime_ms: int
    is_dir: bool


@dataclass(frozen=True)
class Checksum:
    """Size and CRC-32C of a file's bytes, extended chunk by chunk."""

    size: int
    crc32c: int

    def extend(self, chunk: bytes | memoryview) -> Checksum:
        return Checksum(self.size + len(chunk), crc32c.crc32c(chunk, self.crc32c))

    @classmethod
    def of(cls, data: bytes | memoryview) -> Checksum:
        return cls(0, 0).extend(data)


def checksum_of(chunks: Iterable[bytes | memoryview]) -> Checksum:
    """Size and CRC-32C of the bytes `chunks` make, one chunk held at a time."""
    held = Checksum(0, 0)
    for chunk in chunks:
        held = held.extend(chunk)
    return held


class PendingFile(ABC):
    """A file being written: nothing is visible at its path until `commit`, and nothing is left
    behind by `discard`."""

    @abstractmethod
    def write(self, data: bytes | memoryview) -> None: ...

    @abstractmethod
    def commit(self, mtime_ms: int | None = None) -> None:
        """Publish the file whole, with `mtime_ms` where the storage keeps it."""

    @abstractmethod
    def discard(self) -> None: ...


class Storage(ABC):
    """A file system rooted nowhere in particular (a local disk, an object store)."""

    protocol: str
    # Whether a directory can be renamed into place in one step (what publication relies on).
    renames_directories: bool = False
    # Files this process reads at disk speed, with no network between (a local disk): small jobs
    # may read them in the driver instead of starting workers.
    near: bool = False

    @abstractmethod
    def url(self, path: str) -> str:
        """A URL that `open_storage` maps back to `path` on this storage."""

    def canonical(self, path: str) -> str:
        """`path` in a form that compares equal for equal locations (symlinks resolved locally)."""
        return path

    @abstractmethod
    def list(self, path: str) -> list[FileInfo]:
        """Direct children of `path`, sorted by name; empty when `path` does not exist."""

    def walk_files(self, path: str) -> Iterator[FileInfo]:
        for entry in self.list(path):
            if entry.is_dir:
                yield from self.walk_files(entry.path)
            else:
                yield entry

    @abstractmethod
    def exists(self, path: str) -> bool: ...

    @abstractmethod
    def is_file(self, path: str) -> bool: ...

    @abstractmethod
    def read(self, path: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes [start, end) of a file (to its end when `end` is None): a ranged read."""

    def read_array(self, path: str) -> np.ndarray:
        """The whole file as a read-only uint8 array."""
        return np.frombuffer(self.read(path), dtype=np.uint8)

    def read_window(self, path: str, start: int, end: int, size: int) -> np.ndarray:
        """A file of `size` bytes as a uint8 array of which only bytes [start, end) are read: the
        rest are zeros never touched (nor backed by memory), so positions stay the file's."""
        out = np.zeros(size, dtype=np.uint8)
        out[start:end] = np.frombuffer(self.read(path, start, end), dtype=np.uint8)
        return out

    @abstractmethod
    def open_read(self, path: str) -> Iterator[bytes]:
        """The file's bytes in chunks of bounded size."""

    @abstractmethod
    def open_write(self, path: str) -> PendingFile:
        """A streaming writer for `path` that publishes nothing until its `commit`."""

    @abstractmethod
    def makedirs(self, path: str) -> None: ...

    def write_atomic(self, path: str, data: bytes | memoryview, mtime_ms: int | None = None) -> None:
        """Write a whole file so readers see either nothing or all of it."""
        pending = self.open_write(path)
        try:
            pending.write(data)
        except BaseException:
            pending.discard()
            raise
        pending.commit(mtime_ms)

    @abstractmethod
    def create_exclusive(self, path: str, data: bytes) -> None:
        """Write a whole small file only where nothing is at `path` yet, else FileExistsError: of
        writers racing for one name, exactly one wins (what a manifest commit relies on)."""

    def checksum(self, path: str) -> Checksum:
        """Size and CRC-32C of what the storage holds at `path`, read in bounded chunks."""
        return checksum_of(self.open_read(path))

    def upload(
        self, path: str, chunks: Iterable[bytes | memoryview], mtime_ms: int | None = None
    ) -> Checksum:
        """Write `chunks` to `path`, then read back what the storage holds and compare size and
        CRC-32C with what was sent (UploadFailed on a difference). Returns what was sent."""
        sent = Checksum(0, 0)
        pending = self.open_write(path)
        try:
            for chunk in chunks:
                pending.write(chunk)
                sent = sent.extend(chunk)
        except BaseException:
            pending.discard()
            raise
        pending.commit(mtime_ms)
        held = self.checksum(path)
        if held != sent:
            raise UploadFailed(
                self.url(path),
                f"the store holds {held.size} bytes with CRC-32C {held.crc32c:08x}, "
                f"{sent.size} bytes with CRC-32C {sent.crc32c:08x} were sent",
            )
        return sent

    @abstractmethod
    def rename(self, src: str, dst: str) -> None:
        """Rename one file (replacing `dst`)."""

    @abstractmethod
    def copy(self, src: str, dst: str, mtime_ms: int | None = None) -> None:
        """Copy one file within this storage, keeping `mtime_ms` where the storage allows."""

    def same_store(self, other: Storage) -> bool:
        """`other` reaches the same files with the same client, so a file moves from one to the
        other with this storage's own copy (no bytes through this process)."""
        return other is self

    def link(self, src: str, dst: str) -> None:
        """Make `dst` another name of the file `src` (only local disks have them)."""
        raise NotImplementedError(f"{self.protocol} storage has no hard links")

    def rename_directory(self, src: str, dst: str) -> None:
        """Move a directory into place in one step (only where `renames_directories`)."""
        raise NotImplementedError(f"{self.protocol} storage cannot rename a directory atomically")

    @abstractmethod
    def remove(self, path: str) -> None:
        """Remove a file or a whole directory; nothing happens when it does not exist."""

    def abort_uploads(self, path: str) -> int:
        """Abort unfinished multipart uploads under `path` (object stores bill them and do not
        list them); returns how many. Nothing to do elsewhere."""
        return 0
