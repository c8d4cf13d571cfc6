"""OTLP protobuf messages decoded by numpy straight into the Arrow table of OTLP/JSON documents.

`to_table` reads a block of `ExportTraceServiceRequest` messages level by level (request,
resource spans, scope spans, span, event, key-value, value) with proto_wire.py, and builds the
table pyarrow's JSON reader makes of the same messages written as OTLP/JSON (otlp_arrow.py's
`ARROW_DOCUMENT`, row i being message i; event times as int64, not text), so otlp_arrow.py
flattens it as it does JSON: no Python runs per span, event or attribute. Values follow the
OTLP/JSON mapping of proto_shape.py: ids as hex, 64-bit integers as decimal text, absent
fields as their defaults.

A message whose shape this reader does not map exactly is declined, row by row, and goes
through proto_shape.py's mapping and the JSON readers as before:

* a `kvlistValue`, a value with two kinds set, a double that is not finite
  (OTLP/JSON writes those as text), an `arrayValue` holding anything but ints and doubles
  (kept as the text polars makes of its JSON, which a double is printed in surely: the
  per-token arrays of vLLM's spans);
* a singular field written twice (protobuf merges messages and keeps the last scalar);
* a known field number with another wire type, or a `kind` / status code outside int32.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import sliding_window_view

from traceq.ingest.otel.arrow_values import (
    ARRAY_KINDS,
    arrow_of,
    attributes_text,
    double_text,
    offsets_of,
    printed_arrays,
    series,
)
from traceq.ingest.otel.otlp_arrow import ARROW_DOCUMENT
from traceq.ingest.otel.proto_wire import (
    FIXED32,
    FIXED64,
    LEN,
    PAD,
    VARINT,
    Fields,
    fields,
    last_of,
    padded,
)

# Field numbers and wire types (opentelemetry/proto/trace/v1/trace.proto, common/v1/common.proto).
_REQUEST = {1: LEN}
_RESOURCE_SPANS = {1: LEN, 2: LEN, 3: LEN}
_RESOURCE = {1: LEN, 2: VARINT}
_SCOPE_SPANS = {1: LEN, 2: LEN, 3: LEN}
_SPAN = {
    **{n: LEN for n in (1, 2, 3, 4, 5, 9, 11, 13, 15)},
    **{n: VARINT for n in (6, 10, 12, 14)},
    7: FIXED64,
    8: FIXED64,
    16: FIXED32,
}
_STATUS = {2: LEN, 3: VARINT}
_EVENT = {1: FIXED64, 2: LEN, 3: LEN, 4: VARINT}
_KEY_VALUE = {1: LEN, 2: LEN}
_ANY_VALUE = {1: LEN, 2: VARINT, 3: VARINT, 4: FIXED64, 5: LEN, 6: LEN, 7: LEN}
_ARRAY_VALUE = {1: LEN}
_DECLINED_KINDS = (6,)  # kvlistValue


def _replaced(struct: pa.StructType, name: str, type_: pa.DataType) -> pa.StructType:
    return pa.struct([pa.field(name, type_) if f.name == name else f for f in struct])


# The JSON reader's types but for the events' times, int64 here (null past int64, as the
# flatten's cast of the JSON's text makes them): no decimal text made only to be parsed back;
# and values with an `arrayValue` as the text polars' reader keeps (the JSON reader has none).
_JSON_RS = ARROW_DOCUMENT.field("resourceSpans").type.value_type
_JSON_SPAN = _JSON_RS.field("scopeSpans").type.value_type.field("spans").type.value_type
_JSON_KV = _JSON_SPAN.field("attributes").type.value_type
_VALUE = pa.struct([*_JSON_KV.field("value").type, pa.field("arrayValue", pa.string())])
_KV = _replaced(_JSON_KV, "value", _VALUE)
_ATTRIBUTES = pa.list_(_KV)
_EVENT_TYPE = pa.struct(
    [
        *_replaced(
            _replaced(_JSON_SPAN.field("events").type.value_type, "timeUnixNano", pa.int64()),
            "attributes",
            _ATTRIBUTES,
        ),
        pa.field("attributesText", pa.string()),  # arrow_values.attributes_text
    ]
)
_SPAN_TYPE = _replaced(
    _replaced(_JSON_SPAN, "events", pa.list_(_EVENT_TYPE)), "attributes", _ATTRIBUTES
)
_SCOPES = pa.list_(pa.struct([("spans", pa.list_(_SPAN_TYPE))]))
_RESOURCE_TYPE = pa.struct([("attributes", _ATTRIBUTES)])
_RS = _replaced(_replaced(_JSON_RS, "scopeSpans", _SCOPES), "instrumentationLibrarySpans", _SCOPES)
_RS = _replaced(_RS, "resource", _RESOURCE_TYPE)
_DOC = pa.list_(_RS)
DOCUMENT = pa.schema([("resourceSpans", _DOC), ("batches", _DOC)])
_HEX = np.frombuffer(b"".join(f"{i:02x}".encode() for i in range(256)), np.uint8).reshape(256, 2)
_INT32 = (-(1 << 31), 1 << 31)


class _Level:
    """The messages of one level: their fields, and the block row each belongs to."""

    def __init__(self, buf: np.ndarray, at: Fields, row: np.ndarray, expected: dict[int, int]):
        self.buf, self.n, self.row = buf, len(at.owner), row
        self.fields = fields(buf, at.start, at.end)
        self.declined = row[self.fields.misfit(expected)]

    def many(self, number: int, wire: int) -> tuple[Fields, np.ndarray]:
        """A repeated field: its occurrences (owner = message index) and their rows."""
        got = self.fields.pick(number, wire)
        return got, self.row[got.owner]

    def one(self, number: int, wire: int) -> tuple[Fields, np.ndarray, np.ndarray]:
        """A singular field: (occurrences, has it, index of the last) per message; a message
        with two is declined."""
        got = self.fields.pick(number, wire)
        twice = got.owner[1:][got.owner[1:] == got.owner[:-1]]
        self.declined = np.concatenate([self.declined, self.row[twice]])
        has, index = last_of(got, self.n)
        return got, has, index


def to_table(payloads: list[bytes], untexted: str | None = None) -> tuple[pa.Table, np.ndarray]:
    """The messages as the JSON reader's document table, and the rows to decline. Span events
    also carry their attributes as the text polars keeps of them (`attributesText`), but those
    named `untexted` (the token event, read from its attributes alone).

    Raises proto_wire.WireError on bytes that are not protobuf."""
    sizes = np.array([len(p) for p in payloads], dtype=np.int64)
    ends = np.cumsum(sizes)
    buf = padded(b"".join(payloads))
    rows = np.arange(len(payloads), dtype=np.int64)
    top = Fields(rows, ends - sizes, ends, rows.astype(np.uint64), rows)
    request = _Level(buf, top, rows, _REQUEST)
    declined = [request.declined]

    rs_at, rs_row = request.many(1, LEN)
    rs = _Level(buf, rs_at, rs_row, _RESOURCE_SPANS)
    resource_at, has_resource, resource_index = rs.one(1, LEN)
    resource = _Level(buf, resource_at, rs_row[resource_at.owner], _RESOURCE)
    resource_attrs = _key_values(resource, 1, declined)
    # resources' attribute lists, re-indexed by resource spans (none: an empty list)
    resource_attrs = _regroup(resource_attrs, has_resource, resource_index)

    scope_at, scope_row = rs.many(2, LEN)
    scopes = _Level(buf, scope_at, scope_row, _SCOPE_SPANS)
    span_at, span_row = scopes.many(2, LEN)
    spans = _Level(buf, span_at, span_row, _SPAN)
    span_array = _spans(spans, declined, untexted)

    scope_array = pa.StructArray.from_arrays(
        [_lists(span_at.owner, scopes.n, span_array)], fields=list(_SCOPES.value_type)
    )
    rs_array = pa.StructArray.from_arrays(
        [
            pa.StructArray.from_arrays([resource_attrs], fields=list(_RS.field("resource").type)),
            _lists(scope_at.owner, rs.n, scope_array),
            pa.nulls(rs.n, _SCOPES),
        ],
        fields=list(_RS),
    )
    documents = _lists(rs_at.owner, len(payloads), rs_array)
    table = pa.Table.from_arrays([documents, pa.nulls(len(payloads), _DOC)], schema=DOCUMENT)
    declined += [rs.declined, resource.declined, scopes.declined]
    return table, np.unique(np.concatenate(declined))


def _spans(spans: _Level, declined: list[np.ndarray], untexted: str | None) -> pa.StructArray:
    columns: list[pa.Array] = [_hex_ids(spans, n) for n in (1, 2, 4)]
    columns.append(_text(spans, 5))
    columns.append(_small_int(spans, 6, declined))
    columns += [_nanos(spans, 7), _nanos(spans, 8)]
    columns.append(_key_values(spans, 9, declined))
    event_at, event_row = spans.many(11, LEN)
    events = _Level(spans.buf, event_at, event_row, _EVENT)
    names, attributes = _text(events, 2), _key_values(events, 3, declined)
    texted = series(names).ne_missing(untexted).to_numpy() if untexted else np.ones(events.n, bool)
    event_array = pa.StructArray.from_arrays(
        [_nanos(events, 1, text=False), names, attributes, attributes_text(attributes, texted)],
        fields=list(_EVENT_TYPE),
    )
    columns.append(_lists(event_at.owner, spans.n, event_array))
    status_at, has_status, status_index = spans.one(15, LEN)
    status = _Level(spans.buf, status_at, spans.row[status_at.owner], _STATUS)
    code = _regroup(_small_int(status, 3, declined), has_status, status_index, fill=0)
    message = _regroup(_text(status, 2), has_status, status_index, fill="")
    columns.append(
        pa.StructArray.from_arrays([code, message], fields=list(_SPAN_TYPE.field("status").type))
    )
    declined += [spans.declined, events.declined, status.declined]
    return pa.StructArray.from_arrays(columns, fields=list(_SPAN_TYPE))


def _key_values(level: _Level, number: int, declined: list[np.ndarray]) -> pa.ListArray:
    """The repeated KeyValue field `number` of each message, as a list array."""
    kv_at, kv_row = level.many(number, LEN)
    kv = _Level(level.buf, kv_at, kv_row, _KEY_VALUE)
    key = _text(kv, 1)
    value_at, has_value, value_index = kv.one(2, LEN)
    values = _Level(level.buf, value_at, kv.row[value_at.owner], _ANY_VALUE)
    kinds = {n: values.fields.pick(n, w) for n, w in _ANY_VALUE.items()}
    set_kinds = np.bincount(np.concatenate([k.owner for k in kinds.values()]), minlength=values.n)
    odd = set_kinds > 1
    for n in _DECLINED_KINDS:
        odd[kinds[n].owner] = True
    children = [_value_of(values, kinds[n], n) for n in (1, 2, 3, 4)]
    double = children[3]
    finite = np.isfinite(series(double).fill_null(0.0).to_numpy())
    odd |= ~finite
    children.append(_value_of(values, kinds[7], 7))
    children.append(_array_text(values, kinds[5], odd, declined))
    declined += [values.declined, values.row[odd], kv.declined]
    # a key-value without a value reads as `"value": {}`: every kind null
    value = pa.StructArray.from_arrays(
        [_regroup(c, has_value, value_index) for c in children], fields=list(_VALUE)
    )
    kv_array = pa.StructArray.from_arrays([key, value], fields=list(_KV))
    return _lists(kv_at.owner, level.n, kv_array)


_KIND_TYPES = {1: pa.string(), 2: pa.bool_(), 3: pa.string(), 4: pa.float64(), 7: pa.string()}


def _array_text(
    values: _Level, kind: Fields, odd: np.ndarray, declined: list[np.ndarray]
) -> pa.Array:
    """AnyValue kind 5 (`arrayValue`) per value as the text polars keeps of its OTLP/JSON
    (`{"values": [{"intValue": "1"}, {"doubleValue": 0.5}]}`, `{"values": []}` when empty, as
    proto_shape.py maps it), null where another kind is set. Values whose array holds an
    element other than one int or one double polars prints surely (arrow_values.py,
    `double_text`) are marked in `odd`."""
    has, index = last_of(kind, values.n)
    taken = index[has]
    at = Fields(
        kind.owner[taken], kind.start[taken], kind.end[taken], kind.value[taken], kind.key[taken]
    )
    arrays = _Level(values.buf, at, values.row[at.owner], _ARRAY_VALUE)
    element_at, element_row = arrays.many(1, LEN)
    elements = _Level(values.buf, element_at, element_row, _ANY_VALUE)
    of_kind = {n: elements.fields.pick(n, w) for n, w in _ANY_VALUE.items()}
    set_kinds = np.bincount(
        np.concatenate([k.owner for k in of_kind.values()]), minlength=elements.n
    )
    bad = set_kinds != 1
    for n in set(_ANY_VALUE) - set(ARRAY_KINDS):
        bad[of_kind[n].owner] = True
    # each kind printed over its own elements only (a per-token array: millions of them)
    numbers = pl.repeat(None, elements.n, dtype=pl.String, eager=True)
    kind_of = np.zeros(elements.n, dtype=np.int64)
    for n in ARRAY_KINDS:
        got = of_kind[n]
        if not len(got.owner):
            continue
        if n == 3:
            printed = pl.Series(got.value.view(np.int64)).cast(pl.String)
        else:
            printed, unsure = double_text(
                pl.Series(_fixed64(values.buf, got.start).view(np.float64))
            )
            bad[got.owner[unsure.to_numpy()]] = True
        numbers = numbers.scatter(got.owner, printed)
        kind_of[got.owner] = n
    bad_arrays = np.zeros(arrays.n, dtype=bool)
    bad_arrays[element_at.owner[bad]] = True
    odd[at.owner[bad_arrays]] = True
    declined += [arrays.declined, elements.declined]
    return _spread(printed_arrays(element_at.owner, arrays.n, numbers, kind_of), has)


def _value_of(values: _Level, kind: Fields, number: int) -> pa.Array:
    """AnyValue kind `number` per value (null where another kind, or none, is set)."""
    has, index = last_of(kind, values.n)
    taken = index[has]
    if number == 1:
        typed = _strings(values.buf, kind.start[taken], kind.end[taken])
    elif number == 2:
        typed = arrow_of(kind.value[taken] != 0)
    elif number == 3:
        typed = arrow_of(kind.value[taken].view(np.int64)).cast(pa.string())
    elif number == 4:
        typed = arrow_of(_fixed64(values.buf, kind.start[taken]).view(np.float64))
    else:  # bytes, as OTLP/JSON writes them: base64
        offsets, data = _gather(values.buf, kind.start[taken], kind.end[taken])
        raw = pa.Array.from_buffers(
            pa.binary(), len(taken), [None, pa.py_buffer(offsets), pa.py_buffer(data)]
        )
        typed = series(raw).bin.encode("base64").to_arrow()
    return _spread(typed.cast(_KIND_TYPES[number]), has)


def _spread(values: pa.Array, has: np.ndarray) -> pa.Array:
    """`values` (one per True in `has`) placed at those positions, null elsewhere."""
    if has.all():
        return values
    if not len(values):
        return pa.nulls(len(has), values.type)
    slot = np.cumsum(has) - 1
    return values.take(arrow_of(np.where(has, slot, 0), mask=~has))


def _regroup(
    values: pa.Array, has: np.ndarray, index: np.ndarray, fill: int | str | None = None
) -> pa.Array:
    """Per message: the value of its (last) occurrence `index`, or `fill` where it has none
    (default: an empty list, or null)."""
    if has.all() and len(values) == len(has) and (index == np.arange(len(has))).all():
        return values  # one occurrence per message, in order: the values as they are
    taken = values.take(arrow_of(np.where(has, index, 0), mask=~has))
    if has.all():
        return taken
    if fill is None and pa.types.is_list(values.type):
        lengths = series(pc.list_value_length(taken)).fill_null(0).to_numpy()
        return pa.ListArray.from_arrays(offsets_of(lengths), taken.flatten())  # [] where none
    if fill is None:
        return taken
    return series(taken).fill_null(fill).to_arrow().cast(values.type)


def _lists(owner: np.ndarray, n: int, values: pa.Array) -> pa.ListArray:
    """List i holds the values whose owner is i (owners sorted)."""
    return pa.ListArray.from_arrays(offsets_of(np.bincount(owner, minlength=n)), values)


def _at(values: np.ndarray, has: np.ndarray, index: np.ndarray) -> np.ndarray:
    """values[index] where `has`, 0 elsewhere."""
    if not len(values):
        return np.zeros(len(has), dtype=values.dtype)
    return np.where(has, values[np.where(has, index, 0)], 0).astype(values.dtype)


def _text(level: _Level, number: int) -> pa.Array:
    """A singular string field per message ("" where absent, as protobuf reads it)."""
    got, has, index = level.one(number, LEN)
    return _strings(level.buf, _at(got.start, has, index), _at(got.end, has, index))


def _hex_ids(level: _Level, number: int) -> pa.Array:
    """A singular bytes field per message as lowercase hex ("" where absent)."""
    got, has, index = level.one(number, LEN)
    start, end = _at(got.start, has, index), _at(got.end, has, index)
    offsets, data = _gather(level.buf, start, end)
    return _string_array(offsets * 2, _HEX[data])


def _small_int(level: _Level, number: int, declined: list[np.ndarray]) -> pa.Array:
    """A singular enum (int32) field per message, 0 where absent; outside int32: declined."""
    got, has, index = level.one(number, VARINT)
    value = _at(got.value, has, index).view(np.int64)
    declined.append(level.row[(value < _INT32[0]) | (value >= _INT32[1])])
    return arrow_of(value.astype(np.int64))


def _nanos(level: _Level, number: int, text: bool = True) -> pa.Array:
    """A singular fixed64 field per message ("0" / 0 where absent): decimal text, or int64
    with null past int64."""
    got, has, index = level.one(number, FIXED64)
    value = np.zeros(level.n, dtype=np.uint64)
    value[has] = _fixed64(level.buf, got.start[index[has]])
    if text:
        return arrow_of(value).cast(pa.string())
    return arrow_of(value.view(np.int64), mask=value >= np.uint64(1 << 63))


def _fixed64(buf: np.ndarray, start: np.ndarray) -> np.ndarray:
    cells = buf[start[:, None] + np.arange(8)]
    return np.ascontiguousarray(cells).view("<u8").reshape(-1)


def _gather(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (int32) and the bytes of `buf[start[i]:end[i]]` for every i, one after another."""
    sizes = (end - start).astype(np.int64)
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    if offsets[-1] >= 1 << 30:
        raise OverflowError("a block's text past 1 GiB")
    widest = int(sizes.max()) if len(sizes) else 0
    if widest <= PAD and len(sizes) * widest <= 4 * offsets[-1] + 4096:
        # short strings (keys, names, ids): a row of `widest` bytes each, cut to size
        cells = sliding_window_view(buf, max(widest, 1))[start]
        data = cells[np.arange(max(widest, 1)) < sizes[:, None]]
    else:
        data = buf[np.repeat(start - offsets[:-1], sizes) + np.arange(offsets[-1])]
    return offsets.astype(np.int32), data


def _strings(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> pa.Array:
    return _string_array(*_gather(buf, start, end))


def _string_array(offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    """A string array of `len(offsets) - 1` values (protobuf's parser checked the UTF-8)."""
    return pa.Array.from_buffers(
        pa.string(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
