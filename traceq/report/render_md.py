"""The Markdown report: the same content as the HTML one; its charts are the same SVG files,
written next to it (`report.md` → `report_files/*.svg`) and embedded as images."""

from __future__ import annotations

from pathlib import Path

from traceq.playbooks.words import counted
from traceq.report import fmt
from traceq.report.charts import Chart
from traceq.report.headroom import sentence as headroom_sentence
from traceq.report.incidents import Block, Tail, View, sentence
from traceq.report.kpis import KPIS
from traceq.report.model import Report


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def incidents_md(v: View, note: str = "") -> list[str]:
    """One block per incident, worst first (`incident_md`); then the playbooks that errored
    and, on one line, those that lacked their data."""
    lines = [f"_{note}_", ""] if note else []
    lines.append(sentence(v.counts) + ".")
    for n, b in enumerate(v.blocks, 1):
        lines += ["", *incident_md(b, f"### {'**NEW** ' if b.new else ''}Incident {n} ")]
    if v.warnings:
        lines += ["", "Warnings that no incident holds:", ""]
        lines += [f"- `{f.id}`: {_cell(f.message)}" for f in v.warnings]
    if v.errors:
        lines += ["", "Playbooks that errored (their checks did not run):", ""]
        lines += [f"- `{f.id}`: {_cell(f.message)}" for f in v.errors]
    for line in (v.assumed_gpu, v.not_run_line):
        if line:
            lines += ["", sentence(line) + "."]
    return lines


def tail_md(tail: list[Tail], heading: str = "## The run's tail") -> list[str]:
    """The run's tail, one row per metric: its p99 and the engine's sentence saying what its
    slowest requests spent their time on; nothing for a diagnosis without one."""
    if not tail:
        return []
    lines = [heading, "", "What the slowest requests of the whole run spent their time on "
             "(each incident's own tail is under it).", ""]  # fmt: skip
    return lines + _table(["metric", "p99", "tail"], [[t.metric, t.p99, t.line] for t in tail])


def incident_md(b: Block, heading: str = "### ") -> list[str]:
    """One incident: severity, title, when and how many requests it let down; what, impact,
    cause, change, what the change is predicted to do (where the playbook cites it), the tail
    of the metric it hurt most; its consequences folded under it; example requests."""
    i = b.incident
    lines = [f"{heading}[{i.severity}] {i.title} (`{i.root}`)", ""]
    if b.when:
        lines += [sentence(b.when) + ".", ""]
    lines += [f"- **{sentence(label)}:** {_cell(text)}" for label, text in b.story]
    if b.consequences:
        lines.append("- **Explained by this incident** (not separate failures):")
        lines += [f"  - └ `{c.id}` ({c.status}, see `{i.root}`): {_cell(c.message)}"
                  for c in b.consequences]  # fmt: skip
    if b.examples:
        lines.append("- **Example requests:** " + ", ".join(f"`{x}`" for x in b.examples))
    return lines


def render_md(r: Report, charts: list[Chart], chart_dir: str | None) -> str:
    """The report as Markdown; `chart_dir` is where the SVGs are linked from (relative to the
    Markdown file), None to leave the charts out."""
    m = r.measurement
    tr = m.time_range
    lines = [
        "# traceq health report",
        "",
        f"Dataset `{m.dataset}` ({m.dataset_hash[:19]}…), {fmt.span(tr)}, "
        f"traceq {m.traceq_version}, measured {m.measured_at}.",
    ]
    if r.baseline is not None:
        b = r.baseline
        btr = b.get("time_range") or {}
        lines.append(
            f"Baseline `{b.get('dataset')}`, {fmt.span(btr)}, traceq {b.get('traceq_version')}."
        )
        lines.append("")
        if r.regressed:
            lines.append(
                f"**REGRESSION in {counted(len(r.regressed), 'KPI')}:** "
                + ", ".join(f"{c.label} {fmt.spoken(c)}" for c in r.regressed)
            )
        else:
            lines.append(f"**No regression** against the baseline ({len(r.improved)} improved).")
        if r.load_shift:
            lines += [
                "",
                f"_The load differs from the baseline's: {', '.join(r.load_shift)}. "
                "KPI changes may come from the load, not from the release._",
            ]
    shown = r.view()
    lines += ["", "## Incidents", "", *incidents_md(shown, r.findings_note)]
    if shown.tail:
        lines += ["", *tail_md(shown.tail)]
    changes = {c.kpi: c for c in r.changes}
    lines += ["", "## KPIs", ""]
    if changes:
        head = [
            "KPI",
            "value",
            "baseline",
            "change",
            f"{r.thresholds.confidence:.0%} interval",
            "verdict",
        ]
        rows = [
            [
                k.label,
                fmt.measure(m.values.get(k.name), k.unit),
                fmt.measure(changes[k.name].baseline, k.unit),
                fmt.delta(changes[k.name]),
                fmt.interval(changes[k.name]),
                f"**{changes[k.name].verdict}**"
                if changes[k.name].verdict == "regressed"
                else fmt.verdict(changes[k.name].verdict),
            ]
            for k in KPIS
        ]
    else:
        head = ["KPI", "value"]
        rows = [[k.label, fmt.measure(m.values.get(k.name), k.unit)] for k in KPIS]
    lines += _table(head, rows)
    lines += ["", _cell(headroom_sentence(m.context["headroom"], m.params["slo"]))]
    lines += ["", "## Phase breakdown", ""]
    lines += _table(
        ["phase", "requests", "mean (ms)", "p50 (ms)", "p95 (ms)", "share of e2e"],
        [
            [
                p["phase"],
                f"{p['n']:,}",
                fmt.value(p["mean_ms"]),
                fmt.value(p["p50_ms"]),
                fmt.value(p["p95_ms"]),
                fmt.value(p["share"], "ratio"),
            ]
            for p in m.phases.iter_rows(named=True)
        ],
    )
    c = m.context
    # token counts a source did not record are left out, not written as 0
    tokens = [
        f"{c[k]:,} {what}"
        for k, what in (("prompt_tokens", "prompt"), ("output_tokens", "output"))
        if m.samples["requests"][k].is_not_null().any()
    ]
    lines += [
        "",
        "## Request profile",
        "",
        f"{c['requests']:,} requests ({c['errors']:,} failed) over "
        f"{fmt.duration(c['duration_s'])}; "
        + (" and ".join(tokens) + " tokens; " if tokens else "")
        + f"{counted(c['gpus'], 'GPU')}{fmt.GPUS_ASSUMED if c.get('gpus_assumed') else ''}, "
        f"{c['gpu_hours']:.3f} GPU-h.",
    ]
    if chart_dir is not None:
        lines += ["", "## Charts", ""]
        for chart in charts:
            lines += [
                f"### {chart.title}",
                "",
                f"![{chart.title}]({chart_dir}/{chart.id}.svg)",
                "",
                f"_{chart.caption}_",
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"


def write_md(r: Report, charts: list[Chart], path: Path) -> None:
    """Write `path` and its charts into `<stem>_files/` beside it."""
    chart_dir = path.parent / f"{path.stem}_files"
    chart_dir.mkdir(parents=True, exist_ok=True)
    for chart in charts:
        (chart_dir / f"{chart.id}.svg").write_text(chart.svg)
    path.write_text(render_md(r, charts, chart_dir.name))
