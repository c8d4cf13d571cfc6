"""Memory of the ingest's DuckDB steps (the second passes, traceq/ingest/second_pass.py; the
layout, traceq/layout.py; the request pick, traceq/pick.py): one way to open a DuckDB
connection for out-of-core work (a memory limit beyond which DuckDB spills to a temporary
directory, closed whatever happens), the limit `traceq ingest --memory-limit` sets for all of
them (`INGEST_MEMORY`), and `release_heap`, which gives back what the step before left free
(`trim_heap`, glibc's part of it, also runs between the blocks of a long read)."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

import duckdb
import pyarrow as pa

ALLOCATOR_FLUSH = "16MB"
"""DuckDB gives its allocator's cached memory back to the system after a task whose peak
passed this, or after a free of more than this at once (its defaults: 128 MiB and 512 MiB).
Set on every ingest step's connection and every session's (traceq/db.py). At 3 M requests,
in the same time: the second pass replayed alone from its staged files peaks at 790 MiB
against 812, `traceq diagnose` at 799-801 against 854-864 (docs/PERFORMANCE.md)."""


def flush_allocator(con: duckdb.DuckDBPyConnection) -> None:
    """Have `con`'s DuckDB give its allocator's cache back past `ALLOCATOR_FLUSH`."""
    con.execute("SET allocator_flush_threshold = ?", [ALLOCATOR_FLUSH])
    con.execute("SET allocator_bulk_deallocation_flush_threshold = ?", [ALLOCATOR_FLUSH])


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
        flush_allocator(con)
        if not keep_order:
            con.execute("SET preserve_insertion_order = false")
        yield con
    finally:
        con.close()


INGEST_MEMORY: ContextVar[str | None] = ContextVar("ingest_memory", default=None)
"""`traceq ingest --memory-limit`: the DuckDB memory limit of every ingest step that spills
(each second pass, the layout, traceq/layout.py, and the request pick, traceq/pick.py), set by
`traceq.ingest.ingest` for the duration of one ingest. None (the default) leaves each step its
own fixed limit."""


def ingest_memory(default: str) -> str:
    """The DuckDB memory limit an ingest step runs under: `--memory-limit`, else `default`."""
    return INGEST_MEMORY.get() or default


RELEASE_ABOVE_MIB = 320
"""`release_heap` does nothing below this RSS (MiB): a full `gc.collect()` costs ~0.1 s in a
large process, worth it after a first pass over a big file (360-650 MiB of RSS when the
later steps start, 100 k to 400 k requests), not after the small ingests of a test run."""


def release_heap() -> None:
    """Give the memory a finished ingest step left free back to the system before the next
    one opens DuckDB: Python's unreachable cycles, Arrow's pool and glibc's free lists. After
    the OTLP first pass this was 135-290 MiB of RSS at 100 k requests (docs/PERFORMANCE.md,
    "Ingest peak RSS with size"), which every later step ran on top of."""
    if _rss_mib() < RELEASE_ABOVE_MIB:
        return
    gc.collect()
    pa.default_memory_pool().release_unused()
    trim_heap()


def trim_heap() -> None:
    """Give glibc's free memory back to the system (`malloc_trim`), nothing else: cheap enough
    to run between the blocks of a long read (traceq/ingest/blocks.py, the server-log and the
    OTLP protobuf readers). Without it, the OTLP first pass of a 26 GB file kept ~0.75 MiB
    more per 32 MB block in glibc's free lists past its first ~200 blocks: its RSS after a
    block rose from ~680 to ~1,120 MiB over 785 blocks, and trimming every 40 blocks held it
    at 670-720 (docs/PERFORMANCE.md, "Ingest peak RSS with size")."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _rss_mib() -> float:
    try:
        resident = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):  # no /proc (macOS): nothing is released
        return 0.0
    return resident * _PAGE / (1 << 20)


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_LIBC = None
if (_name := ctypes.util.find_library("c")) and "libc.so" in _name:  # glibc: malloc_trim
    try:
        _LIBC = ctypes.CDLL(_name)
        _LIBC.malloc_trim  # noqa: B018 - musl has no malloc_trim
    except (OSError, AttributeError):
        _LIBC = None
