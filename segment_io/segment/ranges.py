"""Reading part of a log: a range of records (offsets, timestamps), and the bytes of a segment
that can hold them, found through its sparse indexes as Kafka's own lookups find them
(docs/log-format.md#reading-a-range).

The windows are sound, never a guess: offsets grow along a log, so an offset range is cut on
both sides; timestamps need not (CreateTime records come in any order), so a time range only
moves the start past what the time index proves to be older, and skips a rolled segment whose largest
timestamp is older. Every record read is still checked against the range (`record_mask`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from segment_io.errors import CorruptIndex
from segment_io.format.constants import LOG_OVERHEAD, V2_HEADER_SIZE
from segment_io.index import lookup_offset, read_offset_index, read_time_index
from segment_io.layout import SegmentFiles
from segment_io.segment.scan import BatchTable
from segment_io.storage import Storage


@dataclass(frozen=True)
class RecordRange:
    """Inclusive bounds on a record's offset and timestamp; None: unbounded."""

    from_offset: int | None = None
    to_offset: int | None = None
    from_time: int | None = None
    to_time: int | None = None

    @property
    def unbounded(self) -> bool:
        return self == RecordRange()

    @property
    def empty(self) -> bool:
        """Whether no record can be inside (a lower bound above its upper bound)."""
        return any(
            low is not None and high is not None and low > high
            for low, high in ((self.from_offset, self.to_offset), (self.from_time, self.to_time))
        )

    def narrowed(self, other: RecordRange) -> RecordRange:
        """Both ranges at once (their intersection)."""
        return replace(
            self,
            from_offset=_tighter(max, self.from_offset, other.from_offset),
            to_offset=_tighter(min, self.to_offset, other.to_offset),
            from_time=_tighter(max, self.from_time, other.from_time),
            to_time=_tighter(min, self.to_time, other.to_time),
        )

    def batch_mask(self, table: BatchTable) -> np.ndarray:
        """The batches that may hold a record of the range, from their headers alone: offsets cut
        both ways; a batch whose largest timestamp is older is out; a LogAppendTime batch (every
        record carries the batch's timestamp) newer than the range is out too."""
        mask = np.ones(len(table), dtype=np.bool_)
        if self.from_offset is not None:
            mask &= table.last_offset >= self.from_offset
        if self.to_offset is not None:
            mask &= table.base_offset <= self.to_offset  # a legacy wrapper's −1 stays in
        if self.from_time is not None:
            mask &= table.max_timestamp >= self.from_time
        if self.to_time is not None:
            mask &= ~table.log_append_time | (table.max_timestamp <= self.to_time)
        return mask

    def record_mask(self, offsets: np.ndarray, timestamps: np.ndarray) -> np.ndarray:
        """Which records (their offsets and timestamps) are inside."""
        mask = np.ones(len(offsets), dtype=np.bool_)
        for value, column, above in (
            (self.from_offset, offsets, True),
            (self.to_offset, offsets, False),
            (self.from_time, timestamps, True),
            (self.to_time, timestamps, False),
        ):
            if value is not None:
                mask &= (column >= value) if above else (column <= value)
        return mask

    def filter(self, rows: pa.RecordBatch) -> pa.RecordBatch:
        """The records of `rows` (the one record schema) inside the range."""
        offsets = rows.column("offset").to_numpy(zero_copy_only=False)
        timestamps = rows.column("timestamp").to_numpy(zero_copy_only=False)
        return rows.filter(pa.array(self.record_mask(offsets, timestamps)))


def _tighter(pick: Callable[[int, int], int], a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return a if b is None else b
    return pick(a, b)


@dataclass(frozen=True)
class Window:
    """Bytes [start, end) of a segment's log holding every record of a range the segment may
    hold; both ends are batch boundaries. `note`: why the whole file is read instead (an index
    missing, or not agreeing with the log)."""

    start: int
    end: int
    size: int  # the whole file's
    note: str | None = None

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.end == self.size


def segment_window(
    storage: Storage, files: SegmentFiles, next_base: int | None, want: RecordRange
) -> Window | None:
    """The window of `files` (whose next segment starts at `next_base`) that can hold records of
    `want`; None when none can be there. An index that is missing, malformed or that points
    where the log has no such batch gives the whole file, with a note."""
    base, size = files.base_offset, files.size
    if want.empty or (want.to_offset is not None and want.to_offset < base):
        return None
    if want.from_offset is not None and next_base is not None and next_base <= want.from_offset:
        return None
    if want.from_offset is None and want.to_offset is None and want.from_time is None:
        return Window(0, size, size)
    try:
        entries = _offset_entries(storage, files, next_base)
        # The first offset a record of the range can have.
        targets = [] if want.from_offset is None else [want.from_offset]
        if want.from_time is not None:
            times, relative = time_entries(storage, files)
            # A rolled segment's last entry is its largest timestamp (Kafka appends it when the
            # segment stops being active, and judges retention by it). The active segment's may
            # lag behind its last batches: it is never skipped by time.
            if next_base is not None and len(times) and int(times[-1]) < want.from_time:
                return None
            # An entry (T, O): no record at or below offset O is newer than T. The last entry
            # older than the range lets the read begin past O.
            older = int(np.searchsorted(times, want.from_time, side="left")) - 1
            if older >= 0:
                targets.append(base + int(relative[older]) + 1)
        start = 0
        if targets:
            target = max(targets)
            position, claimed = _entry_at(entries, base, target)
            if claimed is not None:
                batch = _batch_at(storage, files, position, claimed)
                # The batch there ends at `claimed`: below the target, it holds nothing wanted.
                start = position if claimed >= target else position + batch.size
        end = size
        if want.to_offset is not None:
            above = int(np.searchsorted(entries[:, 0], want.to_offset - base, side="right"))
            if above < len(entries):
                position = int(entries[above, 1])
                batch = _batch_at(storage, files, position, base + int(entries[above, 0]))
                # That batch ends above the range: it holds some of it only if it begins in it.
                end = position if batch.base_offset > want.to_offset else position + batch.size
    except CorruptIndex as exc:
        return Window(0, size, size, note=str(exc))
    # What comes before `start` is too old or too low, what begins at `end` too high.
    return Window(start, end, size) if start < end else None


def _entry_at(entries: np.ndarray, base: int, target: int) -> tuple[int, int | None]:
    """Where a read for `target` starts (the offset index's lookup) and the last offset the index
    claims for the batch there (None: the file's start)."""
    position = lookup_offset(entries, base, target)
    if position == 0:
        return 0, None
    i = int(np.searchsorted(entries[:, 1], position))
    return position, base + int(entries[i, 0])


def _offset_entries(storage: Storage, files: SegmentFiles, next_base: int | None) -> np.ndarray:
    """The offset index's entries, checked for what a lookup relies on."""
    if files.index is None:
        raise CorruptIndex(files.log.path, None, "no .index beside it")
    entries = read_offset_index(storage.read(files.index.path))
    rel, pos = entries[:, 0], entries[:, 1]
    limit = None if next_base is None else next_base - files.base_offset
    if (
        (len(rel) and (rel[0] < 0 or pos[0] < 0))
        or np.any(np.diff(rel) <= 0)
        or np.any(np.diff(pos) <= 0)
        or np.any(pos >= max(files.size, 1))
        or (limit is not None and np.any(rel >= limit))
    ):
        raise CorruptIndex(files.index.path, None, "entries are not increasing inside the segment")
    return entries


def time_entries(storage: Storage, files: SegmentFiles) -> tuple[np.ndarray, np.ndarray]:
    """The time index's entries, checked for what a lookup relies on."""
    if files.timeindex is None:
        raise CorruptIndex(files.log.path, None, "no .timeindex beside it")
    times, relative = read_time_index(storage.read(files.timeindex.path))
    if np.any(np.diff(times) <= 0) or np.any(np.diff(relative) < 0) or (len(relative) and relative[0] < 0):
        raise CorruptIndex(files.timeindex.path, None, "entries are not increasing")
    return times, relative


@dataclass(frozen=True)
class _Header:
    base_offset: int  # −1 where the header does not say (a legacy wrapper's first inner offset)
    size: int  # the whole batch, its length field included


def _batch_at(storage: Storage, files: SegmentFiles, position: int, last_offset: int) -> _Header:
    """The header of the batch at `position`, which the index says ends at `last_offset`; a
    header that says otherwise (or none there) raises CorruptIndex."""
    header = storage.read(files.log.path, position, position + V2_HEADER_SIZE)
    magic = header[16] if len(header) > 16 else -1
    whole = len(header) >= (27 if magic == 2 else 17)
    offset = int.from_bytes(header[0:8], "big", signed=True) if whole else -1
    last = offset + int.from_bytes(header[23:27], "big", signed=True) if magic == 2 and whole else offset
    if not whole or magic not in (0, 1, 2) or last != last_offset:
        raise CorruptIndex(
            files.index.path if files.index else files.log.path,
            None,
            f"no batch ending at offset {last_offset} at byte {position} of {files.log.path}",
        )
    # A legacy entry's offset is its last record's (a wrapper's first one is not in its header).
    base_offset = offset if magic == 2 else -1
    return _Header(base_offset, LOG_OVERHEAD + int.from_bytes(header[8:12], "big", signed=True))
