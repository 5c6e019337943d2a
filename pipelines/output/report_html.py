"""The run report as one self-contained HTML page (inline CSS and SVG, no script, no server):
per partition bytes and records before and after, what was removed and why, the cleanable range,
the time of each stage, and a chart of bytes before and after. Every figure cell carries its
report field name (`data-field`) so that the page can be checked against the JSON."""

from __future__ import annotations

from html import escape
from typing import Any

from pipelines.clock import iso
from pipelines.output.report import MB, RunReport

COLUMNS = (
    ("partition", "partition"),
    ("cleanup_policy", "policy"),
    ("bytes_in", "bytes in"),
    ("bytes_out", "bytes out"),
    ("records_in", "records in"),
    ("records_out", "records out"),
    ("removed_superseded", "superseded"),
    ("removed_tombstone", "tombstones"),
    ("removed_aborted", "aborted"),
    ("removed_null_key", "null keys"),
    ("removed_markers", "markers"),
    ("removed_by_retention", "retention (records)"),
    ("segments_deleted", "segments deleted"),
    ("deleted_by_log_start_offset", "by log start offset"),
    ("deleted_by_retention_bytes", "by retention.bytes"),
    ("deleted_by_retention_ms", "by retention.ms"),
    ("first_dirty", "first dirty"),
    ("cleaned_up_to", "cleaned up to"),
    ("seconds", "seconds"),
)
# The partitions table fits a 1400 px window: headers wrap, figures stay on one line.
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; overflow-wrap: anywhere; } h2 { font-size: 1.1em; margin-top: 2em; }
table { border-collapse: collapse; font-size: 12px; }
td, th { padding: 3px 5px; border-bottom: 1px solid #ddd; }
th { text-align: left; background: #f4f4f4; vertical-align: bottom; max-width: 6em; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.muted { color: #777; } .warn { color: #a40; }
"""
BYTES_IN, BYTES_OUT = "#bbb", "#3a7bd5"  # the chart's bars (and its legend)


def _cell(field: str, value: Any) -> str:
    if isinstance(value, list):
        value = ",".join(value)
    text = (
        ""
        if value is None
        else f"{value:,.2f}"
        if isinstance(value, float)
        else f"{value:,}"
        if isinstance(value, int)
        else str(value)
    )
    css = ' class="n"' if isinstance(value, int | float) else ""
    raw = "" if value is None else escape(str(value))
    return f'<td{css} data-field="{field}" data-value="{raw}">{escape(text)}</td>'


def _chart(report: RunReport) -> str:
    """Horizontal bars: bytes in (grey) and out (blue) per partition, to one scale."""
    rows = report.partitions
    if not rows:
        return ""
    top = max(max(p.bytes_in, p.bytes_out) for p in rows) or 1
    label, width, bar, legend = 180, 420, 12, 24
    height = legend + len(rows) * (2 * bar + 10) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label + width + 120}" height="{height}">']
    for k, (name, color) in enumerate((("bytes in", BYTES_IN), ("bytes out", BYTES_OUT))):
        x = label + k * 110
        parts.append(f'<rect x="{x}" y="2" width="{bar - 1}" height="{bar - 1}" fill="{color}"/>')
        parts.append(f'<text x="{x + bar + 4}" y="{bar}" font-size="12">{name}</text>')
    for i, p in enumerate(rows):
        y = legend + 10 + i * (2 * bar + 10)
        parts.append(f'<text x="0" y="{y + bar + 4}" font-size="12">{escape(p.partition)}</text>')
        for k, (value, color) in enumerate(((p.bytes_in, BYTES_IN), (p.bytes_out, BYTES_OUT))):
            w = max(1, round(width * value / top))
            parts.append(
                f'<rect x="{label}" y="{y + k * bar}" width="{w}" height="{bar - 1}" fill="{color}"/>'
            )
            text_y = y + k * bar + bar - 2
            parts.append(f'<text x="{label + w + 4}" y="{text_y}" font-size="11">{value / MB:,.2f} MB</text>')
    parts.append("</svg>")
    return "".join(parts)


def render(report: RunReport) -> str:
    head = "".join(f"<th>{escape(title)}</th>" for _, title in COLUMNS)
    # Partitions left out for bad data come first: they are what an operator must act on.
    body = "".join(
        f'<tr class="warn"><td data-field="partition">{escape(s["partition"])}</td>'
        f'<td colspan="{len(COLUMNS) - 1}">skipped for bad data: {escape(s["error"])}</td></tr>'
        for s in report.skipped
    ) + "".join(
        "<tr>" + "".join(_cell(field, getattr(p, field)) for field, _ in COLUMNS) + "</tr>"
        for p in report.partitions
    )
    stages = "".join(
        f"<tr><td>{escape(name)}</td>{_cell(f'stage:{name}', seconds)}</tr>"
        for name, seconds in report.seconds_by_stage.items()
    )
    warnings = "".join(f'<li class="warn">{escape(w)}</li>' for w in report.warnings)
    title = f"segpipe {'dry run' if report.dry_run else 'clean'}: {report.src} → {report.dst}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title><style>{STYLE}</style></head>
<body>
<h1>{escape(title)}</h1>
<p class="muted">run {escape(report.run_id)} · now = {iso(report.now_ms)} ({report.now_ms}) ·
{report.seconds_total:,.1f} s in all
</p>
<p>{escape(report.totals_line())}</p>
<h2>Bytes before and after, per partition</h2>
{_chart(report)}
<h2>Partitions</h2>
<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>
<h2>Time per stage (seconds)</h2>
<table><tbody>{stages}</tbody></table>
{f"<h2>Warnings</h2><ul>{warnings}</ul>" if warnings else ""}
</body></html>
"""


def html_path(json_path: str) -> str:
    """Where the page goes: beside the JSON report, `.json` replaced by `.html`."""
    return (json_path[: -len(".json")] if json_path.endswith(".json") else json_path) + ".html"
