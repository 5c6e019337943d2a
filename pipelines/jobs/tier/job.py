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
from dataclasses import dataclass
from typing import Any

from pipelines.clock import clock_ms, iso
from pipelines.config import JobConfig
from pipelines.config.job import DEFAULT
from pipelines.errors import ConfigError
from pipelines.jobs.tier.plan import TierPlan, next_manifest, plan_tier, tier_plan_table
from pipelines.jobs.tier.plan import new_history as new_history_of
from pipelines.jobs.tier.proof import identity_problem, proven_releases, refuse_mismatches
from pipelines.jobs.tier.release import (
    LOG_START_CHECKPOINT,
    finish_releases,
    release_segments,
    write_log_start_offsets,
)
from pipelines.jobs.tier.report import TierReport
from pipelines.jobs.tier.request import TierRequest
from pipelines.jobs.tier.warnings import tier_warnings
from pipelines.log.scanned import Scanned, scan_log
from pipelines.output.harness import Checked, JobRun, checked, job_run
from pipelines.output.remote_upload import partition_files, upload_all, upload_tasks
from pipelines.output.report import StageTimer, write_json_report
from pipelines.runtime.faults import fault_point
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.stop import publishing, raise_if_stopped
from segment_io.broker_lock import broker_stopped
from segment_io.layout import HIGH_WATERMARK_CHECKPOINT, PartitionListing
from segment_io.remote.manifest import PartitionManifest
from segment_io.remote.tier import RemoteTier
from segment_io.storage import Location, Place
from segment_io.topic_partition import TopicPartition

WORKER_MODULES = ("pipelines.log.scan", "pipelines.output.remote_upload")
Log = Callable[[str], Any]


def tier(
    spark: Spark,
    log_dir: Place,
    remote_url: Place,
    config: JobConfig | None = None,
    now_ms: int | None = None,
    dry_run: bool = False,
    report_path: Place | None = None,
    log: Log = print,
    max_bytes_per_second: int | None = None,
    *,
    new_history: bool = False,
    now_given: bool | None = None,
    clock: Callable[[], int] = clock_ms,
    plan_json: bool = False,
) -> TierReport:
    """Tier `log_dir` to the remote tier at `remote_url` (created when absent): upload the inactive
    segments below the last stable offset, apply total retention across both tiers, release local
    copies beyond `local.retention.*`. Returns the run report (`report.rows()`). The options:
    TierRequest. `clock` is the wall clock manifest versions are committed at (expiry's grace
    period counts from it)."""
    request = TierRequest(
        log_dir=Location.of(log_dir),
        remote=Location.of(remote_url),
        config=config or JobConfig(),
        now_ms=now_ms,
        now_given=now_given,
        dry_run=dry_run,
        report_path=Location.of_optional(report_path),
        max_bytes_per_second=max_bytes_per_second,
        new_history=new_history,
        plan_json=plan_json,
    )
    return run_tier(spark, request, log, clock)


def run_tier(
    spark: Spark,
    request: TierRequest | Checked[TierRequest],
    log: Log = print,
    clock: Callable[[], int] = clock_ms,
) -> TierReport:
    """The tier `request` asks for (see `tier`)."""
    request = checked(request)
    log_dir, report_path = request.log_dir, request.report_path
    with job_run(spark, WORKER_MODULES, request.now_ms, clock) as job:
        run = _Run(
            log_dir,
            request.remote,
            request.config,
            job.now,
            request.now_chosen,
            request.dry_run,
            report_path,
            log,
            request.max_bytes_per_second,
            request.new_history,
            clock,
            request.plan_json,
        )
        with broker_stopped(log_dir.storage, log_dir.path, "tier"):
            return _tier(job, run)


@dataclass(frozen=True)
class _Run:
    """One tier run's request as `run_tier` resolved it (its `now`), with its log and clock."""

    log_dir: Location
    remote: Location
    config: JobConfig
    now: int
    now_given: bool
    dry_run: bool
    report_path: Location | None
    log: Log
    max_bytes_per_second: int | None
    new_history: bool
    clock: Callable[[], int]
    plan_json: bool


def _tier(job: JobRun, run: _Run) -> TierReport:
    config, now, log = run.config, run.now, run.log
    spark, timer = job.spark, job.timer
    # The tier is created only once nothing is refused: a refused run leaves an empty place empty.
    remote = RemoteTier.open(run.remote) if RemoteTier.is_tier(run.remote) else None
    if remote is None:
        RemoteTier.require_place(run.remote)
    with timer.stage("scan"):
        scanned = scan_log(spark, run.log_dir, log, skip_corrupt=False)
        partitions = {p.tp: p for p in scanned.listing.partitions}
        manifests = _manifests(remote, partitions)
    config.require_topics({tp.topic for tp in manifests}, run.log_dir.url)
    with timer.stage("plan"):
        bases, superseded = _histories(remote, scanned, partitions, manifests, run.new_history)
        plans = [_plan(tp, scanned, partitions.get(tp), bases[tp], config, now) for tp in sorted(manifests)]
        for plan in plans:
            plan.remote_superseded = superseded.get(plan.tp, []) + plan.remote_superseded
        _refuse_default_retention(plans, config, now, run.now_given)
    for line in tier_warnings(plans, scanned.segments, now):
        log(f"segpipe: warning: {line}")
    if remote is not None and not run.dry_run:
        finished = finish_releases(scanned, manifests)
        if finished:
            log(f"segpipe: finished the release a stopped run began: {finished} files removed")
    summaries = [p.summary() for p in plans]
    report = TierReport(run.log_dir.url, run.remote.url, now, run.dry_run, plans=summaries)
    if run.dry_run:
        if run.plan_json:
            log(json.dumps({"now_ms": now, "partitions": summaries}, indent=2))
        else:
            log(f"segpipe: dry run: the plan at now = {iso(now)} ({now}); nothing is written")
            for line in tier_plan_table(summaries):
                log(line)
        return _finish(report, timer, run.report_path, log)
    remote = remote or RemoteTier.open(run.remote, create=True)
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
        uploaded = upload_all(spark, tasks, remote.url, run.max_bytes_per_second)
    report.add_uploads(uploaded)
    fault_point("after-upload")
    raise_if_stopped()
    with timer.stage("commit"), publishing(f"the new manifest versions of {remote.url}"):
        for index, plan in enumerate(plans):
            if plan.changes_remote:
                part = partitions.get(plan.tp)
                epochs, metadata = partition_files(scanned.storage, part)
                manifest = next_manifest(
                    bases[plan.tp], plan, uploaded.get(index, []), epochs, metadata, run.clock()
                )
                remote.commit(manifest)
    fault_point("after-commit")
    with timer.stage("release"), publishing("the release of local segments the remote tier holds"):
        for plan in [p for p in plans if p.local_released]:
            # The committed version as the store holds it now proves each release (or refuses it).
            plan.local_released, refused = proven_releases(remote, scanned, plan, remote.read(plan.tp))
            for line in refused:
                log(f"segpipe: warning: {line}")
        # The new log start offsets first: a re-run knows from them what a stopped release meant.
        write_log_start_offsets(scanned, plans)
        report.local_bytes_removed = release_segments(scanned, plans)
    report.plans = [p.summary() for p in plans]
    return _finish(report, timer, run.report_path, log)


def _histories(
    remote: RemoteTier | None,
    scanned: Scanned,
    partitions: dict[TopicPartition, PartitionListing],
    manifests: dict[TopicPartition, PartitionManifest],
    new_history: bool,
) -> tuple[dict[TopicPartition, PartitionManifest], dict[TopicPartition, list[str]]]:
    """The manifest each partition is planned from: its newest version where the remote log is
    the local log's; where it is not, a refusal naming both, or with `new_history` an empty
    history whose commit supersedes every old segment."""
    bases = dict(manifests)
    superseded: dict[TopicPartition, list[str]] = {}
    if remote is None:
        return bases, superseded
    problems = []
    cps = scanned.listing.checkpoints
    for tp, manifest in manifests.items():
        part = partitions.get(tp)
        if part is None:
            continue
        _, metadata = partition_files(scanned.storage, part)
        log_start = max(cps.get(LOG_START_CHECKPOINT, {}).get(tp, 0), manifest.log_start_offset)
        problem = identity_problem(
            remote, scanned, tp, scanned.segments.get(tp, []), metadata, manifest, log_start
        )
        if problem is None:
            continue
        if new_history:
            bases[tp] = new_history_of(manifest)
            superseded[tp] = [s.segment_id for s in manifest.segments]
        else:
            problems.append(problem)
    refuse_mismatches(problems)
    return bases, superseded


def _refuse_default_retention(plans: list[TierPlan], config: JobConfig, now: int, now_given: bool) -> None:
    """Deleting by retention.ms under Kafka's default (7 days) at a `now` nobody chose is the trap
    of an archive older than a week: every segment goes. It needs --now or retention.ms set."""
    if now_given:
        return
    hit = [
        p
        for p in plans
        if any(rule == "retention_ms" for _, rule in [*p.local_deleted, *p.remote_deleted])
        and config.effective(p.tp.topic)["retention.ms"][1] == DEFAULT
    ]
    if hit:
        names = ", ".join(str(p.tp) for p in hit[:5]) + (f" and {len(hit) - 5} more" if len(hit) > 5 else "")
        raise ConfigError(
            f"tier refused: retention.ms is Kafka's default ({config.defaults.retention_ms} ms, 7 days) and "
            f"would delete segments of {names} judged at the clock ({iso(now)}); give --now TIME to apply "
            "retention at a moment you choose, or set retention.ms (--set / --topic-set / --config). "
            "Nothing was changed"
        )


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
        cps.get(LOG_START_CHECKPOINT, {}).get(tp),
        cps.get(HIGH_WATERMARK_CHECKPOINT, {}).get(tp),
        now,
    )


def _finish(report: TierReport, timer: StageTimer, at: Location | None, log: Log) -> TierReport:
    report.seconds_total, report.seconds_by_stage = timer.total, timer.seconds
    if at:
        write_json_report(at, report.to_dict())
    log(report.totals_line())
    return report
