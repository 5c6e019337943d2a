"""`segpipe clean` as users run it: refusals before any work, dry run, run, chained passes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import read_log

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
NOW = 1_700_700_000_000


def segpipe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=600
    )


def test_bad_config_is_refused_before_any_work(tmp_path: Path, sample_dir: Path) -> None:
    for flags, message in [
        (["--set", "retention.mss=5"], "unknown topic config 'retention.mss'"),
        (["--set", "cleanup.policy=compress"], "cleanup.policy='compress' must be delete, compact"),
        (["--topic-set", "orders:retention.ms=abc"], "topic orders: retention.ms='abc'"),
        (["--topic-set", "orders"], "expected TOPIC:NAME=VALUE"),
        (["--config", "conf/missing.yaml"], "cannot read config file conf/missing.yaml"),
        (["--conf", "spark.ui.enabled"], "--conf 'spark.ui.enabled': expected NAME=VALUE"),
        (["--conf", "ui.enabled=true"], "not a Spark setting"),
    ]:
        proc = segpipe("clean", str(sample_dir), str(tmp_path / "out"), *flags)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_non_empty_destination_is_refused(tmp_path: Path, sample_dir: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    proc = segpipe("clean", str(sample_dir), str(tmp_path / "out"))
    assert proc.returncode == 2 and "not empty" in proc.stderr
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep.txt"]


def test_a_destination_inside_the_source_is_refused(tmp_path: Path, sample_dir: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    before = sorted(p.name for p in src.iterdir())
    proc = segpipe("clean", str(src), str(src / "cleaned"))
    assert proc.returncode == 2 and "is inside the source" in proc.stderr, proc.stderr
    assert sorted(p.name for p in src.iterdir()) == before


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path, sample_dir: Path) -> None:
    proc = segpipe(
        "clean", str(sample_dir), str(tmp_path / "out"), "--config", "conf/samples.yaml", "--now-ms", str(NOW), "--dry-run"
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    plan, _ = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{") :])
    parts = {p["partition"]: p for p in plan["partitions"]}
    assert set(parts) == {"clicks-0", "legacy-users-0", "orders-0", "orders-1"}
    assert parts["clicks-0"]["segments_deleted"] and parts["clicks-0"]["cleanable_range"] is None
    assert parts["orders-0"]["cleanable_range"][0] == 0 and parts["orders-0"]["groups"]
    assert not (tmp_path / "out").exists()
    assert proc.stdout.splitlines()[-1].startswith("segpipe: 4 partitions") and "dry run" in proc.stdout


def test_retention_that_empties_a_partition_is_said_and_now_takes_iso_times(
    tmp_path: Path, sample_dir: Path
) -> None:
    # No --now: the samples are years old, Kafka's 7-day retention.ms takes every segment.
    proc = segpipe("clean", str(sample_dir), str(tmp_path / "out"), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("segpipe: warning: retention")]
    assert len(warnings) == 4
    assert (
        "every segment of orders-0 (by retention_ms): its newest timestamp is 2023-11-21T22:13:20.000Z"
        in (proc.stdout)
    )
    assert proc.stdout.splitlines()[-1].endswith("4 warnings")
    # An ISO-8601 time is the same now as its epoch milliseconds.
    proc = segpipe(
        "clean", str(sample_dir), str(tmp_path / "out"), "--dry-run", "--now", "2023-11-23T00:00:00Z"
    )
    plan, _ = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{") :])
    assert plan["now_ms"] == 1_700_697_600_000 and "segpipe: warning" not in proc.stdout
    bad = segpipe("clean", str(sample_dir), str(tmp_path / "out"), "--now", "yesterday")
    assert bad.returncode == 2 and "expected epoch milliseconds or an ISO-8601 time" in bad.stderr


def test_clean_run_report_and_chained_pass(tmp_path: Path, sample_dir: Path) -> None:
    out1, out2 = tmp_path / "out1", tmp_path / "out2"
    report = tmp_path / "report.json"
    proc = segpipe(
        "clean", str(sample_dir), str(out1), "--config", "conf/samples.yaml", "--now-ms", str(NOW),
        "--report", str(report), "--master", "local[2]",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("segpipe cleaned log")]
    assert len(lines) == 4 and "size reduction" in lines[0] and "MB/sec" in lines[0]
    totals = proc.stdout.splitlines()[-1]
    assert totals.startswith("segpipe: 4 partitions") and "compaction removed superseded" in totals
    doc = json.loads(report.read_text())
    assert doc == json.loads((out1 / "_segpipe" / "report.json").read_text())
    orders = next(p for p in doc["partitions"] if p["partition"] == "orders-0")
    assert orders["removed_superseded"] > 0 and orders["records_out"] < orders["records_in"]
    assert orders["delete_horizons_stamped"] > 0
    assert segpipe("inspect", str(out1)).returncode == 0
    # The output is itself a valid source; the second pass after delete.retention.ms drops tombstones.
    # Spark settings from --conf reach the session: one of segpipe's defaults overridden, one added.
    events = tmp_path / "events"
    events.mkdir()
    proc = segpipe(
        "clean", str(out1), str(out2), "--config", "conf/samples.yaml", "--now-ms", str(NOW + 3_600_000),
        "--conf", "spark.python.unix.domain.socket.enabled=false",
        "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events.as_uri()}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert len(list(events.iterdir())) == 1  # this run's event log
    tombstones = [r for r in read_log(out2, "orders-0") if r["value"] is None and not r["is_control"]]
    before = [r for r in read_log(out1, "orders-0") if r["value"] is None and not r["is_control"]]
    assert len(tombstones) < len(before)


def test_corrupt_source_exits_2_with_file_and_position(tmp_path: Path, sample_dir: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    log = src / "clicks-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[100] ^= 0xFF  # inside the first batch
    log.write_bytes(bytes(data))
    proc = segpipe("clean", str(src), str(tmp_path / "out"), "--master", "local[1]")
    assert proc.returncode == 2, proc.stderr
    assert "CRC mismatch" in proc.stderr and "clicks-0/00000000000000000000.log at byte 0" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_the_same_command_runs_under_spark_submit(tmp_path: Path, sample_dir: Path) -> None:
    submit = Path(sys.executable).parent / "spark-submit"
    proc = subprocess.run(
        [str(submit), "--master", "local[1]", "pipelines/cli/__main__.py", "clean", str(sample_dir), str(tmp_path / "out"),
         "--config", "conf/samples.yaml", "--now-ms", str(NOW)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sum(line.startswith("segpipe cleaned log") for line in proc.stdout.splitlines()) == 4
    assert (tmp_path / "out" / "_segpipe" / "manifest.json").exists()
    assert segpipe("inspect", str(tmp_path / "out")).returncode == 0


def test_a_segment_without_a_time_index_is_said_to_age_by_its_file_time(
    tmp_path: Path, sample_dir: Path
) -> None:
    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    (src / "orders-1" / "00000000000000000000.timeindex").unlink()
    report = tmp_path / "plan.json"
    proc = segpipe(
        "clean", str(src), str(tmp_path / "out"), "--now-ms", str(NOW), "--dry-run", "--report", str(report)
    )
    assert proc.returncode == 0, proc.stderr
    expected = "orders-1: no time index entry in 00000000000000000000.log: their age for retention"
    assert f"segpipe: warning: {expected}" in proc.stdout
    assert any(w.startswith(expected) for w in json.loads(report.read_text())["warnings"])


def test_a_dry_run_refuses_what_a_run_refuses_and_writes_its_plan_to_the_report(
    tmp_path: Path, sample_dir: Path
) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    proc = segpipe("clean", str(sample_dir), str(tmp_path / "full"), "--dry-run", "--now-ms", str(NOW))
    assert proc.returncode == 2 and "not empty" in proc.stderr
    report = tmp_path / "plan.json"
    flags = ["--config", "conf/samples.yaml", "--now-ms", str(NOW), "--dry-run", "--report", str(report)]
    proc = segpipe("clean", str(sample_dir), str(tmp_path / "out"), *flags)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(report.read_text())
    assert doc["dry_run"] and {p["partition"] for p in doc["plan"]} == {
        "clicks-0",
        "legacy-users-0",
        "orders-0",
        "orders-1",
    }
    # An existing report file is never overwritten, and that is known before any work.
    again = segpipe("clean", str(sample_dir), str(tmp_path / "out"), *flags)
    assert again.returncode == 2 and f"{report} exists; segpipe does not overwrite it" in again.stderr
    assert json.loads(report.read_text()) == doc and not (tmp_path / "out").exists()


def test_stray_files_are_listed_carried_over_and_recorded(tmp_path: Path, sample_dir: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    (src / "orders-0" / "notes.txt").write_text("operator notes")
    (src / "orders-0" / "00000000000000000000.log.bak").write_bytes(b"old")
    inspect = segpipe("inspect", str(src))
    assert "not part of the log: 00000000000000000000.log.bak" in inspect.stdout
    assert "not part of the log: notes.txt" in inspect.stdout and inspect.returncode == 0
    out = tmp_path / "out"
    proc = segpipe("clean", str(src), str(out), "--config", "conf/samples.yaml", "--now-ms", str(NOW))
    assert proc.returncode == 0, proc.stderr
    assert (
        "orders-0: files that are not Kafka's, carried over unread: 00000000000000000000.log.bak, notes.txt"
        in (proc.stdout)
    )
    assert (out / "orders-0" / "notes.txt").read_text() == "operator notes"
    manifest = json.loads((out / "_segpipe" / "manifest.json").read_text())
    orders = next(p for p in manifest["partitions"] if p["partition"] == "orders-0")
    assert orders["stray_files"] == ["00000000000000000000.log.bak", "notes.txt"]
    report = json.loads((out / "_segpipe" / "report.json").read_text())
    assert any("notes.txt" in w for w in report["warnings"])
