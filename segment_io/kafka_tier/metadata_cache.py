"""The remote log metadata replayed as a broker's RemoteLogMetadataCache replays it, and each
partition's remote log as the broker serves it.

Rules (Kafka 4.x): a segment's records move it COPY_SEGMENT_STARTED -> COPY_SEGMENT_FINISHED ->
DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED (STARTED may also go straight to
DELETE_SEGMENT_STARTED); an event that is no valid transition is dropped, as is an update of a
segment never seen (its first record is gone). Only a COPY_SEGMENT_FINISHED segment is served.
A partition with a deletion record is being deleted with its topic: it is no longer served. Of
segments that start at the same offset in the same leader epoch, the last one finished replaces
the others (the broker maps each epoch's start offsets to one segment id).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from segment_io.errors import OverlappingSegments
from segment_io.kafka_tier.metadata import (
    MetadataRecord,
    PartitionDelete,
    SegmentMetadata,
    SegmentState,
    SegmentUpdate,
    TopicIdPartition,
)

_VALID = {
    None: {SegmentState.COPY_SEGMENT_STARTED},
    SegmentState.COPY_SEGMENT_STARTED: {
        SegmentState.COPY_SEGMENT_FINISHED,
        SegmentState.DELETE_SEGMENT_STARTED,
    },
    SegmentState.COPY_SEGMENT_FINISHED: {SegmentState.DELETE_SEGMENT_STARTED},
    SegmentState.DELETE_SEGMENT_STARTED: {SegmentState.DELETE_SEGMENT_FINISHED},
}


@dataclass
class MetadataReplay:
    """What the records say so far: every segment not yet DELETE_SEGMENT_FINISHED, and the
    partitions a deletion record names."""

    segments: dict[tuple[TopicIdPartition, str], SegmentMetadata]
    deleted: set[TopicIdPartition]

    @classmethod
    def of(cls, records: Iterable[MetadataRecord]) -> MetadataReplay:
        replay = cls({}, set())
        for record in records:
            replay.apply(record)
        return replay

    def apply(self, record: MetadataRecord) -> None:
        if isinstance(record, PartitionDelete):
            self.deleted.add(record.tp)
            return
        key = (record.tp, record.segment_id)
        existing = self.segments.get(key)
        if isinstance(record, SegmentMetadata):
            if record.state in _VALID[existing.state if existing else None]:
                self.segments[key] = record
            return
        assert isinstance(record, SegmentUpdate)
        if existing is None or record.state not in _VALID[existing.state]:
            return  # the broker drops it too
        if record.state is SegmentState.DELETE_SEGMENT_FINISHED:
            del self.segments[key]
            return
        custom = record.custom_metadata if record.custom_metadata is not None else existing.custom_metadata
        self.segments[key] = replace(existing, state=record.state, custom_metadata=custom)

    def served(self) -> dict[TopicIdPartition, list[SegmentMetadata]]:
        """Each partition's COPY_SEGMENT_FINISHED segments (partitions being deleted left out),
        by start offset."""
        out: dict[TopicIdPartition, list[SegmentMetadata]] = {}
        for (tp, _), seg in self.segments.items():
            if seg.state is SegmentState.COPY_SEGMENT_FINISHED and tp not in self.deleted:
                out.setdefault(tp, []).append(seg)
        return {
            tp: sorted(segs, key=lambda s: (s.start_offset, s.event_timestamp_ms)) for tp, segs in out.items()
        }


def epoch_chain(segments: list[SegmentMetadata]) -> list[tuple[int, int]]:
    """The leader epoch chain (epoch, start offset) the segments imply, where the broker's own
    leader-epoch-checkpoint is not at hand: each epoch from the lowest offset any segment gives
    it, keeping only epochs that start below every later epoch (an epoch a later one truncated
    away is no part of the log)."""
    starts: dict[int, int] = {}
    for seg in segments:
        for epoch, offset in seg.leader_epochs:
            starts[epoch] = min(starts.get(epoch, offset), offset)
    chain: list[tuple[int, int]] = []
    for epoch in sorted(starts, reverse=True):
        if not chain or starts[epoch] < chain[-1][1]:
            chain.append((epoch, starts[epoch]))
    return chain[::-1]


def _epoch_end(seg: SegmentMetadata, epoch: int) -> int:
    later = [offset for e, offset in seg.leader_epochs if e > epoch]
    return min(later) - 1 if later else seg.end_offset


def remote_log(
    segments: list[SegmentMetadata], chain: list[tuple[int, int]], log_start: int | None, where: str
) -> list[SegmentMetadata]:
    """The segments a broker serves from `log_start` (the first segment's start when None), in
    offset order: at each offset, the segment its leader epoch (from `chain`) maps it to, as
    RemoteLogMetadataCache.remoteLogSegmentMetadata(epoch, offset) finds it; the next epoch of the
    chain where that epoch has none. A served segment that overlaps the next one (an unclean
    election left both) is refused: no offset may be read twice."""
    by_epoch: dict[int, dict[int, SegmentMetadata]] = {}
    for seg in segments:  # by finish order: a later segment at the same start replaces an earlier
        for epoch, offset in seg.leader_epochs:
            by_epoch.setdefault(epoch, {})[offset] = seg
    if not segments:
        return []
    offset = min(s.start_offset for s in segments) if log_start is None else log_start
    out: list[SegmentMetadata] = []
    for seg in _walk(by_epoch, chain, offset):
        if out and seg.start_offset <= out[-1].end_offset:
            raise OverlappingSegments(
                where,
                None,
                f"remote segments {out[-1].segment_id} (offsets {out[-1].start_offset}-"
                f"{out[-1].end_offset}) and {seg.segment_id} (from {seg.start_offset}) overlap: an unclean "
                "leader election left both; the broker's remote retention removes the diverged one",
            )
        out.append(seg)
    return out


def _walk(
    by_epoch: dict[int, dict[int, SegmentMetadata]], chain: list[tuple[int, int]], offset: int
) -> Iterator[SegmentMetadata]:
    while True:
        epochs = [e for i, (e, start) in enumerate(chain) if i + 1 == len(chain) or chain[i + 1][1] > offset]
        found = None
        for epoch in epochs:  # the epoch of `offset`, then the later ones
            starts = [s for s in by_epoch.get(epoch, {}) if s <= offset]
            candidates = [by_epoch[epoch][max(starts)]] if starts else []
            candidates += [by_epoch[epoch][s] for s in sorted(by_epoch.get(epoch, {})) if s > offset][:1]
            for seg in candidates:
                if _epoch_end(seg, epoch) >= offset:
                    found = seg
                    break
            if found is not None:
                break
        if found is None:
            return
        yield found
        offset = found.end_offset + 1
