"""Storage chosen by URL scheme (local path, memory://, s3://, any fsspec URL) behind one small class."""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

import fsspec
import numpy as np
from fsspec.implementations.local import LocalFileSystem


@dataclass(frozen=True)
class FileInfo:
    """One listed file: full path (in the filesystem's own form), size and mtime in epoch ms."""

    path: str
    name: str
    size: int
    mtime_ms: int
    is_dir: bool


def _mtime_ms(info: dict[str, Any]) -> int:
    for key in ("mtime", "LastModified", "last_modified", "created"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, datetime):
            return int(value.timestamp() * 1000)
        return int(float(value) * 1000)
    return -1


class Storage:
    """A filesystem rooted nowhere in particular; paths are given in full (as fsspec lists them)."""

    def __init__(self, fs: fsspec.AbstractFileSystem, protocol: str) -> None:
        self.fs = fs
        self.protocol = protocol

    @classmethod
    def for_url(cls, url: str, **options: Any) -> tuple[Storage, str]:
        """Return the storage for `url` and the path inside it."""
        fs, path = fsspec.core.url_to_fs(url, **options)
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        return cls(fs, protocol), path.rstrip("/") or "/"

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, LocalFileSystem)

    def url(self, path: str) -> str:
        """A URL that `for_url` maps back to `path` on this storage."""
        if self.is_local:
            return path
        return f"{self.protocol}://{path.lstrip('/')}" if self.protocol != "memory" else f"memory://{path}"

    def list(self, path: str) -> list[FileInfo]:
        """Direct children of `path`, sorted by name; empty when `path` does not exist."""
        if not self.fs.exists(path):
            return []
        out = []
        for info in self.fs.ls(path, detail=True):
            full = info["name"].rstrip("/")
            out.append(
                FileInfo(
                    path=full,
                    name=posixpath.basename(full),
                    size=int(info.get("size") or 0),
                    mtime_ms=_mtime_ms(info),
                    is_dir=info.get("type") == "directory",
                )
            )
        return sorted(out, key=lambda f: f.name)

    def walk_files(self, path: str) -> Iterator[FileInfo]:
        for entry in self.list(path):
            if entry.is_dir:
                yield from self.walk_files(entry.path)
            else:
                yield entry

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(path))

    def size(self, path: str) -> int:
        return int(self.fs.size(path))

    def mtime_ms(self, path: str) -> int:
        return _mtime_ms(self.fs.info(path))

    def read(self, path: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes [start, end) of a file (to its end when `end` is None): a ranged read."""
        if start == 0 and end is None:
            return bytes(self.fs.cat_file(path))
        return bytes(self.fs.cat_file(path, start=start, end=end))

    def read_array(self, path: str) -> np.ndarray:
        """The whole file as a read-only uint8 array; local files are memory-mapped, so a shallow
        scan touches only the pages that hold batch headers."""
        if self.is_local:
            if os.path.getsize(path) == 0:
                return np.zeros(0, dtype=np.uint8)
            return np.asarray(np.memmap(path, dtype=np.uint8, mode="r"))
        return np.frombuffer(self.read(path), dtype=np.uint8)

    def open_write(self, path: str) -> tuple[IO[bytes], str | None]:
        """A streaming writer for `path` that publishes nothing until `finish_write`."""
        parent = posixpath.dirname(path)
        if parent:
            self.makedirs(parent)
        if self.is_local:
            tmp = f"{path}.{uuid.uuid4().hex}.tmp"
            return open(tmp, "wb"), tmp
        return self.fs.open(path, "wb"), None  # object stores publish on close

    def finish_write(
        self, handle: IO[bytes], tmp: str | None, path: str, mtime_ms: int | None = None
    ) -> None:
        handle.close()
        if tmp is not None:
            if mtime_ms is not None and mtime_ms >= 0:
                os.utime(tmp, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
            os.replace(tmp, path)

    def makedirs(self, path: str) -> None:
        self.fs.makedirs(path, exist_ok=True)

    def write_atomic(self, path: str, data: bytes | memoryview, mtime_ms: int | None = None) -> None:
        """Write a whole file so readers see either nothing or all of it.

        Local files go through a temporary name and rename; object stores publish a PUT whole.
        """
        parent = posixpath.dirname(path)
        if parent:
            self.makedirs(parent)
        if self.is_local:
            tmp = f"{path}.{uuid.uuid4().hex}.tmp"
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
            if mtime_ms is not None and mtime_ms >= 0:
                os.utime(tmp, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
            os.replace(tmp, path)
        else:
            self.fs.pipe_file(path, bytes(data))

    def copy(self, src: str, dst: str, mtime_ms: int | None = None) -> None:
        """Copy one file within this storage, keeping `mtime_ms` where the filesystem allows."""
        parent = posixpath.dirname(dst)
        if parent:
            self.makedirs(parent)
        if self.is_local:
            import shutil

            tmp = f"{dst}.{uuid.uuid4().hex}.tmp"
            shutil.copyfile(src, tmp)
            if mtime_ms is not None and mtime_ms >= 0:
                os.utime(tmp, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
            os.replace(tmp, dst)
        else:
            self.fs.copy(src, dst)

    def rename(self, src: str, dst: str) -> None:
        self.fs.mv(src, dst, recursive=True)

    def remove(self, path: str) -> None:
        if self.fs.exists(path):
            self.fs.rm(path, recursive=True)


def transfer(src: Storage, src_path: str, dst: Storage, dst_path: str, mtime_ms: int | None = None) -> None:
    """Copy a file between storages in bounded memory (same storage: a native copy)."""
    if src is dst or (src.is_local and dst.is_local):
        dst.copy(src_path, dst_path, mtime_ms)
        return
    handle, tmp = dst.open_write(dst_path)
    with src.fs.open(src_path, "rb") as reader:
        while chunk := reader.read(8 * 1024 * 1024):
            handle.write(chunk)
    dst.finish_write(handle, tmp, dst_path, mtime_ms)
