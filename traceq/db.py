"""The DuckDB layer: a connection with every dataset table and public view registered.

Tables are views over the Parquet files the manifest lists (empty tables of the right shape
when a table has no file yet); the public views come from `traceq/sql/views.sql`. With
`read_only=True` (the default) the connection can read only the dataset's own files: external
access is switched off and the configuration locked, so SQL cannot write or reach any other
file or the network.
"""

from __future__ import annotations

import os

import duckdb
import polars as pl

from traceq.dataset import Dataset
from traceq.schema import TABLES, empty
from traceq.sql import load

VIEW_FILES = ("views", "crosswalk", "gpu")


def open(
    dataset: str | os.PathLike[str] | Dataset,
    *,
    read_only: bool = True,
    memory_limit: str | None = None,
) -> duckdb.DuckDBPyConnection:
    """Open a dataset for SQL; results convert to polars with `.pl()`.

    >>> con = traceq.open("run.tq")                                   # doctest: +SKIP
    >>> con.sql("SELECT * FROM kpi_latency").pl()                      # doctest: +SKIP
    """
    ds = dataset if isinstance(dataset, Dataset) else Dataset(dataset)
    con = duckdb.connect(":memory:")
    if memory_limit:
        con.execute("SET memory_limit = ?", [memory_limit])
    files: list[str] = []
    for table in TABLES:
        paths = [str(p) for p in ds.table_files(table)]
        files += paths
        if paths:
            rel = con.read_parquet(paths, union_by_name=True)
            rel.create_view(table)
        else:
            con.register(f"_empty_{table}", empty(table).to_arrow())
            con.table(f"_empty_{table}").create_view(table)
    for name in VIEW_FILES:
        con.execute(load(name))
    if read_only:
        _lock_down(con, files)
    return con


def _lock_down(con: duckdb.DuckDBPyConnection, files: list[str]) -> None:
    if files:
        con.execute("SET allowed_paths = ?", [files])
    con.execute("SET enable_external_access = false")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET lock_configuration = true")


def query(con: duckdb.DuckDBPyConnection, sql: str, params: dict | None = None) -> pl.DataFrame:
    """Run one read-only statement (SELECT / WITH / FROM / DESCRIBE …) and return polars."""
    statements = con.extract_statements(sql)
    if len(statements) != 1:
        msg = f"expected one SQL statement, got {len(statements)}"
        raise ValueError(msg)
    kind = statements[0].type
    if kind not in _READ_STATEMENTS:
        msg = f"only queries are allowed here, not {kind.name}"
        raise PermissionError(msg)
    return pl.from_arrow(con.sql(sql, params=params or None).to_arrow_table())  # type: ignore[return-value]


_READ_STATEMENTS = {
    duckdb.StatementType.SELECT,
    duckdb.StatementType.EXPLAIN,
}
