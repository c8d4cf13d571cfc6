"""Text and Markdown views of a `Diagnosis` and of a playbook's documentation.

Rendering only: everything shown comes from the Finding / Playbook data; nothing here
queries a dataset. JSON output is `Diagnosis.to_dict()` as it is.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from traceq.findings import Diagnosis, Finding
from traceq.playbooks.model import Param, Playbook

LABEL = {
    "fail": "FAIL",
    "warn": "WARN",
    "error": "ERROR",
    "not_applicable": "N/A",
    "pass": "ok",
}


def _clock(ns: int | None) -> str:
    if ns is None:
        return "?"
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _window(w: dict[str, Any]) -> str:
    return f"{_clock(w.get('start'))} → {_clock(w.get('end'))} UTC ({w.get('duration_s', 0):g} s)"


def summary_line(d: Diagnosis) -> str:
    counts: Counter[str] = Counter(f.status for f in d.findings)
    parts = [f"{counts[s]} {LABEL[s] if s != 'pass' else 'pass'}" for s in LABEL if counts[s]]
    return f"{len(d.findings)} playbooks on {d.dataset}: " + ", ".join(parts)


def render_text(d: Diagnosis, *, verbose: bool = False) -> str:
    """One block per failing finding, one line per other finding, a summary line."""
    out: list[str] = []
    for f in d.findings:
        if f.status in ("fail", "warn"):
            out += _text_block(f)
        elif f.status != "pass" or verbose:
            out.append(f"{LABEL[f.status]:5} {f.id}: {f.message}")
    out.append(summary_line(d))
    return "\n".join(out) + "\n"


def _text_block(f: Finding) -> list[str]:
    lines = [f"{LABEL[f.status]:5} [{f.severity}] {f.id}: {f.title}", f"      {f.message}"]
    lines += [f"      window: {_window(w)}" for w in f.windows]
    confirmed = [c for c in f.causes if c.status == "confirmed"]
    for i, c in enumerate(confirmed, 1):
        lines.append(f"      cause {i}: {c.title} — {c.evidence} (strength {c.strength:.2f})")
    if not confirmed:
        lines.append("      cause: none of the checked causes confirmed")
    lines += [f"      undecided: {c.title} — needs {c.needs}" for c in f.causes
              if c.status == "not_applicable"]  # fmt: skip
    if f.fixes:
        lines.append(f"      fix: {f.fixes[0]}")
    if f.example_requests:
        lines.append(f"      examples: {', '.join(f.example_requests)}")
    return lines


def render_markdown(d: Diagnosis) -> str:
    """A Markdown report: a summary table, then each failing finding with its evidence."""
    out = [
        f"# traceq diagnose: `{d.dataset}`",
        "",
        f"{summary_line(d)}. Dataset hash `{d.dataset_hash}`, traceq {d.traceq_version}, "
        f"run {d.started_at} in {d.elapsed_s:g} s.",
        "",
        "| status | severity | playbook | finding |",
        "|---|---|---|---|",
    ]
    out += [
        f"| {LABEL[f.status]} | {f.severity} | `{f.id}` | {_cell(f.message)} |" for f in d.findings
    ]
    for f in d.findings:
        if f.status not in ("fail", "warn"):
            continue
        out += ["", f"## {f.title} (`{f.id}`, {f.severity})", "", f.message, ""]
        out += [f"- window: {_window(w)}" for w in f.windows]
        out += ["", "| cause | status | strength | evidence |", "|---|---|---|---|"]
        out += [
            f"| {_cell(c.title)} | {c.status} | {c.strength:.2f} | "
            f"{_cell(c.evidence or ('needs ' + c.needs if c.needs else ''))} |"
            for c in f.causes
        ]
        if f.fixes:
            out += ["", "**Fixes**", ""] + [f"- {x}" for x in f.fixes]
        if f.next_checks:
            out += ["", "**Next checks**", ""] + [f"- {x}" for x in f.next_checks]
        for e in f.evidence:
            out += ["", f"**{e.title}**", "", *_table(e.columns, e.rows)]
        if f.example_requests:
            out += ["", "Example requests: " + ", ".join(f"`{r}`" for r in f.example_requests)]
    return "\n".join(out) + "\n"


def _bounds(p: Param) -> str:
    """` (100–∞)`: the values a parameter accepts, after its unit; empty when unbounded."""
    if p.min is None and p.max is None:
        return ""
    lo = "−∞" if p.min is None else f"{p.min:g}"
    hi = "∞" if p.max is None else f"{p.max:g}"
    return f" ({lo}–{hi})"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(columns: list[str], rows: list[dict[str, Any]]) -> list[str]:
    if not columns:
        return ["(no rows)"]
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(_cell(_value(r.get(c))) for c in columns) + " |" for r in rows]
    return out


def _value(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def render_explain(pb: Playbook) -> str:
    """A playbook's documentation (`traceq explain ID`), ruff-rule style sections."""
    doc = pb.doc
    out = [f"# {pb.id}: {pb.title}", "", f"Severity: {pb.severity}. File: {pb.source}", ""]
    out += ["## What it detects", "", doc.get("what", "").strip(), ""]
    out += ["## Why it matters", "", doc.get("why", "").strip(), ""]
    if doc.get("example"):
        out += ["## Example finding", "", doc["example"].strip(), ""]
    out += ["## Needs", ""] + [f"- {r.needs} (at least {r.min_rows} rows)" for r in pb.requires]
    out += ["", "## Parameters", "", "| name | default | unit | meaning | why this default |"]
    out.append("|---|---|---|---|---|")
    out += [
        f"| `{p.name}` | {p.default} | {p.unit}{_bounds(p)} | {_cell(p.doc)} | "
        f"{_cell(p.reason.strip())} |"
        for p in pb.params.values()
    ]
    out += ["", "## Causes checked (ranked by their check's strength)", ""]
    out += [f"- `{c.id}`: {c.title}" for c in pb.causes]
    out += ["", "## What to do", ""] + [f"- {x}" for x in pb.fixes]
    out += ["", "## False positives", ""] + [f"- {x}" for x in pb.false_positives]
    out += ["", "## References", ""] + [f"- {x}" for x in pb.references]
    return "\n".join(out) + "\n"
