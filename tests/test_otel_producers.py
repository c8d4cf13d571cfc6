"""Each producer's spans, made by the real OpenTelemetry SDK the way its source builds them,
encoded by the real OTLP encoders (JSON file exporter and protobuf), ingested, and read back
through request_phases / token_gaps / events against the known stamps to the nanosecond."""

from __future__ import annotations

import json
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import orjson
import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind

import traceq
from tests.otel_factory import T0, write_otlp_json, write_otlp_proto
from tests.otel_producers import (
    MS,
    NS,
    SGLangIdGenerator,
    SGLangRequest,
    Step,
    VllmRequest,
    provider,
    sglang_spans,
    vllm_array_span,
    vllm_token_event_span,
)

ENCODERS = {"json": write_otlp_json, "proto": write_otlp_proto}


def _ingest(spans, tmp_path: Path, encoder: str):
    src = ENCODERS[encoder](spans, tmp_path / f"traces.{encoder}")
    results = traceq.ingest([src], tmp_path / "ds")
    return traceq.open(tmp_path / "ds"), results


def _phases(con, request_id: str) -> dict:
    rows = con.sql("SELECT * FROM request_phases WHERE request_id = ?", params=[request_id])
    return rows.pl().to_dicts()[0]


def _tokens(con, request_id: str) -> list[tuple]:
    return con.sql(
        "SELECT ts, n_tokens, t_scheduled, batch_size, waiting, total_tokens, time_base "
        "FROM tokens WHERE request_id = ? ORDER BY idx",
        params=[request_id],
    ).fetchall()


# --- SGLang -------------------------------------------------------------------------------

SG = SGLangRequest(
    rid="5f3c9a7e1b2d4c6f8a0e",
    t0=T0,
    tokenize_end=2 * MS + 11,
    dispatch_end=2 * MS + 501,
    sched_recv=3 * MS + 7,
    wait_entry=3 * MS + 213,
    forward_entry=8 * MS + 19,
    prefill_end=20 * MS + 23,
    decode_sched=21 * MS + 29,
    decode_ends=[31 * MS + 31, 41 * MS + 37, 52 * MS + 41],
    completion=53 * MS + 43,
    finished=55 * MS + 47,
    first_token_seen=20 * MS + 523,
)
SG_RETRACTED = SGLangRequest(
    rid="9e8d7c6b5a4f3e2d1c0b",
    t0=T0 + 200 * MS,
    tokenize_end=1 * MS,
    dispatch_end=1 * MS + 300,
    sched_recv=2 * MS,
    wait_entry=2 * MS + 100,
    forward_entry=4 * MS,
    prefill_end=9 * MS,
    decode_sched=10 * MS,
    decode_ends=[20 * MS, 60 * MS],
    completion=61 * MS,
    finished=62 * MS,
    first_token_seen=9 * MS + 200,
    retract_at=25 * MS,
    reprefill=(40 * MS, 50 * MS),
)


@pytest.mark.parametrize("encoder", ["json", "proto"])
def test_sglang_request_tree(tmp_path, encoder):
    with provider({"service.name": "sglang"}, SGLangIdGenerator()) as (tracer, spans):
        sglang_spans(tracer, SG)
        sglang_spans(tracer, SG_RETRACTED)
    con, results = _ingest(spans, tmp_path, encoder)
    assert results[0].conventions["sglang"] == 2
    p = _phases(con, SG.rid)
    ms = {
        "t_arrival": T0,
        "tokenize_ns": SG.tokenize_end,
        "queue_ns": SG.forward_entry - SG.wait_entry,
        # the stamps define prefill: forward entry -> prefill finished. SGLang's own
        # gen_ai.latency.time_in_model_prefill (first token seen - dispatch) includes queueing.
        "prefill_ns": SG.prefill_end - SG.forward_entry,
        "decode_ns": SG.decode_ends[-1] - SG.prefill_end,
        "ttft_ns": SG.prefill_end,
        "e2e_ns": SG.decode_ends[-1],
        # tokenize end -> wait queue entry: api_server_dispatch and request_process
        "residual_ns": SG.wait_entry - SG.tokenize_end,
        "output_tokens": 4,
    }
    assert {k: p[k] for k in ms} == ms
    attr_prefill = round((SG.first_token_seen - SG.dispatch_end) / NS * NS)
    assert attr_prefill - p["prefill_ns"] == (SG.forward_entry - SG.dispatch_end) + (
        SG.first_token_seen - SG.prefill_end
    )
    gaps = con.sql(
        "SELECT ts - ?, tbt_ns FROM token_gaps WHERE request_id = ? ORDER BY idx",
        params=[T0, SG.rid],
    ).fetchall()
    ends = [SG.prefill_end, *SG.decode_ends]
    assert gaps == [(e, None if i == 0 else e - ends[i - 1]) for i, e in enumerate(ends)]
    sched = [t[2] - T0 for t in _tokens(con, SG.rid)]
    assert sched == [SG.forward_entry, SG.decode_sched, *SG.decode_ends[:-1]]
    events = con.sql(
        "SELECT kind, count(*) FROM events WHERE request_id = ? GROUP BY kind ORDER BY kind",
        params=[SG.rid],
    ).fetchall()
    assert events == [("scheduled", 4)]

    r = _phases(con, SG_RETRACTED.rid)
    req = con.sql(
        "SELECT n_preemptions, t_first_token FROM requests WHERE request_id = ?",
        params=[SG_RETRACTED.rid],
    ).fetchall()[0]
    assert req == (1, SG_RETRACTED.t0 + SG_RETRACTED.prefill_end)  # first prefill, not redo
    assert r["decode_ns"] == SG_RETRACTED.decode_ends[-1] - SG_RETRACTED.prefill_end
    ids = con.sql("SELECT DISTINCT substr(trace_id, 1, 16) FROM spans").fetchall()
    assert ids == [("0" * 16,)]  # 64-bit trace ids, as SGLang's id generator makes them


@pytest.mark.parametrize("encoder", ["json", "proto"])
def test_sglang_aborts_mark_the_thread_span(tmp_path, encoder):
    """`TraceReqContext.abort(abort_info=...)` sets ERROR on the thread span, with no
    description, and the finish reason's fields as attributes (FINISH_ABORT.to_json, its
    None values dropped by the SDK), or one `reason` (`abort_info` in the older
    tracing/trace.py); the root ends as any other. A rejection keeps its error type; an abort
    without an HTTP status is finish reason `abort`; the tracer's own destructor message, in
    either form, is no failure."""
    from opentelemetry.trace import Status, StatusCode

    cases = {
        "rej00000": ({"type": "abort", "message": "Input too long", "status_code": 400,
                      "err_type": "BadRequestError"}, ("BadRequestError", None)),
        "left0000": ({"type": "abort", "message": "Abort request", "status_code": None,
                      "err_type": None}, ("Abort request", "abort")),
        "kvcap000": ({"reason": "Request kvcap000 exceeds the maximum number of tokens"},
                     ("Request kvcap000 exceeds the maximum number of tokens", None)),
        "gc000000": ({"reason": "have unclosed span, auto closed"}, (None, None)),
        "gcold000": ({"abort_info": "have unclosed span, auto closed"}, (None, None)),
    }  # fmt: skip
    with provider({"service.name": "sglang"}, SGLangIdGenerator()) as (tracer, spans):
        for i, (rid, (info, _)) in enumerate(cases.items()):
            t = T0 + i * 100 * MS
            attrs = {"rid": rid, "module": "sglang::request"}
            root = tracer.start_span(f" Req {rid}", start_time=t, context=None, attributes=attrs)
            ctx = trace.set_span_in_context(root)
            thread = tracer.start_span("tokenizer (host:1f2e3d4c | pid:4242)", start_time=t,
                                       context=ctx)  # fmt: skip
            tokenize = tracer.start_span("tokenize", start_time=t,
                                         context=trace.set_span_in_context(thread))  # fmt: skip
            tokenize.end(end_time=t + 2 * MS)
            thread.set_status(Status(StatusCode.ERROR))
            thread.set_attributes({k: v for k, v in info.items() if v is not None})
            thread.end(end_time=t + 3 * MS)
            root.end(end_time=t + 4 * MS)
    con, results = _ingest(spans, tmp_path, encoder)
    assert results[0].conventions["sglang"] == len(cases)
    got = dict(
        con.sql("SELECT request_id, (error, finish_reason) FROM requests ORDER BY 1").fetchall()
    )
    assert got == {rid: expected for rid, (_, expected) in cases.items()}


# --- vLLM token-level events (PR 32573) ----------------------------------------------------

A = T0 + 1000 * MS
STEPS = [
    Step(A + 12 * MS + 7, A + 35 * MS + 11, [101], batch=3, waiting=1, total=500),
    Step(A + 36 * MS + 1, A + 45 * MS + 3, [102, 103], batch=4, waiting=0, total=540),
    Step(A + 46 * MS + 5, A + 56 * MS + 9, [104], batch=4, waiting=2, total=560),
]
VLLM_EVENTS = VllmRequest(
    "cmpl-tok-0",
    arrival=A,
    finish=A + 58 * MS,
    steps=STEPS,
    engine_events=[
        ("QUEUED", A + 2 * MS + 3),
        ("SCHEDULED", A + 12 * MS + 7),
        ("PREEMPTED", A + 40 * MS),
        ("SCHEDULED", A + 44 * MS),
    ],
)


@pytest.mark.parametrize("encoder", ["json", "proto"])
def test_vllm_token_events_and_engine_core_events(tmp_path, encoder):
    with provider({"service.name": "vllm"}) as (tracer, spans):
        vllm_token_event_span(tracer, VLLM_EVENTS)
    con, results = _ingest(spans, tmp_path, encoder)
    assert results[0].conventions == {"vllm": 1, "vllm-token-events": 1}
    assert _tokens(con, "cmpl-tok-0") == [
        (s.generated, len(s.ids), s.scheduled, s.batch, s.waiting, s.total, "epoch") for s in STEPS
    ]
    p = _phases(con, "cmpl-tok-0")
    assert (p["queue_ns"], p["prefill_ns"], p["decode_ns"], p["output_tokens"]) == (
        10 * MS + 4,  # QUEUED -> first SCHEDULED event
        STEPS[0].generated - STEPS[0].scheduled,
        STEPS[-1].generated - STEPS[0].generated,
        4,
    )
    kinds = con.sql(
        "SELECT list(kind ORDER BY ts) FROM events WHERE request_id = 'cmpl-tok-0'"
    ).fetchall()[0][0]
    assert kinds == ["queued", "scheduled", "preemption", "scheduled"]
    n = con.sql("SELECT n_preemptions FROM requests WHERE request_id = 'cmpl-tok-0'").fetchall()[0]
    assert n == (1,)


def test_engine_core_event_spellings(tmp_path):
    """`EngineCoreEventType` (vllm/v1/engine/__init__.py, QUEUED = 1 … PREEMPTED = 3) as the
    member name, as `str()` of the member before Python 3.11, and with a prefix."""
    from dataclasses import replace

    names = ["EngineCoreEventType.QUEUED", "scheduled", "vllm.engine_core.PREEMPTED", "SCHEDULED"]
    events = [(n, ts) for n, (_, ts) in zip(names, VLLM_EVENTS.engine_events, strict=True)]
    with provider({"service.name": "vllm"}) as (tracer, spans):
        vllm_token_event_span(tracer, replace(VLLM_EVENTS, engine_events=events))
    con, _ = _ingest(spans, tmp_path, "json")
    kinds = con.sql("SELECT list(kind ORDER BY ts) FROM events").fetchall()[0][0]
    assert kinds == ["queued", "scheduled", "preemption", "scheduled"]
    assert _phases(con, "cmpl-tok-0")["queue_ns"] == 10 * MS + 4


# --- per-token arrays, every encoding ------------------------------------------------------

B = T0 + 2000 * MS
STEPS_100US = [  # the Alipay compressed arrays keep 4 decimals of a second
    Step(B + 121 * MS // 10, B + 351 * MS // 10, [7], batch=3, waiting=1, total=500),
    Step(B + 362 * MS // 10, B + 451 * MS // 10, [8, 9], batch=4, waiting=0, total=540),
    Step(B + 463 * MS // 10, B + 565 * MS // 10, [10], batch=5, waiting=2, total=561),
]
ENCODINGS = ["convention", "json-text", "alipay-compressed", "alipay-orjson"]


def _printed_ns(seconds: float) -> int:
    """ns of a float as orjson prints it (shortest repr), rounded half up at 9 decimals."""
    return int((Decimal(orjson.dumps(seconds).decode()) * NS).quantize(1, ROUND_HALF_UP))


def _expected_orjson_ts(values: list[int]) -> list[int]:
    """What the orjson variant carries: the first step's entries absolute float64 epoch
    seconds (printed to ~0.1 µs), later ones offsets from that first scheduled time."""
    base_ns = _printed_ns(values[0] / NS)
    return [
        _printed_ns(v / NS) if v == values[0] else base_ns + _printed_ns((v - values[0]) / NS)
        for v in values
    ]


@pytest.mark.parametrize("encoder", ["json", "proto"])
def test_per_token_arrays_in_every_encoding(tmp_path, encoder):
    with provider({"service.name": "vllm"}) as (tracer, spans):
        for enc in ENCODINGS:
            vllm_array_span(tracer, VllmRequest(enc, B, B + 60 * MS, STEPS_100US), enc)
        vllm_token_event_span(tracer, VllmRequest("events", B, B + 60 * MS, STEPS_100US))
    con, results = _ingest(spans, tmp_path, encoder)
    assert results[0].conventions["token-arrays"] == 4
    events = _tokens(con, "events")
    gen = [s.generated for s in STEPS_100US]
    sched = [s.scheduled for s in STEPS_100US]
    for enc in ("convention", "json-text", "alipay-compressed"):
        got = _tokens(con, enc)
        assert [g[:2] for g in got] == [e[:2] for e in events], enc
        assert [g[2] for g in got] == sched, enc
        assert {g[6] for g in got} == {"span_start"}
    assert [g[3:5] for g in _tokens(con, "convention")] == [(3, 1), (4, 0), (5, 2)]
    assert [g[3] for g in _tokens(con, "alipay-compressed")] == [3, 4, 5]
    orj = _tokens(con, "alipay-orjson")
    first_gen = _expected_orjson_ts([sched[0], *gen])[1:]
    assert [g[0] for g in orj] == [
        first_gen[0],
        *(_expected_orjson_ts([sched[0], g])[1] for g in gen[1:]),
    ]
    assert [g[1] for g in orj] == [1, 2, 1]
    assert {g[6] for g in orj} == {"first_scheduled"}
    assert abs(orj[0][0] - gen[0]) < 1000  # float64 epoch seconds: sub-microsecond
    phases = {e: _phases(con, e) for e in [*ENCODINGS, "events"]}
    for enc in ("convention", "json-text", "alipay-compressed"):
        assert phases[enc]["decode_ns"] == phases["events"]["decode_ns"]
        assert phases[enc]["ttft_ns"] == phases["events"]["ttft_ns"]
    cached = con.sql("SELECT cached_tokens FROM requests WHERE request_id = 'alipay-orjson'")
    assert cached.fetchall()[0] == (16,)


# --- bad input, per encoding ---------------------------------------------------------------


def _bad_span(tracer, request_id: str, completion: int, attrs: dict) -> None:
    span = tracer.start_span(
        "llm_request",
        kind=SpanKind.SERVER,
        start_time=B,
        attributes={
            "gen_ai.request.id": request_id,
            "gen_ai.usage.completion_tokens": completion,
            "gen_ai.latency.time_to_first_token": 0.03,
            "gen_ai.latency.e2e": 0.06,
            **attrs,
        },
    )
    span.end(end_time=B + 60 * MS)


@pytest.mark.parametrize("encoder", ["json", "proto"])
def test_bad_arrays_are_quarantined_and_the_request_kept(tmp_path, encoder):
    gen_key = "gen_ai.latency.per_token_generation_time"
    with provider() as (tracer, spans):
        _bad_span(tracer, "short", 4, {gen_key: [0.03, 0.04, 0.05]})
        _bad_span(tracer, "no-output", 0, {gen_key: [0.03]})
        _bad_span(tracer, "undecodable", 2, {gen_key: "H4sIAAAAnotgzip"})
        _bad_span(tracer, "backwards", 3, {gen_key: [0.03, 0.05, 0.04]})
        _bad_span(tracer, "bytes-garbage", 1, {gen_key: b"\x00\x01 not json"})
        _bad_span(tracer, "bytes-not-utf8", 1, {gen_key: b"[\xff\xfe]"})
        _bad_span(tracer, "not-a-number", 2, {gen_key: '[0.03, "soon"]'})
        _bad_span(tracer, "json-backwards", 2, {gen_key: json.dumps([0.05, 0.04])})
        _bad_span(
            tracer,
            "lengths",
            2,
            {gen_key: [0.03, 0.04], "gen_ai.iteration.per_token_batch_size": [1, 2, 3]},
        )
    con, _ = _ingest(spans, tmp_path, encoder)
    reasons = sorted(r for (r,) in con.sql("SELECT reason FROM quarantine").fetchall())
    assert reasons == [
        "per-token array on a request with no output (completion_tokens = 0)",
        "per-token arrays differ in length",
        "per-token arrays hold 3 tokens but completion_tokens is 4",
        "per-token attribute gen_ai.latency.per_token_generation_time (bytes) does not decode",
        "per-token attribute gen_ai.latency.per_token_generation_time (bytes) does not decode",
        "per-token attribute gen_ai.latency.per_token_generation_time (compressed-text) "
        "does not decode",
        "per-token attribute gen_ai.latency.per_token_generation_time (json-text) "
        "holds entries that are not numbers",
        "per-token times run backwards at position 1",
        "per-token times run backwards at position 2",
    ]
    kept = con.sql(
        "SELECT request_id, ttft_ns, e2e_ns FROM request_phases ORDER BY request_id"
    ).fetchall()
    assert [k[0] for k in kept] == [
        "backwards",
        "bytes-garbage",
        "bytes-not-utf8",
        "json-backwards",
        "lengths",
        "no-output",
        "not-a-number",
        "short",
        "undecodable",
    ]
    assert {(k[1], k[2]) for k in kept} == {(30 * MS, 60 * MS)}
    assert con.sql("SELECT count(*) FROM tokens").fetchall()[0] == (0,)


# --- TensorRT-LLM, disaggregated serving ---------------------------------------------------


@pytest.mark.parametrize("encoder", ["json", "proto"])
def test_tensorrt_llm_kv_transfer_phase(tmp_path, encoder):
    """TensorRT-LLM's request span as `GenerationResultBase.do_tracing` builds it
    (`tensorrt_llm/executor/result.py`, read in the NVIDIA/TensorRT-LLM fork
    JunyiXu-nv/TensorRT-LLM @10d0af85c385; names from `tensorrt_llm/llmapi/tracing.py`
    @0fb7f7586fda): `start_as_current_span("llm_request", kind=SERVER,
    start_time=int((arrival + time.time() - time.monotonic()) * 1e9))`, no explicit end (it
    ends when the result is handled, after the last token). Perf metrics are steady-clock
    seconds moved to the epoch by that one correction, the KV events too. Attributes:
    `gen_ai.request.id` = the executor's int id, sampling params, prompt / completion tokens,
    TTFT / e2e / queue in s (first token, last token, first scheduled − arrival),
    `finish_reasons` as JSON text, `kv_cache_transfer_time` = end − start (0.0 without a
    transfer). Only with both KV stamps, `add_event` puts `kv_cache_transfer_start` and
    `kv_cache_transfer_end` (attribute `kv_cache_size`) on this span. `ctx_server.selected`
    / `gen_server.selected` are declared in `SpanEvents` but where they are emitted was not
    found: here on a router SERVER span (`trace_span`), as a guess."""
    arrival = T0 + 3000 * MS
    kv_start, kv_end = arrival + 2 * MS + 1, arrival + 7 * MS + 3
    queue, ttft, e2e = 9 * MS + 5, 15 * MS + 7, 60 * MS + 9

    def request(tracer, rid, start, kv, context=None):
        span = tracer.start_span(
            "llm_request",
            kind=SpanKind.SERVER,
            start_time=start,
            context=context,
            attributes={
                "gen_ai.request.temperature": 0.0,
                "gen_ai.request.top_p": 1.0,
                "gen_ai.request.top_k": 1,
                "gen_ai.request.max_tokens": 20,
                "gen_ai.request.n": 1,
                "gen_ai.request.id": rid,
                "gen_ai.usage.prompt_tokens": 100,
                "gen_ai.usage.completion_tokens": 20,
                "gen_ai.latency.time_to_first_token": ttft / NS,
                "gen_ai.latency.e2e": e2e / NS,
                "gen_ai.latency.time_in_queue": queue / NS,
                "gen_ai.response.finish_reasons": json.dumps(["length"]),
                "gen_ai.latency.kv_cache_transfer_time": (kv[1] - kv[0]) / NS if kv else 0.0,
            },
        )
        if kv:
            span.add_event("kv_cache_transfer_start", None, kv[0])
            span.add_event("kv_cache_transfer_end", {"kv_cache_size": 65536}, kv[1])
        span.end(end_time=start + e2e + MS)

    with provider() as (tracer, spans):
        router = tracer.start_span(
            "openai_completion", kind=SpanKind.SERVER, start_time=arrival - MS
        )
        router.add_event("ctx_server.selected", {"server": "ctx-0:8001"}, arrival - MS + 10)
        router.add_event("gen_server.selected", {"server": "gen-0:8002"}, arrival - 10)
        request(tracer, 7, arrival, (kv_start, kv_end), trace.set_span_in_context(router))
        router.end(end_time=arrival + e2e + 2 * MS)
        request(tracer, 8, arrival + 500 * MS, None)  # aggregated serving: no transfer
    con, results = _ingest(spans, tmp_path, encoder)
    assert results[0].conventions["tensorrt-llm"] == 2
    assert "vllm" not in results[0].conventions  # same span name, told apart
    p = _phases(con, "7")
    want = {
        "tokenize_ns": kv_start - arrival,  # before the transfer: no stamp, called tokenize
        "kv_transfer_ns": kv_end - kv_start,
        "queue_ns": arrival + queue - kv_end,  # the queue starts when the KV has arrived
        "prefill_ns": ttft - queue,
        "decode_ns": e2e - ttft,
        "e2e_ns": e2e,
        "residual_ns": 0,
        "finish_reason": "length",
    }
    assert {k: p[k] for k in want} == want
    p = _phases(con, "8")
    want = {"kv_transfer_ns": None, "queue_ns": queue, "prefill_ns": ttft - queue, "e2e_ns": e2e}
    assert {k: p[k] for k in want} == want
    kinds = con.sql("SELECT kind, message FROM events ORDER BY ts").fetchall()
    assert [k for k, _ in kinds] == [
        "otel:ctx_server.selected",
        "otel:gen_server.selected",
        "otel:kv_cache_transfer_start",
        "otel:kv_cache_transfer_end",
    ]
    assert "65536" in kinds[-1][1]  # kv_cache_size kept with the event


# --- vLLM start-up spans -------------------------------------------------------------------


@pytest.mark.parametrize("encoder", ["json", "proto"])
def test_vllm_startup_spans_become_startup_events(tmp_path, encoder):
    """`instrument` (vllm/tracing/__init__.py @bef65387bad4, otel.py): one INTERNAL span per
    decorated call, nested, with `code.function`, `code.namespace`, `code.filepath` and
    `code.lineno` as a string."""
    t = T0 - 300 * NS
    plan = [
        ("Overall Loading", 0, 95 * NS, None),
        ("Load model", 1 * NS, 31 * NS + 5, "Overall Loading"),
        ("Load weights", 2 * NS, 29 * NS + 7, "Load model"),
        ("Compile graph", 32 * NS, 80 * NS + 11, "Overall Loading"),
        ("Capture model", 81 * NS, 90 * NS + 13, "Overall Loading"),
    ]
    with provider({"service.name": "vllm.engine"}) as (tracer, spans):
        open_spans = {}
        for name, start, _, parent in plan:
            ctx = trace.set_span_in_context(open_spans[parent]) if parent else None
            open_spans[name] = tracer.start_span(
                name,
                context=ctx,
                start_time=t + start,
                attributes={
                    "code.function": f"GPUModelRunner.{name.lower().replace(' ', '_')}",
                    "code.namespace": "vllm.v1.worker.gpu_model_runner",
                    "code.filepath": "/opt/vllm/vllm/v1/worker/gpu_model_runner.py",
                    "code.lineno": "2101",
                },
            )
        for name, _, end, _ in reversed(plan):
            open_spans[name].end(end_time=t + end)
    con, results = _ingest(spans, tmp_path, encoder)
    assert results[0].conventions["vllm-startup"] == 5
    rows = con.sql("SELECT kind, ts, message, value FROM events ORDER BY ts").fetchall()
    assert [r[:3] for r in rows] == [
        ("startup_weights_load_s", t + 29 * NS + 7, "Load weights"),
        ("startup_model_load_s", t + 31 * NS + 5, "Load model"),
        ("startup_torch_compile_s", t + 80 * NS + 11, "Compile graph"),
        ("cuda_graph", t + 90 * NS + 13, "Capture model"),
        ("startup_loading_s", t + 95 * NS, "Overall Loading"),
    ]
    # durations in s as doubles (the log reader's unit), to the double's precision
    assert [r[3] for r in rows] == pytest.approx(
        [27.000000007, 30.000000005, 48.000000011, 9.000000013, 95.0], rel=1e-15
    )
    assert con.sql("SELECT count(*) FROM spans").fetchall()[0] == (5,)
    assert con.sql("SELECT count(*) FROM requests").fetchall()[0] == (0,)


# --- vLLM-Omni -----------------------------------------------------------------------------


@pytest.mark.parametrize("encoder", ["json", "proto"])
def test_vllm_omni_stages_are_phased_and_the_root_gives_e2e(tmp_path, encoder):
    """vLLM-Omni (research §5): an `omni_request` root per request and an INTERNAL
    `llm_request` per stage under it, with vLLM's gen_ai attributes."""
    t = T0 + 4000 * MS
    with provider({"service.name": "vllm-omni"}) as (tracer, spans):
        root = tracer.start_span(
            "omni_request",
            kind=SpanKind.SERVER,
            start_time=t,
            attributes={"gen_ai.request.id": "omni-1"},
        )
        ctx = trace.set_span_in_context(root)
        for i, (start, ttft, e2e) in enumerate(
            [(1 * MS, 20 * MS, 50 * MS), (52 * MS, 9 * MS, 90 * MS)]
        ):
            stage = tracer.start_span(
                "llm_request",
                kind=SpanKind.INTERNAL,
                context=ctx,
                start_time=t + start,
                attributes={
                    "gen_ai.request.id": f"omni-1-stage-{i}",
                    "gen_ai.usage.prompt_tokens": 10,
                    "gen_ai.usage.completion_tokens": 5,
                    "gen_ai.latency.time_in_queue": 0.002,
                    "gen_ai.latency.time_to_first_token": ttft / NS,
                    "gen_ai.latency.e2e": e2e / NS,
                    "gen_ai.latency.time_in_model_prefill": (ttft - 2 * MS) / NS,
                    "gen_ai.latency.time_in_model_decode": (e2e - ttft) / NS,
                },
            )
            stage.end(end_time=t + start + e2e)
        root.end(end_time=t + 145 * MS)
        # a load generator's CLIENT span over an ordinary server request: not a stage
        client = tracer.start_span(
            "chat Qwen3",
            kind=SpanKind.CLIENT,
            start_time=t,
            attributes={"gen_ai.operation.name": "chat", "gen_ai.response.id": "cmpl-9"},
        )
        server = tracer.start_span(
            "llm_request",
            kind=SpanKind.SERVER,
            context=trace.set_span_in_context(client),
            start_time=t + MS,
            attributes={"gen_ai.request.id": "cmpl-9", "gen_ai.latency.e2e": 0.05},
        )
        server.end(end_time=t + 51 * MS)
        client.end(end_time=t + 52 * MS)
    con, results = _ingest(spans, tmp_path, encoder)
    views = con.sql("SELECT view FROM requests WHERE request_id = 'cmpl-9' ORDER BY view")
    assert views.fetchall() == [("client",), ("server",)]
    assert results[0].conventions["vllm-omni"] == 1
    rows = con.sql(
        "SELECT request_id, t_arrival - ?, e2e_ns, prefill_ns FROM request_phases "
        "WHERE request_id LIKE 'omni%' ORDER BY request_id",
        params=[t],
    ).fetchall()
    assert rows == [
        ("omni-1", 0, 145 * MS, None),
        ("omni-1/stage0", 1 * MS, 50 * MS, 18 * MS),
        ("omni-1/stage1", 52 * MS, 90 * MS, 7 * MS),
    ]


@pytest.mark.parametrize("encoder", ["json", "proto"])
def test_sglang_pd_decode_node_kv_transfer(tmp_path, encoder):
    """SGLang PD decode node (req_time_stats.py @00ce49e05c17, DisaggregationMode.DECODE):
    root `"decode Req <rid[:8]>"` with `bootstrap_room`; scheduler slices decode_prepare →
    decode_bootstrap → decode_transferred (KV arrives) → decode_waiting (queue) →
    decode_forward with decode_loop steps. No prefill runs here."""
    t, rid = T0 + 5000 * MS, "77aa88bb99cc00dd"
    stamps = {
        "tokenize": (0, 1 * MS + 1),
        "decode_prepare": (2 * MS, 3 * MS),
        "decode_bootstrap": (3 * MS, 4 * MS + 3),
        "decode_transferred": (4 * MS + 3, 9 * MS + 5),
        "decode_waiting": (9 * MS + 5, 10 * MS + 7),
    }
    loops = [(10 * MS + 7, 20 * MS + 9), (20 * MS + 9, 30 * MS + 11)]
    with provider({"service.name": "sglang-decode"}, SGLangIdGenerator()) as (tracer, spans):
        root = tracer.start_span(
            f"decode Req {rid[:8]}",
            start_time=t,
            attributes={"rid": rid, "module": "sglang::request", "bootstrap_room": "0x2a"},
        )
        rctx = trace.set_span_in_context(root)
        tok = tracer.start_span("tokenizer (host:1f2e3d4c | pid:1)", context=rctx, start_time=t)
        sched = tracer.start_span(
            "scheduler [TP 0] (host:1f2e3d4c | pid:2)", context=rctx, start_time=t + 2 * MS
        )
        for name, (a, b) in stamps.items():
            parent = tok if name == "tokenize" else sched
            s = tracer.start_span(name, context=trace.set_span_in_context(parent), start_time=t + a)
            s.end(end_time=t + b)
        tok.end(end_time=t + 1 * MS + 500)
        fwd = tracer.start_span(
            "decode_forward", context=trace.set_span_in_context(sched), start_time=t + loops[0][0]
        )
        for ct, (a, b) in enumerate(loops):
            s = tracer.start_span(
                "decode_loop", context=trace.set_span_in_context(fwd), start_time=t + a
            )
            s.set_attributes({"decode_ct": ct})
            s.end(end_time=t + b)
        fwd.end(end_time=t + 31 * MS)
        sched.end(end_time=t + 31 * MS)
        root.end(end_time=t + 32 * MS)
    con, results = _ingest(spans, tmp_path, encoder)
    p = _phases(con, rid)
    want = {
        "tokenize_ns": 1 * MS + 1,
        "kv_transfer_ns": 5 * MS + 2,
        "queue_ns": 1 * MS + 2,
        "prefill_ns": 0,  # the first token came with the KV cache from the prefill node
        "decode_ns": loops[-1][1] - loops[0][0],
        "e2e_ns": loops[-1][1],
        # tokenize end -> transfer start (decode_prepare, decode_bootstrap) is unstamped
        "residual_ns": 4 * MS + 3 - (1 * MS + 1),
    }
    assert {k: p[k] for k in want} == want
    assert results[0].conventions == {"sglang": 1}
