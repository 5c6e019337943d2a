"""The steps of a job file, run in order over one Spark context. Each finished step is recorded
in the run's state before the next starts; a step the state records as done is never run again.

Between a clean step's publication and its record there is a window a kill can hit: the output
is then complete, and its manifest names the source, `now`, topics and configs it was made with.
A resumed run whose step they match records the step as done instead of refusing the (non-empty)
output or cleaning again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pipelines.clock import clock_ms, iso
from pipelines.config.job_schema import CLEAN_STEPS
from pipelines.config.jobfile import JobFile
from pipelines.errors import ConfigError, ValidationFailed
from pipelines.output.staging import CUT_JOB, ERASE_JOB, MANIFEST_JOB, published_manifest
from pipelines.run.outputs import OUTPUT, identity, require_inputs, step_output
from pipelines.run.state import RunState
from pipelines.runtime.faults import fault_point
from pipelines.runtime.spark_handle import Spark
from pipelines.runtime.stop import raise_if_stopped, withdraw
from segment_io.layout import list_log_dir
from segment_io.storage import Location, open_storage

if TYPE_CHECKING:  # the jobs load only when their step runs
    from pipelines.jobs.clean.request import CleanRequest
    from pipelines.jobs.cut.request import CutRequest
    from pipelines.jobs.erase.request import EraseRequest
    from pipelines.jobs.tier.request import TierRequest
    from pipelines.jobs.validate.request import ValidateRequest

Log = Callable[[str], Any]
# Per partition, what a step's record keeps of its report (the full reports are the jobs' own).
CLEAN_FIELDS = ("bytes_in", "bytes_out", "records_in", "records_out", "segments_deleted", "segments_out")


def unit_name(unit: tuple[str, ...]) -> str:
    """A unit's name in logs, the state file and the DAG's task ids: `retention+compact`."""
    return "+".join(unit)


def chosen_units(job: JobFile, state: RunState, step: str | None) -> list[tuple[str, ...]]:
    """The units this run works through: all, or the one holding `step` (whose earlier units
    must be done: a step never runs on an output that is not there yet)."""
    units = job.units()
    if step is None:
        return units
    for index, unit in enumerate(units):
        if step in unit:
            missing = [unit_name(u) for u in units[:index] if not state.done(u[0])]
            if missing:
                before = ", ".join(missing)
                raise ConfigError(f"step {step} runs after {before}, which the run has not finished")
            return [unit]
    raise ConfigError(f"step {step!r} is not one of job {job.name}'s steps ({', '.join(job.steps)})")


def run_units(
    spark: Spark, job: JobFile, state: RunState, units: list[tuple[str, ...]], log: Log
) -> list[dict[str, Any]]:
    """Run `units` in order; returns their records (done ones as the state has them)."""
    records = []
    for unit in units:
        name = unit_name(unit)
        if state.done(unit[0]):
            log(f"segpipe: step {name}: done at {state.steps[unit[0]]['finished']}; not run again")
            release_cut(job, state, log)  # a run stopped between the erase's record and the removal
            records.append(state.steps[unit[0]])
            continue
        raise_if_stopped()  # a stop during the step before (after its publication) runs no later step
        require_inputs(job, state, unit, log)
        log(f"segpipe: step {name}: starting")
        started = time.perf_counter()
        record = _run_unit(spark, job, state, unit, log)
        raise_if_stopped()  # a stop the step's libraries swallowed: its result is not recorded
        published = step_output(job, unit[0])
        if published is not None:  # what a later step reading it checks it is
            record[OUTPUT] = identity(published)
        record.update(
            state="done",
            finished=iso(clock_ms()),
            seconds=round(time.perf_counter() - started, 3),
        )
        state.record(unit, record)
        log(f"segpipe: step {name}: done in {record['seconds']:.1f} s (recorded in {state.url})")
        fault_point(f"after-step-{unit[-1]}")
        release_cut(job, state, log)
        records.append(state.steps[unit[0]])
    return records


def clean_request(
    job: JobFile, unit: tuple[str, ...], now_ms: int | None, dry_run: bool = False
) -> CleanRequest:
    """The clean a clean unit of `job` runs: its source (or what its erase step wrote) into its
    output, under the unit's topic configs and the job's topic selection."""
    from pipelines.jobs.clean.request import CleanRequest

    return CleanRequest(
        src=Location(job.clean_source),
        dst=None if job.output is None else Location(job.output),
        config=job.clean_config(unit),
        now_ms=now_ms,
        dry_run=dry_run,
        topics=job.selection,
    )


def cut_request(job: JobFile, dry_run: bool = False) -> CutRequest:
    """The cut step of `job`: its source into its cut log directory, the job's topics only."""
    from pipelines.jobs.cut.request import CutRequest

    assert job.cut is not None
    return CutRequest(
        src=Location(job.source),
        dst=Location(job.cut_dir),
        until_offset=job.cut.until_offset,
        until_time=job.cut.until_time,
        topics=job.selection,
        dry_run=dry_run,
    )


def erase_request(job: JobFile, dry_run: bool = False) -> EraseRequest:
    """The erase step of `job`: its source (or what its cut step wrote) into its erased log
    directory, the job's topics only."""
    from pipelines.jobs.erase.request import EraseRequest
    from pipelines.keys.key_digest import read_secret

    assert job.erase is not None
    secret = job.erase.secret_file
    return EraseRequest(
        src=Location(job.erase_source),
        dst=Location(job.erased_dir),
        keys=job.erase.keys,
        key_format=job.erase.key_format,
        header_names=job.erase.also_in_headers,
        topics=job.selection,
        dry_run=dry_run,
        digest=None if secret is None else read_secret(secret),
    )


def tier_request(job: JobFile, now_ms: int | None) -> TierRequest:
    """The tier step of `job`: its log directory into its remote tier, under its configs; `now_ms`
    counts as chosen where the job file names its `now`."""
    from pipelines.jobs.tier.request import TierRequest

    assert job.remote is not None
    return TierRequest(
        log_dir=Location(job.log_dir),
        remote=Location(job.remote),
        config=job.configs,
        now_ms=now_ms,
        now_given=job.now_ms is not None,
    )


def validate_request(job: JobFile, now_ms: int | None) -> ValidateRequest:
    """The validate step of `job`: its log directory (the output, where it cleans) with its
    suites, and the promise against its source where it cleans (under the manifest's terms); the
    Data Docs beside the log."""
    from pipelines.jobs.validate import ValidateRequest, default_report_dir
    from pipelines.jobs.validate.user_suites import load_suite

    return ValidateRequest(
        path=Location(job.log_dir),
        report_dir=default_report_dir(job.log_dir),
        against=Location(job.clean_source) if job.cleans else None,
        now_ms=now_ms,
        suites=tuple(load_suite(s) for s in job.suites),
    )


def _run_unit(spark: Spark, job: JobFile, state: RunState, unit: tuple[str, ...], log: Log) -> dict[str, Any]:
    if job.in_place is not None:  # the job's steps are checked to be `compact` alone
        from pipelines.run.in_place import compact_in_place

        return compact_in_place(spark, job, clean_request(job, unit, state.now_ms), log)
    if unit == ("cut",):
        return _cut(spark, job, log)
    if unit == ("erase",):
        return _erase(spark, job, log)
    if unit[0] in CLEAN_STEPS:
        return _clean(spark, job, state, unit, log)
    if unit == ("validate",):
        return _validate(spark, job, state, log)
    if unit == ("tier",):
        return _tier(spark, job, state, log)
    return _expire(job, state, log)


def _cut(spark: Spark, job: JobFile, log: Log) -> dict[str, Any]:
    from pipelines.jobs.cut.job import run_cut

    request = cut_request(job)
    published = published_manifest(request.dst)
    # Published by this step before the run stopped: the same source and the same moment.
    if (
        published is not None
        and published.get(MANIFEST_JOB) == CUT_JOB
        and (published.get("src"), published.get("until_offset"), published.get("until_time"))
        == (request.src.url, request.until_offset, request.until_time)
    ):
        log(f"segpipe: step cut: {request.dst} was published by this run before it stopped")
        return {"adopted": True, "run_id": published.get("run_id")}
    report = run_cut(spark, request, log)
    return {
        "run_id": report.run_id,
        "partitions": {
            p.partition: {
                "log_end_offset": p.log_end_offset,
                "records_removed": p.records_removed,
                "open_transactions": len(p.open_transactions),
            }
            for p in report.partitions or []
        },
    }


def _erase(spark: Spark, job: JobFile, log: Log) -> dict[str, Any]:
    from pipelines.jobs.erase.job import run_erase

    request = erase_request(job)
    published = published_manifest(request.out)
    remaining = {"remaining_copies": _remaining_copies(job)}
    # Published by this step before the run stopped: the same source and key list.
    if (
        published is not None
        and published.get(MANIFEST_JOB) == ERASE_JOB
        and (published.get("src"), published.get("keys_file")) == (request.src.url, request.keys)
    ):
        log(f"segpipe: step erase: {request.dst} was published by this run before it stopped")
        return {"adopted": True, "run_id": published.get("run_id"), **remaining}
    # A job that validates proves the erasure before the erased log is published (as erase
    # --validate), while what the erase read is still there to prove it against.
    gate = None
    if "validate" in job.steps:
        from pipelines.jobs.erase.gate import erasure_gate

        assert job.erase is not None
        headers = tuple(job.erase.also_in_headers)
        gate = erasure_gate(spark, job.erase_source, headers, job.selection, log)
    report = run_erase(spark, request, log, gate)
    for copy in remaining["remaining_copies"]:
        log(f"segpipe: note: the listed keys' records remain in {copy} (the job's source: never changed)")
    return {
        "run_id": report.run_id,
        "records_erased": report.records_erased,
        "keys_found": len(report.erased),
        "keys_not_found": report.not_found_count,
        "partitions": {p.partition: {"records_erased": p.records_erased} for p in report.partitions},
        "proved": gate is not None,
        **remaining,
    }


def _remaining_copies(job: JobFile) -> list[str]:
    """The copies of the listed keys' records this job knows remain after its erase: the source,
    which segpipe never changes (a cut log it read is removed once the erase is done)."""
    return [job.source]


def release_cut(job: JobFile, state: RunState, log: Log) -> None:
    """Once a job's erase step is done, the cut log it read (beside the output, holding the listed
    keys' records) is removed: an intermediate the job made must not keep what it erased. Only a
    cut this job published of its source is removed, and only once the erased log is published."""

    if not (job.cuts and job.erases and state.done("erase")):
        return
    cut = Location(job.cut_dir)
    made = published_manifest(cut)
    if made is None:
        return  # removed already (or never published)
    erased = published_manifest(Location(job.erased_dir))
    ours = made.get(MANIFEST_JOB) == CUT_JOB and made.get("src") == job.source
    if not ours or erased is None or erased.get(MANIFEST_JOB) != ERASE_JOB or erased.get("src") != cut.url:
        log(
            f"segpipe: warning: {job.cut_dir} holds the listed keys' records and is not this job's cut "
            "of its source with its erase published: left as it is; remove it yourself"
        )
        return
    cut.storage.remove(cut.path)
    withdraw(cut.storage.url(cut.path))  # a stop's line names only what exists
    log(f"segpipe: step erase: removed {job.cut_dir}, the cut log the erase read (it held the listed keys)")


def _clean(spark: Spark, job: JobFile, state: RunState, unit: tuple[str, ...], log: Log) -> dict[str, Any]:
    from pipelines.jobs.clean import run_clean

    assert job.output is not None
    published = published_manifest(job.output)
    if published is not None and _ours(published, job, state, unit):
        log(f"segpipe: step {unit_name(unit)}: {job.output} was published by this run before it stopped")
        partitions = {p["partition"]: {"adopted": True} for p in published.get("partitions", [])}
        return {"adopted": True, "run_id": published.get("run_id"), "partitions": partitions}
    report = run_clean(spark, clean_request(job, unit, state.now_ms), log)
    rows = report.rows()
    return {
        "run_id": report.run_id,
        "bytes_in": report.bytes_in,
        "bytes_out": report.bytes_out,
        "partitions": {r["partition"]: {k: r[k] for k in CLEAN_FIELDS} for r in rows},
    }


def _ours(manifest: dict[str, Any], job: JobFile, state: RunState, unit: tuple[str, ...]) -> bool:
    """The output was made by this very step: same source, same `now`, the same effective topic
    configs (a changed job file with its state file removed must not pass an old output off as
    its own)."""

    storage, path = open_storage(job.clean_source)
    topics = sorted({p.tp.topic for p in list_log_dir(storage, path).partitions if job.topics(p.tp.topic)})
    configs = json.loads(json.dumps(job.clean_config(unit).describe(topics)))
    return (manifest.get("src"), manifest.get("now_ms"), manifest.get("configs")) == (
        job.clean_source,
        state.now_ms,
        configs,
    )


def _validate(spark: Spark, job: JobFile, state: RunState, log: Log) -> dict[str, Any]:
    from pipelines.jobs.validate import run_validate

    result = run_validate(spark, validate_request(job, state.now_ms), log)  # a session is made if needed
    result.say(log)
    record = {
        "success": result.success,
        "failed": result.failed,
        "checked": result.checked,
        "data_docs": result.data_docs,
    }
    if job.erases:
        record["erasure"] = "proved by the erase step before it published"
    if not record["success"]:
        state.steps["validate"] = {**record, "state": "failed", "finished": iso(clock_ms())}
        state.save()
        raise ValidationFailed(f"{job.log_dir} failed its validation; the later steps do not run")
    return record


def _tier(spark: Spark, job: JobFile, state: RunState, log: Log) -> dict[str, Any]:
    from pipelines.jobs.tier import run_tier

    report = run_tier(spark, tier_request(job, state.now_ms), log)
    return {
        "segments_uploaded": report.segments_uploaded,
        "bytes_uploaded": report.bytes_uploaded,
        "partitions": {
            str(p.get("partition")): {k: v for k, v in p.items() if k != "partition"} for p in report.rows()
        },
    }


def _expire(job: JobFile, state: RunState, log: Log) -> dict[str, Any]:
    from dataclasses import asdict

    from pipelines.jobs.tier.expire import expire

    assert job.remote is not None
    return asdict(expire(job.remote, job.configs, log))  # the grace period runs on the wall clock
