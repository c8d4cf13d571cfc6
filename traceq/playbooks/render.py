"""Text and Markdown views of a `Diagnosis` and of a playbook's documentation.

Rendering only: everything shown comes from the Finding / Playbook data; nothing here
queries a dataset. JSON output is `Diagnosis.to_dict()` as it is.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from traceq.findings import Diagnosis, Finding, Incident
from traceq.playbooks import story
from traceq.playbooks.model import Param, Playbook
from traceq.playbooks.words import counted, duration_ms, number

LABEL = {
    "fail": "FAIL",
    "warn": "WARN",
    "error": "ERROR",
    "not_applicable": "not run",
    "pass": "ok",
}


def _clock(ns: int | None) -> str:
    if ns is None:
        return "?"
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _started(at: str) -> str:
    """`2026-12-07T05:55:24+00:00` as `2026-12-07 05:55:24 UTC` (as it is when unparseable)."""
    try:
        parsed = datetime.fromisoformat(at.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return str(at)
    return parsed.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _window(w: dict[str, Any]) -> str:
    span = duration_ms((w.get("end", 0) - w.get("start", 0)) / 1e6)
    start = w.get("start")
    if start is not None and 0 <= start < story.RELATIVE_BELOW_NS:
        return f"from {story.clock(start)} for {span}"
    return f"{_clock(start)} → {_clock(w.get('end'))} UTC ({span})"


def summary_line(d: Diagnosis) -> str:
    counts: Counter[str] = Counter(f.status for f in d.findings)
    n = len(d.incidents)
    head = f"{n} incident{'s' if n != 1 else ''}" if n else "no incident"
    parts = [f"{counts[s]} {LABEL[s] if s != 'pass' else 'pass'}" for s in LABEL if counts[s]]
    return f"{head}; {len(d.findings)} playbooks on {d.dataset}: " + ", ".join(parts)


def not_applicable_line(d: Diagnosis) -> str:
    """All not-applicable playbooks on one line, grouped by the input that would enable them:
    `not run, for lack of data: GPU samples (nvidia-smi or DCGM) → gpu-underutilized; …`."""
    groups = d.not_run()
    if not groups:
        return ""
    return "not run, for lack of data: " + "; ".join(
        f"{need} → {', '.join(ids)}" for need, ids in groups.items()
    )


def assumed_gpu_line(d: Diagnosis) -> str:
    """One line naming the findings that fired (fail or warn) on GPU-scaled floors that
    stood for the reference GPU because the data names none the table knows (their
    messages do not say it: only a finding that used a spec figure does, `note` in
    traceq/playbooks/gpu.py); "" when none.

    >>> f = Finding(id="ttft-prefill", status="fail", severity="medium", title="", message="",
    ...             gpu={"gpu": "H100 SXM5 80GB", "seen": None, "source": "assumed"})
    >>> assumed_gpu_line(Diagnosis([f], "ds", "h", "0", "", 0.0))
    'floors assumed an H100 SXM5 80GB in ttft-prefill: the data names no GPU; name it with \
--gpu (an id or name of traceq/hardware/gpus.csv), or add nvidia-smi or DCGM samples'
    """
    used = [
        f
        for f in d.findings
        if f.status in ("fail", "warn")
        and f.gpu
        and f.gpu.get("source") == "assumed"
        and not f.gpu.get("caps")
    ]
    if not used:
        return ""
    first = used[0].gpu or {}
    gpu, seen = first["gpu"], first.get("seen")
    why = (
        f"the data's {seen} is not in traceq/hardware/gpus.csv; name the nearest with --gpu, "
        "or set the floors with --param"
        if seen
        else "the data names no GPU; name it with --gpu (an id or name of "
        "traceq/hardware/gpus.csv), or add nvidia-smi or DCGM samples"
    )
    return f"floors assumed an {gpu} in {', '.join(f.id for f in used)}: {why}"


def render_text(d: Diagnosis, *, verbose: bool = False) -> str:
    """One block per incident (its root, impact, cause, fix, then its consequences folded
    under it), errors, the not-applicable playbooks on one line, a summary line."""
    by_id = {f.id: f for f in d.findings}
    out: list[str] = []
    for n, incident in enumerate(d.incidents, 1):
        out += _incident_block(n, incident, by_id)
    for f in d.findings:
        alone = f.status == "warn" and not f.see  # a warning no incident holds
        if alone or f.status == "error" or (verbose and f.status == "pass"):
            out.append(f"{LABEL[f.status]:5} {f.id}: {f.message}")
    if d.tail:
        out.append("TAIL of the run")
        out += [f"  {m['line']}" for m in d.tail]
    out += [line for line in (assumed_gpu_line(d), not_applicable_line(d)) if line]
    out.append(summary_line(d))
    return "\n".join(out) + "\n"


def _incident_block(n: int, i: Incident, by_id: dict[str, Finding]) -> list[str]:
    root = by_id.get(i.root)
    out = [f"INCIDENT {n} {i.headline}"]
    for label, text in story.lines(i, root):
        out.append(f"          also: {text}" if label == "also" else f"  {label + ':':7} {text}")
    for cid in i.consequences:
        f = by_id.get(cid)
        if f is not None:
            out.append(f"  └ {LABEL[f.status]} {f.id} (see {i.root}): {f.message}")
    if root is not None and root.example_requests:
        out.append(f"  examples: {', '.join(root.example_requests)}")
    return out


def render_markdown(d: Diagnosis) -> str:
    """A Markdown report: the incidents, most impact first, each with its consequences and
    evidence; then every playbook's status."""
    by_id = {f.id: f for f in d.findings}
    out = [
        f"# traceq diagnose: `{d.dataset}`",
        "",
        f"{summary_line(d)}. Dataset hash `{d.dataset_hash}`, traceq {d.traceq_version}, "
        f"run {_started(d.started_at)} in {duration_ms(d.elapsed_s * 1e3)}.",
    ]
    for n, i in enumerate(d.incidents, 1):
        out += ["", f"## Incident {n}: {i.title} (`{i.root}`, {i.severity})", "", i.summary, ""]
        out += [f"- tail: {m['line']}" for m in i.tail]
        f = by_id.get(i.root)
        if f is None:
            continue
        out += [f"- window: {_window(w)}" for w in f.windows]
        if i.consequences:
            out += ["", "**Consequences** (`warn`, explained by this root)", ""]
            out += [f"- `{c}`: {_cell(by_id[c].message)}" for c in i.consequences if c in by_id]
        out += ["", "| cause | status | strength | evidence |", "|---|---|---|---|"]
        out += [
            f"| {_cell(c.title)} | {c.status} | {c.strength:.2f} | "
            f"{_cell(c.evidence or ('needs ' + c.needs if c.needs else '—'))} |"
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
    if d.tail:
        out += ["", "## The run's tail", ""] + [f"- {m['line']}" for m in d.tail]
    notes = [line for line in (assumed_gpu_line(d), not_applicable_line(d)) if line]
    out += ["", "## Every playbook", ""] + [x for line in notes for x in (line, "")]
    out += ["| status | severity | playbook | finding |", "|---|---|---|---|"]
    out += [
        f"| {LABEL[f.status]} | {f.severity} | `{f.id}` | {_cell(f.message)} |"
        for f in d.findings
        if f.status != "not_applicable"
    ]
    return "\n".join(out) + "\n"


def _bounds(p: Param) -> str:
    """` (100–∞)`: the values a parameter accepts, after its unit; empty when unbounded or
    when the unit says it (`ratio 0-1`)."""
    if (p.min is None and p.max is None) or ((p.min, p.max) == (0, 1) and "0-1" in p.unit):
        return ""
    lo = "−∞" if p.min is None else f"{p.min:g}"
    hi = "∞" if p.max is None else f"{p.max:g}"
    return f" ({lo}–{hi})"


def _cell(text: str) -> str:
    """Text for one Markdown table cell: one line, its own pipes escaped, no spaces at the
    ends (a folded YAML text ends in a newline)."""
    return " ".join(str(text).replace("|", "\\|").split())


def _table(columns: list[str], rows: list[dict[str, Any]]) -> list[str]:
    if not columns or not rows:
        return ["_No rows._"]
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(_cell(_value(r.get(c))) for c in columns) + " |" for r in rows]
    return out


EPOCH_NS_END = 10**19
"""Integers from `story.RELATIVE_BELOW_NS` (1973) to this (2286) are read as times, ns since
the epoch; no duration a query shows is three years long."""


def _value(v: Any) -> str:
    """An evidence cell as a person reads it: times as UTC clock times, numbers with
    thousands separators and no exponent, a missing value as a dash.

    >>> [_value(x) for x in (None, 1_749_981_610_250_000_000, 1847, 17780.4, 0.9695, 57.21)]
    ['—', '2025-06-15 10:00:10.250', '1,847', '17,780', '0.9695', '57.21']
    """
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return story.stamp(v) if story.RELATIVE_BELOW_NS <= v < EPOCH_NS_END else f"{v:,}"
    if isinstance(v, float):
        if v != v:
            return "—"
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    return str(v)


def render_explain(pb: Playbook) -> str:
    """A playbook's documentation (`traceq explain ID`), ruff-rule style sections."""
    doc = pb.doc
    out = [f"# {pb.id}: {pb.title}", "", f"Severity: {pb.severity}. File: {pb.source}", ""]
    out += ["## What it detects", "", doc.get("what", "").strip(), ""]
    out += ["## Why it matters", "", doc.get("why", "").strip(), ""]
    if doc.get("example"):
        out += ["## Example finding", "", doc["example"].strip(), ""]
    out += ["## Needs", ""]
    out += [f"- {r.needs} (at least {counted(r.min_rows, 'row')})" for r in pb.requires]
    out += ["", "## Parameters", "", "| name | default | unit | meaning | why this default |"]
    out.append("|---|---|---|---|---|")
    out += [
        f"| `{p.name}` | {number(p.default)} | {p.unit}{_bounds(p)} | {_cell(p.doc)} | "
        f"{_cell(p.reason.strip())} |"
        for p in pb.params.values()
    ]
    out += ["", "## Causes checked (ranked by their check's strength)", ""]
    out += [f"- `{c.id}`: {c.title}" for c in pb.causes]
    out += ["", "## What to do", ""] + [f"- {x}" for x in pb.fixes]
    out += ["", "## False positives", ""] + [f"- {x}" for x in pb.false_positives]
    out += ["", "## References", ""] + [f"- {x}" for x in pb.references]
    return "\n".join(out) + "\n"
