"""Decompression of many records sections in one numba call (the deep scan's hot path).

The kernel calls the C decoders that the codec packages already ship (python-lz4's
`LZ4_decompress_safe`, zstandard's `ZSTD_decompressDCtx` with one reused context) once per lz4
block or zstd frame, with no Python work per batch. It takes only what it can decode on its own:
magic 2 sections that are uncompressed, zstd, or lz4 frames without checksums. Everything else
(snappy, gzip, legacy entries, anything that fails to decode or to fit) is left *pending* for
`compression.py`, whose Python path decodes it or raises the precise error; so results and error
messages are the same with or without the native decoders.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np
from numba import types

from segment_io.format.constants import CODEC_MASK, V2_HEADER_SIZE
from segment_io.format.native import native, package_library
from segment_io.kernel import njit

NONE, LZ4, ZSTD = 0, 3, 4
# size_t results of zstd above this are error codes (ZSTD_isError: code > -ZSTD_error_maxCode).
_ZSTD_ERROR_FLOOR = np.uint64(2**64 - 1000)


_ptr, _int = types.uintp, types.int32  # pointers and sizes travel as uintp
_lz4_lib = package_library("lz4.block", "_block*.so")
_zstd_lib = package_library("zstandard", "_cffi*.so")
_c_lz4, _lz4_present = native(_lz4_lib, "LZ4_decompress_safe", _int(_ptr, _ptr, _int, _int), -1)
_c_zstd, _zstd_present = native(
    _zstd_lib, "ZSTD_decompressDCtx", _ptr(_ptr, _ptr, _ptr, _ptr, _ptr), 2**64 - 1
)
_c_zstd_frame_size, _frame_size_present = native(
    _zstd_lib, "ZSTD_findFrameCompressedSize", _ptr(_ptr, _ptr), 2**64 - 1
)
_zstd_create = getattr(_zstd_lib, "ZSTD_createDCtx", None) if _zstd_present and _frame_size_present else None
if _zstd_create is not None:
    _zstd_create.restype = ctypes.c_void_p
# The Python path's zstd decoder streams, and streaming decoders refuse frames whose window
# exceeds 2^27 bytes (zstd's default limit); the one-shot call here would not, so it checks.
_ZSTD_WINDOW_MAX = 1 << 27

_local = threading.local()


def native_codecs() -> tuple[bool, int]:
    """(lz4 available, this thread's zstd decompression context or 0): kernel arguments."""
    ctx = getattr(_local, "zstd", None)
    if ctx is None:
        ctx = 0
        if _zstd_create is not None:
            ctx = _zstd_create() or 0
        _local.zstd = ctx
    return _lz4_present, int(ctx)


@njit(cache=True, nogil=True, inline="always")
def _u32le(b: np.ndarray, p: int) -> Any:
    return (
        np.int64(b[p]) | (np.int64(b[p + 1]) << 8) | (np.int64(b[p + 2]) << 16) | (np.int64(b[p + 3]) << 24)
    )


@njit(cache=True, nogil=True, inline="always")
def _rotl(x: Any, r: int) -> Any:
    return ((x << np.uint32(r)) | (x >> np.uint32(32 - r))) & np.uint32(0xFFFFFFFF)


@njit(cache=True, nogil=True)
def xxh32_short(b: np.ndarray, lo: int, hi: int) -> int:
    """xxHash32 (seed 0) of b[lo:hi], fewer than 16 bytes: what an lz4 frame descriptor's
    checksum is made of."""
    p1, p3, p4, p5 = np.uint32(2654435761), np.uint32(3266489917), np.uint32(668265263), np.uint32(374761393)
    h = np.uint32(p5 + np.uint32(hi - lo))
    i = lo
    while i + 4 <= hi:
        h = np.uint32(_rotl(np.uint32(h + np.uint32(_u32le(b, i)) * p3), 17) * p4)
        i += 4
    while i < hi:
        h = np.uint32(_rotl(np.uint32(h + np.uint32(b[i]) * p5), 11) * p1)
        i += 1
    h = np.uint32(h ^ (h >> np.uint32(15)))
    h = np.uint32(h * np.uint32(2246822519))
    h = np.uint32(h ^ (h >> np.uint32(13)))
    h = np.uint32(h * p3)
    h = np.uint32(h ^ (h >> np.uint32(16)))
    return int(h)


@njit(cache=True, nogil=True)
def _lz4_frame(buf: np.ndarray, lo: int, hi: int, out: np.ndarray, at: int) -> int:
    """Decode a Kafka lz4 frame (independent blocks, no checksums: docs/log-format.md#compression)
    from buf[lo:hi] into out[at:]; bytes written, or −1 to leave it to the Python path. The frame
    rules are those of compression._lz4_checked, which names what breaks them."""
    if hi - lo < 7 or _u32le(buf, lo) != 0x184D2204:
        return -1
    flg, bd = np.int64(buf[lo + 4]), np.int64(buf[lo + 5])
    # version 1, independent blocks; no block/content checksum, dictionary or reserved bits
    if flg >> 6 != 1 or not flg & 0x20 or flg & 0x17 or bd & 0x8F or (bd >> 4) & 7 < 4:
        return -1
    descriptor_end = lo + 6 + (8 if flg & 0x08 else 0)
    if descriptor_end >= hi or (xxh32_short(buf, lo + 4, descriptor_end) >> 8) & 0xFF != buf[descriptor_end]:
        return -1
    max_block = 1 << (8 + 2 * ((bd >> 4) & 7))
    pos = descriptor_end + 1
    o = at
    src, dst = buf.ctypes.data, out.ctypes.data
    while True:
        if pos + 4 > hi:
            return -1
        word = _u32le(buf, pos)
        pos += 4
        if word == 0:  # end mark: nothing may follow, and a stated content size must match
            if pos != hi or (flg & 0x08 and _u32le(buf, lo + 6) | (_u32le(buf, lo + 10) << 32) != o - at):
                return -1
            return o - at
        n = word & 0x7FFFFFFF
        if n > max_block or pos + n > hi:
            return -1
        if word & 0x80000000:  # a stored (uncompressed) block
            if o + n > out.shape[0]:
                return -1
            out[o : o + n] = buf[pos : pos + n]
            written = n
        else:
            room = min(out.shape[0] - o, max_block)
            written = _c_lz4(src + pos, dst + o, n, room)
            if written < 0:
                return -1
        o += written
        pos += n


@njit(cache=True, nogil=True)
def _zstd_frame_ok(buf: np.ndarray, lo: int, hi: int) -> bool:
    """buf[lo:hi] is exactly one zstd frame whose window the streaming decoder accepts."""
    if hi - lo < 6 or _u32le(buf, lo) != 0xFD2FB528:
        return False
    if _c_zstd_frame_size(buf.ctypes.data + lo, hi - lo) != hi - lo:
        return False
    descriptor = np.int64(buf[lo + 4])
    if not descriptor & 0x20:  # a window descriptor byte follows
        exponent, mantissa = np.int64(buf[lo + 5]) >> 3, np.int64(buf[lo + 5]) & 7
        base = np.int64(1) << (10 + exponent)
        return bool(base + (base >> 3) * mantissa <= _ZSTD_WINDOW_MAX)
    # single segment: the window is the content size (after any dictionary id)
    pos = lo + 5 + (0, 1, 2, 4)[descriptor & 3]
    width = (1, 2, 4, 8)[descriptor >> 6]
    if pos + width > hi:
        return False
    size = np.int64(0)
    for k in range(min(width, 7)):
        size |= np.int64(buf[pos + k]) << (8 * k)
    if width == 8 and buf[pos + 7]:
        return False
    return bool(size + (256 if width == 2 else 0) <= _ZSTD_WINDOW_MAX)


@njit(cache=True, nogil=True)
def decompress_sections(
    buf: np.ndarray,
    position: np.ndarray,
    size: np.ndarray,
    attributes: np.ndarray,
    magic: np.ndarray,
    out: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    pending: np.ndarray,
    lz4_ok: bool,
    zstd_ctx: int,
) -> int:
    """Write the records section of each batch (rows of the arrays) that this kernel handles into
    `out`, one after another, setting start/end; mark the others pending. Returns bytes written."""
    total = 0
    for j in range(position.shape[0]):
        codec = attributes[j] & CODEC_MASK
        lo = position[j] + V2_HEADER_SIZE
        hi = position[j] + size[j]
        written: Any = -1
        if magic[j] == 2 and lo <= hi <= buf.shape[0]:
            if codec == NONE:
                if total + hi - lo <= out.shape[0]:
                    out[total : total + hi - lo] = buf[lo:hi]
                    written = hi - lo
            elif codec == LZ4 and lz4_ok:
                written = _lz4_frame(buf, lo, hi, out, total)
            elif codec == ZSTD and zstd_ctx != 0 and _zstd_frame_ok(buf, lo, hi):
                room = out.shape[0] - total
                r = _c_zstd(zstd_ctx, out.ctypes.data + total, room, buf.ctypes.data + lo, hi - lo)
                if r < _ZSTD_ERROR_FLOOR:
                    written = np.int64(r)
        if written < 0:
            pending[j] = True
        else:
            start[j] = total
            end[j] = total + written
            total += written
    return total
