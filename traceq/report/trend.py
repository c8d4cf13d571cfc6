"""The trend of the main KPIs over the last N saved baselines / JSON reports in a directory
(`traceq report --trend DIR`): the history a nightly job keeps (docs/report-nightly.sh)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import polars as pl

from traceq.report import fmt
from traceq.report.kpis import BY_NAME, MAIN_KPIS


def history(directory: str | Path, last: int = 10) -> pl.DataFrame:
    """One row per run (oldest first, at most `last`): its label, time and the main KPIs.

    Reads every `*.json` in `directory` that is a traceq baseline or JSON report; other files
    are skipped. Runs are ordered by the start of their data's time range, then file name.
    """
    rows: list[dict[str, Any]] = []
    for path in sorted(Path(directory).glob("*.json")):
        try:
            doc = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        if not isinstance(doc, dict) or doc.get("kind") not in ("traceq-baseline", "traceq-report"):
            continue
        values = doc.get("values") or doc.get("kpis") or {}
        start = (doc.get("time_range") or {}).get("start_ns")
        rows.append({"run": path.stem, "start_ns": start, **{k: values.get(k) for k in MAIN_KPIS}})
    schema = {"run": pl.String, "start_ns": pl.Int64, **{k: pl.Float64 for k in MAIN_KPIS}}
    frame = pl.DataFrame(rows, schema=schema)
    return frame.sort("start_ns", "run", nulls_last=True).tail(last)


def readable(frame: pl.DataFrame) -> pl.DataFrame:
    """`history` as a person reads it (`traceq report --trend`): KPI labels for headings, each
    value in its unit."""
    columns = {"run": frame["run"]}
    for name in MAIN_KPIS:
        k = BY_NAME[name]
        columns[k.label] = pl.Series([fmt.measure(v, k.unit) for v in frame[name]], dtype=pl.String)
    return pl.DataFrame(columns)


def long_form(frame: pl.DataFrame) -> pl.DataFrame:
    """run, kpi, value: for the trend chart."""
    return frame.unpivot(index="run", on=list(MAIN_KPIS), variable_name="kpi").drop_nulls("value")
