"""What a storage plugin's layout offers for one remote segment, whoever wrote it, and what a
segment written into it is made of."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from segment_io.kafka_tier.metadata import SegmentMetadata


class SegmentObjects(Protocol):
    """One remote segment's objects: its log read by byte range, its indexes whole."""

    seg: SegmentMetadata

    @property
    def log_url(self) -> str: ...

    def index_url(self, kind: str) -> str: ...

    def index_size(self, kind: str) -> int | None:
        """The plain size of an index (`index`, `timeindex`, `txnindex`, `snapshot`,
        `leader-epoch`), None where the segment has none."""

    def read_log(self, start: int = 0, end: int | None = None) -> bytes: ...

    def log_chunks(self) -> Iterator[bytes]:
        """The whole log in chunks of bounded size, in order (never held whole)."""

    def read_log_array(self) -> np.ndarray:
        """The whole log as a byte array: mapped from its file where the layout keeps it plain on
        a local disk (a scan reads only the pages of batch headers, and none is held in memory),
        else read whole."""

    def index(self, kind: str) -> bytes | None: ...

    def present(self) -> bool:
        """Whether the segment's first object (the one its reading starts from) is in the storage."""

    def check(self) -> None:
        """Refuse (KafkaTierCorrupt) a segment whose objects do not match its metadata."""


@dataclass(frozen=True)
class SuccessorFiles:
    """A successor's files as its upload takes them: the log as chunks of bounded size (read once,
    never held whole), the rest whole (by kind: `index`, `timeindex`, `txnindex`, `snapshot`,
    `leader-epoch`; an index is a small fraction of its segment)."""

    log: Iterable[bytes]
    others: Mapping[str, bytes]

    @classmethod
    def held(cls, files: Mapping[str, bytes]) -> SuccessorFiles:
        """Files already in memory, `log` among them."""
        return cls([files["log"]], {kind: data for kind, data in files.items() if kind != "log"})
