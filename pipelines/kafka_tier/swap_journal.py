"""The journal of segment swaps under way: one small file per swap under
`<root>/_segpipe/kafka-tier-swaps/`, written before the swap's first metadata record and removed
after its last, so that the next run finishes or undoes every swap a killed run left."""

from __future__ import annotations

import base64
import json
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass

from segment_io.errors import KafkaTierCorrupt
from segment_io.kafka_tier.metadata import SegmentMetadata, decode_metadata_record, encode_metadata_record
from segment_io.layout import KAFKA_TIER_SWAPS, META_DIR
from segment_io.storage.base import Storage

TEMPORARY = ".tmp"  # the suffix of a file a killed atomic write left (storage/local.py)


@dataclass(frozen=True)
class Swap:
    """One remote segment (`old`) and the rewritten segment that takes its place (`new`)."""

    old: SegmentMetadata
    new: SegmentMetadata

    def to_json(self) -> bytes:
        doc = {
            "old": base64.b64encode(encode_metadata_record(self.old)).decode(),
            "new": base64.b64encode(encode_metadata_record(self.new)).decode(),
        }
        return json.dumps(doc, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> Swap:
        try:
            doc = json.loads(data)
            old = decode_metadata_record(base64.b64decode(doc["old"]), where)
            new = decode_metadata_record(base64.b64decode(doc["new"]), where)
        except (ValueError, KeyError, TypeError) as exc:
            raise KafkaTierCorrupt(where, None, f"a swap journal entry that does not parse: {exc}") from None
        if not isinstance(old, SegmentMetadata) or not isinstance(new, SegmentMetadata):
            raise KafkaTierCorrupt(where, None, "a swap journal entry that names no segments")
        return cls(old, new)


@dataclass(frozen=True)
class Journal:
    """The swaps under way, one small file each under `<root>/_segpipe/kafka-tier-swaps/`."""

    storage: Storage
    root: str

    @property
    def directory(self) -> str:
        return posixpath.join(self.root, META_DIR, KAFKA_TIER_SWAPS)

    def _path(self, swap: Swap) -> str:
        tp = swap.old.tp
        return posixpath.join(
            self.directory, f"{tp.topic}-{tp.partition}-{tp.topic_id}-{swap.old.segment_id}.json"
        )

    def write(self, swap: Swap) -> None:
        self.storage.makedirs(self.directory)
        self.storage.write_atomic(self._path(swap), swap.to_json())

    def remove(self, swap: Swap) -> None:
        self.storage.remove(self._path(swap))

    def clear_temporaries(self) -> None:
        """Remove what a killed run's atomic writes of entries left half-done (never an entry: an
        entry is complete or absent). Only a run holding the tier's swap lock calls it."""
        for info in self.storage.list(self.directory) if self.storage.exists(self.directory) else []:
            if info.name.endswith(TEMPORARY):
                self.storage.remove(info.path)

    def entries(self) -> Iterator[Swap]:
        if not self.storage.exists(self.directory):
            return
        for info in sorted(self.storage.list(self.directory), key=lambda f: f.name):
            if info.name.endswith(".json"):
                yield Swap.from_json(self.storage.read(info.path), self.storage.url(info.path))
