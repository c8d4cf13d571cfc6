"""Jaeger UI / query-API JSON exports: `{"data": [{"traceID", "spans": [...], "processes"}]}`.

Times are microseconds; tags are `{key, type, value}`; span events are `logs` whose `event`
field names them (the OTel-to-Jaeger mapping). Each trace is re-encoded as one JSON line and
read by polars with a fixed schema, so spans and logs are flattened without Python loops.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import BinaryIO

import orjson
import polars as pl

from traceq.ingest.blocks import read_whole
from traceq.ingest.otel.spans import SPAN_FRAME
from traceq.schema import RAW_LIMIT

_TAGS = pl.List(pl.Struct({"key": pl.String, "type": pl.String, "value": pl.String}))
_TRACE = pl.Schema(
    {  # type: ignore[arg-type]
        "spans": pl.List(
            pl.Struct(
                {
                    "traceID": pl.String,
                    "spanID": pl.String,
                    "operationName": pl.String,
                    "references": pl.List(pl.Struct({"refType": pl.String, "spanID": pl.String})),
                    "startTime": pl.Int64,
                    "duration": pl.Int64,
                    "tags": _TAGS,
                    "logs": pl.List(pl.Struct({"timestamp": pl.Int64, "fields": _TAGS})),
                    "processID": pl.String,
                }
            )
        ),
        "processes": pl.String,  # an object keyed by process id: decoded below
    }
)
_VARIANT = {"string": "stringValue", "bool": "boolValue", "int64": "intValue",
            "float64": "doubleValue", "binary": "bytesValue"}  # fmt: skip


def _as_key_values(tags: pl.Expr) -> pl.Expr:
    """Jaeger tags in the OTLP KeyValue shape of the span frame."""
    e = pl.element()
    value = pl.struct(  # type: ignore[call-overload]
        **{
            variant: pl.when(e.struct.field("type").str.to_lowercase() == jtype).then(
                e.struct.field("value")
            )
            for jtype, variant in _VARIANT.items()
        },
        arrayValue=pl.lit(None, pl.String),
        kvlistValue=pl.lit(None, pl.String),
    )
    return tags.list.eval(pl.struct(key=e.struct.field("key"), value=value))


def _tag(tags: str, key: str) -> pl.Expr:
    return (
        pl.col(tags)
        .list.eval(pl.element().filter(pl.element().struct.field("key") == key))
        .list.first()
        .struct.field("value")
    )


def iter_span_frames(
    stream: BinaryIO, quarantine: list[dict], progress: Callable[[int], None]
) -> Iterator[tuple[pl.DataFrame, pl.DataFrame]]:
    data = read_whole(stream, progress)
    if data is None:  # longer than the line cap: quarantined by the driver
        return
    try:
        doc = orjson.loads(data)
        traces = doc["data"]
        assert isinstance(traces, list)
    except (orjson.JSONDecodeError, KeyError, TypeError, AssertionError) as exc:
        reason = f"not a Jaeger JSON export: {exc}"
        raw = data[:RAW_LIMIT].decode("utf-8", "replace")
        quarantine.append({"location": "offset 0", "reason": reason, "raw": raw})
        return
    lines, services = [], []
    for number, trace in enumerate(traces, start=1):
        if not isinstance(trace, dict):
            raw = str(trace)[:RAW_LIMIT]
            quarantine.append(
                {"location": f"trace {number}", "reason": "not an object", "raw": raw}
            )
            continue
        lines.append(orjson.dumps({"spans": trace.get("spans"), "processes": None}))
        for pid, proc in (trace.get("processes") or {}).items():
            services.append((number, pid, (proc or {}).get("serviceName")))
    if not lines:
        return
    frame = pl.read_ndjson(io.BytesIO(b"\n".join(lines)), schema=_TRACE)
    numbers = [n for n, t in enumerate(traces, start=1) if isinstance(t, dict)]
    processes = pl.DataFrame(
        services,
        schema={"_line": pl.Int64, "processID": pl.String, "service": pl.String},
        orient="row",
    )
    spans = (
        frame.with_columns(_line=pl.Series(numbers, dtype=pl.Int64))
        .select("_line", "spans")
        .explode("spans")
        .drop_nulls("spans")
        .unnest("spans")
        .join(processes, on=["_line", "processID"], how="left")
    )
    child_of = pl.col("references").list.eval(
        pl.element().filter(pl.element().struct.field("refType") == "CHILD_OF")
    )
    error = _tag("tags", "error") == "true"
    out = spans.select(
        "_line",
        pl.lit(0, pl.Int64).alias("_span"),
        "service",
        pl.col("service").alias("instance"),
        pl.col("traceID").str.to_lowercase().str.zfill(32).alias("trace_id"),
        pl.col("spanID").str.to_lowercase().str.zfill(16).alias("span_id"),
        child_of.list.first().struct.field("spanID").str.zfill(16).alias("parent_id"),
        pl.col("operationName").alias("name"),
        _tag("tags", "span.kind").str.to_uppercase().fill_null("INTERNAL").alias("kind"),
        (pl.col("startTime") * 1000).alias("t_start"),
        ((pl.col("startTime") + pl.col("duration")) * 1000).alias("t_end"),
        pl.when(error)
        .then(pl.lit("ERROR"))
        .otherwise(_tag("tags", "otel.status_code"))
        .alias("status_code"),
        _tag("tags", "otel.status_description").alias("status_message"),
        _as_key_values(pl.col("tags")).alias("attributes"),
        pl.col("logs").list.eval(
            pl.struct(
                ts=pl.element().struct.field("timestamp") * 1000,
                name=pl.element()
                .struct.field("fields")
                .list.eval(pl.element().filter(pl.element().struct.field("key") == "event"))
                .list.first()
                .struct.field("value"),
                n_tokens=pl.element()
                .struct.field("fields")
                .list.eval(
                    pl.element().filter(pl.element().struct.field("key") == "gen_ai.token.count")
                )
                .list.first()
                .struct.field("value")
                .cast(pl.Float64, strict=False)
                .cast(pl.Int64, strict=False),
                attributes=pl.struct(
                    fields=pl.element()
                    .struct.field("fields")
                    .list.eval(pl.element().filter(pl.element().struct.field("key") != "event"))
                )
                .struct.json_encode()
                .str.slice(10)
                .str.strip_suffix("}"),
            )
        ),
    )
    no_key = pl.DataFrame(schema={"_line": pl.Int64})
    yield out.rename({"logs": "events"}).cast(SPAN_FRAME), no_key
