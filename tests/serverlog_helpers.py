"""Shared helpers of the server-log tests: ingest one file, read its tables and manifest."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import duckdb

import traceq
from traceq.dataset import Dataset
from traceq.ingest import IngestOptions, ingest

DATA = Path(__file__).parent / "data" / "real"
VLLM = DATA / "vllm"
SGLANG = DATA / "sglang"


def ingest_log(
    path: Path, out: Path, fmt: str = "auto", **options: Any
) -> tuple[duckdb.DuckDBPyConnection, dict[str, Any]]:
    """Ingest `path` into a fresh dataset under `out`; (connection, manifest entry)."""
    dataset = out / "ds.tq"
    ingest([path], dataset, fmt=fmt, options=IngestOptions(**options))
    entry = Dataset(dataset).sources()[-1]
    return traceq.open(dataset), entry


def ns(text: str, tz: dt.tzinfo = dt.UTC) -> int:
    """`YYYY-MM-DD HH:MM:SS[.ffffff]` local time in `tz` → ns since the epoch."""
    stamp = dt.datetime.fromisoformat(text).replace(tzinfo=tz)
    return int(stamp.timestamp()) * 1_000_000_000 + stamp.microsecond * 1000


def rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple]:
    return con.sql(sql).fetchall()
