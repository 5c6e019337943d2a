"""What an operator must hear about a `tier` run although it is valid: partitions that retention
empties (in both tiers), and partitions held back because a change would not be provably safe."""

from __future__ import annotations

from pipelines.jobs.tier.plan import TierPlan
from pipelines.log.retention import emptied_warning
from pipelines.log.scan import ScannedSegment
from segment_io.topic_partition import TopicPartition


def tier_warnings(
    plans: list[TierPlan], segments: dict[TopicPartition, list[ScannedSegment]], now_ms: int
) -> list[str]:
    out: list[str] = []
    for plan in plans:
        local = segments.get(plan.tp, [])  # a partition only the remote tier holds has none
        rules = {rule for _, rule in [*plan.local_deleted, *plan.remote_deleted]}
        emptied = plan.log_start_offset >= plan.log_end_offset and rules - {"log_start_offset"}
        if emptied and (local or plan.remote_deleted):
            out.append(emptied_warning(plan.tp, rules, plan.newest_timestamp, now_ms))
        if plan.held:
            out.append(f"not tiered: {plan.tp}: {plan.held}")
        if plan.held_by is not None:
            out.append(f"{plan.tp}: {plan.held_by.holds('tiering')}")
    return out
