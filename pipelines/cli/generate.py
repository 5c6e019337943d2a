"""`segpipe generate`: a realistic synthetic log directory, Kafka's format to the byte."""

from __future__ import annotations

import argparse
from typing import Any

from pipelines.errors import ConfigError, DestinationNotEmpty
from segment_io.exit_codes import ExitCode


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "generate",
        help="write a realistic synthetic log directory",
        description="Without --topics: the sample set (every feature), with the options changing each "
        "of its topics; with --topics: those topics, shaped by the options.",
    )
    p.add_argument("dst", help="an absent or empty directory (path or fsspec URL)")
    p.add_argument("--topics", help="comma-separated topic names (default: the sample set)")
    for name, (kind, text) in _SPEC_FLAGS.items():
        flag = "--" + name.replace("_", "-")
        if kind is bool:
            p.add_argument(flag, action="store_const", const=True, help=text)
        else:
            p.add_argument(flag, type=kind, help=text)
    p.add_argument("--seed", type=int, default=7, help="random seed: the same seed writes the same bytes")
    p.set_defaults(func=run)


def _pair(text: str) -> tuple[int, int]:
    low, _, high = text.partition(",")
    if not (low.strip().isdigit() and high.strip().isdigit()):
        raise argparse.ArgumentTypeError(f"expected MIN,MAX, got {text!r}")
    return int(low), int(high)


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split(","))


# `segpipe generate` flags: the TopicSpec field each sets, its type and its help.
_SPEC_FLAGS: dict[str, tuple[Any, str]] = {
    "partitions": (int, "partitions per topic (≥ 1)"),
    "records": (int, "records per partition (≥ 0)"),
    "keys": (int, "distinct keys per partition (≥ 1)"),
    "key_skew": (float, "Zipf exponent of key popularity (≥ 0; 0: uniform)"),
    "value_min": (int, "smallest value in bytes (≥ 0)"),
    "value_max": (int, "largest value in bytes (≥ --value-min)"),
    "records_per_batch": (_pair, "MIN,MAX records per batch (1 ≤ MIN ≤ MAX)"),
    "tombstone_ratio": (float, "share of records with a null value (0..1)"),
    "null_key_ratio": (float, "share of records with a null key (0..1)"),
    "header_ratio": (float, "share of records with headers (0..1)"),
    "codecs": (_names, "comma-separated codecs batches use in turn: none,gzip,snappy,lz4,zstd"),
    "transactional_ratio": (float, "share of batches written in transactions (0..1)"),
    "abort_ratio": (float, "share of transactions that abort (0..1)"),
    "idempotent_ratio": (float, "share of other batches written by idempotent producers (0..1)"),
    "log_append_time": (bool, "LogAppendTime batches instead of CreateTime"),
    "span_ms": (int, "time the records span, ms (≥ 0)"),
    "start_ms": (int, "timestamp of the first record, epoch ms"),
    "segment_bytes": (int, "roll segments at this size (≥ 1024)"),
}


def run(args: argparse.Namespace) -> int:
    from segment_io.generate import generate_log_dir
    from segment_io.generate_spec import TopicSpec, default_specs, scaled, spec_problems
    from segment_io.storage import open_storage

    overrides = {name: getattr(args, name) for name in _SPEC_FLAGS if getattr(args, name) is not None}
    # Without --topics the flags change the sample set; with it they shape the named topics.
    if args.topics is None:
        specs = [scaled(spec, **overrides) for spec in default_specs()]
    else:
        specs = [TopicSpec(name.strip(), **overrides) for name in args.topics.split(",")]
    problems = sorted({problem for spec in specs for problem in spec_problems(spec)})
    if problems:
        raise ConfigError("generate: " + "; ".join(problems))
    storage, path = open_storage(args.dst)
    if storage.list(path):
        raise DestinationNotEmpty(f"destination {args.dst} exists and is not empty")
    try:
        ends = generate_log_dir(storage, path, specs, seed=args.seed)
    except BaseException:
        storage.remove(path)  # it was absent or empty: leave it so, and a retry can run
        raise
    for tp, leo in sorted(ends.items()):
        print(f"{tp}: log end offset {leo}")
    return ExitCode.OK
