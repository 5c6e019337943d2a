"""What a validation found: per rule the rows judged and the rows that broke it, the first rows of
each broken rule, and notes on what was not judged; as lines, a dict and a Spark DataFrame."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from pipelines.runtime.spark_handle import SparkSessionLike

Log = Callable[[str], Any]


@dataclass(frozen=True)
class Failure:
    rule: str
    partition: str  # "" for a rule of the whole table
    offset: int | None
    key: str | None  # base64, as `dump` prints keys
    detail: str = ""

    def line(self) -> str:
        if not self.partition:  # a rule of the whole table: what it observed is the detail
            return f"segpipe: validation failed: {self.rule}: {self.detail}"
        where = f"partition {self.partition}" + (f" offset {self.offset}" if self.offset is not None else "")
        key = f" key {self.key}" if self.key else ""
        detail = f": {self.detail}" if self.detail else ""
        return f"segpipe: validation failed: {self.rule}: {where}{key}{detail}"


@dataclass
class ValidationReport:
    path: str
    success: bool = True
    checked: dict[str, int] = field(default_factory=dict)  # rule -> rows judged
    failed: dict[str, int] = field(default_factory=dict)  # rule -> rows that broke it
    failures: list[Failure] = field(default_factory=list)  # the first rows of each broken rule
    notes: list[str] = field(default_factory=list)  # what was not judged, and why
    data_docs: str | None = None
    seconds: float = 0.0

    def lines(self) -> list[str]:
        out = [f.line() for f in self.failures]
        for rule, count in self.failed.items():
            shown = sum(1 for f in self.failures if f.rule == rule)
            if count > shown:
                out.append(f"segpipe: validation failed: {rule}: {count - shown:,} more rows")
        return out

    def say(self, log: Log) -> None:
        """Every note and failure line, then the summary."""
        for line in [*self.notes, *self.lines()]:
            log(line)
        log(self.summary_line())

    def summary_line(self) -> str:
        broken = sum(1 for n in self.failed.values() if n)
        verdict = "passed" if self.success else f"FAILED ({broken} of {len(self.checked)} rules broken)"
        docs = f"; Data Docs: {self.data_docs}" if self.data_docs else ""
        rules = len(self.checked)
        return f"segpipe: validation {verdict}: {rules} rules over {self.path} in {self.seconds:.1f} s{docs}"

    def rows(self) -> list[dict[str, Any]]:
        return [{"rule": r, "checked": n, "failed": self.failed.get(r, 0)} for r, n in self.checked.items()]

    def to_dataframe(self, spark: SparkSessionLike) -> Any:
        return spark.createDataFrame(
            [tuple(r.values()) for r in self.rows()], "rule string, checked long, failed long"
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
