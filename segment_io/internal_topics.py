"""Decoding of `__consumer_offsets` and `__transaction_state` keys and values (the schemas Kafka
writes them in), for dump.

Compaction never needs this (it works on raw key bytes); unknown versions decode to None.
"""

from __future__ import annotations

import struct
from typing import Any

from segment_io.format.protocol import ProtocolReader

CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
INTERNAL_TOPICS = (CONSUMER_OFFSETS, TRANSACTION_STATE)
TXN_STATUS = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
)


def decode_key(topic: str, key: bytes | None) -> dict[str, Any] | None:
    if key is None or len(key) < 2 or topic not in INTERNAL_TOPICS:
        return None
    r = ProtocolReader(key)
    version = r.int16()
    try:
        if topic == TRANSACTION_STATE:
            return {"version": version, "transactional_id": r.string()} if version == 0 else None
        if version in (0, 1):
            return {
                "version": version,
                "type": "offset_commit",
                "group": r.string(),
                "topic": r.string(),
                "partition": r.int32(),
            }
        if version == 2:
            return {"version": version, "type": "group_metadata", "group": r.string()}
        if 3 <= version <= 8:
            out: dict[str, Any] = {"version": version, "type": "consumer_group", "group": r.string()}
            if version in (5, 7, 8):
                out["member"] = r.string()
            return out
    except (struct.error, IndexError, UnicodeDecodeError):
        return None
    return None


def decode_value(topic: str, key: bytes | None, value: bytes | None) -> dict[str, Any] | None:
    """Decode a value given its key (the key version selects the value schema)."""
    if value is None or key is None or len(value) < 2 or topic not in INTERNAL_TOPICS:
        return None
    key_version = struct.unpack_from(">h", key)[0]
    version = struct.unpack_from(">h", value)[0]
    try:
        if topic == TRANSACTION_STATE:
            return _txn_state_value(value, version)
        if key_version in (0, 1):
            return _offset_commit_value(value, version)
        if key_version == 2:
            return _group_metadata_value(value, version)
    except (struct.error, IndexError, UnicodeDecodeError):
        return None
    return None


def _offset_commit_value(value: bytes, version: int) -> dict[str, Any] | None:
    if not 0 <= version <= 4:
        return None
    r = ProtocolReader(value, flexible=version >= 4)
    r.pos = 2
    out: dict[str, Any] = {"version": version, "offset": r.int64()}
    if version >= 3:
        out["leader_epoch"] = r.int32()
    out["metadata"] = r.string()
    out["commit_timestamp"] = r.int64()
    if version == 1:
        out["expire_timestamp"] = r.int64()
    r.tagged_fields()
    return out


def _group_metadata_value(value: bytes, version: int) -> dict[str, Any] | None:
    if not 0 <= version <= 4:
        return None
    r = ProtocolReader(value, flexible=version >= 4)
    r.pos = 2
    out: dict[str, Any] = {
        "version": version,
        "protocol_type": r.string(),
        "generation": r.int32(),
        "protocol": r.string(),
        "leader": r.string(),
    }
    if version >= 2:
        out["current_state_timestamp"] = r.int64()
    members = []
    for _ in range(max(r.array_len(), 0)):
        m: dict[str, Any] = {"member_id": r.string()}
        if version >= 3:
            m["group_instance_id"] = r.string()
        m["client_id"] = r.string()
        m["client_host"] = r.string()
        if version >= 1:
            m["rebalance_timeout"] = r.int32()
        m["session_timeout"] = r.int32()
        m["subscription_bytes"] = len(r.bytes_() or b"")
        m["assignment_bytes"] = len(r.bytes_() or b"")
        r.tagged_fields()
        members.append(m)
    out["members"] = members
    r.tagged_fields()
    return out


def _txn_state_value(value: bytes, version: int) -> dict[str, Any] | None:
    if version not in (0, 1):
        return None
    r = ProtocolReader(value, flexible=version == 1)
    r.pos = 2
    out: dict[str, Any] = {
        "version": version,
        "producer_id": r.int64(),
        "producer_epoch": r.int16(),
        "transaction_timeout_ms": r.int32(),
    }
    status = r.int8()
    out["status"] = TXN_STATUS[status] if 0 <= status < len(TXN_STATUS) else status
    n = r.array_len()
    partitions = None
    if n >= 0:
        partitions = []
        for _ in range(n):
            topic = r.string()
            ids = [r.int32() for _ in range(max(r.array_len(), 0))]
            r.tagged_fields()
            partitions.append({"topic": topic, "partitions": ids})
    out["partitions"] = partitions
    out["last_update_timestamp"] = r.int64()
    out["start_timestamp"] = r.int64()
    tags = r.tagged_fields()
    if version == 1:
        out["previous_producer_id"] = struct.unpack(">q", tags[0])[0] if 0 in tags else -1
        out["next_producer_id"] = struct.unpack(">q", tags[1])[0] if 1 in tags else -1
        out["client_transaction_version"] = struct.unpack(">h", tags[2])[0] if 2 in tags else 0
    return out
