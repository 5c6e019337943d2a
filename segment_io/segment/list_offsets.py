"""Kafka's ListOffsets by time over a partition's segments: the offset a consumer seeking to a
time gets (`inspect --at`, and where `cut --until-time` cuts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow.compute as pc

from segment_io.errors import CorruptIndex
from segment_io.layout import SegmentFiles
from segment_io.segment.ranges import RecordRange, segment_window, time_entries
from segment_io.segment.reader import SegmentReader
from segment_io.storage import Storage


@dataclass(frozen=True)
class TimestampOffset:
    """What Kafka's ListOffsets answers for a time: the first record at or after it."""

    offset: int
    timestamp: int


def largest_timestamp(storage: Storage, files: SegmentFiles, active: bool) -> int:
    """A segment's largest timestamp as Kafka's LogSegment.largestTimestamp gives it: the largest
    of its batches' (a rolled segment's last time index entry, which Kafka appends when the
    segment stops being active; the active segment's from its headers, as its index may lag), or,
    where none has one (magic 0, no batch, a rolled segment's empty time index), the file's
    modification time. Only an unusable time index (which the broker would rebuild) or the active
    segment costs a scan of the headers."""
    if not active:
        try:
            times, _ = time_entries(storage, files)
            return int(times[-1]) if len(times) else files.log.mtime_ms
        except CorruptIndex:
            pass  # the headers say it, as the broker's rebuilt index would
    table = SegmentReader(storage, files.log.path, files.base_offset).scan().table
    largest = int(table.max_timestamp.max()) if len(table) else -1
    return largest if largest >= 0 else files.log.mtime_ms


def offset_for_time(
    storage: Storage, segments: Sequence[SegmentFiles], timestamp: int, log_start_offset: int = 0
) -> TimestampOffset | None:
    """Kafka's ListOffsets rule for `timestamp` over a partition's `segments` (in offset order):
    the first segment whose largest timestamp (largest_timestamp) is at or after it, and only
    that one (UnifiedLog.searchOffsetInLocalLog); there the first batch whose largest timestamp
    is, and in it the first record (a marker's too) at or after both the time and the log start
    offset. None: no record is that new, or that segment holds none (a segment without
    timestamps, whose file time is newer, answers no offset, as Kafka's does). Found through the
    indexes as Kafka finds it."""
    want = RecordRange(from_offset=log_start_offset, from_time=timestamp)
    for i, files in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if largest_timestamp(storage, files, next_base is None) < timestamp:
            continue
        window = segment_window(storage, files, next_base, want)
        if window is not None:
            reader = SegmentReader(storage, files.log.path, files.base_offset, window)
            for rows in reader.record_batches("", 0, want=want):
                if len(rows):
                    first = int(pc.min(rows.column("offset")).as_py())
                    at = pc.index(rows.column("offset"), first).as_py()
                    return TimestampOffset(first, int(rows.column("timestamp")[at].as_py()))
        return None
    return None
