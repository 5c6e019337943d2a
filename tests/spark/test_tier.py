"""`tier` and `restore` on local disks: a tiered log reads as the original, restores to its exact
bytes, and a second run finds nothing to do."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from chispa import assert_df_equality

from pipelines.config import JobConfig
from pipelines.jobs.tier import tier
from pipelines.jobs.tier.restore import restore
from segment_io.remote.tier import RemoteTier
from segment_io.topic_partition import TopicPartition
from tests.conftest import FIXED_NOW_MS
from tests.helpers import files_of

pytestmark = pytest.mark.spark
KEEP_ALL = {"retention.ms": -1}
RELEASE_ALL = {"retention.ms": -1, "local.retention.ms": 0, "local.retention.bytes": 0}


def quiet(line: str) -> None:
    del line


def split(sample_dir: Path, tmp_path: Path, values: dict[str, object]) -> tuple[Path, Path]:
    log = tmp_path / "log"
    shutil.copytree(sample_dir, log)
    remote = tmp_path / "remote"
    return log, remote


@pytest.mark.parametrize("values", [KEEP_ALL, RELEASE_ALL], ids=["keep-local", "release-local"])
def test_tier_then_restore_gives_back_every_byte(spark, sample_dir: Path, tmp_path: Path, values) -> None:  # type: ignore[no-untyped-def]
    log, remote = split(sample_dir, tmp_path, values)
    report = tier(spark, str(log), str(remote), JobConfig.build(values), now_ms=FIXED_NOW_MS, log=quiet)
    assert report.segments_uploaded > 0
    released = report.total("local_released")
    if values is RELEASE_ALL:
        # Every uploaded segment's local copy went; the active segments stayed.
        assert released == report.segments_uploaded
        assert sum(1 for _ in log.rglob("*.log")) == len(list(sample_dir.iterdir())) - 2  # one per partition
    else:
        assert released == 0 and files_of(log) == files_of(sample_dir)
    # Compacted (orders, legacy-users) and delete (clicks) topics alike.
    tier_ = RemoteTier.open(str(remote))
    assert {tp.topic for tp in tier_.partitions()} == {"orders", "clicks", "legacy-users"}
    restore(spark, str(remote), str(tmp_path / "restored"), str(log), log=quiet)
    assert files_of(tmp_path / "restored") == files_of(sample_dir)


def test_a_second_run_finds_nothing_to_do(spark, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log, remote = split(sample_dir, tmp_path, KEEP_ALL)
    tier(spark, str(log), str(remote), JobConfig.build(KEEP_ALL), now_ms=FIXED_NOW_MS, log=quiet)
    tp = TopicPartition("orders", 0)
    before = RemoteTier.open(str(remote)).versions(tp)
    again = tier(spark, str(log), str(remote), JobConfig.build(KEEP_ALL), now_ms=FIXED_NOW_MS, log=quiet)
    assert again.segments_uploaded == 0 and again.bytes_uploaded == 0
    assert RemoteTier.open(str(remote)).versions(tp) == before


def test_the_data_source_reads_a_split_log_as_the_original(spark, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log, remote = split(sample_dir, tmp_path, RELEASE_ALL)
    tier(spark, str(log), str(remote), JobConfig.build(RELEASE_ALL), now_ms=FIXED_NOW_MS, log=quiet)
    original = spark.read.format("kafka-segments").load(str(sample_dir))
    both = spark.read.format("kafka-segments").option("remote", str(remote)).load(str(log))
    assert_df_equality(both, original, ignore_row_order=True, ignore_nullable=True)
    # The remote tier alone holds the tiered part: everything below each partition's active segment.
    remote_only = spark.read.format("kafka-segments").load(str(remote))
    assert 0 < remote_only.count() < original.count()


def test_retention_applies_across_both_tiers(spark, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log, remote = split(sample_dir, tmp_path, KEEP_ALL)
    tier(spark, str(log), str(remote), JobConfig.build(KEEP_ALL), now_ms=FIXED_NOW_MS, log=quiet)
    tier_ = RemoteTier.open(str(remote))
    clicks = TopicPartition("clicks", 0)
    first = tier_.read(clicks)
    # A size limit the remote part alone already exceeds: the oldest remote segments go, the
    # manifest's log start offset moves, and the local log-start-offset checkpoint follows.
    local_only = [p for p in (log / "clicks-0").glob("*.log") if int(p.stem) >= first.next_offset]
    limit = sum(s.size for s in first.segments[2:]) + sum(p.stat().st_size for p in local_only)
    values = {"retention.ms": -1, "cleanup.policy": "delete", "retention.bytes": limit}
    report = tier(spark, str(log), str(remote), JobConfig.build(values), now_ms=FIXED_NOW_MS, log=quiet)
    after = tier_.read(clicks)
    assert after.version == first.version + 1
    assert [s.base_offset for s in after.segments] == [s.base_offset for s in first.segments[2:]]
    assert after.log_start_offset == first.segments[2].base_offset
    assert report.total("remote_deleted") >= 2
    # Their local copies went too (Kafka deletes below the log start offset in both tiers).
    assert min(int(p.stem) for p in (log / "clicks-0").glob("*.log")) == after.log_start_offset
    checkpoint = (log / "log-start-offset-checkpoint").read_text()
    assert f"clicks 0 {after.log_start_offset}" in checkpoint
    # The segments retention removed are still in the bucket until expiry's grace period has passed.
    named = {o.name for s in first.segments[:2] for o in s.objects.values()}
    assert named <= {f.name for f in tier_.segment_objects(clicks)}
