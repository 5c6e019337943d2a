"""Record batch headers: magic v2 (61 bytes) and legacy v0/v1 log entries; parse and build."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

from segment_io.format.constants import (
    ATTRIBUTES_OFFSET,
    CODEC_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    INT32_MAX,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    V2_EMPTY_BATCH_LENGTH,
    V2_HEADER_SIZE,
    Codec,
    TimestampType,
)

_V2 = struct.Struct(">qiibIhiqqqhii")
_LEGACY = struct.Struct(">qiIbb")


@dataclass(frozen=True)
class BatchHeader:
    """The header of a v2 batch (every field), read without touching the records section."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def codec(self) -> Codec:
        return Codec(self.attributes & CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType(1 if self.attributes & TIMESTAMP_TYPE_MASK else 0)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def last_sequence(self) -> int:
        return last_sequence(self.base_sequence, self.last_offset_delta)


def last_sequence(base_sequence: int, delta: int) -> int:
    """baseSequence + delta with Kafka's wrap to 0 after INT32_MAX; −1 stays −1."""
    if base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    if base_sequence > INT32_MAX - delta:
        return delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + delta


def parse_v2_header(buf: bytes | memoryview, pos: int = 0) -> BatchHeader:
    """Unpack the 61-byte v2 header at `pos` (the caller checked the magic and length)."""
    (base, length, epoch, magic, crc, attrs, delta, base_ts, max_ts, pid, pepoch, seq, count) = (
        _V2.unpack_from(buf, pos)
    )
    return BatchHeader(
        base, length, epoch, magic, crc, attrs & 0xFF, delta, base_ts, max_ts, pid, pepoch, seq, count
    )


def batch_crc(batch: bytes | bytearray | memoryview) -> int:
    """CRC-32C of a v2 batch as Kafka computes it: attributes to the end of the batch."""
    return int(crc32c.crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))


def build_v2_batch(
    *,
    base_offset: int,
    records: bytes | memoryview,
    records_count: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    attributes: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
) -> bytes:
    """Assemble a v2 batch around an already encoded (and, per `attributes`, compressed) records
    section and stamp its CRC-32C. The high byte of the attributes is always written as 0."""
    attributes &= 0xFF
    batch_length = V2_EMPTY_BATCH_LENGTH + len(records)
    out = bytearray(LOG_OVERHEAD + batch_length)
    _V2.pack_into(
        out,
        0,
        base_offset,
        batch_length,
        partition_leader_epoch,
        2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    out[V2_HEADER_SIZE:] = records
    struct.pack_into(">I", out, CRC_OFFSET, batch_crc(out))
    return bytes(out)


def build_empty_batch(header: BatchHeader) -> bytes:
    """The header-only batch the cleaner keeps for an active producer (docs/log-format.md#empty-batches)."""
    keep = header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    return build_v2_batch(
        base_offset=header.base_offset,
        records=b"",
        records_count=0,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=NO_TIMESTAMP,
        max_timestamp=header.max_timestamp,
        attributes=keep,
        partition_leader_epoch=header.partition_leader_epoch,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
    )


@dataclass(frozen=True)
class LegacyEntry:
    """A magic 0/1 log entry header: one message, or a compressed wrapper of inner entries."""

    offset: int
    size: int
    crc: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None

    @property
    def codec(self) -> Codec:
        return Codec(self.attributes & CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TimestampType(1 if self.attributes & TIMESTAMP_TYPE_MASK else 0)


def parse_legacy_entry(buf: bytes | memoryview, pos: int, end: int) -> LegacyEntry | str:
    """Parse one legacy entry in [pos, end); a string describes why it is malformed."""
    offset, size, crc, magic, attributes = _LEGACY.unpack_from(buf, pos)
    if attributes & CODEC_MASK not in Codec._value2member_map_:
        return f"compression codec id {attributes & CODEC_MASK} is not supported"
    p = pos + 18
    timestamp = NO_TIMESTAMP
    if magic == 1:
        if end - p < 8:
            return "message too short for its timestamp"
        (timestamp,) = struct.unpack_from(">q", buf, p)
        p += 8
    fields: list[bytes | None] = []
    for name in ("key", "value"):
        if end - p < 4:
            return f"message too short for its {name} length"
        (length,) = struct.unpack_from(">i", buf, p)
        p += 4
        if length < -1 or p + max(length, 0) > end:
            return f"bad {name} length {length}"
        fields.append(None if length < 0 else bytes(buf[p : p + length]))
        p += max(length, 0)
    if p != end:
        return f"{end - p} bytes left after the message value"
    return LegacyEntry(offset, size, crc, magic, attributes & 0xFF, timestamp, fields[0], fields[1])


def build_legacy_message(
    offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    """One magic 0/1 log entry with its CRC-32 (used to write legacy test data)."""
    import zlib

    body = bytearray(struct.pack(">bb", magic, attributes))
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1 if field is None else len(field))
        if field is not None:
            body += field
    message = struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF) + body
    return struct.pack(">qi", offset, len(message)) + message
