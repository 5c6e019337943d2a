"""What `tier`, `restore` and `clean --in-place` refuse before any work (exit 2, one line, no
Spark started), and `dump`/`inspect` of a remote tier from the command line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.helpers import run_segpipe

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tier", "{log}", "{log}/tier"], "is inside the source"),
        (["tier", "{missing}", "{tmp}/tier"], "log directory not found"),
        (["tier", "{log}"], "tier takes two arguments"),
        (["tier", "--expire", "{tmp}/a", "{tmp}/b"], "takes one argument"),
        (["tier", "--expire", "{log}"], "is not a remote tier"),
        (["tier", "{log}", "{tmp}/tier", "--max-bytes-per-second", "0"], "must be a positive number"),
        (["tier", "{log}", "{tmp}/tier", "--set", "local.retention.ms=-3"], "local.retention.ms='-3' must be"),
        (["tier", "{log}", "{tmp}/tier", "--set", "retention.ms=1000", "--set", "local.retention.ms=2000"],
         "must not be more than retention.ms"),
        (["restore", "{log}", "{tmp}/out"], "is not a remote tier"),
        (["clean", "{log}", "--in-place"], "is not a remote tier"),
        (["clean", "{log}"], "needs SRC and DST"),
    ],
)  # fmt: skip
def test_refused_before_any_work(args: list[str], message: str, sample_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "log"
    shutil.copytree(sample_dir, log)
    values = {"log": str(log), "tmp": str(tmp_path), "missing": str(tmp_path / "missing")}
    proc = run_segpipe(*[a.format(**values) for a in args])
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "tier").exists() and not (tmp_path / "out").exists()
