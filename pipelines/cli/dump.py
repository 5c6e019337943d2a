"""`segpipe dump`: records (or batches) as JSON lines, like `kafka-dump-log --files`."""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

from pipelines.cli import console
from pipelines.cli.source_args import add_kafka_tier, kafka_tier_of
from pipelines.clock import time_argument
from pipelines.errors import ConfigError
from segment_io.exit_codes import ExitCode
from segment_io.format.constants import CODEC_LABELS, TIMESTAMP_TYPE_LABELS, ControlType

Decode = Callable[[bytes | None], str | None]
DECODERS: dict[str, Decode] = {
    "base64": lambda b: None if b is None else base64.b64encode(b).decode("ascii"),
    "hex": lambda b: None if b is None else b.hex(),
    "utf8": lambda b: None if b is None else b.decode("utf-8", errors="backslashreplace"),
}


def add_parser(sub: Any) -> None:
    p = sub.add_parser("dump", help="records (or batches) as JSON lines, like kafka-dump-log")
    p.add_argument("path", help="log directory, partition directory, segment file, or fsspec URL")
    p.add_argument("--remote", metavar="REMOTE_URL", help="the log's remote tier: the two read as one log")
    add_kafka_tier(p, "PATH")
    p.add_argument("--batches", action="store_true", help="one line per batch instead of per record")
    p.add_argument(
        "--decode-internal", action="store_true", help="decode __consumer_offsets/__transaction_state"
    )
    p.add_argument(
        "--decode", choices=sorted(DECODERS), default="base64", help="keys, values and header values"
    )
    p.add_argument("--topic", help="this topic only")
    p.add_argument("--partition", type=int, help="this partition number only")
    p.add_argument("--from-offset", type=int, help="records (batches: ending) at or after this offset")
    p.add_argument("--to-offset", type=int, help="records (batches: starting) at or before this offset")
    p.add_argument(
        "--from-time", type=time_argument, help="records at or after this time (epoch ms or ISO-8601)"
    )
    p.add_argument(
        "--to-time", type=time_argument, help="records at or before this time (epoch ms or ISO-8601)"
    )
    p.add_argument("--limit", type=int, help="stop after this many lines (0: none)")
    p.add_argument("--no-crc", action="store_true", help="skip CRC verification")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from segment_io.layout import list_log_dir
    from segment_io.remote.view import log_location

    for low, high, what in (
        (args.from_offset, args.to_offset, "offset"),
        (args.from_time, args.to_time, "time"),
    ):
        if low is not None and high is not None and low > high:
            raise ConfigError(f"--from-{what} {low} is above --to-{what} {high}: the range holds nothing")
    if args.limit is not None and args.limit < 0:
        raise ConfigError(f"--limit {args.limit}: expected a number of lines, 0 or more")
    log = log_location(args.path, args.remote, kafka_tier_of(args), warn=console.warn)
    storage, path = log.storage, log.path
    listing = list_log_dir(storage, path, segment_file=True)
    chosen = [
        part
        for part in listing.partitions
        if (not args.topic or part.tp.topic == args.topic)
        and (args.partition is None or part.tp.partition == args.partition)
    ]
    if listing.partitions and not chosen:  # a misspelt name would dump nothing, as if the log were empty
        there = ", ".join(str(p.tp) for p in listing.partitions)
        raise ConfigError(
            f"no partition of {args.path} matches --topic/--partition (partitions there: {there})"
        )
    lines = _lines(storage, chosen, args)
    for line in lines if args.limit is None else itertools.islice(lines, args.limit):
        sys.stdout.write(line + "\n")
    return ExitCode.OK


def _lines(storage: Any, partitions: list[Any], args: argparse.Namespace) -> Iterator[str]:
    from segment_io.segment.ranges import RecordRange, segment_window
    from segment_io.segment.reader import SegmentReader

    want = RecordRange(args.from_offset, args.to_offset, args.from_time, args.to_time)
    warned = False
    for part in partitions:
        for i, seg in enumerate(part.segments):
            window = None
            if not args.batches:  # records: only the bytes the indexes show can hold the range
                next_base = part.segments[i + 1].base_offset if i + 1 < len(part.segments) else None
                window = segment_window(storage, seg, next_base, want)
                if window is None:
                    continue
                if window.note and not warned:
                    print(
                        f"segpipe: warning: reading whole segments, an index is unusable ({window.note})",
                        file=sys.stderr,
                    )
                    warned = True
            reader = SegmentReader(storage, seg.log.path, seg.base_offset, window)
            scan = reader.scan()
            if not args.no_crc:
                reader.verify_crcs()
            if scan.tail is not None:
                print(f"segpipe: warning: {scan.tail}", file=sys.stderr)
            if args.batches:
                yield from _batch_lines(reader, part.tp, seg.base_offset, args)
                continue
            for rb in reader.record_batches(part.tp.topic, part.tp.partition, want=want):
                yield from (json.dumps(doc) for doc in _record_docs(rb, args))


def _batch_lines(reader: Any, tp: Any, segment: int, args: argparse.Namespace) -> Iterator[str]:

    table = reader.resolve_wrappers()
    derived = {
        "codec": [CODEC_LABELS[c] for c in table.codec.tolist()],
        "timestamp_type": [TIMESTAMP_TYPE_LABELS[t + 1] for t in table.timestamp_type.tolist()],
        "is_transactional": table.is_transactional.tolist(),
        "is_control": table.is_control.tolist(),
        "has_delete_horizon": table.has_delete_horizon.tolist(),
    }
    for i, row in enumerate(table.to_arrow().to_pylist()):
        if args.from_offset is not None and row["last_offset"] < args.from_offset:
            continue
        if args.to_offset is not None and row["base_offset"] > args.to_offset:
            continue
        if args.from_time is not None and row["max_timestamp"] < args.from_time:
            continue
        first_time = row["max_timestamp"] if derived["has_delete_horizon"][i] else row["base_timestamp"]
        if args.to_time is not None and first_time > args.to_time:
            continue
        row.update({name: values[i] for name, values in derived.items()})
        row.update(topic=tp.topic, partition=tp.partition, segment=segment)
        yield json.dumps(row)


def _record_docs(rb: Any, args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    from segment_io.internal_topics import decode_key, decode_value

    encode = DECODERS[args.decode]
    for row in rb.to_pylist():
        key, value = row["key"], row["value"]
        doc = {
            "topic": row["topic"],
            "partition": row["partition"],
            "offset": row["offset"],
            "timestamp": row["timestamp"],
            "timestamp_type": row["timestamp_type"],
            "key": encode(key),
            "value": encode(value),
            "headers": [{"key": h["key"], "value": encode(h["value"])} for h in row["headers"]],
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
            doc["control_type"] = ControlType.label_of(int.from_bytes(key[2:4], "big", signed=True))
        if args.decode_internal:
            doc["decoded_key"] = decode_key(row["topic"], key)
            doc["decoded_value"] = decode_value(row["topic"], key, value)
        yield doc
