"""Warn when one trace's spans lie in several source files.

A routed or disaggregated request leaves spans in every process it passes through; traceq
stitches them into one request within one file (traceq/sql/otel_stitch.sql). Files written
per process (a gateway's, each worker's) hold parts of the same traces, and each part reads
as a request of its own: the decode engine's without its gateway hop, the gateway's as a
request no engine served. This names the files that share traces and what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import duckdb
import polars as pl

from traceq.dataset import Dataset, listed_files
from traceq.ingest.clocks import source_name
from traceq.ingest.otel import FORMATS as OTEL_FORMATS
from traceq.sql import load

_COLUMNS = {"source_id": pl.String, "trace_id": pl.String, "view": pl.String}


def split_trace_warnings(
    ds: Dataset, fresh: set[str], sources: Sequence[dict[str, Any]]
) -> dict[str, str]:
    """source_id → warning, for each source of `fresh` that shares traces with another OTel
    source of the dataset (`sources`, its manifest entries)."""
    traced = [s for s in sources if s.get("format") in OTEL_FORMATS and s.get("files")]
    if len(traced) < 2 or not fresh & {s["source_id"] for s in traced}:
        return {}
    con = duckdb.connect()
    try:
        for table in ("requests", "unserved"):
            paths = [str(ds.path_of(rel)) for rel in listed_files({"sources": traced}, table)]
            if paths:
                con.read_parquet(paths, union_by_name=True).create_view(table)
            else:
                con.register(table, pl.DataFrame(schema=_COLUMNS).to_arrow())
        rows = con.execute(load("split_traces")).fetchall()
    except duckdb.Error:  # a dataset written before trace ids were kept: nothing to compare
        return {}
    finally:
        con.close()
    names = {s["source_id"]: source_name(s) for s in traced}
    out: dict[str, str] = {}
    for sid, other, n in rows:  # the other source sharing the most traces comes first
        if sid in fresh and sid not in out:
            out[sid] = (
                f"{n:,} of its traces also have spans in {names[other]}: a request's hops "
                "are stitched within one file, so each part reads as a request of its own; "
                "concatenate the files of one deployment and ingest that"
            )
    return out
