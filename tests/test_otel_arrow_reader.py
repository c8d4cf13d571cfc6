"""The Arrow reader of OTLP/JSON (traceq/ingest/otel/otlp_arrow.py) against polars' reader:
the same span rows, tokens, events and quarantine, value for value, on every sample scenario,
on spans made by each producer's real SDK code, and on shapes the Arrow reader leaves to
polars (which must then read them exactly as before)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from opentelemetry.trace import SpanKind

from tests.otel_factory import T0, RequestSpec, make_spans, otlp_json_lines
from tests.otel_producers import (
    SGLangIdGenerator,
    VllmRequest,
    provider,
    sglang_spans,
    vllm_array_span,
    vllm_token_event_span,
)
from tests.test_otel_producers import (
    ENCODINGS,
    SG,
    SG_RETRACTED,
    STEPS_100US,
    VLLM_EVENTS,
    B,
)
from tests.test_otel_sdk import scenario
from tests.test_otel_values import _line as every_anyvalue_line
from traceq.ingest.otel import otlp_arrow, otlp_json, otlp_proto
from traceq.ingest.otel.spans import SpanConventions, split_spans

SAMPLES = sorted((Path(__file__).parent.parent / "sample_traces").glob("*/traces.otlp.jsonl"))
MS = 1_000_000


def first_pass(
    data: bytes, arrow: bool, monkeypatch: pytest.MonkeyPatch, reader=otlp_json.iter_span_frames
) -> dict:
    """What the OTel ingest's first pass makes of `data`: split parts, no-span lines and
    quarantine rows, with either reader."""
    monkeypatch.setattr(otlp_json, "ARROW_READER", arrow)
    quarantine: list[dict] = []
    parts: dict[str, list[pl.DataFrame]] = {}
    n_spans = 0
    stream = io.BufferedReader(io.BytesIO(data))
    for frame, no_key in reader(stream, quarantine, lambda _: None):
        frame = frame.with_columns(_span=pl.int_range(pl.len(), dtype=pl.Int64) + n_spans)
        n_spans += frame.height
        for name, part in {**split_spans(frame, SpanConventions()), "no_key": no_key}.items():
            parts.setdefault(name, []).append(part)
    out = {name: pl.concat(frames, how="vertical_relaxed") for name, frames in parts.items()}
    return {**out, "quarantine_rows": quarantine}


def assert_same(
    data: bytes, monkeypatch: pytest.MonkeyPatch, reader=otlp_json.iter_span_frames
) -> dict:
    arrow = first_pass(data, True, monkeypatch, reader)
    polars = first_pass(data, False, monkeypatch, reader)
    assert arrow.keys() == polars.keys()
    for name in arrow:
        if name == "quarantine_rows":
            assert arrow[name] == polars[name]
        else:
            assert arrow[name].schema == polars[name].schema, name
            assert arrow[name].equals(polars[name], null_equal=True), name
    return arrow


def _routes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Lines the Arrow reader handed to polars, per block it took (spied)."""
    seen: list[int] = []
    real = otlp_arrow.to_spans

    def spy(*args, **kwargs):
        got = real(*args, **kwargs)
        seen.append(-1 if got is None else len(got.polars_rows))
        return got

    monkeypatch.setattr(otlp_arrow, "to_spans", spy)
    return seen


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.parent.name)
def test_every_sample_scenario_reads_the_same(path, monkeypatch):
    routes = _routes(monkeypatch)
    assert_same(path.read_bytes(), monkeypatch)
    assert routes, "the Arrow reader did not parse the file"


def test_the_arrow_reader_takes_the_token_event_samples_whole(monkeypatch):
    """gen_ai.token events with scalar attributes: no line left to polars (long-output-tail
    is one 2.4 MB line, read in pieces: those too)."""
    routes = _routes(monkeypatch)
    for path in SAMPLES:
        first_pass(path.read_bytes(), True, monkeypatch)
    assert routes and set(routes) == {0}


def _sdk(build: Callable[..., object], resource: dict, ids=None, per_line: int = 0) -> bytes:
    with provider(resource, ids) as (tracer, spans):
        build(tracer)
    return otlp_json_lines(spans, per_line).encode()


def _each(emit: Callable[[Any], None], items: list[Any]) -> None:
    for item in items:
        emit(item)


PRODUCERS = {
    "vllm-v0-v1-phase-spans": lambda: otlp_json_lines(make_spans(scenario()), 2).encode(),
    "sglang": lambda: _sdk(
        lambda t: _each(lambda r: sglang_spans(t, r), [SG, SG_RETRACTED]),
        {"service.name": "sglang"},
        SGLangIdGenerator(),
    ),
    "vllm-token-events": lambda: _sdk(
        lambda t: vllm_token_event_span(t, VLLM_EVENTS), {"service.name": "vllm"}
    ),
    "per-token-arrays": lambda: _sdk(
        lambda t: _each(
            lambda enc: vllm_array_span(t, VllmRequest(enc, B, B + 60 * MS, STEPS_100US), enc),
            ENCODINGS,
        ),
        {"service.name": "vllm"},
        per_line=1,
    ),
}


@pytest.mark.parametrize("name", PRODUCERS)
def test_every_producer_reads_the_same(name, monkeypatch):
    assert_same(PRODUCERS[name](), monkeypatch)


@pytest.mark.parametrize("framed", [False, True])
@pytest.mark.parametrize("name", PRODUCERS)
def test_every_producer_as_protobuf_reads_the_same(name, framed, monkeypatch, tmp_path):
    """OTLP protobuf messages, mapped to the JSON shape (proto_shape.py), take the same two
    readers: the same rows either way."""
    spans = [json.loads(line) for line in PRODUCERS[name]().splitlines()]
    data = b"".join(_as_proto(doc, framed) for doc in spans)
    routes = _routes(monkeypatch)
    assert_same(data, monkeypatch, otlp_proto.iter_span_frames)
    assert routes


def _as_proto(doc: dict, framed: bool) -> bytes:
    import base64
    import struct

    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    for rs in doc["resourceSpans"]:
        for scope in rs["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    message = ParseDict(doc, ExportTraceServiceRequest()).SerializeToString()
    return struct.pack(">I", len(message)) + message if framed else message


def _token_span(tracer, request_id: str, start: int, events: list[tuple]) -> None:
    span = tracer.start_span(
        "llm_request",
        kind=SpanKind.SERVER,
        start_time=start,
        attributes={"gen_ai.request.id": request_id, "gen_ai.usage.completion_tokens": 3},
    )
    for event, ts, attrs in events:
        span.add_event(event, attrs, ts)
    span.end(end_time=start + 60 * MS)


def _good_line(i: int) -> str:
    events = [("gen_ai.token", T0 + (i * 100 + k) * MS, {"gen_ai.token.count": 1}) for k in (1, 2)]
    return _sdk(lambda t: _token_span(t, f"r{i}", T0 + i * 100 * MS, events), {}).decode()


def _edit_first_span(line: str, edit: Callable[[dict], None]) -> str:
    doc = json.loads(line)
    edit(doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0])
    return json.dumps(doc, separators=(",", ":")) + "\n"


def _attr(key: str, value: dict) -> dict:
    return {"key": key, "value": value}


def _add_span_attr(value: dict) -> Callable[[dict], None]:
    return lambda span: span["attributes"].append(_attr("x", value))


def _set_first_event_attrs(attrs: list) -> Callable[[dict], None]:
    return lambda span: span["events"][0].__setitem__("attributes", attrs)


_COUNT = "gen_ai.token.count"
# Shapes whose line (or block) polars reads, and what the Arrow reader must not decide alone.
ODD_LINES = {
    "array value": _add_span_attr({"arrayValue": {"values": [{"doubleValue": 0.5}]}}),
    "kvlist value": _add_span_attr({"kvlistValue": {"values": []}}),
    "no value kind": _add_span_attr({}),
    "two value kinds": _add_span_attr({"stringValue": "a", "intValue": "1"}),
    "double that rounds either way": _add_span_attr({"doubleValue": 1750761051.73828125}),
    "other span event": lambda span: span["events"].append(
        {"timeUnixNano": str(T0), "name": "exception", "attributes": []}
    ),
    "count as text": _set_first_event_attrs([_attr(_COUNT, {"stringValue": "2"})]),
    "count not an integer": _set_first_event_attrs([_attr(_COUNT, {"intValue": "2x"})]),
    "count zero": _set_first_event_attrs([_attr(_COUNT, {"intValue": "0"})]),
    "count as double": _set_first_event_attrs([_attr(_COUNT, {"doubleValue": 2.0})]),
    "value before key": _set_first_event_attrs([{"value": {"intValue": "2"}, "key": _COUNT}]),
    "count's name as a value": _set_first_event_attrs([_attr("y", {"stringValue": _COUNT})]),
    "null count": _set_first_event_attrs([_attr(_COUNT, {"intValue": None, "doubleValue": 2.0})]),
    "kind as text": lambda span: span.__setitem__("kind", "SPAN_KIND_SERVER"),
    "time as a number": lambda span: span.__setitem__("startTimeUnixNano", T0),
    "null event": lambda span: span["events"].append(None),
    "null attribute": lambda span: span["attributes"].append(None),
}
# Shapes the Arrow reader takes itself, with the same outcome.
TAKEN_LINES = {
    "count twice": _set_first_event_attrs(
        [_attr(_COUNT, {"intValue": "2"}), _attr(_COUNT, {"intValue": "-1"})]
    ),
    "integral double": _add_span_attr({"doubleValue": 3.0}),
    "double with exponent": _add_span_attr({"doubleValue": 1e-07}),
    "no end timestamp": lambda span: span.pop("endTimeUnixNano"),
    "event without a timestamp": lambda span: span["events"][0].pop("timeUnixNano"),
    "event without attributes": lambda span: span["events"][0].pop("attributes"),
    "no attributes": lambda span: span.pop("attributes"),
    "no status": lambda span: span.pop("status"),
    "error status": lambda span: span.__setitem__("status", {"code": 2, "message": "boom"}),
    "base64 ids": lambda span: span.update(
        traceId="W47/95gDgQPSabYzgT/GDA==", spanId="7uGbfsPBsXQ="
    ),
    "empty parent": lambda span: span.__setitem__("parentSpanId", ""),
    "count of 3": _set_first_event_attrs([_attr(_COUNT, {"intValue": "3"})]),
    "other event attributes": _set_first_event_attrs([_attr("a", {"boolValue": True})]),
    "doubles and bools": _add_span_attr({"doubleValue": 0.123456789012345678}),
    "bool": _add_span_attr({"boolValue": False}),
    "bytes": _add_span_attr({"bytesValue": "AAE="}),
}


@pytest.mark.parametrize("taken", TAKEN_LINES)
def test_a_line_the_arrow_reader_takes_reads_the_same(taken, monkeypatch):
    lines = [_good_line(i) for i in range(3)]
    lines[1] = _edit_first_span(lines[1], TAKEN_LINES[taken])
    routes = _routes(monkeypatch)
    assert_same("".join(lines).encode(), monkeypatch)
    assert routes == [0]


@pytest.mark.parametrize("odd", ODD_LINES)
def test_a_line_the_arrow_reader_does_not_take_reads_as_before(odd, monkeypatch):
    """The odd line sits between good ones: polars reads it (or its block), the good lines
    land as always, and every row and quarantine reason is the same as polars alone gives."""
    lines = [_good_line(i) for i in range(3)]
    lines[1] = _edit_first_span(lines[1], ODD_LINES[odd])
    routes = _routes(monkeypatch)
    got = assert_same("".join(lines).encode(), monkeypatch)
    assert routes in ([], [-1]) or routes[0] >= 1  # never taken whole by the Arrow reader
    assert got["spans"].height >= 2


BAD_BLOCKS = {
    "not JSON": b"{not json}\n",
    "truncated": b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"ab',
    "not an object": b"[1, 2]\n",
    "invalid UTF-8": None,  # built below
    "blank line": b"\n",
    "no resourceSpans": b'{"something":"else"}\n',
}


@pytest.mark.parametrize("bad", BAD_BLOCKS)
def test_a_block_pyarrow_rejects_is_quarantined_as_before(bad, monkeypatch):
    good = [_good_line(i).encode() for i in range(2)]
    odd = BAD_BLOCKS[bad]
    if odd is None:
        odd = good[1].replace(b"r1", b"r\xff1")
    data = good[0] + odd + good[1] if odd.endswith(b"\n") else good[0] + good[1] + odd
    got = assert_same(data, monkeypatch)
    assert got["quarantine_rows"] or got["no_key"].height or bad == "blank line"


def test_every_anyvalue_variant_reads_the_same(monkeypatch):
    """tests/test_otel_values.py's line: every AnyValue kind, numbers where OTLP writes
    strings, the old `instrumentationLibrarySpans` field."""
    assert_same((every_anyvalue_line() + "\n").encode(), monkeypatch)
    assert_same((every_anyvalue_line(kind=2, startTimeUnixNano="1") + "\n").encode(), monkeypatch)


def test_a_line_over_the_split_size_reads_the_same(monkeypatch):
    """A line longer than SPLIT_BYTES is cut into pieces and read by polars, its neighbours
    by the Arrow reader."""
    monkeypatch.setattr(otlp_json, "SPLIT_BYTES", 4096)
    spans = [
        RequestSpec(f"r{i}", arrival=T0 + i * MS, tokens=[T0 + i * MS + k for k in range(1, 40)])
        for i in range(12)
    ]
    data = otlp_json_lines(make_spans(spans), per_line=4).encode()
    big = otlp_json_lines(make_spans(spans), per_line=12).encode()
    assert len(big) > 4096
    assert_same(data + big + data, monkeypatch)
