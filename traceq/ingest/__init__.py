"""Ingest: find each input's format, read it into a dataset, account for every record.

Every ingester family is a module with `FORMATS` (name → description), `sniff(source)` and
`ingest(source, writer, fmt, options, progress)` (the `Family` protocol, `family.py`);
`FAMILIES` lists them in sniffing order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import duckdb
import polars as pl

from traceq.dataset import HEAD_HASH_BYTES, Dataset, DatasetError, write_error
from traceq.ingest import kpis
from traceq.ingest.blocks import LineCap
from traceq.ingest.clocks import (
    clock_lines,
    overlap_warnings,
    reference_ranges,
    source_warnings,
)
from traceq.ingest.family import Family
from traceq.ingest.fit import wrong_format
from traceq.ingest.options import IngestOptions
from traceq.ingest.second_pass import out_of_memory
from traceq.ingest.source import InputError, Source
from traceq.ingest.split_traces import split_trace_warnings
from traceq.schema import RAW_LIMIT
from traceq.spill import INGEST_MEMORY
from traceq.writer import SourceWriter

FAMILIES = (
    "traceq.ingest.otel",
    "traceq.ingest.gpu",
    "traceq.ingest.serverlog",
    "traceq.ingest.loadtest",
    "traceq.ingest.metrics",
)

__all__ = ["FAMILIES", "IngestOptions", "IngestResult", "InputError", "formats", "ingest"]


def _families() -> list[Family]:
    """The family modules (`traceq/ingest/family.py` is their contract)."""
    return [cast(Family, importlib.import_module(name)) for name in FAMILIES]


def formats() -> dict[str, str]:
    """Every format name traceq reads, with a one-line description."""
    return {name: doc for family in _families() for name, doc in family.FORMATS.items()}


@dataclass
class IngestResult:
    path: Path
    source_id: str
    format: str | None
    status: str  # ingested | replaced | already ingested | unrecognised | failed | unreadable
    # | skipped | wrong format
    rows: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0
    detail: str = ""  # why a file was unreadable or skipped
    conventions: dict[str, int] = field(default_factory=dict)  # OTel producer conventions
    clock_domain: str | None = None
    assumptions: dict[str, Any] = field(default_factory=dict)
    """How the source's clock was set where the file did not say (year, zone, anchor)."""
    warnings: list[str] = field(default_factory=list)
    """Clock problems the user must see: a guessed year, stamps after the mtime, no overlap."""
    stitch: dict[str, Any] = field(default_factory=dict)
    """OTel traces stitched across processes: counts and clock offsets (traceq/ingest/otel/
    hops.py `stitch_summary`); empty when the source has none."""


def _expand(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
) -> tuple[list[tuple[Path, bool]], list[IngestResult]]:
    """(file, named explicitly) pairs, and the entries of directories that are no regular
    file (FIFOs, sockets, devices, broken links) as skipped results. Directories recurse,
    hidden entries are left out."""
    out: list[tuple[Path, bool]] = []
    skipped: list[IngestResult] = []
    if isinstance(paths, str | os.PathLike):
        paths = [paths]  # one path, not the characters of its name
    for p in map(Path, paths):
        named = _mode(p)
        if named is not None and stat.S_ISDIR(named):
            for f in sorted(p.rglob("*")):
                if any(part.startswith(".") for part in f.relative_to(p).parts):
                    continue
                mode = _mode(f)
                if mode is not None and stat.S_ISDIR(mode):
                    continue
                if mode is not None and stat.S_ISREG(mode):
                    out.append((f, False))
                else:
                    skipped.append(IngestResult(f, "", None, "skipped", detail=_kind(f)))
        elif named is not None and stat.S_ISREG(named):
            out.append((p, True))
        elif named is None:
            raise InputError(f"{p}: {_kind(p)}")
        else:
            msg = f"{p}: {_kind(p)}, not a regular file (save the stream to a file and ingest that)"
            raise InputError(msg)
    return out, skipped


def _mode(path: Path) -> int | None:
    """The mode of what `path` leads to, or None where that cannot be read (a broken link, a
    link into a folder this user may not enter)."""
    try:
        return path.stat().st_mode
    except OSError:
        return None


def _kind(path: Path) -> str:
    """What a path that is no regular file is, in words."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "a broken symbolic link" if os.path.islink(path) else "no such file or directory"
    except OSError as err:
        return f"not readable ({err.strerror or type(err).__name__})"
    kinds = {
        stat.S_ISFIFO: "a FIFO (named pipe)",
        stat.S_ISSOCK: "a socket",
        stat.S_ISCHR: "a character device",
        stat.S_ISBLK: "a block device",
    }
    return next((name for test, name in kinds.items() if test(mode)), "not a regular file")


def _check_readable(path: Path) -> None:
    try:
        with open(path, "rb") as fh:
            empty = fh.read(1) == b""
    except OSError as exc:
        msg = f"{path}: cannot read ({exc.strerror})"
        raise InputError(msg) from exc
    if empty:
        msg = f"{path}: empty file"
        raise InputError(msg)


def _detect(source: Source, fmt: str) -> tuple[Family | None, str | None]:
    try:
        source.head  # noqa: B018 - a corrupt compressed file is unrecognised, not a crash
    except InputError:
        return None, None
    for family in _families():
        if fmt == "auto":
            found = family.sniff(source)
            if found:
                return family, found
        elif fmt in family.FORMATS:
            return family, fmt
    return None, None


def ingest(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    dataset: str | os.PathLike[str],
    *,
    fmt: str = "auto",
    options: IngestOptions | None = None,
    progress: Callable[[int], None] | None = None,
    replace: bool = False,
) -> list[IngestResult]:
    """Ingest files and directories (`paths`: one, or several) into the dataset at `dataset`
    (created if missing).

    Named files must be readable, non-empty and (with `fmt="auto"`) of a known format, else
    `InputError`. Files found inside directories that no ingester recognises, or that are
    empty, are listed in the manifest with a quarantine row, so nothing passes unnoticed.
    With `replace`, a file already in the dataset is read again (new options) and its old
    rows are dropped in the same manifest commit.

    Logs without a year are read last, so that their year can be matched to the time ranges
    of the other sources (`traceq/ingest/clocks.py`).
    """
    if fmt != "auto" and fmt not in formats():
        msg = f"unknown format {fmt!r}; known: {', '.join(formats())}"
        raise InputError(msg)
    options = options or IngestOptions()
    options.check()
    files, skipped = _expand(paths)
    for path, explicit in files:
        if explicit:
            _check_readable(path)
            Source(path).head  # noqa: B018 - raises InputError when it cannot be decompressed
            if fmt == "auto" and _detect(Source(path), fmt)[0] is None:
                msg = f"{path}: unrecognised format (name one with --format)"
                raise InputError(msg)
    memory = INGEST_MEMORY.set(options.memory_limit)
    try:
        ds = Dataset(dataset, create=True)
        ds.sweep()
        sources = sorted(
            (Source(p, cap=_cap(options)) for p, _ in files),
            key=lambda s: _needs_year(s, fmt, options),
        )
        results = [_ingest_one(ds, s, fmt, options, progress or _noop, replace) for s in sources]
        kpis.settle(ds)
        manifest = ds.sources()
    except OSError as exc:  # disk full, read-only: what to do, not a traceback
        error = write_error(Path(dataset), exc)
        if error is None:
            raise
        raise error from exc
    finally:
        INGEST_MEMORY.reset(memory)
    fresh = {r.source_id for r in results if r.status in ("ingested", "replaced")}
    overlap = overlap_warnings([s for s in manifest if s["source_id"] in fresh], manifest)
    split = split_trace_warnings(ds, fresh, manifest)
    for r in results:
        for notes in (overlap, split):
            if r.source_id in notes and r.status in ("ingested", "replaced"):
                r.warnings.append(notes[r.source_id])
    order = {p: i for i, (p, _) in enumerate(files)}
    return sorted(results, key=lambda r: order.get(r.path, 0)) + skipped


# Formats whose stamps print no year: read after the others to match theirs.
_YEARLESS = ("vllm-log",)


def _needs_year(source: Source, fmt: str, options: IngestOptions) -> bool:
    if options.year is not None:
        return False
    try:
        if source.size == 0:
            return False
        return (fmt if fmt != "auto" else _detect(source, fmt)[1]) in _YEARLESS
    except OSError:  # unreadable: listed as such by _ingest_one
        return False


def _cap(options: IngestOptions) -> LineCap:
    return LineCap(options.max_line_bytes, options.max_document_bytes)


def _ingest_one(
    ds: Dataset,
    source: Source,
    fmt: str,
    options: IngestOptions,
    progress: Callable[[int], None],
    replace: bool = False,
) -> IngestResult:
    try:
        source.source_id  # noqa: B018 - hashing reads the whole file
    except OSError as exc:
        return _unreadable(ds, source, exc)
    known = ds.has_source(source.source_id)
    if known and not replace:
        progress(source.size)
        return IngestResult(source.path, source.source_id, None, "already ingested")
    options = dataclasses.replace(options, references=tuple(reference_ranges(ds.sources())))
    entry: dict[str, Any] = {
        "path": str(source.path.resolve()),
        "content_hash": f"sha256:{source.content_hash}",
        "head_hash": f"sha256:{source.prefix_hash(HEAD_HASH_BYTES)}",
        "bytes": source.size,
        "compression": source.compression,
    }
    extends = ds.extended_by(source.size, source.prefix_hash)
    if extends:  # a file that grew: read whole again, its old rows go in the same commit
        entry["supersedes"] = extends
    writer = _writer(ds, source, options)
    try:
        status = _read(writer, source, fmt, options, progress, entry)
    except InputError:
        writer.discard()
        raise
    except duckdb.OutOfMemoryException as exc:  # not the file's fault: say what to do
        writer.discard()
        raise out_of_memory(source.path, exc) from exc
    except (Exception, pl.exceptions.PanicException) as exc:
        if isinstance(exc, OSError) and _writing(ds, exc):
            writer.discard()  # disk full etc.: nothing of this source stays in .staging
            raise
        # A reader bug, or a shape of input no reader foresaw: this file's rows are dropped,
        # the file is listed with the error in quarantine, and the other files go on.
        writer.discard()
        writer = _writer(ds, source, options)
        reason = f"{entry.get('format')} reader failed: {type(exc).__name__}: {exc}"
        _quarantine_file(writer, reason[:RAW_LIMIT], "")
        status = entry["status"] = "failed"
    if known and status == "failed":  # a failed re-read keeps the rows read before
        writer.discard()
        return IngestResult(source.path, source.source_id, entry["format"], "failed")
    if fmt != "auto" and status == "ingested":
        wrong = wrong_format(source, fmt, writer, lambda: _detect(source, "auto")[1])
        if wrong:  # a forced format that reads garbage: nothing committed, exit 2
            writer.discard()
            result = IngestResult(source.path, source.source_id, fmt, "wrong format")
            result.warnings.append(wrong)
            return result
    try:
        committed = writer.commit(entry, replaces=[source.source_id] if known else [])
    except duckdb.OutOfMemoryException as exc:  # the layout or the request pick
        writer.discard()
        raise out_of_memory(source.path, exc) from exc
    except BaseException:
        writer.discard()
        raise
    listed = next((s for s in ds.sources() if s["source_id"] == source.source_id), entry)
    warnings = list(entry.pop("warnings", None) or [])
    warnings += source_warnings(listed, source.path.stat().st_mtime_ns)
    stitch = dict(entry.get("stitch") or {})
    warnings += clock_lines(stitch.get("clock_offsets", []))[1]
    return IngestResult(
        source.path,
        source.source_id,
        entry["format"],
        ("replaced" if known else status) if committed else "already ingested",
        {t: n for t, n in writer.rows.items() if t in _PUBLIC and n},
        writer.rows.get("quarantine", 0),
        conventions=entry.get("conventions", {}),
        clock_domain=entry.get("clock_domain"),
        assumptions=dict(entry.get("assumptions") or {}),
        warnings=warnings,
        stitch=stitch,
    )


def _writer(ds: Dataset, source: Source, options: IngestOptions) -> SourceWriter:
    writer = SourceWriter(ds, source.source_id)
    labels = {"instance": options.instance, "host": options.host}
    writer.labels = {k: v for k, v in labels.items() if v is not None}
    return writer


def _read(
    writer: SourceWriter,
    source: Source,
    fmt: str,
    options: IngestOptions,
    progress: Callable[[int], None],
    entry: dict[str, Any],
) -> str:
    """Read one source into `writer`, filling `entry`; returns its status."""
    entry |= {"format": None, "clock_domain": None}
    family, found = (None, None) if source.size == 0 else _detect(source, fmt)
    if family is None or found is None:
        reason = "empty file" if source.size == 0 else "no ingester recognises this file"
        try:
            raw = source.head[:RAW_LIMIT].decode("utf-8", "replace")
        except InputError as exc:
            reason, raw = str(exc), ""
        _quarantine_file(writer, reason, raw)
        return "unrecognised"
    entry |= {"format": found}
    entry |= family.ingest(source, writer, found, options, progress)
    for error in source.errors:
        _quarantine_file(writer, error, "")
    if source.cap.rejected:
        writer.write("quarantine", pl.DataFrame(source.cap.rejected))
    return "ingested"


def _writing(ds: Dataset, exc: OSError) -> bool:
    """An environment error writing the dataset (not one reading the input)."""
    name = exc.filename
    inside = name is None or Path(os.fsdecode(name)).resolve().is_relative_to(ds.root.resolve())
    return inside and write_error(ds.root, exc) is not None


def _unreadable(ds: Dataset, source: Source, exc: OSError) -> IngestResult:
    """A file in a directory that cannot be read: listed, with its error in quarantine; the
    next ingest tries it again (status `unreadable`, traceq/dataset.py RETRY)."""
    resolved = str(source.path.resolve())
    source_id = hashlib.sha256(f"unreadable:{resolved}".encode()).hexdigest()[:16]
    detail = f"cannot read: {exc.strerror or exc}"
    writer = SourceWriter(ds, source_id)
    _quarantine_file(writer, detail, "")
    entry = {"path": resolved, "content_hash": None, "format": None, "status": "unreadable"}
    if not writer.commit(entry):
        raise DatasetError(f"{ds.root}: could not list unreadable {source.path}")
    return IngestResult(source.path, source_id, None, "unreadable", quarantined=1, detail=detail)


def _quarantine_file(writer: SourceWriter, reason: str, raw: str) -> None:
    writer.write("quarantine", pl.DataFrame([{"location": "file", "reason": reason, "raw": raw}]))


_PUBLIC = (
    "requests",
    "tokens",
    "spans",
    "engine_stats",
    "events",
    "gpu_samples",
    "tool_metrics",
    "request_hops",
    "unserved",
)


def _noop(_: int) -> None:
    pass
