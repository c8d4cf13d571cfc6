"""Every OTLP AnyValue variant and encoding quirk, as other producers write them."""

from __future__ import annotations

import base64
import json

import pytest

import traceq

TRACE_HEX = "5b8efff798038103d269b633813fc60c"
SPAN_HEX = "eee19b7ec3c1b174"
# varints of every length, zero, negatives (10 bytes on the wire) and the int64 extremes
INTS = [0, 1, 127, 128, 300, 16384, 2**35 + 3, -1, -300, 2**63 - 1, -(2**63)]


def _line(**span_overrides) -> str:
    span = {
        "traceId": TRACE_HEX,
        "spanId": SPAN_HEX,
        "parentSpanId": "",
        "name": "llm_request",
        "kind": "SPAN_KIND_SERVER",
        "startTimeUnixNano": 1750000000000000001,  # a JSON number, not a string
        "endTimeUnixNano": "1750000000500000001",
        "attributes": [
            {"key": "gen_ai.request.id", "value": {"stringValue": "cmpl-v"}},
            {"key": "s", "value": {"stringValue": 'quote " and \\ backslash'}},
            {"key": "i", "value": {"intValue": "9007199254740993"}},  # > 2^53: stays exact
            {"key": "i_num", "value": {"intValue": 7}},
            {"key": "d", "value": {"doubleValue": 0.25}},
            {"key": "d_nan", "value": {"doubleValue": "NaN"}},
            {"key": "b", "value": {"boolValue": True}},
            {"key": "bytes", "value": {"bytesValue": base64.b64encode(b"\x00\x01").decode()}},
            {"key": "arr", "value": {"arrayValue": {"values": [{"stringValue": "x"},
                                                                {"intValue": "2"}]}}},
            {"key": "darr", "value": {"arrayValue": {"values": [{"doubleValue": 0.25},
                                                                 {"doubleValue": 1e-05}]}}},
            {"key": "iarr", "value": {"arrayValue": {"values": [
                {"intValue": str(i)} for i in INTS]}}},
            {"key": "kv", "value": {"kvlistValue": {"values": [
                {"key": "inner", "value": {"boolValue": False}}]}}},
            {"key": "gen_ai.usage.completion_tokens", "value": {"intValue": "2"}},
        ],
        "events": [
            {"timeUnixNano": "1750000000100000001", "name": "gen_ai.token"},
            {"timeUnixNano": "1750000000200000001", "name": "gen_ai.token",
             "attributes": [{"key": "gen_ai.token.count", "value": {"intValue": 1}}]},
            {"timeUnixNano": "1750000000300000001", "name": "exception",
             "attributes": [{"key": "exception.type", "value": {"stringValue": "Timeout"}}]},
        ],
        "status": {"code": "STATUS_CODE_ERROR", "message": "deadline exceeded"},
    }  # fmt: skip
    span.update(span_overrides)
    doc = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "host.name", "value": {"stringValue": "gpu-node-3"}}]
                },
                "instrumentationLibrarySpans": [{"spans": [span]}],  # OTLP < 0.15 field name
            }
        ]
    }
    return json.dumps(doc)


def _as_proto(line: str, path):
    """The same document as a serialised ExportTraceServiceRequest."""
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    doc = json.loads(line)
    for rs in doc["resourceSpans"]:
        rs["scopeSpans"] = rs.pop("instrumentationLibrarySpans")
        for span in rs["scopeSpans"][0]["spans"]:
            for key in ("traceId", "spanId"):
                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    path.write_bytes(ParseDict(doc, ExportTraceServiceRequest()).SerializeToString())
    return path


@pytest.mark.parametrize("encoding", ["json", "proto"])
def test_every_anyvalue_variant(tmp_path, encoding):
    src = tmp_path / "v.jsonl"
    src.write_text(_line() + "\n")
    if encoding == "proto":
        src = _as_proto(_line(), tmp_path / "v.pb")
    traceq.ingest([src], tmp_path / "ds")
    con = traceq.open(tmp_path / "ds")
    (attrs, kind, status, trace_id) = con.sql(
        "SELECT attributes, kind, status_code, trace_id FROM spans"
    ).fetchall()[0]
    attrs = json.loads(attrs)
    assert attrs["s"] == 'quote " and \\ backslash'
    assert attrs["i"] == 9007199254740993
    assert attrs["i_num"] == 7
    assert attrs["d"] == 0.25
    assert attrs["d_nan"] == "NaN"
    assert attrs["b"] is True
    assert attrs["bytes"] == "AAE="
    assert attrs["arr"] == {"values": [{"stringValue": "x"}, {"intValue": "2"}]}
    # a double-only array takes protobuf's numpy path: the same values either way
    assert attrs["darr"] == {"values": [{"doubleValue": 0.25}, {"doubleValue": 1e-05}]}
    # so does an int-only array (its varints summed by numpy): the same values either way
    assert attrs["iarr"] == {"values": [{"intValue": str(i)} for i in INTS]}
    assert attrs["kv"] == {"values": [{"key": "inner", "value": {"boolValue": False}}]}
    assert (kind, status, trace_id) == ("SERVER", "ERROR", TRACE_HEX)
    request = con.sql(
        "SELECT instance, t_arrival, output_tokens, error, streaming FROM requests"
    ).fetchall()
    assert request == [("gpu-node-3", 1750000000000000001, 2, "deadline exceeded", True)]
    (event,) = con.sql("SELECT ts, kind, request_id, message FROM events").fetchall()
    assert event[:3] == (1750000000300000001, "otel:exception", "cmpl-v")
    assert json.loads(event[3]) == [{"key": "exception.type", "value": {"stringValue": "Timeout"}}]
    assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(0,)]


def test_base64_ids_and_integer_kind(tmp_path):
    trace_b64 = base64.b64encode(bytes.fromhex(TRACE_HEX)).decode()
    span_b64 = base64.b64encode(bytes.fromhex(SPAN_HEX)).decode()
    src = tmp_path / "b64.jsonl"
    src.write_text(_line(traceId=trace_b64, spanId=span_b64, kind=3) + "\n")
    traceq.ingest([src], tmp_path / "ds")
    con = traceq.open(tmp_path / "ds")
    row = con.sql("SELECT trace_id, span_id, kind FROM spans").fetchall()
    assert row == [(TRACE_HEX, SPAN_HEX, "CLIENT")]
    assert con.sql("SELECT view FROM requests").fetchall() == [("client",)]
