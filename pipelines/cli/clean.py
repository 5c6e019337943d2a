"""`segpipe clean`: its arguments and its run (Spark is imported only when it runs)."""

from __future__ import annotations

import argparse
from typing import Any

from pipelines.cli.spark_args import add_spark_arguments


def add_parser(sub: Any) -> None:
    p = sub.add_parser("clean", help="apply Kafka retention and compaction, writing a new log directory")
    p.add_argument("src", help="log directory (path or fsspec URL); never modified")
    p.add_argument("dst", help="output directory; must be absent or empty")
    p.add_argument("--config", help="YAML file with 'defaults:' and 'topics:' maps of Kafka topic configs")
    p.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="topic config for every topic"
    )
    p.add_argument("--topic-set", action="append", default=[], metavar="TOPIC:NAME=VALUE")
    p.add_argument("--now-ms", type=int, help="the 'now' of every rule, epoch ms (default: the clock)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and write nothing")
    p.add_argument("--report", help="also write the JSON report here")
    add_spark_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.config import load_job_config
    from pipelines.output.destination import require_destination
    from pipelines.runtime.session import spark_for_command, spark_settings

    # Refusals come before Spark starts: a bad flag costs nothing.
    config = load_job_config(args.config, args.set, args.topic_set)
    settings = spark_settings(args.conf)
    if not args.dry_run:
        require_destination(args.src, args.dst)
    with spark_for_command("pipelines.jobs.clean", args.master, settings) as sc:
        from pipelines.jobs.clean import clean

        clean(
            sc, args.src, args.dst, config, now_ms=args.now_ms, dry_run=args.dry_run, report_path=args.report
        )
    return 0
