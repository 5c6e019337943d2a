"""`clean`: retention and compaction of a log directory into a new one, as Spark jobs over
segment_io. Stages: scan (headers, in parallel) → plan (driver, pure) → compact (key map shuffle,
then one rewrite task per output group) → copy (untouched segments, side files) → publish."""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

import numpy as np

from pipelines.clock import iso
from pipelines.config import JobConfig
from pipelines.config.terms import Gate, Terms
from pipelines.jobs.clean.alone import AlonePartition, alone_partitions, compact_alone
from pipelines.jobs.clean.keymap import GroupBounds, KeyTask, map_keys, reduce_keys
from pipelines.jobs.clean.metrics import partition_metrics
from pipelines.jobs.clean.ranged import PartitionRange, compact_range, partition_ranges
from pipelines.jobs.clean.request import CleanRequest
from pipelines.jobs.clean.rewrite import GroupStats, RewriteContext, rewrite_groups
from pipelines.jobs.clean.side_files import write_partition_files, write_root_checkpoints
from pipelines.jobs.clean.warnings import run_warnings
from pipelines.log.plan import GroupPlan, PartitionPlan, plan_log, plan_table
from pipelines.log.producers import known_producers_of
from pipelines.log.scanned import SCAN_TASKS_PER_CORE, Log, Scanned, scan_stage, skipped_docs
from pipelines.output.copy import run_copies, segment_copies
from pipelines.output.destination import require_new_file
from pipelines.output.harness import Checked, JobRun, checked, job_run, publish, staged_output
from pipelines.output.report import RunReport, write_json_report
from pipelines.output.report_html import html_path, render
from pipelines.output.staging import REPORT, Staging
from pipelines.runtime import progress
from pipelines.runtime.dataflow import Flow, flow_of
from pipelines.runtime.driver_threads import in_driver_threads
from pipelines.runtime.faults import is_armed
from pipelines.runtime.session import LazySpark
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.stop import raise_if_stopped
from pipelines.runtime.tasks import fits_driver_compaction, packs, run_packed
from segment_io.layout import META_DIR
from segment_io.storage import Location, Place

# The modules this job's tasks run: Python workers start with them imported.
WORKER_MODULES = (
    "pipelines.log.scan",
    "pipelines.jobs.clean.keymap",
    "pipelines.jobs.clean.alone",
    "pipelines.jobs.clean.ranged",
    "pipelines.jobs.clean.rewrite",
    "pipelines.output.copy",
)
# A key-map bucket holds at most this many rows even when every key is distinct, so a reduce
# task's memory is bounded whatever the key count.
BUCKET_ROWS = 2_000_000
MAX_BUCKETS = 4096
# A reduce task's key table holds about this many keys (a bucket's keys split over several,
# keymap.map_keys): an insert into a table larger than the CPU's caches waits on memory for each
# new key. Measured on 50 M distinct keys (`bench/clean_bench.py --keys-run`, 2 cores with 2 MiB
# of L2 each, whole process): one table a bucket (2,000,000 keys) 52-53 MB/s; tables of 125,000
# keys 61-64 MB/s, of 62,500 61-63, of 31,250 57-59; the same peak memory.
TABLE_ROWS = 125_000
# Tasks per core for the key map's map side (as for the scan: a few per core balance the cores).
MAP_TASKS_PER_CORE = 3


def clean(
    spark: Spark,
    src: Place,
    dst: Place,
    config: JobConfig | None = None,
    now_ms: int | None = None,
    dry_run: bool = False,
    report_path: Place | None = None,
    log: Log = print,
    on_corrupt: str = "fail",
    gate: Gate | None = None,
    plan_json: bool = False,
    topics: Callable[[str], bool] | None = None,
    link: bool = False,
    select: str = "all",
) -> RunReport:
    """Apply Kafka's retention and compaction to every partition of SRC, writing DST (the options:
    CleanRequest). `spark` is a SparkSession, a SparkContext (only the core engine is used) or a
    LazySpark, started only where the plan needs Spark (compaction; files too far or too many for
    the driver's threads). SRC is only read; DST appears complete or not at all.
    `gate(staged_url, terms)` runs on the complete staged output before publication; an error it
    raises publishes nothing (the validation gate). Returns the run report (`report.rows()`: one
    metrics row per partition; `report.to_dataframe(spark)`)."""
    request = CleanRequest(
        src=Location.of(src),
        dst=Location.of(dst),
        config=config or JobConfig(),
        now_ms=now_ms,
        dry_run=dry_run,
        report_path=Location.of_optional(report_path),
        on_corrupt=on_corrupt,
        plan_json=plan_json,
        topics=topics,
        link=link,
        select=select,
    )
    return run_clean(spark, request, log, gate)


def run_clean(
    spark: Spark,
    request: CleanRequest | Checked[CleanRequest],
    log: Log = print,
    gate: Gate | None = None,
) -> RunReport:
    """The clean `request` asks for (see `clean`)."""
    request = checked(request)
    # Spark starts where a stage needs it (a compaction too large for the driver, or files too far
    # or too many for the driver's threads): a plan that only copies and drops segments of a local
    # log, or compacts a small one, runs without.
    with job_run(spark, WORKER_MODULES, request.now_ms) as run:
        return _clean(run, request, log, gate)


def _clean(run: JobRun, request: CleanRequest, log: Log, gate: Gate | None) -> RunReport:
    spark, now, timer = run.spark, run.now, run.timer
    # Scan and plan read SRC only; nothing is created at DST until the plan stands.
    scanned = scan_stage(run, request.src, log, request.on_corrupt, request.topics)
    skipped = skipped_docs(scanned)
    if request.topics is None:  # with a selection, the caller checks against the whole of SRC
        request.config.require_topics(
            {p.tp.topic for p in scanned.listing.partitions} | {tp.topic for tp in scanned.skipped},
            request.src.url,
        )
    with timer.stage("plan"):
        known = known_producers_of(scanned, log)
        plans = plan_log(scanned.listing, scanned.segments, request.config, now, request.select_kafka, known)
    for plan in plans:
        if plan.selection is not None and plan.compaction is None:
            log(f"segpipe: not compacted: {plan.tp} (Kafka's cleaner would not choose it: {plan.selection})")
    warnings = run_warnings(plans, scanned.segments, now)
    for warning in warnings:
        log(f"segpipe: warning: {warning}")
    summaries = [p.summary() for p in plans]
    if request.dry_run:
        report = RunReport(
            request.src.url,
            request.out.url,
            now,
            "dry-run",
            dry_run=True,
            warnings=warnings,
            plan=summaries,
            skipped=skipped,
        )
        report.partitions = [partition_metrics(p, scanned.segments[p.tp], []) for p in plans]
        report.seconds_total, report.seconds_by_stage = timer.total, timer.seconds
        if request.plan_json:
            log(json.dumps({"now_ms": now, "partitions": summaries}, indent=2))
        else:
            log(f"segpipe: dry run at now = {now} ({iso(now)}): the plan")
            for line in plan_table(summaries):
                log(line)
        _write_report(report, request.report_path)
        log(report.totals_line())
        return report

    with staged_output(run, request.out, log) as staging:
        report = RunReport(
            request.src.url,
            request.out.url,
            now,
            staging.run_id,
            warnings=warnings,
            plan=summaries,
            skipped=skipped,
        )
        with timer.stage("compact"):
            stats = _compact(spark, plans, scanned, staging, now)
        raise_if_stopped()
        with timer.stage("copy"):
            _copy(spark, plans, scanned, staging, request.link, log)
        by_dir: dict[str, list[GroupStats]] = {}
        for s in stats:
            by_dir.setdefault(s.partition_dir, []).append(s)
        report.partitions = [
            partition_metrics(p, scanned.segments[p.tp], by_dir.get(p.tp.dir_name, [])) for p in plans
        ]
        report.seconds_total, report.seconds_by_stage = timer.total, timer.seconds
        staging.write_meta(REPORT, report.to_dict())
        if is_armed("corrupt-output"):
            _corrupt_one_batch(staging)
        planned_topics = sorted({p.tp.topic for p in plans})
        selected = sorted({*planned_topics, *(tp.topic for tp in scanned.skipped)})
        if gate is not None:
            with timer.stage("validate"):
                gate(staging.location, Terms(request.config, now, frozenset(selected), "run"))
        publish(
            staging,
            {
                "run_id": staging.run_id,
                "src": request.src.url,
                "now_ms": now,
                "partitions": summaries,
                "configs": request.config.describe(planned_topics),
                "topics": selected,
                "skipped": skipped,
            },
            {r.partition: r.records_out for r in report.partitions},
        )
    _write_report(report, request.report_path)
    for p in report.partitions:
        log(p.cleaner_line())
    log(report.totals_line())
    return report


def _write_report(report: RunReport, at: Location | None) -> None:
    """The JSON report, and the same run as a page people read (`.html` beside it)."""
    if at:
        page = Location(html_path(at.url))
        require_new_file(page)
        write_json_report(at, report.to_dict())
        page.storage.write_atomic(page.path, render(report).encode())


def _key_tasks(plans: list[PartitionPlan], scanned: Scanned) -> list[KeyTask]:
    """One key-map task per input segment of a group that has batches taking part."""
    files, by_id = scanned.files, scanned.scanned_by_id
    tasks = []
    for tp_index, plan in enumerate(plans):
        if plan.compaction is None:
            continue
        for g in plan.compaction.groups:
            for k, sid in enumerate(g.segment_ids):
                batches = g.key_batches[k]
                if len(batches):
                    records = int(by_id[sid].table.records_count[batches].sum())
                    first_dirty = plan.compaction.first_dirty
                    tasks.append(
                        KeyTask(tp_index, g.gid, scanned.src, files[sid], batches, first_dirty, records)
                    )
    return tasks


def _group_bounds(plans: list[PartitionPlan]) -> GroupBounds:
    bases, gids = {}, {}
    for tp_index, plan in enumerate(plans):
        if plan.compaction is not None:
            groups = plan.compaction.groups
            bases[tp_index] = np.array([g.base_offset for g in groups], dtype=np.int64)
            gids[tp_index] = np.array([g.gid for g in groups], dtype=np.int64)
    return GroupBounds(bases, gids)


def _compact(
    spark: LazySpark, plans: list[PartitionPlan], scanned: Scanned, staging: Staging, now: int
) -> list[GroupStats]:
    """A small compaction of near files runs in the driver's threads, a partition per thread.
    Otherwise, on Spark or, for near files with a local master, in the driver's own processes:
    partitions small enough are compacted inside one task each; the others through the key map
    (map per few input segments → routed by key hash to a bucket's task → reduce per bucket),
    then routed by output group to one rewrite task per group. One flow runs both, as DataFrame
    operations on Spark (one job, the same on Spark Connect)."""
    groups: dict[int, GroupPlan] = {
        g.gid: g for plan in plans if plan.compaction is not None for g in plan.compaction.groups
    }
    if not groups:
        return []
    configs = {plan.tp.dir_name: plan.config for plan in plans}
    ctx = RewriteContext(scanned.src, staging.location, scanned.files, now, configs)
    bounds = _group_bounds(plans)
    key_tasks = _key_tasks(plans, scanned)
    gids = {tp: bounds.gids[tp].tolist() for tp in bounds.gids}
    near = scanned.storage.near and staging.storage.near
    if fits_driver_compaction(near, sum(t.files.size for t in key_tasks)):
        in_driver = alone_partitions(key_tasks, gids, 1)
        if len(in_driver) == len(gids):  # every partition fits one task: no Spark at all
            return _compact_in_driver(list(in_driver.values()), groups, bounds, ctx)
    with flow_of(spark) as (flow, parallelism):
        return _compact_flow(flow, parallelism, key_tasks, gids, groups, bounds, ctx)


def _compact_flow(
    flow: Flow,
    parallelism: int,
    key_tasks: list[KeyTask],
    gids: dict[int, list[int]],
    groups: dict[int, GroupPlan],
    bounds: GroupBounds,
    ctx: RewriteContext,
) -> list[GroupStats]:
    """The compaction over `flow` with `parallelism` tasks at once. A partition that fits a task
    is compacted inside one (nothing shuffled); where the flow's tasks share this machine, one
    too large for a core is compacted in ranges of its segments, a task each, all at once
    (clean.ranged); the others take the bucketed path, where a partition's key map spreads over
    every core."""
    ranged = {} if flow.shared is None else partition_ranges(key_tasks, gids, parallelism, flow.shared)
    alone = alone_partitions(key_tasks, gids, parallelism)
    whole = alone.keys() | ranged.keys()  # partitions compacted without the shuffle
    key_tasks = [t for t in key_tasks if t.tp not in whole]
    bucketed = sorted(g for tp, mine in gids.items() if tp not in whole for g in mine)
    frames = []
    if alone or ranged:
        # A partition's ranges first and one after the other (they run at once: clean.ranged),
        # then the rest, largest first.
        works: list[AlonePartition | PartitionRange] = [
            r for tp in sorted(ranged, key=lambda tp: -sum(r.size for r in ranged[tp])) for r in ranged[tp]
        ]
        works += [alone[tp] for tp in sorted(alone, key=lambda tp: -alone[tp].size)]
        # Each task carries the plans of its own groups only.
        items = [(w, {g: groups[g] for g in w.gids}) for w in works]
        frames.append(flow.each(items, lambda i: _stats(_compact_part(i[0], i[1], bounds, ctx))))
    if bucketed:
        # The rewrite stage carries the plans of the bucketed groups only (a task's closure
        # travels with it to every task).
        plans_of = {g: groups[g] for g in bucketed}
        per_group = _key_map(flow, parallelism, key_tasks, bounds, bucketed)
        frames.append(
            flow.routed(
                per_group, len(bucketed), lambda _, items: _stats(rewrite_groups(items, plans_of, ctx))
            )
        )
    return [stats for _, stats in flow.collected(flow.union(frames))]


def _compact_part(
    part: AlonePartition | PartitionRange,
    groups: dict[int, GroupPlan],
    bounds: GroupBounds,
    ctx: RewriteContext,
) -> Iterator[GroupStats]:
    """Executed on a worker: a partition alone, or one range of one."""
    if isinstance(part, PartitionRange):
        return compact_range(part, groups, bounds, ctx)
    return compact_alone(part, groups, bounds, ctx)


def _compact_in_driver(
    works: list[AlonePartition], groups: dict[int, GroupPlan], bounds: GroupBounds, ctx: RewriteContext
) -> list[GroupStats]:
    """A small compaction of near files, each partition inside one of the driver's threads (the
    work of one Spark task, clean.alone), largest first."""
    works = sorted(works, key=lambda w: -w.size)
    done = in_driver_threads(lambda w: list(compact_alone(w, groups, bounds, ctx)), works)
    return [s for stats in done for s in stats]


def _key_map(
    flow: Flow,
    parallelism: int,
    key_tasks: list[KeyTask],
    bounds: GroupBounds,
    bucketed: list[int],
) -> Any:
    """A frame of what each output group of `bucketed` needs for its rewrite, as items for the
    group's slot (its place in `bucketed`): winning offsets, tombstones, null-key counts, and a
    `None` that announces the group, so that every group reaches its rewrite task, also one the
    key map sends nothing to (the reduce task of bucket `gid % buckets` announces it)."""
    slot = {gid: i for i, gid in enumerate(bucketed)}
    if not key_tasks:
        return flow.each([bucketed], lambda mine: ((slot[g], (g, None)) for g in mine))
    buckets, tables = _bucket_count(key_tasks, parallelism)
    sizes = [t.files.size for t in key_tasks]
    progress.add_bytes(sum(sizes))
    chosen = [[key_tasks[i] for i in pack] for pack in packs(sizes, parallelism * MAP_TASKS_PER_CORE)]

    def reduce(bucket: int, items: Iterator[Any]) -> Iterator[tuple[int, Any]]:
        announce = [g for g in bucketed if g % buckets == bucket]
        for gid, item in reduce_keys(((bucket, item) for item in items), bounds, announce, tables=tables):
            yield slot[gid], (gid, item)

    return flow.routed(flow.each(chosen, lambda pack: map_keys(pack, buckets, tables)), buckets, reduce)


def _stats(stats: Iterable[GroupStats]) -> Iterator[tuple[int, GroupStats]]:
    """A rewrite's statistics as items of a frame (part 0: they are only collected)."""
    return ((0, s) for s in stats)


def _bucket_count(key_tasks: list[KeyTask], parallelism: int) -> tuple[int, int]:
    """Buckets of the key map (its reduce tasks), and key tables per bucket (TABLE_ROWS)."""
    rows = sum(t.records for t in key_tasks)
    buckets = max(parallelism, min(MAX_BUCKETS, -(-rows // BUCKET_ROWS)))
    return buckets, max(1, -(-rows // (buckets * TABLE_ROWS)))


def _copy(
    spark: LazySpark, plans: list[PartitionPlan], scanned: Scanned, staging: Staging, link: bool, log: Log
) -> None:
    """Untouched segments (in parallel), then the partition files and root checkpoints."""
    copies = [
        c
        for p in plans
        for sid in p.copied
        for c in segment_copies(p.tp.dir_name, scanned.files[sid], scanned.src, link)
    ]
    copy_pack = partial(run_copies, staging=staging.location)
    near = scanned.storage.near and staging.storage.near
    run_packed(spark, copies, [c.size for c in copies], SCAN_TASKS_PER_CORE, copy_pack, near)
    for part, plan in zip(scanned.listing.partitions, plans, strict=True):
        write_partition_files(scanned.storage, part, plan, scanned.segments[plan.tp], staging, log)
    write_root_checkpoints(scanned.listing, plans, scanned.segments, staging, scanned.src)


def _corrupt_one_batch(staging: Staging) -> None:
    """The `corrupt-output` fault: flip the last byte of the first staged .log (a CRC mismatch),
    so that a validation (the gate, or a later validate step) has something to catch."""
    for info in staging.storage.walk_files(staging.path):
        if (
            info.name.endswith(".log")
            and info.size > 0
            and posixpath.basename(posixpath.dirname(info.path)) != META_DIR
        ):
            data = bytearray(staging.storage.read(info.path))
            data[-1] ^= 0xFF
            staging.storage.write_atomic(info.path, bytes(data), info.mtime_ms)
            return
