"""A cut against Kafka's own broker. Kafka truncates a log itself when it recovers one whose batch
is corrupt: every batch from that one on goes, later segments with it. The samples restored into
a broker, a batch at the cut corrupted in each partition and the broker restarted uncleanly, what
its recovery leaves is byte for byte what `segpipe cut` writes. Then the cut output restored into
the broker loads without recovery, ends where the cut ended it, and serves exactly the records
below the cut: all of them read_uncommitted; read_committed, the committed ones below the first
transaction the cut left open (the last stable offset stops there)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from segment_io.exit_codes import ExitCode
from segment_io.layout import CLEAN_SHUTDOWN, META_DIR, RECOVERY_CHECKPOINT
from segment_io.producer_snapshot import ENTRY
from tests.helpers import dumped, run_segpipe
from tests.kafka.broker import AS_PLACED, Broker
from tests.kafka.test_restore import aborted, consumed, create_topics, expected, offsets

pytestmark = pytest.mark.kafka
TOPICS = {"orders": 2, "clicks": 1}
NAMES = sorted(f"{t}-{p}" for t, n in TOPICS.items() for p in range(n))
ALL_TOPICS = {**TOPICS, "legacy-users": 1}  # the samples' topics (restored whole, then left alone)
PRODUCER_ID_EXPIRATION_MS = 86_400_000  # the broker's default


def open_transaction_cut(sample_dir: Path) -> int:
    """An offset of orders-0 where a transaction is open: its COMMIT or ABORT marker's."""
    proc = run_segpipe("dump", str(sample_dir), "--topic", "orders", "--partition", "0", "--batches")
    batches = [json.loads(line) for line in proc.stdout.splitlines()]
    markers = [b for b in batches if b["is_control"] and b["base_offset"] > 1000]
    return int(markers[0]["base_offset"])


def corrupt_from(log_dir: Path, name: str, offset: int) -> None:
    """Flip a CRC byte of the partition's first batch that ends at or above `offset`."""
    for log in sorted((log_dir / name).glob("*.log")):
        data = bytearray(log.read_bytes())
        pos = 0
        while pos + 61 <= len(data):
            size = int.from_bytes(data[pos + 8 : pos + 12], "big")
            last = int.from_bytes(data[pos : pos + 8], "big") + int.from_bytes(
                data[pos + 23 : pos + 27], "big"
            )
            if last >= offset:
                data[pos + 17] ^= 0xFF
                log.write_bytes(bytes(data))
                return
            pos += 12 + size
    raise AssertionError(f"{name}: no batch ends at or above {offset}")


def logs_of(root: Path, name: str) -> dict[str, bytes]:
    """A partition's segment files: the log, its indexes, its transaction index."""
    return {
        p.name: p.read_bytes()
        for p in sorted((root / name).glob("*"))
        if p.suffix in (".log", ".index", ".timeindex", ".txnindex")
    }


def snapshots_of(root: Path, name: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (root / name).glob("*.snapshot")}


def entries_of(snapshot: bytes) -> list[bytes]:
    """A snapshot's entries as they lie in the file (46 bytes each, after a 10-byte header)."""
    return [snapshot[i : i + ENTRY.size] for i in range(10, len(snapshot), ENTRY.size)]


def expired(entry: bytes, now_ms: int) -> bool:
    """A producer a broker drops when it loads a snapshot: no open transaction and its last batch
    older than `producer.id.expiration.ms` (a day by default)."""
    timestamp, txn_first_offset = (ENTRY.unpack(entry)[i] for i in (5, 7))
    return txn_first_offset < 0 and now_ms - timestamp >= PRODUCER_ID_EXPIRATION_MS


def test_kafka_truncates_as_cut_does_and_serves_the_cut_log(
    kafka_jars: Path, sample_dir: Path, tmp_path: Path
) -> None:
    until = open_transaction_cut(sample_dir)
    out = tmp_path / "cut"
    proc = run_segpipe(
        "cut",
        str(sample_dir),
        str(out),
        "--until-offset",
        str(until),
        "--topic",
        "orders",
        "--topic",
        "clicks",
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    report = {
        p["partition"]: p for p in json.loads((out / META_DIR / "report.json").read_text())["partitions"]
    }
    assert report["orders-0"]["open_transactions"], "the cut leaves a transaction open"
    broker = Broker(tmp_path / "kafka", settings=AS_PLACED)
    try:
        broker.start()
        create_topics(broker, ALL_TOPICS)
        broker.stop()
        # Kafka's own truncation: the samples, a corrupt batch at the cut, an unclean restart.
        restored = run_segpipe(
            "restore-kafka", str(sample_dir), str(broker.log_dir), "--backup", str(tmp_path / "backup-1")
        )
        assert restored.returncode == ExitCode.OK, restored.stderr
        for name in NAMES:
            corrupt_from(broker.log_dir, name, until)
        (broker.log_dir / CLEAN_SHUTDOWN).unlink(missing_ok=True)
        checkpoint = broker.log_dir / RECOVERY_CHECKPOINT
        lines = checkpoint.read_text().splitlines()
        kept = [line for line in lines[2:] if f"{line.split()[0]}-{line.split()[1]}" not in NAMES]
        checkpoint.write_text("\n".join([lines[0], str(len(kept)), *kept]) + "\n")  # recover ours from 0
        wall_clock_ms = time.time_ns() // 1_000_000  # the broker's clock (a lower bound of it)
        broker.start()
        assert all(broker.log_lines(f"partition={name},") for name in NAMES)
        broker.stop()
        for name in NAMES:
            assert logs_of(broker.log_dir, name) == logs_of(out, name), name
            # Kafka's recovery from offset 0 also snapshots every segment it replays; the cut's
            # snapshot is among its. Its recovery loads each segment's snapshot at the broker's own
            # clock, dropping the samples' producers (years old) that the last segment does not
            # renew; the cut keeps every producer (a broker loading it drops them the same way).
            # The rest is the same, entry for entry, in the same order: the order of Kafka's map.
            ours, theirs = snapshots_of(out, name), snapshots_of(broker.log_dir, name)
            assert ours and set(ours) <= set(theirs), name
            for file, data in ours.items():
                kept = entries_of(theirs[file])
                assert [e for e in entries_of(data) if e in kept] == kept, (name, file)
                assert all(expired(e, wall_clock_ms) for e in entries_of(data) if e not in kept), name
        # The cut log restored: loaded as it is, served as the cut left it.
        restored = run_segpipe(
            "restore-kafka", str(out), str(broker.log_dir), "--backup", str(tmp_path / "backup-2")
        )
        assert restored.returncode == ExitCode.OK, restored.stderr
        seen = len(broker.server_log.read_text(errors="replace").splitlines())
        broker.start()
        lines = broker.server_log.read_text(errors="replace").splitlines()[seen:]
        ours = [line for line in lines if any(f"partition={name}," in line for name in NAMES)]
        # The message, not the directory's name; loading our producer snapshot is routine ("Producer
        # state recovery took ..."), recovering a segment or truncating is not.
        said = [line.rsplit("] ", 1)[-1].lower() for line in ours]
        problems = ("recovering", "truncat", "corrupt", "invalid")
        assert [line for line in said if any(w in line for w in problems)] == []
        starts, ends = offsets(broker, NAMES)
        rows = dumped(out)
        for name in NAMES:
            end = report[name]["log_end_offset"]
            assert (starts[name], ends[name]) == (0, end), name
            topic, _, number = name.rpartition("-")
            got = consumed(broker, topic, int(number), "read_uncommitted", end)
            assert got == expected(rows.get(name, []), set()), name
            stable = min([t["first_offset"] for t in report[name]["open_transactions"]], default=end)
            below = [r for r in rows.get(name, []) if r["offset"] < stable]
            got = consumed(broker, topic, int(number), "read_committed", stable)
            assert got == expected(below, aborted(rows.get(name, []))), name
    finally:
        broker.kill()
