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

from segment_io.exit_codes import ExitCode
from segment_io.layout import META_DIR
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
    assert whole.returncode == ExitCode.OK, whole.stderr
    assert files_of(out) == files_of(tmp_path / "whole")  # complete, as an uninterrupted run's
    assert files_of(sample_dir) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "whole"]  # no staging left


def test_a_stop_before_publication_publishes_nothing(sample_dir: Path, tmp_path: Path) -> None:
    out, keys = tmp_path / "out", tmp_path / "keys.txt"
    keys.write_text("k0000000001\n")
    proc, took = stopped(
        "erase", str(sample_dir), str(out), "--keys", str(keys), at="before-publish", signal_name="SIGTERM"
    )
    assert proc.returncode == ExitCode.TERMINATED and took < BOUND_S, proc.stderr[-3000:]
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
    assert again.returncode == ExitCode.OK, again.stdout[-2000:] + again.stderr[-3000:]
    records = json.loads(again.stdout[again.stdout.index("{\n") :])
    assert records["tier"]["segments_uploaded"] > 0
    # The same output as a job never stopped.
    other = tmp_path / "other"
    other.mkdir()
    whole = run_segpipe("run", str(_job(other, sample_dir)))
    assert whole.returncode == ExitCode.OK, whole.stderr[-3000:]
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
    proc, took = stopped(
        "restore-kafka",
        str(sample_dir),
        str(broker),
        "--backup",
        str(tmp_path / "b1"),
        at="mid-restore-kafka",
        signal_name=signal_name,
    )
    assert proc.returncode == EXIT[signal_name] and took < BOUND_S, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].endswith(f"published before the stop: {broker}")
    whole = _broker_dir(tmp_path / "whole", parts)
    done = run_segpipe("restore-kafka", str(sample_dir), str(whole), "--backup", str(tmp_path / "b2"))
    assert done.returncode == ExitCode.OK, done.stderr
    assert files_of(broker) == files_of(whole)  # every partition replaced, the checkpoints merged


TIER = [
    "--set",
    "retention.ms=-1",
    "--set",
    "local.retention.ms=0",
    "--now",
    "2023-11-26",
    "--master",
    "local[2]",
]


def _tiered(sample_dir: Path, root: Path) -> tuple[Path, Path]:
    """The samples tiered to a remote tier on the local disk (segments released but the active)."""
    import shutil

    log, remote = root / "log", root / "remote"
    shutil.copytree(sample_dir, log)
    proc = run_segpipe("tier", str(log), str(remote), *TIER)
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    return log, remote


def _as_log(root: Path, remote: Path, local: Path | None = None) -> dict[str, bytes]:
    """A remote tier (with its local log) as the plain log `restore` writes of it: what two tiers
    hold in common, whatever their objects' random names and commit times."""
    out = root / f"as-log-{remote.name}"
    if out.exists():  # restored already (the uninterrupted run's, compared with each stop's)
        return files_of(out)
    extra = [] if local is None else ["--local", str(local)]
    proc = run_segpipe("restore", str(remote), str(out), *extra, "--master", "local[2]")
    assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
    return files_of(out)


def _shape(remote: Path) -> dict[str, int]:
    """How many objects each folder of a remote tier holds (their names are random per upload)."""
    counts: dict[str, int] = {}
    for p in remote.rglob("*"):
        if p.is_file():
            key = str(p.parent.relative_to(remote))
            counts[key] = counts.get(key, 0) + 1
    return counts


# Per command: its arguments (SRC and DST as {src} and {dst}, built from a fresh copy each run),
# and the points a stop is delivered at. A run stopped at any of them and run again leaves what a
# run never stopped leaves.
MATRIX = [
    (
        "cut",
        ["cut", "{src}", "{dst}", "--until-offset", "1500"],
        "log",
        ["before-spark", "before-publish", "mid-publish"],
    ),
    ("tier", ["tier", "{src}", "{dst}", *TIER], "log", ["after-upload", "after-commit"]),
    (
        "clean --in-place",
        [
            "clean",
            "{dst}",
            "--in-place",
            "--set",
            "cleanup.policy=compact",
            "--now",
            "2023-11-26",
            "--master",
            "local[2]",
        ],
        "tier",
        ["in-place-uploaded", "mid-commit"],
    ),
    ("restore", ["restore", "{dst}", "{src}.restored", "--master", "local[2]"], "tier", ["mid-publish"]),
    (
        "tier --expire",
        ["tier", "--expire", "{dst}", "--set", "segpipe.remote.orphan.grace.ms=0"],
        "expired",
        ["mid-expire"],
    ),
]


@pytest.mark.parametrize(("name", "args", "start", "points"), MATRIX, ids=[m[0] for m in MATRIX])
def test_the_stop_matrix(
    sample_dir: Path, tmp_path: Path, name: str, args: list[str], start: str, points: list[str]
) -> None:
    def fresh(root: Path) -> tuple[list[str], Path, Path]:
        root.mkdir()
        if start == "log":
            import shutil

            src = root / "log"
            shutil.copytree(sample_dir, src)
            dst = root / "out"
        else:
            src, dst = _tiered(sample_dir, root)
            if start == "expired":  # an in-place clean leaves the replaced objects for expiry
                proc = run_segpipe(
                    "clean",
                    str(dst),
                    "--in-place",
                    "--set",
                    "cleanup.policy=compact",
                    "--now",
                    "2023-11-26",
                    "--master",
                    "local[2]",
                )
                assert proc.returncode == ExitCode.OK, proc.stderr[-3000:]
        return [a.format(src=src, dst=dst) for a in args], src, root

    whole_args, _, whole_root = fresh(tmp_path / "whole")
    done = run_segpipe(*whole_args)
    assert done.returncode == ExitCode.OK, done.stderr[-3000:]
    for n, point in enumerate(points):
        # Both signals where a command has one point; else they alternate over its points.
        for signal_name in ("SIGTERM", "SIGINT") if len(points) == 1 else (("SIGTERM", "SIGINT")[n % 2],):
            cmd, src, root = fresh(tmp_path / f"{n}-{signal_name}")
            before = files_of(src) if start == "log" and name != "tier" else None  # tier releases
            proc, took = stopped(*cmd, at=point, signal_name=signal_name)
            assert proc.returncode == EXIT[signal_name], f"{name} {point}: {proc.stderr[-3000:]}"
            assert took < BOUND_S and "Traceback" not in proc.stderr, (name, point, took)
            if before is not None:
                assert files_of(src) == before, (name, point)  # SRC never changes
            assert not [p for p in root.rglob("*staging*")], (name, point)
            # A run that published its output is done (a tier's release of local segments, after its
            # commit, is finished by the next run); any other runs again.
            if name == "tier" or "published before the stop" not in proc.stderr:
                again = run_segpipe(*cmd)
                assert again.returncode == ExitCode.OK, f"{name} {point} again: {again.stderr[-3000:]}"
            _same(name, root, whole_root)


def _same(name: str, root: Path, whole: Path) -> None:
    """What the stopped run (and its re-run) left equals what the uninterrupted one left."""
    if name in ("cut", "restore"):
        kept = "out" if name == "cut" else "log.restored"
        assert files_of(root / kept) == files_of(whole / kept), name
    elif name == "tier":
        assert _as_log(root, root / "out", root / "log") == _as_log(whole, whole / "out", whole / "log")
    elif name == "clean --in-place":
        assert _as_log(root, root / "remote") == _as_log(whole, whole / "remote")
    else:
        assert _shape(root / "remote") == _shape(whole / "remote")


def test_a_stop_after_an_erase_published_says_so_and_its_rerun_says_why_not(
    sample_dir: Path, tmp_path: Path
) -> None:
    out, keys = tmp_path / "out", tmp_path / "keys.txt"
    keys.write_text("k0000000001\n")
    proc, _ = stopped(
        "erase", str(sample_dir), str(out), "--keys", str(keys), at="after-publish", signal_name="SIGINT"
    )
    assert proc.returncode == ExitCode.INTERRUPTED, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == f"segpipe: interrupted; published before the stop: {out}"
    again = run_segpipe("erase", str(sample_dir), str(out), "--keys", str(keys))
    assert again.returncode == ExitCode.REFUSED
    run_id = json.loads((out / META_DIR / "manifest.json").read_text())["run_id"]
    assert (
        f"holds the published output of an earlier run (erase run {run_id} of {sample_dir})" in again.stderr
    )


def test_a_stopped_job_names_only_what_it_published_that_still_exists(
    sample_dir: Path, tmp_path: Path
) -> None:
    """[cut, erase, compact]: the cut log is removed once the erase is done; a stop in the compaction
    names the erased log it published, not the cut log that is gone."""
    (tmp_path / "keys.txt").write_text("k0000000001\n")
    job = tmp_path / "job.yaml"
    job.write_text(
        f"name: stops\nsource: {sample_dir}\noutput: out\nsteps: [cut, erase, compact]\n"
        "now: 2023-11-23T00:40:00Z\ncut: {until_time: 2023-11-18T09:33:20Z}\nerase: {keys: keys.txt}\n"
        "spark: {master: 'local[2]'}\nconfigs: {defaults: {cleanup.policy: compact}}\n"
    )
    proc, _ = stopped("run", str(job), at="after-keymap", signal_name="SIGTERM")
    assert proc.returncode == ExitCode.TERMINATED, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "removed" in proc.stdout and not (tmp_path / "out.cut").exists()
    said = proc.stderr.strip().splitlines()[-1]
    assert said == f"segpipe: terminated; published before the stop: {tmp_path / 'out.erased'}", said
