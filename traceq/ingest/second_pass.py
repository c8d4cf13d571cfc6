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

from traceq.ingest.source import InputError
from traceq.layout import LAYOUT_MEMORY
from traceq.spill import INGEST_MEMORY, ingest_memory, release_heap, spilling_duckdb

if TYPE_CHECKING:
    from traceq.writer import SourceWriter

# DuckDB's own default is 80 % of RAM; ingest runs beside other work, so a second pass holds
# at most this much and spills the rest (RSS stays flat whatever the file size). The same limit
# for every ingester: their SQL keeps to operators DuckDB can spill (traceq/sql/
# otel_finalize.sql says which did not), so a larger file is slower, never larger in memory.
SECOND_PASS_MEMORY = "512MB"
GPU_PIVOT_MEMORY = "256MB"
"""The GPU readers' pivot of DCGM values into gpu_samples rows (traceq/ingest/gpu/long.py):
the memory it may hold before spilling, whatever the file size."""


@contextmanager
def second_pass(
    writer: SourceWriter, memory_limit: str = SECOND_PASS_MEMORY
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A fresh in-memory DuckDB connection for `writer`'s second pass, under `memory_limit`
    unless `traceq ingest --memory-limit` gave another (traceq/spill.py, `INGEST_MEMORY`)."""
    limit = ingest_memory(memory_limit)
    release_heap()  # what the first pass left free, before DuckDB takes its share
    with spilling_duckdb(writer.scratch / "duckdb.tmp", limit, keep_order=False) as con:
        yield con


def check_memory_limit(limit: str) -> None:
    """InputError unless DuckDB takes `limit` as a memory limit (`2GB`, `512MB`, `1.5GiB`)."""
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET memory_limit = ?", [limit])
    except duckdb.Error as exc:
        msg = f"--memory-limit {limit!r}: not a memory size DuckDB reads (e.g. 512MB, 2GB)"
        raise InputError(msg) from exc
    finally:
        con.close()


def out_of_memory(path: object, exc: duckdb.OutOfMemoryException) -> InputError:
    """The one-line error of an ingest step that DuckDB ran out of its memory limit in."""
    default = f"the default {LAYOUT_MEMORY}, {GPU_PIVOT_MEMORY} for GPU samples"
    limit = INGEST_MEMORY.get() or default
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    msg = (
        f"{path}: ingest ran out of its DuckDB memory limit ({limit}; {first}); "
        "run it again with a larger --memory-limit (e.g. --memory-limit 2GB), nothing of this "
        "file was added"
    )
    return InputError(msg)
