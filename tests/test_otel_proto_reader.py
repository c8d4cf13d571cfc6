"""The protobuf reader (traceq/ingest/otel/proto_arrow.py): OTLP protobuf decoded by numpy into
the table the JSON reader makes, against the path every message took before (protobuf's parser,
proto_shape.py's mapping, polars' JSON reader). The same rows either way, on every sample
scenario and on wire shapes the SDK never writes: repeated singular fields, a known field with
another wire type, unknown fields, enums past int32, times past int64."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import numpy as np
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.test_otel_arrow_reader import PRODUCERS, SAMPLES, _as_proto, _routes, assert_same
from traceq.ingest.otel import otlp_proto, proto_arrow, proto_wire


def _declines(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Messages the protobuf reader declined, per block it decoded (spied)."""
    seen: list[int] = []
    real = proto_arrow.to_table

    def spy(*args):
        table, declined = real(*args)
        seen.append(len(declined))
        return table, declined

    monkeypatch.setattr(proto_arrow, "to_table", spy)
    return seen


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.parent.name)
def test_every_sample_scenario_as_protobuf_reads_the_same(path, monkeypatch):
    lines = [line for line in path.read_bytes().splitlines() if line.strip()]
    data = b"".join(_as_proto(json.loads(line), framed=True) for line in lines)
    declines = _declines(monkeypatch)
    assert_same(data, monkeypatch, otlp_proto.iter_span_frames)
    assert declines and set(declines) == {0}, "the protobuf reader declined messages"


@pytest.mark.parametrize("producer", ["per-token-arrays", "vllm-token-events", "sglang"])
def test_token_encodings_and_step_events_are_read_without_python(producer, monkeypatch):
    """vLLM's per-token arrays (OTel arrays of doubles and ints, JSON text, gzip and orjson
    bytes), its step events (`token_scheduled` / `token_generated`, engine-core events) and
    SGLang's, written by the OpenTelemetry SDK and encoded as protobuf: the same rows as the
    JSON mapping gives, and no message left to it."""
    docs = [json.loads(line) for line in PRODUCERS[producer]().splitlines()]
    declines, routes = _declines(monkeypatch), _routes(monkeypatch)
    data = b"".join(_as_proto(doc, framed=True) for doc in docs)
    got = assert_same(data, monkeypatch, otlp_proto.iter_span_frames)
    assert declines and set(declines) == {0} and set(routes) == {0}
    assert got["tokens"].height > 0 or producer == "sglang"  # SGLang's times are phase spans


# A hand-written wire format, for what the SDK's encoder never writes.
def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _len(number: int, payload: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(payload)) + payload


def _fixed64(number: int, value: int) -> bytes:
    return _tag(number, 1) + struct.pack("<Q", value)


def _kv(key: str, value: bytes) -> bytes:
    return _len(1, key.encode()) + _len(2, value)


T0 = 1_750_000_000_000_000_000


def _span(*extra: bytes, name: bytes = b"llm_request", end: int = T0 + 9_000_000) -> bytes:
    token = _fixed64(1, T0 + 5_000_000) + _len(2, b"gen_ai.token")
    token += _len(3, _kv("gen_ai.token.count", _tag(3, 0) + _varint(1)))
    attributes = [
        _kv("gen_ai.request.id", _len(1, b"cmpl-1")),
        _kv("gen_ai.usage.prompt_tokens", _tag(3, 0) + _varint(12)),
        _kv("gen_ai.usage.completion_tokens", _tag(3, 0) + _varint(1)),
        _kv("gen_ai.response.finish_reasons", _len(1, b"stop")),
    ]
    return (
        _len(1, bytes(range(16)))
        + _len(2, bytes(range(8)))
        + _len(5, name)
        + _tag(6, 0)
        + _varint(2)
        + _fixed64(7, T0)
        + _fixed64(8, end)
        + b"".join(_len(9, a) for a in attributes)
        + _len(11, token)
        + b"".join(extra)
    )


def _array(*values: int | float) -> bytes:
    """An AnyValue holding an ArrayValue of these ints and doubles."""
    elements = [
        _tag(3, 0) + _varint(v) if isinstance(v, int) else _tag(4, 1) + struct.pack("<d", v)
        for v in values
    ]
    return _len(5, b"".join(_len(1, e) for e in elements))


def _event(name: bytes, *attributes: bytes) -> bytes:
    """A span event (field 11) at T0 + 4 ms with these key-values."""
    body = _fixed64(1, T0 + 4_000_000) + _len(2, name)
    return _len(11, body + b"".join(_len(3, a) for a in attributes))


def _request(span: bytes) -> bytes:
    resource = _len(1, _kv("service.name", _len(1, b"vllm")))
    return _len(1, _len(1, resource) + _len(2, _len(2, span)))


def _framed(*messages: bytes) -> bytes:
    return b"".join(struct.pack(">I", len(m)) + m for m in messages)


WIRE_SHAPES = {
    # taken: protobuf ignores an unknown field, of any wire type
    "unknown fields": (
        _span(_tag(99, 0) + _varint(5), _fixed64(98, 1), _len(97, b"x"), _tag(96, 5) + b"abcd"),
        False,
    ),
    "a time past int64": (_span(end=(1 << 64) - 1), False),
    "an empty span": (b"", False),
    "an event time past int64": (_span(_len(11, _fixed64(1, (1 << 64) - 1))), False),
    # the message's last byte is 0x0A, a newline: still protobuf, not a JSON line
    "a last byte of 10": (_span(_len(9, _kv("x", _tag(3, 0) + _varint(10)))), False),
    # declined: protobuf keeps the last of two names; a varint name is an unknown field
    "a name written twice": (_span(_len(5, b"second")), True),
    "a name as a varint": (_span(_tag(5, 0) + _varint(7), name=b""), True),
    "a kind past int32": (_span(_tag(6, 0) + _varint(1 << 40)), True),
    "a negative kind": (_span(_tag(6, 0) + _varint(-3)), True),
    "a NaN attribute": (
        _span(_len(9, _kv("x", _tag(4, 1) + struct.pack("<d", float("nan"))))),
        True,
    ),
    "a value of two kinds": (_span(_len(9, _kv("x", _len(1, b"a") + _tag(3, 0) + b"\x01"))), True),
    # arrays of ints and doubles are taken (their text as polars prints the JSON), and bytes
    "an array of ints and doubles": (
        _span(_len(9, _kv("x", _array(3, -7, 0.25, 1e-7, 1e15)))),
        False,
    ),
    "an array of epoch seconds": (
        _span(_len(9, _kv("x", _array(1750000000.1234567, 0.0451)))),
        False,
    ),
    "an empty array": (_span(_len(9, _kv("x", _len(5, b"")))), False),
    "a bytes value": (_span(_len(9, _kv("x", _len(7, b"\x00\xff[1,2]")))), False),
    # declined: anything else in an array
    "an array of strings": (_span(_len(9, _kv("x", _len(5, _len(1, _len(1, b"a")))))), True),
    "an array element of no kind": (_span(_len(9, _kv("x", _len(5, _len(1, b""))))), True),
    "an array in an array": (_span(_len(9, _kv("x", _len(5, _len(1, _array(1)))))), True),
    "an array with a NaN": (_span(_len(9, _kv("x", _array(1.5, float("nan"))))), True),
    "an array written twice": (_span(_len(9, _kv("x", _array(1) + _array(2)))), True),
    # other events keep their attributes' text, as polars prints their JSON
    "an event of every value kind": (
        _span(
            _event(
                b"token_generated",
                _kv("new_token_ids", _array(7, 8)),
                _kv("s", _len(1, "é/ü".encode())),
                _kv("b", _tag(2, 0) + _varint(1)),
                _kv("d", _tag(4, 1) + struct.pack("<d", 0.1)),
                _kv("bytes", _len(7, b"\x01")),
                _kv("none", b""),
            )
        ),
        False,
    ),
    "an event without attributes": (_span(_event(b"QUEUED")), False),
    "an event string to escape": (_span(_event(b"x", _kv("s", _len(1, b'a"b\\n')))), False),
    "an event key to escape": (_span(_event(b"x", _kv("a\tb", _len(1, b"c")))), False),
}


TEXT_TO_ESCAPE = ("an event string to escape", "an event key to escape")


@pytest.mark.parametrize("shape", WIRE_SHAPES)
def test_wire_shapes_read_as_protobuf_reads_them(shape, monkeypatch):
    span, declined = WIRE_SHAPES[shape]
    message = _request(span)
    if shape == "a last byte of 10":
        assert message.endswith(b"\n")
    parsed = ExportTraceServiceRequest.FromString(message)  # what protobuf makes of it
    declines, routes = _declines(monkeypatch), _routes(monkeypatch)
    got = assert_same(_framed(_request(_span()), message), monkeypatch, otlp_proto.iter_span_frames)
    assert declines == [1 if declined else 0]
    if shape in TEXT_TO_ESCAPE:  # the event's text is polars' to print
        assert routes == [1]
    elif not declined:
        assert routes == [0]
    names = got["spans"]["name"].to_list()
    if shape in ("a time past int64", "an empty span"):  # quarantined, either way
        assert names == ["llm_request"] and got["quarantine"].height == 1
    else:
        assert names == ["llm_request", parsed.resource_spans[0].scope_spans[0].spans[0].name]


def test_a_span_with_many_events_decodes_in_one_pass_per_field():
    """A 20,000-event span and 3,000 one-event spans: every event, in order (the long span's
    tail is walked field by field, a 10-byte varint among them)."""
    events = [_len(11, _fixed64(1, T0 + i) + _len(2, b"gen_ai.token")) for i in range(20_000)]
    long = _request(_span(*events, _tag(99, 0) + _varint(-1)))
    short = [_request(_span()) for _ in range(3_000)]
    table, declined = proto_arrow.to_table([long, *short])
    assert len(declined) == 0
    spans = table.column("resourceSpans").combine_chunks().flatten().field("scopeSpans")
    spans = spans.flatten().field("spans").flatten()
    times = spans.field("events")[0].values.field("timeUnixNano").to_pylist()
    assert len(times) == 20_001
    assert times[1:] == [T0 + i for i in range(20_000)]


def test_bytes_that_are_not_protobuf_raise_wire_error():
    buf = proto_wire.padded(b"\x0a\x05ab")  # a length past the message's end
    with pytest.raises(proto_wire.WireError):
        proto_wire.fields(buf, np.array([0]), np.array([4]))


def test_an_ingest_of_either_encoding_never_imports_pandas(tmp_path):
    """pyarrow imports pandas at its first `pa.array` or `to_numpy` (0.25-0.4 s of every ingest
    process); the readers cross between numpy and Arrow without them (arrow_values.py)."""
    sample = SAMPLES[0]
    proto = tmp_path / "traces.binpb"
    lines = [line for line in sample.read_bytes().splitlines() if line.strip()]
    proto.write_bytes(b"".join(_as_proto(json.loads(line), framed=True) for line in lines))
    script = (
        "import sys\n"
        "from traceq.ingest import ingest\n"
        "results = ingest(sys.argv[2:], sys.argv[1])\n"
        "json_rows, proto_rows = (r.rows.get('tokens', 0) for r in results)\n"
        "assert json_rows == proto_rows > 0, results\n"
        "assert 'pandas' not in sys.modules, 'pandas imported'\n"
    )
    args = [str(tmp_path / "ds"), str(sample), str(proto)]
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "ds" / "manifest.json").exists()
