"""The report's charts: Altair specs rendered to static SVG by vl-convert (no browser, no
JavaScript, no network), so the HTML report is one self-contained file. Each chart is built
from small pre-aggregated frames (quantile curves, histogram bins, time windows)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import polars as pl
import vl_convert

WIDTH = 300
HEIGHT = 150
LEVELS = np.linspace(0.0, 1.0, 201)
COLORS = {"current": "#1f5fa8", "baseline": "#9a9a9a"}
FONT = "Helvetica, Arial, sans-serif"  # system fonts only: nothing is fetched
NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "tbt_ms": "TBT", "e2e_ms": "e2e"}


@dataclass(frozen=True)
class Chart:
    """One rendered chart: an id for links, a title, a caption and the SVG text."""

    id: str
    title: str
    caption: str
    svg: str


def _config(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    return (
        chart.configure(font=FONT)
        .configure_view(stroke=None)
        .configure_axis(labelFontSize=10, titleFontSize=11, grid=True, gridColor="#eee")
    )


def render_svg(chart: alt.TopLevelMixin, prefix: str) -> str:
    """The chart as standalone SVG text, its element ids prefixed so several SVGs can share
    one HTML page without clashing clip paths."""
    svg = vl_convert.vegalite_to_svg(_config(chart).to_json())
    svg = re.sub(r'id="([^"]+)"', rf'id="{prefix}-\1"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}-\1)", svg)
    return re.sub(r'href="#([^"]+)"', rf'href="#{prefix}-\1"', svg)


def _curve(values: np.ndarray, run: str, metric: str) -> pl.DataFrame:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return pl.DataFrame()
    return pl.DataFrame(
        {"value": np.quantile(values, LEVELS), "share": LEVELS, "run": run, "metric": metric}
    )


def latency_cdfs(samples: dict[str, pl.DataFrame], base: dict[str, pl.DataFrame] | None) -> Any:
    """Cumulative distributions of TTFT, TPOT, TBT and e2e; the baseline's in grey."""
    panels = []
    for metric, sample in (
        ("ttft_ms", "requests"),
        ("tpot_ms", "requests"),
        ("tbt_ms", "gaps"),
        ("e2e_ms", "requests"),
    ):
        frames = []
        for run, src in (("baseline", base), ("current", samples)):
            if src is not None and sample in src and metric in src[sample].columns:
                col = src[sample][metric].cast(pl.Float64).drop_nulls().to_numpy()
                frames.append(_curve(col, run, metric))
        frames = [f for f in frames if f.height]
        if not frames:
            continue
        data = pl.concat(frames, how="vertical")
        runs = [r for r in COLORS if r in set(data["run"])]
        hi = float(data.filter(pl.col("share") <= 0.995)["value"].max() or 1.0)  # type: ignore[arg-type]
        panels.append(
            alt.Chart(data.filter(pl.col("value") <= hi))
            .mark_line(interpolate="step-after", strokeWidth=1.8)
            .encode(
                x=alt.X("value:Q", title=f"{NAMES[metric]} (ms)"),
                y=alt.Y(
                    "share:Q",
                    title="share of requests" if sample == "requests" else "share of gaps",
                    axis=alt.Axis(format="%"),
                ),
                color=alt.Color(
                    "run:N",
                    scale=alt.Scale(domain=runs, range=[COLORS[r] for r in runs]),
                    title=None,
                ),
            )
            .properties(width=WIDTH, height=HEIGHT)
        )
    if not panels:
        return None
    rows = [alt.hconcat(*panels[i : i + 2]) for i in range(0, len(panels), 2)]
    return alt.vconcat(*rows)


def phases(frame: pl.DataFrame) -> Any:
    """Mean time per phase (ms), one bar each, labelled with the phase's share of e2e."""
    data = frame.select("phase", "mean_ms", "share").drop_nulls("mean_ms")
    if data.height == 0:
        return None
    data = data.with_columns(label=(pl.col("share") * 100).round(1).cast(pl.String) + " %")
    base = alt.Chart(data).encode(
        y=alt.Y("phase:N", sort=list(data["phase"]), title=None),
        x=alt.X("mean_ms:Q", title="mean per request (ms)"),
    )
    bars = base.mark_bar(color=COLORS["current"])
    text = base.mark_text(align="left", dx=3, fontSize=10).encode(text="label:N")
    return (bars + text).properties(width=2 * WIDTH, height=110)


def _hist(values: np.ndarray, bins: int = 30) -> pl.DataFrame:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return pl.DataFrame()
    hi = max(float(np.quantile(values, 0.995)), 1.0)
    counts, edges = np.histogram(np.clip(values, 0, hi), bins=bins, range=(0, hi))
    return pl.DataFrame({"lo": edges[:-1], "hi": edges[1:], "requests": counts})


def lengths(sample: pl.DataFrame) -> Any:
    """Histograms of prompt and output tokens per request (the request profile)."""
    panels = []
    for col, title in (("prompt_tokens", "prompt tokens"), ("output_tokens", "output tokens")):
        if col not in sample.columns:
            continue
        data = _hist(sample[col].cast(pl.Float64).drop_nulls().to_numpy())
        if data.height == 0:
            continue
        panels.append(
            alt.Chart(data)
            .mark_bar(color=COLORS["current"])
            .encode(
                x=alt.X("lo:Q", title=f"{title} per request", bin="binned"),
                x2="hi:Q",
                y=alt.Y("requests:Q", title="requests"),
            )
            .properties(width=WIDTH, height=HEIGHT)
        )
    return alt.hconcat(*panels) if panels else None


def timeline(frame: pl.DataFrame, engine: pl.DataFrame) -> Any:
    """Concurrency, completed output tokens/s, TTFT p50 / p95 and (with engine stats) KV
    usage and waiting requests on one time axis (UTC)."""
    if frame.height == 0:
        return None
    data = frame.with_columns(time=pl.from_epoch(pl.col("ts"), time_unit="ns"))
    span_s = float(frame["ts"].max() - frame["ts"].min()) / 1e9  # type: ignore[operator, arg-type]
    clock = "%H:%M:%S" if span_s < 1800 else "%H:%M"
    x = alt.X("time:T", title="time (UTC)", axis=alt.Axis(format=clock))
    panels = [
        alt.Chart(data)
        .mark_line(color=COLORS["current"], interpolate="step-after")
        .encode(x=x, y=alt.Y("in_flight:Q", title="requests in flight"))
        .properties(width=2 * WIDTH + 40, height=90),
        alt.Chart(data)
        .mark_line(color=COLORS["current"], interpolate="step-after")
        .encode(x=x, y=alt.Y("output_tokens_per_s:Q", title="output tok/s"))
        .properties(width=2 * WIDTH + 40, height=90),
    ]
    ttft = data.rename({"ttft_p50_ms": "TTFT p50", "ttft_p95_ms": "TTFT p95"}).unpivot(
        index="time", on=["TTFT p50", "TTFT p95"], variable_name="stat"
    )
    ttft = ttft.drop_nulls("value")
    if ttft.height:
        panels.append(
            alt.Chart(ttft)
            .mark_line(point=alt.OverlayMarkDef(size=10))
            .encode(
                x=x,
                y=alt.Y("value:Q", title="TTFT (ms)"),
                color=alt.Color(
                    "stat:N", title=None, scale=alt.Scale(range=["#1f5fa8", "#d9480f"])
                ),
            )
            .properties(width=2 * WIDTH + 40, height=90)
        )
    if engine.height and engine["kv_usage"].drop_nulls().len():
        eng = engine.with_columns(time=pl.from_epoch(pl.col("ts"), time_unit="ns"))
        panels.append(
            alt.Chart(eng)
            .mark_area(color="#7b61a8", opacity=0.6, interpolate="step-after")
            .encode(
                x=alt.X("time:T", title="engine time (UTC)", axis=alt.Axis(format=clock)),
                y=alt.Y(
                    "kv_usage:Q",
                    title="KV usage",
                    axis=alt.Axis(format="%"),
                    scale=alt.Scale(domain=[0, 1]),
                ),
            )
            .properties(width=2 * WIDTH + 40, height=70)
        )
    return alt.vconcat(*panels)


def trend(frame: pl.DataFrame) -> Any:
    """Main KPIs across reports (`--trend`): one small line chart per KPI."""
    panels = [
        alt.Chart(frame.filter(pl.col("kpi") == kpi))
        .mark_line(point=True, color=COLORS["current"])
        .encode(
            x=alt.X("run:O", title=None, sort=None),
            y=alt.Y("value:Q", title=kpi, scale=alt.Scale(zero=False)),
        )
        .properties(width=WIDTH, height=90)
        for kpi in frame["kpi"].unique(maintain_order=True)
    ]
    rows = [alt.hconcat(*panels[i : i + 2]) for i in range(0, len(panels), 2)]
    return alt.vconcat(*rows) if rows else None


def build(measurement: Any, base_samples: dict[str, pl.DataFrame] | None) -> list[Chart]:
    """Every chart of the report, rendered."""
    specs = [
        (
            "latency",
            "Latency distributions",
            "Cumulative share of requests (chunk gaps for TBT) "
            "at or below each latency" + (", baseline in grey" if base_samples else "") + ".",
            latency_cdfs(measurement.samples, base_samples),
        ),
        (
            "phases",
            "Phase breakdown",
            "Mean time per request in each phase; label: the phase's share of all e2e time.",
            phases(measurement.phases),
        ),
        (
            "profile",
            "Request profile",
            "Prompt and output tokens per request (values above the "
            "99.5th percentile in the last bin).",
            lengths(measurement.samples["requests"]),
        ),
        (
            "timeline",
            "Over time",
            "Requests in flight at each window's start, output tokens/s "
            "completed per window, TTFT of the requests arriving in it, and engine KV usage.",
            timeline(measurement.timeline, measurement.engine_timeline),
        ),
    ]
    n = measurement.context["requests"]
    sampled = measurement.samples["requests"].height
    note = f" Drawn from a uniform sample of {sampled:,} of {n:,} requests." if sampled < n else ""
    return [
        Chart(
            cid,
            title,
            caption + (note if cid in ("latency", "profile") else ""),
            render_svg(spec, cid),
        )
        for cid, title, caption, spec in specs
        if spec is not None
    ]
