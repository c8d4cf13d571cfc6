"""OTLP/JSON: Collector file-exporter JSON lines, single documents, and Tempo `batches`.

The hot path parses blocks of lines with pyarrow's JSON reader and flattens them with Arrow
compute (otlp_arrow.py), so no Python code runs per span or per event. Lines whose shape that
reader does not take are read by polars' NDJSON reader with the OTLP schema and flattened with
explode / unnest, as is a block pyarrow rejects; only a block that polars rejects too is
re-read line by line to quarantine the bad lines.
"""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np
import orjson
import polars as pl

from traceq.ingest.blocks import NEWLINE, cap_of, cut_long_lines, is_json, iter_line_blocks
from traceq.ingest.otel import otlp_arrow
from traceq.ingest.otel.spans import KEY_VALUES, SPAN_FRAME, otlp_span_columns
from traceq.ingest.otel.split import SPLIT_BYTES, split_line
from traceq.schema import RAW_LIMIT

BLOCK_BYTES = 32 << 20
TOKEN_EVENT = "gen_ai.token"  # SpanConventions.token_event's default
# Past this share of a block's lines needing polars, polars reads the whole block: reading
# most of it twice (pyarrow, then polars) would cost more than polars alone.
MAX_POLARS_SHARE = 0.5
ARROW_READER = True  # False: polars reads every block (tests compare both paths)
DOCUMENT_LIMIT = 512 << 20  # a single pretty-printed document is read whole up to this size

_SPAN = pl.Struct(
    {
        "traceId": pl.String,
        "spanId": pl.String,
        "parentSpanId": pl.String,
        "name": pl.String,
        "kind": pl.String,
        "startTimeUnixNano": pl.String,
        "endTimeUnixNano": pl.String,
        "attributes": KEY_VALUES,
        "events": pl.List(
            pl.Struct({"timeUnixNano": pl.String, "name": pl.String, "attributes": pl.String})
        ),
        "status": pl.Struct({"code": pl.String, "message": pl.String}),
    }
)
_SCOPE_SPANS = pl.List(pl.Struct({"spans": pl.List(_SPAN)}))
_RESOURCE_SPANS = pl.List(
    pl.Struct(
        {
            "resource": pl.Struct({"attributes": KEY_VALUES}),
            "scopeSpans": _SCOPE_SPANS,
            "instrumentationLibrarySpans": _SCOPE_SPANS,  # OTLP < 0.15, old Tempo
        }
    )
)
DOCUMENT = pl.Schema({"resourceSpans": _RESOURCE_SPANS, "batches": _RESOURCE_SPANS})

Quarantine = list[dict]


def _resource_attr(key: str) -> pl.Expr:
    return (
        pl.col("resource")
        .struct.field("attributes")
        .list.eval(pl.element().filter(pl.element().struct.field("key") == key))
        .list.first()
        .struct.field("value")
        .struct.field("stringValue")
    )


# `{"key":"gen_ai.token.count","value":{"intValue":"2"}}` inside an event's raw attributes.
_TOKEN_COUNT = (
    r'"key"\s*:\s*"gen_ai\.token\.count"\s*,\s*"value"\s*:\s*\{\s*'
    r'"(?:intValue|doubleValue)"\s*:\s*"?(-?[0-9][0-9.eE+-]*)'
)


def token_count(attributes: pl.Expr) -> pl.Expr:
    """`gen_ai.token.count` of an event from its raw attributes JSON (null when absent)."""
    return (
        attributes.str.extract(_TOKEN_COUNT, 1)
        .cast(pl.Float64, strict=False)
        .cast(pl.Int64, strict=False)
    )


def documents_to_spans(docs: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Flatten OTLP documents (with `_line`) into a span frame; also lines with no spans key."""
    no_key = docs.filter(pl.col("resourceSpans").is_null() & pl.col("batches").is_null())
    resources = (
        docs.select("_line", rs=pl.coalesce("resourceSpans", "batches"))
        .explode("rs")
        .drop_nulls("rs")
        .unnest("rs")
        .select(
            "_line",
            service=_resource_attr("service.name"),
            instance=pl.coalesce(
                _resource_attr("service.instance.id"),
                _resource_attr("host.name"),
                _resource_attr("service.name"),
            ),
            scopes=pl.coalesce("scopeSpans", "instrumentationLibrarySpans"),
        )
    )
    spans = (
        resources.explode("scopes")
        .drop_nulls("scopes")
        .with_columns(spans=pl.col("scopes").struct.field("spans"))
        .drop("scopes")
        .explode("spans")
        .drop_nulls("spans")
        .unnest("spans")
    )
    frame = spans.select(
        "_line",
        pl.lit(0, pl.Int64).alias("_span"),
        *otlp_span_columns(),
        pl.col("status").struct.field("code").alias("status_code"),
        pl.col("status").struct.field("message").alias("status_message"),
        pl.col("attributes"),
        pl.col("events").list.eval(
            pl.struct(
                ts=pl.element().struct.field("timeUnixNano").cast(pl.Int64, strict=False),
                name=pl.element().struct.field("name"),
                n_tokens=token_count(pl.element().struct.field("attributes")),
                attributes=pl.element().struct.field("attributes"),
            )
        ),
    )
    return frame.cast(SPAN_FRAME), no_key


def _bad_line(line_no: int, reason: str, raw: bytes) -> dict:
    return {
        "location": f"line {line_no}",
        "reason": reason,
        "raw": raw[:RAW_LIMIT].decode("utf-8", "replace"),
    }


def _read_block(block: bytes, first_line: int, quarantine: Quarantine) -> pl.DataFrame:
    """Parse a block of JSON lines; bad lines go to `quarantine`, never abort the block."""
    try:
        docs = pl.read_ndjson(io.BytesIO(block), schema=DOCUMENT, ignore_errors=False)
        if docs.height == block.count(b"\n") + (not block.endswith(b"\n")):
            return docs.with_row_index("_line", offset=first_line).cast({"_line": pl.Int64})
    except Exception:  # polars raises several error types for malformed JSON
        pass
    # Slow path, only for a block polars rejected (or that has blank lines).
    good: list[bytes] = []
    numbers: list[int] = []
    for offset, line in enumerate(block.split(b"\n")):
        if not line.strip():
            continue
        number = first_line + offset
        try:
            parsed = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            pieces = split_line(line, number, quarantine)  # invalid UTF-8: keep the good spans
            if pieces is not None:
                good += pieces
                numbers += [number] * len(pieces)
                continue
            reason = "truncated JSON line" if _is_prefix_of_json(line) else f"not JSON: {exc}"
            quarantine.append(_bad_line(number, reason, line))
            continue
        if not isinstance(parsed, dict):
            quarantine.append(_bad_line(number, "not a JSON object", line))
            continue
        good.append(line)
        numbers.append(number)
    try:
        docs = _parse_lines(good, numbers)
    except Exception:
        # Valid JSON that polars cannot read with the OTLP schema: find the lines one by one.
        keep = [i for i, line in enumerate(good) if _fits_schema(line, numbers[i], quarantine)]
        docs = _parse_lines([good[i] for i in keep], [numbers[i] for i in keep])
    return docs


def _parse_lines(lines: list[bytes], numbers: list[int]) -> pl.DataFrame:
    if not lines:
        return pl.DataFrame(schema={"_line": pl.Int64, **DOCUMENT})
    docs = pl.read_ndjson(io.BytesIO(b"\n".join(lines)), schema=DOCUMENT)
    return docs.with_columns(_line=pl.Series(numbers, dtype=pl.Int64)).select(
        "_line", *DOCUMENT.names()
    )


def _fits_schema(line: bytes, number: int, quarantine: Quarantine) -> bool:
    """True when the line reads with the OTLP schema; else quarantine it and return False."""
    try:
        pl.read_ndjson(io.BytesIO(line), schema=DOCUMENT)
    except Exception as exc:
        reason = f"does not match the OTLP/JSON schema: {str(exc)[:200]}"
        quarantine.append(_bad_line(number, reason, line))
        return False
    return True


def _is_prefix_of_json(line: bytes) -> bool:
    """A line that starts like a document but ends early (a cut-off write)."""
    text = line.strip()
    return text.startswith(b"{") and not text.endswith(b"}")


WRAPPERS = ("trace", "result")  # Tempo API v2, Jaeger api/v3
_WRAPPED = re.compile(rb'\s*\{\s*"(?:' + "|".join(WRAPPERS).encode() + rb')"\s*:\s*\{')


def read_document(data: bytes) -> list[bytes] | None:
    """A whole-file JSON document (pretty-printed OTLP, Tempo, Jaeger api/v3), or compact
    lines of query API responses, as compact lines, or None."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:  # responses saved one after the other, a line each
            doc = [orjson.loads(line) for line in data.splitlines() if line.strip()]
        except orjson.JSONDecodeError:
            return None
    docs = doc if isinstance(doc, list) else [doc]
    out = []
    for d in docs:
        wrapper = next((k for k in WRAPPERS if isinstance(d, dict) and k in d), None)
        if wrapper and isinstance(d[wrapper], dict):
            d = d[wrapper]  # a query API's response wraps the document
        out.append(orjson.dumps(d))
    return out


def iter_span_frames(
    stream: BinaryIO,
    quarantine: Quarantine,
    progress: Callable[[int], None],
    token_event: str = TOKEN_EVENT,
) -> Iterator[tuple[pl.DataFrame, pl.DataFrame]]:
    """Span frames (and no-span documents) of an OTLP/JSON stream, block by block.

    A file whose first line is not a whole JSON value is taken for one (pretty-printed)
    document and parsed whole, up to the document cap; if that fails it is read as lines.
    """
    blocks = iter_line_blocks(stream, progress, BLOCK_BYTES)
    readers = Readers(token_event)
    cap = cap_of(stream)
    document_limit = cap.max_document_bytes if cap else DOCUMENT_LIMIT
    first = next(blocks, None)
    if first is None:
        return
    held = [first]
    text = first[0]
    head = text[: text.find(b"\n") if b"\n" in text else len(text)]
    # A pretty-printed document starts with a short line; a long one is a line of its own.
    # Query APIs wrap the document, compact as curl saves it: Tempo's API v2 in `{"trace":
    # {...}}` (tempopb.TraceByIDResponse, its first field), Jaeger's api/v3 (grpc-gateway, a
    # streamed response) in `{"result": {...}}`. Read as a document too, to unwrap it.
    pretty = len(head) <= SPLIT_BYTES and not is_json(head)
    if text.lstrip()[:1] in (b"{", b"[") and (pretty or _WRAPPED.match(text)):
        size = len(text)
        for block in blocks:
            held.append(block)
            size += len(block[0])
            if size > document_limit:
                break
        else:
            lines = read_document(b"".join(b for b, _ in held))
            if lines:
                yield spans_of_lines(b"\n".join(lines) + b"\n", 1, quarantine, readers)
                return
    for text, at_line in itertools.chain(held, blocks):
        yield spans_of_lines(text, at_line, quarantine, readers)


@dataclass
class Readers:
    """Which reader a file's blocks go to: the Arrow reader, until it declines a block (one it
    cannot parse, or whose lines it leaves to polars past MAX_POLARS_SHARE: a producer whose
    spans carry other events); then polars alone, so the file is not parsed twice."""

    token_event: str = TOKEN_EVENT
    arrow: bool = True
    probed: bool = False  # the Arrow reader tried on the head of the file's first block


# The Arrow reader first reads this much of a file's first block (whole lines), so a file it
# would decline (see Readers) costs it that much, not a whole block parsed twice.
PROBE_BYTES = 1 << 20


def spans_of_lines(
    block: bytes, first_line: int, quarantine: Quarantine, readers: Readers
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Span frame and no-span documents (`_line`) of a block of JSON lines; a line over
    SPLIT_BYTES is read in pieces (traceq/ingest/otel/split.py)."""
    parts = []
    for part, first, big in cut_long_lines(block, first_line, SPLIT_BYTES):
        if big:
            pieces = _pieces(part, first, quarantine)
            numbers = np.full(len(pieces), first, dtype=np.int64)
            got = _arrow_spans(b"\n".join(pieces) + b"\n", numbers, readers)
            if got is None:
                got = documents_to_spans(_parse_pieces(pieces, first, quarantine))
        else:
            n = part.count(b"\n") + (not part.endswith(b"\n"))
            numbers = np.arange(first, first + n, dtype=np.int64)
            got = _arrow_spans(part, numbers, readers)
            if got is None:
                got = documents_to_spans(_read_block(part, first, quarantine))
        parts.append(got)
    if not parts:
        return documents_to_spans(_parse_lines([], []))
    return pl.concat([f for f, _ in parts]), pl.concat([n.select("_line") for _, n in parts])


def _arrow_spans(
    block: bytes, numbers: np.ndarray, readers: Readers
) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The Arrow reader's span frame of a block whose row i is line `numbers[i]`, with the
    rows it leaves read by polars; None when polars had better read the whole block."""
    if not (ARROW_READER and readers.arrow and len(numbers)):
        return None
    if not readers.probed:
        readers.probed = True
        cut = block.find(b"\n", PROBE_BYTES) + 1
        if 0 < cut < len(block):
            head = block[:cut]
            _arrow_spans(head, numbers[: head.count(b"\n")], readers)
            if not readers.arrow:
                return None
    table = otlp_arrow.parse(block, len(numbers))
    native = None if table is None else otlp_arrow.to_spans(table, readers.token_event)
    if native is None or len(native.polars_rows) > MAX_POLARS_SHARE * len(numbers):
        readers.arrow = False
        return None
    frame, no_key = native.frame, native.no_key_rows
    if len(native.polars_rows):
        rows = native.polars_rows
        try:
            docs = _parse_lines(_lines(block, rows), rows.tolist())  # `_line`: the row
        except Exception:  # polars raises several error types for JSON it cannot read
            return None
        more, more_no_key = documents_to_spans(docs)
        frame = pl.concat([frame, more.rename({"_line": "_row"})])
        frame = frame.sort("_row", maintain_order=True)
        no_key = np.sort(np.concatenate([no_key, more_no_key["_line"].to_numpy()]))
    lines = pl.Series("_line", numbers[frame["_row"].to_numpy()], dtype=pl.Int64)
    frame = frame.with_columns(lines).select(SPAN_FRAME.names())
    return frame, pl.DataFrame({"_line": numbers[no_key]}, schema={"_line": pl.Int64})


def _lines(block: bytes, index: np.ndarray) -> list[bytes]:
    """Lines number `index` (0-based) of a block without blank lines."""
    ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == NEWLINE)
    if not len(ends) or ends[-1] != len(block) - 1:
        ends = np.append(ends, len(block))
    starts = np.concatenate(([0], ends[:-1] + 1))
    return [block[starts[i] : ends[i]] for i in index.tolist()]


def _pieces(line: bytes, number: int, quarantine: Quarantine) -> list[bytes]:
    """The documents a line longer than SPLIT_BYTES is cut into (split.py)."""
    pieces = split_line(line, number, quarantine)
    if pieces is None:
        reason = "truncated JSON line" if _is_prefix_of_json(line) else "not an OTLP/JSON object"
        quarantine.append(_bad_line(number, reason, line))
        return []
    return pieces


def _parse_pieces(pieces: list[bytes], number: int, quarantine: Quarantine) -> pl.DataFrame:
    try:
        return _parse_lines(pieces, [number] * len(pieces))
    except Exception:
        keep = [p for p in pieces if _fits_schema(p, number, quarantine)]
        return _parse_lines(keep, [number] * len(keep))
