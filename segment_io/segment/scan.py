"""Shallow scan of a `.log` buffer: batch headers only, no decompression, into a BatchTable.

Every batch of any magic starts with its offset, size and magic at fixed places, so the file
is walked header to header (docs/log-format.md#batch-header); CRCs are checked apart."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, fields
from typing import Any

import crc32c
import numpy as np
import pyarrow as pa

from segment_io.errors import (
    BadLength,
    CrcMismatch,
    OverlappingSegments,
    TruncatedSegment,
    UnknownMagic,
    UnsupportedCodec,
)
from segment_io.format.checksums import NATIVE_CRC32C, first_bad_v2_crc
from segment_io.format.constants import (
    ATTRIBUTES_OFFSET,
    BASE_SEQUENCE_AT,
    BASE_TIMESTAMP_AT,
    BATCH_LENGTH_AT,
    CODEC_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    INT32_MAX,
    LAST_OFFSET_DELTA_AT,
    LEADER_EPOCH_AT,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_AT,
    MIN_ENTRY_SIZE,
    PRODUCER_EPOCH_AT,
    PRODUCER_ID_AT,
    RECORDS_COUNT_AT,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    V2_EMPTY_BATCH_LENGTH,
)
from segment_io.kernel import njit

_END, _PARTIAL, _BAD_LENGTH, _BAD_MAGIC = 0, 1, 2, 3


@njit(cache=True, nogil=True, inline="always")
def _u32(b: np.ndarray, p: int) -> Any:
    return (
        (np.int64(b[p]) << 24) | (np.int64(b[p + 1]) << 16) | (np.int64(b[p + 2]) << 8) | np.int64(b[p + 3])
    )


@njit(cache=True, nogil=True, inline="always")
def _i32(b: np.ndarray, p: int) -> Any:
    v = _u32(b, p)
    return v - (1 << 32) if v >= (1 << 31) else v


@njit(cache=True, nogil=True, inline="always")
def _i16(b: np.ndarray, p: int) -> Any:
    v = (np.int64(b[p]) << 8) | np.int64(b[p + 1])
    return v - 65536 if v >= 32768 else v


@njit(cache=True, nogil=True, inline="always")
def _i64(b: np.ndarray, p: int) -> Any:
    v = (np.uint64(_u32(b, p)) << np.uint64(32)) | np.uint64(_u32(b, p + 4))
    return np.int64(v)


@njit(cache=True, nogil=True)
def _count_batches(buf: np.ndarray, start: int, end: int) -> tuple[int, int, int]:
    """(batches in [start, end), status, position where the walk stopped)."""
    pos = start
    n = 0
    while True:
        if pos >= end - 17:
            return n, (_END if pos == end else _PARTIAL), pos
        size = _i32(buf, pos + 8)
        magic = np.int64(buf[pos + 16])
        if size < 14:
            return n, _BAD_LENGTH, pos
        if pos + LOG_OVERHEAD + size > end:
            return n, _PARTIAL, pos
        if magic > 2:
            return n, _BAD_MAGIC, pos
        if magic == 2 and size < V2_EMPTY_BATCH_LENGTH:
            return n, _BAD_LENGTH, pos
        if magic < 2 and size < MIN_ENTRY_SIZE + 8 * magic:  # v0: 14, v1: 22
            return n, _BAD_LENGTH, pos
        n += 1
        pos += LOG_OVERHEAD + size


@njit(cache=True, nogil=True)
def _fill_batches(
    buf: np.ndarray,
    n: int,
    start: int,
    position: np.ndarray,
    size: np.ndarray,
    magic: np.ndarray,
    base_offset: np.ndarray,
    last_offset: np.ndarray,
    leader_epoch: np.ndarray,
    crc: np.ndarray,
    attributes: np.ndarray,
    base_timestamp: np.ndarray,
    max_timestamp: np.ndarray,
    producer_id: np.ndarray,
    producer_epoch: np.ndarray,
    base_sequence: np.ndarray,
    records_count: np.ndarray,
) -> None:
    pos = start
    for i in range(n):
        s = _i32(buf, pos + BATCH_LENGTH_AT)
        m = np.int64(buf[pos + MAGIC_OFFSET])
        offset = _i64(buf, pos)
        position[i] = pos
        size[i] = LOG_OVERHEAD + s
        magic[i] = m
        crc[i] = _u32(buf, pos + CRC_OFFSET) if m == 2 else _u32(buf, pos + LOG_OVERHEAD)
        if m == 2:
            base_offset[i] = offset
            leader_epoch[i] = _i32(buf, pos + LEADER_EPOCH_AT)
            attributes[i] = np.int64(buf[pos + ATTRIBUTES_OFFSET + 1])  # only the low byte is meaningful
            last_offset[i] = offset + _i32(buf, pos + LAST_OFFSET_DELTA_AT)
            base_timestamp[i] = _i64(buf, pos + BASE_TIMESTAMP_AT)
            max_timestamp[i] = _i64(buf, pos + MAX_TIMESTAMP_AT)
            producer_id[i] = _i64(buf, pos + PRODUCER_ID_AT)
            producer_epoch[i] = _i16(buf, pos + PRODUCER_EPOCH_AT)
            base_sequence[i] = _i32(buf, pos + BASE_SEQUENCE_AT)
            records_count[i] = _i32(buf, pos + RECORDS_COUNT_AT)
        else:
            a = np.int64(buf[pos + 17])
            attributes[i] = a
            leader_epoch[i] = -1
            last_offset[i] = offset
            ts = _i64(buf, pos + 18) if m == 1 else -1
            base_timestamp[i] = ts
            max_timestamp[i] = ts
            producer_id[i] = -1
            producer_epoch[i] = -1
            base_sequence[i] = -1
            if a & CODEC_MASK:
                base_offset[i] = -1  # known only after decompressing the wrapper
                records_count[i] = -1
            else:
                base_offset[i] = offset
                records_count[i] = 1
        pos += LOG_OVERHEAD + s


@dataclass(frozen=True)
class BatchTable:
    """One row per batch of a segment, as numpy columns (header fields only)."""

    position: np.ndarray
    size: np.ndarray
    magic: np.ndarray
    base_offset: np.ndarray
    last_offset: np.ndarray
    leader_epoch: np.ndarray
    crc: np.ndarray
    attributes: np.ndarray
    base_timestamp: np.ndarray
    max_timestamp: np.ndarray
    producer_id: np.ndarray
    producer_epoch: np.ndarray
    base_sequence: np.ndarray
    records_count: np.ndarray

    def __len__(self) -> int:
        return int(self.position.shape[0])

    @classmethod
    def empty(cls, n: int = 0) -> BatchTable:
        return cls(*(np.zeros(n, dtype=np.int64) for _ in fields(cls)))

    @property
    def codec(self) -> np.ndarray:
        return self.attributes & CODEC_MASK

    @property
    def is_control(self) -> np.ndarray:
        return (self.magic == 2) & ((self.attributes & CONTROL_MASK) != 0)

    @property
    def is_transactional(self) -> np.ndarray:
        return (self.magic == 2) & ((self.attributes & TRANSACTIONAL_MASK) != 0)

    @property
    def log_append_time(self) -> np.ndarray:
        return (self.magic > 0) & ((self.attributes & TIMESTAMP_TYPE_MASK) != 0)

    @property
    def timestamp_type(self) -> np.ndarray:
        """The TimestampType value of each batch: −1 (magic 0, none), 0 CreateTime, 1 LogAppendTime."""
        return np.where(self.magic == 0, -1, self.log_append_time.astype(np.int64))

    @property
    def has_delete_horizon(self) -> np.ndarray:
        return (self.magic == 2) & ((self.attributes & DELETE_HORIZON_MASK) != 0)

    def to_arrow(self) -> pa.Table:
        return pa.table({f.name: getattr(self, f.name) for f in fields(self)})


@dataclass(frozen=True)
class SegmentScan:
    """Result of a shallow scan: the batch table and, if present, the partial tail."""

    path: str
    base_offset: int
    size: int
    table: BatchTable
    tail: TruncatedSegment | None = None

    @property
    def valid_size(self) -> int:
        """Bytes up to the end of the last complete batch (where Kafka recovery truncates)."""
        return self.size if self.tail is None else int(self.tail.position or 0)


def scan_buffer(
    path: str, base_offset: int, buf: np.ndarray, start: int = 0, end: int | None = None
) -> SegmentScan:
    """Shallow-scan a `.log` buffer, or its batches in the window [start, end) (both batch
    boundaries; positions stay the file's); corrupt headers raise, a partial tail is reported."""
    stop_at = buf.shape[0] if end is None else end
    n, status, stop = _count_batches(buf, start, stop_at)
    table = BatchTable.empty(n)
    _fill_batches(buf, n, start, *(getattr(table, f.name) for f in fields(table)))
    tail = None
    if status == _BAD_LENGTH:
        size = int(_i32(buf, stop + 8))
        raise BadLength(path, stop, f"batch size field {size} is below the minimum for its magic")
    if status == _BAD_MAGIC:
        raise UnknownMagic(path, stop, f"magic byte {int(buf[stop + 16])} is not 0, 1 or 2")
    if status == _PARTIAL:
        if stop_at != buf.shape[0]:
            raise BadLength(path, stop, f"a batch runs past the end of the window at byte {stop_at}")
        tail = TruncatedSegment(
            path,
            stop,
            f"partial batch in the last {buf.shape[0] - stop} bytes; Kafka's recovery truncates "
            f"the file to {stop} bytes",
        )
    codecs = table.codec
    bad = np.flatnonzero(codecs > 4)
    if len(bad):
        i = int(bad[0])
        raise UnsupportedCodec(path, int(table.position[i]), f"compression codec id {int(codecs[i])}")
    zstd_legacy = np.flatnonzero((codecs == 4) & (table.magic < 2))
    if len(zstd_legacy):
        i = int(zstd_legacy[0])
        raise UnsupportedCodec(path, int(table.position[i]), "zstd is only valid in magic 2 batches")
    return SegmentScan(path, base_offset, int(buf.shape[0]), table, tail)


def verify_crcs(path: str, buf: np.ndarray, table: BatchTable) -> None:
    """CRC-32C (v2) or CRC-32 (legacy) of every batch; the first mismatch in the file raises.

    v2 batches are checked in one kernel call where the hardware function is there; the rest
    (legacy batches, or all of them without it) batch by batch, up to the kernel's first
    mismatch, so the error names the same batch either way."""
    rows = np.arange(len(table))
    if NATIVE_CRC32C:
        bad = first_bad_v2_crc(buf, table.position, table.size, table.magic, table.crc)
        rows = rows[(table.magic != 2) & ((rows < bad) | (bad < 0))]
        if bad >= 0:
            rows = np.append(rows, bad)  # checked last, and again, to raise with the values
    view = buf.data
    for pos, size, magic, stored in zip(
        table.position[rows].tolist(),
        table.size[rows].tolist(),
        table.magic[rows].tolist(),
        table.crc[rows].tolist(),
        strict=True,
    ):
        if magic == 2:
            actual = crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])
        else:
            actual = zlib.crc32(view[pos + 16 : pos + size]) & 0xFFFFFFFF
        if actual != stored:
            raise CrcMismatch(path, pos, f"stored 0x{stored:08x}, computed 0x{actual:08x}")


def check_segment_ranges(scans: list[SegmentScan]) -> None:
    """Every batch of a segment lies in [its base offset, the next segment's base offset), and
    within the 32-bit range of offsets relative to its segment's base."""
    for k, scan in enumerate(scans):
        table = scan.table
        if not len(table):
            continue
        last = table.last_offset
        first = np.where(table.base_offset >= 0, table.base_offset, last)
        base = scan.base_offset
        _refuse_first(scan, first < base, first, f"batch offset {{}} is below the segment base offset {base}")
        if k + 1 < len(scans):
            after = scans[k + 1].base_offset
            _refuse_first(
                scan,
                last >= after,
                last,
                f"batch last offset {{}} reaches the next segment's base offset {after}",
            )
        _refuse_first(
            scan, last - base > INT32_MAX, last, "offset {} does not fit the segment's 32-bit relative range"
        )


def _refuse_first(scan: SegmentScan, broken: np.ndarray, values: np.ndarray, message: str) -> None:
    """OverlappingSegments at the first batch `broken` marks, `{}` in `message` its value."""
    bad = np.flatnonzero(broken)
    if len(bad):
        i = int(bad[0])
        raise OverlappingSegments(scan.path, int(scan.table.position[i]), message.format(int(values[i])))
