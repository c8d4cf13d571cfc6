"""What `traceq whatif` computes, as data: the latency quantiles, one replay's outcome, the
run's own KPIs, the back-test, the max-rate search, the capacity plan of `--target-rate` and
the whole result with its JSON (schema in docs/WHATIF.md). Rendering lives in
traceq/whatif/render.py.

>>> import numpy as np
>>> Quantiles.of(np.arange(1001.0)).to_dict()
{'p50': 500.0, 'p90': 900.0, 'p99': 990.0, 'p999': 999.0, 'max': 1000.0}
>>> replicas_for(120.0, 25.0), replicas_for(100.0, 25.0), replicas_for(120.0, 0.0)
(5, 4, None)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from traceq.whatif.calibrate import FrontFit, StepFit
from traceq.whatif.limits import Limit, Limits, SettingValue
from traceq.whatif.speed import Speed
from traceq.whatif.workload import Workload

SCHEMA_VERSION = 1
"""Version of the JSON contract (docs/WHATIF.md); raised on any change a reader would notice."""

BACKTEST_BOUND = 0.20
"""Relative error of the back-test (TTFT p50, TTFT p99, TPOT p50 against the run's own) above
which every prediction is marked low-confidence: the bound docs/WHATIF.md holds the model to
on the synth scenarios."""

BACKTEST_METRICS = (("ttft_ms", "p50"), ("ttft_ms", "p99"), ("tpot_ms", "p50"))
"""The figures the back-test bound applies to (docs/WHATIF.md)."""

HEADROOM = 0.20
"""Spare capacity the second plan keeps above the target (20 %): room for a burst above the
mean rate, a replica out for a rolling deploy in a fleet of five, and the ±15 % the max rate
is held to against the engine (docs/WHATIF.md) — the margin a capacity plan commonly keeps."""

EXACT = 1e-9
"""Relative slack when a target is a whole multiple of the per-replica rate: 100 / 25 is 4
replicas, not 5 because of a rounding error in the last bit."""


def replicas_for(target_rps: float, per_replica_rps: float) -> int | None:
    """⌈target / per-replica rate⌉, at least 1; None when one replica sustains no rate."""
    if per_replica_rps <= 0:
        return None
    return max(1, math.ceil(target_rps / per_replica_rps * (1 - EXACT)))


@dataclass(frozen=True)
class Quantiles:
    """Linear-interpolated percentiles (DuckDB quantile_cont, numpy's default) and the max, ms."""

    p50: float
    p90: float
    p99: float
    p999: float | None
    max: float

    @classmethod
    def of(cls, values: np.ndarray) -> Quantiles | None:
        v = values[~np.isnan(values)]
        if len(v) == 0:
            return None
        q = np.quantile(v, [0.5, 0.9, 0.99, 0.999])
        return cls(float(q[0]), float(q[1]), float(q[2]), float(q[3]), float(v.max()))

    def get(self, name: str) -> float | None:
        return getattr(self, name)  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, float]:
        out = {"p50": self.p50, "p90": self.p90, "p99": self.p99}
        if self.p999 is not None:
            out["p999"] = self.p999
        out["max"] = self.max
        return out


@dataclass(frozen=True)
class Outcome:
    """One replay (a scenario): the rate and settings it ran and what the engine model did."""

    label: str
    rate_rps: float
    settings: dict[str, SettingValue]
    seed: int
    requests: int
    ttft_ms: Quantiles | None
    tpot_ms: Quantiles | None
    tbt_ms: Quantiles | None
    slo_attainment: float
    goodput_rps: float
    output_tokens_per_s: float
    cost_per_1m_tokens: float | None
    preemptions: int
    max_decode_batch: int
    warnings: tuple[str, ...] = ()

    def metric(self, name: str) -> Quantiles | None:
        return getattr(self, name)  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "rate_rps": self.rate_rps,
            "settings": self.settings,
            "seed": self.seed,
            "requests": self.requests,
            "ttft_ms": _q(self.ttft_ms),
            "tpot_ms": _q(self.tpot_ms),
            "tbt_ms": _q(self.tbt_ms),
            "slo_attainment": self.slo_attainment,
            "goodput_rps": self.goodput_rps,
            "output_tokens_per_s": self.output_tokens_per_s,
            "cost_per_1m_tokens": self.cost_per_1m_tokens,
            "preemptions": self.preemptions,
            "max_decode_batch": self.max_decode_batch,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class Observed:
    """The run's own KPIs over its successful server requests (traceq/sql/whatif_observed.sql)."""

    requests: int
    ttft_ms: Quantiles | None
    tpot_ms: Quantiles | None
    tbt_ms: Quantiles | None
    slo_attainment: float | None
    goodput_rps: float | None
    output_tokens_per_s: float | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Observed:
        def q(prefix: str) -> Quantiles | None:
            vals = row.get(f"{prefix}_q")
            if not vals or vals[0] is None:
                return None
            return Quantiles(vals[0], vals[1], vals[2], vals[3], row[f"{prefix}_max"])

        tbt = None
        if row.get("tbt_p50") is not None:
            tbt = Quantiles(row["tbt_p50"], row["tbt_p90"], row["tbt_p99"], None, row["tbt_max"])
        return cls(
            int(row.get("requests") or 0),
            q("ttft"),
            q("tpot"),
            tbt,
            row.get("attainment"),
            row.get("goodput_rps"),
            row.get("output_tokens_per_s"),
        )

    def metric(self, name: str) -> Quantiles | None:
        return getattr(self, name)  # type: ignore[no-any-return]

    def with_timeouts(self, share: float) -> Observed:
        """The attainment with `share` of the requests ended by the client timeout, which miss
        the SLO (docs/METRICS.md), as a replay that ends them too counts it."""
        if self.slo_attainment is None or share <= 0:
            return self
        return replace(self, slo_attainment=self.slo_attainment * (1 - share))

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "ttft_ms": _q(self.ttft_ms),
            "tpot_ms": _q(self.tpot_ms),
            "tbt_ms": _q(self.tbt_ms),
            "slo_attainment": self.slo_attainment,
            "goodput_rps": self.goodput_rps,
            "output_tokens_per_s": self.output_tokens_per_s,
        }


@dataclass(frozen=True)
class BackTest:
    """The replay of the observed rate and settings beside the run's own KPIs."""

    observed: Observed
    predicted: Outcome
    bound: float = BACKTEST_BOUND

    def errors(self) -> dict[str, float | None]:
        """Relative error, predicted against observed, of each figure both have."""
        out: dict[str, float | None] = {}
        for metric in ("ttft_ms", "tpot_ms", "tbt_ms"):
            obs, pred = self.observed.metric(metric), self.predicted.metric(metric)
            for stat in ("p50", "p90", "p99", "max"):
                a = obs.get(stat) if obs else None
                b = pred.get(stat) if pred else None
                key = f"{metric.removesuffix('_ms')}_{stat}"
                out[key] = (b - a) / a if a and b is not None else None
        return out

    def failing(self) -> list[str]:
        """The bounded figures whose error is past the bound, or that could not be compared."""
        errs = self.errors()
        keys = [f"{m.removesuffix('_ms')}_{s}" for m, s in BACKTEST_METRICS]
        return [k for k in keys if errs.get(k) is None or abs(errs[k] or 0) > self.bound]

    @property
    def low_confidence(self) -> bool:
        return bool(self.failing())

    def to_dict(self) -> dict[str, Any]:
        return {
            "observed": self.observed.to_dict(),
            "predicted": self.predicted.to_dict(),
            "relative_error": self.errors(),
            "bound": self.bound,
            "bounded_metrics": [f"{m.removesuffix('_ms')}_{s}" for m, s in BACKTEST_METRICS],
            "outside_bound": self.failing(),
            "low_confidence": self.low_confidence,
        }


@dataclass(frozen=True)
class MaxRate:
    """The highest rate whose replay meets the SLO at the attainment target: the trace
    replay's (seed 0), and the spread over every seed tried."""

    rate_rps: float
    interval: tuple[float, float]
    per_seed: dict[int, float]
    attainment: float
    settings: dict[str, SettingValue]
    capped: bool = False  # the search stopped at its ceiling: the rate is a lower bound

    def to_dict(self) -> dict[str, Any]:
        return {
            "rate_rps": self.rate_rps,
            "interval": list(self.interval),
            "per_seed": {str(k): v for k, v in self.per_seed.items()},
            "attainment": self.attainment,
            "settings": self.settings,
            "lower_bound_only": self.capped,
        }


@dataclass(frozen=True)
class Capacity:
    """`--target-rate`: the replicas and GPUs a target rate needs (`plan()` in
    traceq/whatif/search.py). One replica is the calibrated instance; replicas =
    ⌈target / per-replica max rate⌉, and ⌈target × (1 + headroom) / rate⌉ with headroom;
    GPUs = replicas × GPUs per replica."""

    target_rps: float
    per_replica: MaxRate
    gpus_per_replica: Limit
    gpu_hour_usd: float
    headroom: float = HEADROOM

    @property
    def replicas(self) -> int | None:
        return replicas_for(self.target_rps, self.per_replica.rate_rps)

    @property
    def replicas_with_headroom(self) -> int | None:
        return replicas_for(self.target_rps * (1 + self.headroom), self.per_replica.rate_rps)

    @property
    def replicas_interval(self) -> tuple[int | None, int | None]:
        """Replicas over the seeds' per-replica rates: the fastest seed's, the slowest's."""
        low, high = self.per_replica.interval
        return replicas_for(self.target_rps, high), replicas_for(self.target_rps, low)

    def gpus(self, replicas: int | None) -> int | None:
        return None if replicas is None else replicas * int(self.gpus_per_replica.value)

    def usd_per_hour(self, replicas: int | None) -> float | None:
        gpus = self.gpus(replicas)
        return None if gpus is None else gpus * self.gpu_hour_usd

    @property
    def upper_bound_only(self) -> bool:
        """The per-replica search stopped at its ceiling: the replicas are at most these."""
        return self.per_replica.capped

    def to_dict(self) -> dict[str, Any]:
        n, h = self.replicas, self.replicas_with_headroom
        return {
            "rate_rps": self.target_rps,
            "per_replica": self.per_replica.to_dict(),
            "gpus_per_replica": self.gpus_per_replica.to_dict(),
            "replicas": n,
            "replicas_interval": list(self.replicas_interval),
            "gpus": self.gpus(n),
            "usd_per_hour": self.usd_per_hour(n),
            "headroom": self.headroom,
            "replicas_with_headroom": h,
            "gpus_with_headroom": self.gpus(h),
            "usd_per_hour_with_headroom": self.usd_per_hour(h),
            "upper_bound_only": self.upper_bound_only,
        }


@dataclass(frozen=True)
class Calibration:
    """The fitted engine model, its limits and workload, and the back-test."""

    steps: StepFit
    front: FrontFit
    limits: Limits
    workload: Workload
    instances: list[str]
    backtest: BackTest
    speed: Speed | None = None
    instance_speed: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "step_time": self.steps.to_dict(),
            "gpu_speed": self.speed.to_dict() if self.speed else None,
            "instance_speed": self.instance_speed,
            "front": self.front.to_dict(),
            "instances": self.instances,
            "engine_version": self.limits.version,
            "limits": self.limits.to_dict(),
            "workload": self.workload.to_dict(),
            "backtest": self.backtest.to_dict(),
        }


@dataclass(frozen=True)
class WhatIf:
    """Everything one `traceq whatif` run found."""

    dataset: str
    slo: dict[str, float | None]
    attainment: float
    gpu_hour_usd: float
    calibration: Calibration
    scenarios: list[Outcome]
    max_rate: MaxRate | None = None
    warnings: list[str] = field(default_factory=list)
    capacity: Capacity | None = None

    @property
    def low_confidence(self) -> bool:
        return self.calibration.backtest.low_confidence

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "dataset": self.dataset,
            "slo": self.slo,
            "attainment_target": self.attainment,
            "gpu_hour_usd": self.gpu_hour_usd,
            "low_confidence": self.low_confidence,
            "warnings": self.warnings,
            "calibration": self.calibration.to_dict(),
            "scenarios": [s.to_dict() for s in self.scenarios],
        }
        if self.max_rate is not None:
            out["max_rate"] = self.max_rate.to_dict()
        if self.capacity is not None:
            out["target_rate"] = self.capacity.to_dict()
        return out


def _q(q: Quantiles | None) -> dict[str, float] | None:
    return q.to_dict() if q is not None else None
