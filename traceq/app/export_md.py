"""One incident or one finding as Markdown for a postmortem document: the incident's
headline, what / impact / cause / change and its consequences, then its root finding's
message, causes, windows, evidence (its SQL, its table, its chart as a Vega-Lite spec),
fixes and next checks. Plain text in, plain text out: the Findings page offers it as a
download."""

from __future__ import annotations

import json
from typing import Any

from traceq.app import charts
from traceq.app.state import format_ts
from traceq.findings import Evidence, Finding
from traceq.report.incidents import Block
from traceq.report.render_md import incident_md

TABLE_ROWS = 50
"""Evidence rows written per table (the evidence itself is already bounded by the engine)."""


def incident(b: Block, *, dataset: str = "") -> str:
    """`b` as a Markdown section: the incident as the report words it, then its root
    finding in full."""
    out = incident_md(b, "# ")
    if b.root is not None:
        out += ["", finding(b.root, dataset=dataset)]
    return "\n".join(out).rstrip() + "\n"


def finding(f: Finding, *, dataset: str = "") -> str:
    """`f` as a Markdown section."""
    out = [f"## {f.title} ({f.severity}, {f.status})", "", f.message, ""]
    meta = [f"playbook `{f.id}`"] + ([f"dataset `{dataset}`"] if dataset else [])
    if f.dataset_hash:
        meta.append(f"dataset hash `{f.dataset_hash}`")
    out += [", ".join(meta) + ".", ""]
    if f.windows:
        out += ["### Where", ""]
        out += [
            f"- {format_ts(w['start'])} – {format_ts(w['end'])}" + _extra(w)
            for w in f.windows
            if "start" in w and "end" in w
        ]
        out.append("")
    if f.causes:
        out += ["### Causes, most likely first", ""]
        ranked = sorted(f.causes, key=lambda c: -c.strength)
        for i, c in enumerate(ranked, 1):
            line = f"{i}. **{c.title}** ({c.status.replace('_', ' ')}, strength {c.strength:.2f})"
            line += f": {c.evidence}" if c.evidence else ""
            line += f" — needs {c.needs}" if c.needs else ""
            out.append(line)
        out.append("")
    for e in f.evidence:
        out += _evidence(e)
    if f.example_requests:
        out += ["### Example requests", "", *[f"- `{r}`" for r in f.example_requests], ""]
    for title, items in (
        ("Fixes", f.fixes),
        ("Next checks", f.next_checks),
        ("References", f.references),
    ):
        if items:
            out += [f"### {title}", "", *[f"- {i}" for i in items], ""]
    if f.params:
        out += ["Parameters: " + ", ".join(f"`{k}={v}`" for k, v in f.params.items()), ""]
    return "\n".join(out).rstrip() + "\n"


def _extra(window: dict[str, Any]) -> str:
    rest = {k: v for k, v in window.items() if k not in ("start", "end")}
    return (" (" + ", ".join(f"{k} {_cell(v)}" for k, v in rest.items()) + ")") if rest else ""


def _evidence(e: Evidence) -> list[str]:
    out = [f"### Evidence: {e.title}", "", "```sql", e.sql.strip(), "```", ""]
    columns = e.columns or (list(e.rows[0]) if e.rows else [])
    if e.rows and columns:
        out.append("| " + " | ".join(columns) + " |")
        out.append("|" + "---|" * len(columns))
        for row in e.rows[:TABLE_ROWS]:
            out.append("| " + " | ".join(_cell(row.get(c)) for c in columns) + " |")
        more = len(e.rows) - TABLE_ROWS
        if more > 0 or e.truncated:
            out.append("")
            out.append("(rows cut; run the SQL above for all of them)")
        out.append("")
    for chart in charts.evidence(columns, e.rows):
        spec = json.dumps(chart.to_dict(), indent=1, default=str)
        out += ["Chart (Vega-Lite):", "", "```vega-lite", spec, "```", ""]
    return out


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value).replace("|", "\\|").replace("\n", " ")
