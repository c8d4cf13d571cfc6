"""One way to open a DuckDB connection for out-of-core work: a memory limit beyond which
DuckDB spills to a temporary directory, closed whatever happens. Used by the ingest second
passes (traceq/ingest/second_pass.py) and the dataset layout (traceq/layout.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb


@contextmanager
def spilling_duckdb(
    temp_directory: Path, memory_limit: str, *, keep_order: bool = True
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A fresh in-memory DuckDB connection that holds at most `memory_limit` and spills the
    rest to `temp_directory`; `keep_order=False` lets DuckDB reorder results without ORDER BY."""
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET memory_limit = ?", [memory_limit])
        con.execute("SET temp_directory = ?", [str(temp_directory)])
        if not keep_order:
            con.execute("SET preserve_insertion_order = false")
        yield con
    finally:
        con.close()
