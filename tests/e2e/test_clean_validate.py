"""`clean --validate`: the gate publishes a sound output with its Data Docs inside, and a broken
one (the `corrupt-output` fault flips a byte of the staged output) not at all: exit 4, the failed
rule named, the Data Docs kept beside DST."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_segpipe

pytestmark = pytest.mark.e2e
FLAGS = ["--config", "conf/samples.yaml", "--now", "2023-11-23", "--master", "local[2]", "--validate"]


def test_the_gate_publishes_only_what_passes(sample_dir: Path, tmp_path: Path) -> None:
    good = run_segpipe("clean", str(sample_dir), str(tmp_path / "good"), *FLAGS)
    assert good.returncode == 0, good.stderr[-3000:]
    assert "validation passed" in good.stdout + good.stderr
    assert (tmp_path / "good" / "_segpipe" / "validation" / "index.html").exists()
    assert not (tmp_path / "good.validation").exists()

    bad = run_segpipe("clean", str(sample_dir), str(tmp_path / "bad"), *FLAGS, fault="corrupt-output")
    assert bad.returncode == 4, bad.stderr[-3000:]
    assert "validation failed: batches_crc_valid" in bad.stdout + bad.stderr
    last = bad.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("error: validation failed")
        and str(tmp_path / "bad.validation" / "index.html") in last
    )
    assert not (tmp_path / "bad").exists() and not list(tmp_path.glob(".bad.segpipe-staging-*"))
    assert (tmp_path / "bad.validation" / "index.html").exists()
