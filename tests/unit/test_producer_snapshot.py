"""Producer snapshots (segment_io.producer_snapshot): Kafka's file format both ways, a damaged file
refused, and the producer state carried over batch headers one rule per test."""

from __future__ import annotations

import numpy as np
import pytest

from segment_io.errors import CorruptCheckpoint
from segment_io.format.constants import ControlType
from segment_io.producer_snapshot import (
    ProducerEntry,
    producer_batches,
    read_snapshot,
    replay,
    write_snapshot,
)
from tests.scanned import data, marker, segment, txn

pytestmark = pytest.mark.unit

ENTRIES = [ProducerEntry(7, 2, 41, 1000, 9, 1_700_000_000_000, 3, 990), ProducerEntry(3, 0)]


def test_a_snapshot_reads_back_as_written() -> None:
    data = write_snapshot(ENTRIES)
    assert data[:2] == b"\x00\x01" and len(data) == 2 + 4 + 4 + 2 * 46
    assert read_snapshot(data, "x.snapshot") == {e.producer_id: e for e in ENTRIES}


@pytest.mark.parametrize("damage", ["crc", "version", "short"])
def test_a_damaged_snapshot_is_refused(damage: str) -> None:
    data = bytearray(write_snapshot(ENTRIES))
    if damage == "crc":
        data[20] ^= 1
    elif damage == "version":
        data[1] = 2
    else:
        del data[-3:]
    with pytest.raises(CorruptCheckpoint):
        read_snapshot(bytes(data), "x.snapshot")


def replayed(
    *batches: object, state: dict[int, ProducerEntry] | None = None, epochs: list[int] | None = None
):  # type: ignore[no-untyped-def]
    table = segment(0, 0, *batches).table  # type: ignore[arg-type]
    coordinator = np.array(epochs if epochs is not None else [-1] * len(table), dtype=np.int64)
    return replay(state or {}, producer_batches([table], [np.arange(len(table))], [coordinator]))


def test_a_data_batch_becomes_its_producers_last() -> None:
    out = replayed(data(0, 4, pid=5, epoch=1, ts=10), data(5, 6, pid=5, epoch=2, ts=20))
    assert out[5] == ProducerEntry(5, 2, last_sequence=1, last_offset=6, offset_delta=1, timestamp=20)


def test_a_marker_closes_the_transaction_and_records_the_coordinator_epoch() -> None:
    out = replayed(txn(0, 3, pid=5, ts=10), marker(4, 5, ControlType.COMMIT, ts=30), epochs=[-1, 7])
    assert out[5].txn_first_offset == -1 and out[5].coordinator_epoch == 7
    assert (out[5].last_offset, out[5].timestamp) == (3, 30)  # the marker is no data batch


def test_transactional_data_after_the_last_marker_is_open_from_its_first_batch() -> None:
    out = replayed(txn(0, 1, pid=5), marker(2, 5, ControlType.ABORT), txn(3, 4, pid=5), txn(5, 6, pid=5))
    assert out[5].txn_first_offset == 3


def test_a_snapshots_open_transaction_stays_open_until_a_marker() -> None:
    state = {5: ProducerEntry(5, 0, txn_first_offset=1)}
    assert replayed(txn(10, 12, pid=5), state=state)[5].txn_first_offset == 1
    assert replayed(marker(13, 5, ControlType.COMMIT), state=state)[5].txn_first_offset == -1
    assert replayed(data(0, 0, pid=9), state=state)[5] == state[5]  # another producer's batch


def test_entries_are_written_in_the_order_of_the_brokers_map() -> None:
    # A 16-bucket table: id 16 lies in bucket 0, ids 1 and 33 in bucket 1 in the order they came.
    data = write_snapshot([ProducerEntry(33, 0), ProducerEntry(1, 0), ProducerEntry(16, 0)])
    assert list(read_snapshot(data, "x.snapshot")) == [16, 33, 1]


def test_new_producers_join_the_state_in_the_order_of_their_first_batch() -> None:
    out = replayed(data(0, 4, pid=33), data(5, 6, pid=1), data(7, 8, pid=33), state={})
    assert list(out) == [33, 1]
    snapshot = write_snapshot(out.values())
    assert list(read_snapshot(snapshot, "x.snapshot")) == [33, 1]
