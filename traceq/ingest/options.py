"""Options every ingester receives; each family reads the ones that concern it."""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass, field

from traceq.ingest.blocks import MAX_DOCUMENT_BYTES, MAX_LINE_BYTES
from traceq.ingest.clocks import check_instant, check_year
from traceq.ingest.otel.spans import SpanConventions
from traceq.ingest.second_pass import check_memory_limit
from traceq.ingest.source import InputError


@dataclass(frozen=True)
class IngestOptions:
    conventions: SpanConventions = field(default_factory=SpanConventions)
    """OpenTelemetry token-level convention names (docs/INGEST.md)."""
    year: int | None = None
    """Year of log timestamps that print none (default: the file's mtime year)."""
    tz: str = "UTC"
    """Time zone of log / nvidia-smi timestamps that print none."""
    t0: int | None = None
    """Anchor (ns since epoch) for sources on a relative clock."""
    start: int | None = None
    """Start time (ns since epoch) for samples without a clock (dmon)."""
    interval_s: float | None = None
    """Sampling interval in seconds for samples without a clock."""
    columns: tuple[str, ...] | None = None
    """Field list of a headerless nvidia-smi CSV (the `--query-gpu` value), in order."""
    max_line_bytes: int = MAX_LINE_BYTES
    """Longest line (or JSON document, for formats read whole) a reader holds in memory;
    longer ones are quarantined unread (docs/RELIABILITY.md)."""
    instance: str | None = None
    """Label for the `instance` column of every row read (`--instance`)."""
    host: str | None = None
    """Label for the `host` column of every row read (`--host`)."""
    references: tuple[tuple[int, int], ...] = ()
    """Time ranges (ns) of the dataset's sources with an absolute clock, filled by the driver
    for each file: a yearless log takes the year that matches them (`ingest/clocks.py`)."""
    max_document_bytes: int = MAX_DOCUMENT_BYTES
    """Largest file of a format parsed as one JSON document (load-test exports, Jaeger,
    pretty-printed OTLP); parsing takes about 12x its size in memory."""
    memory_limit: str | None = None
    """DuckDB memory limit of the second passes, the layout and the request pick
    (`--memory-limit`, e.g. `2GB`); beyond it DuckDB spills to disk. None: their fixed
    limits (traceq/ingest/second_pass.py, traceq/layout.py, traceq/pick.py)."""

    def check(self) -> None:
        """Raise InputError for an option no reader could use (checked once per ingest)."""
        try:
            zoneinfo.ZoneInfo(self.tz)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            msg = f"unknown time zone {self.tz!r} (--tz)"
            raise InputError(msg) from exc
        if min(self.max_line_bytes, self.max_document_bytes) < 1:
            msg = "--max-line-bytes and --max-document-bytes must be positive"
            raise InputError(msg)
        if self.memory_limit is not None:
            check_memory_limit(self.memory_limit)
        problems = (
            check_year(self.year),
            check_instant("--start", self.start),
            check_instant("--t0", self.t0),
        )
        for problem in problems:
            if problem:
                raise InputError(problem)
