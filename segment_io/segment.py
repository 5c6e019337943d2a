"""SegmentReader (shallow header scan, deep record scan) and SegmentWriter (rolling, indexes)."""

from __future__ import annotations

import posixpath
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from typing import IO, Any

import crc32c
import numpy as np
import pyarrow as pa
from numba import njit

from segment_io import records as rec
from segment_io.batch import (
    CODEC_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    MIN_ENTRY_SIZE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    V2_EMPTY_BATCH_LENGTH,
    V2_HEADER_SIZE,
    Codec,
    LegacyEntry,
    parse_legacy_entry,
)
from segment_io.checksums import NATIVE_CRC32C, V2_CRC_FROM, first_bad_v2_crc
from segment_io.codec_kernels import decompress_sections, native_codecs
from segment_io.compression import decompress, decompress_into, decompress_view
from segment_io.errors import (
    BadLength,
    CorruptBatch,
    CrcMismatch,
    OverlappingSegments,
    TruncatedSegment,
    UnknownMagic,
    UnsupportedCodec,
)
from segment_io.index import AbortedTxn, IndexBuilder
from segment_io.layout import segment_file_name
from segment_io.storage import Storage

# ---------------------------------------------------------------------------------------------
# Shallow scan: batch headers only, no decompression (format §6).

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
def _count_batches(buf: np.ndarray) -> tuple[int, int, int]:
    """(batches, status, position where the walk stopped)."""
    end = buf.shape[0]
    pos = 0
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
    pos = 0
    for i in range(n):
        s = _i32(buf, pos + 8)
        m = np.int64(buf[pos + 16])
        offset = _i64(buf, pos)
        position[i] = pos
        size[i] = LOG_OVERHEAD + s
        magic[i] = m
        crc[i] = _u32(buf, pos + 17) if m == 2 else _u32(buf, pos + LOG_OVERHEAD)
        if m == 2:
            base_offset[i] = offset
            leader_epoch[i] = _i32(buf, pos + 12)
            attributes[i] = np.int64(buf[pos + 22])  # only the low byte is meaningful
            last_offset[i] = offset + _i32(buf, pos + 23)
            base_timestamp[i] = _i64(buf, pos + 27)
            max_timestamp[i] = _i64(buf, pos + 35)
            producer_id[i] = _i64(buf, pos + 43)
            producer_epoch[i] = _i16(buf, pos + 51)
            base_sequence[i] = _i32(buf, pos + 53)
            records_count[i] = _i32(buf, pos + 57)
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


def scan_buffer(path: str, base_offset: int, buf: np.ndarray) -> SegmentScan:
    """Shallow-scan a whole `.log` buffer; corrupt headers raise, a partial tail is reported."""
    n, status, stop = _count_batches(buf)
    table = BatchTable.empty(n)
    _fill_batches(buf, n, *(getattr(table, f.name) for f in fields(table)))
    tail = None
    if status == _BAD_LENGTH:
        size = int(_i32(buf, stop + 8))
        raise BadLength(path, stop, f"batch size field {size} is below the minimum for its magic")
    if status == _BAD_MAGIC:
        raise UnknownMagic(path, stop, f"magic byte {int(buf[stop + 16])} is not 0, 1 or 2")
    if status == _PARTIAL:
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
        table.position[rows].tolist(), table.size[rows].tolist(), table.magic[rows].tolist(),
        table.crc[rows].tolist(), strict=True,
    ):  # fmt: skip
        if magic == 2:
            actual = crc32c.crc32c(view[pos + V2_CRC_FROM : pos + size])
        else:
            actual = zlib.crc32(view[pos + 16 : pos + size]) & 0xFFFFFFFF
        if actual != stored:
            raise CrcMismatch(path, pos, f"stored 0x{stored:08x}, computed 0x{actual:08x}")


# ---------------------------------------------------------------------------------------------
# Deep scan: records of a range of batches, framed by the numba kernels of records.py.


@dataclass(frozen=True)
class Sections:
    """Uncompressed records sections of selected batches, all inside one byte buffer.

    Legacy (magic 0/1) entries are converted to v2-framed sections here, so every consumer
    downstream handles one record layout. `base_offset` is the first record's offset basis.
    """

    data: np.ndarray
    batch_index: np.ndarray
    start: np.ndarray
    end: np.ndarray
    count: np.ndarray
    base_offset: np.ndarray
    base_timestamp: np.ndarray
    max_timestamp: np.ndarray
    log_append: np.ndarray
    first_offset: np.ndarray  # derived batch base offset (legacy wrappers: first inner offset)


@dataclass(frozen=True)
class Framed:
    """Per-record framing of `Sections` (positions into `sections.data`)."""

    sections: Sections
    record_batch: np.ndarray  # index into sections arrays
    offset: np.ndarray
    timestamp: np.ndarray
    key_start: np.ndarray
    key_len: np.ndarray
    value_start: np.ndarray
    value_len: np.ndarray
    header_start: np.ndarray
    header_count: np.ndarray
    record_start: np.ndarray
    body_start: np.ndarray
    record_end: np.ndarray

    def __len__(self) -> int:
        return int(self.offset.shape[0])


def _legacy_records(
    path: str, buf: np.ndarray, pos: int, size: int
) -> tuple[list[tuple[int, int, bytes | None, bytes | None]], bool, int]:
    """Inner records (offset, timestamp, key, value) of a legacy entry, whether timestamps are the
    wrapper's LogAppendTime, and the wrapper timestamp."""
    raw = buf[pos : pos + size].tobytes()
    entry = parse_legacy_entry(raw, 0, size)
    if isinstance(entry, str):
        raise CorruptBatch(path, pos, entry)
    log_append = entry.timestamp_type.value == 1
    if entry.codec == Codec.NONE:
        return [(entry.offset, entry.timestamp, entry.key, entry.value)], log_append, entry.timestamp
    if entry.value is None:
        raise CorruptBatch(path, pos, "compressed legacy wrapper has a null value")
    try:
        inner = decompress(entry.codec, entry.value, entry.magic)
    except ValueError as exc:
        raise CorruptBatch(path, pos, str(exc)) from None
    messages: list[LegacyEntry] = []
    p = 0
    while p < len(inner):
        if len(inner) - p < LOG_OVERHEAD + 6:
            raise CorruptBatch(path, pos, "compressed legacy wrapper ends inside an inner message")
        inner_size = int.from_bytes(inner[p + 8 : p + 12], "big", signed=True)
        if inner_size < MIN_ENTRY_SIZE or p + LOG_OVERHEAD + inner_size > len(inner):
            raise CorruptBatch(path, pos, f"inner message size {inner_size} is invalid")
        msg = parse_legacy_entry(inner, p, p + LOG_OVERHEAD + inner_size)
        if isinstance(msg, str):
            raise CorruptBatch(path, pos, f"inner message: {msg}")
        if msg.codec != Codec.NONE:
            raise CorruptBatch(path, pos, "nested compression inside a legacy wrapper")
        messages.append(msg)
        p += LOG_OVERHEAD + inner_size
    if not messages:
        raise CorruptBatch(path, pos, "compressed legacy wrapper holds no messages")
    out = []
    last_rel = messages[-1].offset
    for msg in messages:
        if entry.magic == 1 and entry.offset != 0:
            offset = entry.offset - last_rel + msg.offset
        else:
            offset = msg.offset
        ts = entry.timestamp if log_append else msg.timestamp
        out.append((offset, ts, msg.key, msg.value))
    return out, log_append, entry.timestamp


_CODECS = {int(c): c for c in Codec}


def grow(array: np.ndarray, size: int, keep: int, zero: bool = False) -> np.ndarray:
    """`array` if it holds `size` items, else a larger one (at least 1.5×, so repeated growth
    stays linear) holding its first `keep` items; `zero` clears the rest."""
    if len(array) >= size:
        return array
    grown = (np.zeros if zero else np.empty)(max(size, len(array) * 3 // 2), dtype=array.dtype)
    grown[:keep] = array[:keep]
    return grown


class Arena:
    """A growable byte buffer that decompressed sections are written into.

    A task that frames chunk after chunk passes one arena to every `frame` call: its pages are
    touched once, where a fresh buffer per chunk page-faults on every use (a large share of the
    codecs' time). Whatever a `frame` call returned is overwritten by the next call on the same
    arena, so only callers done with a chunk before the next share one."""

    def __init__(self) -> None:
        self.buf = np.empty(0, dtype=np.uint8)
        self.ratio = 4.0  # largest uncompressed/compressed ratio seen: sizes the next chunk

    def reserve(self, nbytes: int, keep: int = 0) -> np.ndarray:
        """A buffer of at least `nbytes`, holding the first `keep` bytes of the current one."""
        self.buf = grow(self.buf, nbytes, keep)
        return self.buf


def read_sections(
    path: str, buf: np.ndarray, table: BatchTable, index: np.ndarray, arena: Arena | None = None
) -> Sections:
    """Decompress (or point at) the records sections of batches `index` (ascending).

    Compressed sections are decompressed straight into `arena` (a fresh one if None), next to
    copies of the uncompressed and converted legacy ones."""
    k = len(index)
    sections = Sections(
        buf[:0],
        index,
        np.zeros(k, dtype=np.int64),
        np.zeros(k, dtype=np.int64),
        table.records_count[index].copy(),
        table.base_offset[index].copy(),
        table.base_timestamp[index].copy(),
        table.max_timestamp[index].copy(),
        table.log_append_time[index].copy(),
        table.base_offset[index].copy(),
    )
    if k == 0:
        return sections
    magic = table.magic[index]
    codec = table.attributes[index] & CODEC_MASK
    if not ((magic < 2) | (codec != 0)).any():
        # Only uncompressed v2 batches: records are framed in place, nothing is copied.
        lo = int(table.position[index[0]])
        hi = int(table.position[index[-1]] + table.size[index[-1]])
        sections.start[:] = table.position[index] + V2_HEADER_SIZE - lo
        sections.end[:] = table.position[index] + table.size[index] - lo
        return replace(sections, data=buf[lo:hi])
    arena = arena or Arena()
    positions, sizes = table.position[index], table.size[index]
    payload = sizes - V2_HEADER_SIZE
    compressed = int(payload[codec != 0].sum())
    out = arena.reserve(int(payload[codec == 0].sum() + compressed * arena.ratio) + 1024)
    # The kernel takes every section it can decode natively; the rest stay pending for the
    # Python path below, which also grows the arena and names what does not decode.
    pending = np.zeros(k, dtype=np.bool_)
    lz4_ok, zstd_ctx = native_codecs()
    total = decompress_sections(
        buf, positions, sizes, table.attributes[index], magic, out, sections.start, sections.end, pending,
        lz4_ok, zstd_ctx,
    )  # fmt: skip
    rest = np.flatnonzero(pending)
    if len(rest):
        total, out = _read_pending(path, buf, table, rest, arena, out, total, sections)
    if compressed:
        decompressed = total - int(payload[(codec == 0) & (magic == 2)].sum())
        arena.ratio = max(arena.ratio, decompressed / compressed)
    return replace(sections, data=out[:total])


def _read_pending(
    path: str,
    buf: np.ndarray,
    table: BatchTable,
    rest: np.ndarray,
    arena: Arena,
    out: np.ndarray,
    total: int,
    sections: Sections,
) -> tuple[int, np.ndarray]:
    """Sections `rest` (rows of `sections`) that the kernel left: snappy, gzip, legacy entries and
    anything that did not decode or fit there; fills their rows. Returns the new total and the
    (possibly grown) buffer."""
    view = buf.data
    start, end = sections.start, sections.end
    batches = sections.batch_index[rest]
    attributes, sizes = table.attributes[batches], table.size[batches]
    payload = sizes - V2_HEADER_SIZE
    remaining = float(np.where(attributes & CODEC_MASK, payload * arena.ratio, payload).sum())
    for j, pos, size, m, attrs in zip(
        rest.tolist(),
        table.position[batches].tolist(),
        sizes.tolist(),
        table.magic[batches].tolist(),
        attributes.tolist(),
        strict=True,
    ):
        section: bytes | memoryview
        if m == 2:
            section = view[pos + V2_HEADER_SIZE : pos + size]
            c = _CODECS.get(attrs & CODEC_MASK)
            if c is None:
                raise CorruptBatch(path, pos, f"codec {attrs & CODEC_MASK} is not supported")
            if c is not Codec.NONE:
                remaining -= len(section) * arena.ratio
                try:
                    length = decompress_into(c, section, out.data[total:])
                    start[j], end[j] = total, total + length
                    total += length
                    continue
                except ValueError:
                    pass  # does not fit, or does not decode: decompress_view tells which
                try:
                    section = decompress_view(c, section, 2)
                except ValueError as exc:
                    raise CorruptBatch(path, pos, str(exc)) from None
            else:
                remaining -= len(section)
        else:
            section = _legacy_section(path, buf, pos, size, j, sections)
        length = len(section)
        if total + length > len(out):
            out = arena.reserve(total + length + max(int(remaining), 0) + 1024, keep=total)
        out[total : total + length] = np.frombuffer(section, dtype=np.uint8)
        start[j], end[j] = total, total + length
        total += length
    return total, out


def _legacy_section(path: str, buf: np.ndarray, pos: int, size: int, j: int, sections: Sections) -> bytes:
    """A v0/v1 entry (or compressed wrapper) as a v2-framed records section; fills row `j` of
    the per-batch arrays with what the conversion learns (offsets, timestamps, count)."""
    inner, la, wrapper_ts = _legacy_records(path, buf, pos, size)
    first, first_ts = inner[0][0], inner[0][1]
    cols = rec.RecordColumns.from_records(
        [(o - first, (t - first_ts) if t >= 0 and first_ts >= 0 else 0, kk, v, []) for o, t, kk, v in inner]
    )
    sections.count[j] = len(inner)
    sections.base_offset[j] = sections.first_offset[j] = first
    no_timestamp = first_ts < 0 or (not la and any(t < 0 for _, t, _, _ in inner))
    sections.base_timestamp[j] = NO_TIMESTAMP if no_timestamp else first_ts  # magic 0 has none
    sections.max_timestamp[j] = wrapper_ts
    sections.log_append[j] = la
    return cols.encode()


def frame_records(path: str, table: BatchTable, sections: Sections) -> Framed:
    """Run the framing kernel; malformed records raise CorruptBatch at the batch's position."""
    n = int(sections.count.sum())
    arrays = [np.empty(n, dtype=np.int64) for _ in range(11)]
    status, b, at = rec.parse_records(
        sections.data,
        sections.start,
        sections.end,
        sections.count,
        sections.base_offset,
        sections.base_timestamp,
        sections.max_timestamp,
        sections.log_append,
        *arrays,
    )
    if status:
        batch = int(sections.batch_index[b])
        pos = int(table.position[batch])
        compressed = table.codec[batch] != 0 or table.magic[batch] != 2
        if not compressed:
            pos = pos + V2_HEADER_SIZE + int(at - sections.start[b])
        raise CorruptBatch(path, pos, rec.ERR_MESSAGES[status])
    record_batch = np.repeat(np.arange(len(sections.count), dtype=np.int64), sections.count)
    return Framed(sections, record_batch, *arrays)


RECORD_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("timestamp_type", pa.string()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        (
            "headers",
            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
        ),
        ("segment_base_offset", pa.int64()),
        ("batch_position", pa.int64()),
        ("batch_base_offset", pa.int64()),
        ("batch_last_offset", pa.int64()),
        ("magic", pa.int8()),
        ("codec", pa.string()),
        ("is_transactional", pa.bool_()),
        ("is_control", pa.bool_()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("base_sequence", pa.int32()),
        ("partition_leader_epoch", pa.int32()),
        ("delete_horizon_ms", pa.int64()),
    ]
)

_CODEC_NAMES = ["none", "gzip", "snappy", "lz4", "zstd", "?", "?", "?"]
_TS_TYPE_NAMES = ["NoTimestampType", "CreateTime", "LogAppendTime"]


def _strings(names: list[str], codes: np.ndarray) -> pa.Array:
    """A utf8 column holding names[code] per row (an Arrow take, no Python object per row)."""
    return pa.array(names, pa.string()).take(pa.array(codes))


def framed_to_arrow(
    framed: Framed, table: BatchTable, topic: str, partition: int, segment_base_offset: int
) -> pa.RecordBatch:
    """Arrow columns of the deep scan, built from buffers (no Python object per record)."""
    s = framed.sections
    n = len(framed)
    data = s.data

    def per_record(batch_values: np.ndarray) -> np.ndarray:
        """Broadcast a batch-table column to the records of each selected batch."""
        return np.repeat(batch_values[s.batch_index], s.count)

    header_total = int(framed.header_count.sum())
    hk_start = np.empty(header_total, dtype=np.int64)
    hk_len = np.empty(header_total, dtype=np.int64)
    hv_start = np.empty(header_total, dtype=np.int64)
    hv_len = np.empty(header_total, dtype=np.int64)
    rec.parse_headers(data, framed.header_start, framed.header_count, hk_start, hk_len, hv_start, hv_len)
    header_struct = pa.StructArray.from_arrays(
        [rec.binary_array(data, hk_start, hk_len, string=True), rec.binary_array(data, hv_start, hv_len)],
        names=["key", "value"],
    )
    list_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(framed.header_count, out=list_offsets[1:])
    headers = pa.ListArray.from_arrays(pa.array(list_offsets), header_struct)
    magic = table.magic[s.batch_index]
    attrs = table.attributes[s.batch_index]
    ts_type = np.where(magic == 0, 0, np.where((attrs & TIMESTAMP_TYPE_MASK) != 0, 2, 1))
    has_horizon = np.repeat((magic == 2) & ((attrs & DELETE_HORIZON_MASK) != 0), s.count)
    columns = [
        _strings([topic], np.zeros(n, dtype=np.int64)),
        pa.array(np.full(n, partition, dtype=np.int32)),
        pa.array(framed.offset),
        pa.array(framed.timestamp),
        _strings(_TS_TYPE_NAMES, np.repeat(ts_type, s.count)),
        rec.binary_array(data, framed.key_start, framed.key_len),
        rec.binary_array(data, framed.value_start, framed.value_len),
        headers,
        pa.array(np.full(n, segment_base_offset, dtype=np.int64)),
        pa.array(per_record(table.position)),
        pa.array(np.repeat(s.first_offset, s.count)),
        pa.array(per_record(table.last_offset)),
        pa.array(np.repeat(magic.astype(np.int8), s.count)),
        _strings(_CODEC_NAMES, np.repeat(attrs & CODEC_MASK, s.count)),
        pa.array(np.repeat((magic == 2) & ((attrs & TRANSACTIONAL_MASK) != 0), s.count)),
        pa.array(np.repeat((magic == 2) & ((attrs & CONTROL_MASK) != 0), s.count)),
        pa.array(per_record(table.producer_id)),
        pa.array(per_record(table.producer_epoch).astype(np.int16)),
        pa.array(per_record(table.base_sequence).astype(np.int32)),
        pa.array(per_record(table.leader_epoch).astype(np.int32)),
        pa.array(per_record(table.base_timestamp), mask=~has_horizon),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=RECORD_SCHEMA)


# About 1 MB of log per chunk: its decompressed sections (a few MB) stay in the CPU caches while
# they are framed and their keys read, where 4 MB chunks went to memory in between (measured: a
# third less time per byte for decompression and framing together).
CHUNK_BYTES = 1024 * 1024


def chunk_batches(table: BatchTable, chunk_bytes: int = CHUNK_BYTES) -> Iterator[np.ndarray]:
    """Consecutive batch index ranges of about `chunk_bytes` of log data each."""
    n = len(table)
    i = 0
    while i < n:
        j = int(np.searchsorted(table.position, table.position[i] + chunk_bytes, side="left"))
        j = max(j, i + 1)
        yield np.arange(i, j, dtype=np.int64)
        i = j


# ---------------------------------------------------------------------------------------------


class SegmentReader:
    """Reads one `.log` file: header table, CRCs, and records as Arrow batches."""

    def __init__(self, storage: Storage, path: str, base_offset: int) -> None:
        self.storage = storage
        self.path = path
        self.base_offset = base_offset
        self._buf: np.ndarray | None = None
        self._scan: SegmentScan | None = None

    @property
    def buffer(self) -> np.ndarray:
        if self._buf is None:
            self._buf = self.storage.read_array(self.path)
        return self._buf

    def scan(self) -> SegmentScan:
        if self._scan is None:
            self._scan = scan_buffer(self.path, self.base_offset, self.buffer)
        return self._scan

    def verify_crcs(self) -> None:
        verify_crcs(self.path, self.buffer, self.scan().table)

    def batch_bytes(self, i: int) -> memoryview:
        table = self.scan().table
        pos = int(table.position[i])
        return self.buffer.data[pos : pos + int(table.size[i])]

    def frame(self, index: np.ndarray, arena: Arena | None = None) -> Framed:
        """Records of batches `index`; with an `arena`, valid until its next use (see Arena)."""
        table = self.scan().table
        return frame_records(self.path, table, read_sections(self.path, self.buffer, table, index, arena))

    def record_batches(
        self, topic: str, partition: int, chunk_bytes: int = 16 * 1024 * 1024
    ) -> Iterator[pa.RecordBatch]:
        table = self.scan().table
        for index in chunk_batches(table, chunk_bytes):
            yield framed_to_arrow(self.frame(index), table, topic, partition, self.base_offset)


def check_segment_ranges(scans: list[SegmentScan]) -> None:
    """Every batch of a segment lies in [its base offset, the next segment's base offset)."""
    for k, scan in enumerate(scans):
        table = scan.table
        if not len(table):
            continue
        next_base = scans[k + 1].base_offset if k + 1 < len(scans) else None
        last = table.last_offset
        first = np.where(table.base_offset >= 0, table.base_offset, last)
        low = np.flatnonzero(first < scan.base_offset)
        if len(low):
            i = int(low[0])
            raise OverlappingSegments(
                scan.path,
                int(table.position[i]),
                f"batch offset {int(first[i])} is below the segment base offset {scan.base_offset}",
            )
        if next_base is not None:
            high = np.flatnonzero(last >= next_base)
            if len(high):
                i = int(high[0])
                raise OverlappingSegments(
                    scan.path,
                    int(table.position[i]),
                    f"batch last offset {int(last[i])} reaches the next segment's base offset {next_base}",
                )
        rel = last - scan.base_offset
        over = np.flatnonzero(rel > 2**31 - 1)
        if len(over):
            i = int(over[0])
            raise OverlappingSegments(
                scan.path, int(table.position[i]), "offset does not fit the segment's 32-bit relative range"
            )


# ---------------------------------------------------------------------------------------------
# Writing


@dataclass(frozen=True)
class SegmentLimits:
    """Roll limits of output segments (Kafka's segment.bytes, segment.index.bytes, ...)."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096


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
    handle: IO[bytes]
    tmp_path: str | None
    index: IndexBuilder
    size: int = 0
    batches: int = 0
    last_offset: int = -1
    aborted: list[AbortedTxn] = field(default_factory=list)


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
        handle, tmp = self.storage.open_write(log_path)
        return _Open(
            base_offset,
            log_path,
            handle,
            tmp,
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
        return last_offset - seg.base_offset > 2**31 - 1

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
        seg.handle.write(batch)
        seg.size += size
        seg.batches += 1
        seg.last_offset = last_offset

    def append_aborted(self, txn: AbortedTxn) -> None:
        """Index an aborted transaction in the open segment (its ABORT marker was just appended)."""
        assert self._open is not None
        self._open.aborted.append(txn)

    def close_segment(self, mtime_ms: int | None = None) -> None:
        seg = self._open
        if seg is None:
            return
        self._open = None
        index, time_index = seg.index.finish()
        self.storage.finish_write(seg.handle, seg.tmp_path, seg.log_path, mtime_ms)
        stem = seg.log_path[: -len(".log")]
        self.storage.write_atomic(stem + ".index", index, mtime_ms)
        self.storage.write_atomic(stem + ".timeindex", time_index, mtime_ms)
        if seg.aborted:
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
