"""The promise from the source: `validate --against SRC` works out from SRC, the topic configs and
`now` what may be removed, so an output that lost data fails whatever it says of itself (no
checkpoints, an edited run report, checkpoints moved up), and one that says nothing is refused
without the terms to judge it by."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from pipelines import clean
from pipelines.config import load_job_config
from pipelines.errors import ConfigError
from pipelines.jobs.validate import validate
from segment_io.checkpoints import format_offset_checkpoint, parse_offset_checkpoint
from segment_io.layout import CLEANER_CHECKPOINT, LOG_START_CHECKPOINT, META_DIR
from segment_io.topic_partition import TopicPartition
from tests.helpers import read_log

pytestmark = pytest.mark.spark
CONFIG = load_job_config("conf/samples.yaml")
PARTITIONS = ("clicks-0", "legacy-users-0", "orders-0", "orders-1")
NOW = 1_700_697_600_000  # 2023-11-23: the samples' clicks keep part of their 3 days


def quiet(line: str) -> None:
    del line


@pytest.fixture(scope="module")
def cleaned(spark, sample_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("promise") / "out"
    clean(spark, str(sample_dir), str(out), CONFIG, now_ms=NOW, log=quiet)
    return out


def without_claims(out: Path, dst: Path) -> Path:
    """A copy as another tool makes it: no `_segpipe/`, no cleaner checkpoint."""
    shutil.copytree(out, dst)
    shutil.rmtree(dst / META_DIR)
    (dst / CLEANER_CHECKPOINT).unlink(missing_ok=True)
    return dst


def drop_segment(log_dir: Path, partition: str, index: int) -> int:
    """Remove one segment's files; returns the records it held."""
    logs = sorted((log_dir / partition).glob("*.log"))
    base = int(logs[index].stem)
    before = len(read_log(log_dir, partition))
    for path in (log_dir / partition).glob(f"{base:020d}.*"):
        path.unlink()
    return before - len(read_log(log_dir, partition))


def broken(report, rule: str) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.partition for f in report.failures if f.rule == rule}


def test_an_output_that_makes_no_claims_needs_terms_and_then_fails(
    spark, sample_dir: Path, cleaned: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    lossy = without_claims(cleaned, tmp_path / "copy")
    lost = drop_segment(lossy, "clicks-0", 1)
    assert lost > 0
    with pytest.raises(ConfigError, match=r"--now and --config"):
        validate(spark, str(lossy), against=str(sample_dir))
    report = validate(spark, str(lossy), against=str(sample_dir), config=CONFIG, now_ms=NOW)
    assert not report.success
    assert report.failed["uncleanable_record_kept"] == lost
    assert broken(report, "uncleanable_record_kept") == {"clicks-0"}
    # The same copy, whole, passes under the same terms: the rules, not the claims, decide.
    whole = without_claims(cleaned, tmp_path / "whole")
    assert validate(spark, str(whole), against=str(sample_dir), config=CONFIG, now_ms=NOW).success


def test_another_cleaners_retention_on_a_compacted_topic_fails(
    spark, sample_dir: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    wrong = load_job_config(
        "conf/samples.yaml", topic_sets=["orders:cleanup.policy=compact,delete", "orders:retention.ms=1"]
    )
    out = tmp_path / "other"
    clean(spark, str(sample_dir), str(out), wrong, now_ms=NOW, log=quiet)
    report = validate(spark, str(out), against=str(sample_dir), config=CONFIG, now_ms=NOW)
    assert not report.success
    assert broken(report, "latest_value_kept") == {"orders-0"}  # orders-1 is one active segment
    # With every checkpoint gone, the records alone fail it.
    bare = without_claims(out, tmp_path / "bare")
    (bare / LOG_START_CHECKPOINT).unlink(missing_ok=True)
    report = validate(spark, str(bare), against=str(sample_dir), config=CONFIG, now_ms=NOW)
    assert not report.success and broken(report, "latest_value_kept") == {"orders-0"}


def test_a_deleted_first_segment_fails_though_the_report_is_edited(
    spark, sample_dir: Path, cleaned: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    lossy = tmp_path / "lossy"
    shutil.copytree(cleaned, lossy)
    lost = drop_segment(lossy, "clicks-0", 0)
    report_file = lossy / META_DIR / "report.json"
    run = json.loads(report_file.read_text())
    for row in run["partitions"]:
        if row["partition"] == "clicks-0":  # the report made to agree with the damage
            row["records_in"] -= lost
            row["records_out"] -= lost
    report_file.write_text(json.dumps(run))
    report = validate(spark, str(lossy), against=str(sample_dir))  # the manifest's terms
    assert not report.success
    assert report.failed["uncleanable_record_kept"] == lost and broken(report, "uncleanable_record_kept") == {
        "clicks-0"
    }


def test_checkpoints_the_rules_do_not_justify_fail(
    spark, sample_dir: Path, cleaned: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    moved = tmp_path / "moved"
    shutil.copytree(cleaned, moved)
    orders = TopicPartition("orders", 0)
    for name in (CLEANER_CHECKPOINT, LOG_START_CHECKPOINT):
        path = moved / name
        entries = parse_offset_checkpoint(path.read_bytes(), str(path)) if path.exists() else {}
        entries[orders] = entries.get(orders, 0) + 10_000
        path.write_bytes(format_offset_checkpoint(entries))
    report = validate(spark, str(moved), against=str(sample_dir))
    assert broken(report, "checkpoints_justified") == {"orders-0"}
    detail = next(f.detail for f in report.failures if f.rule == "checkpoints_justified")
    assert CLEANER_CHECKPOINT in detail and LOG_START_CHECKPOINT in detail and "at most" in detail


def test_without_a_source_holes_and_the_manifest_catch_lost_segments(
    spark, cleaned: Path, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    whole = validate(spark, str(cleaned))
    assert whole.success and whole.checked["manifest_matches"] == 4
    assert whole.checked["offsets_contiguous"] == sum(len(read_log(cleaned, p)) for p in PARTITIONS)
    first = tmp_path / "first"
    shutil.copytree(cleaned, first)
    drop_segment(first, "clicks-0", 0)
    report = validate(spark, str(first))
    assert broken(report, "manifest_matches") == {"clicks-0"}
    assert "missing 0000" in next(f.detail for f in report.failures if f.rule == "manifest_matches")
    # A segment gone from the middle of a delete-policy partition, and no manifest: the hole tells.
    middle = tmp_path / "middle"
    shutil.copytree(cleaned, middle)
    shutil.rmtree(middle / META_DIR)
    drop_segment(middle, "clicks-0", 1)
    report = validate(spark, str(middle))
    assert broken(report, "offsets_contiguous") == {"clicks-0"} and "manifest_matches" not in report.checked
    # The manifest's partitions must all be there.
    gone = tmp_path / "gone"
    shutil.copytree(cleaned, gone)
    shutil.rmtree(gone / "legacy-users-0")
    report = validate(spark, str(gone))
    assert broken(report, "manifest_matches") == {"legacy-users-0"}


def test_topics_an_output_left_out_by_selection_are_named(spark, sample_dir: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from pipelines.config.selection import TopicSelection

    out = tmp_path / "orders-only"
    clean(spark, str(sample_dir), str(out), CONFIG, now_ms=NOW, log=quiet, topics=TopicSelection(("orders",)))
    report = validate(spark, str(out), against=str(sample_dir))
    assert report.success, report.lines()
    named = [n for n in report.notes if n.startswith("segpipe: not compared: topic")]
    assert [n.split()[4] for n in named] == ["clicks:", "legacy-users:"]
    assert all("kept only topics orders" in n for n in named)


def test_a_small_local_log_is_validated_without_starting_spark(
    sample_dir: Path, cleaned: Path, tmp_path: Path
) -> None:
    """The whole validation of the samples, passing and failing, runs in the driver: Spark is
    never asked for (a JVM costs seconds), and the verdicts are those the Spark path reaches."""
    from pipelines.jobs.validate import needs_spark
    from pipelines.runtime.session import LazySpark

    def no_spark() -> None:
        raise AssertionError("Spark was started for a small local log")

    from pipelines.jobs.validate import ValidateRequest
    from pipelines.jobs.validate.user_suites import load_suite
    from tests.spark.test_validate_suites import SAMPLE_SUITE

    request = ValidateRequest(path=str(cleaned), against=str(sample_dir))
    assert not needs_spark(request)
    # An operator suite reads through the source.
    assert needs_spark(dataclasses.replace(request, suites=(load_suite(SAMPLE_SUITE),)))
    report = validate(
        LazySpark(no_spark), str(cleaned), against=str(sample_dir), report_dir=str(tmp_path / "docs")
    )
    assert report.success and report.checked["latest_value_kept"] > 0
    lossy = without_claims(cleaned, tmp_path / "copy")
    lost = drop_segment(lossy, "clicks-0", 1)
    report = validate(LazySpark(no_spark), str(lossy), against=str(sample_dir), config=CONFIG, now_ms=NOW)
    assert not report.success and report.failed["uncleanable_record_kept"] == lost
    assert (tmp_path / "docs" / "index.html").exists()
