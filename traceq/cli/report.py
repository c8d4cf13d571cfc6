"""`traceq report`: the nightly health report and regression gate (traceq/report/, docs/REPORT.md).

Exit codes: 0 no regression (or no baseline), 1 a KPI regressed and --fail-on-regression was
given, 2 usage or input error (unreadable dataset, baseline or thresholds file)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from traceq.cli.common import Failure, checked_gpu
from traceq.playbooks.words import counted
from traceq.render import render_frame
from traceq.slo import DEFAULT_GPU_HOUR_USD

SLO_KEYS = ("ttft_ms", "tpot_ms", "e2e_ms")
FORMATS = {".html": "html", ".htm": "html", ".md": "md", ".json": "json"}


def parse_slo(text: str | None) -> dict[str, float | None]:
    """`"ttft_ms=500,tpot_ms=50"` → {"ttft_ms": 500.0, "tpot_ms": 50.0}; `none` lifts one."""
    slo: dict[str, float | None] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in SLO_KEYS:
            raise click.UsageError(f"--slo expects {'|'.join(SLO_KEYS)}=MS, got {part!r}")
        if value.strip().lower() == "none":
            slo[key] = None
            continue
        try:
            slo[key] = float(value)
        except ValueError:
            raise click.UsageError(f"--slo {key}: not a number: {value!r}") from None
        if slo[key] <= 0:  # type: ignore[operator]
            raise click.UsageError(f"--slo {key} must be positive")
    return slo


def _trend(directory: str, last: int) -> None:
    from traceq.report.trend import history, readable

    if not Path(directory).is_dir():
        raise Failure(f"--trend {directory}: not a directory")
    frame = history(directory, last)
    if frame.height == 0:
        raise Failure(f"--trend {directory}: no traceq baseline or JSON report in it")
    click.echo(render_frame(readable(frame), "table"), nl=False)


@click.command("report")
@click.argument("dataset", required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="Write the report: .html (one self-contained file), .md (charts in "
    "<name>_files/) or .json.",
)
@click.option(
    "--baseline",
    type=click.Path(dir_okay=False),
    help="Compare with this baseline file (from --save-baseline).",
)
@click.option(
    "--save-baseline", type=click.Path(dir_okay=False), help="Save this run as a baseline file."
)
@click.option(
    "--thresholds",
    type=click.Path(dir_okay=False),
    help="YAML file overriding the regression thresholds (docs/REPORT.md).",
)
@click.option(
    "--slo",
    help="Per-request SLO for goodput, e.g. ttft_ms=500,tpot_ms=50,e2e_ms=10000 "
    "[default: ttft_ms=2000,tpot_ms=100].",
)
@click.option(
    "--gpu-hour-price",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="USD per GPU-hour for the cost KPI [default: 2.0].",
)
@click.option(
    "--gpus",
    type=click.IntRange(min=1),
    help="GPUs serving the run (default: the GPUs in the GPU samples, else 1).",
)
@click.option(
    "--gpu",
    "gpu_name",
    metavar="NAME",
    help="The GPU the run served on, for the playbooks' GPU-scaled floors, where the data "
    "names none or the wrong one: an id or name of traceq/hardware/gpus.csv (l4, "
    "a100-sxm4-80gb, H200).",
)
@click.option(
    "--fail-on-regression", is_flag=True, help="Exit 1 when a KPI regressed against --baseline."
)
@click.option("--no-findings", is_flag=True, help="Do not run the playbooks.")
@click.option(
    "--no-headroom",
    is_flag=True,
    help="Do not search the max sustainable rate (the Headroom KPI, traceq whatif's model).",
)
@click.option(
    "--trend",
    "trend_dir",
    type=click.Path(file_okay=False),
    help="Print the main KPIs of the baselines / JSON reports in this directory.",
)
@click.option(
    "--last",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="With --trend: how many of the latest runs.",
)
@click.option(
    "--memory-limit",
    default="2GB",
    show_default=True,
    help="DuckDB memory limit; beyond it queries spill to disk.",
)
def report_cmd(
    dataset: str | None,
    output: str | None,
    baseline: str | None,
    save_baseline: str | None,
    thresholds: str | None,
    slo: str | None,
    gpu_hour_price: float | None,
    gpus: int | None,
    gpu_name: str | None,
    fail_on_regression: bool,
    no_findings: bool,
    no_headroom: bool,
    trend_dir: str | None,
    last: int,
    memory_limit: str,
) -> None:
    """Health report of DATASET: KPIs, phases, findings, request profile and charts; with
    --baseline, each KPI compared (change, bootstrap interval, verdict).

    \b
    traceq report run.tq -o report.html --baseline main.json --fail-on-regression
    traceq report run.tq --save-baseline baselines/$(date +%F).json
    traceq report --trend baselines/ --last 14
    """
    if dataset is None:
        if trend_dir is None:
            raise click.UsageError("give DATASET (or --trend DIR)")
        _trend(trend_dir, last)
        return
    fmt = None
    if output is not None:
        fmt = FORMATS.get(Path(output).suffix.lower())
        if fmt is None:
            raise click.UsageError("-o must end in .html, .md or .json")
    from traceq.report import ReportOptions, build_report
    from traceq.report.baseline import BaselineError
    from traceq.report.baseline import save_baseline as write_baseline
    from traceq.report.thresholds import ThresholdError
    from traceq.session import QueryError

    options = ReportOptions(
        baseline=baseline,
        thresholds=thresholds,
        slo=parse_slo(slo),
        gpu_hour_usd=gpu_hour_price or DEFAULT_GPU_HOUR_USD,
        gpus=gpus,
        gpu=checked_gpu(gpu_name),
        findings=not no_findings,
        headroom=not no_headroom,
        memory_limit=memory_limit,
    )
    try:
        report = build_report(dataset, options)
    except (QueryError, BaselineError, ThresholdError, ValueError) as exc:
        raise Failure(str(exc)) from exc
    if not report.measurement.context["requests"]:
        raise Failure(nothing_to_report(dataset, report.measurement.context.get("holds") or {}))
    try:
        if output is not None:
            _write(report, Path(output), fmt)
        if save_baseline is not None:
            write_baseline(report.baseline_doc(), save_baseline)
    except OSError as exc:
        raise Failure(str(exc)) from exc
    _summary(report)
    if output is not None:
        click.echo(f"report: {output}")
    if save_baseline is not None:
        click.echo(f"baseline saved: {save_baseline}")
    if trend_dir is not None:
        _trend(trend_dir, last)
    if fail_on_regression and report.regressed:
        sys.exit(1)  # SystemExit passes through click and traceq.cli.main unchanged


PER_REQUEST = {
    "vllm-bench": "rerun vllm bench serve with --save-detailed",
    "inference-perf": "set report.request_lifecycle.per_request: true in inference-perf's config",
}
"""How a load tool writes each request, where its summary alone was ingested."""


def nothing_to_report(dataset: str, holds: dict) -> str:
    """The refusal of a dataset with no requests, saying what it holds instead and what
    would give a report.

    >>> print(nothing_to_report("b.tq", {"tools": "vllm-bench", "tool_figures": 91}))
    ... # doctest: +NORMALIZE_WHITESPACE
    b.tq has no requests: nothing to report; it holds the summary of vllm-bench (91 figures
    in tool_metrics) but no request, and a report needs each request's times: rerun vllm
    bench serve with --save-detailed
    """
    head = f"{dataset} has no requests: nothing to report"
    tools = str(holds.get("tools") or "")
    held = [
        f"the summary of {tools} ({holds['tool_figures']:,} figures in tool_metrics)"
        if holds.get("tool_figures")
        else "",
        counted(holds["stats_lines"], "engine stats sample") if holds.get("stats_lines") else "",
        counted(holds["gpu_samples"], "GPU sample") if holds.get("gpu_samples") else "",
    ]
    held = [h for h in held if h]
    if not held:
        return head
    how = "; ".join(PER_REQUEST[t] for t in tools.split(", ") if t in PER_REQUEST)
    how = how or "the server's OpenTelemetry traces or a load test's per-request export"
    listed = ", ".join(held[:-1]) + (" and " if len(held) > 1 else "") + held[-1]
    return (
        f"{head}; it holds {listed} but no request, and a report needs each request's times: {how}"
    )


def _write(report, path: Path, fmt: str | None) -> None:  # type: ignore[no-untyped-def]
    from traceq.report.charts import build
    from traceq.report.render_html import render_html
    from traceq.report.render_md import write_md

    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "json":
        path.write_bytes(orjson.dumps(report.to_dict(), option=orjson.OPT_INDENT_2))
        return
    base_samples = report.baseline["samples"] if report.baseline is not None else None
    charts = build(report.measurement, base_samples)
    if fmt == "html":
        path.write_text(render_html(report, charts))
    else:
        write_md(report, charts, path)


def _summary(report) -> None:  # type: ignore[no-untyped-def]
    from traceq.report import fmt
    from traceq.report.headroom import sentence
    from traceq.report.kpis import BY_NAME, MAIN_KPIS

    m = report.measurement
    c = m.context
    click.echo(
        f"{m.dataset}: {c['requests']:,} requests over {fmt.duration(c['duration_s'])}, "
        f"{c['errors']:,} failed"
    )
    for name in MAIN_KPIS:
        k = BY_NAME[name]
        v = m.values.get(name)
        unit = fmt.suffix(k.unit) if v is not None else ""
        click.echo(f"  {k.label:32} {fmt.value(v, k.unit):>12}{unit}")
    click.echo(f"  {sentence(c['headroom'], m.params['slo'])}")
    incidents = report.incidents()
    new = [i for i, is_new in incidents if is_new]
    if report.findings_note:
        click.echo(f"incidents: {report.findings_note}")
    else:
        against = f" ({len(new)} new against the baseline)" if report.baseline else ""
        click.echo(f"incidents: {len(incidents)}{against}")
    if report.baseline is None:
        return
    if report.load_shift:
        click.echo(f"note: the load differs from the baseline's: {', '.join(report.load_shift)}")
    if not report.regressed:
        click.echo(
            f"no regression against the baseline ({counted(len(report.improved), 'KPI')} improved)"
        )
        return
    for ch in report.regressed:
        click.echo(
            f"REGRESSED {ch.kpi}: {fmt.value(ch.baseline, ch.unit)} → "
            f"{fmt.measure(ch.current, ch.unit)}, {fmt.delta(ch)}, "
            f"{report.thresholds.confidence:.0%} interval {fmt.interval(ch)}"
        )
