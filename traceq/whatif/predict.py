"""`whatif()`: calibrate the engine model from a dataset, back-test it on the run itself,
then replay the scenarios asked for and search the max sustainable rate. Every query runs
through the one `Session` (traceq/session.py); the SQL is in traceq/sql/whatif_*.sql.

>>> from traceq.session import Session
>>> with Session("run.tq") as s:                                     # doctest: +SKIP
...     result = whatif(s, rates=[2.0], settings={"max_num_seqs": 96})
...     result.scenarios[0].ttft_ms.p99
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from traceq.report.measure import DEFAULT_GPU_HOUR_USD, DEFAULT_SLO
from traceq.session import Session
from traceq.sql import load
from traceq.whatif.calibrate import (
    MIN_REQUESTS,
    MIN_STEPS,
    STEP_MERGE_NS,
    fit_front,
    fit_steps,
)
from traceq.whatif.limits import Limits, Peaks, SettingValue, read_limits
from traceq.whatif.model import BackTest, Calibration, Observed, Outcome, WhatIf
from traceq.whatif.replay import Model, replay
from traceq.whatif.search import max_rate
from traceq.whatif.workload import MAX_REPLAY_REQUESTS, Workload

DEFAULT_ATTAINMENT = 0.95
"""Share of requests that must meet the SLO for a rate to count as sustainable: 95 %, the
attainment capacity plans commonly hold a deployment to (docs/WHATIF.md)."""

TIMING_HINT = (
    "ingest the server's OpenTelemetry spans with per-token events or arrays "
    "(docs/INGEST.md: vLLM with token events, SGLang level-3 traces, the token-arrays "
    "convention)"
)


class WhatIfInputError(ValueError):
    """The dataset lacks an input the calibration needs; the message names it."""


def whatif(
    session: Session,
    *,
    rates: Sequence[float] = (),
    settings: dict[str, SettingValue] | None = None,
    slo: dict[str, float | None] | None = None,
    attainment: float = DEFAULT_ATTAINMENT,
    find_max_rate: bool = False,
    gpu_hour_usd: float = DEFAULT_GPU_HOUR_USD,
    dataset: str = "",
) -> WhatIf:
    """Calibrate, back-test, and replay each rate (and, with `settings`, each rate under
    them); with `find_max_rate`, search the highest rate meeting `slo` at `attainment`."""
    settings = settings or {}
    slo = {**DEFAULT_SLO, **(slo or {})}
    model, limits, instances = _calibrate(session, settings)
    observed = Observed.from_row(
        session.query(load("whatif_observed"), _slo_params(slo)).row(0, named=True)
    )
    rate0 = model.workload.rate_rps
    back = replay(model, limits, rate0, 0, slo, gpu_hour_usd, "back-test")
    calibration = Calibration(
        model.steps, model.front, limits, model.workload, instances, BackTest(observed, back)
    )
    changed = limits.with_settings(settings) if settings else None
    scenarios: list[Outcome] = []
    for rate in rates or ([rate0] if changed else []):
        if rates:
            scenarios.append(replay(model, limits, rate, 0, slo, gpu_hour_usd, "as observed"))
        if changed is not None:
            scenarios.append(replay(model, changed, rate, 0, slo, gpu_hour_usd, "with --set"))
    target = changed or limits
    found = max_rate(model, target, slo, attainment, gpu_hour_usd) if find_max_rate else None
    warnings = target.warnings()
    if calibration.backtest.low_confidence:
        warnings.insert(0, _low_confidence(calibration.backtest))
    return WhatIf(dataset, slo, attainment, gpu_hour_usd, calibration, scenarios, found, warnings)


def _calibrate(
    session: Session, settings: dict[str, SettingValue]
) -> tuple[Model, Limits, list[str]]:
    inputs = session.query(load("whatif_inputs")).row(0, named=True)
    timed = int(inputs["timed_requests"] or 0)
    if timed == 0:
        raise WhatIfInputError(
            "no request has arrival, scheduling and first-token times on the server: "
            f"whatif cannot calibrate; {TIMING_HINT}"
        )
    if not inputs["chunked_requests"]:
        raise WhatIfInputError(
            "no per-token (chunk) timing on the server: whatif rebuilds engine steps from "
            f"chunk times and cannot calibrate without them; {TIMING_HINT}"
        )
    settings_rows = session.query(load("whatif_settings"))
    peaks = Peaks(
        max_running=inputs["max_running"],
        max_kv_usage=inputs["max_kv_usage"],
        max_decode=None,
        max_step_tokens=None,
        max_uncached_prompt=inputs["max_uncached_prompt"],
        instances=int(inputs["instances"] or 1),
        gpu_mib=inputs["gpu_mib"],
        gpu_name=inputs["gpu_name"],
    )
    first = read_limits(settings_rows, peaks, settings)
    params = {
        "merge_ns": STEP_MERGE_NS,
        "chunked": bool(first.value("chunked_prefill")),
        "budget": int(first.value("max_num_batched_tokens")),
    }
    sums = session.query(load("whatif_steps"), params)
    steps = fit_steps(sums)
    n_steps = steps.steps if steps else 0
    if steps is None or n_steps < MIN_STEPS or timed < MIN_REQUESTS:
        raise WhatIfInputError(
            f"the run is too short to fit: {timed:,} timed requests and {n_steps:,} engine "
            f"steps rebuilt, whatif needs at least {MIN_REQUESTS:,} and {MIN_STEPS:,}; "
            "record a longer run with per-token timing"
        )
    peaks = replace(peaks, max_decode=steps.max_decode, max_step_tokens=steps.max_step_tokens)
    limits = read_limits(settings_rows, peaks, settings)
    front = fit_front(session.query(load("whatif_front")).row(0, named=True))
    rows = session.query(load("whatif_requests"), {"limit": MAX_REPLAY_REQUESTS})
    workload = Workload.from_frame(rows, timed)
    instances = sorted(str(i) for i in sums["instance"].to_list())
    return Model(steps, front, workload), limits, instances


def _slo_params(slo: dict[str, float | None]) -> dict[str, Any]:
    return {f"slo_{k}": slo.get(k) for k in ("ttft_ms", "tpot_ms", "e2e_ms")}


def _low_confidence(bt: BackTest) -> str:
    errs = bt.errors()
    parts = []
    for key in bt.failing():
        metric, _, stat = key.partition("_")
        err = errs.get(key)
        words = f"{metric.upper()} {stat}"
        parts.append(
            f"{words} {err * 100:+.0f} %" if err is not None else f"{words} not comparable"
        )
    return (
        f"low confidence: the back-test misses the run's own KPIs by more than "
        f"{bt.bound * 100:.0f} % ({', '.join(parts)})"
    )
