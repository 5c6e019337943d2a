"""erase --in-place on Kafka's own tiered storage while the broker serves it: Kafka's broker
(LocalTieredStorage, the remote log metadata topic) tiers a topic of three partitions (every codec,
transactions with an abort); consumers read the whole topic from offset 0 in a loop, in both
isolation levels, while segpipe swaps the remote segments holding listed keys. Every pass must
succeed and receive every record it did before except the erased ones; afterwards no consumer
receives a listed key from the remote tier, before and after a broker restart; the replaced
objects are gone. A run killed at each step of a swap leaves every offset readable, and the next
run finishes the job."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from segment_io.exit_codes import ExitCode
from segment_io.layout import META_DIR
from tests.helpers import run_segpipe
from tests.kafka.broker import Broker
from tests.kafka.test_kafka_tier_broker import (
    NAMES,
    PARTITIONS,
    TOPIC,
    create_tiered_topic,
    only_active_local,
    produce,
    restart,
    tiered_broker,
    wait_until,
)
from tests.kafka.test_restore import offsets

pytestmark = pytest.mark.kafka
ISOLATIONS = ("read_uncommitted", "read_committed")
PASS_TIMEOUT_S = 60
GRACE_MS = "2000"
SECRET = b"the operator's erasure secret for these tests"

Record = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes], ...]]  # offset, key, value, headers


@pytest.fixture(scope="module")
def broker(kafka_tiered_jars: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A tiered topic whose inactive segments are all remote, and a tail still local."""
    b = tiered_broker(tmp_path_factory.mktemp("kafka-erase"))
    try:
        b.start()
        create_tiered_topic(b)
        produce(b, "plain", count=2400)
        for codec in ("gzip", "snappy", "lz4", "zstd"):
            produce(b, codec, codec=codec)
        produce(b, "txn", codec="zstd", transactions=(True, False, True))
        wait_until(lambda: only_active_local(b), "tier every inactive segment")
        produce(b, "tail", count=30)  # stays in the active segments: local only
        yield b
    finally:
        b.kill()


def read_pass(broker: Broker, isolation: str, start: dict[int, int] | None = None) -> dict[int, list[Record]]:
    """Every partition read from offset 0 (or `start`'s) to its end, as one consumer receives it;
    a fetch that fails raises (no offset reset hides a gap)."""
    from kafka import KafkaConsumer, TopicPartition

    _, ends = offsets(broker, NAMES)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        isolation_level=isolation,
        enable_auto_commit=False,
        auto_offset_reset="none",
        request_timeout_ms=30_000,
    )
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    for tp in tps:
        consumer.seek(tp, (start or {}).get(tp.partition, 0))
    got: dict[int, list[Record]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + PASS_TIMEOUT_S
    try:
        while any(consumer.position(tp) < ends[f"{TOPIC}-{tp.partition}"] for tp in tps):
            assert time.monotonic() < deadline, f"a pass did not reach the end in {PASS_TIMEOUT_S} s"
            for tp, messages in consumer.poll(timeout_ms=1000).items():
                got[tp.partition] += [(m.offset, m.key, m.value, tuple(m.headers)) for m in messages]
    finally:
        consumer.close()
    return got


@dataclass
class Readers:
    """Consumers reading the whole topic in a loop, both isolation levels in turn, until stopped."""

    broker: Broker
    passes: list[tuple[str, dict[int, list[Record]]]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        turn = 0
        while not self.stop.is_set():
            isolation = ISOLATIONS[turn % 2]
            turn += 1
            try:
                self.passes.append((isolation, read_pass(self.broker, isolation)))
            except Exception as exc:  # every failed fetch counts, whatever the client raises
                self.errors.append(f"{isolation}: {exc!r}")


@contextmanager
def read_throughout(broker: Broker) -> Iterator[Readers]:
    """Consumers reading the whole topic in a loop while the block runs (stopped at its end,
    boundedly): their passes and fetch errors."""
    readers = Readers(broker)
    thread = threading.Thread(target=readers.run, daemon=True)
    thread.start()
    try:
        yield readers
    finally:
        readers.stop.set()
        thread.join(timeout=2 * PASS_TIMEOUT_S)


def check_pass(got: dict[int, list[Record]], before: dict[int, list[Record]], listed: set[bytes]) -> None:
    """A pass received only records it received before, in offset order, and every one of them
    that carries no listed key."""
    for p, records in got.items():
        known = {r[0]: r for r in before[p]}
        offsets_got = [r[0] for r in records]
        assert offsets_got == sorted(set(offsets_got)), f"partition {p}: offsets repeated or out of order"
        for r in records:
            assert known.get(r[0]) == r, f"partition {p}: offset {r[0]} is not what it was"
        missing = [r[0] for r in before[p] if r[1] not in listed and r[0] not in set(offsets_got)]
        assert not missing, f"partition {p}: records without a listed key are missing: {missing[:5]}"


def leader_epoch(broker: Broker, topic_id: str) -> int:
    """Partition 0's leader epoch, as the run's check reads it."""
    from pipelines.kafka_tier.cluster import LiveCluster
    from segment_io.kafka_tier.metadata import TopicIdPartition

    cluster = LiveCluster(broker.bootstrap)
    try:
        epoch = cluster.leader_epoch(TopicIdPartition(TOPIC, topic_id, 0))
    finally:
        cluster.close()
    assert isinstance(epoch, int)
    return epoch


def erase(broker: Broker, keys: Path, *args: str, fault: str | None = None) -> Any:
    return run_segpipe(
        "erase",
        str(broker.log_dir),
        "--kafka-tier",
        str(broker.home / "server.properties"),
        "--bootstrap-server",
        broker.bootstrap,
        "--in-place",
        "--keys",
        str(keys),
        "--grace-ms",
        GRACE_MS,
        *args,
        fault=fault,
    )


def remote_files(broker: Broker) -> set[str]:
    return {p.name for p in (broker.home / "remote").rglob("*") if p.is_file()}


def test_erase_swaps_remote_segments_while_consumers_read(broker: Broker, tmp_path: Path) -> None:
    before = {iso: read_pass(broker, iso) for iso in ISOLATIONS}
    listed = {b"gzip-5", b"plain-11", b"txn-7", b"zstd-40", b"tail-3"}
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(k.decode() + "\n" for k in sorted(listed)))
    files_before = remote_files(broker)
    dry = erase(broker, keys, "--dry-run", "--report", str(tmp_path / "dry.json"))
    assert dry.returncode == ExitCode.OK, dry.stderr
    would = json.loads((tmp_path / "dry.json").read_text())["kafka_tier"]["would_swap"]
    assert remote_files(broker) == files_before and read_pass(broker, ISOLATIONS[0]) == before[ISOLATIONS[0]]
    report_path = tmp_path / "report.json"
    with read_throughout(broker) as readers:
        proc = erase(broker, keys, "--report", str(report_path))
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert readers.errors == []
    assert len(readers.passes) >= 2
    for isolation, got in readers.passes:
        check_pass(got, before[isolation], listed)

    report = json.loads(report_path.read_text())
    swapped = report["kafka_tier"]["swapped"]
    assert len({s["partition"] for s in swapped}) == PARTITIONS  # several partitions
    # The tier's partitions only: not the broker's internal ones, which it never tiers.
    assert sorted(p["partition"] for p in report["partitions"]) == [f"{TOPIC}-{p}" for p in range(PARTITIONS)]
    assert f"listed keys from {PARTITIONS} partitions;" in proc.stdout
    assert len(swapped) > PARTITIONS  # several segments in some
    assert report["kafka_tier"]["left_as_they_were"] == [] and report["kafka_tier"]["proof_failed"] == []
    assert report["kafka_tier"]["proved"] == len(swapped)
    assert sorted(s["replaced"] for s in swapped) == sorted(
        s["replaced"] for s in would
    )  # the dry run named them
    # Listed records in local segments (the active ones: "tail-3", and the last records of the
    # other keys there) are named with their offsets, and not touched.
    local: dict[int, list[tuple[int, int]]] = {}
    for t in report["kafka_tier"]["not_yet_tiered"]:
        local.setdefault(int(t["partition"].rsplit("-", 1)[1]), []).append(
            (t["first_offset"], t["last_offset"])
        )
    tail = [r[0] for r in before["read_uncommitted"][0] if r[1] == b"tail-3"]
    assert tail and all(any(a <= o <= b for a, b in local[0]) for o in tail)

    def kept(p: int, r: Record) -> bool:
        return r[1] not in listed or any(a <= r[0] <= b for a, b in local.get(p, ()))

    # Reads that start anywhere: at a swapped segment's first offset, and at an erased record's.
    starts = [{int(s["partition"].rsplit("-", 1)[1]): s["start_offset"]} for s in swapped[:3]]
    for p in range(PARTITIONS):
        erased = [r[0] for r in before["read_uncommitted"][p] if not kept(p, r)]
        starts.append({p: erased[len(erased) // 2]})

    def after_ok(b: Broker) -> None:
        for isolation in ISOLATIONS:
            for start in [{}, *starts]:
                got = read_pass(b, isolation, start)
                for p, records in got.items():
                    want = [r for r in before[isolation][p] if kept(p, r) and r[0] >= start.get(p, 0)]
                    assert records == want, f"partition {p} from {start.get(p, 0)}"

    after_ok(broker)
    assert broker.errors() == []
    # The replaced segments' objects are gone; their successors are there.
    files_after = remote_files(broker)
    for s in swapped:
        assert not any(s["replaced"] in name for name in files_after)
        assert any(s["by"] in name for name in files_after)
    assert len(files_after - files_before) == len(
        [n for n in files_after if any(s["by"] in n for s in swapped)]
    )
    epoch = leader_epoch(broker, swapped[0]["topic_id"])
    restart(broker)  # the metadata replayed from the topic
    after_ok(broker)
    assert leader_epoch(broker, swapped[0]["topic_id"]) > epoch  # what a swap checks did move


def served_ids(broker: Broker) -> set[str]:
    from segment_io.kafka_tier.metadata_cache import MetadataReplay
    from segment_io.kafka_tier.metadata_live import read_metadata_live

    replay = MetadataReplay.of(read_metadata_live(broker.bootstrap))
    return {s.segment_id for state in replay.partitions.values() for s in state.segments.values()}


@pytest.mark.parametrize(
    "fault",
    [
        "kafka-tier-copy-started",
        "kafka-tier-uploaded",
        "kafka-tier-copy-finished",
        "kafka-tier-delete-started",
    ],
)
def test_a_run_killed_at_any_step_leaves_every_offset_readable(
    broker: Broker, tmp_path: Path, fault: str
) -> None:
    before = {iso: read_pass(broker, iso) for iso in ISOLATIONS}
    number = 20 + ["copy-started", "uploaded", "copy-finished", "delete-started"].index(
        fault.removeprefix("kafka-tier-")
    )
    listed = {f"plain-{number}".encode(), f"gzip-{number}".encode()}
    keys = tmp_path / "keys.txt"
    keys.write_text("".join(k.decode() + "\n" for k in sorted(listed)))
    secret = tmp_path / "erasure.secret"
    secret.write_bytes(SECRET)
    killed = erase(broker, keys, "--secret-file", str(secret), fault=fault)
    assert killed.returncode != ExitCode.OK
    journal = broker.home / "remote" / META_DIR / "kafka-tier-swaps"
    assert list(journal.glob("*.json"))  # killed mid-swap, as the fault point says
    for isolation in ISOLATIONS:  # every offset readable: the old segment or its successor
        check_pass(read_pass(broker, isolation), before[isolation], listed)
    report_path = tmp_path / "report.json"
    proc = erase(broker, keys, "--report", str(report_path), "--secret-file", str(secret))
    assert proc.returncode == ExitCode.OK, proc.stderr
    report = json.loads(report_path.read_text())
    assert report["kafka_tier"]["resumed"]  # the killed run's swaps finished or undone first
    local: dict[int, list[tuple[int, int]]] = {}
    for t in report["kafka_tier"]["not_yet_tiered"]:
        local.setdefault(int(t["partition"].rsplit("-", 1)[1]), []).append(
            (t["first_offset"], t["last_offset"])
        )
    for isolation in ISOLATIONS:
        got = read_pass(broker, isolation)
        for p, records in got.items():
            expected = [
                r
                for r in before[isolation][p]
                if r[1] not in listed or any(a <= r[0] <= b for a, b in local.get(p, ()))
            ]
            assert records == expected, f"partition {p}"
    # The evidence covers both runs: what the killed run's finished swaps removed is reported by the
    # run that finished them, per key (by digest), with what this run removed itself.
    gone: dict[str, int] = {}
    for p, records in before[ISOLATIONS[0]].items():
        for r in records:
            if r[1] in listed and not any(a <= r[0] <= b for a, b in local.get(p, ())):
                digest = hmac.new(SECRET, r[1], hashlib.sha256).hexdigest()
                gone[digest] = gone.get(digest, 0) + 1
    assert {e["digest"]: e["records"] for e in report["erased"]} == gone
    assert report["records_erased"] == sum(gone.values()) and report["not_found_count"] == 0
    spanned = fault in ("kafka-tier-copy-finished", "kafka-tier-delete-started")  # successors served
    assert bool(report["kafka_tier"].get("earlier_runs")) == spanned, report["kafka_tier"]
    assert ("the work spanned two runs" in proc.stdout) == spanned
    # Nothing of either run is left behind: no journal, no staging, no object of a segment the
    # metadata does not name.
    remote = broker.home / "remote"
    assert [p for p in (remote / META_DIR).rglob("*") if p.is_file()] == []
    names = served_ids(broker)
    for path in (remote / "kafka-tiered-storage").rglob("*"):
        if path.is_file():
            assert path.name.split(".")[0].split("-", 1)[1] in names, path


def test_a_swap_size_based_retention_would_count_twice_is_refused(broker: Broker, tmp_path: Path) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    from segment_io.kafka_tier.url import kafka_tier_url
    from segment_io.layout import list_log_dir
    from segment_io.storage import open_storage

    server = str(broker.home / "server.properties")
    view, root = open_storage(kafka_tier_url(server, str(broker.log_dir), bootstrap=broker.bootstrap))
    sizes = {str(p.tp): p.size for p in list_log_dir(view, root).partitions if p.tp.topic == TOPIC}
    largest = max(sizes, key=lambda n: sizes[n])
    # Within the limit as the log stands (the leader expires nothing), not with a segment counted twice.
    limit = sizes[largest] + 64

    def set_retention(value: str) -> None:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, TOPIC, configs={"retention.bytes": value})]
            )
        finally:
            admin.close()

    before = read_pass(broker, ISOLATIONS[0])
    files = remote_files(broker)
    keys = tmp_path / "keys.txt"
    keys.write_text("plain-60\nplain-61\nplain-62\n")  # in every partition
    set_retention(str(limit))
    try:
        proc = erase(broker, keys, "--report", str(tmp_path / "report.json"))
    finally:
        set_retention("-1")
    assert proc.returncode == ExitCode.SKIPPED, proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())["kafka_tier"]
    left = {x["partition"]: x["reason"] for x in report["left_as_they_were"]}
    assert largest in left and "retention.bytes" in left[largest], proc.stderr
    assert f"left as it was: {largest}" in proc.stdout + proc.stderr
    number = int(largest.rsplit("-", 1)[1])
    assert read_pass(broker, ISOLATIONS[0])[number] == before[number]  # that partition as it was
    assert not any(s["partition"] == largest for s in report["swapped"])
    assert {f for f in files if f"{TOPIC}-{number}-" in f} <= remote_files(broker)
