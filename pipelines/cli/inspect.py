"""`segpipe inspect`: partitions, segments, offsets, times and codecs, and whether all is valid."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from pipelines.cli import console
from pipelines.cli.source_args import add_kafka_tier, kafka_tier_of
from pipelines.clock import iso, time_argument
from segment_io.errors import SegmentError
from segment_io.exit_codes import ExitCode
from segment_io.layout import LOG_START_CHECKPOINT, list_log_dir, segment_file_name


def add_parser(sub: Any) -> None:
    p = sub.add_parser("inspect", help="list and validate partitions, segments and indexes")
    p.add_argument("path", help="log directory, partition directory, segment file, or fsspec URL")
    p.add_argument("--remote", metavar="REMOTE_URL", help="the log's remote tier: the two read as one log")
    add_kafka_tier(p, "PATH")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.add_argument("--no-crc", action="store_true", help="skip CRC verification")
    p.add_argument(
        "--at",
        metavar="TIME",
        type=time_argument,
        help="instead: per partition, the offset Kafka's ListOffsets returns for TIME (epoch ms or ISO-8601)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from segment_io.partition import inspect_log_dir
    from segment_io.remote.view import log_location

    log = log_location(args.path, args.remote, kafka_tier_of(args, verify=True), warn=console.warn)
    storage, path = log.storage, log.path
    if args.at is not None:
        return _offsets_at(storage, path, args)
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
                    "stray_files": list(r.stray_files),
                    "errors": [_error_doc(e) for e in r.errors],
                    "segments": [asdict(s) for s in r.segments],
                }
                for r in reports
            ],
        }
        print(json.dumps(doc, indent=2))
        return ExitCode.OK if ok else ExitCode.INVALID
    if not reports:
        print(f"{args.path}: no partition directories (an empty log directory)")
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
        for name in r.stray_files:
            print(f"  not part of the log: {name} (clean carries it over unread)")
        for s in r.segments:
            span = "empty" if s.first_offset is None else f"offsets {s.first_offset}..{s.last_offset}"
            times = (
                "" if s.min_timestamp is None else f" time {_when(s.min_timestamp)}..{_when(s.max_timestamp)}"
            )
            codecs = ",".join(s.codecs) or "-"
            print(
                f"  {segment_file_name(s.base_offset, 'log')} {s.size:>10} B {s.batches:>6} batches "
                f"{s.records:>8} records "
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
    return ExitCode.OK if ok else ExitCode.INVALID


def _offsets_at(storage: Any, path: str, args: argparse.Namespace) -> int:
    """Per partition, what a consumer seeking to the time `args.at` is given (ListOffsets)."""
    from segment_io.segment.list_offsets import offset_for_time

    listing = list_log_dir(storage, path, segment_file=True)
    starts = listing.checkpoints.get(LOG_START_CHECKPOINT, {})
    answers = [
        (part.tp, offset_for_time(storage, part.segments, args.at, starts.get(part.tp, 0)))
        for part in listing.partitions
    ]
    if args.json:
        doc = {
            "path": args.path,
            "at": args.at,
            "partitions": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "offset": None if a is None else a.offset,
                    "timestamp": None if a is None else a.timestamp,
                }
                for tp, a in answers
            ],
        }
        print(json.dumps(doc, indent=2))
        return ExitCode.OK
    for tp, answer in answers:
        if answer is None:
            print(f"{tp}: no record at or after {_when(args.at)} (ListOffsets answers offset -1)")
        else:
            print(f"{tp}: offset {answer.offset}, timestamp {_when(answer.timestamp)}")
    return ExitCode.OK


def _when(ms: int | None) -> str:
    return "-" if ms is None else f"{ms} ({iso(ms)})"


def _error_doc(e: SegmentError) -> dict[str, Any]:
    return {"type": type(e).__name__, "path": e.path, "position": e.position, "detail": e.detail}
