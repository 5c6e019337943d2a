"""Erasing listed keys from one segment (a worker task; docs/erasing-keys.md).

One pass frames every data batch once and matches its records against the key list. A segment in
which nothing matches is copied with its indexes byte for byte. Otherwise it is written anew
(from its first chunk with a match; the batches before it copied unread) under its own base
offset through the batch writer clean uses (log.batch_writer), with erasure's
verdicts: a record goes only for a listed key; a batch that loses no record is copied byte for
byte; a batch that loses some is rebuilt in its codec and magic with its offsets, producer fields
and delete horizon unchanged (no horizon is stamped: nothing is compacted); a batch that loses
all is dropped, unless it is its producer's last data batch or the log's last batch, where an
empty header keeps its offsets (producer state, the log end offset). Markers and the `.txnindex`
are unchanged. A magic 0/1 entry (a message, or a compressed wrapper of messages) that carries a
listed key becomes a v2 batch of its other records, as Kafka's cleaner converts a legacy entry it
filters, each record at its own offset; one that carries only listed keys is dropped (or, ending
the log, becomes an empty header that keeps the log end offset)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

import numpy as np

from pipelines.jobs.erase.join import ListedRecords
from pipelines.keys.key_set import ErasedKeys, matched_entries
from pipelines.log.batch_writer import BatchRetention, InputSegment, OutputSegment, WriteCounts, write_chunk
from pipelines.output.copy import run_copies, segment_copies
from pipelines.runtime.faults import fault_point
from segment_io.format.compression import CompressionLevels
from segment_io.layout import SegmentFiles
from segment_io.segment.framing import Framed, chunk_batches
from segment_io.segment.reader import SegmentReader
from segment_io.segment.sections import Arena
from segment_io.segment.writer import SegmentLimits, SegmentWriter
from segment_io.storage import Location, transfer

# Index density of rewritten segments: Kafka's defaults (index.interval.bytes, segment.index.bytes).
LIMITS = SegmentLimits(segment_bytes=2**62)


@dataclass(frozen=True)
class EraseTask:
    """One segment of a partition of the run; `retain_empty`: per batch, whether an empty header
    stands in for it if every record goes (its producer's last data batch, the log's last batch)."""

    partition: int  # index of the partition in the run
    partition_dir: str
    src: Location
    files: SegmentFiles
    retain_empty: np.ndarray  # bool, per batch
    # The records carrying a listed key, found by the key join (jobs/erase/join.py); None: the
    # task matches them against the context's keys itself.
    listed: ListedRecords | None = None

    def matched(self, framed: Framed, ctx: EraseContext) -> np.ndarray:
        """Per framed record, the key entry (or id) of the listed key it carries, else EMPTY."""
        if self.listed is not None:
            return self.listed.entries_of(framed.offset)
        assert ctx.keys is not None
        return matched_entries(framed, ctx.keys, ctx.header_names)


@dataclass(frozen=True)
class SegmentErasure:
    """What the erase did to one segment, and per listed key (by entry) what it removed there."""

    partition: int
    base_offset: int
    source: str  # the segment's log file (a remote segment's object, named by its segment id)
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

    keys: ErasedKeys | None  # None: every task's listed records come from the key join
    header_names: ErasedKeys | None
    staging: Location | None  # None: a dry run
    # False: a segment without a listed key is not written to the staging (the caller keeps it).
    copy_unchanged: bool = True


def erase_segment(task: EraseTask, ctx: EraseContext) -> SegmentErasure:
    """Executed on a worker: erase the listed keys from one segment into the staging area, in one
    pass: each chunk's data batches are framed once, matched, and (from the first chunk with a
    match on) written; the chunks before that are copied batch by batch, unread."""
    reader = SegmentReader(task.src.storage, task.files.log.path, task.files.base_offset)
    table = reader.scan().table
    arena = Arena()
    offsets: list[np.ndarray] = []
    entries: list[np.ndarray] = []
    # Markers are written whole (an erase matches data records only), and so is a magic 0/1 entry
    # that carries no listed key; one that does is converted as Kafka's cleaner converts a legacy
    # entry it filters (log.batch_writer.convert_legacy).
    records_in = int(np.maximum(table.records_count[table.is_control], 0).sum())
    out: _Output | None = None
    for index in chunk_batches(table):
        legacy_hit, legacy_whole_records = _legacy_matches(
            task, reader, index[(table.magic[index] < 2) & ~table.is_control[index]], ctx
        )
        records_in += legacy_whole_records
        whole = table.is_control[index] | ((table.magic[index] < 2) & ~np.isin(index, legacy_hit))
        framed = reader.frame(index[~whole], arena)
        records_in += len(framed)
        matched = task.matched(framed, ctx)
        hit = np.flatnonzero(matched >= 0)
        if len(hit):
            offsets.append(framed.offset[hit].copy())
            entries.append(matched[hit])
        if ctx.staging is None:  # a dry run: what would go, nothing written
            continue
        if out is None and len(hit):
            out = _Output.start(task, reader, ctx.staging, int(index[0]))
        if out is not None:
            write_chunk(out.segment, out.source, index, whole, framed, matched < 0)
            fault_point("mid-rewrite")
    size = task.files.size
    erased = np.concatenate(offsets) if offsets else np.zeros(0, np.int64)
    matched_all = np.concatenate(entries) if entries else np.zeros(0, np.int64)
    if out is not None:
        return _result(
            task, True, size, out.finish(task), records_in, erased, matched_all, out.segment.counts
        )
    if ctx.staging is not None and ctx.copy_unchanged:
        run_copies(segment_copies(task.partition_dir, task.files, task.src), ctx.staging)
    return _result(task, bool(offsets), size, size, records_in, erased, matched_all, None)


def _legacy_matches(
    task: EraseTask, reader: SegmentReader, legacy: np.ndarray, ctx: EraseContext
) -> tuple[np.ndarray, int]:
    """Of the magic 0/1 data entries `legacy`, those that carry a listed key (to be rewritten), and
    the records of the others (written whole)."""
    if len(legacy) == 0:
        return legacy, 0
    framed = reader.frame(legacy)
    owner = legacy[framed.record_batch]
    hit = np.unique(owner[task.matched(framed, ctx) >= 0])
    return hit, int((~np.isin(owner, hit)).sum())


@dataclass(frozen=True)
class _Output:
    """The segment being written anew under its own base offset, and its input as the batch
    writer takes it."""

    segment: OutputSegment
    source: InputSegment
    out_dir: str

    @classmethod
    def start(cls, task: EraseTask, reader: SegmentReader, staging: Location, unread: int) -> _Output:
        """The output, with the input's first `unread` batches (no listed key) copied as they are."""
        table = reader.scan().table
        out_dir = staging.file(task.partition_dir)
        writer = SegmentWriter(staging.storage, out_dir, LIMITS)
        writer.roll(task.files.base_offset)
        actions = np.where(task.retain_empty, BatchRetention.RETAIN_EMPTY, BatchRetention.DELETE_EMPTY)
        # No horizon is stamped (nothing is compacted), no transaction indexed (the .txnindex is copied).
        segment = OutputSegment(
            writer, WriteCounts(), CompressionLevels(), horizon_new=0, stamp_horizons=False
        )
        source = InputSegment(reader, table, actions.astype(np.int8), np.zeros(len(table), dtype=np.bool_))
        if unread:
            nothing = reader.frame(np.zeros(0, dtype=np.int64))
            write_chunk(
                segment, source, np.arange(unread), np.ones(unread, np.bool_), nothing, np.ones(0, np.bool_)
            )
        return cls(segment, source, out_dir)

    def finish(self, task: EraseTask) -> int:
        """Close the segment (the input's mtime kept) and copy the `.txnindex` beside it (markers are
        kept: the aborted transactions index is unchanged); its size."""
        files = task.files
        [written] = self.segment.writer.close(files.log.mtime_ms)
        if files.txnindex is not None:
            dst = self.segment.writer.storage
            target = posixpath.join(self.out_dir, files.txnindex.name)
            transfer(task.src.storage, files.txnindex.path, dst, target, files.txnindex.mtime_ms)
        return written.size


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
        source=task.files.log.path,
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
