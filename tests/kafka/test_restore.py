"""segpipe's output restored into Kafka's own broker: it starts without recovering, truncating or
finding anything corrupt, its partitions start and end where segpipe's report says, and consumers
(read_uncommitted and read_committed) receive exactly the records `segpipe dump` prints."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from segment_io.exit_codes import ExitCode
from segment_io.layout import META_DIR
from tests.helpers import dumped, run_segpipe
from tests.kafka.broker import AS_PLACED, Broker

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]
NOW_MS = 1_700_700_000_000
# Kafka refuses segment.bytes below 1 MiB on a topic; segpipe's samples roll smaller segments,
# which a restored log keeps (the setting only decides where the broker rolls next).
NOT_ON_A_TOPIC = {"segment.bytes"}


def topic_configs(topic: str) -> dict[str, str]:
    """The samples' configs of `topic` that are Kafka's (segpipe.* stay with segpipe)."""
    conf = yaml.safe_load((ROOT / "conf" / "samples.yaml").read_text())
    merged = {**conf.get("defaults", {}), **conf.get("topics", {}).get(topic, {})}
    return {k: str(v) for k, v in merged.items() if not k.startswith("segpipe.") and k not in NOT_ON_A_TOPIC}


def create_topics(broker: Broker, topics: dict[str, int]) -> None:
    """The samples' topics (name -> partitions) on the running `broker`, with their Kafka configs,
    once the broker has made every partition directory (a bounded wait)."""
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    admin.create_topics(
        [NewTopic(t, n, 1, topic_configs=topic_configs(t)) for t, n in sorted(topics.items())]
    )
    admin.close()
    names = [f"{t}-{p}" for t, n in topics.items() for p in range(n)]
    deadline = time.monotonic() + 60
    while not all((broker.log_dir / name / "partition.metadata").exists() for name in names):
        assert time.monotonic() < deadline, "the broker did not create the partitions"
        time.sleep(0.1)  # bounded: until the broker made every partition directory


def aborted(rows: list[dict[str, Any]]) -> set[int]:
    """Offsets of records whose transaction aborted: a producer's transactional records up to its
    next control record, when that is an ABORT (control key: version, then type 0 = abort)."""
    out: set[int] = set()
    open_txn: dict[int, list[int]] = {}
    for r in rows:
        if not r["is_transactional"]:
            continue
        if r["is_control"]:
            kind = int.from_bytes(base64.b64decode(r["key"])[2:4], "big")
            pending = open_txn.pop(r["producer_id"], [])
            if kind == 0:
                out.update(pending)
        else:
            open_txn.setdefault(r["producer_id"], []).append(r["offset"])
    return out


def recovered(lines: list[str]) -> list[str]:
    """The broker's lines that say it recovered, truncated or found corrupt or invalid a log it
    loaded (not the time its producer state took to load, which names a "segment recovery" of
    nothing after a snapshot)."""
    return [
        line
        for line in lines
        if any(w in line.lower() for w in ("recover", "truncat", "corrupt", "invalid"))
        and "Producer state recovery took" not in line
    ]


def first_open(rows: list[dict[str, Any]]) -> int | None:
    """The first offset of the earliest transaction the log leaves open: a producer's
    transactional records after its last control record."""
    open_txn: dict[int, int] = {}
    for r in rows:
        if not r["is_transactional"]:
            continue
        if r["is_control"]:
            open_txn.pop(r["producer_id"], None)
        else:
            open_txn.setdefault(r["producer_id"], r["offset"])
    return min(open_txn.values(), default=None)


def consumed(broker: Broker, topic: str, partition: int, isolation: str, end: int) -> list[dict[str, Any]]:
    """Every record of one partition as a kafka-python consumer receives it (bounded)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        isolation_level=isolation,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    try:
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                got += [
                    {
                        "offset": m.offset,
                        "timestamp": m.timestamp,
                        "key": m.key,
                        "value": m.value,
                        "headers": [(k, v) for k, v in m.headers],
                    }
                    for m in records
                ]
    finally:
        consumer.close()
    return got


def offsets(broker: Broker, names: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Each partition's log start and end offsets, as the broker answers a consumer."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tps = {name: TopicPartition(name.rpartition("-")[0], int(name.rpartition("-")[2])) for name in names}
        first, last = consumer.beginning_offsets(list(tps.values())), consumer.end_offsets(list(tps.values()))
        return {n: first[tp] for n, tp in tps.items()}, {n: last[tp] for n, tp in tps.items()}
    finally:
        consumer.close()


def expected(rows: list[dict[str, Any]], skip: set[int]) -> list[dict[str, Any]]:
    def raw(b64: str | None) -> bytes | None:
        return None if b64 is None else base64.b64decode(b64)

    return [
        {
            "offset": r["offset"],
            "timestamp": r["timestamp"],
            "key": raw(r["key"]),
            "value": raw(r["value"]),
            "headers": [(h["key"], raw(h["value"])) for h in r["headers"]],
        }
        for r in rows
        if not r["is_control"] and r["offset"] not in skip
    ]


def test_kafka_serves_a_restored_clean_output(kafka_jars: Path, sample_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_segpipe(
        "clean", str(sample_dir), str(out), "--config", "conf/samples.yaml", "--now-ms", str(NOW_MS)
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    report = json.loads((out / META_DIR / "report.json").read_text())
    partitions = {p["partition"]: p for p in report["partitions"]}
    topics: dict[str, int] = {}
    for name in partitions:
        topic, _, number = name.rpartition("-")
        topics[topic] = max(topics.get(topic, 0), int(number) + 1)

    broker = Broker(tmp_path / "kafka", settings=AS_PLACED)
    try:
        broker.start()
        create_topics(broker, topics)
        backup = tmp_path / "backup"
        refused = run_segpipe("restore-kafka", str(out), str(broker.log_dir), "--backup", str(backup))
        assert refused.returncode == ExitCode.REFUSED and "is running" in refused.stderr, refused.stderr
        broker.stop()
        restored = run_segpipe("restore-kafka", str(out), str(broker.log_dir), "--backup", str(backup))
        assert restored.returncode == ExitCode.OK, restored.stderr
        assert sorted(p.name for p in backup.iterdir() if p.is_dir()) == sorted(partitions)
        broker.start()
        # Loaded as a cleanly stopped log: nothing recovered, truncated or found corrupt (the
        # broker's own metadata log is recovered at every start; it is not ours).
        ours = [line for line in broker.log_lines(*(f"partition={name}," for name in partitions))]
        assert recovered(ours) == []
        assert broker.errors() == []
        assert any("Loading producer state till offset" in line for line in ours)  # the log was read
        # Each partition's producers loaded from the snapshot the output ends with: no segment replayed.
        for name in partitions:
            end = {p["partition"]: p for p in report["plan"]}[name]["log_end_offset"]
            said = f"partition={name},"
            assert any(
                said in line and f"rebuilding producer state from offset {end} " in line for line in ours
            ), name
        rows = dumped(out)
        assert first_open(rows["orders-0"]) is not None  # the samples leave a transaction open there
        plan = {p["partition"]: p for p in report["plan"]}
        starts, ends = offsets(broker, sorted(partitions))
        for name, metrics in sorted(partitions.items()):
            topic, _, number = name.rpartition("-")
            end = plan[name]["log_end_offset"]
            assert (starts[name], ends[name]) == (metrics["log_start_offset"], end), name
            # A transaction the log leaves open (no marker yet) is open to the broker too (the snapshot
            # says so): read_committed stops at its first offset, the last stable offset.
            held = first_open(rows.get(name, []))
            stable = end if held is None else held
            below = [r for r in rows.get(name, []) if r["offset"] < stable]
            for isolation, skip, until, kept in (
                ("read_uncommitted", set(), end, rows.get(name, [])),
                ("read_committed", aborted(rows.get(name, [])), stable, below),
            ):
                got = consumed(broker, topic, int(number), isolation, until)
                assert got == expected(kept, skip), (name, isolation)
    finally:
        broker.kill()
