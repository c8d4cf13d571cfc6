"""What the playbook engine returns: plain, JSON-serialisable data.

The engine (`traceq diagnose`), the app and the report all exchange these; rendering to text,
Markdown or HTML lives elsewhere. Times are ns since the Unix epoch (UTC).

>>> f = Finding(id="kv-pressure", status="fail", severity="high", title="KV-cache pressure",
...             message="41 preemptions/min")
>>> Finding.from_dict(f.to_dict()) == f
True
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["pass", "fail", "warn", "not_applicable", "error"]
STATUSES: tuple[Status, ...] = ("fail", "warn", "error", "not_applicable", "pass")

Severity = Literal["info", "low", "medium", "high", "critical"]
SEVERITIES: tuple[Severity, ...] = ("info", "low", "medium", "high", "critical")
"""In rising order: `--fail-on medium` fails on medium, high and critical findings."""

CauseStatus = Literal["confirmed", "not_confirmed", "not_applicable", "error"]


@dataclass
class Cause:
    """One possible cause of a finding and what its confirming check found."""

    id: str
    title: str
    status: CauseStatus
    strength: float = 0.0
    """How strongly the check supports this cause, 0–1; causes are ranked by it."""
    evidence: str = ""
    """One line with the check's figure (e.g. "83 % of stalls overlap a prefill")."""
    needs: str = ""
    """For `not_applicable`: the data that would decide it."""
    see: str = ""
    """The playbook whose finding this cause is, if any (e.g. kv-pressure)."""
    fixes: list[str] = field(default_factory=list)
    """For `confirmed`: the cause's fixes, filled with the check's own figures."""


@dataclass
class Evidence:
    """A bounded table that supports a finding, with the SQL that produced it."""

    id: str
    title: str
    sql: str
    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False


@dataclass
class Finding:
    """The result of one playbook on one dataset."""

    id: str
    status: Status
    severity: Severity
    title: str
    message: str
    causes: list[Cause] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    windows: list[dict[str, Any]] = field(default_factory=list)
    """Where the symptom holds: `{"start": ns, "end": ns, ...figures inside / outside}`."""
    example_requests: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    next_checks: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    dataset_hash: str = ""
    elapsed_s: float = 0.0
    see: str = ""
    """For a consequence (`warn`): the root playbook of its incident."""
    gpu: dict[str, Any] | None = None
    """For a playbook with GPU-spec parameters: the GPU and figures it used, and whether
    they were measured (the data names the GPU), named (`--gpu`), given (`--param`) or
    assumed (traceq/playbooks/gpu.py)."""
    prediction: str = ""
    """What the setting change the playbook cites would do on this run, predicted by
    `traceq whatif` on the run's calibrated engine model (traceq/whatif/cite.py); empty when
    the playbook cites none, the finding holds no incident, or the run cannot be calibrated."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["causes"] = [Cause(**c) for c in data.get("causes", [])]
        known["evidence"] = [Evidence(**e) for e in data.get("evidence", [])]
        return cls(**known)

    @property
    def failed(self) -> bool:
        return self.status in ("fail", "warn")


@dataclass
class Incident:
    """One root cause in one time window, with its consequences and impact
    (traceq/playbooks/incidents.py builds them; docs/PLAYBOOKS.md documents the fields)."""

    root: str
    """The root finding's playbook id."""
    root_cause: str | None
    """The root's top confirmed cause id, or None when no checked cause was confirmed."""
    title: str
    severity: Severity
    """Set by the impact (requests that missed an SLO or failed, latency inside vs outside)."""
    start: str
    end: str
    """The window, ISO 8601 UTC."""
    headline: str
    summary: str
    """One plain paragraph: what, when, how bad, why, what to do."""
    consequences: list[str] = field(default_factory=list)
    requests_affected: int = 0
    """Requests that arrived inside the window."""
    confidence: float = 0.0
    alternatives: list[dict[str, str]] = field(default_factory=list)
    """Causes and playbooks ruled out: `{"id", "why"}`."""
    impact: dict[str, Any] = field(default_factory=dict)
    fix: str = ""
    start_ns: int = 0
    end_ns: int = 0
    tail: list[dict[str, Any]] = field(default_factory=list)
    """What the window's slowest requests spent their time on (traceq/playbooks/tail.py)."""


SCHEMA_VERSION = 2
"""Of `Diagnosis.to_dict()` (`traceq diagnose --format json`): 2 added `incidents` and
`tail`."""


@dataclass
class Diagnosis:
    """All findings of one `diagnose` run, with what it ran on, and the incidents they make
    (most impact first)."""

    findings: list[Finding]
    dataset: str
    dataset_hash: str
    traceq_version: str
    started_at: str
    elapsed_s: float
    time_range: dict[str, int | None] = field(default_factory=dict)
    incidents: list[Incident] = field(default_factory=list)
    tail: list[dict[str, Any]] = field(default_factory=list)
    """The run's p99 TTFT, TPOT and e2e and what their slowest requests spent their time on
    (traceq/playbooks/tail.py)."""

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": SCHEMA_VERSION, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnosis:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["findings"] = [Finding.from_dict(f) for f in data.get("findings", [])]
        fields = Incident.__dataclass_fields__
        known["incidents"] = [
            Incident(**{k: v for k, v in i.items() if k in fields})
            for i in data.get("incidents", [])
        ]
        return cls(**known)

    def not_run(self) -> dict[str, list[str]]:
        """The `not_applicable` playbooks grouped by the first input they lack (the engine
        writes one "Add <needs> (none found)" next check per unmet requirement, `shortfall`)."""
        groups: dict[str, list[str]] = {}
        for f in self.findings:
            if f.status == "not_applicable":
                first = f.next_checks[0] if f.next_checks else f.message
                need = first.removeprefix("Add ").removeprefix("not enough data: needs ")
                groups.setdefault(_SHORTFALL.sub("", need), []).append(f.id)
        return groups

    def failing(self, threshold: str = "info") -> list[Incident]:
        """The incidents at or above `threshold` severity (what `--fail-on` exits 1 on)."""
        rank = severity_rank(threshold)
        return [i for i in self.incidents if severity_rank(i.severity) >= rank]


def severity_rank(severity: str) -> int:
    """Position of `severity` in SEVERITIES (higher is worse); unknown → -1."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else -1  # type: ignore[arg-type]


def shortfall(needs: str, found: float, least: int) -> str:
    """`needs` with how far the data fell short of a requirement of at least `least` rows.

    >>> shortfall("engine stats lines", 0, 1), shortfall("GPU samples", 3, 5)
    ('engine stats lines (none found)', 'GPU samples (3 found, at least 5 needed)')
    """
    if found <= 0:
        return f"{needs} (none found)"
    shown = f"{int(found):,}" if float(found).is_integer() else f"{found:,.1f}"
    return f"{needs} ({shown} found, at least {least:,} needed)"


_SHORTFALL = re.compile(
    r" \((?:none found|[\d,.]+ found, at least [\d,]+ needed|found [\d.e+]+, need \d+)\)$"
)
"""The suffix `shortfall` writes, and the one a diagnosis saved by an earlier traceq has."""
