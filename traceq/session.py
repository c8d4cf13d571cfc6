"""One query path over a dataset: `Session`, used by `traceq sql`, the demo, the playbook
engine, the app and the report.

A session reads the manifest once, opens one read-only DuckDB connection with every table and
public view registered (traceq/db.py), and runs each statement through one guarded path: only
read statements, a time limit, a row cap, a memory limit with a private spill directory, and
one exception type (`QueryError`) carrying DuckDB's whole message, hints included. The docs of
tables and columns (DuckDB comments) are put in place the first time a statement reads DuckDB's
catalogue (`duckdb_columns()`, `information_schema`, `catalog()`), not at the open, which they
would make ~4× slower.

>>> from traceq.session import Session
>>> with Session("run.tq") as s:                                       # doctest: +SKIP
...     s.query("SELECT metric, p99 FROM kpi_latency")
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from traceq import db
from traceq.dataset import DatasetError
from traceq.remote import AnyDataset, open_dataset
from traceq.schema import TABLES
from traceq.tempdirs import private_temp_dir

DEFAULT_TIME_LIMIT_S = 120.0
"""Seconds one statement may run before it is interrupted: long enough for a full scan of a
million-request dataset on a laptop (docs/PERFORMANCE.md), short enough that a runaway cross
join comes back with a message instead of holding the terminal."""

DEFAULT_ROW_CAP = 100_000
"""Rows one result may hold: every traceq consumer aggregates in DuckDB, so a result this
large is almost always a query that forgot to aggregate; the console and `traceq sql` show
the first rows and say that the rest were cut."""

DEFAULT_MEMORY_LIMIT = "2GB"
"""DuckDB's buffer-manager limit: operators spill to the session's temp directory beyond it,
so a query over 50 M tokens spills instead of taking the machine (the peak-RSS figures in
docs/PERFORMANCE.md are measured under this limit)."""

BATCH_ROWS = 8_192


class QueryError(Exception):
    """Any failure of a statement run through a session: bad SQL (with DuckDB's hints), a
    write or file access refused, the time limit, the row cap, or an unreadable dataset."""


@dataclass(frozen=True)
class Results:
    """What `Session.execute` returns: the rows, and whether the row cap cut them."""

    frame: pl.DataFrame
    truncated: bool
    elapsed_s: float
    sql: str

    @property
    def columns(self) -> list[str]:
        return self.frame.columns

    def __len__(self) -> int:
        return self.frame.height


class Session:
    """A dataset opened for queries. Use as a context manager, or call `close()`.

    >>> with Session("run.tq", time_limit_s=10) as s:                  # doctest: +SKIP
    ...     r = s.execute("SELECT * FROM request_phases", row_cap=50)
    ...     r.truncated, r.frame.height
    (True, 50)
    """

    def __init__(
        self,
        dataset: str | os.PathLike[str] | AnyDataset,
        *,
        time_limit_s: float | None = DEFAULT_TIME_LIMIT_S,
        row_cap: int = DEFAULT_ROW_CAP,
        memory_limit: str = DEFAULT_MEMORY_LIMIT,
        temp_dir: str | os.PathLike[str] | None = None,
        threads: int | None = None,
    ) -> None:
        if row_cap < 1:
            msg = f"row_cap must be positive, got {row_cap}"
            raise ValueError(msg)
        self.time_limit_s = time_limit_s
        self.row_cap = row_cap
        self._own_temp = temp_dir is None
        self.temp_dir = Path(temp_dir) if temp_dir is not None else private_temp_dir()
        try:
            self.dataset = open_dataset(dataset)
            self.manifest = self.dataset.manifest()
            self.con = db.connect(
                self.dataset,
                self.manifest,
                memory_limit=memory_limit,
                temp_dir=self.temp_dir,
                threads=threads,
                documented=False,
            )
        except (DatasetError, duckdb.Error, OSError) as exc:
            self._drop_temp()
            raise QueryError(str(exc)) from exc
        except BaseException:  # SIGTERM's SystemExit, Ctrl-C
            self._drop_temp()
            raise
        self._lock = threading.Lock()
        self._documented = False
        _OPEN.add(self)

    # -- life cycle ------------------------------------------------------------------------
    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        _OPEN.discard(self)
        with contextlib.suppress(duckdb.Error):
            self.con.close()
        self._drop_temp()

    def _drop_temp(self) -> None:
        if self._own_temp:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        else:  # the caller's directory: only what traceq wrote there (diagnose's rollups)
            shutil.rmtree(self.rollups_dir, ignore_errors=True)

    @property
    def rollups_dir(self) -> Path:
        """Where `traceq diagnose` writes its rollups (traceq/playbooks/rollups.py): a folder
        of the temp directory, removed when the session closes."""
        return self.temp_dir / "rollups"

    # -- queries ---------------------------------------------------------------------------
    def query(self, sql: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
        """Run one read statement and return its rows; more rows than the cap is an error.

        For consumers that aggregate (the playbook engine, the app, the report): a result
        beyond the row cap means a query that forgot to aggregate, so it fails loudly
        instead of being cut silently.
        """
        results = self.execute(sql, params, truncate=False)
        return results.frame

    def execute(
        self,
        sql: str,
        params: dict[str, Any] | None = None,
        *,
        truncate: bool = True,
        row_cap: int | None = None,
        time_limit_s: float | None = None,
    ) -> Results:
        """Run one read statement under the time limit; keep at most `row_cap` rows.

        With `truncate=True` the rows past the cap are dropped and `Results.truncated` says
        so; with `truncate=False` they raise `QueryError`.
        """
        cap = row_cap or self.row_cap
        batches: list[pa.RecordBatch] = []
        rows = 0
        truncated = False
        started = time.perf_counter()
        for batch in self._batches(sql, params, time_limit_s):
            if rows + batch.num_rows > cap:
                if not truncate:
                    msg = (
                        f"the result has more than {cap:,} rows; aggregate or add a LIMIT "
                        "(or raise the row cap)"
                    )
                    raise QueryError(msg)
                batches.append(batch.slice(0, cap - rows))
                truncated = True
                break
            batches.append(batch)
            rows += batch.num_rows
        frame = self._frame(batches)
        return Results(frame, truncated, time.perf_counter() - started, sql)

    def stream(
        self, sql: str, params: dict[str, Any] | None = None, *, row_cap: int | None = None
    ) -> Iterator[pl.DataFrame]:
        """Yield the rows in batches, stopping at the row cap (for printing large results
        without building them whole). The last frame yielded past the cap is cut."""
        cap = row_cap or self.row_cap
        rows = 0
        for batch in self._batches(sql, params, None):
            take = min(batch.num_rows, cap - rows)
            yield self._frame([batch.slice(0, take)])
            rows += take
            if rows >= cap:
                return

    def _batches(
        self, sql: str, params: dict[str, Any] | None, time_limit_s: float | None
    ) -> Iterator[pa.RecordBatch]:
        statement = db.read_statement(self.con, sql, QueryError)
        limit = time_limit_s if time_limit_s is not None else self.time_limit_s
        with self._lock, _deadline(self.con, limit) as expired:
            try:
                if not self._documented and _READS_CATALOGUE.search(statement):
                    db.document(self.con)
                    self._documented = True
                relation = self.con.sql(statement, params=params or None)
                reader = relation.to_arrow_reader(BATCH_ROWS)
                empty = True
                for batch in reader:
                    empty = False
                    yield batch
                if empty:  # no rows: still one batch, so callers see the columns
                    yield pa.RecordBatch.from_pylist([], schema=reader.schema)
            except duckdb.InterruptException as exc:
                if expired.is_set():
                    msg = f"the query ran past the time limit of {limit:g} s and was stopped"
                    raise QueryError(msg) from exc
                raise QueryError(str(exc)) from exc
            except duckdb.Error as exc:
                raise QueryError(str(exc).strip()) from exc

    def _frame(self, batches: list[pa.RecordBatch]) -> pl.DataFrame:
        table = pa.Table.from_batches(batches)
        return pl.from_arrow(table.rename_columns(unique_names(table.column_names)))  # type: ignore[return-value]

    # -- what is in the dataset ------------------------------------------------------------
    def catalog(self, name: str | None = None) -> pl.DataFrame:
        """Tables, views and columns with their docs (`traceq schema`); `name` filters to one
        table or view."""
        return self.query(db.CATALOG_SQL, {"name": name, "tables": list(TABLES)})

    def sources(self) -> pl.DataFrame:
        """The manifest's sources, one row each (the `sources` view)."""
        return self.query("SELECT * FROM sources")


_READS_CATALOGUE = re.compile(r"\bduckdb_\w+|\binformation_schema\b|\bpg_catalog\b", re.I)
"""A statement that may show the docs: DuckDB's catalogue functions and schemas."""

_OPEN: weakref.WeakSet[Session] = weakref.WeakSet()
"""The sessions not yet closed, for `interrupt_all`."""


def interrupt_all() -> None:
    """Interrupt the statement every open session is running (the CLI's SIGTERM handler,
    traceq/cli/__init__.py): DuckDB stops at its next check and the session raises `QueryError`."""
    for session in list(_OPEN):
        with contextlib.suppress(duckdb.Error):
            session.con.interrupt()


@contextlib.contextmanager
def _deadline(con: duckdb.DuckDBPyConnection, limit_s: float | None) -> Iterator[threading.Event]:
    """Interrupt `con` once `limit_s` has passed; the event says whether that happened."""
    expired = threading.Event()
    if not limit_s or limit_s <= 0:
        yield expired
        return

    def fire() -> None:
        expired.set()
        con.interrupt()

    timer = threading.Timer(limit_s, fire)
    timer.daemon = True
    timer.start()
    try:
        yield expired
    finally:
        timer.cancel()


def unique_names(names: list[str]) -> list[str]:
    """Column names made unique as DuckDB's own shell does (`SELECT a.id, b.id` is valid
    SQL; a frame needs distinct names): a repeated name gains `_1`, `_2`, ….

    >>> unique_names(["id", "t", "id", "id"])
    ['id', 't', 'id_1', 'id_2']
    """
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        new, k = name, 0
        while new in seen:
            k += 1
            new = f"{name}_{k}"
        seen.add(new)
        out.append(new)
    return out
