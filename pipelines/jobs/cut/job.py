"""`cut`: a log directory as Kafka's truncation leaves it, written to a new one
(docs/cutting-a-log.md). Stages: scan (headers, CRCs) → plan (where each partition is cut: an
offset, or the offset ListOffsets gives for a time) → write (segments below the cut copied byte
for byte, the one it falls in written up to it with indexes rebuilt) → side files (snapshots,
leader epochs, root checkpoints, lowered to the new end) → publish. SRC is only read; DST appears
complete or not at all."""

from __future__ import annotations

import posixpath
from dataclasses import asdict, dataclass, field
from typing import Any

from pipelines.jobs.cut.request import CutRequest
from pipelines.log.producers import kept_snapshots, listed_log_start, state_at_end
from pipelines.log.scanned import SCAN_TASKS_PER_CORE, Log, Scanned, scan_stage, skipped_docs
from pipelines.log.truncation import (
    OpenTransaction,
    PartitionCut,
    cut_at,
    kept_epochs,
    kept_txns,
    lowered,
    lowered_cleaner_offset,
)
from pipelines.output.checkpoints import write_checkpoint_files
from pipelines.output.copy import CopyTask, run_copies, segment_copies
from pipelines.output.harness import Checked, JobRun, checked, job_run, publish, staged_output
from pipelines.output.report import write_json_report
from pipelines.output.staging import CUT_JOB, MANIFEST_JOB, REPORT, Staging
from pipelines.runtime.faults import fault_point
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.stop import raise_if_stopped
from pipelines.runtime.tasks import DRIVER_BYTES, run_packed
from segment_io.checkpoints import format_leader_epoch_checkpoint, parse_leader_epoch_checkpoint
from segment_io.index import read_txn_index
from segment_io.layout import CLEANER_CHECKPOINT, LEADER_EPOCH_CHECKPOINT, LOG_START_CHECKPOINT, SegmentFiles
from segment_io.producer_snapshot import snapshot_name, snapshot_offset, write_snapshot
from segment_io.segment.reader import SegmentReader
from segment_io.segment.writer import SegmentLimits, SegmentWriter
from segment_io.storage import Location, Place
from segment_io.text import counted
from segment_io.topic_partition import TopicPartition

WORKER_MODULES = ("pipelines.log.scan", "pipelines.jobs.cut.job", "pipelines.output.copy")
# The segment a cut falls in is written whole again (its own size), with Kafka's default indexes.
LIMITS = SegmentLimits(segment_bytes=2**62)


def cut(spark: Spark, src: Place, dst: Place, log: Log = print, **options: Any) -> CutReport:
    """Cut SRC into DST (options: CutRequest)."""
    return run_cut(spark, CutRequest(src=Location.of(src), dst=Location.of(dst), **options), log)


@dataclass(frozen=True)
class CutTask:
    """One segment written up to its `batches`-th batch (0: an empty segment at `base_offset`),
    under `partition_dir` of the staging area; `end`: the cut log's end offset."""

    src: Location
    partition_dir: str
    base_offset: int
    files: SegmentFiles | None  # None: no source segment (an empty one at the cut)
    batches: int
    end: int


@dataclass
class PartitionReport:
    partition: str
    asked: int | None  # the offset the partition was cut at (None: no record is that new)
    log_end_offset_before: int
    log_end_offset: int
    segments_dropped: int
    records_removed: int
    batches_removed: int
    bytes_removed: int
    records_out: int
    open_transactions: list[dict[str, int]]  # every transaction open at the new end
    already_open: list[dict[str, int]] = field(default_factory=list)  # of those, open in SRC as well

    @property
    def left_open(self) -> int:
        """The transactions the cut leaves open (their marker is above it)."""
        return len(self.open_transactions) - len(self.already_open)

    def line(self) -> str:
        opened = f", {counted(self.left_open, 'transaction')} left open" if self.left_open else ""
        return (
            f"segpipe: {self.partition}: cut at offset {self.asked}, log end {self.log_end_offset_before} -> "
            f"{self.log_end_offset}, {counted(self.records_removed, 'record')} removed{opened}"
        )

    def emptied_line(self) -> str | None:
        """A warning where the cut leaves a partition that held records with none."""
        if self.records_out or not self.records_removed:
            return None
        return (
            f"segpipe: warning: the cut leaves {self.partition} empty: its first record is at or after "
            f"the cut (log end {self.log_end_offset_before} -> {self.log_end_offset}, "
            f"{counted(self.records_removed, 'record')} removed)"
        )


@dataclass
class CutReport:
    """The report of one cut (`to_dict()`: what DST/_segpipe/report.json and --report hold)."""

    src: str
    dst: str
    until_offset: int | None
    until_time: int | None
    dry_run: bool
    run_id: str = "dry-run"
    partitions: list[PartitionReport] | None = None
    skipped: list[dict[str, Any]] | None = None
    seconds_total: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def totals_line(self) -> str:
        parts = self.partitions or []
        cut = [p for p in parts if p.log_end_offset < p.log_end_offset_before]
        removed = sum(p.records_removed for p in parts)
        opened = sum(p.left_open for p in parts)
        already = sum(len(p.already_open) for p in parts)
        what = "would cut" if self.dry_run else "cut"
        return (
            f"segpipe: {what} {len(cut)} of {counted(len(parts), 'partition')}, "
            f"{counted(removed, 'record')} removed, {counted(opened, 'transaction')} left open by the cut"
            + (f" ({already} open in the source already)" if already else "")
        )


def run_cut(spark: Spark, request: CutRequest | Checked[CutRequest], log: Log = print) -> CutReport:
    """The cut `request` asks for."""
    request = checked(request)
    with job_run(spark, WORKER_MODULES) as run:
        return _cut(run, request, log)


def _cut(run: JobRun, request: CutRequest, log: Log) -> CutReport:
    timer = run.timer
    scanned = scan_stage(run, request.src, log, request.on_corrupt, request.topics)
    skipped = skipped_docs(scanned)
    with timer.stage("plan"):
        cuts = _plan(scanned, request)
    report = CutReport(
        request.src.url, request.dst.url, request.until_offset, request.until_time, request.dry_run
    )
    report.skipped = skipped
    report.partitions = [_partition_report(scanned, tp, c) for tp, c in cuts.items()]
    for p in report.partitions:
        if p.log_end_offset < p.log_end_offset_before:
            log(p.line())
        emptied = p.emptied_line()
        if emptied:
            log(emptied)
    if request.dry_run:
        report.seconds_total = timer.total
        _write_report(report, request.report_path)
        log(report.totals_line())
        return report
    with staged_output(run, request.dst, log) as staging:
        report.run_id = staging.run_id
        with timer.stage("write"):
            copies, tasks = _work(scanned, cuts)
            sizes = [t.files.size if t.files else 0 for t in tasks] + [c.size for c in copies]
            items: list[CutTask | CopyTask] = [*tasks, *copies]
            run_packed(
                run.spark,
                items,
                sizes,
                SCAN_TASKS_PER_CORE,
                lambda pack: _write_pack(pack, staging.location),
                scanned.storage.near,
                DRIVER_BYTES,
            )
        raise_if_stopped()
        with timer.stage("copy"):
            _side_files(scanned, cuts, staging, log)
        report.seconds_total = timer.total
        staging.write_meta(REPORT, report.to_dict())
        publish(
            staging,
            {
                "run_id": staging.run_id,
                "src": request.src.url,
                MANIFEST_JOB: CUT_JOB,
                "until_offset": request.until_offset,
                "until_time": request.until_time,
                "partitions": [str(tp) for tp in cuts],
                "skipped": skipped,
            },
            {p.partition: p.records_out for p in report.partitions},
        )
    _write_report(report, request.report_path)
    log(report.totals_line())
    return report


def _plan(scanned: Scanned, request: CutRequest) -> dict[TopicPartition, PartitionCut]:
    """Each partition's cut: at the offset asked, or at ListOffsets of the time asked."""
    starts = scanned.listing.checkpoints.get(LOG_START_CHECKPOINT, {})
    return {
        part.tp: cut_at(
            scanned.storage,
            part,
            [s.table for s in scanned.segments[part.tp]],
            request.until_offset,
            request.until_time,
            starts.get(part.tp, 0),
        )
        for part in scanned.listing.partitions
    }


def _partition_report(scanned: Scanned, tp: TopicPartition, c: PartitionCut) -> PartitionReport:
    segments = scanned.segments[tp]
    files = next(p for p in scanned.listing.partitions if p.tp == tp).segments
    records = batches = size = dropped = records_out = 0
    for seg, f, kept in zip(segments, files, c.kept_batches, strict=True):
        table = seg.table
        n = 0 if kept is None else kept
        dropped += kept is None
        records += int(table.records_count[n:].clip(min=0).sum())
        records_out += int(table.records_count[:n].clip(min=0).sum())
        batches += len(table) - n
        size += f.size - (int(table.position[n]) if n < len(table) else f.size)

    def named(transactions: tuple[OpenTransaction, ...]) -> list[dict[str, int]]:
        return [
            {"producer_id": o.producer_id, "producer_epoch": o.producer_epoch, "first_offset": o.first_offset}
            for o in transactions
        ]

    return PartitionReport(
        str(tp),
        c.asked,
        c.before,
        c.end,
        dropped,
        records,
        batches,
        size,
        records_out,
        named(c.open_transactions),
        named(c.already_open),
    )


def _work(scanned: Scanned, cuts: dict[TopicPartition, PartitionCut]) -> tuple[list[CopyTask], list[CutTask]]:
    """Whole segments to copy, and the segments to write up to the cut (or empty at it)."""
    copies: list[CopyTask] = []
    tasks: list[CutTask] = []
    for part in scanned.listing.partitions:
        c = cuts[part.tp]
        for seg, files, kept in zip(scanned.segments[part.tp], part.segments, c.kept_batches, strict=True):
            if kept is None:
                continue
            if kept == len(seg.table):
                copies += segment_copies(part.tp.dir_name, files, scanned.src)
            else:
                tasks.append(CutTask(scanned.src, part.tp.dir_name, files.base_offset, files, kept, c.end))
        if c.empty_at is not None:
            tasks.append(CutTask(scanned.src, part.tp.dir_name, c.empty_at, None, 0, c.end))
    return copies, tasks


def _write_pack(pack: list[CutTask | CopyTask], staging: Location) -> list[None]:
    """Executed on a worker: copies, and segments written up to the cut."""
    run_copies([t for t in pack if isinstance(t, CopyTask)], staging)
    for task in pack:
        if isinstance(task, CutTask):
            cut_segment(task, staging)
    return []


def cut_segment(task: CutTask, staging: Location) -> None:
    """The segment's first `task.batches` batches copied as they are into a segment of the same
    base offset (its indexes rebuilt, its `.txnindex` without the transactions whose marker is
    gone, its mtime kept)."""
    writer = SegmentWriter(staging.storage, staging.file(task.partition_dir), LIMITS)
    files = task.files
    mtime = None if files is None else files.log.mtime_ms
    writer.roll(task.base_offset, mtime)
    if files is not None:
        storage = task.src.storage
        reader = SegmentReader(storage, files.log.path, files.base_offset)
        table = reader.scan().table
        for i in range(task.batches):
            last = int(table.last_offset[i])
            base = int(table.base_offset[i])
            writer.append(
                reader.batch_bytes(i), base if base >= 0 else last, last, int(table.max_timestamp[i])
            )
        if files.txnindex is not None:
            writer.keep_txn_index()  # Kafka truncates the file, never removes it
            for txn in kept_txns(
                read_txn_index(storage.read(files.txnindex.path), files.txnindex.path), task.end
            ):
                writer.append_aborted(txn)
        fault_point("mid-rewrite")
    writer.close(mtime)


def _side_files(
    scanned: Scanned, cuts: dict[TopicPartition, PartitionCut], staging: Staging, log: Log
) -> None:
    """Per partition: the producer snapshots a truncation keeps and, where the log was cut, one at
    its new end (producers_at_end); the leader epochs that start below the end; its other files as
    they are; the root checkpoints lowered to each new end."""
    copies = []
    for part in scanned.listing.partitions:
        cut = cuts[part.tp]
        end = cut.end
        directory = posixpath.join(staging.path, part.tp.dir_name)
        staging.storage.makedirs(directory)
        log_start = listed_log_start(scanned.listing, part)
        ours = cut.end < cut.before  # the log was cut (a partition not cut keeps its files as they are)
        kept = kept_snapshots(part, log_start, end) if ours else part.snapshots
        for info in kept:
            target = posixpath.join(part.tp.dir_name, info.name)
            copies.append(CopyTask(scanned.src, info.path, target, info.mtime_ms, info.size))
        # Kafka's truncation keeps a snapshot already at the new end as it is, and writes none for a
        # partition the cut empties; else the state at the new end is written there.
        if ours and end > log_start and not any(snapshot_offset(i.name) == end for i in kept):
            state = state_at_end(
                scanned.storage, part, scanned.segments[part.tp], end, cut.kept_batches, log_start, log
            )
            staging.storage.write_atomic(
                posixpath.join(directory, snapshot_name(end)), write_snapshot(state.values())
            )
        for info in part.other_files:
            target = posixpath.join(part.tp.dir_name, info.name)
            if ours and info.name == LEADER_EPOCH_CHECKPOINT:
                entries = parse_leader_epoch_checkpoint(scanned.storage.read(info.path), info.path)
                staging.storage.write_atomic(
                    posixpath.join(staging.path, target),
                    format_leader_epoch_checkpoint(kept_epochs(entries, end)),
                    info.mtime_ms,
                )
            else:
                copies.append(CopyTask(scanned.src, info.path, target, info.mtime_ms, info.size))
    run_copies(copies, staging.location)
    bases = {part.tp: [f.base_offset for f in part.segments] for part in scanned.listing.partitions}

    def checkpointed(name: str, tp: TopicPartition, offset: int) -> int:
        if name == CLEANER_CHECKPOINT:
            return lowered_cleaner_offset(offset, bases[tp], cuts[tp])
        return lowered(offset, cuts[tp].end)

    checkpoints = {
        name: {tp: checkpointed(name, tp, offset) for tp, offset in entries.items() if tp in cuts}
        for name, entries in scanned.listing.checkpoints.items()
    }
    write_checkpoint_files(staging, checkpoints, set(scanned.listing.checkpoints), scanned.src)


def _write_report(report: CutReport, at: Location | None) -> None:
    if at:
        write_json_report(at, report.to_dict())
