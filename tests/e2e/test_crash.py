"""A run killed for real (SIGKILL of the CLI, its JVM and its workers at once) at each stage:
SRC untouched, DST absent or complete, and the next run removes the debris and publishes the
same bytes as a run that was never interrupted. SIGTERM stops a run cleanly."""

from __future__ import annotations

import hashlib
import signal
import subprocess
from pathlib import Path

import pytest

from segment_io.exit_codes import ExitCode
from segment_io.layout import META_DIR
from tests.helpers import run_segpipe, sigterm_once_staged

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
NOW = 1_700_700_000_000
FLAGS = ["--config", "conf/samples.yaml", "--now-ms", str(NOW), "--master", "local[2]"]


def run(src: Path, dst: Path, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_segpipe("clean", str(src), str(dst), *FLAGS, fault=fault)


def tree(root: Path) -> dict[str, str]:
    """Every file under `root` by relative path, with its SHA-256 (run-specific metadata left out)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.parent.name != META_DIR
    }


@pytest.fixture(scope="module")
def reference(sample_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("reference") / "out"
    proc = run(sample_dir, out)
    assert proc.returncode == ExitCode.OK, proc.stderr
    return tree(out)


@pytest.mark.parametrize(
    "stage", ["after-scan", "after-keymap", "mid-rewrite", "before-publish", "after-publish"]
)
def test_a_kill_at_any_stage_loses_nothing(
    stage: str, sample_dir: Path, tmp_path: Path, reference: dict[str, str]
) -> None:
    src_before = tree(sample_dir)
    out = tmp_path / "out"
    killed = run(sample_dir, out, fault=stage)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert tree(sample_dir) == src_before  # SRC is never modified
    if stage == "after-publish":
        assert tree(out) == reference  # published whole before the kill
        return
    assert not out.exists()
    leftovers = [p for p in tmp_path.iterdir() if ".segpipe-staging-" in p.name]
    assert len(leftovers) == (0 if stage == "after-scan" else 1)
    again = run(sample_dir, out)
    assert again.returncode == ExitCode.OK, again.stderr
    if leftovers:
        assert f"segpipe: removed staging of a run that did not finish: {leftovers[0]}" in again.stdout
    assert tree(out) == reference
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no debris


def test_a_live_runs_staging_is_never_touched(sample_dir: Path, tmp_path: Path) -> None:
    # A staging directory whose lock names a live process (this test's) is refused, not removed.
    from pipelines.output.run_lock import RunLock

    staging = tmp_path / ".out.segpipe-staging-abc"
    (staging / META_DIR).mkdir(parents=True)
    (staging / META_DIR / "LOCK").write_bytes(RunLock.mine("abc").to_bytes())
    proc = run(sample_dir, tmp_path / "out")
    assert (
        proc.returncode == ExitCode.REFUSED
        and "belongs to run abc" in proc.stderr
        and "may still be running" in proc.stderr
    )
    assert (staging / META_DIR / "LOCK").exists() and not (tmp_path / "out").exists()


def test_sigterm_stops_the_run_cleanly(sample_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = sigterm_once_staged("clean", str(sample_dir), str(out), *FLAGS, where=tmp_path)
    err = proc.stderr
    assert proc.returncode == ExitCode.TERMINATED, err
    assert "Traceback" not in err and len(err.splitlines()) <= 3, err
    assert err.strip().splitlines()[-1] == "segpipe: terminated; nothing was published"
    assert list(tmp_path.iterdir()) == []  # staging removed, nothing published
