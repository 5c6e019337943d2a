"""The segments a run carries over unchanged: copied by the kernel (new files, same bytes and
times), or with `link` hard-linked (the same files); either way DST holds the same bytes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import pipelines
from pipelines.config import JobConfig
from pipelines.errors import ConfigError
from segment_io.layout import META_DIR

pytestmark = pytest.mark.spark
NOW = 1_700_700_000_000
# Retention only, with no time limit: every segment above the log start offset is carried over.
CONFIG = JobConfig.build({"cleanup.policy": "delete", "retention.ms": -1})


def _files(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in root.rglob("*") if p.is_file() and META_DIR not in p.parts}


def test_carried_over_segments_are_copied_or_linked(spark, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    copied, linked = tmp_path / "copied", tmp_path / "linked"
    first = pipelines.clean(spark, str(sample_dir), str(copied), CONFIG, now_ms=NOW)
    second = pipelines.clean(spark, str(sample_dir), str(linked), CONFIG, now_ms=NOW, link=True)
    assert first.rows() == second.rows()
    carried = [n for n in _files(copied) if n.endswith((".log", ".index", ".timeindex"))]
    assert len(carried) > 20
    for name in carried:
        source, copy, link = sample_dir / name, copied / name, linked / name
        assert copy.read_bytes() == link.read_bytes() == source.read_bytes()
        assert os.stat(copy).st_ino != os.stat(source).st_ino  # a copy of its own
        assert os.stat(copy).st_mtime_ns // 1_000_000 == os.stat(source).st_mtime_ns // 1_000_000
        assert os.stat(link).st_ino == os.stat(source).st_ino  # the same file
    # The rest of the output (checkpoints, rewritten side files) is equal too.
    assert {n: p.read_bytes() for n, p in _files(copied).items()} == {
        n: p.read_bytes() for n, p in _files(linked).items()
    }


def test_link_is_refused_where_files_cannot_be_linked(spark, sample_dir: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match="both be local"):
        pipelines.clean(spark, str(sample_dir), "memory://linked", CONFIG, now_ms=NOW, link=True)
    shm = Path("/dev/shm")
    if shm.is_dir() and os.stat(shm).st_dev != os.stat(sample_dir).st_dev:
        with pytest.raises(ConfigError, match="different file systems"):
            pipelines.clean(
                spark, str(sample_dir), str(shm / "segpipe-linked"), CONFIG, now_ms=NOW, link=True
            )


def test_kafka_selection_carries_over_what_the_cleaner_would_not_choose(
    spark, sample_dir: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    # A dirty ratio can never be above 1: no compacted partition is chosen, and each is named.
    config = JobConfig.build(
        {"retention.ms": -1, "min.cleanable.dirty.ratio": "1"},
        {t: {"cleanup.policy": "compact"} for t in ("orders", "legacy-users")},
    )
    lines: list[str] = []
    report = pipelines.clean(
        spark, str(sample_dir), str(tmp_path / "kafka"), config, now_ms=NOW, select="kafka", log=lines.append
    )
    skipped = sorted(line.split()[3] for line in lines if line.startswith("segpipe: not compacted:"))
    assert skipped == ["legacy-users-0", "orders-0", "orders-1"]
    assert all(
        "dirty ratio 1.000 ≤ min.cleanable.dirty.ratio 1.0" in p["selection"]
        for p in report.plan
        if p["partition"] != "clicks-0"
    )
    for name in ("orders-0", "legacy-users-0"):
        logs = sorted((tmp_path / "kafka" / name).glob("*.log"))
        assert [p.read_bytes() for p in logs] == [(sample_dir / name / p.name).read_bytes() for p in logs]
    everything = pipelines.clean(spark, str(sample_dir), str(tmp_path / "all"), config, now_ms=NOW)
    assert sum(p.records_out for p in everything.partitions) < sum(p.records_out for p in report.partitions)
