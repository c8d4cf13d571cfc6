"""Altair chart builders for the app (and anything else that charts): each takes small polars
frames from traceq/app/queries.py and returns a chart; none queries or uses Streamlit, so they
are tested on plain frames.

Time axes are UTC and share one domain (the window), so stacked charts line up; every time
chart carries the interval selection `BRUSH` on x, which the timeline turns into the app's
time filter.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import altair as alt
import polars as pl

from traceq.app.queries import Window

BRUSH = "window"
"""Name of the x-interval selection every time chart carries (the timeline reads it)."""

PHASES = ("tokenize", "queue", "prefill", "decode", "residual")
PHASE_COLORS = ("#8c6bb1", "#f28e2b", "#e15759", "#4e79a7", "#bab0ac")
"""One colour per phase, the same in every chart (and the waterfall)."""
HOP_COLOR = "#9c755f"
"""The waterfall's hop lanes (one per hop and instance), apart from the phases' colours."""

MARKER_COLORS = {
    "start-up": "#59a14f",
    "preemption": "#f28e2b",
    "error": "#e15759",
    "engine death": "#000000",
}
SERIES_COLORS = ("#4e79a7", "#e15759", "#f28e2b", "#59a14f")
"""Line colours in order of the series (distinct hues, so p50 and p99 never look alike)."""
Y_AXIS_WIDTH = 60
"""Fixed width (px) of every y axis, so stacked time charts share one plot width and line up."""
WIDTH = "container"
ROW_HEIGHT = 210


def _x_time(window: Window | None, title: str | None = None) -> alt.X:
    domain = None if window is None else [_datetime(window.since), _datetime(window.until)]
    scale = alt.Scale(type="utc", domain=domain) if domain else alt.Scale(type="utc")
    return alt.X(
        "time:T", title=title, scale=scale, axis=alt.Axis(format="%H:%M:%S", labelFlush=True)
    )


_TIME_TIP = alt.Tooltip("time:T", title="time (UTC)", format="%H:%M:%S.%L", formatType="utc")


def _datetime(ns: int) -> alt.DateTime:
    """A Vega-Lite DateTime in UTC (a scale domain given as epoch numbers is misread once the
    chart passes through Streamlit; DateTime objects are not)."""
    when = datetime.fromtimestamp(ns // 1_000_000_000, UTC)
    return alt.DateTime(
        year=when.year, month=when.month, date=when.day, hours=when.hour,
        minutes=when.minute, seconds=when.second,
        milliseconds=(ns % 1_000_000_000) / 1e6, utc=True,
    )  # fmt: skip


def _legend() -> alt.Legend:
    """Legends sit inside the plot's top-right corner, so every plot keeps the same width."""
    return alt.Legend(orient="top-right", direction="horizontal", fillColor="#ffffffcc",
                      padding=2, title=None)  # fmt: skip


def _y_axis() -> alt.Axis:
    return alt.Axis(minExtent=Y_AXIS_WIDTH, format=",.4~g")


def _brush() -> alt.Parameter:
    return alt.selection_interval(encodings=["x"], name=BRUSH)


PADDING = {"left": 5, "top": 16, "right": 5, "bottom": 5}
"""Room above the title (without it Streamlit's frame can clip the title's top)."""


def _base(frame: pl.DataFrame, height: int = ROW_HEIGHT) -> alt.Chart:
    return alt.Chart(frame).properties(width=WIDTH, height=height, padding=PADDING)


def series(
    frame: pl.DataFrame,
    columns: Sequence[str],
    *,
    title: str,
    unit: str,
    window: Window | None = None,
    brush: bool = True,
    labels: dict[str, str] | None = None,
) -> alt.Chart:
    """Lines of `columns` over `time`, one colour each, y titled with `unit`."""
    names = labels or {}
    long = frame.select(
        "time", *[pl.col(c).cast(pl.Float64).alias(names.get(c, c)) for c in columns]
    ).unpivot(index="time", variable_name="series", value_name="value")
    long = long.drop_nulls("value")
    chart = (
        _base(long)
        .mark_line(point=alt.OverlayMarkDef(size=12), interpolate="step-after")
        .encode(
            x=_x_time(window),
            y=alt.Y("value:Q", title=unit, axis=_y_axis()),
            color=alt.Color(
                "series:N",
                title=None,
                legend=_legend() if len(columns) > 1 else None,
                scale=alt.Scale(range=list(SERIES_COLORS)),
            ),
            tooltip=[_TIME_TIP, "series:N", "value:Q"],
        )
        .properties(title=title)
    )
    return chart.add_params(_brush()) if brush else chart


def rate(frame: pl.DataFrame, *, window: Window | None = None, brush: bool = True) -> alt.Chart:
    """Request rate per window as bars (errors stacked in red)."""
    long = frame.select(
        "time",
        ok=(pl.col("requests") - pl.col("errors")).cast(pl.Float64),
        errors=pl.col("errors").cast(pl.Float64),
    ).unpivot(index="time", variable_name="kind", value_name="requests")
    chart = (
        _base(long)
        .mark_bar()
        .encode(
            x=_x_time(window),
            y=alt.Y("requests:Q", title="per window", stack=True, axis=_y_axis()),
            color=alt.Color(
                "kind:N",
                title=None,
                scale=alt.Scale(domain=["ok", "errors"], range=["#4e79a7", "#e15759"]),
                legend=_legend(),
            ),
            tooltip=[_TIME_TIP, "kind:N", "requests:Q"],
        )
        .properties(title="Requests arriving")
    )
    return chart.add_params(_brush()) if brush else chart


def markers(frame: pl.DataFrame, *, window: Window | None = None) -> alt.Chart:
    """Event markers (start-up, preemption, error, engine death) as ticks on one strip."""
    chart = (
        _base(frame, height=70)
        .mark_tick(thickness=3, size=22)
        .encode(
            x=_x_time(window),
            y=alt.Y("marker:N", title=None, axis=_y_axis()),
            color=alt.Color(
                "marker:N",
                legend=None,
                scale=alt.Scale(domain=list(MARKER_COLORS), range=list(MARKER_COLORS.values())),
            ),
            tooltip=[
                _TIME_TIP,
                "marker:N",
                "n:Q",
                "kinds:N",
                "example:N",
            ],
        )
        .properties(title="Events")
    )
    return chart.add_params(_brush())


def phase_stack_time(
    frame: pl.DataFrame, *, window: Window | None = None, brush: bool = True
) -> alt.Chart:
    """Mean time per phase of the requests arriving in each window, stacked."""
    long = _phases_long(frame, "time")
    chart = (
        _base(long, height=220)
        .mark_bar()
        .encode(
            x=_x_time(window),
            y=alt.Y("ms:Q", title="mean ms per request", stack=True, axis=_y_axis()),
            color=_phase_color(),
            order=alt.Order("order:Q"),
            tooltip=[
                _TIME_TIP,
                "phase:N",
                alt.Tooltip("ms:Q", format=",.1f"),
            ],
        )
        .properties(title="Where the time went, by arrival window")
    )
    return chart.add_params(_brush()) if brush else chart


def phase_stack_length(frame: pl.DataFrame, *, by: str = "prompt") -> alt.Chart:
    """Mean time per phase by length bucket (app_phases_by_length.sql), stacked."""
    long = _phases_long(frame, "length", "bucket", "requests")
    return (
        _base(long, height=220)
        .mark_bar()
        .encode(
            x=alt.X(
                "length:N",
                title=f"{by} tokens",
                sort=alt.SortField("bucket"),
                axis=alt.Axis(labelAngle=0),
            ),
            y=alt.Y("ms:Q", title="mean ms per request", stack=True),
            color=_phase_color(),
            order=alt.Order("order:Q"),
            tooltip=["length:N", "requests:Q", "phase:N", alt.Tooltip("ms:Q", format=",.1f")],
        )
        .properties(title=f"Where the time went, by {by} length")
    )


def _phases_long(frame: pl.DataFrame, *index: str) -> pl.DataFrame:
    present = [p for p in PHASES if p in frame.columns]
    long = frame.select(*index, *[pl.col(p).cast(pl.Float64) for p in present]).unpivot(
        index=list(index), variable_name="phase", value_name="ms"
    )
    order = pl.col("phase").replace_strict(list(PHASES), list(range(len(PHASES))))
    return long.with_columns(order=order, ms=pl.col("ms").clip(lower_bound=0)).drop_nulls("ms")


def _phase_color() -> alt.Color:
    return alt.Color(
        "phase:N",
        title=None,
        legend=alt.Legend(orient="right"),
        scale=alt.Scale(domain=list(PHASES), range=list(PHASE_COLORS)),
        sort=list(PHASES),
    )


def waterfall(
    req: dict[str, Any], tokens: pl.DataFrame, hops: pl.DataFrame | None = None
) -> alt.LayerChart:
    """One request: its hops across processes (a routed or disaggregated request: gateway,
    router, prefill, KV transfer, decode), one lane per hop and instance, on top; its phases
    as consecutive bars from arrival (ms); its token chunks as ticks on their own row, and
    the gaps that are stalls as red spans before their chunk."""
    start = 0.0
    rows = []
    for phase in ("tokenize", "queue", "prefill", "decode"):
        ms = req.get(f"{phase}_ms")
        if ms is None:
            continue
        ms = max(float(ms), 0.0)
        rows.append({"lane": phase, "phase": phase, "start": start, "end": start + ms, "ms": ms})
        start += ms
    bars = pl.DataFrame(
        rows,
        schema={
            "lane": pl.String,
            "phase": pl.String,
            "start": pl.Float64,
            "end": pl.Float64,
            "ms": pl.Float64,
        },
    )
    hops = hops if hops is not None else pl.DataFrame()
    hop_lanes = list(dict.fromkeys(hops["lane"].to_list())) if hops.height else []
    lanes = [*hop_lanes, *[r["lane"] for r in rows], "tokens"]
    y = alt.Y("lane:N", title=None, sort=lanes, scale=alt.Scale(domain=lanes, paddingInner=0.3))
    x_title = "ms since arrival"
    phase_bars = (
        alt.Chart(bars)
        .mark_bar()
        .encode(
            x=alt.X("start:Q", title=x_title),
            x2="end:Q",
            y=y,
            color=_phase_color(),
            tooltip=[
                "phase:N",
                alt.Tooltip("ms:Q", format=",.1f"),
                alt.Tooltip("start:Q", format=",.1f"),
            ],
        )
    )
    ticks_frame = tokens.select("idx", "at_ms", "n_tokens", "tbt_ms", "stall").with_columns(
        lane=pl.lit("tokens"), gap_start=pl.col("at_ms") - pl.col("tbt_ms").fill_null(0.0)
    )
    ticks = (
        alt.Chart(ticks_frame)
        .mark_tick(thickness=1, color="#4e79a7")
        .encode(
            x=alt.X("at_ms:Q", title=x_title),
            y=y,
            tooltip=[
                "idx:Q",
                alt.Tooltip("at_ms:Q", format=",.1f"),
                alt.Tooltip("tbt_ms:Q", format=",.1f"),
                "n_tokens:Q",
            ],
        )
    )
    stalls = (
        alt.Chart(ticks_frame.filter(pl.col("stall")))
        .mark_bar(color="#e15759", opacity=0.85)
        .encode(
            x="gap_start:Q",
            x2="at_ms:Q",
            y=y,
            tooltip=[alt.Tooltip("tbt_ms:Q", title="stall (ms)", format=",.1f"), "idx:Q"],
        )
    )
    layers = [phase_bars, stalls, ticks]
    if hop_lanes:
        drawn = hops.select("lane", "hop", "instance", "name", "start_ms", "end_ms", "dur_ms")
        hop_bars = (
            alt.Chart(drawn)
            .mark_bar(color=HOP_COLOR)
            .encode(
                x=alt.X("start_ms:Q", title=x_title),
                x2="end_ms:Q",
                y=y,
                tooltip=[
                    "hop:N",
                    "instance:N",
                    "name:N",
                    alt.Tooltip("dur_ms:Q", format=",.2f"),
                    alt.Tooltip("start_ms:Q", format=",.2f"),
                ],
            )
        )
        layers.insert(0, hop_bars)
    return alt.layer(*layers).properties(
        width=WIDTH,
        height=70 * len(lanes),
        title=f"Request {req['request_id']}",
        padding=PADDING,
    )


TIME_COLUMNS = ("time", "ts", "start", "window_start", "t_arrival")
EPOCH_NS = (10**17, 4 * 10**18)
"""Integers in this range are taken for ns since the epoch (1973 to 2096), not for figures."""
EVIDENCE_SERIES = 4
"""Value columns of one evidence table drawn at most (one small chart each)."""


def stamp_columns(frame: pl.DataFrame) -> list[str]:
    """Integer columns that hold ns stamps (`ts`, `ts_end`, `t_first_token` …): every
    non-null value lies in EPOCH_NS."""
    out = []
    for c in frame.columns:
        col = frame[c]
        if col.dtype.is_integer() and col.null_count() < len(col):
            lo, hi = col.min(), col.max()
            if EPOCH_NS[0] <= lo and hi <= EPOCH_NS[1]:  # type: ignore[operator]
                out.append(c)
    return out


def evidence(columns: Sequence[str], rows: list[dict[str, Any]]) -> list[alt.Chart]:
    """Charts for an evidence table when it has a shape worth drawing: a time column (ns)
    and figures → one small line chart per figure, each on its own scale (a ratio and a
    latency never share an axis); a label column and a figure → bars. Else none."""
    if not rows:
        return []
    frame = pl.DataFrame(rows, infer_schema_length=None)
    present = [c for c in columns if c in frame.columns] or frame.columns
    stamps = stamp_columns(frame)
    numeric = [c for c in present if frame[c].dtype.is_numeric() and c not in stamps]
    time_col = next((c for c in (*TIME_COLUMNS, *stamps) if c in stamps), None)
    if time_col is not None:
        timed = frame.with_columns(time=pl.col(time_col) / 1e6)
        return [
            series(timed, [c], title=c, unit="", brush=False).properties(height=170)
            for c in numeric[:EVIDENCE_SERIES]
        ]
    labels = [c for c in present if frame[c].dtype == pl.String]
    if not labels or not numeric:
        return []
    label, value = labels[0], numeric[0]
    return [
        _base(frame.head(50), height=max(120, 14 * min(frame.height, 50)))
        .mark_bar()
        .encode(
            y=alt.Y(f"{label}:N", sort="-x", title=None),
            x=alt.X(f"{value}:Q"),
            tooltip=[f"{label}:N", f"{value}:Q"],
        )
    ]


def row_count(chart: alt.TopLevelMixin) -> int:
    """Rows of data a chart carries (every layer and sub-chart): the bound the app keeps."""
    spec = chart.to_dict()  # Altair gathers inline data into top-level "datasets"
    return sum(len(values) for values in spec.get("datasets", {}).values())
