"""Where a source's rows land in the dataset: hive partitions by day (and instance), each file
sorted so that Parquet row-group statistics prune time-range filters.

Layout (paths relative to the dataset, as `manifest.json` lists them)::

    <table>/day=<YYYY-MM-DD>/[instance=<name>/]<source_id>.parquet   tables with a time column
    <table>/<source_id>.parquet                                      tool_metrics, quarantine

`day` is the UTC date of the table's time column (`PARTITION_TIME`); rows without one go to
`day=__HIVE_DEFAULT_PARTITION__` (Hive's and Spark's name for a null partition value).
`instance=` is there when the source was ingested with `--instance` (every row of it is that
instance, tokens included); an instance name is percent-encoded to a safe folder name.
Datasets written before this layout list flat `<table>/<source_id>.parquet` files for every
table; they are read as they are (docs/INGEST.md, "Dataset layout").

Within a file, rows are sorted by `traceq/sql/layout.sql` (`tokens` by
`traceq/sql/layout_tokens_piece.sql`): requests by arrival, tokens by their request's first
chunk (a table of 24 bytes a request, `traceq/sql/layout_tokens_starts.sql`, written beside
each chunk to a scratch file first, `traceq/sql/layout_tokens_t0.sql`, unless the source is
small, `DIRECT_T0_REQUESTS`) then request id, view and idx (each
request's chunks together, in order, and requests in time order), the other tables by time. A
request's chunks stay in one file, the `day=` of its first chunk, and `tokens.gap_ns` left null
by a reader (OTLP) is filled there from that order (a streaming `lag`), so no ingest runs a
window over every chunk. `tokens` is sorted in pieces of whole minutes of first-chunk time, at
most `TOKENS_PIECE_ROWS` chunks each, one after the other, so that the sort's spill to disk is
bounded by a piece, not by the file; the first-chunk scratch the pieces read is a folder of
files of `T0_FILE_ROW_GROUPS` row groups, not one file. Row groups hold `ROW_GROUP_ROWS` rows,
so each covers a short stretch of time and a time filter reads only the row groups (min/max of
the time column) that overlap it. The sorts run in DuckDB under `LAYOUT_MEMORY`, spilling to
the source's staging folder beyond it, so their memory does not grow with the file. A table
other than `tokens` spanning several days is sorted once, to a scratch file that each day's file
is then read from in order.
"""

from __future__ import annotations

import itertools
import re
import urllib.parse
from pathlib import Path

import duckdb

from traceq.layout_rollups import Rollups
from traceq.schema import TABLES, empty
from traceq.spill import ingest_memory, release_heap, spilling_duckdb
from traceq.sql import load

PARTITION_TIME = {
    "requests": "t_arrival",
    "tokens": "ts",
    "spans": "t_start",
    "engine_stats": "ts",
    "events": "ts",
    "gpu_samples": "ts",
}
"""The column whose UTC date names a table's `day=` partition; tables not listed are flat."""

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"

ROW_GROUP_ROWS = {"tokens": 1 << 19}
"""Rows per Parquet row group (default `DEFAULT_ROW_GROUP_ROWS`; DuckDB rounds up to a multiple
of 2,048). A sorted `tokens` row is ~2 bytes compressed (measured, docs/PERFORMANCE.md), so
512 Ki rows is ~1 MB a group: about 5 min of one replica at the `large` scenario's 1,700
chunks/s, fine enough that a time filter skips most groups. Other tables have fewer, wider
rows: 128 Ki `requests` rows are ~1 hour of one replica at 30 req/s (~5.5 MB)."""
DEFAULT_ROW_GROUP_ROWS = 1 << 17

TOKENS_PIECE_ROWS = 1 << 23
"""Most chunks the `tokens` sort takes at once (a day is sorted in pieces of whole minutes of
first-chunk time, `_pieces`). DuckDB spills sorted rows uncompressed, ~180 bytes a chunk with
their strings, and deletes the spill when the piece is written: 8 Mi chunks (~1.5 GB) bound the
temporary disk, where one sort of a 26 GB OTLP file's 168 M chunks spilled 30-40 GB
(docs/PERFORMANCE.md). Each piece reads the first-chunk files again, pruned to its row groups."""

T0_FILE_ROW_GROUPS = 64
"""Row groups (of DuckDB's 122,880 rows) per file of the first-chunk scratch that every piece
of the `tokens` sort reads, pruned to its own time: reading one file of all the chunks held
memory in proportion to the file's row groups, whether read or pruned (3 M requests' 168 M
chunks in 1,368 groups: 1,107 MiB to sort a 2 M-chunk piece under 512 MB; in files of 64
groups: 646 MiB, as one third of the chunks in one file: 679 MiB; docs/PERFORMANCE.md)."""

DIRECT_T0_CHUNKS = 1 << 23
DIRECT_T0_REQUESTS = 1 << 20
DIRECT_T0_PIECES = 4
"""A source of at most `DIRECT_T0_CHUNKS` chunks, `DIRECT_T0_REQUESTS` requests and
`DIRECT_T0_PIECES` pieces (days, at the default `TOKENS_PIECE_ROWS`) has its chunks joined to
their request's first chunk time as each piece of its `tokens` sort reads them
(`traceq/sql/layout_tokens_t0_view.sql`), not written to the first-chunk scratch first. The
join's table of first-chunk times holds 24 bytes a request (1 Mi requests: ~50 MB of the
512 MB `LAYOUT_MEMORY`); each piece then reads and joins every staged chunk again, which costs
a fifth of writing them once. The 176 MB OTLP bench file's 1.3 M chunks lay out in 1.5 s this
way against 2.5 s through the scratch (bench/ingest_phases.py)."""

LAYOUT_MEMORY = "512MB"
"""DuckDB memory limit of the sort that lays out one source (spills to disk beyond it). DuckDB
holds up to about 1.5x its limit while sorting (measured: 20 M rows under 512 MB peaked at
711 MiB); 256 MB was too little for the Parquet writer of wide `spans` rows."""

_DAY = r"day=(?:\d{4}-\d{2}-\d{2}|" + NULL_PARTITION + ")"
_INSTANCE = r"instance=[A-Za-z0-9_.%-]{1,200}"
_REL = re.compile(
    r"^(?P<table>[a-z_]+)/(?:" + _DAY + r"/(?:" + _INSTANCE + r"/)?)?"
    r"(?P<name>[A-Za-z0-9_-][A-Za-z0-9_.-]*\.parquet)$"
)
_SAFE = "-_."


def table_of(rel: object) -> str | None:
    """The table of `rel` if it has the shape of a dataset file path (either layout), else
    None: nothing absolute, no `..`, no hidden name, only the partition folders above."""
    if not isinstance(rel, str):
        return None
    match = _REL.match(rel)
    if match is None or match["table"] not in TABLES:
        return None
    return match["table"]


def instance_folder(instance: str | None) -> str | None:
    """`instance=<name>` with the name percent-encoded, or None without an instance."""
    if not instance:
        return None
    encoded = urllib.parse.quote(instance, safe=_SAFE)
    if encoded.startswith("."):  # `.` and `..` stay names, never path steps
        encoded = "%2E" + encoded[1:]
    return f"instance={encoded[:200]}"


def lay_out(
    staged: dict[str, Path], scratch: Path, name: str, instance: str | None = None
) -> dict[str, dict[str, Path]]:
    """Rewrite a source's staged table files into partitioned, sorted files under `scratch`.

    Returns table → {relative path in the dataset: file in scratch}; `name` is the file
    name (the source id) without `.parquet`.
    """
    out = {t: {f"{t}/{name}.parquet": p} for t, p in staged.items() if t not in PARTITION_TIME}
    if len(out) == len(staged):
        return out  # nothing to sort (a quarantine-only source): no DuckDB needed
    release_heap()
    with spilling_duckdb(scratch / "layout.tmp", ingest_memory(LAYOUT_MEMORY)) as con:
        for table in PARTITION_TIME:
            view = f"_staged_{table}"
            if table in staged:
                con.read_parquet(str(staged[table])).create_view(view)
            else:
                con.register(view, empty(table).to_arrow())
        con.execute(load("layout_setup"))
        con.execute(load("layout"))
        for table in staged.keys() & PARTITION_TIME.keys():
            if table == "tokens":
                rollups = Rollups(con, scratch / "rollups")
                laid = scratch / "laid" / table
                t0 = scratch / "layout_tokens_t0"
                out[table] = _write_tokens(con, laid, name, instance, rollups, t0)
                out.update(rollups.finish(name))
            else:
                out[table] = _write_days(con, table, scratch / "laid" / table, name, instance)
    return out


def _first_chunks(con: duckdb.DuckDBPyConnection, t0: Path, pieces: int, chunks: int) -> None:
    """`_staged_tokens_t0`: each staged chunk with its request's first chunk time `_t0`, read
    from the scratch folder `t0` (pruned by each piece's time), or joined in place for a source
    of few chunks, requests and pieces (`DIRECT_T0_REQUESTS`)."""
    ((requests,),) = con.sql(_REQUESTS).fetchall()
    small = chunks <= DIRECT_T0_CHUNKS and requests <= DIRECT_T0_REQUESTS
    if small and pieces <= DIRECT_T0_PIECES:
        con.execute(load("layout_tokens_t0_view"))
        return
    con.execute(load("layout_tokens_t0"), {"path": str(t0), "files": T0_FILE_ROW_GROUPS})
    con.execute(_DROP_STARTS)  # the pieces read the scratch: 24 bytes a request given back
    con.read_parquet(str(t0 / "*.parquet")).create_view("_staged_tokens_t0")


_REQUESTS = "SELECT count(*) FROM _tokens_starts"
_DROP_STARTS = "DROP TABLE _tokens_starts"


def _write_tokens(
    con: duckdb.DuckDBPyConnection,
    folder: Path,
    name: str,
    instance: str | None,
    rollups: Rollups,
    t0: Path,
) -> dict[str, Path]:
    """Write `tokens` one day at a time, each day sorted in pieces of at most
    `TOKENS_PIECE_ROWS` chunks (whole minutes of first-chunk time, `_pieces`); a day of
    several pieces is their files read back one after the other. Each piece's file is
    summarised into the source's rollups as it is written (traceq/layout_rollups.py)."""
    table = "tokens"
    con.execute(load("layout_tokens_starts"))
    minutes = con.sql(load("layout_tokens_minutes")).fetchall()
    days = _pieces(minutes, TOKENS_PIECE_ROWS)
    pieces, chunks = sum(len(ranges) for _, ranges in days), sum(m[2] for m in minutes)
    _first_chunks(con, t0, pieces, chunks)
    piece = load("layout_tokens_piece")
    columns = [duckdb.ColumnExpression(c.name) for c in TABLES[table]]
    rows = ROW_GROUP_ROWS.get(table, DEFAULT_ROW_GROUP_ROWS)
    files: dict[str, Path] = {}
    for day, ranges in days:
        rel, path = _day_file(table, day, folder, name, instance)
        parts = (
            [path] if len(ranges) == 1 else [path.with_suffix(f".{i}") for i in range(len(ranges))]
        )
        for (lo, hi), part in zip(ranges, parts, strict=True):
            # each piece's sort ends (and its spill is deleted) before the next begins
            sorted_piece = con.sql(piece, params={"lo": lo, "hi": hi}).select(*columns)
            sorted_piece.write_parquet(str(part), compression="zstd", row_group_size=rows)
            rollups.add(part)
        if len(parts) > 1:
            day_rows = con.read_parquet([str(p) for p in parts])  # in the list's order
            day_rows.write_parquet(str(path), compression="zstd", row_group_size=rows)
            for part in parts:
                part.unlink()
        files[rel] = path
    return files


Minute = tuple[int | None, str | None, int]
"""A row of `traceq/sql/layout_tokens_minutes.sql`: minute since the epoch, its UTC day, chunks."""
Range = tuple[int | None, int | None]


def _pieces(minutes: list[Minute], most: int) -> list[tuple[str | None, list[Range]]]:
    """Each day (in order) with the `_t0` ranges its `tokens` are sorted in: runs of whole
    minutes of at most `most` chunks (a minute of more is a run on its own), as [lo, hi] in ns.
    The requests without any time are day None, range (None, None).

    >>> _pieces([(0, "1970-01-01", 5), (1, "1970-01-01", 5), (1440, "1970-01-02", 2)], 8)
    [('1970-01-01', [(0, 59999999999), (60000000000, 119999999999)]), \
('1970-01-02', [(86400000000000, 86459999999999)])]
    """
    days: list[tuple[str | None, list[Range]]] = []
    for day, group in itertools.groupby(minutes, key=lambda m: m[1]):
        runs: list[list[int]] = []  # first minute, last minute, chunks
        ranges: list[Range] = []
        for minute, _, chunks in group:
            if minute is None:
                ranges.append((None, None))
            elif runs and runs[-1][2] + chunks <= most:
                runs[-1][1:] = [minute, runs[-1][2] + chunks]
            else:
                runs.append([minute, minute, chunks])
        ranges[:0] = [_ns_range(first, last) for first, last, _ in runs]
        days.append((day, ranges))
    return days


def _ns_range(first: int, last: int) -> Range:
    """The ns of minutes `first` to `last` since the epoch, both ends in, kept within int64."""
    return max(first * _MINUTE_NS, _INT64_MIN), min((last + 1) * _MINUTE_NS - 1, _INT64_MAX)


_MINUTE_NS = 60 * 10**9
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _write_days(
    con: duckdb.DuckDBPyConnection, table: str, folder: Path, name: str, instance: str | None
) -> dict[str, Path]:
    laid = con.table(f"_laid_{table}")
    days = [row[0] for row in con.table(f"_days_{table}").fetchall()]
    columns = [duckdb.ColumnExpression(c.name) for c in TABLES[table]]
    rows = ROW_GROUP_ROWS.get(table, DEFAULT_ROW_GROUP_ROWS)
    files: dict[str, Path] = {}
    if len(days) > 1:
        # Sorted once, then each day read back in that order: filtering the view per day sorted
        # every row once per day (3 days of 1.2 M requests' tokens: 894 s against 261 s for
        # one; docs/PERFORMANCE.md, "Ingest peak RSS with size"). One thread, order kept.
        sorted_file = folder.parent / f"{table}.sorted.parquet"
        folder.parent.mkdir(parents=True, exist_ok=True)
        laid.write_parquet(str(sorted_file), compression="zstd", row_group_size=rows)
        laid = con.read_parquet(str(sorted_file))
    for day in days:
        rel, path = _day_file(table, day, folder, name, instance)
        day_col = duckdb.ColumnExpression("_day")
        match = day_col.isnull() if day is None else day_col == duckdb.ConstantExpression(day)
        rel_rows = (laid if len(days) == 1 else laid.filter(match)).select(*columns)
        rel_rows.write_parquet(str(path), compression="zstd", row_group_size=rows)
        files[rel] = path
    if len(days) > 1:
        sorted_file.unlink()
    return files


def _day_file(
    table: str, day: str | None, folder: Path, name: str, instance: str | None
) -> tuple[str, Path]:
    """A day's file of `table`: its path in the dataset, and where it is written (made)."""
    parts = [table, f"day={day or NULL_PARTITION}"]
    parts += [f] if (f := instance_folder(instance)) else []
    path = folder.joinpath(*parts[1:], f"{name}.parquet")
    path.parent.mkdir(parents=True, exist_ok=True)
    return "/".join([*parts, f"{name}.parquet"]), path
