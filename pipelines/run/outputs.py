"""What a job's steps publish for later steps to read, and its identity: the published output's
run id and the SHA-256 of its manifest, recorded with the step. A step that reads another step's
output first checks it is the one recorded (a log put in its place, or one removed, is refused
with what to do), and `--redo STEP` removes only the outputs proven to be the ones recorded."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from pipelines.config.job_schema import CLEAN_STEPS
from pipelines.config.jobfile import JobFile
from pipelines.errors import ConfigError
from pipelines.output.staging import published_manifest
from pipelines.run.state import RunState
from segment_io.storage import Location

Log = Callable[[str], Any]
OUTPUT = "output"  # a step record's key for the identity of what it published


def step_output(job: JobFile, step: str) -> str | None:
    """Where `step` publishes a log directory of its own (None: nowhere, or a remote tier)."""
    if job.in_place is not None:  # it rewrites the source's Kafka tier
        return None
    if step == "cut":
        return job.cut_dir
    if step == "erase":
        return job.erased_dir
    if step in CLEAN_STEPS:
        return job.output
    return None


def step_inputs(job: JobFile, unit: tuple[str, ...]) -> list[str]:
    """The log directories a unit reads (an earlier step's output, or the source)."""
    step = unit[0]
    if job.in_place is not None:
        return [job.source]
    if step == "cut":
        return [job.source]
    if step == "erase":
        return [job.erase_source]
    if step in CLEAN_STEPS:
        return [job.clean_source]
    if step == "validate":
        return [job.log_dir, *([job.clean_source] if job.cleans else [])]
    if step == "tier":
        return [job.log_dir]
    return []


def identity(url: str) -> dict[str, Any] | None:
    """The identity of the output published at `url` (None: none is published there)."""
    manifest = published_manifest(Location(url))
    if manifest is None:
        return None
    digest = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()
    return {"url": url, "run_id": manifest.get("run_id"), "manifest_sha256": digest}


def _producer(job: JobFile, url: str) -> str | None:
    """The first step of the unit that publishes at `url` (None: the job's source)."""
    for unit in job.units():
        if step_output(job, unit[0]) == url:
            return unit[0]
    return None


def require_inputs(job: JobFile, state: RunState, unit: tuple[str, ...], log: Log) -> None:
    """Refuse to run `unit` on an earlier step's output that is gone or is not the one that step
    recorded (its run id and manifest digest): a step reads what its name promises, or nothing."""
    for url in step_inputs(job, unit):
        producer = _producer(job, url)
        if producer is None or not state.done(producer):
            continue
        recorded = state.steps[producer].get(OUTPUT)
        if recorded is None:  # a state file written before outputs had an identity
            log(f"segpipe: warning: step {producer}'s record names no identity of {url}: not checked")
            continue
        current = identity(url)
        if current == recorded:
            continue
        what = (
            "is gone"
            if current is None
            else f"is not that output (run {current['run_id']}, another manifest): it was replaced"
        )
        raise ConfigError(
            f"step {'+'.join(unit)} reads {url}, which step {producer} published (run "
            f"{recorded['run_id']}); it {what}. Run it again: segpipe run {job.path} --redo {producer} "
            "(that step and every step after it)"
        )


def redo(job: JobFile, state: RunState, step: str, log: Log) -> None:
    """Forget `step` and every step after it, so that this run does them again: the outputs they
    recorded are removed first, each only where it is the one recorded (anything else there is
    refused, to be moved aside by hand)."""
    units = job.units()
    index = next((i for i, u in enumerate(units) if step in u), None)
    if index is None:
        raise ConfigError(f"--redo {step}: not one of job {job.name}'s steps ({', '.join(job.steps)})")
    later = units[index:]
    removals = []
    for unit in later:
        url = step_output(job, unit[0])
        if url is None or unit[0] not in state.steps:
            continue
        recorded, current = state.steps[unit[0]].get(OUTPUT), identity(url)
        if current is None:  # nothing published there: the step's own checks judge what is
            continue
        if current != recorded:
            raise ConfigError(
                f"--redo {step}: {url} is not the output step {unit[0]} recorded (run "
                f"{current['run_id']} is there): move it aside, then run --redo again"
            )
        removals.append((unit[0], Location(url)))
    for name, location in removals:
        location.storage.remove(location.path)
        log(f"segpipe: --redo {step}: removed {location.url}, step {name}'s output, to make it again")
    for unit in later:
        for name in unit:
            state.steps.pop(name, None)
    state.save()
    log(f"segpipe: --redo {step}: steps {', '.join('+'.join(u) for u in later)} will run again")
