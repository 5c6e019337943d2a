"""`segpipe clean` arguments and entry (kept apart so `inspect`/`dump` never import Spark)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_clean_parser(sub: Any) -> None:
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
    p.add_argument("--master", help="Spark master (default: local[*], or spark-submit's)")
    p.add_argument(
        "--conf", action="append", default=[], metavar="NAME=VALUE", help="a Spark setting (spark.*)"
    )
    p.set_defaults(func=cmd_clean)


def cmd_clean(args: argparse.Namespace) -> int:
    from pipelines.commit import DestinationRefused, require_destination
    from pipelines.config import ConfigError, JobConfig
    from pipelines.session import get_context, interrupt_cancels_jobs, spark_settings, stop_before_exit
    from segment_io.storage import open_storage

    try:
        text = None
        if args.config:
            storage, path = open_storage(args.config)
            try:
                text = storage.read(path).decode()
            except OSError as exc:
                raise ConfigError(f"cannot read config file {args.config}: {exc}") from None
        config = JobConfig.from_sources(text, args.set, args.topic_set)
        settings = spark_settings(args.conf)
        if not args.dry_run:
            require_destination(args.src, args.dst)
    except (ConfigError, DestinationRefused) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from concurrent.futures import ThreadPoolExecutor

    # The JVM starts (seconds) while this thread imports the pipeline modules.
    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(get_context, args.master, **settings)
        from pipelines.cleaner import clean

        sc = starting.result()
    interrupt_cancels_jobs(sc)
    try:
        clean(
            sc,
            args.src,
            args.dst,
            config,
            now_ms=args.now_ms,
            dry_run=args.dry_run,
            report_path=args.report,
        )
    except DestinationRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        stop_before_exit(sc)
    return 0
