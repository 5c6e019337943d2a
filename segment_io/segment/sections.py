"""Records sections of selected batches, decompressed into one reusable buffer (the Arena)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from segment_io.buffers import grow
from segment_io.errors import CorruptBatch
from segment_io.format.codec_kernels import decompress_sections, native_codecs
from segment_io.format.compression import decompress_into, decompress_view
from segment_io.format.constants import CODEC_MASK, V2_HEADER_SIZE, Codec
from segment_io.segment.legacy import legacy_section
from segment_io.segment.scan import BatchTable


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

    @staticmethod
    def of_bytes(data: np.ndarray) -> Sections:
        """Records bytes that belong to no batch of their own (records copied out of sections)."""
        none = np.zeros(0, dtype=np.int64)
        return Sections(data, none, none, none, none, none, none, none, np.zeros(0, dtype=np.bool_), none)


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
        buf,
        positions,
        sizes,
        table.attributes[index],
        magic,
        out,
        sections.start,
        sections.end,
        pending,
        lz4_ok,
        zstd_ctx,
    )
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
            if attrs & CODEC_MASK not in Codec._value2member_map_:
                raise CorruptBatch(path, pos, f"codec {attrs & CODEC_MASK} is not supported")
            c = Codec(attrs & CODEC_MASK)
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
            legacy = legacy_section(path, buf, pos, size)
            section = legacy.data
            sections.count[j] = legacy.count
            sections.base_offset[j] = sections.first_offset[j] = legacy.first_offset
            sections.base_timestamp[j] = legacy.base_timestamp
            sections.max_timestamp[j] = legacy.max_timestamp
            sections.log_append[j] = legacy.log_append
        length = len(section)
        if total + length > len(out):
            out = arena.reserve(total + length + max(int(remaining), 0) + 1024, keep=total)
        out[total : total + length] = np.frombuffer(section, dtype=np.uint8)
        start[j], end[j] = total, total + length
        total += length
    return total, out
