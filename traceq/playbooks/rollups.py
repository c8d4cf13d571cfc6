"""Shared rollups, computed once per diagnose run (traceq/sql/rollups.sql).

`materialise` is the one place where traceq writes through a session's connection: it
creates temporary tables (in DuckDB's in-memory temp catalogue, never in the dataset) named
after the rollup views, so every playbook query reads the computed rows instead of
recomputing per-request and per-window statistics from raw tokens. Why temporary tables and
not only views: several playbooks read the same rollups (window_stats alone by eight), and a
view would recompute its whole plan each time. `Session.query` stays read-only.

The two grouped passes over every chunk gap, per request (`_request_gaps`) and per window
(`_window_tbt`), run in parts: their quantile states hold every gap of the rows in the pass
(DuckDB keeps them outside its memory limit, about 17 bytes a gap), so one pass over a
million requests took 1.1 GB and ten million would not fit (docs/PERFORMANCE.md, "Diagnose").
A part must read only its own row groups, so how the parts are cut follows the dataset's order:

- tokens in time order (the day-partitioned layout, traceq/layout.py): parts by time
  (traceq/sql/rollups_time_parts.sql), requests by the time of their first chunk
  (`REQUESTS_PER_PART`), windows by the window grid (`GAPS_PER_PART`);
- tokens in request-id order (the flat layout of older datasets): the per-request pass in
  parts by request-id range (traceq/sql/rollups_request_parts.sql); the per-window pass whole.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections.abc import Iterable, Mapping, Sequence
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
    "_window_tbt",
    "window_stats",
)

REQUESTS_PER_PART = 250_000
"""Requests per part of the per-request gap pass. One pass holds the gaps of all its
requests in DuckDB quantile states: at 1 M requests (56 M gaps) one pass peaked at ~1.4 GB
under the session's 2 GB limit (and failed at a 1.5 GB limit). 250 k requests (~14 M gaps in
`traceq synth large`, ~0.24 GB of states) bound a part whatever the dataset's size; smaller
parts cost more than they save (each part binds and plans the views again: at 1 M requests,
parts of 100 k took ~12 % more CPU than parts of 250 k for ~50 MB less peak RSS,
docs/PERFORMANCE.md, "Diagnose"). A dataset below it runs in one pass."""

GAPS_PER_PART = 15_000_000
"""Chunks per part of the per-window gap pass (time parts only): about the gaps of a part of
`REQUESTS_PER_PART` requests at `traceq synth large`'s ~56 chunks a request."""

_INT64 = (-(2**63), 2**63 - 1)
"""Open bounds of the first and last window part: chunks outside the window grid included."""


def _run(
    session: Session, name: str, statement: Any, params: Mapping[str, Any] | None = None
) -> Any:
    try:
        return session.con.execute(statement, params)
    except duckdb.Error as exc:
        msg = f"rollup {name}: {str(exc).strip()}"
        raise QueryError(msg) from exc


def _in_request_order(session: Session, statement: Any) -> bool:
    """Whether tokens are stored in request-id order (rollups_request_parts.sql, 2.)."""
    return bool(_run(session, "_request_gaps", statement).fetchone()[0] == 0)


def _statements(session: Session, name: str) -> list[Any]:
    return list(session.con.extract_statements(load(name)))


def _time_parts(session: Session, parts: int) -> bool:
    """Fill `_request_gaps` in `parts` parts by first-chunk time; False (nothing written) when
    some chunk has no time (traceq/sql/rollups_time_parts.sql, 1.)."""
    name = "_request_gaps"
    statements = _statements(session, "rollups_time_parts")[:11]
    untimed, span, bounds_of, set_lo, set_hi, set_ts_lo, set_ts_hi, view, fill, *drop = statements
    if _run(session, name, untimed).fetchone()[0] > 0:
        return False
    _run(session, name, span)
    quantiles = [i / parts for i in range(1, parts)]
    inner, t_min, t_max = _run(session, name, bounds_of, {"quantiles": quantiles}).fetchone()
    if t_min is None:
        return True
    edges = [t_min, *sorted(set(inner) - {t_min}), t_max + 1]
    parts_of = (
        [(set_lo, {"lo": lo}), (set_hi, {"hi": hi}), (set_ts_lo, None), (set_ts_hi, None)]
        for lo, hi in itertools.pairwise(edges)
    )
    _fill_in_parts(session, name, view, parts_of, fill, drop)
    return True


def _fill_in_parts(
    session: Session,
    name: str,
    view: Any,
    parts: Iterable[Sequence[tuple[Any, Mapping[str, Any] | None]]],
    fill: Any,
    drops: list[Any],
) -> None:
    """Create the temporary `view` of one part's chunks, then for each part run its statements
    (the variables that bound it) and `fill`; drop the view (and what else `drops` names)
    whatever happens, so no later query reads one part's chunks."""
    _run(session, name, view)
    try:
        for part in parts:
            for statement, params in part:
                _run(session, name, statement, params)
            _run(session, name, fill)
    finally:
        for statement in drops:
            _run(session, name, statement)


def _fill_request_gaps(session: Session, time_order: bool) -> None:
    """Insert `_request_gaps` part by part (module docstring)."""
    name = "_request_gaps"
    count, _, sample = _statements(session, "rollups_request_parts")
    parts = max(1, math.ceil(_run(session, name, count).fetchone()[0] / REQUESTS_PER_PART))
    by_range, null_ids = _statements(session, "rollups_request_gaps")
    if not (parts > 1 and time_order and _time_parts(session, parts)):
        bounds: list[str] = []
        if parts > 1 and not time_order:
            quantiles = [i / parts for i in range(1, parts)]
            found = _run(session, name, sample, {"quantiles": quantiles}).fetchone()[0]
            bounds = sorted(set(found))
        edges: list[str | None] = [None, *bounds, None]
        for lo, hi in itertools.pairwise(edges):
            _run(session, name, by_range, {"lo": lo, "hi": hi})
    _run(session, name, null_ids)


def _fill_window_tbt(session: Session, time_order: bool) -> None:
    """Insert `_window_tbt` part by part, on the window grid (module docstring)."""
    name = "_window_tbt"
    grid, set_lo, set_hi, view, fill, drop = _statements(session, "rollups_time_parts")[11:]
    row = _run(session, name, grid).fetchone()
    edges = list(_INT64)
    if row is not None and time_order:
        chunks, grid_start, window_ns, windows = row
        parts = min(windows, max(1, math.ceil(chunks / GAPS_PER_PART)))
        step = math.ceil(windows / parts) * window_ns
        inner = [grid_start + i * step for i in range(1, parts)]
        edges = [_INT64[0], *inner, _INT64[1]]
    parts_of = (
        [(set_lo, {"lo": lo}), (set_hi, {"hi": hi})] for lo, hi in itertools.pairwise(edges)
    )
    _fill_in_parts(session, name, view, parts_of, fill, [drop])


def materialise(session: Session) -> dict[str, float]:
    """Create the rollup tables on `session`'s connection; seconds per rollup."""
    timings: dict[str, float] = {}
    statements = session.con.extract_statements(load("rollups_materialise"))
    _, order, _ = _statements(session, "rollups_request_parts")
    time_order = not _in_request_order(session, order)
    try:
        for name, statement in zip(ROLLUPS, statements, strict=True):
            started = time.perf_counter()
            _run(session, name, statement)
            if name == "_request_gaps":
                _fill_request_gaps(session, time_order)
            elif name == "request_tbt":
                for slim in _statements(session, "rollups_slim"):
                    _run(session, name, slim)
            elif name == "_window_tbt":
                _fill_window_tbt(session, time_order)
            timings[name] = time.perf_counter() - started
            note(name, timings[name])
    except QueryError:
        # a table left half filled (or empty, before its parts) would shadow its view with
        # wrong rows: the playbooks must read the views themselves, or fail saying why
        for statement in _statements(session, "rollups_drop"):
            with contextlib.suppress(duckdb.CatalogException):  # a table where a view is named
                session.con.execute(statement)
        raise
    return timings
