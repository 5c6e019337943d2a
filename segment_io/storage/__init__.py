"""Storage chosen by URL scheme: a local path (or `file://`) is the local disk, anything else an
fsspec file system (`s3://`, `memory://`, ...), behind one small interface (`base.Storage`)."""

from __future__ import annotations

import os
from typing import Any

from segment_io.storage.base import Checksum, FileInfo, PendingFile, Storage
from segment_io.storage.local import LocalStorage
from segment_io.storage.location import Location, Place
from segment_io.storage.object_store import ObjectStorage

__all__ = [
    "Checksum",
    "FileInfo",
    "LocalStorage",
    "Location",
    "ObjectStorage",
    "PendingFile",
    "Place",
    "Storage",
    "open_storage",
    "transfer",
]


def open_storage(url: str, **options: Any) -> tuple[Storage, str]:
    """The storage for `url` and the path inside it (local paths made absolute)."""
    if url.startswith("tiered:"):  # a local log directory and its remote tier, read as one
        from segment_io.remote.view import open_tiered

        return open_tiered(url)
    scheme, sep, rest = url.partition("://")
    if not sep or scheme == "file":
        path = os.path.abspath(rest if sep else url)
        return LocalStorage(), path.rstrip("/") or "/"
    import fsspec

    fs, path = fsspec.core.url_to_fs(url, **options)
    return ObjectStorage(fs), path.rstrip("/") or "/"


def transfer(src: Storage, src_path: str, dst: Storage, dst_path: str, mtime_ms: int | None = None) -> None:
    """Copy a file between storages in bounded memory; within one store (one local disk, one
    object store's client) with the store's own copy: the kernel's, or a server-side copy."""
    if src.same_store(dst):
        dst.copy(src_path, dst_path, mtime_ms)
        return
    pending = dst.open_write(dst_path)
    try:
        for chunk in src.open_read(src_path):
            pending.write(chunk)
    except BaseException:
        pending.discard()
        raise
    pending.commit(mtime_ms)
