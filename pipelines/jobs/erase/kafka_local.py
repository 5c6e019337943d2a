"""The broker's local segments searched for listed keys during an online erase of its remote tier
(jobs/erase/kafka_tier.py): never changed while the broker runs, only named, each with the offsets
of its listed records. A segment the broker is appending to is read up to its last whole batch (a
batch being written is not there yet); one it deletes meanwhile holds nothing any more."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipelines.keys.key_list import KeyList
from pipelines.keys.key_set import ErasedKeys, matched_entries
from pipelines.log.scanned import Log
from segment_io.internal_topics import INTERNAL_TOPICS
from segment_io.kafka_tier.settings import METADATA_TOPIC
from segment_io.kafka_tier.view import KafkaTierView
from segment_io.layout import list_log_dir
from segment_io.segment.reader import SegmentReader
from segment_io.topic_partition import TopicPartition


@dataclass(frozen=True)
class LocalListed:
    """One local segment holding listed keys."""

    tp: TopicPartition
    base_offset: int
    records: int
    first_offset: int
    last_offset: int

    def doc(self) -> dict[str, Any]:
        return {
            "partition": str(self.tp),
            "base_offset": self.base_offset,
            "records": self.records,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
        }


@dataclass
class LocalSegments:
    """What the local segments above each partition's remote log hold: the segments with listed
    keys, the entries (keys) found, and their bytes per partition (what retention counts locally)."""

    named: list[LocalListed] = field(default_factory=list)
    entries: set[int] = field(default_factory=set)
    bytes: dict[TopicPartition, int] = field(default_factory=dict)

    def digests(self, by_entry: Sequence[str] | Mapping[int, str]) -> set[str]:
        return {by_entry[e] for e in self.entries if isinstance(by_entry, Sequence) or e in by_entry}


def not_yet_tiered(
    view: KafkaTierView,
    topics: Callable[[str], bool] | None,
    keys: ErasedKeys | KeyList,
    header_names: ErasedKeys | None,
    log: Log,
) -> LocalSegments:
    """The local segments of the log directory above each partition's remote log end."""
    found = LocalSegments()
    if view.local is None:
        return found
    searched: ErasedKeys | None = keys.read() if isinstance(keys, KeyList) and keys.broadcast else None
    if isinstance(keys, ErasedKeys):
        searched = keys
    if searched is None:
        log("segpipe: note: the key list is too large to read whole: the local segments were not searched")
    storage, root = view.local
    for part in list_log_dir(storage, root).partitions:
        tp = part.tp
        if tp.topic in (*INTERNAL_TOPICS, METADATA_TOPIC) or (topics is not None and not topics(tp.topic)):
            continue
        remote = view.remote.get(tp, ())
        end = remote[-1].seg.end_offset if remote else -1
        for files in part.segments:
            if files.base_offset <= end:
                continue  # a local copy of a remote segment: the remote one is what is served
            found.bytes[tp] = found.bytes.get(tp, 0) + files.size
            if searched is None:
                continue
            try:
                reader = SegmentReader(storage, files.log.path, files.base_offset)
                table = reader.scan().table  # whole batches only
                framed = reader.frame(np.flatnonzero(~table.is_control))
            except FileNotFoundError:
                continue  # deleted by the broker meanwhile
            matched = matched_entries(framed, searched, header_names)
            hit = matched >= 0
            if hit.any():
                offsets = framed.offset[hit]
                found.entries |= set(matched[hit].tolist())
                found.named.append(
                    LocalListed(tp, files.base_offset, int(hit.sum()), int(offsets.min()), int(offsets.max()))
                )
    return found
