"""A stop signal (a scheduler's SIGTERM, an operator's Ctrl-C) delivered at named points of a run
(SEGPIPE_FAULT=<point>:SIGTERM: deterministic, no sleeps): the run stops with 143 or 130 within a
bound, says what it published, leaves SRC as it was and DST absent or complete, no staging; a stop
during a publication lets it finish; a stop after a step of `segpipe run` published runs no later
step; the run again finishes the work with the bytes of an uninterrupted run."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import files_of, run_segpipe, samples_job

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
CLEAN = ["--config", "conf/samples.yaml", "--now", "2023-11-23", "--master", "local[2]"]
EXIT = {"SIGTERM": 143, "SIGINT": 130}
# What a stop may take: the run's own settling of its tasks, then the interpreter's exit (measured
# 0.3-2 s here on 2 busy cores; the bound leaves room for a loaded machine).
BOUND_S = 30.0


def stopped(*args: str, at: str, signal_name: str) -> tuple[Any, float]:
    began = time.monotonic()
    proc = run_segpipe(*args, fault=f"{at}:{signal_name}")
    return proc, time.monotonic() - began


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_a_stop_during_publication_lets_it_finish_then_stops(
    sample_dir: Path, tmp_path: Path, signal_name: str
) -> None:
    before = files_of(sample_dir)
    out = tmp_path / "out"
    proc, took = stopped(
        "clean", str(sample_dir), str(out), *CLEAN, at="mid-publish", signal_name=signal_name
    )
    assert proc.returncode == EXIT[signal_name], proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].endswith(f"; published before the stop: {out}")
    assert took < BOUND_S and "Traceback" not in proc.stderr
    whole = run_segpipe("clean", str(sample_dir), str(tmp_path / "whole"), *CLEAN)
    assert whole.returncode == 0, whole.stderr
    assert files_of(out) == files_of(tmp_path / "whole")  # complete, as an uninterrupted run's
    assert files_of(sample_dir) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "whole"]  # no staging left


def test_a_stop_before_publication_publishes_nothing(sample_dir: Path, tmp_path: Path) -> None:
    out, keys = tmp_path / "out", tmp_path / "keys.txt"
    keys.write_text("k0000000001\n")
    proc, took = stopped("erase", str(sample_dir), str(out), "--keys", str(keys),
                         at="before-publish", signal_name="SIGTERM")  # fmt: skip
    assert proc.returncode == 143 and took < BOUND_S, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == "segpipe: terminated; nothing was published"
    assert [p.name for p in tmp_path.iterdir()] == ["keys.txt"]


def _job(tmp_path: Path, src: Path) -> Path:
    return samples_job(
        tmp_path,
        f"name: stops\nsource: {src}\noutput: out\nremote: remote\n"
        "steps: [retention, compact, validate, tier]\nnow: 2023-11-23T00:40:00Z\nspark: {master: 'local[2]'}\n",
    )


@pytest.mark.parametrize(
    ("at", "signal_name", "done"),
    [
        (
            "after-step-compact",
            "SIGTERM",
            ["compact", "retention"],
        ),  # after a first publication in the process
        ("mid-publish", "SIGINT", []),  # during the compaction's publication: it finishes, unrecorded
        ("after-upload", "SIGTERM", ["compact", "retention", "validate"]),  # a later step, before its commit
    ],
)
def test_a_stop_in_a_job_runs_no_later_step_and_the_run_again_finishes_it(
    sample_dir: Path, tmp_path: Path, at: str, signal_name: str, done: list[str]
) -> None:
    job = _job(tmp_path, sample_dir)
    proc, took = stopped("run", str(job), at=at, signal_name=signal_name)
    assert proc.returncode == EXIT[signal_name], proc.stdout[-2000:] + proc.stderr[-3000:]
    assert took < BOUND_S + 20, took  # a job's steps start Spark's Python workers too
    said = proc.stderr.strip().splitlines()[-1]
    assert (
        said.endswith(f"published before the stop: {tmp_path / 'out'}")
        if at != "after-upload"
        else ("nothing was published" not in said)
    ), said
    state = json.loads((tmp_path / "out.run.json").read_text()) if done else {"steps": {}}
    assert sorted(state["steps"]) == sorted(done), state
    assert not (tmp_path / "remote").exists() or at == "after-upload"
    again = run_segpipe("run", str(job), "--json")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
    records = json.loads(again.stdout[again.stdout.index("{\n") :])
    assert records["tier"]["segments_uploaded"] > 0
    # The same output as a job never stopped.
    other = tmp_path / "other"
    other.mkdir()
    whole = run_segpipe("run", str(_job(other, sample_dir)))
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert files_of(tmp_path / "out") == files_of(other / "out")
    assert not [p for p in tmp_path.iterdir() if "staging" in p.name]


def _broker_dir(root: Path, partitions: list[str]) -> Path:
    """A stopped broker's log directory whose topics exist (what restore-kafka checks for)."""
    root.mkdir()
    (root / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=segpipe-tests\n")
    for name in partitions:
        (root / name).mkdir()
        (root / name / "partition.metadata").write_text("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")
    return root


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_a_stop_while_restore_kafka_replaces_files_lets_it_finish(
    sample_dir: Path, tmp_path: Path, signal_name: str
) -> None:
    parts = sorted(p.name for p in sample_dir.iterdir() if p.is_dir())
    broker = _broker_dir(tmp_path / "broker", parts)
    proc, took = stopped("restore-kafka", str(sample_dir), str(broker), "--backup", str(tmp_path / "b1"),
                         at="mid-restore-kafka", signal_name=signal_name)  # fmt: skip
    assert proc.returncode == EXIT[signal_name] and took < BOUND_S, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].endswith(f"published before the stop: {broker}")
    whole = _broker_dir(tmp_path / "whole", parts)
    done = run_segpipe("restore-kafka", str(sample_dir), str(whole), "--backup", str(tmp_path / "b2"))
    assert done.returncode == 0, done.stderr
    assert files_of(broker) == files_of(whole)  # every partition replaced, the checkpoints merged
