"""The README's Python examples run as written, in order, in one namespace (only their output
directories are moved to a temp dir)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from segment_io.layout import META_DIR

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[2]


def test_readme_python_example_runs(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    api, time_range = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    monkeypatch.chdir(ROOT)
    api = api.replace("/tmp/cleaned", str(tmp_path / "cleaned"))
    namespace: dict[str, object] = {}
    exec(api.replace("/tmp/remote-tier", str(tmp_path / "remote-tier")), namespace)
    out = capsys.readouterr().out
    assert "orders-0" in out and "records_out" in out  # the metrics DataFrame was shown
    assert (tmp_path / "cleaned" / META_DIR / "manifest.json").exists()
    assert (tmp_path / "cleaned-again" / META_DIR / "manifest.json").exists()
    assert "uploaded" in out and (tmp_path / "remote-tier" / "segpipe-tier.json").exists()
    # The time range's query, through the indexes: the keys of that hour with their counts.
    exec(time_range, namespace)
    shown = capsys.readouterr().out
    assert "|count|" in shown and shown.count("\n") > 5, shown
