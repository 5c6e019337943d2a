"""Storage chosen by URL scheme: a local path (or `file://`) is the local disk, anything else an
fsspec file system (`s3://`, `memory://`, ...), behind one small interface (`base.Storage`)."""

from __future__ import annotations

import importlib
import os
from typing import Any, cast

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
    "load_client",
    "loaded_clients",
    "transfer",
]


# Views that read a log kept in several places as one log directory, by their URL's scheme: the
# module and function that open one (imported on use: a view's module imports storage itself).
VIEW_OPENERS = {
    "tiered": ("segment_io.remote.view", "open_tiered"),  # a log directory and segpipe's remote tier
    "kafka-tier": ("segment_io.kafka_tier.view", "open_kafka_tier"),  # a broker's and its KIP-405 tier
}


def open_storage(url: str, **options: Any) -> tuple[Storage, str]:
    """The storage for `url` and the path inside it (local paths made absolute)."""
    view, colon, _ = url.partition(":")
    if colon and view in VIEW_OPENERS:
        module, function = VIEW_OPENERS[view]
        opener: Any = getattr(importlib.import_module(module), function)
        return cast(tuple[Storage, str], opener(url))
    scheme, sep, rest = url.partition("://")
    if not sep or scheme == "file":
        path = os.path.abspath(rest if sep else url)
        return LocalStorage(), path.rstrip("/") or "/"
    import fsspec

    fs, path = fsspec.core.url_to_fs(url, **options)
    return ObjectStorage(fs), path.rstrip("/") or "/"


def load_client(url: str) -> None:
    """Import the client of the object store `url` names (s3fs for `s3://`) without opening it: no
    connection, no thread. A process that forks workers before its first request (to a store
    whose client then starts an I/O thread) gives them the client already imported."""
    import fsspec

    scheme, sep, _ = url.partition("://")
    if sep and scheme != "file" and scheme.isidentifier():
        fsspec.get_filesystem_class(scheme)


def loaded_clients() -> list[str]:
    """The modules of the object-store clients this process has loaded (`load_client`, or a store
    it opened), other than fsspec's own: what a process forking workers for the same stores gives
    them already imported (s3fs: about half a second in each worker)."""
    from fsspec.registry import registry

    return sorted({c.__module__ for c in registry.values() if not c.__module__.startswith("fsspec.")})


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
