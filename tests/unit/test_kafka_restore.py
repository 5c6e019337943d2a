"""The restore procedure on a broker's log directory made by hand: what it replaces, what it keeps
(partition.metadata, the broker's other checkpoint entries), where the replaced files go, and each
reason it refuses before changing anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from segment_io.broker_lock import BrokerRunning
from segment_io.checkpoints import format_offset_checkpoint, parse_offset_checkpoint
from segment_io.errors import SegpipeError
from segment_io.kafka_restore import RestoreRefused, restore_into_kafka
from segment_io.layout import META_DIR
from segment_io.topic_partition import TopicPartition
from tests.helpers import flip_byte, lock_held, v2_batch, write_log

pytestmark = pytest.mark.unit
ORDERS_0, OFFSETS_0 = TopicPartition("orders", 0), TopicPartition("__consumer_offsets", 0)


def broker_dir(root: Path) -> Path:
    log_dir = root / "kafka-logs"
    (log_dir / "orders-0").mkdir(parents=True)
    (log_dir / "__consumer_offsets-0").mkdir()
    (log_dir / "meta.properties").write_text("node.id=1\n")
    (log_dir / "orders-0" / "partition.metadata").write_text("version: 0\ntopic_id: broker-topic-id\n")
    (log_dir / "orders-0" / f"{0:020d}.log").write_bytes(b"")
    (log_dir / "orders-0" / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        (log_dir / name).write_bytes(format_offset_checkpoint({ORDERS_0: 0, OFFSETS_0: 17}))
    return log_dir


def archive_dir(root: Path) -> Path:
    archive = root / "cleaned"
    (archive / "orders-0").mkdir(parents=True)
    (archive / META_DIR).mkdir()
    write_log(archive, "orders-0", [[v2_batch(5, [(0, 1_700_000_000_000, b"k", b"v", [])])]])
    (archive / "orders-0" / "partition.metadata").write_text("version: 0\ntopic_id: archive-topic-id\n")
    for name in (
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
        "log-start-offset-checkpoint",
    ):
        (archive / name).write_bytes(format_offset_checkpoint({ORDERS_0: 42 if "start" not in name else 5}))
    return archive


def test_partitions_are_replaced_and_the_brokers_own_entries_kept(tmp_path: Path) -> None:
    log_dir, archive = broker_dir(tmp_path), archive_dir(tmp_path)
    summary = restore_into_kafka(archive, log_dir, tmp_path / "backup")
    part = log_dir / "orders-0"
    assert sorted(p.name for p in part.iterdir()) == [
        f"{5:020d}.index",
        f"{5:020d}.log",
        f"{5:020d}.timeindex",
        "partition.metadata",
    ]
    assert "broker-topic-id" in (part / "partition.metadata").read_text()  # the cluster's topic id stays
    for name, offset in (
        ("recovery-point-offset-checkpoint", 42),
        ("replication-offset-checkpoint", 42),
        ("log-start-offset-checkpoint", 5),
    ):
        entries = parse_offset_checkpoint((log_dir / name).read_bytes(), name)
        assert entries[ORDERS_0] == offset
        assert entries.get(OFFSETS_0) == (None if "start" in name else 17)  # the broker's others stay
    backup = tmp_path / "backup"
    assert sorted(p.name for p in (backup / "orders-0").iterdir()) == [
        f"{0:020d}.log",
        "leader-epoch-checkpoint",
    ]
    assert (backup / "recovery-point-offset-checkpoint").exists()
    assert (summary.partitions, summary.files) == (("orders-0",), 3)


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", ["no-topic", "not-kafka", "backup-inside", "backup-not-empty"])
def test_each_refusal_changes_nothing(tmp_path: Path, case: str) -> None:
    log_dir, archive = broker_dir(tmp_path), archive_dir(tmp_path)
    backup = tmp_path / "backup"
    if case == "no-topic":
        (archive / "clicks-0").mkdir()
    elif case == "not-kafka":
        (log_dir / "meta.properties").unlink()
    elif case == "backup-inside":
        backup = log_dir / "old"
    else:
        backup.mkdir()
        (backup / "x").write_text("x")
    before = snapshot(tmp_path)
    with pytest.raises(RestoreRefused) as refused:
        restore_into_kafka(archive, log_dir, backup)
    expected = {
        "no-topic": "create their topics",
        "not-kafka": "not a Kafka log directory",
        "backup-inside": "Kafka would load it",
        "backup-not-empty": "is not empty",
    }[case]
    assert expected in str(refused.value)
    assert snapshot(tmp_path) == before


def test_a_running_broker_is_refused(tmp_path: Path) -> None:
    """Kafka holds a lock on LOG_DIR/.lock while it runs: another process holds it here."""
    log_dir, archive = broker_dir(tmp_path), archive_dir(tmp_path)
    with lock_held(log_dir / ".lock"):
        before = snapshot(tmp_path)
        with pytest.raises(BrokerRunning, match="is running"):
            restore_into_kafka(archive, log_dir, tmp_path / "backup")
        assert snapshot(tmp_path) == before


@pytest.mark.parametrize("damage", ["crc", "torn-tail", "bad-index", "incomplete"])
def test_an_archive_that_is_not_whole_and_valid_is_refused_before_anything_moves(
    tmp_path: Path, damage: str
) -> None:
    """The broker keeps its clean-shutdown marker and would serve what it is given without recovery:
    every segment is verified first, and an unfinished output is not an archive."""
    log_dir, archive = broker_dir(tmp_path), archive_dir(tmp_path)
    (log_dir / ".kafka_cleanshutdown").write_text("")
    log = archive / "orders-0" / f"{5:020d}.log"
    if damage == "crc":
        flip_byte(log, -1, 0xFF)  # a value byte: the batch still frames, its CRC no longer matches
    elif damage == "torn-tail":
        log.write_bytes(log.read_bytes() + b"\x00\x00\x00")
    elif damage == "bad-index":
        (archive / "orders-0" / f"{5:020d}.index").write_bytes(b"\x00\x00\x00\x09\x00\x00\x10\x00")
    else:
        (archive / META_DIR / "INCOMPLETE").write_text("run 1\n")
    before = snapshot(tmp_path)
    with pytest.raises(SegpipeError) as refused:
        restore_into_kafka(archive, log_dir, tmp_path / "backup")
    expected = {
        "crc": ("CRC mismatch", 65),
        "torn-tail": ("truncated segment", 65),
        "bad-index": ("corrupt index", 65),
        "incomplete": ("did not finish", 2),
    }[damage]
    message = str(refused.value)
    assert expected[0] in message and (str(log) in message or damage in ("bad-index", "incomplete")), message
    assert refused.value.exit_code == expected[1]
    assert snapshot(tmp_path) == before and not (tmp_path / "backup").exists()
