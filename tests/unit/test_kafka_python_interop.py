"""kafka-python's `kafka.record` codec reads every batch we write, and we read every batch it
writes, record for record, for every codec, transactional, control, headers and null fields."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from segment_io.format.constants import CONTROL_MASK, TRANSACTIONAL_MASK, Codec
from segment_io.segment.arrow import framed_to_arrow
from segment_io.segment.framing import frame_records
from segment_io.segment.scan import scan_buffer, verify_crcs
from segment_io.segment.sections import Arena, read_sections
from tests.helpers import v2_batch

pytestmark = pytest.mark.unit

CODECS = list(Codec)
TS = 1_700_000_000_000


def read_ours(buf: bytes, arena: Arena | None = None) -> list[dict]:
    arr = np.frombuffer(buf, dtype=np.uint8)
    scan = scan_buffer("mem.log", 0, arr)
    assert scan.tail is None
    verify_crcs("mem.log", arr, scan.table)
    index = np.arange(len(scan.table))
    framed = frame_records("mem.log", scan.table, read_sections("mem.log", arr, scan.table, index, arena))
    return framed_to_arrow(framed, scan.table, "t", 0, 0).to_pylist()


def read_theirs(buf: bytes) -> list[tuple]:
    out = []
    records = MemoryRecords(buf)
    while records.has_next():
        batch = records.next_batch()
        if isinstance(batch, DefaultRecordBatch):
            assert batch.validate_crc()
        for r in batch:
            headers = [(k, v) for k, v in r.headers] if hasattr(r, "headers") and r.headers else []
            out.append((r.offset, r.timestamp, r.key, r.value, headers))
    return out


SAMPLE = [
    (0, TS, b"k1", b"v1", []),
    (1, TS + 5, b"k2", None, [("h", b"x"), ("n", None)]),
    (2, TS - 3, None, b"no key", []),
    (3, TS + 9, b"", b"", [("", b"")]),
    (7, TS + 2, b"big", b"compressible " * 300, [("trace", b"abc")]),
]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("transactional", [False, True])
def test_kafka_python_reads_what_we_write(codec: Codec, transactional: bool) -> None:
    attrs = TRANSACTIONAL_MASK if transactional else 0
    pid = 77 if transactional else -1
    data = v2_batch(
        500, SAMPLE, codec=codec, attributes=attrs, producer_id=pid, producer_epoch=2, base_sequence=9
    )
    data += v2_batch(504, [(0, TS + 20, b"k", b"v" * 3000, [])], codec=codec)
    theirs = read_theirs(data)
    assert theirs == [(500 + o, t, k, v, h) for o, t, k, v, h in SAMPLE] + [
        (504, TS + 20, b"k", b"v" * 3000, [])
    ]
    batch = MemoryRecords(data).next_batch()
    assert batch.is_transactional == transactional
    assert batch.compression_type == int(codec)
    assert batch.producer_id == pid


def test_kafka_python_reads_our_control_batch() -> None:
    import struct

    marker = v2_batch(
        9,
        [(0, TS, struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 5), [])],
        attributes=TRANSACTIONAL_MASK | CONTROL_MASK,
        producer_id=3,
        producer_epoch=1,
    )
    batch = MemoryRecords(marker).next_batch()
    assert batch.is_control_batch and batch.validate_crc()
    ours = read_ours(marker)
    assert ours[0]["is_control"] and ours[0]["key"] == b"\x00\x00\x00\x00"


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_we_read_what_kafka_python_writes(codec: Codec) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=True,
        producer_id=5,
        producer_epoch=1,
        base_sequence=100,
        batch_size=1 << 20,
    )
    for offset, ts, key, value, headers in SAMPLE:
        builder.append(offset, timestamp=ts, key=key, value=value, headers=headers)
    data = bytes(builder.build())
    rows = read_ours(data)
    assert [(r["offset"], r["timestamp"], r["key"], r["value"]) for r in rows] == [s[:4] for s in SAMPLE]
    assert [[(h["key"], h["value"]) for h in r["headers"]] for r in rows] == [s[4] for s in SAMPLE]
    assert {r["producer_id"] for r in rows} == {5} and all(r["is_transactional"] for r in rows)
    assert {r["codec"] for r in rows} == {codec.name.lower()}


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_a_reused_arena_that_has_to_grow_reads_the_same_records(codec: Codec) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 22,
    )
    for i in range(40):  # ~100x compressible: far past the arena's first size estimate
        builder.append(i, timestamp=TS + i, key=b"k%d" % i, value=b"v" * 20_000, headers=[])
    data = bytes(builder.build()) + v2_batch(40, SAMPLE, codec=Codec.NONE) + v2_batch(47, SAMPLE, codec=codec)
    expected = read_ours(data)
    arena = Arena()
    arena.ratio = 1.0
    assert read_ours(data, arena) == expected
    assert read_ours(data, arena) == expected
    # Uncompressed batches are framed where they lie; only decompressed data goes to the arena.
    assert len(arena.buf) >= (40 * 20_000 if codec != Codec.NONE else 0)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize(
    "codec", [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4], ids=lambda c: c.name.lower()
)
def test_we_read_kafka_python_legacy_batches(magic: int, codec: Codec) -> None:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 20)
    items = [(0, TS, b"a", b"1"), (1, TS + 1, b"b", None), (2, TS + 2, None, b"3")]
    # As a broker stores them: magic 0 inner offsets are absolute, magic 1 inner offsets are
    # relative and the wrapper carries the absolute offset of the last inner message.
    base = 1000
    for offset, ts, key, value in items:
        inner = offset if magic == 1 and codec != Codec.NONE else base + offset
        builder.append(inner, timestamp=ts if magic else None, key=key, value=value)
    data = bytearray(builder.build())
    if codec != Codec.NONE:
        data[0:8] = (base + 2).to_bytes(8, "big")
    rows = read_ours(bytes(data))
    expect_ts = [(TS + i if magic else -1) for i in range(3)]
    assert [(r["offset"], r["timestamp"], r["key"], r["value"]) for r in rows] == [
        (base + o, expect_ts[o], k, v) for o, _, k, v in items
    ]
    assert {r["magic"] for r in rows} == {magic}
    theirs = [(o, k, v) for o, _, k, v, _ in read_theirs(bytes(data))]
    assert theirs == [(r["offset"], r["key"], r["value"]) for r in rows]


record_strategy = st.tuples(
    st.integers(-(2**40), 2**40),
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=300)),
    st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=16))), max_size=3),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=st.lists(record_strategy, min_size=1, max_size=30),
    gaps=st.lists(st.integers(1, 1000), min_size=30, max_size=30),
    codec=st.sampled_from(CODECS),
    base=st.integers(0, 2**40),
)
def test_random_batches_round_trip(recs: list, gaps: list, codec: Codec, base: int) -> None:
    deltas = np.cumsum([0, *gaps[: len(recs) - 1]]).tolist()
    records = [(d, TS + ts, k, v, h) for d, (ts, k, v, h) in zip(deltas, recs, strict=True)]
    data = v2_batch(base, records, codec=codec)
    expected = [(base + d, t, k, v, [(hk, hv) for hk, hv in h]) for d, t, k, v, h in records]
    assert read_theirs(data) == expected
    ours = [
        (r["offset"], r["timestamp"], r["key"], r["value"], [(h["key"], h["value"]) for h in r["headers"]])
        for r in read_ours(data)
    ]
    assert ours == expected
