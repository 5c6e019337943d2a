"""`segpipe generate` output: valid, every feature present, indexes identical to a rebuild, and
readable batch for batch by kafka-python."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords

from segment_io.generate import generate_log_dir
from segment_io.generate_spec import TopicSpec
from segment_io.index import IndexBuilder, build_indexes, read_txn_index
from segment_io.layout import list_log_dir
from segment_io.partition import inspect_log_dir, scan_partition
from segment_io.segment.reader import SegmentReader
from segment_io.storage import Storage, open_storage

pytestmark = pytest.mark.unit


def all_records(storage: Storage, path: str) -> pa.Table:
    batches = []
    for part in list_log_dir(storage, path).partitions:
        for seg in part.segments:
            reader = SegmentReader(storage, seg.log.path, seg.base_offset)
            batches += list(reader.record_batches(part.tp.topic, part.tp.partition))
    return pa.Table.from_batches(batches)


def test_generated_set_is_valid(sample_dir: Path) -> None:
    storage, path = open_storage(str(sample_dir))
    listing, reports = inspect_log_dir(storage, path)
    assert [f"{r.topic}-{r.partition}" for r in reports] == [
        "clicks-0",
        "legacy-users-0",
        "orders-0",
        "orders-1",
    ]
    assert all(r.ok for r in reports), [r.errors for r in reports]
    assert sum(len(r.segments) for r in reports) >= 10
    assert set(listing.checkpoints) == {"recovery-point-offset-checkpoint", "replication-offset-checkpoint"}


def test_generated_set_exercises_every_feature(sample_dir: Path) -> None:
    storage, path = open_storage(str(sample_dir))
    t = all_records(storage, path)
    assert set(t["codec"].to_pylist()) == {"none", "gzip", "snappy", "lz4", "zstd"}
    assert set(t["magic"].to_pylist()) == {1, 2}
    assert set(t["timestamp_type"].to_pylist()) == {"CreateTime", "LogAppendTime"}
    data = pc.invert(t["is_control"])
    assert pc.sum(pc.and_(data, pc.is_null(t["value"]))).as_py() > 0  # tombstones
    assert pc.sum(pc.is_null(t["key"])).as_py() > 0  # null keys
    assert pc.sum(pc.greater(pc.list_value_length(t["headers"]), 0)).as_py() > 0
    assert pc.sum(t["is_transactional"]).as_py() > 0
    assert pc.sum(pc.greater_equal(t["producer_id"], 0)).as_py() > 0
    control_types = {struct.unpack(">hh", k)[1] for k in t.filter(t["is_control"])["key"].to_pylist()}
    assert control_types == {0, 1}  # ABORT and COMMIT markers
    # an open transaction at the tail: a transactional producer whose last batch is data
    orders = t.filter(pc.and_(pc.equal(t["topic"], "orders"), t["is_transactional"]))
    last_by_pid: dict[int, bool] = {}
    for pid, control in zip(orders["producer_id"].to_pylist(), orders["is_control"].to_pylist(), strict=True):
        last_by_pid[pid] = control
    assert not all(last_by_pid.values())


def test_indexes_are_byte_identical_to_a_rebuild(sample_dir: Path) -> None:
    storage, path = open_storage(str(sample_dir))
    checked = with_entries = 0
    for part in list_log_dir(storage, path).partitions:
        for seg, scan in zip(part.segments, scan_partition(storage, part), strict=True):
            t = scan.table
            index, time_index = build_indexes(
                seg.base_offset, t.position, t.size, t.last_offset, t.max_timestamp
            )
            assert seg.index is not None and seg.timeindex is not None
            assert storage.read(seg.index.path) == index
            assert storage.read(seg.timeindex.path) == time_index
            checked += 1
            with_entries += len(index) > 0
    assert checked >= 10 and with_entries >= checked - 2  # short tail segments may have none


def test_index_rules_by_hand() -> None:
    # Batches of 3000 bytes, interval 4096: an entry is due once more than 4096 bytes precede.
    b = IndexBuilder(base_offset=100)
    for i, ts in enumerate([50, 40, 70, 70, 60]):
        b.append(position=i * 3000, size=3000, last_offset=100 + 2 * i + 1, max_timestamp=ts)
    index, time_index = b.finish()
    entries = [struct.unpack_from(">ii", index, k) for k in range(0, len(index), 8)]
    assert entries == [(5, 6000), (9, 12000)]  # (last offset - base, position) of batches 2 and 4
    times = [struct.unpack_from(">qi", time_index, k) for k in range(0, len(time_index), 12)]
    assert times == [(70, 5)]  # the max so far at batch 2; batch 4 adds nothing larger


def test_txn_index_lists_aborted_transactions_at_their_markers(sample_dir: Path) -> None:
    storage, path = open_storage(str(sample_dir))
    part = next(p for p in list_log_dir(storage, path).partitions if p.tp.topic == "orders")
    aborted = 0
    for seg in part.segments:
        if seg.txnindex is None:
            continue
        rows = [
            r
            for rb in SegmentReader(storage, seg.log.path, seg.base_offset).record_batches("o", 0)
            for r in rb.to_pylist()
        ]
        markers = {r["offset"]: r for r in rows if r["is_control"]}
        for txn in read_txn_index(storage.read(seg.txnindex.path)):
            marker = markers[txn.last_offset]
            assert struct.unpack(">hh", marker["key"])[1] == 0 and marker["producer_id"] == txn.producer_id
            assert txn.first_offset < txn.last_offset
            assert txn.last_stable_offset == txn.last_offset + 1 or txn.last_stable_offset <= txn.last_offset
            aborted += 1
    assert aborted > 0


def test_kafka_python_reads_every_generated_batch(sample_dir: Path) -> None:
    storage, path = open_storage(str(sample_dir))
    for part in list_log_dir(storage, path).partitions:
        for seg in part.segments:
            reader = SegmentReader(storage, seg.log.path, seg.base_offset)
            ours = [
                (r["offset"], r["key"], r["value"])
                for rb in reader.record_batches("t", 0)
                for r in rb.to_pylist()
            ]
            theirs = []
            records = MemoryRecords(storage.read(seg.log.path))
            while records.has_next():
                batch = records.next_batch()
                theirs += [(r.offset, r.key, r.value) for r in batch]
            assert theirs == ours


def test_generate_is_deterministic_and_works_on_memory_urls() -> None:
    spec = [TopicSpec("m", partitions=1, records=300, segment_bytes=8192)]
    outputs = []
    for name in ("a", "b"):
        storage, path = open_storage(f"memory://gen-{name}")
        generate_log_dir(storage, path, spec, seed=3)
        outputs.append({f.name: storage.read(f.path) for f in storage.walk_files(path)})
        _, reports = inspect_log_dir(storage, path)
        assert all(r.ok for r in reports) and len(reports[0].segments) > 2
    assert outputs[0] == outputs[1]


def test_ranged_reads(tmp_path: Path) -> None:
    storage, path = open_storage(str(tmp_path))
    storage.write_atomic(f"{path}/f.bin", bytes(range(100)))
    assert storage.read(f"{path}/f.bin", 10, 20) == bytes(range(10, 20))
    assert np.array_equal(storage.read_array(f"{path}/f.bin")[:5], np.arange(5, dtype=np.uint8))


@settings(max_examples=200, deadline=None)
@given(
    batches=st.lists(
        st.tuples(st.integers(61, 9000), st.integers(1, 40), st.integers(-1, 2_000_000)),
        min_size=1,
        max_size=60,
    ),
    split=st.integers(0, 60),
    interval=st.sampled_from([1, 4096, 20_000]),
)
def test_a_run_of_batches_indexes_as_its_batches_one_by_one(
    batches: list[tuple[int, int, int]], split: int, interval: int
) -> None:
    """IndexBuilder.append_many over consecutive batches (after some appended one by one) leaves
    the entries and state `append` leaves, batch by batch (Kafka's append path)."""
    sizes = np.array([b[0] for b in batches], dtype=np.int64)
    last_offsets = 100 + np.cumsum([b[1] for b in batches])
    timestamps = np.array([b[2] for b in batches], dtype=np.int64)
    positions = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    one_by_one, at_once = IndexBuilder(100, interval), IndexBuilder(100, interval)
    rows = list(
        zip(positions.tolist(), sizes.tolist(), last_offsets.tolist(), timestamps.tolist(), strict=True)
    )
    for row in rows:
        one_by_one.append(*row)
    cut = min(split, len(batches))
    for row in rows[:cut]:
        at_once.append(*row)
    if cut < len(batches):
        at_once.append_many(int(positions[cut]), sizes[cut:], last_offsets[cut:], timestamps[cut:])
    assert at_once == one_by_one
    assert at_once.finish() == one_by_one.finish()
