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
# The files a new (rolled) segment starts with: its .txnindex comes with its first aborted transaction.
ROLLED_SEGMENT_SUFFIXES = ("log", "index", "timeindex")
SNAPSHOT_SUFFIX = "snapshot"  # a producer state snapshot, named after its offset
TRANSIENT_SUFFIXES = ("deleted", "cleaned", "swap")
IGNORED_DIR_SUFFIXES = ("delete", "future", "stray")
NOT_CLEANED_TOPICS = ("__cluster_metadata",)
# Files of a partition directory that belong to Kafka beside its segments and snapshots.
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"  # the partition's topic id
PARTITION_FILES = (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA)
# The root checkpoint files of a log directory (topic-partition -> offset).
RECOVERY_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"  # only partitions the cleaner has compacted
ROOT_CHECKPOINTS = (RECOVERY_CHECKPOINT, LOG_START_CHECKPOINT, HIGH_WATERMARK_CHECKPOINT, CLEANER_CHECKPOINT)
LOCK_FILE = ".lock"  # held by a running broker
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"  # the broker stopped cleanly: its logs load without recovery
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"  # KRaft's bootstrap metadata: the cluster's, not the log's
# The broker's own state, not the log's: no output carries them (its .lock, its clean-shutdown mark).
BROKER_STATE_FILES = (LOCK_FILE, CLEAN_SHUTDOWN, BOOTSTRAP_CHECKPOINT)
META_PROPERTIES = "meta.properties"  # the log directory's identity (cluster, node, directory id)
# Files only a Kafka log directory holds at its root.
KAFKA_ROOT_FILES = (META_PROPERTIES, LOCK_FILE, CLEAN_SHUTDOWN, *ROOT_CHECKPOINTS)
# segpipe's own names in a log directory it wrote, and the marker of a remote tier's root.
META_DIR = "_segpipe"
INCOMPLETE = "INCOMPLETE"  # an object-store output whose run has not finished (or was killed)
TIER_MARKER = "segpipe-tier.json"
MANIFEST = "manifest.json"  # in META_DIR: what a published output holds
# In META_DIR at a Kafka remote tier's storage root: the journal of segment swaps under way.
KAFKA_TIER_SWAPS = "kafka-tier-swaps"
# Beside it: what each swap under way removes, for the run that finishes it to report.
KAFKA_TIER_EVIDENCE = "kafka-tier-evidence"

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
    def size(self) -> int:
        """The bytes of its segments' logs."""
        return sum(seg.size for seg in self.segments)

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


def list_log_dir(
    storage: Storage, path: str, segment_file: bool = False, allow_incomplete: bool = False
) -> LogDirListing:
    """List a log directory (or a single partition directory) and read its root checkpoints.
    A segment file is listed as its one segment where `segment_file` allows it (inspect, dump);
    elsewhere it is refused: a job's source is a directory. A directory that is not Kafka's, a
    log directory holding a tier's marker, and an unfinished output (`allow_incomplete`: the
    validation gate reads its own staged output) are refused, never read as empty logs."""
    if not storage.exists(path):
        raise LogDirNotFound(storage.url(path), None, "no such directory")  # its URL: gs://bucket/...
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
    entries = storage.list(path)
    names = {info.name for info in entries}
    if META_DIR in names and not allow_incomplete and storage.exists(f"{path}/{META_DIR}/{INCOMPLETE}"):
        raise NotALogDirectory(
            path,
            None,
            f"is the output of a segpipe run that did not finish ({META_DIR}/{INCOMPLETE} is there)",
        )
    for info in entries:
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
    if TIER_MARKER in names:
        raise NotALogDirectory(path, None, stray_marker_detail(bool(partitions)))
    if not any(_kafka_shaped(p) for p in partitions):
        _require_kafka_root(path, entries, ignored)
    return LogDirListing(path, tuple(partitions), checkpoints, tuple(ignored))


def _kafka_shaped(part: PartitionListing) -> bool:
    """A partition directory with Kafka's files in it, or with nothing at all."""
    empty = not (part.segments or part.snapshots or part.other_files or part.ignored)
    return (
        empty
        or bool(part.segments or part.snapshots)
        or any(f.name in PARTITION_FILES for f in part.other_files)
    )


def stray_marker_detail(has_partitions: bool) -> str:
    if has_partitions:
        return (
            f"holds a remote tier's marker ({TIER_MARKER}) beside Kafka's partition directories: "
            "it is a log directory a tier was written into by mistake; remove the marker to read it"
        )
    return f"is a remote tier ({TIER_MARKER}), not a Kafka log directory"


def _require_kafka_root(path: str, entries: list[FileInfo], ignored: list[tuple[str, str]]) -> None:
    """A log directory without Kafka-shaped partition directories is still Kafka's (or segpipe's)
    when it holds Kafka's root files, Kafka's own ignored directories or segpipe's folder, or
    nothing at all; any other directory (a parent folder, `/etc`) is not one, and reading it as an
    empty log would hide the mistake."""
    kafka_dirs = [n for n, reason in ignored if reason not in ("not a partition directory",)]
    if not entries or kafka_dirs or any(e.name in (*KAFKA_ROOT_FILES, META_DIR) for e in entries):
        return
    found = sorted(f"{e.name}/" if e.is_dir else e.name for e in entries)
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    raise NotALogDirectory(
        path,
        None,
        "is not a Kafka log directory: no partition directories (<topic>-<partition>), segment files or "
        f"Kafka's root files (meta.properties, checkpoints); found {shown}",
    )
