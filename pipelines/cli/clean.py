"""`segpipe clean`: its arguments and its run (Spark is imported only when it runs)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from pipelines.cli import console
from pipelines.cli.source_args import add_grace_ms, add_kafka_tier, grace_ms_of, kafka_tier_of
from pipelines.cli.spark_args import (
    JOB_MODULES,
    VALIDATION_MODULES,
    add_config_arguments,
    add_now_argument,
    add_on_corrupt,
    add_spark_arguments,
    add_suite_argument,
    local_master_cores,
    now_from,
    spark_on_demand,
    workers_for,
)
from pipelines.config import JobConfig, load_job_config
from pipelines.errors import ConfigError
from segment_io.exit_codes import ExitCode
from segment_io.storage import Location

if TYPE_CHECKING:
    from pipelines.jobs.clean.request import CleanRequest
    from pipelines.log.source import Source


def add_parser(sub: Any) -> None:
    p = sub.add_parser("clean", help="apply Kafka retention and compaction, writing a new log directory")
    p.add_argument("src", help="log directory (path or fsspec URL); never modified")
    p.add_argument("dst", nargs="?", help="output directory; must be absent or empty (none with --in-place)")
    p.add_argument(
        "--in-place",
        action="store_true",
        help="SRC is a remote tier: write the cleaned segments into it as new objects and commit them as a "
        "new manifest version (old objects stay until tier --expire)",
    )
    p.add_argument("--remote", metavar="REMOTE_URL", help="SRC's remote tier: the two are cleaned as one log")
    add_kafka_tier(p)
    add_grace_ms(p)
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="PATTERN",
        help="keep only these topics in DST: a name or a glob (cdc.*); repeat for more (default: all)",
    )
    add_config_arguments(p)
    add_now_argument(p, "retention.ms, delete horizons, min.compaction.lag.ms, producer expiry")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan and write nothing at DST (refusals as for a run)",
    )
    p.add_argument(
        "--report",
        help="also write the JSON report (with the plan) to this new file, and the same run as a page "
        "people read beside it (.html)",
    )
    p.add_argument("--json", action="store_true", help="print the dry run's plan as JSON (for machines)")
    add_on_corrupt(p)
    p.add_argument(
        "--validate",
        action="store_true",
        help="run the validation suites on the staged output before publishing it: a failure publishes "
        f"nothing and exits {ExitCode.VALIDATION} (the Data Docs are kept beside DST)",
    )
    add_suite_argument(p)
    p.add_argument(
        "--select",
        choices=["all", "kafka"],
        default="all",
        help="which compacted partitions to compact: all (the default: every cleanable range), or kafka: "
        "only those Kafka's cleaner would choose now (min.cleanable.dirty.ratio, max.compaction.lag.ms, "
        "a passed delete horizon); the others are carried over and named with the reason",
    )
    p.add_argument(
        "--link",
        action="store_true",
        help="hard-link the segments carried over unchanged instead of copying them (local SRC and DST on "
        "one file system; only for a log nothing writes any more: see README)",
    )
    p.add_argument(
        "--print-config",
        action="store_true",
        help="print every topic's effective config and where each value came from, then stop",
    )
    add_spark_arguments(p, JOB_MODULES["clean"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.jobs.clean.placement import clean_placement
    from pipelines.log.source import open_source
    from pipelines.output.harness import preflight

    # Refusals come before Spark starts: a bad flag, a missing or misnamed source cost nothing.
    config = load_job_config(args.config, args.set, args.topic_set)
    if args.suite and not args.validate:
        raise ConfigError("--suite runs in the validation gate: add --validate")
    grace_ms = grace_ms_of(args)  # refused where nothing is swapped
    if args.in_place and args.kafka_tier:
        return _run_kafka_tier(args, config, grace_ms)
    if args.in_place:
        return _run_in_place(args, config)
    if args.dst is None:
        raise ConfigError("clean needs SRC and DST (or SRC --in-place for a remote tier)")
    # SRC opened once: the checks below, the run's scan and its validation read the same storage.
    source = open_source(
        args.src,
        remote=args.remote,
        kafka_tier=kafka_tier_of(args),
        config=config,
        patterns=tuple(args.topic),
    )
    if args.print_config:
        for topic, values in config.describe(source.topics).items():
            console.say(topic)
            for name, item in values.items():
                console.say(f"  {name} = {item['value']}  ({item['source']})")
        return ExitCode.OK
    note = config.ignored_note()
    if note:
        console.say(note)
    request = preflight(
        _request(
            args,
            source,
            config,
            dst=Location(args.dst),
            plan_json=args.json,
            link=args.link,
            select=args.select,
        )
    )
    suites: tuple[Any, ...] = ()
    if args.suite:  # the suites are read before Spark starts; their module loads the job's
        from pipelines.jobs.validate.user_suites import load_suite

        suites = tuple(load_suite(f) for f in args.suite)
    validating = VALIDATION_MODULES if args.validate else ()
    # Spark starts with the run where compaction may need it (its JVM starting while the job's
    # modules load); otherwise only if a stage turns out to need it (runtime.session.LazySpark).
    needed, local = clean_placement(source, config, args.select, bool(suites), local_master_cores(args))
    with spark_on_demand(args, needed, JOB_MODULES["clean"], *validating, local_likely=local) as spark:
        from pipelines.jobs.clean import run_clean

        gate = None
        if args.validate:
            from pipelines.jobs.validate.gate import validation_gate

            gate = validation_gate(spark, request.request.out, console.say, against=source.log, suites=suites)
        report = run_clean(spark, request, console.say, gate)
    return ExitCode.SKIPPED if report.skipped else ExitCode.OK


def _request(args: argparse.Namespace, source: Source, config: JobConfig, **given: Any) -> CleanRequest:
    """The CleanRequest the arguments name for SRC opened as `source` (the topics it keeps);
    `given`: what the way it runs adds (a DST, --json, --link, --select)."""
    from pipelines.jobs.clean.request import CleanRequest

    return CleanRequest(
        src=source.log,
        config=config,
        now_ms=now_from(args),
        dry_run=args.dry_run,
        report_path=Location.of_optional(args.report),
        on_corrupt=args.on_corrupt,
        topics=source.kept,
        **given,
    )


def _run_in_place(args: argparse.Namespace, config: JobConfig) -> int:
    from pipelines.output.destination import require_new_file
    from segment_io.remote.tier import RemoteTier

    if args.topic or args.link or args.validate:
        raise ConfigError(
            "clean --in-place keeps every topic of the remote tier and copies nothing (no --topic, --link), "
            "and commits no output to gate (no --validate: validate the tier after)"
        )
    if args.dst is not None or args.remote:
        raise ConfigError("clean --in-place takes one path, the remote tier (no DST, no --remote)")
    tier = RemoteTier.open(args.src)  # refuses anything but a remote tier
    config.require_topics({tp.topic for tp in tier.partitions()}, args.src)
    now_ms = now_from(args)
    if args.report:
        require_new_file(args.report)
    from pipelines.jobs.clean.request import CleanRequest

    asked = CleanRequest(
        src=args.src,
        config=config,
        now_ms=now_ms,
        dry_run=args.dry_run,
        report_path=Location.of_optional(args.report),
        on_corrupt=args.on_corrupt,
    )
    with workers_for(args, JOB_MODULES["clean"]) as sc:
        from pipelines.jobs.clean.in_place import clean_in_place

        report = clean_in_place(sc, asked, console.say)
    return ExitCode.SKIPPED if report.skipped else ExitCode.OK


def _run_kafka_tier(args: argparse.Namespace, config: JobConfig, grace_ms: int | None) -> int:
    """clean LOG_DIR --kafka-tier SETTINGS --bootstrap-server HOST:PORT --in-place: the remote
    segments of the topics the configs compact, compacted and swapped while the cluster serves them."""
    from pipelines.kafka_tier.rewrite import left_in_place, require_live_cluster
    from pipelines.log.source import open_source

    if args.dst is not None or args.remote or args.link or args.validate or args.select != "all":
        raise ConfigError(
            "clean --in-place --kafka-tier takes one path, the broker's log directory, and proves every "
            "successor before it is served (no DST, --remote, --link, --validate or --select)"
        )
    require_live_cluster(args.bootstrap_server, "clean", "cleaned")  # before anything is listed
    source = open_source(args.src, kafka_tier=kafka_tier_of(args), config=config, patterns=tuple(args.topic))
    request = _request(args, source, config)
    with spark_on_demand(args, False, JOB_MODULES["clean"], *VALIDATION_MODULES, local_likely=True) as spark:
        from pipelines.jobs.clean.kafka_tier import clean_kafka_tier
        from pipelines.jobs.validate.gate import promise_gate_for
        from pipelines.kafka_tier.swap import GRACE_MS

        grace = GRACE_MS if grace_ms is None else grace_ms
        gate_for = promise_gate_for(spark, console.say)
        report = clean_kafka_tier(spark, request, gate_for, console.say, grace_ms=grace)
    return ExitCode.SKIPPED if left_in_place(report.kafka_tier) or report.skipped else ExitCode.OK
