"""The root of every error segpipe raises, and the typed errors for bad segment data: every data
error names the file and the byte position."""

from __future__ import annotations

import re
from typing import Any

from segment_io.exit_codes import ExitCode

_LOCATED = re.compile(r"(?P<path>.*?) at byte (?P<position>\d+): (?P<detail>.*)", re.DOTALL)
_UNLOCATED = re.compile(r"(?P<path>.*?): (?P<detail>.*)", re.DOTALL)


class SegpipeError(Exception):
    """Root of every error segpipe raises on purpose; the command line exits with `exit_code`
    and prints the message (never a traceback)."""

    exit_code: int = ExitCode.REFUSED


class SegmentError(SegpipeError):
    """Base of every data error; `path` and `position` locate the problem."""

    kind = "segment error"
    exit_code = ExitCode.DATA

    def __init__(self, path: str, position: int | None, detail: str) -> None:
        self.path = path
        self.position = position
        self.detail = detail
        where = path if position is None else f"{path} at byte {position}"
        super().__init__(f"{self.kind}: {where}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Errors cross process boundaries (Spark workers, process pools) with their fields intact.
        return (type(self), (self.path, self.position, self.detail))

    @classmethod
    def from_message(cls, message: str) -> SegmentError:
        """Rebuild an error from its own `str()` (what a remote worker's traceback carries)."""
        body = message.removeprefix(f"{cls.kind}: ")
        located = _LOCATED.fullmatch(body)
        if located:
            return cls(located["path"], int(located["position"]), located["detail"])
        unlocated = _UNLOCATED.fullmatch(body)
        if unlocated:
            return cls(unlocated["path"], None, unlocated["detail"])
        return cls("?", None, body)


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


class LogDirNotFound(SegmentError):
    """The path given as a log directory does not exist (a typo must not look like an empty log)."""

    kind = "log directory not found"
    exit_code = ExitCode.REFUSED  # a wrong path, refused before any work


class NotALogDirectory(SegmentError):
    """A path given as a log directory that is a file (a segment file where one is not accepted)."""

    kind = "not a log directory"
    exit_code = ExitCode.REFUSED


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


class RemoteTierCorrupt(SegmentError):
    """A remote tier object that does not hold what its manifest says (size, CRC-32C, JSON), or
    a manifest that references an object that is missing."""

    kind = "corrupt remote tier"


class ManifestConflict(SegpipeError):
    """Another writer committed a new version of a partition's remote manifest after this run
    read it; this run changed nothing that any manifest references. Run again."""

    exit_code = ExitCode.CONFLICT  # try again later

    def __init__(self, manifest: str, version: int) -> None:
        self.manifest = manifest
        self.version = version
        super().__init__(
            f"remote manifest conflict: {manifest}: version {version} was committed by another writer "
            "since this run read the manifest; nothing was changed, run again"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.manifest, self.version))


class UploadFailed(SegpipeError):
    """An object could not be written to the remote tier (after retries), or what the store
    holds afterwards differs from what was sent. Nothing that references it was committed."""

    exit_code = ExitCode.IO

    def __init__(self, url: str, cause: str) -> None:
        self.url = url
        self.cause = cause
        super().__init__(f"upload failed: {url}: {cause}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.url, self.cause))

    @classmethod
    def from_message(cls, message: str) -> UploadFailed:
        """Rebuild the error from its own `str()` (a URL holds "://" but never ": ")."""
        url, _, cause = message.removeprefix("upload failed: ").partition(": ")
        return cls(url, cause)


class KafkaTierCorrupt(SegmentError):
    """A Kafka remote tier (KIP-405) whose objects or metadata do not hold what they must: an
    object missing or short, a chunk that does not decrypt or decompress, a manifest that
    disagrees with its segment's metadata, a metadata record of an unknown type or version."""

    kind = "corrupt Kafka remote tier"


class KafkaTierSettings(SegpipeError):
    """Tiered-storage settings segpipe cannot read a remote tier with (a plugin or storage backend
    it does not know, a key pair that is missing or wrong for the data)."""

    exit_code = ExitCode.REFUSED


class KafkaTierPublishFailed(SegpipeError):
    """A record to Kafka's remote log metadata topic was not acknowledged. Every segment stays
    readable (a swap is journalled before its first record); a re-run finishes or undoes it."""

    exit_code = ExitCode.IO
