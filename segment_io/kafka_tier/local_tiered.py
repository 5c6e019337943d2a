"""Kafka's own `LocalTieredStorage` layout (the plugin Kafka's tests tier to): each segment's files
copied as they are, under `<rsm.config.dir>/kafka-tiered-storage/<topic>-<partition>-<topicId>/`
and named `<start %020d>-<segment id>` with the suffixes `.log`, `.index`, `.timeindex`,
`.txnindex` (only where the segment had one), `.snapshot` and `.leader_epoch_checkpoint`."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

import numpy as np

from segment_io.errors import KafkaTierCorrupt
from segment_io.kafka_tier.metadata import SegmentMetadata
from segment_io.kafka_tier.objects import SuccessorFiles
from segment_io.storage.base import Checksum, Storage, checksum_of

ROOT_DIR = "kafka-tiered-storage"
SUFFIXES = {
    "log": ".log",
    "index": ".index",
    "timeindex": ".timeindex",
    "txnindex": ".txnindex",
    "snapshot": ".snapshot",
    "leader-epoch": ".leader_epoch_checkpoint",
}


def partition_directory(root: str, seg: SegmentMetadata) -> str:
    return f"{root.rstrip('/')}/{ROOT_DIR}/{seg.tp.topic}-{seg.tp.partition}-{seg.tp.topic_id}"


class LocalTieredSegment:
    """One segment's files in a LocalTieredStorage directory."""

    def __init__(self, storage: Storage, root: str, seg: SegmentMetadata) -> None:
        self.storage = storage
        self.seg = seg
        self.directory = partition_directory(root, seg)
        stem = f"{self.directory}/{seg.start_offset:020d}-{seg.segment_id}"
        self.paths = {kind: stem + suffix for kind, suffix in SUFFIXES.items()}
        self._sizes: dict[str, int] | None = None

    @property
    def log_url(self) -> str:
        return self.storage.url(self.paths["log"])

    def index_url(self, kind: str) -> str:
        return self.storage.url(self.paths[kind])

    def _size(self, kind: str) -> int | None:
        if self._sizes is None:  # one listing of the partition's directory per segment, at most
            self._sizes = {f.path: f.size for f in self.storage.list(self.directory)}
        return self._sizes.get(self.paths[kind])

    def index_size(self, kind: str) -> int | None:
        return self._size(kind)

    def read_log(self, start: int = 0, end: int | None = None) -> bytes:
        end = self.seg.size if end is None else min(end, self.seg.size)
        try:
            data = self.storage.read(self.paths["log"], start, end)
        except FileNotFoundError:
            raise self._missing() from None
        if len(data) != end - start:
            raise self._short(start + len(data))
        return data

    def read_log_array(self) -> np.ndarray:
        try:
            data = self.storage.read_array(self.paths["log"])
        except FileNotFoundError:
            raise self._missing() from None
        if len(data) < self.seg.size:
            raise self._short(len(data))
        return data[: self.seg.size]

    def log_chunks(self) -> Iterator[bytes]:
        read = 0
        try:
            for chunk in self.storage.open_read(self.paths["log"]):
                chunk = chunk[: self.seg.size - read]
                read += len(chunk)
                if chunk:
                    yield chunk
        except FileNotFoundError:
            raise self._missing() from None
        if read < self.seg.size:
            raise self._short(read)

    def _missing(self) -> KafkaTierCorrupt:
        return KafkaTierCorrupt(self.log_url, None, f"segment {self.seg.segment_id}: the file is missing")

    def _short(self, end: int) -> KafkaTierCorrupt:
        return KafkaTierCorrupt(
            self.log_url,
            end,
            f"segment {self.seg.segment_id}: the file ends there, the metadata says it holds "
            f"{self.seg.size} bytes",
        )

    def index(self, kind: str) -> bytes | None:
        return None if self._size(kind) is None else self.storage.read(self.paths[kind])

    def present(self) -> bool:
        return self._size("log") is not None

    def check(self) -> None:
        """The segment's log is where the metadata says, and of its size."""
        size = self._size("log")
        if size is None:
            raise self._missing()
        if size != self.seg.size:
            raise KafkaTierCorrupt(
                self.log_url,
                size,
                f"segment {self.seg.segment_id}: the file holds {size} "
                f"bytes, the remote log metadata says {self.seg.size}",
            )


class LocalTieredStore:
    """LocalTieredStorage written: a segment's files under their names (what its copy writes)."""

    serves_empty_segments = True  # an empty file read from any position is read as no batch

    def __init__(self, storage: Storage, root: str) -> None:
        self.storage = storage
        self.root = root

    def upload(self, seg: SegmentMetadata, files: SuccessorFiles) -> bytes | None:
        target = LocalTieredSegment(self.storage, self.root, seg)
        self.storage.makedirs(target.directory)
        pending = self.storage.open_write(target.paths["log"])
        try:
            for chunk in files.log:
                pending.write(chunk)
        except BaseException:
            pending.discard()
            raise
        pending.commit()
        for kind, data in files.others.items():
            self.storage.write_atomic(target.paths[kind], data)
        return None  # the plugin keeps no custom metadata

    def read_back(self, seg: SegmentMetadata) -> Checksum:
        found = LocalTieredSegment(self.storage, self.root, seg)
        found.check()
        return checksum_of(found.log_chunks())

    def delete(self, seg: SegmentMetadata) -> None:
        """Every file of the segment, and any a killed upload of it left half written (a file of
        its name with a temporary suffix): the segment id is random, so no other file has it."""
        found = LocalTieredSegment(self.storage, self.root, seg)
        stem = posixpath.basename(found.paths["log"]).removesuffix(SUFFIXES["log"]) + "."
        leftovers = [f.path for f in self.storage.list(found.directory) if f.name.startswith(stem)]
        for path in {*found.paths.values(), *leftovers}:
            self.storage.remove(path)
