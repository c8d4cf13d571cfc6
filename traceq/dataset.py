"""A dataset on disk: Parquet files per (table, source, partition) plus `manifest.json`.

Layout (traceq/layout.py has the partition and sort rules)::

    DATASET/manifest.json
    DATASET/<table>/day=<YYYY-MM-DD>/[instance=<name>/]<source_id>.parquet
    DATASET/<table>/<source_id>.parquet      tables without time; every table in old datasets
    DATASET/request_pick/<key>.parquet       which row stands for each request (pick.py)
    DATASET/kpis/<key>.parquet               kpi_latency's figures, stored (stored_kpis.py)
    DATASET/.staging/            scratch space of ingests in progress

The manifest lists each source's files per table (`files`: table → list of paths relative to
the dataset, so the folder reads the same from a local disk or object storage). Datasets
written before the partitioned layout list one flat path per table (a string); they are read
as they are.

Readers only see files the manifest lists, and the manifest is replaced atomically
(write temp, fsync, rename) after a source's files are in place. An interrupted ingest
therefore leaves no half-visible source; its leftovers are swept on the next write. A source
is written by a `traceq.writer.SourceWriter`, which commits through `Dataset.commit`.

The folder is data, never instructions (docs/RELIABILITY.md): traceq writes only into an
empty folder or a dataset, every path the manifest lists must lie inside the dataset, and a
`.staging`, table folder or manifest that is a symbolic link is refused, never followed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from traceq import layout, pick
from traceq.schema import SCHEMA_VERSION, TABLES

MANIFEST = "manifest.json"
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_OWN = (".lock", ".staging")  # what a dataset folder may hold before its first manifest
RETRY = ("failed", "unreadable")  # source statuses the next ingest reads again
HEAD_HASH_BYTES = 64 << 10  # `head_hash` covers this much of a source (extended_by)
# Write errors of the environment, not of the input: the ingest stops with what to do.
WRITE_ERRNOS = {
    errno.ENOSPC: "the disk is full; free space and run the ingest again",
    errno.EDQUOT: "the disk quota is exceeded; free space and run the ingest again",
    errno.EROFS: "the file system is read-only; choose a writable -o",
    errno.EFBIG: "a file grew past the size limit; raise the limit (ulimit -f) and run again",
    errno.EACCES: "permission denied; choose a folder you can write to",
}


class DatasetError(Exception):
    """A dataset that cannot be read or written (exit code 2)."""


class Dataset:
    """A traceq dataset directory."""

    def __init__(self, root: str | os.PathLike[str], *, create: bool = False) -> None:
        if create and is_url(root):
            msg = (
                f"{root}: traceq writes a dataset to a local folder (atomic renames); ingest "
                "into one, then copy it to object storage (docs/SCALE.md, Object storage)"
            )
            raise DatasetError(msg)
        self.root = Path(root)
        if create:
            self._create()
        elif not (self.root / MANIFEST).is_file():
            msg = f"{self.root} is not a traceq dataset (no {MANIFEST})"
            raise DatasetError(msg)
        self._check_links()

    def _create(self) -> None:
        """Make the folder a dataset: only a new or empty folder, or a dataset already."""
        if self.root.exists() and not self.root.is_dir():
            msg = f"{self.root} exists and is not a folder; choose another -o"
            raise DatasetError(msg)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._check_links()
            if (self.root / MANIFEST).is_file():
                return
            self._refuse_foreign()  # before the lock file: nothing is written to such a folder
            with self._locked():
                if (self.root / MANIFEST).exists():
                    return
                self._refuse_foreign()
                self._write_manifest(self.manifest())
        except OSError as exc:
            error = write_error(self.root, exc)
            if error is None:
                raise
            raise error from exc

    def _refuse_foreign(self) -> None:
        others = sorted(p.name for p in self.root.iterdir() if p.name not in _OWN)
        if others:
            msg = (
                f"{self.root} is not empty and is not a traceq dataset (no {MANIFEST}; "
                f"it holds {others[0]!r}); ingest into a new or empty folder"
            )
            raise DatasetError(msg)

    def _check_links(self) -> None:
        """Refuse a manifest, `.staging` or table folder that is a symbolic link."""
        for name in (MANIFEST, *_OWN, *TABLES):
            if (self.root / name).is_symlink():
                msg = (
                    f"{self.root / name} is a symbolic link; traceq never follows links inside "
                    "a dataset (replace it with the real folder or file)"
                )
                raise DatasetError(msg)

    def _listed(self, rel: Any) -> str:
        return listed_rel(rel, f"{self.root / MANIFEST}")

    def path_of(self, rel: Any) -> Path:
        """The dataset file at `rel` (a `files` value of the manifest), refused if it is shaped
        wrong or resolves outside the dataset (a link). Every reader of listed files goes
        through here; the file system is asked only where a file is read or deleted."""
        path = self.root / self._listed(rel)
        if not path.resolve().is_relative_to(self.root.resolve()):
            msg = f"{path} resolves outside the dataset; refusing to read or delete it"
            raise DatasetError(msg)
        return path

    def pick_file(self, entry: dict[str, Any]) -> Path | None:
        """The settled request pick's file (traceq/pick.py) if it is there, else None."""
        return self.stored_file(pick.file_of(Path(), entry).as_posix())

    def stored_file(self, rel: str) -> Path | None:
        """A file traceq names itself (the request pick, the stored KPIs), not one read from
        the manifest, if it is there and inside the dataset, else None."""
        path = self.root / rel
        if not path.is_file() or not path.resolve().is_relative_to(self.root.resolve()):
            return None
        return path

    def amend(self, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> None:
        """Under the dataset's lock, write the manifest `change` returns for the current one
        (nothing when it returns None): for what traceq stores beside the sources."""
        with self._locked():
            changed = change(self.manifest())
            if changed is not None:
                self._write_manifest(changed)

    # -- reading -------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        path = self.root / MANIFEST
        if not path.is_file():
            return {"schema_version": SCHEMA_VERSION, "sources": []}
        try:
            text = path.read_text()
        except OSError as exc:
            msg = f"cannot read {path}: {exc}"
            raise DatasetError(msg) from exc
        return checked_manifest(text, str(path))

    def sources(self) -> list[dict[str, Any]]:
        return self.manifest()["sources"]

    def has_source(self, source_id: str) -> bool:
        """Whether this content is in the dataset (a source whose reader failed is not)."""
        return any(
            s["source_id"] == source_id and s.get("status") not in RETRY for s in self.sources()
        )

    def extended_by(self, size: int, prefix_hash: Callable[[int], str]) -> list[str]:
        """Sources whose whole content is the start of a file of `size` bytes (a log or
        collector file that grew since): `prefix_hash(n)` hashes that file's first n bytes.
        The head hash narrows the candidates before the full prefix is hashed."""
        found = []
        for s in self.sources():
            n = s.get("bytes")
            if s.get("status") in RETRY or not isinstance(n, int) or not 0 < n < size:
                continue
            head = s.get("head_hash")
            if head is not None and head != f"sha256:{prefix_hash(min(n, HEAD_HASH_BYTES))}":
                continue
            if s.get("content_hash") == f"sha256:{prefix_hash(n)}":
                found.append(s["source_id"])
        return found

    def table_files(self, table: str) -> list[Path]:
        """Parquet files of `table`, in ingest order, as listed by the manifest (each checked
        by `path_of`): what any engine reads for the table (traceq/db.py,
        traceq/spark/catalog.py)."""
        return [self.path_of(rel) for rel in listed_files(self.manifest(), table)]

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
        manifest = self._settle_pick(manifest)
        tmp = self.root / f".{MANIFEST}.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            json.dump(manifest, fh, indent=2)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.root / MANIFEST)

    def _settle_pick(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Which row stands for each request, settled for the sources about to be listed
        (traceq/pick.py); every manifest write goes through here, under the lock."""
        return pick.settle(self.root, manifest, self.path_of)

    def sweep(self) -> None:
        """Remove staging dirs of dead ingests and Parquet files no manifest entry lists."""
        with self._locked():
            manifest = self.manifest()
            listed = {str(self.root / f) for t in TABLES for f in listed_files(manifest, t)}
            self._check_links()
            for table in TABLES:
                # os.walk never descends into a linked folder; a linked file is unlinked
                for folder, _, names in os.walk(self.root / table):
                    for name in names:
                        path = Path(folder) / name
                        if name.endswith(".parquet") and str(path) not in listed:
                            path.unlink(missing_ok=True)
            staging = self.root / ".staging"
            for scratch in staging.glob("*") if staging.is_dir() else []:
                pid = scratch.name.rsplit("-", 1)[-1]
                if pid.isdigit() and _alive(int(pid)):
                    continue
                if scratch.is_symlink() or not scratch.is_dir():
                    scratch.unlink(missing_ok=True)
                else:
                    shutil.rmtree(scratch, ignore_errors=True)

    def commit(
        self,
        entry: dict[str, Any],
        staged: dict[str, dict[str, Path]],
        replaces: Sequence[str] = (),
    ) -> bool:
        """Move a source's laid-out files into place and list them; False if already there.

        `staged`: table → {path in the dataset: staged file} (traceq/layout.py).
        `replaces`: source ids whose entries and files this commit drops (`ingest --replace`
        re-reading a file with other options): readers see the old rows or the new, never
        both, since the new files get names of their own and the old go after the manifest.
        """
        with self._locked():
            manifest = self.manifest()
            same = [s for s in manifest["sources"] if s["source_id"] == entry["source_id"]]
            if (
                any(s.get("status") not in RETRY for s in same)
                and entry["source_id"] not in replaces
            ):
                return False
            # A source whose reader failed before is replaced by this attempt, and so is the
            # entry of this path when it could not be read.
            same += [
                s
                for s in manifest["sources"]
                if s.get("status") == "unreadable" and s.get("path") == entry.get("path")
            ]
            # `ingest --replace` and a file that grew drop the sources they stand for.
            dropped = set(replaces) | set(entry.get("supersedes", ()))
            old = [s for s in manifest["sources"] if s in same or s["source_id"] in dropped]
            manifest["sources"] = [s for s in manifest["sources"] if s not in old]
            taken = {rel for s in old for rels in s.get("files", {}).values() for rel in rels}
            files: dict[str, list[str]] = {}
            for table, laid in staged.items():
                for want, path in laid.items():
                    rel = _free_name(want, taken)
                    self._folder_for(rel)
                    os.replace(path, self.root / rel)
                    files.setdefault(table, []).append(rel)
            manifest["sources"].append({**entry, "files": files})
            self._write_manifest(manifest)
            # unlisted now: removed only after the manifest no longer lists them
            for rel in taken - {rel for rels in files.values() for rel in rels}:
                self.path_of(rel).unlink(missing_ok=True)
        return True

    def _folder_for(self, rel: str) -> None:
        """Make the partition folders of `rel`; a link among them is refused, never used."""
        folder = self.root
        for part in rel.split("/")[:-1]:
            folder = folder / part
            if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
                msg = (
                    f"{folder} is a symbolic link or a file; traceq never follows links "
                    "inside a dataset (replace it with the real folder)"
                )
                raise DatasetError(msg)
            folder.mkdir(exist_ok=True)


def is_url(location: object) -> bool:
    """Whether `location` names a dataset by URL (`s3://…`, read by traceq/remote.py), not a
    local path (`file://` is a local path)."""
    return (
        isinstance(location, str)
        and _URL.match(location) is not None
        and not location.lower().startswith("file://")
    )


def _free_name(rel: str, taken: set[str]) -> str:
    """`rel` (`…/<source_id>.parquet`), or `….<n>.parquet` while a listed file has the name."""
    stem, n, free = rel.removesuffix(".parquet"), 0, rel
    while free in taken:
        n += 1
        free = f"{stem}.{n}.parquet"
    return free


def listed_files(manifest: dict[str, Any], table: str) -> list[str]:
    """Paths (relative to the dataset, checked by `Dataset.manifest`) of `table`'s files, in
    ingest order: join them to the dataset's root, a folder or an object-store prefix."""
    return [rel for s in manifest["sources"] for rel in s.get("files", {}).get(table, [])]


def listed_rel(rel: Any, where: str) -> str:
    """`rel` (a path from the manifest at `where`) if it has the shape of a dataset file:
    `<table>/[day=<date>/[instance=<name>/]]<name>.parquet` (traceq/layout.py)."""
    if layout.table_of(rel) is None:
        msg = (
            f"{where} lists {rel!r}, which is not inside the dataset; "
            "refusing to read or delete it (restore the manifest or re-ingest)"
        )
        raise DatasetError(msg)
    return rel


def checked_manifest(text: str, where: str) -> dict[str, Any]:
    """The manifest in `text` (read from `where`), refused with a DatasetError unless it is
    this schema version with well-formed sources and only dataset-shaped file paths; an old
    single path per table reads as a list of one."""
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        msg = f"cannot read {where}: {exc}"
        raise DatasetError(msg) from exc
    if not isinstance(manifest, dict) or manifest.get("schema_version") != SCHEMA_VERSION:
        version = manifest.get("schema_version") if isinstance(manifest, dict) else None
        msg = (
            f"{where} has schema version {version}, "
            f"this traceq reads {SCHEMA_VERSION}; re-ingest the sources"
        )
        raise DatasetError(msg)
    sources = manifest.get("sources")
    if not isinstance(sources, list) or not all(
        isinstance(s, dict)
        and isinstance(s.get("source_id"), str)
        and isinstance(s.get("files", {}), dict)
        for s in sources
    ):
        msg = (
            f"{where} is damaged: no list of `sources` with a source_id and files each; "
            "restore it from a backup or re-ingest into a new folder"
        )
        raise DatasetError(msg)
    for s in sources:
        files = s.get("files", {})
        for table, rels in files.items():
            # a dataset written before the partitioned layout lists one flat path
            files[table] = [rels] if isinstance(rels, str) else rels
            if not isinstance(files[table], list) or not files[table]:
                msg = (
                    f"{where} is damaged: the files of {table!r} are not a list of paths; "
                    "restore it from a backup or re-ingest into a new folder"
                )
                raise DatasetError(msg)
            for rel in files[table]:
                if layout.table_of(listed_rel(rel, where)) != table:
                    msg = f"{where} lists {rel!r} under table {table!r}; re-ingest"
                    raise DatasetError(msg)
    return manifest


def write_error(root: Path, exc: OSError) -> DatasetError | None:
    """A one-line DatasetError for an environment problem writing `root` (disk full, …)."""
    if exc.errno not in WRITE_ERRNOS:
        return None
    return DatasetError(f"cannot write to {root}: {WRITE_ERRNOS[exc.errno]}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
