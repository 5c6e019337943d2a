"""The remote tier's layout and the only code that writes it (docs/remote-tier.md):

    REMOTE/segpipe-tier.json                        marks the prefix as a remote tier (format)
    REMOTE/<topic>-<partition>/manifest/<20-digit version>.json   partition manifest versions
    REMOTE/<topic>-<partition>/segments/<base>-<segment id>.<kind> segment objects, kind = log,
        index, timeindex, txnindex, snapshot; and .json, the segment's own manifest

Invariants: an object is referenced by a manifest version only after it was uploaded and read
back whole; a version is written whole, once, under a name no other writer can take
(`Storage.create_exclusive`), so the newest version is always complete and two writers that read
the same version cannot both commit; nothing the newest version references is ever deleted.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from segment_io.errors import ManifestConflict, NotALogDirectory, RemoteTierCorrupt, UploadFailed
from segment_io.layout import KAFKA_ROOT_FILES, TIER_MARKER, parse_topic_partition, stray_marker_detail
from segment_io.remote.manifest import (
    FORMAT_VERSION,
    PartitionManifest,
    RemoteObject,
    RemoteSegment,
    segment_manifest_bytes,
    segment_manifest_name,
    segment_object_name,
)
from segment_io.storage import FileInfo, Location, Place, Storage
from segment_io.topic_partition import TopicPartition

MANIFEST_DIR = "manifest"
SEGMENT_DIR = "segments"
VERSION_DIGITS = 20
# Transient store errors (throttling, 500s, dropped connections) are retried this many times
# with exponential backoff and jitter from BACKOFF_BASE_S; the last error is then reported.
UPLOAD_ATTEMPTS = 6
BACKOFF_BASE_S = 0.2
BACKOFF_MAX_S = 10.0

T = TypeVar("T")
# What is never worth retrying: the request itself is wrong, or access is denied.
PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, UploadFailed)


def retrying(action: Callable[[], T], what: str, sleep: Callable[[float], None] = time.sleep) -> T:
    """Run `action`, retrying transient store errors (OSError, connection errors) with backoff;
    a permanent one, or the last transient one, becomes UploadFailed naming `what`."""
    for attempt in range(UPLOAD_ATTEMPTS):
        try:
            return action()
        except PERMANENT as exc:
            if isinstance(exc, UploadFailed):
                raise
            raise UploadFailed(what, f"{type(exc).__name__}: {exc}") from None
        except (OSError, ConnectionError, TimeoutError) as exc:
            if attempt + 1 == UPLOAD_ATTEMPTS:
                raise UploadFailed(
                    what, f"{type(exc).__name__}: {exc} (after {UPLOAD_ATTEMPTS} attempts)"
                ) from None
            sleep(min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempt) * (0.5 + random.random() / 2))
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class SegmentUpload:
    """What one segment upload sends: the local files by kind (log first) and the manifest's
    metadata."""

    tp: TopicPartition
    base_offset: int
    end_offset: int
    largest_timestamp: int
    mtime_ms: int
    files: tuple[tuple[str, str], ...]  # (kind, path in the source storage)
    leader_epochs: tuple[tuple[int, int], ...] = ()


class RemoteTier:
    """A remote tier at `root` of `storage`."""

    def __init__(self, storage: Storage, root: str) -> None:
        self.storage = storage
        self.root = root

    @classmethod
    def open(cls, place: Place, create: bool = False) -> RemoteTier:
        """The tier at `place`; with `create`, an empty or absent prefix becomes one (its marker
        written). Anything else (a log directory, a `clean` output, other data) is refused: a
        marker is written only where nothing but a tier will ever be."""
        at = Location.of(place)
        storage = at.storage
        tier = cls(storage, at.path)
        if cls.is_tier(at):
            return tier
        if not create:
            raise NotALogDirectory(at.url, None, f"is not a remote tier (no {TIER_MARKER})")
        cls.require_place(at)
        marker = json.dumps({"format_version": FORMAT_VERSION, "layout": "segpipe remote tier"}).encode()
        with contextlib.suppress(FileExistsError):  # another writer made it first: the same
            storage.create_exclusive(tier.marker_path, marker + b"\n")
        return tier

    @classmethod
    def require_place(cls, place: Place) -> None:
        """Refuse `place` as a tier's place unless it is one, or empty, or absent."""
        at = Location.of(place)
        if cls.is_tier(at):
            return
        storage, root, url = at.storage, at.path, at.url
        present = storage.list(root) if storage.exists(root) else []
        if present:
            names = sorted(f"{f.name}/" if f.is_dir else f.name for f in present)
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            raise NotALogDirectory(
                url,
                None,
                f"is not empty and not a remote tier (it holds {shown}): a new tier needs an empty place",
            )

    @staticmethod
    def is_tier(place: Place) -> bool:
        """Whether `place` holds a tier's marker; a log directory that holds one by mistake (Kafka's
        root files or partition directories with files beside it) is refused, not read as a tier."""
        at = Location.of(place)
        storage, root, url = at.storage, at.path, at.url
        if not storage.exists(posixpath.join(root, TIER_MARKER)):
            return False
        entries = storage.list(root)
        kafka = any(not f.is_dir and f.name in KAFKA_ROOT_FILES for f in entries)
        first = next((f for f in entries if f.is_dir and parse_topic_partition(f.name) is not None), None)
        if not kafka and first is not None:
            kafka = any(not f.is_dir for f in storage.list(first.path))  # a tier's holds two folders
        if kafka:
            raise NotALogDirectory(url, None, stray_marker_detail(True))
        return True

    @property
    def url(self) -> str:
        return self.storage.url(self.root)

    @property
    def marker_path(self) -> str:
        return posixpath.join(self.root, TIER_MARKER)

    def partition_path(self, tp: TopicPartition) -> str:
        return posixpath.join(self.root, tp.dir_name)

    def object_path(self, tp: TopicPartition, name: str) -> str:
        return posixpath.join(self.root, tp.dir_name, SEGMENT_DIR, name)

    def manifest_dir(self, tp: TopicPartition) -> str:
        return posixpath.join(self.root, tp.dir_name, MANIFEST_DIR)

    def version_path(self, tp: TopicPartition, version: int) -> str:
        return posixpath.join(self.manifest_dir(tp), f"{version:0{VERSION_DIGITS}d}.json")

    def partitions(self) -> list[TopicPartition]:
        out = []
        for info in self.storage.list(self.root):
            tp = parse_topic_partition(info.name) if info.is_dir else None
            if tp is not None:
                out.append(tp)
        return sorted(out)

    def versions(self, tp: TopicPartition) -> list[int]:
        """Every committed version number of the partition's manifest, ascending."""
        out = []
        for info in self.storage.list(self.manifest_dir(tp)):
            stem, dot, ext = info.name.partition(".")
            if dot and ext == "json" and len(stem) == VERSION_DIGITS and stem.isdigit():
                out.append(int(stem))
        return sorted(out)

    def read_version(self, tp: TopicPartition, version: int) -> PartitionManifest:
        path = self.version_path(tp, version)
        data = self.storage.read(path)
        try:
            manifest = PartitionManifest.from_bytes(data)
        except (ValueError, KeyError, TypeError) as exc:
            raise RemoteTierCorrupt(
                self.storage.url(path), None, f"not a whole manifest version: {exc}"
            ) from None
        if manifest.version != version or manifest.tp != tp:
            raise RemoteTierCorrupt(self.storage.url(path), None, "names another partition or version")
        return manifest

    def read(self, tp: TopicPartition) -> PartitionManifest:
        """The newest version (version 0, empty, when nothing was committed yet)."""
        versions = self.versions(tp)
        return self.read_version(tp, versions[-1]) if versions else PartitionManifest.empty(tp)

    def commit(self, manifest: PartitionManifest) -> None:
        """Write `manifest` as its version; ManifestConflict when another writer took that
        version first (its writer read the same predecessor), and nothing is changed."""
        path = self.version_path(manifest.tp, manifest.version)
        try:
            self.storage.create_exclusive(path, manifest.to_bytes())
        except FileExistsError:
            raise ManifestConflict(self.storage.url(path), manifest.version) from None

    def segment_objects(self, tp: TopicPartition) -> list[FileInfo]:
        """Every object in the partition's segment folder (referenced or not)."""
        return self.storage.list(posixpath.join(self.partition_path(tp), SEGMENT_DIR))

    def upload(
        self,
        source: Storage,
        upload: SegmentUpload,
        throttle: Callable[[Iterable[bytes]], Iterator[bytes]] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> RemoteSegment:
        """Upload one segment's files under a new segment id, each read back and checked, then
        its segment manifest. Nothing references the objects until a manifest version commits
        them; an attempt that fails leaves objects no version names (expiry removes them)."""
        segment_id = uuid.uuid4().hex
        objects: dict[str, RemoteObject] = {}
        for kind, path in upload.files:
            name = segment_object_name(upload.base_offset, segment_id, kind)
            target = self.object_path(upload.tp, name)

            def put(path: str = path, target: str = target) -> RemoteObject:
                chunks: Iterable[bytes] = source.open_read(path)
                if throttle is not None:
                    chunks = throttle(chunks)
                sent = self.storage.upload(target, chunks)
                return RemoteObject(posixpath.basename(target), sent.size, sent.crc32c)

            objects[kind] = retrying(put, self.storage.url(target), sleep)
        segment = RemoteSegment(
            segment_id,
            upload.base_offset,
            upload.end_offset,
            upload.largest_timestamp,
            upload.mtime_ms,
            objects,
            upload.leader_epochs,
        )
        manifest_path = self.object_path(upload.tp, segment_manifest_name(upload.base_offset, segment_id))
        body = segment_manifest_bytes(upload.tp.topic, upload.tp.partition, segment)
        retrying(
            lambda: self.storage.write_atomic(manifest_path, body), self.storage.url(manifest_path), sleep
        )
        return segment

    def check_objects(self, manifest: PartitionManifest) -> None:
        """Every object the version references is present with its recorded size."""
        listed = {f.name: f.size for f in self.segment_objects(manifest.tp)}
        for segment in manifest.segments:
            for obj in segment.objects.values():
                size = listed.get(obj.name)
                if size != obj.size:
                    where = self.storage.url(self.object_path(manifest.tp, obj.name))
                    found = "missing" if size is None else f"{size} bytes"
                    raise RemoteTierCorrupt(
                        where,
                        None,
                        f"manifest version {manifest.version} says {obj.size} bytes, the store has {found}",
                    )
