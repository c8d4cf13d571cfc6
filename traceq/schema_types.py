"""The building blocks of the schema (traceq/schema.py): a column with its type, unit and doc."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

NS = "ns since Unix epoch (UTC)"


@dataclass(frozen=True)
class Column:
    name: str
    dtype: pl.DataType
    unit: str
    doc: str


def _c(name: str, dtype: pl.DataType, unit: str, doc: str) -> Column:
    return Column(name, dtype, unit, doc)


I64, F64, STR, BOOL = pl.Int64(), pl.Float64(), pl.String(), pl.Boolean()
