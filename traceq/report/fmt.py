"""Number formatting shared by the HTML and Markdown reports."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from traceq.playbooks.story import RELATIVE_BELOW_NS, clock
from traceq.playbooks.words import duration_ms
from traceq.report.compare import Change

GPUS_ASSUMED = " assumed (no GPU samples; --gpus sets the count)"
"""After the GPU count of the cost when neither `--gpus` nor a GPU sample gave it."""


def value(v: Any, unit: str = "") -> str:
    """A KPI value in its unit: ratios as percent, counts whole, the rest to 3-4 digits."""
    if v is None:
        return "—"
    if unit == "ratio":
        return f"{v * 100:.2f} %"
    if unit == "count":
        return f"{v:,.0f}"
    if unit == "USD":
        return f"-${-v:,.3f}" if v < 0 else f"${v:,.3f}"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 10:
        return f"{v:.2f}"
    return f"{v:.3f}"


def suffix(unit: str) -> str:
    """The unit written after a value (` ms`, ` req/s`); nothing where `value` writes it
    (percent, $) or there is none (counts)."""
    return "" if unit in ("ratio", "USD", "count", "") else f" {unit}"


def measure(v: Any, unit: str = "") -> str:
    """A KPI value with its unit, for a table cell: `15,640 ms`, `1.109 req/s`, `31.25 %`.

    >>> measure(15639.6, "ms"), measure(1.1094, "req/s"), measure(0.3125, "ratio")
    ('15,640 ms', '1.109 req/s', '31.25 %')
    >>> measure(None, "ms")
    '—'
    """
    return "—" if v is None else value(v, unit) + suffix(unit)


def delta(c: Change) -> str:
    """The change with its sign and unit, and relative change where the baseline is not 0."""
    if c.delta is None:
        return "—"
    if c.unit == "ratio":
        text = f"{c.delta * 100:+.2f} pt"
    elif c.unit == "USD":
        text = ("+" if c.delta >= 0 else "-") + f"${abs(c.delta):,.3f}"
    else:
        text = value(c.delta, c.unit) + suffix(c.unit)
        if not text.startswith("-"):
            text = "+" + text
    if c.rel is not None and c.unit != "ratio":
        text += f" ({c.rel * 100:+,.1f} %)"
    return text


def spoken(c: Change) -> str:
    """The change for a sentence, in the unit a person reads it in: `+15.6 s (+39,602 %)`,
    `-68.75 pt`, `+0.52 req/s (+12 %)`."""
    if c.delta is None:
        return "not measured in both runs"
    if c.unit == "ratio":
        return f"{c.delta * 100:+.2f} pt"
    if c.unit == "ms":
        text = ("+" if c.delta >= 0 else "") + duration_ms(c.delta)
    elif c.unit == "USD":
        text = ("+" if c.delta >= 0 else "-") + f"${abs(c.delta):,.3f}"
    else:
        text = value(c.delta, c.unit)
        text = ("" if text.startswith("-") else "+") + text
        text += "" if c.unit == "count" else f" {c.unit}"
    if c.rel is not None:
        text += f" ({c.rel * 100:+,.0f} %)"
    return text


def verdict(v: str) -> str:
    """A verdict as the KPI table shows it: a KPI not measured in both runs has a dash, not
    "n/a" (its reason, on hover in the HTML, says why)."""
    return "—" if v == "n/a" else v


def interval(c: Change) -> str:
    """The confidence interval of the change, or why there is none."""
    if c.ci_low is None or c.ci_high is None:
        return "—"
    if c.unit == "ratio":
        return f"[{c.ci_low * 100:+.2f}, {c.ci_high * 100:+.2f}] pt"
    return f"[{value(c.ci_low, c.unit)}, {value(c.ci_high, c.unit)}]{suffix(c.unit)}"


def duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    if seconds >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def span(time_range: dict[str, Any]) -> str:
    """A run's time range as a person reads it: both ends to the second in UTC, the end's
    date only when it differs, and how long.

    >>> span({"start_ns": 1_749_981_600_000_000_000, "end_ns": 1_749_981_657_699_183_000})
    '2025-06-15 10:00:00 → 10:00:58 UTC (57.7 s)'
    >>> span({"start_ns": 1_749_981_600_000_000_000, "end_ns": 1_750_068_000_000_000_000})
    '2025-06-15 10:00:00 → 2025-06-16 10:00:00 UTC (24.00 h)'
    >>> span({"start_ns": 0, "end_ns": 3_600_000_000})
    '00:00:00 → 00:00:03 into the run (3.6 s)'
    >>> span({"start": None, "end": None})
    'no time range'
    """
    start, end = time_range.get("start_ns"), time_range.get("end_ns")
    if start is None or end is None:
        return "no time range"
    if 0 <= start < RELATIVE_BELOW_NS:  # times from the run's own start (a load-test export)
        since = clock(start).removesuffix(" into the run")
        return f"{since} → {clock(end)} ({duration((end - start) / 1e9)})"
    first = datetime.fromtimestamp(round(start / 1e9), UTC)
    last = datetime.fromtimestamp(round(end / 1e9), UTC)
    tail = last.strftime("%H:%M:%S" if last.date() == first.date() else "%Y-%m-%d %H:%M:%S")
    return f"{first:%Y-%m-%d %H:%M:%S} → {tail} UTC ({duration((end - start) / 1e9)})"
