"""Producer state snapshots (`<offset>.snapshot`): what a broker knows of each producer at an
offset, read and written in Kafka's format (docs/log-format.md#producer-snapshots), and that
state carried forward over batch headers as the broker's log loader replays them.

File: version int16 (1), crc uint32, then an int32 count of entries, each: producer id int64,
epoch int16, last sequence int32, last offset int64, offset delta int32, timestamp int64,
coordinator epoch int32, current transaction's first offset int64 (−1: none). The CRC-32C covers
everything after the crc field."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import crc32c
import numpy as np

from segment_io.errors import CorruptCheckpoint
from segment_io.java_hash_map import iteration_order
from segment_io.layout import SNAPSHOT_SUFFIX, segment_file_name
from segment_io.segment.framing import Framed
from segment_io.segment.scan import BatchTable

VERSION = 1
_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
ENTRY = struct.Struct(">qhiqiqiq")  # one producer, in the fields' order above


@dataclass(frozen=True)
class ProducerEntry:
    """One producer as a broker's producer state holds it: its epoch, its last data batch (last
    sequence, last offset, offset delta; offset −1: markers only), the timestamp of its last batch
    or marker, the coordinator epoch of its last marker, and the first offset of its open
    transaction (−1: none)."""

    producer_id: int
    epoch: int
    last_sequence: int = -1
    last_offset: int = -1
    offset_delta: int = 0
    timestamp: int = -1
    coordinator_epoch: int = -1
    txn_first_offset: int = -1


def snapshot_name(offset: int) -> str:
    return segment_file_name(offset, SNAPSHOT_SUFFIX)


def snapshot_offset(name: str) -> int:
    """The offset a snapshot file is named after (`<20-digit offset>.snapshot`)."""
    return int(name.split(".", 1)[0])


def read_snapshot(data: bytes, path: str) -> dict[int, ProducerEntry]:
    """The entries of a snapshot file; a wrong version, CRC or length raises CorruptCheckpoint."""
    if len(data) < _HEAD.size + _COUNT.size:
        raise CorruptCheckpoint(path, 0, "shorter than a snapshot's header")
    version, crc = _HEAD.unpack_from(data, 0)
    if version != VERSION:
        raise CorruptCheckpoint(path, 0, f"unknown producer snapshot version {version}")
    if crc32c.crc32c(data[_HEAD.size :]) != crc:
        raise CorruptCheckpoint(path, 2, "producer snapshot CRC does not match")
    (count,) = _COUNT.unpack_from(data, _HEAD.size)
    start = _HEAD.size + _COUNT.size
    if count < 0 or len(data) != start + count * ENTRY.size:
        raise CorruptCheckpoint(path, _HEAD.size, f"{count} entries do not fill {len(data)} bytes")
    entries = (ProducerEntry(*ENTRY.unpack_from(data, start + i * ENTRY.size)) for i in range(count))
    return {e.producer_id: e for e in entries}


def write_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    """A snapshot file of `entries` (in the order the broker's map took them in), written in the
    order a broker writes its map's: a Java `HashMap` keyed by producer id, grown as it was filled."""
    by_id = {e.producer_id: e for e in entries}
    ordered = [by_id[pid] for pid in iteration_order(by_id)]
    body = _COUNT.pack(len(ordered)) + b"".join(
        ENTRY.pack(
            e.producer_id,
            e.epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.txn_first_offset,
        )
        for e in ordered
    )
    return _HEAD.pack(VERSION, crc32c.crc32c(body)) + body


@dataclass(frozen=True)
class ProducerBatches:
    """The batches of producers (magic 2, producer id ≥ 0) of a log in log order, as columns;
    `coordinator_epoch`: a marker's, −1 for data batches."""

    producer_id: np.ndarray
    epoch: np.ndarray
    base_offset: np.ndarray
    last_offset: np.ndarray
    base_sequence: np.ndarray
    max_timestamp: np.ndarray
    transactional: np.ndarray
    control: np.ndarray
    coordinator_epoch: np.ndarray


def producer_batches(
    tables: Sequence[BatchTable],
    rows: Sequence[np.ndarray],
    coordinator_epochs: Sequence[np.ndarray] | None = None,
) -> ProducerBatches:
    """The producers' batches (magic 2, producer id ≥ 0) among `rows[i]` of each table, in log
    order; `coordinator_epochs[i]`: per batch of table i, a marker's coordinator epoch (−1 elsewhere)."""
    parts: list[tuple[np.ndarray, ...]] = []
    for i, (table, chosen) in enumerate(zip(tables, rows, strict=True)):
        chosen = chosen[(table.magic[chosen] == 2) & (table.producer_id[chosen] >= 0)]
        epochs = np.full(len(table), -1, np.int64) if coordinator_epochs is None else coordinator_epochs[i]
        fields = (
            table.producer_id,
            table.producer_epoch,
            table.base_offset,
            table.last_offset,
            table.base_sequence,
            table.max_timestamp,
            table.is_transactional,
            table.is_control,
            epochs,
        )
        parts.append(tuple(column[chosen] for column in fields))
    columns = [np.concatenate([p[c] for p in parts]) if parts else np.zeros(0, np.int64) for c in range(9)]
    columns[6], columns[7] = columns[6].astype(np.bool_), columns[7].astype(np.bool_)
    return ProducerBatches(*columns)


def coordinator_epochs(framed: Framed) -> np.ndarray:
    """Per framed control record, the coordinator epoch its value carries (version int16, then
    the epoch int32); −1 where the value is too short to hold one."""
    data = framed.sections.data
    start = framed.value_start + 2
    ok = framed.value_len >= 6
    picked = data[np.where(ok, start, 0)[:, None] + np.arange(4)].astype(np.int64)
    value = (picked[:, 0] << 24) | (picked[:, 1] << 16) | (picked[:, 2] << 8) | picked[:, 3]
    return np.where(ok, np.where(value >= 2**31, value - 2**32, value), -1)


def _per_producer(pids: np.ndarray, rows: np.ndarray, last: bool = True) -> dict[int, int]:
    """The last (or first) of `rows` (ascending) of each producer id."""
    if len(rows) == 0:
        return {}
    order = np.lexsort((rows, pids[rows]))
    ordered = pids[rows][order]
    change = ordered[1:] != ordered[:-1]
    picks = np.flatnonzero(np.r_[change, True]) if last else np.flatnonzero(np.r_[True, change])
    return dict(zip(ordered[picks].tolist(), rows[order][picks].tolist(), strict=True))


def replay(state: Mapping[int, ProducerEntry], b: ProducerBatches) -> dict[int, ProducerEntry]:
    """`state` carried over the batches `b`, as the broker's loader replays a log after a snapshot:
    a producer's last batch or marker gives its epoch and timestamp; its last data batch, its last
    sequence and offsets; its last marker closes its transaction and gives the coordinator epoch;
    transactional data after that marker is its open transaction, from the first such batch.
    Producers new to `state` join it in the order of their first batch, as the broker's recovery
    adds them. Vectorised: one step per producer, none per batch."""
    out = dict(state)
    rows = np.arange(len(b.producer_id))
    first = _per_producer(b.producer_id, rows, last=False)
    last = _per_producer(b.producer_id, rows)
    last_data = _per_producer(b.producer_id, rows[~b.control])
    last_marker = _per_producer(b.producer_id, rows[b.control])
    # Transactional data after its producer's last marker: the open transactions.
    marker_pids = np.array(sorted(last_marker), dtype=np.int64)
    marker_rows = np.array([last_marker[p] for p in marker_pids.tolist()], dtype=np.int64)
    txn_data = rows[b.transactional & ~b.control]
    after = np.full(len(txn_data), -1, dtype=np.int64)
    if len(marker_pids):
        at = np.searchsorted(marker_pids, b.producer_id[txn_data]).clip(max=len(marker_pids) - 1)
        after = np.where(marker_pids[at] == b.producer_id[txn_data], marker_rows[at], -1)
    first_open = _per_producer(b.producer_id, txn_data[txn_data > after], last=False)
    for pid in sorted(last, key=first.__getitem__):
        row = last[pid]
        entry = out.get(pid) or ProducerEntry(pid, int(b.epoch[row]))
        entry = replace(entry, epoch=int(b.epoch[row]), timestamp=int(b.max_timestamp[row]))
        if pid in last_data:
            d = last_data[pid]
            delta = int(b.last_offset[d] - b.base_offset[d])
            sequence = -1 if b.base_sequence[d] < 0 else (int(b.base_sequence[d]) + delta) % 2**31
            entry = replace(
                entry, last_sequence=sequence, last_offset=int(b.last_offset[d]), offset_delta=delta
            )
        if pid in last_marker:
            entry = replace(
                entry, coordinator_epoch=int(b.coordinator_epoch[last_marker[pid]]), txn_first_offset=-1
            )
        if pid in first_open and entry.txn_first_offset < 0:
            entry = replace(entry, txn_first_offset=int(b.base_offset[first_open[pid]]))
        out[pid] = entry
    return out
