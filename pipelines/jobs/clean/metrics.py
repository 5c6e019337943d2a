"""One partition's report figures, from its plan, its scanned segments and its rewrite tasks."""

from __future__ import annotations

from pipelines.jobs.clean.rewrite import GroupStats
from pipelines.log.plan import PartitionPlan
from pipelines.log.scan import ScannedSegment
from pipelines.output.report import PartitionMetrics


def _records(segments: list[ScannedSegment]) -> int:
    return int(sum(s.table.records_count.sum() for s in segments))


def partition_metrics(
    plan: PartitionPlan, segments: list[ScannedSegment], stats: list[GroupStats]
) -> PartitionMetrics:
    by_id = {s.meta.segment_id: s for s in segments}
    deleted = [by_id[sid] for sid, _ in plan.deleted]
    copied = [by_id[sid] for sid in plan.copied]
    m = PartitionMetrics(str(plan.tp), sorted(plan.config.cleanup_policy))
    m.segments_in = len(segments)
    m.bytes_in = plan.input_bytes
    m.records_in = _records(segments)
    m.segments_deleted = len(deleted)
    for _, rule in plan.deleted:  # rule: log_start_offset, retention_bytes or retention_ms
        setattr(m, f"deleted_by_{rule}", getattr(m, f"deleted_by_{rule}") + 1)
    m.removed_by_retention = _records(deleted)
    m.bytes_removed_by_retention = plan.deleted_bytes
    m.segments_copied = len(copied)
    m.bytes_out = sum(s.meta.size for s in copied) + sum(s.bytes_out for s in stats)
    m.records_out = _records(copied) + sum(s.records_out for s in stats)
    m.segments_out = len(copied) + len(stats) + (1 if plan.roll_empty_at is not None else 0)
    for s in stats:
        m.removed_superseded += s.superseded
        m.removed_tombstone += s.tombstones
        m.removed_aborted += s.aborted
        m.removed_null_key += s.null_keys
        m.removed_markers += s.markers
        m.batches_copied_verbatim += s.batches_copied
        m.batches_rewritten += s.batches_rewritten
        m.batches_emptied += s.batches_emptied
        m.delete_horizons_stamped += s.horizons_stamped
        m.seconds += s.seconds
    m.log_start_offset = plan.log_start_offset
    if plan.compaction is not None:
        m.first_dirty = plan.compaction.first_dirty
        m.cleaned_up_to = plan.compaction.end_offset
    return m
