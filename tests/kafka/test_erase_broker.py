"""An erased log restored into Kafka's own broker: it loads without recovering, truncating or finding
anything corrupt, its partitions start and end where the source's did, and consumers in both
isolation levels receive exactly the source's records without the listed keys'. On the same
restored log, `inspect --at` gives the offsets the broker's own ListOffsets gives for a time."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from segment_io.exit_codes import ExitCode
from tests.helpers import dumped, run_segpipe
from tests.kafka.broker import AS_PLACED, Broker
from tests.kafka.test_restore import (
    aborted,
    consumed,
    create_topics,
    expected,
    first_open,
    offsets,
    recovered,
)

pytestmark = pytest.mark.kafka
KEYS = [b"k0000000001", b"k0000000002", b"k0000000009"]
TOPICS = {"orders": 2, "clicks": 1}


def test_kafka_serves_a_restored_erased_log(kafka_jars: Path, sample_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "keys.txt").write_bytes(b"".join(k + b"\n" for k in KEYS))
    out = tmp_path / "out"
    flags = ["--topic", "orders", "--topic", "clicks"]
    proc = run_segpipe(
        "erase", str(sample_dir), str(out), "--keys", str(tmp_path / "keys.txt"), *flags, "--validate"
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    source = dumped(sample_dir)
    names = sorted(f"{t}-{p}" for t, n in TOPICS.items() for p in range(n))
    listed = {base64.b64encode(k).decode() for k in KEYS}
    broker = Broker(tmp_path / "kafka", settings=AS_PLACED)
    try:
        broker.start()
        create_topics(broker, TOPICS)
        broker.stop()
        restored = run_segpipe(
            "restore-kafka", str(out), str(broker.log_dir), "--backup", str(tmp_path / "backup")
        )
        assert restored.returncode == ExitCode.OK, restored.stderr
        broker.start()
        ours = broker.log_lines(*(f"partition={name}," for name in names))
        assert recovered(ours) == []
        assert broker.errors() == []
        starts, ends = offsets(broker, names)
        for name in names:
            rows = source[name]
            topic, _, number = name.rpartition("-")
            end = max(r["batch_last_offset"] for r in rows) + 1
            assert (starts[name], ends[name]) == (0, end), name  # the log end survives the erase
            kept = [r for r in rows if r["is_control"] or r["key"] not in listed]
            assert len(kept) < len(rows)
            # A transaction the log leaves open is open to the broker too (the snapshot at the log
            # end says so): read_committed stops at its first offset, the last stable offset.
            held = first_open(rows)
            stable = end if held is None else held
            below = [r for r in kept if r["offset"] < stable]
            for isolation, skip, until, want in (
                ("read_uncommitted", set(), end, kept),
                ("read_committed", aborted(rows), stable, below),
            ):
                got = consumed(broker, topic, int(number), isolation, until)
                assert got == expected(want, skip), (name, isolation)
        times = sorted(r["timestamp"] for rows in source.values() for r in rows)
        for at in (
            times[0] - 1,
            times[len(times) // 3],
            times[len(times) // 2] + 1,
            times[-1],
            times[-1] + 1,
        ):
            assert listed_offsets(out, at) == broker_offsets(broker, names, at), at
    finally:
        broker.kill()


def listed_offsets(out: Path, at: int) -> dict[str, int | None]:
    proc = run_segpipe("inspect", str(out), "--at", str(at), "--json")
    assert proc.returncode == ExitCode.OK, proc.stderr
    return {f"{p['topic']}-{p['partition']}": p["offset"] for p in json.loads(proc.stdout)["partitions"]}


def broker_offsets(broker: Broker, names: list[str], at: int) -> dict[str, int | None]:
    """What the broker's ListOffsets answers for `at`, per partition (None: no record that new)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tps = {name: TopicPartition(name.rpartition("-")[0], int(name.rpartition("-")[2])) for name in names}
        answers = consumer.offsets_for_times({tp: at for tp in tps.values()})
    finally:
        consumer.close()
    return {name: None if answers[tp] is None else answers[tp].offset for name, tp in tps.items()}
