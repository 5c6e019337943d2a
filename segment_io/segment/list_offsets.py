"""Kafka's ListOffsets by time over a partition's segments: the offset a consumer seeking to a
time gets (`inspect --at`, and where `cut --until-time` cuts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow.compute as pc

from segment_io.layout import SegmentFiles
from segment_io.segment.ranges import RecordRange, segment_window
from segment_io.segment.reader import SegmentReader
from segment_io.storage import Storage


@dataclass(frozen=True)
class TimestampOffset:
    """What Kafka's ListOffsets answers for a time: the first record at or after it."""

    offset: int
    timestamp: int


def offset_for_time(
    storage: Storage, segments: Sequence[SegmentFiles], timestamp: int, log_start_offset: int = 0
) -> TimestampOffset | None:
    """Kafka's ListOffsets rule for `timestamp` over a partition's `segments` (in offset order):
    the first segment whose largest timestamp is at or after it, there the first batch whose largest
    timestamp is, and in it the first record (a marker's too) at or after both the time and the log
    start offset. None: no record is that new. Found through the indexes as Kafka finds it."""
    want = RecordRange(from_offset=log_start_offset, from_time=timestamp)
    for i, files in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        window = segment_window(storage, files, next_base, want)
        if window is None:
            continue
        reader = SegmentReader(storage, files.log.path, files.base_offset, window)
        for rows in reader.record_batches("", 0, want=want):
            if len(rows):
                first = int(pc.min(rows.column("offset")).as_py())
                at = pc.index(rows.column("offset"), first).as_py()
                return TimestampOffset(first, int(rows.column("timestamp")[at].as_py()))
    return None
