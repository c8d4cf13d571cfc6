"""Helpers of the GPU telemetry tests: ingest one file and read back its rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

import traceq
from traceq.ingest import IngestOptions, ingest

REAL = Path(__file__).parent / "data" / "real" / "gpu"
NS = 1_000_000_000


def ingest_file(
    path: Path, dataset: Path, fmt: str = "auto", **options: Any
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, Any]]:
    """(gpu_samples, quarantine, manifest entry) after ingesting `path` alone."""
    results = ingest([path], dataset, fmt=fmt, options=IngestOptions(**options))
    assert [r.status for r in results] == ["ingested"]
    con = traceq.open(dataset)
    entry = next(
        s
        for s in json.loads((dataset / "manifest.json").read_text())["sources"]
        if s["source_id"] == results[0].source_id
    )
    where = {"s": results[0].source_id}
    samples = con.sql(
        "SELECT * FROM gpu_samples WHERE source_id = $s ORDER BY ts, gpu", params=where
    ).pl()
    quarantine = con.sql(
        "SELECT * FROM quarantine WHERE source_id = $s ORDER BY location", params=where
    ).pl()
    return samples, quarantine, entry
