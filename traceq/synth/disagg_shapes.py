"""The layers around the engines of a disaggregated deployment, in Dynamo's and in llm-d's
shapes. Span names, kinds, attributes and parent relations are those of the shared research
note `disagg_producers.md`, which names each producer's source; the engines are vLLM's
`llm_request` spans (traceq/synth/disagg_spans.py, `vllm`).
"""

from __future__ import annotations

from collections.abc import Callable

from traceq.synth.disagg_spans import MS, SERVER, US, Hop, Legs, Trace, uuid_of, vllm
from traceq.synth.request import Request
from traceq.synth.write_conventions import otlp_attr


def _ms(ns: int) -> float:
    return round(ns / MS, 3)


def _error(v: Request) -> str | None:
    return (v.status_message or v.error) if v.error else None


# --- Dynamo: frontend (HTTP + KV router) and workers running vLLM ----------------------------

DYNAMO_SCOPE = "dynamo"
DYNAMO_PREFILL_AT = 550 * US  # route 100-350 µs, handle_payload 450, engine.generate 500
DYNAMO_DECODE_AFTER = 600 * US  # route 150-400 µs after the prefill's token, worker at 500


def dynamo_served(t: Trace, h: Hop, r: Request, g: Legs, frontend: str) -> None:
    """http-request → kv_router.route_request (phase Prefill) → handle_payload → engine.generate
    (disagg_role prefill) → llm_request; then the Decode route to the decode worker, whose
    engine.generate carries the prefill span's ids and an OTel Link to it."""
    last = g.decode or g.prefill
    end = last.t_end + 300 * US
    error = _error(last)
    http = t.span(
        (frontend, DYNAMO_SCOPE),
        "http-request",
        r.t_arrival,
        end,
        kind=SERVER,
        attrs=[
            otlp_attr("method", "POST"),
            otlp_attr("uri", "/v1/chat/completions"),
            otlp_attr("trace_id", t.trace_id),
            otlp_attr("x_request_id", h.x_request_id),
            otlp_attr("request.outcome", "error" if error else "success"),
        ],
        error=error,
    )
    prefill = _dynamo_leg(t, h, http, g.prefill, None, r.t_arrival + 100 * US, "prefill", frontend)
    if g.decode is not None:
        start = g.prefill.t_end + 150 * US
        _dynamo_leg(t, h, http, g.decode, g.kv, start, "decode", frontend, prefill)


def _dynamo_leg(
    t: Trace,
    h: Hop,
    http: str,
    v: Request,
    kv: tuple[int, int] | None,
    route_at: int,
    role: str,
    frontend: str,
    prefill_span: str = "",
) -> str:
    worker = h.prefill if role == "prefill" else h.decode
    cached = v.cached // 16 if role == "prefill" else 0  # Dynamo's KV blocks are 16 tokens
    route = t.span(
        (frontend, DYNAMO_SCOPE),
        "kv_router.route_request",
        route_at,
        route_at + 250 * US,
        http,
        attrs=[
            otlp_attr("request_id", h.context_id),
            otlp_attr("worker_id", h.worker_ids[worker]),
            otlp_attr("dp_rank", 0),
            otlp_attr("overlap_blocks", cached),
            otlp_attr("phase", role.capitalize()),
        ],
    )
    where = (worker, DYNAMO_SCOPE)
    ingress = t.span(
        where,
        "handle_payload",
        v.t_arrival - 100 * US,
        v.t_end + 100 * US,
        route,
        kind=SERVER,
        attrs=[
            otlp_attr("component", role),
            otlp_attr("endpoint", "generate"),
            otlp_attr("namespace", "dynamo"),
            otlp_attr("instance_id", h.worker_ids[worker]),
            otlp_attr("x_request_id", h.x_request_id),
            otlp_attr("x_dynamo_request_id", h.context_id),
        ],
    )
    attrs = [
        otlp_attr("model", h.model),
        otlp_attr("input_tokens", v.prompt),
        otlp_attr("output_tokens", len(v.tokens)),
        otlp_attr("disagg_role", role),
    ]
    if v.t_first_token is not None:
        attrs.append(otlp_attr("ttft_ms", _ms(v.t_first_token - (v.t_arrival - 50 * US))))
    if v.finish_reason:
        attrs.append(otlp_attr("finish_reason", v.finish_reason))
    links = None
    if prefill_span:
        attrs += [
            otlp_attr("prefill_trace_id", t.trace_id),
            otlp_attr("prefill_span_id", prefill_span),
        ]
        links = [{"traceId": t.trace_id, "spanId": prefill_span, "attributes": []}]
    engine = t.span(
        where,
        "engine.generate",
        v.t_arrival - 50 * US,
        v.t_end + 50 * US,
        ingress,
        attrs=attrs,
        error=_error(v),
        links=links,
    )
    vllm(t, worker, engine, v, kv)
    return engine


def dynamo_lost(t: Trace, h: Hop, r: Request, frontend: str, error: str) -> None:
    """Failed at the frontend after its prefill routing decision: no worker saw it."""
    http = t.span(
        (frontend, DYNAMO_SCOPE),
        "http-request",
        r.t_arrival,
        r.t_arrival + 1_200 * US,
        kind=SERVER,
        attrs=[
            otlp_attr("method", "POST"),
            otlp_attr("uri", "/v1/chat/completions"),
            otlp_attr("x_request_id", h.x_request_id),
            otlp_attr("request.outcome", "error"),
        ],
        error=error,
    )
    t.span(
        (frontend, DYNAMO_SCOPE),
        "kv_router.route_request",
        r.t_arrival + 100 * US,
        r.t_arrival + 900 * US,
        http,
        attrs=[otlp_attr("request_id", h.context_id), otlp_attr("phase", "Prefill")],
    )


# --- llm-d: EPP (Envoy ext_proc), the P/D sidecar in the decode pod, vLLM pods ----------------

EPP_SCOPE = "llm-d-inference-scheduler/epp/extproc"
SIDECAR_SCOPE = "llm-d-routing-sidecar"
LLMD_PREFILL_AT = 700 * US  # EPP scheduling 100-450 µs, sidecar 550, its prefill call 600
LLMD_DECODE_AFTER = 350 * US  # the sidecar's decode call 250 µs after the prefill answered


def llmd_served(
    t: Trace, h: Hop, r: Request, g: Legs, epp: str, address: Callable[[str], str]
) -> None:
    """gateway.request → gateway.request_orchestration (the EPP picks the prefill and the decode
    pod) → the decode pod's sidecar (remote child) calling the prefill vLLM, then the decode
    vLLM. The sidecar forwards the traceparent unchanged, so both vLLM spans are children of
    the orchestration span, siblings of the sidecar's."""
    last = g.decode or g.prefill
    g0, end = r.t_arrival, last.t_end
    gw = t.span((epp, EPP_SCOPE), "gateway.request", g0, end + 300 * US, kind=SERVER)
    orch = _orchestration(t, h, gw, g0, epp, address(h.prefill))
    side = (f"{h.decode}-sidecar", SIDECAR_SCOPE)
    name = "llm_d.pd_proxy.POST /v1/chat/completions"
    http = t.span(side, name, g0 + 550 * US, end + 200 * US, orch, kind=SERVER)
    first = g.decode.t_first_token if g.decode is not None else None
    totals = [
        otlp_attr("llm_d.pd_proxy.total_duration_ms", (end + 150 * US - (g0 + 580 * US)) // MS),
        otlp_attr("llm_d.pd_proxy.prefill_duration_ms", (g.prefill.t_end + 50 * US - g0) // MS),
    ]
    if first is not None:
        totals.append(otlp_attr("llm_d.pd_proxy.true_ttft_ms", (first - g0) // MS))
    request = t.span(
        side,
        "llm_d.pd_proxy.request",
        g0 + 580 * US,
        end + 150 * US,
        http,
        kind=SERVER,
        attrs=[
            otlp_attr("llm_d.pd_proxy.connector", "nixlv2"),
            otlp_attr("llm_d.pd_proxy.kv_connector", "nixlv2"),
            otlp_attr("llm_d.pd_proxy.request_path", "/v1/chat/completions"),
            otlp_attr("llm_d.pd_proxy.disaggregation_used", True),
            otlp_attr("llm_d.pd_proxy.prefill_target", address(h.prefill)),
            *totals,
        ],
    )
    p_end = g.prefill.t_end + 150 * US
    t.span(
        side,
        "llm_d.pd_proxy.prefill",
        g0 + 600 * US,
        p_end,
        request,
        attrs=[
            otlp_attr("request_id", uuid_of(f"{t.trace_id}:sidecar")),
            otlp_attr("prefill_target", address(h.prefill)),
            otlp_attr("prefill.status_code", 200 if g.decode is not None else 500),
            otlp_attr("prefill.duration_ms", (p_end - g0 - 600 * US) // MS),
        ],
        error=_error(g.prefill) if g.decode is None else None,
    )
    vllm(t, h.prefill, orch, g.prefill, None)
    if g.decode is None:
        return
    d_start = g.prefill.t_end + 250 * US
    t.span(
        side,
        "llm_d.pd_proxy.decode",
        d_start,
        end + 100 * US,
        request,
        attrs=[
            otlp_attr("decode.streaming", True),
            otlp_attr("decode.data_parallel", False),
            otlp_attr("decode.target", address(h.decode)),
            otlp_attr("decode.duration_ms", (end + 100 * US - d_start) // MS),
        ],
        error=_error(g.decode),
    )
    vllm(t, h.decode, orch, g.decode, g.kv)


def _orchestration(
    t: Trace, h: Hop, gw: str, g0: int, epp: str, prefill: str, error: str | None = None
) -> str:
    where = (epp, EPP_SCOPE)
    orch = t.span(
        where,
        "gateway.request_orchestration",
        g0 + 100 * US,
        g0 + 450 * US,
        gw,
        kind=SERVER,
        attrs=[otlp_attr("target_model", h.model), otlp_attr("request_prio", 0)],
        error=error,
    )
    t.span(
        where,
        "llm_d.epp.disagg.profile_handler.pick",
        g0 + 150 * US,
        g0 + 300 * US,
        orch,
        attrs=[
            otlp_attr("gen_ai.request.id", h.x_request_id),
            otlp_attr("gen_ai.request.model", h.model),
            otlp_attr("llm_d.profile_handler.total_profiles", 2),
            otlp_attr("llm_d.profile_handler.executed_profiles", 0 if error else 2),
            otlp_attr("llm_d.profile_handler.decision", "prefill_decode"),
        ],
    )
    if error is None:
        host, port = prefill.rsplit(":", 1)
        t.span(
            where,
            "llm_d.epp.prerequest.disaggregation",
            g0 + 300 * US,
            g0 + 420 * US,
            orch,
            attrs=[
                otlp_attr("llm_d.epp.pd.disaggregation_used", True),
                otlp_attr("llm_d.epp.pd.prefill_pod_address", host),
                otlp_attr("llm_d.epp.pd.prefill_pod_port", port),
            ],
        )
    return orch


def llmd_lost(t: Trace, h: Hop, r: Request, epp: str, error: str) -> None:
    """Scheduling failed in the EPP: no endpoint, so no sidecar and no engine."""
    g0 = r.t_arrival
    gw = t.span((epp, EPP_SCOPE), "gateway.request", g0, g0 + 800 * US, kind=SERVER)
    _orchestration(t, h, gw, g0, epp, "", error)
