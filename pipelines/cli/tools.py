"""The Spark-free commands: `inspect`, `dump` (like kafka-dump-log) and `generate`."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from pipelines.errors import EXIT_INVALID, EXIT_OK, DestinationNotEmpty
from segment_io.errors import SegmentError


def _b64(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode("ascii")


# ---------------------------------------------------------------------------------------------
# inspect


def run_inspect(args: argparse.Namespace) -> int:
    from segment_io.partition import inspect_log_dir
    from segment_io.storage import open_storage

    storage, path = open_storage(args.path)
    listing, reports = inspect_log_dir(storage, path, verify_crc=not args.no_crc)
    ok = all(r.ok for r in reports)
    if args.json:
        doc = {
            "path": args.path,
            "valid": ok,
            "ignored": [{"name": n, "reason": r} for n, r in listing.ignored],
            "checkpoints": {
                name: {f"{tp.topic}-{tp.partition}": off for tp, off in entries.items()}
                for name, entries in listing.checkpoints.items()
            },
            "partitions": [
                {
                    "topic": r.topic,
                    "partition": r.partition,
                    "valid": r.ok,
                    "ignored": [{"name": n, "reason": why} for n, why in r.ignored],
                    "errors": [_error_doc(e) for e in r.errors],
                    "segments": [asdict(s) for s in r.segments],
                }
                for r in reports
            ],
        }
        print(json.dumps(doc, indent=2))
        return EXIT_OK if ok else EXIT_INVALID
    for name, reason in listing.ignored:
        print(f"ignored {name}: {reason}")
    for r in reports:
        size = sum(s.size for s in r.segments)
        records = sum(s.records for s in r.segments)
        status = "OK" if r.ok else "INVALID"
        head = f"{r.topic}-{r.partition}: {len(r.segments)} segments, {size} bytes, {records} records"
        print(f"{head}  [{status}]")
        for name, reason in r.ignored:
            print(f"  ignored {name}: {reason}")
        for s in r.segments:
            span = "empty" if s.first_offset is None else f"offsets {s.first_offset}..{s.last_offset}"
            times = "" if s.min_timestamp is None else f" time {s.min_timestamp}..{s.max_timestamp}"
            codecs = ",".join(s.codecs) or "-"
            print(
                f"  {s.base_offset:020d}.log {s.size:>10} B {s.batches:>6} batches {s.records:>8} records "
                f"{span}{times} codecs={codecs} magic={','.join(map(str, s.magics)) or '-'}"
                + (f" aborted_txns={s.aborted_txns}" if s.aborted_txns else "")
            )
            for w in s.warnings:
                print(f"    warning: {w}")
            for message in s.errors:
                print(f"    error: {message}")
        for err in r.errors:
            if not any(str(err) in s.errors for s in r.segments):
                print(f"  error: {err}")
    print("valid" if ok else "INVALID: see errors above")
    return EXIT_OK if ok else EXIT_INVALID


def _error_doc(e: SegmentError) -> dict[str, Any]:
    return {"type": type(e).__name__, "path": e.path, "position": e.position, "detail": e.detail}


# ---------------------------------------------------------------------------------------------
# dump


def _record_docs(rb: Any, decode_internal: bool) -> Iterator[dict[str, Any]]:
    from segment_io.format.constants import ControlType
    from segment_io.internal_topics import decode_key, decode_value

    for row in rb.to_pylist():
        key, value = row["key"], row["value"]
        doc = {
            "topic": row["topic"],
            "partition": row["partition"],
            "offset": row["offset"],
            "timestamp": row["timestamp"],
            "timestamp_type": row["timestamp_type"],
            "key": _b64(key),
            "value": _b64(value),
            "headers": [{"key": h["key"], "value": _b64(h["value"])} for h in row["headers"]],
            "producer_id": row["producer_id"],
            "producer_epoch": row["producer_epoch"],
            "base_sequence": row["base_sequence"],
            "is_transactional": row["is_transactional"],
            "is_control": row["is_control"],
            "batch_base_offset": row["batch_base_offset"],
            "batch_last_offset": row["batch_last_offset"],
            "magic": row["magic"],
            "codec": row["codec"],
            "partition_leader_epoch": row["partition_leader_epoch"],
            "delete_horizon_ms": row["delete_horizon_ms"],
        }
        if row["is_control"] and key is not None and len(key) >= 4:
            ctype = int.from_bytes(key[2:4], "big", signed=True)
            doc["control_type"] = ControlType.label_of(ctype)
        if decode_internal:
            doc["decoded_key"] = decode_key(row["topic"], key)
            doc["decoded_value"] = decode_value(row["topic"], key, value)
        yield doc


def run_dump(args: argparse.Namespace) -> int:
    from segment_io.layout import list_log_dir
    from segment_io.segment.reader import SegmentReader
    from segment_io.storage import open_storage

    storage, path = open_storage(args.path)
    listing = list_log_dir(storage, path)
    printed = 0
    out = sys.stdout
    for part in listing.partitions:
        if args.topic and part.tp.topic != args.topic:
            continue
        if args.partition is not None and part.tp.partition != args.partition:
            continue
        for seg in part.segments:
            reader = SegmentReader(storage, seg.log.path, seg.base_offset)
            scan = reader.scan()
            if not args.no_crc:
                reader.verify_crcs()
            if scan.tail is not None:
                print(f"warning: {scan.tail}", file=sys.stderr)
            if args.batches:
                t = scan.table.to_arrow().to_pylist()
                for row in t:
                    row.update(topic=part.tp.topic, partition=part.tp.partition, segment=seg.base_offset)
                    out.write(json.dumps(row) + "\n")
                    printed += 1
                    if args.limit is not None and printed >= args.limit:
                        return EXIT_OK
                continue
            for rb in reader.record_batches(part.tp.topic, part.tp.partition):
                for doc in _record_docs(rb, args.decode_internal):
                    out.write(json.dumps(doc) + "\n")
                    printed += 1
                    if args.limit is not None and printed >= args.limit:
                        return EXIT_OK
    return EXIT_OK


# ---------------------------------------------------------------------------------------------
# generate


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


def run_generate(args: argparse.Namespace) -> int:
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


# ---------------------------------------------------------------------------------------------


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("inspect", help="list and validate partitions, segments and indexes")
    p.add_argument("path", help="log directory, partition directory, or fsspec URL")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.add_argument("--no-crc", action="store_true", help="skip CRC verification")
    p.set_defaults(func=run_inspect)

    p = sub.add_parser("dump", help="records (or batches) as JSON lines, like kafka-dump-log")
    p.add_argument("path")
    p.add_argument("--batches", action="store_true", help="one line per batch instead of per record")
    p.add_argument(
        "--decode-internal", action="store_true", help="decode __consumer_offsets/__transaction_state"
    )
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)
    p.add_argument("--limit", type=int, help="stop after this many lines")
    p.add_argument("--no-crc", action="store_true", help="skip CRC verification")
    p.set_defaults(func=run_dump)

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
    p.set_defaults(func=run_generate)
