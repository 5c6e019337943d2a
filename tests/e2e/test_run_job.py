"""`segpipe run`: a job killed between its steps, and in the window between a clean's publication
and its record, resumes where it stopped and never redoes a finished step."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from segment_io.exit_codes import ExitCode
from segment_io.layout import META_DIR
from tests.helpers import run_segpipe, samples_job

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def _job(tmp_path: Path, src: Path) -> Path:
    return samples_job(
        tmp_path,
        f"name: resume\nsource: {src}\noutput: out/{{run}}\nremote: remote/{{run}}\n"
        "steps: [retention, compact, tier]\nnow: 2023-11-23T00:40:00Z\nspark: {master: 'local[2]'}\n",
    )


def _run_job(tmp_path: Path, text: str) -> tuple[Any, dict[str, Any]]:
    """Write the job file `text` and run it whole: the process and its steps' records."""
    job = tmp_path / "job.yaml"
    job.write_text(text)
    proc = run_segpipe("run", str(job), "--json")
    assert proc.returncode == ExitCode.OK, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(proc.stdout[proc.stdout.index("{\n") :])


def _state(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "out" / "r1.run.json").read_text())


def test_a_killed_job_resumes_and_never_redoes_a_finished_step(tmp_path: Path, sample_dir: Path) -> None:
    job = str(_job(tmp_path, sample_dir))
    out = tmp_path / "out" / "r1"

    early = run_segpipe("run", job, "--run", "r1", "--step", "tier")
    assert early.returncode == ExitCode.REFUSED and "runs after retention+compact" in early.stderr

    # Killed after the clean published its output, before the step was recorded.
    first = run_segpipe("run", job, "--run", "r1", fault="after-publish")
    assert first.returncode == -signal.SIGKILL
    manifest = json.loads((out / META_DIR / "manifest.json").read_text())
    assert not (tmp_path / "out" / "r1.run.json").exists()

    # The job file changed (and no state recorded the old one): that output is not this job's.
    original = Path(job).read_text()
    Path(job).write_text(original.replace("retention.ms: 259200000", "retention.ms: 259200001"))
    changed = run_segpipe("run", job, "--run", "r1")
    assert changed.returncode == ExitCode.REFUSED, changed.stderr[-2000:]
    assert "holds the published output of an earlier run (run " in changed.stderr, changed.stderr[-2000:]
    Path(job).write_text(original)

    # Resumed: the published output is recognised, recorded, not cleaned again; killed next
    # between the steps.
    second = run_segpipe("run", job, "--run", "r1", fault="after-step-compact")
    assert second.returncode == -signal.SIGKILL
    assert "was published by this run before it stopped" in second.stdout
    state = _state(tmp_path)
    assert state["steps"]["compact"]["state"] == "done" and state["steps"]["compact"]["adopted"]
    assert "tier" not in state["steps"] and state["now_ms"] == 1_700_700_000_000
    assert json.loads((out / META_DIR / "manifest.json").read_text()) == manifest
    assert not (tmp_path / "remote").exists()

    third = run_segpipe("run", job, "--run", "r1", "--json")
    assert third.returncode == ExitCode.OK, third.stderr
    assert "step retention+compact: done at" in third.stdout and "not run again" in third.stdout
    state = _state(tmp_path)
    assert state["steps"]["tier"]["state"] == "done" and state["steps"]["tier"]["segments_uploaded"] > 0
    assert set(state["steps"]["tier"]["partitions"]) == {"clicks-0", "legacy-users-0", "orders-0", "orders-1"}
    assert json.loads((out / META_DIR / "manifest.json").read_text()) == manifest
    assert (tmp_path / "remote" / "r1").is_dir()

    again = run_segpipe("run", job, "--run", "r1")
    assert again.returncode == ExitCode.OK and "every step of this run is done" in again.stdout
    assert _state(tmp_path) == state


def test_a_job_erases_then_compacts_and_validates_both(tmp_path: Path, sample_dir: Path) -> None:
    """steps: [erase, compact, validate]: the erase writes `<output>.erased`, the compaction reads it,
    and the validate step proves the compaction against it and the erasure against the source."""
    from tests.helpers import read_log

    (tmp_path / "keys.txt").write_text("k0000000001\nk0000000002\n")
    proc, records = _run_job(
        tmp_path,
        f"name: forget\nsource: {sample_dir}\noutput: out\nsteps: [erase, compact, validate]\n"
        "now: 2023-11-23T00:40:00Z\ntopics: [orders, clicks]\nerase: {keys: keys.txt}\n"
        "spark: {master: 'local[2]'}\nconfigs: {defaults: {cleanup.policy: compact}}\n",
    )
    assert "erasure proved" in proc.stdout and "validation passed" in proc.stdout
    assert records["erase"]["records_erased"] > 0 and records["erase"]["keys_not_found"] == 0
    for part in ("orders-0", "orders-1", "clicks-0"):
        for root in (tmp_path / "out.erased", tmp_path / "out"):
            rows = read_log(root, part)
            assert rows and not any(r["key"] in (b"k0000000001", b"k0000000002") for r in rows)
    assert not (tmp_path / "out" / "legacy-users-0").exists()  # the job's topics only


def test_a_job_cuts_then_compacts_as_the_commands_do(tmp_path: Path, sample_dir: Path) -> None:
    """steps: [cut, compact, validate]: the cut writes `<output>.cut`, the compaction reads it, and
    the output is byte for byte what `segpipe cut` then `segpipe clean` write."""
    from tests.helpers import files_of

    _, records = _run_job(
        tmp_path,
        f"name: as-it-was\nsource: {sample_dir}\noutput: out\nsteps: [cut, compact, validate]\n"
        "now: 2023-11-23T00:40:00Z\ncut: {until_time: 2023-11-18T09:33:20Z}\n"
        "spark: {master: 'local[2]'}\nconfigs: {defaults: {cleanup.policy: compact}}\n",
    )
    assert records["cut"]["partitions"]["orders-0"]["records_removed"] > 0
    by_hand = run_segpipe(
        "cut", str(sample_dir), str(tmp_path / "cut"), "--until-time", "2023-11-18T09:33:20Z"
    )
    assert by_hand.returncode == ExitCode.OK, by_hand.stderr
    config = tmp_path / "compact.yaml"
    config.write_text("defaults:\n  cleanup.policy: compact\n")
    clean = run_segpipe(
        "clean",
        str(tmp_path / "cut"),
        str(tmp_path / "clean"),
        "--config",
        str(config),
        "--now",
        "2023-11-23T00:40:00Z",
    )
    assert clean.returncode == ExitCode.OK, clean.stderr

    def log_files(root: Path) -> dict[str, bytes]:
        return {k: v for k, v in files_of(root).items() if not k.startswith(META_DIR)}

    assert log_files(tmp_path / "out.cut") == log_files(tmp_path / "cut")
    assert log_files(tmp_path / "out") == log_files(tmp_path / "clean")


def test_a_job_whose_suite_ge_cannot_build_is_refused_before_its_first_step(
    tmp_path: Path, sample_dir: Path
) -> None:

    doc = json.loads((ROOT / "conf" / "suites" / "orders.json").read_text())
    doc["expectations"].append({"type": "expect_column_values_to_be_purple", "kwargs": {"column": "key"}})
    (tmp_path / "purple.json").write_text(json.dumps(doc))
    job = tmp_path / "job.yaml"
    job.write_text(
        f"name: judged\nsource: {sample_dir}\noutput: out\nsteps: [compact, validate]\n"
        "now: 2023-11-23T00:40:00Z\nsuites: [purple.json]\n"
        "spark: {master: 'local[2]'}\nconfigs: {defaults: {cleanup.policy: compact}}\n"
    )
    proc = run_segpipe("run", str(job))
    assert proc.returncode == ExitCode.REFUSED, proc.stderr[-3000:]
    assert "expect_column_values_to_be_purple" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_a_job_that_cuts_then_erases_leaves_no_copy_of_the_listed_keys_behind(
    tmp_path: Path, sample_dir: Path
) -> None:
    """steps: [cut, erase, compact, validate]: the cut log the erase read held the listed keys; once
    the erase (proved before it published) is done it is removed, and no file the job wrote holds
    a listed key. The erase's record names the copy that remains: the source."""
    from tests.helpers import read_log

    listed = [b"k0000000001", b"k0000000002"]
    (tmp_path / "keys.txt").write_bytes(b"".join(k + b"\n" for k in listed))
    proc, records = _run_job(
        tmp_path,
        f"name: forget-then\nsource: {sample_dir}\noutput: out\nsteps: [cut, erase, compact, validate]\n"
        "now: 2023-11-23T00:40:00Z\ncut: {until_time: 2023-11-18T09:33:20Z}\ntopics: [orders, clicks]\n"
        "erase: {keys: keys.txt}\nspark: {master: 'local[2]'}\nconfigs: {defaults: {cleanup.policy: compact}}\n",
    )
    said = proc.stdout
    assert "erasure proved" in said and "removed" in said and "validation passed" in said
    assert records["erase"]["records_erased"] > 0 and records["erase"]["proved"]
    assert records["erase"]["remaining_copies"] == [str(sample_dir)]
    assert not (tmp_path / "out.cut").exists()
    written = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert sorted(p.name for p in written) == ["out", "out.erased"]
    for root in written:
        for part in (p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("_")):
            assert not any(r["key"] in listed for r in read_log(root, part)), (root, part)
    again = run_segpipe("run", str(tmp_path / "job.yaml"))
    assert again.returncode == ExitCode.OK and "every step of this run is done" in again.stdout


def test_a_replaced_or_lost_intermediate_is_refused_and_redo_makes_it_again(
    tmp_path: Path, sample_dir: Path
) -> None:
    """A later step reads an earlier step's output only where it is the one that step recorded
    (run id, manifest digest): another erased log put in its place, or none, is refused, naming
    `--redo`, which removes only outputs proven to be the recorded ones."""
    import shutil

    from tests.helpers import read_log

    listed = [b"k0000000001", b"k0000000002"]
    (tmp_path / "keys.txt").write_bytes(b"".join(k + b"\n" for k in listed))
    (tmp_path / "other.txt").write_bytes(b"k0000000003\n")
    job = tmp_path / "job.yaml"
    job.write_text(
        f"name: forget\nsource: {sample_dir}\noutput: out\nsteps: [erase, compact]\n"
        "now: 2023-11-23T00:40:00Z\ntopics: [orders, clicks]\nerase: {keys: keys.txt}\n"
        "spark: {master: 'local[2]'}\nconfigs: {defaults: {cleanup.policy: compact}}\n"
    )
    first = run_segpipe("run", str(job), "--step", "erase")
    assert first.returncode == ExitCode.OK, first.stderr
    recorded = json.loads((tmp_path / "out.run.json").read_text())["steps"]["erase"]["output"]
    assert recorded["url"] == str(tmp_path / "out.erased") and len(recorded["manifest_sha256"]) == 64
    # Another erase's output (of another key) put in the erased log's place between two runs.
    other = run_segpipe(
        "erase", str(sample_dir), str(tmp_path / "other"), "--keys", str(tmp_path / "other.txt")
    )
    assert other.returncode == ExitCode.OK, other.stderr
    shutil.rmtree(tmp_path / "out.erased")
    (tmp_path / "other").rename(tmp_path / "out.erased")
    replaced = run_segpipe("run", str(job))
    assert replaced.returncode == ExitCode.REFUSED, replaced.stdout
    assert f"step compact reads {tmp_path / 'out.erased'}, which step erase published" in replaced.stderr
    assert "it was replaced" in replaced.stderr and "--redo erase" in replaced.stderr
    assert not (tmp_path / "out").exists()
    # --redo removes only what is proven the step's own: this is not.
    refused = run_segpipe("run", str(job), "--redo", "erase")
    assert refused.returncode == ExitCode.REFUSED and "move it aside" in refused.stderr, refused.stderr
    assert (tmp_path / "out.erased" / META_DIR / "manifest.json").exists()
    shutil.rmtree(tmp_path / "out.erased")
    lost = run_segpipe("run", str(job))
    assert (
        lost.returncode == ExitCode.REFUSED and "it is gone" in lost.stderr and "--redo erase" in lost.stderr
    )
    redone = run_segpipe("run", str(job), "--redo", "erase")
    assert redone.returncode == ExitCode.OK, redone.stdout[-2000:] + redone.stderr[-2000:]
    assert "step erase: starting" in redone.stdout and "step compact: starting" in redone.stdout
    for root in (tmp_path / "out.erased", tmp_path / "out"):
        for part in ("orders-0", "orders-1", "clicks-0"):
            assert not any(r["key"] in listed for r in read_log(root, part)), (root, part)
    # Its own outputs, redone again: removed and made again, the same records.
    before = {p: read_log(tmp_path / "out", p) for p in ("orders-0", "clicks-0")}
    again = run_segpipe("run", str(job), "--redo", "compact")
    assert again.returncode == ExitCode.OK, again.stderr[-2000:]
    assert f"removed {tmp_path / 'out'}, step compact's output" in again.stdout
    assert {p: read_log(tmp_path / "out", p) for p in ("orders-0", "clicks-0")} == before
