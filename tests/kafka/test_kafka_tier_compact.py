"""clean --in-place on Kafka's own tiered storage while the broker serves it: Kafka's broker
(LocalTieredStorage, the remote log metadata topic) tiers a keyed topic with delete retention, of
three partitions (every codec, tombstones, transactions with an abort, each key written several
times); consumers read the whole topic from offset 0 in a loop, in both isolation levels, while
segpipe compacts its remote segments as the topic's compaction configs say. Every pass must
succeed; afterwards a consumer from offset 0 receives exactly what `clean` of the same remote log
keeps, and the broker's local segments as they were, before and after a restart. A second run
with nothing new to remove swaps nothing; a run past the delete horizon removes the tombstones;
a run killed at each step (compacted and proved, each step of a swap) leaves every offset
readable, and the next one finishes what it left."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from segment_io.exit_codes import ExitCode
from segment_io.layout import KAFKA_TIER_SWAPS, META_DIR
from tests.helpers import run_segpipe
from tests.kafka.broker import Broker
from tests.kafka.test_kafka_tier_broker import (
    DAY_MS,
    PARTITIONS,
    TOPIC,
    create_tiered_topic,
    only_active_local,
    produce,
    restart,
    tiered_broker,
    wait_until,
)
from tests.kafka.test_kafka_tier_erase import (
    ISOLATIONS,
    Record,
    read_pass,
    read_throughout,
    served_ids,
)

pytestmark = pytest.mark.kafka
GRACE_MS = "2000"
COMPACT = f"{TOPIC}:cleanup.policy=compact"
JOB = f"""\
name: tier-compaction
source: {{logs}}
kafka_tier: {{settings}}
steps: [compact]
now: {{now}}
configs:
  topics:
    {TOPIC}:
      cleanup.policy: compact
in_place:
  grace_ms: {GRACE_MS}
"""


@pytest.fixture(scope="module")
def broker(kafka_tiered_jars: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A keyed topic with delete retention whose inactive segments are all remote, and a tail still
    local; each key written several times, some as tombstones."""
    b = tiered_broker(tmp_path_factory.mktemp("kafka-compact"))
    try:
        b.start()
        create_tiered_topic(b)
        produce(b, "plain", count=2400)
        for codec in ("gzip", "snappy", "lz4", "zstd"):
            produce(b, codec, codec=codec)
        produce(b, "txn", codec="zstd", transactions=(True, False, True))
        produce(b, "plain", count=600)  # later versions of keys in the first segments
        wait_until(lambda: only_active_local(b), "tier every inactive segment")
        produce(b, "tail", count=30)  # stays in the active segments: local only
        # The high watermark the broker checkpoints bounds a pass: every run reads the same one.
        wait_until(lambda: checkpointed(b), "checkpoint its high watermarks")
        yield b
    finally:
        b.kill()


def checkpointed(broker: Broker) -> bool:
    """Whether the broker's replication-offset-checkpoint holds each partition's log end."""
    from tests.kafka.test_restore import offsets

    _, ends = offsets(broker, [f"{TOPIC}-{p}" for p in range(PARTITIONS)])
    lines = (broker.log_dir / "replication-offset-checkpoint").read_text().splitlines()[2:]
    marks = {f"{t}-{p}": int(o) for t, p, o in (line.split() for line in lines)}
    return all(marks.get(name, -1) >= end for name, end in ends.items())


def compact(broker: Broker, now_ms: int, *args: str, fault: str | None = None) -> Any:
    return run_segpipe(
        "clean",
        str(broker.log_dir),
        "--kafka-tier",
        str(broker.home / "server.properties"),
        "--bootstrap-server",
        broker.bootstrap,
        "--in-place",
        "--topic-set",
        COMPACT,
        "--now-ms",
        str(now_ms),
        "--grace-ms",
        GRACE_MS,
        *args,
        fault=fault,
    )


def kept_by_clean(spark: Any, broker: Broker, now_ms: int, out: Path) -> dict[int, set[int]]:
    """Per partition, the offsets `clean` of the topic's remote log keeps, under the run's terms:
    the reference the served log must match (a plain log directory, written by the Python API)."""
    from pipelines.config import JobConfig
    from pipelines.jobs.clean import CleanRequest, run_clean
    from pipelines.jobs.clean.kafka_tier import remote_compaction
    from segment_io.kafka_tier.url import ROOT, KafkaTierSource
    from segment_io.remote.view import log_location
    from segment_io.storage import LocalStorage, Location
    from tests.kip405 import records

    tier = KafkaTierSource(str(broker.home / "server.properties"), broker.bootstrap)
    full = log_location(str(broker.log_dir), kafka_tier=tier)
    remote = Location.at(full.storage.remote_only_view(), ROOT)  # type: ignore[attr-defined]
    config = remote_compaction(JobConfig.build(topics={TOPIC: {"cleanup.policy": "compact"}}))
    run_clean(
        spark, CleanRequest(src=remote, dst=Location(str(out)), config=config, now_ms=now_ms), lambda _: None
    )
    kept: dict[int, set[int]] = {p: set() for p in range(PARTITIONS)}
    for p, offset in records(LocalStorage(), str(out), TOPIC):
        kept[p].add(offset)
    return kept


def served_as(
    before: dict[int, list[Record]], kept: dict[int, set[int]], ends: dict[int, int]
) -> dict[int, list[Record]]:
    """What a consumer must receive: of the remote log (offsets to `ends`), the records `kept`;
    above it, the broker's local segments as they were."""
    return {p: [r for r in records if r[0] > ends[p] or r[0] in kept[p]] for p, records in before.items()}


def remote_log(broker: Broker) -> tuple[dict[int, int], int]:
    """Per partition, the last offset of its remote log, and a `now` for the run: a second past
    the newest remote record (both from the remote log metadata, never from the clock)."""
    from segment_io.kafka_tier.metadata_cache import MetadataReplay
    from segment_io.kafka_tier.metadata_live import read_metadata_live

    replay = MetadataReplay.of(read_metadata_live(broker.bootstrap))
    served = [s for tip, state in replay.partitions.items() if tip.topic == TOPIC for s in state.served()]
    ends = {p: max(s.end_offset for s in served if s.tp.partition == p) for p in range(PARTITIONS)}
    return ends, max(s.max_timestamp_ms for s in served) + 1000


def remote_files(broker: Broker) -> set[str]:
    return {p.name for p in (broker.home / "remote").rglob("*") if p.is_file()}


def test_clean_compacts_remote_segments_while_consumers_read(
    spark: Any, broker: Broker, tmp_path: Path
) -> None:
    before = {iso: read_pass(broker, iso) for iso in ISOLATIONS}
    ends, now_ms = remote_log(broker)
    files_before = remote_files(broker)
    dry = compact(broker, now_ms, "--dry-run", "--report", str(tmp_path / "dry.json"))
    assert dry.returncode == ExitCode.OK, dry.stderr
    would = json.loads((tmp_path / "dry.json").read_text())["kafka_tier"]["would_swap"]
    assert would and remote_files(broker) == files_before
    assert read_pass(broker, ISOLATIONS[0]) == before[ISOLATIONS[0]]
    kept = kept_by_clean(spark, broker, now_ms, tmp_path / "reference")
    report_path = tmp_path / "report.json"
    with read_throughout(broker) as readers:
        proc = compact(broker, now_ms, "--report", str(report_path))
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert readers.errors == []  # every fetch during the run succeeded
    assert len(readers.passes) >= 2
    doc = json.loads(report_path.read_text())["kafka_tier"]
    swapped = doc["swapped"]
    assert sorted(s["replaced"] for s in swapped) == sorted(s["replaced"] for s in would)
    assert len({s["partition"] for s in swapped}) == PARTITIONS and doc["left_as_they_were"] == []
    # A swap removes records, or only gives a segment's tombstones their delete horizon (a segment
    # whose every record is its key's latest still changes then): never does one add a record.
    assert all(s["records_after"] <= s["records_before"] for s in swapped)
    assert sum(s["records_before"] - s["records_after"] for s in swapped) > 0
    for isolation, got in readers.passes:  # each pass: the old log or the compacted one, segment by segment
        for p, records in got.items():
            known = {r[0]: r for r in before[isolation][p]}
            assert all(known.get(r[0]) == r for r in records), f"partition {p}: a record changed"
            must = [r[0] for r in served_as(before[isolation], kept, ends)[p]]
            assert not set(must) - {r[0] for r in records}, f"partition {p}: a kept record is missing"

    def after_ok(b: Broker) -> None:
        for isolation in ISOLATIONS:
            assert read_pass(b, isolation) == served_as(before[isolation], kept, ends)

    after_ok(broker)
    assert broker.errors() == []
    for s in swapped:  # the replaced segments' objects are gone, their successors there
        assert not any(s["replaced"] in name for name in remote_files(broker))
    restart(broker)
    after_ok(broker)

    # A second pass at the same time removes no record; it may give a transaction's marker, whose
    # aborted data the first pass removed, its delete horizon (Kafka's cleaner does the same on its
    # next pass). A third has nothing left to do: it swaps nothing.
    again = compact(broker, now_ms, "--report", str(tmp_path / "again.json"))
    assert again.returncode == ExitCode.OK, again.stderr
    second = json.loads((tmp_path / "again.json").read_text())["kafka_tier"]["swapped"]
    assert all(s["records_after"] == s["records_before"] for s in second)
    after_ok(broker)
    third = compact(broker, now_ms, "--report", str(tmp_path / "third.json"))
    assert third.returncode == ExitCode.OK, third.stderr
    assert json.loads((tmp_path / "third.json").read_text())["kafka_tier"]["swapped"] == []

    # Past the delete horizon the first pass gave them, the tombstones and markers go too: this
    # pass is a job file's scheduled step (`segpipe run`, as the maintenance DAG's task runs it).
    later = now_ms + DAY_MS + 1000
    kept = kept_by_clean(spark, broker, later, tmp_path / "reference-later")
    tombstones = sum(1 for r in before[ISOLATIONS[0]][0] if r[2] is None and r[0] <= ends[0])
    job = tmp_path / "compaction.yaml"
    job.write_text(
        JOB.format(logs=broker.log_dir, settings=broker.home / "server.properties", now=later)
        + f"  bootstrap_server: {broker.bootstrap}\n"
    )
    past = run_segpipe("run", str(job), "--run", "past")
    assert past.returncode == ExitCode.OK, past.stderr
    state = json.loads((broker.log_dir.parent / f"{broker.log_dir.name}.past.run.json").read_text())
    step = state["steps"]["compact"]
    assert step["state"] == "done" and step["segments_swapped"] and step["records_removed"]
    after_ok(broker)
    left = sum(1 for r in read_pass(broker, ISOLATIONS[0])[0] if r[2] is None and r[0] <= ends[0])
    assert tombstones and left == 0


# Each step a run can be killed at, in the order a run reaches them: the remote log compacted and
# proved in the staging (no swap begun), then each step of the first swap.
KILL_POINTS = (
    "kafka-tier-compacted",
    "kafka-tier-copy-started",
    "kafka-tier-uploaded",
    "kafka-tier-copy-finished",
    "kafka-tier-delete-started",
)


def test_a_run_killed_at_each_step_leaves_every_offset_readable(
    spark: Any, broker: Broker, tmp_path: Path
) -> None:
    # New versions of keys the remote log holds already, tiered: every run below has work to do.
    produce(broker, "plain", count=900)
    wait_until(lambda: only_active_local(broker), "tier every inactive segment")
    wait_until(lambda: checkpointed(broker), "checkpoint its high watermarks")
    before = {iso: read_pass(broker, iso) for iso in ISOLATIONS}
    ends, now_ms = remote_log(broker)
    kept = kept_by_clean(spark, broker, now_ms, tmp_path / "reference")
    journal = broker.home / "remote" / META_DIR / KAFKA_TIER_SWAPS
    for n, point in enumerate(KILL_POINTS):
        # Each run first finishes or undoes what the one before it left, then is killed at `point`.
        killed = compact(broker, now_ms, "--report", str(tmp_path / f"killed-{n}.json"), fault=point)
        assert killed.returncode != ExitCode.OK, f"{point}: the run was not killed"
        assert bool(list(journal.glob("*.json"))) == (point != "kafka-tier-compacted"), point
        for isolation in ISOLATIONS:  # every offset readable: the old segment or its successor
            must = served_as(before[isolation], kept, ends)
            for p, records in read_pass(broker, isolation).items():
                known = {r[0]: r for r in before[isolation][p]}
                assert all(known.get(r[0]) == r for r in records), f"{point}: partition {p}: a record changed"
                missing = {r[0] for r in must[p]} - {r[0] for r in records}
                assert not missing, f"{point}: partition {p}: kept records missing: {sorted(missing)[:5]}"
    report_path = tmp_path / "report.json"
    proc = compact(broker, now_ms, "--report", str(report_path))
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert json.loads(report_path.read_text())["kafka_tier"]["resumed"]  # the last kill's swap finished
    for isolation in ISOLATIONS:
        assert read_pass(broker, isolation) == served_as(before[isolation], kept, ends)
    assert broker.errors() == []
    # Nothing of any run is left behind: no journal, no staging, no object of a segment the
    # metadata does not name.
    remote = broker.home / "remote"
    assert [p for p in (remote / META_DIR).rglob("*") if p.is_file()] == []
    names = served_ids(broker)
    for path in (remote / "kafka-tiered-storage").rglob("*"):
        if path.is_file():
            assert path.name.split(".")[0].split("-", 1)[1] in names, path
