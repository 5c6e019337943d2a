"""The run report's page: every figure in it is the JSON report's, and it stands alone (no
script, no external resource)."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from pipelines.output.report import PartitionMetrics, RunReport
from pipelines.output.report_html import COLUMNS, html_path, render

pytestmark = pytest.mark.unit


class Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: list[tuple[str, str]] = []
        self.tags: set[str] = set()
        self.sources: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        values = dict(attrs)
        if "data-field" in values:
            self.cells.append((values["data-field"] or "", values.get("data-value") or ""))
        self.sources += [v for k, v in attrs if k in ("src", "href") and v]


def report() -> RunReport:
    r = RunReport("/data/in", "/data/out", 1_700_000_000_000, "abc123")
    r.partitions = [
        PartitionMetrics(
            "orders-0",
            ["compact"],
            bytes_in=2_000_000,
            bytes_out=600_000,
            records_in=5000,
            records_out=1200,
            removed_superseded=3700,
            removed_tombstone=90,
            removed_aborted=10,
            first_dirty=0,
            cleaned_up_to=4800,
            seconds=1.5,
        ),
        PartitionMetrics(
            "clicks-0 <x>",
            ["delete"],
            bytes_in=900_000,
            bytes_out=300_000,
            records_in=3000,
            records_out=1000,
            removed_by_retention=2000,
            segments_deleted=4,
            seconds=0.2,
        ),
    ]
    r.seconds_by_stage = {"scan": 0.5, "plan": 0.01, "compact": 1.2}
    r.warnings = ["retention took every segment of x-0"]
    return r


def test_every_figure_on_the_page_is_the_json_reports() -> None:
    r = report()
    page = Cells()
    page.feed(render(r))
    doc = r.to_dict()
    rows = [
        dict(zip([f for f, _ in COLUMNS], [v for _, v in page.cells[i : i + len(COLUMNS)]], strict=True))
        for i in range(0, len(COLUMNS) * len(doc["partitions"]), len(COLUMNS))
    ]
    for row, expected in zip(rows, doc["partitions"], strict=True):
        for field, value in row.items():
            want = expected[field]
            want = ",".join(want) if isinstance(want, list) else "" if want is None else str(want)
            assert value == want, (field, value, want)
    stages = {f.removeprefix("stage:"): float(v) for f, v in page.cells if f.startswith("stage:")}
    assert stages == r.seconds_by_stage
    # One page, nothing fetched: no script, no link, no image source; the chart is inline SVG.
    assert "svg" in page.tags and "script" not in page.tags and not page.sources
    assert "clicks-0 &lt;x&gt;" in render(r)  # names are escaped


def test_the_page_goes_beside_the_json() -> None:
    assert html_path("/tmp/run.json") == "/tmp/run.html"
    assert html_path("s3://b/reports/run-7") == "s3://b/reports/run-7.html"


def test_skipped_partitions_come_first_and_now_reads_as_a_date() -> None:
    r = report()
    r.skipped = [{"partition": "bad-0", "error": "CRC mismatch at byte 61", "path": "", "position": 61}]
    page = render(r)
    rows = page[page.index("<h2>Partitions</h2>") :]
    assert rows.index("skipped for bad data: CRC mismatch at byte 61") < rows.index('data-value="orders-0"')
    assert "now = 2023-11-14T22:13:20.000Z (1700000000000)" in page
    assert ">bytes in</text>" in page and ">bytes out</text>" in page  # the chart's legend


def test_a_cleaner_line_says_why_nothing_was_compacted() -> None:
    """A compacted topic with nothing cleanable is not 'retention only' (that is a delete topic)."""
    held = PartitionMetrics("orders-0", ["compact"], bytes_in=100, bytes_out=100)
    assert "orders-0 (nothing cleanable):" in held.cleaner_line()
    deleting = PartitionMetrics("clicks-0", ["delete"], bytes_in=100, bytes_out=50)
    assert "clicks-0 (retention only):" in deleting.cleaner_line()
    cleaned = PartitionMetrics("orders-1", ["compact", "delete"], first_dirty=0, cleaned_up_to=40)
    assert "orders-1 (dirty section = [0, 40]):" in cleaned.cleaner_line()
