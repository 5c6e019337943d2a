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
    plan = json.loads(proc.stdout[proc.stdout.index("{") :])
    parts = {p["partition"]: p for p in plan["partitions"]}
    assert set(parts) == {"clicks-0", "legacy-users-0", "orders-0", "orders-1"}
    assert parts["clicks-0"]["segments_deleted"] and parts["clicks-0"]["cleanable_range"] is None
    assert parts["orders-0"]["cleanable_range"][0] == 0 and parts["orders-0"]["groups"]
    assert not (tmp_path / "out").exists()


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
