"""Bad token-level span events, per convention (traceq/ingest/otel/token_checks.py): a bad
event, or a request whose token events disagree with it, is quarantined with the reason and
the request kept; token events that lost their first tokens to the span event limit are kept
without giving the first-token stamp. Spans made with the real OpenTelemetry SDK, encoded
with the real OTLP encoders."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.trace import SpanKind

import traceq
from tests.otel_factory import T0, write_otlp_json, write_otlp_proto
from tests.otel_producers import MS, SGLangIdGenerator, SGLangRequest, provider, sglang_spans

ENCODERS = {"json": write_otlp_json, "proto": write_otlp_proto}
S = T0 + 5000 * MS  # span start; every span below ends at S + 60 ms


def _span(tracer, request_id: str, completion: int | None, events: list[tuple]) -> None:
    """An `llm_request` span (vLLM's attributes) with the given (name, ts, attributes)."""
    attributes = {
        "gen_ai.request.id": request_id,
        "gen_ai.latency.time_to_first_token": 0.03,
        "gen_ai.latency.e2e": 0.06,
    }
    if completion is not None:
        attributes["gen_ai.usage.completion_tokens"] = completion
    span = tracer.start_span(
        "llm_request", kind=SpanKind.SERVER, start_time=S, attributes=attributes
    )
    for name, ts, attrs in events:
        span.add_event(name, attrs, ts)
    span.end(end_time=S + 60 * MS)


def _ours(*offsets_ms: int) -> list[tuple]:
    return [("gen_ai.token", S + ms * MS, {}) for ms in offsets_ms]


def _steps(*steps: tuple[int, int, list[int]]) -> list[tuple]:
    """vLLM PR 32573 pairs: (scheduled ms, generated ms, new_token_ids) per engine step."""
    out: list[tuple] = []
    for sched, gen, ids in steps:
        out.append(("token_scheduled", S + sched * MS, {"iter_batch_size": 4}))
        out.append(("token_generated", S + gen * MS, {"new_token_ids": ids}))
    return out


def _ingest(tmp_path: Path, encoder: str):
    with provider({"service.name": "vllm"}) as (tracer, spans):
        _span(tracer, "ok", 3, _steps((10, 30, [1]), (31, 40, [2, 3])))
        _span(tracer, "more", 2, _steps((10, 30, [1]), (31, 40, [2, 3])))
        _span(tracer, "no-output", 0, _ours(30))
        _span(tracer, "backwards", 3, _ours(30, 50, 40))
        _span(tracer, "steps-backwards", 2, _steps((10, 45, [1]), (46, 40, [2])))
        _span(tracer, "before-start", 2, _ours(-1, 30))
        _span(tracer, "after-end", 2, _ours(30, 61))
        bad_count = ("gen_ai.token", S + 35 * MS, {"gen_ai.token.count": "many"})
        _span(tracer, "garbled-count", 2, [*_ours(30), bad_count, *_ours(40)])
        bad_ids = ("token_generated", S + 45 * MS, {"new_token_ids": "oops"})
        _span(tracer, "garbled-ids", 1, [*_steps((10, 30, [1])), bad_ids])
        _span(tracer, "truncated", 5, _ours(40, 50))  # the first 3 token events were dropped
        _span(tracer, "hidden-ids", 2, [("token_generated", S + 30 * MS, {}), *_ours()])
        _span(tracer, "no-count", None, _ours(30, 40))  # no completion_tokens: nothing to check
    src = ENCODERS[encoder](spans, tmp_path / f"traces.{encoder}")
    traceq.ingest([src], tmp_path / "ds")
    return traceq.open(tmp_path / "ds")


@pytest.mark.parametrize("encoder", ["json", "proto"])
def test_bad_token_events_are_quarantined_and_the_request_kept(tmp_path, encoder):
    con = _ingest(tmp_path, encoder)
    reasons = sorted(r for (r,) in con.sql("SELECT reason FROM quarantine").fetchall())
    assert reasons == [
        "gen_ai.token event times run backwards at event 2",
        "gen_ai.token event: gen_ai.token.count is not a positive integer",
        "token event 1000000 ns before its span starts",
        "token events hold 3 tokens but completion_tokens is 2",
        "token events on a request with no output (completion_tokens = 0)",
        "token_generated event times run backwards at event 3",
        "token_generated event: new_token_ids is not a non-empty array",
    ]
    requests = [r for (r,) in con.sql("SELECT request_id FROM requests ORDER BY 1").fetchall()]
    assert len(requests) == 12  # every request kept
    tokens = dict(
        con.sql("SELECT request_id, list(n_tokens ORDER BY idx) FROM tokens GROUP BY 1").fetchall()
    )
    assert tokens == {
        "ok": [1, 2],
        "garbled-count": [1, 1],  # the garbled event alone is out
        "garbled-ids": [1],
        "truncated": [1, 1],
        "hidden-ids": [1],  # VLLM_TRACE_HIDE_TOKEN_IDS: a step without ids is one token
        "no-count": [1, 1],
        "after-end": [1, 1],  # kept: an aborted request's span may close before its stream
    }
    # a rejected request's stamps come from its attributes; so do a truncated one's first token
    phases = dict(con.sql("SELECT request_id, ttft_ns FROM request_phases").fetchall())
    for rid in ("more", "no-output", "backwards", "before-start", "truncated"):
        assert phases[rid] == 30 * MS, rid
    assert phases["ok"] == 30 * MS and phases["garbled-ids"] == 30 * MS
    gaps = con.sql(
        "SELECT list(gap_ns ORDER BY idx) FROM tokens WHERE request_id = 'truncated'"
    ).fetchall()[0][0]
    assert gaps == [None, 10 * MS]  # the gaps between the events kept are still true


def _sglang(rid: str, t0: int, decode_ends: list[int], finished: int) -> SGLangRequest:
    return SGLangRequest(
        rid=rid,
        t0=t0,
        tokenize_end=1 * MS,
        dispatch_end=2 * MS,
        sched_recv=3 * MS,
        wait_entry=4 * MS,
        forward_entry=5 * MS,
        prefill_end=10 * MS,
        decode_sched=11 * MS,
        decode_ends=decode_ends,
        completion=decode_ends[-1] + MS,
        finished=finished,
        first_token_seen=10 * MS + 300,
    )


@pytest.mark.parametrize("encoder", ["json", "proto"])
def test_bad_sglang_decode_steps_are_quarantined_and_the_request_kept(tmp_path, encoder):
    """SGLang's per-step decode spans (`decode_loop` slices): a slice that ends before it
    starts is a bad span; slices that then overlap, or end after the request's root span,
    cannot be its decode steps, so the request keeps no step tokens (one quarantine row)."""
    ok = _sglang("aaaaaaaa0001", S, [20 * MS, 30 * MS], 40 * MS)
    overlap = _sglang("bbbbbbbb0002", S + 100 * MS, [20 * MS, 15 * MS, 30 * MS], 40 * MS)
    late = _sglang("cccccccc0003", S + 200 * MS, [20 * MS, 30 * MS], 25 * MS)
    with provider({"service.name": "sglang"}, SGLangIdGenerator()) as (tracer, spans):
        for r in (ok, overlap, late):
            sglang_spans(tracer, r)
    src = ENCODERS[encoder](spans, tmp_path / f"traces.{encoder}")
    traceq.ingest([src], tmp_path / "ds")
    con = traceq.open(tmp_path / "ds")
    reasons = sorted(r for (r,) in con.sql("SELECT reason FROM quarantine").fetchall())
    assert reasons == [
        "1 of 2 decode_loop slices overlap the one before",
        f"decode_loop slice ends {5 * MS} ns after its request span",
        "span has no valid start / end timestamp",  # the slice that ends before it starts
    ]
    tokens = dict(con.sql("SELECT request_id, count(*) FROM tokens GROUP BY 1").fetchall())
    assert tokens == {ok.rid: 3}  # first token at the prefill end, then one per step
    phases = dict(con.sql("SELECT request_id, ttft_ns FROM request_phases").fetchall())
    assert phases == {ok.rid: 10 * MS, overlap.rid: 10 * MS, late.rid: 10 * MS}
