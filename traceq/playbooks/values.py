"""Values in and out of the engine's queries: `$name` parameters bound, rows made JSON-ready.

>>> bind("SELECT $a + $a, $b", {"a": 1, "b": 2, "c": 3})
{'a': 1, 'b': 2}
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import polars as pl

from traceq.playbooks.model import PARAM_REF


def bind(sql: str, values: dict[str, Any]) -> dict[str, Any]:
    """The values of the `$name` parameters `sql` uses (DuckDB refuses unused ones)."""
    return {name: values[name] for name in dict.fromkeys(PARAM_REF.findall(sql))}


def plain_value(v: Any) -> Any:
    """JSON-ready: DuckDB's DECIMAL sums become floats, floats are rounded for reading."""
    if isinstance(v, Decimal):
        v = float(v)
    return round(v, 4) if isinstance(v, float) else v


def plain_row(frame: pl.DataFrame) -> dict[str, Any]:
    """The first row as a JSON-ready dict; {} for no rows."""
    if not frame.height:
        return {}
    return {k: plain_value(v) for k, v in frame.row(0, named=True).items()}


def plain_rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """Every row as a JSON-ready dict."""
    return [{k: plain_value(v) for k, v in row.items()} for row in frame.to_dicts()]
