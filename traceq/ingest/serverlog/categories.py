"""Each log record's category: what it is, decided once (`categorise`).

The bulk (vLLM lines) is decided by how the message starts: literal tests first, one
anchored pattern for the rest; the remaining records go through ordered rules whose
patterns run only on the records their cheap column tests leave.
"""

from __future__ import annotations

import re

import polars as pl

from traceq.ingest.serverlog import patterns as p
from traceq.ingest.serverlog.events import FAILURES, KV_RETRIEVED, MILESTONES

_PROCS = r"^(?:\([^()]*\) )+"


# What a vLLM message starts with decides its category (one anchored pass over all records).
_STARTS: tuple[tuple[str, str], ...] = (
    ("stats", r"Avg prompt throughput:|Throughput: [\d.]+ tokens/s"),
    ("received", r"Received request "),
    ("lifecycle", r"(?:Added|Finished|Aborted) request "),
    ("preemption", r"Sequence group \S+ is preempted by"),
    ("settings", p.SETTINGS_START),
    *((m.name, m.start) for m in MILESTONES),
)
# One anchored pass finds which start a message has (group 1: the start's own text).
_START = p.ascii_classes(
    "^(?:Engine \\d+: )?(" + "|".join(f"(?:{frag})" for _, frag in _STARTS) + ")"
)
_START_RE = tuple((name, re.compile(frag)) for name, frag in _STARTS)
# The commonest starts, decided by literal tests first (the same answer `_START` gives, at a
# fraction of the cost of a capture over every message); `_START` runs on the rest only.
_QUICK_STARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("received", ("Received request ",)),
    ("lifecycle", ("Added request ", "Finished request ", "Aborted request ")),
    ("stats", ("Avg prompt throughput:",)),
)
_QUICK_ENGINE_STATS = r"^Engine [0-9]+: Avg prompt throughput:"
# Rarer text found anywhere in a message: failures, shutdown and KV-connector loads (one
# pass, few matches).
_ANYWHERE = "|".join([*(pattern for _, pattern in FAILURES), KV_RETRIEVED])


_OWN_CATEGORY = ("http", "long", "binary", "third_party")


def line_starts(lines: pl.DataFrame) -> pl.DataFrame:
    """Add `start`: the category the message start of each vLLM line gives (null: none of
    `_STARTS`, or no vLLM line). Line by line, so it runs ahead on the reading thread; a
    record joined from several lines is looked at again by `categorise`."""
    start = pl.Series("start", [None] * lines.height, pl.String)
    vllm = lines["kind"] == "vllm"
    if vllm.any():
        start = start.scatter(vllm.arg_true(), _start_cats(lines["msg"].filter(vllm)))
    return lines.with_columns(start)


def categorise(records: pl.DataFrame) -> pl.DataFrame:
    """Add `cat`: the one thing each record is (and drop `start`, see `line_starts`). The
    bulk (vLLM lines) is decided by how the message starts; only what remains goes through
    the slower tests."""
    cat = records["start"]
    joined = (records["kind"] == "vllm") & (records["n_lines"] > 1)
    if joined.any():  # the message is no longer the one `line_starts` looked at
        cat = cat.scatter(joined.arg_true(), _start_cats(records["msg"].filter(joined)))
    # `text_`: the message of an event when it is not `msg` (set for the residual records).
    records = records.drop("start").with_columns(text_=pl.lit(None, pl.String), cat=cat)
    # Kinds that are their own category skip the residual tests.
    own = pl.col("kind").is_in(_OWN_CATEGORY)
    records = records.with_columns(cat=pl.when(own).then("kind").otherwise("cat"))
    rest = records["cat"].is_null()
    if rest.any():
        sub = records.filter(rest)
        own_stamp = sub["kind"].is_in(("vllm", "sglang"))
        text = sub["msg"] if own_stamp.all() else sub.select(_raw_text(own_stamp)).to_series()
        sub = sub.with_columns(text_=text)
        sub = sub.with_columns(cat=_residual_cats(sub))
        records = records.with_columns(
            records["cat"].scatter(rest.arg_true(), sub["cat"]),
            records["text_"].scatter(rest.arg_true(), sub["text_"]),
        )
    return records


def _start_cats(msg: pl.Series) -> pl.Series:
    """The category each message's start gives (null: none of `_STARTS`)."""
    m = pl.col("msg")
    quick = pl.when(m.str.starts_with("Engine ") & m.str.contains(_QUICK_ENGINE_STATS))
    quick = quick.then(pl.lit("stats"))  # type: ignore[assignment]
    for name, starts in _QUICK_STARTS:
        hit = pl.any_horizontal(m.str.starts_with(start) for start in starts)
        quick = quick.when(hit).then(pl.lit(name))  # type: ignore[attr-defined]
    cats = msg.to_frame("msg").select(quick.otherwise(None)).to_series()  # type: ignore[attr-defined]
    rest = cats.is_null()
    if not rest.any():
        return cats
    hits = msg.filter(rest).str.extract(_START, 1)
    # Few distinct starts: name each once in Python, then map them all at once.
    names = {hit: _start_name(hit) for hit in hits.drop_nulls().unique().to_list()}
    named = hits.replace_strict(names, default=None, return_dtype=pl.String)
    return cats.scatter(rest.arg_true(), named)


def _start_name(hit: str) -> str | None:
    return next((name for name, rx in _START_RE if rx.match(hit)), None)


def _raw_text(own_stamp: pl.Series) -> pl.Expr:
    """The message of a record: `msg` for vLLM / SGLang ones, else the line without its
    process prefixes."""
    return pl.when(own_stamp).then(pl.col("msg")).otherwise(pl.col("clean").str.replace(_PROCS, ""))


def _retrieved(text: pl.Expr) -> pl.Expr:
    """LMCache's `Retrieved R out of N`: `kv_load_failed` when R < N, else `kv_retrieve`."""
    g = text.str.extract_groups(KV_RETRIEVED)
    short = g.struct.field("got").cast(pl.Int64) < g.struct.field("want").cast(pl.Int64)
    return pl.when(short).then(pl.lit("kv_load_failed")).otherwise(pl.lit("kv_retrieve"))


def _residual_cats(sub: pl.DataFrame) -> pl.Series:
    """Category of records no message start decided (errors, warnings, other output): the
    first rule that holds. A rule's pattern runs only on the records still undecided that
    pass its cheap column test, not on every record."""
    kind, level, msg, text = pl.col("kind"), pl.col("level"), pl.col("msg"), pl.col("text_")
    vllm = kind == "vllm"
    raw = kind.is_in(("process_output", "other", "exception", "lmcache"))
    error = vllm & level.is_in(("ERROR", "CRITICAL"))
    startup = text.str.contains("Application startup complete", literal=True)
    rules: list[tuple[pl.Expr, pl.Expr | None, pl.Expr]] = [
        (kind.is_in(("http", "long", "binary")), None, kind),
        (kind == "sglang", msg.str.contains(r"^(?:Prefill|Decode) batch"), pl.lit("stats")),
        (error, msg.str.contains(p.TRACEBACK_BODY), pl.lit("traceback")),
        *(
            (pl.col("_fails"), text.str.contains(pattern), pl.lit(name))
            for name, pattern in FAILURES
        ),
        (pl.col("_fails"), text.str.contains(KV_RETRIEVED), _retrieved(text)),
        (kind == "uvicorn", None, pl.when(startup).then(pl.lit("startup_ready"))),
        (kind == "uvicorn", None, pl.lit("uvicorn")),
        (error, None, pl.lit("error")),
        (vllm & (level == "WARNING"), None, pl.lit("warning")),
        (raw, text.str.contains(p.EXCEPTION_LINE), pl.lit("exception")),
        (kind == "other", text.str.contains(p.STATS_FRAGMENT), pl.lit("stats_fragment")),
        (vllm, None, pl.concat_str(pl.lit("vllm_"), level.str.to_lowercase())),
        (pl.lit(True), None, kind),
    ]
    # Failures are rare: one pass over all their patterns first, each on the hits only.
    frame = sub.with_columns(_fails=pl.lit(False))
    might = sub.select(vllm | raw).to_series()
    if might.any():
        fails = sub.filter(might).select(text.str.contains(_ANYWHERE)).to_series()
        frame = frame.with_columns(frame["_fails"].scatter(might.arg_true(), fails))
    cats = pl.Series("cat", [None] * sub.height, pl.String)
    todo = pl.Series([True] * sub.height)
    for cond, test, value in rules:
        idx = frame.select(cond & pl.lit(todo)).to_series().arg_true()
        part = frame[idx]
        if test is not None and part.height:
            hit = part.select(test).to_series()
            idx, part = idx.filter(hit), part.filter(hit)
        named = part.select(value).to_series()
        idx, named = idx.filter(named.is_not_null()), named.drop_nulls()
        if idx.len():
            cats = cats.scatter(idx, named)
            todo = todo.scatter(idx, False)
            if not todo.any():
                break
    return cats
