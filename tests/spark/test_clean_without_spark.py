"""A clean whose plan gives Spark nothing to do starts no Spark: the scan and plan of a local log
run in the driver, and so do retention, copies and a small compaction; Spark starts only where a
compaction too large for the driver needs it. Outputs are byte-identical to the same run with Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipelines import clean
from pipelines.config import JobConfig, load_job_config
from pipelines.jobs.clean import alone
from pipelines.jobs.clean.ranged import partition_ranges
from pipelines.runtime import tasks
from pipelines.runtime.local_workers import LocalWorkers
from pipelines.runtime.session import LazySpark
from tests.helpers import files_of

pytestmark = pytest.mark.spark
NOW = 1_700_697_600_000  # 2023-11-23: the samples' clicks keep part of their 3 days


def quiet(line: str) -> None:
    del line


def no_spark() -> None:
    raise AssertionError("Spark was started for a plan with nothing for it to do")


RETENTION_ONLY = JobConfig.from_sources(None, ["cleanup.policy=delete", "retention.ms=259200000"])


@pytest.mark.parametrize("link", [False, True])
def test_a_retention_only_run_starts_no_spark(spark, sample_dir: Path, tmp_path: Path, link: bool) -> None:  # type: ignore[no-untyped-def]
    with_spark, without = tmp_path / "with", tmp_path / "without"
    report = clean(spark, str(sample_dir), str(with_spark), RETENTION_ONLY, now_ms=NOW, log=quiet)
    assert report.total("segments_deleted") > 0  # retention did remove something
    clean(
        LazySpark(no_spark), str(sample_dir), str(without), RETENTION_ONLY, now_ms=NOW, log=quiet, link=link
    )
    assert files_of(without) == files_of(with_spark)


def test_select_kafka_with_nothing_to_clean_starts_no_spark(spark, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config = load_job_config("conf/samples.yaml")
    once = tmp_path / "once"
    clean(spark, str(sample_dir), str(once), config, now_ms=NOW, log=quiet)
    lines: list[str] = []
    again = tmp_path / "again"
    clean(LazySpark(no_spark), str(once), str(again), config, now_ms=NOW, log=lines.append, select="kafka")
    assert any("not compacted" in line for line in lines)
    assert files_of(again) == files_of(once)


def test_a_small_compaction_runs_in_the_driver_and_a_larger_one_starts_spark(  # type: ignore[no-untyped-def]
    spark, sample_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The samples' compaction fits the driver's threads (tasks.DRIVER_COMPACT_BYTES): no Spark;
    made Spark's work, Spark starts for it; the same bytes either way."""
    config = load_job_config("conf/samples.yaml")
    started: list[bool] = []

    def start():  # type: ignore[no-untyped-def]
        started.append(True)
        return spark

    in_driver, lazy = tmp_path / "in-driver", tmp_path / "lazy"
    clean(LazySpark(no_spark), str(sample_dir), str(in_driver), config, now_ms=NOW, log=quiet)
    monkeypatch.setattr(tasks, "DRIVER_COMPACT_BYTES", 1000)  # the samples' compaction no longer fits
    clean(LazySpark(start), str(sample_dir), str(lazy), config, now_ms=NOW, log=quiet)
    assert started == [True]
    assert files_of(lazy) == files_of(in_driver)


@pytest.mark.parametrize("path", ["alone", "ranged", "bucketed"])
def test_a_larger_compaction_with_a_local_master_runs_in_the_drivers_processes(  # type: ignore[no-untyped-def]
    spark, sample_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """Too large for the driver's threads, with a local master: the driver's own processes
    compact (runtime.local_workers), each partition in one of them, one larger than a core's
    share in ranges of its groups, a process each (jobs/clean/ranged.py; with 4 processes, two
    partitions are); where partitions are too large for one task (made so here), through the
    key map routed between them. No Spark, and the same bytes as Spark's."""
    from pipelines.jobs.clean import job

    config = load_job_config("conf/samples.yaml")
    monkeypatch.setattr(tasks, "DRIVER_COMPACT_BYTES", 1000)
    if path == "bucketed":
        monkeypatch.setattr(alone, "ALONE_ROWS", 10)
    ranged: list[dict[int, Any]] = []

    def spied(*args: Any) -> dict[int, Any]:
        ranged.append(partition_ranges(*args))
        return ranged[-1]

    monkeypatch.setattr(job, "partition_ranges", spied)
    on_spark, in_processes = tmp_path / "on-spark", tmp_path / "in-processes"
    clean(spark, str(sample_dir), str(on_spark), config, now_ms=NOW, log=quiet)
    assert ranged == []  # Spark's tasks may not run at once: never in ranges
    workers = LocalWorkers(4 if path == "ranged" else 2, ["pipelines.jobs.clean"])
    try:
        report = clean(
            LazySpark(no_spark, workers), str(sample_dir), str(in_processes), config, now_ms=NOW, log=quiet
        )
    finally:
        workers.close()
    assert report.total("removed_superseded") > 0  # it did compact
    assert files_of(in_processes) == files_of(on_spark)
    [chosen] = ranged
    # With 2 cores one partition of orders is more than a core's share; with 4, both are (in 2
    # and 3 ranges of their segments).
    expected = {"alone": [2], "ranged": [2, 3], "bucketed": []}[path]
    assert sorted(len(r) for r in chosen.values()) == expected
