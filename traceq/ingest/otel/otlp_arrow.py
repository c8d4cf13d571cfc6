"""OTLP/JSON lines parsed by pyarrow's JSON reader and flattened with Arrow compute.

pyarrow parses a block with the OTLP schema below on all cores and keeps every nested list as
offsets, so spans, their attributes and their events are flattened by taking children and
parent indices: no Python runs per span, event or attribute. The result is the span frame
otlp_json.py builds from polars' reader (spans.py, `SPAN_FRAME`), value for value
(tests/test_otel_arrow_reader.py holds both readers to that).

polars reads nested JSON into a String column as its own re-printed text, and traceq keeps
span events' attributes that way (the text is what `events.message` and quarantine rows
show). pyarrow cannot keep text, so this reader takes the shapes whose outcome it derives
exactly and names the rows (lines) of every other shape, which polars then reads as before:

* AnyValues of one scalar kind (string, int as text, double, bool, bytes); an `arrayValue`,
  a `kvlistValue`, a value of no kind or of two, or a double whose text polars may print
  otherwise (arrow_values.py) leaves its row to polars;
* span events that are token events (`gen_ai.token`) with a token count that is a positive
  integer, or none; any other event (whose text traceq keeps or quotes) leaves its row, but
  where the protobuf reader made that text (proto_arrow.py, `attributesText`).

A block pyarrow cannot take whole returns None and polars reads all of it, with its quarantine
and messages: a type other than the schema's (`kind` as text, a number where OTLP writes a
string), bad JSON, invalid UTF-8, blank lines, a null attribute or event, a token count
written other than `{"key": …, "value": {"intValue": "…"}}`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from traceq.ingest.otel.arrow_values import field, numpy_of, relist, series, span_attributes
from traceq.ingest.otel.spans import SPAN_FRAME, otlp_span_columns
from traceq.ingest.otel.tokens import TOKEN_LEVEL_EVENTS

_TEXT = pa.string()
_ANY_VALUE = pa.struct(
    [
        ("stringValue", _TEXT),
        ("boolValue", pa.bool_()),
        ("intValue", _TEXT),  # OTLP/JSON writes int64 as a JSON string; a bare number fails
        ("doubleValue", pa.float64()),
        ("bytesValue", _TEXT),
    ]
)
_KEY_VALUES = pa.list_(pa.struct([("key", _TEXT), ("value", _ANY_VALUE)]))
_EVENT = pa.struct([("timeUnixNano", _TEXT), ("name", _TEXT), ("attributes", _KEY_VALUES)])
_SPAN = pa.struct(
    [
        ("traceId", _TEXT),
        ("spanId", _TEXT),
        ("parentSpanId", _TEXT),
        ("name", _TEXT),
        ("kind", pa.int64()),  # the Collector writes the enum's number
        ("startTimeUnixNano", _TEXT),
        ("endTimeUnixNano", _TEXT),
        ("attributes", _KEY_VALUES),
        ("events", pa.list_(_EVENT)),
        ("status", pa.struct([("code", pa.int64()), ("message", _TEXT)])),
    ]
)
_SCOPE_SPANS = pa.list_(pa.struct([("spans", pa.list_(_SPAN))]))
_RESOURCE_SPANS = pa.list_(
    pa.struct(
        [
            ("resource", pa.struct([("attributes", _KEY_VALUES)])),
            ("scopeSpans", _SCOPE_SPANS),
            ("instrumentationLibrarySpans", _SCOPE_SPANS),
        ]
    )
)
ARROW_DOCUMENT = pa.schema([("resourceSpans", _RESOURCE_SPANS), ("batches", _RESOURCE_SPANS)])
_PARSE = pj.ParseOptions(explicit_schema=ARROW_DOCUMENT, unexpected_field_behavior="ignore")
# pyarrow parses blocks of this size on separate threads; a block holds whole lines, so a
# Collector line (often 0.1–2 MB) never spans two. 4 MiB keeps both cores busy on a 32 MiB block.
PARSE_BLOCK_BYTES = 4 << 20
TOKEN_COUNT = "gen_ai.token.count"
_INTEGER = r"^-?[0-9]+$"
# polars' reader finds an event's token count with a pattern over the event's attributes as
# text (otlp_json.token_count): it needs `"key"` then `"value"` then an int. Every mention of
# the key in a block must be in that order, compact or with Python's spacing, for the two
# readers to agree; a block with any other mention is left to polars.
_MENTION = b'"gen_ai.token.count"'
_CANONICAL = (
    b'{"key":"gen_ai.token.count","value":{"intValue":"',
    b'{"key": "gen_ai.token.count", "value": {"intValue": "',
)


_ROW_FRAME = pl.Schema({"_row" if k == "_line" else k: v for k, v in SPAN_FRAME.items()})
_EMPTY = pl.DataFrame(schema=_ROW_FRAME)


@dataclass(frozen=True)
class ArrowSpans:
    """What the Arrow reader made of a block of documents: the span frame of the rows it
    took (`_row`: the document's row in the block), the rows with no spans key, and the
    rows polars must read instead."""

    frame: pl.DataFrame
    no_key_rows: np.ndarray
    polars_rows: np.ndarray


def parse(block: bytes, lines: int) -> pa.Table | None:
    """The block's documents (`lines` lines) as an Arrow table, or None when pyarrow cannot
    read it."""
    if not _counts_in_order(block):
        return None
    options = pj.ReadOptions(block_size=PARSE_BLOCK_BYTES)
    try:
        table = pj.read_json(pa.BufferReader(block), read_options=options, parse_options=_PARSE)
        table.validate(full=True)  # pyarrow keeps invalid UTF-8 as it is: polars' path knows it
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return table if table.num_rows == lines else None  # blank lines: polars' path knows them


def _counts_in_order(block: bytes) -> bool:
    """Whether every token count in the block is written `{"key":…,"value":{"intValue":"…`."""
    mentions = block.count(_MENTION)
    if not mentions:
        return True
    in_order = block.count(_CANONICAL[0])
    if in_order != mentions:
        in_order += block.count(_CANONICAL[1])
    return in_order == mentions


def _children(lists: pa.Array) -> tuple[pa.Array, pa.Array]:
    """The non-null values of a list array and the index of the list each comes from."""
    parents = pc.list_parent_indices(lists)
    values = pc.list_flatten(lists)
    if values.null_count:
        valid = values.is_valid()
        values, parents = values.filter(valid), parents.filter(valid)
    return values, parents


def _event_counts(events: pa.Array, token_event: str) -> pl.DataFrame:
    """Per event: `ts` (ns), `name`, `n_tokens`, `attributes` (the text polars keeps of them,
    where the protobuf reader made it, else null) and `polars` (polars must read its line)."""
    kv, parents = _children(pc.struct_field(events, "attributes"))
    value = pc.struct_field(kv, "value")
    kinds = [f for f in _KINDS if value.type.get_field_index(f) >= 0]
    attrs = pl.DataFrame(
        {"event": series(parents), "key": field(kv, "key"), **{f: field(value, f) for f in kinds}}
    )
    is_count = pl.col("key") == TOKEN_COUNT
    integer = pl.col("intValue")
    attrs = attrs.select(
        "event",
        is_count=is_count,
        # as otlp_json.token_count reads the text: through a double
        n=integer.cast(pl.Float64, strict=False).cast(pl.Int64, strict=False),
        # not one AnyValue kind; a count other than a plain integer
        odd=pl.sum_horizontal(pl.col(kinds).is_not_null()) != 1,
        odd_count=is_count & ~integer.str.contains(_INTEGER).fill_null(False),
    )
    texted = events.type.get_field_index("attributesText") >= 0
    per_event = pl.DataFrame(
        {
            "ts": field(events, "timeUnixNano").cast(pl.Int64, strict=False),
            "name": field(events, "name"),
            "attributes": field(events, "attributesText")
            if texted
            else pl.repeat(None, len(events), dtype=pl.String, eager=True),
        }
    )
    if attrs.height == len(events) and attrs["event"].equals(pl.int_range(len(events), eager=True)):
        # one attribute per event (the usual `gen_ai.token`): no grouping needed
        per_event = per_event.with_columns(
            n_tokens=pl.when(attrs["is_count"]).then(attrs["n"]),
            counted=attrs["is_count"],
            odd=attrs["odd"],
            odd_count=attrs["odd_count"],
        )
    else:
        first = attrs.filter("is_count").unique("event", keep="first", maintain_order=True)
        flags = attrs.group_by("event").agg(
            pl.col("odd", "odd_count").any(), counted=pl.col("is_count").any()
        )
        flags = flags.join(first.select("event", n_tokens="n"), on="event", how="left")
        events_ = per_event.with_row_index("event").with_columns(pl.col("event").cast(pl.Int64))
        per_event = events_.join(flags, on="event", how="left", maintain_order="left")
    ours = (pl.col("name") == token_event).fill_null(False)
    if token_event in TOKEN_LEVEL_EVENTS:  # the events' own checks read their text
        ours = pl.lit(False)
    # a count that is not positive: quarantine quotes the event's text, which polars has
    garbled = pl.col("counted").fill_null(False) & ~(pl.col("n_tokens") > 0).fill_null(False)
    # other events are taken where their text is at hand (the protobuf reader's)
    untaken = (
        pl.when(ours).then(pl.col("odd").fill_null(False)).otherwise(pl.col("attributes").is_null())
    )
    return per_event.select(
        "ts",
        "name",
        "n_tokens",
        "attributes",
        polars=untaken | pl.col("odd_count").fill_null(False) | garbled,
    )


_KINDS = ("stringValue", "intValue", "bytesValue", "doubleValue", "boolValue", "arrayValue")


def _first_string(kv_lists: pa.Array, key: str) -> pl.Series:
    """Per list: the stringValue of its first attribute named `key` (polars' `_resource_attr`)."""
    kv, parents = _children(kv_lists)
    attrs = pl.DataFrame(
        {
            "list": series(parents),
            "key": field(kv, "key"),
            "text": series(pc.struct_field(pc.struct_field(kv, "value"), "stringValue")),
        }
    )
    first = attrs.filter(pl.col("key") == key).unique("list", keep="first", maintain_order=True)
    lists = pl.DataFrame({"list": pl.int_range(len(kv_lists), dtype=pl.Int64, eager=True)})
    return lists.join(first, on="list", how="left", maintain_order="left")["text"]


def _batch_spans(
    batch: pa.RecordBatch, token_event: str
) -> tuple[pl.DataFrame, np.ndarray, np.ndarray] | None:
    """(span frame with `_row`, rows without spans key, rows polars must read) of a parsed
    batch; None when a list holds a null attribute or event (polars' path decides those)."""
    documents, other = batch.column("resourceSpans"), batch.column("batches")
    no_key = np.flatnonzero(numpy_of(pc.and_(documents.is_null(), other.is_null())))
    resources, rs_row = _children(pc.coalesce(documents, other))
    resource_attrs = pc.struct_field(pc.struct_field(resources, "resource"), "attributes")
    service = _first_string(resource_attrs, "service.name")
    instance = pl.select(
        pl.coalesce(
            _first_string(resource_attrs, "service.instance.id"),
            _first_string(resource_attrs, "host.name"),
            service,
        )
    ).to_series()
    scope_lists = pc.coalesce(
        pc.struct_field(resources, "scopeSpans"),
        pc.struct_field(resources, "instrumentationLibrarySpans"),
    )
    scopes, scope_rs = _children(scope_lists)
    spans, span_scope = _children(pc.struct_field(scopes, "spans"))
    span_rs = numpy_of(pc.take(scope_rs, span_scope))
    span_row = numpy_of(rs_row)[span_rs]

    got = span_attributes(pc.struct_field(spans, "attributes"))
    event_lists = pc.struct_field(spans, "events")
    events = pc.list_flatten(event_lists)
    if got is None or events.null_count:
        return None
    attributes, bad_attrs = got
    per_event = _event_counts(events, token_event)
    event_span = numpy_of(pc.list_parent_indices(event_lists))
    needs_polars = bad_attrs.to_numpy().copy()
    needs_polars[event_span[per_event["polars"].to_numpy()]] = True
    event_structs = (
        per_event.select("ts", "name", "n_tokens", "attributes").to_struct("e").to_arrow()
    )
    status = pc.struct_field(spans, "status")
    frame = pl.DataFrame(
        {
            "_row": span_row,
            "service": service.gather(span_rs),
            "instance": instance.gather(span_rs),
            **{f: field(spans, f) for f in ("traceId", "spanId", "parentSpanId", "name")},
            "kind": field(spans, "kind").cast(pl.String),
            "startTimeUnixNano": field(spans, "startTimeUnixNano"),
            "endTimeUnixNano": field(spans, "endTimeUnixNano"),
            "status_code": field(status, "code").cast(pl.String),
            "status_message": field(status, "message"),
            "attributes": series(attributes),
            "events": series(relist(event_lists, event_structs)),
        }
    )
    frame = frame.select(
        pl.col("_row").cast(pl.Int64),
        pl.lit(0, pl.Int64).alias("_span"),
        *otlp_span_columns(),
        "status_code",
        "status_message",
        "attributes",
        "events",
    )
    return frame, no_key, np.unique(span_row[needs_polars])


def to_spans(table: pa.Table, token_event: str) -> ArrowSpans | None:
    """The span frame of a parsed block, with `_row` (the row of the span's document) in
    place of `_line`, without the rows polars must read; None when a null attribute or event
    leaves the block to polars."""
    batches = table.combine_chunks().to_batches()  # one batch: each step runs once
    if not batches:
        return ArrowSpans(_EMPTY, np.zeros(0, np.int64), np.zeros(0, np.int64))
    (batch,) = batches
    got = _batch_spans(batch, token_event)
    if got is None:
        return None
    frame, no_key, rows = got
    if len(rows):
        frame = frame.filter(~pl.col("_row").is_in(pl.Series(rows).implode()))
    return ArrowSpans(frame.cast(_ROW_FRAME), no_key, rows)
