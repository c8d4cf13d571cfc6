"""Store `kpi_latency`'s figures once an ingest has committed its sources.

A dataset of at least `STORE_MIN_CHUNKS` chunks (traceq/stored_kpis.py) gets the rows of
`_kpi_stats` (traceq/sql/views.sql) computed by the same SQL every reader would run, written to
`kpis/<key>.parquet` and named in the manifest in one atomic write. Readers use them while the
key matches the files, the SQL and DuckDB (traceq/db.py). They are computed on one thread, so
they are what a one-thread query of the view gives, to the last bit (with more threads the
means' double sums may differ in it). Any later change of the sources makes the entry stale
until the next ingest stores it again; until then the view computes from the files.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from typing import Any

import duckdb

from traceq import db, stored_kpis
from traceq.dataset import Dataset
from traceq.spill import ingest_memory, release_heap
from traceq.stored_kpis import KPI_DIR

KPI_MEMORY = "512MB"
"""DuckDB memory limit while computing the figures (spills beyond it), as the request pick's."""


def settle(ds: Dataset) -> None:
    """Store kpi_latency's figures for `ds` as its manifest lists it now, unless they are
    stored already or it holds fewer than `STORE_MIN_CHUNKS` chunks (a stale entry is then
    dropped)."""
    ds.amend(lambda manifest: _settled(ds, manifest, stored_kpis.STORE_MIN_CHUNKS))


def _settled(ds: Dataset, manifest: dict[str, Any], min_chunks: int) -> dict[str, Any] | None:
    entry = stored_kpis.current(manifest)
    if entry and ds.stored_file(stored_kpis.rel_of(entry)):
        return None
    previous = manifest.get("kpi_latency")
    before = f"{previous.get('key')}.parquet" if isinstance(previous, dict) else None
    if stored_kpis.chunks(manifest) < min_chunks:
        if previous is None:
            return None
        manifest.pop("kpi_latency")
        _drop_others(ds, keep={before})
        return manifest
    k = stored_kpis.key(manifest)
    folder = ds.root / KPI_DIR
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        folder.unlink()  # the link itself: nothing is written or deleted where it points
    folder.mkdir(exist_ok=True)
    scratch = ds.root / ".staging" / f"kpis-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    release_heap()
    rel = stored_kpis.rel_of({"key": k})
    try:
        con = db.connect(
            ds,
            manifest,
            memory_limit=ingest_memory(KPI_MEMORY),
            temp_dir=scratch / "duckdb.tmp",
            threads=1,  # sums in one order: the means' last bits as a one-thread query's
            read_only=False,
            documented=False,  # nothing here reads the docs
        )
        try:
            tmp = scratch / "kpis.parquet"
            con.table("_kpi_stats").write_parquet(str(tmp), compression="zstd")
        finally:
            con.close()
        os.replace(tmp, ds.root / rel)
    except duckdb.Error:  # out of memory, say: the view computes them from the files instead
        return None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    manifest["kpi_latency"] = {"key": k, "file": rel}
    _drop_others(ds, keep={f"{k}.parquet", before})
    return manifest


def _drop_others(ds: Dataset, keep: set[str | None]) -> None:
    """Remove stored figures other than `keep` (the new and the previous entry's: a session
    opened on the previous manifest still reads its file)."""
    folder = ds.root / KPI_DIR
    for old in folder.glob("*.parquet") if folder.is_dir() and not folder.is_symlink() else []:
        if old.name not in keep:
            with contextlib.suppress(OSError):
                old.unlink()
