"""Shared rollups, computed once per diagnose run (traceq/sql/rollups.sql).

`materialise` is the one place where traceq writes through a session's connection: it
creates temporary tables (in DuckDB's in-memory temp catalogue, never in the dataset) named
after the rollup views, so every playbook query reads the computed rows instead of
recomputing per-request and per-window statistics from raw tokens. Why temporary tables and
not only views: several playbooks read the same rollups (window_stats alone by eight), and a
view would recompute its whole plan each time. `Session.query` stays read-only.

The per-request pass (`_request_gaps`) runs in parts by request-id range
(`REQUESTS_PER_PART`): its quantile states hold every chunk gap of the requests in the pass,
which at a million requests came close to the session's memory limit (docs/PERFORMANCE.md,
"Diagnose"). Only where tokens are stored in request-id order (the flat layout): in the
day-partitioned layout they are in time order, a part would read every row group, and the
pass runs whole.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any

import duckdb

from traceq.playbooks.steps import note
from traceq.session import QueryError, Session
from traceq.sql import load

ROLLUPS = (
    "diag_window",
    "_request_engine",
    "_prefill_timeline",
    "_request_gaps",
    "gap_stalls",
    "request_tbt",
    "window_stats",
)

REQUESTS_PER_PART = 250_000
"""Requests per part of the per-request gap pass. One pass holds the gaps of all its
requests in DuckDB quantile states: at 1 M requests (56 M gaps) one pass peaked at ~1.4 GB
under the session's 2 GB limit (and failed at a 1.5 GB limit); 250 k requests (~14 M gaps in
`traceq synth large`) keep a part near 0.4 GB, and a dataset below it runs in one pass as
before. Parts are used only where tokens are stored in request-id order, so that each part
reads only its own row groups (traceq/sql/rollups_request_parts.sql)."""


def _run(session: Session, name: str, statement: Any, params: dict[str, Any] | None = None) -> Any:
    try:
        return session.con.execute(statement, params)
    except duckdb.Error as exc:
        msg = f"rollup {name}: {str(exc).strip()}"
        raise QueryError(msg) from exc


def _in_request_order(session: Session, statement: Any) -> bool:
    """Whether tokens are stored in request-id order (rollups_request_parts.sql, 2.)."""
    return bool(_run(session, "_request_gaps", statement).fetchone()[0] == 0)


def _fill_request_gaps(session: Session) -> None:
    """Insert `_request_gaps` part by part (traceq/sql/rollups_request_gaps.sql)."""
    name = "_request_gaps"
    count, order, sample = session.con.extract_statements(load("rollups_request_parts"))
    parts = max(1, math.ceil(_run(session, name, count).fetchone()[0] / REQUESTS_PER_PART))
    bounds: list[str] = []
    if parts > 1 and _in_request_order(session, order):
        quantiles = [i / parts for i in range(1, parts)]
        bounds = sorted(set(_run(session, name, sample, {"quantiles": quantiles}).fetchone()[0]))
    by_range, null_ids = session.con.extract_statements(load("rollups_request_gaps"))
    edges: list[str | None] = [None, *bounds, None]
    for lo, hi in itertools.pairwise(edges):
        _run(session, name, by_range, {"lo": lo, "hi": hi})
    _run(session, name, null_ids)


def materialise(session: Session) -> dict[str, float]:
    """Create the rollup tables on `session`'s connection; seconds per rollup."""
    timings: dict[str, float] = {}
    statements = session.con.extract_statements(load("rollups_materialise"))
    for name, statement in zip(ROLLUPS, statements, strict=True):
        started = time.perf_counter()
        _run(session, name, statement)
        if name == "_request_gaps":
            _fill_request_gaps(session)
        timings[name] = time.perf_counter() - started
        note(name, timings[name])
    return timings
