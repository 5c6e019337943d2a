"""The README's Python example runs as written (only its output directories are moved to a temp dir)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]


def test_readme_python_example_runs(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    [block] = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    monkeypatch.chdir(ROOT)
    block = block.replace("/tmp/cleaned", str(tmp_path / "cleaned"))
    exec(block.replace("/tmp/remote-tier", str(tmp_path / "remote-tier")), {})
    out = capsys.readouterr().out
    assert "orders-0" in out and "records_out" in out  # the metrics DataFrame was shown
    assert (tmp_path / "cleaned" / "_segpipe" / "manifest.json").exists()
    assert (tmp_path / "cleaned-again" / "_segpipe" / "manifest.json").exists()
    assert "uploaded" in out and (tmp_path / "remote-tier" / "segpipe-tier.json").exists()
