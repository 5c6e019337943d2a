"""The CLI as users run it: generate, inspect (--json), dump (records and batches), README demo."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from segment_io.exit_codes import ExitCode
from segment_io.generate import generate_log_dir
from segment_io.generate_spec import TopicSpec
from segment_io.storage import open_storage
from tests.helpers import run_segpipe

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def test_generate_inspect_dump(tmp_path: Path) -> None:
    dst = tmp_path / "logs"
    gen = run_segpipe(
        "generate",
        str(dst),
        "--topics",
        "a,b",
        "--partitions",
        "2",
        "--records",
        "500",
        "--codecs",
        "zstd,snappy",
        "--log-append-time",
        "--segment-bytes",
        "16384",
    )
    assert gen.returncode == ExitCode.OK, gen.stderr
    assert "a-0: log end offset" in gen.stdout
    assert run_segpipe("generate", str(dst)).returncode == ExitCode.REFUSED  # refuses a non-empty destination

    inspect = run_segpipe("inspect", str(dst), "--json")
    assert inspect.returncode == ExitCode.OK, inspect.stdout
    doc = json.loads(inspect.stdout)
    assert doc["valid"] and [f"{p['topic']}-{p['partition']}" for p in doc["partitions"]] == [
        "a-0",
        "a-1",
        "b-0",
        "b-1",
    ]
    seg = doc["partitions"][0]["segments"][0]
    assert {"zstd", "snappy"} <= set(seg["codecs"]) <= {"zstd", "snappy", "none"}  # none: markers
    assert seg["first_offset"] == 0

    dump = run_segpipe("dump", str(dst), "--topic", "a", "--partition", "1")
    assert dump.returncode == ExitCode.OK, dump.stderr
    rows = [json.loads(line) for line in dump.stdout.splitlines()]
    offsets = [r["offset"] for r in rows]
    assert offsets == sorted(offsets) and {r["partition"] for r in rows} == {1}
    required = {
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestamp_type",
        "key",
        "value",
        "headers",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "is_transactional",
        "is_control",
    }
    assert all(required <= set(r) for r in rows)
    data = [r for r in rows if not r["is_control"]]
    assert {r["timestamp_type"] for r in data} == {"LogAppendTime"}
    batches = [
        json.loads(line)
        for line in run_segpipe("dump", str(dst), "--topic", "a", "--batches").stdout.splitlines()
    ]
    max_ts = {b["base_offset"]: b["max_timestamp"] for b in batches if b["partition"] == 1}
    # A consumer sees the batch's max timestamp (the broker's append time) for LogAppendTime.
    for r in data[:50]:
        batch_base = r["batch_base_offset"]
        assert r["timestamp"] == max_ts[batch_base]
    assert all(base64.b64decode(r["key"]).startswith(b"k") for r in data if r["key"] is not None)


def test_dump_marks_control_records(tmp_path: Path) -> None:
    dst = tmp_path / "logs"
    assert (
        run_segpipe(
            "generate", str(dst), "--topics", "t", "--transactional-ratio", "0.5", "--records", "400"
        ).returncode
        == ExitCode.OK
    )
    rows = [json.loads(line) for line in run_segpipe("dump", str(dst)).stdout.splitlines()]
    control = [r for r in rows if r["is_control"]]
    assert control and {r["control_type"] for r in control} <= {"COMMIT", "ABORT"}
    assert all(r["is_transactional"] and r["producer_id"] >= 0 for r in control)


def test_readme_demo_command_runs() -> None:
    """The README's first set-up command (the venv already exists, so it only runs the job)."""
    env = dict(os.environ)
    proc = subprocess.run(["make", "demo"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert proc.returncode == ExitCode.OK, proc.stdout + proc.stderr
    assert "valid" in proc.stdout


def test_config_describe_lists_every_topic_config_with_its_default() -> None:
    from pipelines.config import TOPIC_CONFIGS, TopicConfig

    proc = run_segpipe("config", "describe", "--json")
    assert proc.returncode == ExitCode.OK, proc.stderr
    rows = {row["name"]: row for row in json.loads(proc.stdout)}
    assert list(rows) == [d.name for d in TOPIC_CONFIGS]
    assert {name: row["default"] for name, row in rows.items()} == TopicConfig().to_kafka()
    assert rows["retention.ms"]["default"] == 604_800_000 and rows["cleanup.policy"]["default"] == "delete"
    assert all(row["type"] and row["doc"] for row in rows.values())
    text = run_segpipe("config", "describe")
    assert (
        text.returncode == ExitCode.OK and "delete.retention.ms  (long ≥ 0, default 86400000)" in text.stdout
    )


def test_a_segment_file_is_inspected_and_dumped_and_refused_as_a_source(tmp_path: Path) -> None:
    root = ROOT / "data" / "samples"
    log = root / "orders-1" / "00000000000000000000.log"
    proc = run_segpipe("inspect", str(log))
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert proc.stdout.startswith("orders-1: 1 segments") and "00000000000000000000.log" in proc.stdout
    index = run_segpipe("inspect", str(log.with_suffix(".index")))
    assert index.stdout == proc.stdout  # an index file stands for its segment
    records = [json.loads(line) for line in run_segpipe("dump", str(log)).stdout.splitlines()]
    whole = [
        json.loads(line)
        for line in run_segpipe(
            "dump", str(root), "--topic", "orders", "--partition", "1"
        ).stdout.splitlines()
    ]
    assert records and records == [r for r in whole if r["offset"] < records[-1]["offset"] + 1]
    clean = run_segpipe("clean", str(log), str(tmp_path / "out"))
    assert (
        clean.returncode == ExitCode.REFUSED
        and "is a file; give the log directory or the partition directory" in clean.stderr
    )
    assert "Traceback" not in clean.stderr and not (tmp_path / "out").exists()
    not_segment = run_segpipe("inspect", str(root / "orders-1" / "leader-epoch-checkpoint"))
    assert not_segment.returncode == ExitCode.REFUSED and "not a segment file" in not_segment.stderr


def test_empty_directories_say_so(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    proc = run_segpipe("inspect", str(tmp_path / "logs"))
    assert proc.returncode == ExitCode.OK and "no partition directories" in proc.stdout
    (tmp_path / "orders-3").mkdir()
    proc = run_segpipe("inspect", str(tmp_path / "orders-3"))
    assert proc.returncode == ExitCode.OK and proc.stdout.startswith(
        "orders-3: 0 segments, 0 bytes, 0 records"
    )


def test_filters_that_match_nothing_are_named_and_misnamed_topic_configs_refused(tmp_path: Path) -> None:
    root = ROOT / "data" / "samples"
    proc = run_segpipe("dump", str(root), "--topic", "ordrs")
    assert proc.returncode == ExitCode.REFUSED and proc.stdout == ""  # refused, as the data source refuses it
    assert (
        "matches --topic/--partition (partitions there: clicks-0, legacy-users-0, orders-0, orders-1)"
        in proc.stderr
    )
    limited = run_segpipe("dump", str(root), "--limit", "-1")
    assert (
        limited.returncode == ExitCode.REFUSED and "--limit -1: expected a number of lines" in limited.stderr
    )
    assert "cut" in run_segpipe("--help").stdout.split("run a job file's steps (")[1].split(")")[0]
    for flags in (["--topic-set", "ordrs:retention.ms=1000"], ["--config", str(tmp_path / "c.yaml")]):
        (tmp_path / "c.yaml").write_text("topics:\n  ordrs:\n    retention.ms: 1000\n")
        proc = run_segpipe("clean", str(root), str(tmp_path / "out"), *flags)
        assert proc.returncode == ExitCode.REFUSED, proc.stderr
        assert (
            "topic configs for ordrs, which" in proc.stderr
            and "(topics there: clicks, legacy-users, orders)" in proc.stderr
        )


def test_compressed_legacy_wrappers_count_their_records_and_show_their_offsets() -> None:
    root = ROOT / "data" / "samples"
    report = json.loads(run_segpipe("inspect", str(root), "--json").stdout)
    legacy = next(p for p in report["partitions"] if p["topic"] == "legacy-users")
    records = [
        json.loads(line)
        for line in run_segpipe("dump", str(root), "--topic", "legacy-users").stdout.splitlines()
    ]
    assert sum(s["records"] for s in legacy["segments"]) == len(records)
    batches = [
        json.loads(line)
        for line in run_segpipe("dump", str(root), "--topic", "legacy-users", "--batches").stdout.splitlines()
    ]
    wrappers = [b for b in batches if b["magic"] < 2 and b["codec"] != "none"]
    assert wrappers and all(b["base_offset"] >= 0 and b["records_count"] > 1 for b in wrappers)
    assert sum(b["records_count"] for b in batches) == len(records)
    firsts = {r["batch_base_offset"] for r in records}
    assert {b["base_offset"] for b in wrappers} <= firsts


def test_dump_selects_by_offset_and_time_and_decodes_as_asked() -> None:
    root = ROOT / "data" / "samples"
    everything = [
        json.loads(line)
        for line in run_segpipe(
            "dump", str(root), "--topic", "orders", "--partition", "0"
        ).stdout.splitlines()
    ]
    lo, hi = everything[10]["offset"], everything[20]["offset"]
    picked = run_segpipe(
        "dump",
        str(root),
        "--topic",
        "orders",
        "--partition",
        "0",
        "--from-offset",
        str(lo),
        "--to-offset",
        str(hi),
        "--decode",
        "hex",
    )
    rows = [json.loads(line) for line in picked.stdout.splitlines()]
    assert [r["offset"] for r in rows] == [r["offset"] for r in everything[10:21]]
    assert rows[0]["key"] == base64.b64decode(everything[10]["key"]).hex()
    t0, t1 = everything[10]["timestamp"], everything[20]["timestamp"]
    iso = datetime.fromtimestamp(t0 / 1000, tz=UTC).isoformat()
    timed = run_segpipe(
        "dump", str(root), "--topic", "orders", "--partition", "0", "--from-time", iso, "--to-time", str(t1)
    )
    assert {json.loads(line)["offset"] for line in timed.stdout.splitlines()} == {
        r["offset"] for r in everything if t0 <= r["timestamp"] <= t1
    }
    assert run_segpipe("dump", str(root), "--limit", "0").stdout == ""
    batches = [
        json.loads(line)
        for line in run_segpipe("dump", str(root), "--topic", "orders", "--batches").stdout.splitlines()
    ]
    assert {"codec", "is_transactional", "is_control", "timestamp_type"} <= set(batches[0])
    assert any(b["is_control"] and b["is_transactional"] for b in batches)


def test_generate_refuses_impossible_options_before_writing(tmp_path: Path) -> None:
    for flags, message in [
        (["--codecs", "brotli"], "unknown codec 'brotli'"),
        (["--value-min", "100", "--value-max", "10"], "value_max (10) is below value_min (100)"),
        (["--keys", "0"], "keys must be at least 1 (got 0)"),
        (["--tombstone-ratio", "1.5"], "tombstone_ratio must be within 0..1 (got 1.5)"),
        (["--topics", "bad/name"], "topic name 'bad/name': Kafka allows"),
        (["--partitions", "0"], "partitions must be at least 1 (got 0)"),
    ]:
        proc = run_segpipe("generate", str(tmp_path / "dst"), *flags)
        assert proc.returncode == ExitCode.REFUSED and message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and not (tmp_path / "dst").exists()
    # Without --topics the options shape the sample set (all four of its topics).
    proc = run_segpipe("generate", str(tmp_path / "dst"), "--records", "30")
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert sorted(p.name for p in (tmp_path / "dst").iterdir() if p.is_dir()) == [
        "clicks-0",
        "legacy-users-0",
        "orders-0",
        "orders-1",
    ]


def test_dump_of_a_range_reads_through_the_indexes_and_survives_a_missing_one(tmp_path: Path) -> None:
    """A range deep inside a partition of many segments: the same records as a filtered whole
    dump; with an index gone, the same records again and one warning naming it."""
    root = tmp_path / "log"
    storage, path = open_storage(str(root))
    generate_log_dir(storage, path, [TopicSpec("orders", records=3000, segment_bytes=24 * 1024)], seed=4)
    everything = [json.loads(line) for line in run_segpipe("dump", str(root)).stdout.splitlines()]
    lo, hi = everything[2000]["offset"], everything[2100]["offset"]
    expected = [r for r in everything if lo <= r["offset"] <= hi]
    flags = ("--from-offset", str(lo), "--to-offset", str(hi))
    picked = run_segpipe("dump", str(root), *flags)
    assert [json.loads(line) for line in picked.stdout.splitlines()] == expected
    assert picked.stderr == ""
    holding = max(p for p in (root / "orders-0").glob("*.log") if int(p.stem) <= lo)
    holding.with_suffix(".index").unlink()
    again = run_segpipe("dump", str(root), *flags)
    assert [json.loads(line) for line in again.stdout.splitlines()] == expected
    assert again.stderr.count("warning") == 1 and "no .index" in again.stderr, again.stderr


def test_the_command_freezes_its_objects_before_the_interpreter_exits() -> None:
    """`segpipe` (the console script, `python -m pipelines.cli`) returns main's exit code with the
    process's objects frozen out of the collector, which the exit would otherwise walk."""
    import sys

    probe = (
        "import atexit, gc, sys; from pipelines.cli.main import command; "
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0)); "
        "sys.argv = ['segpipe', 'config', 'describe', '--json']; sys.exit(command())"
    )
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert proc.stdout.rstrip().endswith("frozen True") and json.loads(proc.stdout.rsplit("]", 1)[0] + "]")


def test_the_application_file_runs_its_command_once(tmp_path: Path) -> None:
    """Run as a file (what spark-submit and a scheduler's stand-ins run), the command runs once: a
    local master's worker processes fork from a server that imports the file again, and must not
    run the command there a second time."""
    import subprocess
    import sys

    from pipelines.config.tuning import DRIVER_WORK

    job = tmp_path / "job.yaml"
    job.write_text(
        f"name: once\nsource: {ROOT / 'data' / 'samples'}\noutput: {tmp_path / 'out'}\nsteps: [compact]\n"
        "now: 2023-11-23T00:40:00Z\nconfigs: {defaults: {cleanup.policy: compact}}\n"
    )
    env = {**os.environ, DRIVER_WORK.env: "processes", "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "pipelines" / "cli" / "__main__.py"),
            "run",
            str(job),
            "--master",
            "local[2]",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    assert proc.stdout.count("segpipe: job once") == 1, proc.stdout
    assert proc.stdout.count("step compact: done") == 1, proc.stdout
