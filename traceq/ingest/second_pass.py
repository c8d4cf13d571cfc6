"""The one DuckDB set-up of every ingester's second pass (a SQL step over its staged
scratch Parquet): a memory limit beyond which DuckDB spills, a spill directory inside the
source's staging directory (removed with it), no insertion order to keep, and the connection
closed whatever happens.

Used by `otel/__init__.py` (spans → requests / tokens), `gpu/long.py` (the GPU pivot) and
`serverlog/__init__.py` (coarse requests from lifecycle lines).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import duckdb

from traceq.spill import spilling_duckdb

if TYPE_CHECKING:
    from traceq.dataset import SourceWriter

# DuckDB's own default is 80 % of RAM; ingest runs beside other work, so a second pass holds
# at most this much and spills the rest (RSS stays flat whatever the file size). The same limit
# for every ingester: their SQL keeps to operators DuckDB can spill (traceq/sql/
# otel_finalize.sql says which did not), so a larger file is slower, never larger in memory.
SECOND_PASS_MEMORY = "512MB"


@contextmanager
def second_pass(
    writer: SourceWriter, memory_limit: str = SECOND_PASS_MEMORY
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A fresh in-memory DuckDB connection for `writer`'s second pass."""
    with spilling_duckdb(writer.scratch / "duckdb.tmp", memory_limit, keep_order=False) as con:
        yield con
