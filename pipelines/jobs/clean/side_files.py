"""The files beside the segments in the output: producer snapshots, partition files and the
root checkpoints, carried over and updated as retention and compaction require
(docs/cleaning-rules.md#after-deletion)."""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Any

from pipelines.log.plan import PartitionPlan
from pipelines.log.producers import write_snapshots
from pipelines.log.scan import ScannedSegment
from pipelines.output.checkpoints import write_checkpoint_files
from pipelines.output.staging import Staging
from segment_io.checkpoints import (
    format_leader_epoch_checkpoint,
    parse_leader_epoch_checkpoint,
)
from segment_io.layout import (
    CLEANER_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_CHECKPOINT,
    RECOVERY_CHECKPOINT,
    ROLLED_SEGMENT_SUFFIXES,
    LogDirListing,
    PartitionListing,
    segment_file_name,
)
from segment_io.producer_snapshot import snapshot_offset
from segment_io.storage import Location, Storage, transfer
from segment_io.topic_partition import TopicPartition


def _bases(segments: list[ScannedSegment], ids: list[int]) -> list[int]:
    by_id = {s.meta.segment_id: s.meta.base_offset for s in segments}
    return [by_id[i] for i in ids]


def write_partition_files(
    src: Storage,
    part: PartitionListing,
    plan: PartitionPlan,
    segments: list[ScannedSegment],
    staging: Staging,
    log: Callable[[str], Any],
) -> None:
    """Producer snapshots of surviving segments, and where the source has none, the ones a broker
    writes: at each segment base and the log end (compaction changes no producer's state); the other
    partition files (the leader-epoch checkpoint truncated to the log start offset), and an empty
    segment where retention removed every segment."""
    out_dir = posixpath.join(staging.path, plan.tp.dir_name)
    staging.storage.makedirs(out_dir)
    deleted_bases = set(_bases(segments, [sid for sid, _ in plan.deleted]))
    # A snapshot goes with a segment that goes: deleted by retention, or merged into a group's
    # segment of another base offset (Kafka's cleaner removes those when it replaces the segments).
    merged = {s.meta.base_offset for s in segments if s.meta.segment_id in _grouped(plan)} - {
        g.base_offset for g in (plan.compaction.groups if plan.compaction is not None else ())
    }
    for snap in part.snapshots:
        if snapshot_offset(snap.name) not in deleted_bases | merged:
            transfer(src, snap.path, staging.storage, posixpath.join(out_dir, snap.name), snap.mtime_ms)
    if plan.roll_empty_at is None:
        kept = [s.meta.base_offset not in deleted_bases for s in segments]
        groups = plan.compaction.groups if plan.compaction is not None else ()
        bases = [*_bases(segments, plan.copied), *(g.base_offset for g in groups)]
        write_snapshots(
            src,
            part,
            segments,
            kept,
            plan.log_start_offset,
            bases,
            plan.log_end_offset,
            staging.storage,
            out_dir,
            log,
        )
    for other in part.other_files:
        target = posixpath.join(out_dir, other.name)
        if other.name == LEADER_EPOCH_CHECKPOINT:
            entries = parse_leader_epoch_checkpoint(src.read(other.path), other.path)
            staging.storage.write_atomic(
                target, format_leader_epoch_checkpoint(truncate_epochs(entries, plan.log_start_offset))
            )
        else:
            transfer(src, other.path, staging.storage, target, other.mtime_ms)
    if plan.roll_empty_at is not None:
        for kind in ROLLED_SEGMENT_SUFFIXES:
            staging.storage.write_atomic(
                posixpath.join(out_dir, segment_file_name(plan.roll_empty_at, kind)), b""
            )


def _grouped(plan: PartitionPlan) -> set[int]:
    """The ids of the segments the compaction rewrites into its groups."""
    return {i for g in (plan.compaction.groups if plan.compaction is not None else ()) for i in g.segment_ids}


def truncate_epochs(entries: list[tuple[int, int]], log_start: int) -> list[tuple[int, int]]:
    """Remove entries starting at or below the log start; re-add the last removed epoch at it."""
    removed = [e for e in entries if e[1] <= log_start]
    kept = [e for e in entries if e[1] > log_start]
    return ([(removed[-1][0], log_start)] if removed else []) + kept


def write_root_checkpoints(
    listing: LogDirListing,
    plans: list[PartitionPlan],
    segments: dict[TopicPartition, list[ScannedSegment]],
    staging: Staging,
    source: Location,
) -> None:
    """Root checkpoints carried over (log start offsets and cleaner offsets updated), and the
    source's identity."""
    cps = {name: dict(v) for name, v in listing.checkpoints.items()}
    log_start = cps.get(LOG_START_CHECKPOINT, {})
    cleaner = cps.get(CLEANER_CHECKPOINT, {})
    recovery = cps.get(RECOVERY_CHECKPOINT)
    for plan in plans:
        surviving = _bases(segments[plan.tp], plan.copied)
        if plan.compaction is not None:
            surviving += [g.base_offset for g in plan.compaction.groups]
        first_base = plan.roll_empty_at if plan.roll_empty_at is not None else min(surviving, default=0)
        # Kafka keeps an entry only where the log start offset is above the first segment's base.
        if plan.log_start_offset > first_base:
            log_start[plan.tp] = plan.log_start_offset
        else:
            log_start.pop(plan.tp, None)
        if plan.compaction is not None:
            cleaner[plan.tp] = plan.compaction.end_offset
        if recovery is not None and plan.tp in recovery:
            recovery[plan.tp] = min(recovery[plan.tp], plan.log_end_offset)
    cps[LOG_START_CHECKPOINT] = log_start
    cps[CLEANER_CHECKPOINT] = cleaner
    write_checkpoint_files(staging, cps, set(listing.checkpoints), source)
