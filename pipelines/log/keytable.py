"""An exact-key hash table for the key map: (partition, key bytes) → latest offset.

Kafka's cleaner identifies keys by an MD5 digest and accepts its collisions; here the hash only
places a key, and equality is decided on the key bytes themselves, so no two keys are ever
merged. Numba kernels do the probing; the Python side only sizes the arrays (no object per key).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from segment_io.buffers import grow
from segment_io.format.records import gather
from segment_io.kernel import njit

EMPTY = -1
ITEM_ROWS = 8192  # rows per shuffle item (KeyRows.bucketed)


@njit(cache=True, nogil=True)
def hash_keys(tp: np.ndarray, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """64-bit hash of (partition, key bytes): FNV-1a, then a murmur finaliser so every bit mixes."""
    n = starts.shape[0]
    out = np.empty(n, dtype=np.uint64)
    for i in range(n):
        h = np.uint64(0xCBF29CE484222325) ^ np.uint64(tp[i])
        for j in range(starts[i], starts[i] + lengths[i]):
            h = (h ^ np.uint64(data[j])) * np.uint64(0x100000001B3)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xC4CEB9FE1A85EC53)
        h ^= h >> np.uint64(33)
        out[i] = h
    return out


@njit(cache=True, nogil=True, inline="always")
def _same_key(kbytes: np.ndarray, kstart: int, klen: int, data: np.ndarray, start: int, length: int) -> bool:
    if klen != length:
        return False
    for j in range(length):  # noqa: SIM110 (a loop numba compiles; no generator)
        if kbytes[kstart + j] != data[start + j]:
            return False
    return True


@njit(cache=True, nogil=True)
def _find(table: Any, h: np.uint64, tp: int, data: np.ndarray, start: int, length: int) -> Any:
    """(slot, entry) of the key, entry −1 when absent (then slot is where it would go).
    `table`: (slots, entry hashes, partitions, key starts, key lengths, key bytes)."""
    slots, e_hash, e_tp, e_kstart, e_klen, kbytes = table
    mask = slots.shape[0] - 1
    s = np.int64(h & np.uint64(mask))
    while True:
        e = slots[s]
        if e == EMPTY:
            return s, EMPTY
        if (
            e_hash[e] == h
            and e_tp[e] == tp
            and _same_key(kbytes, e_kstart[e], e_klen[e], data, start, length)
        ):
            return s, e
        s = (s + 1) & mask


@njit(cache=True, nogil=True)
def _upsert_max(
    table: Any,
    e_offset: np.ndarray,
    n: int,
    nk: int,
    hashes: np.ndarray,
    tps: np.ndarray,
    data: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    offsets: np.ndarray,
    row_entry: np.ndarray,
) -> Any:
    """Insert every row, keeping the largest offset per key, and note each row's entry in
    `row_entry`; returns (entries, key bytes) used. The caller has sized every array for all rows
    being new."""
    slots, e_hash, e_tp, e_kstart, e_klen, kbytes = table
    for i in range(hashes.shape[0]):
        s, e = _find(table, hashes[i], tps[i], data, starts[i], lengths[i])
        if e == EMPTY:
            slots[s] = n
            e_hash[n] = hashes[i]
            e_tp[n] = tps[i]
            e_kstart[n] = nk
            e_klen[n] = lengths[i]
            e_offset[n] = offsets[i]
            kbytes[nk : nk + lengths[i]] = data[starts[i] : starts[i] + lengths[i]]
            nk += lengths[i]
            e = n
            n += 1
        elif offsets[i] > e_offset[e]:
            e_offset[e] = offsets[i]
        row_entry[i] = e
    return n, nk


@njit(cache=True, nogil=True)
def _entries(
    table: Any,
    hashes: np.ndarray,
    tps: np.ndarray,
    data: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
) -> np.ndarray:
    out = np.empty(hashes.shape[0], dtype=np.int64)
    for i in range(hashes.shape[0]):
        _, out[i] = _find(table, hashes[i], tps[i], data, starts[i], lengths[i])
    return out


@njit(cache=True, nogil=True)
def _rehash(slots: np.ndarray, e_hash: np.ndarray, n: int) -> None:
    mask = slots.shape[0] - 1
    slots[:] = EMPTY
    for e in range(n):
        s = np.int64(e_hash[e] & np.uint64(mask))
        while slots[s] != EMPTY:
            s = (s + 1) & mask
        slots[s] = e


@njit(cache=True, nogil=True)
def _partition(
    bucket: np.ndarray,
    tp: np.ndarray,
    hashes: np.ndarray,
    data: np.ndarray,
    starts: np.ndarray,
    lengths: np.ndarray,
    offsets: np.ndarray,
    buckets: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows laid out bucket by bucket, each bucket's rows in their order: a stable counting sort
    in one sequential pass over the rows, every bucket written at its own cursor (writes that
    stay near each other, where a sort and gathers read rows from scattered places). Returns
    the rows' partitions, hashes, key starts (in the new key buffer), key lengths and offsets,
    that buffer, and the bucket edges (bucket b is rows edges[b]:edges[b + 1])."""
    n = bucket.shape[0]
    edges = np.zeros(buckets + 1, dtype=np.int64)
    byte_edges = np.zeros(buckets + 1, dtype=np.int64)
    for i in range(n):
        edges[bucket[i] + 1] += 1
        byte_edges[bucket[i] + 1] += max(lengths[i], 0)
    for b in range(buckets):
        edges[b + 1] += edges[b]
        byte_edges[b + 1] += byte_edges[b]
    row_at = edges[:-1].copy()
    byte_at = byte_edges[:-1].copy()
    out_tp = np.empty(n, dtype=tp.dtype)
    out_hash = np.empty(n, dtype=hashes.dtype)
    out_starts = np.empty(n, dtype=np.int64)
    out_lengths = np.empty(n, dtype=np.int64)
    out_offsets = np.empty(n, dtype=np.int64)
    out = np.empty(byte_edges[buckets], dtype=np.uint8)
    for i in range(n):
        b = bucket[i]
        r = row_at[b]
        row_at[b] = r + 1
        p = byte_at[b]
        length = lengths[i]
        out_tp[r] = tp[i]
        out_hash[r] = hashes[i]
        out_starts[r] = p
        out_lengths[r] = length
        out_offsets[r] = offsets[i]
        if length > 0:
            s = starts[i]
            for j in range(length):
                out[p + j] = data[s + j]
            byte_at[b] = p + length
    return out_tp, out_hash, out_starts, out_lengths, out_offsets, out, edges


@dataclass(frozen=True)
class KeyRows:
    """Rows of (partition, key, offset) as flat arrays; keys are `data[starts[i]:+lengths[i]]`."""

    tp: np.ndarray  # int32
    hash: np.ndarray  # uint64, from hash_keys
    data: np.ndarray  # uint8
    starts: np.ndarray  # int64
    lengths: np.ndarray  # int64
    offset: np.ndarray  # int64

    def __len__(self) -> int:
        return int(self.offset.shape[0])

    def take(self, index: np.ndarray) -> KeyRows:
        """The rows `index`, their keys packed into a fresh buffer (what a shuffle block holds)."""
        lengths = self.lengths[index]
        key_offsets, data = gather(self.data, self.starts[index], lengths)
        return KeyRows(
            self.tp[index],
            self.hash[index],
            data,
            key_offsets[:-1].astype(np.int64),
            lengths,
            self.offset[index],
        )

    def by_bucket(self, bucket: np.ndarray, buckets: int) -> tuple[KeyRows, np.ndarray]:
        """The rows ordered by `bucket` (each row's, < `buckets`; stable), their keys packed in
        that order, and the bucket edges: bucket b's rows are `slice(edges[b], edges[b + 1])`."""
        tp, hashes, starts, lengths, offsets, data, edges = _partition(
            bucket, self.tp, self.hash, self.data, self.starts, self.lengths, self.offset, buckets
        )
        return KeyRows(tp, hashes, data, starts, lengths, offsets), edges

    def bucketed(self, buckets: int) -> Iterator[tuple[int, KeyRows]]:
        """The rows split by bucket, from the hash's high half (the low half places keys in a
        table), in pieces of at most ITEM_ROWS: PySpark's shuffle writer holds up to a few hundred
        items of a task before it writes them, so items must be small for a map task's memory to
        stay bounded."""
        if len(self) == 0:
            return
        bucket = ((self.hash >> np.uint64(32)) % np.uint64(buckets)).astype(np.int64)
        ordered, edges = self.by_bucket(bucket, buckets)
        for b in range(buckets):
            for lo in range(int(edges[b]), int(edges[b + 1]), ITEM_ROWS):
                yield b, ordered.slice(lo, min(lo + ITEM_ROWS, int(edges[b + 1])))

    def slice(self, lo: int, hi: int) -> KeyRows:
        """Rows lo:hi of rows whose keys lie in row order (as `take` and `by_bucket` pack them),
        with only their keys' bytes (views: pickled, they carry no more)."""
        first = int(self.starts[lo]) if hi > lo else 0
        end = int(self.starts[hi - 1] + max(int(self.lengths[hi - 1]), 0)) if hi > lo else 0
        return KeyRows(
            self.tp[lo:hi],
            self.hash[lo:hi],
            self.data[first:end],
            self.starts[lo:hi] - first,
            self.lengths[lo:hi],
            self.offset[lo:hi],
        )

    @staticmethod
    def concat(parts: list[KeyRows]) -> KeyRows:
        """The rows of `parts` in order, keys in one buffer; no parts give no rows."""
        if len(parts) == 1:
            return parts[0]
        if not parts:
            i64 = np.zeros(0, dtype=np.int64)
            return KeyRows(
                np.zeros(0, np.int32), np.zeros(0, np.uint64), np.zeros(0, np.uint8), i64, i64, i64
            )
        shift = np.cumsum([0] + [len(p.data) for p in parts[:-1]])
        return KeyRows(
            np.concatenate([p.tp for p in parts]),
            np.concatenate([p.hash for p in parts]),
            np.concatenate([p.data for p in parts]),
            np.concatenate([p.starts + s for p, s in zip(parts, shift, strict=True)]),
            np.concatenate([p.lengths for p in parts]),
            np.concatenate([p.offset for p in parts]),
        )


class LatestOffsets:
    """(partition, key) → the largest offset inserted for it; grows as rows come in."""

    def __init__(self) -> None:
        self.n = 0
        self.nk = 0
        self.slots = np.full(16, EMPTY, dtype=np.int64)
        self.e_hash = np.empty(0, dtype=np.uint64)
        self.e_tp = np.empty(0, dtype=np.int32)
        self.e_kstart = np.empty(0, dtype=np.int64)
        self.e_klen = np.empty(0, dtype=np.int64)
        self.e_offset = np.empty(0, dtype=np.int64)
        self.kbytes = np.empty(0, dtype=np.uint8)

    def __len__(self) -> int:
        return self.n

    def _reserve(self, rows: int, key_bytes: int) -> None:
        need = self.n + rows
        for name in ("e_hash", "e_tp", "e_kstart", "e_klen", "e_offset"):
            setattr(self, name, grow(getattr(self, name), max(need, 1024), self.n))
        self.kbytes = grow(self.kbytes, max(self.nk + key_bytes, 4096), self.nk)
        if need * 2 > len(self.slots):  # load factor ≤ 1/2
            size = len(self.slots)
            while need * 2 > size:
                size *= 2
            self.slots = np.empty(size, dtype=np.int64)
            _rehash(self.slots, self.e_hash, self.n)

    def add(self, rows: KeyRows) -> np.ndarray:
        """Insert rows, keeping the largest offset per key; returns each row's entry."""
        self._reserve(len(rows), int(rows.lengths.sum()))
        row_entry = np.empty(len(rows), dtype=np.int64)
        self.n, self.nk = _upsert_max(
            self._arrays(),
            self.e_offset,
            self.n,
            self.nk,
            rows.hash,
            rows.tp,
            rows.data,
            rows.starts,
            rows.lengths,
            rows.offset,
            row_entry,
        )
        return row_entry

    def latest(self, entries: np.ndarray) -> np.ndarray:
        """The largest offset inserted so far for each of `entries`."""
        return self.e_offset[entries]

    def contains(self, rows: KeyRows) -> np.ndarray:
        """Whether each row's (partition, key) is in the table."""
        return self.entries(rows) != EMPTY

    def entries(self, rows: KeyRows) -> np.ndarray:
        """The entry of each row's (partition, key), EMPTY where it has none; entries are numbered
        in the order their keys were first inserted."""
        return _entries(self._arrays(), rows.hash, rows.tp, rows.data, rows.starts, rows.lengths)

    def _arrays(self) -> tuple[np.ndarray, ...]:
        """What the kernels probe: slots, then per entry hash, partition, key start and length,
        and the key bytes."""
        return (self.slots, self.e_hash, self.e_tp, self.e_kstart, self.e_klen, self.kbytes)

    def rows(self) -> KeyRows:
        """One row per key with its largest offset (views of the table's arrays)."""
        n = self.n
        return KeyRows(
            self.e_tp[:n],
            self.e_hash[:n],
            self.kbytes[: self.nk],
            self.e_kstart[:n],
            self.e_klen[:n],
            self.e_offset[:n],
        )
