"""The CLI as users run it: generate, inspect (--json), dump (records and batches), README demo."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def segpipe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *args], capture_output=True, text=True, cwd=ROOT
    )


def test_generate_inspect_dump(tmp_path: Path) -> None:
    dst = tmp_path / "logs"
    gen = segpipe(
        "generate", str(dst), "--topics", "a,b", "--partitions", "2", "--records", "500",
        "--codecs", "zstd,snappy", "--log-append-time", "--segment-bytes", "16384",
    )  # fmt: skip
    assert gen.returncode == 0, gen.stderr
    assert "a-0: log end offset" in gen.stdout
    assert segpipe("generate", str(dst)).returncode == 2  # refuses a non-empty destination

    inspect = segpipe("inspect", str(dst), "--json")
    assert inspect.returncode == 0, inspect.stdout
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

    dump = segpipe("dump", str(dst), "--topic", "a", "--partition", "1")
    assert dump.returncode == 0, dump.stderr
    rows = [json.loads(line) for line in dump.stdout.splitlines()]
    offsets = [r["offset"] for r in rows]
    assert offsets == sorted(offsets) and {r["partition"] for r in rows} == {1}
    required = {"topic", "partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers",
                "producer_id", "producer_epoch", "base_sequence", "is_transactional", "is_control"}  # fmt: skip
    assert all(required <= set(r) for r in rows)
    data = [r for r in rows if not r["is_control"]]
    assert {r["timestamp_type"] for r in data} == {"LogAppendTime"}
    batches = [
        json.loads(line)
        for line in segpipe("dump", str(dst), "--topic", "a", "--batches").stdout.splitlines()
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
        segpipe(
            "generate", str(dst), "--topics", "t", "--transactional-ratio", "0.5", "--records", "400"
        ).returncode
        == 0
    )
    rows = [json.loads(line) for line in segpipe("dump", str(dst)).stdout.splitlines()]
    control = [r for r in rows if r["is_control"]]
    assert control and {r["control_type"] for r in control} <= {"COMMIT", "ABORT"}
    assert all(r["is_transactional"] and r["producer_id"] >= 0 for r in control)


def test_readme_demo_command_runs() -> None:
    """The README's first set-up command (the venv already exists, so it only runs the job)."""
    env = dict(os.environ)
    proc = subprocess.run(["make", "demo"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "valid" in proc.stdout


def test_config_describe_lists_every_topic_config_with_its_default() -> None:
    from pipelines.config import TOPIC_CONFIGS, TopicConfig

    proc = segpipe("config", "describe", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {row["name"]: row for row in json.loads(proc.stdout)}
    assert list(rows) == [d.name for d in TOPIC_CONFIGS]
    assert {name: row["default"] for name, row in rows.items()} == TopicConfig().to_kafka()
    assert rows["retention.ms"]["default"] == 604_800_000 and rows["cleanup.policy"]["default"] == "delete"
    assert all(row["type"] and row["doc"] for row in rows.values())
    text = segpipe("config", "describe")
    assert text.returncode == 0 and "delete.retention.ms  (long ≥ 0, default 86400000)" in text.stdout
