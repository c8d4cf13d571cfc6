"""Compare a dataset's KPIs with a baseline's: the change, its bootstrap confidence interval
and a verdict per KPI (improved / unchanged / regressed). docs/REPORT.md explains the method.

The interval resamples the two bounded samples independently (requests, chunk gaps for TBT, or
time windows for throughput; blocks of neighbours in time order), recomputes the KPI on each
resample and takes the percentiles of the differences; it is then shifted so it is centred
where the full-data change is (the samples are uniform subsets of the full data, so only
their spread is used). The KPIs of one sample column share their
resamples. Vectorised numpy, seeded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from traceq.report.kpis import KPIS, Kpi
from traceq.report.thresholds import Thresholds

Verdict = Literal["improved", "unchanged", "regressed", "n/a"]

CHUNK_VALUES = 2_000_000  # values drawn at once (16 MB of float64)


@dataclass
class Change:
    """One KPI of the comparison."""

    kpi: str
    label: str
    unit: str
    better: str
    baseline: float | None
    current: float | None
    delta: float | None
    rel: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: Verdict
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _values(samples: dict[str, Any], sample: str, column: str) -> np.ndarray | None:
    frame = samples.get(sample)
    if frame is None or column not in frame.columns:
        return None
    col = frame[column].cast(float).to_numpy()
    col = col[np.isfinite(col)]
    return col if col.size >= 2 else None


def _kpi_of(kpi: Kpi, stats: np.ndarray, q_index: dict[float, int], scale: float) -> np.ndarray:
    """The KPI from `stats` (rows: the column's quantiles, then its mean)."""
    if kpi.q is not None:
        return stats[q_index[kpi.q]]
    mean = stats[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        return scale * mean**kpi.power


def block_length(n: int, exponent: float) -> int:
    """Length of the resampled blocks: n ** exponent, at least 1."""
    return max(1, min(n, round(n**exponent)))


def block_indices(n: int, length: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """`k` circular block-bootstrap resamples of positions 0..n-1: ceil(n / length) blocks of
    `length` neighbours each, from random starts (wrapping at the end), cut to n."""
    blocks = -(-n // length)
    starts = rng.integers(0, n, size=(k, blocks, 1))
    return ((starts + np.arange(length)) % n).reshape(k, blocks * length)[:, :n]


def resampled_stats(
    values: np.ndarray,
    qs: list[float],
    resamples: int,
    rng: np.random.Generator,
    exponent: float = 0.5,
) -> np.ndarray:
    """Quantiles `qs` and the mean of `resamples` block-bootstrap resamples of `values` (in
    time order: neighbours are resampled together, so runs of similar requests, bursts and
    slow minutes widen the interval as they should): shape (len(qs) + 1, resamples)."""
    out = np.empty((len(qs) + 1, resamples))
    step = max(1, CHUNK_VALUES // values.size)
    length = block_length(values.size, exponent)
    for start in range(0, resamples, step):
        k = min(step, resamples - start)
        draws = values[block_indices(values.size, length, k, rng)]
        if qs:
            out[:-1, start : start + k] = np.quantile(draws, qs, axis=1)
        out[-1, start : start + k] = draws.mean(axis=1)
    return out


def _stats(values: np.ndarray, qs: list[float]) -> np.ndarray:
    return np.concatenate([np.quantile(values, qs), [values.mean()]])[:, None]


def compare(
    baseline: dict[str, Any], current: dict[str, Any], thresholds: Thresholds
) -> list[Change]:
    """Per KPI, compare `current` with `baseline`; each is a dict with `values`, `scales` and
    `samples` ({"requests": frame, "gaps": frame}), as a loaded baseline file holds them."""
    rng = np.random.default_rng(thresholds.seed)
    alpha = (1 - thresholds.confidence) / 2
    columns: dict[tuple[str, str], list[Kpi]] = {}
    for kpi in KPIS:
        if kpi.column is not None:
            columns.setdefault((kpi.sample, kpi.column), []).append(kpi)
    intervals: dict[str, tuple[float, float]] = {}
    for (sample, column), kpis in columns.items():
        bs = _values(baseline["samples"], sample, column)
        cs = _values(current["samples"], sample, column)
        if bs is None or cs is None:
            continue
        qs = sorted({k.q for k in kpis if k.q is not None})
        q_index = {q: i for i, q in enumerate(qs)}
        e = thresholds.block_exponent
        b_draws = resampled_stats(bs, qs, thresholds.resamples, rng, e)
        c_draws = resampled_stats(cs, qs, thresholds.resamples, rng, e)
        b_point, c_point = _stats(bs, qs), _stats(cs, qs)
        for kpi in kpis:
            b_val, c_val = baseline["values"].get(kpi.name), current["values"].get(kpi.name)
            if b_val is None or c_val is None:
                continue
            bsc = baseline["scales"].get(kpi.name, 1.0)
            csc = current["scales"].get(kpi.name, 1.0)
            diff = _kpi_of(kpi, c_draws, q_index, csc) - _kpi_of(kpi, b_draws, q_index, bsc)
            diff = diff[np.isfinite(diff)]
            if diff.size == 0:
                continue
            point = float(
                _kpi_of(kpi, c_point, q_index, csc)[0] - _kpi_of(kpi, b_point, q_index, bsc)[0]
            )
            shift = (c_val - b_val) - point
            lo, hi = np.quantile(diff, [alpha, 1 - alpha])
            intervals[kpi.name] = (float(lo) + shift, float(hi) + shift)
    changes = []
    for kpi in KPIS:
        b = baseline["values"].get(kpi.name)
        c = current["values"].get(kpi.name)
        if b is None or c is None:
            changes.append(
                Change(
                    kpi.name,
                    kpi.label,
                    kpi.unit,
                    kpi.better,
                    b,
                    c,
                    None,
                    None,
                    None,
                    None,
                    "n/a",
                    "not measured in both",
                )
            )
            continue
        delta = c - b
        lo, hi = intervals.get(kpi.name, (None, None))
        rule = thresholds.rule(kpi.name)
        verdict, reason = judge(kpi, b, delta, lo, hi, rule.abs, rule.rel)
        changes.append(
            Change(
                kpi.name,
                kpi.label,
                kpi.unit,
                kpi.better,
                b,
                c,
                delta,
                delta / abs(b) if b else None,
                lo,
                hi,
                verdict,
                reason,
            )
        )
    return changes


def judge(
    kpi: Kpi,
    base: float,
    delta: float,
    lo: float | None,
    hi: float | None,
    abs_min: float,
    rel_min: float,
) -> tuple[Verdict, str]:
    """The verdict for one change and the reason in words."""
    if delta == 0:
        return "unchanged", "no change"
    worse = delta > 0 if kpi.better == "lower" else delta < 0
    size = abs(delta)
    if size < abs_min:
        return "unchanged", f"|Δ| {size:.3g} below the absolute threshold {abs_min:g}"
    if size < rel_min * abs(base):
        return "unchanged", f"|Δ| {size / abs(base):.1%} below the relative threshold {rel_min:.0%}"
    if lo is not None and hi is not None and lo <= 0 <= hi:
        return "unchanged", "the confidence interval contains 0 (noise)"
    how = (
        "beyond the thresholds and the interval"
        if lo is not None
        else ("beyond the thresholds (no interval for this KPI)")
    )
    return ("regressed" if worse else "improved"), how


WORKLOAD = (
    ("arrival rate", "windows", "requests_per_s"),
    ("mean prompt length", "requests", "prompt_tokens"),
    ("mean output length", "requests", "output_tokens"),
)
WORKLOAD_REL = 0.10
"""A load figure that moved by at least 10 % (and beyond its interval) makes the report say the
load changed: a nightly gate compares releases under the same load, and a different trace slice
or a different rate moves latency by itself (docs/REPORT.md)."""


def workload_shift(
    baseline: dict[str, Any], current: dict[str, Any], thresholds: Thresholds
) -> list[str]:
    """The load figures that differ between the two runs, in words (empty: same load)."""
    rng = np.random.default_rng(thresholds.seed)
    alpha = (1 - thresholds.confidence) / 2
    out = []
    for label, sample, column in WORKLOAD:
        bs = _values(baseline["samples"], sample, column)
        cs = _values(current["samples"], sample, column)
        if bs is None or cs is None or bs.mean() == 0:
            continue
        e = thresholds.block_exponent
        diff = (
            resampled_stats(cs, [], thresholds.resamples, rng, e)[-1]
            - resampled_stats(bs, [], thresholds.resamples, rng, e)[-1]
        )
        lo, hi = np.quantile(diff, [alpha, 1 - alpha])
        rel = (cs.mean() - bs.mean()) / bs.mean()
        if abs(rel) >= WORKLOAD_REL and not lo <= 0 <= hi:
            out.append(f"{label} {rel * 100:+.0f} %")
    return out
