"""`segpipe tier` and `segpipe restore`: a log directory's cold segments to its remote tier, and
back to one plain log directory."""

from __future__ import annotations

import argparse
from typing import Any

from pipelines.cli import console
from pipelines.cli.source_args import add_kafka_tier, kafka_tier_of
from pipelines.cli.spark_args import (
    JOB_MODULES,
    add_config_arguments,
    add_now_argument,
    add_spark_arguments,
    now_from,
    workers_for,
)
from pipelines.config import load_job_config
from pipelines.config.key_formats import KEY_FORMATS
from pipelines.errors import ConfigError
from segment_io.exit_codes import ExitCode
from segment_io.storage import Location


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "tier",
        help="copy cold segments to a remote tier (S3), release local copies, apply retention to both tiers",
        description="segpipe tier LOG_DIR REMOTE_URL, or segpipe tier --expire REMOTE_URL",
    )
    p.add_argument(
        "paths", nargs="+", metavar="LOG_DIR REMOTE_URL", help="the local log directory and the remote tier"
    )
    add_config_arguments(p)
    add_now_argument(p, "retention.ms, local.retention.ms, the expiry grace period")
    p.add_argument("--dry-run", action="store_true", help="print the plan; upload, commit and delete nothing")
    p.add_argument("--json", action="store_true", help="print the dry run's plan as JSON (for machines)")
    p.add_argument("--report", help="also write the JSON report (with the plan) to this new file")
    p.add_argument("--max-bytes-per-second", type=int, metavar="N", help="bound the run's upload rate")
    p.add_argument(
        "--new-history",
        action="store_true",
        help="where the remote tier holds another log under a partition's name (a re-created topic), "
        "start that partition's remote history anew from this log (the old segments expire)",
    )
    p.add_argument(
        "--expire",
        action="store_true",
        help="instead: delete the remote objects and manifest versions no longer referenced, once "
        "segpipe.remote.orphan.grace.ms has passed on the wall clock (no Spark)",
    )
    add_spark_arguments(p, JOB_MODULES["tier"])
    p.set_defaults(func=run)

    r = sub.add_parser(
        "restore", help="write a remote tier (and its local log dir) out as one plain log directory"
    )
    r.add_argument("remote", help="the remote tier (URL); with --kafka-tier, the broker's log directory")
    r.add_argument("dst", help="output directory; must be absent or empty")
    add_kafka_tier(r, "REMOTE")
    r.add_argument(
        "--local", metavar="LOG_DIR", help="the local log directory whose segments continue the remote log"
    )
    r.add_argument(
        "--keys",
        metavar="FILE",
        help="the key list of an in-place erase of the tier: a restore with --local goes ahead only if no "
        "record of LOG_DIR's segments above the tier carries a listed key (else it is refused)",
    )
    r.add_argument(
        "--key-format", choices=KEY_FORMATS, default="utf8", help="how a key is written in a text list"
    )
    add_spark_arguments(r, JOB_MODULES["restore"])
    r.set_defaults(func=run_restore)


def run(args: argparse.Namespace) -> int:
    from pipelines.output.harness import preflight

    config = load_job_config(args.config, args.set, args.topic_set)
    if args.expire:
        if len(args.paths) != 1:
            raise ConfigError("tier --expire takes one argument, the remote tier's URL")
        _refuse_ignored(args)
        from pipelines.jobs.tier.expire import expire
        from pipelines.runtime.stop import stop_handlers

        stop_handlers()  # no Spark: a stop ends the run between two removals (each one whole)
        expire(args.paths[0], config, console.say, args.dry_run)
        return ExitCode.OK
    now_ms = now_from(args)
    if len(args.paths) != 2:
        raise ConfigError("tier takes two arguments, LOG_DIR and REMOTE_URL (or --expire REMOTE_URL)")
    if args.max_bytes_per_second is not None and args.max_bytes_per_second <= 0:
        raise ConfigError("--max-bytes-per-second must be a positive number of bytes")
    log_dir, remote = args.paths
    from pipelines.jobs.tier.request import TierRequest

    asked = TierRequest(
        log_dir=Location(log_dir),
        remote=Location(remote),
        config=config,
        now_ms=now_ms,
        dry_run=args.dry_run,
        report_path=Location.of_optional(args.report),
        max_bytes_per_second=args.max_bytes_per_second,
        new_history=args.new_history,
        plan_json=args.json,
    )
    request = preflight(asked)
    note = config.ignored_note()
    if note:
        console.say(note)
    with workers_for(args, JOB_MODULES["tier"]) as sc:
        from pipelines.jobs.tier import run_tier

        run_tier(sc, request, console.say)
    return ExitCode.OK


# Options of `tier` that expiry has no use for: given with --expire, they are refused, not ignored.
EXPIRE_IGNORES = (
    ("now", "--now (expiry's grace period runs on the wall clock; --now moves retention rules only)"),
    ("report", "--report"),
    ("max_bytes_per_second", "--max-bytes-per-second"),
    ("new_history", "--new-history"),
    ("json", "--json"),
    ("master", "--master (expiry runs without Spark)"),
    ("conf", "--conf (expiry runs without Spark)"),
)


def _refuse_ignored(args: argparse.Namespace) -> None:
    given = [label for name, label in EXPIRE_IGNORES if getattr(args, name) not in (None, False, [])]
    if given:
        raise ConfigError(f"tier --expire does not take {', '.join(given)}")


def run_restore(args: argparse.Namespace) -> int:
    from pipelines.jobs.tier.request import RestoreRequest
    from pipelines.output.harness import preflight

    request = preflight(
        RestoreRequest(
            remote=args.remote,
            dst=args.dst,
            local=args.local,
            keys=args.keys,
            key_format=args.key_format,
            kafka_tier=kafka_tier_of(args),
        )
    )
    with workers_for(args, JOB_MODULES["restore"]) as spark:
        from pipelines.jobs.tier.restore import run_restore as restore_job

        restore_job(spark, request, console.say)
    return ExitCode.OK
