"""The records that survive a partition's key pass, kept decoded for its rewrite, so that a
partition compacted alone decompresses most of its batches once, not twice.

The key pass feeds the cache going backwards through the log (extract_keys), so when a chunk's
dirty records have just been inserted into the key table, every later record of the partition
already has been: a record whose key's latest offset in the table is its own is the last of its
key, a survivor, and only those are copied (about as many bytes as the output). After a flush of
the table a record is checked against the rows since, so the cache holds a superset of its
batches' survivors. It is only ever a shortcut: the rewrite takes a batch from it when the cached
records that the key map keeps are exactly as many as the key map says survive there (every kept
record is then in the cache); any other batch is decoded as before. Memory stays bounded: past a
budget of cached bytes nothing more is cached."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from pipelines.log.keytable import LatestOffsets
from segment_io.segment.framing import Framed
from segment_io.segment.reader import SegmentReader
from segment_io.segment.sections import Arena

# Record bytes one task holds at most for its rewrite (beyond it, batches are decoded again).
CACHE_BYTES = 128 * 2**20
# Batches whose scanned segments one task holds for its rewrite (about 100 bytes of table each;
# beyond it, segments are scanned again).
READER_BATCHES = 1_000_000


@dataclass(frozen=True)
class CachedBlock:
    """Records of one segment's chunk, their bytes copied out of its arena; record_batch is the
    batch's index in the segment."""

    path: str
    framed: Framed


class RecordCache:
    """The decoded dirty-section records of one task's key pass that survive it, by segment, and
    the segments it opened (scanned once for both passes)."""

    def __init__(self, budget: int | None = None) -> None:
        self.budget = CACHE_BYTES if budget is None else budget
        self.open = True
        self._readers: dict[str, SegmentReader] = {}
        self._reader_batches = 0
        self._blocks: list[CachedBlock] = []
        self._bytes = 0
        self._by_path: dict[str, Framed] | None = None

    def keep_reader(self, reader: SegmentReader) -> None:
        """Hold a segment the key pass scanned for the rewrite, within READER_BATCHES."""
        batches = len(reader.scan().table)
        if self._reader_batches + batches <= READER_BATCHES:
            self._readers[reader.path] = reader
            self._reader_batches += batches

    def take_reader(self, path: str) -> SegmentReader | None:
        """The scanned segment `path`, if held (then let go: each is rewritten once)."""
        return self._readers.pop(path, None)

    def offer(
        self,
        path: str,
        framed: Framed,
        rows: np.ndarray,
        batch: np.ndarray,
        entry: np.ndarray,
        tagged: np.ndarray,
        table: LatestOffsets,
    ) -> None:
        """Cache those of the records `rows` of `framed` (of segment `path`, batch index `batch`
        each), just inserted into `table` as entries `entry` with `tagged` offsets, that are the
        latest of their keys in it."""
        if not self.open:
            return
        alive = np.flatnonzero(table.latest(entry) == tagged)
        if len(alive):
            block = CachedBlock(path, framed.pack(rows[alive], batch[alive]))
            self._blocks.append(block)
            self._bytes += int(block.framed.sections.data.nbytes)
            self.open = self._bytes <= self.budget

    def give(self, paths: set[str]) -> list[CachedBlock]:
        """The blocks of segments `paths`, taken out (for another task that rewrites them)."""
        given = [b for b in self._blocks if b.path in paths]
        self._blocks = [b for b in self._blocks if b.path not in paths]
        self._bytes -= sum(int(b.framed.sections.data.nbytes) for b in given)
        return given

    def adopt(self, blocks: list[CachedBlock]) -> None:
        """Blocks another task's key pass cached, of segments this task rewrites (they were
        within that task's budget); before the rewrite first reads the cache."""
        self._blocks += blocks

    def records(self, path: str, batches: np.ndarray) -> Framed:
        """The cached records of segment `path` in `batches` (ascending indexes in the segment),
        record_batch the position in `batches`."""
        if self._by_path is None:
            self._by_path = self._joined()
        mine = self._by_path.get(path)
        if mine is None:
            return Framed.concat([])
        lo = np.searchsorted(mine.record_batch, batches, "left")
        hi = np.searchsorted(mine.record_batch, batches, "right")
        counts = hi - lo
        rows = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        return replace(mine.take(rows), record_batch=np.repeat(np.arange(len(batches)), counts))

    def _joined(self) -> dict[str, Framed]:
        """One Framed per segment, in log order."""
        paths: dict[str, list[Framed]] = {}
        for block in self._blocks:
            paths.setdefault(block.path, []).append(block.framed)
        self._blocks = []
        joined = {}
        for path, parts in paths.items():
            framed = Framed.concat(parts)
            joined[path] = framed.take(np.lexsort((framed.offset, framed.record_batch)))
        return joined


def frame_chunk(
    reader: SegmentReader,
    arena: Arena,
    need: np.ndarray,
    records: np.ndarray,
    cached: Framed,
    eligible: np.ndarray,
    surviving: np.ndarray,
    in_map: np.ndarray,
) -> tuple[Framed, int]:
    """The records of batches `need` (`records` in each) that the rewrite decides on: from the
    cache for each `eligible` batch whose cached records kept by the key map (`in_map`, per
    cached record) are as many as its `surviving` count, decoded from the segment for the
    others. Returns them in batch order (record_batch: position in `need`) and how many records
    of the cached batches were left out (none of which the key map keeps)."""
    held = np.bincount(cached.record_batch[in_map], minlength=len(need))
    from_cache = eligible & (held == surviving)
    if not from_cache.any():
        return reader.frame(need, arena), 0
    if from_cache.all():  # the cached records are in batch order already
        return cached, int(records.sum()) - len(cached)
    used = cached.take(np.flatnonzero(from_cache[cached.record_batch]))
    left_out = int(records[from_cache].sum()) - len(used)
    decoded = reader.frame(need[~from_cache], arena)
    decoded = replace(decoded, record_batch=np.flatnonzero(~from_cache)[decoded.record_batch])
    joined = Framed.concat([decoded, used]) if len(decoded) else used
    return joined.take(np.argsort(joined.record_batch, kind="stable")), left_out
