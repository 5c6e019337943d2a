"""The remote log metadata replayed as the broker's RemoteLogMetadataCache replays it, a rule per
test, and the remote log the broker serves from it (the leader epoch chain followed)."""

from __future__ import annotations

import pytest

from segment_io.errors import OverlappingSegments
from segment_io.kafka_tier.metadata import (
    PartitionDelete,
    PartitionDeleteState,
    SegmentMetadata,
    SegmentState,
    SegmentUpdate,
    TopicIdPartition,
)
from segment_io.kafka_tier.metadata_cache import MetadataReplay, epoch_chain, remote_log

pytestmark = pytest.mark.unit
TP = TopicIdPartition("orders", "AAAAAAAAAAAAAAAAAAAAAA", 0)
S = SegmentState


def started(
    seg_id: str, start: int, end: int, epochs: tuple[tuple[int, int], ...] | None = None
) -> SegmentMetadata:
    return SegmentMetadata(
        TP, seg_id, start, end, 1, end * 10, 0, epochs or ((0, start),), 100, None, S.COPY_SEGMENT_STARTED
    )


def update(seg_id: str, state: SegmentState, custom: bytes | None = None) -> SegmentUpdate:
    return SegmentUpdate(TP, seg_id, 1, 0, custom, state)


def served_ids(*records: object) -> list[str]:
    state = MetadataReplay.of(records).served().get(TP)  # type: ignore[arg-type]
    return [] if state is None else [s.segment_id for s in state.served()]


def test_a_segment_is_served_only_once_its_copy_finished() -> None:
    assert served_ids(started("a", 0, 9)) == []
    assert served_ids(started("a", 0, 9), update("a", S.COPY_SEGMENT_FINISHED)) == ["a"]


def test_a_segment_whose_deletion_started_is_no_longer_served() -> None:
    records = [
        started("a", 0, 9),
        update("a", S.COPY_SEGMENT_FINISHED),
        started("b", 10, 19),
        update("b", S.COPY_SEGMENT_FINISHED),
        update("a", S.DELETE_SEGMENT_STARTED),
    ]
    assert served_ids(*records) == ["b"]
    assert served_ids(*records, update("a", S.DELETE_SEGMENT_FINISHED)) == ["b"]


def test_an_update_of_a_segment_never_seen_is_dropped() -> None:
    assert served_ids(update("a", S.COPY_SEGMENT_FINISHED), started("b", 0, 9)) == []


def test_an_invalid_transition_is_dropped() -> None:
    """A FINISHED update after the deletion started does not bring the segment back."""
    records = [
        started("a", 0, 9),
        update("a", S.DELETE_SEGMENT_STARTED),
        update("a", S.COPY_SEGMENT_FINISHED),
    ]
    assert served_ids(*records) == []


def test_the_finished_update_carries_the_custom_metadata() -> None:
    replay = MetadataReplay.of([started("a", 0, 9), update("a", S.COPY_SEGMENT_FINISHED, b"\x01")])
    assert replay.served()[TP].served()[0].custom_metadata == b"\x01"


def test_a_partition_being_deleted_is_not_served() -> None:
    delete = PartitionDelete(TP, 1, 0, PartitionDeleteState.DELETE_PARTITION_MARKED)
    assert served_ids(started("a", 0, 9), update("a", S.COPY_SEGMENT_FINISHED), delete) == []


def log_of(segs: list[SegmentMetadata], log_start: int | None = None) -> list[str]:
    """The served log after each segment's copy finished, in the order given."""
    records: list[object] = []
    for s in segs:
        records += [s, update(s.segment_id, S.COPY_SEGMENT_FINISHED)]
    state = MetadataReplay.of(records).served()[TP]  # type: ignore[arg-type]
    return [s.segment_id for s in remote_log(state, epoch_chain(state.served()), log_start, "tp")]


def test_the_log_follows_the_segments_in_offset_order_from_the_log_start() -> None:
    segs = [started("b", 10, 19), started("a", 0, 9), started("c", 20, 29, ((0, 20), (1, 25)))]
    assert log_of(segs) == ["a", "b", "c"]
    assert log_of(segs, log_start=10) == ["b", "c"]


def test_a_segment_copied_again_at_the_same_start_replaces_the_earlier() -> None:
    """The broker maps each epoch's start offsets to one segment: the last copy finished wins."""
    assert log_of([started("a", 0, 9), started("a2", 0, 9)]) == ["a2"]


def test_a_superset_uploaded_by_a_new_leader_replaces_the_segments_it_covers() -> None:
    """S0 10-90, then S1 5-100 (reaching past S0's highest offset): S0's entry is dropped, so the
    log from 10 is S1 then S2, as the broker serves it."""
    segs = [started("s0", 10, 90), started("s1", 5, 100), started("s2", 101, 200)]
    assert log_of(segs, log_start=10) == ["s1", "s2"]
    # A segment that ends below the epoch's highest offset drops nothing (an erase's replacement).
    assert log_of([started("a", 0, 9), started("b", 10, 19), started("a2", 0, 9)]) == ["a2", "b"]


def test_the_leader_epoch_chain_drops_an_epoch_a_later_one_truncated() -> None:
    segs = [
        started("a", 0, 9, ((0, 0), (2, 5))),
        started("b", 10, 19, ((3, 10),)),
        started("x", 6, 8, ((1, 6),)),
    ]
    assert epoch_chain(segs) == [(0, 0), (2, 5), (3, 10)]


def test_segments_an_unclean_election_left_overlapping_are_refused() -> None:
    """Epoch 0's segment runs to 19, but epoch 1 begins at 15: offsets 15..19 exist twice."""
    segs = [started("a", 0, 19, ((0, 0),)), started("b", 15, 30, ((1, 15),))]
    with pytest.raises(OverlappingSegments, match=r"remote segments a .*and b .*overlap"):
        log_of(segs)


def test_every_record_a_broker_wrote_encodes_back_to_its_bytes() -> None:
    """Decoding then encoding each record of the fixtures' metadata topics gives back the bytes
    Kafka's remote log metadata manager wrote."""
    from segment_io.kafka_tier.metadata import decode_metadata_record, encode_metadata_record
    from segment_io.layout import list_partition
    from segment_io.segment.reader import SegmentReader
    from segment_io.storage import LocalStorage
    from segment_io.topic_partition import TopicPartition
    from tests.kip405 import ENCRYPTED, KIP405, PLAIN

    seen = 0
    for name in (PLAIN, ENCRYPTED):
        path = str(KIP405 / name / "logdir" / "__remote_log_metadata-0")
        tp = TopicPartition("__remote_log_metadata", 0)
        for seg in list_partition(LocalStorage(), path, tp).segments:
            reader = SegmentReader(LocalStorage(), seg.log.path, seg.base_offset)
            for rb in reader.record_batches(tp.topic, 0):
                for value in rb.column("value").to_pylist():
                    assert encode_metadata_record(decode_metadata_record(value, "x")) == value
                    seen += 1
    assert seen > 100


def test_a_partition_delete_record_round_trips() -> None:
    from segment_io.kafka_tier.metadata import decode_metadata_record, encode_metadata_record

    record = PartitionDelete(TP, 3, 17, PartitionDeleteState.DELETE_PARTITION_FINISHED)
    assert decode_metadata_record(encode_metadata_record(record), "x") == record
    finished = update("AAECAwQFBgcICQoLDA0ODw", S.COPY_SEGMENT_FINISHED, b"\x00")  # bytes 0..15
    assert decode_metadata_record(encode_metadata_record(finished), "x") == finished


def test_murmur2_is_kafkas() -> None:
    """Against kafka-python's murmur2 (an implementation of Kafka's partitioner nobody here wrote)."""
    from kafka.partitioner.default import murmur2 as theirs

    from segment_io.kafka_tier.metadata_partition import murmur2

    for data in (b"", b"a", b"ab", b"abc", b"abcd", b"\xff\x00\x80\x7f", bytes(range(37)), b"kip405-0"):
        assert murmur2(data) & 0xFFFFFFFF == theirs(bytearray(data)), data  # theirs: unsigned
