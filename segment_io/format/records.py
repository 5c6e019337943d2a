"""Record framing (docs/log-format.md#records) as numba kernels that fill numpy/Arrow buffers directly.

No Python object is created per record: kernels walk concatenated records sections and write
column arrays; Arrow arrays are then assembled from those buffers without copying them again.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from segment_io.kernel import njit

# Kernel status codes (0 = ok); the caller turns them into CorruptBatch messages.
ERR_MESSAGES = {
    1: "record length varint is malformed or runs past the records section",
    2: "record length exceeds the remaining bytes",
    3: "malformed varint inside a record",
    4: "negative key length other than -1",
    5: "negative value length other than -1",
    6: "negative header count",
    7: "bad header key or value length",
    8: "record parsing did not consume exactly the declared record length",
    9: "bytes remain after the declared number of records",
}


@njit(cache=True, nogil=True, inline="always")
def _varint(buf: np.ndarray, pos: int, end: int) -> tuple[Any, int]:
    """Zig-zag varint (≤ 5 bytes, masked to 32 bits); returns (value, new pos), pos −1 on error."""
    result: Any = 0
    shift = 0
    for _ in range(5):
        if pos >= end:
            return 0, -1
        b = np.int64(buf[pos])
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            result &= 0xFFFFFFFF
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    return 0, -1


@njit(cache=True, nogil=True, inline="always")
def _varlong(buf: np.ndarray, pos: int, end: int) -> tuple[Any, int]:
    """Zig-zag varlong (≤ 10 bytes); returns (value, new pos), pos −1 on error."""
    result = np.uint64(0)
    shift = np.uint64(0)
    for _ in range(10):
        if pos >= end:
            return 0, -1
        b = np.uint64(buf[pos])
        pos += 1
        result |= (b & np.uint64(0x7F)) << shift
        if b < np.uint64(0x80):
            half = np.int64(result >> np.uint64(1))
            return half ^ -np.int64(result & np.uint64(1)), pos
        shift += np.uint64(7)
    return 0, -1


@njit(cache=True, nogil=True)
def parse_records(
    data: np.ndarray,
    sec_start: np.ndarray,
    sec_end: np.ndarray,
    rec_count: np.ndarray,
    base_offset: np.ndarray,
    base_timestamp: np.ndarray,
    max_timestamp: np.ndarray,
    log_append: np.ndarray,
    out_offset: np.ndarray,
    out_timestamp: np.ndarray,
    out_key_start: np.ndarray,
    out_key_len: np.ndarray,
    out_value_start: np.ndarray,
    out_value_len: np.ndarray,
    out_header_start: np.ndarray,
    out_header_count: np.ndarray,
    out_record_start: np.ndarray,
    out_body_start: np.ndarray,
    out_record_end: np.ndarray,
) -> tuple[int, int, int]:
    """Frame every record of every section; returns (status, batch index, byte position)."""
    n = 0
    for b in range(sec_start.shape[0]):
        pos = sec_start[b]
        end = sec_end[b]
        for _ in range(rec_count[b]):
            record_start = pos
            length, pos = _varint(data, pos, end)
            if pos < 0:
                return 1, b, record_start
            if length < 0 or pos + length > end:
                return 2, b, record_start
            record_end = pos + length
            pos += 1  # record attributes: unused
            ts_delta, pos = _varlong(data, pos, record_end)
            if pos < 0:
                return 3, b, record_start
            body_start = pos
            offset_delta, pos = _varint(data, pos, record_end)
            if pos < 0:
                return 3, b, record_start
            key_len, pos = _varint(data, pos, record_end)
            if pos < 0:
                return 3, b, record_start
            if key_len < -1 or pos + max(key_len, 0) > record_end:
                return 4, b, record_start
            key_start = pos
            if key_len > 0:
                pos += key_len
            value_len, pos = _varint(data, pos, record_end)
            if pos < 0:
                return 3, b, record_start
            if value_len < -1 or pos + max(value_len, 0) > record_end:
                return 5, b, record_start
            value_start = pos
            if value_len > 0:
                pos += value_len
            header_count, pos = _varint(data, pos, record_end)
            if pos < 0:
                return 3, b, record_start
            if header_count < 0 or header_count > record_end - pos:
                return 6, b, record_start
            header_start = pos
            for _h in range(header_count):
                hk, pos = _varint(data, pos, record_end)
                if pos < 0 or hk < 0 or pos + hk > record_end:
                    return 7, b, record_start
                pos += hk
                hv, pos = _varint(data, pos, record_end)
                if pos < 0 or hv < -1 or pos + max(hv, 0) > record_end:
                    return 7, b, record_start
                if hv > 0:
                    pos += hv
            if pos != record_end:
                return 8, b, record_start
            out_offset[n] = base_offset[b] + offset_delta
            out_timestamp[n] = max_timestamp[b] if log_append[b] else base_timestamp[b] + ts_delta
            out_key_start[n] = key_start
            out_key_len[n] = key_len
            out_value_start[n] = value_start
            out_value_len[n] = value_len
            out_header_start[n] = header_start
            out_header_count[n] = header_count
            out_record_start[n] = record_start
            out_body_start[n] = body_start
            out_record_end[n] = record_end
            n += 1
        if pos != end:
            return 9, b, pos
    return 0, -1, -1


@njit(cache=True, nogil=True)
def parse_headers(
    data: np.ndarray,
    header_start: np.ndarray,
    header_count: np.ndarray,
    out_key_start: np.ndarray,
    out_key_len: np.ndarray,
    out_value_start: np.ndarray,
    out_value_len: np.ndarray,
) -> None:
    """Locate every header key/value (records already validated by parse_records)."""
    h = 0
    for r in range(header_start.shape[0]):
        pos = header_start[r]
        end = data.shape[0]
        for _ in range(header_count[r]):
            hk, pos = _varint(data, pos, end)
            out_key_start[h] = pos
            out_key_len[h] = hk
            pos += hk
            hv, pos = _varint(data, pos, end)
            out_value_start[h] = pos
            out_value_len[h] = hv
            if hv > 0:
                pos += hv
            h += 1


@njit(cache=True, nogil=True)
def gather(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Copy byte ranges into one buffer; returns (int32 Arrow offsets, values). len −1 = null."""
    n = starts.shape[0]
    offsets = np.empty(n + 1, dtype=np.int32)
    total = 0
    for i in range(n):
        offsets[i] = total
        if lengths[i] > 0:
            total += lengths[i]
    offsets[n] = total
    values = np.empty(total, dtype=np.uint8)
    for i in range(n):
        o = np.int64(offsets[i])
        s = starts[i]
        length = lengths[i]
        if length > 16:
            values[o : o + length] = data[s : s + length]
        else:  # a slice view costs more than copying a short key byte by byte
            for j in range(length):
                values[o + j] = data[s + j]
    return offsets, values


@njit(cache=True, nogil=True, inline="always")
def _put_varint(out: np.ndarray, pos: int, value: int) -> int:
    u = np.uint64((value << 1) ^ (value >> 63))
    while u >= np.uint64(0x80):
        out[pos] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
        u >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(u)
    return pos + 1


@njit(cache=True, nogil=True, inline="always")
def _put_field(out: np.ndarray, pos: int, data: np.ndarray, start: int, end: int, null: bool) -> int:
    """A length-prefixed field (−1 for null) holding data[start:end]."""
    if null:
        return _put_varint(out, pos, -1)
    pos = _put_varint(out, pos, end - start)
    out[pos : pos + end - start] = data[start:end]
    return pos + end - start


@njit(cache=True, nogil=True, inline="always")
def _varint_size(value: int) -> int:
    u = np.uint64((value << 1) ^ (value >> 63))
    size = 1
    while u >= np.uint64(0x80):
        u >>= np.uint64(7)
        size += 1
    return size


@njit(cache=True, nogil=True)
def encode_records(
    offset_delta: np.ndarray,
    timestamp_delta: np.ndarray,
    key_offsets: np.ndarray,
    key_data: np.ndarray,
    key_null: np.ndarray,
    value_offsets: np.ndarray,
    value_data: np.ndarray,
    value_null: np.ndarray,
    header_offsets: np.ndarray,
    hkey_offsets: np.ndarray,
    hkey_data: np.ndarray,
    hvalue_offsets: np.ndarray,
    hvalue_data: np.ndarray,
    hvalue_null: np.ndarray,
) -> np.ndarray:
    """Serialise records (docs/log-format.md#records) from Arrow-style columns into one
    uncompressed section."""
    n = offset_delta.shape[0]
    bodies = np.empty(n, dtype=np.int64)
    total = 0
    for i in range(n):
        size = 1 + _varint_size(timestamp_delta[i]) + _varint_size(offset_delta[i])
        klen = -1 if key_null[i] else key_offsets[i + 1] - key_offsets[i]
        vlen = -1 if value_null[i] else value_offsets[i + 1] - value_offsets[i]
        size += _varint_size(klen) + max(klen, 0) + _varint_size(vlen) + max(vlen, 0)
        h0 = header_offsets[i]
        h1 = header_offsets[i + 1]
        size += _varint_size(h1 - h0)
        for h in range(h0, h1):
            hk = hkey_offsets[h + 1] - hkey_offsets[h]
            hv = -1 if hvalue_null[h] else hvalue_offsets[h + 1] - hvalue_offsets[h]
            size += _varint_size(hk) + hk + _varint_size(hv) + max(hv, 0)
        bodies[i] = size
        total += _varint_size(size) + size
    out = np.empty(total, dtype=np.uint8)
    pos = 0
    for i in range(n):
        pos = _put_varint(out, pos, bodies[i])
        out[pos] = 0
        pos += 1
        pos = _put_varint(out, pos, timestamp_delta[i])
        pos = _put_varint(out, pos, offset_delta[i])
        pos = _put_field(out, pos, key_data, key_offsets[i], key_offsets[i + 1], key_null[i])
        pos = _put_field(out, pos, value_data, value_offsets[i], value_offsets[i + 1], value_null[i])
        h0 = header_offsets[i]
        h1 = header_offsets[i + 1]
        pos = _put_varint(out, pos, h1 - h0)
        for h in range(h0, h1):
            pos = _put_field(out, pos, hkey_data, hkey_offsets[h], hkey_offsets[h + 1], False)
            pos = _put_field(out, pos, hvalue_data, hvalue_offsets[h], hvalue_offsets[h + 1], hvalue_null[h])
    return out


@njit(cache=True, nogil=True)
def rebase_batches(
    data: np.ndarray,
    record_start: np.ndarray,
    body_start: np.ndarray,
    record_end: np.ndarray,
    timestamp: np.ndarray,
    keep: np.ndarray,
    first: np.ndarray,
    stop: np.ndarray,
    horizon: np.ndarray,
    has_horizon: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Re-emit the kept records of several batches (records `first[b]:stop[b]`, each with at least
    one kept) with timestamp deltas relative to each batch's new base timestamp: `horizon[b]` if
    `has_horizon[b]`, else the first kept record's timestamp.

    Everything after the timestamp delta (offset delta, key, value, headers) is copied verbatim,
    so offsets are never renumbered; only the length and timestamp-delta varints are rewritten.
    Returns (sections, section bounds [nb + 1], base timestamps, largest kept timestamps)."""
    nb = first.shape[0]
    base = np.empty(nb, dtype=np.int64)
    largest = np.empty(nb, dtype=np.int64)
    bounds = np.empty(nb + 1, dtype=np.int64)
    total = 0
    for b in range(nb):
        bounds[b] = total
        base[b] = horizon[b]
        found = has_horizon[b]
        largest[b] = np.iinfo(np.int64).min
        for i in range(first[b], stop[b]):
            if keep[i]:
                if not found:
                    base[b] = timestamp[i]
                    found = True
                largest[b] = max(largest[b], timestamp[i])
                size = 1 + _varint_size(timestamp[i] - base[b]) + record_end[i] - body_start[i]
                total += _varint_size(size) + size
    bounds[nb] = total
    out = np.empty(total, dtype=np.uint8)
    pos = 0
    for b in range(nb):
        for i in range(first[b], stop[b]):
            if keep[i]:
                rest = record_end[i] - body_start[i]
                delta = timestamp[i] - base[b]
                pos = _put_varint(out, pos, 1 + _varint_size(delta) + rest)
                attr = record_start[i]
                while data[attr] >= 0x80:  # skip the old length varint to the attributes byte
                    attr += 1
                out[pos] = data[attr + 1]
                pos += 1
                pos = _put_varint(out, pos, delta)
                out[pos : pos + rest] = data[body_start[i] : record_end[i]]
                pos += rest
    return out, bounds, base, largest


def binary_array(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, string: bool = False) -> pa.Array:
    """Arrow binary (or utf8) array of the byte ranges; a length of −1 is null."""
    offsets, values = gather(data, starts, lengths)
    null = lengths < 0
    n = len(starts)
    validity = None
    null_count = int(null.sum())
    if null_count:
        validity = pa.py_buffer(np.packbits(~null, bitorder="little"))
    arr = pa.Array.from_buffers(
        pa.string() if string else pa.binary(),
        n,
        [validity, pa.py_buffer(offsets), pa.py_buffer(values)],
        null_count=null_count,
    )
    return arr
