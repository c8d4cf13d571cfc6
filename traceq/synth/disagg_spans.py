"""What every producer of a disaggregated deployment shares (docs/SYNTH.md, "Disaggregated
deployments"): `legs` turns one simulated request (traceq/synth/engine.py) into its prefill
engine's and its decode engine's view on the reference clock, `Trace` collects a trace's spans
per process and stamps each with its host's clock skew, and `vllm` writes an engine's span.
The layers around the engines, per producer, are traceq/synth/disagg_shapes.py's.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field

from traceq.synth.request import NS, Request
from traceq.synth.write_conventions import otlp_attr
from traceq.synth.write_otlp import server_attributes

US = 1_000
MS = 1_000_000
KV_BASE_NS = 400 * US  # NIXL handshake and descriptor exchange before the first block
KV_BYTES_PER_S = 50e9  # one 400 Gb/s NIC between the prefill and the decode worker
ADMIT_NS = 200 * US  # the decode scheduler admits a request once its KV has landed
FIRST_STEP_NS = 7 * MS  # decode step of a one-token answer (no gap to copy)

SERVER, INTERNAL = 2, 1
VLLM_SCOPE = "vllm.llm_engine"


@dataclass
class Legs:
    """One request as each engine saw it (true stamps): the prefill engine's view (max_tokens 1,
    its one token), the decode engine's (every client-visible token) and the KV transfer
    between them; no decode when the request failed or was aborted before its first token."""

    prefill: Request
    decode: Request | None = None
    kv: tuple[int, int] | None = None


def _shifted(r: Request, by: int) -> Request:
    v = copy.copy(r)
    v.t_arrival += by
    v.t_tokenized += by
    v.t_queued += by
    v.t_scheduled = r.t_scheduled + by if r.t_scheduled else 0
    v.tokens = [t + by for t in r.tokens]
    v.t_first_token = v.tokens[0] if v.tokens else None
    v.t_last_token = r.t_last_token + by if r.t_last_token is not None else None
    v.t_end = r.t_end + by
    return v


def legs(r: Request, prefill_at: int, decode_after: int, kv_kib_per_token: float) -> Legs:
    """The prefill engine receives the request `prefill_at` ns after the gateway (routing and
    dispatch) and answers with one token; the decode engine receives it `decode_after` ns
    after that token, pulls the prompt's KV cache (KV_BASE_NS + prompt × KV bytes over
    KV_BYTES_PER_S), is admitted ADMIT_NS later, and produces every token the client sees, one
    decode step after admission and then at the simulated engine's own pace."""
    p = _shifted(r, prefill_at)
    if not r.tokens:  # rejected, or aborted before its first token: the prefill engine only
        return Legs(p)
    p.tokens = p.tokens[:1]
    p.t_last_token = p.t_end = p.tokens[0]
    p.max_tokens, p.finish_reason, p.error, p.status_message = 1, "length", None, None
    arrive = p.tokens[0] + decode_after
    d = _shifted(r, arrive - r.t_arrival)
    d.cached = 0  # every prompt block arrives over the wire
    kv_ns = KV_BASE_NS + round(r.prompt * kv_kib_per_token * 1024 / KV_BYTES_PER_S * NS)
    kv = (d.t_queued, d.t_queued + kv_ns)
    d.t_scheduled = kv[1] + ADMIT_NS
    step = r.tokens[1] - r.tokens[0] if len(r.tokens) > 1 else FIRST_STEP_NS
    by = d.t_scheduled + step - r.tokens[0]
    d.tokens = [t + by for t in r.tokens]
    d.t_first_token = d.tokens[0]
    d.t_last_token = r.t_last_token + by if r.t_last_token is not None else None
    d.t_end = r.t_end + by
    return Legs(p, d, kv)


def uuid_of(text: str) -> str:
    """A stable UUID-shaped id (the x-request-id a client or gateway would send)."""
    h = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass
class Trace:
    """The spans of one trace, grouped by (instance, scope) for the writer; every stamp of an
    instance in `skew` is written `true + skew`."""

    trace_id: str
    skew: dict[str, int]
    spans: dict[tuple[str, str], list[dict]] = field(default_factory=dict)
    n: int = 0

    def span(
        self,
        where: tuple[str, str],
        name: str,
        start: int,
        end: int,
        parent: str = "",
        *,
        kind: int = INTERNAL,
        attrs: list[dict] | None = None,
        error: str | None = None,
        events: list[int] | None = None,
        links: list[dict] | None = None,
    ) -> str:
        """Add a finished span on `where` = (instance, scope); returns its span id."""
        self.n += 1
        span_id = hashlib.blake2b(f"{self.trace_id}:{self.n}".encode(), digest_size=8).hexdigest()
        off = self.skew.get(where[0], 0)
        span: dict = {
            "traceId": self.trace_id,
            "spanId": span_id,
            "parentSpanId": parent,
            "name": name,
            "kind": kind,
            "startTimeUnixNano": str(start + off),
            "endTimeUnixNano": str(end + off),
            "attributes": attrs or [],
            "events": [
                {
                    "timeUnixNano": str(t + off),
                    "name": "gen_ai.token",
                    "attributes": [otlp_attr("gen_ai.token.count", 1)],
                }
                for t in events or ()
            ],
            "status": {"code": 2, "message": error} if error else {"code": 0},
        }
        if links:
            span["links"] = links
        self.spans.setdefault(where, []).append(span)
        return span_id


def vllm(t: Trace, instance: str, parent: str, v: Request, kv: tuple[int, int] | None) -> str:
    """vLLM's `llm_request` (traceq's convention: V1 attributes, a `gen_ai.token` event per
    token, a `tokenize` child) and, on the decode side, the `vllm_async_kv_transfer` child
    of vLLM PR 44402 (time in WAITING_FOR_REMOTE_KVS)."""
    where = (instance, VLLM_SCOPE)
    error = (v.status_message or v.error) if v.error else None
    span = t.span(
        where,
        "llm_request",
        v.t_arrival,
        v.t_end,
        parent,
        kind=SERVER,
        attrs=server_attributes(v),
        error=error,
        events=v.tokens,
    )
    tok = [otlp_attr("gen_ai.usage.prompt_tokens", v.prompt)]
    t.span(where, "tokenize", v.t_arrival, v.t_tokenized, span, attrs=tok)
    if kv is not None:
        t.span(where, "vllm_async_kv_transfer", kv[0], kv[1], span)
    return span


@dataclass(frozen=True)
class Hop:
    """Where one request went: its ids and the instances that served each phase."""

    x_request_id: str
    context_id: str
    prefill: str
    decode: str
    worker_ids: dict[str, int]
    model: str
