"""`segpipe cut`: a log directory as Kafka's truncation to an offset or a moment leaves it."""

from __future__ import annotations

import argparse
from typing import Any

from pipelines.cli import console
from pipelines.cli.source_args import add_kafka_tier, kafka_tier_of
from pipelines.cli.spark_args import (
    JOB_MODULES,
    add_on_corrupt,
    add_spark_arguments,
    local_master_cores,
    spark_on_demand,
)
from pipelines.clock import time_argument
from segment_io.exit_codes import ExitCode


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "cut", help="write a log directory as it was: every partition truncated before an offset or a time"
    )
    p.add_argument("src", help="log directory (path or fsspec URL); never modified")
    add_kafka_tier(p)
    p.add_argument("dst", help="output directory; must be absent or empty")
    until = p.add_mutually_exclusive_group(required=True)
    until.add_argument(
        "--until-offset",
        type=int,
        metavar="OFFSET",
        help="keep every partition's batches that end below OFFSET",
    )
    until.add_argument(
        "--until-time",
        type=time_argument,
        metavar="TIME",
        help="cut each partition at its first record at or after TIME, as Kafka's ListOffsets finds it "
        "(epoch ms or ISO-8601); a partition with none stays whole",
    )
    p.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="PATTERN",
        help="cut and keep only these topics in DST: a name or a glob; repeat for more (default: all)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="say where each partition would be cut; write nothing"
    )
    p.add_argument("--report", help="also write the JSON report to this new file")
    add_on_corrupt(p)
    add_spark_arguments(p, JOB_MODULES["cut"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from pipelines.jobs.cut.request import CutRequest
    from pipelines.log.source import open_source
    from pipelines.output.harness import preflight
    from pipelines.runtime.tasks import placement
    from segment_io.storage import Location

    # Refusals before any work: a bad request, a missing source, a destination in use.
    asked = CutRequest(
        src=args.src,
        dst=Location(args.dst),
        until_offset=args.until_offset,
        until_time=args.until_time,
        dry_run=args.dry_run,
        report_path=Location.of_optional(args.report),
        on_corrupt=args.on_corrupt,
    )
    source = open_source(args.src, kafka_tier=kafka_tier_of(args), patterns=tuple(args.topic))
    request = preflight(replace(asked, src=source.log, topics=source.kept))
    # Where work runs, by the one rule (runtime.tasks.placement): a cut copies, it decodes no record.
    needed, local = placement(source.log.near, source.near_bytes, False, local_master_cores(args))
    with spark_on_demand(args, needed, JOB_MODULES["cut"], local_likely=local) as spark:
        from pipelines.jobs.cut.job import run_cut

        report = run_cut(spark, request, console.say)
    return ExitCode.SKIPPED if report.skipped else ExitCode.OK
