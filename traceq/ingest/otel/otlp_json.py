"""OTLP/JSON: Collector file-exporter JSON lines, single documents, and Tempo `batches`.

The hot path hands blocks of lines straight to polars' NDJSON reader with the OTLP schema
and flattens them with explode / unnest, so no Python code runs per span or per event.
Only a block that polars rejects is re-read line by line to quarantine the bad lines.
"""

from __future__ import annotations

import io
import itertools
from collections.abc import Callable, Iterator
from typing import BinaryIO

import orjson
import polars as pl

from traceq.ingest.blocks import cap_of, cut_long_lines, is_json, iter_line_blocks
from traceq.ingest.otel.spans import KEY_VALUES, SPAN_FRAME, normalise_id
from traceq.ingest.otel.split import SPLIT_BYTES, split_line
from traceq.schema import RAW_LIMIT

BLOCK_BYTES = 32 << 20
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


def _ns(col: str) -> pl.Expr:
    # Straight from the decimal text: a detour through float64 would drop the last digits.
    return pl.col(col).str.strip_chars().cast(pl.Int64, strict=False)


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
        "service",
        "instance",
        normalise_id("traceId", 32).alias("trace_id"),
        normalise_id("spanId", 16).alias("span_id"),
        normalise_id("parentSpanId", 16).alias("parent_id"),
        "name",
        "kind",
        _ns("startTimeUnixNano").alias("t_start"),
        _ns("endTimeUnixNano").alias("t_end"),
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


def read_document(data: bytes) -> list[bytes] | None:
    """A whole-file JSON document (pretty-printed OTLP, Tempo) as compact lines, or None."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    docs = doc if isinstance(doc, list) else [doc]
    out = []
    for d in docs:
        if isinstance(d, dict) and isinstance(d.get("trace"), dict):
            d = d["trace"]  # Tempo API v2 wraps the document
        out.append(orjson.dumps(d))
    return out


def iter_span_frames(
    stream: BinaryIO, quarantine: Quarantine, progress: Callable[[int], None]
) -> Iterator[tuple[pl.DataFrame, pl.DataFrame]]:
    """Span frames (and no-span documents) of an OTLP/JSON stream, block by block.

    A file whose first line is not a whole JSON value is taken for one (pretty-printed)
    document and parsed whole, up to the document cap; if that fails it is read as lines.
    """
    blocks = iter_line_blocks(stream, progress, BLOCK_BYTES)
    cap = cap_of(stream)
    document_limit = cap.max_document_bytes if cap else DOCUMENT_LIMIT
    first = next(blocks, None)
    if first is None:
        return
    held = [first]
    text = first[0]
    head = text[: text.find(b"\n") if b"\n" in text else len(text)]
    # A pretty-printed document starts with a short line; a long one is a line of its own.
    if text.lstrip()[:1] in (b"{", b"[") and len(head) <= SPLIT_BYTES and not is_json(head):
        size = len(text)
        for block in blocks:
            held.append(block)
            size += len(block[0])
            if size > document_limit:
                break
        else:
            lines = read_document(b"".join(b for b, _ in held))
            if lines:
                yield documents_to_spans(read_lines(b"\n".join(lines) + b"\n", 1, quarantine))
                return
    for text, at_line in itertools.chain(held, blocks):
        yield documents_to_spans(read_lines(text, at_line, quarantine))


def read_lines(block: bytes, first_line: int, quarantine: Quarantine) -> pl.DataFrame:
    """OTLP documents (with `_line`) of a block of JSON lines; a line over SPLIT_BYTES is read
    in pieces, so polars never holds a big line whole (traceq/ingest/otel/split.py)."""
    frames = [
        _read_big_line(part, first, quarantine) if big else _read_block(part, first, quarantine)
        for part, first, big in cut_long_lines(block, first_line, SPLIT_BYTES)
    ]
    if not frames:
        return _parse_lines([], [])
    return frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical_relaxed")


def _read_big_line(line: bytes, number: int, quarantine: Quarantine) -> pl.DataFrame:
    """One line longer than SPLIT_BYTES, read as small pieces (traceq/ingest/otel/split.py)."""
    pieces = split_line(line, number, quarantine)
    if pieces is None:
        reason = "truncated JSON line" if _is_prefix_of_json(line) else "not an OTLP/JSON object"
        quarantine.append(_bad_line(number, reason, line))
        pieces = []
    try:
        return _parse_lines(pieces, [number] * len(pieces))
    except Exception:
        keep = [p for p in pieces if _fits_schema(p, number, quarantine)]
        return _parse_lines(keep, [number] * len(keep))
