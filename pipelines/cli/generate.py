"""`segpipe generate`: a realistic synthetic log directory, Kafka's format to the byte."""

from __future__ import annotations

import argparse
from typing import Any

from pipelines.errors import EXIT_OK, DestinationNotEmpty


def add_parser(sub: Any) -> None:
    p = sub.add_parser("generate", help="write a realistic synthetic log directory")
    p.add_argument("dst")
    p.add_argument("--topics", help="comma-separated topic names (default: the sample set)")
    for name, (kind, text) in _SPEC_FLAGS.items():
        flag = "--" + name.replace("_", "-")
        if kind is bool:
            p.add_argument(flag, action="store_const", const=True, help=text)
        else:
            p.add_argument(flag, type=kind, help=text)
    p.add_argument("--seed", type=int, default=7)
    p.set_defaults(func=run)


def _pair(text: str) -> tuple[int, int]:
    low, _, high = text.partition(",")
    if not (low.strip().isdigit() and high.strip().isdigit()):
        raise argparse.ArgumentTypeError(f"expected MIN,MAX, got {text!r}")
    return int(low), int(high)


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split(","))


# `segpipe generate` flags: the TopicSpec field each sets, its type and its help.
_SPEC_FLAGS: dict[str, tuple[Any, str | None]] = {
    "partitions": (int, None),
    "records": (int, "records per partition"),
    "keys": (int, "distinct keys per partition"),
    "key_skew": (float, None),
    "value_min": (int, None),
    "value_max": (int, None),
    "records_per_batch": (_pair, "MIN,MAX"),
    "tombstone_ratio": (float, None),
    "null_key_ratio": (float, None),
    "header_ratio": (float, None),
    "codecs": (_names, "comma-separated: none,gzip,snappy,lz4,zstd"),
    "transactional_ratio": (float, None),
    "abort_ratio": (float, None),
    "idempotent_ratio": (float, None),
    "log_append_time": (bool, None),
    "span_ms": (int, None),
    "start_ms": (int, None),
    "segment_bytes": (int, None),
}


def run(args: argparse.Namespace) -> int:
    from segment_io.generate import TopicSpec, default_specs, generate_log_dir
    from segment_io.storage import open_storage

    storage, path = open_storage(args.dst)
    if storage.list(path):
        raise DestinationNotEmpty(f"destination {args.dst} exists and is not empty")
    overrides = {name: getattr(args, name) for name in _SPEC_FLAGS if getattr(args, name) is not None}
    if args.topics is None and not overrides:
        specs = default_specs()
    else:
        names = args.topics.split(",") if args.topics else ["topic"]
        specs = [TopicSpec(name, **overrides) for name in names]
    ends = generate_log_dir(storage, path, specs, seed=args.seed)
    for tp, leo in sorted(ends.items()):
        print(f"{tp}: log end offset {leo}")
    return EXIT_OK
