"""LogView: a read-only Storage that shows a log kept in more than one place as one Kafka log
directory: a local log directory's files under their own URLs, files of another store, and small
files it generates (checkpoints only the other place knows). Each kind of view (segpipe's own
remote tier, Kafka's remote tier) decides what its listing holds; this base routes every listed
path back to where its bytes are and refuses every write."""

from __future__ import annotations

import builtins
import posixpath
from abc import abstractmethod
from collections.abc import Iterator, Mapping
from urllib.parse import parse_qs, quote, urlencode

import numpy as np

from segment_io.layout import parse_segment_file_quiet, parse_topic_partition
from segment_io.storage import open_storage
from segment_io.storage.base import FileInfo, PendingFile, Storage
from segment_io.topic_partition import TopicPartition


def view_url(scheme: str, params: Mapping[str, str | None]) -> str:
    """A view's URL: its scheme and the places and switches it reads, as a query string (every
    value quoted whole, so a URL inside it stays one value); empty values are left out. The URL
    is what a view is carried as to a Spark worker, which opens it again there."""
    return f"{scheme}:{urlencode({k: v for k, v in params.items() if v}, quote_via=quote, safe='')}"


def view_params(scheme: str, url: str) -> dict[str, str]:
    """Inverse of `view_url`: the parameters of a view's URL by name (the one place one is parsed)."""
    return {k: v[0] for k, v in parse_qs(url.removeprefix(f"{scheme}:")).items()}


class LogView(Storage):
    """`root` is the view's own path (its log directory); paths under it are the view's
    directories and generated files, every other path a real file's URL."""

    root: str

    def __init__(self, local_url: str | None) -> None:

        self.local_url = local_url
        self.local: tuple[Storage, str] | None = open_storage(local_url) if local_url else None
        self._virtual: dict[str, bytes] = {}

    # --- where a path lives ---------------------------------------------------------------------

    def _stores(self) -> builtins.list[tuple[Storage, str]]:
        """The stores this view's real files are in, with the root path each is read from."""
        return [self.local] if self.local is not None else []

    def _read_from(self) -> builtins.list[tuple[Storage, str]]:
        """Every store the view reads its bytes from (its real files' stores, and any it decodes)."""
        return self._stores()

    @property
    def near(self) -> bool:  # type: ignore[override]
        """Whether every store the view reads from is near (a local disk): a small run over the
        view then stays in the driver, as over a log directory, with no Spark to start."""
        stores = self._read_from()
        return bool(stores) and all(storage.near for storage, _ in stores)

    def _route(self, path: str) -> tuple[Storage, str]:
        """The storage and its own path for a real file's URL."""
        for storage, root in self._stores():
            prefix = storage.url(root).rstrip("/") + "/"
            if path.startswith(prefix):
                return storage, posixpath.join(root, path[len(prefix) :])
        raise FileNotFoundError(path)

    def _local_entries(self, name: str = "") -> builtins.list[FileInfo]:
        """The local log directory's entries (of partition directory `name`), under their URLs."""
        if self.local is None:
            return []
        storage, root = self.local
        return [
            FileInfo(storage.url(f.path), f.name, f.size, f.mtime_ms, f.is_dir)
            for f in storage.list(posixpath.join(root, name) if name else root)
        ]

    def _virtual_file(self, rel: str, data: bytes) -> FileInfo:
        path = f"{self.root}/{rel}"
        self._virtual[path] = data
        return FileInfo(path, posixpath.basename(rel), len(data), 0, False)

    def _generated(self, path: str) -> bytes | None:
        """A generated file's content; a view opened elsewhere (a Spark worker) lists first."""
        if path not in self._virtual and path.startswith(self.root + "/"):
            rel = path[len(self.root) + 1 :]
            self.list(f"{self.root}/{rel.split('/', 1)[0]}" if "/" in rel else self.root)
        return self._virtual.get(path)

    # --- listing -------------------------------------------------------------------------------

    def list(self, path: str) -> builtins.list[FileInfo]:
        """The view's root, one of its partition directories, or nothing."""
        if path == self.root:
            return self._list_root()
        if path.startswith(self.root):
            tp = parse_topic_partition(posixpath.basename(path))
            return self._list_partition(tp) if tp is not None else []
        return []

    @abstractmethod
    def _list_root(self) -> builtins.list[FileInfo]: ...

    @abstractmethod
    def _list_partition(self, tp: TopicPartition) -> builtins.list[FileInfo]: ...

    # --- reading -------------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        if path == self.root:
            return True
        if path.startswith(self.root):
            return self._generated(path) is not None or any(f.path == path for f in self.list(self.root))
        storage, own = self._route(path)
        return storage.exists(own)

    def is_file(self, path: str) -> bool:
        if path.startswith(self.root):
            return self._generated(path) is not None
        storage, own = self._route(path)
        return storage.is_file(own)

    def read(self, path: str, start: int = 0, end: int | None = None) -> bytes:
        generated = self._generated(path)
        if generated is not None:
            return generated[start:end]
        storage, own = self._route(path)
        return storage.read(own, start, end)

    def read_array(self, path: str) -> np.ndarray:
        if path.startswith(self.root):
            return super().read_array(path)
        storage, own = self._route(path)
        return storage.read_array(own)  # memory-mapped where the file is local

    def open_read(self, path: str) -> Iterator[bytes]:
        generated = self._generated(path)
        if generated is not None:
            yield generated
            return
        storage, own = self._route(path)
        yield from storage.open_read(own)

    # --- a view is never written -----------------------------------------------------------------

    def _read_only(self, *_: object, **__: object) -> None:
        raise PermissionError(f"a {self.protocol} view is read-only")

    def open_write(self, path: str) -> PendingFile:
        raise PermissionError(f"a {self.protocol} view is read-only")

    makedirs = _read_only
    copy = _read_only
    remove = _read_only
    rename = _read_only
    create_exclusive = _read_only


def replace_path(info: FileInfo, path: str) -> FileInfo:
    return FileInfo(path, info.name, info.size, info.mtime_ms, info.is_dir)


def local_start(name: str) -> int | None:
    """The offset a segment file's (or snapshot's) name begins with, None for other files."""
    stem = name.partition(".")[0]
    return int(stem) if parse_segment_file_quiet(name) and stem.isdigit() else None
