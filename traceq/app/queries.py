"""What the app asks of a dataset: plain functions over a `traceq.session.Session` that return
small polars frames (aggregated in DuckDB; SQL in traceq/sql/app_*.sql). No Streamlit here, so
tests and the chart builders use them directly; traceq/app/data.py caches them.

Every function takes the time window `Window(since, until)` (ns since the Unix epoch, UTC,
half-open) that the timeline's brush sets, and returns at most a few thousand rows whatever
the dataset's size: time series are bucketed to at most `MAX_BUCKETS` windows, tables are paged.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from traceq.session import Session
from traceq.sql import load

MAX_BUCKETS = 240
"""Most windows one time series has: enough for a chart 1,200 px wide at 5 px a bar, and a
bound on what reaches the browser (never more than a few thousand rows, `shipped.ROW_BOUND`)."""

NICE_STEPS_S = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1,
    2,
    5,
    10,
    15,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    21600,
    43200,
    86400,
)
"""Window lengths (s) the time axis snaps to, so windows read as round numbers."""

ENGINE_CARRY_S = 30.0
"""How long an engine stats sample still describes the engine (s): vLLM prints one every
10 s, so three missed lines mean the engine stopped reporting, and nothing is carried."""

MARKER_LIMIT = 2_000
"""Event markers drawn at most (the busiest windows first)."""

TOKEN_TICKS_LIMIT = 5_000
"""Token chunks one waterfall draws at most (a 5 k-chunk stream is already a solid band)."""

STALL_FACTOR = 3.0
"""A gap counts as a stall when longer than this many times the request's median gap
(docs/METRICS.md "Stall"): 3× sits well above the jitter of a steady decode loop."""

STALL_FLOOR_MS = 100.0
"""…and longer than this (ms): below 100 ms a reader of a stream does not see a pause."""

PAGE_SIZES = (25, 50, 100, 200)
"""Rows per page of the requests table."""

SORT_COLUMNS = (
    "arrival",
    "e2e_ms",
    "ttft_ms",
    "tpot_ms",
    "queue_ms",
    "prefill_ms",
    "decode_ms",
    "prompt_tokens",
    "output_tokens",
)
"""Columns the requests table sorts by, server-side (app_requests_page.sql)."""


@dataclass(frozen=True)
class Window:
    """A half-open time window [since, until), ns since the Unix epoch (UTC)."""

    since: int
    until: int

    @property
    def params(self) -> dict[str, int]:
        return {"since": self.since, "until": self.until}

    @property
    def seconds(self) -> float:
        return (self.until - self.since) / 1e9


@dataclass(frozen=True)
class TimeRange:
    """Where a dataset has data: everything, and the requests alone (the default window)."""

    start_ns: int | None
    end_ns: int | None
    requests_start_ns: int | None
    requests_end_ns: int | None

    @property
    def default(self) -> Window | None:
        """The window the app opens on: the requests' span, else everything; None if empty."""
        lo = self.requests_start_ns if self.requests_start_ns is not None else self.start_ns
        hi = self.requests_end_ns if self.requests_end_ns is not None else self.end_ns
        if lo is None or hi is None:
            return None
        return Window(lo, hi + 1)

    @property
    def full(self) -> Window | None:
        if self.start_ns is None or self.end_ns is None:
            return None
        return Window(self.start_ns, self.end_ns + 1)


def time_range(session: Session) -> TimeRange:
    """The dataset's time range over requests, engine stats, events and GPU samples."""
    row = session.query(load("app_time_range")).row(0, named=True)
    return TimeRange(**row)


def bucket_ns(window: Window, max_buckets: int = MAX_BUCKETS) -> int:
    """The smallest round window length that cuts `window` into at most `max_buckets`."""
    for step in NICE_STEPS_S:
        if window.seconds / step <= max_buckets:
            return int(step * 1e9)
    return int(window.seconds / max_buckets * 1e9) + 1


def _bucketed(session: Session, name: str, window: Window, **extra: object) -> pl.DataFrame:
    frame = session.query(load(name), {**window.params, "bucket_ns": bucket_ns(window), **extra})
    return with_time(frame)


def with_time(frame: pl.DataFrame, column: str = "ts", name: str = "time") -> pl.DataFrame:
    """Add `name`: the ns column `column` as ms since the epoch (Float64), the form Vega-Lite
    reads as a timestamp whatever the transport (what the charts plot on their time axes)."""
    if column not in frame.columns:
        return frame
    return frame.with_columns((pl.col(column) / 1e6).alias(name))


def kpis(
    session: Session,
    window: Window,
    *,
    slo_ttft_ms: float,
    slo_tpot_ms: float,
    slo_e2e_ms: float,
    price_per_gpu_hour: float,
    default_gpus: int = 1,
) -> dict[str, object]:
    """Overview KPIs of the requests that arrived in `window` (app_kpis.sql)."""
    params = {
        **window.params,
        "slo_ttft_ms": float(slo_ttft_ms),
        "slo_tpot_ms": float(slo_tpot_ms),
        "slo_e2e_ms": float(slo_e2e_ms),
        "price_per_gpu_hour": float(price_per_gpu_hour),
        "default_gpus": int(default_gpus),
    }
    return session.query(load("app_kpis"), params).row(0, named=True)


def request_series(session: Session, window: Window) -> pl.DataFrame:
    """Request rate and TTFT / TBT percentiles per window (app_timeline_requests.sql)."""
    return _bucketed(session, "app_timeline_requests", window)


def arrival_series(session: Session, window: Window) -> pl.DataFrame:
    """Arrivals and TTFT percentiles per window, without TBT (app_arrivals.sql)."""
    return _bucketed(session, "app_arrivals", window)


def engine_series(session: Session, window: Window) -> pl.DataFrame:
    """Running, waiting, KV usage and preemptions per window (app_timeline_engine.sql)."""
    return _bucketed(session, "app_timeline_engine", window, carry_ns=int(ENGINE_CARRY_S * 1e9))


def gpu_series(session: Session, window: Window) -> pl.DataFrame:
    """SM / DRAM activity, power, clocks per window (app_timeline_gpu.sql)."""
    return _bucketed(session, "app_timeline_gpu", window)


def event_markers(session: Session, window: Window) -> pl.DataFrame:
    """Start-up, preemption, error and engine-death markers (app_timeline_events.sql)."""
    return _bucketed(session, "app_timeline_events", window, limit=MARKER_LIMIT)


def phases_by_window(session: Session, window: Window) -> pl.DataFrame:
    """Mean ms per phase of the requests arriving in each window (app_phases_by_window.sql)."""
    return _bucketed(session, "app_phases_by_window", window)


def phases_by_length(session: Session, window: Window, by: str = "prompt") -> pl.DataFrame:
    """Mean ms per phase by prompt or output length bucket (app_phases_by_length.sql)."""
    if by not in ("prompt", "output"):
        msg = f"by must be 'prompt' or 'output', got {by!r}"
        raise ValueError(msg)
    return session.query(load("app_phases_by_length"), {**window.params, "by": by})


def slowest_requests(session: Session, window: Window, limit: int = 50) -> pl.DataFrame:
    """The slowest requests by e2e in `window` (the waterfall's picker)."""
    return session.query(load("app_slowest_requests"), {**window.params, "limit": limit})


def request(session: Session, request_id: str) -> dict[str, object] | None:
    """One request's phases (request_phases), or None when the id is unknown."""
    frame = session.query(load("app_request"), {"request_id": request_id})
    return frame.row(0, named=True) if frame.height else None


def request_hops(session: Session, request_id: str) -> pl.DataFrame:
    """One routed or disaggregated request's hops (request_hops) in ms since its arrival, a
    lane each (`hop · instance`); empty for a request one engine served alone."""
    return session.query(load("app_request_hops"), {"request_id": request_id})


def request_tokens(
    session: Session,
    request_id: str,
    *,
    stall_factor: float = STALL_FACTOR,
    stall_floor_ms: float = STALL_FLOOR_MS,
) -> pl.DataFrame:
    """One request's chunks with the gap before each and whether it is a stall."""
    params = {
        "request_id": request_id,
        "stall_factor": float(stall_factor),
        "stall_floor_ms": float(stall_floor_ms),
        "limit": TOKEN_TICKS_LIMIT,
    }
    return session.query(load("app_request_tokens"), params)


@dataclass(frozen=True)
class RequestFilter:
    """The requests table's filters and sort (all applied in DuckDB)."""

    id_like: str = ""
    min_e2e_ms: float = 0.0
    errors_only: bool = False
    sort: str = "e2e_ms"
    descending: bool = True


def requests_page(
    session: Session, window: Window, flt: RequestFilter, *, page: int, page_size: int
) -> tuple[pl.DataFrame, int]:
    """One page (0-based) of the filtered, sorted requests, and how many match in all."""
    if flt.sort not in SORT_COLUMNS:
        msg = f"cannot sort by {flt.sort!r}; one of {', '.join(SORT_COLUMNS)}"
        raise ValueError(msg)
    page_size = min(max(page_size, 1), max(PAGE_SIZES))
    where = {
        **window.params,
        "id_like": flt.id_like,
        "min_e2e_ms": float(flt.min_e2e_ms),
        "errors_only": flt.errors_only,
    }
    total = int(session.query(load("app_requests_count"), where).item())
    rows = session.query(
        load("app_requests_page"),
        {
            **where,
            "sort": flt.sort,
            "descending": flt.descending,
            "limit": page_size,
            "offset": max(page, 0) * page_size,
        },
    )
    return rows, total


CONSOLE_ROWS = 1_000
"""Rows the SQL console shows (and offers as CSV) at most."""

CONSOLE_TIME_LIMIT_S = 30.0
"""Seconds one console query may run before it is stopped with a message."""


def console_params(session: Session, sql: str, window: Window | None) -> dict[str, int]:
    """The time filter as `$since` / `$until` for a console query that names them (DuckDB
    refuses parameters a statement does not use, so only those it names are bound)."""
    if window is None:
        return {}
    try:
        statements = session.con.extract_statements(sql)
    except Exception:  # a syntax error: the query itself will report it
        return {}
    named = set().union(*(s.named_parameters for s in statements)) if statements else set()
    return {k: v for k, v in window.params.items() if k in named}
