"""What a remote tier records, as frozen values with their JSON form: one manifest per uploaded
segment, and the partition manifest whose newest version is the partition's remote log.

A segment manifest is written once, beside the segment's objects, when every object is uploaded
and verified; a partition manifest version lists the segments (their manifests inlined) that
make up the remote log at that version, and is never changed once written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from segment_io.topic_partition import TopicPartition

FORMAT_VERSION = 1
# Kafka's names for a remote segment's states; a segment manifest is written in the second.
COPY_SEGMENT_FINISHED = "COPY_SEGMENT_FINISHED"
# Where a remote segment came from: a copy of a local segment (`tier`), or a rewrite made inside
# the tier (`clean --in-place`, `erase --in-place`), which no local segment is a copy of.
ORIGIN_TIER = "tier"
ORIGIN_CLEAN = "clean"
ORIGIN_ERASE = "erase"
REWRITTEN_IN_TIER = (ORIGIN_CLEAN, ORIGIN_ERASE)


@dataclass(frozen=True)
class RemoteObject:
    """One uploaded object: its name in the partition's segment folder, size and CRC-32C."""

    name: str
    size: int
    crc32c: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, "crc32c": f"{self.crc32c:08x}"}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RemoteObject:
        name = str(data["name"])
        # Objects live in their partition's folder, named there: a path that climbs out of it or
        # starts at a root would read (or, on expiry, delete) something that is not the segment's.
        if not name or name in (".", "..") or "/" in name or "\\" in name:
            raise ValueError(f"object name {name!r} is not a file name in the partition's folder")
        return cls(name, int(data["size"]), int(str(data["crc32c"]), 16))


@dataclass(frozen=True)
class RemoteSegment:
    """One segment in the remote tier: offsets [base_offset, end_offset] (end = the next
    segment's base − 1, as Kafka records it), its largest timestamp, the .log file's mtime (the
    time retention falls back on), its objects by kind (log, index, timeindex, txnindex,
    snapshot), and the leader epochs that start at or before its end."""

    segment_id: str
    base_offset: int
    end_offset: int
    largest_timestamp: int
    mtime_ms: int
    objects: dict[str, RemoteObject]
    leader_epochs: tuple[tuple[int, int], ...] = ()
    state: str = COPY_SEGMENT_FINISHED
    origin: str = ORIGIN_TIER

    @property
    def size(self) -> int:
        """The .log object's size (what retention by size counts)."""
        return self.objects["log"].size

    def to_json(self) -> dict[str, Any]:
        return {
            "segment_id": self.segment_id,
            "base_offset": self.base_offset,
            "end_offset": self.end_offset,
            "largest_timestamp": self.largest_timestamp,
            "mtime_ms": self.mtime_ms,
            "state": self.state,
            "origin": self.origin,
            "objects": {kind: o.to_json() for kind, o in sorted(self.objects.items())},
            "leader_epochs": [list(e) for e in self.leader_epochs],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RemoteSegment:
        return cls(
            segment_id=str(data["segment_id"]),
            base_offset=int(data["base_offset"]),
            end_offset=int(data["end_offset"]),
            largest_timestamp=int(data["largest_timestamp"]),
            mtime_ms=int(data["mtime_ms"]),
            objects={k: RemoteObject.from_json(v) for k, v in data["objects"].items()},
            leader_epochs=tuple((int(e), int(o)) for e, o in data.get("leader_epochs", [])),
            state=str(data.get("state", COPY_SEGMENT_FINISHED)),
            origin=str(data.get("origin", ORIGIN_TIER)),
        )


@dataclass(frozen=True)
class PartitionManifest:
    """One version of a partition's remote log: its segments in offset order (contiguous, not
    overlapping), the log start offset, and the files of the partition that are not segments
    (leader-epoch checkpoint entries, partition.metadata) as of the newest upload."""

    topic: str
    partition: int
    version: int
    committed_ms: int
    log_start_offset: int
    segments: tuple[RemoteSegment, ...] = ()
    leader_epochs: tuple[tuple[int, int], ...] = ()
    partition_metadata: str | None = None
    cleaner_offset: int | None = None  # where the last in-place clean's dirty section ended
    note: str = ""  # what made this version: "tier", "retention", "clean", ...

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def next_offset(self) -> int:
        """The offset after the remote log's last segment (its log start offset when empty)."""
        return self.segments[-1].end_offset + 1 if self.segments else self.log_start_offset

    @property
    def object_names(self) -> frozenset[str]:
        """Every object this version references (segment manifests included)."""
        names: set[str] = set()
        for s in self.segments:
            names.update(o.name for o in s.objects.values())
            names.add(segment_manifest_name(s.base_offset, s.segment_id))
        return frozenset(names)

    def copy_of(self, base: int, upper: int, size: int) -> RemoteSegment | None:
        """The segment that holds the local segment `[base, upper)` of `size` bytes as its copy:
        the same offset range and .log size (a release also proves the bytes: CRC-32C)."""
        return next(
            (s for s in self.segments if (s.base_offset, s.end_offset, s.size) == (base, upper - 1, size)),
            None,
        )

    def rewritten_in_tier(self, base: int, upper: int) -> bool:
        """Whether `[base, upper)` lies wholly in segments an in-place clean or erase made: a local
        segment there is an older form of what the tier holds, never a replacement for it."""
        covered = [
            s
            for s in self.segments
            if s.origin in REWRITTEN_IN_TIER and s.end_offset >= base and s.base_offset < upper
        ]
        if not covered or covered[0].base_offset > base:
            return False
        reach = covered[0].base_offset
        for s in covered:
            if s.base_offset > reach:
                return False
            reach = s.end_offset + 1
        return reach >= upper

    def successor(self, committed_ms: int, **changes: Any) -> PartitionManifest:
        """The next version with `changes` applied."""
        return replace(self, version=self.version + 1, committed_ms=committed_ms, **changes)

    def to_bytes(self) -> bytes:
        body = {
            "format_version": FORMAT_VERSION,
            "topic": self.topic,
            "partition": self.partition,
            "version": self.version,
            "committed_ms": self.committed_ms,
            "log_start_offset": self.log_start_offset,
            "note": self.note,
            "leader_epochs": [list(e) for e in self.leader_epochs],
            "partition_metadata": self.partition_metadata,
            "cleaner_offset": self.cleaner_offset,
            "segments": [s.to_json() for s in self.segments],
        }
        return (json.dumps(body, indent=1) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> PartitionManifest:
        """Parse a version; ValueError (or KeyError) when it is not a whole one of this format."""
        body = json.loads(data)
        if body.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"format version {body.get('format_version')!r}, expected {FORMAT_VERSION}")
        return cls(
            topic=str(body["topic"]),
            partition=int(body["partition"]),
            version=int(body["version"]),
            committed_ms=int(body["committed_ms"]),
            log_start_offset=int(body["log_start_offset"]),
            segments=tuple(RemoteSegment.from_json(s) for s in body["segments"]),
            leader_epochs=tuple((int(e), int(o)) for e, o in body.get("leader_epochs", [])),
            partition_metadata=body.get("partition_metadata"),
            cleaner_offset=body.get("cleaner_offset"),
            note=str(body.get("note", "")),
        )

    @classmethod
    def empty(cls, tp: TopicPartition) -> PartitionManifest:
        """Version 0: the manifest of a partition nothing was committed for (never written)."""
        return cls(tp.topic, tp.partition, 0, 0, 0)


def segment_object_name(base_offset: int, segment_id: str, kind: str) -> str:
    """`<20-digit base offset>-<segment id>.<kind>`: a new id per upload attempt, so a retried
    upload never overwrites an object another manifest may reference."""
    return f"{base_offset:020d}-{segment_id}.{kind}"


def segment_manifest_name(base_offset: int, segment_id: str) -> str:
    return segment_object_name(base_offset, segment_id, "json")


def segment_manifest_bytes(topic: str, partition: int, segment: RemoteSegment) -> bytes:
    body = {"format_version": FORMAT_VERSION, "topic": topic, "partition": partition, **segment.to_json()}
    return (json.dumps(body, indent=1) + "\n").encode()
