"""Which row stands for each request, settled once when a dataset's sources change.

A request may have several rows in `requests`: a server and a client row, a span and a log
line, or copies from several sources (a gzipped or CRLF copy of a file, a second export of
the same requests). `traceq/sql/request_pick.sql` keeps one row per request id and view and
marks the one that stands for the request (`is_primary`). The result is written next to the
tables as `request_pick/<key>.parquet` (in arrival order) and recorded in the manifest under
`request_pick`, in the same atomic manifest write that lists the sources, together with each
source's mode (does it lend all, some or none of its tokens). `key` names the ordered list of
sources the pick was computed from, so a pick that does not match the manifest is never used
(traceq/db.py then settles it in memory). docs/METRICS.md explains the rules.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from traceq.columns import conformed
from traceq.schema import polars_schema
from traceq.spill import ingest_memory, release_heap
from traceq.sql import load

PICK_DIR = "request_pick"
PICK_VERSION = 1
"""Bumped when request_pick.sql changes what it picks: older picks are then recomputed."""

PICK_MEMORY = "512MB"
"""DuckDB memory limit while settling the pick (spills beyond it): about 1 M requests fit."""

SQL = load("request_pick")


def request_sources(manifest: dict[str, Any]) -> list[str]:
    """source_id of every source with `requests` rows, in manifest order."""
    return [s["source_id"] for s in manifest["sources"] if "requests" in s.get("files", {})]


def key(sources: list[str]) -> str:
    """Names the pick of these sources in this order (and this version of the rules)."""
    text = "\n".join([f"pick v{PICK_VERSION}", *sources])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def current(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The manifest's pick entry when it was settled for exactly its sources, else None."""
    entry = manifest.get("request_pick")
    sources = request_sources(manifest)
    if not entry or not sources or entry.get("key") != key(sources):
        return None
    return entry


def file_of(root: Path, entry: dict[str, Any]) -> Path:
    """The pick file of a `current` entry: named by its checked key, never by a path read
    from the manifest, so a tampered manifest cannot point outside the dataset."""
    return root / PICK_DIR / f"{entry['key']}.parquet"


def compute(con: duckdb.DuckDBPyConnection, order: list[str]) -> None:
    """Create `_picked`, `_pick_modes` and `_pick_rows` in `con` over its `requests` relation;
    `order` lists the sources, earliest ingested first (ties go to the earliest)."""
    ords = pl.DataFrame({"source_id": order, "ord": range(len(order))})
    con.register("_source_order", ords.to_arrow())
    con.execute(SQL)


def settle(root: Path, manifest: dict[str, Any], path_of: Callable[[str], Path]) -> dict[str, Any]:
    """`manifest` with its `request_pick` entry brought up to date; writes the pick file.

    Called with the dataset lock held, just before the manifest is written (traceq/dataset.py),
    so every change of the source list settles the pick in the same atomic write.
    """
    sources = request_sources(manifest)
    previous = manifest.get("request_pick") or {}
    if not sources:
        manifest.pop("request_pick", None)
        return manifest
    if current(manifest) and file_of(root, previous).is_file():
        return manifest
    k = key(sources)
    rel = f"{PICK_DIR}/{k}.parquet"
    folder = root / PICK_DIR
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        folder.unlink()  # the link itself: nothing is written or deleted where it points
    folder.mkdir(exist_ok=True)
    scratch = root / ".staging" / f"pick-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    release_heap()
    con = duckdb.connect()
    try:
        con.execute("SET temp_directory = ?", [str(scratch / "duckdb.tmp")])
        con.execute("SET memory_limit = ?", [ingest_memory(PICK_MEMORY)])
        by_id = {s["source_id"]: s for s in manifest["sources"]}
        files = [str(path_of(rel)) for sid in sources for rel in by_id[sid]["files"]["requests"]]
        rows = con.read_parquet(files, union_by_name=True, hive_partitioning=False)
        conformed(rows, polars_schema("requests")).create_view("requests")
        compute(con, sources)
        tmp = scratch / "pick.parquet"
        con.table("_pick_rows").write_parquet(str(tmp), compression="zstd", row_group_size=1 << 17)
        modes = pl.from_arrow(con.table("_pick_modes").to_arrow_table())
        os.replace(tmp, root / rel)
    finally:
        con.close()
        shutil.rmtree(scratch, ignore_errors=True)
    manifest["request_pick"] = {
        "key": k,
        "file": rel,
        "sources": {
            row["source_id"]: {"primary": row["primary"], "client": row["client"]}
            for row in modes.iter_rows(named=True)  # type: ignore[union-attr]
        },
    }
    for old in folder.glob("*.parquet"):
        if old.name != f"{k}.parquet" and f"{PICK_DIR}/{old.name}" != previous.get("file"):
            with contextlib.suppress(OSError):
                old.unlink()
    return manifest
