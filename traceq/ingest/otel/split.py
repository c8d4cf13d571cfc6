"""Cutting one big or damaged OTLP/JSON line into small documents, a few spans each.

polars' NDJSON reader holds a parsed line whole, at about 2.5 KB per JSON object: an 11 MB
line of 100 k spans took 1.3 GB, one span with 1 M attributes 4 GB. Lines longer than
SPLIT_BYTES are therefore parsed here (orjson: ~12x their size) and re-emitted as documents
of about PIECE_BYTES, which pyarrow's reader (otlp_arrow.py) or polars' then read in bounded
memory. A span keeps at most
MAX_ATTRIBUTES attributes (the OpenTelemetry SDK keeps 128 by default); the cut is noted in
quarantine. A line with invalid UTF-8 is decoded with replacement characters and only the
spans that contain one are quarantined; the rest of the line is kept.
"""

from __future__ import annotations

from typing import Any

import orjson

from traceq.schema import RAW_LIMIT

SPLIT_BYTES = 2 << 20  # lines longer than this are cut into pieces before they are read
PIECE_BYTES = 1 << 20  # about this much JSON per piece
MAX_ATTRIBUTES = 4096  # attributes kept per span (in a line longer than SPLIT_BYTES)
_BAD_CHAR = "\ufffd"

Quarantine = list[dict]


def split_line(line: bytes, number: int, quarantine: Quarantine) -> list[bytes] | None:
    """Small OTLP documents with the spans of `line`, or None when it is no OTLP JSON object."""
    try:
        doc = orjson.loads(line)
        damaged = False
    except orjson.JSONDecodeError:
        try:
            doc = orjson.loads(line.decode("utf-8", "replace"))
        except orjson.JSONDecodeError:
            return None
        damaged = True
    if not isinstance(doc, dict):
        return None
    groups = doc.get("resourceSpans", doc.get("batches"))
    if not isinstance(groups, list):
        return None
    pieces: list[bytes] = []
    for group in groups:
        if isinstance(group, dict):
            pieces += _cut_group(group, number, damaged, quarantine)
    return pieces or [b'{"resourceSpans":[]}']


def _cut_group(
    group: dict[str, Any], number: int, damaged: bool, quarantine: Quarantine
) -> list[bytes]:
    resource = group.get("resource") if isinstance(group.get("resource"), dict) else {}
    scopes = group.get("scopeSpans", group.get("instrumentationLibrarySpans")) or []
    pieces: list[bytes] = []
    spans: list[bytes] = []
    size = 0
    for scope in scopes if isinstance(scopes, list) else []:
        for span in scope.get("spans") or [] if isinstance(scope, dict) else []:
            if not isinstance(span, dict):
                continue
            text = _checked(span, number, damaged, quarantine)
            if text is None:
                continue
            spans.append(text)
            size += len(text)
            if size >= PIECE_BYTES:
                pieces.append(_piece(resource, spans))  # type: ignore[arg-type]
                spans, size = [], 0
    if spans:
        pieces.append(_piece(resource, spans))  # type: ignore[arg-type]
    return pieces


def _checked(
    span: dict[str, Any], number: int, damaged: bool, quarantine: Quarantine
) -> bytes | None:
    """The span as JSON, attributes cut to MAX_ATTRIBUTES; None if it holds invalid UTF-8."""
    attributes = span.get("attributes")
    if isinstance(attributes, list) and len(attributes) > MAX_ATTRIBUTES:
        quarantine.append(
            _row(
                number,
                f"span has {len(attributes):,} attributes; the first {MAX_ATTRIBUTES:,} kept",
                orjson.dumps(attributes[MAX_ATTRIBUTES : MAX_ATTRIBUTES + 8]),
            )
        )
        span = {**span, "attributes": attributes[:MAX_ATTRIBUTES]}
    text = orjson.dumps(span)
    if damaged and _BAD_CHAR.encode() in text:
        quarantine.append(
            _row(number, "span with invalid UTF-8 (its line's other spans kept)", text)
        )
        return None
    return text


def _piece(resource: dict[str, Any], spans: list[bytes]) -> bytes:
    head = b'{"resourceSpans":[{"resource":' + orjson.dumps(resource)
    return head + b',"scopeSpans":[{"spans":[' + b",".join(spans) + b"]}]}]}"


def _row(number: int, reason: str, raw: bytes) -> dict[str, str]:
    return {
        "location": f"line {number}",
        "reason": reason,
        "raw": raw[:RAW_LIMIT].decode("utf-8", "replace"),
    }
