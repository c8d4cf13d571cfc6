"""Routed and disaggregated requests as Dynamo and llm-d + vLLM trace them, made by the real
OpenTelemetry SDK: one TracerProvider per process (its own `service.name` and
`service.instance.id`), trace context carried across processes by the W3C propagator as the
producers do (research note `disagg_producers.md`), and a clock skew per host.

Every builder takes true nanosecond stamps (the reference clock) and returns the phases a
user should read back; a host's spans are stamped `true + skew`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

US = 1_000
MS = 1_000_000
T0 = 1_750_000_000_123_456_789

Parent = tuple[str, trace.Span] | None
"""(instance of the parent span, parent span), or None for a root."""


@dataclass
class Cluster:
    """Processes of one deployment: instance → (service name, host); host → clock skew (ns)."""

    processes: dict[str, tuple[str, str]]
    skew: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._memory: list[InMemorySpanExporter] = []
        self._providers: list[TracerProvider] = []
        self._tracers: dict[str, trace.Tracer] = {}
        for instance, (service, _host) in self.processes.items():
            memory = InMemorySpanExporter()
            p = TracerProvider(
                resource=Resource.create({"service.name": service, "service.instance.id": instance})
            )
            p.add_span_processor(SimpleSpanProcessor(memory))
            self._memory.append(memory)
            self._providers.append(p)
            self._tracers[instance] = p.get_tracer(service)

    def stamp(self, instance: str, t: int) -> int:
        return t + self.skew.get(self.processes[instance][1], 0)

    def span(
        self,
        instance: str,
        name: str,
        start: int,
        end: int,
        parent: Parent = None,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        attrs: dict | None = None,
        error: str | None = None,
        tokens: list[int] | None = None,
    ) -> tuple[str, trace.Span]:
        """A finished span on `instance`'s clock; a parent on another instance reaches it as a
        remote parent through W3C trace-context headers (inject there, extract here)."""
        ctx: Context | None = None
        if parent is not None:
            p_instance, p_span = parent
            ctx = trace.set_span_in_context(p_span)
            if p_instance != instance:
                headers: dict[str, str] = {}
                TraceContextTextMapPropagator().inject(headers, context=ctx)
                ctx = TraceContextTextMapPropagator().extract(headers)
        span = self._tracers[instance].start_span(
            name, context=ctx, kind=kind, start_time=self.stamp(instance, start)
        )
        if attrs:
            span.set_attributes(attrs)
        for ts in tokens or []:
            span.add_event("gen_ai.token", {}, timestamp=self.stamp(instance, ts))
        if error:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=self.stamp(instance, end))
        return instance, span

    def finished(self) -> list[ReadableSpan]:
        for p in self._providers:
            p.shutdown()
        return [s for m in self._memory for s in m.get_finished_spans()]


def _vllm(
    c: Cluster,
    instance: str,
    parent: Parent,
    t: int,
    end: int,
    request_id: str,
    *,
    max_tokens: int | None,
    queue: tuple[int, int],
    prefill: tuple[int, int] | None = None,
    kv: tuple[int, int] | None = None,
    tokens: list[int] | None = None,
    error: str | None = None,
) -> None:
    """vLLM's `llm_request` with the PR 44402 children (vllm_queue / vllm_prefill /
    vllm_async_kv_transfer) and traceq's gen_ai.token events on the decode side."""
    attrs = {
        "gen_ai.request.id": request_id,
        "gen_ai.usage.prompt_tokens": 900,
        "gen_ai.usage.completion_tokens": len(tokens) if tokens else (1 if prefill else 0),
    }
    if max_tokens is not None:
        attrs["gen_ai.request.max_tokens"] = max_tokens
    req = c.span(
        instance,
        "llm_request",
        t,
        end,
        parent,
        kind=SpanKind.SERVER,
        attrs=attrs,
        tokens=tokens,
        error=error,
    )
    c.span(instance, "vllm_queue", *queue, req)
    if prefill:
        c.span(instance, "vllm_prefill", *prefill, req)
    if kv:
        c.span(instance, "vllm_async_kv_transfer", *kv, req)


def phases(**kw: float) -> dict[str, float]:
    return kw


# --- Dynamo (frontend + KV router, vLLM backend) --------------------------------------------

DYNAMO = {
    "loadgen": ("loadgen", "client-host"),
    "frontend-0": ("dynamo-frontend", "frontend-host"),
    "prefill-worker-0": ("dynamo-worker-prefill", "prefill-host"),
    "decode-worker-0": ("dynamo-worker-decode", "decode-host"),
}


def dynamo_request(c: Cluster, i: int, t0: int, *, contradiction: bool = False) -> dict:
    """A disaggregated request: loadgen → http-request → kv_router.route_request (Prefill) →
    handle_payload → engine.generate (prefill) → llm_request; then the Decode route → decode
    worker. Returns the ids and the phases it must read back (ms)."""
    xid, ctx_id = f"dyn-x-{i}", f"dyn-ctx-{i}"

    def at(us: int) -> int:
        return t0 + us * US

    client = c.span(
        "loadgen", "POST /v1/chat/completions", at(-200), at(71_800), kind=SpanKind.CLIENT
    )
    gw = c.span(
        "frontend-0",
        "http-request",
        at(0),
        at(71_600),
        client,
        kind=SpanKind.SERVER,
        attrs={"method": "POST", "uri": "/v1/chat/completions", "x_request_id": xid},
    )
    for phase, (r0, r1), worker, role, w0 in (
        ("Prefill", (200, 500), "prefill-worker-0", "prefill", 600),
        ("Decode", (20_500, 20_800), "decode-worker-0", "decode", 20_900),
    ):
        route = c.span(
            "frontend-0",
            "kv_router.route_request",
            at(r0),
            at(r1),
            gw,
            attrs={"request_id": ctx_id, "worker_id": 7, "phase": phase, "overlap_blocks": 3},
        )
        end = 20_300 if role == "prefill" else 71_300
        ingress = c.span(
            worker,
            "handle_payload",
            at(w0),
            at(end),
            route,
            kind=SpanKind.SERVER,
            attrs={"x_request_id": xid, "x_dynamo_request_id": ctx_id, "component": "backend"},
        )
        engine = c.span(
            worker,
            "engine.generate",
            at(w0 + 50),
            at(end - 100),
            ingress,
            attrs={"disagg_role": role, "model": "Qwen/Qwen3-8B", "input_tokens": 900},
        )
        if role == "prefill":
            _vllm(
                c,
                worker,
                engine,
                at(700),
                at(20_100),
                f"cmpl-p-{i}",
                max_tokens=1,
                queue=(at(800), at(2_700)),
                prefill=(at(2_700), at(20_000)),
            )
            if contradiction:  # a child that starts after its parent ended, same host
                c.span(worker, "sample.tokens", at(20_300), at(20_400), engine)
        else:
            _vllm(
                c,
                worker,
                engine,
                at(21_000),
                at(71_100),
                f"cmpl-d-{i}",
                max_tokens=256,
                queue=(at(21_050), at(24_500)),
                kv=(at(21_100), at(24_100)),
                tokens=[at(25_000 + 5_000 * k) for k in range(10)],
            )
    return {
        "request_id": f"cmpl-d-{i}",
        "x_request_id": xid,
        "phases": phases(
            route_ms=0.6,
            tokenize_ms=0.1,
            queue_ms=1.9,
            prefill_ms=17.3,
            kv_transfer_ms=3.0,
            decode_queue_ms=0.4,
            decode_ms=45.0,
            ttft_ms=25.0,
            e2e_ms=71.6,
        ),
        "prefill_instance": "prefill-worker-0",
        "decode_instance": "decode-worker-0",
    }


def dynamo_lost(c: Cluster, i: int, t0: int) -> str:
    """Failed at the frontend after the prefill routing decision: no worker saw it."""
    xid = f"dyn-lost-{i}"
    client = c.span(
        "loadgen", "POST /v1/chat/completions", t0 - 200 * US, t0 + 1_200 * US, kind=SpanKind.CLIENT
    )
    gw = c.span(
        "frontend-0",
        "http-request",
        t0,
        t0 + MS,
        client,
        kind=SpanKind.SERVER,
        attrs={"x_request_id": xid},
        error="503 Service Unavailable",
    )
    c.span(
        "frontend-0",
        "kv_router.route_request",
        t0 + 200 * US,
        t0 + 600 * US,
        gw,
        attrs={"request_id": f"dyn-ctx-lost-{i}", "phase": "Prefill"},
    )
    return xid


def client_only_lost(c: Cluster, t0: int) -> str:
    """A load generator's request that never reached any server (connection refused)."""
    c.span(
        "loadgen",
        "POST /v1/chat/completions",
        t0,
        t0 + 3 * MS,
        kind=SpanKind.CLIENT,
        attrs={"gen_ai.request.id": "client-refused"},
        error="connection refused",
    )
    return "client-refused"


# --- llm-d (EPP + P/D sidecar + vLLM) --------------------------------------------------------

LLMD = {
    "epp-0": ("llm-d-inference-scheduler/epp", "epp-host"),
    "decode-0-sidecar": ("llm-d-routing-sidecar", "decode-host"),
    "prefill-0": ("vllm-prefill", "prefill-host"),
    "decode-0": ("vllm-decode", "decode-host"),
    "decode-1": ("vllm-decode", "decode-host-1"),
}


def llmd_request(
    c: Cluster,
    xid: str,
    t0: int,
    *,
    max_tokens: bool = True,
    retry: bool = False,
    drain_us: int = 0,
) -> dict:
    """gateway.request → gateway.request_orchestration (scheduling) → sidecar (remote child)
    calling the prefill vLLM then the decode vLLM, both of which are children of the EPP's
    context, not of the sidecar's spans (the sidecar forwards the traceparent unchanged)."""

    def at(us: int) -> int:
        return t0 + us * US

    # drain_us: the EPP's stream outlives the response by that much (a slow client)
    gw = c.span("epp-0", "gateway.request", at(0), at(60_500 + drain_us), kind=SpanKind.SERVER)
    orch = c.span(
        "epp-0",
        "gateway.request_orchestration",
        at(100),
        at(500),
        gw,
        kind=SpanKind.SERVER,
        attrs={"target_model": "Qwen/Qwen3-8B"},
    )
    c.span(
        "epp-0",
        "llm_d.epp.disagg.profile_handler.pick",
        at(150),
        at(300),
        orch,
        attrs={"gen_ai.request.id": xid, "llm_d.profile_handler.decision": "prefill_decode"},
    )
    c.span(
        "epp-0",
        "llm_d.epp.prerequest.disaggregation",
        at(300),
        at(450),
        orch,
        attrs={"llm_d.epp.pd.disaggregation_used": True},
    )
    http = c.span(
        "decode-0-sidecar",
        "llm_d.pd_proxy.POST /v1/chat/completions",
        at(700),
        at(60_300),
        orch,
        kind=SpanKind.SERVER,
    )
    proxy = c.span(
        "decode-0-sidecar",
        "llm_d.pd_proxy.request",
        at(750),
        at(60_250),
        http,
        kind=SpanKind.SERVER,
        attrs={"llm_d.pd_proxy.connector": "nixlv2"},
    )
    c.span(
        "decode-0-sidecar",
        "llm_d.pd_proxy.prefill",
        at(800),
        at(19_900),
        proxy,
        attrs={"request_id": f"uuid-{xid}", "prefill_target": "10.0.0.7:8000"},
    )
    c.span(
        "decode-0-sidecar",
        "llm_d.pd_proxy.decode",
        at(20_000),
        at(60_200),
        proxy,
        attrs={"decode.streaming": True},
    )
    rid = f"chatcmpl-{xid}"
    _vllm(
        c,
        "prefill-0",
        orch,
        at(900),
        at(19_800),
        rid,
        max_tokens=1 if max_tokens else None,
        queue=(at(950), at(2_950)),
        prefill=(at(2_950), at(19_500)),
    )
    if retry:  # a decode attempt that failed before any token
        _vllm(
            c,
            "decode-1",
            orch,
            at(20_050),
            at(20_150),
            rid,
            max_tokens=256 if max_tokens else None,
            queue=(at(20_060), at(20_140)),
            error="KV transfer failed",
        )
    _vllm(
        c,
        "decode-0",
        orch,
        at(20_100),
        at(60_100),
        rid,
        max_tokens=256 if max_tokens else None,
        queue=(at(20_150), at(22_500)),
        kv=(at(20_200), at(22_200)),
        tokens=[at(23_000 + 4_000 * k) for k in range(10)],
    )
    return {
        "request_id": rid,
        "x_request_id": xid,
        "phases": phases(
            route_ms=0.4,
            tokenize_ms=0.05,
            queue_ms=2.0,
            prefill_ms=16.55,
            kv_transfer_ms=2.0,
            decode_queue_ms=0.3,
            decode_ms=36.0,
            ttft_ms=23.0,
            e2e_ms=60.5 + drain_us / 1000,
        ),
        "prefill_instance": "prefill-0",
        "decode_instance": "decode-0",
    }


def llmd_lost(c: Cluster, xid: str, t0: int) -> str:
    """Scheduling failed in the EPP: no endpoint, no sidecar, no engine."""
    gw = c.span("epp-0", "gateway.request", t0, t0 + 800 * US, kind=SpanKind.SERVER)
    orch = c.span(
        "epp-0",
        "gateway.request_orchestration",
        t0 + 100 * US,
        t0 + 700 * US,
        gw,
        kind=SpanKind.SERVER,
        error="no healthy upstream",
    )
    c.span(
        "epp-0",
        "llm_d.epp.disagg.profile_handler.pick",
        t0 + 150 * US,
        t0 + 300 * US,
        orch,
        attrs={"gen_ai.request.id": xid},
    )
    return xid


def llmd_prefill_failed(c: Cluster, xid: str, t0: int) -> dict:
    """The EPP picked both pods, the sidecar called the prefill vLLM, which rejected the
    request: no decode call, no decode engine."""

    def at(us: int) -> int:
        return t0 + us * US

    gw = c.span("epp-0", "gateway.request", at(0), at(3_000), kind=SpanKind.SERVER)
    orch = c.span(
        "epp-0", "gateway.request_orchestration", at(100), at(500), gw, kind=SpanKind.SERVER
    )
    c.span(
        "epp-0",
        "llm_d.epp.disagg.profile_handler.pick",
        at(150),
        at(300),
        orch,
        attrs={"gen_ai.request.id": xid, "llm_d.profile_handler.decision": "prefill_decode"},
    )
    proxy = c.span(
        "decode-0-sidecar",
        "llm_d.pd_proxy.request",
        at(700),
        at(2_800),
        orch,
        kind=SpanKind.SERVER,
        attrs={"llm_d.pd_proxy.connector": "nixlv2"},
    )
    c.span(
        "decode-0-sidecar",
        "llm_d.pd_proxy.prefill",
        at(800),
        at(2_700),
        proxy,
        attrs={"prefill_target": "10.0.0.7:8000", "prefill.status_code": 400},
        error="400 Bad Request",
    )
    rid = f"chatcmpl-{xid}"
    _vllm(
        c,
        "prefill-0",
        orch,
        at(900),
        at(2_500),
        rid,
        max_tokens=1,
        queue=(at(950), at(950)),
        error="BadRequestError",
    )
    return {"request_id": rid, "prefill_instance": "prefill-0", "error": "BadRequestError"}
