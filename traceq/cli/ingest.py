"""`traceq ingest` (files into a dataset) and `traceq formats` (the input formats it reads)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import click

from traceq.cli.common import Failure
from traceq.playbooks.story import stamp
from traceq.playbooks.words import counted

if TYPE_CHECKING:
    from traceq.ingest import IngestResult

PROGRESS_MIN_BYTES = 16 << 20  # show a progress bar for inputs at least this large
MAX_LINE_BYTES = 32 << 20
MAX_DOCUMENT_BYTES = 256 << 20
"""Defaults of `--max-line-bytes` / `--max-document-bytes`; traceq/ingest/blocks.py holds the
same (a test keeps them equal) so that `traceq --help` imports no reader."""


def _input_size(paths: tuple[str, ...]) -> int:
    total = 0
    for p in map(Path, paths):
        files = p.rglob("*") if p.is_dir() else [p]
        total += sum(f.stat().st_size for f in files if f.is_file())
    return total


@click.command("ingest")
@click.argument("sources", nargs=-1, required=True)
@click.option("-o", "--output", "dataset", required=True, help="Dataset directory (created).")
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    help="Input format; `traceq formats` lists them.",
)
@click.option("--token-event", default="gen_ai.token", show_default=True,
              help="Span event name of one streamed chunk.")  # fmt: skip
@click.option("--year", type=int, help="Year for log timestamps that print none.")
@click.option("--tz", default="UTC", show_default=True, help="Time zone of local timestamps.")
@click.option("--t0", type=int, help="Anchor (ns since epoch) for relative clocks.")
@click.option("--start", help="Time of the first sample of clockless files (dmon, dcgmi dmon, "
              "a single scrape): ISO-8601 (naive = --tz) or ns since epoch.")  # fmt: skip
@click.option("--interval", "interval_s", type=float,
              help="Sampling interval (s) of clockless files [default: 1].")  # fmt: skip
@click.option("--columns", help="Field list of a headerless nvidia-smi CSV, comma-separated "
              "(the --query-gpu value).")  # fmt: skip
@click.option("--instance", help="Label the rows' `instance` (serving instance) column.")
@click.option("--host", help="Label the rows' `host` column (GPU telemetry).")
@click.option("--replace", is_flag=True, help="Read files already in the dataset again (e.g. "
              "with another --year) and drop their old rows in the same commit.")  # fmt: skip
@click.option("--max-line-bytes", type=click.IntRange(min=1), default=MAX_LINE_BYTES,
              show_default=True, help="Longest line (or JSON document) held in memory; "
              "longer ones are quarantined unread.")  # fmt: skip
@click.option("--max-document-bytes", type=click.IntRange(min=1), default=MAX_DOCUMENT_BYTES,
              show_default=True, help="Largest file of a format parsed whole (load-test JSON "
              "exports, Jaeger); parsing takes ~12x its size in memory.")  # fmt: skip
@click.option("--memory-limit", help="DuckDB memory limit of the ingest's out-of-core steps "
              "(second pass, layout, request pick), e.g. 2GB; beyond it they spill to disk "
              "[default: 512MB; the GPU pivot 256MB].")  # fmt: skip
def ingest_cmd(
    sources: tuple[str, ...],
    dataset: str,
    fmt: str,
    token_event: str,
    year: int | None,
    tz: str,
    t0: int | None,
    start: str | None,
    interval_s: float | None,
    columns: str | None,
    instance: str | None,
    host: str | None,
    replace: bool,
    max_line_bytes: int,
    max_document_bytes: int,
    memory_limit: str | None,
) -> None:
    """Ingest trace, log and telemetry files (directories recurse) into DATASET."""
    from traceq.dataset import DatasetError
    from traceq.ingest import IngestOptions, InputError, formats, ingest
    from traceq.ingest.otel.spans import SpanConventions

    if interval_s is not None and interval_s <= 0:
        raise Failure(f"--interval must be positive, got {interval_s}")
    options = IngestOptions(
        conventions=SpanConventions(token_event=token_event),
        year=year,
        tz=tz,
        t0=t0,
        start=_start_ns(start, tz) if start else None,
        interval_s=interval_s,
        columns=tuple(c.strip() for c in columns.split(",")) if columns else None,
        instance=instance,
        host=host,
        max_line_bytes=max_line_bytes,
        max_document_bytes=max_document_bytes,
        memory_limit=memory_limit,
    )
    if fmt != "auto" and fmt not in formats():
        raise Failure(f"unknown format {fmt!r}; run `traceq formats`")
    try:
        total = _input_size(sources)
    except OSError as exc:
        raise Failure(str(exc)) from exc
    show = total >= PROGRESS_MIN_BYTES and sys.stderr.isatty()
    with contextlib.ExitStack() as stack:
        update: Callable[[int], None] = lambda _: None  # noqa: E731
        if show:
            update = stack.enter_context(
                click.progressbar(length=total, label="ingesting", file=sys.stderr)
            ).update
        try:
            results = ingest(
                sources, dataset, fmt=fmt, options=options, progress=update, replace=replace
            )
        except (InputError, DatasetError) as exc:
            raise Failure(str(exc)) from exc
    _print_results(results)
    failed = [r for r in results if r.status == "failed"]
    if failed:
        raise Failure(
            f"{counted(len(failed), 'file')} could not be read; their error is in quarantine"
        )
    wrong = [r for r in results if r.status == "wrong format"]
    if wrong:
        raise Failure(f"{counted(len(wrong), 'file')} not read: --format {fmt} does not fit them")


def _start_ns(value: str, tz: str) -> int:
    """`--start`: ns since the epoch, or an ISO-8601 time (naive means time zone `tz`)."""
    if value.strip().lstrip("-").isdigit():
        return int(value)
    try:
        when = datetime.fromisoformat(value.strip())
        if when.tzinfo is None:
            when = when.replace(tzinfo=ZoneInfo(tz))
    except (ValueError, KeyError, ZoneInfoNotFoundError) as exc:
        raise Failure(f"--start {value!r}: not an ISO-8601 time or ns integer ({exc})") from exc
    return int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1_000


def _print_results(results: list[IngestResult]) -> None:
    for r in results:
        rows = ", ".join(f"{n:,} {t}" for t, n in r.rows.items()) or "no rows"
        if r.status == "already ingested":
            click.echo(
                f"{r.path}: already ingested (source {r.source_id}), skipped "
                "(--replace reads it again with these options)"
            )
        elif r.status == "failed":
            click.echo(f"{r.path}: {r.format} reader failed; listed in quarantine")
        elif r.status == "wrong format":
            click.echo(f"{r.path}: not ingested", err=True)
        elif r.status in ("unreadable", "skipped"):
            listed = "; listed in quarantine" if r.status == "unreadable" else ", skipped"
            click.echo(f"{r.path}: {r.detail}{listed}")
        elif r.status == "unrecognised":
            click.echo(f"{r.path}: not a format traceq reads; listed in quarantine")
        else:
            replaced = " (replaces its earlier rows)" if r.status == "replaced" else ""
            click.echo(f"{r.path}: {r.format}: {rows}; {r.quarantined:,} quarantined{replaced}")
            if r.conventions:
                seen = ", ".join(f"{k} ({n:,})" for k, n in r.conventions.items())
                click.echo(f"  conventions matched: {seen}")
            _print_stitch(r.stitch)
        if r.assumptions:
            said = "; ".join(f"{k}: {_assumed(k, v)}" for k, v in r.assumptions.items())
            click.echo(f"  clock ({r.clock_domain}): {said}")
        for warning in r.warnings:
            level = "error" if r.status == "wrong format" else "warning"
            click.echo(f"{level}: {r.path.name}: {warning}", err=True)
    totals: dict[str, int] = {}
    for r in results:
        for t, n in r.rows.items():
            totals[t] = totals.get(t, 0) + n
    quarantined = sum(r.quarantined for r in results)
    summary = ", ".join(f"{n:,} {t}" for t, n in totals.items()) or "no new rows"
    click.echo(f"total: {summary}; {quarantined:,} quarantined")


def _print_stitch(stitch: dict) -> None:
    """Traces stitched across processes, and each clock offset with its bound."""
    if not stitch:
        return
    from traceq.ingest.clocks import clock_lines

    click.echo(
        f"  stitched across hops: {stitch['requests']:,} requests "
        f"({stitch['disaggregated']:,} disaggregated), {stitch['unserved']:,} seen by no engine, "
        f"{stitch['retried']:,} with several decode attempts (the one that produced the "
        f"response kept), {stitch['contradicted']:,} spans contradicting their parent quarantined"
    )
    for line in clock_lines(stitch.get("clock_offsets", []))[0]:
        click.echo(f"  clock offset {line}")


@click.command("formats")
def formats_cmd() -> None:
    """List the input formats `traceq ingest --format` accepts."""
    from traceq.ingest import formats
    from traceq.ingest.otel import PRODUCERS

    for name, doc in formats().items():
        click.echo(f"{name:16} {doc}")
    click.echo("\nOpenTelemetry producer conventions (any of the OTel formats above):")
    for name, doc in PRODUCERS.items():
        click.echo(f"  {name:20} {doc}")


def _assumed(key: str, value: object) -> object:
    """A clock assumption as a person reads it: a time in ns since the epoch (`end_ns`,
    `start_ns`) as a UTC clock time, to the ms; anything else as it is.

    >>> _assumed("end_ns", 1_796_620_286_623_946_202), _assumed("interval_s", 1.0)
    ('2026-12-07 05:11:26.623 UTC', 1.0)
    """
    if key.endswith("_ns") and isinstance(value, int) and not isinstance(value, bool):
        return stamp(value) + " UTC"
    return value
