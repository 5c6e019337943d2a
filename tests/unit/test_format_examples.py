"""The spec's worked examples decode and encode to the exact bytes."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from segment_io.format.batch import build_v2_batch, last_sequence, parse_v2_header
from segment_io.format.constants import CONTROL_MASK, TRANSACTIONAL_MASK
from segment_io.format.record_columns import RecordColumns
from segment_io.format.records import encode_records
from segment_io.segment.framing import frame_records
from segment_io.segment.scan import scan_buffer
from segment_io.segment.sections import read_sections

pytestmark = pytest.mark.unit

WORKED = bytes.fromhex(
    "0000000000000064"
    "00000049"
    "00000000"
    "02"
    "4109046f"
    "0000"
    "00000001"
    "0000018bcfe56800"
    "0000018bcfe56805"
    "ffffffffffffffff"
    "ffff"
    "ffffffff"
    "00000002"
    "14000000046b3104763100"
    "18000a02046b320102026802"
    "78"
)
COMMIT = bytes.fromhex(
    "0000000000000066"
    "00000042"
    "00000000"
    "02"
    "f9ea84c8"
    "0030"
    "00000000"
    "0000018bcfe5680a"
    "0000018bcfe5680a"
    "000000000000002a"
    "0003"
    "ffffffff"
    "00000001"
    "2000000008000000010c00000000000700"
)


def _deep(buf: bytes) -> list[dict]:
    arr = np.frombuffer(buf, dtype=np.uint8)
    scan = scan_buffer("mem.log", 0, arr)
    framed = frame_records(
        "mem.log", scan.table, read_sections("mem.log", arr, scan.table, np.arange(len(scan.table)))
    )
    from segment_io.segment.arrow import framed_to_arrow

    return framed_to_arrow(framed, scan.table, "t", 0, 0).to_pylist()


def test_worked_example_decodes_exactly() -> None:
    h = parse_v2_header(WORKED)
    assert (h.base_offset, h.batch_length, h.size, h.crc) == (100, 73, 85, 0x4109046F)
    assert (h.last_offset, h.base_timestamp, h.max_timestamp, h.records_count) == (
        101,
        1700000000000,
        1700000000005,
        2,
    )
    rows = _deep(WORKED)
    assert [(r["offset"], r["timestamp"], r["key"], r["value"]) for r in rows] == [
        (100, 1700000000000, b"k1", b"v1"),
        (101, 1700000000005, b"k2", None),
    ]
    assert rows[0]["headers"] == [] and rows[1]["headers"] == [{"key": "h", "value": b"x"}]


def test_worked_example_encodes_exactly() -> None:
    cols = RecordColumns.from_records([(0, 0, b"k1", b"v1", []), (1, 5, b"k2", None, [("h", b"x")])])
    built = build_v2_batch(
        base_offset=100,
        records=cols.encode(),
        records_count=2,
        last_offset_delta=1,
        base_timestamp=1700000000000,
        max_timestamp=1700000000005,
        attributes=0,
        partition_leader_epoch=0,
    )
    assert built == WORKED


def test_commit_marker_example() -> None:
    cols = RecordColumns.from_records([(0, 0, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 7), [])])
    built = build_v2_batch(
        base_offset=102,
        records=cols.encode(),
        records_count=1,
        last_offset_delta=0,
        base_timestamp=1700000000010,
        max_timestamp=1700000000010,
        attributes=TRANSACTIONAL_MASK | CONTROL_MASK,
        partition_leader_epoch=0,
        producer_id=42,
        producer_epoch=3,
        base_sequence=-1,
    )
    assert built == COMMIT
    row = _deep(COMMIT)[0]
    assert row["is_control"] and row["is_transactional"] and row["offset"] == 102
    assert row["key"] == bytes.fromhex("00000001") and row["producer_id"] == 42


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (-2, "03"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (300, "d804"),
        (-300, "d704"),
    ],
)
def test_varint_examples(value: int, encoded: str) -> None:
    # An empty-key record's timestamp delta is the first varint after the attributes byte.
    one = np.array([0], dtype=np.int64)
    empty = np.zeros(0, dtype=np.uint8)
    out = encode_records(
        one,
        np.array([value], dtype=np.int64),
        np.zeros(2, np.int64),
        empty,
        np.array([True]),
        np.zeros(2, np.int64),
        empty,
        np.array([True]),
        np.zeros(2, np.int64),
        np.zeros(1, np.int64),
        empty,
        np.zeros(1, np.int64),
        empty,
        np.zeros(0, np.bool_),
    )
    assert out[2 : 2 + len(encoded) // 2].tobytes().hex() == encoded


def test_sequence_wraps_like_kafka() -> None:
    assert last_sequence(-1, 5) == -1
    assert last_sequence(10, 5) == 15
    assert last_sequence(2**31 - 3, 5) == 2
