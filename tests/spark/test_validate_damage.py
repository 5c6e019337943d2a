"""Random logs and configs are cleaned; then each partition of the output, at random, is left
alone or damaged in one way (a segment removed, a surviving record dropped, a superseded record
brought back, a checkpoint moved past what the rules allow). With the output's own manifest and
run report gone (the promise may only use the source and the terms given), `validate --against`
must fail exactly the damaged partitions. Seeds: SEGPIPE_DAMAGE_SEEDS=1,2,... (default: two fixed ones)."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from pipelines import clean
from pipelines.config import JobConfig
from pipelines.jobs.validate import checkpoint as validate_checkpoint
from pipelines.jobs.validate import validate
from segment_io.checkpoints import format_offset_checkpoint, parse_offset_checkpoint
from segment_io.layout import CLEANER_CHECKPOINT, LOG_START_CHECKPOINT, META_DIR
from segment_io.topic_partition import TopicPartition
from tests.helpers import read_log, rewrite_partition, v2_batch, write_log

pytestmark = pytest.mark.spark
T0 = 1_700_000_000_000
HOUR, DAY = 3_600_000, 86_400_000
PARTITIONS = 8
SEEDS = [int(s) for s in os.environ.get("SEGPIPE_DAMAGE_SEEDS", "3,17").split(",")]
DAMAGES = ("none", "remove_segment", "drop_record", "bring_back", "move_cleaner", "move_log_start")


def random_partition(rng: random.Random, root: Path, name: str) -> int:
    """Keyed v2 records (some tombstones) over a few segments; returns the last timestamp."""
    offset, ts, segments = 0, T0, []
    for _ in range(rng.randint(1, 4)):
        batches = []
        for _ in range(rng.randint(1, 3)):
            records = []
            for delta in range(rng.randint(1, 5)):
                ts += rng.randint(0, DAY // 2)
                key = b"k%d" % rng.randint(0, 5)
                value = None if rng.random() < 0.2 else b"v%d" % rng.randint(0, 10**6)
                records.append((delta, ts, key, value, []))
            batches.append(v2_batch(offset, records))
            offset += len(records)
        segments.append(batches)
    write_log(root, name, segments)
    return ts


def random_config(rng: random.Random) -> dict[str, Any]:
    return {
        "cleanup.policy": rng.choice(["compact", "delete", "compact,delete"]),
        "retention.ms": rng.choice([-1, DAY, 3 * DAY]),
        "delete.retention.ms": HOUR,
        "min.compaction.lag.ms": rng.choice([0, DAY]),
        "segpipe.last.segment.sealed": rng.choice([True, False]),
    }


def set_checkpoint(root: Path, name: str, tp: TopicPartition, offset: int) -> None:
    path = root / name
    entries = parse_offset_checkpoint(path.read_bytes(), str(path)) if path.exists() else {}
    entries[tp] = offset
    path.write_bytes(format_offset_checkpoint(entries))


def damage(
    rng: random.Random, kind: str, src: Path, out: Path, tp: TopicPartition, plan: dict[str, Any]
) -> bool:
    """Apply `kind` to one output partition; False where it cannot apply (nothing to damage)."""
    name = tp.dir_name
    rows, source = read_log(out, name), read_log(src, name)
    leo = source[-1]["offset"] + 1
    if kind == "remove_segment":
        bases = sorted({r["segment_base_offset"] for r in rows})
        if not bases:
            return False
        base = rng.choice(bases)
        for path in (out / name).glob(f"{base:020d}.*"):
            path.unlink()
    elif kind == "drop_record":
        if not rows:
            return False
        dropped = rng.choice(rows)["offset"]
        rewrite_partition(out, name, [r for r in rows if r["offset"] != dropped])
    elif kind == "bring_back":
        span = plan["cleanable_range"]
        if span is None:
            return False
        kept = {r["offset"] for r in rows}
        in_range = [r for r in source if span[0] <= r["offset"] < span[1]]
        superseded = [
            r
            for i, r in enumerate(in_range)
            if r["offset"] not in kept and any(later["key"] == r["key"] for later in in_range[i + 1 :])
        ]
        if not superseded:
            return False
        rewrite_partition(out, name, [*rows, rng.choice(superseded)])
    elif kind == "move_cleaner":
        set_checkpoint(out, CLEANER_CHECKPOINT, tp, leo + 1)
    elif kind == "move_log_start":
        set_checkpoint(out, LOG_START_CHECKPOINT, tp, leo + 1)
    return kind != "none"


@pytest.mark.parametrize("seed", SEEDS)
def test_validate_against_fails_exactly_the_damaged_partitions(
    spark, tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(
        validate_checkpoint, "SHOWN_PER_RULE", 10_000
    )  # every failing row, to know its partition
    rng = random.Random(seed)
    src, out = tmp_path / "src", tmp_path / "out"
    topics = [f"t{i}" for i in range(PARTITIONS)]
    last = max(random_partition(rng, src, f"{t}-0") for t in topics)
    config = JobConfig.build({}, {t: random_config(rng) for t in topics})
    now = last + rng.randint(0, 2 * DAY)
    report = clean(spark, str(src), str(out), config, now_ms=now, log=lambda line: None)
    plans = {p["partition"]: p for p in report.plan}
    shutil.rmtree(out / META_DIR)  # no manifest, no run report: the promise has only the source
    undamaged = validate(spark, str(out), against=str(src), config=config, now_ms=now)
    assert undamaged.success, (seed, undamaged.lines())

    damaged: dict[str, str] = {}
    for t in topics:
        tp = TopicPartition(t, 0)
        kind = rng.choice(DAMAGES)
        if damage(rng, kind, src, out, tp, plans[str(tp)]):
            damaged[str(tp)] = kind
    report = validate(spark, str(out), against=str(src), config=config, now_ms=now)
    failed = {f.partition for f in report.failures}
    assert failed == set(damaged), (seed, damaged, sorted({(f.partition, f.rule) for f in report.failures}))
    assert damaged, seed  # each seed damages something
    print(f"seed {seed}: damaged {damaged}")
