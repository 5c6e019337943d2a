"""Realistic synthetic Kafka log directories: every format feature, deterministic per seed.

Records are produced as numpy columns and encoded by the numba kernel of records.py; the writer
is the same SegmentWriter `clean` uses, so indexes follow Kafka 4.x rules.
"""

from __future__ import annotations

import posixpath
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from segment_io.checkpoints import format_leader_epoch_checkpoint, format_offset_checkpoint
from segment_io.format.batch import build_legacy_message, build_v2_batch
from segment_io.format.compression import compress, lz4_legacy_frame
from segment_io.format.constants import (
    CONTROL_MASK,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    Codec,
    ControlType,
)
from segment_io.format.record_columns import RecordColumns
from segment_io.format.records import gather
from segment_io.generate_spec import TopicSpec, default_specs
from segment_io.index import AbortedTxn
from segment_io.layout import HIGH_WATERMARK_CHECKPOINT, LEADER_EPOCH_CHECKPOINT, RECOVERY_CHECKPOINT
from segment_io.segment.writer import SegmentLimits, SegmentWriter
from segment_io.storage import Storage
from segment_io.topic_partition import TopicPartition

_WORDS = (
    b"order customer amount currency status shipped pending region sku quantity price "
    b"warehouse created updated payment refund invoice account session device event "
).split()


@dataclass
class _Txn:
    producer_id: int
    epoch: int
    first_offset: int
    abort: bool
    batches_left: int


@dataclass
class _PartitionState:
    rng: np.random.Generator
    spec: TopicSpec
    offset: int = 0
    timestamp: float = 0.0
    sequences: dict[int, int] = field(default_factory=dict)
    open_txns: list[_Txn] = field(default_factory=list)


def _keys(rng: np.random.Generator, spec: TopicSpec, n: int, first_offset: int) -> np.ndarray:
    if spec.distinct_keys:
        return np.arange(first_offset, first_offset + n, dtype=np.int64)
    if spec.key_skew > 0:
        ranks = np.arange(1, spec.keys + 1, dtype=np.float64)
        weights = ranks**-spec.key_skew
        ids = rng.choice(spec.keys, size=n, p=weights / weights.sum())
    else:
        ids = rng.integers(0, spec.keys, size=n)
    return ids.astype(np.int64)


def _key_bytes(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`k` + 10 decimal digits per id, as Arrow-style offsets and data."""
    width = 11
    digits = (ids[:, None] // (10 ** np.arange(9, -1, -1, dtype=np.int64))) % 10
    out = np.empty((len(ids), width), dtype=np.uint8)
    out[:, 0] = ord("k")
    out[:, 1:] = (digits + ord("0")).astype(np.uint8)
    return np.arange(0, (len(ids) + 1) * width, width, dtype=np.int64), out.reshape(-1)


class _ValuePool:
    """Text-like bytes (compressible like real JSON-ish payloads) sliced into values."""

    def __init__(self, rng: np.random.Generator, size: int = 1 << 20) -> None:
        words = rng.choice(len(_WORDS), size=size // 6)
        self.data = np.frombuffer(b" ".join(_WORDS[i] for i in words)[:size], dtype=np.uint8)

    def values(self, rng: np.random.Generator, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        starts = rng.integers(0, len(self.data) - int(sizes.max(initial=0)) - 1, size=len(sizes))
        offsets, data = gather(self.data, starts.astype(np.int64), sizes.astype(np.int64))
        return offsets.astype(np.int64), data


def _record_columns(
    st: _PartitionState, pool: _ValuePool, n: int, ts: np.ndarray, base_ts: int
) -> RecordColumns:
    rng, spec = st.rng, st.spec
    key_offsets, key_data = _key_bytes(_keys(rng, spec, n, st.offset))
    key_null = rng.random(n) < spec.null_key_ratio
    sizes = rng.integers(spec.value_min, spec.value_max + 1, size=n)
    value_null = (rng.random(n) < spec.tombstone_ratio) & ~key_null
    sizes[value_null] = 0
    value_offsets, value_data = pool.values(rng, sizes)
    with_header = rng.random(n) < spec.header_ratio
    counts = with_header.astype(np.int64)
    h = int(counts.sum())
    hkey = np.frombuffer(b"trace-id" * h, dtype=np.uint8)
    hval_null = rng.random(h) < 0.2
    hval_len = np.where(hval_null, 0, 8)
    return RecordColumns(
        offset_delta=np.arange(n, dtype=np.int64),
        timestamp_delta=ts - base_ts,
        key_offsets=key_offsets,
        key_data=key_data,
        key_null=key_null,
        value_offsets=value_offsets,
        value_data=value_data,
        value_null=value_null,
        header_offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        hkey_offsets=np.arange(0, 8 * h + 1, 8, dtype=np.int64),
        hkey_data=hkey,
        hvalue_offsets=np.concatenate([[0], np.cumsum(hval_len)]).astype(np.int64),
        hvalue_data=rng.integers(0, 256, size=int(hval_len.sum()), dtype=np.uint8),
        hvalue_null=hval_null,
    )


def _marker(offset: int, txn: _Txn, ts: int, control: ControlType) -> bytes:
    cols = RecordColumns.from_records(
        [(0, 0, struct.pack(">hh", 0, int(control)), struct.pack(">hi", 0, 7), [])]
    )
    return build_v2_batch(
        base_offset=offset,
        records=cols.encode(),
        records_count=1,
        last_offset_delta=0,
        base_timestamp=ts,
        max_timestamp=ts,
        attributes=TRANSACTIONAL_MASK | CONTROL_MASK,
        partition_leader_epoch=0,
        producer_id=txn.producer_id,
        producer_epoch=txn.epoch,
        base_sequence=NO_SEQUENCE,
    )


def _legacy_batches(
    st: _PartitionState, pool: _ValuePool, n: int, codec: Codec, ts: np.ndarray
) -> list[tuple[bytes, int, int, int]]:
    """Legacy entries as (bytes, first offset, last offset, max timestamp): n plain messages, or
    one compressed wrapper of n inner messages."""
    spec = st.spec
    magic = spec.legacy_magic or 0
    cols = _record_columns(st, pool, n, ts, int(ts[0]))
    msgs = []
    for i in range(n):  # legacy data is small and old: plain Python is fine here
        key = (
            None
            if cols.key_null[i]
            else cols.key_data[cols.key_offsets[i] : cols.key_offsets[i + 1]].tobytes()
        )
        value = (
            None
            if cols.value_null[i]
            else cols.value_data[cols.value_offsets[i] : cols.value_offsets[i + 1]].tobytes()
        )
        inner_offset = (i if magic == 1 else st.offset + i) if codec != Codec.NONE else st.offset + i
        msgs.append(build_legacy_message(inner_offset, magic, 0, int(ts[i]), key, value))
    if codec == Codec.NONE:
        return [(m, st.offset + i, st.offset + i, int(ts[i])) for i, m in enumerate(msgs)]
    raw = b"".join(msgs)
    payload = lz4_legacy_frame(raw) if codec == Codec.LZ4 and magic == 0 else compress(codec, raw)
    attrs = int(codec) | (TIMESTAMP_TYPE_MASK if spec.log_append_time and magic == 1 else 0)
    wrapper = build_legacy_message(st.offset + n - 1, magic, attrs, int(ts.max()), None, payload)
    return [(wrapper, st.offset, st.offset + n - 1, int(ts.max()))]


def _write_partition(
    storage: Storage, root: str, tp: TopicPartition, spec: TopicSpec, seed: int
) -> tuple[int, int]:
    """Generate one partition; returns (log end offset, high watermark)."""
    rng = np.random.default_rng([seed, zlib.crc32(tp.topic.encode()), tp.partition])
    st = _PartitionState(rng, spec, timestamp=float(spec.start_ms))
    pool = _ValuePool(rng)
    directory = posixpath.join(root, tp.dir_name)
    writer = SegmentWriter(storage, directory, SegmentLimits(segment_bytes=spec.segment_bytes))
    codecs = [Codec.parse(c) for c in spec.codecs]
    step = spec.span_ms / max(1, spec.records)
    next_pid = 1000
    written = 0
    lo, hi = spec.records_per_batch

    def append(batch: bytes, base: int, last: int, max_ts: int) -> None:
        writer.append(batch, base, last, max_ts, segment_base_offset=0 if writer.written == [] else None)

    while written < spec.records:
        n = min(int(rng.integers(lo, hi + 1)), spec.records - written)
        ts = (st.timestamp + step * np.arange(n) + rng.integers(-500, 500, size=n)).astype(np.int64)
        st.timestamp += step * n
        codec = codecs[int(rng.integers(len(codecs)))]
        base = st.offset
        if spec.legacy_magic is not None:
            if spec.legacy_magic == 0:
                ts[:] = -1
            for entry, first, last, max_ts in _legacy_batches(st, pool, n, codec, ts):
                append(entry, first, last, max_ts)
            st.offset += n
            written += n
            continue
        attrs = int(codec)
        pid, epoch, seq = NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE
        txn = None
        if spec.transactional_ratio and rng.random() < spec.transactional_ratio:
            if st.open_txns and rng.random() < 0.6:
                txn = st.open_txns[int(rng.integers(len(st.open_txns)))]
            else:
                txn = _Txn(next_pid, 0, base, bool(rng.random() < spec.abort_ratio), int(rng.integers(1, 4)))
                next_pid += 1
                st.open_txns.append(txn)
            pid, epoch = txn.producer_id, txn.epoch
            attrs |= TRANSACTIONAL_MASK
        elif rng.random() < spec.idempotent_ratio:
            pid, epoch = 1 + int(rng.integers(3)), 0
        if pid >= 0:
            seq = st.sequences.get(pid, 0)
            st.sequences[pid] = (seq + n) % (2**31)
        cols = _record_columns(st, pool, n, ts, int(ts[0]))
        max_ts = int(ts.max())
        if spec.log_append_time:
            attrs |= TIMESTAMP_TYPE_MASK
            max_ts = int(st.timestamp) + 1000  # the broker's append time
        batch = build_v2_batch(
            base_offset=base,
            records=compress(codec, cols.encode()),
            records_count=n,
            last_offset_delta=n - 1,
            base_timestamp=int(ts[0]),
            max_timestamp=max_ts,
            attributes=attrs,
            partition_leader_epoch=0,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
        )
        append(batch, base, base + n - 1, max_ts)
        st.offset += n
        written += n
        if txn is not None:
            txn.batches_left -= 1
            last_txn = written >= spec.records and spec.open_transaction
            if txn.batches_left <= 0 and not last_txn:
                _end_transaction(st, writer, txn)
    # Close every transaction but one (the open one at the tail, if asked for).
    for txn in list(st.open_txns):
        if spec.open_transaction and txn is st.open_txns[-1]:
            break
        _end_transaction(st, writer, txn)
    writer.close()
    leo = st.offset
    return leo, leo


def _end_transaction(st: _PartitionState, writer: SegmentWriter, txn: _Txn) -> None:
    st.open_txns.remove(txn)
    marker_offset = st.offset
    ts = int(st.timestamp)
    control = ControlType.ABORT if txn.abort else ControlType.COMMIT
    writer.append(_marker(marker_offset, txn, ts, control), marker_offset, marker_offset, ts)
    if txn.abort:
        others = [t.first_offset for t in st.open_txns]
        lso = min(others) if others else marker_offset + 1
        writer.append_aborted(AbortedTxn(txn.producer_id, txn.first_offset, marker_offset, lso))
    st.offset += 1


def generate_partition(
    storage: Storage, root: str, tp: TopicPartition, spec: TopicSpec, seed: int = 7
) -> int:
    """Write one partition directory (segments and leader-epoch checkpoint); returns its log end."""
    leo, _ = _write_partition(storage, root, tp, spec, seed)
    directory = posixpath.join(root, tp.dir_name)
    storage.write_atomic(
        posixpath.join(directory, LEADER_EPOCH_CHECKPOINT), format_leader_epoch_checkpoint([(0, 0)])
    )
    return leo


def write_root_checkpoints(storage: Storage, root: str, ends: dict[TopicPartition, int]) -> None:
    """Recovery point and high watermark at each partition's log end (a clean broker shutdown)."""
    for name in (RECOVERY_CHECKPOINT, HIGH_WATERMARK_CHECKPOINT):
        storage.write_atomic(posixpath.join(root, name), format_offset_checkpoint(ends))


def generate_log_dir(
    storage: Storage, root: str, specs: Sequence[TopicSpec] | None = None, seed: int = 7
) -> dict[TopicPartition, int]:
    """Write a log directory with the given topics; returns each partition's log end offset."""
    storage.makedirs(root)
    ends: dict[TopicPartition, int] = {}
    for spec in specs or default_specs():
        for p in range(spec.partitions):
            tp = TopicPartition(spec.name, p)
            ends[tp] = generate_partition(storage, root, tp, spec, seed)
    write_root_checkpoints(storage, root, ends)
    return ends
