"""Per-record framing of records sections (numba kernels of format.records), and log chunks."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields

import numpy as np

from segment_io.errors import CorruptBatch
from segment_io.format import records as rec
from segment_io.format.constants import MIN_RECORD_SIZE, V2_HEADER_SIZE
from segment_io.segment.scan import BatchTable
from segment_io.segment.sections import Sections


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

    def take(self, rows: np.ndarray) -> Framed:
        """Only the records `rows` (the sections, and the bytes they point into, shared)."""
        picked = {f.name: getattr(self, f.name)[rows] for f in fields(self) if f.name != "sections"}
        return Framed(self.sections, **picked)

    def pack(self, rows: np.ndarray, record_batch: np.ndarray) -> Framed:
        """Only the records `rows`, their bytes copied into a buffer of their own (so the arena
        they were decoded into can be reused), each tagged with `record_batch`."""
        starts = self.record_start[rows]
        at, data = rec.gather(self.sections.data, starts, self.record_end[rows] - starts)
        return self.take(rows)._moved(Sections.of_bytes(data), at[:-1] - starts, record_batch)

    @staticmethod
    def concat(parts: list[Framed]) -> Framed:
        """The records of `parts` in turn, their bytes joined in one buffer (record_batch as they
        are)."""
        if not parts:
            none = np.zeros(0, dtype=np.int64)
            return Framed(Sections.of_bytes(np.zeros(0, dtype=np.uint8)), *([none] * 12))
        used = [int(p.record_end.max()) if len(p) else 0 for p in parts]
        shift = np.cumsum([0, *used[:-1]])
        data = np.concatenate([p.sections.data[:u] for p, u in zip(parts, used, strict=True)])
        joined = {
            f.name: np.concatenate(
                [
                    getattr(p, f.name) + s if f.name in _POSITIONS else getattr(p, f.name)
                    for p, s in zip(parts, shift.tolist(), strict=True)
                ]
            )
            for f in fields(Framed)
            if f.name != "sections"
        }
        return Framed(Sections.of_bytes(data), **joined)

    def _moved(self, sections: Sections, shift: np.ndarray, record_batch: np.ndarray) -> Framed:
        """These records with their bytes in `sections.data`, every position moved by `shift`."""
        moved = {name: getattr(self, name) + shift for name in _POSITIONS}
        kept = {
            f.name: getattr(self, f.name) for f in fields(self) if f.name not in {"sections", *_POSITIONS}
        }
        return Framed(sections, **{**kept, **moved, "record_batch": record_batch})


# The fields of Framed that are positions in `sections.data` (they move with the bytes).
_POSITIONS = ("key_start", "value_start", "header_start", "record_start", "body_start", "record_end")


def frame_records(path: str, table: BatchTable, sections: Sections) -> Framed:
    """Run the framing kernel; malformed records raise CorruptBatch at the batch's position.

    A batch's record count is checked against its section first: the arrays are sized by the
    counts, so a damaged header must not make the reader allocate more than the bytes can hold."""
    room = (sections.end - sections.start) // MIN_RECORD_SIZE
    bad = np.flatnonzero((sections.count < 0) | (sections.count > room))
    if len(bad):
        j = int(bad[0])
        raise CorruptBatch(
            path,
            int(table.position[sections.batch_index[j]]),
            f"record count {int(sections.count[j])} does not fit a "
            f"{int(sections.end[j] - sections.start[j])}-byte records section",
        )
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
