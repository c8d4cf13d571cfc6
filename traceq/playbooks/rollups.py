"""Shared rollups, computed once per diagnose run (traceq/sql/rollups.sql).

`materialise` is the one place where traceq writes through a session's connection: it
creates temporary tables (in DuckDB's in-memory temp catalogue, never in the dataset) named
after the rollup views, so every playbook query reads the computed rows instead of
recomputing per-request and per-window statistics from raw tokens. Why temporary tables and
not only views: several playbooks read the same rollups (window_stats alone by eight), and a
view would recompute its whole plan each time. `Session.query` stays read-only.
"""

from __future__ import annotations

import time

import duckdb

from traceq.playbooks.steps import note
from traceq.session import QueryError, Session
from traceq.sql import load

ROLLUPS = (
    "diag_window",
    "_prefill_timeline",
    "_request_gaps",
    "gap_stalls",
    "request_tbt",
    "window_stats",
)


def materialise(session: Session) -> dict[str, float]:
    """Create the rollup tables on `session`'s connection; seconds per rollup."""
    timings: dict[str, float] = {}
    statements = session.con.extract_statements(load("rollups_materialise"))
    for name, statement in zip(ROLLUPS, statements, strict=True):
        started = time.perf_counter()
        try:
            session.con.execute(statement)
        except duckdb.Error as exc:
            msg = f"rollup {name}: {str(exc).strip()}"
            raise QueryError(msg) from exc
        timings[name] = time.perf_counter() - started
        note(name, timings[name])
    return timings
