"""A forced `--format` that does not fit the file: the read is judged from the staged rows
and, when it looks wrong, the sniffers name the format the file seems to be in
(`traceq/ingest/__init__.py` then commits nothing and the CLI exits 2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from traceq.ingest.source import Source
from traceq.schema import NS, TABLES
from traceq.writer import SourceWriter

# Formats one reader reads alike (`traceq/ingest/serverlog/`): forcing one on the other is fine.
_SAME_READER = {"vllm-log": "server log", "sglang-log": "server log"}
# A forced --format that quarantines more than this share of the records read it wrongly.
WRONG_FORMAT_QUARANTINE_SHARE = 0.5
# Columns every row has whatever the values (ids, labels, positions): not evidence of a read.
_BOOKKEEPING = {"source_id", "instance", "host", "line", "process", "engine", "view", "run"}


def wrong_format(
    source: Source, fmt: str, writer: SourceWriter, detect: Callable[[], str | None]
) -> str | None:
    """Why the forced `fmt` read `source` wrongly (no rows, mostly quarantine, rows with no
    values), naming the format the sniffers (`detect`) see; None when the read looks right or
    the sniffers name `fmt` or nothing (then the file is damaged: its quarantine says how)."""
    staged = writer.close()
    rows = sum(n for t, n in writer.rows.items() if t in TABLES and t != "quarantine")
    bad = writer.rows.get("quarantine", 0)
    if rows == 0 and not (bad or source.head.strip()):
        return None  # blank: nothing to read in any format
    if rows == 0:
        problem = f"read no rows ({bad:,} records quarantined)"
    elif bad > WRONG_FORMAT_QUARANTINE_SHARE * (rows + bad):
        problem = f"quarantined {bad:,} of {rows + bad:,} records"
    elif all(_all_null(table, path) for table, path in staged.items() if table != "quarantine"):
        problem = f"read {rows:,} rows with no values"
    else:
        return None
    likely = detect()
    if likely is None or _SAME_READER.get(likely, likely) == _SAME_READER.get(fmt, fmt):
        return None  # no better guess: the quarantine rows tell what went wrong
    return f"--format {fmt} {problem}: it looks like {likely} (--format {likely}, or leave it out)"


def _all_null(table: str, path: Path) -> bool:
    """Whether every value column (not a stamp, not bookkeeping) of a staged Parquet file is
    null, judged from its footer's statistics only."""
    meta = pq.ParquetFile(path).metadata
    nulls: dict[str, int] = {}
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            col = group.column(c)
            stats = col.statistics
            n = stats.null_count if stats is not None and stats.has_null_count else 0
            nulls[col.path_in_schema] = nulls.get(col.path_in_schema, 0) + n
    stamps = {c.name for c in TABLES[table] if c.unit == NS}
    values = [name for name in nulls if name not in _BOOKKEEPING | stamps]
    return bool(values) and all(nulls[name] == meta.num_rows for name in values)
