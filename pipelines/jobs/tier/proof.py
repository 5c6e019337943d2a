"""What `tier` proves from the data itself before it changes anything in place
(docs/remote-tier.md#what-tier-proves):

- **identity**: the remote tier's log of a partition is the local log's: the topic ids of
  `partition.metadata` agree where both are known, and where local segments replace remote ones,
  every offset the two hold alike carries the same record (key, value, headers, timestamp);
- **copies**: a local segment is released only when the committed version holds a segment with
  its offset range and its .log's size and CRC-32C, and that segment's objects are in the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from pipelines.jobs.tier.plan import TierPlan, log_end_offset, replacing_from
from pipelines.log.scan import ScannedSegment
from pipelines.log.scanned import Scanned
from segment_io.errors import SegpipeError
from segment_io.exit_codes import ExitCode
from segment_io.remote.manifest import PartitionManifest, RemoteSegment
from segment_io.remote.tier import RemoteTier
from segment_io.segment.digest import record_digests
from segment_io.segment.reader import SegmentReader
from segment_io.storage import Storage
from segment_io.topic_partition import TopicPartition

NEW_HISTORY_FLAG = "--new-history"


class IdentityMismatch(SegpipeError):
    """The remote tier holds another log under a partition's name (a re-created topic, another
    cluster's): tiering would mix two histories. Nothing was changed."""

    exit_code = ExitCode.REFUSED


def topic_id(partition_metadata: str | None) -> str | None:
    """The `topic_id:` of a partition.metadata file's text (Kafka writes `version` and `topic_id`)."""
    for line in (partition_metadata or "").splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == "topic_id":
            return value.strip() or None
    return None


def describe(metadata: str | None, first_offset: int | None) -> str:
    """A log's identity as an operator reads it."""
    tid = topic_id(metadata)
    start = "empty" if first_offset is None else f"first offset {first_offset}"
    return f"topic id {tid}, {start}" if tid else f"no topic id, {start}"


@dataclass(frozen=True)
class Records:
    """A segment's records as offsets, timestamps and 64-bit digests of key, value and headers."""

    offsets: np.ndarray
    timestamps: np.ndarray
    digests: np.ndarray

    @classmethod
    def of(cls, storage: Storage, path: str, base_offset: int, tp: TopicPartition) -> Records:
        parts = [
            (b.column("offset").to_numpy(), b.column("timestamp").to_numpy(), record_digests(b))
            for b in SegmentReader(storage, path, base_offset).record_batches(tp.topic, tp.partition)
        ]
        if not parts:
            empty = np.zeros(0, np.int64)
            return cls(empty, empty, empty)
        return cls(*(np.concatenate([p[i] for p in parts]) for i in range(3)))

    def first_difference(self, other: Records) -> int | None:
        """The first offset both hold with different records, or None."""
        _, mine, theirs = np.intersect1d(self.offsets, other.offsets, assume_unique=True, return_indices=True)
        differ = (self.digests[mine] != other.digests[theirs]) | (
            self.timestamps[mine] != other.timestamps[theirs]
        )
        hits = np.flatnonzero(differ)
        return int(self.offsets[mine[hits[0]]]) if len(hits) else None


def identity_problem(
    tier: RemoteTier,
    scanned: Scanned,
    tp: TopicPartition,
    local: list[ScannedSegment],
    local_metadata: str | None,
    remote: PartitionManifest,
    log_start: int,
) -> str | None:
    """Why the local log of `tp` is not the log the remote tier holds for it, or None."""
    if not remote.segments or not local:
        return None
    local_first = local[0].meta.base_offset
    both = (
        f"the remote tier holds {describe(remote.partition_metadata, remote.segments[0].base_offset)}; "
        f"the log directory holds {describe(local_metadata, local_first)}"
    )
    theirs, mine = topic_id(remote.partition_metadata), topic_id(local_metadata)
    if theirs and mine and theirs != mine:
        return f"{tp}: another topic's log under the same name ({both})"
    leo = log_end_offset(local, remote)
    start = replacing_from(local, remote, leo, log_start)
    if start is None:
        return None
    uppers = [s.meta.base_offset for s in local[1:]] + [leo]
    for k in range(start, len(local)):
        base, upper = local[k].meta.base_offset, uppers[k]
        if base >= remote.next_offset:
            break
        files = scanned.files[local[k].meta.segment_id]
        mine_records = Records.of(scanned.storage, files.log.path, base, tp)
        for segment in _overlapping(remote.segments, base, upper):
            path = tier.object_path(tp, segment.objects["log"].name)
            offset = mine_records.first_difference(Records.of(tier.storage, path, segment.base_offset, tp))
            if offset is not None:
                return (
                    f"{tp}: at offset {offset} the remote tier's record differs from the local one ({both})"
                )
    return None


def _overlapping(segments: Iterable[RemoteSegment], base: int, upper: int) -> list[RemoteSegment]:
    return [s for s in segments if s.base_offset < upper and s.end_offset >= base]


def refuse_mismatches(problems: list[str]) -> None:
    if problems:
        more = f" (and {len(problems) - 1} more partitions)" if len(problems) > 1 else ""
        raise IdentityMismatch(
            f"tier refused: the remote tier holds another log: {problems[0]}{more}; nothing was changed. "
            f"To replace those partitions' remote history with this log's, run again with {NEW_HISTORY_FLAG} "
            "(the old segments expire after the grace period)"
        )


def proven_releases(
    tier: RemoteTier, scanned: Scanned, plan: TierPlan, committed: PartitionManifest
) -> tuple[list[tuple[int, str]], list[str]]:
    """The releases of `plan` whose remote copy the committed version proves (same range, size
    and CRC-32C of the .log, objects present), and a warning for each that it does not."""
    if not plan.local_released:
        return [], []
    tier.check_objects(committed)
    local = scanned.segments.get(plan.tp, [])
    # Each segment ends where the next begins; the last (released only when sealed) at the log end.
    bounds = [s.meta.base_offset for s in local[1:]] + [plan.log_end_offset]
    uppers = {s.meta.segment_id: upper for s, upper in zip(local, bounds, strict=True)}
    proven: list[tuple[int, str]] = []
    refused: list[str] = []
    for sid, rule in plan.local_released:
        files = scanned.files[sid]
        upper = uppers[sid]
        copy = committed.copy_of(files.base_offset, upper, files.log.size)
        if copy is not None and scanned.storage.checksum(files.log.path).crc32c == copy.objects["log"].crc32c:
            proven.append((sid, rule))
            continue
        if copy is not None:
            why = "its CRC-32C differs from the remote copy's"
        elif committed.rewritten_in_tier(files.base_offset, upper):
            why = "the remote tier holds a compaction of it (clean --in-place), not a copy"
        else:
            why = "no committed remote segment has its offset range and size"
        refused.append(f"{plan.tp}: kept local segment {files.log.name}: {why}")
    return proven, refused
