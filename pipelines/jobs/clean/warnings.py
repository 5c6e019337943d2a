"""What an operator must hear about a run although it is valid: partitions that retention empties,
segments whose age comes from a file time."""

from __future__ import annotations

from pipelines.log.plan import PartitionPlan
from pipelines.log.retention import emptied_warning
from pipelines.log.scan import ScannedSegment
from segment_io.layout import segment_file_name
from segment_io.topic_partition import TopicPartition


def run_warnings(
    plans: list[PartitionPlan], segments: dict[TopicPartition, list[ScannedSegment]], now_ms: int
) -> list[str]:
    out: list[str] = []
    for plan in plans:
        segs = segments[plan.tp]
        if segs and len(plan.deleted) == len(segs):
            newest = max(s.meta.largest_timestamp for s in segs)
            out.append(emptied_warning(plan.tp, {rule for _, rule in plan.deleted}, newest, now_ms))
        aged = [s for s in segs if s.meta.aged_by_mtime and s.meta.size > 0]
        config = plan.config
        time_matters = (config.delete and config.retention_ms >= 0) or config.min_compaction_lag_ms > 0
        if aged and time_matters:
            names = ", ".join(segment_file_name(s.meta.base_offset, "log") for s in aged)
            out.append(
                f"{plan.tp}: no time index entry in {names}: their age for retention and "
                "min.compaction.lag.ms is the file's modification time (what Kafka falls back to)"
            )
        if plan.held_by is not None:
            out.append(f"{plan.tp}: {plan.held_by.holds('cleaning')}")
        if plan.stray_files:
            out.append(
                f"{plan.tp}: files that are not Kafka's, carried over unread: {', '.join(plan.stray_files)}"
            )
    return out
