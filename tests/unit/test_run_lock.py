"""A lock one run holds for its block: refused while its holder may live, taken over from a run
proved dead, released at the end whatever happens."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.errors import RunInProgress
from pipelines.output.run_lock import RunLock, held
from segment_io.layout import META_DIR
from segment_io.storage import LocalStorage

pytestmark = pytest.mark.unit


def test_a_lock_is_refused_while_its_run_lives_and_released_after(tmp_path: Path) -> None:
    path = str(tmp_path / META_DIR / "x.lock")
    with (
        held(LocalStorage(), path, "the thing", "run-1"),
        pytest.raises(RunInProgress, match="the thing is held by run run-1"),
        held(LocalStorage(), path, "the thing", "run-2"),
    ):
        pass
    assert not Path(path).exists()
    with pytest.raises(ValueError), held(LocalStorage(), path, "the thing", "run-3"):
        raise ValueError
    assert not Path(path).exists()


def test_a_dead_runs_lock_is_taken_over(tmp_path: Path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = RunLock.mine("run-0")
    dead = RunLock(dead.host, int(gone.stdout), dead.started, "run-0")
    path = tmp_path / "x.lock"
    path.write_bytes(dead.to_bytes())
    with held(LocalStorage(), str(path), "the thing", "run-1") as mine:
        assert RunLock.parse(path.read_bytes()) == mine
