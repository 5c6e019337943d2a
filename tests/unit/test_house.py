"""The shape of the code, read from its source: `segment_io` never imports Spark, no job imports
another job (what several need lives in pipelines/log, keys, config, output or runtime), and no
module passes 400 lines."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("segment_io", "pipelines")
MAX_LINES = 400


def modules() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def imported(path: Path) -> set[str]:
    """Every module `path` imports, at its top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from pipelines.jobs import clean` imports pipelines.jobs.clean: both are named.
            names.update([node.module, *(f"{node.module}.{alias.name}" for alias in node.names)])
    return names


def job_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if parts[:2] == ["pipelines", "jobs"] and len(parts) > 2 else None


def test_segment_io_never_imports_spark() -> None:
    spark = {
        f"{p.relative_to(ROOT)}: {name}"
        for p in (ROOT / "segment_io").rglob("*.py")
        for name in imported(p)
        if name.split(".")[0] == "pyspark"
    }
    assert spark == set()


def test_no_job_imports_another_job() -> None:
    crossing = []
    for path in (ROOT / "pipelines" / "jobs").rglob("*.py"):
        own = path.relative_to(ROOT / "pipelines" / "jobs").parts[0]
        crossing += [f"{path.relative_to(ROOT)}: {name}" for name in imported(path)
                     if job_of(name) not in (None, own)]  # fmt: skip
    assert crossing == []


def test_no_module_passes_the_line_limit() -> None:
    long = {
        str(p.relative_to(ROOT)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
