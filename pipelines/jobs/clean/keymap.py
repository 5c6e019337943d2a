"""The key map: which keyed records of the recopied prefix survive (docs/cleaning-rules.md#key-map).

Map side (one task per few input segments): decode keys and offsets only, reduce the dirty part to
one row per key in an exact-key hash table (pipelines.log.keytable), and split the rows into buckets
by key hash. Reduce side (one task per bucket): the latest dirty offset per (partition, key)
wins; a clean-section record survives only if its key has no dirty record. Winners go on, as
offset arrays, to the rewrite task of the output group that holds them. Only (partition, key,
offset) crosses the shuffle, as flat numpy arrays; values never do, and no Python object is made
per record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pipelines.log.keytable import EMPTY, KeyRows, LatestOffsets, hash_keys
from segment_io.buffers import grow
from segment_io.kernel import njit
from segment_io.layout import SegmentFiles
from segment_io.segment.framing import chunk_batches
from segment_io.segment.reader import SegmentReader
from segment_io.segment.sections import Arena
from segment_io.storage import Location
from segment_io.storage.location import locate

if TYPE_CHECKING:
    from pipelines.jobs.clean.record_cache import RecordCache

# A map task sends what it holds on when it passes this many rows (bounded memory).
FLUSH_ROWS = 2_000_000
# A map task checks after this many dirty rows whether deduplicating them pays (extract_keys).
DEDUPE_PROBE_ROWS = 262_144


@dataclass(frozen=True)
class KeyTask:
    """One input segment of the recopied prefix whose keyed records feed the key map."""

    tp: int  # index of the partition in the run
    gid: int  # the output group the segment belongs to
    src: Location
    files: SegmentFiles
    batches: np.ndarray  # batches whose records take part (not control, not aborted)
    first_dirty: int
    records: int  # records in those batches (from their headers), for sizing the shuffle

    def __post_init__(self) -> None:
        locate(self, "src")


@dataclass(frozen=True)
class NullKeys:
    """How many null-key records a map task saw in its group (they are dropped:
    docs/cleaning-rules.md#record-verdicts)."""

    gid: int
    count: int


@dataclass(frozen=True)
class Tombstones:
    """Which of a group's surviving keyed offsets (relative to its base) are tombstones: a batch
    whose every record survives and holds none of them is copied without being decompressed."""

    relative: np.ndarray  # int32


@dataclass(frozen=True)
class KeyBlock:
    """What a map task sends to one bucket: rows of the dirty section (the latest offset per key)
    or of the clean section (every keyed record). Row offsets are tagged: offset · 2 + 1 for a
    tombstone, so the largest tag per key is the latest record and says what it is."""

    rows: KeyRows
    dirty: bool
    table: int = 0  # which of its bucket's key tables the rows belong to (map_keys)


def extract_keys(
    tasks: list[KeyTask],
    null_keys: dict[int, int],
    probe_rows: int = DEDUPE_PROBE_ROWS,
    cache: RecordCache | None = None,
) -> Iterator[tuple[KeyRows, KeyRows]]:
    """The keyed records of the tasks' segments, the dirty part reduced to the latest offset per
    (partition, key) across all of them, in blocks of at most about FLUSH_ROWS rows (the reduce
    side dedupes across blocks, so memory here is bounded whatever the key count); null-key
    records seen are counted into `null_keys` by output group. Yields (dirty rows, clean rows).

    When the first `probe_rows` dirty rows hold almost as many keys, deduplicating here saves
    the shuffle nothing and costs a hash-table insert per row: the rest of the task's dirty rows
    then go to the reduce side as they are (it takes the latest offset per key either way).

    With a `cache`, the log is read backwards (the tasks, and each one's chunks) and the dirty
    records that survive are kept there, decoded, for the rewrite (record_cache.py)."""
    arena = Arena()
    dirty = LatestOffsets()
    inserted = 0  # dirty rows offered to `dirty` so far
    dedupe = True  # until the first probe_rows dirty rows show it does not pay
    held: list[KeyRows] = []  # dirty rows kept as they came (dedupe off)
    clean: list[KeyRows] = []  # rows of the clean section
    held_rows = 0  # rows in `held` and `clean`
    for task in tasks if cache is None else tasks[::-1]:
        reader = SegmentReader(task.src.storage, task.files.log.path, task.files.base_offset)
        if cache is not None:
            cache.keep_reader(reader)
        table = reader.scan().table
        selected = np.zeros(len(table), dtype=np.bool_)
        selected[task.batches] = True
        chunks = list(chunk_batches(table))
        for index in chunks if cache is None else chunks[::-1]:
            index = index[selected[index]]
            if len(index) == 0:
                continue
            framed = reader.frame(index, arena)
            keyed = np.flatnonzero(framed.key_len >= 0)
            if len(keyed) < len(framed):
                null_keys[task.gid] = null_keys.get(task.gid, 0) + len(framed) - len(keyed)
            data = framed.sections.data
            starts, lengths = framed.key_start[keyed], framed.key_len[keyed]
            tps = np.full(len(keyed), task.tp, dtype=np.int32)
            offsets = framed.offset[keyed]
            is_dirty = offsets >= task.first_dirty
            tagged = offsets * 2 + (framed.value_len[keyed] < 0)  # tombstones tagged (see KeyBlock)
            rows = KeyRows(tps, hash_keys(tps, data, starts, lengths), data, starts, lengths, tagged)
            # Rows held past this chunk are copied out of the arena (`take`), which the next reuses;
            # the table copies the keys it inserts.
            if not is_dirty.all():
                clean.append(rows.take(np.flatnonzero(~is_dirty)))
                held_rows += len(clean[-1])
                keyed = keyed[is_dirty]
                rows = rows.take(np.flatnonzero(is_dirty))
            elif not dedupe:
                rows = rows.take(np.arange(len(rows)))
            if dedupe:
                entries = dirty.add(rows)
                if cache is not None:
                    batch = index[framed.record_batch[keyed]]
                    cache.offer(task.files.log.path, framed, keyed, batch, entries, rows.offset, dirty)
                if inserted < probe_rows <= inserted + len(rows):  # decided once per task
                    dedupe = len(dirty) * 10 < (inserted + len(rows)) * 9
                inserted += len(rows)
            else:
                held.append(rows)
                held_rows += len(rows)
            if len(dirty) + held_rows >= FLUSH_ROWS:
                yield KeyRows.concat([dirty.rows(), *held]), KeyRows.concat(clean)
                dirty, held, clean, held_rows = LatestOffsets(), [], [], 0
    if len(dirty) or held or clean:
        yield KeyRows.concat([dirty.rows(), *held]), KeyRows.concat(clean)


def map_keys(
    tasks: list[KeyTask], buckets: int, tables: int = 1
) -> Iterator[tuple[int, KeyBlock | NullKeys]]:
    """Map side over a few segments: (bucket, block of key rows) per non-empty bucket, and the
    null-key counts routed to the bucket of their group (counts pass through to the rewrite).

    Each bucket's keys are split further by hash over `tables` key tables, which its reduce task
    fills one after another (reduce_keys): an insert into a table larger than the CPU's caches waits
    on memory for every new key. The split is part of the one pass that orders rows by bucket:
    fine bucket f is bucket f % buckets, table f // buckets."""
    null_keys: dict[int, int] = {}
    fine = buckets * tables
    for dirty, clean in extract_keys(tasks, null_keys):
        for f, rows in dirty.bucketed(fine):
            yield f % buckets, KeyBlock(rows, dirty=True, table=f // buckets)
        for f, rows in clean.bucketed(fine):
            yield f % buckets, KeyBlock(rows, dirty=False, table=f // buckets)
    for gid, count in sorted(null_keys.items()):
        yield gid % buckets, NullKeys(gid, count)


@dataclass(frozen=True)
class GroupBounds:
    """Per partition of the run: base offsets of its output groups and their ids, ascending."""

    bases: dict[int, np.ndarray]
    gids: dict[int, np.ndarray]

    def locate(self, tp: int, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The output group of each offset and the group's base offset."""
        pos = np.searchsorted(self.bases[tp], offsets, side="right") - 1
        return self.gids[tp][pos], self.bases[tp][pos]


def reduce_keys(
    items: Iterable[tuple[int, KeyBlock | NullKeys]],
    bounds: GroupBounds,
    announce: list[int],
    later: Callable[[KeyRows], Iterable[KeyRows]] | None = None,
    tables: int = 1,
) -> Iterator[tuple[int, np.ndarray | Tombstones | NullKeys | None]]:
    """Reduce side for one bucket: winning offsets per output group, relative to the group's base
    offset as int32 (half the memory of absolute offsets), those of them that are tombstones, and
    the null-key counts; first a `None` for each group in `announce`, so that every group
    reaches its rewrite task.

    `later(winners)`, given the latest dirty offset of each key here, gives the dirty keys of the
    log after these records (a range of a partition: ranged.py), which supersede any of them.
    `tables`: the key tables map_keys split the bucket's keys over."""
    for gid in announce:
        yield gid, None
    one = LatestOffsets() if tables == 1 else None  # filled as blocks come: no dirty block held
    dirty: dict[int, list[KeyRows]] = {}
    clean: dict[int, list[KeyRows]] = {}
    for _, item in items:
        if isinstance(item, NullKeys):
            yield item.gid, item
        elif item.dirty and one is not None:
            one.add(item.rows)
        else:
            (dirty if item.dirty else clean).setdefault(item.table, []).append(item.rows)
    if one is not None:  # every clean row is judged against the one table, whatever it says
        found = [_Survival(one, KeyRows.concat([r for rows in clean.values() for r in rows]))]
    else:
        # Several tables (map_keys; all of a key's rows are in one), each filled in one go from
        # its blocks: they arrive in no order, and tables filled a block at a time in turn would
        # be no smaller for the caches than one table for the whole bucket. The blocks held
        # meanwhile are at most the bucket's rows, which the bucket count bounds (job.BUCKET_ROWS).
        found = [
            _Survival(_filled(dirty.pop(t, [])), KeyRows.concat(clean.pop(t, [])))
            for t in sorted({*dirty, *clean})
        ]
    if later is not None:
        for keys in later(KeyRows.concat([f.winners for f in found])):
            for survival in found:  # a key is in one table at most
                survival.supersede(keys)
    kept = [pair for f in found for pair in f.kept()]
    tps = np.concatenate([tp for tp, _ in kept]) if kept else np.zeros(0, dtype=np.int32)
    tagged = np.concatenate([offset for _, offset in kept]) if kept else np.zeros(0, dtype=np.int64)
    yield from group_winners(tps, tagged, bounds)


def _filled(blocks: list[KeyRows]) -> LatestOffsets:
    table = LatestOffsets()
    for rows in blocks:
        table.add(rows)
    return table


class _Survival:
    """One key table's records and which of them survive: the latest dirty record of each key
    (the winners), and the clean-section records, each only while no dirty record has its key."""

    def __init__(self, table: LatestOffsets, clean: KeyRows) -> None:
        self.table, self.clean = table, clean
        self.winners = table.rows()
        self.superseded = np.zeros(len(self.winners), dtype=np.bool_)
        self.gone = table.contains(clean)
        self._clean_keys: LatestOffsets | None = None  # made when later keys come
        self._clean_entry = np.zeros(0, dtype=np.int64)

    def supersede(self, keys: KeyRows) -> None:
        """`keys` are dirty later in the log: any record of theirs here goes."""
        if self._clean_keys is None:
            self._clean_keys = LatestOffsets()
            self._clean_entry = self._clean_keys.add(self.clean)
        _mark(self.table.entries(keys), self.superseded)
        gone_keys = np.zeros(len(self._clean_keys), dtype=np.bool_)
        _mark(self._clean_keys.entries(keys), gone_keys)
        self.gone |= gone_keys[self._clean_entry]

    def kept(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(partitions, tagged offsets) of the winners, then of the clean records, that survive."""
        win, rows = ~self.superseded, ~self.gone
        return [
            (self.winners.tp[win], self.winners.offset[win]),
            (self.clean.tp[rows], self.clean.offset[rows]),
        ]


def _mark(entries: np.ndarray, marks: np.ndarray) -> None:
    marks[entries[entries != EMPTY]] = True


def group_winners(
    tps: np.ndarray, tagged: np.ndarray, bounds: GroupBounds
) -> Iterator[tuple[int, np.ndarray | Tombstones]]:
    """The surviving keyed records (partition, tagged offset) as the rewrite takes them: per
    output group, offsets relative to the group's base as int32, then those that are tombstones."""
    for tp in np.unique(tps).tolist():
        mine = tagged[tps == tp]
        offsets, tombstone = mine >> 1, (mine & 1).astype(np.bool_)
        gids, bases = bounds.locate(tp, offsets)
        # Offsets relative to their group's base fit 32 bits (the grouping rule guarantees it).
        relative = (offsets - bases).astype(np.int32)
        order = np.argsort(gids, kind="stable")
        relative, gids, tombstone = relative[order], gids[order], tombstone[order]
        edges = np.flatnonzero(np.diff(gids)) + 1
        for part in np.split(np.arange(len(gids)), edges):
            if len(part):
                gid = int(gids[part[0]])
                yield gid, relative[part]
                if tombstone[part].any():
                    yield gid, Tombstones(relative[part][tombstone[part]])


@njit(cache=True, nogil=True)
def _count_bits(bits: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each range [lo, hi] (clipped to the bitmap), how many of its bits are set."""
    out = np.zeros(lo.shape[0], dtype=np.int64)
    top = bits.shape[0] * 8 - 1
    for b in range(lo.shape[0]):
        for v in range(max(lo[b], 0), min(hi[b], top) + 1):
            out[b] += (bits[v >> 3] >> (v & 7)) & 1
    return out


@njit(cache=True, nogil=True)
def _set_bits(bits: np.ndarray, values: np.ndarray) -> None:
    for v in values:
        bits[v >> 3] |= np.uint8(1 << (v & 7))


class Survivors:
    """The keyed offsets of one output group that the key map keeps, relative to the group's base.

    Blocks arrive from every reduce task; they are held as offset arrays while that is smaller
    than a bitmap up to the largest offset seen, then folded into the bitmap: memory stays at
    min(4 bytes per survivor, 1 bit per offset of the group) whatever the key count."""

    def __init__(self) -> None:
        self._blocks: list[np.ndarray] = []
        self._count = 0
        self._top = -1
        self._bits: np.ndarray | None = None
        self._sorted: np.ndarray | None = None

    def add(self, relative: np.ndarray) -> None:
        if len(relative) == 0:
            return
        self._top = max(self._top, int(relative.max()))
        if self._bits is None:
            self._blocks.append(relative)
            self._count += len(relative)
            if self._count * 32 > self._top + 1:
                self._fold(np.concatenate(self._blocks))
                self._blocks = []
        else:
            self._fold(relative)

    def _fold(self, relative: np.ndarray) -> None:
        bits = self._bits if self._bits is not None else np.zeros(0, dtype=np.uint8)
        self._bits = grow(bits, (self._top >> 3) + 1, len(bits), zero=True)
        _set_bits(self._bits, relative)

    def _array(self) -> np.ndarray:
        if self._sorted is None:
            self._sorted = np.unique(np.concatenate(self._blocks)) if self._blocks else np.zeros(0, np.int32)
            self._blocks = [self._sorted]
        return self._sorted

    def contains(self, relative: np.ndarray) -> np.ndarray:
        """Whether each offset survives."""
        if self._bits is not None:
            inside = (relative >= 0) & (relative < len(self._bits) * 8)
            at = np.where(inside, relative, 0)
            return inside & ((self._bits[at >> 3] >> (at & 7)) & 1).astype(np.bool_)
        kept = self._array()
        if len(kept) == 0:
            return np.zeros(len(relative), dtype=np.bool_)
        pos = np.minimum(np.searchsorted(kept, relative), len(kept) - 1)
        return kept[pos] == relative

    def count_in(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """How many offsets in [lo, hi] survive, per range."""
        if self._bits is not None:
            return _count_bits(self._bits, lo.astype(np.int64), hi.astype(np.int64))
        kept = self._array()
        return np.searchsorted(kept, hi, "right") - np.searchsorted(kept, lo, "left")
