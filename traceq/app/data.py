"""Cached, bounded loaders between the pages and the library: one `Session` per dataset
(`st.cache_resource`), and every query result of traceq/app/queries.py cached per dataset,
window and parameters (`st.cache_data`, bounded by entries and age). Pages call these and
never query on their own. `load_findings` is the one door to the playbook engine;
`engine_model` calibrates `traceq whatif`'s engine model once per dataset (the What if page).
"""

from __future__ import annotations

import atexit
import importlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import streamlit as st

from traceq import __version__
from traceq.app import queries, whatif
from traceq.app.queries import RequestFilter, TimeRange, Window
from traceq.findings import Diagnosis, Finding, severity_rank
from traceq.report import incidents
from traceq.report.incidents import View
from traceq.session import QueryError, Session
from traceq.whatif.cite import diagnose_and_cite
from traceq.whatif.limits import SettingError, SettingValue
from traceq.whatif.predict import MEMORY_LIMIT, Calibrated, WhatIfInputError, calibrate, observe

APP_ROW_CAP = 10_000
"""Rows any app query may return (the console's own cap is lower): a page that would ship
more than this to the browser fails loudly instead (a few thousand rows at most,
`shipped.ROW_BOUND`)."""

APP_TIME_LIMIT_S = 60.0
"""Seconds one app query may run: a full scan of a million-request dataset fits well inside
(docs/PERFORMANCE.md), and a page does not hang for minutes on a runaway console query."""

CACHE = {"max_entries": 64, "ttl": 3600, "show_spinner": False}
"""Bounds of every cached loader: 64 results (a few windows × pages), kept for an hour."""

ENGINE_MISSING = "the playbook engine is not installed (traceq.playbooks); no findings to show"


def _close(session: Session) -> None:
    session.close()


@st.cache_resource(max_entries=4, show_spinner=False, on_release=_close)
def session(dataset: str) -> Session:
    """The one session per open dataset (shared by every page and rerun; never mutated).
    Closed, with its spill directory, when evicted from the cache or when the app exits."""
    opened = Session(dataset, time_limit_s=APP_TIME_LIMIT_S, row_cap=APP_ROW_CAP)
    atexit.register(opened.close)
    return opened


@st.cache_data(**CACHE)
def time_range(dataset: str) -> TimeRange:
    return queries.time_range(session(dataset))


@st.cache_data(**CACHE)
def sources(dataset: str) -> pl.DataFrame:
    return session(dataset).sources()


@st.cache_data(**CACHE)
def kpis(dataset: str, window: Window, slo: tuple[float, float, float], price: float) -> dict:
    ttft, tpot, e2e = slo
    return queries.kpis(
        session(dataset),
        window,
        slo_ttft_ms=ttft,
        slo_tpot_ms=tpot,
        slo_e2e_ms=e2e,
        price_per_gpu_hour=price,
    )


@st.cache_data(**CACHE)
def series(dataset: str, window: Window, name: str) -> pl.DataFrame:
    """A bucketed time series: requests, arrivals, engine, gpu, markers or phases."""
    loaders = {
        "requests": queries.request_series,
        "arrivals": queries.arrival_series,
        "engine": queries.engine_series,
        "gpu": queries.gpu_series,
        "markers": queries.event_markers,
        "phases": queries.phases_by_window,
    }
    return loaders[name](session(dataset), window)


@st.cache_data(**CACHE)
def phases_by_length(dataset: str, window: Window, by: str) -> pl.DataFrame:
    return queries.phases_by_length(session(dataset), window, by)


@st.cache_data(**CACHE)
def slowest_requests(dataset: str, window: Window, limit: int = 50) -> pl.DataFrame:
    return queries.slowest_requests(session(dataset), window, limit)


@st.cache_data(**CACHE)
def request(dataset: str, request_id: str) -> dict[str, Any] | None:
    return queries.request(session(dataset), request_id)


@st.cache_data(**CACHE)
def request_hops(dataset: str, request_id: str) -> pl.DataFrame:
    return queries.request_hops(session(dataset), request_id)


@st.cache_data(**CACHE)
def request_tokens(dataset: str, request_id: str) -> pl.DataFrame:
    return queries.request_tokens(session(dataset), request_id)


@st.cache_data(**CACHE)
def requests_page(
    dataset: str, window: Window, flt: RequestFilter, page: int, page_size: int
) -> tuple[pl.DataFrame, int]:
    return queries.requests_page(session(dataset), window, flt, page=page, page_size=page_size)


@st.cache_data(**CACHE)
def export_size(dataset: str, window: Window) -> int:
    """Requests a Perfetto export of `window` would hold."""
    from traceq import perfetto

    return perfetto.count(session(dataset), window)


@st.cache_data(max_entries=4, ttl=3600, show_spinner=False)
def catalog(dataset: str) -> pl.DataFrame:
    return session(dataset).catalog()


# -- findings ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Findings:
    """What the Findings page shows: the diagnosis and, when there is none, why."""

    diagnosis: Diagnosis
    note: str | None = None

    @property
    def ranked(self) -> list[Finding]:
        """Failed and warned findings first, worst severity first, then the rest."""
        return rank(self.diagnosis.findings)

    @property
    def view(self) -> View:
        """What the pages lead with: the incidents, worst first, their consequences folded
        under them, and the playbooks that lacked their data on one line (the report's
        traceq/report/incidents.py)."""
        return incidents.view(self.diagnosis)


def rank(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (not f.failed, -severity_rank(f.severity), f.id))


@st.cache_data(max_entries=8, ttl=3600, show_spinner="Running the playbooks…")
def load_findings(
    dataset: str, findings_file: str | None = None, gpu: str | None = None
) -> Findings:
    """The findings for `dataset`: read from `findings_file` (the JSON `traceq diagnose
    --format json` writes) when given, else from the playbook engine when it is installed,
    with `gpu` named as the run's GPU (`traceq app --gpu`)."""
    return findings_for(dataset, findings_file, gpu)


def findings_for(
    dataset: str, findings_file: str | None = None, gpu: str | None = None
) -> Findings:
    """Uncached `load_findings` (the adapter to the engine; tests call it directly)."""
    if findings_file:
        data = json.loads(Path(findings_file).read_text())
        data.setdefault("dataset", dataset)
        for key in ("dataset_hash", "traceq_version", "started_at"):
            data.setdefault(key, "")
        data.setdefault("elapsed_s", 0.0)
        return Findings(Diagnosis.from_dict(data))
    try:
        engine = importlib.import_module("traceq.playbooks")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("traceq.playbooks"):
            return Findings(_empty(dataset), ENGINE_MISSING)
        raise
    # A session of its own: the engine materialises its rollups as temporary views (over
    # files in the session's temp directory) on the connection it is given, and the pages'
    # shared session is never mutated. The predictions playbooks cite are filled on it too
    # (traceq/whatif/cite.py).
    with Session(dataset) as own:
        options = engine.Options(gpu=gpu)
        return Findings(diagnose_and_cite(own, engine.load_catalog().playbooks, options))


def _empty(dataset: str) -> Diagnosis:
    return Diagnosis(
        findings=[],
        dataset=dataset,
        dataset_hash="",
        traceq_version=__version__,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        elapsed_s=0.0,
    )


# -- what if -------------------------------------------------------------------------------
@dataclass(frozen=True)
class EngineModel:
    """The engine model of a dataset (traceq whatif's calibration) or why there is none."""

    calibrated: Calibrated | None
    note: str | None = None


@st.cache_resource(max_entries=4, show_spinner="Calibrating the engine model…")
def engine_model(dataset: str) -> EngineModel:
    """The calibration of `dataset`, once per dataset (it is never mutated: every replay
    copies what it changes)."""
    return engine_model_for(dataset)


def engine_model_for(dataset: str) -> EngineModel:
    """Uncached `engine_model`: on a session of its own, under the calibration's memory limit
    (MEMORY_LIMIT in traceq/whatif/predict.py) and without the pages' row cap (the workload
    is up to 10,000 rows, read into the model, never shipped)."""
    with Session(dataset, memory_limit=MEMORY_LIMIT) as own:
        try:
            return EngineModel(calibrate(own))
        except (WhatIfInputError, SettingError, QueryError) as exc:
            return EngineModel(None, str(exc).splitlines()[0])


def _slo(slo: tuple[float, float, float]) -> dict[str, float | None]:
    return dict(zip(("ttft_ms", "tpot_ms", "e2e_ms"), slo, strict=True))


@st.cache_data(max_entries=16, ttl=3600, show_spinner="Replaying the engine model…")
def whatif_curves(
    dataset: str,
    changes: tuple[tuple[str, SettingValue], ...],
    slo: tuple[float, float, float],
    price: float,
) -> whatif.Curves:
    """TTFT p99 and SLO attainment against the rate, as observed and with `changes`."""
    cal = engine_model(dataset).calibrated
    assert cal is not None  # the page stops on a dataset without one
    observed = observe(session(dataset), _slo(slo), tbt=False)
    return whatif.curves(cal, observed, dict(changes), _slo(slo), price)


@st.cache_data(**CACHE)
def whatif_at(
    dataset: str,
    changes: tuple[tuple[str, SettingValue], ...],
    slo: tuple[float, float, float],
    price: float,
    rate: float,
) -> dict[str, dict[str, float | str | None]]:
    """The replay at one rate (the page's slider), as observed and with `changes`."""
    cal = engine_model(dataset).calibrated
    assert cal is not None
    return whatif.at_rate(cal, dict(changes), _slo(slo), price, rate)
