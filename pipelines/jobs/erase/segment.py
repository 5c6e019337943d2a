"""Erasing listed keys from one segment (a worker task; docs/erasing-keys.md).

A first pass frames every data batch and matches its records against the key list. A segment in
which nothing matches is copied with its indexes byte for byte. Otherwise it is written anew
under its own base offset through the batch writer clean uses (log.batch_writer), with erasure's
verdicts: a record goes only for a listed key; a batch that loses no record is copied byte for
byte; a batch that loses some is rebuilt in its codec and magic with its offsets, producer fields
and delete horizon unchanged (no horizon is stamped: nothing is compacted); a batch that loses
all is dropped, unless it is its producer's last data batch or the log's last batch, where an
empty header keeps its offsets (producer state, the log end offset). Markers and the `.txnindex`
are unchanged. Erasing from a magic 0/1 message set is refused (UnsupportedErasure)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

import numpy as np

from pipelines.jobs.erase.keys import ErasedKeys, matched_entries
from pipelines.log.batch_writer import BatchRetention, InputSegment, OutputSegment, WriteCounts, write_chunk
from pipelines.output.copy import run_copies, segment_copies
from pipelines.runtime.faults import fault_point
from segment_io.errors import UnsupportedErasure
from segment_io.format.compression import CompressionLevels
from segment_io.layout import SegmentFiles
from segment_io.segment.framing import chunk_batches
from segment_io.segment.reader import SegmentReader
from segment_io.segment.sections import Arena
from segment_io.segment.writer import SegmentLimits, SegmentWriter
from segment_io.storage import open_storage, transfer

# Index density of rewritten segments: Kafka's defaults (index.interval.bytes, segment.index.bytes).
LIMITS = SegmentLimits(segment_bytes=2**62)


@dataclass(frozen=True)
class EraseTask:
    """One segment of a partition of the run; `retain_empty`: per batch, whether an empty header
    stands in for it if every record goes (its producer's last data batch, the log's last batch)."""

    partition: int  # index of the partition in the run
    partition_dir: str
    url: str
    files: SegmentFiles
    retain_empty: np.ndarray  # bool, per batch


@dataclass(frozen=True)
class SegmentErasure:
    """What the erase did to one segment, and per listed key (by entry) what it removed there."""

    partition: int
    base_offset: int
    rewritten: bool
    bytes_in: int
    bytes_out: int
    records_in: int
    erased: int
    batches_rewritten: int
    batches_emptied: int
    batches_dropped: int
    entries: np.ndarray  # int64, the keys' entries that matched here, ascending
    counts: np.ndarray  # records removed per entry
    first_offset: np.ndarray  # per entry, its first and last removed offset
    last_offset: np.ndarray


@dataclass(frozen=True)
class EraseContext:
    """What every erase task shares."""

    keys: ErasedKeys
    header_names: ErasedKeys | None
    staging_url: str | None  # None: a dry run


def erase_segment(task: EraseTask, ctx: EraseContext) -> SegmentErasure:
    """Executed on a worker: erase the listed keys from one segment into the staging area."""
    storage, _ = open_storage(task.url)
    reader = SegmentReader(storage, task.files.log.path, task.files.base_offset)
    table = reader.scan().table
    arena = Arena()
    offsets: list[np.ndarray] = []
    entries: list[np.ndarray] = []
    records_in = int(np.maximum(table.records_count[table.is_control], 0).sum())
    for index in chunk_batches(table):
        data = index[~table.is_control[index]]
        if len(data) == 0:
            continue
        framed = reader.frame(data, arena)
        records_in += len(framed)
        matched = matched_entries(framed, ctx.keys, ctx.header_names)
        hit = np.flatnonzero(matched >= 0)
        if len(hit) == 0:
            continue
        legacy = hit[table.magic[data[framed.record_batch[hit]]] < 2]
        if len(legacy):
            batch = int(data[framed.record_batch[legacy[0]]])
            raise UnsupportedErasure(
                task.files.log.path,
                int(table.position[batch]),
                f"a listed key is in a magic {int(table.magic[batch])} message set (offset "
                f"{int(framed.offset[legacy[0]])}); erasing from magic 0/1 data is not supported",
            )
        offsets.append(framed.offset[hit].copy())
        entries.append(matched[hit])
    size = task.files.size
    if not offsets:
        if ctx.staging_url is not None:
            run_copies(segment_copies(task.partition_dir, task.files, task.url), ctx.staging_url)
        return _result(
            task, False, size, size, records_in, np.zeros(0, np.int64), np.zeros(0, np.int64), None
        )
    erased, matched = np.concatenate(offsets), np.concatenate(entries)
    if ctx.staging_url is None:  # a dry run: what would go, nothing written
        return _result(task, True, size, size, records_in, erased, matched, None)
    counts, size_out = _rewrite(task, reader, np.sort(erased), ctx.staging_url)
    return _result(task, True, size, size_out, records_in, erased, matched, counts)


def _rewrite(
    task: EraseTask, reader: SegmentReader, erased: np.ndarray, staging_url: str
) -> tuple[WriteCounts, int]:
    """The segment written anew without the records at the `erased` offsets (sorted)."""
    table = reader.scan().table
    files = task.files
    dst, dst_root = open_storage(staging_url)
    out_dir = posixpath.join(dst_root, task.partition_dir)
    writer = SegmentWriter(dst, out_dir, LIMITS)
    writer.roll(files.base_offset)
    actions = np.where(task.retain_empty, BatchRetention.RETAIN_EMPTY, BatchRetention.DELETE_EMPTY)
    counts = WriteCounts()
    # No horizon is stamped (nothing is compacted), no transaction indexed (the .txnindex is copied).
    out = OutputSegment(writer, counts, CompressionLevels(), horizon_new=0, stamp_horizons=False)
    src = InputSegment(reader, table, actions.astype(np.int8), np.zeros(len(table), dtype=np.bool_))
    # How many erased offsets each batch holds: batches with none are copied unread (and magic 0/1
    # entries, which hold none: they were refused above; a wrapper's base offset may read −1).
    hits = np.searchsorted(erased, table.last_offset, "right") - np.searchsorted(
        erased, table.base_offset, "left"
    )
    untouched = (hits == 0) | (table.magic < 2)
    arena = Arena()
    for index in chunk_batches(table):
        whole = untouched[index]
        framed = reader.frame(index[~whole], arena)
        pos = np.minimum(np.searchsorted(erased, framed.offset), len(erased) - 1)
        keep = erased[pos] != framed.offset
        write_chunk(out, src, index, whole, framed, keep)
        fault_point("mid-rewrite")
    [segment] = writer.close(files.log.mtime_ms)
    if files.txnindex is not None:  # markers are kept: the aborted transactions index is unchanged
        target = posixpath.join(out_dir, files.txnindex.name)
        transfer(open_storage(task.url)[0], files.txnindex.path, dst, target, files.txnindex.mtime_ms)
    return counts, segment.size


def _result(
    task: EraseTask,
    rewritten: bool,
    bytes_in: int,
    bytes_out: int,
    records_in: int,
    offsets: np.ndarray,
    entries: np.ndarray,
    stats: WriteCounts | None,
) -> SegmentErasure:
    """The segment's figures, and per matched entry its count and offset range."""
    order = np.lexsort((offsets, entries))
    entries, offsets = entries[order], offsets[order]
    unique, first, counts = np.unique(entries, return_index=True, return_counts=True)
    last = first + counts - 1
    return SegmentErasure(
        partition=task.partition,
        base_offset=task.files.base_offset,
        rewritten=rewritten,
        bytes_in=bytes_in,
        bytes_out=bytes_out,
        records_in=records_in,
        erased=len(offsets),
        batches_rewritten=stats.batches_rewritten if stats else 0,
        batches_emptied=stats.batches_emptied if stats else 0,
        batches_dropped=stats.batches_dropped if stats else 0,
        entries=unique,
        counts=counts,
        first_offset=offsets[first],
        last_offset=offsets[last],
    )
