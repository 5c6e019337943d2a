"""__consumer_offsets and __transaction_state payloads decode by the schemas Kafka writes them in."""

from __future__ import annotations

import struct

import pytest

from segment_io.internal_topics import decode_key, decode_value

pytestmark = pytest.mark.unit


def s16(text: str | None) -> bytes:
    return struct.pack(">h", -1) if text is None else struct.pack(">h", len(text)) + text.encode()


def compact(text: str | None) -> bytes:
    return b"\x00" if text is None else bytes([len(text) + 1]) + text.encode()


def test_offset_commit_key_and_value_v3() -> None:
    key = struct.pack(">h", 1) + s16("group-a") + s16("orders") + struct.pack(">i", 4)
    value = struct.pack(">hqi", 3, 1234, 7) + s16("meta") + struct.pack(">q", 1_700_000_000_000)
    assert decode_key("__consumer_offsets", key) == {
        "version": 1,
        "type": "offset_commit",
        "group": "group-a",
        "topic": "orders",
        "partition": 4,
    }
    assert decode_value("__consumer_offsets", key, value) == {
        "version": 3,
        "offset": 1234,
        "leader_epoch": 7,
        "metadata": "meta",
        "commit_timestamp": 1_700_000_000_000,
    }


def test_offset_commit_value_v4_flexible() -> None:
    key = struct.pack(">h", 1) + s16("g") + s16("t") + struct.pack(">i", 0)
    value = struct.pack(">hqi", 4, 9, -1) + compact("") + struct.pack(">q", 5) + b"\x00"
    assert decode_value("__consumer_offsets", key, value) == {
        "version": 4,
        "offset": 9,
        "leader_epoch": -1,
        "metadata": "",
        "commit_timestamp": 5,
    }


def test_group_metadata_v3() -> None:
    key = struct.pack(">h", 2) + s16("grp")
    member = s16("m1") + s16(None) + s16("client") + s16("/10.0.0.1") + struct.pack(">ii", 300, 45)
    member += struct.pack(">i", 2) + b"ab" + struct.pack(">i", 1) + b"c"
    value = struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 5) + s16("range") + s16("m1")
    value += struct.pack(">q", 77) + struct.pack(">i", 1) + member
    decoded = decode_value("__consumer_offsets", key, value)
    assert decoded is not None and decoded["generation"] == 5 and decoded["protocol"] == "range"
    assert decoded["members"] == [
        {
            "member_id": "m1",
            "group_instance_id": None,
            "client_id": "client",
            "client_host": "/10.0.0.1",
            "rebalance_timeout": 300,
            "session_timeout": 45,
            "subscription_bytes": 2,
            "assignment_bytes": 1,
        }
    ]


def test_transaction_state_v0_and_v1() -> None:
    key = struct.pack(">h", 0) + s16("txn-1")
    assert decode_key("__transaction_state", key) == {"version": 0, "transactional_id": "txn-1"}
    v0 = struct.pack(">hqhib", 0, 42, 3, 60000, 1) + struct.pack(">i", 1) + s16("orders")
    v0 += struct.pack(">iii", 2, 0, 5) + struct.pack(">qq", 10, 20)
    assert decode_value("__transaction_state", key, v0) == {
        "version": 0,
        "producer_id": 42,
        "producer_epoch": 3,
        "transaction_timeout_ms": 60000,
        "status": "Ongoing",
        "partitions": [{"topic": "orders", "partitions": [0, 5]}],
        "last_update_timestamp": 10,
        "start_timestamp": 20,
    }
    v1 = struct.pack(">hqhib", 1, 42, 3, 60000, 0) + b"\x00" + struct.pack(">qq", 10, 20)
    v1 += b"\x01" + b"\x01\x08" + struct.pack(">q", 99)  # tagged field 1: nextProducerId
    decoded = decode_value("__transaction_state", key, v1)
    assert decoded is not None and decoded["status"] == "Empty" and decoded["partitions"] is None
    assert (decoded["previous_producer_id"], decoded["next_producer_id"]) == (-1, 99)


def test_unknown_versions_and_other_topics_are_left_raw() -> None:
    assert decode_key("__consumer_offsets", struct.pack(">h", 99) + b"x") is None
    assert decode_key("orders", b"\x00\x01") is None
    assert decode_value("__consumer_offsets", struct.pack(">h", 1), None) is None
