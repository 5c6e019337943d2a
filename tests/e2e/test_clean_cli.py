"""`segpipe clean` as users run it: refusals before any work, dry run, run, chained passes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.config.tuning import DRIVER_WORK
from segment_io.exit_codes import ExitCode
from segment_io.layout import META_DIR
from tests.helpers import (
    NO_JVM,
    clean_in_session,
    files_of,
    read_log,
    run_segpipe,
    samples_job,
    spark_jobs_of,
    spark_submit,
)

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
NOW = 1_700_700_000_000


def test_bad_config_is_refused_before_any_work(tmp_path: Path, sample_dir: Path) -> None:
    for flags, message in [
        (["--set", "retention.mss=5"], "unknown topic config 'retention.mss'"),
        (["--set", "cleanup.policy=compress"], "cleanup.policy='compress' must be delete, compact"),
        (["--topic-set", "orders:retention.ms=abc"], "topic orders: retention.ms='abc'"),
        (["--topic-set", "orders"], "expected TOPIC:NAME=VALUE"),
        (["--config", "conf/missing.yaml"], "cannot read config file conf/missing.yaml"),
        (["--conf", "spark.ui.enabled"], "--conf 'spark.ui.enabled': expected NAME=VALUE"),
        (["--conf", "ui.enabled=true"], "not a Spark setting"),
        (
            ["--set", "retention.ms=1week"],
            "retention.ms='1week' must be a number of milliseconds, or -1 (no time limit)",
        ),
        (
            ["--config", "conf/samples.yaml", "--topic-set", "ordrs:segment.bytes=1000"],
            "topic configs for ordrs",
        ),
    ]:
        proc = run_segpipe("clean", str(sample_dir), str(tmp_path / "out"), *flags)
        assert proc.returncode == ExitCode.REFUSED and message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_non_empty_destination_is_refused(tmp_path: Path, sample_dir: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    proc = run_segpipe("clean", str(sample_dir), str(tmp_path / "out"))
    assert proc.returncode == ExitCode.REFUSED and "not empty" in proc.stderr
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep.txt"]


def test_a_destination_inside_the_source_is_refused(tmp_path: Path, sample_dir: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    before = sorted(p.name for p in src.iterdir())
    proc = run_segpipe("clean", str(src), str(src / "cleaned"))
    assert proc.returncode == ExitCode.REFUSED and "is inside the source" in proc.stderr, proc.stderr
    assert sorted(p.name for p in src.iterdir()) == before


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path: Path, sample_dir: Path) -> None:
    proc = run_segpipe(
        "clean",
        str(sample_dir),
        str(tmp_path / "out"),
        "--config",
        "conf/samples.yaml",
        "--now-ms",
        str(NOW),
        "--dry-run",
        "--json",
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    plan, _ = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{") :])
    parts = {p["partition"]: p for p in plan["partitions"]}
    assert set(parts) == {"clicks-0", "legacy-users-0", "orders-0", "orders-1"}
    assert parts["clicks-0"]["segments_deleted"] and parts["clicks-0"]["cleanable_range"] is None
    assert parts["orders-0"]["cleanable_range"][0] == 0 and parts["orders-0"]["groups"]
    assert not (tmp_path / "out").exists()
    assert proc.stdout.splitlines()[-1].startswith("segpipe: 4 partitions") and "dry run" in proc.stdout
    # For people, the same plan is a table: one row per partition.
    table = run_segpipe(
        "clean",
        str(sample_dir),
        str(tmp_path / "out"),
        "--config",
        "conf/samples.yaml",
        "--now-ms",
        str(NOW),
        "--dry-run",
    )
    lines = table.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("partition"))
    rows = {line.split()[0]: line for line in lines[head + 1 : head + 5]}
    assert set(rows) == set(parts) and "(retention_ms)" in rows["clicks-0"] and "[0, " in rows["orders-0"]
    assert "{" not in table.stdout


def test_retention_that_empties_a_partition_is_said_and_now_takes_iso_times(
    tmp_path: Path, sample_dir: Path
) -> None:
    # No --now: the samples are years old, Kafka's 7-day retention.ms takes every segment.
    proc = run_segpipe("clean", str(sample_dir), str(tmp_path / "out"), "--dry-run")
    assert proc.returncode == ExitCode.OK, proc.stderr
    warnings = [line for line in proc.stdout.splitlines() if line.startswith("segpipe: warning: retention")]
    assert len(warnings) == 4
    assert (
        "every segment of orders-0 (by retention_ms): its newest timestamp is 2023-11-21T22:13:20.000Z"
        in (proc.stdout)
    )
    assert proc.stdout.splitlines()[-1].endswith("4 warnings")
    # An ISO-8601 time is the same now as its epoch milliseconds.
    proc = run_segpipe(
        "clean",
        str(sample_dir),
        str(tmp_path / "out"),
        "--dry-run",
        "--now",
        "2023-11-23T00:00:00Z",
        "--json",
    )
    plan, _ = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{") :])
    assert plan["now_ms"] == 1_700_697_600_000 and "segpipe: warning" not in proc.stdout
    bad = run_segpipe("clean", str(sample_dir), str(tmp_path / "out"), "--now", "yesterday")
    assert (
        bad.returncode == ExitCode.REFUSED and "expected epoch milliseconds or an ISO-8601 time" in bad.stderr
    )


def test_clean_run_report_and_chained_pass(tmp_path: Path, sample_dir: Path) -> None:
    out1, out2 = tmp_path / "out1", tmp_path / "out2"
    report = tmp_path / "report.json"
    proc = run_segpipe(
        "clean",
        str(sample_dir),
        str(out1),
        "--config",
        "conf/samples.yaml",
        "--now-ms",
        str(NOW),
        "--report",
        str(report),
        "--master",
        "local[2]",
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("segpipe cleaned log")]
    assert len(lines) == 4 and "size reduction" in lines[0] and "MB/sec" in lines[0]
    totals = proc.stdout.splitlines()[-1]
    assert totals.startswith("segpipe: 4 partitions") and "compaction removed superseded" in totals
    # Spark's start-up noise stays off stderr; the manifest records every topic's effective config.
    assert proc.stderr == "", proc.stderr
    configs = json.loads((out1 / META_DIR / "manifest.json").read_text())["configs"]
    assert configs["orders"]["cleanup.policy"] == {
        "value": "compact",
        "source": "conf/samples.yaml topics.orders",
    }
    assert configs["clicks"]["retention.bytes"] == {"value": -1, "source": "default"}
    doc = json.loads(report.read_text())
    assert doc == json.loads((out1 / META_DIR / "report.json").read_text())
    orders = next(p for p in doc["partitions"] if p["partition"] == "orders-0")
    assert orders["removed_superseded"] > 0 and orders["records_out"] < orders["records_in"]
    assert orders["delete_horizons_stamped"] > 0
    assert run_segpipe("inspect", str(out1)).returncode == ExitCode.OK
    # The output is itself a valid source; the second pass after delete.retention.ms drops tombstones.
    # Spark settings from --conf reach the session: one of segpipe's defaults overridden, one added
    # (the work made Spark's: this small a log is otherwise cleaned in the driver's threads).
    events = tmp_path / "events"
    events.mkdir()
    proc = run_segpipe(
        "clean",
        str(out1),
        str(out2),
        "--config",
        "conf/samples.yaml",
        "--now-ms",
        str(NOW + 3_600_000),
        "--conf",
        "spark.python.unix.domain.socket.enabled=false",
        "--conf",
        "spark.eventLog.enabled=true",
        "--conf",
        f"spark.eventLog.dir={events.as_uri()}",
        env={DRIVER_WORK.env: "off"},
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert len(list(events.iterdir())) == 1  # this run's event log
    tombstones = [r for r in read_log(out2, "orders-0") if r["value"] is None and not r["is_control"]]
    before = [r for r in read_log(out1, "orders-0") if r["value"] is None and not r["is_control"]]
    assert len(tombstones) < len(before)


def test_corrupt_source_exits_65_with_file_and_position(tmp_path: Path, sample_dir: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    log = src / "clicks-0" / "00000000000000000000.log"
    data = bytearray(log.read_bytes())
    data[100] ^= 0xFF  # inside the first batch
    log.write_bytes(bytes(data))
    proc = run_segpipe("clean", str(src), str(tmp_path / "out"), "--master", "local[1]")
    assert proc.returncode == ExitCode.DATA, proc.stderr
    assert "CRC mismatch" in proc.stderr and "clicks-0/00000000000000000000.log at byte 0" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_the_same_command_runs_under_spark_submit(tmp_path: Path, sample_dir: Path) -> None:
    """Submitted to a local master, a run works in the driver's own processes as a local run
    does (made to here by SEGPIPE_DRIVER_WORK=processes), without starting Spark in the
    submitter's JVM (where it could not start: a task there would need 2 of local[1]'s 1 core);
    its bytes are a direct run's. Spark under spark-submit: tests/cluster."""
    flags = ["--config", "conf/samples.yaml", "--now-ms", str(NOW)]
    proc = subprocess.run(
        spark_submit(
            "--master",
            "local[1]",
            "--conf",
            "spark.task.cpus=2",
            "pipelines/cli/__main__.py",
            "clean",
            str(sample_dir),
            str(tmp_path / "out"),
            *flags,
        ),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            DRIVER_WORK.env: "processes",
        },
    )
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    assert sum(line.startswith("segpipe cleaned log") for line in proc.stdout.splitlines()) == 4
    direct = run_segpipe("clean", str(sample_dir), str(tmp_path / "direct"), *flags)
    assert direct.returncode == ExitCode.OK, direct.stderr[-3000:]
    assert files_of(tmp_path / "out") == files_of(tmp_path / "direct")
    assert (tmp_path / "out" / META_DIR / "manifest.json").exists()
    inspect = run_segpipe("inspect", str(tmp_path / "out"))
    assert (
        inspect.returncode == ExitCode.OK and "time 1700" in inspect.stdout and "(2023-11-" in inspect.stdout
    )
    # A setting the driver JVM reads at its start is refused there: the JVM already runs.
    late = subprocess.run(
        spark_submit(
            "--master",
            "local[1]",
            "pipelines/cli/__main__.py",
            "clean",
            str(sample_dir),
            str(tmp_path / "out2"),
            "--conf",
            "spark.driver.memory=2g",
        ),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    # spark-submit passes its Python's stderr on through its own stdout.
    assert (
        late.returncode == ExitCode.REFUSED
        and "pass it to spark-submit's own --conf" in late.stdout + late.stderr
    )
    assert not (tmp_path / "out2").exists()


def test_a_submitted_job_file_runs_on_the_master_spark_submit_was_given(
    tmp_path: Path, sample_dir: Path
) -> None:
    """spark-submit's master wins over the job file's (a master nobody answers at, which a run
    on it would refuse at once), and a local one works in the driver's processes, no Spark."""
    nowhere = "spark://127.0.0.1:9"
    job = samples_job(
        tmp_path,
        f"name: submitted\nsource: {sample_dir}\noutput: {tmp_path}/out/{{run}}\n"
        f"steps: [retention, compact]\nnow: {NOW}\nspark: {{master: '{nowhere}', conf: {{spark.master: '{nowhere}'}}}}\n",
    )
    proc = subprocess.run(
        spark_submit(
            "--master",
            "local[1]",
            "--conf",
            "spark.task.cpus=2",
            "pipelines/cli/__main__.py",
            "run",
            str(job),
            "--run",
            "r1",
        ),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            DRIVER_WORK.env: "processes",
        },
    )
    assert proc.returncode == ExitCode.OK, proc.stdout[-3000:] + proc.stderr[-3000:]
    state = json.loads((tmp_path / "out" / "r1.run.json").read_text())
    assert state["steps"]["compact"]["state"] == "done"
    assert (tmp_path / "out" / "r1" / META_DIR / "manifest.json").exists()


def test_a_segment_without_a_time_index_is_said_to_age_by_its_file_time(
    tmp_path: Path, sample_dir: Path
) -> None:
    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    (src / "orders-1" / "00000000000000000000.timeindex").unlink()
    report = tmp_path / "plan.json"
    proc = run_segpipe(
        "clean", str(src), str(tmp_path / "out"), "--now-ms", str(NOW), "--dry-run", "--report", str(report)
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    expected = "orders-1: no time index entry in 00000000000000000000.log: their age for retention"
    assert f"segpipe: warning: {expected}" in proc.stdout
    assert any(w.startswith(expected) for w in json.loads(report.read_text())["warnings"])


def test_a_dry_run_refuses_what_a_run_refuses_and_writes_its_plan_to_the_report(
    tmp_path: Path, sample_dir: Path
) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("x")
    proc = run_segpipe("clean", str(sample_dir), str(tmp_path / "full"), "--dry-run", "--now-ms", str(NOW))
    assert proc.returncode == ExitCode.REFUSED and "not empty" in proc.stderr
    report = tmp_path / "plan.json"
    flags = ["--config", "conf/samples.yaml", "--now-ms", str(NOW), "--dry-run", "--report", str(report)]
    proc = run_segpipe("clean", str(sample_dir), str(tmp_path / "out"), *flags)
    assert proc.returncode == ExitCode.OK, proc.stderr
    doc = json.loads(report.read_text())
    assert doc["dry_run"] and {p["partition"] for p in doc["plan"]} == {
        "clicks-0",
        "legacy-users-0",
        "orders-0",
        "orders-1",
    }
    page = (tmp_path / "plan.html").read_text()  # the same run, as a page people read
    for p in doc["partitions"]:
        assert f'data-field="records_in" data-value="{p["records_in"]}"' in page
    # An existing report file is never overwritten, and that is known before any work.
    again = run_segpipe("clean", str(sample_dir), str(tmp_path / "out"), *flags)
    assert (
        again.returncode == ExitCode.REFUSED
        and f"{report} exists; segpipe does not overwrite it" in again.stderr
    )
    assert json.loads(report.read_text()) == doc and not (tmp_path / "out").exists()


def test_stray_files_are_listed_carried_over_and_recorded(tmp_path: Path, sample_dir: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    (src / "orders-0" / "notes.txt").write_text("operator notes")
    (src / "orders-0" / "00000000000000000000.log.bak").write_bytes(b"old")
    inspect = run_segpipe("inspect", str(src))
    assert "not part of the log: 00000000000000000000.log.bak" in inspect.stdout
    assert "not part of the log: notes.txt" in inspect.stdout and inspect.returncode == ExitCode.OK
    out = tmp_path / "out"
    proc = run_segpipe("clean", str(src), str(out), "--config", "conf/samples.yaml", "--now-ms", str(NOW))
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert (
        "orders-0: files that are not Kafka's, carried over unread: 00000000000000000000.log.bak, notes.txt"
        in (proc.stdout)
    )
    assert (out / "orders-0" / "notes.txt").read_text() == "operator notes"
    manifest = json.loads((out / META_DIR / "manifest.json").read_text())
    orders = next(p for p in manifest["partitions"] if p["partition"] == "orders-0")
    assert orders["stray_files"] == ["00000000000000000000.log.bak", "notes.txt"]
    report = json.loads((out / META_DIR / "report.json").read_text())
    assert any("notes.txt" in w for w in report["warnings"])


def test_config_files_and_flags_speak_kafka(tmp_path: Path, sample_dir: Path) -> None:
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("topics:\n  orders: [retention.ms\n")
    misspelt = tmp_path / "misspelt.yaml"
    misspelt.write_text("defualts:\n  retention.ms: 1\n")
    for flags, message in [
        (["--config", str(bad_yaml)], f"{bad_yaml} is not valid YAML: while parsing a flow sequence"),
        (["--config", str(misspelt)], "unknown key defualts (the keys are 'defaults' and 'topics')"),
    ]:
        proc = run_segpipe("clean", str(sample_dir), str(tmp_path / "out"), *flags)
        assert proc.returncode == ExitCode.REFUSED and message in proc.stderr, proc.stderr
        assert len(proc.stderr.splitlines()) == 1
    # Pasted Kafka configs that do not bear on cleaning are accepted; --print-config names sources.
    flags = [
        "--config",
        "conf/samples.yaml",
        "--set",
        "min.insync.replicas=2",
        "--topic-set",
        "orders:segment.bytes=2000",
    ]
    proc = run_segpipe("clean", str(sample_dir), str(tmp_path / "out"), *flags, "--print-config")
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert "  segment.bytes = 2000  (--topic-set)" in proc.stdout
    assert "  cleanup.policy = compact  (conf/samples.yaml topics.orders)" in proc.stdout
    assert "  retention.ms = -1  (conf/samples.yaml defaults)" in proc.stdout
    assert not (tmp_path / "out").exists()


def test_quiet_verbose_version_and_exit_codes_in_help(tmp_path: Path, sample_dir: Path) -> None:
    proc = run_segpipe(
        "-q",
        "clean",
        str(sample_dir),
        str(tmp_path / "out"),
        "--now-ms",
        str(NOW),
        "--set",
        "min.insync.replicas=2",
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    lines = proc.stdout.splitlines()
    assert (
        lines[0]
        == "segpipe: note: Kafka topic configs that do not bear on cleaning are ignored: min.insync.replicas"
    )
    assert all(line.startswith("segpipe:") for line in lines) and lines[-1].startswith(
        "segpipe: 4 partitions"
    )
    assert run_segpipe("--version").stdout.startswith("segpipe ")
    help_text = run_segpipe("--help").stdout
    assert (
        "exit codes:" in help_text
        and " 65  bad data stopped the run" in help_text
        and "130  interrupted" in help_text
    )


def test_an_unreachable_master_and_missing_credentials_fail_at_once(tmp_path: Path, sample_dir: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = run_segpipe(
        "clean", str(sample_dir), str(tmp_path / "out"), "--master", f"spark://127.0.0.1:{port}"
    )
    assert (
        proc.returncode == ExitCode.REFUSED
        and f"cannot reach the Spark master spark://127.0.0.1:{port}" in proc.stderr
    )
    assert len(proc.stderr.splitlines()) == 1
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_EC2_METADATA_DISABLED="true",
        AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "inspect", "s3://segpipe-no-such-bucket/logs"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=env,
    )
    assert proc.returncode == ExitCode.REFUSED and proc.stderr.startswith("error: NoCredentialsError"), (
        proc.stderr
    )
    assert len(proc.stderr.splitlines()) == 1


def test_spark_leaves_no_sockets_behind(tmp_path: Path, sample_dir: Path) -> None:
    import tempfile

    before = {p.name for p in Path(tempfile.gettempdir()).glob(".*.sock")}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipelines.cli",
            "clean",
            str(sample_dir),
            str(tmp_path / "out"),
            "--now-ms",
            str(NOW),
            "--set",
            "cleanup.policy=compact",
        ],  # a run that compacts: it starts Spark
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert {p.name for p in Path(tempfile.gettempdir()).glob(".*.sock")} <= before
    assert list(scratch.iterdir()) == []  # the run's own directory (sockets, log config) is gone


def test_interrupting_a_run_publishes_nothing_and_says_so_in_one_line(
    tmp_path: Path, sample_dir: Path
) -> None:
    import signal
    import time

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipelines.cli",
            "clean",
            str(sample_dir),
            str(tmp_path / "out"),
            "--now-ms",
            str(NOW),
            "--set",
            "cleanup.policy=compact",
        ],  # a run that compacts, on Spark: it starts a JVM
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=dict(os.environ, **{DRIVER_WORK.env: "off"}),
    )
    deadline = time.monotonic() + 60
    while not _has_java_child(proc.pid) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)  # bounded: until the JVM of the run exists
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == ExitCode.INTERRUPTED, err
    assert "segpipe: 4 partitions" not in out  # the run did not finish
    assert err.strip().splitlines()[-1] == "segpipe: interrupted; nothing was published"
    assert "Traceback" not in err and len(err.splitlines()) <= 3, err
    assert not (tmp_path / "out").exists()


def _has_java_child(pid: int) -> bool:
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().split()
        except OSError:
            continue
        if fields[3] == str(pid) and "java" in fields[1]:
            return True
    return False


def test_skip_partition_leaves_a_corrupt_partition_out_whole_and_exits_3(
    tmp_path: Path, sample_dir: Path
) -> None:
    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    log = src / "clicks-0" / "00000000000000000380.log"
    data = bytearray(log.read_bytes())
    data[200] ^= 0xFF
    log.write_bytes(bytes(data))
    flags = ["--config", "conf/samples.yaml", "--now-ms", str(NOW)]
    proc = run_segpipe("clean", str(src), str(tmp_path / "out"), *flags, "--on-corrupt", "skip-partition")
    assert proc.returncode == ExitCode.SKIPPED, proc.stderr
    assert "segpipe: skipped partition clicks-0: CRC mismatch: " in proc.stdout
    assert "clicks-0/00000000000000000380.log at byte 0" in proc.stdout
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        META_DIR,
        "legacy-users-0",
        "orders-0",
        "orders-1",
    ]
    assert "clicks" not in (out / "replication-offset-checkpoint").read_text()
    manifest = json.loads((out / META_DIR / "manifest.json").read_text())
    [skipped] = manifest["skipped"]
    assert (
        skipped["partition"] == "clicks-0"
        and skipped["position"] == 0
        and skipped["path"].endswith("380.log")
    )
    # The other partitions are exactly what a run without the damage publishes.
    ref = tmp_path / "ref"
    assert run_segpipe("clean", str(sample_dir), str(ref), *flags).returncode == ExitCode.OK
    for part in ("orders-0", "orders-1", "legacy-users-0"):
        assert {p.name: p.read_bytes() for p in (out / part).iterdir()} == {
            p.name: p.read_bytes() for p in (ref / part).iterdir()
        }
    # The default still stops the run and publishes nothing.
    failed = run_segpipe("clean", str(src), str(tmp_path / "out2"), *flags)
    assert failed.returncode == ExitCode.DATA and not (tmp_path / "out2").exists()


def test_skip_partition_finds_malformed_records_behind_a_valid_crc_before_writing(
    tmp_path: Path, sample_dir: Path
) -> None:
    from segment_io.format.batch import build_v2_batch
    from segment_io.format.record_columns import RecordColumns
    from tests.helpers import v2_batch, write_log

    src = tmp_path / "src"
    shutil.copytree(sample_dir, src)
    good = v2_batch(0, [(0, NOW, b"k", b"v", [])])
    section = RecordColumns.from_records([(0, 0, b"k", b"v", []), (1, 0, b"k2", b"v2", [])]).encode()
    # Three records declared, two present: the CRC is right, the records are not.
    bad = build_v2_batch(
        base_offset=1,
        records=section,
        records_count=3,
        last_offset_delta=2,
        base_timestamp=NOW,
        max_timestamp=NOW,
        attributes=0,
    )
    write_log(src, "broken-0", [[good, bad], [v2_batch(4, [(0, NOW, b"k", b"v", [])])]])
    flags = ["--now-ms", str(NOW), "--set", "cleanup.policy=compact", "--on-corrupt", "skip-partition"]
    proc = run_segpipe("clean", str(src), str(tmp_path / "out"), *flags)
    assert proc.returncode == ExitCode.SKIPPED, proc.stderr
    assert (
        f"segpipe: skipped partition broken-0: corrupt batch: {src}/broken-0/00000000000000000000.log at byte {len(good)}"
        in proc.stdout
    )
    assert not (tmp_path / "out" / "broken-0").exists() and (tmp_path / "out" / "orders-0").is_dir()


def test_a_run_without_stderr_still_runs(tmp_path: Path, sample_dir: Path) -> None:
    # Schedulers may start a job with stderr closed: the noise filter must not be what fails it.
    command = f"{sys.executable} -m pipelines.cli clean {sample_dir} {tmp_path / 'out'} --now-ms {NOW} --dry-run 2>&-"
    proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == ExitCode.OK and proc.stdout.splitlines()[-1].startswith("segpipe: 4 partitions")


def test_a_plan_with_nothing_for_spark_starts_no_jvm(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A JVM told to start with a 1 KB heap fails at once: a retention-only run (plain and
    --link), a --select kafka pass over a cleaned output, a small compaction (in the driver's
    threads) and one in the driver's processes (a local master's) finish with it anyway,
    byte-identical to the same runs with Spark; a compaction that must run on Spark cannot."""
    bad_jvm = [*NO_JVM, "--now-ms", str(NOW)]
    samples, retention = str(ROOT / "data" / "samples"), ["--set", "cleanup.policy=delete"]
    for name, extra in (("copy", []), ("link", ["--link"])):
        plain = run_segpipe(
            "clean", samples, str(tmp_path / f"{name}-spark"), *retention, *extra, "--now-ms", str(NOW)
        )
        proc = run_segpipe("clean", samples, str(tmp_path / name), *retention, *extra, *bad_jvm)
        assert (plain.returncode, proc.returncode) == (0, 0), proc.stderr
        assert files_of(tmp_path / name) == files_of(tmp_path / f"{name}-spark")
    config = ["--config", "conf/samples.yaml"]
    on_spark = {DRIVER_WORK.env: "off"}
    # The compaction on Spark, every stage its tasks: in this process's session (a command of its
    # own would start a JVM of its own for the same bytes).
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(DRIVER_WORK.env, "off")
        before = spark_jobs_of(spark, "compact")
        clean_in_session(spark, samples, tmp_path / "once", NOW)
        assert spark_jobs_of(spark, "compact") > before
    again = run_segpipe(
        "clean", str(tmp_path / "once"), str(tmp_path / "again"), *config, "--select", "kafka", *bad_jvm
    )
    assert again.returncode == ExitCode.OK, again.stderr
    assert files_of(tmp_path / "again") == files_of(tmp_path / "once")
    small = run_segpipe("clean", samples, str(tmp_path / "in-driver"), *config, *bad_jvm)
    assert small.returncode == ExitCode.OK, small.stderr
    assert files_of(tmp_path / "in-driver") == files_of(tmp_path / "once")
    # With a local master, what is too large for the driver's threads runs in its own processes
    # (made so here: SEGPIPE_DRIVER_WORK=processes), a partition larger than a core's share in
    # ranges of its groups; no JVM either.
    processes = run_segpipe(
        "clean",
        samples,
        str(tmp_path / "in-processes"),
        *config,
        "--master",
        "local[2]",
        *bad_jvm,
        env={DRIVER_WORK.env: "processes"},
    )
    assert processes.returncode == ExitCode.OK, processes.stderr
    assert files_of(tmp_path / "in-processes") == files_of(tmp_path / "once")
    refused = run_segpipe("clean", samples, str(tmp_path / "needs-spark"), *config, *bad_jvm, env=on_spark)
    assert refused.returncode != ExitCode.OK and not (tmp_path / "needs-spark").exists()


def test_a_range_that_fails_does_not_leave_the_others_waiting(tmp_path: Path) -> None:
    """A partition compacted in ranges of its segments, in the driver's processes, whose last range
    holds (in its last cleaned segment) a batch with a valid checksum but records that cannot be
    framed (the scan passes it; the key pass finds it). The first range waits for the last one's
    keys, which never come: the run still ends, with the typed error naming the file and byte,
    and nothing at DST."""
    import crc32c

    from segment_io.format.constants import ATTRIBUTES_OFFSET, CRC_OFFSET, V2_HEADER_SIZE
    from segment_io.generate import generate_log_dir
    from segment_io.generate_spec import TopicSpec
    from segment_io.segment.reader import SegmentReader
    from segment_io.storage import open_storage

    src = tmp_path / "src"
    spec = TopicSpec(
        "t", records=6000, keys=300, codecs=("none",), transactional_ratio=0.0, segment_bytes=48 * 1024
    )
    generate_log_dir(open_storage(str(src))[0], str(src), [spec])
    last = sorted((src / "t-0").glob("*.log"))[-2]  # the last sealed one (the active one is not cleaned)
    table = SegmentReader(open_storage(str(src))[0], str(last), 0).scan().table
    at = int(table.position[len(table) - 1])
    data = bytearray(last.read_bytes())
    data[at + V2_HEADER_SIZE] = 0x01  # the first record's length: −1 (zigzag)
    crc = crc32c.crc32c(bytes(data[at + ATTRIBUTES_OFFSET : at + int(table.size[len(table) - 1])]))
    data[at + CRC_OFFSET : at + CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    last.write_bytes(bytes(data))
    # Output groups of at most 96 KiB of input: several, so two ranges on two cores.
    sets = ["--set", "cleanup.policy=compact", "--set", "segment.bytes=98304", "--now-ms", str(NOW)]
    proc = run_segpipe(
        "clean",
        str(src),
        str(tmp_path / "out"),
        *sets,
        "--master",
        "local[2]",
        env={DRIVER_WORK.env: "processes"},
        timeout=300,
    )
    assert proc.returncode == ExitCode.DATA, proc.stderr[-3000:]
    # The record's place: the batch's header is before it.
    assert f"{last.name} at byte {at + V2_HEADER_SIZE}" in proc.stderr, proc.stderr[-3000:]
    assert not (tmp_path / "out").exists()


def _producer_log(root: Path, snapshot_entries: list[int] | None, clean_shutdown: bool = False) -> Path:
    """t-0: producer 7's only batch (key k1), superseded by a later plain batch, then a sealed end;
    a snapshot at offset 2 holding producers `snapshot_entries` (None: no snapshot)."""
    from segment_io.producer_snapshot import ProducerEntry, write_snapshot
    from tests.helpers import v2_batch, write_log

    now = 1_700_000_000_000
    write_log(
        root,
        "t-0",
        [
            [
                v2_batch(
                    0, [(0, now - 60_000, b"k1", b"a", [])], producer_id=7, producer_epoch=0, base_sequence=0
                ),
                v2_batch(1, [(0, now - 50_000, b"k1", b"b", [])]),
            ],
            [v2_batch(2, [(0, now - 40_000, b"k2", b"c", [])])],
        ],
    )
    if snapshot_entries is not None:
        entries = [ProducerEntry(pid, 0, 0, 0, 0, now - 60_000) for pid in snapshot_entries]
        (root / "t-0" / "00000000000000000002.snapshot").write_bytes(write_snapshot(entries))
    if clean_shutdown:
        (root / ".kafka_cleanshutdown").write_bytes(b"")
    return root


@pytest.mark.parametrize(
    ("snapshot", "clean_shutdown", "kept"),
    [(None, False, True), ([7], False, True), ([], False, False), (None, True, False)],
    ids=["no-snapshot", "snapshot-holds-it", "snapshot-lacks-it", "clean-shutdown-without-snapshots"],
)
def test_an_emptied_batch_keeps_its_header_only_for_a_producer_the_loading_broker_holds(
    tmp_path: Path, snapshot: list[int] | None, clean_shutdown: bool, kept: bool
) -> None:
    """Kafka's cleaner keeps a producer's last batch as an empty header only while its broker holds
    the producer: loaded from the latest snapshot and the batches after it; none from a cleanly
    stopped log without snapshots; the whole log replayed otherwise."""
    src = _producer_log(tmp_path / "src", snapshot, clean_shutdown)
    out = tmp_path / "out"
    proc = run_segpipe(
        "clean",
        str(src),
        str(out),
        "--set",
        "cleanup.policy=compact",
        "--set",
        "segpipe.last.segment.sealed=true",
        "--now",
        "1700000000000",
    )
    assert proc.returncode == ExitCode.OK, proc.stderr
    rows = read_log(out, "t-0")
    assert [r["offset"] for r in rows] == [1, 2]  # k1's first record is superseded either way
    batches = {
        int(line["base_offset"]): line
        for line in map(json.loads, run_segpipe("dump", str(out), "--batches").stdout.splitlines())
    }
    assert (0 in batches and batches[0]["records_count"] == 0 and batches[0]["producer_id"] == 7) == kept, (
        batches
    )
