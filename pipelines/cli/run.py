"""`segpipe run JOB.yaml`: a job file's steps in order, resumable (pipelines.run)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pipelines.cli import console
from pipelines.cli.spark_args import (
    JOB_MODULES,
    VALIDATION_MODULES,
    add_spark_arguments,
    spark_on_demand,
    workers_for,
)
from pipelines.clock import clock_ms, iso
from pipelines.config.job_schema import CLEAN_STEPS, STEPS, schema_table
from pipelines.config.jobfile import JobFile, load_job_file
from pipelines.errors import ConfigError
from pipelines.runtime.submitted import SPARK_MASTER, under_spark_submit
from segment_io.exit_codes import ExitCode


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help=f"run a job file's steps ({', '.join(STEPS)}), resuming after a failure",
        description="Runs the job's steps in order. Each finished step is recorded in the run's state "
        "file; run again after a failure or kill, it resumes where it stopped and never redoes a "
        "finished step.",
    )
    p.add_argument("job", nargs="?", help="the job file (YAML; `segpipe run --schema` lists its keys)")
    p.add_argument("--run", metavar="NAME", help="the run's name, for job files whose paths contain {run}")
    p.add_argument("--step", choices=STEPS, help="run only this step (its earlier steps must be done)")
    p.add_argument(
        "--redo",
        choices=STEPS,
        metavar="STEP",
        help="run STEP and every step after it again: their recorded outputs are removed first (only "
        "where they are the ones recorded)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the steps, what is done, and the next step's plan"
    )
    p.add_argument("--json", action="store_true", help="print the steps' records as JSON at the end")
    p.add_argument("--schema", action="store_true", help="print the job file's keys and stop")
    add_spark_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.run.runner import chosen_units, unit_name
    from pipelines.run.state import open_state

    if args.schema:
        for row in schema_table():
            console.say(row)
        return ExitCode.OK
    if not args.job:
        raise ConfigError("run needs a job file (segpipe run JOB.yaml)")
    job = load_job_file(args.job).for_run(args.run)
    now_ms = clock_ms() if job.now_ms is None else job.now_ms
    state = open_state(job.state, job.name, job.digest, args.run, now_ms)
    if args.redo is not None:
        if args.step is not None or args.dry_run:
            raise ConfigError("--redo runs the rest of the job: give it without --step and --dry-run")
        from pipelines.run.outputs import redo

        redo(job, state, args.redo, console.say)
    units = chosen_units(job, state, args.step)
    pending = [u for u in units if not state.done(u[0])]
    console.say(
        f"segpipe: job {job.name}{f' run {args.run}' if args.run else ''}: now = {state.now_ms} "
        f"({iso(state.now_ms)}); state {job.state}"
    )
    for unit in units:
        console.say(f"  {unit_name(unit)}: {'done' if state.done(unit[0]) else 'to run'}")
    if not pending:
        console.say("segpipe: every step of this run is done; nothing to run")
        return _finish(args, {unit_name(u): state.steps[u[0]] for u in units})
    _refuse_before_spark(job)
    # A Spark Connect server named on the command line, or the master spark-submit was given (the
    # job file's key says so), takes the place of the job's master.
    args.master = args.master or (None if args.spark_remote or under_spark_submit() else job.spark.master)
    args.conf = [f"{k}={v}" for k, v in _job_settings(job).items()] + list(args.conf)
    if args.dry_run:
        return _dry_run(args, job, state.now_ms, pending[0])
    # A compaction in place proves what it staged before any swap (validate --against).
    proving = job.in_place is not None or any("validate" in u for u in pending)
    validating = VALIDATION_MODULES if proving else ()
    # With a local master the steps' work runs in the driver's own processes, and Spark starts
    # only where a step needs it (an operator suite); otherwise it starts with the run.
    with workers_for(args, JOB_MODULES["run"], *validating) as sc:
        from pipelines.run.runner import run_units

        records = run_units(sc, job, state, units, console.say)
    return _finish(args, {unit_name(u): r for u, r in zip(units, records, strict=True)})


def _job_settings(job: JobFile) -> dict[str, str]:
    """The job's Spark settings for this process. Under spark-submit the driver JVM already runs:
    the settings it reads at its start were spark-submit's to apply (the DAG's tasks pass the
    job's settings to its --conf), so they are left out here rather than refused, and so is a
    master (spark-submit's own wins)."""
    from pipelines.runtime.session import JVM_START_SETTINGS

    if not under_spark_submit():
        return dict(job.spark.conf)
    return {k: v for k, v in job.spark.conf.items() if k not in (*JVM_START_SETTINGS, SPARK_MASTER)}


def _refuse_before_spark(job: JobFile) -> None:
    """What the steps would refuse, refused before Spark starts and before any step publishes:
    per-topic configs and topic patterns that name no topic of the source, a key list that cannot
    be read, a suite great-expectations cannot run whole."""
    from pipelines.log.source import open_source

    if job.cleans or job.erases:
        open_source(job.source, config=job.configs, patterns=job.topics.patterns)
    if job.erase is not None:
        from pipelines.keys.key_list import checked_key_list

        checked_key_list(job.erase.keys, job.erase.key_format, console.say)
        if job.erase.secret_file is not None:
            from pipelines.keys.key_digest import read_secret

            read_secret(job.erase.secret_file)
    if job.suites:
        from pipelines.jobs.validate.user_suites import load_suite

        for suite in job.suites:
            load_suite(suite)


def _dry_run(args: argparse.Namespace, job: JobFile, now_ms: int, unit: tuple[str, ...]) -> int:
    from pipelines.run.runner import clean_request, cut_request, erase_request, unit_name

    if unit == ("cut",):
        with spark_on_demand(args, False, JOB_MODULES["cut"]) as sc:
            from pipelines.jobs.cut.job import run_cut

            run_cut(sc, cut_request(job, dry_run=True), console.say)
        return ExitCode.OK
    if unit == ("erase",):
        with spark_on_demand(args, False, JOB_MODULES["erase"]) as sc:
            from pipelines.jobs.erase.job import run_erase

            run_erase(sc, erase_request(job, dry_run=True), console.say)
        return ExitCode.OK
    if unit[0] not in CLEAN_STEPS:
        console.say(f"segpipe: dry run: next is {unit_name(unit)}; its plan depends on the steps before it")
        return ExitCode.OK
    proving = VALIDATION_MODULES if job.in_place is not None else ()
    with spark_on_demand(args, False, JOB_MODULES["clean"], *proving) as sc:
        from pipelines.jobs.clean import run_clean
        from pipelines.jobs.clean.kafka_tier import clean_kafka_tier
        from pipelines.jobs.validate.gate import promise_gate_for

        request = clean_request(job, unit, now_ms, dry_run=True)
        if job.in_place is not None:  # what it would swap, from counterparts staged and proved
            clean_kafka_tier(sc, request, promise_gate_for(sc, console.say), console.say)
        else:
            run_clean(sc, request, console.say)
    return ExitCode.OK


def _finish(args: argparse.Namespace, records: dict[str, Any]) -> int:
    if args.json:
        print(json.dumps(records, indent=2, sort_keys=True, default=str))
    return ExitCode.OK
