"""The Data Docs' front page of our own: one self-contained HTML file (inline CSS, no script, no
external resource), so it opens offline where great-expectations' own index (which draws its
tables with scripts from CDNs) is blank. It lists every rule with the rows it judged and the rows
that broke it, the failing rows, the notes, and links to great-expectations' page of each suite
run (kept beside it; GE's index is kept as `GX_INDEX`)."""

from __future__ import annotations

import os
from html import escape

from pipelines.jobs.validate.report import ValidationReport

INDEX = "index.html"
GX_INDEX = "great-expectations.html"
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; max-width: 1300px; }
h1 { font-size: 1.4em; overflow-wrap: anywhere; } h2 { font-size: 1.1em; margin-top: 2em; }
table { border-collapse: collapse; } td, th { padding: 3px 8px; border-bottom: 1px solid #ddd; }
th { text-align: left; background: #f4f4f4; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #276227; } .bad { color: #a40; font-weight: bold; } .muted { color: #777; }
"""


def render_page(report: ValidationReport, suite_pages: list[str]) -> str:
    """The page: `suite_pages` are great-expectations' result pages, relative to the page."""
    # Broken rules first: they are what the reader came for.
    rules = sorted(report.checked, key=lambda r: (report.failed.get(r, 0) == 0, r))
    rows = "".join(
        f'<tr><td>{escape(rule)}</td><td class="n">{report.checked[rule]:,}</td>'
        f'<td class="n">{report.failed.get(rule, 0):,}</td>'
        f'<td class="{"bad" if report.failed.get(rule, 0) else "ok"}">'
        f"{'FAILED' if report.failed.get(rule, 0) else 'passed'}</td></tr>"
        for rule in rules
    )
    failures = "".join(f"<li>{escape(line)}</li>" for line in report.lines())
    notes = "".join(f"<li>{escape(note)}</li>" for note in report.notes)
    links = "".join(
        f'<li><a href="{escape(page)}">{escape(page)}</a></li>' for page in [GX_INDEX, *suite_pages]
    )
    verdict = "passed" if report.success else "FAILED"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>segpipe validation {verdict}: {escape(report.path)}</title>
<style>{STYLE}</style></head>
<body>
<h1>segpipe validation <span class="{"ok" if report.success else "bad"}">{verdict}</span>:
{escape(report.path)}</h1>
<p class="muted">{escape(report.summary_line())}</p>
{f"<h2>Failures</h2><ul>{failures}</ul>" if failures else ""}
{f"<h2>Notes</h2><ul>{notes}</ul>" if notes else ""}
<h2>Rules</h2>
<table><thead><tr><th>rule</th><th>rows judged</th><th>rows that broke it</th><th></th></tr></thead>
<tbody>{rows}</tbody></table>
<h2>great-expectations' pages</h2>
<p class="muted">Styled by stylesheets from the web: readable offline, unstyled.</p>
<ul>{links}</ul>
</body></html>
"""


def write_page(report_dir: str, report: ValidationReport) -> str:
    """Keep GE's index as GX_INDEX and write ours as the index; returns its path."""
    gx_index = os.path.join(report_dir, INDEX)
    if os.path.exists(gx_index):
        os.replace(gx_index, os.path.join(report_dir, GX_INDEX))
    pages = sorted(
        os.path.relpath(os.path.join(root, name), report_dir)
        for root, _, names in os.walk(os.path.join(report_dir, "validations"))
        for name in names
        if name.endswith(".html")
    )
    path = os.path.join(report_dir, INDEX)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(render_page(report, pages))
    return path
