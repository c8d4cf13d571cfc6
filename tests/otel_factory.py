"""Spans made by the real OpenTelemetry SDK, encoded by the real OTLP encoders.

`RequestSpec` describes one request with explicit nanosecond stamps; `make_spans` turns specs
into SDK spans (llm_request + tokenize child + token events); `write_otlp_json` /
`write_otlp_proto` encode them with opentelemetry-exporter-otlp-json-file and
opentelemetry-exporter-otlp-proto-common.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry import trace
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

T0 = 1_750_000_000_123_456_789  # an arrival with every nanosecond digit significant
MS = 1_000_000


@dataclass
class RequestSpec:
    request_id: str
    arrival: int = T0
    tokenize_end: int | None = None  # absolute ns; a tokenize child span from arrival
    tokens: list[int] = field(default_factory=list)  # absolute ns of each chunk
    token_counts: list[int] | None = None  # gen_ai.token.count per chunk (None: omitted)
    end: int | None = None
    attributes: dict = field(default_factory=dict)
    phase_spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # vllm.request.*
    kind: SpanKind = SpanKind.SERVER
    error: str | None = None


def v1_attributes(
    request_id: str, *, queue: int, prefill: int, decode: int, ttft: int, e2e: int, **extra
) -> dict:
    """vLLM V1 `llm_request` attributes (output_processor.do_tracing); durations in ns."""
    return {
        "gen_ai.request.id": request_id,
        "gen_ai.usage.prompt_tokens": extra.pop("prompt_tokens", 42),
        "gen_ai.usage.completion_tokens": extra.pop("completion_tokens", 4),
        "gen_ai.request.max_tokens": 256,
        "gen_ai.latency.time_in_queue": queue / 1e9,
        "gen_ai.latency.time_to_first_token": ttft / 1e9,
        "gen_ai.latency.e2e": e2e / 1e9,
        "gen_ai.latency.time_in_model_prefill": prefill / 1e9,
        "gen_ai.latency.time_in_model_decode": decode / 1e9,
        "gen_ai.latency.time_in_model_inference": (prefill + decode) / 1e9,
        "gen_ai.response.finish_reasons": '["stop"]',
        **extra,
    }


def v0_attributes(request_id: str, *, queue: int, ttft: int, e2e: int, **extra) -> dict:
    """vLLM V0 `llm_request` attributes (llm_engine.create_trace_span); durations in ns."""
    return {
        "gen_ai.response.model": "meta-llama/Llama-3.1-8B-Instruct",
        "gen_ai.request.id": request_id,
        "gen_ai.request.temperature": 0.0,
        "gen_ai.request.top_p": 1.0,
        "gen_ai.request.max_tokens": 128,
        "gen_ai.request.n": 1,
        "gen_ai.usage.num_sequences": 1,
        "gen_ai.usage.prompt_tokens": extra.pop("prompt_tokens", 17),
        "gen_ai.usage.completion_tokens": extra.pop("completion_tokens", 3),
        "gen_ai.latency.time_in_queue": queue / 1e9,
        "gen_ai.latency.time_to_first_token": ttft / 1e9,
        "gen_ai.latency.e2e": e2e / 1e9,
        **extra,
    }


def make_spans(
    specs: list[RequestSpec], service: str = "vllm-server", instance: str = "pod-a"
) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": service, "service.instance.id": instance})
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("vllm.tracing")
    for spec in specs:
        span = tracer.start_span(
            "llm_request", kind=spec.kind, start_time=spec.arrival, attributes=spec.attributes
        )
        ctx = trace.set_span_in_context(span)
        if spec.tokenize_end is not None:
            child = tracer.start_span("tokenize", context=ctx, start_time=spec.arrival)
            child.end(end_time=spec.tokenize_end)
        for name, (start, end) in spec.phase_spans.items():
            child = tracer.start_span(name, context=ctx, start_time=start)
            child.end(end_time=end)
        for i, ts in enumerate(spec.tokens):
            counts = spec.token_counts
            attrs = {} if counts is None else {"gen_ai.token.count": counts[i]}
            span.add_event("gen_ai.token", attrs, timestamp=ts)
        if spec.error:
            span.set_status(Status(StatusCode.ERROR, spec.error))
        span.end(end_time=spec.end or (spec.tokens[-1] if spec.tokens else spec.arrival + MS))
    provider.shutdown()
    return list(memory.get_finished_spans())


def otlp_json_lines(spans: list[ReadableSpan], per_line: int = 0) -> str:
    """JSON lines as the OTLP JSON file exporter writes them (`per_line` spans per line)."""
    out = io.StringIO()
    exporter = FileSpanExporter(stream=out)
    step = per_line or len(spans)
    for i in range(0, len(spans), step):
        exporter.export(spans[i : i + step])
    return out.getvalue()


def write_otlp_json(spans: list[ReadableSpan], path: Path, per_line: int = 0) -> Path:
    path.write_text(otlp_json_lines(spans, per_line))
    return path


def otlp_proto_bytes(spans: list[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializeToString()


def write_otlp_proto(spans: list[ReadableSpan], path: Path, framed: bool = False) -> Path:
    """One ExportTraceServiceRequest, or (framed) the Collector's length-prefixed stream."""
    if framed:
        data = b"".join(
            struct.pack(">I", len(m)) + m for m in (otlp_proto_bytes([s]) for s in spans)
        )
    else:
        data = otlp_proto_bytes(spans)
    path.write_bytes(data)
    return path
