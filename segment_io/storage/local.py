"""Local disk: memory-mapped reads, writes through a temporary name renamed into place.

Durability: every file is fsynced before the rename that publishes it, so a file that is visible
after a power loss is whole; a directory's own entries (the renames into it) are made durable by
`sync_directory`, which publication calls for every directory it made.
"""

from __future__ import annotations

import ctypes
import functools
import os
import posixpath
import shutil
import uuid
from collections.abc import Callable, Iterator
from typing import IO

import numpy as np

from segment_io.storage.base import FileInfo, PendingFile, Storage

CHUNK_BYTES = 8 * 1024 * 1024
# Written bytes handed to the kernel's writeback as they accumulate (start_writeback), so that the
# fsync before a rename finds them on disk already and the disk works while the CPU does.
WRITEBACK_BYTES = 8 * 1024 * 1024
COPY_BYTES = 64 * 1024 * 1024  # what one copy_file_range call moves between writeback kicks
_SYNC_FILE_RANGE_WRITE = 2  # linux/fs.h: start writeback of the range's dirty pages, wait for none


@functools.cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """Linux's sync_file_range(2) from the C library, or None where there is none."""
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Start writing `length` bytes of `fd` from `offset` to disk without waiting for them (a
    hint: durability still comes only from the fsync before publication)."""
    function = _sync_file_range()
    if function is not None:
        function(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


def _set_mtime(path: str, mtime_ms: int | None) -> None:
    if mtime_ms is not None and mtime_ms >= 0:
        os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))


def _kernel_copy(source: int, target: int, size: int) -> None:
    """Copy `size` bytes between open files with copy_file_range (sendfile where the kernel or
    the file systems refuse it)."""
    done = 0
    try:
        while done < size:
            copied = os.copy_file_range(source, target, min(COPY_BYTES, size - done))
            if copied == 0:
                break
            start_writeback(target, done, copied)
            done += copied
    except OSError:  # EXDEV across older kernels' file systems, ENOSYS, EINVAL
        pass
    while done < size:
        copied = os.sendfile(target, source, done, size - done)
        if copied == 0:
            raise OSError(f"the source ended {size - done} bytes early")
        done += copied


def sync_directory(path: str) -> None:
    """Make the entries of directory `path` (files renamed into it) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temporary_name(path: str) -> str:
    """A sibling of `path` that listings ignore (`.tmp`) and no other writer picks."""
    return f"{path}.{uuid.uuid4().hex}.tmp"


class _LocalPending(PendingFile):
    def __init__(self, path: str) -> None:
        self.path = path
        self.tmp = temporary_name(path)
        self.handle: IO[bytes] = open(self.tmp, "wb")  # noqa: SIM115 (closed by commit/discard)
        self.written = 0  # bytes written so far
        self.handed = 0  # bytes handed to writeback so far

    def write(self, data: bytes | memoryview) -> None:
        self.written += self.handle.write(data)
        if self.written - self.handed >= WRITEBACK_BYTES:
            self.handle.flush()
            start_writeback(self.handle.fileno(), self.handed, self.written - self.handed)
            self.handed = self.written

    def commit(self, mtime_ms: int | None = None) -> None:
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        _set_mtime(self.tmp, mtime_ms)
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        self.handle.close()
        if os.path.exists(self.tmp):
            os.remove(self.tmp)


class LocalStorage(Storage):
    protocol = "file"
    renames_directories = True
    near = True

    def url(self, path: str) -> str:
        return path

    def canonical(self, path: str) -> str:
        return os.path.realpath(path)

    def list(self, path: str) -> list[FileInfo]:
        try:
            entries = list(os.scandir(path))
        except (FileNotFoundError, NotADirectoryError):
            return []
        out = []
        for entry in entries:
            try:
                stat = entry.stat()
                is_dir = entry.is_dir()
            except FileNotFoundError:  # renamed or removed since the directory was read: not there
                continue
            out.append(
                FileInfo(
                    path=posixpath.join(path, entry.name),
                    name=entry.name,
                    size=0 if is_dir else stat.st_size,
                    mtime_ms=int(stat.st_mtime * 1000),
                    is_dir=is_dir,
                )
            )
        return sorted(out, key=lambda f: f.name)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_file(self, path: str) -> bool:
        return os.path.isfile(path)

    def read(self, path: str, start: int = 0, end: int | None = None) -> bytes:
        with open(path, "rb") as handle:
            handle.seek(start)
            return handle.read() if end is None else handle.read(max(0, end - start))

    def read_array(self, path: str) -> np.ndarray:
        """Memory-mapped: a shallow scan touches only the pages that hold batch headers."""
        if os.path.getsize(path) == 0:
            return np.zeros(0, dtype=np.uint8)
        return np.asarray(np.memmap(path, dtype=np.uint8, mode="r"))

    def read_window(self, path: str, start: int, end: int, size: int) -> np.ndarray:
        """Memory-mapped whole: only the window's pages are ever read."""
        del start, end, size
        return self.read_array(path)

    def open_read(self, path: str) -> Iterator[bytes]:
        with open(path, "rb") as handle:
            while chunk := handle.read(CHUNK_BYTES):
                yield chunk

    def open_write(self, path: str) -> PendingFile:
        self.makedirs(posixpath.dirname(path))
        return _LocalPending(path)

    def makedirs(self, path: str) -> None:
        if path:
            os.makedirs(path, exist_ok=True)

    def copy(self, src: str, dst: str, mtime_ms: int | None = None) -> None:
        """A durable copy made by the kernel: no bytes pass through this process, and file
        systems that share extents (XFS, btrfs) share them instead of writing them again."""
        self.makedirs(posixpath.dirname(dst))
        tmp = temporary_name(dst)
        with open(src, "rb") as reader, open(tmp, "wb") as writer:
            _kernel_copy(reader.fileno(), writer.fileno(), os.fstat(reader.fileno()).st_size)
            os.fsync(writer.fileno())
        _set_mtime(tmp, mtime_ms)
        os.replace(tmp, dst)

    def same_store(self, other: Storage) -> bool:
        return isinstance(other, LocalStorage)

    def link(self, src: str, dst: str) -> None:
        """A hard link: `dst` is the same file as `src` (same inode, data and mtime), made by the
        file system in one step without copying a byte; both must be on one file system."""
        self.makedirs(posixpath.dirname(dst))
        tmp = temporary_name(dst)
        os.link(src, tmp)
        os.replace(tmp, dst)

    def create_exclusive(self, path: str, data: bytes) -> None:
        """Written whole under a temporary name, then hard-linked to `path`: the link fails when
        `path` exists, so the check and the publication are one step."""
        self.makedirs(posixpath.dirname(path))
        tmp = temporary_name(path)
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.link(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        sync_directory(posixpath.dirname(path) or ".")

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def rename_directory(self, src: str, dst: str) -> None:
        """Rename `src` to `dst` durably: every directory of `src` is synced first (the renames
        that put files in them), then the rename, then `dst`'s parent. An empty `dst` directory
        is replaced, a non-empty one refused with OSError (only another writer can have filled it)."""
        for directory, _, _ in os.walk(src, topdown=False):
            sync_directory(directory)
        if os.path.isdir(dst):
            os.rmdir(dst)
        os.rename(src, dst)
        sync_directory(os.path.dirname(dst) or ".")

    def remove(self, path: str) -> None:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)
