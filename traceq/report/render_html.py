"""The HTML report: ONE self-contained file. Styles are inline, charts are inline SVG, there is
no script and no font or image fetched from anywhere, so it opens offline and can be attached
to a ticket or posted as a CI artifact as it is."""

from __future__ import annotations

from html import escape

import polars as pl

from traceq.playbooks.words import counted
from traceq.report import fmt
from traceq.report.charts import Chart
from traceq.report.headroom import sentence as headroom_sentence
from traceq.report.incidents import Tail, sentence
from traceq.report.kpis import BY_NAME, KPIS, MAIN_KPIS
from traceq.report.model import Report

HEADLINE_KPIS = 6

CSS = """
body{font-family:Helvetica,Arial,sans-serif;color:#222;margin:0 auto;max-width:1040px;
padding:24px 32px;line-height:1.4;font-size:14px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;
padding-bottom:4px}h3{font-size:14px;margin:14px 0 4px}
.meta{color:#666;font-size:12px}.verdict{padding:10px 14px;border-radius:4px;margin:14px 0;
font-weight:bold}.ok{background:#e6f4ea;color:#1e6b34}.bad{background:#fde8e8;color:#a11}
.info{background:#eef3fb;color:#1f4f8a}
table{border-collapse:collapse;font-size:13px;margin:6px 0}th,td{padding:3px 10px;
border-bottom:1px solid #eee;text-align:right;vertical-align:top}th{background:#f6f6f6}
td.l,th.l{text-align:left}.regressed{color:#a11;font-weight:bold}.improved{color:#1e6b34}
.unchanged,.na{color:#777}.tag{display:inline-block;font-size:11px;padding:0 6px;
border-radius:3px;background:#a11;color:#fff;margin-right:4px}
figure{margin:10px 0 18px}figcaption{color:#666;font-size:12px}.tiles{display:flex;
flex-wrap:wrap;gap:10px}.tile{border:1px solid #ddd;border-radius:4px;padding:8px 12px;
min-width:130px}.tile b{display:block;font-size:18px}.tile span{font-size:11px;color:#666}
code{font-size:12px;background:#f4f4f4;padding:0 3px}
.incident{border-left:4px solid #ccc;padding:2px 0 2px 12px;margin:12px 0}
.badge{font-size:11px;padding:0 6px;border-radius:3px;color:#fff;margin-right:6px;
background:#777}.b-critical,.b-high{background:#a11}.b-medium{background:#c60}
.b-low{background:#1f4f8a}
.when{margin:2px 0 6px;color:#444}table.story td{border:0;padding:1px 10px 1px 0}
table.story td:first-child{color:#666;width:80px}.consequences{margin:2px 0;color:#444}
"""


def _row(cells: list[str], cls: list[str] | None = None, head: bool = False) -> str:
    tag = "th" if head else "td"
    cls = cls or [""] * len(cells)
    return (
        "<tr>"
        + "".join(
            f"<{tag}{f' class={c!r}' if c else ''}>{x}</{tag}>"
            for x, c in zip(cells, cls, strict=True)
        )
        + "</tr>"
    )


def _kpi_table(r: Report) -> str:
    m = r.measurement
    changes = {c.kpi: c for c in r.changes}
    with_base = bool(changes)
    head = ["KPI", "value"] + (
        ["baseline", "change", f"{r.thresholds.confidence:.0%} interval", "verdict"]
        if with_base
        else []
    )
    rows = [_row(head, ["l"] + [""] * (len(head) - 2) + (["l"] if with_base else [""]), True)]
    for kpi in KPIS:
        cells = [escape(kpi.label), fmt.measure(m.values.get(kpi.name), kpi.unit)]
        cls = ["l", ""]
        if with_base:
            c = changes[kpi.name]
            verdict, shown = c.verdict.replace("/", ""), fmt.verdict(c.verdict)
            cells += [
                fmt.measure(c.baseline, kpi.unit),
                fmt.delta(c),
                fmt.interval(c),
                f'<span class="{verdict}" title="{escape(c.reason)}">{shown}</span>',
            ]
            cls += ["", "", "", "l"]
        rows.append(_row(cells, cls))
    return "<table>" + "".join(rows) + "</table>"


def _tiles(r: Report) -> str:
    m = r.measurement
    tiles = []
    for name in (*MAIN_KPIS, "headroom_rps"):
        k = BY_NAME[name]
        tiles.append(
            f'<div class="tile"><span>{escape(k.label)}</span>'
            f"<b>{fmt.value(m.values.get(name), k.unit)}</b>"
            f"<span>{'' if k.unit in ('ratio', 'USD') else k.unit}</span></div>"
        )
    return '<div class="tiles">' + "".join(tiles) + "</div>"


def _load_note(r: Report) -> str:
    if not r.load_shift:
        return ""
    return (
        '<div class="verdict info">The load differs from the baseline\'s: '
        f"{escape(', '.join(r.load_shift))}. KPI changes may come from the load, not from the "
        "release.</div>"
    )


def _headline(r: Report) -> str:
    if r.baseline is None:
        return '<div class="verdict info">No baseline given: KPIs of this run only.</div>'
    if r.regressed:
        shown = r.regressed[:HEADLINE_KPIS]
        names = ", ".join(f"{c.label} {fmt.spoken(c)}" for c in shown)
        more = len(r.regressed) - len(shown)
        names += f" and {more} more (KPI table)" if more > 0 else ""
        return (
            f'<div class="verdict bad">REGRESSION in {counted(len(r.regressed), "KPI")}: '
            f"{escape(names)}</div>"
        )
    return (
        f'<div class="verdict ok">No regression against the baseline '
        f"({counted(len(r.improved), 'KPI')} improved).</div>"
    )


def _incidents(r: Report) -> str:
    """One block per incident, worst first (traceq/report/incidents.py), as render_md's."""
    v = r.view()
    parts = [f'<p class="meta">{escape(r.findings_note)}</p>'] if r.findings_note else []
    parts.append(f"<p>{escape(sentence(v.counts))}.</p>")
    for n, b in enumerate(v.blocks, 1):
        i = b.incident
        tag = '<span class="tag">NEW</span>' if b.new else ""
        sev = f'<span class="badge b-{escape(i.severity)}">{escape(i.severity)}</span>'
        parts.append(
            f'<div class="incident"><h3>{tag}{sev} Incident {n} · {escape(i.title)} '
            f"<code>{escape(i.root)}</code></h3>"
            + (f'<p class="when">{escape(sentence(b.when))}</p>' if b.when else "")
            + '<table class="story">'
            + "".join(_row([k, escape(x)], ["l", "l"]) for k, x in b.story)
            + "</table>"
        )
        if b.consequences:
            parts.append(
                "<p class='meta'>Explained by this incident (not separate failures):</p>"
                "<ul class='consequences'>"
                + "".join(
                    f"<li>└ <code>{escape(c.id)}</code> ({escape(c.status)}, see "
                    f"<code>{escape(i.root)}</code>): {escape(c.message)}</li>"
                    for c in b.consequences
                )
                + "</ul>"
            )
        if b.examples:
            codes = ", ".join(f"<code>{escape(x)}</code>" for x in b.examples)
            parts.append(f"<p class='meta'>Example requests: {codes}</p>")
        parts.append("</div>")
    for title, found in (
        ("Warnings that no incident holds", v.warnings),
        ("Playbooks that errored (their checks did not run)", v.errors),
    ):
        if found:
            items = "".join(
                f"<li><code>{escape(f.id)}</code>: {escape(f.message)}</li>" for f in found
            )
            parts.append(f"<p>{title}:</p><ul>{items}</ul>")
    for line in (v.assumed_gpu, v.not_run_line):
        if line:
            parts.append(f'<p class="meta">{escape(sentence(line))}.</p>')
    return "".join(parts)


def _tail(tail: list[Tail]) -> str:
    """The run's tail as render_md's: one row per metric, its p99 and the engine's sentence;
    "" for a diagnosis without one."""
    if not tail:
        return ""
    head = _row(["metric", "p99", "tail"], ["l", "", "l"], True)
    rows = "".join(
        _row([escape(t.metric), escape(t.p99), escape(t.line)], ["l", "", "l"]) for t in tail
    )
    return (
        "<h2>The run's tail</h2><p class='meta'>What the slowest requests of the whole run "
        "spent their time on (each incident's own tail is under it).</p>"
        f"<table>{head}{rows}</table>"
    )


def _phases(r: Report) -> str:
    rows = [
        _row(
            ["phase", "requests", "mean (ms)", "p50 (ms)", "p95 (ms)", "share of e2e"],
            ["l", "", "", "", "", ""],
            True,
        )
    ]
    for p in r.measurement.phases.iter_rows(named=True):
        rows.append(
            _row(
                [
                    escape(p["phase"]),
                    f"{p['n']:,}",
                    fmt.value(p["mean_ms"]),
                    fmt.value(p["p50_ms"]),
                    fmt.value(p["p95_ms"]),
                    fmt.value(p["share"], "ratio"),
                ],
                ["l", "", "", "", "", ""],
            )
        )
    return "<table>" + "".join(rows) + "</table>"


def _tokens(total: int, per_request: pl.Series) -> str:
    if per_request.is_null().all():
        return "—"  # not recorded by any source, not 0
    mean, p50 = per_request.mean(), per_request.median()
    return f"{total:,} (per request: mean {fmt.value(mean)}, p50 {fmt.value(p50)})"


def _profile(r: Report) -> str:
    c = r.measurement.context
    s = r.measurement.samples["requests"]
    rows = [
        ("requests", f"{c['requests']:,} ({c['errors']:,} failed)"),
        ("window", fmt.duration(c["duration_s"])),
        ("prompt tokens", _tokens(c["prompt_tokens"], s["prompt_tokens"])),
        ("output tokens", _tokens(c["output_tokens"], s["output_tokens"])),
        (
            "peak requests in flight",
            fmt.value(r.measurement.timeline["in_flight"].max(), "count")
            if r.measurement.timeline.height
            else "—",
        ),
        (
            "peak running / waiting (engine)",
            f"{fmt.value(c['peak_running'], 'count')} / {fmt.value(c['peak_waiting'], 'count')}",
        ),
        (
            "GPUs (cost)",
            f"{c['gpus']}{fmt.GPUS_ASSUMED if c.get('gpus_assumed') else ''} × "
            f"{fmt.duration(c['duration_s'])} = {c['gpu_hours']:.3f} "
            f"GPU-h at ${r.measurement.params['gpu_hour_usd']:g}/GPU-h",
        ),
    ]
    return "<table>" + "".join(_row([k, v], ["l", "l"]) for k, v in rows) + "</table>"


def _figure(chart: Chart) -> str:
    return (
        f'<figure id="{chart.id}"><h3>{escape(chart.title)}</h3>{chart.svg}'
        f"<figcaption>{escape(chart.caption)}</figcaption></figure>"
    )


def render_html(r: Report, charts: list[Chart]) -> str:
    """The whole report as one HTML document."""
    m = r.measurement
    by_id = {c.id: c for c in charts}
    tr = m.time_range
    slo = ", ".join(f"{k} ≤ {v:,g}" for k, v in m.params["slo"].items() if v is not None)
    meta = (
        f"dataset <code>{escape(m.dataset)}</code> · {escape(m.dataset_hash[:19])}… · "
        f"{escape(fmt.span(tr))} · traceq "
        f"{escape(m.traceq_version)} · measured {escape(m.measured_at)} · SLO {escape(slo)}"
    )
    if r.baseline is not None:
        b = r.baseline
        btr = b.get("time_range") or {}
        meta += (
            f"<br>baseline <code>{escape(str(b.get('dataset')))}</code> · "
            f"{escape(fmt.span(btr))} · traceq "
            f"{escape(str(b.get('traceq_version')))}"
        )
    body = [
        f"<h1>traceq health report</h1><div class='meta'>{meta}</div>",
        _headline(r),
        _load_note(r),
        _tiles(r),
        "<h2>Incidents</h2>" + _incidents(r),
        _tail(r.view().tail),
        "<h2>KPIs</h2>" + _kpi_table(r),
        f"<p>{escape(headroom_sentence(m.context['headroom'], m.params['slo']))}</p>",
        "<p class='meta'>Latency percentiles are linear (docs/METRICS.md); a KPI regresses when "
        "the change passes its absolute and relative thresholds and the bootstrap interval "
        "excludes 0 (docs/REPORT.md).</p>",
    ]
    if "latency" in by_id:
        body.append(_figure(by_id["latency"]))
    body.append("<h2>Phase breakdown</h2>" + _phases(r))
    if "phases" in by_id:
        body.append(_figure(by_id["phases"]))
    body.append("<h2>Request profile</h2>" + _profile(r))
    for cid in ("profile", "timeline"):
        if cid in by_id:
            body.append(_figure(by_id[cid]))
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>traceq report: {escape(m.dataset)}</title><style>{CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )
