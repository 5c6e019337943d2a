"""Kafka's own cleaner as the reference: records produced through Kafka's broker (the current
release; keys with updates and tombstones, several producers, idempotent and transactional,
committed and aborted transactions), a copy of the log taken before the cleaner runs, then Kafka's
cleaner run to completion on the original and `segpipe clean` on the copy with the same topic
configs and Kafka's clock (read back from the delete horizons it stamped). The surviving records
must be the same, field by field, in the same batches and segments, and every file (`.log`,
`.index`, `.timeindex`, `.txnindex`) byte for byte. One broker run serves every test: a topic per
set of topic configs with every codec mixed in it, and a topic per codec with only that codec (a
rewritten snappy batch compressed as snappy-java's snappy 1.1.10 compresses it)."""

from __future__ import annotations

import random
import shutil
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from segment_io.checkpoints import parse_offset_checkpoint
from segment_io.exit_codes import ExitCode
from tests.helpers import read_log, run_segpipe
from tests.kafka.broker import Broker

pytestmark = pytest.mark.kafka

# Kafka refuses segment.bytes below 1 MiB; its test-only topic config internal.segment.bytes
# takes its place (rolling and the cleaner's grouping both read it), and segpipe gets the same
# figure as segment.bytes.
SEGMENT_BYTES = 64 * 1024
DAY_MS = 86_400_000
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CONFIGS = {  # name -> the topic configs that vary (every topic: compact, dirty ratio 0)
    "ref-a": {"delete.retention.ms": "0", "min.compaction.lag.ms": "0"},
    "ref-b": {"delete.retention.ms": str(DAY_MS), "min.compaction.lag.ms": "0"},
    "ref-c": {"delete.retention.ms": str(DAY_MS), "min.compaction.lag.ms": str(DAY_MS)},
}
TOPICS = {**CONFIGS, **{f"codec-{c}": CONFIGS["ref-b"] for c in CODECS}}
CLEANED = [t for t, c in TOPICS.items() if c["min.compaction.lag.ms"] == "0"]  # Kafka cleans these now
COMMON = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0"}
LOG_FILES = ("log", "index", "timeindex", "txnindex")
SETTLE_S = 120.0


WORDS = b"order created shipped paid refund account warehouse sku pending updated status quantity".split()


def text(rng: random.Random, size: int) -> bytes:
    """Compressible bytes (words), so that every codec compresses (random bytes may be sent
    uncompressed)."""
    return b" ".join(rng.choice(WORDS) for _ in range(size // 6))


def compression(codec: str) -> str | None:
    return None if codec == "none" else codec


def produce(broker: Broker, topic: str, seed: int) -> None:
    """150 keys updated many times, tombstones, headers; five producers, plain and idempotent in
    turn, and a transactional one whose every third transaction aborts. A `codec-<c>` topic: about
    1 MB, every producer compressing with c; else about 3 MB, one producer per codec."""
    from kafka import KafkaProducer

    rng = random.Random(seed)
    only = topic.removeprefix("codec-") if topic.startswith("codec-") else None
    common = {"bootstrap_servers": broker.bootstrap, "linger_ms": 5}
    producers = [
        KafkaProducer(compression_type=compression(only or codec), enable_idempotence=i % 2 == 1, **common)
        for i, codec in enumerate(CODECS)
    ]
    txn = KafkaProducer(
        transactional_id=f"{topic}-txn", compression_type=compression(only or "zstd"), **common
    )
    txn.init_transactions()
    for round_ in range(10 if only else 30):
        for p in producers:
            for _ in range(20):
                key = f"k{rng.randrange(150):03d}".encode()
                value = None if rng.random() < 0.08 else text(rng, rng.randrange(200, 1200))
                p.send(topic, key=key, value=value, headers=[("round", str(round_).encode())])
            p.flush()
        txn.begin_transaction()
        for _ in range(10):
            txn.send(topic, key=f"k{rng.randrange(150):03d}".encode(), value=text(rng, 300))
        txn.flush()
        if round_ % 3 == 2:
            txn.abort_transaction()
        else:
            txn.commit_transaction()
    for p in [*producers, txn]:
        p.close()


def cleaner_checkpoint(log_dir: Path) -> dict[Any, int]:
    path = log_dir / "cleaner-offset-checkpoint"
    return parse_offset_checkpoint(path.read_bytes(), str(path)) if path.exists() else {}


def wait_for_the_cleaner(broker: Broker) -> dict[Any, int]:
    """Until the cleaner checkpoint names the topics Kafka cleans and has not moved for 3 s."""
    deadline, stable_since, last = time.monotonic() + SETTLE_S, time.monotonic(), None
    while True:
        now = cleaner_checkpoint(broker.log_dir)
        if now != last:
            last, stable_since = now, time.monotonic()
        cleaned = {tp.topic for tp in now}
        if set(CLEANED) <= cleaned and time.monotonic() - stable_since > 3:
            return now
        assert time.monotonic() < deadline, f"Kafka's cleaner did not settle: {now}"
        time.sleep(0.2)  # bounded by the deadline


def batch_view(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Each surviving record with its batch's fields."""
    return [
        (
            r["offset"],
            r["key"],
            r["value"],
            [(h["key"], h["value"]) for h in r["headers"]],
            r["timestamp"],
            r["timestamp_type"],
            r["batch_base_offset"],
            r["batch_last_offset"],
            r["magic"],
            r["codec"],
            r["is_transactional"],
            r["is_control"],
            r["producer_id"],
            r["producer_epoch"],
            r["base_sequence"],
            r["partition_leader_epoch"],
            r["delete_horizon_ms"],
        )
        for r in rows
    ]


def batches(path: Path) -> list[bytes]:
    data, out, at = path.read_bytes(), [], 0
    while at < len(data):
        (length,) = struct.unpack(">i", data[at + 8 : at + 12])
        out.append(data[at : at + 12 + length])
        at += 12 + length
    return out


def header(batch: bytes) -> tuple[Any, ...]:
    """A v2 batch header without its length and CRC: base offset, leader epoch, magic,
    attributes, last offset delta, base and max timestamps, producer id, epoch, base sequence,
    record count."""
    base, _, epoch, magic, _, *rest = struct.unpack(">qiibIhiqqqhii", batch[:61])
    return (base, epoch, magic, *rest)


def kafkas_clock(rows: list[dict[str, Any]], delete_retention_ms: int) -> int | None:
    """The time Kafka's cleaner ran at, read back from the delete horizons it stamped
    (horizon = now + delete.retention.ms)."""
    stamped = {r["delete_horizon_ms"] for r in rows if r["delete_horizon_ms"] is not None}
    assert len(stamped) <= 1, stamped  # one pass
    return stamped.pop() - delete_retention_ms if stamped else None


def segpipe_clean(before: Path, topic: str, now_ms: int, out: Path) -> None:
    """`segpipe clean` of one topic of the copy taken before Kafka's cleaner ran."""
    src = out.parent / f"{out.name}-src"
    shutil.copytree(
        before,
        src,
        ignore=lambda d, names: [
            n for n in names if Path(d) == before and (before / n).is_dir() and n != f"{topic}-0"
        ],
    )
    args = ["clean", str(src), str(out), "--now", str(now_ms), "--set", f"segment.bytes={SEGMENT_BYTES}"]
    for name, value in {**COMMON, **TOPICS[topic]}.items():
        args += ["--set", f"{name}={value}"]
    proc = run_segpipe(*args)
    assert proc.returncode == ExitCode.OK, proc.stderr


@dataclass(frozen=True)
class Cleaned:
    """One broker run: Kafka's log directory after its cleaner settled, the copy taken before,
    the cleaner checkpoint Kafka wrote, and the time its cleaner started."""

    kafka: Path
    before: Path
    checkpoint: dict[str, int]
    started_ms: int


@pytest.fixture(scope="module")
def cleaned(kafka_jars: Path, tmp_path_factory: pytest.TempPathFactory) -> Cleaned:
    from kafka.admin import KafkaAdminClient, NewTopic

    home = tmp_path_factory.mktemp("reference")
    broker = Broker(home / "kafka", settings={"log.cleaner.enable": "false"})
    try:
        broker.start()
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        sized = {"internal.segment.bytes": str(SEGMENT_BYTES)}
        admin.create_topics(
            [NewTopic(t, 1, 1, topic_configs={**COMMON, **sized, **c}) for t, c in TOPICS.items()]
        )
        admin.close()
        for seed, topic in enumerate(TOPICS):
            produce(broker, topic, seed)
        broker.stop()
        before = home / "before"
        shutil.copytree(broker.log_dir, before)
        broker.settings.update({"log.cleaner.enable": "true", "log.cleaner.backoff.ms": "100"})
        started_ms = int(time.time() * 1000)
        broker.start()
        checkpoint = wait_for_the_cleaner(broker)
        broker.stop()
    finally:
        broker.kill()
    return Cleaned(broker.log_dir, before, {tp.topic: o for tp, o in checkpoint.items()}, started_ms)


@pytest.mark.parametrize("topic", list(TOPICS))
def test_segpipe_keeps_what_kafkas_cleaner_keeps(cleaned: Cleaned, topic: str, tmp_path: Path) -> None:
    part = f"{topic}-0"
    kafka_rows = read_log(cleaned.kafka, part)
    now_ms = kafkas_clock(kafka_rows, int(TOPICS[topic]["delete.retention.ms"])) or cleaned.started_ms
    out = tmp_path / f"segpipe-{topic}"
    segpipe_clean(cleaned.before, topic, now_ms, out)
    ours = {tp.topic: o for tp, o in cleaner_checkpoint(out).items()}
    assert ours.get(topic) == cleaned.checkpoint.get(topic)
    assert (topic in cleaned.checkpoint) == (topic in CLEANED)
    # The same records in the same batches, field by field (delete horizons included).
    assert batch_view(read_log(out, part)) == batch_view(kafka_rows)
    kafka_dir, our_dir = cleaned.kafka / part, out / part
    names = sorted(p.name for p in kafka_dir.glob("*.log"))
    assert sorted(p.name for p in our_dir.glob("*.log")) == names  # the same groups
    for name in names:
        theirs, mine = batches(kafka_dir / name), batches(our_dir / name)
        assert [header(b) for b in mine] == [header(b) for b in theirs], name
        for k, o in zip(theirs, mine, strict=True):
            assert o == k, (name, header(k))  # snappy batches too: snappy 1.1.10's blocks
    # Every file of the partition, byte for byte: the producer snapshots too (those of segments
    # merged into a group of another base offset go, as Kafka's cleaner removes them).
    files = files_of(kafka_dir)
    assert any(name.endswith(".snapshot") for name in files)
    assert files_of(our_dir) == files
    # Where Kafka cleaned, it rewrote batches (so the codec's compressor is compared, not only copies).
    given = {b for p in (cleaned.before / part).glob("*.log") for b in batches(p)}
    rewritten = [b for n in names for b in batches(kafka_dir / n) if b not in given]
    assert bool(rewritten) == (topic in CLEANED)
    print(f"{topic}: {len(files)} files identical, {len(rewritten)} rewritten batches identical")


def files_of(directory: Path) -> dict[str, bytes]:
    """A partition's segment files (log, indexes, transaction index) and producer snapshots by name."""
    return {
        p.name: p.read_bytes()
        for p in sorted(directory.iterdir())
        if p.suffix[1:] in (*LOG_FILES, "snapshot")
    }


@pytest.mark.parametrize("topic", ["ref-a", "codec-zstd"])
def test_a_clean_of_an_archive_without_snapshots_gets_kafkas_own_back(
    cleaned: Cleaned, topic: str, tmp_path: Path
) -> None:
    """A broker writes a producer snapshot at each segment it rolls to and at the log end as it
    stops; an archive copied without them, cleaned, gets back those of the segments Kafka's cleaner
    leaves (compaction changes no producer's state), byte for byte, so a broker loading the output
    does not rebuild its producers from the last segments."""
    part = f"{topic}-0"
    kafka_rows = read_log(cleaned.kafka, part)
    now_ms = kafkas_clock(kafka_rows, int(TOPICS[topic]["delete.retention.ms"])) or cleaned.started_ms
    leo = max(r["batch_last_offset"] for r in read_log(cleaned.before, part)) + 1
    kafkas = cleaned.before / part / f"{leo:020d}.snapshot"
    assert kafkas.exists(), sorted(p.name for p in (cleaned.before / part).iterdir())
    archive = tmp_path / "archive"
    shutil.copytree(cleaned.before / part, archive / part, ignore=shutil.ignore_patterns("*.snapshot"))
    out = tmp_path / "out"
    segpipe_clean(archive, topic, now_ms, out)
    ours = {p.name: p.read_bytes() for p in (out / part).glob("*.snapshot")}
    theirs = {p.name: p.read_bytes() for p in (cleaned.kafka / part).glob("*.snapshot")}
    assert kafkas.name in theirs and len(theirs) > 1
    assert sorted(ours) == sorted(theirs)
    for name, data in theirs.items():
        assert ours[name] == data, name
