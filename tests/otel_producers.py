"""Spans shaped exactly as each producer's source builds them, made by the real OpenTelemetry
SDK; each builder's docstring names the producer's source it follows.

Every builder takes explicit nanosecond stamps so tests can compare traceq's phases and token
gaps with them to the nanosecond.
"""

from __future__ import annotations

import base64
import gzip
import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import orjson
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider, id_generator
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

MS = 1_000_000
NS = 1_000_000_000


class SGLangIdGenerator(id_generator.IdGenerator):
    """sglang `TraceCustomIdGenerator` (python/sglang/srt/observability/trace.py @02a580880ee6):
    64-bit trace and span ids, so the high half of every trace id is zero."""

    def __init__(self) -> None:
        self.rng = random.Random(7)

    def generate_trace_id(self) -> int:
        return self.rng.getrandbits(64)

    def generate_span_id(self) -> int:
        return self.rng.getrandbits(64)


@contextmanager
def provider(
    resource: dict | None = None, ids: id_generator.IdGenerator | None = None
) -> Iterator[tuple[trace.Tracer, list[ReadableSpan]]]:
    """A tracer whose finished spans land in the yielded list once the block ends."""
    memory = InMemorySpanExporter()
    kw = {"id_generator": ids} if ids else {}
    p = TracerProvider(resource=Resource.create(resource or {}), **kw)  # type: ignore[arg-type]
    p.add_span_processor(SimpleSpanProcessor(memory))
    out: list[ReadableSpan] = []
    yield p.get_tracer("test"), out
    p.shutdown()
    out += memory.get_finished_spans()


# --- SGLang -------------------------------------------------------------------------------


@dataclass
class SGLangRequest:
    """One unified-mode request as SGLang's tokenizer and scheduler trace it.

    Stamps are offsets (ns) from `t0`; `decode_ends` are the ends of the decode_loop slices.
    """

    rid: str
    t0: int
    tokenize_end: int
    dispatch_end: int
    sched_recv: int
    wait_entry: int
    forward_entry: int
    prefill_end: int
    decode_sched: int
    decode_ends: list[int]
    completion: int
    finished: int  # tokenizer: request finished (root span end)
    first_token_seen: int  # tokenizer: first token received (drives gen_ai TTFT)
    retract_at: int | None = None  # a retraction: retract event, then a second prefill
    reprefill: tuple[int, int] | None = None


def sglang_spans(tracer: trace.Tracer, r: SGLangRequest) -> None:
    """`TraceReqContext` (observability/trace.py @02a580880ee6) driven the way
    `APIServerReqTimeStats` / `SchedulerReqTimeStats` (req_time_stats.py @00ce49e05c17) drive
    it in unified mode: root `" Req <rid[:8]>"` (role "" → leading space) with `rid` and
    `module`; a tokenizer and a scheduler thread span under it; stage slices under the
    thread span or the enclosing open slice; events cached and attached on slice end."""
    t = r.t0
    root = tracer.start_span(
        f" Req {r.rid[:8]}",
        start_time=t,
        context=None,
        attributes={"rid": r.rid, "module": "sglang::request"},
    )
    root_ctx = trace.set_span_in_context(root)

    def thread(label: str, start: int, tp: int | None) -> trace.Span:
        name = label + (f" [TP {tp}] " if tp is not None else "") + "(host:1f2e3d4c | pid:4242)"
        span = tracer.start_span(name, start_time=start, context=root_ctx)
        if tp is not None:
            span.set_attributes({"tp_rank": tp})
        span.set_attributes({"host_id": "1f2e3d4c5b6a", "pid": 4242, "thread_label": label})
        return span

    def slice_(name: str, parent: trace.Span, start: int, end: int | None, **attrs):
        span = tracer.start_span(name, start_time=start, context=trace.set_span_in_context(parent))
        if attrs:
            span.set_attributes(attrs)
        if end is not None:
            span.end(end_time=end)
        return span

    tok = thread("tokenizer", t, None)
    slice_("tokenize", tok, t, t + r.tokenize_end)
    slice_("api_server_dispatch", tok, t + r.tokenize_end, t + r.dispatch_end)
    tok.end(end_time=t + r.dispatch_end)  # thread_finish_flag=True

    sched = thread("scheduler", t + r.sched_recv, 0)
    slice_("request_process", sched, t + r.sched_recv, t + r.wait_entry)
    slice_("prefill_waiting", sched, t + r.wait_entry, t + r.forward_entry)
    prefill = slice_("prefill_forward", sched, t + r.forward_entry, None)
    prefill.add_event("schedule", {"bid": "0a1b2c3d", "batch_size": 4}, t + r.forward_entry)
    slice_("chunked_prefill", prefill, t + r.forward_entry, t + r.prefill_end)
    prefill.end(end_time=t + r.prefill_end)
    slice_("decode_waiting", sched, t + r.prefill_end, t + r.decode_sched)
    decode = slice_("decode_forward", sched, t + r.decode_sched, None)
    start = r.decode_sched
    for ct, end in enumerate(r.decode_ends):
        step = slice_("decode_loop", decode, t + start, None)
        step.add_event("schedule", {"bid": f"{ct:08x}", "batch_size": 4}, t + start)
        step.set_attributes({"decode_ct": ct})
        if r.retract_at is not None and start <= r.retract_at < end:
            step.add_event("retract", {}, t + r.retract_at)
        step.end(end_time=t + end)
        start = end
    if r.reprefill:
        slice_("prefill_forward", decode, t + r.reprefill[0], t + r.reprefill[1])
    decode.end(end_time=t + r.completion)  # abort() closes the open slice at completion
    sched.end(end_time=t + r.completion)

    # APIServerReqTimeStats.convert_to_gen_ai_span_attrs: seconds, from the tokenizer's clock
    root.set_attributes(
        {
            "gen_ai.latency.time_to_first_token": r.first_token_seen / NS,
            "gen_ai.latency.e2e": r.finished / NS,
            "gen_ai.latency.time_in_model_decode": (r.finished - r.first_token_seen) / NS,
            "gen_ai.latency.time_in_model_inference": (r.finished - r.dispatch_end) / NS,
            "gen_ai.latency.time_in_model_prefill": (r.first_token_seen - r.dispatch_end) / NS,
        }
    )
    root.end(end_time=t + r.finished)


# --- vLLM request span with token-level events (PR 32573) ----------------------------------


@dataclass
class Step:
    scheduled: int  # absolute ns
    generated: int
    ids: list[int]
    batch: int
    waiting: int
    total: int


@dataclass
class VllmRequest:
    request_id: str
    arrival: int
    finish: int  # span end (front end processed the final output)
    steps: list[Step]
    engine_events: list[tuple[str, int]] = field(default_factory=list)
    prompt_tokens: int = 30
    attributes: dict = field(default_factory=dict)


def _llm_request_attributes(r: VllmRequest) -> dict:
    """The `gen_ai.*` attributes vLLM's `llm_request` span carries whatever its token timing."""
    first, last = r.steps[0].generated, r.steps[-1].generated
    return {
        "gen_ai.request.id": r.request_id,
        "gen_ai.usage.prompt_tokens": r.prompt_tokens,
        "gen_ai.usage.completion_tokens": sum(len(s.ids) for s in r.steps),
        "gen_ai.latency.time_to_first_token": (first - r.arrival) / NS,
        "gen_ai.latency.e2e": (last - r.arrival) / NS,
    }


def vllm_token_event_span(tracer: trace.Tracer, r: VllmRequest) -> None:
    """`llm_request` as vLLM PR 32573 (`vllm/v1/engine/output_processor.py` and
    `observable_context.py` @5a0a83ebe720) writes it at token level: one `token_scheduled` /
    `token_generated` pair per engine step at the step's wall-clock stamps, and the
    engine-core events at their wall-clock stamps.

    Checked against the stored `vllm/v1/engine/observable_context.py` @042ff99cb0b4: event
    names `token_scheduled` (`iter_batch_size`, `iter_waiting_size`) and `token_generated`
    (`iter_waiting_size`, `iter_total_tokens_count`, and `new_token_ids` unless
    `VLLM_TRACE_HIDE_TOKEN_IDS`), a pair only for steps with new tokens, kept in a
    `deque(maxlen=SpanLimits().max_events)`, so a long output keeps its *last* 128 events
    (traceq/ingest/otel/token_checks.py). Engine-core event types: `EngineCoreEventType` in
    `vllm/v1/engine/__init__.py` (QUEUED = 1, SCHEDULED = 2, PREEMPTED = 3); the string the
    branch writes as the span event name was not found in a stored version, so traceq reads
    the member name in any case, `str()` of the member and prefixed forms
    (traceq/ingest/otel/producers.py)."""
    attributes = {**_llm_request_attributes(r), "gen_ai.response.finish_reasons": '["stop"]'}
    span = tracer.start_span(
        "llm_request",
        kind=SpanKind.SERVER,
        start_time=r.arrival,
        attributes={**attributes, **r.attributes},
    )
    for name, ts in r.engine_events:
        span.add_event(name, {}, ts)
    for s in r.steps:
        span.add_event(
            "token_scheduled",
            {"iter_batch_size": s.batch, "iter_waiting_size": s.waiting},
            s.scheduled,
        )
        span.add_event(
            "token_generated",
            {
                "new_token_ids": s.ids,
                "iter_waiting_size": s.waiting,
                "iter_total_tokens_count": s.total,
            },
            s.generated,
        )
    span.end(end_time=r.finish)


# --- per-token arrays ----------------------------------------------------------------------


def per_token(steps: list[Step]) -> dict[str, list]:
    """Per output token (the fork repeats a step's value for each of its tokens)."""
    out: dict[str, list] = {"gen": [], "sched": [], "batch": [], "waiting": [], "total": []}
    for s in steps:
        for _ in s.ids:
            out["gen"].append(s.generated)
            out["sched"].append(s.scheduled)
            out["batch"].append(s.batch)
            out["waiting"].append(s.waiting)
            out["total"].append(s.total)
    return out


def compress_and_encode(text: str) -> str:
    """The Alipay fork's `compress_and_encode` (body not located, research §2.2): gzip then
    standard base64 is the shape traceq's decoder is built for."""
    return base64.b64encode(gzip.compress(text.encode())).decode()


def array_attributes(r: VllmRequest, encoding: str) -> dict:
    """Per-token array attributes of one request in one of the encodings in use.

    * `alipay-compressed` (§2.2): seconds since arrival (= span start), 4 dp, JSON text,
      gzip + base64; batch size and total tokens.
    * `alipay-orjson` (§2.3, trace_processor.py @fc51ce171d26): `orjson.dumps(list)` bytes;
      the first step's entries absolute epoch seconds, later entries offsets from the first
      scheduled time; waiting size too, cached tokens as an int scalar.
    * `convention` (§2.4): real OTel double[] / int[] arrays, offsets from span start.
    * `json-text`: the convention's arrays as JSON text strings.
    """
    p = per_token(r.steps)
    if encoding == "alipay-orjson":
        base = p["sched"][0]
        first_step = {i for i, s in enumerate(p["sched"]) if s == base}

        def rel(values: list[int]) -> list[float]:
            return [v / NS if i in first_step else (v - base) / NS for i, v in enumerate(values)]

        return {
            "gen_ai.latency.per_token_scheduled_time": orjson.dumps(rel(p["sched"])),
            "gen_ai.latency.per_token_generation_time": orjson.dumps(rel(p["gen"])),
            "gen_ai.iteration.per_token_batch_size": orjson.dumps(p["batch"]),
            "gen_ai.iteration.per_token_waiting_size": orjson.dumps(p["waiting"]),
            "gen_ai.iteration.per_token_total_tokens": orjson.dumps(p["total"]),
            "gen_ai.iteration.per_token_cached_tokens": 16,
        }
    offsets = {k: [round((v - r.arrival) / NS, 9) for v in p[k]] for k in ("gen", "sched")}
    if encoding == "alipay-compressed":
        offsets = {k: [round(v, 4) for v in vs] for k, vs in offsets.items()}
        return {
            "gen_ai.request.trace_level": 2,
            "gen_ai.latency.per_token_generation_time": compress_and_encode(
                json.dumps(offsets["gen"])
            ),
            "gen_ai.latency.per_token_scheduled_time": compress_and_encode(
                json.dumps(offsets["sched"])
            ),
            "gen_ai.iteration.per_token_batch_size": compress_and_encode(json.dumps(p["batch"])),
            "gen_ai.iteration.per_token_total_tokens": compress_and_encode(json.dumps(p["total"])),
        }
    arrays = {
        "gen_ai.latency.per_token_generation_time": offsets["gen"],
        "gen_ai.latency.per_token_scheduled_time": offsets["sched"],
        "gen_ai.iteration.per_token_batch_size": p["batch"],
        "gen_ai.iteration.per_token_waiting_size": p["waiting"],
        "gen_ai.iteration.per_token_total_tokens": p["total"],
        "gen_ai.request.trace_level": "2",
    }
    if encoding == "json-text":
        return {k: json.dumps(v) if isinstance(v, list) else v for k, v in arrays.items()}
    return arrays


def vllm_array_span(tracer: trace.Tracer, r: VllmRequest, encoding: str) -> None:
    """`llm_request` with per-token arrays instead of token events."""
    attributes = {**_llm_request_attributes(r), **array_attributes(r, encoding)}
    span = tracer.start_span(
        "llm_request",
        kind=SpanKind.SERVER,
        start_time=r.arrival,
        attributes={**attributes, **r.attributes},
    )
    for name, ts in r.engine_events:
        span.add_event(name, {}, ts)
    span.end(end_time=r.finish)
