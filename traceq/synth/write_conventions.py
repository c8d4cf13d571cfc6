"""The same simulated request written in each producer's OpenTelemetry convention
(`traceq synth --convention`), so detection can be checked on all of them.

Shapes follow the producers' source as docs/INGEST.md ("Producers") describes; one engine step
per token chunk, a step scheduled when the previous one ended (steps run back to back; the
first at the request's first scheduling). `traceq` (the default) is written by
`traceq/synth/write_otlp.py` itself; `dynamo` and `llmd` (a whole disaggregated deployment)
by traceq/synth/write_disagg.py.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import itertools

import orjson

from traceq.synth.request import NS, Request

CONVENTIONS = {
    "traceq": "llm_request + gen_ai.token events + tokenize child span (default)",
    "vllm-token-events": "vLLM PR 32573: token_scheduled / token_generated + engine-core events",
    "token-arrays": "per-token double[] arrays, offsets from the span start (proposed convention)",
    "alipay-compressed": "Alipay fork: JSON arrays (4 dp) gzip + base64, offsets from arrival",
    "sglang": "SGLang --enable-trace level 3: request root, thread spans, stage slices",
    "dynamo": "Dynamo P/D: frontend, KV router (a prefill and a decode route), vLLM workers",
    "llmd": "llm-d P/D: EPP gateway, P/D sidecar, vLLM prefill and decode pods",
}
DISAGG_CONVENTIONS = ("dynamo", "llmd")
"""Conventions of a routed, disaggregated deployment (traceq/synth/write_disagg.py): prefill
and decode pools, a skewed host and gateway failures, traces only."""


def otlp_attr(key: str, value: object) -> dict:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    if isinstance(value, list):
        kind = "doubleValue" if value and isinstance(value[0], float) else "intValue"
        vals = [{kind: v if kind == "doubleValue" else str(v)} for v in value]
        return {"key": key, "value": {"arrayValue": {"values": vals}}}
    return {"key": key, "value": {"stringValue": value}}


def _span(trace_id: str, span_id: str, parent: str, name: str, start: int, end: int, **kw) -> dict:
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": kw.pop("kind", 1),
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": kw.pop("attributes", []),
        "events": kw.pop("events", []),
        "status": kw.pop("status", {"code": 0}),
    }


def _ids(trace_id: str, n: int) -> list[str]:
    h = hashlib.blake2b(trace_id.encode(), digest_size=8 * n).hexdigest()
    return [h[i * 16 : (i + 1) * 16] for i in range(n)]


def scheduled_times(r: Request) -> list[int]:
    """When the step of each token was scheduled: the previous token, the first at t_scheduled."""
    return [r.t_scheduled, *r.tokens[:-1]] if r.tokens else []


def _offsets(r: Request, times: list[int], decimals: int) -> list[float]:
    return [round((t - r.t_arrival) / NS, decimals) for t in times]


def request_spans(
    convention: str,
    r: Request,
    ids: tuple[str, str, str],
    attributes: list[dict],
    status: dict,
    preemptions: list[int],
) -> list[bytes]:
    """The spans of one finished request in `convention` (not `traceq`), as JSON bytes."""
    trace_id, span_id, tok_id = ids
    if convention == "sglang":
        return [orjson.dumps(s) for s in _sglang(r, trace_id, span_id, status, preemptions)]
    events: list[dict] = []
    attrs = list(attributes)
    if convention == "vllm-token-events":
        engine = [("QUEUED", r.t_queued), ("SCHEDULED", r.t_scheduled)] if r.t_scheduled else []
        engine += [("PREEMPTED", t) for t in preemptions]
        events = [{"timeUnixNano": str(t), "name": n, "attributes": []} for n, t in engine]
        for s, g in zip(scheduled_times(r), r.tokens, strict=True):
            events.append({"timeUnixNano": str(s), "name": "token_scheduled", "attributes": []})
            events.append(
                {
                    "timeUnixNano": str(g),
                    "name": "token_generated",
                    "attributes": [otlp_attr("new_token_ids", [1])],
                }
            )
    elif convention == "token-arrays" and r.tokens:
        attrs += [
            otlp_attr("gen_ai.request.trace_level", "2"),
            otlp_attr("gen_ai.latency.per_token_generation_time", _offsets(r, r.tokens, 9)),
            otlp_attr(
                "gen_ai.latency.per_token_scheduled_time", _offsets(r, scheduled_times(r), 9)
            ),
        ]
    elif convention == "alipay-compressed" and r.tokens:
        for key, times in (
            ("gen_ai.latency.per_token_generation_time", r.tokens),
            ("gen_ai.latency.per_token_scheduled_time", scheduled_times(r)),
        ):
            text = orjson.dumps(_offsets(r, times, 4))
            attrs.append(otlp_attr(key, base64.b64encode(gzip.compress(text, mtime=0)).decode()))
    server = _span(
        trace_id,
        span_id,
        "",
        "llm_request",
        r.t_arrival,
        r.t_end,
        kind=2,
        attributes=attrs,
        events=events,
        status=status,
    )
    tokenize = _span(trace_id, tok_id, span_id, "tokenize", r.t_arrival, r.t_tokenized)
    return [orjson.dumps(server), orjson.dumps(tokenize)]


def _sglang(
    r: Request, trace_id: str, root_id: str, status: dict, preemptions: list[int]
) -> list[dict]:
    """SGLang unified mode at trace level 3 (sglang observability/trace.py and
    req_time_stats.py; tests/otel_producers.py builds the same with the real SDK)."""
    tok_thread, tokenize, sched_thread, process, waiting, prefill, decode = _ids(trace_id, 7)
    host = "(host:5ca1ab1e | pid:4242)"
    end = r.t_end
    tokens = [t for t in r.tokens if t <= end]  # an abort ends the open slices
    first = tokens[0] if tokens else None
    # An abort marks the thread span ERROR (TraceReqContext.abort), not the root, with no
    # description and the finish reason's fields as attributes (FINISH_ABORT.to_json): a
    # rejection carries its HTTP status and error type, a client that left neither.
    abort, aborted = {"code": 0}, []
    if status.get("code") == 2:
        abort = {"code": 2}
        aborted = [otlp_attr("type", "abort"), otlp_attr("message", status.get("message", ""))]
        if r.finish_reason != "abort":
            aborted += [otlp_attr("status_code", 400), otlp_attr("err_type", r.error or "")]
    spans = [
        _span(
            trace_id,
            tok_thread,
            root_id,
            f"tokenizer {host}",
            r.t_arrival,
            r.t_queued,
            status=abort if not r.t_scheduled else {"code": 0},
            attributes=aborted if not r.t_scheduled else [],
        ),
        _span(trace_id, tokenize, tok_thread, "tokenize", r.t_arrival, r.t_tokenized),
    ]
    if r.t_scheduled:
        spans += [
            _span(
                trace_id,
                sched_thread,
                root_id,
                f"scheduler [TP 0] {host}",
                r.t_queued,
                end,
                status=abort,
                attributes=aborted,
            ),
            _span(trace_id, process, sched_thread, "request_process", r.t_queued, r.t_queued),
            _span(trace_id, waiting, sched_thread, "prefill_waiting", r.t_queued, r.t_scheduled),
        ]
        retracts = [
            {"timeUnixNano": str(t), "name": "retract", "attributes": []} for t in preemptions
        ]
        spans[-3]["events"] = retracts  # on the thread span (no slice open at that instant)
    if first is not None:
        spans.append(
            _span(trace_id, prefill, sched_thread, "prefill_forward", r.t_scheduled, first)
        )
    if len(tokens) > 1 and first is not None:
        spans.append(_span(trace_id, decode, sched_thread, "decode_forward", first, tokens[-1]))
        loop_ids = hashlib.blake2b(root_id.encode(), digest_size=8).hexdigest()
        base = int(loop_ids, 16)
        for ct, (a, b) in enumerate(itertools.pairwise(tokens)):
            step = _span(
                trace_id,
                f"{(base + ct + 1) % (1 << 64):016x}",
                decode,
                "decode_loop",
                a,
                b,
                attributes=[otlp_attr("decode_ct", ct)],
            )
            spans.append(step)
    root = _span(
        trace_id,
        root_id,
        "",
        f" Req {r.request_id[:8]}",
        r.t_arrival,
        max(end, r.t_tokenized),
        attributes=[
            otlp_attr("rid", r.request_id),
            otlp_attr("module", "sglang::request"),
            # APIServerReqTimeStats: finished - created (the synth request ends at t_end)
            otlp_attr("gen_ai.latency.e2e", (end - r.t_arrival) / NS),
        ],
    )
    return [root, *spans]
