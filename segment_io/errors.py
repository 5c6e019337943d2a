"""Typed errors for bad segment data: every one names the file and the byte position."""

from __future__ import annotations


class SegmentError(Exception):
    """Base of every data error segpipe raises; `path` and `position` locate the problem."""

    kind = "segment error"

    def __init__(self, path: str, position: int | None, detail: str) -> None:
        self.path = path
        self.position = position
        self.detail = detail
        where = path if position is None else f"{path} at byte {position}"
        super().__init__(f"{self.kind}: {where}: {detail}")


class CorruptBatch(SegmentError):
    """A batch whose header, records or checksum are invalid."""

    kind = "corrupt batch"


class CrcMismatch(CorruptBatch):
    kind = "CRC mismatch"


class BadLength(CorruptBatch):
    """A batch size field below the minimum (a zero-filled, preallocated tail lands here)."""

    kind = "bad batch length"


class UnknownMagic(CorruptBatch):
    kind = "unknown magic"


class UnsupportedCodec(CorruptBatch):
    kind = "unsupported codec"


class TruncatedSegment(SegmentError):
    """A partial batch at the end of a .log file; Kafka's recovery truncates it at `position`."""

    kind = "truncated segment"


class BadSegmentName(SegmentError):
    kind = "bad segment name"


class OverlappingSegments(SegmentError):
    """Segments whose offset ranges overlap or whose batches lie outside their own range."""

    kind = "overlapping segments"


class CorruptIndex(SegmentError):
    """An .index/.timeindex/.txnindex entry that is out of order or points outside the log."""

    kind = "corrupt index"


class CorruptCheckpoint(SegmentError):
    """A root or partition checkpoint text file that does not parse."""

    kind = "corrupt checkpoint"
