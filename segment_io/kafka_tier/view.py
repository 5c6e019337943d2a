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
import copy
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property

import numpy as np

from segment_io.checkpoints import (
    format_leader_epoch_checkpoint,
    parse_leader_epoch_checkpoint,
    without_topic,
)
from segment_io.errors import KafkaTierCorrupt, KafkaTierSettings, OverlappingSegments
from segment_io.kafka_tier.aiven import AivenSegment
from segment_io.kafka_tier.bucket import bucket_segments
from segment_io.kafka_tier.bucket_metadata import bucket_metadata, describe_differences
from segment_io.kafka_tier.extent import (
    log_reaches,
    log_starts,
    require_contiguous,
    require_log_end,
    require_log_start,
    require_metadata_heads,
    stray_objects,
)
from segment_io.kafka_tier.keyring import Keyring
from segment_io.kafka_tier.local_tiered import LocalTieredSegment
from segment_io.kafka_tier.metadata import MetadataRecord, SegmentMetadata, TopicIdPartition
from segment_io.kafka_tier.metadata_cache import MetadataReplay, PartitionState, epoch_chain, remote_log
from segment_io.kafka_tier.metadata_live import read_metadata_live
from segment_io.kafka_tier.metadata_log import is_metadata_partition, metadata_partitions, read_metadata_log
from segment_io.kafka_tier.objects import SegmentObjects
from segment_io.kafka_tier.segment_check import agrees_with_metadata, verify_indexes
from segment_io.kafka_tier.settings import AIVEN_RSM, METADATA_TOPIC
from segment_io.kafka_tier.url import ROOT, SCHEME, kafka_tier_url, read_settings, url_params
from segment_io.layout import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    ROOT_CHECKPOINTS,
    SEGMENT_SUFFIXES,
    segment_file_name,
)
from segment_io.storage import open_storage
from segment_io.storage.base import FileInfo, Storage
from segment_io.storage.log_view import LogView, local_start, replace_path
from segment_io.topic_partition import TopicPartition

CHECK_THREADS = 8
_INDEX_KINDS = ("index", "timeindex", "txnindex")
_SAID: set[str] = set()


def _say_once(line: str) -> None:
    """A note of what the read found, printed once per process however often the view is opened."""
    if line not in _SAID:
        _SAID.add(line)
        print(f"segpipe: {line}", file=sys.stderr)


def open_kafka_tier(url: str) -> tuple[KafkaTierView, str]:
    """Inverse of `kafka_tier_url`."""
    params = url_params(url)
    if "settings" not in params:
        raise KafkaTierSettings(f"{url}: names no tiered-storage settings")
    view = KafkaTierView(
        params["settings"],
        params.get("local"),
        params.get("metadata"),
        params.get("bootstrap"),
        remote_only=params.get("remote_only") == "1",
        verify=params.get("verify") == "1",
        from_bucket=params.get("from_bucket") == "1",
    )
    return view, ROOT


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
        verify: bool = False,
        from_bucket: bool = False,
    ) -> None:

        super().__init__(local_url)
        self.settings_url = settings_url
        self.metadata_url = metadata_url
        self.bootstrap = bootstrap
        self.remote_only = remote_only
        self.verify = verify
        self.from_bucket = from_bucket
        self._proven: set[TopicPartition] = set()
        self.settings = read_settings(settings_url)
        if metadata_url is None and local_url is None and bootstrap is None and not from_bucket:
            raise KafkaTierSettings(
                "a Kafka remote tier is read with its remote log metadata: give the broker's log directory "
                "(or a copy of its __remote_log_metadata partitions)"
            )
        self.objects = open_storage(self.settings.storage_url, **self.settings.storage_options)
        if not self.objects[0].exists(self.objects[1]):
            raise KafkaTierSettings(
                f"{settings_url}: {self.settings.storage_setting}={self.settings.storage_url}: nothing is "
                "there (no such directory or bucket): give the place the broker's plugin writes to"
            )
        self.keyring = Keyring(self.settings.private_keys)

    def _read_from(self) -> builtins.list[tuple[Storage, str]]:
        return [self.objects, *self._stores()]  # the remote segments' objects, then the local log

    def describe(self, tp: TopicPartition | None = None) -> str:
        """The log (or one of its partitions) as the user named it: its log directory (or
        metadata) and its settings."""
        where = self.local_url or self.metadata_url or f"the cluster at {self.bootstrap}"
        if tp is not None:
            where = f"{where.rstrip('/')}/{tp.dir_name}"
        return f"{where} (with its Kafka remote tier, {self.settings_url})"

    def url(self, path: str) -> str:
        if path == ROOT:
            return kafka_tier_url(
                self.settings_url,
                self.local_url,
                self.metadata_url,
                self.bootstrap,
                remote_only=self.remote_only,
                verify=self.verify,
                from_bucket=self.from_bucket,
            )
        return path

    def remote_only_view(self) -> KafkaTierView:
        """The same log's remote segments alone (no local segment: a running broker's, which it is
        writing), sharing this view's replay of the metadata and what it proved: the metadata is
        read once. Only the listing of a partition differs (`_list_partition`)."""
        if self.remote_only:
            return self
        self.remote  # noqa: B018 - replayed here, once, so the copy holds the same replay
        other = copy.copy(self)
        other.remote_only = True
        return other

    # --- the remote log ------------------------------------------------------------------------

    def _metadata(self) -> Iterator[MetadataRecord]:
        """The remote log metadata records: rebuilt from the storage's objects, from the live cluster,
        or from a log directory's partitions."""

        if self.from_bucket:
            return bucket_metadata(*self.objects, self.settings)
        if self.bootstrap is not None:
            return read_metadata_live(self.bootstrap)
        if self.metadata_url is not None:
            return read_metadata_log(*open_storage(self.metadata_url))
        assert self.local is not None
        return read_metadata_log(*self.local)

    def _metadata_files(self) -> tuple[Storage, str] | None:

        if self.bootstrap is not None:
            return None
        return open_storage(self.metadata_url) if self.metadata_url is not None else self.local

    @cached_property
    def _states(self) -> dict[TopicPartition, PartitionState]:
        """What the remote log metadata says of each partition (of the topic its name stands for)."""
        files = self._metadata_files()
        if files is not None and not self.from_bucket:
            require_metadata_heads(*files, self.settings)
        replay = MetadataReplay.of(self._metadata())
        candidates: dict[TopicPartition, list[tuple[TopicIdPartition, PartitionState]]] = {}
        for tip, state in replay.partitions.items():
            if not state.deleted:
                candidates.setdefault(TopicPartition(tip.topic, tip.partition), []).append((tip, state))
        chosen = {tp: self._topic_of(tp, found) for tp, found in sorted(candidates.items())}
        return {tp: state for tp, state in chosen.items() if state is not None}

    @cached_property
    def remote(self) -> dict[TopicPartition, tuple[SegmentObjects, ...]]:
        """Each tiered partition's served remote segments, in offset order."""
        out: dict[TopicPartition, tuple[SegmentObjects, ...]] = {}
        for tp, state in self._states.items():
            if not state.served():
                continue
            chain = self._local_chain(tp) or epoch_chain(state.served())
            served = remote_log(state, chain, self._log_starts.get(tp), self.describe(tp))
            out[tp] = tuple(self._objects(s) for s in served)
        if self.from_bucket:
            self._compare_with_topic(out)
        return out

    def _compare_with_topic(self, rebuilt: dict[TopicPartition, tuple[SegmentObjects, ...]]) -> None:
        """Where the metadata topic is at hand too, the segments it serves and those rebuilt from
        the storage, compared: every difference named."""
        files = self._metadata_files()
        if files is not None and metadata_partitions(*files):
            found = {tp.dir_name: [s.seg for s in segs] for tp, segs in rebuilt.items()}
            differences = describe_differences(MetadataReplay.of(read_metadata_log(*files)), found)
            if differences:
                _say_once(
                    "warning: the metadata topic and the storage's objects disagree (the log is read from "
                    "the storage): " + "; ".join(differences)
                )

    def _objects(self, seg: SegmentMetadata) -> SegmentObjects:
        storage, root = self.objects
        if self.settings.plugin == AIVEN_RSM:
            return AivenSegment(storage, root, seg, self.settings.key_prefix, self.keyring)
        return LocalTieredSegment(storage, root, seg)

    def _topic_of(
        self, tp: TopicPartition, found: list[tuple[TopicIdPartition, PartitionState]]
    ) -> PartitionState | None:
        """The segments of the topic (by id) the partition's name stands for: the one its local
        partition.metadata names (none where the metadata holds nothing of that id: another topic
        of the same name, deleted and created again); without one, the only topic id with segments
        served (None where none is: only deleted segments are known)."""
        named = self._local_topic_id(tp)
        if named is not None:
            return next((state for tip, state in found if tip.topic_id == named), None)
        served = [(tip, state) for tip, state in found if state.served()]
        if len(served) <= 1:
            return served[0][1] if served else (found[0][1] if len(found) == 1 else None)
        ids = ", ".join(sorted(tip.topic_id for tip, _ in served))
        raise KafkaTierCorrupt(
            self.describe(tp),
            None,
            f"the remote log metadata holds segments of {len(served)} topics named {tp.topic!r} (topic ids "
            f"{ids}) and no local partition.metadata says which one is the topic",
        )

    def _local_topic_id(self, tp: TopicPartition) -> str | None:
        local = {f.name: f for f in self._local_entries(tp.dir_name)}
        if PARTITION_METADATA not in local:
            return None
        text = LogView.read(self, local[PARTITION_METADATA].path).decode(errors="replace")
        return next(
            (line.partition(":")[2].strip() for line in text.splitlines() if line.startswith("topic_id:")),
            None,
        )

    @cached_property
    def _log_starts(self) -> dict[TopicPartition, int]:
        return log_starts(*self.local) if self.local is not None else {}

    @cached_property
    def _log_reaches(self) -> dict[TopicPartition, int]:
        return log_reaches(*self.local) if self.local is not None else {}

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
        # read (or restored) through the view has none, nor their entries in the root checkpoints.
        entries = {f.name: f for f in self._local_entries() if not is_metadata_partition(f)}
        for name in set(ROOT_CHECKPOINTS) & set(entries):
            kept = without_topic(LogView.read(self, entries[name].path), entries[name].path, METADATA_TOPIC)
            entries[name] = entries[name] if kept is None else self._virtual_file(name, kept)
        for tp in self.remote:
            entries.setdefault(tp.dir_name, FileInfo(f"{ROOT}/{tp.dir_name}", tp.dir_name, 0, 0, True))
        return sorted(
            (replace_path(f, f"{ROOT}/{name}") if f.is_dir else f for name, f in entries.items()),
            key=lambda f: f.name,
        )

    def _list_partition(self, tp: TopicPartition) -> builtins.list[FileInfo]:
        segs = self.remote.get(tp, ())
        local = self._local_entries(tp.dir_name)
        if tp not in self._proven:  # once per view: a listing is asked for many times
            self._prove(tp, segs, local)
            self._proven.add(tp)
        if self.remote_only:
            local = [f for f in local if local_start(f.name) is None]
        if not segs:
            return local
        next_offset = segs[-1].seg.end_offset + 1
        starts = {s.seg.start_offset for s in segs}
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
        for s in segs:
            base, mtime = s.seg.start_offset, s.seg.mtime_ms
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

    def _prove(self, tp: TopicPartition, segs: tuple[SegmentObjects, ...], local: list[FileInfo]) -> None:
        """The partition's extent against the broker's checkpoints and local segments, its objects
        in the storage, and each served segment's objects against its metadata."""
        bases = sorted(b for f in local if f.name.endswith(".log") and (b := local_start(f.name)) is not None)
        where, state, served = self.describe(tp), self._states.get(tp), [s.seg for s in segs]
        note = require_log_start(tp, self._log_starts.get(tp), served, bases, state, where)
        if note is not None:
            _say_once(f"note: {note}")
        if not segs:
            return
        require_contiguous(where, served, bases)
        require_log_end(tp, self._log_reaches.get(tp), served, bases, where)
        storage, root = self.objects
        warning = stray_objects(
            bucket_segments(storage, root, self.settings, segs[0].seg.tp), segs, state, self.settings, tp
        )
        if warning is not None:
            _say_once(warning)
        # Each segment's manifest read and checked, its data key unwrapped, several at a time (the
        # reads wait on the store, the unwraps run without the GIL).
        with ThreadPoolExecutor(max_workers=CHECK_THREADS) as pool:
            list(pool.map(self._check_segment, segs))

    def _check_segment(self, s: SegmentObjects) -> None:
        s.check()
        if self.verify:
            verify_indexes(s)

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
        if path.startswith(ROOT) or path not in self._files or self._files[path][1] != "log":
            data = self._remote_bytes(path)
            return super().read_array(path) if data is None else np.frombuffer(data, dtype=np.uint8)
        s = self._files[path][0]
        array = s.read_log_array()  # mapped where the layout allows: no copy of it is held
        agrees_with_metadata(s, array)
        return array

    def open_read(self, path: str) -> Iterator[bytes]:
        data = self._remote_bytes(path)
        if data is None:
            yield from super().open_read(path)
        else:
            yield data
