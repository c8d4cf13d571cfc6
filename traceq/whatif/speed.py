"""The GPU's speed over the run: a factor per window of step ends that every step cost of the
window is multiplied by (1: the run's usual speed), fitted together with the step costs from
whatif_steps.sql's sums per instance and window. A throttled GPU (a lower SM clock) or an
engine still warming up runs its steps slower for part of the run; one step-cost fit for the
whole run would average the fast and the slow periods and fit neither.

The fit alternates: the step costs with the factors held (each window's steps weighted by its
factor), then each window's factor with the costs held (the least-squares scale of the
window's predicted step times to its measured ones), the factors rescaled so the run's
typical step (the step-weighted median window) has factor 1. Each factor is the median of
its window's and its neighbours' (a change that lasts one window, 5 s, is taken for a burst
of batch shapes the line misses, not for a change of speed; a throttle's or a warm-up's edges
pass unchanged). A run whose factors stay within `SPEED_CHANGE` of each other ran at one
speed and keeps the plain fit.

>>> s = Speed((0, 10), (1.0, 1.8))
>>> s.at(5), s.at(12), s.at(-1)
(1.0, 1.8, 1.0)
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from traceq.whatif.calibrate import StepFit, fit_steps, normal_equations

NS = 1_000_000_000

SPEED_WINDOW_NS = 5 * NS
"""Width of a speed window (5 s): a throttle or a warm-up lasts tens of seconds, and 5 s of
a busy engine hold hundreds of steps, enough to scale the fitted costs to."""

MIN_WINDOW_STEPS = 50
"""Steps below which a window's factor is not fitted (it keeps the one before it): a few
dozen steps of one batch shape cannot tell a speed from a shape."""

SPEED_CHANGE = 1.2
"""Ratio of the slowest to the fastest window's factor below which the run ran at one speed:
the factors of a steady GPU scatter by a few percent from batch shapes the line misses."""

INSTANCE_SPREAD = 1.15
"""Ratio of the slowest to the fastest instance's step-cost factor past which the instances
are not alike (another GPU, clock or build): a calibration says so, and a replay with as many
replicas as the run had instances gives each replica its instance's factor. Instances of one
model on one kind of GPU differ by a few percent."""

ITERATIONS = 20
"""Rounds of the alternating fit; the factors settle to 0.1 % within a handful."""


@dataclass(frozen=True)
class Speed:
    """Step-cost factor from each window's start (ns since the epoch) to the next one's."""

    starts_ns: tuple[int, ...]
    factors: tuple[float, ...]

    def at(self, t_ns: int) -> float:
        i = bisect.bisect_right(self.starts_ns, t_ns) - 1
        return self.factors[max(i, 0)]

    def to_dict(self) -> dict[str, Any]:
        t0 = self.starts_ns[0]
        return {
            "window_s": SPEED_WINDOW_NS / NS,
            "timeline": [
                {"from_s": (t - t0) / NS, "factor": f}
                for t, f in zip(self.starts_ns, self.factors, strict=True)
            ],
            "slowest": max(self.factors),
            "fastest": min(self.factors),
        }


def fit_with_speed(sums: pl.DataFrame) -> tuple[StepFit | None, Speed | None]:
    """The step fit and, where the GPU's speed changed over the run, its timeline (module
    docstring); sums has one row per instance and window."""
    plain = fit_steps(sums)
    if plain is None or "window_start" not in sums.columns:
        return plain, None
    windows = sums["window_start"].to_numpy().astype(np.int64)
    starts = np.unique(windows)
    row_window = np.searchsorted(starts, windows)
    xx_rows, xy_rows = normal_equations(sums)
    n_w = len(starts)
    xx = np.zeros((n_w, *xx_rows.shape[1:]))
    xy = np.zeros((n_w, xy_rows.shape[1]))
    np.add.at(xx, row_window, xx_rows)
    np.add.at(xy, row_window, xy_rows)
    steps = np.bincount(row_window, sums["steps"].to_numpy().astype(float), n_w)
    fitted = steps >= MIN_WINDOW_STEPS
    if fitted.sum() < 2:
        return plain, None
    coef = np.array(list(plain.terms.values()))
    factor = np.ones(n_w)
    for _ in range(ITERATIONS):
        pred_sq = np.einsum("i,wij,j->w", coef, xx, coef)
        raw = np.where(fitted & (pred_sq > 0), (xy @ coef) / np.where(pred_sq > 0, pred_sq, 1), 0)
        factor = _median_of_3(_carry_forward(raw, fitted & (raw > 0)))
        factor /= _weighted_median(factor, steps)
        fit = fit_steps(sums, factor[row_window])
        if fit is None:
            return plain, None
        coef = np.array(list(fit.terms.values()))
    kept = factor[fitted]
    if kept.max() / kept.min() < SPEED_CHANGE:
        return plain, None
    return fit_steps(sums, factor[row_window]), Speed(
        tuple(int(t) for t in starts), tuple(float(f) for f in factor)
    )


def fit_instances(
    sums: pl.DataFrame, fit: StepFit, speed: Speed | None
) -> tuple[StepFit, dict[str, float] | None]:
    """The step fit and each instance's step-cost factor, when the run's instances are not
    alike (`INSTANCE_SPREAD`): fitted in turn as the speed timeline is (module docstring),
    the factors scaled to a step-weighted mean of 1, so the fit is the instances' mean. The
    fit as given and None when they are alike, or the run had one instance."""
    if "instance" not in sums.columns or sums["instance"].n_unique() < 2:
        return fit, None
    names = sums["instance"].cast(pl.String).fill_null("").to_numpy()
    steps = sums["steps"].cast(pl.Float64).fill_null(0.0).to_numpy()
    f = np.ones(sums.height)
    if speed is not None and "window_start" in sums.columns:
        f = np.array([speed.at(int(t)) for t in sums["window_start"].to_list()])
    factors = _unit(instance_scale(sums, fit, f, names), names, steps)
    if max(factors.values()) < INSTANCE_SPREAD * min(factors.values()):
        return fit, None
    for _ in range(ITERATIONS):
        row_f = f * np.array([factors[n] for n in names])
        refit = fit_steps(sums, row_f)
        if refit is None:
            return fit, None
        fit = refit
        scale = instance_scale(sums, fit, row_f, names)
        factors = _unit({n: g * scale[n] for n, g in factors.items()}, names, steps)
    return fit, factors


def instance_scale(
    sums: pl.DataFrame, fit: StepFit, f: np.ndarray, names: np.ndarray
) -> dict[str, float]:
    """Each instance's least-squares scale of its steps' fitted times (each row's × f) to the
    measured ones.

    >>> import polars as pl
    >>> from traceq.whatif.calibrate import TERMS, StepFit
    >>> row = {f"xx_{i}{j}": 0.0 for i in range(len(TERMS)) for j in range(i, len(TERMS))}
    >>> row |= {f"xy_{i}": 0.0 for i in range(len(TERMS))} | {"xx_00": 100.0}
    >>> sums = pl.DataFrame([row | {"xy_0": 1.0}, row | {"xy_0": 1.5}])
    >>> fit = StepFit(dict.fromkeys(TERMS, 0.0) | {TERMS[0]: 0.0125}, 200, None, 0, 0, 0, 0)
    >>> scale = instance_scale(sums, fit, np.ones(2), np.array(["a", "b"]))
    >>> {k: round(v, 2) for k, v in scale.items()}
    {'a': 0.8, 'b': 1.2}
    """
    coef = np.array(list(fit.terms.values()))
    xx_rows, xy_rows = normal_equations(sums)
    pred_sq = f * f * np.einsum("i,rij,j->r", coef, xx_rows, coef)
    cross = f * (xy_rows @ coef)
    out = {}
    for name in sorted(set(names.tolist())):
        rows = names == name
        den = pred_sq[rows].sum()
        out[str(name)] = float(cross[rows].sum() / den) if den > 0 else 1.0
    return out


def _unit(factors: dict[str, float], names: np.ndarray, steps: np.ndarray) -> dict[str, float]:
    """`factors` scaled to a mean of 1 weighted by each instance's steps."""
    weight = {n: float(steps[names == n].sum()) for n in factors}
    mean = sum(factors[n] * weight[n] for n in factors) / max(sum(weight.values()), 1e-9)
    return {n: v / mean for n, v in factors.items()} if mean > 0 else factors


def _carry_forward(raw: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Each window's factor, or the last fitted one before it (the first fitted one for the
    windows before any)."""
    out = raw.copy()
    first = int(np.argmax(ok))
    last = raw[first]
    for i in range(len(raw)):
        if ok[i]:
            last = raw[i]
        out[i] = last
    return out


def _median_of_3(f: np.ndarray) -> np.ndarray:
    if len(f) < 3:
        return f
    padded = np.concatenate([f[:1], f, f[-1:]])
    return np.median(np.stack([padded[:-2], padded[1:-1], padded[2:]]), axis=0)


def _weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, cum[-1] / 2)])
