"""The four Kafka codecs with Kafka's framing rules (docs/log-format.md#compression); errors are
plain ValueError with a reason, which callers wrap into a CorruptBatch naming the file and position."""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import cramjam
import lz4.frame
import numpy as np
import zstandard

from segment_io.format.codec_kernels import xxh32_short
from segment_io.format.constants import Codec
from segment_io.format.snappy_encode import snappy_compress

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024
LZ4_MAGIC = b"\x04\x22\x4d\x18"


@dataclass(frozen=True)
class CompressionLevels:
    """Levels used when a batch is recompressed (Kafka's topic configs compression.*.level)."""

    gzip: int = 6
    lz4: int = 9  # Kafka's default: its writer's fast compressor (see LZ4_FAST_LEVEL)
    zstd: int = 3


DEFAULT_LEVELS = CompressionLevels()
# Kafka's lz4 writer compresses with LZ4's fast compressor at its default level 9 and with LZ4 HC
# at any other level; python-lz4 takes 0 for the fast one and 3..16 for HC.
LZ4_FAST_LEVEL = 9


def decompress(codec: Codec, data: bytes | memoryview, magic: int = 2) -> bytes:
    """Decompress one records section (v2) or legacy wrapper value."""
    return bytes(decompress_view(codec, data, magic))


def _decoded(codec: Codec, decode: Callable[..., Any], *args: Any) -> Any:
    """Codec libraries raise their own error types; callers get a ValueError with the reason."""
    try:
        return decode(*args)
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(f"{codec.name.lower()} stream does not decode: {exc}") from None


def decompress_view(codec: Codec, data: bytes | memoryview, magic: int = 2) -> bytes | memoryview:
    """As `decompress`, without copying the codec's output buffer (the deep scan's hot path)."""
    if codec == Codec.NONE:
        return data
    decode = _VIEW_DECODERS.get(codec)
    if decode is None:
        raise ValueError(f"codec {int(codec)} is not supported")
    result: bytes | memoryview = _decoded(codec, decode, data, magic)
    return result


def decompress_into(codec: Codec, data: bytes | memoryview, out: memoryview, magic: int = 2) -> int:
    """Decompress one compressed section straight into `out`; returns the bytes written.

    Raises ValueError when the stream does not decode *or* does not fit: callers then fall back
    to `decompress_view`, which tells the two apart (and gives the reason)."""
    decode = _INTO_DECODERS.get(codec)
    if decode is None:
        raise ValueError(f"codec {int(codec)} cannot be decompressed in place")
    return int(_decoded(codec, decode, data, out, magic))


def _zstd_checked(data: bytes | memoryview, magic: int) -> bytes | memoryview:
    if magic != 2:
        raise ValueError("zstd is only valid in magic 2 batches")
    return data


def compress(
    codec: Codec, data: bytes | memoryview | np.ndarray, levels: CompressionLevels = DEFAULT_LEVELS
) -> bytes:
    """Compress a records section the way Kafka's Java client would frame it."""
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        return _gzip_compress(data, levels.gzip)
    if codec == Codec.SNAPPY:
        return _snappy_compress(bytes(data))
    if codec == Codec.LZ4:
        # Kafka rejects linked blocks; 64 KiB blocks and no content size, as the Java writer does.
        return bytes(
            lz4.frame.compress(
                data,
                block_linked=False,
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                store_size=False,
                compression_level=0 if levels.lz4 == LZ4_FAST_LEVEL else levels.lz4,
            )
        )
    if codec == Codec.ZSTD:
        # As Kafka's stream writer ends a frame: the data in blocks that are not the last, then
        # an empty last block (a flush, then the end); no content size (the stream never knows it).
        stream = _zstd_compressor(levels.zstd).compressobj()
        chunk = stream.compress(data.data if isinstance(data, np.ndarray) else data)
        return chunk + stream.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) + stream.flush()
    raise ValueError(f"codec {int(codec)} is not supported")


_compressors = threading.local()


def _zstd_compressor(level: int) -> zstandard.ZstdCompressor:
    """One reused compressor per level and thread: a fresh context per batch costs more than
    compressing the few records a rewritten batch keeps."""
    cache: dict[int, zstandard.ZstdCompressor] = _compressors.__dict__.setdefault("zstd", {})
    if level not in cache:
        cache[level] = zstandard.ZstdCompressor(level=level, write_content_size=False)
    return cache[level]


# Kafka's gzip header: no flags, no modification time, no extra flags, OS "unknown".
GZIP_HEADER = bytes.fromhex("1f8b08000000000000ff")


def _gzip_compress(data: bytes | memoryview | np.ndarray, level: int) -> bytes:
    """A gzip member as Kafka's writer makes it: its header, a raw deflate stream from zlib (the
    library the JVM's Deflater uses; memLevel 8, 32 KiB window), CRC-32 and size. Measured
    against Kafka 4.1 and 4.4.0's cleaners: rewritten gzip batches are byte-identical (another deflate
    encoder chose other matches)."""
    raw = data.data if isinstance(data, np.ndarray) else data
    deflate = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS, 8)
    body = deflate.compress(raw) + deflate.flush()
    return GZIP_HEADER + body + struct.pack("<II", zlib.crc32(raw), len(raw) & 0xFFFFFFFF)


def _snappy_compress(data: bytes) -> bytes:
    """An xerial stream as snappy-java's SnappyOutputStream writes it for Kafka: its header, then
    32 KiB blocks, each a length and a raw snappy block from snappy 1.1.10's own algorithm
    (snappy_encode.py), so a rewritten batch is byte for byte Kafka's."""
    parts = [XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), XERIAL_BLOCK):
        block = snappy_compress(view[start : start + XERIAL_BLOCK])
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _xerial_blocks(data: bytes | memoryview) -> Iterator[memoryview] | None:
    """The raw snappy blocks of an xerial stream (incl. concatenated streams); None when `data`
    is not xerial-framed (then it is one raw snappy block)."""
    if len(data) < 16 or data[:8] != XERIAL_MAGIC:
        return None
    version = struct.unpack_from(">i", data, 8)[0]
    if version < 1:
        raise ValueError(f"xerial snappy header version {version}")
    return _xerial_block_iter(memoryview(data))


def _xerial_block_iter(view: memoryview) -> Iterator[memoryview]:
    pos = 16
    while pos < len(view):
        if len(view) - pos >= 4 and view[pos : pos + 4] == XERIAL_MAGIC[:4]:
            pos += 16  # a concatenated xerial stream starts here
            continue
        if len(view) - pos < 4:
            raise ValueError("xerial snappy chunk length is cut off")
        (size,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            raise ValueError(f"xerial snappy chunk of {size} bytes runs past the stream")
        yield view[pos : pos + size]
        pos += size


def _snappy_decompress(data: bytes | memoryview) -> bytes | memoryview:
    blocks = _xerial_blocks(data)
    if blocks is None:
        return memoryview(cramjam.snappy.decompress_raw(data))
    out = [memoryview(cramjam.snappy.decompress_raw(block)) for block in blocks]
    return out[0] if len(out) == 1 else b"".join(out)


def _snappy_decompress_into(data: bytes | memoryview, out: memoryview) -> int:
    blocks = _xerial_blocks(data)
    if blocks is None:
        return int(cramjam.snappy.decompress_raw_into(data, out))
    written = 0
    for block in blocks:
        written += int(cramjam.snappy.decompress_raw_into(block, out[written:]))
    return written


def _descriptor_checksum(descriptor: bytes) -> int:
    """An lz4 frame's header checksum byte: the second byte of xxHash32 of its descriptor."""
    return (xxh32_short(np.frombuffer(descriptor, dtype=np.uint8), 0, len(descriptor)) >> 8) & 0xFF


def _lz4_decompress(data: bytes | memoryview, magic: int) -> bytes:
    """LZ4 frame with Kafka's restrictions; magic 0 frames carry a deliberately wrong HC byte."""
    return bytes(lz4.frame.decompress(_lz4_checked(data, magic)))


def _lz4_checked(data: bytes | memoryview, magic: int) -> bytes | memoryview:
    """The frame after Kafka's checks (docs/log-format.md#compression), its magic-0 header
    checksum repaired."""
    if len(data) < 7 or data[:4] != LZ4_MAGIC:
        raise ValueError("lz4 stream does not start with the frame magic")
    flg, bd = data[4], data[5]
    if flg >> 6 != 1:
        raise ValueError(f"lz4 frame version {flg >> 6} is not 1")
    if not flg & 0x20:
        raise ValueError("lz4 frame uses linked blocks, which Kafka rejects")
    if flg & 0x03:
        raise ValueError("lz4 frame has reserved or dictionary-id bits set")
    if bd & 0x8F or (bd >> 4) & 0x7 < 4:
        raise ValueError(f"lz4 frame has an invalid BD byte 0x{bd:02x}")
    descriptor_end = 6 + (8 if flg & 0x08 else 0)
    if magic == 0:
        good = _descriptor_checksum(bytes(data[4:descriptor_end]))
        data = bytes(data[:descriptor_end]) + bytes([good]) + bytes(data[descriptor_end + 1 :])
    return data


def lz4_legacy_frame(data: bytes) -> bytes:
    """An LZ4 frame with the magic-0 quirk: HC computed from byte 0 of the frame
    (docs/log-format.md#compression)."""
    frame = bytearray(compress(Codec.LZ4, data))
    frame[6] = _descriptor_checksum(bytes(frame[:6]))
    return bytes(frame)


# Decoders by codec: (data, magic) -> output, and (data, out, magic) -> bytes written.
_VIEW_DECODERS: dict[Codec, Callable[..., Any]] = {
    Codec.GZIP: lambda data, magic: memoryview(cramjam.gzip.decompress(data)),
    Codec.SNAPPY: lambda data, magic: _snappy_decompress(data),
    Codec.LZ4: _lz4_decompress,
    Codec.ZSTD: lambda data, magic: memoryview(cramjam.zstd.decompress(_zstd_checked(data, magic))),
}
_INTO_DECODERS: dict[Codec, Callable[..., Any]] = {
    Codec.GZIP: lambda data, out, magic: cramjam.gzip.decompress_into(data, out),
    Codec.SNAPPY: lambda data, out, magic: _snappy_decompress_into(data, out),
    Codec.LZ4: lambda data, out, magic: cramjam.lz4.decompress_into(_lz4_checked(data, magic), out),
    Codec.ZSTD: lambda data, out, magic: cramjam.zstd.decompress_into(_zstd_checked(data, magic), out),
}
