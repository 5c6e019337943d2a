"""Snappy compression as Kafka's producer and cleaner compress: the block format of Google's
snappy 1.1.10, the library inside snappy-java 1.1.10.x, which Kafka uses, built without the
CRC32 instruction hash (its multiplicative hash), compiled with numba.

Another snappy encoder (Rust's `snap`, through cramjam, or a newer C++ snappy) makes a valid
block from the same bytes that is not always the same block: it searches matches in another
order. Kafka's record batches are compressed by the library's CompressFragment, ported here step
for step so that a batch segpipe rewrites is the batch Kafka would write, byte for byte:
- the input is cut into fragments of 64 KiB, each with a fresh hash table of the smallest power
  of two of at least its size (256 to 16,384 entries); the block begins with the whole input's
  length as a varint;
- a 4-byte value's slot is `(0x1e35a7bd * value mod 2^32) >> 17` masked to the table;
- the first 16 positions after a literal starts are probed one by one, then the gap between
  probes grows by one byte every 32 bytes without a match;
- after a copy, the position before its end is hashed too, and a match at its end continues the
  copy chain without a literal;
- literals of up to 60 bytes take their length in the tag byte, longer ones 1-4 more bytes;
  copies are emitted 64 bytes at a time (60 where 64 would leave fewer than 4), a copy of 4-11
  bytes at an offset below 2048 in two bytes, others in three.
"""

from __future__ import annotations

import numpy as np

from segment_io.kernel import njit

BLOCK_SIZE = 1 << 16
_MIN_TABLE, _MAX_TABLE = 1 << 8, 1 << 14
_MAGIC = np.uint32(0x1E35A7BD)
_INPUT_MARGIN = 15


@njit(cache=True, nogil=True, inline="always")
def _load32(b: np.ndarray, i: int) -> np.uint32:
    return (
        np.uint32(b[i])
        | (np.uint32(b[i + 1]) << 8)
        | (np.uint32(b[i + 2]) << 16)
        | (np.uint32(b[i + 3]) << 24)
    )


@njit(cache=True, nogil=True, inline="always")
def _slot(value: np.uint32, mask: int) -> int:
    h = np.uint32(np.uint64(_MAGIC) * np.uint64(value) & np.uint64(0xFFFFFFFF)) >> np.uint32(17)
    return int(h & np.uint32(mask)) >> 1


@njit(cache=True, nogil=True)
def _literal(out: np.ndarray, op: int, src: np.ndarray, start: int, length: int) -> int:
    n = length - 1
    if n < 60:
        out[op] = n << 2
        op += 1
    else:
        count = 1
        while n >> (8 * count):
            count += 1
        out[op] = (59 + count) << 2
        op += 1
        for k in range(count):
            out[op + k] = (n >> (8 * k)) & 0xFF
        op += count
    out[op : op + length] = src[start : start + length]
    return op + length


@njit(cache=True, nogil=True)
def _copy_at_most_64(out: np.ndarray, op: int, offset: int, length: int) -> int:
    if length < 12 and offset < 2048:
        out[op] = 1 + ((length - 4) << 2) + ((offset >> 8) << 5)
        out[op + 1] = offset & 0xFF
        return op + 2
    out[op] = 2 + ((length - 1) << 2)
    out[op + 1] = offset & 0xFF
    out[op + 2] = (offset >> 8) & 0xFF
    return op + 3


@njit(cache=True, nogil=True)
def _copy(out: np.ndarray, op: int, offset: int, length: int) -> int:
    while length >= 68:
        op = _copy_at_most_64(out, op, offset, 64)
        length -= 64
    if length > 64:
        op = _copy_at_most_64(out, op, offset, 60)
        length -= 60
    return _copy_at_most_64(out, op, offset, length)


@njit(cache=True, nogil=True)
def _fragment(src: np.ndarray, out: np.ndarray, op: int, table: np.ndarray) -> int:
    """CompressFragment: `src` (at most 64 KiB) into `out` from `op`; returns the new `op`."""
    n = src.shape[0]
    mask = 2 * (table.shape[0] - 1)
    ip = 0
    if n >= _INPUT_MARGIN:
        ip_limit = n - _INPUT_MARGIN
        preload = _load32(src, ip + 1)
        while True:
            next_emit = ip
            ip += 1
            skip = 32
            candidate = -1
            matched_early = False
            if ip_limit - ip >= 16:
                for i in range(16):
                    dword = preload if i == 0 else _load32(src, ip + i)
                    slot = _slot(dword, mask)
                    candidate = int(table[slot])
                    table[slot] = ip + i
                    if _load32(src, candidate) == dword:
                        out[op] = i << 2  # a literal of i + 1 bytes: [next_emit, ip + i)
                        out[op + 1 : op + 2 + i] = src[next_emit : next_emit + i + 1]
                        ip += i
                        op += i + 2
                        matched_early = True
                        break
                if not matched_early:
                    ip += 16
                    skip += 16
            if not matched_early:
                found = False
                while True:
                    data = _load32(src, ip)
                    slot = _slot(data, mask)
                    between = skip >> 5
                    skip += between
                    next_ip = ip + between
                    if next_ip > ip_limit:
                        break
                    candidate = int(table[slot])
                    table[slot] = ip
                    if data == _load32(src, candidate):
                        found = True
                        break
                    ip = next_ip
                if not found:
                    ip = next_emit
                    break  # emit the remainder
                op = _literal(out, op, src, next_emit, ip - next_emit)
            # A 4-byte match at ip: copies while the bytes after each copy match again.
            remainder = False
            while True:
                base = ip
                matched = 4
                while ip + matched < n and src[candidate + matched] == src[ip + matched]:
                    matched += 1
                ip += matched
                op = _copy(out, op, base - candidate, matched)
                if ip >= ip_limit:
                    remainder = True
                    break
                table[_slot(_load32(src, ip - 1), mask)] = ip - 1
                data = _load32(src, ip)
                slot = _slot(data, mask)
                candidate = int(table[slot])
                table[slot] = ip
                if data != _load32(src, candidate):
                    break
            if remainder:
                break
            preload = _load32(src, ip + 1)
    if ip < n:
        op = _literal(out, op, src, ip, n - ip)
    return op


@njit(cache=True, nogil=True)
def _varint(out: np.ndarray, value: int) -> int:
    """`value` as a varint at the start of `out`; returns its length."""
    op = 0
    while value >= 0x80:
        out[op] = (value & 0x7F) | 0x80
        op += 1
        value >>= 7
    out[op] = value
    return op + 1


@njit(cache=True, nogil=True)
def _compress(src: np.ndarray, out: np.ndarray) -> int:
    op = _varint(out, src.shape[0])  # the uncompressed length
    for start in range(0, src.shape[0], BLOCK_SIZE):
        fragment = src[start : min(start + BLOCK_SIZE, src.shape[0])]
        size = _MIN_TABLE
        while size < fragment.shape[0] and size < _MAX_TABLE:
            size <<= 1
        op = _fragment(fragment, out, op, np.zeros(size, dtype=np.uint16))
    return op


def max_compressed_length(n: int) -> int:
    return 32 + n + n // 6


def snappy_compress(data: bytes | memoryview) -> bytes:
    """One raw snappy block of `data`, as snappy 1.1.10 writes it."""
    src = np.frombuffer(data, dtype=np.uint8)
    out = np.empty(max_compressed_length(len(src)) + 8, dtype=np.uint8)
    return out[: _compress(src, out)].tobytes()
