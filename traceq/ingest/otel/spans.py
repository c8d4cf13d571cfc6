"""The span frame every OpenTelemetry reader produces, and its split into traceq tables.

Readers (OTLP/JSON, OTLP protobuf, Jaeger) turn their input into one *span frame*
(`SPAN_FRAME`): a row per span with its attributes and events still nested, in the OTLP
AnyValue shape, all scalars as strings. `split_spans` then does the vectorised work once
for every format: attribute extraction, token events, quarantine of bad spans.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from traceq.ingest.otel.hops import STITCH_ATTRIBUTES, hop_of
from traceq.ingest.otel.producers import event_kind, startup_events
from traceq.ingest.otel.token_checks import check_token_events
from traceq.ingest.otel.tokens import (
    ARRAYS,
    TOKEN_LEVEL_EVENTS,
    decode_arrays,
    from_arrays,
    from_events,
)
from traceq.schema import RAW_LIMIT

# OTLP AnyValue with every variant kept as text: polars reads numbers, booleans and nested
# values (arrayValue / kvlistValue) into a String column as their JSON text.
ANY_VALUE_FIELDS = (
    "stringValue",
    "boolValue",
    "intValue",
    "doubleValue",
    "bytesValue",
    "arrayValue",
    "kvlistValue",
)
ANY_VALUE = pl.Struct({k: pl.String for k in ANY_VALUE_FIELDS})
KEY_VALUES = pl.List(pl.Struct({"key": pl.String, "value": ANY_VALUE}))

SPAN_FRAME = pl.Schema(
    {  # type: ignore[arg-type]
        "_line": pl.Int64,  # record number in the source (line, message or trace)
        "_span": pl.Int64,  # span number in the source, unique within it
        "service": pl.String,
        "instance": pl.String,
        "trace_id": pl.String,
        "span_id": pl.String,
        "parent_id": pl.String,
        "name": pl.String,
        "kind": pl.String,
        "t_start": pl.Int64,
        "t_end": pl.Int64,
        "status_code": pl.String,
        "status_message": pl.String,
        "attributes": KEY_VALUES,
        # Events keep their attributes as raw JSON text: decoding a list of AnyValue structs
        # per token event would cost more than all the rest of the parse together.
        "events": pl.List(
            pl.Struct(
                {"ts": pl.Int64, "name": pl.String, "n_tokens": pl.Int64, "attributes": pl.String}
            )
        ),
    }
)

KINDS = {
    "0": "UNSPECIFIED",
    "1": "INTERNAL",
    "2": "SERVER",
    "3": "CLIENT",
    "4": "PRODUCER",
    "5": "CONSUMER",
}
STATUS = {"0": "UNSET", "1": "OK", "2": "ERROR"}

# Span attributes lifted into columns of the staged span table (see otel_requests.sql).
ATTRIBUTES = {
    "gen_ai.request.id": "a_request_id",
    "gen_ai.response.id": "a_response_id",
    "gen_ai.response.model": "a_response_model",
    "gen_ai.request.model": "a_request_model",
    "gen_ai.operation.name": "a_operation",
    "gen_ai.usage.prompt_tokens": "a_prompt_tokens",
    "gen_ai.usage.input_tokens": "a_input_tokens",
    "gen_ai.usage.completion_tokens": "a_completion_tokens",
    "gen_ai.usage.output_tokens": "a_output_tokens",
    "gen_ai.usage.cached_tokens": "a_cached_tokens",
    "gen_ai.usage.cache_read.input_tokens": "a_cache_read_tokens",
    "gen_ai.request.max_tokens": "a_max_tokens",
    "gen_ai.response.finish_reasons": "a_finish_reasons",
    "gen_ai.latency.time_in_queue": "a_queue_s",
    "gen_ai.latency.time_to_first_token": "a_ttft_s",
    "gen_ai.latency.e2e": "a_e2e_s",
    "gen_ai.latency.time_in_model_prefill": "a_prefill_s",
    "gen_ai.latency.time_in_model_decode": "a_decode_s",
    "error.type": "a_error_type",
    "preempted": "a_preempted",
    "rid": "a_rid",  # SGLang request root
    "module": "a_module",  # SGLang `sglang::request`
    "code.function": "a_code_function",  # vLLM start-up spans (tracing `instrument`)
    "gen_ai.latency.kv_cache_transfer_time": "a_kv_transfer_s",  # TensorRT-LLM, disagg
    "gen_ai.iteration.per_token_cached_tokens": "a_step_cached_tokens",  # Alipay fork scalar
    **STITCH_ATTRIBUTES,  # routing layers: Dynamo, llm-d (traceq/ingest/otel/hops.py)
}


@dataclass(frozen=True)
class SpanConventions:
    """Names of the token-level convention traceq reads; all configurable."""

    token_event: str = "gen_ai.token"
    request_spans: tuple[str, ...] = ("llm_request", "omni_request")
    tokenize_spans: tuple[str, ...] = ("tokenize", "tokenization", "preprocess")
    # Child spans that stamp a phase, by producer:
    # vLLM's two child-span designs and SGLang's stage slices.
    phase_spans: dict[str, str] = field(
        default_factory=lambda: {
            "vllm.request.queue": "queue",
            "vllm.request.prefill": "prefill",
            "vllm.request.decode": "decode",
            "vllm_queue": "queue",
            "vllm_prefill": "prefill",
            "vllm_decode": "decode",
            "vllm_async_kv_transfer": "kv_transfer",
            "prefill_waiting": "queue",
            "prefill_forward": "prefill",
            "decode_forward": "decode",
            "decode_loop": "decode_step",
            "decode_waiting": "decode_queue",
            "decode_transferred": "kv_transfer",
        }
    )


def _value_text(v: pl.Expr) -> pl.Expr:
    """An AnyValue as one string (first variant present)."""
    return pl.coalesce(
        v.struct.field(f)
        for f in ("stringValue", "intValue", "doubleValue", "boolValue", "bytesValue")
    ).fill_null(pl.coalesce(v.struct.field("arrayValue"), v.struct.field("kvlistValue")))


def _json_string(s: pl.Expr) -> pl.Expr:
    """JSON-encode a string column (quotes and escapes), vectorised."""
    return pl.struct(s.alias("s")).struct.json_encode().str.slice(5).str.strip_suffix("}")


def _value_json(v: pl.Expr) -> pl.Expr:
    """An AnyValue as a JSON value: strings quoted, numbers and booleans bare."""
    number = pl.coalesce(v.struct.field("intValue"), v.struct.field("doubleValue"))
    numeric = number.str.contains(r"^-?[0-9][0-9.eE+-]*$")
    return (
        pl.when(v.struct.field("stringValue").is_not_null())
        .then(_json_string(v.struct.field("stringValue")))
        .when(numeric)
        .then(number)
        .when(number.is_not_null())  # "NaN", "Infinity": keep as text
        .then(_json_string(number))
        .when(v.struct.field("boolValue").is_not_null())
        .then(v.struct.field("boolValue").str.to_lowercase())
        .when(v.struct.field("bytesValue").is_not_null())
        .then(_json_string(v.struct.field("bytesValue")))
        .otherwise(pl.coalesce(v.struct.field("arrayValue"), v.struct.field("kvlistValue")))
    )


def otlp_span_columns() -> list[pl.Expr | str]:
    """The span frame's identity and time columns from OTLP/JSON's own field names (service
    and instance already lifted from the resource): the same for every reader of the format
    (otlp_json.py's polars path, otlp_arrow.py's Arrow path)."""
    return [
        "service",
        "instance",
        normalise_id("traceId", 32).alias("trace_id"),
        normalise_id("spanId", 16).alias("span_id"),
        normalise_id("parentSpanId", 16).alias("parent_id"),
        "name",
        "kind",
        ns_of_text("startTimeUnixNano").alias("t_start"),
        ns_of_text("endTimeUnixNano").alias("t_end"),
    ]


def normalise_id(col: str, hex_len: int) -> pl.Expr:
    """Trace / span ids as lower-case hex; base64 ids (protobuf JSON mapping) are decoded."""
    c = pl.col(col).str.strip_chars()
    is_hex = c.str.contains(f"^[0-9a-fA-F]{{{hex_len}}}$")
    b64 = c.str.decode("base64", strict=False).bin.encode("hex")
    return (
        pl.when(c == "").then(None).when(is_hex).then(c.str.to_lowercase()).otherwise(b64)
    ).alias(col)


def ns_of_text(col: str) -> pl.Expr:
    """Integer ns from OTLP/JSON's decimal text, straight: through float64 the last digits
    would be lost."""
    return pl.col(col).str.strip_chars().cast(pl.Int64, strict=False)


def _attributes_long(spans: pl.DataFrame) -> pl.DataFrame:
    return (
        spans.select("_span", "_line", "name", "attributes")
        .explode("attributes")
        .drop_nulls("attributes")
        .unnest("attributes")
    )


def split_spans(spans: pl.DataFrame, conv: SpanConventions) -> dict[str, pl.DataFrame]:
    """Split a span frame into staged spans, tokens, events and quarantine rows."""
    bad_time = (
        pl.col("t_start").is_null()
        | pl.col("t_end").is_null()
        | (pl.col("t_start") <= 0)
        | (pl.col("t_end") < pl.col("t_start"))
    )
    missing = pl.col("span_id").is_null() | pl.col("trace_id").is_null()
    rejected = spans.filter(bad_time | missing)
    spans = spans.filter(~(bad_time | missing))
    quarantine = [
        rejected.select(
            location=pl.format("line {} span {}", "_line", "_span"),
            reason=pl.when(missing)
            .then(pl.lit("span has no trace_id / span_id"))
            .otherwise(pl.lit("span has no valid start / end timestamp")),
            raw=pl.struct("name", "span_id", "t_start", "t_end")
            .struct.json_encode()
            .str.slice(0, RAW_LIMIT),
        )
    ]

    attrs = _attributes_long(spans)
    text = _value_text(pl.col("value"))
    # null when every variant is (not `text.is_null()`, which would copy every value's text)
    no_value = pl.all_horizontal(
        pl.col("value").struct.field(f).is_null() for f in ANY_VALUE_FIELDS
    )
    unknown = attrs.filter(no_value)
    quarantine.append(
        unknown.select(
            location=pl.format("line {} span {}", "_line", "_span"),
            reason=pl.format("attribute {} has no known AnyValue type", pl.col("key")),
            raw=pl.struct("key", "value").struct.json_encode().str.slice(0, RAW_LIMIT),
        )
    )
    attrs = attrs.filter(~no_value)
    lifted = (
        attrs.filter(pl.col("key").is_in(list(ATTRIBUTES)))
        .with_columns(text=text)
        .group_by("_span")
        .agg(
            pl.col("text").filter(pl.col("key") == key).first().alias(column)
            for key, column in ATTRIBUTES.items()
        )
    )

    events = (
        spans.select("_span", "_line", "trace_id", "span_id", "events")
        .explode("events")
        .drop_nulls("events")
        .unnest("events")
    )
    bad_event = events.filter(pl.col("ts").is_null() | (pl.col("ts") <= 0))
    quarantine.append(
        bad_event.select(
            location=pl.format("line {} span {}", "_line", "_span"),
            reason=pl.lit("span event has no timestamp"),
            raw=pl.struct("name").struct.json_encode().str.slice(0, RAW_LIMIT),
        )
    )
    events = events.filter(pl.col("ts") > 0)
    span_info = spans.select("_span", "t_start", "t_end").join(
        lifted.select(
            "_span",
            completion=pl.col("a_completion_tokens").cast(pl.Float64, strict=False).cast(pl.Int64),
        ),
        on="_span",
        how="left",
    )
    events, bad_events, truncated = check_token_events(events, span_info, conv.token_event)
    arrays, bad_arrays = decode_arrays(attrs.filter(pl.col("key").is_in(list(ARRAYS))))
    array_chunks, array_quarantine = from_arrays(arrays, span_info.drop("t_end"))
    quarantine += [bad_events, bad_arrays, array_quarantine]
    # Per-token arrays that became token rows are not repeated in spans.attributes (their
    # values are in tokens); arrays that did not decode stay there, and in quarantine.
    consumed = array_chunks.select("_span").unique().with_columns(consumed=pl.lit(True))
    kept_attrs = (
        attrs.join(consumed, on="_span", how="left")
        .filter(~(pl.col("key").is_in(list(ARRAYS)) & pl.col("consumed").fill_null(False)))
        .drop("consumed")
    )
    json_obj = kept_attrs.group_by("_span").agg(
        attributes_json=pl.format(
            "{}:{}", _json_string(pl.col("key")), _value_json(pl.col("value"))
        ).str.join(",")
    )
    tokens = (
        pl.concat([from_events(events, conv.token_event), array_chunks])
        .sort("_span", "ts")
        .with_columns(idx=pl.int_range(pl.len(), dtype=pl.Int64).over("_span"))
    )
    per_span_tokens = tokens.group_by("_span").agg(
        tok_first=pl.col("ts").min(),
        tok_last=pl.col("ts").max(),
        tok_chunks=pl.len(),
        tok_count=pl.col("n_tokens").sum(),
    )
    # token events that lost their first tokens to the span event limit (token_checks.py)
    # do not give the first-token stamp
    per_span_tokens = per_span_tokens.with_columns(
        tok_first=pl.when(pl.col("_span").is_in(truncated["_span"].implode()))
        .then(None)
        .otherwise("tok_first")
    )
    token_level = pl.col("name").is_in([conv.token_event, *TOKEN_LEVEL_EVENTS])
    other_events = pl.concat(
        [
            events.filter(~token_level).select(
                "_span",
                "ts",
                kind=event_kind(pl.col("name")),
                value=pl.lit(None, pl.Float64),
                message=pl.col("attributes"),
            ),
            startup_events(spans, lifted),
        ]
    )

    role = (
        pl.when(pl.col("name").is_in(list(conv.tokenize_spans)))
        .then(pl.lit("tokenize"))
        .otherwise(pl.col("name").replace_strict(conv.phase_spans, default=None))
    )
    staged = (
        spans.drop("attributes", "events")
        .with_columns(
            kind=pl.col("kind").str.replace("^SPAN_KIND_", "").replace(KINDS),
            status_code=pl.col("status_code").str.replace("^STATUS_CODE_", "").replace(STATUS),
            role=role,
            hop=hop_of(pl.col("name")),
        )
        .join(json_obj, on="_span", how="left")
        .join(lifted, on="_span", how="left")
        .join(per_span_tokens, on="_span", how="left")
        .with_columns(
            attributes_json=pl.concat_str(
                pl.lit("{"), pl.col("attributes_json").fill_null(""), pl.lit("}")
            ),
            is_request=pl.col("name").is_in(list(conv.request_spans))
            | pl.col("tok_chunks").is_not_null()
            | (
                pl.col("a_rid").is_not_null()
                & (
                    pl.col("a_module").str.starts_with("sglang").fill_null(False)
                    | pl.col("name").str.contains(" Req ", literal=True)
                )
            )
            | pl.any_horizontal(
                pl.col(c).is_not_null()
                for c in ("a_request_id", "a_e2e_s", "a_ttft_s", "a_operation")
            ),
        )
    )
    return {
        "spans": staged,
        "tokens": tokens,
        "events": other_events,
        "quarantine": pl.concat(quarantine),
    }
