"""One table of exit codes: the README's is the table's, and every error type's code is in it."""

from __future__ import annotations

from pathlib import Path

import pytest

import pipelines.errors
import segment_io.errors
from segment_io.errors import SegpipeError
from segment_io.exit_codes import MEANINGS, ExitCode, exit_code_table

pytestmark = pytest.mark.unit
README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readmes_table_is_the_one_table() -> None:
    text = README.read_text()
    section = text[text.index("### Exit codes") :]
    rows = [line for line in section.splitlines()[2:] if line.startswith("|")]
    assert rows[: len(exit_code_table())] == exit_code_table()
    assert set(MEANINGS) == set(ExitCode)


def subclasses(root: type) -> set[type]:
    out = set(root.__subclasses__())
    return out.union(*(subclasses(c) for c in out)) if out else out


def test_every_error_type_names_a_code_of_the_table() -> None:
    assert segment_io.errors and pipelines.errors  # both modules' error types are loaded
    codes = {error.__name__: error.exit_code for error in subclasses(SegpipeError) | {SegpipeError}}
    assert codes and all(isinstance(code, ExitCode) for code in codes.values()), codes


def test_no_error_type_spells_its_code_as_a_number() -> None:
    """Error types outside the two errors modules too (found in the source, loaded or not)."""
    import ast

    root = README.parent
    literal = [
        f"{path.relative_to(root)}:{node.lineno}"
        for package in ("segment_io", "pipelines")
        for path in sorted((root / package).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and any(
            getattr(t, "id", None) == "exit_code"
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
        and isinstance(node.value, ast.Constant)
    ]
    assert literal == []
