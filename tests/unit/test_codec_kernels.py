"""The native decompression kernel decodes exactly what the Python codec path decodes, takes every
Kafka-style lz4 and zstd section itself, and leaves everything else (and every damaged section)
to the Python path."""

from __future__ import annotations

import lz4.frame
import numpy as np
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from segment_io.format.batch import build_v2_batch
from segment_io.format.codec_kernels import decompress_sections, native_codecs
from segment_io.format.compression import compress, decompress
from segment_io.format.constants import Codec
from segment_io.segment.scan import scan_buffer
from segment_io.segment.sections import Arena, read_sections

pytestmark = pytest.mark.unit

# Sections made of a few repeated words, so every codec finds matches of several lengths.
payloads = st.lists(
    st.sampled_from([b"key-", b"value ", b"\x00\x01", b"x" * 40, b"abc", b"0123456789"]), max_size=400
)


def frame_lz4(data: bytes, block_size: int, store_size: bool, checksums: bool) -> bytes:
    return bytes(
        lz4.frame.compress(
            data,
            block_linked=False,
            block_size=block_size,
            store_size=store_size,
            content_checksum=checksums,
            block_checksum=checksums,
        )
    )


sections = st.one_of(
    payloads.map(lambda p: (Codec.NONE, b"".join(p))),
    st.tuples(
        payloads,
        st.sampled_from([lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB]),
        st.booleans(),
        st.booleans(),
    ).map(lambda t: (Codec.LZ4, frame_lz4(b"".join(t[0]), t[1], t[2], t[3]))),
    st.tuples(payloads, st.booleans(), st.integers(1, 5)).map(
        lambda t: (
            Codec.ZSTD,
            zstandard.ZstdCompressor(level=t[2], write_content_size=t[1]).compress(b"".join(t[0])),
        )
    ),
    payloads.map(lambda p: (Codec.SNAPPY, compress(Codec.SNAPPY, b"".join(p)))),
    payloads.map(lambda p: (Codec.GZIP, compress(Codec.GZIP, b"".join(p)))),
)


def log_of(items: list[tuple[Codec, bytes]]) -> np.ndarray:
    batches = [
        build_v2_batch(
            base_offset=i,
            records=section,
            records_count=1,
            last_offset_delta=0,
            base_timestamp=0,
            max_timestamp=0,
            attributes=int(codec),
        )
        for i, (codec, section) in enumerate(items)
    ]
    return np.frombuffer(b"".join(batches), dtype=np.uint8)


def run_kernel(
    buf: np.ndarray, out_size: int, native: tuple[bool, int]
) -> tuple[list[bytes | None], np.ndarray]:
    """Each batch's decoded section from the kernel, or None where it was left pending."""
    table = scan_buffer("mem.log", 0, buf).table
    n = len(table)
    start, end, pending = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.bool_)
    out = np.zeros(out_size, dtype=np.uint8)
    decompress_sections(
        buf, table.position, table.size, table.attributes, table.magic, out, start, end, pending, *native
    )
    return [None if pending[j] else out[start[j] : end[j]].tobytes() for j in range(n)], pending


def is_kafka_lz4(section: bytes) -> bool:
    return section[4] & 0x14 == 0  # no block or content checksum


@settings(max_examples=150, deadline=None)
@given(st.lists(sections, min_size=1, max_size=8))
def test_kernel_decodes_what_python_decodes(items: list[tuple[Codec, bytes]]) -> None:
    decoded, _ = run_kernel(log_of(items), 1 << 22, native_codecs())
    for (codec, section), got in zip(items, decoded, strict=True):
        native = codec in (Codec.NONE, Codec.ZSTD) or (codec == Codec.LZ4 and is_kafka_lz4(section))
        assert (got is not None) == native, codec
        if got is not None:
            assert got == decompress(codec, section)


@settings(max_examples=200, deadline=None)
@given(sections, st.data())
def test_damaged_sections_are_left_to_the_python_path(item: tuple[Codec, bytes], data: st.DataObject) -> None:
    """Truncated or altered sections: where the kernel still decodes one, the Python path decodes
    it to the same bytes; everything else is pending (and the Python path names the damage)."""
    codec, section = item
    cut = data.draw(st.integers(0, len(section)))
    flip = data.draw(st.integers(0, max(len(section) - 1, 0)))
    damaged = bytearray(section[:cut] if data.draw(st.booleans()) else section)
    if damaged and flip < len(damaged):
        damaged[flip] ^= data.draw(st.integers(1, 255))
    [got], _ = run_kernel(log_of([(codec, bytes(damaged))]), 1 << 22, native_codecs())
    if got is not None:
        assert got == decompress(codec, bytes(damaged))


def test_a_section_that_does_not_fit_is_left_pending() -> None:
    text = b"compressible text " * 2000
    items = [(Codec.ZSTD, compress(Codec.ZSTD, text)), (Codec.LZ4, compress(Codec.LZ4, text))]
    decoded, pending = run_kernel(log_of(items), len(text) - 1, native_codecs())
    assert decoded == [None, None] and pending.all()
    decoded, _ = run_kernel(log_of(items), len(text), native_codecs())
    assert decoded == [text, None]  # the first fills the buffer; the second no longer fits


def test_without_native_decoders_every_compressed_section_is_pending() -> None:
    items = [
        (Codec.NONE, b"plain"),
        (Codec.ZSTD, compress(Codec.ZSTD, b"z" * 100)),
        (Codec.LZ4, compress(Codec.LZ4, b"l" * 100)),
    ]
    decoded, _ = run_kernel(log_of(items), 1 << 16, (False, 0))
    assert decoded == [b"plain", None, None]


@settings(max_examples=50, deadline=None)
@given(st.lists(sections, min_size=1, max_size=8), st.sampled_from([0.01, 1.0, 4.0]))
def test_read_sections_is_the_same_whatever_the_arena(items: list[tuple[Codec, bytes]], ratio: float) -> None:
    """A small arena pushes sections from the kernel to the Python path, which grows it; the
    result does not change."""
    buf = log_of(items)
    table = scan_buffer("mem.log", 0, buf).table
    arena = Arena()
    arena.ratio = ratio
    got = read_sections("mem.log", buf, table, np.arange(len(table)), arena)
    for j, (codec, section) in enumerate(items):
        assert got.data[got.start[j] : got.end[j]].tobytes() == decompress(codec, section)


def test_zstd_frames_the_streaming_decoder_refuses_are_left_pending() -> None:
    """A window above 2^27 bytes, or a second frame after the first: the Python path decides."""
    text = b"abc" * 1000
    params = zstandard.ZstdCompressionParameters.from_level(3, write_content_size=False)
    frame = bytearray(zstandard.ZstdCompressor(compression_params=params).compress(text))
    assert not frame[4] & 0x20  # the frame has a window descriptor byte
    frame[5] = (27 - 10) << 3  # window 2^27: allowed
    wide = bytearray(frame)
    wide[5] |= 7  # window 2^27 + 7 * 2^24: refused
    items = [(Codec.ZSTD, bytes(frame)), (Codec.ZSTD, bytes(wide)), (Codec.ZSTD, bytes(frame) * 2)]
    decoded, _ = run_kernel(log_of(items), 1 << 16, native_codecs())
    assert decoded == [text, None, None]
    with pytest.raises(ValueError, match="too much memory"):
        decompress(Codec.ZSTD, bytes(wide))


def test_descriptor_checksum_hash_is_xxhash32() -> None:
    import xxhash

    from segment_io.format.codec_kernels import xxh32_short

    for n in range(16):
        data = bytes(range(7, 7 + n))
        assert xxh32_short(np.frombuffer(data + b"pad", dtype=np.uint8), 0, n) == xxhash.xxh32_intdigest(data)


def test_a_missing_library_is_stood_in_for_by_a_function_that_fails() -> None:
    from numba import njit, types

    from segment_io.format.native import native

    ptr = types.uintp
    frame_size, present = native(None, "test_missing_symbol", ptr(ptr, ptr), 2**64 - 1)

    @njit
    def call() -> int:
        return frame_size(0, 0)

    assert not present and call() == 2**64 - 1
