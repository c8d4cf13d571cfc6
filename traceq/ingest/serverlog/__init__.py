"""vLLM (V0, V1) and SGLang server logs → engine_stats, events and coarse requests.

First pass, block by block (bounded memory, no Python loop over lines): cut and classify
lines (`lines`), put a time on every record (`clock`), read stats lines (`stats`) and events
(`events`). Second pass (`serverlog_requests.sql`, DuckDB): requests with both a `Received`
and a `Finished` / `Aborted` line get a coarse `requests` row (1 s resolution).

Every line is accounted for: a table row, a quarantine row, a continuation joined onto its
record, or a count by category in the manifest (`unrecognised`).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from typing import TYPE_CHECKING, Any

import polars as pl

from traceq.ingest.clocks import infer_year
from traceq.ingest.second_pass import second_pass
from traceq.ingest.serverlog import events as ev
from traceq.ingest.serverlog import lines as ln
from traceq.ingest.serverlog import patterns as p
from traceq.ingest.serverlog.categories import categorise, line_starts
from traceq.ingest.serverlog.clock import Clock, collector_range, head_and_tail, stamp_range
from traceq.ingest.serverlog.stats import quarantine_rows, sglang_stats, vllm_stats
from traceq.ingest.source import Source
from traceq.sql import load
from traceq.writer import SourceWriter

if TYPE_CHECKING:
    from traceq.ingest.options import IngestOptions

FORMATS = {
    "vllm-log": "vLLM server / engine log (V0 and V1): stats, lifecycle, startup, errors",
    "sglang-log": "SGLang server log: Prefill batch / Decode batch scheduler lines",
}
# Categories written to a table or to quarantine; every other category is only counted.
_STORED = {
    "stats",
    "preemption",
    "received",
    "lifecycle",
    "http",
    "startup_ready",
    "error",
    "warning",
    "exception",
    "long",
    "stats_fragment",
    "bad_timestamp",
    "settings",
    *(m.name for m in ev.MILESTONES),
    *(name for name, _ in ev.FAILURES),
}
# Frames for the second pass, kept as scratch tables (never committed).
_SCRATCH = {"lifecycle": "log_lifecycle", "model": "log_model"}
_MODEL_SCHEMA = pl.Schema({"ts": pl.Int64, "model": pl.String})
COLLECTOR_YEAR = "the container runtime's UTC stamps on the same lines"
_SNIFF_VLLM = re.compile(p.VLLM_LINE, re.MULTILINE)  # Unicode classes: Python `re`
_SNIFF_SGLANG = re.compile(
    r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}[^\]]*\] (?:Prefill|Decode) batch", re.MULTILINE
)


def sniff(source: Source) -> str | None:
    """`sglang-log` / `vllm-log` when the head has a line of that server's own format."""
    head = source.head.decode("utf-8", "replace")
    if head.startswith(ln.DOCKER_JSON):
        lines = pl.Series(head.split("\n")[:-1], dtype=pl.String)  # the last may be cut
        head = "\n".join(pl.select(ln.docker_json_text(pl.lit(lines))).to_series().to_list())
    text = re.sub(p.ANSI, "", head)
    text = re.sub(p.LINE_PREFIX, "", text, flags=re.MULTILINE)
    if _SNIFF_SGLANG.search(text):
        return "sglang-log"
    if _SNIFF_VLLM.search(text):
        return "vllm-log"
    return None


def ingest(
    source: Source,
    writer: SourceWriter,
    fmt: str,
    options: IngestOptions,
    progress: Callable[[int], None],
) -> dict[str, Any]:
    """Read one server log into `writer`; returns manifest details."""
    clock = _clock(source, options)
    state = _State(instance=_instance(source))
    writes = _Writes(writer)
    try:
        read: deque[int] = deque()  # bytes read on the worker, reported from here
        with (
            source.open() as stream,
            closing(_read_ahead(ln.iter_blocks(stream, read.append, ln.BLOCK_BYTES))) as blocks,  # type: ignore[type-var]
        ):
            pending = None
            for block in blocks:
                while read:
                    progress(read.popleft())
                if pending is not None:
                    writes.submit(_process(pending, False, clock, state))
                pending = block
            while read:
                progress(read.popleft())
            if pending is not None:
                writes.submit(_process(pending, True, clock, state))
        writes.wait()
    finally:
        writes.close()
    rows = _requests(writer)
    warnings = []
    if clock.year_from == "file mtime":
        warnings.append(
            f"no year in the log's stamps and no other source to match them: year {clock.year} "
            "taken from the file's mtime (pass --year if that is wrong)"
        )
    return {
        "clock_domain": "log_local_time",
        "assumptions": clock.assumptions(),
        "warnings": warnings,
        "lines": {
            "total": state.lines,
            "blank": state.blank,
            "continuation": state.continuation,
            "invalid_utf8": state.invalid_utf8,
        },
        "records": dict(sorted(state.cats.items())),
        "unrecognised": {k: n for k, n in sorted(state.cats.items()) if k not in _STORED},
        "coarse_requests": rows,
    }


def _clock(source: Source, options: IngestOptions) -> Clock:
    """`--year`, else the year matched to a container runtime's UTC stamps on the same lines,
    else to the dataset's other sources, else the mtime's."""
    mtime = source.path.stat().st_mtime
    if options.year is not None:
        return Clock(tz=options.tz, year=options.year, mtime=mtime)
    head, tail = head_and_tail(source)
    stamps = stamp_range(head, tail)
    runtime = collector_range(head, tail)
    if stamps and runtime and (found := infer_year(*stamps, options.tz, [runtime])):
        return Clock(tz=options.tz, year=found[0], mtime=mtime, year_from=COLLECTOR_YEAR)
    found = stamps and infer_year(stamps[0], stamps[1], options.tz, options.references)
    if found:
        return Clock(tz=options.tz, year=found[0], mtime=mtime, year_from=found[1])
    return Clock(tz=options.tz, year=None, mtime=mtime)


class _State:
    def __init__(self, instance: str) -> None:
        self.instance = instance
        self.carry = pl.DataFrame()
        self.last_ts: int | None = None
        self.lines = self.blank = self.continuation = self.invalid_utf8 = 0
        self.cats: dict[str, int] = {}
        self.widths: set[int] = set()  # terminal wrap widths seen so far


def _instance(source: Source) -> str:
    """The file name without compression suffixes: the serving instance the log belongs to."""
    name = source.path.name
    for suffix in (".gz", ".zst", ".zstd"):
        name = name.removesuffix(suffix)
    return name


def _read_ahead(blocks: Iterator[pl.DataFrame]) -> Iterator[pl.DataFrame]:
    """`blocks` classified (`lines.classify`, `categories.line_starts`: they need nothing
    from other blocks); the next one read, cut into lines and classified on a worker thread
    while the caller works on this one (file reads and polars release the GIL); one block
    ahead at most."""

    def step() -> pl.DataFrame | None:
        block = next(blocks, None)
        return None if block is None else line_starts(ln.classify(block))

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="traceq-read") as pool:
        ahead = pool.submit(step)
        while (block := ahead.result()) is not None:
            ahead = pool.submit(step)
            yield block


class _Writes:
    """Each block's batches, written on one worker thread while the next block is parsed
    (Parquet encoding and polars release the GIL); the worker also reads the block's events
    (`events.extract` needs nothing from other blocks). Batches are written in order, one
    block in flight at most: memory stays bounded.
    """

    def __init__(self, writer: SourceWriter) -> None:
        self.writer = writer
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="traceq-write")
        self.inflight: Future[None] | None = None

    def submit(self, block: tuple[list[tuple[str, pl.DataFrame]], pl.DataFrame]) -> None:
        """`block`: (batches, the records whose events are still to be read)."""
        self.wait()
        self.inflight = self.pool.submit(self._write, *block)

    def _write(self, batches: list[tuple[str, pl.DataFrame]], records: pl.DataFrame) -> None:
        for table, frame in batches:
            self.writer.write(table, frame)
        for table, frame in ev.extract(records).items():
            if table in _SCRATCH:
                self.writer.write_scratch(_SCRATCH[table], frame)
            else:
                self.writer.write(table, frame)

    def wait(self) -> None:
        """Until the block in flight is written; raises what writing it raised."""
        if self.inflight is not None:
            done, self.inflight = self.inflight, None
            done.result()

    def close(self) -> None:
        self.pool.shutdown(wait=True)  # never leave a write running: the caller may discard


def _process(
    lines: pl.DataFrame, final: bool, clock: Clock, state: _State
) -> tuple[list[tuple[str, pl.DataFrame]], pl.DataFrame]:
    """One block's classified lines → ((table, batch) pairs in the order to write them, the
    categorised records other than stats: their events are read by `_Writes`)."""
    out: list[tuple[str, pl.DataFrame]] = []
    state.lines += lines.height
    state.invalid_utf8 += int(lines["bad_utf8"].sum())
    if state.carry.height:
        lines = pl.concat([state.carry, lines], how="vertical_relaxed")
    lines, state.carry = ln.split_open_tail(lines, final)
    records, blank = ln.join_wrapped(lines, state.widths)
    state.blank += blank.height
    state.continuation += int((records["n_lines"] - 1).sum())
    records = _stamp(records, clock, state).drop("stamp", "hms", "date", "bad_utf8")
    bad_ts = records["ts"].is_null() & records["kind"].is_in(("vllm", "sglang"))
    if bad_ts.any():  # rare: spare the copy of every column otherwise
        out.append(("quarantine", quarantine_rows(records.filter(bad_ts), "invalid timestamp")))
        _count(state, "bad_timestamp", int(bad_ts.sum()))
        records = records.filter(~bad_ts)
    records = categorise(records)
    for cat, n in records.group_by("cat").len().iter_rows():
        _count(state, cat, n)
    is_stats = records["cat"] == "stats"
    for reader, kind in ((vllm_stats, "vllm"), (sglang_stats, "sglang")):
        mine = is_stats & (records["kind"] == kind)
        if mine.any():  # one copy of the rows each reader needs, none when there are none
            rows, bad = reader(records.filter(mine))
            out += [("engine_stats", rows), ("quarantine", bad)]
    return out, records.filter(~is_stats)


def _count(state: _State, cat: str, n: int) -> None:
    if n:
        state.cats[cat] = state.cats.get(cat, 0) + n


def _stamp(records: pl.DataFrame, clock: Clock, state: _State) -> pl.DataFrame:
    """`ts` for every record: its own stamp, else the last stamp before it (uvicorn lines)."""
    records = records.with_columns(instance=pl.lit(state.instance), ts=pl.lit(None, pl.Int64))
    vllm = records["kind"] == "vllm"
    if vllm.any():
        ts = clock.vllm_ts(records["stamp"].filter(vllm))
        records = records.with_columns(ts=records["ts"].scatter(vllm.arg_true(), ts))
    sglang = records["kind"] == "sglang"
    if sglang.any():
        sub = records.filter(sglang)
        iso = sub["msg"].str.extract(p.SGLANG_ISO, 1)
        local = pl.select(pl.coalesce(iso, pl.concat_str(sub["date"], pl.lit(" "), sub["hms"])))
        ts = clock.iso_ts(local.to_series())
        records = records.with_columns(ts=records["ts"].scatter(sglang.arg_true(), ts))
    own = records["kind"].is_in(("vllm", "sglang"))
    filled = (
        pl.select(pl.when(~own).then(None).otherwise(records["ts"]).forward_fill()).to_series()
        if own.any()
        else records["ts"]
    )
    if state.last_ts is not None:
        filled = filled.fill_null(state.last_ts)
    filled = filled.fill_null(strategy="backward")
    if filled.drop_nulls().len():
        state.last_ts = int(filled.drop_nulls()[-1])
    return records.with_columns(ts=pl.when(own).then(pl.col("ts")).otherwise(filled))


def _requests(writer: SourceWriter) -> int:
    """Second pass: coarse requests rows from the lifecycle scratch table."""
    writer.close("log_lifecycle")
    path = writer.scratch_path("log_lifecycle")
    if not path.exists():
        return 0
    writer.close("log_model")
    models = writer.scratch_path("log_model")
    with second_pass(writer) as con:
        con.read_parquet(str(path)).create_view("log_lifecycle")
        if models.exists():
            con.read_parquet(str(models)).create_view("log_model")
        else:
            con.register("log_model", pl.DataFrame(schema=_MODEL_SCHEMA))
        frame = con.sql(load("serverlog_requests")).pl()
    writer.write("requests", frame)
    return frame.height
