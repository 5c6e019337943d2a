"""Partition directory and segment file names, and the rules by which a log directory is listed
(docs/log-format.md#log-directory)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from segment_io.checkpoints import parse_offset_checkpoint
from segment_io.errors import BadSegmentName, LogDirNotFound, NotALogDirectory
from segment_io.storage import FileInfo, Storage
from segment_io.topic_partition import TopicPartition

OFFSET_DIGITS = 20
SEGMENT_SUFFIXES = ("log", "index", "timeindex", "txnindex")
TRANSIENT_SUFFIXES = ("deleted", "cleaned", "swap")
IGNORED_DIR_SUFFIXES = ("delete", "future", "stray")
NOT_CLEANED_TOPICS = ("__cluster_metadata",)
# Files of a partition directory that belong to Kafka beside its segments and snapshots.
PARTITION_FILES = ("leader-epoch-checkpoint", "partition.metadata")
ROOT_CHECKPOINTS = (
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "replication-offset-checkpoint",
    "cleaner-offset-checkpoint",
)

_FILE_RE = re.compile(
    r"^(?P<prefix>[^.]*)\.(?P<kind>log|index|timeindex|txnindex|snapshot)"
    r"(?:\.(?P<suffix>deleted|cleaned|swap))?$"
)
_DIR_RE = re.compile(r"^(?P<tp>.+)\.(?P<uuid>[0-9a-f]{32})-(?P<suffix>delete|future|stray)$")


def segment_file_name(base_offset: int, kind: str) -> str:
    """`<20-digit base offset>.<kind>`, e.g. 00000000000000368769.log."""
    return f"{base_offset:0{OFFSET_DIGITS}d}.{kind}"


def parse_topic_partition(name: str) -> TopicPartition | None:
    """`orders-7` → (orders, 7); None when the name has no numeric partition suffix."""
    topic, dash, part = name.rpartition("-")
    if not dash or not topic or not part.isdigit():
        return None
    return TopicPartition(topic, int(part))


def ignored_dir_reason(name: str) -> str | None:
    """Why a directory in a log dir is not a partition to process, or None if it is one."""
    match = _DIR_RE.match(name)
    if match:
        return f"{match['suffix']} directory"
    tp = parse_topic_partition(name)
    if tp is None:
        return "not a partition directory"
    if tp.topic in NOT_CLEANED_TOPICS:
        return "KRaft metadata log"
    return None


@dataclass(frozen=True)
class SegmentFileName:
    base_offset: int
    kind: str
    suffix: str | None


def parse_segment_file(info: FileInfo) -> SegmentFileName | None:
    """Parse a segment-family file name; None for other files, BadSegmentName when misnamed."""
    match = _FILE_RE.match(info.name)
    if match is None:
        return None
    prefix = match["prefix"]
    if len(prefix) != OFFSET_DIGITS or not prefix.isdigit():
        raise BadSegmentName(info.path, None, f"file name prefix {prefix!r} is not a 20-digit base offset")
    offset = int(prefix)
    if offset > 2**63 - 1:
        raise BadSegmentName(info.path, None, "base offset exceeds int64")
    return SegmentFileName(offset, match["kind"], match["suffix"])


@dataclass(frozen=True)
class SegmentFiles:
    """The files of one segment; `log` is required, the indexes may be missing."""

    base_offset: int
    log: FileInfo
    index: FileInfo | None = None
    timeindex: FileInfo | None = None
    txnindex: FileInfo | None = None

    @property
    def size(self) -> int:
        return self.log.size


@dataclass(frozen=True)
class PartitionListing:
    tp: TopicPartition
    path: str
    segments: tuple[SegmentFiles, ...]
    snapshots: tuple[FileInfo, ...] = ()
    other_files: tuple[FileInfo, ...] = ()
    ignored: tuple[tuple[str, str], ...] = ()

    @property
    def stray_files(self) -> tuple[str, ...]:
        """Files that are not Kafka's (notes, backups, ...): carried along, never read."""
        return tuple(f.name for f in self.other_files if f.name not in PARTITION_FILES)


def list_partition(storage: Storage, path: str, tp: TopicPartition) -> PartitionListing:
    """List one partition directory by Kafka's rules: transient and temporary files are ignored."""
    groups: dict[int, dict[str, FileInfo]] = {}
    snapshots: list[FileInfo] = []
    other: list[FileInfo] = []
    ignored: list[tuple[str, str]] = []
    for info in storage.list(path):
        if info.is_dir:
            ignored.append((info.name, "unexpected directory"))
            continue
        if info.name.endswith(".tmp"):
            ignored.append((info.name, "interrupted write (.tmp)"))
            continue
        parsed = parse_segment_file(info)
        if parsed is None:
            other.append(info)
        elif parsed.suffix is not None:
            ignored.append((info.name, f"{parsed.suffix} file"))
        elif parsed.kind == "snapshot":
            snapshots.append(info)
        else:
            groups.setdefault(parsed.base_offset, {})[parsed.kind] = info
    segments = []
    for base in sorted(groups):
        files = groups[base]
        if "log" not in files:
            for info in files.values():
                ignored.append((info.name, "index without a .log"))
            continue
        segments.append(
            SegmentFiles(
                base,
                files["log"],
                files.get("index"),
                files.get("timeindex"),
                files.get("txnindex"),
            )
        )
    return PartitionListing(tp, path, tuple(segments), tuple(snapshots), tuple(other), tuple(ignored))


@dataclass(frozen=True)
class LogDirListing:
    path: str
    partitions: tuple[PartitionListing, ...]
    checkpoints: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    ignored: tuple[tuple[str, str], ...] = ()


def is_partition_dir(storage: Storage, path: str) -> bool:
    """Named like a partition and holding segment files, or no directory at all (an empty
    partition); a log directory holds partition directories."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    if parse_topic_partition(name) is None:
        return False
    entries = storage.list(path)
    return any(parse_segment_file_quiet(f.name) for f in entries) or not any(f.is_dir for f in entries)


def parse_segment_file_quiet(name: str) -> bool:
    return _FILE_RE.match(name) is not None


def list_segment_file(storage: Storage, path: str) -> LogDirListing:
    """A listing of the one segment a segment file (`.log` or one of its indexes) belongs to, in
    the partition its directory names (partition −1 where the name is not `<topic>-<n>`)."""
    parent, name = path.rstrip("/").rsplit("/", 1)
    info = next((f for f in storage.list(parent) if f.name == name), None)
    parsed = parse_segment_file(info) if info is not None else None
    if parsed is None or parsed.kind == "snapshot" or parsed.suffix is not None:
        raise NotALogDirectory(
            path, None, "is a file, and not a segment file (.log, .index, .timeindex, .txnindex)"
        )
    dir_name = parent.rsplit("/", 1)[-1]
    tp = parse_topic_partition(dir_name) or TopicPartition(dir_name, -1)
    partition = list_partition(storage, parent, tp)
    segments = tuple(s for s in partition.segments if s.base_offset == parsed.base_offset)
    if not segments:
        raise NotALogDirectory(path, None, "has no .log file beside it")
    return LogDirListing(parent, (PartitionListing(tp, parent, segments),))


def list_log_dir(storage: Storage, path: str, segment_file: bool = False) -> LogDirListing:
    """List a log directory (or a single partition directory) and read its root checkpoints.
    A segment file is listed as its one segment where `segment_file` allows it (inspect, dump);
    elsewhere it is refused: a job's source is a directory."""
    if not storage.exists(path):
        raise LogDirNotFound(path, None, "no such directory")
    if storage.is_file(path):
        if segment_file:
            return list_segment_file(storage, path)
        raise NotALogDirectory(path, None, "is a file; give the log directory or the partition directory")
    name = path.rstrip("/").rsplit("/", 1)[-1]
    tp = parse_topic_partition(name)
    if tp is not None and ignored_dir_reason(name) is None and is_partition_dir(storage, path):
        return LogDirListing(path, (list_partition(storage, path, tp),))
    partitions: list[PartitionListing] = []
    ignored: list[tuple[str, str]] = []
    checkpoints: dict[str, dict[TopicPartition, int]] = {}
    for info in storage.list(path):
        if not info.is_dir:
            if info.name in ROOT_CHECKPOINTS:
                checkpoints[info.name] = parse_offset_checkpoint(storage.read(info.path), info.path)
            continue
        reason = ignored_dir_reason(info.name)
        if reason is not None:
            ignored.append((info.name, reason))
            continue
        child = parse_topic_partition(info.name)
        assert child is not None
        partitions.append(list_partition(storage, info.path, child))
    partitions.sort(key=lambda p: p.tp)
    return LogDirListing(path, tuple(partitions), checkpoints, tuple(ignored))
