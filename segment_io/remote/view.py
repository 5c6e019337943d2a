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
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING

from segment_io.checkpoints import (
    format_leader_epoch_checkpoint,
    format_offset_checkpoint,
    parse_offset_checkpoint,
)
from segment_io.errors import KafkaTierSettings, OverlappingSegments
from segment_io.kafka_tier.url import SCHEME as KAFKA_TIER
from segment_io.kafka_tier.url import kafka_tier_sources, kafka_tier_url, url_params
from segment_io.layout import (
    CLEANER_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_CHECKPOINT,
    PARTITION_METADATA,
    SEGMENT_SUFFIXES,
    segment_file_name,
)
from segment_io.remote.manifest import PartitionManifest
from segment_io.remote.tier import RemoteTier
from segment_io.storage.base import FileInfo, Storage
from segment_io.storage.location import Location, Place
from segment_io.storage.log_view import LogView, local_start, replace_path, view_params, view_url
from segment_io.topic_partition import TopicPartition

if TYPE_CHECKING:
    from segment_io.kafka_tier.url import KafkaTierSource

SCHEME = "tiered"
ROOT = "tiered:"


def tiered_url(remote_url: str | None, local_url: str | None) -> str:
    """The URL that names a remote tier and, optionally, its local log directory as one log."""
    return view_url(SCHEME, {"remote": remote_url, "local": local_url})


def tiered_params(url: str) -> dict[str, str]:
    """Inverse of `tiered_url`: its parameters by name."""
    return view_params(SCHEME, url)


def log_location(
    path: Place,
    remote: Place | None = None,
    kafka_tier: KafkaTierSource | None = None,
    warn: Callable[[str], None] | None = None,
) -> Location:
    """What a command reads as its log: `path` itself (as opened, where it was), its log and the
    remote tier `remote` as one, a broker's log directory and its Kafka remote tier (KIP-405) read
    as `kafka_tier` says, or, where `path` is a remote tier, that tier alone. A broker's log
    directory with tiered topics read without its tier is refused (KafkaTierSettings), or, for a
    command that only looks, passed to `warn`."""
    at = Location.of(path)
    if kafka_tier:
        settings = Location(kafka_tier.settings)  # both named in full: the URL is opened elsewhere too
        url = kafka_tier_url(
            settings.storage.url(settings.path),
            at.storage.url(at.path),
            bootstrap=kafka_tier.bootstrap,
            verify=kafka_tier.verify,
            from_bucket=kafka_tier.from_bucket,
        )
        return Location(url)
    if remote:
        return Location(tiered_url(str(remote), at.url))
    if RemoteTier.is_tier(at):
        return Location(tiered_url(at.url, None))
    from segment_io.kafka_tier.extent import untiered_read

    hint = None if isinstance(at.storage, LogView) else untiered_read(at.storage, at.path)
    if hint is not None:
        if warn is None:
            raise KafkaTierSettings(hint)
        warn(f"warning: {hint}")  # the command prints it as a `segpipe:` line
    return at


def holds_kafka_tier(path: Place) -> bool:
    """Whether `path` is a broker's log directory with tiered topics (it holds the partitions of
    their remote log metadata), so a Kafka tier's settings apply to it."""
    from segment_io.kafka_tier.metadata_log import metadata_partitions

    at = Location.of(path)
    return not isinstance(at.storage, LogView) and bool(metadata_partitions(at.storage, at.path))


def log_url(path: str, remote: str | None = None, kafka_tier: KafkaTierSource | None = None) -> str:
    """`log_location` as a URL."""
    return log_location(path, remote, kafka_tier).url


def described(url: str) -> str:
    """A log's URL as the user named it: a two-tier URL as its places, anything else as it is."""

    if url.startswith(f"{KAFKA_TIER}:"):
        given = url_params(url)
        where = given.get("local") or given.get("metadata") or f"the cluster at {given.get('bootstrap')}"
        return f"{where} (with its Kafka remote tier, {given.get('settings')})"
    if url.startswith(f"{SCHEME}:"):
        given = tiered_params(url)
        if "local" in given:
            return f"{given['local']} (with its remote tier {given.get('remote')})"
        return str(given.get("remote"))
    return url


def sources_of(url: str) -> list[str]:
    """The locations a log URL reads: a tiered URL's remote tier and local directory, else itself
    (what a destination must stay outside of)."""

    if url.startswith(f"{KAFKA_TIER}:"):
        return kafka_tier_sources(url)
    if not url.startswith(f"{SCHEME}:"):
        return [url]
    params = tiered_params(url)
    return [u for u in (params.get("remote"), params.get("local")) if u]


def open_tiered(url: str) -> tuple[TieredView, str]:
    """Inverse of `tiered_url`."""
    params = tiered_params(url)
    return TieredView(params.get("remote"), params.get("local")), ROOT


class TieredView(LogView):
    protocol = SCHEME
    root = ROOT

    def __init__(self, remote_url: str | None, local_url: str | None) -> None:
        super().__init__(local_url)
        self.remote_url = remote_url
        self.remote = RemoteTier.open(remote_url) if remote_url else None

    def _stores(self) -> builtins.list[tuple[Storage, str]]:
        remote = [(self.remote.storage, self.remote.root)] if self.remote is not None else []
        return remote + super()._stores()

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
                local[0].path.rsplit("/", 1)[0],
                None,
                "a local segment that is no copy of the remote tier's begins inside a remote segment",
            )
        out: builtins.list[FileInfo] = []
        for f in local:
            start = local_start(f.name)
            kind = f.name.rpartition(".")[2]
            if start is not None and kind in SEGMENT_SUFFIXES and start < cut:
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
        if LEADER_EPOCH_CHECKPOINT not in names and manifest.leader_epochs:
            text = format_leader_epoch_checkpoint(list(manifest.leader_epochs))
            out.append(self._virtual_file(f"{tp.dir_name}/{LEADER_EPOCH_CHECKPOINT}", text))
        if PARTITION_METADATA not in names and manifest.partition_metadata is not None:
            out.append(
                self._virtual_file(f"{tp.dir_name}/partition.metadata", manifest.partition_metadata.encode())
            )
        return sorted(out, key=lambda f: f.name)


def _replaced_from(manifest: PartitionManifest, local: list[FileInfo]) -> int | None:
    """Where the view turns from remote segments to local ones: the remote log's end, or the
    first local segment below it (above the log start offset) that is no copy of a remote segment
    (same base, size and end) and no older form of an in-place clean's, from which the local log
    replaces the remote one, as `tier` will upload it; None where that segment begins inside a
    remote segment."""
    logs = sorted(
        (b, f.size) for f in local if f.name.endswith(".log") and (b := local_start(f.name)) is not None
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
