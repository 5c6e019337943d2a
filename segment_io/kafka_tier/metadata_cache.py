"""The remote log metadata replayed as a broker's RemoteLogMetadataCache replays it, and each
partition's remote log as the broker serves it.

Rules (Kafka 4.x): a segment's records move it COPY_SEGMENT_STARTED -> COPY_SEGMENT_FINISHED ->
DELETE_SEGMENT_STARTED -> DELETE_SEGMENT_FINISHED (STARTED may also go straight to
DELETE_SEGMENT_STARTED); an event that is no valid transition is dropped, as is an update of a
segment never seen (its first record is gone). A partition with a deletion record is being deleted
with its topic: it is no longer served.

Which segment serves an offset is kept per leader epoch, as RemoteLogLeaderEpochState keeps it:
a map from start offset to segment id, and the highest offset the epoch reaches. When a segment's
copy finishes, for each of its epochs (starting at `start`, ending at `end`): while the map's last
entry starts at or above `start` and the epoch's highest offset is at most `end`, that entry is
dropped (a new leader uploaded a superset of it); then `start` maps to the segment (replacing
whatever started there) and the highest offset rises to `end`. When a segment's deletion starts,
each of its epochs' entry at its start is removed if it still names it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

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
class EpochState:
    """One leader epoch's offset map: start offset -> segment id, and its highest offset."""

    offset_to_id: dict[int, str] = field(default_factory=dict)
    highest: int | None = None

    def copy_finished(self, start: int, end: int, segment_id: str) -> None:
        while self.offset_to_id and max(self.offset_to_id) >= start and (self.highest or 0) <= end:
            del self.offset_to_id[max(self.offset_to_id)]
        self.offset_to_id[start] = segment_id
        if self.highest is None or end > self.highest:
            self.highest = end

    def delete_started(self, start: int, segment_id: str) -> None:
        if self.offset_to_id.get(start) == segment_id:
            del self.offset_to_id[start]

    def floor(self, offset: int) -> str | None:
        starts = [s for s in self.offset_to_id if s <= offset]
        return self.offset_to_id[max(starts)] if starts else None


def epoch_end(seg: SegmentMetadata, epoch: int) -> int:
    """The last offset of `epoch` inside `seg`: the next epoch's start less one, or its end."""
    later = [offset for e, offset in seg.leader_epochs if e > epoch]
    return min(later) - 1 if later else seg.end_offset


@dataclass
class PartitionState:
    """What the records say of one topic partition."""

    segments: dict[str, SegmentMetadata] = field(default_factory=dict)  # not yet DELETE_SEGMENT_FINISHED
    epochs: dict[int, EpochState] = field(default_factory=dict)
    deleted: bool = False
    # The offsets of served segments whose deletion has started (remote retention, or a partition
    # being deleted): what explains a log start above the checkpointed one.
    expired: list[tuple[int, int]] = field(default_factory=list)

    def served(self) -> list[SegmentMetadata]:
        """The COPY_SEGMENT_FINISHED segments, by start offset."""
        done = [s for s in self.segments.values() if s.state is SegmentState.COPY_SEGMENT_FINISHED]
        return sorted(done, key=lambda s: (s.start_offset, s.end_offset))


@dataclass
class MetadataReplay:
    """The records replayed so far, per topic partition."""

    partitions: dict[TopicIdPartition, PartitionState] = field(default_factory=dict)

    @classmethod
    def of(cls, records: Iterable[MetadataRecord]) -> MetadataReplay:
        replay = cls()
        for record in records:
            replay.apply(record)
        return replay

    def apply(self, record: MetadataRecord) -> None:
        state = self.partitions.setdefault(record.tp, PartitionState())
        if isinstance(record, PartitionDelete):
            state.deleted = True
            return
        existing = state.segments.get(record.segment_id)
        if isinstance(record, SegmentMetadata):
            if record.state in _VALID[existing.state if existing else None]:
                state.segments[record.segment_id] = record
            return
        assert isinstance(record, SegmentUpdate)
        if existing is None or record.state not in _VALID[existing.state]:
            return  # the broker drops it too
        if record.state is SegmentState.DELETE_SEGMENT_FINISHED:
            del state.segments[record.segment_id]
            return
        if existing.state is SegmentState.COPY_SEGMENT_FINISHED:
            state.expired.append((existing.start_offset, existing.end_offset))
        custom = record.custom_metadata if record.custom_metadata is not None else existing.custom_metadata
        seg = replace(
            existing, state=record.state, custom_metadata=custom, updated_ms=record.event_timestamp_ms
        )
        state.segments[record.segment_id] = seg
        for epoch, start in seg.leader_epochs:
            at = state.epochs.setdefault(epoch, EpochState())
            if record.state is SegmentState.COPY_SEGMENT_FINISHED:
                at.copy_finished(start, epoch_end(seg, epoch), seg.segment_id)
            else:
                at.delete_started(start, seg.segment_id)

    def served(self) -> dict[TopicIdPartition, PartitionState]:
        """The partitions with segments served (partitions being deleted left out)."""
        return {tp: s for tp, s in self.partitions.items() if not s.deleted and s.served()}


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


def segment_epochs(chain: list[tuple[int, int]], start: int, end: int) -> tuple[tuple[int, int], ...]:
    """The leader epochs a segment of offsets [start, end] gets from a broker's epoch chain (what
    the broker records in the segment's metadata on upload): the epoch in force at its start, from
    `start`, and each that begins inside it."""
    epochs = []
    for i, (epoch, offset) in enumerate(chain):
        ended_before = i + 1 < len(chain) and chain[i + 1][1] <= start
        if offset <= end and not ended_before:
            epochs.append((epoch, max(offset, start)))
    return tuple(epochs)


def remote_log(
    state: PartitionState, chain: list[tuple[int, int]], log_start: int | None, where: str
) -> list[SegmentMetadata]:
    """The segments a broker serves from `log_start` (the first served segment's start when
    None), in offset order: at each offset, the segment its leader epoch (from `chain`) maps it to,
    as RemoteLogMetadataCache.remoteLogSegmentMetadata(epoch, offset) finds it (the floor entry,
    if its part in that epoch reaches the offset); the next epoch of the chain where that epoch has
    none. A served segment that overlaps the next one (an unclean election left both) is refused:
    no offset may be read twice."""
    served = state.served()
    if not served:
        return []
    offset = served[0].start_offset if log_start is None else log_start
    out: list[SegmentMetadata] = []
    for seg in _walk(state, chain, offset):
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


def _walk(state: PartitionState, chain: list[tuple[int, int]], offset: int) -> Iterator[SegmentMetadata]:
    while True:
        # The epoch of `offset`, then the later ones.
        epochs = [e for i, (e, _) in enumerate(chain) if i + 1 == len(chain) or chain[i + 1][1] > offset]
        found = None
        for epoch in epochs:
            at = state.epochs.get(epoch)
            if at is None:
                continue
            later = [at.offset_to_id[s] for s in sorted(at.offset_to_id) if s > offset][:1]
            ids = [at.floor(offset), *later]
            for seg_id in ids:
                seg = state.segments.get(seg_id) if seg_id is not None else None
                if seg is not None and epoch_end(seg, epoch) >= offset:
                    found = seg
                    break
            if found is not None:
                break
        if found is None:
            return
        yield found
        offset = found.end_offset + 1
