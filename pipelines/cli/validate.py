"""`segpipe validate`: the structure suites over a log directory (and its remote tier)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from pipelines.cli import console
from pipelines.cli.key_args import add_key_arguments
from pipelines.cli.source_args import add_kafka_tier, kafka_tier_of
from pipelines.cli.spark_args import (
    JOB_MODULES,
    VALIDATION_MODULES,
    add_config_arguments,
    add_now_argument,
    add_spark_arguments,
    add_suite_argument,
    now_from,
    spark_on_demand,
)
from pipelines.config import load_job_config
from pipelines.errors import ConfigError, ValidationFailed
from segment_io.exit_codes import ExitCode
from segment_io.layout import META_DIR, list_log_dir
from segment_io.storage import Location

if TYPE_CHECKING:
    from segment_io.kafka_tier.url import KafkaTierSource


def add_parser(sub: Any) -> None:
    p = sub.add_parser("validate", help="prove a log directory sound with great-expectations suites")
    p.add_argument("path", help="log directory (path or fsspec URL), or a remote tier")
    p.add_argument(
        "--remote", metavar="REMOTE_URL", help="the log's remote tier: the two are validated as one log"
    )
    add_kafka_tier(p, "PATH")
    p.add_argument(
        "--against",
        metavar="SRC",
        help="the log PATH was cleaned from: also check the compaction promise (records unchanged, every "
        "key's latest value kept, the run report's counts)",
    )
    p.add_argument(
        "--erased",
        metavar="FILE",
        help="with --against: prove PATH is SRC minus exactly the records of the keys FILE lists (segpipe "
        "erase): none of them left, every other record unchanged",
    )
    add_key_arguments(p, proving=True)
    add_suite_argument(p)
    add_config_arguments(p)
    add_now_argument(
        p,
        "with --against, together with the topic configs: what retention and compaction may remove",
        default="the `now` PATH's segpipe manifest recorded; a PATH without one needs --now and the configs",
    )
    p.add_argument(
        "--report",
        metavar="DIR",
        help="write the great-expectations Data Docs (HTML) here (default: PATH/_segpipe/validation/ "
        "for a local segpipe output)",
    )
    add_spark_arguments(p, VALIDATION_MODULES[0])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pipelines.jobs.validate.user_suites import load_suite
    from pipelines.output.harness import preflight
    from segment_io.remote.view import log_location

    path_tier, against = _tiers(args)
    if args.erased:
        log = log_location(args.path, args.remote, path_tier)
        list_log_dir(log.storage, log.path)  # a missing or misnamed path costs nothing
        return _prove_erasure(args, log, against)
    given = args.config or args.set or args.topic_set
    config = load_job_config(args.config, args.set, args.topic_set) if given else None
    suites = tuple(load_suite(f) for f in args.suite)
    from pipelines.jobs.validate import ValidateRequest, default_report_dir, needs_spark, run_validate

    # Refused before Spark starts: a missing or misnamed PATH, a promise without its terms.
    request = preflight(
        ValidateRequest(
            path=log_location(args.path, kafka_tier=path_tier),
            remote=Location.of_optional(args.remote),
            report_dir=args.report or default_report_dir(args.path),
            against=against,
            now_ms=now_from(args),
            config=config,
            suites=suites,
        )
    )
    with spark_on_demand(args, needs_spark(request.request), *VALIDATION_MODULES) as spark:
        result = run_validate(spark, request, console.say)
    result.say(console.say)
    return ExitCode.OK if result.success else ExitCode.INVALID


def _tiers(args: argparse.Namespace) -> tuple[KafkaTierSource | None, Location | None]:
    """Where `--kafka-tier` applies: to PATH alone; with `--against`, to SRC (the tier an output
    was made from) and to PATH only where it is a tiered broker's log directory too. Returns PATH's
    tier and SRC (as read; not yet opened)."""
    from segment_io.remote.view import holds_kafka_tier, log_location

    tier = kafka_tier_of(args, verify=True)
    if args.against is None or tier is None:
        return tier, Location.of_optional(args.against)
    return (tier if holds_kafka_tier(args.path) else None), log_location(args.against, kafka_tier=tier)


def _prove_erasure(args: argparse.Namespace, log: Location, against: Location | None) -> int:
    """validate --erased FILE --against SRC: the erase's proof, from the data alone."""
    from pipelines.keys.key_digest import read_secret
    from pipelines.keys.key_list import checked_key_list
    from pipelines.log.source import open_source

    if against is None or args.remote or args.suite:
        raise ConfigError(
            "--erased proves an erase against its source: give --against SRC (no --remote, --suite)"
        )
    keys = checked_key_list(args.erased, args.key_format, console.say)
    source = open_source(against, patterns=tuple(args.topic), named=args.against)
    digest = None if args.secret_file is None else read_secret(args.secret_file)
    with spark_on_demand(args, False, JOB_MODULES["erase-proof"]) as spark:
        from pipelines.jobs.erase.gate import erasure_gate

        gate = erasure_gate(spark, source.log, tuple(args.also_in_headers), source.kept, console.say)
        try:
            gate(log, keys)
        except ValidationFailed as exc:
            console.say(f"segpipe: {exc}")
            return ExitCode.INVALID
    if digest is not None:
        return _check_evidence(log, keys, digest)
    return ExitCode.OK


def _check_evidence(out: Location, keys: Any, digest: Any) -> int:
    """The output's own report, checked against the list under the operator's secret: it names
    exactly the listed keys (each found, or found nowhere)."""
    import json
    import posixpath

    from pipelines.jobs.erase.evidence import evidence_problems
    from pipelines.output.staging import REPORT

    path = out.file(posixpath.join(META_DIR, REPORT))
    if not out.storage.is_file(path):
        console.say(f"segpipe: evidence not checked: {out.storage.url(path)} does not exist")
        return ExitCode.INVALID
    doc = json.loads(out.storage.read(path))
    problems = evidence_problems(doc, keys, digest, lambda name: out.storage.read(out.file(name)))
    for line in problems:
        console.say(f"segpipe: evidence check failed: {line}")
    if not problems:
        console.say(
            f"segpipe: evidence checked: the report names each of the {doc.get('keys_listed', 0):,} listed "
            "keys under this secret, and nothing else"
        )
    return ExitCode.INVALID if problems else ExitCode.OK
