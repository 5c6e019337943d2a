"""Storage chosen by URL scheme: a local path (or `file://`) is the local disk, anything else an
fsspec file system (`s3://`, `memory://`, ...), behind one small interface (`base.Storage`)."""

from __future__ import annotations

from segment_io.storage.base import Checksum, FileInfo, PendingFile, Storage
from segment_io.storage.local import LocalStorage
from segment_io.storage.location import Location, Place
from segment_io.storage.object_store import ObjectStorage
from segment_io.storage.opening import VIEW_OPENERS, open_storage

__all__ = [
    "Checksum",
    "FileInfo",
    "LocalStorage",
    "Location",
    "ObjectStorage",
    "PendingFile",
    "Place",
    "Storage",
    "VIEW_OPENERS",
    "open_storage",
    "load_client",
    "loaded_clients",
    "transfer",
]


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
