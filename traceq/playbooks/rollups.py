"""Shared rollups, computed once per diagnose run (traceq/sql/rollups.sql).

`materialise` is the one place where traceq writes through a session's connection: it writes
each rollup as Parquet into a folder of the session's private temp directory (never into the
dataset) and creates a temporary view of the rollup's name over its files
(traceq/sql/rollups_store.sql), so every playbook query reads the computed rows instead of
recomputing per-request and per-window statistics from raw tokens. Why materialise and not
only views: several playbooks read the same rollups (window_stats alone by eight), and a view
would recompute its whole plan each time. Why files and not temporary tables: a table of
per-request rows stays in memory for the whole run, ~0.45 GB a million requests, while a file
costs memory only while a query reads it (docs/PERFORMANCE.md, "Diagnose peak RSS").
`Session.query` stays read-only.

The per-request rows of the sources with rollups are the `request_gaps` rows written at
ingest (traceq/layout_rollups.py), copied whole. The two grouped passes over chunk gaps, per
request (`_request_gaps_computed`, only the sources without rollups: none in a dataset
written by this traceq) and per window (`_window_tbt`), run in parts, one file each: their
quantile states hold every gap of the rows in the pass (DuckDB keeps them outside its memory
limit, about 17 bytes a gap), so one pass over a million requests took 1.1 GB and ten million
would not fit (docs/PERFORMANCE.md, "Diagnose"). A part must read only its own row groups, so
how the parts are cut follows the dataset's order:

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
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from traceq.playbooks.executor import Executor
from traceq.playbooks.steps import note
from traceq.session import QueryError, Session
from traceq.sql import load

ROLLUPS = (
    "diag_window",
    "_request_engine",
    "_prefill_timeline",
    "_request_gaps",
    "gap_stalls",
    "_window_tbt",
    "window_stats",
)
"""The rollups materialised, in order (each reads the ones before it). request_tbt is not one:
it is `_request_gaps` plus a stall count from `gap_stalls`, both materialised, and writing its
million rows at 1 M requests cost more CPU (0.5 s) than its few readers' joins."""

CACHED_ON_SPARK = (*ROLLUPS, "request_tbt")
"""What traceq/spark/executor.py caches with `CACHE TABLE`, in order: the rollups and
request_tbt, which Spark would otherwise recompute (a join and a shuffle) for each reader."""

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

_IN_PARTS = ("_request_gaps", "_window_tbt")
"""The rollups written part by part (module docstring); the others are written whole."""

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


class _Files:
    """The run's folder of rollup files, `NAME-PART.parquet` (traceq/sql/rollups_store.sql
    reads them back): parts numbered in the order they are written."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._parts: dict[str, int] = {}

    def next(self, name: str) -> dict[str, str]:
        """The `$path` parameter of the rollup's next part."""
        part = self._parts.get(name, 0)
        self._parts[name] = part + 1
        return {"path": str(self.folder / f"{name}-{part:05d}.parquet")}


def _in_request_order(session: Session, statement: Any) -> bool:
    """Whether tokens are stored in request-id order (rollups_request_parts.sql, 2.)."""
    return bool(_run(session, "_request_gaps", statement).fetchone()[0] == 0)


def _statements(session: Session, name: str) -> list[Any]:
    return list(session.con.extract_statements(load(name)))


def _time_parts(session: Session, parts: int, files: _Files) -> bool:
    """Write `_request_gaps` in `parts` parts by first-chunk time; False (nothing written)
    when some chunk has no time (traceq/sql/rollups_time_parts.sql, 1.)."""
    name = "_request_gaps"
    statements = _statements(session, "rollups_time_parts")[:12]
    untimed, span, span_view, bounds_of, set_lo, set_hi, set_ts_lo, set_ts_hi, view, fill = (
        statements[:10]
    )
    drop = statements[10:]
    if _run(session, name, untimed).fetchone()[0] > 0:
        return False
    _run(session, name, span, files.next("_request_span"))
    _run(session, name, span_view)
    quantiles = [i / parts for i in range(1, parts)]
    inner, t_min, t_max = _run(session, name, bounds_of, {"quantiles": quantiles}).fetchone()
    if t_min is None:  # no request with a chunk: the part of null ids is the only one
        for statement in drop:
            _run(session, name, statement)
        return True
    edges = [t_min, *sorted(set(inner) - {t_min}), t_max + 1]
    parts_of = (
        [(set_lo, {"lo": lo}), (set_hi, {"hi": hi}), (set_ts_lo, None), (set_ts_hi, None)]
        for lo, hi in itertools.pairwise(edges)
    )
    _fill_in_parts(session, name, view, parts_of, fill, drop, files)
    return True


def _fill_in_parts(
    session: Session,
    name: str,
    view: Any,
    parts: Iterable[Sequence[tuple[Any, Mapping[str, Any] | None]]],
    fill: Any,
    drops: list[Any],
    files: _Files,
) -> None:
    """Create the temporary `view` of one part's chunks, then for each part run its statements
    (the variables that bound it) and `fill` into the part's file; drop the view (and what
    else `drops` names) whatever happens, so no later query reads one part's chunks."""
    _run(session, name, view)
    try:
        for part in parts:
            for statement, params in part:
                _run(session, name, statement, params)
            _run(session, name, fill, files.next(name))
    finally:
        for statement in drops:
            _run(session, name, statement)


def _fill_request_gaps(session: Session, time_order: bool, files: _Files) -> None:
    """Write `_request_gaps`: the rows written at ingest whole, the rows computed from the
    chunks of sources without them part by part (module docstring)."""
    name = "_request_gaps"
    count, _, sample, unrolled = _statements(session, "rollups_request_parts")
    by_range, null_ids, stored = _statements(session, "rollups_request_gaps")
    _run(session, name, stored, files.next(name))
    if _run(session, name, unrolled).fetchone()[0] == 0:
        return
    parts = max(1, math.ceil(_run(session, name, count).fetchone()[0] / REQUESTS_PER_PART))
    if not (parts > 1 and time_order and _time_parts(session, parts, files)):
        bounds: list[str] = []
        if parts > 1 and not time_order:
            quantiles = [i / parts for i in range(1, parts)]
            found = _run(session, name, sample, {"quantiles": quantiles}).fetchone()[0]
            bounds = sorted(set(found))
        edges: list[str | None] = [None, *bounds, None]
        for lo, hi in itertools.pairwise(edges):
            _run(session, name, by_range, {"lo": lo, "hi": hi, **files.next(name)})
    _run(session, name, null_ids, files.next(name))


def _fill_window_tbt(session: Session, time_order: bool, files: _Files) -> None:
    """Write `_window_tbt` part by part, on the window grid (module docstring)."""
    name = "_window_tbt"
    grid, set_lo, set_hi, view, fill, drop = _statements(session, "rollups_time_parts")[12:]
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
    _fill_in_parts(session, name, view, parts_of, fill, [drop], files)


def _drop(session: Session, folder: Path) -> None:
    """Drop every temporary view and table a materialisation may have made, and its files."""
    for statement in _statements(session, "rollups_drop"):
        with contextlib.suppress(duckdb.CatalogException):  # a table of the caller's own
            session.con.execute(statement)
    shutil.rmtree(folder, ignore_errors=True)


def materialise(session: Session) -> dict[str, float]:
    """Write the rollups to the session's temp directory and shadow each rollup view with a
    temporary view over its files; seconds per rollup."""
    timings: dict[str, float] = {}
    folder = session.rollups_dir
    _drop(session, folder)  # a run before on this session
    folder.mkdir(parents=True)
    files = _Files(folder)
    set_folder, files_macro, *copies = _statements(session, "rollups_materialise")
    whole = dict(zip((n for n in ROLLUPS if n not in _IN_PARTS), copies, strict=True))
    views = _statements(session, "rollups_store")
    _, order, _, _ = _statements(session, "rollups_request_parts")
    try:
        time_order = not _in_request_order(session, order)
        _run(session, "rollups", set_folder, {"dir": str(folder)})
        _run(session, "rollups", files_macro)
        for name, view in zip(ROLLUPS, views, strict=True):
            started = time.perf_counter()
            if name == "_request_gaps":
                _fill_request_gaps(session, time_order, files)
            elif name == "_window_tbt":
                _fill_window_tbt(session, time_order, files)
            else:
                _run(session, name, whole[name], files.next(name))
            _run(session, name, view)
            timings[name] = time.perf_counter() - started
            note(name, timings[name])
    except QueryError:
        # a rollup left with missing parts (or none) would shadow its view with wrong rows:
        # the playbooks must read the views themselves, or fail saying why
        _drop(session, folder)
        raise
    return timings


def materialise_rollups(executor: Executor) -> dict[str, float]:
    """Compute the shared rollups once per run: Parquet files and views for a `Session`, the
    executor's own `materialise` otherwise (Spark: traceq/spark/executor.py)."""
    if isinstance(executor, Session):
        return materialise(executor)
    return executor.materialise()  # type: ignore[attr-defined, no-any-return]
