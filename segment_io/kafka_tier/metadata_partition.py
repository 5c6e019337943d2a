"""Which partition of `__remote_log_metadata` holds a topic partition's records: the one Kafka's
RemoteLogMetadataTopicPartitioner picks. It hashes the topic id's two halves and the partition
number as Java's `Objects.hash(long, long, int)` does (31-fold, each long folded to an int as
`Long.hashCode`), takes that int's four big-endian bytes through Kafka's murmur2, makes it
positive (`& 0x7fffffff`) and takes it modulo the topic's partition count."""

from __future__ import annotations

import base64

from segment_io.kafka_tier.metadata import TopicIdPartition

_MASK = 0xFFFFFFFF


def _int32(value: int) -> int:
    value &= _MASK
    return value - (1 << 32) if value >= 1 << 31 else value


def _long_hash(value: int) -> int:
    unsigned = value & 0xFFFFFFFFFFFFFFFF
    return _int32(unsigned ^ (unsigned >> 32))


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (Utils.murmur2), as a signed 32-bit int."""
    m, r = 0x5BD1E995, 24
    h = (0x9747B28C ^ len(data)) & _MASK
    whole = len(data) // 4 * 4
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & _MASK
        k ^= k >> r
        k = (k * m) & _MASK
        h = ((h * m) & _MASK) ^ k
    tail = data[whole:]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & _MASK
    h ^= h >> 13
    h = (h * m) & _MASK
    h ^= h >> 15
    return _int32(h)


def metadata_partition(tp: TopicIdPartition, partitions: int) -> int:
    raw = base64.urlsafe_b64decode(tp.topic_id + "=" * (-len(tp.topic_id) % 4))
    most, least = (int.from_bytes(raw[:8], "big", signed=True), int.from_bytes(raw[8:], "big", signed=True))
    h = 1
    for part in (_long_hash(least), _long_hash(most), tp.partition):
        h = _int32(31 * h + part)
    return (murmur2((h & _MASK).to_bytes(4, "big")) & 0x7FFFFFFF) % partitions
