"""`tier`: cold segments of a local log directory to its remote tier, with Kafka's rules.

Stages: finish what a stopped run left (`.deleted` files of tiered segments) → scan (headers, in
parallel) → plan (driver, pure) → upload (Spark, one task per pack of segments; each object read
back and checked) → commit (one new manifest version per partition that changed) → release
(local copies beyond local retention, and what total retention removes, through Kafka's
`.deleted` rename). Nothing local is removed before the version that holds its copy is committed,
so after a stop at any point every record is in one tier or both, and a re-run finishes the job.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pipelines.clock import clock_ms
from pipelines.config import JobConfig
from pipelines.jobs.tier.plan import TierPlan, next_manifest, plan_tier
from pipelines.jobs.tier.release import finish_releases, release_segments, write_log_start_offsets
from pipelines.jobs.tier.report import TierReport
from pipelines.log.scanned import Scanned, scan_log
from pipelines.output.destination import require_new_file
from pipelines.output.remote_upload import partition_files, upload_all, upload_tasks
from pipelines.output.report import StageTimer
from pipelines.runtime import progress
from pipelines.runtime.faults import fault_point
from pipelines.runtime.remote_errors import typed_errors
from pipelines.runtime.session import preload_in_workers, publishing, raise_if_stopped
from segment_io.layout import PartitionListing
from segment_io.remote.manifest import PartitionManifest
from segment_io.remote.tier import RemoteTier
from segment_io.storage import open_storage
from segment_io.topic_partition import TopicPartition

WORKER_MODULES = ("pipelines.log.scan", "pipelines.output.remote_upload")
Log = Callable[[str], Any]


def tier(
    spark: Any,
    log_dir: str,
    remote_url: str,
    config: JobConfig | None = None,
    now_ms: int | None = None,
    dry_run: bool = False,
    report_path: str | None = None,
    log: Log = print,
    max_bytes_per_second: int | None = None,
) -> TierReport:
    """Tier `log_dir` to the remote tier at `remote_url` (created when absent): upload the inactive
    segments below the last stable offset, apply total retention across both tiers, release local
    copies beyond `local.retention.*`. Returns the run report (`report.rows()`)."""
    with typed_errors():
        return _tier(spark, log_dir, remote_url, config or JobConfig(), now_ms, dry_run, report_path, log,
                     max_bytes_per_second)  # fmt: skip


def _tier(
    spark: Any,
    log_dir: str,
    remote_url: str,
    config: JobConfig,
    now_ms: int | None,
    dry_run: bool,
    report_path: str | None,
    log: Log,
    max_bytes_per_second: int | None,
) -> TierReport:
    now = clock_ms() if now_ms is None else now_ms
    if report_path:
        require_new_file(report_path)
    sc = getattr(spark, "sparkContext", spark)
    timer = StageTimer(on_enter=lambda name: progress.enter(sc, name), on_leave=progress.leave)
    preload_in_workers(sc, WORKER_MODULES)
    remote = (
        RemoteTier.open(remote_url, create=not dry_run)
        if not dry_run or RemoteTier.is_tier(remote_url)
        else None
    )
    with timer.stage("scan"):
        scanned = scan_log(sc, log_dir, log, skip_corrupt=False)
        partitions = {p.tp: p for p in scanned.listing.partitions}
        manifests = _manifests(remote, partitions)
        if remote is not None and not dry_run:
            finished = finish_releases(scanned, manifests)
            if finished:
                log(f"segpipe: finished the release a stopped run began: {finished} files removed")
    config.require_topics({tp.topic for tp in manifests}, log_dir)
    with timer.stage("plan"):
        plans = [
            _plan(tp, scanned, partitions.get(tp), manifests[tp], config, now) for tp in sorted(manifests)
        ]
    summaries = [p.summary() for p in plans]
    report = TierReport(log_dir, remote_url, now, dry_run, plans=summaries)
    if dry_run:
        log(json.dumps({"now_ms": now, "partitions": summaries}, indent=2))
        return _finish(report, timer, report_path, log)
    assert remote is not None
    fault_point("before-upload")
    raise_if_stopped()
    with timer.stage("upload"):
        tasks = [
            task
            for i, p in enumerate(plans)
            if p.tp in partitions
            for task in upload_tasks(
                scanned, i, partitions[p.tp], [(u.segment_id, u.end_offset) for u in p.uploads]
            )
        ]
        uploaded = upload_all(sc, tasks, remote.url, max_bytes_per_second)
    report.add_uploads(uploaded)
    fault_point("after-upload")
    raise_if_stopped()
    with timer.stage("commit"), publishing():
        for index, plan in enumerate(plans):
            if plan.changes_remote:
                part = partitions.get(plan.tp)
                epochs, metadata = partition_files(scanned.storage, part)
                manifest = next_manifest(
                    manifests[plan.tp], plan, uploaded.get(index, []), epochs, metadata, now
                )
                remote.commit(manifest)
                manifests[plan.tp] = manifest
    fault_point("after-commit")
    with timer.stage("release"), publishing():
        # The new log start offsets first: a re-run knows from them what a stopped release meant.
        write_log_start_offsets(scanned, plans)
        report.local_bytes_removed = release_segments(scanned, plans)
    return _finish(report, timer, report_path, log)


def _manifests(
    remote: RemoteTier | None, partitions: dict[TopicPartition, PartitionListing]
) -> dict[TopicPartition, PartitionManifest]:
    """The newest version for every partition of either tier."""
    tps = set(partitions) | (set(remote.partitions()) if remote is not None else set())
    return {tp: remote.read(tp) if remote is not None else PartitionManifest.empty(tp) for tp in sorted(tps)}


def _plan(
    tp: TopicPartition,
    scanned: Scanned,
    part: PartitionListing | None,
    manifest: PartitionManifest,
    config: JobConfig,
    now: int,
) -> TierPlan:
    cps = scanned.listing.checkpoints
    return plan_tier(
        tp,
        scanned.segments.get(tp, []) if part is not None else [],
        manifest,
        config.for_topic(tp.topic),
        cps.get("log-start-offset-checkpoint", {}).get(tp),
        cps.get("replication-offset-checkpoint", {}).get(tp),
        now,
    )


def _finish(report: TierReport, timer: StageTimer, report_path: str | None, log: Log) -> TierReport:
    report.seconds_total, report.seconds_by_stage = timer.total, timer.seconds
    if report_path:
        require_new_file(report_path)
        storage, path = open_storage(report_path)
        storage.write_atomic(path, json.dumps(report.to_dict(), indent=2).encode())
    log(report.totals_line())
    return report
