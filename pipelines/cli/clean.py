"""`segpipe clean`: its arguments and its run (Spark is imported only when it runs)."""

from __future__ import annotations

import argparse
from typing import Any

from pipelines.cli import console
from pipelines.cli.spark_args import add_spark_arguments
from pipelines.errors import EXIT_OK, EXIT_SKIPPED


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
    p.add_argument(
        "--on-corrupt",
        choices=["fail", "skip-partition"],
        default="fail",
        help="bad data: stop the run (fail, the default) or leave that partition out of DST whole, "
        "name it, and exit 3 (skip-partition)",
    )
    p.add_argument(
        "--print-config",
        action="store_true",
        help="print every topic's effective config and where each value came from, then stop",
    )
    add_spark_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.clock import parse_time
    from pipelines.config import load_job_config
    from pipelines.output.destination import require_destination, require_new_file
    from pipelines.runtime.session import check_master, spark_for_command, spark_settings
    from segment_io.layout import list_log_dir
    from segment_io.storage import open_storage

    # Refusals come before Spark starts: a bad flag, a missing or misnamed source cost nothing.
    config = load_job_config(args.config, args.set, args.topic_set)
    storage, path = open_storage(args.src)
    topics = sorted({p.tp.topic for p in list_log_dir(storage, path).partitions})
    config.require_topics(set(topics), args.src)
    if args.print_config:
        for topic, values in config.describe(topics).items():
            console.say(topic)
            for name, item in values.items():
                console.say(f"  {name} = {item['value']}  ({item['source']})")
        return EXIT_OK
    note = config.ignored_note()
    if note:
        console.say(note)
    now_ms = None if args.now is None else parse_time(args.now, "--now")
    settings = spark_settings(args.conf)
    check_master(args.master)
    require_destination(args.src, args.dst)
    if args.report:
        require_new_file(args.report)
    log_level = "info" if console.level() >= console.VERBOSE else "warn"
    with (
        console.held_back_noise(),
        spark_for_command("pipelines.jobs.clean", args.master, settings, log_level) as sc,
    ):
        from pipelines.jobs.clean import clean

        report = clean(
            sc, args.src, args.dst, config, now_ms=now_ms, dry_run=args.dry_run, report_path=args.report,
            log=console.say, on_corrupt=args.on_corrupt,
        )  # fmt: skip
    return EXIT_SKIPPED if report.skipped else EXIT_OK
