"""Bytes → classified log records, block by block, without a Python loop over lines.

Lines are cut with numpy (newline offsets) straight into an Arrow binary array, decoded by
polars (invalid UTF-8, e.g. latin-1 bytes, is decoded with replacement characters and
counted), cleaned (ANSI codes, CR) and classified with polars regexes. Hard-wrapped lines
(a terminal's column limit, text reflowed by a Markdown tool) are joined back onto the
record they continue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO

import numpy as np
import polars as pl
import pyarrow as pa

from traceq.ingest.serverlog import patterns as p
from traceq.spill import trim_heap

BLOCK_BYTES = 16 << 20  # bytes read per block (bounded memory)
MAX_LINE_BYTES = 1 << 20  # longer lines are quarantined unparsed (1 MiB)
WRAP_MIN_COLS = 80  # lines cut by a terminal are at least this long (columns)
WRAP_MIN_REPEATS = 3  # … and that many long lines share the width: then joined without a space
NEWLINE = 10
MAX_DEFER_LINES = 10_000  # open record carried to the next block at most this many lines

# A record that parses neither whole nor by its first line is retried with its first k
# continuation lines, k ≤ this: a stats line (~300 characters) wrapped at 40+ columns takes
# at most 8 lines; bounded so a record followed by pages of foreign output costs little.
RETRY_MAX_PARTS = 8
PREFIX_PROBE_LINES = 64  # a block whose first lines carry a collector's prefix is stripped of it
DOCKER_JSON = '{"log":'
"""How a line of Docker's json-file log starts (`/var/lib/docker/containers/<id>/<id>-json.log`:
`{"log":"INFO 06-15 …\\n","stream":"stdout","time":"…"}`); its `log` is the server's line."""
# Record kinds that wrapped continuation lines can belong to.
_JOINABLE = ("vllm", "sglang")


def iter_blocks(
    stream: BinaryIO, progress: Callable[[int], None], block_bytes: int = BLOCK_BYTES
) -> Iterator[pl.DataFrame]:
    """Frames of (`line_no` 1-based, `text`, `bad_utf8`) lines, a block at a time."""
    carry = b""
    line_no = 1
    while True:
        trim_heap()  # what the blocks before left free goes back to the system (traceq/spill.py)
        chunk = stream.read(block_bytes)
        if not chunk:
            break
        progress(len(chunk))
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            # No line end yet. Beyond MAX_LINE_BYTES the line is quarantined unparsed anyway:
            # keep only its head, so a file without newlines cannot exhaust memory.
            carry = data[: MAX_LINE_BYTES + 1]
            continue
        carry = data[cut + 1 :]
        frame = split_lines(data[: cut + 1], line_no)
        line_no += frame.height
        yield frame
    if carry:
        yield split_lines(carry, line_no)


def split_lines(buf: bytes, first_line_no: int) -> pl.DataFrame:
    """Cut `buf` at newlines (zero-copy Arrow offsets) into decoded lines."""
    invalid = False
    if not buf.isascii():  # ASCII (most logs) is valid UTF-8: a check ten times faster
        try:
            buf.decode("utf-8")  # validation only, at C speed
        except UnicodeDecodeError:
            # Rare: decode with replacement characters (latin-1 bytes, binary garbage). A
            # newline byte is never part of a multi-byte sequence: the lines stay the same.
            buf = buf.decode("utf-8", "replace").encode("utf-8")
            invalid = True
    arr = np.frombuffer(buf, dtype=np.uint8)
    ends = np.flatnonzero(arr == NEWLINE) + 1
    if not buf.endswith(b"\n"):
        ends = np.append(ends, len(buf))
    offsets = np.concatenate(([0], ends)).astype(np.int64)
    strings = pa.LargeStringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(buf))
    text = pl.Series("text", strings)
    # Every line but maybe the last ends with its newline: drop it (a cheap slice); CR-LF
    # and other trailing CRs only when the block has a CR (a memchr over the bytes).
    text = text.str.strip_suffix("\n")
    if b"\r" in buf:
        text = text.str.strip_chars_end("\r\n")
    bad = (
        text.str.contains("\ufffd", literal=True)
        if invalid
        else pl.repeat(False, len(text), eager=True)
    )
    return pl.DataFrame(
        {
            "line_no": pl.int_range(first_line_no, first_line_no + len(ends), eager=True),
            "text": text,
            "bad_utf8": bad,
        }
    )


# Cheap test (no captures) before the costly search for a record glued after other output.
_GLUED_HINT = r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{2}-\d{2} \d{2}:"
# Lines that are no server record: the first of these that matches names the kind.
_OTHER_KINDS = (
    ("http", p.UVICORN_ACCESS),
    ("uvicorn", p.UVICORN_OTHER),
    ("binary", p.BINARY),
    ("exception", p.EXCEPTION_LINE),  # a raw `SomethingError: …` line is its own record
    ("lmcache", p.LMCACHE_LINE),  # LMCache's own stamp: a record, never a continuation
    ("process_output", p.PROCESS_OUTPUT),
    ("third_party", p.THIRD_PARTY),
)


def classify(lines: pl.DataFrame) -> pl.DataFrame:
    """Add `kind`, the prefix fields, `process` and `msg` to each line; glued records are
    cut out."""
    if lines["text"].head(PREFIX_PROBE_LINES).str.starts_with(DOCKER_JSON).any():
        lines = lines.with_columns(text=docker_json_text(pl.col("text")))
    clean = pl.col("text")
    # Each clean-up only when the block needs it (most logs have no ANSI, CR or Ray lines):
    # one pass tells whether any is needed, a pass per clean-up then tells which.
    flags = (False, False, False)
    if lines["text"].str.contains(r"\x1b|\r|\[repeated ").any():
        flags = lines.select(
            esc=pl.col("text").str.contains("\x1b", literal=True).any(),
            cr=pl.col("text").str.contains("\r", literal=True).any(),
            ray=pl.col("text").str.contains("[repeated ", literal=True).any(),
        ).row(0)
    if flags[0]:
        clean = clean.str.replace_all(p.ANSI, "")
    probe = lines.head(PREFIX_PROBE_LINES).select(clean.str.contains(p.LINE_PREFIX).any())
    if probe.item():  # after the colours: `docker compose logs` colours its `vllm-1  | `
        clean = clean.str.replace(p.LINE_PREFIX, "")
    if flags[1]:
        clean = clean.str.strip_chars_start("\r")
    if flags[2]:
        clean = clean.str.replace(p.RAY_REPEATED, "")
    df = lines.with_columns(clean=clean)
    df = df.with_columns(long=pl.col("clean").str.len_bytes() > MAX_LINE_BYTES)
    df = _prefix(df)
    # A record glued after a tqdm bar or a VLLM_LOGGING_PREFIX: keep the part from its prefix.
    glued = df.select("line_no", "clean", "level", "long")  # only what is needed
    glued = glued.filter(pl.col("level").is_null() & ~pl.col("long"))  # filter first: cheap
    glued = glued.filter(pl.col("clean").str.contains(_GLUED_HINT))
    if glued.height:
        glued = glued.select("line_no", clean=pl.col("clean").str.extract(p.VLLM_GLUED, 2))
        df = df.update(_prefix(glued).drop("pre"), on="line_no")
    none = pl.lit(None, pl.String)
    df = df.drop("pre").with_columns(date=none, hms=none, ranks=none)
    sg = df.select("line_no", "clean", "level")
    sg = sg.filter(pl.col("level").is_null() & pl.col("clean").str.starts_with("["))
    if sg.height:
        sg = _extract(sg.select("line_no", "clean"), p.SGLANG_LINE)
        df = df.update(sg.drop("clean").filter(pl.col("date").is_not_null()), on="line_no")
    kind = (
        pl.when(pl.col("long"))
        .then(pl.lit("long"))
        .when(pl.col("level").is_not_null())
        .then(pl.lit("vllm"))
        .when(pl.col("date").is_not_null())
        .then(pl.lit("sglang"))
    )
    df = df.with_columns(kind=kind).drop("long")
    rest = df["kind"].is_null()
    if rest.any():
        # Only lines that are no server record go through the slower tests.
        kinds = _other_kinds(df["clean"].filter(rest))
        df = df.with_columns(df["kind"].scatter(rest.arg_true(), kinds))
    return df.with_columns(process=innermost_process(df["proc"]))


def innermost_process(proc: pl.Series) -> pl.Series:
    """The innermost process prefix of each `proc`, e.g. `EngineCore_DP0 pid=143`.

    A log has few distinct prefixes: each is read once, then mapped onto the rows.
    """
    distinct = proc.drop_nulls().unique()
    inner = distinct.str.extract(r"\(([^()]*)\) $", 1)
    return proc.replace_strict(distinct, inner, default=None, return_dtype=pl.String)


def _prefix(df: pl.DataFrame) -> pl.DataFrame:
    """vLLM prefix fields of `clean`, and `msg`: the rest of the line after the prefix."""
    df = _extract(df, p.VLLM_PREFIX)
    return df.with_columns(msg=pl.col("clean").str.slice(pl.col("pre").str.len_chars()))


def _other_kinds(clean: pl.Series) -> pl.Series:
    """`blank`, one of `_OTHER_KINDS` or `other` for each line: the first test that holds.
    Each test runs only on the lines no earlier test decided (not every test on every line).
    """
    blank = clean.str.strip_chars() == ""
    kinds = pl.select(pl.when(blank).then(pl.lit("blank"))).to_series()
    todo = (~blank).arg_true()
    for name, pattern in _OTHER_KINDS:
        if todo.is_empty():
            break
        hit = clean.gather(todo).str.contains(pattern)
        kinds = kinds.scatter(todo.filter(hit), name)
        todo = todo.filter(~hit)
    return kinds.fill_null("other").alias("kind")


def _extract(df: pl.DataFrame, pattern: str, column: str = "clean") -> pl.DataFrame:
    """`df` with one column per named group of `pattern` (null where it does not match)."""
    return df.with_columns(pl.col(column).str.extract_groups(pattern).alias("_g")).unnest("_g")


def join_wrapped(
    df: pl.DataFrame, widths: set[int] | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Join continuation lines onto their record: (records, blank lines).

    An `other` line continues the record before it when that record is a vLLM / SGLang line
    (blank lines in between are skipped: Markdown reflow). A line whose length is a terminal
    width (`wrap_widths`, collected in `widths` across blocks) was cut mid-word: join without
    a space; other lines were reflowed at word boundaries: join with one.
    """
    is_blank = df["kind"] == "blank"
    blank = df.filter(is_blank)
    if blank.height:
        df = df.filter(~is_blank)
    head = pl.when(pl.col("kind") != "other").then(pl.col("kind")).forward_fill().shift(1)
    df = df.with_columns(cont=(pl.col("kind") == "other") & head.is_in(_JOINABLE).fill_null(False))
    if not df["cont"].any():
        return df.with_columns(n_lines=pl.lit(1, pl.Int64)).drop("cont"), blank
    if widths is None:
        widths = set()
    widths.update(wrap_widths(df["clean"]))  # learnt across blocks: the caller keeps the set
    wrapped = pl.col("clean").str.len_chars().shift(1).is_in(sorted(widths))
    sep = pl.when(wrapped).then(pl.lit("")).otherwise(pl.lit(" "))
    df = df.with_columns(
        rec=(~pl.col("cont")).cum_sum(),
        piece=pl.when("cont").then(pl.concat_str(sep, "clean")),
        msg=pl.when("cont").then(None).otherwise("msg"),
    )
    multi = pl.col("cont").any().over("rec")
    single = df.filter(~multi)
    joined = (
        df.filter(multi)
        .with_columns(piece=pl.coalesce("piece", "msg"))
        .group_by("rec", maintain_order=True)
        .agg(
            pl.exclude("piece", "msg", "cont").first(),
            msg_head=pl.col("msg").first(),
            msg=pl.col("piece").str.join(""),
            parts=pl.col("clean").filter(pl.col("cont")).head(RETRY_MAX_PARTS),
            n_lines=pl.len().cast(pl.Int64),
        )
    )
    records = pl.concat(
        [single.with_columns(n_lines=pl.lit(1, pl.Int64)), joined], how="diagonal_relaxed"
    )
    return records.sort("line_no").drop("rec", "piece", "cont"), blank


def wrap_widths(text: pl.Series) -> list[int]:
    """Widths lines were hard-wrapped at: lengths shared by several long lines.

    A terminal wraps every long line at its width; process prefixes added after the wrap give
    one width per process, so there may be several.
    """
    lengths = text.str.len_chars()
    counts = lengths.filter(lengths >= WRAP_MIN_COLS).value_counts()
    return counts.filter(pl.col("count") >= WRAP_MIN_REPEATS)[:, 0].to_list()


def extract_record(df: pl.DataFrame, pattern: str, required: str) -> pl.DataFrame:
    """`df` with the named groups of `pattern` read from each record's message.

    A joined record that does not parse is read from its first line alone: a stray line
    joined after a complete record must not spoil it.
    """
    if "msg_head" not in df.columns:
        return _extract(df, pattern, "msg")
    whole = _extract(df, pattern, "msg")
    ok = whole[required].is_not_null() | (whole["n_lines"] == 1)
    if ok.all():
        return whole
    head = _extract(df.filter(~ok), pattern, "msg_head")
    still = head[required].is_null()
    if still.any():
        retried = _retry_parts(df.filter(~ok).filter(still), pattern, required)
        head = pl.concat([head.filter(~still), retried], how="diagonal_relaxed")
    return pl.concat([whole.filter(ok), head], how="diagonal_relaxed").sort("line_no")


def _retry_parts(df: pl.DataFrame, pattern: str, required: str) -> pl.DataFrame:
    """Records that parse neither whole nor by their first line: the first line joined with
    its first k continuation lines (longest first), cut mid-word (no space) or reflowed (one
    space). A wrapped record followed by a foreign line (a benchmark's `Throughput: …` print)
    then parses without it. Only failed records come here: few, a Python loop is fine."""
    candidates: list[tuple[int, int, str]] = []
    for line_no, head, parts in df.select("line_no", "msg_head", "parts").iter_rows():
        for k in range(min(len(parts or []), RETRY_MAX_PARTS), 0, -1):
            for sep in ("", " "):
                candidates.append((line_no, len(candidates), head + sep + sep.join(parts[:k])))
    if candidates:
        tries = pl.DataFrame(candidates, schema=["line_no", "order", "msg"], orient="row")
        fits = _extract(tries, pattern, "msg").filter(pl.col(required).is_not_null())
        best = fits.sort("order").unique("line_no", keep="first").select("line_no", "msg")
        df = df.join(best.rename({"msg": "fit"}), on="line_no", how="left")
        df = df.with_columns(msg=pl.coalesce("fit", "msg")).drop("fit")
    return _extract(df, pattern, "msg")


def split_open_tail(df: pl.DataFrame, final: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(lines to process now, lines to carry): the last joinable record may continue."""
    if final or df.height == 0:
        return df, df.clear()
    starts = df.select(pl.arg_where(pl.col("kind").is_in(("other", "blank")).not_()).last()).item()
    if starts is None or df.height - starts > MAX_DEFER_LINES:
        return df, df.clear()
    return df.head(starts), df.slice(starts)


def docker_json_text(text: pl.Expr) -> pl.Expr:
    """The server's own line of a Docker json-file line (its `log`, less the line end Docker
    keeps); any other line as it is."""
    log = text.str.json_path_match("$.log").str.strip_suffix("\n").str.strip_suffix("\r")
    return pl.when(text.str.starts_with(DOCKER_JSON)).then(log.fill_null(text)).otherwise(text)
