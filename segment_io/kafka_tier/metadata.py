"""The records of `__remote_log_metadata`, decoded from Kafka's message schemas.

A record's value is a frame: an unsigned varint frame version (1), an unsigned varint apiKey and
an unsigned varint schema version, then the message in its flexible form (compact strings and
arrays, UUIDs as 16 bytes, every struct closed by its tagged fields). apiKey 0 is a segment's
metadata (state COPY_SEGMENT_STARTED), 1 an update of it (a later state and, on
COPY_SEGMENT_FINISHED, the plugin's custom metadata), 2 a partition's deletion. Every known type
has schema version 0 only; anything else is refused, never guessed at.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

from segment_io.errors import KafkaTierCorrupt
from segment_io.format.protocol import ProtocolReader, ProtocolWriter

FRAME_VERSION = 1
SEGMENT_METADATA, SEGMENT_UPDATE, PARTITION_DELETE = 0, 1, 2
KNOWN_VERSIONS = {SEGMENT_METADATA: 0, SEGMENT_UPDATE: 0, PARTITION_DELETE: 0}
TXN_INDEX_EMPTY = 0  # RemoteLogSegmentMetadataRecord's tagged field: the segment has no transaction index


class SegmentState(IntEnum):
    """RemoteLogSegmentState's ids."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3


class PartitionDeleteState(IntEnum):
    """RemotePartitionDeleteState's ids."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2


@dataclass(frozen=True)
class TopicIdPartition:
    topic: str
    topic_id: str
    partition: int

    @property
    def dir_name(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class SegmentMetadata:
    """One remote segment as its COPY_SEGMENT_STARTED record describes it (with the state and
    custom metadata of its latest update, once replayed)."""

    tp: TopicIdPartition
    segment_id: str
    start_offset: int
    end_offset: int
    broker_id: int
    max_timestamp_ms: int
    event_timestamp_ms: int
    leader_epochs: tuple[tuple[int, int], ...]  # (epoch, start offset), ascending
    size: int
    custom_metadata: bytes | None
    state: SegmentState
    # The record's own tagged fields, kept as written (tag 0: TxnIndexEmpty, a boolean).
    tagged: tuple[tuple[int, bytes], ...] = ()
    # When the segment reached its state: the event time of its latest update (-1: none yet). The
    # broker's cache takes it as the segment's event time; the description above keeps the copy's.
    updated_ms: int = field(default=-1, compare=False)

    @property
    def mtime_ms(self) -> int:
        """The time a listing gives the segment's files: its largest timestamp, else its upload's."""
        return self.max_timestamp_ms if self.max_timestamp_ms >= 0 else self.event_timestamp_ms

    @property
    def txn_index_empty(self) -> bool | None:
        """Whether the segment has no transaction index (Kafka 3.9+ says; None where it does not)."""
        value = dict(self.tagged).get(TXN_INDEX_EMPTY)
        return None if value is None else value != b"\x00"


@dataclass(frozen=True)
class SegmentUpdate:
    tp: TopicIdPartition
    segment_id: str
    broker_id: int
    event_timestamp_ms: int
    custom_metadata: bytes | None
    state: SegmentState
    tagged: tuple[tuple[int, bytes], ...] = ()


@dataclass(frozen=True)
class PartitionDelete:
    tp: TopicIdPartition
    broker_id: int
    event_timestamp_ms: int
    state: PartitionDeleteState
    tagged: tuple[tuple[int, bytes], ...] = ()


MetadataRecord = SegmentMetadata | SegmentUpdate | PartitionDelete


def _topic_id_partition(r: ProtocolReader) -> TopicIdPartition:
    topic = r.string()
    topic_id = r.uuid()
    partition = r.int32()
    r.tagged_fields()
    if topic is None:
        raise ValueError("a null topic name")
    return TopicIdPartition(topic, topic_id, partition)


def _segment_id(r: ProtocolReader) -> tuple[TopicIdPartition, str]:
    tp = _topic_id_partition(r)
    segment_id = r.uuid()
    r.tagged_fields()
    return tp, segment_id


def _segment_metadata(r: ProtocolReader) -> SegmentMetadata:
    tp, segment_id = _segment_id(r)
    start, end, broker, max_ts, event_ts = r.int64(), r.int64(), r.int32(), r.int64(), r.int64()
    epochs = []
    for _ in range(r.array_len()):
        epochs.append((r.int32(), r.int64()))
        r.tagged_fields()
    size = r.int32()
    custom = r.bytes_()
    state = SegmentState(r.int8())
    tagged = tuple(sorted(r.tagged_fields().items()))
    return SegmentMetadata(
        tp,
        segment_id,
        start,
        end,
        broker,
        max_ts,
        event_ts,
        tuple(sorted(epochs)),
        size,
        custom,
        state,
        tagged,
    )


def _segment_update(r: ProtocolReader) -> SegmentUpdate:
    tp, segment_id = _segment_id(r)
    broker, event_ts = r.int32(), r.int64()
    custom = r.bytes_()
    state = SegmentState(r.int8())
    tagged = tuple(sorted(r.tagged_fields().items()))
    return SegmentUpdate(tp, segment_id, broker, event_ts, custom, state, tagged)


def _partition_delete(r: ProtocolReader) -> PartitionDelete:
    tp = _topic_id_partition(r)
    broker, event_ts = r.int32(), r.int64()
    state = PartitionDeleteState(r.int8())
    return PartitionDelete(tp, broker, event_ts, state, tuple(sorted(r.tagged_fields().items())))


_DECODERS: dict[int, Callable[[ProtocolReader], MetadataRecord]] = {
    SEGMENT_METADATA: _segment_metadata,
    SEGMENT_UPDATE: _segment_update,
    PARTITION_DELETE: _partition_delete,
}


def decode_metadata_record(value: bytes, where: str) -> MetadataRecord:
    """One record value of `__remote_log_metadata`; `where` (its file and offset) names it in an
    error. KafkaTierCorrupt for an unknown frame, type or version, or bytes that do not parse."""
    r = ProtocolReader(value, flexible=True)
    try:
        frame, api_key, version = r.uvarint(), r.uvarint(), r.uvarint()
    except IndexError:
        raise KafkaTierCorrupt(where, None, "a remote log metadata record shorter than its frame") from None
    if frame != FRAME_VERSION:
        raise KafkaTierCorrupt(where, None, f"remote log metadata frame version {frame} (only 1 is known)")
    if api_key not in _DECODERS:
        raise KafkaTierCorrupt(
            where, None, f"a remote log metadata record of unknown type (apiKey {api_key})"
        )
    if version != KNOWN_VERSIONS[api_key]:
        raise KafkaTierCorrupt(
            where,
            None,
            f"remote log metadata record type {api_key} in schema version {version} "
            f"(only {KNOWN_VERSIONS[api_key]} is known): a newer Kafka wrote it",
        )
    try:
        record = _DECODERS[api_key](r)
    except (IndexError, ValueError, UnicodeDecodeError) as exc:
        raise KafkaTierCorrupt(
            where, None, f"a remote log metadata record that does not parse: {exc}"
        ) from None
    if r.remaining:
        raise KafkaTierCorrupt(where, None, f"{r.remaining} bytes after a remote log metadata record")
    return record


def _write_topic_id_partition(w: ProtocolWriter, tp: TopicIdPartition) -> None:
    w.string(tp.topic).uuid(tp.topic_id).int32(tp.partition).tagged_fields()


def _write_segment_id(w: ProtocolWriter, tp: TopicIdPartition, segment_id: str) -> None:
    _write_topic_id_partition(w, tp)
    w.uuid(segment_id).tagged_fields()


def encode_metadata_record(record: MetadataRecord) -> bytes:
    """The record value a remote log metadata manager writes for `record` (the inverse of
    `decode_metadata_record`, byte for byte)."""
    w = ProtocolWriter().uvarint(FRAME_VERSION)
    if isinstance(record, SegmentMetadata):
        w.uvarint(SEGMENT_METADATA).uvarint(KNOWN_VERSIONS[SEGMENT_METADATA])
        _write_segment_id(w, record.tp, record.segment_id)
        w.int64(record.start_offset).int64(record.end_offset).int32(record.broker_id)
        w.int64(record.max_timestamp_ms).int64(record.event_timestamp_ms)
        w.array_len(len(record.leader_epochs))
        for epoch, offset in record.leader_epochs:
            w.int32(epoch).int64(offset).tagged_fields()
        w.int32(record.size).bytes_(record.custom_metadata).int8(record.state)
    elif isinstance(record, SegmentUpdate):
        w.uvarint(SEGMENT_UPDATE).uvarint(KNOWN_VERSIONS[SEGMENT_UPDATE])
        _write_segment_id(w, record.tp, record.segment_id)
        w.int32(record.broker_id).int64(record.event_timestamp_ms).bytes_(record.custom_metadata)
        w.int8(record.state)
    else:
        w.uvarint(PARTITION_DELETE).uvarint(KNOWN_VERSIONS[PARTITION_DELETE])
        _write_topic_id_partition(w, record.tp)
        w.int32(record.broker_id).int64(record.event_timestamp_ms).int8(record.state)
    return w.tagged_fields(dict(record.tagged)).done()
