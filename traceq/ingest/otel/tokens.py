"""Per-token timing in every encoding producers use today, into one `tokens` shape.

The encodings:

* traceq's own `gen_ai.token` events (one per streamed chunk, `gen_ai.token.count`);
* vLLM PR 32573 `token_scheduled` / `token_generated` span events, one pair per engine
  step, epoch ns, `new_token_ids` (int[]) on the generated one;
* the proposed convention's `gen_ai.token.scheduled` / `gen_ai.token.generated` events
  (several generated events may share one timestamp);
* per-token arrays on the request span (`gen_ai.latency.per_token_generation_time`, …) as
  real OTel arrays, as JSON text, as compressed + base64 text, or as serialized bytes.

Every source ends as chunk rows `(_span, ts, n_tokens, t_scheduled, batch_size, waiting,
total_tokens, time_base)`: one row per engine step, `ts` in ns since the epoch. Decoding is
vectorised; only compressed values need Python, once per request.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import gzip
import lzma
import zlib

import polars as pl

from traceq.schema import RAW_LIMIT

TOKEN_COLUMNS = {
    "_span": pl.Int64,
    "ts": pl.Int64,
    "n_tokens": pl.Int64,
    "t_scheduled": pl.Int64,
    "batch_size": pl.Int64,
    "waiting": pl.Int64,
    "total_tokens": pl.Int64,
    "time_base": pl.String,
}

# Event pairs: (scheduled event, generated event) per convention.
SCHEDULED_EVENTS = ("token_scheduled", "gen_ai.token.scheduled")
GENERATED_EVENTS = ("token_generated", "gen_ai.token.generated")
TOKEN_LEVEL_EVENTS = SCHEDULED_EVENTS + GENERATED_EVENTS

# Per-token span attributes -> short names (research §2.2–2.4).
ARRAYS = {
    "gen_ai.latency.per_token_generation_time": "gen",
    "gen_ai.latency.per_token_scheduled_time": "sched",
    "gen_ai.iteration.per_token_batch_size": "batch",
    "gen_ai.iteration.per_token_waiting_size": "waiting",
    "gen_ai.iteration.per_token_total_tokens": "total",
    "gen_ai.response.per_token_num_new_tokens": "nnew",
}
# A value above this many seconds is an absolute epoch time, not an offset (research §2.3:
# the orjson variant leaves the first step's entries absolute).
ABSOLUTE_S = 1e8
_NUMBER = r"-?[0-9][0-9.eE+-]*"  # a JSON number (the texts are JSON)


def _event_field(key: str) -> str:
    value = rf'"(?:intValue|doubleValue)"\s*:\s*"?({_NUMBER})'
    return rf'"key"\s*:\s*"{key}"\s*,\s*"value"\s*:\s*\{{\s*' + value


def event_int(attributes: pl.Expr, *keys: str) -> pl.Expr:
    """An integer attribute of a span event from its raw attributes JSON (first key found)."""
    return pl.coalesce(
        attributes.str.extract(_event_field(k.replace(".", r"\.")), 1)
        .cast(pl.Float64, strict=False)
        .cast(pl.Int64, strict=False)
        for k in keys
    )


def array_len(attributes: pl.Expr, key: str) -> pl.Expr:
    """Length of an int[] event attribute (`new_token_ids`) from the raw JSON; null if absent."""
    body = attributes.str.extract(
        rf'"key"\s*:\s*"{key}"\s*,\s*"value"\s*:\s*\{{\s*"arrayValue"\s*:\s*\{{\s*"values"\s*:\s*\[([^\]]*)\]',
        1,
    )
    return pl.when(body.is_not_null()).then(body.str.count_matches(r'Value"'))


def from_events(events: pl.DataFrame, token_event: str) -> pl.DataFrame:
    """Chunks from token events: traceq's `gen_ai.token` and both scheduled/generated pairs.

    `events`: `_span, ts, name, n_tokens, attributes` (raw JSON text), valid timestamps only.
    """
    ours = events.filter(pl.col("name") == token_event).select(
        "_span", "ts", n_tokens=pl.col("n_tokens").fill_null(1)
    )
    pairs = events.filter(pl.col("name").is_in(TOKEN_LEVEL_EVENTS))
    if pairs.height:
        attrs = pl.col("attributes")
        is_sched = pl.col("name").is_in(SCHEDULED_EVENTS)
        steps = (
            pairs.with_columns(
                sched=is_sched,
                ids=pl.col("ids") if "ids" in pairs.columns else array_len(attrs, "new_token_ids"),
                batch=event_int(attrs, "iter_batch_size", "gen_ai.iteration.batch_size"),
                waiting=event_int(attrs, "iter_waiting_size", "gen_ai.iteration.waiting_requests"),
                total=event_int(attrs, "iter_total_tokens_count", "gen_ai.iteration.total_tokens"),
            )
            # a step's scheduled event sorts before its generated event at the same instant
            .sort("_span", "ts", pl.col("sched").not_())
            .with_columns(
                t_scheduled=pl.when("sched").then("ts").forward_fill().over("_span"),
                batch_size=pl.when("sched").then("batch").forward_fill().over("_span"),
                waiting=pl.when("sched").then("waiting").forward_fill().over("_span"),
            )
            .filter(~pl.col("sched"))
            # the convention writes one generated event per token: tokens of one step share ts
            .group_by("_span", "ts", maintain_order=True)
            .agg(
                n_tokens=pl.col("ids").fill_null(1).sum(),
                t_scheduled=pl.col("t_scheduled").first(),
                batch_size=pl.col("batch_size").first(),
                waiting=pl.col("waiting").first(),
                total_tokens=pl.col("total").first(),
            )
        )
    else:
        steps = pl.DataFrame(schema={k: v for k, v in TOKEN_COLUMNS.items() if k != "time_base"})
    time_base = pl.lit("epoch").alias("time_base")
    return pl.concat(
        [
            ours.with_columns(time_base),
            steps.with_columns(time_base),
        ],
        how="diagonal_relaxed",
    ).select(pl.col(k).cast(v) for k, v in TOKEN_COLUMNS.items())


def _decompress(text: str | None) -> str | None:
    """`compress_and_encode` of the Alipay fork, decoded defensively (research §2.2): base64
    (standard, then URL-safe, padding restored) then gzip / zlib / bz2 / xz / raw, as UTF-8."""
    if text is None:
        return None
    raw = text.strip()
    raw += "=" * (-len(raw) % 4)
    blobs = []
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            blobs.append(decode(raw))
        except (binascii.Error, ValueError):
            continue
    for blob in blobs:
        for unpack in (gzip.decompress, zlib.decompress, bz2.decompress, lzma.decompress):
            try:
                out = unpack(blob).decode("utf-8")
            except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
                continue
            if out.lstrip().startswith("["):
                return out
        try:
            out = blob.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if out.lstrip().startswith("["):
            return out
    return None


# How the numbers of an array's text are wrapped in the shapes met every day: polars' JSON
# text of an OTLP `arrayValue` of doubles or of ints (how the reader keeps it), and JSON
# arrays as Python's json / orjson print them. A text of one shape takes one replace (its
# separator by a comma), a check that only numbers and commas are left, and one split;
# anything else takes the general path below.
_SHAPES = (
    ('{"values": [{"doubleValue": ', '}, {"doubleValue": ', "}]}"),
    ('{"values": [{"intValue": "', '"}, {"intValue": "', '"}]}'),
    ("[", ", ", "]"),
)


# The general path: polars' JSON text of an OTLP `arrayValue`, or a JSON array written by the
# producer (`[0.25, 3]`), unwrapped with literal replaces (a memchr scan each) to `0.25,3`:
# 2-3x cheaper than pulling the numbers out with a regex. The first pass knows polars' own
# spacing (two or three replaces); a text it leaves with anything but numbers and commas
# goes through the second, which removes every wrapper.
_FAST = (('{"doubleValue": ', ""), ('{"intValue": "', ""), ('"}', "}"), ("}, ", ","), (", ", ","))
_ALL = ('{"doubleValue":', '{"intValue":', "}", '"', " ", "\n", "\r", "\t")
_NUMBERS = r"^[-+0-9eE.,]*$"


def _split_shapes(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rows of `frame` whose `text` is one of `_SHAPES` holding only numbers, with `values`
    split out; and the other rows, untouched."""
    text, body = pl.col("text"), pl.col("body")
    shape = pl.lit(None, pl.Int8)
    for i, (prefix, _, suffix) in reversed(list(enumerate(_SHAPES))):
        of_shape = text.str.starts_with(prefix) & text.str.ends_with(suffix)
        shape = pl.when(of_shape).then(pl.lit(i, pl.Int8)).otherwise(shape)
    frame = frame.with_columns(_shape=shape)
    rest, split = [frame.filter(pl.col("_shape").is_null())], []
    for i, (prefix, sep, suffix) in enumerate(_SHAPES):
        part = frame.filter(pl.col("_shape") == i)
        if not part.height:
            continue
        unwrapped = text.str.strip_prefix(prefix).str.strip_suffix(suffix)
        part = part.with_columns(body=unwrapped.str.replace_all(sep, ",", literal=True))
        if i == 0:  # in polars' text of doubles anything but a number brings a `{` (another
            # AnyValue kind) or a `"` (a quoted double: "NaN", "0.5"): two memchr scans
            numbers = ~(body.str.contains('"', literal=True) | body.str.contains("{", literal=True))
        else:
            numbers = body.str.contains(_NUMBERS)
        part = part.with_columns(ok=numbers & (body != ""))
        split.append(part.filter("ok").with_columns(values=body.str.split(",")))
        rest.append(part.filter(~pl.col("ok")))
    columns = pl.exclude("_shape", "body", "ok")
    empty = frame.clear().with_columns(values=pl.lit([], pl.List(pl.String)))
    done = pl.concat(split).select(columns) if split else empty.select(columns)
    return done, pl.concat([r.select(columns) for r in rest])


def _unwrap(text: pl.Expr) -> pl.Expr:
    return (
        text.str.strip_chars()
        .str.strip_prefix("{}")  # an empty arrayValue: OTLP/JSON omits empty `values`
        .str.strip_prefix('{"values": [')
        .str.strip_suffix("]}")
        .str.strip_prefix("[")
        .str.strip_suffix("]")
    )


def _array_body(text: pl.Expr, *, fast: bool) -> pl.Expr:
    """The entries of an array's text joined by commas; anything not a number stays in it."""
    if fast:
        body = _unwrap(text)
        for literal, by in _FAST:
            body = body.str.replace_all(literal, by, literal=True)
        return body.str.strip_suffix("}")
    body = _unwrap(
        text.str.replace_all(" ", "", literal=True).str.replace('{"values":[', "[", literal=True)
    )
    for literal in _ALL:
        body = body.str.replace_all(literal, "", literal=True)
    return body


def decode_arrays(attrs: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per-token array attributes → one row per (span, array) with `values` (the numbers'
    decimal text, so seconds convert to ns exactly as the producer printed them) and
    the wire `encoding`; plus quarantine rows for values that do not decode.

    `attrs`: the long attribute frame (`_span, _line, key, value`), array keys only.
    """
    v = pl.col("value")
    string, array, data = (v.struct.field(f) for f in ("stringValue", "arrayValue", "bytesValue"))
    frame = attrs.select(
        "_span",
        "_line",
        "key",
        encoding=pl.when(array.is_not_null())
        .then(pl.lit("otel-array"))
        .when(string.str.strip_chars_start().str.starts_with("["))
        .then(pl.lit("json-text"))
        .when(string.is_not_null())
        .then(pl.lit("compressed-text"))
        .when(data.is_not_null())
        .then(pl.lit("bytes"))
        .otherwise(pl.lit("other")),
        text=pl.coalesce(array, string, data),
    )
    plain = frame.filter(pl.col("encoding").is_in(["otel-array", "json-text"]))
    packed = frame.filter(pl.col("encoding").is_in(["compressed-text", "bytes"]))
    # bytes holding JSON (orjson's output) decode without Python; only compressed ones need it
    raw = pl.col("text").str.decode("base64", strict=False)
    packed = packed.with_columns(json_bytes=raw.bin.starts_with(b"[").fill_null(False))
    try:
        json_bytes = packed.filter("json_bytes").with_columns(
            text=pl.col("text").str.decode("base64").cast(pl.String)
        )
        plain = pl.concat([plain, json_bytes.drop("json_bytes")])
        packed = packed.filter(~pl.col("json_bytes"))
    except pl.exceptions.ComputeError:  # invalid UTF-8 somewhere: all of them the slow way
        pass
    packed = packed.drop("json_bytes")
    if packed.height:
        # one Python call per request (not per token): compressed values need zlib
        texts = [_decompress(t) for t in packed["text"]]
        packed = packed.with_columns(text=pl.Series(texts, dtype=pl.String))
    decoded = pl.concat([plain, packed.filter(pl.col("text").is_not_null())]).with_columns(
        name=pl.col("key").replace_strict(ARRAYS), _row=pl.int_range(pl.len())
    )
    split, decoded = _split_shapes(decoded)
    decoded = decoded.with_columns(body=_array_body(pl.col("text"), fast=True))
    # every entry must be a number: only number characters and commas are left in the body
    numbers = decoded.get_column("body").str.contains(_NUMBERS)
    not_numbers = decoded.clear()
    if not numbers.all():  # texts not in polars' spacing: every wrapper removed, checked again
        again = decoded.filter(~numbers).with_columns(body=_array_body(pl.col("text"), fast=False))
        numbers_again = again.get_column("body").str.contains(_NUMBERS)
        not_numbers = again.filter(~numbers_again)
        decoded = pl.concat([decoded.filter(numbers), again.filter(numbers_again)])
    bad = pl.concat(
        [
            frame.filter(pl.col("encoding") == "other").with_columns(why=pl.lit("does not decode")),
            packed.filter(pl.col("text").is_null()).with_columns(why=pl.lit("does not decode")),
            not_numbers.select(frame.columns).with_columns(
                why=pl.lit("holds entries that are not numbers")
            ),
        ]
    ).select(
        location=pl.format("line {} span {}", "_line", "_span"),
        reason=pl.format("per-token attribute {} ({}) {}", "key", "encoding", "why"),
        raw=pl.col("text").fill_null("").str.slice(0, RAW_LIMIT),
    )
    good = decoded.with_columns(
        values=pl.when(pl.col("body") == "")
        .then(pl.lit([], pl.List(pl.String)))
        .otherwise(pl.col("body").str.split(","))
    ).drop("body")
    # A span with one key twice keeps the first array the general path alone would give
    # (from_arrays takes the first): that order, by row, first the texts it took at once.
    n_fast = int(numbers.sum())
    first = pl.concat([split, good.head(n_fast)])
    if first.select(pl.struct("_span", "name").is_duplicated().any()).item():
        first = first.sort("_row")
    good = pl.concat([first, good.slice(n_fast)])
    return good.drop("text", "key", "_row"), bad


def seconds_text_ns(text: pl.Expr) -> pl.Expr:
    """Decimal seconds as printed (`"1750000002.1585567"`, `"0.0351"`, `"5e-05"`) → integer
    ns, exactly: through a 9-decimal Decimal, rounded half up at the ninth decimal (a float64
    detour would lose up to 256 ns on an epoch time)."""
    return (text.cast(pl.Decimal(38, 9), strict=False) * 1_000_000_000).cast(pl.Int64)


def from_arrays(arrays: pl.DataFrame, spans: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Chunks from decoded per-token arrays (`decode_arrays`), and quarantine rows.

    `spans`: `_span, t_start, completion` (gen_ai.usage.completion_tokens, may be null).
    A request whose arrays disagree (in length with each other or with its completion
    tokens, present without output, or running backwards) loses its arrays to quarantine
    with the reason; the request itself is kept.
    """
    present = [n for n in ARRAYS.values() if n in set(arrays["name"].unique())]
    wide = (
        arrays.group_by("_span")
        .agg(
            pl.col("_line").first(),
            *(pl.col("values").filter(pl.col("name") == n).first().alias(n) for n in present),
        )
        .join(spans, on="_span", how="left")
    )
    for n in ARRAYS.values():
        if n not in wide.columns:
            wide = wide.with_columns(pl.lit(None, pl.List(pl.String)).alias(n))
    n_gen = pl.col("gen").list.len()
    expected = pl.coalesce(
        pl.col("nnew").list.eval(pl.element().cast(pl.Float64)).list.sum().cast(pl.Int64), n_gen
    )
    mismatch = pl.any_horizontal(
        (pl.col(n).list.len() != n_gen).fill_null(False) for n in ARRAYS.values() if n != "gen"
    )
    reason = (
        pl.when(pl.col("gen").is_null())
        .then(pl.lit("per-token arrays without gen_ai.latency.per_token_generation_time"))
        .when(mismatch)
        .then(pl.lit("per-token arrays differ in length"))
        .when((pl.col("completion") == 0) & (n_gen > 0))
        .then(pl.lit("per-token array on a request with no output (completion_tokens = 0)"))
        .when(pl.col("completion").is_not_null() & (expected != pl.col("completion")))
        .then(
            pl.format(
                "per-token arrays hold {} tokens but completion_tokens is {}",
                expected,
                pl.col("completion"),
            )
        )
    )
    wide = wide.with_columns(reason=reason)
    rejected = [wide.filter(pl.col("reason").is_not_null())]
    ok = wide.filter(pl.col("reason").is_null() & (n_gen > 0))

    # Time base (research §2.3): a first value above ABSOLUTE_S seconds is absolute; later
    # small values are offsets from the first scheduled time. Otherwise offsets from the
    # span start (the request's arrival), §2.2 and §2.4.
    first_abs = pl.col("gen").list.first().cast(pl.Float64, strict=False) > ABSOLUTE_S
    base_s = pl.coalesce(pl.col("sched").list.first(), pl.col("gen").list.first())
    ok = ok.with_columns(
        time_base=pl.when(first_abs)
        .then(pl.lit("first_scheduled"))
        .otherwise(pl.lit("span_start")),
        base_ns=pl.when(first_abs).then(seconds_text_ns(base_s)).otherwise(pl.col("t_start")),
    )
    # Explode the arrays together; a span lacking one of this block's arrays gets a list of
    # nulls of its length (rare: only when encodings are mixed in one block).
    others = [n for n in ARRAYS.values() if n in present and n != "gen"]
    complete = pl.all_horizontal(pl.lit(True), *(pl.col(n).is_not_null() for n in others))
    nulls = pl.col("gen").list.eval(pl.lit(None, pl.String).repeat_by(pl.len()).explode())
    if not ok.select(complete.all()).item():
        mixed = ok.filter(~complete).with_columns(pl.col(n).fill_null(nulls) for n in others)
        ok = pl.concat([ok.filter(complete), mixed])
    long = (
        ok.select(
            "_span", "_line", "time_base", "base_ns", "gen", *others, pos=pl.int_ranges(n_gen)
        )
        .explode("gen", "pos", *others)
        .with_columns(
            pl.lit(None, pl.String).alias(n)
            for n in ARRAYS.values()
            if n not in others and n != "gen"
        )
    )
    g, s = pl.col("gen"), pl.col("sched")

    def absolute(ns: pl.Expr) -> pl.Expr:
        return pl.when(ns > ABSOLUTE_S * 1e9).then(ns).otherwise(pl.col("base_ns") + ns)

    long = long.with_columns(ts=seconds_text_ns(g), t_scheduled=seconds_text_ns(s))
    long = long.with_columns(ts=absolute(pl.col("ts")), t_scheduled=absolute(pl.col("t_scheduled")))
    # rows are in (span, position) order: a decrease within one span runs backwards
    same_span = pl.col("_span") == pl.col("_span").shift()
    back = ((pl.col("ts").diff() < 0) & same_span).fill_null(False)
    long = long.with_columns(bad=pl.col("ts").is_null() | back)
    backwards = (
        long.filter("bad")
        .group_by("_span")
        .agg(pl.col("_line").first(), pl.col("pos").first(), nan=pl.col("ts").is_null().first())
        .with_columns(
            reason=pl.when("nan")
            .then(pl.format("per-token time at position {} is not a number", "pos"))
            .otherwise(pl.format("per-token times run backwards at position {}", "pos")),
            gen=pl.lit(None, pl.List(pl.String)),
        )
    )
    rejected.append(backwards.select("_span", "_line", "reason", "gen"))
    if backwards.height:
        long = long.join(backwards.select("_span"), on="_span", how="anti")
    # entries of one step share their time: one chunk per run of equal (span, ts)
    weight = pl.col("nnew").cast(pl.Float64).cast(pl.Int64).fill_null(1)
    repeats = ((pl.col("ts") == pl.col("ts").shift()) & same_span).fill_null(False)
    if long.select(repeats.any()).item():
        long = (
            long.with_columns(run=pl.struct("_span", "ts").rle_id(), weight=weight)
            .with_columns(n_tokens=pl.col("weight").sum().over("run").clip(1))
            .filter(pl.col("run").is_first_distinct())
        )
    else:  # every step one entry (the usual case): no runs to merge
        long = long.with_columns(n_tokens=weight.clip(1))
    chunks = long.with_columns(
        pl.col(c).cast(pl.Float64).cast(pl.Int64).alias(out)
        for c, out in (
            ("batch", "batch_size"),
            ("waiting", "waiting"),
            ("total", "total_tokens"),
        )
    ).select(pl.col(k).cast(v) for k, v in TOKEN_COLUMNS.items())
    quarantine = pl.concat([r.select("_span", "_line", "reason", "gen") for r in rejected]).select(
        location=pl.format("line {} span {}", "_line", "_span"),
        reason="reason",
        raw=pl.col("gen").list.join(",").fill_null("").str.slice(0, RAW_LIMIT),
    )
    return chunks, quarantine
