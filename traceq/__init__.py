"""traceq: offline trace analysis and troubleshooting for LLM inference serving.

>>> import traceq
>>> con = traceq.open("run.tq")                                 # doctest: +SKIP
>>> con.sql("SELECT * FROM request_phases").pl()                  # doctest: +SKIP

The names below are imported on first use (PEP 562), so `import traceq` and
`traceq --version` do not load polars and DuckDB.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from typing import TYPE_CHECKING, Any

POLARS_ALLOCATOR = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0"
"""polars' allocator (its own jemalloc, configured by `_RJEM_MALLOC_CONF` when polars loads)
keeps freed pages for reuse for about a second, then its background thread gives them back to
the system whether or not polars allocates again. Given back at once (decay 0), every block of
the OTLP first pass faulted its memory in anew: 626 k page faults and 2.2 s of system time on
the 176 MB file against 450 k and 1.6 s, its first pass 4.3 s against 2.7-3.3 s; with
jemalloc's default (10 s, freed only when polars allocates) ~110 MiB of the first pass stayed
resident under every later step. The ingest's peak, set by the `tokens` layout, is the same
either way (176 MB: 559-587 MiB; 100 k requests: 764 against 777 MiB), but where polars' own
first pass sets it (protobuf with OTel arrays and steps: 817-836 against 706-708 MiB;
docs/PERFORMANCE.md, "Ingest peak RSS with size"). Set only where polars is not loaded yet and
the variable is unset."""
if "polars" not in sys.modules:
    os.environ.setdefault("_RJEM_MALLOC_CONF", POLARS_ALLOCATOR)

ARROW_MEMORY_POOL = "system"
"""pyarrow's buffers come from the C library's allocator, not the mimalloc pool it defaults
to, whose arena kept ~80 MiB of the OTLP first pass's freed buffers resident (out of reach of
`release_unused`, being other threads' pages) under every later step. On the 176 MB OTLP/JSON
file: the ingest's peak 569-598 MiB against 629-683, 5.9-6.1 s against 6.6-6.9 (3 runs each,
docs/PERFORMANCE.md, "Ingest peak RSS with size"). Set only where pyarrow is not loaded yet
and `ARROW_DEFAULT_MEMORY_POOL` is unset."""
if "pyarrow" not in sys.modules:
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", ARROW_MEMORY_POOL)

if TYPE_CHECKING:
    from traceq.db import open
    from traceq.ingest import IngestOptions, ingest
    from traceq.schema import SCHEMA_VERSION
    from traceq.session import QueryError, Session

__all__ = ["SCHEMA_VERSION", "IngestOptions", "QueryError", "Session", "ingest", "open"]
__version__ = "0.1.0"

_LAZY = {
    "open": "traceq.db",
    "IngestOptions": "traceq.ingest",
    "ingest": "traceq.ingest",
    "SCHEMA_VERSION": "traceq.schema",
    "QueryError": "traceq.session",
    "Session": "traceq.session",
}


class _Package(types.ModuleType):
    """`traceq.ingest` stays the function when the `traceq.ingest` package gets imported
    (the import system sets the parent's attribute to the submodule)."""

    def __getattr__(self, name: str) -> Any:
        if name not in _LAZY:
            msg = f"module 'traceq' has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(_LAZY[name]), name)
        super().__setattr__(name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
