"""Every number and label of the Kafka log format, in one place (docs/log-format.md)."""

from __future__ import annotations

from enum import IntEnum

# Framing common to every magic: int64 offset + int32 size, then the magic byte at 16.
LOG_OVERHEAD = 12
MAGIC_OFFSET = 16
MIN_ENTRY_SIZE = 14  # smallest legal size field of any magic (a v0 message)

# Magic 2 batch header: where each field begins (big-endian), the one table the scan kernel,
# the batch builder and batch.py's struct read (a test holds the struct to it).
BASE_OFFSET_AT = 0  # int64
BATCH_LENGTH_AT = 8  # int32: the bytes after this field
LEADER_EPOCH_AT = 12  # int32: partitionLeaderEpoch
CRC_OFFSET = 17  # uint32: CRC-32C
ATTRIBUTES_OFFSET = 21  # int16; the v2 CRC-32C covers this byte to the end of the batch
LAST_OFFSET_DELTA_AT = 23  # int32
BASE_TIMESTAMP_AT = 27  # int64
MAX_TIMESTAMP_AT = 35  # int64
PRODUCER_ID_AT = 43  # int64
PRODUCER_EPOCH_AT = 51  # int16
BASE_SEQUENCE_AT = 53  # int32
RECORDS_COUNT_AT = 57  # int32
V2_HEADER_SIZE = 61
V2_EMPTY_BATCH_LENGTH = 49  # batch length of a batch with no records section

# The smallest record: length, attributes, timestamp delta, offset delta, key length, value
# length and header count, one byte each (docs/log-format.md#records).
MIN_RECORD_SIZE = 7

# Attribute bits (only the low byte of the int16 means anything).
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# Offsets relative to a segment's (or a batch's) base are int32: a segment spans at most this many.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
LONG_MAX = 2**63 - 1
MB = 1024 * 1024  # what Kafka's cleaner log lines call a MB, and so do segpipe's

# Kafka's defaults for how large segments and their indexes grow (segment.bytes,
# segment.index.bytes, index.interval.bytes), for writers and for the topic configs.
DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 * 1024
DEFAULT_INDEX_INTERVAL_BYTES = 4096

# Index entry sizes: offset index (relative offset, position), time index (timestamp, relative
# offset), transaction index (version, producer id, first, last, last stable offset).
OFFSET_ENTRY = 8
TIME_ENTRY = 12
TXN_ENTRY = 34


class Codec(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, name: str) -> Codec:
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(f"unknown codec {name!r}; use none, gzip, snappy, lz4 or zstd") from None


class TimestampType(IntEnum):
    NO_TIMESTAMP_TYPE = -1  # magic 0
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def label(self) -> str:
        return "".join(word.capitalize() for word in self.name.split("_"))


class ControlType(IntEnum):
    """The type in a control record's key."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6

    @classmethod
    def label_of(cls, value: int) -> str:
        return cls(value).name if value in cls._value2member_map_ else f"UNKNOWN({value})"


CODEC_LABELS = tuple(c.label for c in Codec)
# Indexed by timestamp type + 1 (NoTimestampType, CreateTime, LogAppendTime).
TIMESTAMP_TYPE_LABELS = tuple(t.label for t in TimestampType)
