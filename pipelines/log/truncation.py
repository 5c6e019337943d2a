"""Where a partition is cut, and what of it stays: Kafka's truncation of a log to an offset
(docs/cutting-a-log.md), from the batch headers alone.

Kafka truncates whole batches: every batch whose last offset is at or above the offset goes, so a
batch that straddles it goes whole (its lower records too), and the log then ends where that batch
began. Segments whose base offset is above the offset go; the last segment that starts at or
below it keeps its batches below the offset (it may keep none: an empty segment at its base); an
offset below the first segment leaves one empty segment there. Producer snapshots above the new
end, leader-epoch entries starting at or above it, and `.txnindex` entries whose marker is at or
above it go; the root checkpoints are lowered to the new end."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from segment_io.index import AbortedTxn
from segment_io.layout import PartitionListing
from segment_io.producer_snapshot import producer_batches, replay
from segment_io.segment.list_offsets import offset_for_time
from segment_io.segment.scan import BatchTable
from segment_io.storage import Storage


@dataclass(frozen=True)
class OpenTransaction:
    """A transaction with data below the cut and its marker above it (or none): open in the cut
    log, so a read_committed consumer reads nothing from its first offset on."""

    producer_id: int
    producer_epoch: int
    first_offset: int


@dataclass(frozen=True)
class PartitionCut:
    """One partition's cut. `asked`: the offset it is cut at (None: nothing is cut); `end`: the log
    end offset that remains; per segment, how many of its batches stay (all of them: copied whole;
    0 for a segment that stays empty) or None (dropped); `empty_at`: the base of the one empty
    segment an offset below the first segment leaves."""

    asked: int | None
    before: int  # the log end offset before the cut
    end: int
    kept_batches: tuple[int | None, ...]
    empty_at: int | None
    open_transactions: tuple[OpenTransaction, ...]  # every transaction open at the new end
    already_open: tuple[OpenTransaction, ...] = ()  # of those, the ones open in the log as it is too


def cut_partition(
    bases: Sequence[int], tables: Sequence[BatchTable], asked: int | None, log_end: int
) -> PartitionCut:
    """The cut at offset `asked` of a partition whose segments start at `bases` (ascending) with
    these batch tables; `log_end`: its log end offset as it is."""
    whole: tuple[int | None, ...] = tuple(len(t) for t in tables)
    if asked is None or asked >= log_end:
        as_is = _open(tables, whole)
        return PartitionCut(asked, log_end, log_end, whole, None, as_is, as_is)
    if not bases or asked < bases[0]:
        return PartitionCut(asked, log_end, asked, tuple(None for _ in bases), asked, ())
    floor = int(np.searchsorted(np.asarray(bases), asked, side="right")) - 1
    kept_list: list[int | None] = []
    end = asked
    for i, table in enumerate(tables):
        if i < floor:
            kept_list.append(len(table))
        elif i == floor:
            n = int(np.searchsorted(table.last_offset, asked, side="left"))  # batches ending below
            kept_list.append(n)
            end = int(table.last_offset[n - 1]) + 1 if n else bases[i]
        else:
            kept_list.append(None)
    kept = tuple(kept_list)
    at_cut, open_as_is = _open(tables, kept), set(_open(tables, whole))
    already = tuple(t for t in at_cut if t in open_as_is)
    return PartitionCut(asked, log_end, end, kept, None, at_cut, already)


def cut_at(
    storage: Storage,
    part: PartitionListing,
    tables: Sequence[BatchTable],
    until_offset: int | None,
    until_time: int | None,
    log_start: int,
) -> PartitionCut:
    """A partition's cut at `until_offset`, or at the offset ListOffsets gives `until_time` (the
    whole log where no record is that late); `tables`: its segments' batch tables, in order."""
    ends = [int(t.last_offset[-1]) + 1 for t in tables if len(t)]
    log_end = ends[-1] if ends else (part.segments[-1].base_offset if part.segments else 0)
    asked = until_offset
    if until_time is not None:
        found = offset_for_time(storage, part.segments, until_time, log_start)
        asked = None if found is None else found.offset
    return cut_partition([f.base_offset for f in part.segments], tables, asked, log_end)


def _open(tables: Sequence[BatchTable], kept: tuple[int | None, ...]) -> tuple[OpenTransaction, ...]:
    """The transactions whose data is kept and whose marker is not: per producer, transactional
    data after its last marker (the broker's producer state replayed over the kept batches)."""
    state = replay({}, producer_batches(tables, [np.arange(n or 0) for n in kept]))
    return tuple(
        OpenTransaction(e.producer_id, e.epoch, e.txn_first_offset)
        for e in sorted(state.values(), key=lambda e: e.producer_id)
        if e.txn_first_offset >= 0
    )


def kept_txns(entries: Sequence[AbortedTxn], end: int) -> list[AbortedTxn]:
    """A segment's aborted transactions whose ABORT marker stays (Kafka keeps the entries whose
    last offset is below the new end)."""
    return [e for e in entries if e.last_offset < end]


def kept_epochs(entries: Sequence[tuple[int, int]], end: int) -> list[tuple[int, int]]:
    """Leader-epoch entries (epoch, start offset) that start below the new end."""
    return [(epoch, start) for epoch, start in entries if start < end]


def lowered(offset: int, end: int) -> int:
    """A checkpointed offset (recovery point, log start, high watermark) of the cut log."""
    return min(offset, end)


def active_base(bases: Sequence[int], cut: PartitionCut) -> int:
    """The base offset of the segment that ends the cut log (its new active segment)."""
    if cut.empty_at is not None:
        return cut.empty_at
    kept = [base for base, batches in zip(bases, cut.kept_batches, strict=True) if batches is not None]
    return kept[-1] if kept else cut.end


def lowered_cleaner_offset(offset: int, bases: Sequence[int], cut: PartitionCut) -> int:
    """The cleaner checkpoint of the cut log: where the log was cut, lowered to its new active
    segment's base offset if above it, as Kafka's truncation lowers a compacted partition's
    (LogCleanerManager.maybeTruncateCheckpoint); a partition with a cleaner checkpoint is taken to
    be compacted, as only the cleaner writes one."""
    return min(offset, active_base(bases, cut)) if cut.end < cut.before else offset
