"""A broker's log directory and its Kafka remote tier (KIP-405), read as one Kafka log directory.

`KafkaTierView` is a read-only Storage whose listing is what the broker's log directory would
hold if every segment were local: for each tiered partition, the remote segments the broker
serves (its remote log metadata replayed, the leader epoch chain followed) under their Kafka file
names, then the local segments above the remote log's end; everything else of the log directory
as it is. A remote segment's files are named by its objects' URLs, so an error names the object
and the segment; its bytes are read through the plugin's layout, only the chunks a read needs.
Its own URL (`kafka-tier:...`) reopens it in Spark's workers.
"""

from __future__ import annotations

import builtins
import contextlib
import itertools
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from urllib.parse import parse_qs, quote, urlencode

import numpy as np

from segment_io.checkpoints import (
    format_leader_epoch_checkpoint,
    parse_leader_epoch_checkpoint,
    parse_offset_checkpoint,
)
from segment_io.errors import KafkaTierCorrupt, KafkaTierSettings, OverlappingSegments
from segment_io.kafka_tier.aiven import AivenSegment
from segment_io.kafka_tier.keyring import Keyring
from segment_io.kafka_tier.local_tiered import LocalTieredSegment
from segment_io.kafka_tier.metadata import MetadataRecord, SegmentMetadata, TopicIdPartition
from segment_io.kafka_tier.metadata_cache import MetadataReplay, PartitionState, epoch_chain, remote_log
from segment_io.kafka_tier.metadata_live import read_metadata_live
from segment_io.kafka_tier.metadata_log import read_metadata_log
from segment_io.kafka_tier.objects import SegmentObjects
from segment_io.kafka_tier.settings import AIVEN_RSM, METADATA_TOPIC, TierSettings
from segment_io.layout import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_CHECKPOINT,
    PARTITION_METADATA,
    SEGMENT_SUFFIXES,
    parse_topic_partition,
    segment_file_name,
)
from segment_io.segment.scan import scan_buffer
from segment_io.storage.base import FileInfo
from segment_io.storage.log_view import LogView, local_start, replace_path
from segment_io.topic_partition import TopicPartition

SCHEME = "kafka-tier"
ROOT = "kafka-tier:"
CHECK_THREADS = 8
_INDEX_KINDS = ("index", "timeindex", "txnindex")


@dataclass(frozen=True)
class KafkaTierSource:
    """How a broker's log directory is read with its Kafka remote tier: the broker's tiered-storage
    settings (a properties file), and, to read the remote log metadata from a live cluster rather
    than from the log directory's partitions, the cluster's bootstrap servers."""

    settings: str
    bootstrap: str | None = None


def kafka_tier_url(
    settings: str,
    local: str | None = None,
    metadata: str | None = None,
    bootstrap: str | None = None,
    remote_only: bool = False,
) -> str:
    """The URL of a Kafka remote tier: the broker's tiered-storage settings (a properties file),
    its log directory (local segments, checkpoints and, unless `metadata` names another log
    directory or `bootstrap` a live cluster to read it from, the `__remote_log_metadata`
    partitions). `remote_only`: the remote segments alone, no local one (a running broker's,
    which it is writing)."""
    given = (("settings", settings), ("local", local), ("metadata", metadata), ("bootstrap", bootstrap),
             ("remote_only", "1" if remote_only else None))  # fmt: skip
    params = {k: v for k, v in given if v}
    return f"{SCHEME}:{urlencode(params, quote_via=quote, safe='')}"


def _params(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(url.removeprefix(f"{SCHEME}:")).items()}


def kafka_tier_sources(url: str) -> list[str]:
    """The places a Kafka tier URL reads (what a destination must stay outside of)."""
    params = _params(url)
    found = [u for u in (params.get("local"), params.get("metadata")) if u]
    with contextlib.suppress(KafkaTierSettings):  # the run refuses these settings itself, with the reason
        found.append(open_kafka_tier(url)[0].settings.storage_url)
    return found


def remote_only_url(url: str) -> str:
    """The same Kafka tier URL, listing the remote segments alone."""
    p = _params(url)
    return kafka_tier_url(p.get("settings", ""), p.get("local"), p.get("metadata"), p.get("bootstrap"), True)


def open_kafka_tier(url: str) -> tuple[KafkaTierView, str]:
    """Inverse of `kafka_tier_url`."""
    params = _params(url)
    if "settings" not in params:
        raise KafkaTierSettings(f"{url}: names no tiered-storage settings")
    view = KafkaTierView(
        params["settings"], params.get("local"), params.get("metadata"), params.get("bootstrap"),
        remote_only=params.get("remote_only") == "1",
    )  # fmt: skip
    return view, ROOT


def agrees_with_metadata(s: SegmentObjects, data: bytes) -> None:
    """A whole remote segment's batches lie within the offsets its metadata gives, end whole, and
    (in the current format) reach the largest timestamp it records: the metadata describes these
    bytes, not other ones."""
    seg = s.seg
    scan = scan_buffer(s.log_url, seg.start_offset, np.frombuffer(data, dtype=np.uint8))
    table, problems = scan.table, []
    if scan.tail is not None:
        problems.append(f"its last batch is cut short at byte {scan.tail.position}")
    if len(table):
        first, last = int(table.base_offset[0]), int(table.last_offset[-1])
        if first < seg.start_offset or last > seg.end_offset:
            problems.append(
                f"it holds offsets {first}-{last}, outside its metadata's {seg.start_offset}-{seg.end_offset}"
            )
        largest = int(table.max_timestamp.max())
        if bool((table.magic == 2).all()) and largest != seg.max_timestamp_ms:
            problems.append(f"its largest timestamp is {largest}, its metadata's {seg.max_timestamp_ms}")
    if problems:
        raise KafkaTierCorrupt(s.log_url, None, f"segment {seg.segment_id}: " + "; ".join(problems))


def _require_contiguous(tp: TopicPartition, segs: list[SegmentMetadata], local: list[FileInfo]) -> None:
    """A remote segment ends where the next begins (the broker copies a segment whole, its end the
    next segment's base offset less one), and the local log continues where the remote one ends:
    a gap is a segment lost, refused rather than read past."""
    where = f"{ROOT}/{tp.dir_name}"
    for before, after in itertools.pairwise(segs):
        if after.start_offset != before.end_offset + 1:
            raise KafkaTierCorrupt(
                where,
                None,
                f"offsets {before.end_offset + 1}-{after.start_offset - 1} are "
                f"in no remote segment (between {before.segment_id} and {after.segment_id})",
            )
    above = sorted(b for f in local if f.name.endswith(".log") and (b := local_start(f.name)) is not None)
    above = [b for b in above if b > segs[-1].end_offset]
    if above and above[0] != segs[-1].end_offset + 1:
        raise KafkaTierCorrupt(
            where,
            None,
            f"the remote log ends at {segs[-1].end_offset} and the local log "
            f"begins at {above[0]}: offsets between are in neither",
        )


def _is_metadata_partition(info: FileInfo) -> bool:
    tp = parse_topic_partition(info.name) if info.is_dir else None
    return tp is not None and tp.topic == METADATA_TOPIC


def _mtime(seg: SegmentMetadata) -> int:
    return seg.max_timestamp_ms if seg.max_timestamp_ms >= 0 else seg.event_timestamp_ms


class KafkaTierView(LogView):
    protocol = SCHEME
    root = ROOT

    def __init__(
        self,
        settings_url: str,
        local_url: str | None,
        metadata_url: str | None,
        bootstrap: str | None = None,
        remote_only: bool = False,
    ) -> None:
        from segment_io.storage import open_storage

        super().__init__(local_url)
        self.settings_url = settings_url
        self.metadata_url = metadata_url
        self.bootstrap = bootstrap
        self.remote_only = remote_only
        storage, path = open_storage(settings_url)
        try:
            text = storage.read(path).decode("utf-8", errors="replace")
        except (FileNotFoundError, IsADirectoryError):
            raise KafkaTierSettings(f"{settings_url}: no tiered-storage settings file there") from None
        self.settings = TierSettings.parse(text, settings_url)
        if metadata_url is None and local_url is None and bootstrap is None:
            raise KafkaTierSettings(
                "a Kafka remote tier is read with its remote log metadata: give the broker's log directory "
                "(or a copy of its __remote_log_metadata partitions)"
            )
        self.objects = open_storage(self.settings.storage_url, **self.settings.storage_options)
        self.keyring = Keyring(self.settings.private_keys)

    def url(self, path: str) -> str:
        if path == ROOT:
            return kafka_tier_url(
                self.settings_url, self.local_url, self.metadata_url, self.bootstrap, self.remote_only
            )
        return path

    # --- the remote log ------------------------------------------------------------------------

    def _metadata(self) -> Iterator[MetadataRecord]:
        """The remote log metadata records: from the live cluster, or a log directory's partitions."""
        from segment_io.storage import open_storage

        if self.bootstrap is not None:
            return read_metadata_live(self.bootstrap)
        if self.metadata_url is not None:
            return read_metadata_log(*open_storage(self.metadata_url))
        assert self.local is not None
        return read_metadata_log(*self.local)

    @cached_property
    def remote(self) -> dict[TopicPartition, tuple[SegmentObjects, ...]]:
        """Each tiered partition's served remote segments, in offset order."""
        replay = MetadataReplay.of(self._metadata())
        candidates: dict[TopicPartition, list[tuple[TopicIdPartition, PartitionState]]] = {}
        for tip, state in replay.served().items():
            candidates.setdefault(TopicPartition(tip.topic, tip.partition), []).append((tip, state))
        out: dict[TopicPartition, tuple[SegmentObjects, ...]] = {}
        for tp, found in sorted(candidates.items()):
            state = self._topic_of(tp, found)
            chain = self._local_chain(tp) or epoch_chain(state.served())
            served = remote_log(state, chain, self._log_starts.get(tp), f"{ROOT}/{tp.dir_name}")
            out[tp] = tuple(self._objects(s) for s in served)
        return out

    def _objects(self, seg: SegmentMetadata) -> SegmentObjects:
        storage, root = self.objects
        if self.settings.plugin == AIVEN_RSM:
            return AivenSegment(storage, root, seg, self.settings.key_prefix, self.keyring)
        return LocalTieredSegment(storage, root, seg)

    def _topic_of(
        self, tp: TopicPartition, found: list[tuple[TopicIdPartition, PartitionState]]
    ) -> PartitionState:
        """The segments of the topic (by id) the partition's name stands for: the only one, or the
        one the local partition.metadata names (a topic deleted and created again)."""
        if len(found) == 1:
            return found[0][1]
        local = {f.name: f for f in self._local_entries(tp.dir_name)}
        topic_id = None
        if PARTITION_METADATA in local:
            for line in (
                LogView.read(self, local[PARTITION_METADATA].path).decode(errors="replace").splitlines()
            ):
                if line.startswith("topic_id:"):
                    topic_id = line.partition(":")[2].strip()
        for tip, state in found:
            if tip.topic_id == topic_id:
                return state
        ids = ", ".join(sorted(tip.topic_id for tip, _ in found))
        raise KafkaTierCorrupt(
            f"{ROOT}/{tp.dir_name}",
            None,
            f"the remote log metadata holds segments of {len(found)} topics named {tp.topic!r} (topic ids "
            f"{ids}) and no local partition.metadata says which one is the topic",
        )

    @cached_property
    def _log_starts(self) -> dict[TopicPartition, int]:
        local = {f.name: f for f in self._local_entries()}
        if LOG_START_CHECKPOINT not in local:
            return {}
        path = local[LOG_START_CHECKPOINT].path
        return parse_offset_checkpoint(LogView.read(self, path), path)

    def _local_chain(self, tp: TopicPartition) -> list[tuple[int, int]]:
        local = {f.name: f for f in self._local_entries(tp.dir_name)}
        if LEADER_EPOCH_CHECKPOINT not in local:
            return []
        path = local[LEADER_EPOCH_CHECKPOINT].path
        return parse_leader_epoch_checkpoint(LogView.read(self, path), path)

    @cached_property
    def _files(self) -> dict[str, tuple[SegmentObjects, str]]:
        """Every remote segment file's path: its segment and kind (`log` or an index's)."""
        out: dict[str, tuple[SegmentObjects, str]] = {}
        for segs in self.remote.values():
            for s in segs:
                out[s.log_url] = (s, "log")
                for kind in (*_INDEX_KINDS, "snapshot"):
                    out[s.index_url(kind)] = (s, kind)
        return out

    # --- listing ---------------------------------------------------------------------------------

    def _list_root(self) -> builtins.list[FileInfo]:
        # The remote log metadata describes the remote tier, which the view has made local: a log
        # read (or restored) through the view has none.
        entries = {f.name: f for f in self._local_entries() if not _is_metadata_partition(f)}
        for tp in self.remote:
            entries.setdefault(tp.dir_name, FileInfo(f"{ROOT}/{tp.dir_name}", tp.dir_name, 0, 0, True))
        return sorted(
            (replace_path(f, f"{ROOT}/{name}") if f.is_dir else f for name, f in entries.items()),
            key=lambda f: f.name,
        )

    def _list_partition(self, tp: TopicPartition) -> builtins.list[FileInfo]:
        segs = self.remote.get(tp, ())
        local = self._local_entries(tp.dir_name)
        if self.remote_only:
            local = [f for f in local if local_start(f.name) is None]
        if not segs:
            return local
        next_offset = segs[-1].seg.end_offset + 1
        starts = {s.seg.start_offset for s in segs}
        _require_contiguous(tp, [s.seg for s in segs], local)
        out: builtins.list[FileInfo] = []
        for f in local:
            start, kind = local_start(f.name), f.name.rpartition(".")[2]
            if start is not None and kind in SEGMENT_SUFFIXES and start < next_offset:
                if kind == "log" and start not in starts:
                    raise OverlappingSegments(
                        f.path,
                        None,
                        f"a local segment begins at offset {start}, inside the remote log "
                        f"(which ends at {next_offset - 1}) but not where a remote segment does",
                    )
                continue  # a local copy of a remote segment: read from the remote tier
            out.append(f)
        names = {f.name for f in out}
        # Each segment's manifest read and checked, its data key unwrapped, several at a time (the
        # reads wait on the store, the unwraps run without the GIL).
        with ThreadPoolExecutor(max_workers=CHECK_THREADS) as pool:
            list(pool.map(lambda s: s.check(), segs))
        for s in segs:
            base, mtime = s.seg.start_offset, _mtime(s.seg)
            out.append(FileInfo(s.log_url, segment_file_name(base, "log"), s.seg.size, mtime, False))
            for kind in _INDEX_KINDS:
                size = s.index_size(kind)
                if size is not None and (size or kind != "txnindex"):
                    out.append(FileInfo(s.index_url(kind), segment_file_name(base, kind), size, mtime, False))
            snapshot = segment_file_name(s.seg.end_offset + 1, "snapshot")
            size = s.index_size("snapshot")
            if snapshot not in names and size:
                out.append(FileInfo(s.index_url("snapshot"), snapshot, size, mtime, False))
        if LEADER_EPOCH_CHECKPOINT not in names:
            chain = epoch_chain([s.seg for s in segs])
            out.append(
                self._virtual_file(
                    f"{tp.dir_name}/{LEADER_EPOCH_CHECKPOINT}", format_leader_epoch_checkpoint(chain)
                )
            )
        return sorted(out, key=lambda f: f.name)

    # --- reading -----------------------------------------------------------------------------------

    def _remote_bytes(self, path: str, start: int = 0, end: int | None = None) -> bytes | None:
        if path.startswith(ROOT) or path not in self._files:
            return None
        s, kind = self._files[path]
        if kind == "log":
            data = s.read_log(start, end)
            if start == 0 and end is None:
                agrees_with_metadata(s, data)
            return data
        index = s.index(kind)
        if index is None:
            raise FileNotFoundError(path)
        return index[start:end]

    def exists(self, path: str) -> bool:
        return (not path.startswith(ROOT) and path in self._files) or super().exists(path)

    def is_file(self, path: str) -> bool:
        return (not path.startswith(ROOT) and path in self._files) or super().is_file(path)

    def read(self, path: str, start: int = 0, end: int | None = None) -> bytes:
        data = self._remote_bytes(path, start, end)
        return super().read(path, start, end) if data is None else data

    def read_array(self, path: str) -> np.ndarray:
        data = self._remote_bytes(path)
        return super().read_array(path) if data is None else np.frombuffer(data, dtype=np.uint8)

    def open_read(self, path: str) -> Iterator[bytes]:
        data = self._remote_bytes(path)
        if data is None:
            yield from super().open_read(path)
        else:
            yield data
