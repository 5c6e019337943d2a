"""Producer state as a broker holds it: the snapshots a written log carries (a cut's at its new
end; a clean's and an erase's at each segment base and the log end), and the producers a broker
loading a log knows (which Kafka's cleaner protects), so that a broker loading the log knows every
producer and every transaction left open (Kafka, finding a cleanly stopped log without a snapshot at its end,
rebuilds producer state only from its last two segments, and would take an older open
transaction for finished). Neither a compaction nor an erase changes that state: offsets, every
producer's last batch and every marker are kept."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pipelines.log.cleanable import log_end_offset
from pipelines.log.scan import ScannedSegment
from pipelines.log.scanned import Scanned
from segment_io.errors import CorruptCheckpoint
from segment_io.layout import CLEAN_SHUTDOWN, LOG_START_CHECKPOINT, LogDirListing, PartitionListing
from segment_io.producer_snapshot import (
    ProducerEntry,
    coordinator_epochs,
    producer_batches,
    read_snapshot,
    replay,
    snapshot_name,
    snapshot_offset,
    write_snapshot,
)
from segment_io.segment.reader import SegmentReader
from segment_io.storage import Storage
from segment_io.storage.base import FileInfo
from segment_io.topic_partition import TopicPartition


def kept_snapshots(part: PartitionListing, log_start: int, end: int) -> list[FileInfo]:
    """The source's snapshots a truncation keeps: above the log start, at or below the new end."""
    return [info for info in part.snapshots if log_start < snapshot_offset(info.name) <= end]


def latest_snapshot(
    storage: Storage, snapshots: Sequence[FileInfo], log: Callable[[str], Any]
) -> tuple[dict[int, ProducerEntry], int] | None:
    """The latest readable one of `snapshots` and its offset (a corrupt one is passed over, as the
    broker does); None: none is readable."""
    for info in sorted(snapshots, key=lambda i: -snapshot_offset(i.name)):
        try:
            return read_snapshot(storage.read(info.path), info.path), snapshot_offset(info.name)
        except CorruptCheckpoint as exc:
            log(f"segpipe: warning: {exc}; an older snapshot or the log itself is used instead")
    return None


def state_at_end(
    storage: Storage,
    part: PartitionListing,
    segments: list[ScannedSegment],
    end: int,
    kept_batches: Sequence[int | None],
    log_start: int,
    log: Callable[[str], Any],
) -> dict[int, ProducerEntry]:
    """The producer state at `end` (states_at)."""
    return states_at(storage, part, segments, [end], kept_batches, log_start, log)[end]


def states_at(
    storage: Storage,
    part: PartitionListing,
    segments: list[ScannedSegment],
    offsets: Sequence[int],
    kept_batches: Sequence[int | None],
    log_start: int,
    log: Callable[[str], Any],
) -> dict[int, dict[int, ProducerEntry]]:
    """The producer state at each of `offsets` (ascending, above the log start): the latest
    readable snapshot at or below the first one that the log keeps (a corrupt one is passed over,
    as the broker does), carried over the kept batches after it, up to each offset in turn
    (`kept_batches`: per segment, how many of its first batches the log keeps; None: none, the
    segment is gone). One replay for all: each offset's state is the one before it carried on."""
    state, since = latest_snapshot(storage, kept_snapshots(part, log_start, offsets[0]), log) or (
        {},
        log_start,
    )
    tables = [s.table for s in segments]
    kept = [
        np.flatnonzero(t.last_offset[: n or 0] >= since) for t, n in zip(tables, kept_batches, strict=True)
    ]
    epochs = [
        _marker_epochs(storage, f.log.path, f.base_offset, s, r)
        for f, s, r in zip(part.segments, segments, kept, strict=True)
    ]
    out = {}
    for offset in offsets:  # the batches from the previous offset up to this one
        rows = [
            r[(t.last_offset[r] >= since) & (t.last_offset[r] < offset)]
            for t, r in zip(tables, kept, strict=True)
        ]
        state = replay(state, producer_batches(tables, rows, epochs))
        out[offset], since = state, offset
    return out


def write_snapshots(
    storage: Storage,
    part: PartitionListing,
    segments: list[ScannedSegment],
    kept: Sequence[bool],
    log_start: int,
    bases: Sequence[int],
    end: int,
    out: Storage,
    directory: str,
    log: Callable[[str], Any],
) -> None:
    """The snapshots a broker writes of a log whose `kept` segments are kept with every batch (a
    clean's, an erase's), where the source has none there to carry over: one at each segment base
    it rolled to (`bases`: the written log's; none at or below the log start, whose state went
    with the deleted batches) and one at the log end, if the log holds anything."""
    have = {snapshot_offset(i.name) for i in part.snapshots}
    wanted = sorted({b for b in bases if log_start < b < end} | ({end} if end > log_start else set()))
    if not wanted or set(wanted) <= have:
        return
    batches = [len(s.table) if k else None for s, k in zip(segments, kept, strict=True)]
    for offset, state in states_at(storage, part, segments, wanted, batches, log_start, log).items():
        if offset not in have:
            out.write_atomic(posixpath.join(directory, snapshot_name(offset)), write_snapshot(state.values()))


def _marker_epochs(
    storage: Storage, path: str, base: int, segment: ScannedSegment, rows: np.ndarray
) -> np.ndarray:
    """Per batch of the segment, the coordinator epoch of a marker among `rows` (−1 elsewhere)."""
    table = segment.table
    out = np.full(len(table), -1, dtype=np.int64)
    markers = rows[table.is_control[rows] & (table.magic[rows] == 2)]
    if len(markers):
        framed = SegmentReader(storage, path, base).frame(markers)
        out[markers[framed.record_batch]] = coordinator_epochs(framed)
    return out


def known_producers(
    storage: Storage,
    part: PartitionListing,
    segments: list[ScannedSegment],
    log_start: int,
    clean_shutdown: bool,
    log: Callable[[str], Any],
) -> set[int] | None:
    """The producer ids a broker loading this partition knows (None: every one its batches name).
    Kafka loads the latest readable snapshot at or below the log end and replays only the batches
    from its offset on, so a producer the snapshot lacks and no later batch names is unknown; a
    cleanly stopped log without any snapshot loads empty (the broker writes empty snapshots at
    its last two segments and its end instead of reading it); otherwise it replays the whole log."""
    end = max(log_start, log_end_offset(segments))
    loaded = latest_snapshot(storage, kept_snapshots(part, log_start - 1, end), log)
    if loaded is None:
        return set() if clean_shutdown else None
    known, since = set(loaded[0]), loaded[1]
    for s in segments:
        later = (s.table.last_offset >= since) & (s.table.producer_id >= 0)
        known.update(s.table.producer_id[later].tolist())
    return known


def known_producers_of(scanned: Scanned, log: Callable[[str], Any]) -> dict[TopicPartition, set[int] | None]:
    """Per partition of the scanned log, the producers a broker loading it knows (known_producers)."""
    listing, storage = scanned.listing, scanned.storage
    clean_shutdown = storage.exists(posixpath.join(listing.path, CLEAN_SHUTDOWN))
    return {
        part.tp: known_producers(
            storage, part, scanned.segments[part.tp], listed_log_start(listing, part), clean_shutdown, log
        )
        for part in listing.partitions
    }


def listed_log_start(listing: LogDirListing, part: PartitionListing) -> int:
    """A partition's log start offset as its log directory says: its checkpoint entry, or its
    first segment's base offset where that is higher (or the checkpoint names none)."""
    start = listing.checkpoints.get(LOG_START_CHECKPOINT, {}).get(part.tp, 0)
    return max([start, *(f.base_offset for f in part.segments[:1])])
