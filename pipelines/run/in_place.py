"""A job's compact step in place: the source's Kafka tier compacted while the cluster serves it,
as `clean --in-place --kafka-tier` does (each changed remote segment swapped for its proved
successor). A step that could not do all it set out to (a partition left as it was, a swap undone)
fails with exit 3 and is not recorded as done, so a retry runs it again; the swap journal makes
that retry finish or undo what a killed one left."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipelines.config.jobfile import JobFile
from pipelines.errors import PartitionsLeft
from pipelines.jobs.clean.kafka_tier import clean_kafka_tier
from pipelines.jobs.clean.request import CleanRequest
from pipelines.jobs.validate.gate import promise_gate_for
from pipelines.kafka_tier.rewrite import left_in_place
from pipelines.kafka_tier.swap import GRACE_MS
from pipelines.runtime.spark_handle import Spark

Log = Callable[[str], Any]


def compact_in_place(spark: Spark, job: JobFile, request: CleanRequest, log: Log) -> dict[str, Any]:
    """Run the step; its record: what was swapped and removed, and the remote size before and after."""
    assert job.in_place is not None
    given = job.in_place.grace_ms
    grace = GRACE_MS if given is None else given
    report = clean_kafka_tier(spark, request, promise_gate_for(spark, log), log, grace_ms=grace)
    left = left_in_place(report.kafka_tier)
    if left:
        raise PartitionsLeft(f"step compact left {len(left)} as they were: " + "; ".join(left[:5]))
    done = report.kafka_tier or {}
    swapped = done.get("swapped", [])
    return {
        "run_id": report.run_id,
        "segments_swapped": len(swapped),
        "records_removed": sum(s["records_before"] - s["records_after"] for s in swapped),
        "remote_bytes_before": done.get("remote_bytes_before"),
        "remote_bytes_after": done.get("remote_bytes_after"),
        "unchanged_segments": done.get("unchanged_segments"),
        "kept_whole": done.get("kept_whole", []),
        "resumed": len(done.get("resumed", [])),
    }
