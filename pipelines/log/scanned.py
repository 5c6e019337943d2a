"""The scan stage every job starts with: batch headers, CRCs and segment metadata of every
segment of a log directory, one Spark task per pack of segments; partitions in offset order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pipelines.log.scan import ScanFailure, ScannedSegment, SegmentTask, run_scan_task, scan_tasks
from pipelines.runtime.faults import fault_point
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.stop import raise_if_stopped
from pipelines.runtime.tasks import run_packed
from segment_io.errors import SegmentError
from segment_io.layout import LogDirListing, SegmentFiles, list_log_dir
from segment_io.remote.view import described
from segment_io.segment.scan import SegmentScan, check_segment_ranges
from segment_io.storage import Location, Place, Storage
from segment_io.topic_partition import TopicPartition

if TYPE_CHECKING:
    from pipelines.output.harness import JobRun

Log = Callable[[str], Any]
# Tasks per core for the scan (and copies): a few per core balance the cores; each more costs a
# PySpark task's fixed overhead (tens of milliseconds here).
SCAN_TASKS_PER_CORE = 2
# What a job does with a partition whose data is bad: stop the run, or leave the partition out whole.
ON_CORRUPT = ("fail", "skip-partition")


@dataclass(frozen=True)
class Scanned:
    """What the scan stage learnt of SRC: its listing (without skipped partitions), one task per
    segment, and per partition the scanned segments in offset order."""

    src: Location  # SRC as the run opened it: every task reads it through this
    listing: LogDirListing
    tasks: list[SegmentTask]
    segments: dict[TopicPartition, list[ScannedSegment]]
    skipped: dict[TopicPartition, SegmentError]  # partitions left out for bad data, and why

    @property
    def storage(self) -> Storage:
        return self.src.storage

    @property
    def url(self) -> str:
        return self.src.url

    @cached_property
    def files(self) -> dict[int, SegmentFiles]:
        """Each segment's files by segment id."""
        return {t.segment_id: t.files for t in self.tasks}

    @cached_property
    def scanned_by_id(self) -> dict[int, ScannedSegment]:
        return {s.meta.segment_id: s for segs in self.segments.values() for s in segs}


def scan_log(
    spark: Spark, src: Place, log: Log, skip_corrupt: bool, topics: Callable[[str], bool] | None = None
) -> Scanned:
    """Batch headers, CRCs and segment metadata of every segment, one Spark task per pack. With
    `skip_corrupt`, a partition with bad data is left out of the run (never half cleaned) and
    named in `Scanned.skipped`. Only the partitions of `topics` (a predicate on the topic's
    name) are read and kept, root checkpoint entries included."""
    src = Location.of(src)
    storage, path = src.storage, src.path
    listing = list_log_dir(storage, path)
    if topics is not None:
        left_out = {p.tp for p in listing.partitions if not topics(p.tp.topic)}
        listing = replace(
            listing,
            partitions=tuple(p for p in listing.partitions if p.tp not in left_out),
            checkpoints=without(listing.checkpoints, left_out),
        )
    if not listing.partitions:  # most likely a wrong path: say so, though the run is valid
        log(
            f"segpipe: no partition directories in {described(src.url)}; the output is an empty log directory"
        )
    tasks = scan_tasks(listing, src)
    results: list[ScannedSegment | ScanFailure] = run_packed(
        spark,
        tasks,
        [t.files.size for t in tasks],
        SCAN_TASKS_PER_CORE,
        lambda pack: [run_scan_task(t, skip_corrupt) for t in pack],
        storage.near,
    )
    by_id = {(r.meta.segment_id if isinstance(r, ScannedSegment) else r.segment_id): r for r in results}
    skipped: dict[TopicPartition, SegmentError] = {}
    segments: dict[TopicPartition, list[ScannedSegment]] = {p.tp: [] for p in listing.partitions}
    for t in tasks:
        tp, result = listing.partitions[t.partition_id].tp, by_id[t.segment_id]
        if isinstance(result, ScanFailure):
            skipped.setdefault(tp, result.error)
        else:
            segments[tp].append(result)
    for part in listing.partitions:
        if part.tp in skipped:
            continue
        try:
            check_segment_ranges(
                [
                    SegmentScan(f.log.path, f.base_offset, f.size, s.table)
                    for f, s in zip(part.segments, segments[part.tp], strict=True)
                ]
            )
        except SegmentError as exc:
            if not skip_corrupt:
                raise
            skipped[part.tp] = exc
    kept = tuple(p for p in listing.partitions if p.tp not in skipped)
    listing = replace(listing, partitions=kept, checkpoints=without(listing.checkpoints, set(skipped)))
    return Scanned(src, listing, tasks, segments, skipped)


def scan_stage(
    run: JobRun, src: Place, log: Log, on_corrupt: str, topics: Callable[[str], bool] | None
) -> Scanned:
    """The scan stage of a job's `run` (its timer, its Spark): SRC scanned, each partition left out
    for bad data said in the log (`on_corrupt` skip-partition; fail raises), then a stop point."""

    with run.timer.stage("scan"):
        scanned = scan_log(run.spark, src, log, skip_corrupt=on_corrupt == "skip-partition", topics=topics)
    for item in skipped_docs(scanned):
        log(f"segpipe: skipped partition {item['partition']}: {item['error']}")
    fault_point("after-scan")
    raise_if_stopped()
    return scanned


def skipped_docs(scanned: Scanned) -> list[dict[str, Any]]:
    """The partitions left out for bad data, as reports name them (file and byte)."""
    return [
        {"partition": str(tp), "path": exc.path, "position": exc.position, "error": str(exc)}
        for tp, exc in sorted(scanned.skipped.items())
    ]


def without(
    checkpoints: dict[str, dict[TopicPartition, int]], skipped: set[TopicPartition]
) -> dict[str, dict[TopicPartition, int]]:
    """Root checkpoints without the entries of partitions the output leaves out."""
    return {
        name: {tp: o for tp, o in entries.items() if tp not in skipped}
        for name, entries in checkpoints.items()
    }
