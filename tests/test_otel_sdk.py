"""Spans emitted by the real OpenTelemetry SDK, encoded by the real OTLP encoders (protobuf and
JSON), ingested, and read back through request_phases / token_gaps to the nanosecond."""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import pytest
import zstandard
from opentelemetry.trace import SpanKind

import traceq
from tests.otel_factory import (
    MS,
    T0,
    RequestSpec,
    make_spans,
    otlp_json_lines,
    otlp_proto_bytes,
    v0_attributes,
    v1_attributes,
    write_otlp_json,
    write_otlp_proto,
)

# Request A: vLLM V1 attributes, a tokenize child span and four token events.
A_TOKENIZE_END = T0 + 3 * MS + 17
A_QUEUE, A_PREFILL = 10 * MS + 1, 20 * MS + 3
A_TOKENS = [T0 + 35 * MS + 7, T0 + 45 * MS + 11, T0 + 56 * MS + 13, T0 + 66 * MS + 19]
# Request B: vLLM V0 attributes only (no token events, no prefill / decode split).
B_ARRIVAL = T0 + 500 * MS
B_QUEUE, B_TTFT, B_E2E = 5 * MS + 3, 40 * MS + 9, 90 * MS + 1
# Request C: newer vLLM child spans, OTel semconv usage names, multi-token chunks.
C_ARRIVAL = T0 + 900 * MS
C_TOKENS = [C_ARRIVAL + 9 * MS, C_ARRIVAL + 19 * MS, C_ARRIVAL + 30 * MS]


def scenario() -> list[RequestSpec]:
    return [
        RequestSpec(
            "cmpl-a-0",
            tokenize_end=A_TOKENIZE_END,
            tokens=A_TOKENS,
            token_counts=[1, 1, 1, 1],
            end=A_TOKENS[-1] + MS,
            attributes=v1_attributes(
                "cmpl-a-0",
                queue=A_QUEUE,
                prefill=A_PREFILL,
                decode=A_TOKENS[-1] - A_TOKENS[0],
                ttft=A_TOKENS[0] - T0,
                e2e=A_TOKENS[-1] + MS - T0,
            ),
        ),
        RequestSpec(
            "cmpl-b-0",
            arrival=B_ARRIVAL,
            end=B_ARRIVAL + B_E2E,
            attributes=v0_attributes("cmpl-b-0", queue=B_QUEUE, ttft=B_TTFT, e2e=B_E2E),
        ),
        RequestSpec(
            "chatcmpl-c",
            arrival=C_ARRIVAL,
            tokens=C_TOKENS,
            token_counts=[2, 2, 1],
            phase_spans={
                "vllm.request.queue": (C_ARRIVAL + 1 * MS, C_ARRIVAL + 4 * MS),
                "vllm.request.prefill": (C_ARRIVAL + 4 * MS, C_ARRIVAL + 9 * MS),
                "vllm.request.decode": (C_ARRIVAL + 9 * MS, C_ARRIVAL + 30 * MS),
            },
            attributes={
                "gen_ai.request.id": "chatcmpl-c",
                "gen_ai.request.model": "Qwen/Qwen3-8B",
                "gen_ai.usage.input_tokens": 1000,
                "gen_ai.response.finish_reasons": ["length"],
            },
        ),
        RequestSpec(
            "client-d",
            arrival=T0 + 1200 * MS,
            end=T0 + 1300 * MS,
            kind=SpanKind.CLIENT,
            attributes={"gen_ai.request.id": "client-d", "gen_ai.operation.name": "chat"},
            error="upstream timeout",
        ),
    ]


EXPECTED = {
    "cmpl-a-0": {
        "view": "server",
        "t_arrival": T0,
        "tokenize_ns": A_TOKENIZE_END - T0,
        "queue_ns": A_QUEUE,
        "prefill_ns": A_PREFILL,
        "decode_ns": A_TOKENS[-1] - A_TOKENS[0],
        "ttft_ns": A_TOKENS[0] - T0,
        "e2e_ns": A_TOKENS[-1] - T0,
        # between the end of tokenization and entering the queue nothing is stamped
        "residual_ns": (A_TOKENS[0] - A_PREFILL - A_QUEUE) - A_TOKENIZE_END,
        "prompt_tokens": 42,
        "output_tokens": 4,
        "finish_reason": "stop",
        "error": None,
    },
    "cmpl-b-0": {
        "view": "server",
        "t_arrival": B_ARRIVAL,
        "tokenize_ns": 0,
        "queue_ns": B_QUEUE,
        "prefill_ns": B_TTFT - B_QUEUE,
        "decode_ns": B_E2E - B_TTFT,
        "ttft_ns": B_TTFT,
        "e2e_ns": B_E2E,
        "residual_ns": 0,
        "prompt_tokens": 17,
        "output_tokens": 3,
        "finish_reason": None,
        "error": None,
    },
    "chatcmpl-c": {
        "view": "server",
        "t_arrival": C_ARRIVAL,
        "tokenize_ns": 1 * MS,
        "queue_ns": 3 * MS,
        "prefill_ns": 5 * MS,
        "decode_ns": 21 * MS,
        "ttft_ns": 9 * MS,
        "e2e_ns": 30 * MS,
        "residual_ns": 0,
        "prompt_tokens": 1000,
        "output_tokens": 5,
        "finish_reason": "length",
        "error": None,
    },
    "client-d": {
        "view": "client",
        "t_arrival": T0 + 1200 * MS,
        "e2e_ns": 100 * MS,
        "error": "upstream timeout",
    },
}


def _phases(dataset: Path) -> dict[str, dict]:
    rows = traceq.open(dataset).sql("SELECT * FROM request_phases").pl().to_dicts()
    return {r["request_id"]: r for r in rows}


def _check(dataset: Path) -> None:
    phases = _phases(dataset)
    assert set(phases) == set(EXPECTED)
    for request_id, expected in EXPECTED.items():
        got = {k: phases[request_id][k] for k in expected}
        assert got == expected, request_id
    assert phases["cmpl-b-0"]["tpot_ns"] == (B_E2E - B_TTFT) / 2
    con = traceq.open(dataset)
    gaps = con.sql(
        "SELECT idx, ts, n_tokens, tbt_ns FROM token_gaps WHERE request_id = 'cmpl-a-0' "
        "ORDER BY idx"
    ).fetchall()
    assert gaps == [
        (0, A_TOKENS[0], 1, None),
        (1, A_TOKENS[1], 1, A_TOKENS[1] - A_TOKENS[0]),
        (2, A_TOKENS[2], 1, A_TOKENS[2] - A_TOKENS[1]),
        (3, A_TOKENS[3], 1, A_TOKENS[3] - A_TOKENS[2]),
    ]
    counts = con.sql(
        "SELECT list(n_tokens ORDER BY idx) FROM tokens WHERE request_id = 'chatcmpl-c'"
    ).fetchall()
    assert counts == [([2, 2, 1],)]


@pytest.fixture(scope="module")
def spans():
    return make_spans(scenario())


def test_otlp_json_lines_from_sdk_exporter(tmp_path, spans):
    src = write_otlp_json(spans, tmp_path / "traces.jsonl", per_line=3)
    traceq.ingest([src], tmp_path / "ds")
    _check(tmp_path / "ds")


def test_otlp_protobuf_from_sdk_encoder(tmp_path, spans):
    src = write_otlp_proto(spans, tmp_path / "traces.pb")
    traceq.ingest([src], tmp_path / "ds")
    _check(tmp_path / "ds")


def test_collector_proto_stream_is_length_prefixed(tmp_path, spans):
    src = write_otlp_proto(spans, tmp_path / "traces.binpb", framed=True)
    traceq.ingest([src], tmp_path / "ds")
    _check(tmp_path / "ds")


def test_collector_zstd_framed_messages(tmp_path, spans):
    """fileexporter `compression: zstd` (legacy framing): each message compressed alone."""
    zstd = zstandard.ZstdCompressor()
    messages = [zstd.compress(otlp_proto_bytes([s])) for s in spans]
    src = tmp_path / "traces.zst"
    src.write_bytes(b"".join(struct.pack(">I", len(m)) + m for m in messages))
    traceq.ingest([src], tmp_path / "ds")
    _check(tmp_path / "ds")


def test_gzip_and_whole_stream_zstd(tmp_path, spans):
    text = otlp_json_lines(spans, per_line=1).encode()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl.gz").write_bytes(gzip.compress(text))
    traceq.ingest([tmp_path / "in" / "a.jsonl.gz"], tmp_path / "ds")
    _check(tmp_path / "ds")
    (tmp_path / "b.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(text))
    traceq.ingest([tmp_path / "b.jsonl.zst"], tmp_path / "ds2")
    _check(tmp_path / "ds2")


def test_single_pretty_printed_document(tmp_path, spans):
    doc = json.loads(otlp_json_lines(spans))
    src = tmp_path / "trace.json"
    src.write_text(json.dumps(doc, indent=2))
    traceq.ingest([src], tmp_path / "ds")
    _check(tmp_path / "ds")


def test_tempo_batches_with_base64_ids(tmp_path, spans):
    """Grafana Tempo's API JSON: `batches`, protobuf-JSON ids (base64), enum names."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    doc = MessageToDict(encode_spans(spans))
    src = tmp_path / "tempo.json"
    src.write_text(json.dumps({"batches": doc["resourceSpans"]}, indent=1))
    traceq.ingest([src], tmp_path / "ds")
    _check(tmp_path / "ds")
    ids = traceq.open(tmp_path / "ds").sql("SELECT DISTINCT length(trace_id) FROM spans")
    assert ids.fetchall() == [(32,)]


@pytest.mark.parametrize(
    ("wrapper", "inner"),
    [("trace", "resourceSpans"), ("trace", "batches"), ("result", "resourceSpans")],
)
def test_query_api_response_saved_by_curl(tmp_path, spans, wrapper, inner):
    """Tempo's `/api/v2/traces/<id>`: the trace wrapped as `{"trace": {...}, "status": …}`
    (tempopb.TraceByIDResponse; `batches` before Tempo named the field `resourceSpans`);
    Jaeger's `/api/v3/traces/<id>` as `{"result": {...}}` (grpc-gateway). On one compact
    line as curl saves it, and two such responses saved one after the other."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    groups = MessageToDict(encode_spans(spans))["resourceSpans"]
    src = tmp_path / "trace.json"
    src.write_text(json.dumps({wrapper: {inner: groups}, "status": "COMPLETE"}))
    traceq.ingest([src], tmp_path / "ds")
    _check(tmp_path / "ds")
    half = len(groups[0]["scopeSpans"][0]["spans"]) // 2
    split = [
        {**groups[0], "scopeSpans": [{**groups[0]["scopeSpans"][0], "spans": part}]}
        for part in (
            groups[0]["scopeSpans"][0]["spans"][:half],
            groups[0]["scopeSpans"][0]["spans"][half:],
        )
    ]
    two = tmp_path / "two.json"
    two.write_text("".join(json.dumps({wrapper: {inner: [g]}}) + "\n" for g in split))
    traceq.ingest([two], tmp_path / "ds2")
    _check(tmp_path / "ds2")
