"""Findings → incidents: one root cause per incident, its consequences, its impact.

A playbook declares the others it can explain (`explains:` in its YAML, `model.Edge`). After
every playbook ran, each failing finding C that a failing root R declares is checked: one of
C's windows must lie within R's extent (its first window's start to its last window's end)
or next to it (on the diagnosis grid; a fault over the whole run fires in many windows,
which need not meet C's: a prefill-bound window is by nature not a queue-bound one), and the
mechanism must hold in C's worst window: one of C's own causes named by `via` is confirmed
there, or the edge's `sql` returns a `strength` of at least `confirm_at`. Overlap alone
explains nothing. An explained finding becomes `warn` with `see` naming its incident's root;
a failing finding that nothing explains is a root of its own. Each root makes one incident
whose impact (traceq/sql/incident_impact.sql: requests that missed an SLO or failed inside
the window, latency inside against outside) sets its severity, raised to the root's own
`severity_floor` figure when it has one (an engine that never started has no requests to
miss an SLO) and lowered to its `severity_ceiling` (a load test's fixed lengths are not why its
requests missed an SLO), and incidents are ordered by it. The words (headline, summary) are
`traceq/playbooks/story.py`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceq.findings import SEVERITIES, Finding, Incident, Severity, severity_rank
from traceq.playbooks import story
from traceq.playbooks.executor import Executor
from traceq.playbooks.model import Edge, Playbook
from traceq.playbooks.steps import playbook as labelled
from traceq.playbooks.steps import run_query
from traceq.playbooks.values import bind, plain_row
from traceq.session import QueryError
from traceq.sql import load

CRITICAL_SHARE = 0.5
"""Share of the window's requests that missed an SLO or failed from which an incident is
critical: half the users of the window were let down."""
CRITICAL_MIN_REQUESTS = 10
"""Requests a window needs before a share makes it critical: 1 of 2 is not an outage."""
HIGH_SHARE = 0.1
"""Share missed or failed from which an incident is high: one user in ten, the p90 target
that goodput studies set (slo-goodput's `target`)."""
LATENCY_RATIO = 1.5
"""p99 TTFT, TPOT or e2e inside the window against outside from which an incident that
missed no SLO is still medium: users see half as much again of the wait."""
SLO_DEFAULTS = {"ttft_slo_ms": 2000, "tpot_slo_ms": 100, "e2e_slo_ms": 60000}
"""The SLOs impact is judged by when slo-goodput does not run (its defaults)."""
NO_CAUSE_CONFIDENCE = 0.3
"""Confidence of an incident whose root confirmed none of its checked causes: the symptom
is measured, its reason is not."""


@dataclass
class _Link:
    root: str
    strength: float
    edge: Edge


def build(session: Executor, findings: list[Finding], playbooks: list[Playbook]) -> list[Incident]:
    """Group `findings` into incidents (most impact first); explained findings become `warn`
    with `see` set, and each root's severity becomes its incident's."""
    failing = {f.id: f for f in findings if f.status == "fail"}
    if not failing:
        return []
    by_id = {p.id: p for p in playbooks}
    grid = _grid_ns(session)
    parents: dict[str, list[_Link]] = {}
    for rid, root in failing.items():
        pb = by_id.get(rid)
        for edge in pb.explains if pb else ():
            c = failing.get(edge.playbook)
            if c is None or c.id == rid:
                continue
            if not any(_near(w, root.windows, grid) for w in c.windows):
                continue
            strength = _mechanism(session, edge, c, root)
            if strength is not None:
                parents.setdefault(c.id, []).append(_Link(rid, strength, edge))
    root_of = {fid: _root(fid, parents, failing) for fid in failing}
    groups: dict[str, list[Finding]] = {}
    for fid, rid in root_of.items():
        if fid != rid:
            groups.setdefault(rid, []).append(failing[fid])
    for fid, rid in root_of.items():
        if fid != rid:
            _demote(failing[fid], rid, parents[fid])
    slo = _slo(findings)
    incidents = [_incident(session, failing[rid], groups.get(rid, []), slo) for rid in failing
                 if root_of[rid] == rid]  # fmt: skip
    incidents.sort(key=_impact_key)
    return incidents


def worst(f: Finding) -> dict[str, Any]:
    """The finding's worst window (the one its figures and causes describe)."""
    return next((w for w in f.windows if w.get("worst")), f.windows[0] if f.windows else {})


def _grid_ns(session: Executor) -> int:
    try:
        frame = run_query(session, "incidents: grid", load("incident_grid")).frame
    except QueryError:
        return 0
    value = frame.row(0)[0] if frame.height else None
    return int(value or 0)


def _near(window: dict[str, Any], others: list[dict[str, Any]], pad: int) -> bool:
    """`window` overlaps the extent of `others` (first start to last end), or touches it
    within one grid window: the queue a prefill burst builds drains in the window after it,
    and a root that fires across the run covers the windows between its own."""
    spans = [o for o in others if "start" in o]
    if "start" not in window or not spans:
        return False
    first = min(o["start"] for o in spans)
    last = max(o["end"] for o in spans)
    return window["start"] <= last + pad and first - pad <= window["end"]


def _mechanism(session: Executor, edge: Edge, c: Finding, root: Finding) -> float | None:
    """The strength of `edge`'s mechanism in `c`'s worst window, or None when it fails."""
    if edge.via:
        strengths = [x.strength for x in c.causes if x.id in edge.via and x.status == "confirmed"]
        return max(strengths) if strengths else None
    at, rw = worst(c), worst(root)
    values = {
        **root.params,
        "start": at["start"],
        "end": at["end"],
        "root_start": rw["start"],
        "root_end": rw["end"],
    }
    try:
        with labelled(root.id):
            frame = run_query(session, f"explains {c.id}", edge.sql, bind(edge.sql, values))
    except QueryError:
        return None
    row = frame.frame.row(0, named=True) if frame.frame.height else {}
    strength = row.get("strength")
    if strength is None or float(strength) < edge.confirm_at:
        return None
    return float(strength)


def _root(fid: str, parents: dict[str, list[_Link]], failing: dict[str, Finding]) -> str:
    """Follow the strongest explaining link up to a finding nothing explains (a declared
    cycle cannot pass lint; one met anyway stops the walk at the finding itself)."""
    seen = {fid}
    here = fid
    while parents.get(here):
        best = max(
            parents[here], key=lambda k: (k.strength, severity_rank(failing[k.root].severity))
        )
        if best.root in seen:
            return fid
        seen.add(best.root)
        here = best.root
    return here


def _demote(f: Finding, root: str, links: list[_Link]) -> None:
    """A consequence: `warn`, `see` its root; the causes its mechanism confirmed name the
    playbook that explains them (the incident's root when its own edge names the cause,
    else the strongest edge that does)."""
    f.status = "warn"
    f.see = root
    for c in f.causes:
        named = [k for k in links if c.id in k.edge.via and c.status == "confirmed"]
        if named:
            c.see = max(named, key=lambda k: (k.root == root, k.strength)).root


def _slo(findings: list[Finding]) -> dict[str, Any]:
    goodput = next((f for f in findings if f.id == "slo-goodput"), None)
    params = goodput.params if goodput else {}
    return {k: params.get(k, v) for k, v in SLO_DEFAULTS.items()}


def _incident(
    session: Executor, root: Finding, consequences: list[Finding], slo: dict[str, Any]
) -> Incident:
    windows = [worst(root)] + [worst(c) for c in consequences]
    start = min(w["start"] for w in windows if "start" in w)
    end = max(w["end"] for w in windows if "end" in w)
    impact = _impact(session, start, end, slo)
    severity = severity_of(impact)
    floor = worst(root).get("severity_floor")
    if floor in SEVERITIES and severity_rank(floor) > severity_rank(severity):
        severity = floor  # the root's own figures know worse than its requests show
    ceiling = worst(root).get("severity_ceiling")
    if ceiling in SEVERITIES and severity_rank(ceiling) < severity_rank(severity):
        severity = ceiling  # the root cannot have let those requests down
    root.severity = severity
    confirmed = [c for c in root.causes if c.status == "confirmed"]
    top = confirmed[0] if confirmed else None
    consequences.sort(key=lambda c: (-severity_rank(c.severity), c.id))
    alternatives = [
        {"id": c.id, "why": f"not confirmed: {c.evidence}" if c.evidence else "not confirmed"}
        for c in root.causes
        if c.status == "not_confirmed"
    ]
    incident = Incident(
        root=root.id,
        root_cause=top.id if top else None,
        title=root.title,
        severity=severity,
        start=story.iso(start),
        end=story.iso(end),
        headline="",
        summary="",
        consequences=[c.id for c in consequences],
        requests_affected=int(impact.get("requests_in") or 0),
        confidence=round(top.strength if top else NO_CAUSE_CONFIDENCE, 2),
        alternatives=alternatives,
        impact=impact,
        fix=root.fixes[0] if root.fixes else "",
        start_ns=start,
        end_ns=end,
    )
    incident.headline = story.headline(incident)
    incident.summary = story.summary(incident, root, consequences)
    return incident


def _impact(session: Executor, start: int, end: int, slo: dict[str, Any]) -> dict[str, Any]:
    sql = load("incident_impact")
    try:
        frame = run_query(
            session, "incidents: impact", sql, bind(sql, {**slo, "start": start, "end": end})
        ).frame
    except QueryError:
        return {}
    row = plain_row(frame)
    return {k: v for k, v in row.items() if v is not None} | {"slo": slo}


def severity_of(impact: dict[str, Any]) -> Severity:
    """critical / high / medium / low from the requests let down inside the window.

    >>> severity_of({"requests_in": 40, "missed_in": 30})
    'critical'
    >>> severity_of({"requests_in": 40, "missed_in": 0, "ttft_p99_in_ms": 900,
    ...              "ttft_p99_out_ms": 300})
    'medium'
    >>> severity_of({"requests_in": 40, "missed_in": 0})
    'low'
    """
    n = impact.get("requests_in") or 0
    bad = impact.get("missed_in") or 0
    share = bad / n if n else 0.0
    if share >= CRITICAL_SHARE and n >= CRITICAL_MIN_REQUESTS:
        return "critical"
    if share >= HIGH_SHARE and bad >= 2:
        return "high"
    if bad or _slower(impact):
        return "medium"
    return "low"


def _slower(impact: dict[str, Any]) -> bool:
    for metric in ("ttft", "tpot", "e2e"):
        inside, outside = impact.get(f"{metric}_p99_in_ms"), impact.get(f"{metric}_p99_out_ms")
        if inside and outside and inside >= LATENCY_RATIO * outside:
            return True
    return False


def _impact_key(i: Incident) -> tuple[Any, ...]:
    lost = (i.impact.get("missed_in") or 0) + (i.impact.get("failed_in") or 0)
    return (-severity_rank(i.severity), -lost, -i.requests_affected, i.start_ns, i.root)
