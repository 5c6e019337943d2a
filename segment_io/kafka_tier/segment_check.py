"""A remote segment's objects checked against the metadata that names them: its log's batches
(within its offsets, whole, up to its largest timestamp), and its index objects whole: each read
back (an encrypted chunk fails its authentication if one byte changed), and each that can say more
checked for it: the producer snapshot by its CRC, the leader-epoch checkpoint against the epochs
the metadata gives the segment, the offset, time and transaction indexes by their entry sizes.
`inspect` and `validate` verify every index of every segment; a read, only the objects it uses."""

from __future__ import annotations

import numpy as np

from segment_io.checkpoints import parse_leader_epoch_checkpoint
from segment_io.errors import CorruptCheckpoint, KafkaTierCorrupt
from segment_io.kafka_tier.metadata_cache import segment_epochs
from segment_io.kafka_tier.objects import SegmentObjects
from segment_io.producer_snapshot import read_snapshot
from segment_io.segment.scan import scan_buffer

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
    inside = segment_epochs(chain, seg.start_offset, seg.end_offset)
    if inside != seg.leader_epochs:
        raise KafkaTierCorrupt(
            where,
            None,
            f"segment {seg.segment_id}: its leader-epoch checkpoint gives it epochs {list(inside)}, the "
            f"remote log metadata {list(seg.leader_epochs)}",
        )


def agrees_with_metadata(s: SegmentObjects, data: bytes | np.ndarray) -> None:
    """A whole remote segment's batches lie within the offsets its metadata gives, end whole, and
    (in the current format) reach the largest timestamp it records: the metadata describes these
    bytes, not other ones."""
    seg = s.seg
    buf = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    scan = scan_buffer(s.log_url, seg.start_offset, buf)
    table, problems = scan.table, []
    if scan.tail is not None:
        problems.append(f"its last batch is cut short at byte {scan.tail.position}")
    if len(table):
        first, last = int(table.base_offset[0]), int(table.last_offset[-1])
        if first < seg.start_offset or last > seg.end_offset:
            problems.append(
                f"it holds offsets {first}-{last}, outside its metadata's {seg.start_offset}-{seg.end_offset}"
            )
        largest = int(table.max_timestamp.max())
        if bool((table.magic == 2).all()) and largest != seg.max_timestamp_ms:
            problems.append(f"its largest timestamp is {largest}, its metadata's {seg.max_timestamp_ms}")
    if problems:
        raise KafkaTierCorrupt(s.log_url, None, f"segment {seg.segment_id}: " + "; ".join(problems))
