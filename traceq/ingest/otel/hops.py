"""The layers of routed and disaggregated serving, as their spans name them, and the clock
summary the ingest prints (docs/INGEST.md, "One request across every hop").

Span names per producer are in the shared research note `disagg_producers.md` (file and
commit per fact): Dynamo's frontend `http-request`, `router.route_request` /
`kv_router.route_request`, worker `handle_payload` and `engine.generate`; llm-d's EPP
`gateway.request`, `gateway.request_orchestration` and `llm_d.epp.*`, and its P/D sidecar's
`llm_d.pd_proxy.*`. The stitch itself is SQL (traceq/sql/otel_stitch.sql,
traceq/sql/otel_clocks.sql); this module only names what the SQL reads.
"""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl

from traceq.sql import load

HOP_SPANS = {
    "http-request": "gateway",  # Dynamo frontend, SERVER; outlives the whole request
    "gateway.request": "gateway",  # llm-d EPP ext_proc stream: request headers to response end
    "router.route_request": "router",  # Dynamo push router, CLIENT: open until the stream ends
    "kv_router.route_request": "router",  # Dynamo KV router, one per phase (Prefill / Decode)
    "gateway.request_orchestration": "router",  # llm-d EPP scheduling (director HandleRequest)
    "handle_payload": "ingress",  # Dynamo worker ingress, remote child of the route span
    "engine.generate": "engine",  # Dynamo worker engine span, `disagg_role`
}
"""Span name → the layer it belongs to. `ingress` and `detail` spans mark a routed trace and
carry ids; they are no hop of their own in request_hops."""

HOP_PREFIXES = {
    "llm_d.pd_proxy.": "proxy",  # sidecar: otelhttp `llm_d.pd_proxy.<METHOD> <path>`, .request,
    # .prefill and .decode (the calls to the prefill and the decode vLLM)
    "llm_d.epp.": "detail",  # EPP profile handler, pre-request, scorer spans
}

STITCH_ATTRIBUTES = {
    "disagg_role": "a_disagg_role",  # Dynamo engine.generate: agg / prefill / decode
    "phase": "a_route_phase",  # Dynamo kv_router.route_request: Prefill / Decode
    "x_request_id": "a_x_request_id",  # Dynamo http-request / handle_payload: caller's header
    "x_dynamo_request_id": "a_dynamo_request_id",  # Dynamo handle_payload: context id
    "request_id": "a_plain_request_id",  # Dynamo route spans: context id
    "ttft_ms": "a_ttft_ms",  # Dynamo engine.generate
    "input_tokens": "a_plain_input_tokens",  # Dynamo engine.generate
    "output_tokens": "a_plain_output_tokens",  # Dynamo engine.generate
    "model": "a_plain_model",  # Dynamo engine.generate
    "worker_id": "a_worker_id",  # Dynamo route spans: the worker chosen
    "overlap_blocks": "a_overlap_blocks",  # Dynamo kv_router.route_request: prefix blocks cached
    "prefill_target": "a_prefill_target",  # llm-d sidecar .request / .prefill: prefill pod
    "decode.target": "a_decode_target",  # llm-d sidecar .decode: decode pod
}
"""Attributes of the routing layers lifted into staged span columns (traceq/ingest/otel/spans.py
lifts them with the gen_ai.* ones)."""


def hop_of(name: pl.Expr) -> pl.Expr:
    """The layer a span belongs to (HOP_SPANS, HOP_PREFIXES), or null: one vectorised pass."""
    hop = name.replace_strict(HOP_SPANS, default=None, return_dtype=pl.String)
    for prefix, layer in HOP_PREFIXES.items():
        hop = pl.when(name.str.starts_with(prefix)).then(pl.lit(layer)).otherwise(hop)
    return hop


def stitch_summary(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """What the stitch of one source found (for the manifest and the ingest summary): counts
    of stitched, disaggregated and unserved requests, of traces with several decode attempts,
    and the clock offsets; empty when the source has no trace to stitch."""
    counts = con.execute(load("otel_stitch_summary")).fetchall()[0]
    if counts is None or not any(counts):
        return {}
    names = ("requests", "disaggregated", "unserved", "retried", "contradicted")
    clocks = con.table("otel_clock_offsets").order("instance")
    rows = [dict(zip(clocks.columns, r, strict=True)) for r in clocks.fetchall()]
    return {**dict(zip(names, map(int, counts), strict=True)), "clock_offsets": rows}
