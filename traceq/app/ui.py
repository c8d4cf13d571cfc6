"""Small presentation helpers the pages share: the page context (dataset + window), number
formats, and charts that turn a brush into the app's time filter."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl
import streamlit as st

from traceq.app import charts, data, state
from traceq.app.queries import TimeRange, Window

PAGES = Path(__file__).resolve().parent / "pages"
SEVERITY_COLOR = {
    "critical": "red",
    "high": "red",
    "medium": "orange",
    "low": "blue",
    "info": "gray",
}
STATUS_COLOR = {
    "fail": "red",
    "warn": "orange",
    "error": "violet",
    "pass": "green",
    "not_applicable": "gray",
}


@dataclass(frozen=True)
class Context:
    dataset: str
    window: Window
    time_range: TimeRange


def context() -> Context:
    """The open dataset and the window in force; stops the page when there is nothing to show."""
    dataset = state.dataset()
    if dataset is None:
        st.switch_page(PAGES / "home.py")
    tr = data.time_range(dataset)
    window = state.window(tr)
    if window is None:
        st.info("This dataset has no timed rows yet: ingest traces, logs or GPU samples into it.")
        st.stop()
    return Context(dataset, window, tr)


def go(page: str, **shared: str | None) -> None:
    """Set shared state (request, since, until) and open another page with it in the URL."""
    for key, value in shared.items():
        state.put(key, value)
    params = {k: v for k in state.KEYS if (v := state.get(k)) is not None}
    st.switch_page(PAGES / f"{page}.py", query_params=params)


def ms(value: Any) -> str:
    """A duration in ms as text: `840 ms`, `12.3 s`; `–` when unknown."""
    if value is None:
        return "–"
    value = float(value)
    if abs(value) >= 10_000:
        return f"{value / 1000:,.1f} s"
    if abs(value) >= 1_000:
        return f"{value / 1000:,.2f} s"
    return f"{value:,.1f} ms" if abs(value) < 100 else f"{value:,.0f} ms"


def num(value: Any, fmt: str = ",.2f", suffix: str = "") -> str:
    return "–" if value is None else f"{float(value):{fmt}}{suffix}"


def pct(value: Any) -> str:
    return "–" if value is None else f"{float(value) * 100:,.1f} %"


def brushable(chart: alt.TopLevelMixin, key: str, window: Window) -> None:
    """Draw `chart`; a window brushed on it becomes the app's time filter (sidebar + URL).

    The widget key carries the window, so a new window starts a fresh, empty brush."""
    event = st.altair_chart(
        chart,
        width="stretch",
        on_select="rerun",
        selection_mode=charts.BRUSH,
        key=f"{key}_{window.since}_{window.until}",
    )
    chosen = brushed_window(event)
    if chosen is not None and chosen != window:
        state.set_window(chosen)
        st.rerun()


def brushed_window(event: Any) -> Window | None:
    """The [since, until) a Vega-Lite interval selection names (epoch ms or ISO text)."""
    selection = (event or {}).get("selection", {}).get(charts.BRUSH) or {}
    interval = selection.get("time")
    if not interval or len(interval) != 2:
        return None
    bounds = []
    for value in interval:
        if isinstance(value, int | float):
            bounds.append(int(value * 1_000_000))
        else:
            bounds.append(state.parse_ts(str(value)))
    lo, hi = sorted(bounds)
    return Window(lo, hi) if hi > lo else None


def evidence_frame(columns: list[str], rows: list[dict[str, Any]]) -> pl.DataFrame:
    """An evidence table for display: its ns stamps (`ts`, `ts_end`, `t_*` …) as UTC times."""
    frame = pl.DataFrame(rows, infer_schema_length=None)
    frame = frame.select([c for c in columns if c in frame.columns] or frame.columns)
    return frame.with_columns(
        pl.from_epoch(c, "ns").dt.replace_time_zone("UTC").alias(c)
        for c in charts.stamp_columns(frame)
    )


MS_COLUMN = st.column_config.NumberColumn(format="%.1f")


def empty_note(what: str) -> None:
    st.caption(f"No {what} in this window.")
