"""Which stored `kpi_latency` figures a dataset may use: named by everything they depend on.

`kpi_latency` (traceq/sql/views.sql) finds exact percentiles over every request and every
chunk gap; on a large dataset that is most of the cost of opening it for a report or a look.
So an ingest that leaves a dataset of at least `STORE_MIN_CHUNKS` chunks stores the figures
(traceq/ingest/kpis.py) as `kpis/<key>.parquet`, recorded in the manifest under
`kpi_latency`. `key` names the listed files of every source, the SQL of the views and the
DuckDB that ran it, so figures stored for other files or other definitions are never read
back: traceq/db.py then computes them from the files, as it does for a smaller dataset.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import duckdb

from traceq.docs import VIEW_FILES
from traceq.sql import load

KPI_DIR = "kpis"
KPI_VERSION = 1
"""Bumped when the stored rows change shape: older files are then computed again."""

STORE_MIN_CHUNKS = 2_000_000
"""Chunks (`tokens` rows, all sources) from which an ingest stores the figures. Storing costs
each ingest a DuckDB connection with every view bound (~0.5 s); computing them from the files
costs each query ~0.03 s a million chunks (0.16 s at 5.6 M against ~0.02 s for a bare scan of
`tokens.ts`, docs/PERFORMANCE.md), so below 2 M chunks a query pays under a tenth of what
opening a session does, and an ingest would pay more than its readers save."""


def chunks(manifest: dict[str, Any]) -> int:
    """`tokens` rows the manifest's sources hold."""
    return sum(int((s.get("rows") or {}).get("tokens", 0)) for s in manifest["sources"])


def key(manifest: dict[str, Any]) -> str:
    """Names figures computed from exactly these files with this SQL and this DuckDB."""
    files = [[s["source_id"], s.get("files", {})] for s in manifest["sources"]]
    parts = [
        f"kpis v{KPI_VERSION}",
        duckdb.__version__,
        *(load(name) for name in VIEW_FILES),
        json.dumps(files, sort_keys=True),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def current(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The manifest's `kpi_latency` entry when it was stored for exactly its files, else None."""
    entry = manifest.get("kpi_latency")
    if not isinstance(entry, dict) or entry.get("key") != key(manifest):
        return None
    return entry


def rel_of(entry: dict[str, Any]) -> str:
    """The stored file of a `current` entry, relative to the dataset: named by its checked key,
    never by a path read from the manifest."""
    return f"{KPI_DIR}/{entry['key']}.parquet"
