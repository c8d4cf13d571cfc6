"""Writing one source into a dataset: batches streamed to staged Parquet files, laid out
(traceq/layout.py) and committed at once (`Dataset.commit`, traceq/dataset.py)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow.parquet as pq

from traceq import layout
from traceq.columns import DUCKDB_TYPES
from traceq.dataset import Dataset
from traceq.schema import DERIVED, NS, TABLES, conform

VIEW_ROW_GROUP_ROWS = 1 << 16
"""Rows of a row group of a staged file DuckDB writes (`write_view`): the Parquet writer holds
one row group at a time, ~30 MB of `spans` rows with their JSON attributes."""


class SourceWriter:
    """Streams one source's batches into staged Parquet files, then commits them at once."""

    def __init__(self, dataset: Dataset, source_id: str) -> None:
        self.dataset = dataset
        self.source_id = source_id
        self.scratch = dataset.root / ".staging" / f"{source_id}-{os.getpid()}"
        self.scratch.mkdir(parents=True, exist_ok=True)
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._paths: dict[str, Path] = {}
        self.rows: dict[str, int] = {}
        self._whole: set[str] = set()
        self.t_min: int | None = None
        self.t_max: int | None = None
        self.labels: dict[str, str] = {}
        """Column → value set on every row of the tables that have the column (`--instance`)."""

    def write(self, table: str, frame: pl.DataFrame) -> None:
        """Append a batch to schema table `table`; the frame is conformed to the schema first.

        A name the schema does not know is an error (a typo must not lose rows silently);
        an ingester's own second-pass tables go through `write_scratch`.
        """
        if table not in TABLES:
            msg = f"no table {table!r} in the schema (scratch tables: write_scratch)"
            raise ValueError(msg)
        if frame.height == 0:
            return
        names = {c.name for c in TABLES[table]}
        fixed = {k: pl.lit(v) for k, v in self.labels.items() if k in names}
        frame = conform(table, frame.with_columns(source_id=pl.lit(self.source_id), **fixed))
        if table != "quarantine":
            self._track_time(table, frame)
        self._append(table, frame)

    def write_view(self, table: str, con: duckdb.DuckDBPyConnection, view: str) -> None:
        """Append every row of DuckDB view `view` to schema table `table`, conformed to the
        schema as `write` does (a column the view lacks is null, one the schema lacks is an
        error; DuckDB's casts, which round a double cast to an integer).

        A table not yet written is written whole by DuckDB itself, straight from the query
        to the staged file: no batch passes through Python, and nothing can be appended to
        it after. Streaming the 1 M-request OTel second pass's `spans` (2 M rows with their
        JSON attributes) through Arrow, polars and pyarrow's writer had set the ingest's
        peak, 1,194 MiB (docs/PERFORMANCE.md, "Ingest peak RSS with size"). A table already
        started, and `quarantine` (which every step may add to), are appended in batches.
        """
        if table not in TABLES:
            msg = f"no table {table!r} in the schema (scratch tables: write_scratch)"
            raise ValueError(msg)
        rel = con.table(view)
        if table in self._paths or table == "quarantine":
            for batch in rel.to_arrow_reader(VIEW_ROW_GROUP_ROWS):
                self.write(table, pl.from_arrow(batch))  # type: ignore[arg-type]
            return
        extra = set(rel.columns) - {c.name for c in TABLES[table]}
        if extra:
            msg = f"table {table!r} has no column(s) {sorted(extra)}"
            raise ValueError(msg)
        fixed = {**self.labels, "source_id": self.source_id}
        columns = [
            (
                duckdb.ConstantExpression(fixed[c.name])
                if c.name in fixed
                else duckdb.ColumnExpression(c.name)
                if c.name in rel.columns
                else duckdb.ConstantExpression(None)
            )
            .cast(DUCKDB_TYPES[c.dtype])
            .alias(c.name)
            for c in TABLES[table]
        ]
        path = self.scratch_path(table)
        rel.select(*columns).write_parquet(
            str(path), compression="zstd", row_group_size=VIEW_ROW_GROUP_ROWS
        )
        bounds = [
            duckdb.FunctionExpression(f, duckdb.ColumnExpression(c.name))
            for c in TABLES[table]
            if c.unit == NS
            for f in ("min", "max")
        ]
        rows, *values = (
            con.read_parquet(str(path))
            .aggregate([duckdb.FunctionExpression("count_star"), *bounds])
            .fetchall()[0]
        )
        if not rows:  # as `write` of an empty frame: no file
            path.unlink()
            return
        self._paths[table] = path
        self._whole.add(table)
        self.rows[table] = rows
        self._widen(values[0::2], values[1::2])

    def write_scratch(self, name: str, frame: pl.DataFrame) -> None:
        """Append a batch to scratch table `name`: written as it is, never committed, read
        back by the ingester's second pass (`scratch_path`)."""
        if name in TABLES:
            msg = f"{name!r} is a schema table, not a scratch name"
            raise ValueError(msg)
        if frame.height:
            self._append(name, frame)

    def _append(self, table: str, frame: pl.DataFrame) -> None:
        if table in self._whole:
            msg = f"table {table!r} was written whole by write_view; nothing can follow it"
            raise ValueError(msg)
        arrow = frame.to_arrow()
        if table not in self._writers:
            self._paths[table] = self.scratch_path(table)
            self._writers[table] = pq.ParquetWriter(
                self._paths[table], arrow.schema, compression="zstd"
            )
        self._writers[table].write_table(arrow, row_group_size=1 << 20)
        self.rows[table] = self.rows.get(table, 0) + frame.height

    def _track_time(self, table: str, frame: pl.DataFrame) -> None:
        cols = [c.name for c in TABLES[table] if c.unit == NS]
        if not cols:
            return
        bounds = frame.select(
            lo=pl.min_horizontal(pl.col(cols).min()), hi=pl.max_horizontal(pl.col(cols).max())
        ).row(0)
        self._widen([bounds[0]], [bounds[1]])

    def _widen(self, lows: Sequence[int | None], highs: Sequence[int | None]) -> None:
        """Widen the source's time range (ns) to take in the non-null `lows` and `highs`."""
        lo = min((v for v in lows if v is not None), default=None)
        hi = max((v for v in highs if v is not None), default=None)
        if lo is not None and hi is not None:
            self.t_min = lo if self.t_min is None else min(self.t_min, lo)
            self.t_max = hi if self.t_max is None else max(self.t_max, hi)

    def scratch_path(self, name: str) -> Path:
        return self.scratch / f"{name}.parquet"

    def close(self, name: str | None = None) -> dict[str, Path]:
        """Close one writer (`name`) or all; returns the finished schema-table files."""
        for key in [name] if name else list(self._writers):
            if key in self._writers:
                self._writers.pop(key).close()
        return {t: p for t, p in self._paths.items() if t in TABLES and t not in self._writers}

    def commit(self, entry: dict[str, Any], replaces: Sequence[str] = ()) -> bool:
        """Commit the staged files with `entry` (see `Dataset.commit` for `replaces`)."""
        staged = layout.lay_out(
            self.close(), self.scratch, self.source_id, self.labels.get("instance")
        )
        entry = {
            **entry,
            "source_id": self.source_id,
            "rows": {t: self.rows.get(t, 0) for t in TABLES if t not in ("quarantine", *DERIVED)},
            "quarantined": self.rows.get("quarantine", 0),
            "time_range": _time_range(self.t_min, self.t_max),
            "ingested_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        try:
            return self.dataset.commit(entry, staged, replaces)
        finally:
            self.discard()

    def discard(self) -> None:
        self.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def _time_range(lo: int | None, hi: int | None) -> dict[str, Any] | None:
    if lo is None or hi is None:
        return None

    def iso(ns: int) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 1_000_000_000)) + "Z"

    return {"start_ns": lo, "end_ns": hi, "start": iso(lo), "end": iso(hi)}
