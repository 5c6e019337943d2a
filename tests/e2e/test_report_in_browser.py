"""The run report's page as a browser draws it: headless Chromium renders it to a PNG, and the
chart's bars are measured in the pixels (to scale, one pair per partition)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pipelines.output.report import PartitionMetrics, RunReport
from pipelines.output.report_html import render
from tests.png import decode

pytestmark = pytest.mark.e2e

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
GREY, BLUE = (0xBB, 0xBB, 0xBB), (0x3A, 0x7B, 0xD5)  # the chart's bytes-in and bytes-out bars
CHART_WIDTH = 420  # the widest bar, in CSS pixels
SWATCH = 11  # the legend's square of each colour
HEADER = (0xF4, 0xF4, 0xF4)  # the table header's background


def browser() -> str:
    if BROWSER is None:
        if os.environ.get("SEGPIPE_REQUIRE_BROWSER") == "1":
            pytest.fail("SEGPIPE_REQUIRE_BROWSER=1 but no chromium on PATH")
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium)")
    return BROWSER


def screenshot(page: Path, png: Path, profile: Path) -> bytes:
    """Chromium, headless, offline, at device scale 1, renders `page` to `png` (bounded)."""
    subprocess.run(
        [
            browser(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--force-device-scale-factor=1",
            f"--user-data-dir={profile}",
            "--window-size=1400,900",
            f"--screenshot={png}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return png.read_bytes()


def test_the_report_page_renders_its_chart_to_scale(tmp_path: Path) -> None:
    report = RunReport("/data/in", "/data/out", 1_700_000_000_000, "abc123")
    report.partitions = [
        PartitionMetrics(
            "orders-0",
            ["compact"],
            bytes_in=2_000_000,
            bytes_out=600_000,
            records_in=5000,
            records_out=1200,
            removed_superseded=3800,
            first_dirty=0,
            cleaned_up_to=4800,
        ),
        PartitionMetrics(
            "clicks-0",
            ["delete"],
            bytes_in=900_000,
            bytes_out=300_000,
            records_in=3000,
            records_out=1000,
            removed_by_retention=2000,
            segments_deleted=4,
        ),
    ]
    report.seconds_by_stage = {"scan": 0.5, "compact": 1.2}
    page = tmp_path / "run.html"
    page.write_text(render(report))
    image = decode(screenshot(page, tmp_path / "run.png", tmp_path / "profile"))
    assert (image.width, image.height) == (1400, 900)

    def bars(color: tuple[int, int, int]) -> list[int]:
        """The width of each bar of `color`, top to bottom (a bar is a block of equal runs)."""
        widths: list[int] = []
        last_row = -2
        for row, _, length in image.runs(color):
            if length < 3:
                continue  # anti-aliased text, not a bar
            if row != last_row + 1:
                widths.append(length)
            last_row = row
        return widths

    # The legend's swatch of each colour, then bytes in and out to one scale, the largest
    # (2,000,000 bytes) CHART_WIDTH pixels wide.
    assert bars(GREY) == [SWATCH, CHART_WIDTH, round(CHART_WIDTH * 900_000 / 2_000_000)]
    assert bars(BLUE) == [
        SWATCH,
        round(CHART_WIDTH * 600_000 / 2_000_000),
        round(CHART_WIDTH * 300_000 / 2_000_000),
    ]
    # The partitions table fits the 1400 px window: its header row ends inside the page's margin.
    header = [x + length for _, x, length in image.runs(HEADER) if length > 20]
    assert header and max(header) <= 1400 - 20, max(header)
