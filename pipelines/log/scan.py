"""The scan stage's task: one segment's batch headers, CRCs and metadata (plus the few marker
keys), read by a Spark task; the driver plans from what it returns."""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

import numpy as np

from segment_io.errors import SegmentError
from segment_io.format.constants import OFFSET_ENTRY, TIME_ENTRY
from segment_io.index import AbortedTxn, read_time_index, read_txn_index
from segment_io.layout import LogDirListing, SegmentFiles
from segment_io.segment.framing import chunk_batches
from segment_io.segment.reader import SegmentReader
from segment_io.segment.scan import BatchTable
from segment_io.segment.sections import Arena
from segment_io.storage import Location, Storage

NOT_CONTROL = -1
EMPTY_CONTROL = -2


@dataclass(frozen=True)
class SegmentTask:
    """One segment to scan: the log it is in and which partition it belongs to. Like every task,
    it reads its log through a Location: in the driver's threads the run's own opened storage, on
    a worker one opened once per pack of tasks (a Location travels as its URL)."""

    segment_id: int
    partition_id: int
    src: Location
    files: SegmentFiles


@dataclass(frozen=True)
class SegmentMeta:
    """What planning needs about a segment: its index sizes (grouping), its largest timestamp
    (docs/log-format.md#time-index) and its aborted transactions."""

    segment_id: int
    base_offset: int
    size: int
    mtime_ms: int
    index_bytes: int
    timeindex_bytes: int
    largest_timestamp: int
    aborted: tuple[AbortedTxn, ...]  # the segment's .txnindex entries
    aged_by_mtime: bool = False  # no time-index entry: the largest timestamp is the .log's mtime


def control_types(reader: SegmentReader) -> np.ndarray:
    """The control record type of each control batch (ABORT 0, COMMIT 1, ...), else −1."""
    table = reader.scan().table
    out = np.full(len(table), NOT_CONTROL, dtype=np.int16)
    control = np.flatnonzero(table.is_control)
    if len(control) == 0:
        return out
    framed = reader.frame(control)
    first_of_batch = np.searchsorted(framed.record_batch, np.arange(len(control)))
    for j, i in enumerate(control.tolist()):
        r = int(first_of_batch[j])
        if r >= len(framed) or framed.record_batch[r] != j:
            out[i] = EMPTY_CONTROL
            continue
        start, length = int(framed.key_start[r]), int(framed.key_len[r])
        key = framed.sections.data[start : start + length].tobytes() if length >= 4 else b""
        out[i] = struct.unpack(">h", key[2:4])[0] if len(key) >= 4 else EMPTY_CONTROL
    return out


def scan_segment(
    storage: Storage, files: SegmentFiles, deep: bool = False
) -> tuple[SegmentMeta, BatchTable, np.ndarray]:
    """Shallow scan + CRCs + the metadata retention and compaction plan with. `deep` also
    decodes every record (one more decompression pass), so that no later stage can meet a
    malformed record: what a run that skips bad partitions must know before it starts writing."""
    reader = SegmentReader(storage, files.log.path, files.base_offset)
    scan = reader.scan()
    if scan.tail is not None:
        raise scan.tail
    reader.verify_crcs()
    reader.resolve_wrappers()
    if deep:
        arena = Arena()
        for index in chunk_batches(scan.table):
            reader.frame(index, arena)
    largest = -1
    if files.timeindex is not None and files.timeindex.size:
        ts, _ = read_time_index(storage.read(files.timeindex.path))
        largest = int(ts[-1]) if len(ts) else -1
    aborted: tuple[AbortedTxn, ...] = ()
    if files.txnindex is not None and files.txnindex.size:
        aborted = tuple(read_txn_index(storage.read(files.txnindex.path), files.txnindex.path))
    meta = SegmentMeta(
        segment_id=-1,
        base_offset=files.base_offset,
        size=files.size,
        mtime_ms=files.log.mtime_ms,
        index_bytes=(files.index.size // OFFSET_ENTRY * OFFSET_ENTRY) if files.index else 0,
        timeindex_bytes=(files.timeindex.size // TIME_ENTRY * TIME_ENTRY) if files.timeindex else 0,
        largest_timestamp=largest if largest >= 0 else files.log.mtime_ms,
        aborted=aborted,
        aged_by_mtime=largest < 0,
    )
    return meta, scan.table, control_types(reader)


def scan_tasks(listing: LogDirListing, src: Location) -> list[SegmentTask]:
    tasks: list[SegmentTask] = []
    for pid, part in enumerate(listing.partitions):
        for files in part.segments:
            tasks.append(SegmentTask(len(tasks), pid, src, files))
    return tasks


@dataclass(frozen=True)
class ScannedSegment:
    meta: SegmentMeta
    table: BatchTable
    controls: np.ndarray


@dataclass(frozen=True)
class ScanFailure:
    """A segment whose data is bad, when the run skips such partitions instead of failing."""

    segment_id: int
    error: SegmentError


def run_scan_task(task: SegmentTask, skip_corrupt: bool = False) -> ScannedSegment | ScanFailure:
    """Executed on a worker: one segment's metadata (small: one row per batch)."""
    try:
        meta, table, controls = scan_segment(task.src.storage, task.files, deep=skip_corrupt)
    except SegmentError as exc:
        if not skip_corrupt:
            raise
        return ScanFailure(task.segment_id, exc)
    return ScannedSegment(replace(meta, segment_id=task.segment_id), table, controls)
