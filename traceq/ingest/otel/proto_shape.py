"""Decoded OTLP protobuf messages in the OTLP/JSON shape the JSON path reads.

Fields are read directly (no reflection, unlike protobuf's `MessageToDict`, which was 3–4×
slower here); ids become hex and 64-bit integers decimal text, as in OTLP/JSON.
"""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np
import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

# The proto3 JSON mapping's names for the doubles JSON has no literal for.
_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


# An ArrayValue whose elements are all `double_value`: each element on the wire is the tag of
# `values` (field 1, length-delimited: 0x0A), the length 9, the tag of `double_value` (field
# 4, 64-bit: 0x21) and 8 little-endian bytes. All `int_value`: 0x0A, the length, the tag of
# `int_value` (field 3, varint: 0x18) and the varint. Such arrays (per-token times, batch
# sizes) are decoded with numpy and written by orjson in one call each, not element by
# element; anything else takes the general path. `orjson.Fragment` (orjson >= 3.9.16)
# embeds the JSON as it is.
_DOUBLE_ELEMENT = np.array([0x0A, 9, 0x21], dtype=np.uint8)
_FRAGMENT = getattr(orjson, "Fragment", None)


def _double_array(raw: bytes) -> Any:
    """The JSON of a double-only ArrayValue (its wire bytes) as an orjson Fragment, or None."""
    n = len(raw) // 11
    if n == 0 or len(raw) != 11 * n:
        return None
    cells = np.frombuffer(raw, dtype=np.uint8).reshape(n, 11)
    if not (cells[:, :3] == _DOUBLE_ELEMENT).all():
        return None
    values = np.frombuffer(cells[:, 3:].tobytes(), dtype="<f8")
    if not np.isfinite(values).all():  # NaN / Infinity are strings in OTLP/JSON
        return None
    text = orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]
    body = text.replace(b",", b'},{"doubleValue":')
    return _FRAGMENT(b'{"values":[{"doubleValue":' + body + b"}]}")  # type: ignore[misc]


def _int_array(raw: bytes) -> Any:
    """The JSON of an int-only ArrayValue (its wire bytes) as an orjson Fragment, or None.

    Every byte below 0x80 ends a field or a varint, so an all-int array has exactly four per
    element: the 0x0A tag, the length, the 0x18 tag and the varint's last byte, in a row but
    for the varint's leading bytes (each >= 0x80); checked, then the varints summed up.
    """
    data = np.frombuffer(raw, dtype=np.uint8)
    ends = np.flatnonzero(data < 0x80)
    if len(ends) == 0 or len(ends) % 4:
        return None
    start, length, tag, last = ends.reshape(-1, 4).T
    if not (
        start[0] == 0
        and last[-1] == len(data) - 1
        and (start[1:] == last[:-1] + 1).all()
        and (length == start + 1).all()
        and (tag == start + 2).all()
        and (data[start] == 0x0A).all()
        and (data[tag] == 0x18).all()
        and (data[length] == last - start - 1).all()
        and (last - tag <= 10).all()
    ):
        return None
    # varint bytes: from tag + 1 to last; each adds its low 7 bits at 7 × its place
    counts = last - tag
    offsets = np.cumsum(counts) - counts
    place = np.arange(counts.sum()) - np.repeat(offsets, counts)
    where = np.repeat(tag + 1, counts) + place
    bits = (data[where] & 0x7F).astype(np.uint64) << (7 * place).astype(np.uint64)
    values = np.add.reduceat(bits, offsets)
    text = orjson.dumps(values.view(np.int64), option=orjson.OPT_SERIALIZE_NUMPY)[1:-1]
    body = text.replace(b",", b'"},{"intValue":"')
    return _FRAGMENT(b'{"values":[{"intValue":"' + body + b'"}]}')  # type: ignore[misc]


def _fast_array(message: Any) -> Any:
    """A double-only or int-only ArrayValue as an orjson Fragment, or None."""
    if _FRAGMENT is None:
        return None
    raw = message.SerializeToString()
    return _double_array(raw) if raw[2:3] == b"\x21" else _int_array(raw)


def _value(v: Any) -> dict:
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return {"stringValue": v.string_value}
    if kind == "int_value":
        return {"intValue": str(v.int_value)}
    if kind == "double_value":
        d = v.double_value
        return {"doubleValue": d if math.isfinite(d) else _NON_FINITE[str(d)]}
    if kind == "bool_value":
        return {"boolValue": v.bool_value}
    if kind == "bytes_value":
        return {"bytesValue": base64.b64encode(v.bytes_value).decode()}
    if kind == "array_value":
        fast = _fast_array(v.array_value)
        if fast is not None:
            return {"arrayValue": fast}
        return {"arrayValue": {"values": [_value(x) for x in v.array_value.values]}}
    if kind == "kvlist_value":
        return {"kvlistValue": {"values": _attributes(v.kvlist_value.values)}}
    return {}


def _attributes(attrs: Any) -> list[dict]:
    return [{"key": a.key, "value": _value(a.value)} for a in attrs]


def _span(s: Any) -> dict:
    return {
        "traceId": s.trace_id.hex(),
        "spanId": s.span_id.hex(),
        "parentSpanId": s.parent_span_id.hex(),
        "name": s.name,
        "kind": s.kind,
        "startTimeUnixNano": str(s.start_time_unix_nano),
        "endTimeUnixNano": str(s.end_time_unix_nano),
        "attributes": _attributes(s.attributes),
        "events": [
            {
                "timeUnixNano": str(e.time_unix_nano),
                "name": e.name,
                "attributes": _attributes(e.attributes),
            }
            for e in s.events
        ],
        "status": {"code": s.status.code, "message": s.status.message},
    }


def as_document(message: ExportTraceServiceRequest) -> dict:
    """One ExportTraceServiceRequest as an OTLP/JSON document."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes(rs.resource.attributes)},
                "scopeSpans": [{"spans": [_span(s) for s in ss.spans]} for ss in rs.scope_spans],
            }
            for rs in message.resource_spans
        ]
    }
