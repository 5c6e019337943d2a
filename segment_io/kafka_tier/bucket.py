"""What a remote tier's storage itself holds, listed by the plugin's naming: each topic
partition's directory of objects and, in it, the segments their names stand for (start offset and
segment id). The witness that needs no metadata: it finds orphans, a bucket that is not this
cluster's, and the segments a log is rebuilt from when its metadata topic is lost."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from segment_io.kafka_tier import aiven, local_tiered
from segment_io.kafka_tier.metadata import TopicIdPartition
from segment_io.kafka_tier.settings import AIVEN_RSM, TierSettings
from segment_io.storage.base import Storage

# `<start %020d>-<segment id>.<suffix>`: a segment id is a UUID in URL-safe base64, 22 characters.
_OBJECT = re.compile(r"(\d{20})-([A-Za-z0-9_-]{22})\.(.+)")
_TOPIC_ID_CHARS = 22


@dataclass(frozen=True)
class BucketSegment:
    """One segment as the storage's object names give it."""

    start_offset: int
    segment_id: str
    objects: dict[str, str] = field(default_factory=dict)  # suffix -> path
    mtime_ms: int = 0  # the newest object's modification time (when the upload wrote it)

    @property
    def suffixes(self) -> frozenset[str]:
        return frozenset(self.objects)


def expected_suffixes(settings: TierSettings) -> frozenset[str]:
    """The objects every whole segment has in the plugin's layout (a transaction index only where
    the segment had one)."""
    if settings.plugin == AIVEN_RSM:
        return frozenset(aiven.SUFFIXES)
    return frozenset(s.lstrip(".") for k, s in local_tiered.SUFFIXES.items() if k != "txnindex")


def partition_directory(settings: TierSettings, root: str, tip: TopicIdPartition) -> str:
    """Where the plugin puts a topic partition's objects (under the configured key prefix)."""
    base = root.rstrip("/")
    if settings.plugin == AIVEN_RSM:
        return f"{base}/{settings.key_prefix}{tip.topic}-{tip.topic_id}/{tip.partition}"
    return f"{base}/{local_tiered.ROOT_DIR}/{tip.topic}-{tip.partition}-{tip.topic_id}"


def bucket_segments(
    storage: Storage, root: str, settings: TierSettings, tip: TopicIdPartition
) -> dict[str, BucketSegment]:
    """The segments whose objects are in the partition's directory, by segment id."""
    directory = partition_directory(settings, root, tip)
    found: dict[str, tuple[int, dict[str, str]]] = {}
    mtimes: dict[str, int] = {}
    try:
        entries = storage.list(directory)
    except FileNotFoundError:
        return {}
    for entry in entries:
        match = _OBJECT.fullmatch(entry.name)
        if entry.is_dir or match is None:
            continue
        start, seg_id, suffix = int(match[1]), match[2], match[3]
        found.setdefault(seg_id, (start, {}))[1][suffix] = entry.path
        mtimes[seg_id] = max(mtimes.get(seg_id, 0), entry.mtime_ms)
    return {
        seg_id: BucketSegment(start, seg_id, objects, mtimes[seg_id])
        for seg_id, (start, objects) in found.items()
    }


def bucket_partitions(storage: Storage, root: str, settings: TierSettings) -> list[TopicIdPartition]:
    """Every topic partition the storage holds objects of, by the plugin's directory names."""
    out: list[TopicIdPartition] = []
    base = root.rstrip("/")
    if settings.plugin == AIVEN_RSM:
        under = base if not settings.key_prefix else f"{base}/{settings.key_prefix.rstrip('/')}"
        for topic_dir in _dirs(storage, under):
            topic, topic_id = _split_id(topic_dir.rsplit("/", 1)[-1])
            if topic is None:
                continue
            for part in _dirs(storage, topic_dir):
                name = part.rsplit("/", 1)[-1]
                if name.isdigit():
                    out.append(TopicIdPartition(topic, topic_id, int(name)))
    else:
        for part in _dirs(storage, f"{base}/{local_tiered.ROOT_DIR}"):
            topic_partition, topic_id = _split_id(part.rsplit("/", 1)[-1])
            topic, _, number = (topic_partition or "").rpartition("-")
            if topic and number.isdigit():
                out.append(TopicIdPartition(topic, topic_id, int(number)))
    return sorted(out, key=lambda t: (t.topic, t.partition, t.topic_id))


def _dirs(storage: Storage, path: str) -> list[str]:
    try:
        return [e.path for e in storage.list(path) if e.is_dir]
    except FileNotFoundError:
        return []


def _split_id(name: str) -> tuple[str | None, str]:
    """`<name>-<topic id>` split (the id is the last 22 characters)."""
    if len(name) <= _TOPIC_ID_CHARS + 1 or name[-_TOPIC_ID_CHARS - 1] != "-":
        return None, ""
    return name[: -_TOPIC_ID_CHARS - 1], name[-_TOPIC_ID_CHARS:]
