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
