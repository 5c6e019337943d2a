"""A remote segment's index objects verified whole: each read back (an encrypted chunk fails its
authentication if one byte changed), and each that can say more checked for it: the producer
snapshot by its CRC, the leader-epoch checkpoint against the epochs the metadata gives the
segment, the offset, time and transaction indexes by their entry sizes. What `inspect` and
`validate` do for every segment; a read verifies only the objects it uses."""

from __future__ import annotations

from segment_io.checkpoints import parse_leader_epoch_checkpoint
from segment_io.errors import CorruptCheckpoint, KafkaTierCorrupt
from segment_io.kafka_tier.objects import SegmentObjects
from segment_io.producer_snapshot import read_snapshot

ENTRY_BYTES = {"index": 8, "timeindex": 12, "txnindex": 34}
KINDS = ("index", "timeindex", "txnindex", "snapshot", "leader-epoch")


def verify_indexes(s: SegmentObjects) -> None:
    for kind in KINDS:
        data = s.index(kind)
        if data is None:
            continue
        where = s.index_url(kind)
        if kind in ENTRY_BYTES and len(data) % ENTRY_BYTES[kind]:
            raise KafkaTierCorrupt(
                where,
                None,
                f"segment {s.seg.segment_id}: its {kind} of {len(data)} bytes is not whole entries",
            )
        try:
            if kind == "snapshot" and data:
                read_snapshot(data, where)
            if kind == "leader-epoch":
                _agrees(s, parse_leader_epoch_checkpoint(data, where), where)
        except CorruptCheckpoint as exc:
            raise KafkaTierCorrupt(where, exc.position, f"segment {s.seg.segment_id}: {exc.detail}") from None


def _agrees(s: SegmentObjects, chain: list[tuple[int, int]], where: str) -> None:
    """The segment's leader-epoch checkpoint (the broker's epochs up to the segment's end) gives
    the segment the epochs its metadata does: the one in force at its start, and each that begins
    inside it, at the same offsets."""
    seg = s.seg
    inside = []
    for i, (epoch, offset) in enumerate(chain):
        ended_before = i + 1 < len(chain) and chain[i + 1][1] <= seg.start_offset
        if offset <= seg.end_offset and not ended_before:
            inside.append((epoch, max(offset, seg.start_offset)))
    if tuple(inside) != seg.leader_epochs:
        raise KafkaTierCorrupt(
            where,
            None,
            f"segment {seg.segment_id}: its leader-epoch checkpoint gives it epochs {inside}, the remote log "
            f"metadata {list(seg.leader_epochs)}",
        )
