"""A local log directory and its remote tier, read as one Kafka log directory.

`TieredView` is a read-only `Storage` whose listing is what a broker's log directory would hold
if every segment were local: the remote tier's segments (under their Kafka file names) up to the
newest manifest's end, then the local segments above it, the local snapshots and checkpoints,
and, for what only the remote tier knows, the leader-epoch checkpoint, partition.metadata and
log-start-offset checkpoint generated from its manifests. Every reader (inspect, dump, the data
source, clean, restore) takes it like any other storage. Files are named by their real URL, so an
error names the object; its own URL (`tiered:...`) reopens it in Spark's workers.
"""

from __future__ import annotations

import builtins
import posixpath
from collections.abc import Callable, Iterator
from functools import cached_property
from urllib.parse import parse_qs, quote, urlencode

import numpy as np

from segment_io.checkpoints import (
    format_leader_epoch_checkpoint,
    format_offset_checkpoint,
    parse_offset_checkpoint,
)
from segment_io.errors import OverlappingSegments
from segment_io.layout import (
    CLEANER_CHECKPOINT,
    LOG_START_CHECKPOINT,
    parse_segment_file_quiet,
    parse_topic_partition,
    segment_file_name,
)
from segment_io.remote.manifest import PartitionManifest
from segment_io.remote.tier import RemoteTier
from segment_io.storage.base import FileInfo, PendingFile, Storage
from segment_io.storage.location import Location, Place
from segment_io.topic_partition import TopicPartition

SCHEME = "tiered"
ROOT = "tiered:"
SEGMENT_KINDS = ("log", "index", "timeindex", "txnindex")


def tiered_url(remote_url: str | None, local_url: str | None) -> str:
    """The URL that names a remote tier and, optionally, its local log directory as one log."""
    params = {k: v for k, v in (("remote", remote_url), ("local", local_url)) if v}
    return f"{SCHEME}:{urlencode(params, quote_via=quote, safe='')}"


def log_location(path: Place, remote: Place | None = None) -> Location:
    """What a command reads as its log: `path` itself (as opened, where it was), its log and the
    remote tier `remote` as one, or, where `path` is a remote tier, that tier alone."""
    at = Location.of(path)
    if remote:
        return Location(tiered_url(str(remote), at.url))
    if RemoteTier.is_tier(at):
        return Location(tiered_url(at.url, None))
    return at


def log_url(path: str, remote: str | None = None) -> str:
    """`log_location` as a URL."""
    return log_location(path, remote).url


def sources_of(url: str) -> list[str]:
    """The locations a log URL reads: a tiered URL's remote tier and local directory, else itself
    (what a destination must stay outside of)."""
    if not url.startswith(f"{SCHEME}:"):
        return [url]
    params = {k: v[0] for k, v in parse_qs(url.removeprefix(f"{SCHEME}:")).items()}
    return [u for u in (params.get("remote"), params.get("local")) if u]


def open_tiered(url: str) -> tuple[TieredView, str]:
    """Inverse of `tiered_url`."""
    params = {k: v[0] for k, v in parse_qs(url.removeprefix(f"{SCHEME}:")).items()}
    return TieredView(params.get("remote"), params.get("local")), ROOT


def _local_start(name: str) -> int | None:
    stem = name.partition(".")[0]
    return int(stem) if parse_segment_file_quiet(name) and stem.isdigit() else None


class TieredView(Storage):
    protocol = SCHEME

    def __init__(self, remote_url: str | None, local_url: str | None) -> None:
        from segment_io.storage import open_storage

        self.remote_url = remote_url
        self.local_url = local_url
        self.remote = RemoteTier.open(remote_url) if remote_url else None
        self.local: tuple[Storage, str] | None = open_storage(local_url) if local_url else None
        self._virtual: dict[str, bytes] = {}

    # --- where a path lives ---------------------------------------------------------------

    def _route(self, path: str) -> tuple[Storage, str]:
        """The storage and its own path for a real file's URL."""
        if self.remote is not None:
            prefix = self.remote.url.rstrip("/") + "/"
            if path.startswith(prefix):
                return self.remote.storage, posixpath.join(self.remote.root, path[len(prefix) :])
        if self.local is not None:
            storage, root = self.local
            prefix = storage.url(root).rstrip("/") + "/"
            if path.startswith(prefix):
                return storage, posixpath.join(root, path[len(prefix) :])
        raise FileNotFoundError(path)

    @cached_property
    def manifests(self) -> dict[TopicPartition, PartitionManifest]:
        """The newest manifest version of every partition of the remote tier, read once."""
        if self.remote is None:
            return {}
        return {tp: self.remote.read(tp) for tp in self.remote.partitions()}

    def url(self, path: str) -> str:
        if path == ROOT:
            return tiered_url(self.remote_url, self.local_url)
        return path

    # --- listing ---------------------------------------------------------------------------

    def list(self, path: str) -> list[FileInfo]:
        if path == ROOT:
            return self._list_root()
        if path.startswith(ROOT):
            tp = parse_topic_partition(posixpath.basename(path))
            return self._list_partition(tp) if tp is not None else []
        return []

    def _local_entries(self, name: str = "") -> builtins.list[FileInfo]:
        if self.local is None:
            return []
        storage, root = self.local
        return [
            FileInfo(storage.url(f.path), f.name, f.size, f.mtime_ms, f.is_dir)
            for f in storage.list(posixpath.join(root, name) if name else root)
        ]

    def _list_root(self) -> builtins.list[FileInfo]:
        generated = (LOG_START_CHECKPOINT, CLEANER_CHECKPOINT)
        entries = {f.name: f for f in self._local_entries() if f.name not in generated}
        for tp in self.manifests:
            entries.setdefault(tp.dir_name, FileInfo(f"{ROOT}/{tp.dir_name}", tp.dir_name, 0, 0, True))
        entries = {
            name: (replace_path(f, f"{ROOT}/{name}") if f.is_dir else f) for name, f in entries.items()
        }
        for name, remote_offset in (
            (LOG_START_CHECKPOINT, _moved_log_start),
            (CLEANER_CHECKPOINT, _cleaner_offset),
        ):
            offsets = self._checkpoint(name, remote_offset)
            if offsets:
                entries[name] = self._virtual_file(name, format_offset_checkpoint(offsets))
        return sorted(entries.values(), key=lambda f: f.name)

    def _checkpoint(
        self, name: str, remote_offset: Callable[[PartitionManifest], int | None]
    ) -> dict[TopicPartition, int]:
        """A root checkpoint: the local one's entries, raised to what the manifests record."""
        offsets: dict[TopicPartition, int] = {}
        local = {f.name: f for f in self._local_entries()}
        if name in local:
            path = local[name].path
            offsets.update(parse_offset_checkpoint(self.read(path), path))
        for tp, manifest in self.manifests.items():
            offset = remote_offset(manifest)
            if offset is not None:
                offsets[tp] = max(offsets.get(tp, 0), offset)
        return offsets

    def _list_partition(self, tp: TopicPartition) -> builtins.list[FileInfo]:
        manifest = self.manifests.get(tp)
        local = self._local_entries(tp.dir_name)
        if manifest is None or not manifest.segments:
            return local
        assert self.remote is not None
        cut = _replaced_from(manifest, local)
        if cut is None:
            raise OverlappingSegments(
                local[0].path.rsplit("/", 1)[0], None,
                "a local segment that is no copy of the remote tier's begins inside a remote segment",
            )  # fmt: skip
        out: builtins.list[FileInfo] = []
        for f in local:
            start = _local_start(f.name)
            kind = f.name.rpartition(".")[2]
            if start is not None and kind in SEGMENT_KINDS and start < cut:
                continue  # the remote tier holds this segment: it is read from there
            out.append(f)
        names = {f.name for f in out}
        for segment in (s for s in manifest.segments if s.base_offset < cut):
            for kind, obj in segment.objects.items():
                offset = segment.end_offset + 1 if kind == "snapshot" else segment.base_offset
                name = segment_file_name(offset, kind)
                if name not in names:
                    url = self.remote.storage.url(self.remote.object_path(tp, obj.name))
                    out.append(FileInfo(url, name, obj.size, segment.mtime_ms, False))
        if "leader-epoch-checkpoint" not in names and manifest.leader_epochs:
            text = format_leader_epoch_checkpoint(list(manifest.leader_epochs))
            out.append(self._virtual_file(f"{tp.dir_name}/leader-epoch-checkpoint", text))
        if "partition.metadata" not in names and manifest.partition_metadata is not None:
            out.append(
                self._virtual_file(f"{tp.dir_name}/partition.metadata", manifest.partition_metadata.encode())
            )
        return sorted(out, key=lambda f: f.name)

    def _virtual_file(self, rel: str, data: bytes) -> FileInfo:
        path = f"{ROOT}/{rel}"
        self._virtual[path] = data
        return FileInfo(path, posixpath.basename(rel), len(data), 0, False)

    def _generated(self, path: str) -> bytes | None:
        """A generated file's content; a view opened elsewhere (a Spark worker) lists first."""
        if path not in self._virtual and path.startswith(ROOT + "/"):
            rel = path[len(ROOT) + 1 :]
            if "/" in rel:
                self.list(f"{ROOT}/{rel.split('/', 1)[0]}")
            else:
                self.list(ROOT)
        return self._virtual.get(path)

    # --- reading -------------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        if path == ROOT:
            return True
        if path.startswith(ROOT):
            return self._generated(path) is not None or any(f.path == path for f in self._list_root())
        storage, own = self._route(path)
        return storage.exists(own)

    def is_file(self, path: str) -> bool:
        if path.startswith(ROOT):
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
        if path.startswith(ROOT):
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

    # --- a view is never written ---------------------------------------------------------------

    def _read_only(self, *_: object, **__: object) -> None:
        raise PermissionError("a tiered view is read-only")

    def open_write(self, path: str) -> PendingFile:
        raise PermissionError("a tiered view is read-only")

    makedirs = _read_only
    copy = _read_only
    remove = _read_only
    rename = _read_only
    create_exclusive = _read_only


def _replaced_from(manifest: PartitionManifest, local: list[FileInfo]) -> int | None:
    """Where the view turns from remote segments to local ones: the remote log's end, or the
    first local segment below it (above the log start offset) that is no copy of a remote segment
    (same base, size and end) and no older form of an in-place clean's, from which the local log
    replaces the remote one, as `tier` will upload it; None where that segment begins inside a
    remote segment."""
    logs = sorted(
        (b, f.size) for f in local if f.name.endswith(".log") and (b := _local_start(f.name)) is not None
    )
    remote = {s.base_offset: s for s in manifest.segments}
    for i, (base, size) in enumerate(logs):
        if base >= manifest.next_offset:
            break
        upper = logs[i + 1][0] if i + 1 < len(logs) else None
        if upper is not None and upper <= manifest.log_start_offset:
            continue  # below the log start offset: gone from the log, whatever the local copy
        if upper is None:  # the last local segment: its end is not known from a listing
            if (seg := remote.get(base)) is not None and seg.size == size:
                continue
        elif manifest.copy_of(base, upper, size) or manifest.rewritten_in_tier(base, upper):
            continue
        return base if base in remote or base < manifest.segments[0].base_offset else None
    return manifest.next_offset


def _moved_log_start(manifest: PartitionManifest) -> int | None:
    """Only where retention moved it past the first segment (else Kafka's default holds)."""
    if manifest.segments and manifest.log_start_offset > manifest.segments[0].base_offset:
        return manifest.log_start_offset
    return None


def _cleaner_offset(manifest: PartitionManifest) -> int | None:
    return manifest.cleaner_offset


def replace_path(info: FileInfo, path: str) -> FileInfo:
    return FileInfo(path, info.name, info.size, info.mtime_ms, info.is_dir)
