"""Directory and file naming rules, listing, and checkpoint files."""

from __future__ import annotations

from pathlib import Path

import pytest

from segment_io.checkpoints import (
    format_leader_epoch_checkpoint,
    format_offset_checkpoint,
    parse_leader_epoch_checkpoint,
    parse_offset_checkpoint,
)
from segment_io.errors import CorruptCheckpoint
from segment_io.layout import ignored_dir_reason, list_log_dir, parse_topic_partition, segment_file_name
from segment_io.storage import open_storage
from segment_io.topic_partition import TopicPartition

pytestmark = pytest.mark.unit
UUID = "0123456789abcdef0123456789abcdef"


def test_partition_names() -> None:
    assert parse_topic_partition("orders-7") == TopicPartition("orders", 7)
    assert parse_topic_partition("my-topic.v2-12") == TopicPartition("my-topic.v2", 12)
    assert parse_topic_partition("__consumer_offsets-42") == TopicPartition("__consumer_offsets", 42)
    assert parse_topic_partition("nodash") is None
    assert ignored_dir_reason(f"orders-7.{UUID}-delete") == "delete directory"
    assert ignored_dir_reason(f"orders-7.{UUID}-future") == "future directory"
    assert ignored_dir_reason(f"orders-7.{UUID}-stray") == "stray directory"
    assert ignored_dir_reason("__cluster_metadata-0") == "KRaft metadata log"
    assert ignored_dir_reason("orders-7") is None
    assert segment_file_name(368769, "log") == "00000000000000368769.log"


def test_listing_ignores_transient_files(tmp_path: Path) -> None:
    part = tmp_path / "orders-0"
    part.mkdir()
    for name in [
        "00000000000000000000.log",
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
        "00000000000000000010.log",
        "00000000000000000010.log.deleted",
        "00000000000000000020.log.cleaned",
        "00000000000000000020.index.swap",
        "00000000000000000030.index",
        "00000000000000000010.snapshot",
        "leader-epoch-checkpoint",
        "partition.metadata.tmp",
    ]:
        (part / name).write_bytes(b"")
    (tmp_path / f"orders-1.{UUID}-delete").mkdir()
    (tmp_path / "__cluster_metadata-0").mkdir()
    (tmp_path / "cleaner-offset-checkpoint").write_text("0\n1\norders 0 10\n")
    storage, path = open_storage(str(tmp_path))
    listing = list_log_dir(storage, path)
    [p] = listing.partitions
    assert [s.base_offset for s in p.segments] == [0, 10]
    assert p.segments[0].index is not None and p.segments[1].index is None
    reasons = dict(p.ignored)
    assert reasons["00000000000000000010.log.deleted"] == "deleted file"
    assert reasons["00000000000000000020.log.cleaned"] == "cleaned file"
    assert reasons["00000000000000000020.index.swap"] == "swap file"
    assert reasons["00000000000000000030.index"] == "index without a .log"
    assert reasons["partition.metadata.tmp"] == "interrupted write (.tmp)"
    assert [s.name for s in p.snapshots] == ["00000000000000000010.snapshot"]
    assert dict(listing.ignored) == {
        f"orders-1.{UUID}-delete": "delete directory",
        "__cluster_metadata-0": "KRaft metadata log",
    }
    assert listing.checkpoints["cleaner-offset-checkpoint"] == {TopicPartition("orders", 0): 10}


def test_checkpoint_round_trip_and_errors() -> None:
    entries = {TopicPartition("b", 1): 5, TopicPartition("a", 0): 7}
    text = format_offset_checkpoint(entries)
    assert text == b"0\n2\na 0 7\nb 1 5\n"
    assert parse_offset_checkpoint(text, "x") == entries
    with pytest.raises(CorruptCheckpoint, match="entry count 3"):
        parse_offset_checkpoint(b"0\n3\na 0 7\n", "x")
    with pytest.raises(CorruptCheckpoint, match="unknown checkpoint version"):
        parse_offset_checkpoint(b"1\n0\n", "x")
    assert parse_leader_epoch_checkpoint(format_leader_epoch_checkpoint([(0, 0), (3, 120)]), "x") == [
        (0, 0),
        (3, 120),
    ]


def test_a_checkpoint_that_ends_before_its_count_is_empty() -> None:
    """As Kafka reads them: a broker creates the cleaner's checkpoint as an empty file."""
    for text in (b"", b"0\n"):
        assert parse_offset_checkpoint(text, "x") == {}
        assert parse_leader_epoch_checkpoint(text, "x") == []


@pytest.mark.parametrize(
    ("text", "position", "detail"),
    [
        (b"0\nx\n0 0\n", 2, "bad entry count 'x'"),
        (b"0\n1\n0 zero\n", 4, "bad entry '0 zero'"),
        (b"0\n2\n0 0\n", 2, "entry count 2 but 1 entries"),
        (b"0\n1\n0 0\xff\n", 7, "not UTF-8"),
        (b"2\n", 0, "unknown leader epoch checkpoint version"),
    ],
)
def test_a_malformed_leader_epoch_checkpoint_names_the_byte(text: bytes, position: int, detail: str) -> None:
    with pytest.raises(CorruptCheckpoint, match=detail) as caught:
        parse_leader_epoch_checkpoint(text, "p-0/leader-epoch-checkpoint")
    assert (caught.value.path, caught.value.position) == ("p-0/leader-epoch-checkpoint", position)
