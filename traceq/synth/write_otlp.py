"""OTLP/JSON as the OpenTelemetry Collector file exporter writes it: one
`{"resourceSpans":[…]}` export request per line, in the token-level convention (docs/INGEST.md).

Per request: an `llm_request` SERVER span with vLLM V1 attributes (`gen_ai.latency.*` in
seconds as doubles, `gen_ai.usage.*`, `gen_ai.response.finish_reasons` as vLLM's JSON
string), one `gen_ai.token` event per streamed chunk with `gen_ai.token.count`, and a
`tokenize` child span from arrival to the end of tokenization. With a client view, a second
file holds the load generator's CLIENT spans (same trace, client-side token times).

Token events are formatted with one `str.join` per request (no per-token Python call), and
spans are written in batches of `SPANS_PER_LINE` requests as the exporter's batch processor does.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import BinaryIO

import orjson

from traceq.synth.engine import NS, Request, StepInfo
from traceq.synth.write_conventions import request_spans

SPANS_PER_LINE = 64
SCOPE = {"name": "vllm.llm_engine"}
_TOKEN_HEAD = b'{"timeUnixNano":"'
_TOKEN_TAIL = (
    b'","name":"gen_ai.token","attributes":[{"key":"gen_ai.token.count","value":{"intValue":"1"}}]}'
)


def ids(seed: int, idx: int) -> tuple[str, str, str, str]:
    """(trace id, server span id, tokenize span id, client span id), stable per request."""
    h = hashlib.blake2b(f"{seed}:{idx}".encode(), digest_size=40).hexdigest()
    return h[:32], h[32:48], h[48:64], h[64:80]


def _attr(key: str, value: str | int | float | bool) -> dict:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": value}}


def _events(times: list[int]) -> bytes:
    if not times:
        return b"[]"
    return (
        b"["
        + _TOKEN_HEAD
        + (_TOKEN_TAIL + b"," + _TOKEN_HEAD).join(str(t).encode() for t in times)
        + _TOKEN_TAIL
        + b"]"
    )


def _span(span: dict, events: bytes) -> bytes:
    """A span as JSON with its pre-formatted events spliced in (before `status`)."""
    status = span.pop("status")
    body = orjson.dumps(span)
    return body[:-1] + b',"events":' + events + b',"status":' + orjson.dumps(status) + b"}"


def server_attributes(r: Request) -> list[dict]:
    """vLLM V1 `llm_request` attributes (output_processor.do_tracing), seconds as doubles.

    V1 sets no `gen_ai.response.model` (vllm/tracing.py lists no such attribute), so neither
    do we.
    """
    a = [
        _attr("gen_ai.request.id", r.request_id),
        _attr("gen_ai.usage.prompt_tokens", r.prompt),
        _attr("gen_ai.usage.completion_tokens", len(r.tokens)),
        _attr("gen_ai.request.max_tokens", r.max_tokens),
    ]
    if r.cached:
        a.append(_attr("gen_ai.usage.cache_read.input_tokens", r.cached))
    first = r.t_first_token
    if r.t_scheduled:
        a.append(_attr("gen_ai.latency.time_in_queue", (r.t_scheduled - r.t_queued) / NS))
    if first is not None:
        last = r.tokens[-1]
        a += [
            _attr("gen_ai.latency.time_to_first_token", (first - r.t_arrival) / NS),
            _attr("gen_ai.latency.time_in_model_prefill", (first - r.t_scheduled) / NS),
            _attr("gen_ai.latency.time_in_model_decode", (last - first) / NS),
            _attr("gen_ai.latency.time_in_model_inference", (last - r.t_scheduled) / NS),
            _attr("gen_ai.latency.e2e", (last - r.t_arrival) / NS),
        ]
    if r.finish_reason:
        a.append(_attr("gen_ai.response.finish_reasons", orjson.dumps([r.finish_reason]).decode()))
    if r.error:
        a.append(_attr("error.type", r.error))
    return a


def _status(r: Request) -> dict:
    if r.error:
        return {"code": 2, "message": r.status_message or r.error}
    return {"code": 0}


class OtlpWriter:
    """A sink that writes finished requests as OTLP/JSON lines (server and optional client)."""

    def __init__(
        self,
        path: Path,
        *,
        seed: int,
        model: str,
        instance: str,
        client_path: Path | None = None,
        client_times: object = None,
        convention: str = "traceq",
    ) -> None:
        self.convention = convention
        self.preempted: dict[int, list[int]] = {}
        self.seed = seed
        self.model = model
        self.fh: BinaryIO = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.client_fh: BinaryIO | None = open(client_path, "wb") if client_path else None  # noqa: SIM115
        self.client_times = client_times  # callable(Request) -> (t_send, token times)
        self.resource = [
            _attr("service.name", "vllm-server"),
            _attr("service.instance.id", instance),
            _attr("host.name", instance),
        ]
        self.client_resource = [_attr("service.name", "loadgen"), _attr("host.name", "client-0")]
        self.batch: list[bytes] = []
        self.client_batch: list[bytes] = []

    def on_finish(self, r: Request) -> None:
        trace_id, span_id, tok_id, client_id = ids(self.seed, r.idx)
        server = {
            "traceId": trace_id,
            "spanId": span_id,
            "parentSpanId": client_id if self.client_fh else "",
            "name": "llm_request",
            "kind": 2,
            "startTimeUnixNano": str(r.t_arrival),
            "endTimeUnixNano": str(r.t_end),
            "attributes": server_attributes(r),
            "status": _status(r),
        }
        tokenize = {
            "traceId": trace_id,
            "spanId": tok_id,
            "parentSpanId": span_id,
            "name": "tokenize",
            "kind": 1,
            "startTimeUnixNano": str(r.t_arrival),
            "endTimeUnixNano": str(r.t_tokenized),
            "attributes": [_attr("gen_ai.usage.prompt_tokens", r.prompt)],
            "status": {"code": 0},
        }
        if self.convention == "traceq":
            self.batch += [_span(server, _events(r.tokens)), _span(tokenize, b"[]")]
        else:
            self.batch += request_spans(
                self.convention,
                r,
                (trace_id, span_id, tok_id),
                server["attributes"],  # type: ignore[arg-type]
                server["status"],  # type: ignore[arg-type]
                self.preempted.pop(r.idx, []),
            )
        if len(self.batch) >= 2 * SPANS_PER_LINE:
            self._flush()
        if self.client_fh is not None:
            self._client(r, trace_id, client_id)

    def _client(self, r: Request, trace_id: str, client_id: str) -> None:
        t_send, times, t_end = self.client_times(r)  # type: ignore[operator]
        attrs = [
            _attr("gen_ai.operation.name", "text_completion"),
            _attr("gen_ai.request.model", self.model),
            _attr("gen_ai.response.id", r.request_id),
            _attr("gen_ai.usage.input_tokens", r.prompt),
            _attr("gen_ai.usage.output_tokens", len(times)),
            _attr("server.address", "vllm-server"),
        ]
        if r.error:
            attrs.append(_attr("error.type", r.error))
        span = {
            "traceId": trace_id,
            "spanId": client_id,
            "parentSpanId": "",
            "name": f"text_completion {self.model}",
            "kind": 3,
            "startTimeUnixNano": str(t_send),
            "endTimeUnixNano": str(t_end),
            "attributes": attrs,
            "status": _status(r),
        }
        self.client_batch.append(_span(span, _events(times)))
        if len(self.client_batch) >= SPANS_PER_LINE:
            self._flush_client()

    def _line(self, resource: list[dict], spans: list[bytes]) -> bytes:
        head = orjson.dumps({"resource": {"attributes": resource}, "scope": SCOPE})
        # {"resourceSpans":[{"resource":…,"scopeSpans":[{"scope":…,"spans":[…]}]}]}
        res = head[: head.index(b',"scope"')]
        return (
            b'{"resourceSpans":['
            + res
            + b',"scopeSpans":[{"scope":'
            + orjson.dumps(SCOPE)
            + b',"spans":['
            + b",".join(spans)
            + b"]}]}]}\n"
        )

    def _flush(self) -> None:
        if self.batch:
            self.fh.write(self._line(self.resource, self.batch))
            self.batch = []

    def _flush_client(self) -> None:
        if self.client_batch and self.client_fh is not None:
            self.client_fh.write(self._line(self.client_resource, self.client_batch))
            self.client_batch = []

    def on_step(self, s: StepInfo) -> None:
        pass

    def on_preempt(self, t: int, r: Request) -> None:
        if self.convention != "traceq":
            self.preempted.setdefault(r.idx, []).append(t)

    def close(self) -> None:
        self._flush()
        self._flush_client()
        self.fh.close()
        if self.client_fh is not None:
            self.client_fh.close()
