"""The DuckDB layer: a connection with every dataset table and public view registered.

Tables are views over the Parquet files the manifest lists (empty tables of the right shape
when a table has no file yet); the public views come from the SQL files `VIEW_FILES` names
(traceq/docs.py), `kpi_latency` reading back the figures an ingest stored when they match
the files (traceq/stored_kpis.py); `sources` lists the manifest's sources. Every table, view and
column carries its doc as a DuckDB comment (`duckdb_columns().comment`; `document`). With
`read_only=True` (the default) the connection can read only the dataset's own files: external
access is switched off and the configuration locked, so SQL cannot write or reach any other
file or the network.

Queries from traceq itself go through `traceq.session.Session`, which adds the time limit,
row cap and one exception type; `open()` is the door for notebooks.
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Any

import duckdb
import polars as pl

from traceq import pick, stored_kpis
from traceq.columns import conformed
from traceq.dataset import listed_files
from traceq.docs import VIEW_FILES, views
from traceq.remote import AnyDataset, RemoteDataset, open_dataset
from traceq.schema import TABLES, empty, polars_schema
from traceq.spill import flush_allocator
from traceq.sql import load

CATALOG_SQL = load("catalog")
_IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")
_VIEW_HEAD = re.compile(r"^CREATE OR REPLACE VIEW ([a-z_][a-z0-9_]*) AS\b", re.M)


def _deferred(sql: str) -> str:
    """`sql` (a file of `VIEW_FILES`) with each of its views created `WITH (DEFER_BINDING)`:
    DuckDB binds such a view when a statement first reads it, not when it is created. Binding
    at creation bound each internal view once on its own and again inside every view above
    it; `document` binds the public views (a column's comment needs its columns), so a view
    that does not bind fails `open()`, and a session's first statement that reads it. The
    files keep the plain `CREATE OR REPLACE VIEW name AS` that sqlglot parses
    (traceq/spark/translate.py, traceq/docs.py). Measured
    (a 200-request dataset, six opens each): `connect` 0.62-0.84 s against 0.76-1.11.

    >>> _deferred("CREATE OR REPLACE VIEW kpis AS SELECT 1")
    'CREATE OR REPLACE VIEW kpis WITH (DEFER_BINDING) AS SELECT 1'
    """
    return _VIEW_HEAD.sub(r"CREATE OR REPLACE VIEW \1 WITH (DEFER_BINDING) AS", sql)


def open(
    dataset: str | os.PathLike[str] | AnyDataset,
    *,
    read_only: bool = True,
    memory_limit: str | None = None,
) -> duckdb.DuckDBPyConnection:
    """Open a dataset for SQL; results convert to polars with `.pl()`.

    The connection's own in-memory catalogue accepts temporary tables and views of your own
    (they vanish when it closes and never touch the dataset), but no file outside the
    dataset can be read or written and no setting changed. traceq's own consumers use
    `traceq.session.Session`, which runs read statements only.

    >>> con = traceq.open("run.tq")                                   # doctest: +SKIP
    >>> con.sql("SELECT * FROM kpi_latency").pl()                      # doctest: +SKIP
    """
    ds = open_dataset(dataset)
    return connect(ds, ds.manifest(), memory_limit=memory_limit, read_only=read_only)


def connect(
    ds: AnyDataset,
    manifest: dict[str, Any],
    *,
    memory_limit: str | None = None,
    temp_dir: str | os.PathLike[str] | None = None,
    threads: int | None = None,
    read_only: bool = True,
    documented: bool = True,
) -> duckdb.DuckDBPyConnection:
    """A connection over the files `manifest` lists (read once by the caller). With
    `documented=False` the docs are left for `document` to put in place when first asked for:
    of the ~0.6 s an open costs, ~0.45 s is the COMMENT statements (a 200-request dataset)."""
    con = duckdb.connect(":memory:")
    if isinstance(ds, RemoteDataset):
        # read through the dataset's fsspec filesystem, never an extension DuckDB would fetch;
        # each file's footer read once, not at every view's binding (a request to the store each)
        con.execute("SET autoload_known_extensions = false")
        con.execute("SET parquet_metadata_cache = true")
        con.register_filesystem(ds.filesystem)
    flush_allocator(con)
    if memory_limit:
        con.execute("SET memory_limit = ?", [memory_limit])
    if temp_dir is not None:
        con.execute("SET temp_directory = ?", [str(temp_dir)])
    if threads:
        con.execute("SET threads = ?", [threads])
    files: list[str] = []
    for table in TABLES:
        paths = [str(ds.path_of(rel)) for rel in listed_files(manifest, table)]
        files += paths
        con.register(f"_empty_{table}", empty(table).to_arrow())
        if paths:
            rel = con.read_parquet(paths, union_by_name=True, hive_partitioning=False)
            conformed(rel, polars_schema(table)).create_view(table)
        else:
            con.table(f"_empty_{table}").create_view(table)
    con.register("_sources", sources_frame(manifest).to_arrow())
    con.table("_sources").create_view("sources")
    files += _register_pick(con, ds, manifest)
    for name in VIEW_FILES:
        con.execute(_deferred(load(name)))
    files += _register_kpis(con, ds, manifest)
    if documented:
        document(con)
    if read_only:
        _lock_down(con, files)
    return con


def _register_kpis(
    con: duckdb.DuckDBPyConnection, ds: AnyDataset, manifest: dict[str, Any]
) -> list[str]:
    """Put kpi_latency's stored figures (traceq/stored_kpis.py) in place of `_kpi_stats`
    when they were stored for exactly these files; returns the file read, if any."""
    entry = stored_kpis.current(manifest)
    path = ds.stored_file(stored_kpis.rel_of(entry)) if entry else None
    if path is None:
        return []
    con.read_parquet(str(path)).create_view("_kpi_stats")
    return [str(path)]


PICK_ROLES = ("primary", "client")
PICK_SCHEMA = {**polars_schema("requests"), "copies": pl.Int64(), "is_primary": pl.Boolean()}


def _register_pick(
    con: duckdb.DuckDBPyConnection, ds: AnyDataset, manifest: dict[str, Any]
) -> list[str]:
    """Register `_request_pick` (which row stands for each request, traceq/pick.py) and the
    tokens the views may read, by how much of each source the pick keeps: `_tokens_<role>_all`
    (every row of the source kept: read unfiltered) and `_tokens_<role>_some` (joined to the
    pick in views.sql); sources with no kept row are not read. Returns the files read.

    A pick that was not settled for exactly the manifest's sources (written by an older
    traceq, or the source list changed without it) is settled here, in memory."""
    entry = pick.current(manifest)
    path = ds.pick_file(entry) if entry else None
    modes: dict[str, dict[str, str]]
    files: list[str] = []
    if entry and path is not None:
        conformed(con.read_parquet(str(path)), PICK_SCHEMA).create_view("_request_pick")
        modes, files = entry["sources"], [str(path)]
    elif pick.request_sources(manifest):
        pick.compute(con, pick.request_sources(manifest))
        con.table("_picked").create_view("_request_pick")
        rows = con.table("_pick_modes").fetchall()
        modes = {sid: dict(zip(PICK_ROLES, rest, strict=True)) for sid, *rest in rows}
    else:
        con.register("_empty_request_pick", pl.DataFrame(schema=PICK_SCHEMA).to_arrow())
        con.table("_empty_request_pick").create_view("_request_pick")
        modes = {}
    for name, table, paths in token_views(manifest, modes):
        located = [str(ds.path_of(rel)) for rel in paths]
        if located:
            rel = con.read_parquet(located, union_by_name=True, hive_partitioning=False)
            rel.create_view(name)
        else:
            con.table(f"_empty_{table}").create_view(name)
    return files


def token_views(
    manifest: dict[str, Any], modes: dict[str, dict[str, str]]
) -> list[tuple[str, str, list[str]]]:
    """(view, table, files) of every view over the chunks and rollups of the sources, by how
    much of each source the pick keeps (`mode`, per role):

    - `_tokens_<role>_<mode>`: `tokens` of every source (token_gaps, client_token_gaps);
    - `_tokens_<role>_<mode>_unrolled`: `tokens` of the sources without rollups (written
      before them, or whose chunks the rollups cannot stand for: traceq/layout_rollups.py),
      whose per-request figures are computed from every chunk (rollups.sql, _request_chunks);
    - `_gaps_<role>_<mode>`: `request_gaps` of the other sources;
    - `_buckets_primary_all`: `gap_buckets` of those whose every chunk the views read
      (primary mode `all`): kpi_latency's histogram of TBT sums them (views.sql, _tbt_stats).

    traceq/spark/catalog.py registers the same views."""
    listed = {s["source_id"]: s["files"] for s in _listed(manifest, "tokens")}
    rolled = {sid for sid, f in listed.items() if "request_gaps" in f and "gap_buckets" in f}
    out = []
    for role in PICK_ROLES:
        for mode in ("all", "some"):
            sids = [sid for sid in listed if modes.get(sid, {}).get(role) == mode]
            unrolled = [sid for sid in sids if sid not in rolled]
            out += [
                (
                    f"_tokens_{role}_{mode}",
                    "tokens",
                    [r for i in sids for r in listed[i]["tokens"]],
                ),
                (
                    f"_tokens_{role}_{mode}_unrolled",
                    "tokens",
                    [r for i in unrolled for r in listed[i]["tokens"]],
                ),
                (
                    f"_gaps_{role}_{mode}",
                    "request_gaps",
                    [r for i in sids if i in rolled for r in listed[i]["request_gaps"]],
                ),
            ]
    all_primary = [
        sid for sid in listed if sid in rolled and modes.get(sid, {}).get("primary") == "all"
    ]
    out.append(
        (
            "_buckets_primary_all",
            "gap_buckets",
            [r for i in all_primary for r in listed[i]["gap_buckets"]],
        )
    )
    return out


def _listed(manifest: dict[str, Any], table: str) -> list[dict[str, Any]]:
    return [s for s in manifest["sources"] if table in s.get("files", {})]


def sources_frame(manifest: dict[str, Any]) -> pl.DataFrame:
    """One row per manifest source (the `sources` view)."""
    rows = []
    for s in manifest["sources"]:
        span = s.get("time_range") or {}
        rows.append(
            {
                "source_id": s.get("source_id"),
                "path": s.get("path"),
                "format": s.get("format"),
                "status": s.get("status", "ingested"),
                "clock_domain": s.get("clock_domain"),
                "assumptions": json.dumps(s["assumptions"]) if s.get("assumptions") else None,
                "start_ns": span.get("start_ns"),
                "end_ns": span.get("end_ns"),
                "rows": sum((s.get("rows") or {}).values()),
                "quarantined": s.get("quarantined", 0),
                "bytes": s.get("bytes"),
                "ingested_at": s.get("ingested_at"),
            }
        )
    return pl.DataFrame(rows, schema=SOURCES_SCHEMA).with_columns(
        start_at=pl.from_epoch("start_ns", "ns").dt.replace_time_zone("UTC"),
        end_at=pl.from_epoch("end_ns", "ns").dt.replace_time_zone("UTC"),
    )


SOURCES_SCHEMA = {
    "source_id": pl.String,
    "path": pl.String,
    "format": pl.String,
    "status": pl.String,
    "clock_domain": pl.String,
    "assumptions": pl.String,
    "start_ns": pl.Int64,
    "end_ns": pl.Int64,
    "rows": pl.Int64,
    "quarantined": pl.Int64,
    "bytes": pl.Int64,
    "ingested_at": pl.String,
}

SOURCES_DOCS = {
    "": "Every source file of the dataset as the manifest lists it, one row each.",
    "source_id": "Content hash of the source (the source_id column of every table).",
    "path": "Path of the file when it was ingested.",
    "format": "Reader that read it (`traceq formats`); null when no reader recognised it.",
    "status": "ingested, failed (its reader failed; retried on the next ingest) or skipped.",
    "clock_domain": "What its stamps are relative to (unix_ns, log_local_time, relative, …).",
    "assumptions": "JSON: every clock or unit guess made while reading it (year, tz, t0, …).",
    "start_ns": "First stamp of its rows, ns since Unix epoch (UTC).",
    "end_ns": "Last stamp of its rows, ns since Unix epoch (UTC).",
    "rows": "Rows it contributed, all tables together.",
    "quarantined": "Records of it that went to quarantine.",
    "bytes": "Size of the file in bytes.",
    "ingested_at": "When it was ingested (UTC, ISO-8601).",
    "start_at": "start_ns as a UTC timestamp.",
    "end_at": "end_ns as a UTC timestamp.",
}


@functools.cache
def docs() -> tuple[tuple[str, str, str], ...]:
    """(relation, column, doc) for every table, view and column; column '' is the relation."""
    out: list[tuple[str, str, str]] = []
    for table, columns in TABLES.items():
        out.append((table, "", f"Table {table} (docs/SCHEMA.md)."))
        out += [(table, c.name, f"{c.doc} [{c.unit}]" if c.unit else c.doc) for c in columns]
    out += [("sources", column, doc) for column, doc in SOURCES_DOCS.items()]
    for view in views():
        out.append((view.name, "", view.doc))
        out += [(view.name, column, doc) for column, doc in view.columns.items()]
    return tuple(out)


def document(con: duckdb.DuckDBPyConnection) -> None:
    """Put every doc where DuckDB shows it (`duckdb_views()`, `duckdb_columns().comment`).
    Binds every public view (a column's comment needs its columns).

    COMMENT ON takes no bound parameters, so each statement is assembled here: names come
    from traceq's own schema and view files and are checked against a plain-identifier
    pattern; docs are quoted as SQL string literals.
    """
    con.execute(_comments())


@functools.cache
def _comments() -> str:
    """Every COMMENT ON statement, as one script: one call, not one per column."""
    statements = []
    for relation, column, doc in docs():
        if not (_IDENT.match(relation) and (not column or _IDENT.match(column))):
            msg = f"not a plain identifier: {relation}.{column}"
            raise ValueError(msg)
        literal = "'" + doc.replace("'", "''") + "'"
        # the connection's own views (database `memory`), never a temporary view of the same
        # name that a diagnose run put in front of one (traceq/playbooks/rollups.py)
        name = f"memory.main.{relation}"
        target = f"COLUMN {name}.{column}" if column else f"VIEW {name}"
        statements.append(f"COMMENT ON {target} IS {literal};")
    return "\n".join(statements)


def _lock_down(con: duckdb.DuckDBPyConnection, files: list[str]) -> None:
    if files:
        con.execute("SET allowed_paths = ?", [files])
    con.execute("SET enable_external_access = false")
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET lock_configuration = true")


_READ_STATEMENTS = {
    duckdb.StatementType.SELECT,
    duckdb.StatementType.EXPLAIN,
}
_QUERY_START = re.compile(r"^\s*(?:--[^\n]*\n\s*)*\(?\s*(PIVOT|UNPIVOT|SELECT|FROM|WITH)\b", re.I)


def read_statement(con: duckdb.DuckDBPyConnection, sql: str, error: type[Exception]) -> str:
    """`sql` if it is exactly one read statement, else raise `error` saying why.

    A PIVOT whose columns DuckDB must first look up parses as several statements (the look-up
    and the query); it is still a read when the text starts like a query, since no DuckDB
    statement that writes begins with SELECT, FROM, WITH or PIVOT.
    """
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise error(str(exc).strip()) from exc
    if len(statements) != 1:
        msg = f"expected one SQL statement, got {len(statements)}"
        raise error(msg)
    kind = statements[0].type
    if kind in _READ_STATEMENTS:
        return sql
    if kind == duckdb.StatementType.MULTI and _QUERY_START.match(sql):
        return sql
    msg = f"only queries are allowed here, not {kind.name}: the dataset is read-only"
    raise error(msg)
