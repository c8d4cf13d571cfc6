"""Calibrate the engine model from one run: the step-time fit from the rebuilt engine steps
(traceq/sql/whatif_steps.sql) and the time from arrival to the engine's queue
(traceq/sql/whatif_front.sql). The fitted terms are the ones traceq/synth/engine.py charges
per step, so the replay runs the synth engine with them.

>>> import numpy as np
>>> xx = np.array([[4.0, 10.0], [10.0, 30.0]]); xy = np.array([0.1, 0.28])
>>> nonnegative_fit(xx, xy).round(3).tolist()
[0.01, 0.006]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

TERMS = (
    "step_overhead_s",
    "decode_per_seq_s",
    "decode_per_kv_token_s",
    "prefill_per_token_s",
    "prefill_attn_per_token2_s",
)
"""The step-cost terms, in the order of whatif_steps.sql's features (EngineConfig's fields)."""

STEP_MERGE_NS = 200_000
"""Chunk stamps of one instance closer than this (0.2 ms) are one engine step: a step of a
real engine stamps its requests' tokens within microseconds of each other, and no step is
shorter than a weights read (≥ 1 ms even for small models on fast GPUs)."""

MIN_STEPS = 200
"""Rebuilt engine steps below which a fit is refused: five terms need a few hundred steps of
varied batch sizes before their coefficients settle."""

MIN_REQUESTS = 30
"""Requests with a first token and chunk timing below which a calibration is refused: the
workload's length distribution and arrival burstiness need at least this many."""


@dataclass(frozen=True)
class StepFit:
    """Step seconds = Σ term × feature, each term ≥ 0, fitted by least squares."""

    terms: dict[str, float]
    steps: int
    r2: float | None
    rms_s: float
    max_decode: int
    max_step_tokens: float
    max_step_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "terms": self.terms,
            "steps": self.steps,
            "r2": self.r2,
            "rms_ms": self.rms_s * 1e3,
            "max_decode_batch": self.max_decode,
            "max_step_tokens": self.max_step_tokens,
            "max_step_ms": self.max_step_s * 1e3,
        }


@dataclass(frozen=True)
class FrontFit:
    """Arrival → engine queue (tokenization and hand-off): base + per prompt token."""

    base_s: float
    per_token_s: float
    median_s: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "base_ms": self.base_s * 1e3,
            "per_token_us": self.per_token_s * 1e6,
            "median_ms": self.median_s * 1e3,
        }


def nonnegative_fit(xx: np.ndarray, xy: np.ndarray) -> np.ndarray:
    """Least squares from the normal equations (XᵀX, Xᵀy) with every coefficient ≥ 0: the
    most negative term is dropped and the rest refitted until none is negative (a cost
    cannot be negative; collinear terms such as batch size and KV held would otherwise
    trade signs)."""
    n = len(xy)
    active = [i for i in range(n) if xx[i, i] > 0]
    coef = np.zeros(n)
    while active:
        sub = xx[np.ix_(active, active)]
        d = np.sqrt(np.diag(sub))
        sol, *_ = np.linalg.lstsq(sub / np.outer(d, d), xy[active] / d, rcond=None)
        sol = sol / d
        if (sol >= 0).all():
            coef[:] = 0
            coef[active] = sol
            break
        active.pop(int(np.argmin(sol)))
    return coef


def normal_equations(sums: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """XᵀX and Xᵀy of each row of whatif_steps.sql's sums: shapes (rows, terms, terms) and
    (rows, terms)."""
    n = len(TERMS)
    xx = np.zeros((sums.height, n, n))
    for i in range(n):
        for j in range(i, n):
            col = sums[f"xx_{i}{j}"].cast(pl.Float64).fill_null(0.0).to_numpy()
            xx[:, i, j] = xx[:, j, i] = col
    xy = np.stack(
        [sums[f"xy_{i}"].cast(pl.Float64).fill_null(0.0).to_numpy() for i in range(n)], axis=1
    )
    return xx, xy


def fit_steps(sums: pl.DataFrame, speed: np.ndarray | None = None) -> StepFit | None:
    """The step-time fit over every instance's steps (one row of sums per instance and
    window); with `speed` (one factor per row of sums), a step of that row costs the fitted
    terms × its factor. None when no step was rebuilt."""
    if sums.height == 0:
        return None
    steps = int(sums["steps"].sum() or 0)
    if steps == 0:
        return None
    f = np.ones(sums.height) if speed is None else speed
    xx_rows, xy_rows = normal_equations(sums)
    xx = np.einsum("r,rij->ij", f * f, xx_rows)
    xy = f @ xy_rows
    yy = float(sums["yy"].cast(pl.Float64).sum() or 0.0)
    y_sum = float(sums["y_sum"].cast(pl.Float64).sum() or 0.0)
    coef = nonnegative_fit(xx, xy)
    sse = max(0.0, yy - 2 * coef @ xy + coef @ xx @ coef)
    sst = yy - y_sum**2 / steps
    maxes = sums.select(
        pl.col("max_decode").max(), pl.col("max_step_tokens").max(), pl.col("max_step_s").max()
    ).row(0)
    return StepFit(
        terms=dict(zip(TERMS, (float(c) for c in coef), strict=True)),
        steps=steps,
        r2=float(1 - sse / sst) if sst > 0 else None,
        rms_s=float(np.sqrt(sse / steps)),
        max_decode=int(maxes[0] or 0),
        max_step_tokens=float(maxes[1] or 0),
        max_step_s=float(maxes[2] or 0),
    )


def fit_front(row: dict[str, Any]) -> FrontFit:
    """The front fit from whatif_front.sql's row, both terms ≥ 0: a negative intercept with
    a positive slope (a cost all per token, measured with noise) keeps the slope of the line
    through the origin, since a constant would lose what long prompts cost and the wait behind
    them; a negative slope (noise on a short run) falls back to the median as a constant."""
    median = (row.get("median_ns") or 0) / 1e9
    base, slope = row.get("base_ns"), row.get("per_token_ns")
    if base is None or slope is None or slope < 0:
        return FrontFit(median, 0.0, median)
    if base < 0:
        origin = row.get("origin_per_token_ns")
        if origin is None or origin <= 0:
            return FrontFit(median, 0.0, median)
        return FrontFit(0.0, origin / 1e9, median)
    return FrontFit(base / 1e9, slope / 1e9, median)
