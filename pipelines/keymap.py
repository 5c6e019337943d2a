"""The key map (spec §3.1, §3.3.3): which keyed records of the recopied prefix survive.

Map side (one task per input segment): decode keys and offsets only, reduce the dirty part to
one row per key in Arrow, and split the rows into hash buckets of the key. Reduce side (one task
per bucket): the latest dirty offset per (partition, key) wins; a clean-section record survives
only if its key has no dirty record. Winners go on, as sorted offset arrays, to the rewrite task
of the output group that holds them. Only (partition, key, offset) crosses the shuffle, as Arrow
IPC blocks; values never do, and no Python object is made per record.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from numba import njit

from segment_io import records as rec
from segment_io.layout import SegmentFiles
from segment_io.segment import SegmentReader, chunk_batches
from segment_io.storage import Storage

KEY_SCHEMA = pa.schema(
    [("tp", pa.int32()), ("key", pa.binary()), ("offset", pa.int64()), ("dirty", pa.bool_())]
)
CHUNK_BYTES = 4 * 1024 * 1024
# A map task sends what it holds on when it passes this many rows (bounded memory).
FLUSH_ROWS = 2_000_000


@dataclass(frozen=True)
class KeyTask:
    """One input segment of the recopied prefix whose keyed records feed the key map."""

    tp: int  # index of the partition in the run
    gid: int  # the output group the segment belongs to
    url: str
    files: SegmentFiles
    batches: np.ndarray  # batches whose records take part (not control, not aborted)
    first_dirty: int
    records: int  # records in those batches (from their headers), for sizing the shuffle


@dataclass(frozen=True)
class NullKeys:
    """How many null-key records a map task saw in its group (they are dropped, spec §3.3.3)."""

    gid: int
    count: int


@njit(cache=True, nogil=True)
def key_buckets(data: np.ndarray, offsets: np.ndarray, buckets: int) -> np.ndarray:
    """FNV-1a of each key's bytes, modulo `buckets` (Arrow has no element-wise hash kernel)."""
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.int32)
    for i in range(n):
        h = np.uint64(0xCBF29CE484222325)
        for j in range(offsets[i], offsets[i + 1]):
            h = (h ^ np.uint64(data[j])) * np.uint64(0x100000001B3)
        out[i] = np.int32(h % np.uint64(buckets))
    return out


def _dirty_winners(table: pa.Table) -> tuple[pa.Table, pa.Table]:
    """(latest dirty offset per (tp, key) as columns tp, key, offset; the clean rows)."""
    dirty = table.filter(table.column("dirty"))
    winners = dirty.group_by(["tp", "key"], use_threads=False).aggregate([("offset", "max")])
    clean = table.filter(pa.compute.invert(table.column("dirty")))
    return winners.rename_columns(["tp", "key", "offset"]), clean


def _reduce_dirty(table: pa.Table) -> pa.Table:
    """Latest dirty offset per (tp, key); clean rows are kept as they are."""
    winners, clean = _dirty_winners(table)
    winners = winners.append_column("dirty", pa.array(np.ones(winners.num_rows, dtype=np.bool_)))
    return pa.concat_tables([winners.select(KEY_SCHEMA.names).cast(KEY_SCHEMA), clean])


def extract_keys(task: KeyTask, null_keys: list[int]) -> Iterator[pa.Table]:
    """(tp, key, offset, dirty) of the task's keyed records, dirty part reduced per key, in blocks
    of at most about FLUSH_ROWS rows (the reduce side dedupes across blocks, so memory here is
    bounded whatever the key count); the null-key records seen are added to `null_keys[0]`."""
    storage, _ = Storage.for_url(task.url)
    reader = SegmentReader(storage, task.files.log.path, task.files.base_offset)
    table = reader.scan().table
    selected = np.zeros(len(table), dtype=np.bool_)
    selected[task.batches] = True
    held: list[pa.Table] = []
    held_rows = 0
    for index in chunk_batches(table, CHUNK_BYTES):
        index = index[selected[index]]
        if len(index) == 0:
            continue
        framed = reader.frame(index)
        has_key = framed.key_len >= 0
        null_keys[0] += int(len(has_key) - has_key.sum())
        offsets = framed.offset[has_key]
        chunk = pa.table(
            [
                pa.array(np.full(len(offsets), task.tp, dtype=np.int32)),
                rec.binary_array(framed.sections.data, framed.key_start[has_key], framed.key_len[has_key]),
                pa.array(offsets),
                pa.array(offsets >= task.first_dirty),
            ],
            schema=KEY_SCHEMA,
        )
        held.append(_reduce_dirty(chunk))
        held_rows += held[-1].num_rows
        if held_rows >= FLUSH_ROWS:
            yield _reduce_dirty(pa.concat_tables(held))
            held, held_rows = [], 0
    if held:
        yield _reduce_dirty(pa.concat_tables(held)) if len(held) > 1 else held[0]


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def from_ipc(blobs: Iterable[bytes]) -> pa.Table:
    tables = [pa.ipc.open_stream(b).read_all() for b in blobs]
    return pa.concat_tables(tables) if tables else KEY_SCHEMA.empty_table()


def map_keys(task: KeyTask, buckets: int) -> Iterator[tuple[int, bytes | NullKeys]]:
    """Map side: (bucket, Arrow IPC block of key rows) per non-empty bucket, and the task's
    null-key count routed to the bucket of its group (counts pass through to the rewrite)."""
    null_keys = [0]
    for table in extract_keys(task, null_keys):
        yield from _bucketed(table, buckets)
    if null_keys[0]:
        yield task.gid % buckets, NullKeys(task.gid, null_keys[0])


def _bucketed(table: pa.Table, buckets: int) -> Iterator[tuple[int, bytes]]:
    if table.num_rows == 0:
        return
    keys = table.column("key").combine_chunks()
    _, offsets_buf, data_buf = keys.buffers()
    key_offsets = np.frombuffer(offsets_buf, dtype=np.int32, count=len(keys) + 1, offset=keys.offset * 4)
    key_data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf else np.zeros(0, dtype=np.uint8)
    bucket = key_buckets(key_data, key_offsets.astype(np.int64), buckets)
    order = np.argsort(bucket, kind="stable")
    table = table.take(pa.array(order))
    bounds = np.searchsorted(bucket[order], np.arange(buckets + 1))
    for b in range(buckets):
        lo, hi = int(bounds[b]), int(bounds[b + 1])
        if hi > lo:
            yield b, to_ipc(table.slice(lo, hi - lo))


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
    items: Iterable[tuple[int, bytes | NullKeys]], bounds: GroupBounds
) -> Iterator[tuple[int, np.ndarray | NullKeys]]:
    """Reduce side for one bucket: winning offsets per output group, relative to the group's base
    offset as int32 (half the memory of absolute offsets), and the null-key counts."""
    blobs = []
    for _, item in items:
        if isinstance(item, NullKeys):
            yield item.gid, item
        else:
            blobs.append(item)
    table = from_ipc(blobs)
    if table.num_rows == 0:
        return
    winners, clean = _dirty_winners(table)
    if clean.num_rows:
        clean = clean.join(winners.select(["tp", "key"]), ["tp", "key"], join_type="left anti")
    tps = np.concatenate([winners.column("tp").to_numpy(), clean.column("tp").to_numpy()])
    offsets = np.concatenate([winners.column("offset").to_numpy(), clean.column("offset").to_numpy()])
    for tp in np.unique(tps).tolist():
        mine = offsets[tps == tp]
        gids, bases = bounds.locate(tp, mine)
        # Offsets relative to their group's base fit 32 bits (the grouping rule guarantees it).
        relative = (mine - bases).astype(np.int32)
        order = np.argsort(gids, kind="stable")
        relative, gids = relative[order], gids[order]
        edges = np.flatnonzero(np.diff(gids)) + 1
        for part in np.split(np.arange(len(gids)), edges):
            if len(part):
                yield int(gids[part[0]]), relative[part]
