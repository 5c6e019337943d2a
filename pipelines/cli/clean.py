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
    p.add_argument(
        "--now",
        "--now-ms",
        dest="now",
        metavar="TIME",
        help="the 'now' every time rule (retention.ms, delete horizons, min.compaction.lag.ms, producer "
        "expiry) is applied at: epoch ms or ISO-8601 (2026-11-23T12:00:00Z). Default: the clock at the "
        "start of the run, so an old archive can lose everything to retention.ms (7 days by default)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the plan and write nothing at DST (refusals as for a run)",
    )
    p.add_argument("--report", help="also write the JSON report (with the plan) to this new file")
    add_spark_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.clock import parse_time
    from pipelines.config import load_job_config
    from pipelines.output.destination import require_destination, require_new_file
    from pipelines.runtime.session import spark_for_command, spark_settings
    from segment_io.layout import list_log_dir
    from segment_io.storage import open_storage

    # Refusals come before Spark starts: a bad flag, a missing or misnamed source cost nothing.
    config = load_job_config(args.config, args.set, args.topic_set)
    storage, path = open_storage(args.src)
    config.require_topics({p.tp.topic for p in list_log_dir(storage, path).partitions}, args.src)
    now_ms = None if args.now is None else parse_time(args.now, "--now")
    settings = spark_settings(args.conf)
    require_destination(args.src, args.dst)
    if args.report:
        require_new_file(args.report)
    with spark_for_command("pipelines.jobs.clean", args.master, settings) as sc:
        from pipelines.jobs.clean import clean

        clean(sc, args.src, args.dst, config, now_ms=now_ms, dry_run=args.dry_run, report_path=args.report)
    return 0
