"""A dataset on disk: one Parquet file per (table, source) plus `manifest.json`.

Layout::

    DATASET/manifest.json
    DATASET/<table>/<source_id>.parquet
    DATASET/.staging/            scratch space of ingests in progress

Readers only see files the manifest lists, and the manifest is replaced atomically
(write temp, fsync, rename) after a source's files are in place. An interrupted ingest
therefore leaves no half-visible source; its leftovers are swept on the next write.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from traceq.schema import NS, SCHEMA_VERSION, TABLES, conform

MANIFEST = "manifest.json"


class DatasetError(Exception):
    """A dataset that cannot be read or written (exit code 2)."""


class Dataset:
    """A traceq dataset directory."""

    def __init__(self, root: str | os.PathLike[str], *, create: bool = False) -> None:
        self.root = Path(root)
        if create:
            self.root.mkdir(parents=True, exist_ok=True)
            if not (self.root / MANIFEST).is_file():
                with self._locked():
                    self._write_manifest(self.manifest())
        elif not (self.root / MANIFEST).is_file():
            msg = f"{self.root} is not a traceq dataset (no {MANIFEST})"
            raise DatasetError(msg)

    # -- reading -------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        path = self.root / MANIFEST
        if not path.is_file():
            return {"schema_version": SCHEMA_VERSION, "sources": []}
        try:
            manifest = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            msg = f"cannot read {path}: {exc}"
            raise DatasetError(msg) from exc
        if manifest.get("schema_version") != SCHEMA_VERSION:
            msg = (
                f"{path} has schema version {manifest.get('schema_version')}, "
                f"this traceq reads {SCHEMA_VERSION}; re-ingest the sources"
            )
            raise DatasetError(msg)
        return manifest

    def sources(self) -> list[dict[str, Any]]:
        return self.manifest()["sources"]

    def has_source(self, source_id: str) -> bool:
        """Whether this content is in the dataset (a source whose reader failed is not)."""
        return any(
            s["source_id"] == source_id and s.get("status") != "failed" for s in self.sources()
        )

    def table_files(self, table: str) -> list[Path]:
        """Parquet files of `table`, in ingest order, as listed by the manifest."""
        return [
            self.root / s["files"][table] for s in self.sources() if table in s.get("files", {})
        ]

    # -- writing -------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.root / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write_manifest(self, manifest: dict[str, Any]) -> None:
        tmp = self.root / f".{MANIFEST}.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            json.dump(manifest, fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.root / MANIFEST)

    def sweep(self) -> None:
        """Remove staging dirs of dead ingests and Parquet files no manifest entry lists."""
        with self._locked():
            listed = {
                str(self.root / f) for s in self.sources() for f in s.get("files", {}).values()
            }
            for table in TABLES:
                for path in (self.root / table).glob("*.parquet"):
                    if str(path) not in listed:
                        path.unlink(missing_ok=True)
            staging = self.root / ".staging"
            for scratch in staging.glob("*") if staging.is_dir() else []:
                pid = scratch.name.rsplit("-", 1)[-1]
                if not (pid.isdigit() and _alive(int(pid))):
                    shutil.rmtree(scratch, ignore_errors=True)

    def writer(self, source_id: str) -> SourceWriter:
        return SourceWriter(self, source_id)

    def commit(
        self, entry: dict[str, Any], staged: dict[str, Path], replaces: Sequence[str] = ()
    ) -> bool:
        """Move a source's staged files into place and list them; False if already there.

        `replaces`: source ids whose entries and files this commit drops (`ingest --replace`
        re-reading a file with other options): readers see the old rows or the new, never
        both, since the new files get names of their own and the old go after the manifest.
        """
        with self._locked():
            manifest = self.manifest()
            same = [s for s in manifest["sources"] if s["source_id"] == entry["source_id"]]
            done = any(s.get("status") != "failed" for s in same)
            if done and entry["source_id"] not in replaces:
                return False
            # A source whose reader failed before is replaced by this attempt.
            old = [s for s in manifest["sources"] if s in same or s["source_id"] in replaces]
            manifest["sources"] = [s for s in manifest["sources"] if s not in old]
            taken = {rel for s in old for rel in s.get("files", {}).values()}
            files = {}
            for table, path in staged.items():
                (self.root / table).mkdir(exist_ok=True)
                rel = self._free_name(table, entry["source_id"], taken)
                os.replace(path, self.root / rel)
                files[table] = rel
            manifest["sources"].append({**entry, "files": files})
            self._write_manifest(manifest)
            for rel in taken - set(files.values()):
                (self.root / rel).unlink(missing_ok=True)
        return True

    def _free_name(self, table: str, source_id: str, taken: set[str]) -> str:
        """`table/<source_id>.parquet`, or `….<n>.parquet` while a listed file has the name."""
        rel, n = f"{table}/{source_id}.parquet", 0
        while rel in taken:
            n += 1
            rel = f"{table}/{source_id}.{n}.parquet"
        return rel


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SourceWriter:
    """Streams one source's batches into staged Parquet files, then commits them at once."""

    def __init__(self, dataset: Dataset, source_id: str) -> None:
        self.dataset = dataset
        self.source_id = source_id
        self.scratch = dataset.root / ".staging" / f"{source_id}-{os.getpid()}"
        self.scratch.mkdir(parents=True, exist_ok=True)
        self._writers: dict[str, pq.ParquetWriter] = {}
        self._paths: dict[str, Path] = {}
        self.rows: dict[str, int] = {}
        self.t_min: int | None = None
        self.t_max: int | None = None
        self.labels: dict[str, str] = {}
        """Column → value set on every row of the tables that have the column (`--instance`)."""

    def write(self, table: str, frame: pl.DataFrame) -> None:
        """Append a batch to schema table `table`; the frame is conformed to the schema first.

        A name the schema does not know is an error (a typo must not lose rows silently);
        an ingester's own second-pass tables go through `write_scratch`.
        """
        if table not in TABLES:
            msg = f"no table {table!r} in the schema (scratch tables: write_scratch)"
            raise ValueError(msg)
        if frame.height == 0:
            return
        names = {c.name for c in TABLES[table]}
        fixed = {k: pl.lit(v) for k, v in self.labels.items() if k in names}
        frame = conform(table, frame.with_columns(source_id=pl.lit(self.source_id), **fixed))
        if table != "quarantine":
            self._track_time(table, frame)
        self._append(table, frame)

    def write_scratch(self, name: str, frame: pl.DataFrame) -> None:
        """Append a batch to scratch table `name`: written as it is, never committed, read
        back by the ingester's second pass (`scratch_path`)."""
        if name in TABLES:
            msg = f"{name!r} is a schema table, not a scratch name"
            raise ValueError(msg)
        if frame.height:
            self._append(name, frame)

    def _append(self, table: str, frame: pl.DataFrame) -> None:
        arrow = frame.to_arrow()
        if table not in self._writers:
            self._paths[table] = self.scratch_path(table)
            self._writers[table] = pq.ParquetWriter(
                self._paths[table], arrow.schema, compression="zstd"
            )
        self._writers[table].write_table(arrow, row_group_size=1 << 20)
        self.rows[table] = self.rows.get(table, 0) + frame.height

    def _track_time(self, table: str, frame: pl.DataFrame) -> None:
        cols = [c.name for c in TABLES[table] if c.unit == NS]
        if not cols:
            return
        bounds = frame.select(
            lo=pl.min_horizontal(pl.col(cols).min()), hi=pl.max_horizontal(pl.col(cols).max())
        ).row(0)
        if bounds[0] is not None:
            self.t_min = bounds[0] if self.t_min is None else min(self.t_min, bounds[0])
            self.t_max = bounds[1] if self.t_max is None else max(self.t_max, bounds[1])

    def scratch_path(self, name: str) -> Path:
        return self.scratch / f"{name}.parquet"

    def close(self, name: str | None = None) -> dict[str, Path]:
        """Close one writer (`name`) or all; returns the finished schema-table files."""
        for key in [name] if name else list(self._writers):
            if key in self._writers:
                self._writers.pop(key).close()
        return {t: p for t, p in self._paths.items() if t in TABLES and t not in self._writers}

    def commit(self, entry: dict[str, Any], replaces: Sequence[str] = ()) -> bool:
        """Commit the staged files with `entry` (see `Dataset.commit` for `replaces`)."""
        staged = self.close()
        entry = {
            **entry,
            "source_id": self.source_id,
            "rows": {t: self.rows.get(t, 0) for t in TABLES if t != "quarantine"},
            "quarantined": self.rows.get("quarantine", 0),
            "time_range": _time_range(self.t_min, self.t_max),
            "ingested_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        try:
            return self.dataset.commit(entry, staged, replaces)
        finally:
            self.discard()

    def discard(self) -> None:
        self.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def _time_range(lo: int | None, hi: int | None) -> dict[str, Any] | None:
    if lo is None or hi is None:
        return None

    def iso(ns: int) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 1_000_000_000)) + "Z"

    return {"start_ns": lo, "end_ns": hi, "start": iso(lo), "end": iso(hi)}
