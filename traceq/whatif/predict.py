"""`whatif()`: calibrate the engine model from a dataset, back-test it on the run itself,
then replay the scenarios asked for and search the max sustainable rate. Every query runs
through the one `Session` (traceq/session.py); the SQL is in traceq/sql/whatif_*.sql.

>>> from traceq.session import Session
>>> with Session("run.tq") as s:                                     # doctest: +SKIP
...     result = whatif(s, rates=[2.0], settings={"max_num_seqs": 96})
...     result.scenarios[0].ttft_ms.p99

`calibrate()`, `observe()` and `backtest()` are the steps of `whatif()` on their own, for a
caller that replays one calibration many times (the app's What if page).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from traceq.playbooks.words import counted
from traceq.session import Session
from traceq.slo import DEFAULT_GPU_HOUR_USD, DEFAULT_SLO
from traceq.sql import load
from traceq.whatif.calibrate import (
    MIN_REQUESTS,
    MIN_STEPS,
    STEP_MERGE_NS,
    fit_front,
)
from traceq.whatif.limits import Limits, Peaks, SettingError, SettingValue, read_limits
from traceq.whatif.model import BackTest, Calibration, Observed, Outcome, WhatIf
from traceq.whatif.replay import Model, replay
from traceq.whatif.search import max_rate, plan
from traceq.whatif.speed import SPEED_WINDOW_NS, fit_instances, fit_with_speed
from traceq.whatif.workload import MAX_REPLAY_REQUESTS, Workload

DEFAULT_ATTAINMENT = 0.95
"""Share of requests that must meet the SLO for a rate to count as sustainable: 95 %, the
attainment capacity plans commonly hold a deployment to (docs/WHATIF.md)."""

MEMORY_LIMIT = "512MB"
"""DuckDB's memory limit for a calibration (`traceq whatif --memory-limit`, the app, the
report's Headroom): the step rebuild (traceq/sql/whatif_steps.sql) is a chain of window
functions over every chunk, and DuckDB fills whatever it is given — 2 GB took the command to
2.2 GB of peak RSS on 100,000 requests — while spilling past 512 MB keeps it under 0.7 GB
for 2 s more (docs/PERFORMANCE.md, bench/whatif.py)."""

TIMING_HINT = (
    "ingest the server's OpenTelemetry spans with per-token events or arrays "
    "(docs/INGEST.md: vLLM with token events, the token-arrays convention)"
)
"""Where per-token timing comes from. SGLang's level-3 traces time every chunk too, but carry
no prompt length (`LENGTH_HINT`), so they are not named here."""

LENGTH_HINT = (
    "ingest request spans that carry gen_ai.usage.prompt_tokens (vLLM's llm_request spans "
    "do; SGLang's traces leave it out)"
)


class WhatIfInputError(ValueError):
    """The dataset lacks an input the calibration needs; the message names it."""


@dataclass(frozen=True)
class Calibrated:
    """The engine model fitted to a dataset, its limits and the instances it was fitted on:
    what every replay of the dataset starts from (the app caches it per dataset)."""

    model: Model
    limits: Limits
    instances: list[str]


def whatif(
    session: Session,
    *,
    rates: Sequence[float] = (),
    settings: dict[str, SettingValue] | None = None,
    slo: dict[str, float | None] | None = None,
    attainment: float = DEFAULT_ATTAINMENT,
    find_max_rate: bool = False,
    target_rate: float | None = None,
    gpu_hour_usd: float = DEFAULT_GPU_HOUR_USD,
    dataset: str = "",
) -> WhatIf:
    """Calibrate, back-test, and replay each rate (and, with `settings`, each rate under
    them); with `find_max_rate`, search the highest rate meeting `slo` at `attainment`; with
    `target_rate`, the replicas (and GPUs) that rate needs (traceq/whatif/capacity.py)."""
    settings = settings or {}
    slo = {**DEFAULT_SLO, **(slo or {})}
    if target_rate is not None and "replicas" in settings:
        raise SettingError(
            f"--target-rate finds the replicas: drop --set replicas={settings['replicas']:,}"
        )
    cal = calibrate(session, settings)
    model, limits = cal.model, cal.limits
    calibration = Calibration(
        model.steps,
        model.front,
        limits,
        model.workload,
        cal.instances,
        backtest(cal, observe(session, slo), slo, gpu_hour_usd),
        model.speed,
        model.instance_speed,
    )
    rate0 = model.workload.rate_rps
    changed = limits.with_settings(settings) if settings else None
    scenarios: list[Outcome] = []
    for rate in rates or ([rate0] if changed else []):
        if rates:
            scenarios.append(replay(model, limits, rate, 0, slo, gpu_hour_usd, "as observed"))
        if changed is not None:
            scenarios.append(replay(model, changed, rate, 0, slo, gpu_hour_usd, "with --set"))
    target = changed or limits
    capacity = None
    if target_rate is not None:
        capacity = plan(model, target, target_rate, slo, attainment, gpu_hour_usd)
    found = None
    if find_max_rate and capacity is not None and int(target.value("replicas")) == 1:
        found = capacity.per_replica  # the same search: the run's fleet is one replica
    elif find_max_rate:
        found = max_rate(model, target, slo, attainment, gpu_hour_usd)
    warnings = target.warnings()
    if model.instance_speed and int(target.value("replicas")) != len(model.instance_speed):
        warnings.append(unlike_warning(model.instance_speed))
    if calibration.backtest.low_confidence:
        warnings.insert(0, low_confidence_warning(calibration.backtest))
    return WhatIf(
        dataset,
        slo,
        attainment,
        gpu_hour_usd,
        calibration,
        scenarios,
        found,
        warnings,
        capacity,
    )


def calibrate(session: Session, settings: dict[str, SettingValue] | None = None) -> Calibrated:
    """The engine model of the dataset: step-time and front fits, limits (a `--set` of a
    limit the log does not print stands for the run's own), workload. Raises
    WhatIfInputError (no timing, a disaggregated run, no prompt lengths, too short) or
    SettingError (a limit without a source)."""
    settings = settings or {}
    inputs = session.query(load("whatif_inputs")).row(0, named=True)
    if inputs["split_requests"]:  # first: no other input would make it replayable
        raise WhatIfInputError(_disaggregated(inputs))
    timed = int(inputs["timed_requests"] or 0)
    failed, served = int(inputs["failed_requests"] or 0), int(inputs["server_requests"] or 0)
    if timed == 0 and served and failed == served and inputs["chunked_requests"]:
        raise WhatIfInputError(
            f"no request on the server was served: all {served:,} failed or were aborted, and "
            "whatif calibrates on served requests, so it cannot calibrate on this run; record "
            "a run where requests complete (traceq diagnose says why these did not)"
        )
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
    sized = int(inputs["sized_requests"] or 0)
    if sized == 0:
        raise WhatIfInputError(
            "no request on the server has its prompt length: whatif replays each request's "
            f"prompt and rebuilds the engine's prefills from them; {LENGTH_HINT}"
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
        gpus=inputs["gpus"],
    )
    first = read_limits(settings_rows, peaks, settings)
    params = {
        "merge_ns": STEP_MERGE_NS,
        "chunked": bool(first.value("chunked_prefill")),
        "budget": int(first.value("max_num_batched_tokens")),
        "kv_tokens": int(first.value("kv_cache_tokens")),
        "window_ns": SPEED_WINDOW_NS,
    }
    sums = session.query(load("whatif_steps"), params)
    steps, speed = fit_with_speed(sums)
    n_steps = steps.steps if steps else 0
    if steps is None or n_steps < MIN_STEPS or sized < MIN_REQUESTS:
        raise WhatIfInputError(
            f"the run is too short to fit: {sized:,} timed requests with a prompt length and "
            f"{n_steps:,} engine steps rebuilt, whatif needs at least {MIN_REQUESTS:,} and "
            f"{MIN_STEPS:,}; "
            "record a longer run with per-token timing"
        )
    peaks = replace(peaks, max_decode=steps.max_decode, max_step_tokens=steps.max_step_tokens)
    limits = read_limits(settings_rows, peaks, settings)
    front = fit_front(session.query(load("whatif_front")).row(0, named=True))
    rows = session.query(load("whatif_requests"), {"limit": MAX_REPLAY_REQUESTS})
    workload = Workload.from_frame(rows, sized, int(inputs["aborted_requests"] or 0))
    instances = sorted({str(i) for i in sums["instance"].to_list()})
    steps, factors = fit_instances(sums, steps, speed)
    return Calibrated(Model(steps, front, workload, speed, factors), limits, instances)


def _disaggregated(inputs: dict[str, Any]) -> str:
    """Why a disaggregated run is not replayed: whatif's engine runs each request's prefill
    and decode in its own steps, where this run moved the KV cache between instances."""
    split = counted(int(inputs["split_requests"]), "request")
    prefill = counted(int(inputs["prefill_instances"]), "instance")
    decode = counted(int(inputs["decode_instances"]), "instance")
    return (
        f"the run is disaggregated: {split} prefilled on {prefill} and decoded on {decode}; "
        "whatif models aggregated serving, one engine running both phases of a request, and "
        "cannot replay prefill and decode on separate workers"
    )


def observe(session: Session, slo: dict[str, float | None], tbt: bool = True) -> Observed:
    """The run's own KPIs at `slo` (traceq/sql/whatif_observed.sql); with `tbt`, its TBT
    percentiles too (whatif_observed_tbt.sql, a pass over every chunk gap: the back-test's
    bound does not use them)."""
    row = session.query(load("whatif_observed"), _slo_params(slo)).row(0, named=True)
    if tbt:
        gaps = session.query(load("whatif_observed_tbt"))
        row |= gaps.row(0, named=True) if gaps.height else {}
    return Observed.from_row(row)


def backtest(
    cal: Calibrated, observed: Observed, slo: dict[str, float | None], gpu_hour_usd: float
) -> BackTest:
    """The observed rate and settings replayed (seed 0) beside the run's own KPIs (its
    attainment counting the requests its client timeout ended, workload.py)."""
    workload = cal.model.workload
    rate0 = workload.rate_rps
    observed = observed.with_timeouts(workload.timed_out / workload.n if workload.n else 0.0)
    predicted = replay(
        cal.model, cal.limits, rate0, 0, slo, gpu_hour_usd, "back-test", observed_speed=True
    )
    return BackTest(observed, predicted)


def _slo_params(slo: dict[str, float | None]) -> dict[str, Any]:
    return {f"slo_{k}": slo.get(k) for k in ("ttft_ms", "tpot_ms", "e2e_ms")}


def unlike_warning(factors: dict[str, float]) -> str:
    """What a replay with another number of replicas than the run's unlike instances says."""
    return (
        f"the run's {len(factors):,} instances are not alike (step costs "
        f"{min(factors.values()):.2f}× to {max(factors.values()):.2f}× the fit's): "
        "each replica is replayed at the fit's, pooled over them"
    )


def low_confidence_warning(bt: BackTest) -> str:
    """The sentence a back-test outside its bound puts first among the warnings."""
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
