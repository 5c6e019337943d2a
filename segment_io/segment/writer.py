"""SegmentWriter: appends batches and rolls segments like Kafka, writing trimmed indexes."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

import numpy as np

from segment_io.format.constants import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_SEGMENT_BYTES,
    DEFAULT_SEGMENT_INDEX_BYTES,
    INT32_MAX,
    OFFSET_ENTRY,
    TIME_ENTRY,
)
from segment_io.index import AbortedTxn, IndexBuilder
from segment_io.layout import segment_file_name
from segment_io.storage import PendingFile, Storage


@dataclass(frozen=True)
class SegmentLimits:
    """Roll limits of output segments (Kafka's segment.bytes, segment.index.bytes, ...)."""

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES


@dataclass(frozen=True)
class WrittenSegment:
    base_offset: int
    log_path: str
    size: int
    batches: int
    aborted: int
    last_offset: int
    max_timestamp: int


@dataclass
class _Open:
    base_offset: int
    log_path: str
    file: PendingFile
    index: IndexBuilder
    size: int = 0
    batches: int = 0
    last_offset: int = -1
    aborted: list[AbortedTxn] = field(default_factory=list)
    keep_txn_index: bool = False  # write a `.txnindex` even with no aborted transaction


class SegmentWriter:
    """Appends batches to `<dir>/<base>.log`, rolling like Kafka: by segment.bytes, full indexes
    and the 32-bit relative offset; each closed segment gets trimmed `.index`/`.timeindex` files
    (and a `.txnindex` when it indexed an aborted transaction), published whole."""

    def __init__(self, storage: Storage, directory: str, limits: SegmentLimits = SegmentLimits()) -> None:
        self.storage = storage
        self.directory = directory
        self.limits = limits
        self.written: list[WrittenSegment] = []
        self._open: _Open | None = None
        storage.makedirs(directory)

    def _start(self, base_offset: int) -> _Open:
        log_path = posixpath.join(self.directory, segment_file_name(base_offset, "log"))
        pending = self.storage.open_write(log_path)
        return _Open(
            base_offset,
            log_path,
            pending,
            IndexBuilder(base_offset, self.limits.index_interval_bytes, self.limits.segment_index_bytes),
        )

    def roll(self, base_offset: int, mtime_ms: int | None = None) -> None:
        """Close the current segment (if any) and start a new one at `base_offset`."""
        self.close_segment(mtime_ms)
        self._open = self._start(base_offset)

    def _needs_roll(self, seg: _Open, size: int, last_offset: int) -> bool:
        if seg.size > 0 and seg.size + size > self.limits.segment_bytes:
            return True
        if seg.index.offset_index_full or seg.index.time_index_full:
            return True
        return last_offset - seg.base_offset > INT32_MAX

    def append(
        self,
        batch: bytes | memoryview,
        base_offset: int,
        last_offset: int,
        max_timestamp: int,
        segment_base_offset: int | None = None,
    ) -> None:
        """Append one complete batch; a new segment starts at `segment_base_offset` (default: the
        batch's base offset) when none is open or a roll limit is reached."""
        size = len(batch)
        seg = self._open
        if seg is None or self._needs_roll(seg, size, last_offset):
            self.roll(base_offset if seg is not None or segment_base_offset is None else segment_base_offset)
            seg = self._open
            assert seg is not None
        seg.index.append(seg.size, size, last_offset, max_timestamp)
        seg.file.write(batch)
        seg.size += size
        seg.batches += 1
        seg.last_offset = last_offset

    def append_run(
        self,
        data: bytes | memoryview,
        sizes: np.ndarray,
        base_offsets: np.ndarray,
        last_offsets: np.ndarray,
        max_timestamps: np.ndarray,
    ) -> None:
        """`append` of consecutive complete batches held back to back in `data`, each as it is:
        where none of them can roll the segment, one write and one index kernel call for all."""
        seg = self._open
        n = len(sizes)
        total = len(data)
        if (
            seg is None
            or (seg.size > 0 and seg.size + total > self.limits.segment_bytes)
            or len(seg.index.offset_entries) + n >= self.limits.segment_index_bytes // OFFSET_ENTRY
            or len(seg.index.time_entries) + n >= self.limits.segment_index_bytes // TIME_ENTRY - 1
            or int(last_offsets[-1]) - seg.base_offset > INT32_MAX
        ):
            at = 0
            for size, base, last, ts in zip(
                sizes.tolist(),
                base_offsets.tolist(),
                last_offsets.tolist(),
                max_timestamps.tolist(),
                strict=True,
            ):
                self.append(data[at : at + size], base, last, ts)
                at += size
            return
        seg.index.append_many(seg.size, sizes, last_offsets, max_timestamps)
        seg.file.write(data)
        seg.size += total
        seg.batches += n
        seg.last_offset = int(last_offsets[-1])

    def append_aborted(self, txn: AbortedTxn) -> None:
        """Index an aborted transaction in the open segment (its ABORT marker was just appended)."""
        assert self._open is not None
        self._open.aborted.append(txn)

    def keep_txn_index(self) -> None:
        """Give the open segment a `.txnindex` even if it indexes nothing: a segment Kafka truncates
        keeps its transaction index file, emptied."""
        assert self._open is not None
        self._open.keep_txn_index = True

    def close_segment(self, mtime_ms: int | None = None) -> None:
        seg = self._open
        if seg is None:
            return
        self._open = None
        index, time_index = seg.index.finish()
        seg.file.commit(mtime_ms)
        stem = seg.log_path[: -len(".log")]
        self.storage.write_atomic(stem + ".index", index, mtime_ms)
        self.storage.write_atomic(stem + ".timeindex", time_index, mtime_ms)
        if seg.aborted or seg.keep_txn_index:
            self.storage.write_atomic(
                stem + ".txnindex", b"".join(t.to_bytes() for t in seg.aborted), mtime_ms
            )
        self.written.append(
            WrittenSegment(
                seg.base_offset,
                seg.log_path,
                seg.size,
                seg.batches,
                len(seg.aborted),
                seg.last_offset,
                seg.index.max_timestamp,
            )
        )

    def close(self, mtime_ms: int | None = None) -> list[WrittenSegment]:
        self.close_segment(mtime_ms)
        return self.written
