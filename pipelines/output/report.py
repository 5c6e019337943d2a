"""Run metrics: per-partition figures, Kafka-cleaner-style log lines, JSON report."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from pipelines.output.destination import require_new_file
from pipelines.runtime.spark_handle import SparkSessionLike
from segment_io.format.constants import MB
from segment_io.storage import Location, Place
from segment_io.text import counted


@dataclass
class PartitionMetrics:
    partition: str
    cleanup_policy: list[str]
    bytes_in: int = 0
    bytes_out: int = 0
    records_in: int = 0
    records_out: int = 0
    removed_superseded: int = 0
    removed_tombstone: int = 0
    removed_aborted: int = 0
    removed_null_key: int = 0
    removed_markers: int = 0
    removed_by_retention: int = 0
    bytes_removed_by_retention: int = 0
    segments_in: int = 0
    segments_out: int = 0
    segments_deleted: int = 0
    # Segments deleted by each retention rule, named as the topic configs that set them.
    deleted_by_log_start_offset: int = 0
    deleted_by_retention_bytes: int = 0
    deleted_by_retention_ms: int = 0
    segments_copied: int = 0
    batches_copied_verbatim: int = 0
    batches_rewritten: int = 0
    batches_emptied: int = 0
    delete_horizons_stamped: int = 0
    log_start_offset: int = 0
    cleaned_up_to: int | None = None
    first_dirty: int | None = None
    seconds: float = 0.0

    def cleaner_line(self) -> str:
        """One line in the shape of Kafka's cleaner summary."""
        mb_in = self.bytes_in / MB
        mb_out = self.bytes_out / MB
        rate = mb_in / self.seconds if self.seconds > 0 else 0.0
        reduction = 100.0 * (1 - self.bytes_out / self.bytes_in) if self.bytes_in else 0.0
        fewer = 100.0 * (1 - self.records_out / self.records_in) if self.records_in else 0.0
        if self.cleaned_up_to is not None:
            dirty = f" (dirty section = [{self.first_dirty}, {self.cleaned_up_to}])"
        else:  # a compacted topic with nothing cleanable says so (a warning line names why)
            dirty = " (nothing cleanable)" if "compact" in self.cleanup_policy else " (retention only)"
        return (
            f"segpipe cleaned log {self.partition}{dirty}: {mb_in:,.1f} MB of log processed in "
            f"{self.seconds:,.1f} seconds ({rate:,.1f} MB/sec); {mb_in:,.1f} MB -> {mb_out:,.1f} MB, "
            f"{reduction:.1f}% size reduction ({fewer:.1f}% fewer messages)"
        )


@dataclass
class RunReport:
    src: str
    dst: str
    now_ms: int
    run_id: str
    partitions: list[PartitionMetrics] = field(default_factory=list)
    seconds_total: float = 0.0
    seconds_by_stage: dict[str, float] = field(default_factory=dict)
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list)
    plan: list[dict[str, Any]] = field(default_factory=list)  # per partition, what the run decided
    skipped: list[dict[str, Any]] = field(default_factory=list)  # partitions left out: bad data
    kafka_tier: dict[str, Any] | None = None  # in place on Kafka's tiered storage: the swaps

    @property
    def bytes_in(self) -> int:
        return sum(p.bytes_in for p in self.partitions)

    @property
    def bytes_out(self) -> int:
        return sum(p.bytes_out for p in self.partitions)

    def total(self, name: str) -> int:
        """A PartitionMetrics figure summed over the partitions."""
        return int(sum(getattr(p, name) for p in self.partitions))

    def totals_line(self) -> str:
        """One line for the whole run: partitions, bytes and records in and out, why records went."""
        head = f"segpipe: {counted(len(self.partitions), 'partition')}, {self.bytes_in / MB:,.1f} MB"
        retention = (
            f"retention deletes {self.total('segments_deleted'):,} segments "
            f"({self.total('bytes_removed_by_retention') / MB:,.1f} MB, "
            f"{self.total('removed_by_retention'):,} records)"
        )
        tail = f"{self.seconds_total:,.1f} s, {len(self.warnings)} warnings"
        if self.skipped:
            tail += f", {counted(len(self.skipped), 'partition')} skipped for bad data"
        if self.dry_run:
            return f"{head}; dry run: {retention}; nothing written; {tail}"
        removed = ", ".join(
            f"{label} {self.total(name):,}"
            for label, name in (
                ("superseded", "removed_superseded"),
                ("tombstones", "removed_tombstone"),
                ("aborted", "removed_aborted"),
                ("null keys", "removed_null_key"),
                ("markers", "removed_markers"),
            )
        )
        return (
            f"{head} -> {self.bytes_out / MB:,.1f} MB; records {self.total('records_in'):,} -> "
            f"{self.total('records_out'):,}; {retention}; compaction removed {removed}; {tail}"
        )

    def to_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["bytes_in"] = self.bytes_in
        doc["bytes_out"] = self.bytes_out
        doc["throughput_mb_per_s"] = self.bytes_in / MB / self.seconds_total if self.seconds_total else 0.0
        return doc

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per partition (the metrics DataFrame of `pipelines.clean`)."""
        out = []
        for p in self.partitions:
            row = asdict(p)
            row["cleanup_policy"] = ",".join(p.cleanup_policy)
            out.append(row)
        return out

    def to_dataframe(self, spark: SparkSessionLike) -> Any:
        """The per-partition metrics as a Spark DataFrame (the shape of `rows()`)."""
        types = {"partition": "string", "cleanup_policy": "string", "seconds": "double"}
        ddl = ", ".join(f"{f.name} {types.get(f.name, 'long')}" for f in fields(PartitionMetrics))
        return spark.createDataFrame([tuple(row.values()) for row in self.rows()], ddl)


class StageTimer:
    """Seconds per stage of a run, in the order the stages ran (`with timer.stage("scan"): ...`);
    `on_enter`/`on_leave` tell others (the progress line) which stage is under way."""

    def __init__(
        self, on_enter: Callable[[str], None] | None = None, on_leave: Callable[[], None] | None = None
    ) -> None:
        self.started = time.perf_counter()
        self.seconds: dict[str, float] = {}
        self.on_enter = on_enter
        self.on_leave = on_leave

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        if self.on_enter is not None:
            self.on_enter(name)
        try:
            yield
        finally:
            self.seconds[name] = time.perf_counter() - t0
            if self.on_leave is not None:
                self.on_leave()

    @property
    def total(self) -> float:
        return time.perf_counter() - self.started


def write_json_report(report: Place, doc: dict[str, Any]) -> None:
    """A run's report at `report` (--report), never over an existing file: checked when the run
    starts too, but another run may have written it since."""

    report = Location.of(report)
    require_new_file(report)
    report.storage.write_atomic(report.path, json.dumps(doc, indent=2).encode())
