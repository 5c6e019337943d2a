"""`segpipe erase`: its arguments and its run; the key-list arguments `validate --erased` shares."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from pipelines.cli import console
from pipelines.cli.key_args import add_key_arguments
from pipelines.cli.source_args import add_grace_ms, add_kafka_tier, grace_ms_of, kafka_tier_of
from pipelines.cli.spark_args import (
    JOB_MODULES,
    add_on_corrupt,
    add_spark_arguments,
    local_master_cores,
    spark_on_demand,
)
from pipelines.errors import ConfigError
from segment_io.exit_codes import ExitCode
from segment_io.storage import Location

if TYPE_CHECKING:
    from pipelines.jobs.erase.request import EraseRequest
    from pipelines.log.source import Source


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "erase",
        help="remove every record of listed keys from a log directory, writing a new one, with evidence",
    )
    p.add_argument(
        "src", help="log directory (path or fsspec URL); never modified, refused while a broker runs on it"
    )
    p.add_argument("dst", nargs="?", help="output directory; must be absent or empty (none with --in-place)")
    add_kafka_tier(p)
    p.add_argument(
        "--in-place",
        action="store_true",
        help="SRC is a remote tier: write the erased segments into it as new objects and commit them as a "
        "new manifest version (the old objects, with the erased records, stay until tier --expire)",
    )
    add_grace_ms(p)
    p.add_argument(
        "--keys",
        required=True,
        metavar="FILE",
        help="the keys: one per line, or a Parquet or CSV file (.parquet, .csv) with a `key` column",
    )
    add_key_arguments(p)
    p.add_argument("--dry-run", action="store_true", help="count what would be erased; write nothing at DST")
    p.add_argument("--report", help="also write the JSON report (the evidence) to this new file")
    add_on_corrupt(p)
    p.add_argument(
        "--validate",
        action="store_true",
        help="prove the staged output is SRC minus exactly the listed keys' records before publishing it "
        f"(as validate --erased); a failure publishes nothing and exits {ExitCode.VALIDATION}",
    )
    add_spark_arguments(p, JOB_MODULES["erase"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from pipelines.keys.key_list import checked_key_list
    from pipelines.log.source import open_source
    from pipelines.output.destination import require_new_file
    from pipelines.output.harness import preflight, rechecked
    from pipelines.runtime.tasks import placement

    grace_ms_of(args)  # refused where nothing is swapped
    if args.in_place and args.kafka_tier:
        return _run_kafka_tier(args)
    # Refusals before Spark starts: a missing source, a destination in use (and the list, below).
    if args.in_place:
        from segment_io.remote.tier import RemoteTier

        if args.dst is not None or args.topic:
            raise ConfigError(
                "erase --in-place takes one path, the remote tier, and erases from all its topics"
            )
        RemoteTier.open(args.src)  # refuses anything but a remote tier
        if args.report:
            require_new_file(args.report)
    elif args.dst is None:
        raise ConfigError("erase needs SRC and DST (or SRC --in-place for a remote tier)")
    source = open_source(args.src, kafka_tier=kafka_tier_of(args), patterns=tuple(args.topic))
    src = Location(args.src) if args.in_place else source.log  # in place, the tier itself is written
    asked = _request(args, source, src=src, dst=Location.of_optional(args.dst), validate=args.validate)
    # In place, the run erases into a staging area of the tier it names (jobs/erase/in_place.py).
    preflighted = None if args.in_place else preflight(asked)
    # In place, SRC is a remote tier (not a log directory), whatever its storage.
    near_log = src.near and not args.in_place
    size = 0 if args.in_place else source.near_bytes
    # An erase rewrites segments, as a compaction does; in place, it works over a remote tier.
    needed, local = placement(near_log, size, True, local_master_cores(args))
    # The list is read once, and checked before a JVM starts; a local master's processes, cheap
    # to stop, start first and warm up while the driver reads it.
    keys = None if local else checked_key_list(args.keys, args.key_format, console.say)
    with spark_on_demand(args, needed, JOB_MODULES["erase"], local_likely=local) as spark:
        if keys is None:
            keys = checked_key_list(args.keys, args.key_format, console.say)
        from pipelines.jobs.erase.in_place import erase_in_place
        from pipelines.jobs.erase.job import run_erase

        request = replace(asked, checked=keys)
        gate = None
        if args.validate:
            from pipelines.jobs.erase.gate import erasure_gate

            gate = erasure_gate(spark, src, request.header_names, request.topics, console.say)
        if preflighted is None:
            report = erase_in_place(spark, request, console.say, gate)
        else:  # the request preflight checked, with its list now read
            report = run_erase(spark, rechecked(preflighted, checked=keys), console.say, gate)
    return ExitCode.SKIPPED if report.skipped else ExitCode.OK


def _run_kafka_tier(args: argparse.Namespace) -> int:
    """erase LOG_DIR --kafka-tier SETTINGS --bootstrap-server HOST:PORT --in-place: the remote
    segments holding listed keys swapped for erased ones while the cluster serves them."""
    from pipelines.kafka_tier.rewrite import left_in_place, require_live_cluster
    from pipelines.kafka_tier.swap import GRACE_MS
    from pipelines.keys.key_list import checked_key_list
    from pipelines.log.source import open_source
    from pipelines.output.destination import require_new_file

    if args.dst is not None or args.validate:
        raise ConfigError(
            "erase --in-place --kafka-tier takes one path, the broker's log directory (no DST, no --validate)"
        )
    require_live_cluster(args.bootstrap_server, "erase", "erased")  # before anything is listed
    if args.report:
        require_new_file(args.report)
    source = open_source(args.src, kafka_tier=kafka_tier_of(args), patterns=tuple(args.topic))
    keys = checked_key_list(args.keys, args.key_format, console.say)
    request = _request(args, source, dst=None, checked=keys)
    with spark_on_demand(args, False, JOB_MODULES["erase"], local_likely=True) as spark:
        from pipelines.jobs.erase.kafka_tier import erase_kafka_tier

        given = grace_ms_of(args)
        grace = GRACE_MS if given is None else given
        report = erase_kafka_tier(spark, request, console.say, grace_ms=grace)
    done = report.kafka_tier or {}
    if done.get("proof_failed"):
        return ExitCode.VALIDATION
    return ExitCode.SKIPPED if left_in_place(report.kafka_tier) else ExitCode.OK


def _request(
    args: argparse.Namespace, source: Source, src: Location | None = None, **given: Any
) -> EraseRequest:
    """The EraseRequest the arguments name, for SRC opened as `source` (the topics it keeps), read
    as `src` where that is not `source.log`; `given`: what the way it runs adds (a DST, the
    checked key list)."""
    from pipelines.jobs.erase.request import EraseRequest
    from pipelines.keys.key_digest import read_secret

    return EraseRequest(
        src=src or source.log,
        keys=args.keys,
        key_format=args.key_format,
        header_names=tuple(args.also_in_headers),
        topics=source.kept,
        dry_run=args.dry_run,
        report_path=Location.of_optional(args.report),
        on_corrupt=args.on_corrupt,
        digest=None if args.secret_file is None else read_secret(args.secret_file),
        **given,
    )
