"""DuckDB relations in the shape of a schema table (traceq/schema.py): its column types in
DuckDB's names, and the columns that older files lack added as typed nulls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import duckdb
import polars as pl

from traceq.schema_rollups import LONG_GAPS

DUCKDB_TYPES = {
    pl.Int64(): "BIGINT",
    pl.Float64(): "DOUBLE",
    pl.String(): "VARCHAR",
    pl.Boolean(): "BOOLEAN",
    LONG_GAPS: "STRUCT(ts BIGINT, tbt_ns BIGINT)[]",
}
"""The DuckDB type of each schema dtype (traceq/schema.py)."""


def conformed(rel: duckdb.DuckDBPyRelation, schema: Mapping[str, Any]) -> duckdb.DuckDBPyRelation:
    """`rel` with every column of `schema` (name → polars dtype): a column that files written
    by an older traceq lack (`requests.trace_id`, the stitched columns) reads as a typed null,
    so a dataset need not be re-ingested when the schema gains a column."""
    missing = [(name, dtype) for name, dtype in schema.items() if name not in rel.columns]
    if not missing:
        return rel
    return rel.select(
        *[duckdb.ColumnExpression(c) for c in rel.columns],
        *[
            duckdb.ConstantExpression(None).cast(DUCKDB_TYPES[dtype]).alias(name)
            for name, dtype in missing
        ],
    )
