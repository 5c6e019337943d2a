"""How counts and tables read in what segpipe prints: "1 partition", "4 partitions"."""

from __future__ import annotations

from collections.abc import Sequence


def counted(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def text_table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows of cells (the first the header) as lines of left-aligned columns."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
