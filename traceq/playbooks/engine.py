"""Run playbooks over a dataset: requires → symptom → windows → figures, causes, evidence.

Per playbook (each in its own try, so one that errors is reported as `error` and the others
still run):

1. every `requires` query must count at least `min_rows`, else `not_applicable` naming
   the missing data (never `pass`);
2. `symptom.sql` returns one row per time window with `ts`, `ts_end`, `fired` (and an
   optional `score`); adjacent fired windows merge into incidents (`windows.py`); none
   fired → `pass`;
3. `symptom.figures` runs per incident with `$start` / `$end` bound and gives the figures
   inside and outside it; the worst incident's figures fill the one-line message;
4. each cause's check runs on the worst incident and returns `strength` 0-1; causes are
   ranked by it (confirmed first), a cause whose data is missing is `not_applicable` and
   says what would decide it;
5. evidence queries (bounded tables) and example requests.

Then the findings become incidents (traceq/playbooks/incidents.py): one root each, its
consequences `warn`, ordered by impact; and the run's tail, and each incident's, is
explained (traceq/playbooks/tail.py).

Parameters bind as DuckDB `$name` values: defaults from the file, the measured GPU's spec
for parameters that name one (traceq/playbooks/gpu.py), overridden per playbook.
Queries go through an executor (traceq/playbooks/executor.py): a DuckDB `Session`, or Spark.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from traceq.findings import (
    Cause,
    Diagnosis,
    Evidence,
    Finding,
    Incident,
    severity_rank,
    shortfall,
)
from traceq.hardware import resolve
from traceq.playbooks import gpu, incidents, steps, tail
from traceq.playbooks.executor import Executor
from traceq.playbooks.model import CauseSpec, Playbook, Requirement
from traceq.playbooks.rollups import materialise_rollups
from traceq.playbooks.steps import run_query
from traceq.playbooks.story import clock, iso
from traceq.playbooks.values import bind, plain_row, plain_rows
from traceq.playbooks.windows import merge_windows
from traceq.playbooks.words import fmt
from traceq.session import QueryError

STATUS_ORDER = {"fail": 0, "warn": 1, "error": 2, "not_applicable": 3, "pass": 4}
CAUSE_ORDER = {"confirmed": 0, "not_confirmed": 1, "not_applicable": 2, "error": 3}


@dataclass
class Options:
    """How a run binds and bounds: per-playbook parameter overrides (`--param ID.NAME=V`),
    the GPU the run served on where the data names none or the wrong one (`--gpu`: a row of
    traceq/hardware/gpus.csv, `traceq.hardware.resolve`), incidents kept per finding, rows
    per evidence table, example requests; `profile`, when a list, receives a `steps.Step`
    (seconds) for every query of the run."""

    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    gpu: str | None = None
    max_windows: int = 5
    evidence_rows: int = 20
    examples: int = 5
    profile: list[steps.Step] | None = None


def diagnose(
    session: Executor, playbooks: list[Playbook], options: Options | None = None
) -> Diagnosis:
    """Run `playbooks` on `session`'s dataset; findings worst first."""
    options = options or Options()
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    digest = dataset_hash(session)
    rollup_error = None
    with steps.recording(options.profile):
        try:
            with steps.playbook("rollups"):
                materialise_rollups(session)
        except QueryError as exc:  # playbooks then read the views themselves
            rollup_error = str(exc)
        hw = gpu.measured(session, resolve(options.gpu) if options.gpu else None)
        findings = []
        for pb in playbooks:
            params, use = gpu.params_for(pb, hw, options.overrides.get(pb.id, {}))
            finding = run_playbook(session, pb, params, options)
            gpu.cap(finding, use)
            finding.dataset_hash = digest
            if rollup_error and finding.status == "error":
                finding.message += f" (rollups failed first: {rollup_error})"
            findings.append(finding)
        with steps.playbook("incidents"):
            grouped = incidents.build(session, findings, playbooks)
        time_range = _time_range(session)
        with steps.playbook("tail"):
            run_tail = _run_tail(session, time_range)
            for incident in grouped:
                if _covers(incident, time_range):  # the run's own tail: asked once
                    incident.tail = run_tail
                else:
                    incident.tail = tail.explain(session, incident.start_ns, incident.end_ns)
    rank = {i.root: n for n, i in enumerate(grouped)}
    findings.sort(
        key=lambda f: (
            STATUS_ORDER[f.status],
            rank.get(f.id, len(rank)),
            -severity_rank(f.severity),
            f.id,
        )
    )
    return Diagnosis(
        findings=findings,
        dataset=str(session.dataset.root),
        dataset_hash=digest,
        traceq_version=_version(),
        started_at=started_at,
        elapsed_s=round(time.perf_counter() - t0, 3),
        time_range=time_range,
        incidents=grouped,
        tail=run_tail,
    )


def run_playbook(
    session: Executor, pb: Playbook, params: dict[str, Any], options: Options | None = None
) -> Finding:
    """One playbook → one Finding; any failure becomes status `error`."""
    options = options or Options()
    t0 = time.perf_counter()
    finding = Finding(
        id=pb.id,
        status="pass",
        severity=pb.severity,  # type: ignore[arg-type]
        title=pb.title,
        message="",
        references=list(pb.references),
        params=dict(params),
    )
    try:
        with steps.playbook(pb.id):
            _run(session, pb, params, options, finding)
    except (QueryError, KeyError, ValueError, TypeError, IndexError) as exc:
        finding.status = "error"
        finding.message = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    finding.elapsed_s = round(time.perf_counter() - t0, 4)
    return finding


def _run(
    session: Executor, pb: Playbook, params: dict[str, Any], options: Options, f: Finding
) -> None:
    unmet = unmet_requirements(session, pb.requires, params, "requires")
    if unmet:
        f.status = "not_applicable"
        f.message = "not enough data: needs " + "; ".join(unmet)
        f.next_checks = [f"Add {need}" for need in unmet]
        return
    frame = run_query(session, "symptom", pb.symptom_sql, bind(pb.symptom_sql, params)).frame
    incidents = merge_windows(frame)
    if not incidents:
        f.message = "symptom not seen in any window"
        return
    # the worst window first (highest score, then longest), so it is always kept
    ranked = sorted(incidents, key=lambda w: (-(w.get("score") or 0.0), w["start"] - w["end"]))
    worst, kept = ranked[0], ranked[: options.max_windows]
    for w in kept:
        w.update(_when(w["start"], w["end"]))
        values = {**params, "start": w["start"], "end": w["end"]}
        w.update(_row(session, "figures", pb.figures_sql, values))
    f.windows = sorted(kept, key=lambda w: w["start"])
    at = {**params, "start": worst["start"], "end": worst["end"]}
    figures = next(w for w in kept if w["start"] == worst["start"])
    figures["worst"] = True
    f.status = "fail"
    others = len(incidents) - 1
    more = f" (+{others} more window{'s' if others > 1 else ''})" if others else ""
    # the sentence gives the window's start as the incident's headline does (story.py
    # `clock`); the JSON's windows keep ISO 8601 in `start_at`
    words = {"start_at": clock(figures["start"]), "end_at": clock(figures["end"])}
    sentence = fmt(pb.message, {**params, **figures, **words})
    if not sentence:  # every figure it needs missing: still say when, never an empty line
        sentence = fmt(SEEN, {**figures, **words})
    elif sentence.startswith("from "):  # its lead clause missing: "seen from …"
        sentence = "seen " + sentence
    f.message = sentence + more
    f.causes = rank_causes([check_cause(session, c, at) for c in pb.causes])
    confirmed_fixes = [x for c in f.causes for x in c.fixes]
    f.fixes = list(dict.fromkeys(confirmed_fixes + list(pb.fixes)))
    f.next_checks = list(pb.next_checks) + [
        f"To decide '{c.title}': {c.needs}" for c in f.causes if c.status == "not_applicable"
    ]
    f.evidence = [
        _evidence(session, q.id, q.title, q.sql, at, options.evidence_rows) for q in pb.evidence
    ]
    if pb.examples_sql:
        sql = pb.examples_sql
        rows = run_query(session, "examples", sql, bind(sql, at), row_cap=options.examples).frame
        if rows.width:
            f.example_requests = [str(x) for x in rows.to_series(0).to_list()]


SEEN = "seen from {start_at} for {duration_s:s}"
"""A finding's sentence when its playbook's message lost every part to missing figures."""


def unmet_requirements(
    session: Executor,
    requires: tuple[Requirement, ...],
    params: dict[str, Any],
    step: str = "requires",
) -> list[str]:
    """The `needs` text of every requirement whose query counts fewer than `min_rows`."""
    unmet = []
    for r in requires:
        row = run_query(session, step, r.sql, bind(r.sql, params)).frame.row(0) if r.sql else (0,)
        n = row[0] if row and row[0] is not None else 0
        if n < r.min_rows:
            unmet.append(shortfall(r.needs, n, r.min_rows))
    return unmet


def check_cause(session: Executor, spec: CauseSpec, at: dict[str, Any]) -> Cause:
    """Run one cause's confirming check on the worst incident."""
    cause = Cause(id=spec.id, title=spec.title, status="not_confirmed")
    try:
        unmet = unmet_requirements(session, spec.requires, at, f"cause {spec.id} requires")
        if unmet:
            cause.status = "not_applicable"
            cause.needs = "; ".join(unmet)
            return cause
        row = _row(session, f"cause {spec.id}", spec.sql, at)
    except QueryError as exc:
        cause.status = "error"
        cause.evidence = " ".join(str(exc).split())[:200]
        return cause
    strength = row.get("strength")
    if strength is None:
        cause.status = "not_applicable"
        cause.needs = "; ".join(r.needs for r in spec.requires) or "data for this check"
        return cause
    cause.strength = round(max(0.0, min(1.0, float(strength))), 3)
    cause.evidence = fmt(spec.evidence, {**at, **row})
    cause.status = "confirmed" if cause.strength >= spec.confirm_at else "not_confirmed"
    if cause.status == "confirmed":
        cause.fixes = [fmt(x, {**at, **row}) for x in spec.fixes]
    return cause


def rank_causes(causes: list[Cause]) -> list[Cause]:
    """Confirmed first, then by strength (the check's support), never by file order."""
    return sorted(causes, key=lambda c: (CAUSE_ORDER[c.status], -c.strength))


def _row(session: Executor, step: str, sql: str, values: dict[str, Any]) -> dict[str, Any]:
    return plain_row(run_query(session, step, sql, bind(sql, values)).frame)


def _evidence(
    session: Executor, qid: str, title: str, sql: str, at: dict[str, Any], cap: int
) -> Evidence:
    results = run_query(session, f"evidence {qid}", sql, bind(sql, at), row_cap=cap)
    return Evidence(
        id=qid,
        title=title,
        sql=sql.strip(),
        columns=results.columns,
        rows=plain_rows(results.frame),
        truncated=results.truncated,
    )


def _when(start: int, end: int) -> dict[str, Any]:
    """Readable forms of an incident window (UTC)."""
    return {"start_at": iso(start), "end_at": iso(end), "duration_s": round((end - start) / 1e9, 3)}


def dataset_hash(session: Executor) -> str:
    """A short hash of the dataset's sources (their content hashes), stable across runs."""
    ids = sorted(str(s.get("source_id")) for s in session.manifest.get("sources", []))
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]


def _run_tail(session: Executor, time_range: dict[str, int | None]) -> list[dict[str, Any]]:
    start, end = time_range.get("start"), time_range.get("end")
    if start is None or end is None:
        return []
    return tail.explain(session, start, end + 1)


def _covers(incident: Incident, time_range: dict[str, int | None]) -> bool:
    """The incident's window holds every arrival of the run."""
    start, end = time_range.get("start"), time_range.get("end")
    return (
        start is not None and end is not None and incident.start_ns <= start < end < incident.end_ns
    )


def _time_range(session: Executor) -> dict[str, int | None]:
    try:
        row = run_query(session, "time range", "SELECT t_start, t_end FROM diag_window").frame
    except QueryError:
        return {}
    if not row.height:
        return {"start": None, "end": None}
    return {"start": row["t_start"][0], "end": row["t_end"][0]}


def _version() -> str:
    try:
        return version("traceq")
    except PackageNotFoundError:
        return "unknown"
