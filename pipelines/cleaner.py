"""`clean`: retention and compaction of a log directory into a new one (scan → plan → key map →
rewrite → commit), as Spark jobs over segment_io."""

from __future__ import annotations

import json
import posixpath
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from pipelines.commit import Staging, require_destination
from pipelines.compaction import GroupStats, RewriteContext, rewrite_groups
from pipelines.config import JobConfig
from pipelines.keymap import GroupBounds, KeyTask, map_keys, reduce_keys
from pipelines.plan import Checkpoints, GroupPlan, PartitionPlan, plan_partition
from pipelines.report import PartitionMetrics, RunReport
from pipelines.scan import ScannedSegment, SegmentTask, run_scan_task, scan_tasks
from pipelines.worker_errors import segment_error_in
from segment_io.checkpoints import (
    format_leader_epoch_checkpoint,
    format_offset_checkpoint,
    parse_leader_epoch_checkpoint,
)
from segment_io.layout import ROOT_CHECKPOINTS, LogDirListing, list_log_dir, segment_file_name
from segment_io.segment.scan import SegmentScan, check_segment_ranges
from segment_io.storage import Storage, open_storage, transfer
from segment_io.topic_partition import TopicPartition

BUCKET_ROWS = 2_000_000
MAX_BUCKETS = 4096
# Tasks per core for the scan (and copy) and the key map's map side: a few per core balance
# the cores; each more costs a PySpark task's fixed overhead (tens of milliseconds here).
SCAN_TASKS_PER_CORE = 2
MAP_TASKS_PER_CORE = 3


@dataclass(frozen=True)
class CopyTask:
    src_url: str
    src_path: str
    dst_path: str  # relative to the staging root
    mtime_ms: int
    size: int


def _now_ms() -> int:
    return int(time.time() * 1000)


def clean(
    spark: Any,
    src: str,
    dst: str,
    config: JobConfig | None = None,
    now_ms: int | None = None,
    dry_run: bool = False,
    report_path: str | None = None,
    log: Any = print,
) -> RunReport:
    """Apply Kafka's retention and compaction to every partition of SRC, writing DST.

    `spark` is a SparkSession or a SparkContext (only the core engine is used). SRC is only
    read. DST must be absent or empty; it appears complete or not at all.
    Returns the run report (`report.rows()` is one metrics row per partition).
    """
    config = config or JobConfig()
    try:
        return _clean(spark, src, dst, config, now_ms, dry_run, report_path, log)
    except Exception as exc:
        typed = segment_error_in(exc)
        if typed is None or typed is exc:
            raise
        raise typed from None


def _clean(
    spark: Any,
    src: str,
    dst: str,
    config: JobConfig,
    now_ms: int | None,
    dry_run: bool,
    report_path: str | None,
    log: Any,
) -> RunReport:
    now = _now_ms() if now_ms is None else now_ms
    if not dry_run:
        require_destination(src, dst)
    started = time.perf_counter()
    stages: dict[str, float] = {}
    src_storage, src_path = open_storage(src)
    src_url = src_storage.url(src_path)
    listing = list_log_dir(src_storage, src_path)
    if not listing.partitions:  # most likely a wrong path: say so, though the run is valid
        log(f"segpipe: no partition directories in {src}; the output is an empty log directory")
    sc = getattr(spark, "sparkContext", spark)

    # Scan and plan read SRC only; nothing is created at DST until the plan stands.
    t0 = time.perf_counter()
    tasks = scan_tasks(listing, src_url)
    packs = _packs([t.files.size for t in tasks], sc.defaultParallelism * SCAN_TASKS_PER_CORE)
    scanned: list[ScannedSegment] = (
        sc.parallelize([[tasks[i] for i in pack] for pack in packs], len(packs))
        .flatMap(lambda pack: [run_scan_task(t) for t in pack])
        .collect()
        if tasks
        else []
    )
    by_id = {s.meta.segment_id: s for s in scanned}
    per_partition = _group_by_partition(listing, tasks, by_id)
    stages["scan"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    plans = _plan(listing, per_partition, config, now)
    stages["plan"] = time.perf_counter() - t0
    if dry_run:
        report = RunReport(src, dst, now, "dry-run", dry_run=True)
        report.partitions = [_metrics(p, per_partition[p.tp], []) for p in plans]
        report.seconds_total = time.perf_counter() - started
        report.seconds_by_stage = stages
        log(json.dumps({"now_ms": now, "partitions": [p.summary() for p in plans]}, indent=2))
        return report

    staging = Staging.create(dst)
    report = RunReport(src, dst, now, staging.run_id)
    try:
        t0 = time.perf_counter()
        segment_files = {t.segment_id: t.files for t in tasks}
        stats = _compact(sc, plans, by_id, segment_files, src_url, staging.url, now)
        stages["compact"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        copies = _copy_tasks(listing, plans, per_partition, tasks, src_url)
        if copies:
            dst_url = staging.url
            sizes = [c.size for c in copies]
            parts = sc.defaultParallelism * SCAN_TASKS_PER_CORE
            copy_packs = [[copies[i] for i in p] for p in _packs(sizes, parts)]
            sc.parallelize(copy_packs, len(copy_packs)).foreach(lambda pack: _run_copies(pack, dst_url))
        _write_partition_files(src_storage, listing, plans, per_partition, staging)
        _write_root_files(listing, plans, per_partition, staging)
        stages["copy"] = time.perf_counter() - t0

        by_tp: dict[str, list[GroupStats]] = {}
        for s in stats:
            by_tp.setdefault(s.partition_dir, []).append(s)
        report.partitions = [_metrics(p, per_partition[p.tp], by_tp.get(p.tp.dir_name, [])) for p in plans]
        report.seconds_by_stage = stages
        report.seconds_total = time.perf_counter() - started
        staging.write_meta("report.json", report.to_dict())
        manifest = {
            "run_id": staging.run_id,
            "src": src,
            "now_ms": now,
            "partitions": [p.summary() for p in plans],
        }
        staging.publish(manifest)
    except BaseException:
        staging.abort()
        raise
    if report_path:
        out, path = open_storage(report_path)
        out.write_atomic(path, json.dumps(report.to_dict(), indent=2).encode())
    for p in report.partitions:
        log(p.cleaner_line())
    return report


def _packs(sizes: list[int], parts: int, most: int = 1 << 30) -> list[list[int]]:
    """Consecutive items cut into about `parts` packs of similar total size, and at least enough
    packs that they average no more than `most`: a Python task costs tens of milliseconds before
    it does any work, so a task takes several segments, in order (a map task then mostly sees
    one partition's)."""
    total = sum(sizes)
    parts = max(1, parts, -(-total // most))
    packs: list[list[int]] = []
    done = 0
    for i, size in enumerate(sizes):
        # A pack ends where the running total crosses its share of the whole.
        if not packs or (len(packs) < parts and packs[-1] and done * parts >= len(packs) * total > 0):
            packs.append([])
        packs[-1].append(i)
        done += size
    return packs


def _group_by_partition(
    listing: LogDirListing, tasks: list[SegmentTask], by_id: dict[int, ScannedSegment]
) -> dict[TopicPartition, list[ScannedSegment]]:
    out: dict[TopicPartition, list[ScannedSegment]] = {p.tp: [] for p in listing.partitions}
    for t in tasks:
        out[listing.partitions[t.partition_id].tp].append(by_id[t.segment_id])
    for part in listing.partitions:
        segs = out[part.tp]
        check_segment_ranges(
            [
                SegmentScan(f.log.path, f.base_offset, f.size, s.table)
                for f, s in zip(part.segments, segs, strict=True)
            ]
        )
    return out


def _plan(
    listing: LogDirListing,
    per_partition: dict[TopicPartition, list[ScannedSegment]],
    config: JobConfig,
    now: int,
) -> list[PartitionPlan]:
    cps = listing.checkpoints
    plans = []
    gid = 0
    for part in listing.partitions:
        tp = part.tp
        checkpoints = Checkpoints(
            log_start=cps.get("log-start-offset-checkpoint", {}).get(tp),
            high_watermark=cps.get("replication-offset-checkpoint", {}).get(tp),
            cleaner=cps.get("cleaner-offset-checkpoint", {}).get(tp),
        )
        plan = plan_partition(tp, per_partition[tp], checkpoints, config.for_topic(tp.topic), now, gid)
        if plan.compaction:
            gid += len(plan.compaction.groups)
        plans.append(plan)
    return plans


def _compact(
    sc: Any,
    plans: list[PartitionPlan],
    by_id: dict[int, ScannedSegment],
    segment_files: dict[int, Any],
    src_url: str,
    staging_url: str,
    now: int,
) -> list[GroupStats]:
    """Key map (map per input segment → shuffle by key hash → reduce per bucket), then a second
    shuffle by output group that feeds one rewrite task per group."""
    groups: dict[int, GroupPlan] = {}
    key_tasks: list[KeyTask] = []
    configs = {}
    bases: dict[int, np.ndarray] = {}
    gids: dict[int, np.ndarray] = {}
    for tp_index, plan in enumerate(plans):
        configs[plan.tp.dir_name] = plan.config
        if plan.compaction is None:
            continue
        bases[tp_index] = np.array([g.base_offset for g in plan.compaction.groups], dtype=np.int64)
        gids[tp_index] = np.array([g.gid for g in plan.compaction.groups], dtype=np.int64)
        for g in plan.compaction.groups:
            groups[g.gid] = g
            for k, sid in enumerate(g.segment_ids):
                if len(g.key_batches[k]):
                    task = KeyTask(
                        tp_index,
                        g.gid,
                        src_url,
                        segment_files[sid],
                        g.key_batches[k],
                        plan.compaction.first_dirty,
                        int(by_id[sid].table.records_count[g.key_batches[k]].sum()),
                    )
                    key_tasks.append(task)
    if not groups:
        return []
    bounds = GroupBounds(bases, gids)
    ctx = RewriteContext(src_url, staging_url, segment_files, now, configs)
    shared = sc.broadcast(groups)
    slots = {gid: i for i, gid in enumerate(sorted(groups))}
    if key_tasks:
        buckets = _bucket_count(key_tasks, sc.defaultParallelism)
        packs = _packs([t.files.size for t in key_tasks], sc.defaultParallelism * MAP_TASKS_PER_CORE)
        # Every group gets a rewrite task, also one the key map sends nothing to: the reduce task
        # of bucket `gid % buckets` announces it.
        per_group = (
            sc.parallelize([[key_tasks[i] for i in pack] for pack in packs], len(packs))
            .flatMap(lambda pack: map_keys(pack, buckets))
            .partitionBy(buckets, lambda b: b)
            .mapPartitionsWithIndex(
                lambda b, items: reduce_keys(items, bounds, [g for g in slots if g % buckets == b])
            )
        )
    else:
        per_group = sc.parallelize([(gid, None) for gid in slots], 1)
    rows = (
        per_group.partitionBy(len(slots), lambda gid: slots[gid])
        .mapPartitions(lambda items: rewrite_groups(items, shared.value, ctx))
        .collect()
    )
    shared.unpersist()
    return list(rows)


def _bucket_count(key_tasks: list[KeyTask], parallelism: int) -> int:
    """Enough key-map buckets that none holds more than BUCKET_ROWS rows even when every key is
    distinct: a reduce task's memory is bounded whatever the key count."""
    rows = sum(t.records for t in key_tasks)
    return max(parallelism, min(MAX_BUCKETS, -(-rows // BUCKET_ROWS)))


def _copy_tasks(
    listing: LogDirListing,
    plans: list[PartitionPlan],
    per_partition: dict[TopicPartition, list[ScannedSegment]],
    tasks: list[SegmentTask],
    src_url: str,
) -> list[CopyTask]:
    """Untouched segments are copied byte for byte, indexes included."""
    files = {t.segment_id: t.files for t in tasks}
    out = []
    for plan in plans:
        for sid in plan.copied:
            f = files[sid]
            for info in (f.log, f.index, f.timeindex, f.txnindex):
                if info is not None:
                    rel = posixpath.join(plan.tp.dir_name, info.name)
                    out.append(CopyTask(src_url, info.path, rel, info.mtime_ms, info.size))
    return out


def _run_copies(pack: list[CopyTask], staging_url: str) -> None:
    dst, root = open_storage(staging_url)
    for task in pack:
        src, _ = open_storage(task.src_url)
        transfer(src, task.src_path, dst, posixpath.join(root, task.dst_path), task.mtime_ms)


def _bases(segments: list[ScannedSegment], ids: list[int]) -> list[int]:
    by_id = {s.meta.segment_id: s.meta.base_offset for s in segments}
    return [by_id[i] for i in ids]


def _write_partition_files(
    src: Storage,
    listing: LogDirListing,
    plans: list[PartitionPlan],
    per_partition: dict[TopicPartition, list[ScannedSegment]],
    staging: Staging,
) -> None:
    """Producer snapshots of surviving segments, partition.metadata, a truncated leader-epoch
    checkpoint (spec §4.3), and an empty segment where retention removed every segment."""
    for part, plan in zip(listing.partitions, plans, strict=True):
        out_dir = posixpath.join(staging.path, plan.tp.dir_name)
        staging.storage.makedirs(out_dir)
        deleted_bases = set(_bases(per_partition[plan.tp], [sid for sid, _ in plan.deleted]))
        for snap in part.snapshots:
            if int(snap.name.split(".")[0]) not in deleted_bases:
                transfer(src, snap.path, staging.storage, posixpath.join(out_dir, snap.name), snap.mtime_ms)
        for other in part.other_files:
            target = posixpath.join(out_dir, other.name)
            if other.name == "leader-epoch-checkpoint":
                entries = parse_leader_epoch_checkpoint(src.read(other.path), other.path)
                staging.storage.write_atomic(
                    target, format_leader_epoch_checkpoint(_truncate_epochs(entries, plan.log_start_offset))
                )
            else:
                transfer(src, other.path, staging.storage, target, other.mtime_ms)
        if plan.roll_empty_at is not None:
            for kind in ("log", "index", "timeindex"):
                staging.storage.write_atomic(
                    posixpath.join(out_dir, segment_file_name(plan.roll_empty_at, kind)), b""
                )


def _truncate_epochs(entries: list[tuple[int, int]], log_start: int) -> list[tuple[int, int]]:
    """Remove entries starting at or below the log start; re-add the last removed epoch at it."""
    removed = [e for e in entries if e[1] <= log_start]
    kept = [e for e in entries if e[1] > log_start]
    return ([(removed[-1][0], log_start)] if removed else []) + kept


def _write_root_files(
    listing: LogDirListing,
    plans: list[PartitionPlan],
    per_partition: dict[TopicPartition, list[ScannedSegment]],
    staging: Staging,
) -> None:
    """Root checkpoints carried over; log start offsets and cleaner offsets updated (spec §4.4, §6)."""
    cps = {name: dict(v) for name, v in listing.checkpoints.items()}
    log_start = cps.get("log-start-offset-checkpoint", {})
    cleaner = cps.get("cleaner-offset-checkpoint", {})
    recovery = cps.get("recovery-point-offset-checkpoint")
    for plan in plans:
        surviving = _bases(per_partition[plan.tp], plan.copied)
        if plan.compaction is not None:
            surviving += [g.base_offset for g in plan.compaction.groups]
        first_base = plan.roll_empty_at if plan.roll_empty_at is not None else min(surviving, default=0)
        if plan.log_start_offset > first_base:
            log_start[plan.tp] = plan.log_start_offset
        else:
            log_start.pop(plan.tp, None)
        if plan.compaction is not None:
            cleaner[plan.tp] = plan.compaction.end_offset
        if recovery is not None and plan.tp in recovery:
            recovery[plan.tp] = min(recovery[plan.tp], plan.log_end_offset)
    cps["log-start-offset-checkpoint"] = log_start
    cps["cleaner-offset-checkpoint"] = cleaner
    for name in ROOT_CHECKPOINTS:
        entries = cps.get(name)
        if entries or name in listing.checkpoints:
            staging.storage.write_atomic(
                posixpath.join(staging.path, name), format_offset_checkpoint(entries or {})
            )


def _metrics(
    plan: PartitionPlan, segments: list[ScannedSegment], stats: list[GroupStats]
) -> PartitionMetrics:
    by_id = {s.meta.segment_id: s for s in segments}
    deleted = [by_id[sid] for sid, _ in plan.deleted]
    copied = [by_id[sid] for sid in plan.copied]
    records = lambda segs: int(sum(s.table.records_count.sum() for s in segs))  # noqa: E731
    m = PartitionMetrics(str(plan.tp), sorted(plan.config.cleanup_policy))
    m.segments_in = len(segments)
    m.bytes_in = plan.input_bytes
    m.records_in = records(segments)
    m.segments_deleted = len(deleted)
    m.removed_by_retention = records(deleted)
    m.bytes_removed_by_retention = plan.deleted_bytes
    m.segments_copied = len(copied)
    m.bytes_out = sum(s.meta.size for s in copied) + sum(s.bytes_out for s in stats)
    m.records_out = records(copied) + sum(s.records_out for s in stats)
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
