"""Schema of requests stitched across hops (routed and disaggregated serving): the columns
`requests` gains for them and the tables `request_hops`, `clock_offsets` and `unserved`
(traceq/sql/otel_stitched.sql writes them; docs/INGEST.md "One request across every hop").
traceq/schema.py puts them in TABLES."""

from __future__ import annotations

from traceq.schema_types import BOOL, F64, I64, NS, STR, Column, _c

REF = "on the reference clock (clock_offsets)"
"""Said by every column whose stamps are corrected for clock skew between hosts."""

# Columns of a request stitched across processes (traceq/sql/otel_stitch.sql): null on a
# request one engine served alone, so that its phases keep their single-engine meaning.
STITCHED = (
    _c(
        "route_ns",
        I64,
        "ns",
        "Routed request: time spent in routing decisions, summed (Dynamo decides once for "
        "prefill and once for decode); each decision ends at the latest when its worker "
        "received the request, " + REF + ".",
    ),
    _c(
        "t_engine_arrival",
        I64,
        NS,
        "Disaggregated request: the prefill engine received it, " + REF + "; t_arrival is "
        "then the first hop's arrival (gateway or frontend).",
    ),
    _c(
        "t_prefill_end",
        I64,
        NS,
        "Disaggregated request: the prefill engine produced its one token (prefill done), "
        + REF
        + ".",
    ),
    _c(
        "t_decode_queued",
        I64,
        NS,
        "Disaggregated request: the decode engine queued it once its KV cache had arrived, "
        + REF
        + ".",
    ),
    _c(
        "t_decode_scheduled",
        I64,
        NS,
        "Disaggregated request: the decode engine first scheduled it, " + REF + ".",
    ),
    _c(
        "t_done",
        I64,
        NS,
        "Disaggregated request: the first hop (gateway or frontend) finished the response, on "
        "that hop's own clock, which is the reference clock when it hosts the reference.",
    ),
    _c("prefill_instance", STR, "", "Disaggregated request: the instance that ran its prefill."),
    _c(
        "decode_instance",
        STR,
        "",
        "Disaggregated request: the instance whose decode produced the response.",
    ),
    _c(
        "role_signal",
        STR,
        "",
        "What told the prefill from the decode engine: `disagg_role` (Dynamo), `max_tokens` "
        "(one engine asked for 1 token, the other for more), `sidecar` (llm-d's "
        "`llm_d.pd_proxy.prefill` / `.decode` spans); null when one engine served it.",
    ),
)

HOP_TABLES: dict[str, tuple[Column, ...]] = {
    "request_hops": (
        _c("request_id", STR, "", "The stitched request (`requests.request_id`)."),
        _c("source_id", STR, "", "Content hash of the source file."),
        _c("trace_id", STR, "", "Trace id (hex)."),
        _c(
            "hop",
            STR,
            "",
            "`client`, `gateway`, `router`, `proxy`, `prefill`, `kv_transfer` or `decode`.",
        ),
        _c("instance", STR, "", "Instance (process) that emitted the hop's span."),
        _c("t_start", I64, NS, "Hop began, " + REF + "."),
        _c(
            "t_end",
            I64,
            NS,
            "Hop ended, " + REF + "; a routing decision ends at the latest when the worker "
            "it chose received the request.",
        ),
        _c("dur_ms", F64, "ms", "t_end - t_start."),
        _c("name", STR, "", "Name of the span the hop comes from."),
        _c("span_id", STR, "", "Span id of that span (hex); null for kv_transfer."),
        _c(
            "hop_request_id",
            STR,
            "",
            "The id this layer gave the request: the engine's request id, the caller's "
            "x-request-id, Dynamo's context id, or null.",
        ),
        _c(
            "served",
            BOOL,
            "",
            "Engines: true for the one that produced the response (one prefill and one decode "
            "per request); false for a retry or migration attempt that did not.",
        ),
        _c(
            "detail",
            STR,
            "",
            "Routing phase (Dynamo `Prefill` / `Decode`), the role signal of an engine, or why "
            "an attempt was not the one kept.",
        ),
        _c(
            "worker",
            STR,
            "",
            "Routing decisions: the worker chosen, as the router names it (Dynamo `worker_id`, "
            "llm-d's sidecar `decode.target` / `prefill_target`); null on other hops.",
        ),
        _c(
            "overlap_blocks",
            I64,
            "blocks",
            "Dynamo KV router: the prompt's KV blocks the chosen worker already held (its "
            "prefix-cache overlap); null elsewhere.",
        ),
    ),
    "clock_offsets": (
        _c("source_id", STR, "", "Content hash of the source file."),
        _c("instance", STR, "", "Instance whose clock this is."),
        _c(
            "offset_ms",
            F64,
            "ms",
            "Subtracted from this instance's stamps to put them on the reference clock; 0 when "
            "0 lies in [lo_ms, hi_ms], else the middle of it.",
        ),
        _c(
            "bound_ms",
            F64,
            "ms",
            "± around offset_ms within which the true offset lies (causality); null when no "
            "causal link bounds it.",
        ),
        _c("lo_ms", F64, "ms", "Lowest offset causality allows; null when unbounded."),
        _c("hi_ms", F64, "ms", "Highest offset causality allows; null when unbounded."),
        _c("reference", BOOL, "", "True for the reference clock (the gateway or frontend)."),
        _c("constraints", I64, "count", "Causal pairs of spans that bound this clock."),
        _c(
            "corrects_ms",
            F64,
            "ms",
            "Median of the cross-host intervals this offset corrects (first hop to this "
            "instance's engine arrival or first token); the ingest warns when bound_ms exceeds it.",
        ),
    ),
    "unserved": (
        _c("source_id", STR, "", "Content hash of the source file."),
        _c("trace_id", STR, "", "Trace id (hex)."),
        _c(
            "request_id",
            STR,
            "",
            "The best id known: the caller's x-request-id, else the gateway's request id, "
            "Dynamo's context id, a client span's id.",
        ),
        _c("ids", STR, "", "Every id any layer gave the request, comma-separated."),
        _c("hop", STR, "", "The last hop that saw it: client, gateway, router or proxy."),
        _c("instance", STR, "", "Instance of that hop."),
        _c("error", STR, "", "error.type or the status message of the deepest failing span."),
        _c("ts", I64, NS, "First hop's arrival, " + REF + "."),
    ),
}
