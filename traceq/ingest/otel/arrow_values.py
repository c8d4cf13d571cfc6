"""Span attribute values from pyarrow's parse in the shape polars' reader gives them.

polars reads every AnyValue kind into text (spans.py, `ANY_VALUE`), so a double's text is the
one polars prints: its shortest round-trip digits, never an exponent. Arrow's cast prints the
same digits with `.0` on integers and an exponent past 1e16 or below 1e-4; `double_text`
undoes both, and names the doubles where the two may still differ, whose line polars then
reads (otlp_arrow.py).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from traceq.ingest.otel.spans import ANY_VALUE_FIELDS


def series(array: pa.Array | pa.ChunkedArray) -> pl.Series:
    """An Arrow array as a polars Series (no copy where the types allow)."""
    return pl.Series(pa.chunked_array([array]) if isinstance(array, pa.Array) else array)


# pyarrow's `pa.array`, `pa.scalar` and `Array.to_numpy` import pandas (0.25-0.4 s of every
# ingest process, as much as parsing 30 MB); the readers cross between numpy and Arrow through
# these instead (tests/test_otel_proto_reader.py checks an ingest never imports pandas).


def numpy_of(array: pa.Array) -> np.ndarray:
    """An Arrow array without nulls as numpy (through polars, no copy where the type allows)."""
    return series(array).to_numpy()


def arrow_of(values: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """A 1-d numpy array of numbers or booleans as Arrow, null where `mask` is True.

    >>> arrow_of(np.array([1, 2, 3]), mask=np.array([False, True, False])).to_pylist()
    [1, None, 3]
    """
    values = np.ascontiguousarray(values)
    validity = None if mask is None else pa.py_buffer(np.packbits(~mask, bitorder="little"))
    if values.dtype == np.bool_:
        data, kind = pa.py_buffer(np.packbits(values, bitorder="little")), pa.bool_()
    else:
        data, kind = pa.py_buffer(values), pa.from_numpy_dtype(values.dtype)
    return pa.Array.from_buffers(kind, len(values), [validity, data])


def offsets_of(lengths: np.ndarray) -> pa.Array:
    """The int32 offsets of lists of these lengths.

    >>> offsets_of(np.array([2, 0, 1])).to_pylist()
    [0, 2, 2, 3]
    """
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return arrow_of(offsets)


def field(struct: pa.Array, name: str) -> pl.Series:
    """One field of an Arrow struct array as a polars Series."""
    return series(pc.struct_field(struct, name))


# polars' cast writes 1e-7 as `1e-7` and 1e16 as `1e16`; polars' JSON text never uses an
# exponent. Past this many digits of padding the line goes to polars (values never seen).
_MAX_PAD = 400
_EXPONENT = r"^(-?)([0-9])(?:\.([0-9]+))?e([-+]?[0-9]+)$"


def _positional(text: pl.Expr) -> pl.Expr:
    """`-1.25e-7` as `-0.000000125`, `1.5e17` as `150000000000000000`; other text as it is."""
    parts = text.str.extract_groups(_EXPONENT)
    sign = parts.struct.field("1")
    digits = parts.struct.field("2") + parts.struct.field("3").fill_null("")
    exponent = parts.struct.field("4").cast(pl.Int64)
    zeros = pl.lit("0" * _MAX_PAD)
    small = sign + "0." + zeros.str.slice(0, -exponent - 1) + digits
    pad = exponent + 1 - digits.str.len_chars()
    large = sign + digits + zeros.str.slice(0, pad.clip(0))
    return (
        pl.when(parts.struct.field("2").is_null())
        .then(text)
        .when(exponent.abs() > _MAX_PAD)
        .then(None)
        .when(exponent < 0)
        .then(small)
        .otherwise(large)
    )


def double_text(value: pl.Series) -> tuple[pl.Series, pl.Series]:
    """Doubles as polars prints a JSON number it reads into text (shortest round-trip digits,
    no exponent), and where that is unsure.

    When two shortest digit strings are equally near the double, polars takes the upper, the
    cast the even one. That tie needs the double to be exactly a decimal with one digit more
    than the text has after its point (k): value × 2^(k+1) an integer (value × 10^(k+1) one,
    for a binary fraction). Only then is a last digit that one up or down gives the same
    double unsure (full-precision latencies and epoch seconds are not), so only those few
    values are printed again; and only texts with an exponent are rewritten (a per-token
    array holds millions of doubles).

    >>> [list(s) for s in double_text(pl.Series([0.25, 1e-7, float("nan"), None]))]
    [['0.25', '0.0000001', 'NaN', None], [False, False, True, False]]
    """
    text = value.cast(pl.String).str.strip_suffix(".0")
    exponent = text.str.contains("e", literal=True).fill_null(False).arg_true()
    if len(exponent):
        written = pl.DataFrame({"text": text.gather(exponent)}).select(_positional(pl.col("text")))
        text = text.scatter(exponent, written.to_series())
    frame = pl.DataFrame({"value": value, "text": text})
    value_, text_ = pl.col("value"), pl.col("text")
    decimals = (text_.str.len_chars() - text_.str.find(".", literal=True) - 1).fill_null(0)
    scaled = value_ * pl.lit(2.0).pow(decimals + 1)
    flags = frame.select(
        tie=(scaled == scaled.floor()).fill_null(False),
        unsure=(
            text_.is_null() | value_.is_nan() | value_.is_infinite() | (text_ == "-0")
        )  # polars writes `-0` as `0` and `-0.0` as `-0`
        & value_.is_not_null(),
    )
    ties = flags["tie"].arg_true()
    unsure = flags["unsure"]
    if len(ties):
        last = text_.str.slice(-1).cast(pl.Int64, strict=False)
        head = text_.str.slice(0, text_.str.len_chars() - 1)
        up = (head + (last + 1).cast(pl.String)).cast(pl.Float64, strict=False)
        down = (head + (last - 1).cast(pl.String)).cast(pl.Float64, strict=False)
        near = frame[ties].select(
            ((last < 9) & (up == value_)).fill_null(False)
            | ((last > 0) & (down == value_)).fill_null(False)
        )
        unsure = unsure.scatter(ties, unsure.gather(ties) | near.to_series())
    return text.alias("text"), unsure.alias("unsure")


def _n_kinds(kinds: Iterable[pl.Series]) -> pl.Series:
    """How many AnyValue kinds each value has."""
    return pl.DataFrame([s.is_not_null().alias(str(i)) for i, s in enumerate(kinds)]).select(
        pl.sum_horizontal(pl.all())
    )[:, 0]


def _values(kv: pa.Array) -> tuple[pa.Array, pl.Series]:
    """Key/values in polars' shape (every AnyValue kind as text) and which ones polars must
    read: a value of no kind or of two (a `kvlistValue`; an `arrayValue` but where the
    protobuf reader made its text, proto_arrow.py), an unsure double."""
    value = pc.struct_field(kv, "value")
    kinds = {f: field(value, f) for f in ("stringValue", "boolValue", "intValue", "bytesValue")}
    double, unsure = double_text(field(value, "doubleValue"))
    kinds["boolValue"] = kinds["boolValue"].cast(pl.String)
    kinds["doubleValue"] = double
    if value.type.get_field_index("arrayValue") >= 0:  # the protobuf reader's text of arrays
        kinds["arrayValue"] = field(value, "arrayValue")
    n_kinds = _n_kinds(kinds.values())
    bad = unsure | (n_kinds != 1)
    absent = pl.repeat(None, len(kv), dtype=pl.String, eager=True)
    frame = pl.DataFrame({f: kinds.get(f, absent).alias(f) for f in ANY_VALUE_FIELDS})
    values = pa.StructArray.from_arrays(
        [pc.struct_field(kv, "key"), frame.to_struct("value").to_arrow()],
        names=["key", "value"],
    )
    return values, bad


def relist(lists: pa.Array, values: pa.Array) -> pa.Array:
    """`values` (one per non-null element of `lists`, in order) as lists shaped like `lists`."""
    lengths = series(pc.list_value_length(lists)).fill_null(0).to_numpy()
    mask = lists.is_null() if lists.null_count else None
    return pa.ListArray.from_arrays(offsets_of(lengths), values, mask=mask)


def span_attributes(lists: pa.Array) -> tuple[pa.Array, pl.Series] | None:
    """Span attributes in polars' shape, and per list whether polars must read its line;
    None when a list holds a null pair."""
    kv = pc.list_flatten(lists)
    if kv.null_count:
        return None
    parents = pc.list_parent_indices(lists)
    values, bad = _values(kv)
    bad_lists = np.zeros(len(lists), dtype=bool)
    bad_lists[series(parents).filter(bad).to_numpy()] = True
    return relist(lists, values), pl.Series(bad_lists)


_VALUE_TEXT = {  # AnyValue kind → the text polars prints of its OTLP/JSON value
    "stringValue": ('{"stringValue": "', '"}'),
    "boolValue": ('{"boolValue": ', "}"),
    "intValue": ('{"intValue": "', '"}'),
    "doubleValue": ('{"doubleValue": ', "}"),
    "bytesValue": ('{"bytesValue": "', '"}'),
    "arrayValue": ('{"arrayValue": ', "}"),
}
ARRAY_KINDS = {3: _VALUE_TEXT["intValue"], 4: _VALUE_TEXT["doubleValue"]}
"""The AnyValue kinds an `arrayValue`'s elements may have in the protobuf reader
(proto_arrow.py), each with the text polars prints around it when it reads the array's JSON
into text (spans.py, `ANY_VALUE`)."""


def printed_arrays(owner: np.ndarray, n: int, numbers: pl.Series, kind_of: np.ndarray) -> pa.Array:
    """Per array (`owner`: each element's array), its elements' `numbers` as polars prints the
    array: arrays of one kind joined with that kind's wrapping as the separator, so the
    millions of elements of a per-token array take one join and no text of their own.

    >>> numbers, kinds = pl.Series(["1", "2", "0.5", "3"]), np.array([3, 3, 4, 3])
    >>> printed_arrays(np.array([0, 0, 2, 2]), 3, numbers, kinds).to_pylist()
    ['{"values": [{"intValue": "1"}, {"intValue": "2"}]}', '{"values": []}',
     '{"values": [{"doubleValue": 0.5}, {"intValue": "3"}]}']
    """
    lengths = np.bincount(owner, minlength=n)
    offsets = offsets_of(lengths)
    lists = _lists(offsets, numbers)
    out = pl.repeat('{"values": []}', n, dtype=pl.String, eager=True)
    of_one_kind = np.zeros(n, dtype=bool)
    for kind, (before, after) in ARRAY_KINDS.items():
        one = np.flatnonzero(
            (np.bincount(owner[kind_of == kind], minlength=n) == lengths) & (lengths > 0)
        )
        if not len(one):
            continue
        of_one_kind[one] = True
        joined = lists.gather(one).list.join(after + ", " + before)
        out = out.scatter(one, '{"values": [' + before + joined + after + "]}")
    mixed = np.flatnonzero(~of_one_kind & (lengths > 0))
    if len(mixed):
        wrapped = numbers.clone()
        for kind, (before, after) in ARRAY_KINDS.items():
            at = np.flatnonzero(kind_of == kind)
            wrapped = wrapped.scatter(at, before + numbers.gather(at) + after)
        joined = _lists(offsets, wrapped).gather(mixed).list.join(", ")
        out = out.scatter(mixed, '{"values": [' + joined + "]}")
    return out.to_arrow().cast(pa.string())


def _lists(offsets: pa.Array, items: pl.Series) -> pl.Series:
    """The list array `offsets` over `items` (nulls as "")."""
    return series(pa.ListArray.from_arrays(offsets, items.fill_null("").to_arrow()))


# A key or string polars prints as it is inside quotes: no quote, backslash or control byte.
_PLAIN = r'^[^\x00-\x1f"\\\x7f]*$'


def attributes_text(lists: pa.Array, want: np.ndarray) -> pa.Array:
    """Per list of key-values of the protobuf reader (proto_arrow.py: one AnyValue kind each,
    arrays already as text) where `want`, the JSON text polars keeps of the list when it reads
    OTLP/JSON (`[{"key": "a", "value": {"intValue": "1"}}]`, spans.py's event `attributes`);
    null elsewhere, and where a key or string would need escaping or a double prints unsure.

    >>> kv = pa.array([[{"key": "n", "value": {"intValue": "2"}}], []])
    >>> attributes_text(kv, np.array([True, True])).to_pylist()
    ['[{"key": "n", "value": {"intValue": "2"}}]', '[]']
    """
    index = np.flatnonzero(want)
    chosen = lists.take(arrow_of(index))
    kv, parents = pc.list_flatten(chosen), pc.list_parent_indices(chosen)
    value = pc.struct_field(kv, "value")
    kinds = {f: field(value, f) for f in _VALUE_TEXT if value.type.get_field_index(f) >= 0}
    unsure = pl.Series(np.zeros(len(kv), dtype=bool))
    if "boolValue" in kinds:
        kinds["boolValue"] = kinds["boolValue"].cast(pl.String)
    if "doubleValue" in kinds:
        kinds["doubleValue"], unsure = double_text(kinds["doubleValue"])
    frame = pl.DataFrame({"key": field(kv, "key"), **kinds, "unsure": unsure})
    printed = pl.lit("{}")  # a value of no kind
    for name, (before, after) in _VALUE_TEXT.items():
        if name in kinds:
            printed = (
                pl.when(pl.col(name).is_not_null())
                .then(before + pl.col(name) + after)
                .otherwise(printed)
            )
    plain = pl.col("key").str.contains(_PLAIN)
    if "stringValue" in kinds:
        plain &= pl.col("stringValue").str.contains(_PLAIN).fill_null(True)
    items = frame.select(
        text='{"key": "' + pl.col("key") + '", "value": ' + printed + "}",
        bad=~plain | pl.col("unsure"),
    )
    texts = series(relist(chosen, items["text"].to_arrow()))
    bad = np.zeros(len(index), dtype=bool)
    bad[series(parents).filter(items["bad"]).to_numpy()] = True
    joined = pl.select(pl.when(pl.lit(bad)).then(None).otherwise("[" + texts.list.join(", ") + "]"))
    out = pl.repeat(None, len(lists), dtype=pl.String, eager=True)
    out = out.scatter(index, joined.to_series())
    return out.to_arrow().cast(pa.string())
