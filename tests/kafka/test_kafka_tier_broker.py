"""Kafka's own tiered storage, written by Kafka's own broker: a broker with remote storage on
(Kafka's TopicBasedRemoteLogMetadataManager, and Kafka's LocalTieredStorage as the plugin) tiers
a topic of several partitions written in every codec by idempotent and transactional producers
(commits and aborts, headers), is restarted mid-way (a new leader epoch) and expires its oldest
remote segments by retention (their DELETE records must hide them). With the broker stopped,
segpipe reads its log directory with the broker's own server.properties and prints exactly what
a consumer read through the broker, both isolation levels; restored to a plain log directory and
put into a fresh broker (no tiering), that broker serves the same. With the metadata topic's
partitions deleted, the topic rebuilt from the bucket alone (--from-bucket) is the same, file for
file, and it is what the fresh broker serves."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from segment_io.exit_codes import ExitCode
from tests.helpers import dumped, run_segpipe
from tests.kafka.broker import TIERED_POM, Broker
from tests.kafka.test_restore import aborted, consumed, expected, offsets

pytestmark = pytest.mark.kafka
TOPIC, PARTITIONS = "tiered", 3
NAMES = [f"{TOPIC}-{p}" for p in range(PARTITIONS)]
DAY_MS = 86_400_000
WAIT_S = 120  # each bounded wait below: the remote log manager works every 500 ms


def tiered_broker(home: Path) -> Broker:
    return Broker(
        home,
        pom=TIERED_POM,
        settings={
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
            "remote.log.metadata.manager.listener.name": "PLAINTEXT",
            "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
            "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
            "rsm.config.dir": str(home / "remote"),
            "remote.log.manager.task.interval.ms": "500",
            "log.retention.check.interval.ms": "500",
            "log.segment.delete.delay.ms": "0",
        },
    )


def create_tiered_topic(broker: Broker) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    configs = {
        "remote.storage.enable": "true",
        "internal.segment.bytes": "16384",
        "local.retention.bytes": "1",
        "file.delete.delay.ms": "0",
        "retention.ms": "-1",
    }
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, topic_configs=configs)])
    finally:
        admin.close()


def produce(
    broker: Broker,
    label: str,
    *,
    codec: str | None = None,
    timestamp_ms: int | None = None,
    transactions: tuple[bool, ...] = (),
    count: int = 240,
) -> None:
    """`count` records per partition (keyed, valued, some with headers); with `transactions`, one
    transaction per entry, committed (True) or aborted (False)."""
    from kafka import KafkaProducer

    txn = {"transactional_id": f"segpipe-{label}"} if transactions else {}
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        enable_idempotence=True,
        acks="all",
        compression_type=codec,
        linger_ms=5,
        **txn,
    )
    try:
        rounds = transactions or (None,)
        if transactions:
            producer.init_transactions()
        for r, commit in enumerate(rounds):
            if transactions:
                producer.begin_transaction()
            for i in range(count):
                headers = [("trace", f"{label}-{i}".encode())] if i % 3 == 0 else []
                value = None if i % 50 == 49 else (f"{label}-{r}-{i}-" * 6).encode()
                producer.send(
                    TOPIC,
                    key=f"{label}-{i % 97}".encode(),
                    value=value,
                    partition=i % PARTITIONS,
                    headers=headers,
                    timestamp_ms=timestamp_ms,
                )
            if transactions:
                producer.commit_transaction() if commit else producer.abort_transaction()
        producer.flush()
    finally:
        producer.close()


def wait_until(check: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"the broker did not {what} in {WAIT_S} s"
        time.sleep(0.25)  # bounded by the deadline


# What Kafka's remote log metadata manager logs once it has replayed the metadata topic for every
# partition this broker leads. Before that line a fetch of a remote offset fails (the client gets an
# unknown server error, not a retriable one), so a restarted tiered broker is ready only after it.
METADATA_REPLAYED = "Initialized for all the"


def restart(broker: Broker) -> None:
    """Stop a tiered broker cleanly, start it, and wait until it serves its remote tier again."""
    seen = len(broker.log_lines(METADATA_REPLAYED))  # the log is appended to across starts
    broker.stop()
    broker.start()
    wait_until(lambda: len(broker.log_lines(METADATA_REPLAYED)) > seen, "replay its remote log metadata")


def only_active_local(broker: Broker) -> bool:
    """Every partition holds one local segment: all the others were tiered and released."""
    return all(len(list((broker.log_dir / name).glob("*.log"))) == 1 for name in NAMES)


def read_all(broker: Broker) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    starts, ends = offsets(broker, NAMES)
    assert all(ends[n] > starts[n] for n in NAMES)
    uncommitted = {
        n: consumed(broker, TOPIC, int(n.rsplit("-", 1)[1]), "read_uncommitted", ends[n]) for n in NAMES
    }
    committed = {
        n: consumed(broker, TOPIC, int(n.rsplit("-", 1)[1]), "read_committed", ends[n]) for n in NAMES
    }
    return uncommitted, committed


def test_segpipe_reads_a_tier_kafka_wrote_as_the_broker_serves_it(
    kafka_tiered_jars: Path, kafka_jars: Path, tmp_path: Path
) -> None:
    broker = tiered_broker(tmp_path / "kafka")
    try:
        broker.start()
        create_tiered_topic(broker)
        old = int(time.time() * 1000) - 3 * DAY_MS  # to be expired by retention below
        produce(broker, "old", timestamp_ms=old, count=1500)  # several whole segments per partition
        for codec in ("gzip", "snappy", "lz4", "zstd"):
            produce(broker, codec, codec=codec)
        produce(broker, "txn", codec="zstd", transactions=(True, False, True))
        wait_until(lambda: only_active_local(broker), "tier every inactive segment")
        restart(broker)  # a new leader epoch for every partition
        produce(broker, "after", codec="lz4", count=600)
        produce(broker, "txn2", transactions=(False, True))
        wait_until(lambda: only_active_local(broker), "tier the new segments")
        from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"retention.ms": str(DAY_MS)})]
            )
        finally:
            admin.close()
        wait_until(
            lambda: all(v > 0 for v in offsets(broker, NAMES)[0].values()), "expire the old remote segments"
        )
        uncommitted, committed = read_all(broker)
        server = str(broker.home / "server.properties")
        # The remote log metadata read from the live cluster (a consumer), the segments from the bucket.
        live = dumped(
            broker.log_dir, "--kafka-tier", server, "--bootstrap-server", broker.bootstrap, "--topic", TOPIC
        )
        broker.stop()

        rows = dumped(broker.log_dir, "--kafka-tier", server, "--topic", TOPIC)
        assert live == rows
        # Each partition's records are in the metadata partition Kafka's partitioner picks.
        from segment_io.kafka_tier.metadata_log import metadata_partitions, read_metadata_partition
        from segment_io.kafka_tier.metadata_partition import metadata_partition
        from segment_io.storage import LocalStorage

        placed = 0
        for number, path in enumerate(metadata_partitions(LocalStorage(), str(broker.log_dir))):
            for record in read_metadata_partition(LocalStorage(), path):
                assert metadata_partition(record.tp, 3) == number, record
                placed += 1
        assert placed > 2 * len(NAMES)
        epochs = set()
        for name in NAMES:
            assert expected(rows[name], set()) == uncommitted[name], name
            assert expected(rows[name], aborted(rows[name])) == committed[name], name
            epochs |= {r["partition_leader_epoch"] for r in rows[name]}
        assert len(epochs) == 2  # records of both leader epochs (before and after the restart)
        # Most records came from the remote tier: the log directory alone holds fewer.
        local = dumped(broker.log_dir, "--topic", TOPIC)
        assert all(len(local.get(name, [])) < len(rows[name]) for name in NAMES)

        # The whole topic rebuilt from the tier: a plain log directory a fresh broker serves.
        restored = tmp_path / "restored"
        proc = run_segpipe("restore", str(broker.log_dir), str(restored), "--kafka-tier", server)
        assert proc.returncode == ExitCode.OK, proc.stderr
        # The metadata topic lost: the same topic rebuilt from the bucket alone, file for file.
        lost = Path(shutil.copytree(broker.log_dir, tmp_path / "lost"))
        for metadata in lost.glob("__remote_log_metadata-*"):
            shutil.rmtree(metadata)
        rebuilt = tmp_path / "rebuilt"
        proc = run_segpipe("restore", str(lost), str(rebuilt), "--kafka-tier", server, "--from-bucket")
        assert proc.returncode == ExitCode.OK, proc.stderr
        for name in NAMES:
            files = sorted(p.name for p in (restored / name).iterdir())
            assert files == sorted(p.name for p in (rebuilt / name).iterdir()), name
            for file in files:
                assert (restored / name / file).read_bytes() == (rebuilt / name / file).read_bytes(), file
        for internal in rebuilt.glob("__*"):  # the fresh broker keeps its own internal topics
            shutil.rmtree(internal)
        fresh = Broker(tmp_path / "fresh")
        fresh.start()
        from tests.kafka.test_restore import create_topics

        create_topics(fresh, {TOPIC: PARTITIONS})
        fresh.stop()
        proc = run_segpipe(  # the one rebuilt from the bucket: a fresh broker serves it as the first served
            "restore-kafka", str(rebuilt), str(fresh.log_dir), "--backup", str(tmp_path / "bk")
        )
        assert proc.returncode == ExitCode.OK, proc.stderr
        fresh.start()
        try:
            assert read_all(fresh) == (uncommitted, committed)
        finally:
            fresh.kill()
    finally:
        broker.kill()
