"""The contract of an ingest family: a module listed in `traceq.ingest.FAMILIES`.

mypy checks every family module against `Family` (the `_FAMILIES` tuple below); the driver
(`traceq/ingest/__init__.py`) only uses what the protocol names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from traceq.ingest.options import IngestOptions
    from traceq.ingest.source import Source
    from traceq.writer import SourceWriter


@runtime_checkable
class Family(Protocol):
    """One family of input formats (OpenTelemetry, GPU telemetry, server logs, …)."""

    FORMATS: dict[str, str]
    """Format name → one-line description (`traceq formats`)."""

    def sniff(self, source: Source) -> str | None:
        """The format of `source` judged from `source.head` (cheap), or None."""
        ...

    def ingest(
        self,
        source: Source,
        writer: SourceWriter,
        fmt: str,
        options: IngestOptions,
        progress: Callable[[int], None],
    ) -> dict[str, Any]:
        """Read `source` in format `fmt` into `writer` (schema tables and quarantine; scratch
        tables through `write_scratch`); report bytes read to `progress`. Returns manifest
        details: `clock_domain`, and where the file did not say, `assumptions` and `warnings`
        (strings the ingest prints)."""
        ...


if TYPE_CHECKING:
    from traceq.ingest import gpu, loadtest, metrics, otel, serverlog

    _FAMILIES: tuple[Family, ...] = (otel, gpu, serverlog, loadtest, metrics)
