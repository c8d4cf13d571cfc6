"""The report's Headroom KPI: the max sustainable arrival rate at the report's SLO, from the
engine model `traceq whatif` calibrates (traceq/whatif/, docs/WHATIF.md). A baseline keeps it
among its values, so the gate fails on lost capacity (`headroom_rps` in thresholds.yaml).

A dataset the model cannot calibrate (no per-token timing on the server, no start-up lines
with the engine's limits, too short a run) has no Headroom, nor has a run so short that its
requests meet the SLO at any rate (the search reaches its ceiling, MAX_FACTOR in
traceq/whatif/search.py): the report says why in one sentence, and the rest of the report is
unchanged.

The calibration the KPI is measured on is kept (`Headroom.calibrated`, never saved) for the
predictions playbooks cite (traceq/whatif/cite.py), so a report fits the run's engine model
once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from traceq.session import QueryError, Session
from traceq.whatif.limits import SettingError
from traceq.whatif.predict import (
    MEMORY_LIMIT,
    Calibrated,
    WhatIfInputError,
    backtest,
    calibrate,
    low_confidence_warning,
    observe,
)
from traceq.whatif.search import max_rate

ATTAINMENT = 0.95
"""Share of requests that must meet the SLO at the Headroom rate: 95 %, the attainment target
`traceq whatif --max-rate` defaults to (DEFAULT_ATTAINMENT in traceq/whatif/predict.py)."""

SEEDS = (0,)
"""Replays the Headroom search runs: the trace replay alone (the run's own arrivals, rescaled).
It is deterministic, so the same dataset always gives the same Headroom and a gate compares
like with like, and it costs a third of the three-seed search of `whatif --max-rate`."""


@dataclass(frozen=True)
class Headroom:
    """The KPI and what a reader needs beside it: the run's own rate, whether the search
    stopped at its ceiling, the back-test's verdict, or why there is no figure."""

    rate_rps: float | None
    observed_rps: float | None = None
    lower_bound_only: bool = False
    """The search stopped at its ceiling: then there is no figure (`note` says so)."""
    low_confidence: bool = False
    note: str = ""
    """Why the KPI is absent, or the back-test's low-confidence sentence; "" otherwise."""
    calibrated: Calibrated | None = field(default=None, repr=False, compare=False)
    """The engine model the KPI was measured on; None when the run could not be calibrated
    or the KPI was not requested. Not part of `to_dict`."""

    @property
    def times_observed(self) -> float | None:
        """The headroom as a multiple of the run's own arrival rate."""
        if self.rate_rps is None or not self.observed_rps:
            return None
        return self.rate_rps / self.observed_rps

    def to_dict(self) -> dict[str, Any]:
        return {
            "rate_rps": self.rate_rps,
            "observed_rps": self.observed_rps,
            "attainment": ATTAINMENT,
            "lower_bound_only": self.lower_bound_only,
            "low_confidence": self.low_confidence,
            "note": self.note,
        }


def measure_headroom(
    dataset: str | os.PathLike[str],
    slo: dict[str, float | None],
    gpu_hour_usd: float,
    time_limit_s: float,
) -> Headroom:
    """The Headroom of `dataset` at `slo`, on a session of its own under the calibration's
    memory limit (MEMORY_LIMIT in traceq/whatif/predict.py)."""
    with Session(dataset, memory_limit=MEMORY_LIMIT, time_limit_s=time_limit_s) as session:
        try:
            cal = calibrate(session)
            bt = backtest(cal, observe(session, slo, tbt=False), slo, gpu_hour_usd)
        except (WhatIfInputError, SettingError, QueryError) as exc:
            return Headroom(None, note=f"No Headroom figure: {_first_clause(str(exc))}.")
    found = max_rate(cal.model, cal.limits, slo, ATTAINMENT, gpu_hour_usd, seeds=SEEDS)
    observed = cal.model.workload.rate_rps
    if found.capped:  # a short run meets the SLO at any rate: its requests pass as one burst
        n = cal.model.workload.n
        return Headroom(
            None,
            observed,
            lower_bound_only=True,
            calibrated=cal,
            note=f"No Headroom figure: the run's {n:,} requests still meet the SLO replayed at "
            f"{found.rate_rps / observed:,.0f}× their rate ({found.rate_rps:,.0f} req/s), too "
            "few to find the rate at which the engine saturates.",
        )
    return Headroom(
        rate_rps=found.rate_rps,
        observed_rps=observed,
        low_confidence=bt.low_confidence,
        note=_capital(low_confidence_warning(bt)) + "." if bt.low_confidence else "",
        calibrated=cal,
    )


def sentence(h: dict[str, Any], slo: dict[str, float | None]) -> str:
    """The Headroom in words, from the report's `context["headroom"]`: the rate, what it is,
    and the back-test's caveat; or why there is none."""
    rate = h.get("rate_rps")
    if rate is None:
        return str(h.get("note") or "No Headroom figure.")
    observed = h.get("observed_rps")
    times = f", {rate / observed:,.1f}× the run's {observed:,.2f} req/s" if observed else ""
    limits = ", ".join(
        f"{name} ≤ {_ms(value)}"
        for key, name in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("e2e_ms", "e2e"))
        if (value := slo.get(key)) is not None
    )
    text = (
        f"Headroom {rate:,.2f} req/s{times}: the highest arrival rate at which "
        f"{h.get('attainment', ATTAINMENT) * 100:.0f} % of requests would meet "
        f"{limits or 'the SLO'}, by the engine model of traceq whatif (docs/WHATIF.md)."
    )
    return f"{text} {h['note']}" if h.get("note") else text


def _ms(value: float) -> str:
    """An SLO limit as a person reads it: `2 s`, `1.5 s`, `100 ms`."""
    return f"{value / 1000:,.3g} s" if value >= 1000 else f"{value:,.3g} ms"


def _first_clause(message: str) -> str:
    """The calibration's refusal without its how-to (after the first `;`)."""
    return message.split(";")[0].strip().rstrip(".")


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
