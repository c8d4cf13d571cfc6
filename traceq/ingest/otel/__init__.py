"""OpenTelemetry traces: OTLP/JSON, OTLP protobuf, Jaeger and Tempo JSON → requests, tokens,
spans, events.

First pass: each reader yields span frames block by block; `split_spans` stages span rows,
token events and other events as scratch Parquet (bounded memory). Second pass
(`otel_finalize.sql`, DuckDB, out of core): drop duplicate spans, join child spans to their
request span, and derive each request's stamps.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import closing
from typing import TYPE_CHECKING, Any, BinaryIO

import polars as pl

from traceq.ingest.otel import jaeger, otlp_json, otlp_proto
from traceq.ingest.otel.hops import stitch_summary
from traceq.ingest.otel.producers import conventions_seen
from traceq.ingest.otel.spans import split_spans
from traceq.ingest.read_ahead import Quarantine, Reader, read_ahead
from traceq.ingest.second_pass import second_pass
from traceq.ingest.source import Source
from traceq.sql import load
from traceq.writer import SourceWriter

if TYPE_CHECKING:
    from traceq.ingest.options import IngestOptions

FORMATS = {
    "otlp-json": "OTLP/JSON: Collector file-exporter lines, single documents, Tempo API JSON",
    "otlp-proto": "OTLP protobuf: one ExportTraceServiceRequest or length-prefixed messages",
    "jaeger-json": "Jaeger UI / query API JSON export",
}
# Producer conventions the OpenTelemetry formats understand (docs/INGEST.md, "Producers").
PRODUCERS = {
    "vllm": "vLLM V0/V1 llm_request (0.5 – main): gen_ai.* attributes, child phase spans",
    "vllm-token-events": "vLLM PR 32573 token_scheduled / token_generated + engine-core events",
    "token-arrays": "per-token arrays: OTel double[]/int[], JSON text, compressed, orjson bytes",
    "gen-ai-token-events": "gen_ai.token (traceq) and gen_ai.token.scheduled/generated events",
    "sglang": "SGLang --enable-trace: request root, thread and stage spans, decode_loop steps",
    "tensorrt-llm": "TensorRT-LLM request spans, kv_cache_transfer_* and server-selection events",
    "vllm-startup": "vLLM start-up spans (model / weight load, compile, CUDA graphs, KV profile)",
    "vllm-omni": "vLLM-Omni omni_request root with per-stage llm_request spans",
}
_OTLP_READERS = {  # these take the token event's name: it tells the Arrow reader which
    "otlp-json": otlp_json.iter_span_frames,  # events it may read without their text
    "otlp-proto": otlp_proto.iter_span_frames,
}
_OUTPUTS = {
    "otel_requests": "requests",
    "otel_tokens": "tokens",
    "otel_spans": "spans",
    "otel_events": "events",
    "otel_request_hops": "request_hops",
    "otel_clock_offsets": "clock_offsets",
    "otel_unserved": "unserved",
    "otel_duplicates": "quarantine",
    "otel_bad_steps": "quarantine",
    "otel_contradicted": "quarantine",
}
# The second pass, in order (each file's header says what it does): request stamps per span,
# then the stitch of routed / disaggregated traces with its clock estimate, then the outputs.
_SECOND_PASS = (
    "otel_finalize",
    "otel_stamps",
    "otel_stitch",
    "otel_clocks",
    "otel_stitched",
    "otel_outputs",
)
_STAGES = ("stage_spans", "stage_tokens", "stage_events")
Frames = tuple[pl.DataFrame, pl.DataFrame]  # a block's span frame, and its lines with no spans


def sniff(source: Source) -> str | None:
    """The OTel format of `source`, judged from its first bytes, or None."""
    head = source.head
    text = head.lstrip()
    if text[:1] in (b"{", b"["):
        if b'"resourceSpans"' in head or b'"batches"' in head:
            return "otlp-json"
        if b'"traceID"' in head and b'"spans"' in head:
            return "jaeger-json"
        return None
    bare = otlp_proto.opens_a_message(head)
    if (otlp_proto.looks_framed(head) or bare) and not otlp_proto.is_text(head):
        return "otlp-proto"  # a text file that starts with a blank line is not one
    return None


def ingest(
    source: Source,
    writer: SourceWriter,
    fmt: str,
    options: IngestOptions,
    progress: Callable[[int], None],
) -> dict[str, Any]:
    """Read `source` in format `fmt` into `writer`; returns manifest details."""
    quarantine: list[dict] = []
    schemas: dict[str, pl.Schema] = {}
    n_spans = 0
    seen: dict[str, int] = {}
    # closed in this order: an error below stops the read ahead before the stream closes
    with (
        source.open() as stream,
        closing(read_ahead(_reader(fmt, stream, options), quarantine, progress)) as frames,
    ):
        for frame, no_key in frames:
            frame = frame.with_columns(_span=pl.int_range(pl.len(), dtype=pl.Int64) + n_spans)
            n_spans += frame.height
            parts = split_spans(frame, options.conventions)
            for key, n in conventions_seen(parts).items():
                seen[key] = seen.get(key, 0) + n
            for stage, part in zip(_STAGES, ("spans", "tokens", "events"), strict=True):
                writer.write_scratch(stage, parts[part])
                schemas[stage] = parts[part].schema
            writer.write("quarantine", parts["quarantine"])
            quarantine += [
                {"location": f"line {n}", "reason": "JSON object has no resourceSpans", "raw": ""}
                for n in no_key["_line"]
            ]
            if quarantine:
                writer.write("quarantine", pl.DataFrame(quarantine))
                quarantine.clear()
    if quarantine:
        writer.write("quarantine", pl.DataFrame(quarantine))
    frame = no_key = pl.DataFrame()  # the last block's frames, not held under the second pass
    parts = {}
    stitch = _finalize(writer, schemas) if schemas else {}
    out = {"clock_domain": "unix_ns", "records": {"spans": n_spans}, "conventions": seen}
    return out | ({"stitch": stitch} if stitch else {})


def _reader(fmt: str, stream: BinaryIO, options: IngestOptions) -> Reader[Frames]:
    """The span frames of `stream` in format `fmt`, as `read_ahead` runs them."""
    if fmt == "jaeger-json":
        return functools.partial(jaeger.iter_span_frames, stream)
    read, token_event = _OTLP_READERS[fmt], options.conventions.token_event

    def frames(quarantine: Quarantine, progress: Callable[[int], None]) -> Iterator[Frames]:
        return read(stream, quarantine, progress, token_event)

    return frames


def _finalize(writer: SourceWriter, schemas: dict[str, pl.Schema]) -> dict[str, Any]:
    with second_pass(writer) as con:  # fixed limit, spills beyond: bounded RSS
        empty = {}
        for stage in _STAGES:
            writer.close(stage)
            path = writer.scratch_path(stage)
            if path.exists():
                con.read_parquet(str(path)).create_view(stage)
            else:
                empty[stage] = pl.DataFrame(schema=schemas[stage])
                con.register(stage, empty[stage])
        for name in _SECOND_PASS:
            con.execute(load(name))
        for view, table in _OUTPUTS.items():
            writer.write_view(table, con, view)
        return stitch_summary(con)
