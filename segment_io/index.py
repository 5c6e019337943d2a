"""Offset, time and transaction indexes: read, build by Kafka 4.x rules, verify
(docs/log-format.md#offset-index and the two sections after it)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

from segment_io.errors import CorruptIndex
from segment_io.format.constants import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_SEGMENT_INDEX_BYTES,
    INT32_MAX,
    OFFSET_ENTRY,
    TIME_ENTRY,
    TXN_ENTRY,
)
from segment_io.kernel import njit

_TXN = struct.Struct(">hqqqq")


@dataclass(frozen=True)
class AbortedTxn:
    """One `.txnindex` entry: an aborted transaction whose ABORT marker is in this segment."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return _TXN.pack(0, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


def read_offset_index(data: bytes) -> np.ndarray:
    """Entries as an (n, 2) int64 array of (relative offset, position); trailing partial bytes and
    zero padding of a non-trimmed active index are dropped (valid entries are a strict prefix)."""
    n = len(data) // OFFSET_ENTRY
    arr = np.frombuffer(data, dtype=">i4", count=n * 2).reshape(n, 2).astype(np.int64)
    return arr[: _valid_prefix(arr[:, 0], arr[:, 1])]


def read_time_index(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(timestamps, relative offsets) of a `.timeindex`; zero padding is dropped."""
    n = len(data) // TIME_ENTRY
    raw = np.frombuffer(data, dtype=np.uint8, count=n * TIME_ENTRY).reshape(n, TIME_ENTRY)
    ts = raw[:, :8].copy().view(">i8").reshape(n).astype(np.int64)
    rel = raw[:, 8:].copy().view(">i4").reshape(n).astype(np.int64)
    keep = _valid_prefix(ts, rel)
    return ts[:keep], rel[:keep]


def read_txn_index(data: bytes, path: str = "<txnindex>") -> list[AbortedTxn]:
    if len(data) % TXN_ENTRY:
        raise CorruptIndex(path, len(data) - len(data) % TXN_ENTRY, "partial transaction index entry")
    out = []
    for pos in range(0, len(data), TXN_ENTRY):
        version, pid, first, last, lso = _TXN.unpack_from(data, pos)
        if data[pos] != 0:
            raise CorruptIndex(path, pos, f"unknown transaction index entry version {version}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def _valid_prefix(rel: np.ndarray, pos: np.ndarray) -> int:
    """Length of the padding-free prefix: a (0, 0) entry after the first is zero padding."""
    n = len(rel)
    for i in range(n):
        if rel[i] == 0 and pos[i] == 0:
            return i
    return n


@dataclass
class IndexBuilder:
    """Kafka 4.x append path, per batch (KAFKA-806): an offset entry `(batch last offset, batch
    position)` once more than `index_interval_bytes` were appended since the last one, a time
    entry for the running maximum at the same moment, and a final max-timestamp entry."""

    base_offset: int
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES
    offset_entries: list[tuple[int, int]] = field(default_factory=list)
    time_entries: list[tuple[int, int]] = field(default_factory=list)
    bytes_since_last_entry: int = 0
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1

    @property
    def offset_index_full(self) -> bool:
        return len(self.offset_entries) >= self.segment_index_bytes // OFFSET_ENTRY

    @property
    def time_index_full(self) -> bool:
        return len(self.time_entries) >= self.segment_index_bytes // TIME_ENTRY - 1

    def append(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_last_entry > self.index_interval_bytes:
            self.offset_entries.append((last_offset - self.base_offset, position))
            self._maybe_append_time()
            self.bytes_since_last_entry = 0
        self.bytes_since_last_entry += size

    def append_many(
        self, position: int, sizes: np.ndarray, last_offsets: np.ndarray, max_timestamps: np.ndarray
    ) -> None:
        """`append` of consecutive batches starting at `position`, in one kernel call (a run of
        batches copied as they are)."""
        last_ts = self.time_entries[-1][0] if self.time_entries else -1
        state = np.array(
            [self.bytes_since_last_entry, self.max_timestamp, self.offset_of_max_timestamp, last_ts],
            dtype=np.int64,
        )
        n = len(sizes)
        entries = np.empty((n, 2), dtype=np.int64)
        times = np.empty((n, 2), dtype=np.int64)
        columns = (sizes.astype(np.int64), last_offsets.astype(np.int64), max_timestamps.astype(np.int64))
        made, timed = _append_many(
            state, position, self.base_offset, self.index_interval_bytes, *columns, entries, times
        )
        self.offset_entries.extend(zip(entries[:made, 0].tolist(), entries[:made, 1].tolist(), strict=True))
        self.time_entries.extend(zip(times[:timed, 0].tolist(), times[:timed, 1].tolist(), strict=True))
        self.bytes_since_last_entry, self.max_timestamp, self.offset_of_max_timestamp = (
            int(state[0]),
            int(state[1]),
            int(state[2]),
        )

    def _maybe_append_time(self) -> None:
        last_ts = self.time_entries[-1][0] if self.time_entries else -1
        if self.max_timestamp > last_ts:
            self.time_entries.append((self.max_timestamp, self.offset_of_max_timestamp - self.base_offset))

    def finish(self) -> tuple[bytes, bytes]:
        """Trimmed `.index` and `.timeindex` bytes; the time index ends with the segment maximum."""
        self._maybe_append_time()
        index = b"".join(struct.pack(">ii", r, p) for r, p in self.offset_entries)
        time = b"".join(struct.pack(">qi", t, r) for t, r in self.time_entries)
        return index, time


@njit(cache=True, nogil=True)
def _append_many(
    state: np.ndarray,
    position: int,
    base_offset: int,
    interval: int,
    sizes: np.ndarray,
    last_offsets: np.ndarray,
    max_timestamps: np.ndarray,
    entries: np.ndarray,
    times: np.ndarray,
) -> tuple[int, int]:
    """IndexBuilder.append over batches, as it does it one by one: `state` is (bytes since the
    last entry, max timestamp, its offset, last time entry's timestamp), updated in place; the new
    offset and time entries are written to `entries` and `times`, their counts returned."""
    since, max_ts, max_at, last_ts = state[0], state[1], state[2], state[3]
    made = 0
    timed = 0
    for b in range(sizes.shape[0]):
        if max_timestamps[b] > max_ts:
            max_ts = max_timestamps[b]
            max_at = last_offsets[b]
        if since > interval:
            entries[made, 0] = last_offsets[b] - base_offset
            entries[made, 1] = position
            made += 1
            if max_ts > last_ts:
                times[timed, 0] = max_ts
                times[timed, 1] = max_at - base_offset
                timed += 1
                last_ts = max_ts
            since = 0
        since += sizes[b]
        position += sizes[b]
    state[0], state[1], state[2], state[3] = since, max_ts, max_at, last_ts
    return made, timed


def build_indexes(
    base_offset: int,
    positions: np.ndarray,
    sizes: np.ndarray,
    last_offsets: np.ndarray,
    max_timestamps: np.ndarray,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
) -> tuple[bytes, bytes]:
    """Rebuild `.index` and `.timeindex` for a segment from its batch table."""
    builder = IndexBuilder(base_offset, index_interval_bytes)
    for p, s, lo, ts in zip(
        positions.tolist(), sizes.tolist(), last_offsets.tolist(), max_timestamps.tolist(), strict=True
    ):
        builder.append(p, s, lo, ts)
    return builder.finish()


def verify_offset_index(
    path: str,
    entries: np.ndarray,
    base_offset: int,
    positions: np.ndarray,
    last_offsets: np.ndarray,
    log_size: int,
) -> None:
    """Check (docs/log-format.md#offset-index): entries point at batch starts inside the log, are
    strictly increasing, and every batch before an entry's position ends below the entry's offset."""
    prev_rel, prev_pos = -1, -1
    for i, (rel, pos) in enumerate(entries.tolist()):
        at = i * OFFSET_ENTRY
        if rel < 0 or rel > INT32_MAX:
            raise CorruptIndex(path, at, f"relative offset {rel} out of range")
        if rel <= prev_rel or pos <= prev_pos:
            raise CorruptIndex(path, at, "entries are not strictly increasing")
        if pos >= log_size:
            raise CorruptIndex(path, at, f"position {pos} is outside the log ({log_size} bytes)")
        j = int(np.searchsorted(positions, pos))
        if j >= len(positions) or positions[j] != pos:
            raise CorruptIndex(path, at, f"position {pos} is not the start of a batch")
        if j > 0 and last_offsets[j - 1] >= base_offset + rel:
            raise CorruptIndex(
                path, at, f"offset {base_offset + rel} is not above the batch before position {pos}"
            )
        prev_rel, prev_pos = rel, pos


def verify_time_index(
    path: str,
    timestamps: np.ndarray,
    relative_offsets: np.ndarray,
    base_offset: int,
    last_offsets: np.ndarray,
    max_timestamps: np.ndarray,
) -> None:
    """Check (docs/log-format.md#time-index): strictly increasing timestamps, non-decreasing
    offsets inside the segment, each `(T, O)` at least the max timestamp up to O, and the last
    entry = segment max."""
    seg_max = int(max_timestamps.max()) if len(max_timestamps) else -1
    prev_ts, prev_rel = -1, 0
    running = np.maximum.accumulate(max_timestamps) if len(max_timestamps) else max_timestamps
    for i, (ts, rel) in enumerate(zip(timestamps.tolist(), relative_offsets.tolist(), strict=True)):
        at = i * TIME_ENTRY
        if ts <= prev_ts or rel < prev_rel:
            raise CorruptIndex(path, at, "entries are not increasing")
        offset = base_offset + rel
        j = int(np.searchsorted(last_offsets, offset))
        if j >= len(last_offsets):
            raise CorruptIndex(path, at, f"offset {offset} is past the last batch of the segment")
        if running[j] > ts:
            raise CorruptIndex(path, at, f"timestamp {ts} is below the maximum up to offset {offset}")
        prev_ts, prev_rel = ts, rel
    last = int(timestamps[-1]) if len(timestamps) else -1
    if last != seg_max:
        raise CorruptIndex(
            path,
            max(0, (len(timestamps) - 1) * TIME_ENTRY),
            f"last entry {last} is not the segment maximum {seg_max}",
        )


def lookup_offset(entries: np.ndarray, base_offset: int, target: int) -> int:
    """Position to start scanning for `target`: the largest entry with offset ≤ target, else 0."""
    if len(entries) == 0:
        return 0
    i = int(np.searchsorted(entries[:, 0], target - base_offset, side="right")) - 1
    return 0 if i < 0 else int(entries[i, 1])


def lookup_time(timestamps: np.ndarray, relative_offsets: np.ndarray, base_offset: int, ts: int) -> int:
    """Offset to start from for timestamp `ts`: the largest entry with timestamp ≤ ts, else base."""
    i = int(np.searchsorted(timestamps, ts, side="right")) - 1
    return base_offset if i < 0 else base_offset + int(relative_offsets[i])
