"""An incident in words: a one-line headline and a summary paragraph (what, when, how bad,
why, what to do), built from the incident's data only (traceq/playbooks/incidents.py).

Durations are human (`words.duration_ms`), counts have thousands separators, and a clause
whose figure is missing is left out, never printed as "n/a". "Outside the window" is said
only when requests arrived outside it.

>>> iso(1_750_000_000_000_000_000)
'2025-06-15T15:06:40Z'
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from traceq.findings import Finding, Incident
from traceq.playbooks.words import count, counted, duration_ms, fmt


def iso(ns: int) -> str:
    """ns since the epoch as ISO 8601 UTC, to the second."""
    at = datetime.fromtimestamp(ns / 1e9, UTC)
    return at.isoformat(timespec="seconds").replace("+00:00", "Z")


RELATIVE_BELOW_NS = 10**17
"""Times below this (1973 in ns since the epoch) are offsets from the run's start: a
load-test export that records times relative to its own start (llmperf, inference-perf)."""


def stamp(ns: int) -> str:
    """A time to the millisecond, UTC implied: `2025-06-15 10:00:10.250`.

    >>> stamp(1_749_981_610_250_000_000)
    '2025-06-15 10:00:10.250'
    """
    return datetime.fromtimestamp(ns // 1000 / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def clock(ns: int) -> str:
    """`2025-06-15 10:00:40 UTC`: always with the date, as a run may span days; a time
    relative to the run's start as `00:17:10 into the run`.

    >>> clock(1_749_981_640_000_000_000), clock(1_030_000_000_000)
    ('2025-06-15 10:00:40 UTC', '00:17:10 into the run')
    """
    if 0 <= ns < RELATIVE_BELOW_NS:
        seconds = ns // 10**9
        return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d} into the run"
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _span(i: Incident) -> str:
    return f"from {clock(i.start_ns)} for {duration_ms((i.end_ns - i.start_ns) / 1e6)}"


def _missed(impact: dict[str, Any]) -> str:
    n, bad = impact.get("requests_in"), impact.get("missed_in")
    if not n:
        return ""
    if not bad:
        return f"no request of {count(n)} missed an SLO"
    share = bad / n
    return f"{count(bad)} of {counted(n, 'request')} ({share:.0%}) missed an SLO or failed"


def headline(i: Incident) -> str:
    """`[high] TTFT dominated by queueing — from 10:00:40 UTC for 20 s: 25 of 30 requests …`"""
    missed = _missed(i.impact)
    return f"[{i.severity}] {i.title} — {_span(i)}" + (f": {missed}" if missed else "")


def impact_sentence(impact: dict[str, Any]) -> str:
    """How bad, inside the window against outside (when requests arrived outside).

    >>> impact_sentence({"requests_in": 1, "missed_in": 1, "attained_in": 0.0,
    ...                  "requests_out": 63, "attained_out": 1.0})
    '1 request arrived in the window (0% met every SLO against 100% outside)'
    """
    outside = bool(impact.get("requests_out"))
    parts = []
    n = impact.get("requests_in")
    if n and not impact.get("missed_in"):
        parts.append(
            fmt("{requests_in:n request} arrived in the window, none missed an SLO", impact)
        )
    elif n:
        attained = "[ ({attained_in:.0%} met every SLO[ against {attained_out:.0%} outside])]"
        parts.append(fmt("{requests_in:n request} arrived in the window" + attained, impact))
    if impact.get("failed_in"):
        lost = ", losing {tokens_lost:n} generated tokens" if impact.get("tokens_lost") else ""
        parts.append(fmt("{failed_in:n} failed" + lost, impact))
    for metric, label in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "end-to-end")):
        tail = f"[ against {{{metric}_p99_out_ms:ms}} outside]" if outside else ""
        part = fmt(f"[p99 {label} {{{metric}_p99_in_ms:ms}}{tail}]", impact)
        if part:
            parts.append(part)
    return "; ".join(parts)


def worst_tail(i: Incident) -> dict[str, Any] | None:
    """The incident's tail (traceq/playbooks/tail.py) for the metric it hurt most: p99
    inside over outside its window."""
    if not i.tail:
        return None

    def ratio(m: dict[str, Any]) -> float:
        inside = i.impact.get(f"{m['metric']}_p99_in_ms")
        outside = i.impact.get(f"{m['metric']}_p99_out_ms")
        return inside / outside if inside and outside else 0.0

    return max(i.tail, key=ratio)


def lines(i: Incident, root: Finding | None) -> list[tuple[str, str]]:
    """(label, text) of an incident as a person reads it: what, impact, cause (with the
    confidence), also (two more confirmed causes), undecided, change, predict (what the
    change would do, traceq/whatif/cite.py), tail; a line without
    text left out. `traceq diagnose`, the report and the app print these."""
    confirmed = [c for c in root.causes if c.status == "confirmed"] if root else []
    cause = "none of the checked causes was confirmed"
    if confirmed:
        cause = _cause(confirmed[0].title, confirmed[0].evidence)
        cause += f" (confidence {i.confidence:.2f})"
    out = [("what", root.message if root else ""), ("impact", impact_sentence(i.impact))]
    out += [("cause", cause)] + [("also", _cause(c.title, c.evidence)) for c in confirmed[1:3]]
    out += [
        ("undecided", f"{c.title} — needs {c.needs}" if c.needs else c.title)
        for c in (root.causes if root else [])
        if c.status == "not_applicable"
    ]
    tail = worst_tail(i)
    out += [("change", i.fix), ("predict", root.prediction if root else "")]
    out += [("tail", str(tail.get("line") or "") if tail else "")]
    return [(label, text) for label, text in out if text]


def _cause(title: str, evidence: str) -> str:
    return f"{title.rstrip('.')} — {evidence}" if evidence else title.rstrip(".")


def summary(i: Incident, root: Finding, consequences: list[Finding]) -> str:
    """What, when, how bad, why, what to do: one paragraph."""
    out = [f"{i.title}: {root.message}."]
    how_bad = impact_sentence(i.impact)
    if how_bad:
        out.append(how_bad[0].upper() + how_bad[1:] + ".")
    confirmed = [c for c in root.causes if c.status == "confirmed"]
    if confirmed:
        c = confirmed[0]
        out.append(f"Cause: {c.title.rstrip('.')}" + (f" — {c.evidence}." if c.evidence else "."))
    else:
        out.append("None of the checked causes was confirmed.")
    if consequences:
        titles = "; ".join(f"{c.title} ({c.id})" for c in consequences)
        out.append(f"It also explains: {titles}.")
    if i.fix:
        out.append(f"What to change: {i.fix.rstrip('.')}.")
    return " ".join(out)
