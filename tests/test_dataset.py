"""The dataset on disk: re-ingest is a no-op, sources accumulate, commits are atomic, the
manifest records what each source was; and the Jaeger JSON export shape."""

from __future__ import annotations

import json
import time

import pytest

import traceq
from tests.otel_factory import MS, T0, RequestSpec, make_spans, write_otlp_json
from traceq.dataset import Dataset
from traceq.schema import DERIVED, TABLES


def _spans(prefix: str, n: int = 3):
    return make_spans(
        [
            RequestSpec(
                f"{prefix}{i}",
                arrival=T0 + i * MS,
                tokens=[T0 + i * MS + 2 * MS, T0 + i * MS + 3 * MS],
                attributes={"gen_ai.request.id": f"{prefix}{i}"},
            )
            for i in range(n)
        ]
    )


def _counts(ds) -> dict[str, int]:
    con = traceq.open(ds)
    return {t: len(con.table(t).fetchall()) for t in ("requests", "tokens", "spans")}


def test_reingest_same_content_is_a_noop(tmp_path):
    src = write_otlp_json(_spans("a"), tmp_path / "a.jsonl")
    first = traceq.ingest([src], tmp_path / "ds")
    before = _counts(tmp_path / "ds")
    copy = tmp_path / "copy-of-a.jsonl"
    copy.write_bytes(src.read_bytes())
    again = traceq.ingest([src, copy], tmp_path / "ds")
    assert [r.status for r in first] == ["ingested"]
    assert [r.status for r in again] == ["already ingested", "already ingested"]
    assert _counts(tmp_path / "ds") == before == {"requests": 3, "tokens": 6, "spans": 3}
    assert len(Dataset(tmp_path / "ds").sources()) == 1


def test_sources_accumulate_across_calls(tmp_path):
    traceq.ingest([write_otlp_json(_spans("a"), tmp_path / "a.jsonl")], tmp_path / "ds")
    traceq.ingest([write_otlp_json(_spans("b", 2), tmp_path / "b.jsonl")], tmp_path / "ds")
    assert _counts(tmp_path / "ds")["requests"] == 5
    ids = traceq.open(tmp_path / "ds").sql("SELECT DISTINCT source_id FROM requests").fetchall()
    assert len(ids) == 2


def test_manifest_records_each_source(tmp_path):
    src = write_otlp_json(_spans("a"), tmp_path / "a.jsonl")
    traceq.ingest([src], tmp_path / "ds")
    manifest = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    assert manifest["schema_version"] == traceq.SCHEMA_VERSION
    (entry,) = manifest["sources"]
    assert entry["path"] == str(src.resolve())
    assert entry["content_hash"].startswith("sha256:") and len(entry["content_hash"]) == 71
    assert entry["format"] == "otlp-json"
    assert entry["clock_domain"] == "unix_ns"
    assert entry["rows"]["requests"] == 3 and entry["rows"]["tokens"] == 6
    assert entry["quarantined"] == 0
    assert entry["time_range"]["start_ns"] == T0
    assert entry["time_range"]["end_ns"] == T0 + 2 * MS + 3 * MS
    day = "day=" + time.strftime("%Y-%m-%d", time.gmtime(T0 // 10**9))
    sid = entry["source_id"]
    assert entry["files"] == {
        **{table: [f"{table}/{day}/{sid}.parquet"] for table in ("requests", "tokens", "spans")},
        # the rollups of the tokens (traceq/layout_rollups.py): flat, one file each
        **{table: [f"{table}/{sid}.parquet"] for table in ("request_gaps", "gap_buckets")},
    }
    assert set(entry["rows"]) == set(TABLES) - {"quarantine", *DERIVED}
    for rels in entry["files"].values():
        assert all((tmp_path / "ds" / rel).is_file() for rel in rels)


def test_interrupted_ingest_leaves_nothing_visible(tmp_path, monkeypatch):
    src = write_otlp_json(_spans("a"), tmp_path / "a.jsonl")
    traceq.ingest([src], tmp_path / "ds")
    before = _counts(tmp_path / "ds")

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Dataset, "commit", crash)
    with pytest.raises(KeyboardInterrupt):
        traceq.ingest([write_otlp_json(_spans("b"), tmp_path / "b.jsonl")], tmp_path / "ds")
    monkeypatch.undo()
    assert _counts(tmp_path / "ds") == before
    assert not list((tmp_path / "ds" / ".staging").glob("*"))  # scratch was discarded


def test_orphans_of_a_killed_ingest_are_swept(tmp_path):
    src = write_otlp_json(_spans("a"), tmp_path / "a.jsonl")
    traceq.ingest([src], tmp_path / "ds")
    orphan = tmp_path / "ds" / "requests" / "deadbeefdeadbeef.parquet"
    orphan.write_bytes(b"PAR1 half written")
    dead = tmp_path / "ds" / ".staging" / "deadbeefdeadbeef-999999999"
    dead.mkdir()
    assert _counts(tmp_path / "ds")["requests"] == 3  # readers never see unlisted files
    traceq.ingest([write_otlp_json(_spans("b"), tmp_path / "b.jsonl")], tmp_path / "ds")
    assert not orphan.exists() and not dead.exists()
    assert _counts(tmp_path / "ds")["requests"] == 6


def test_open_rejects_a_non_dataset(tmp_path):
    from traceq.dataset import DatasetError

    with pytest.raises(DatasetError, match="not a traceq dataset"):
        traceq.open(tmp_path)


JAEGER = {
    "data": [
        {
            "traceID": "4bf92f3577b34da6a3ce929d0e0e4736",
            "spans": [
                {
                    "traceID": "4bf92f3577b34da6a3ce929d0e0e4736",
                    "spanID": "00f067aa0ba902b7",
                    "operationName": "llm_request",
                    "references": [],
                    "startTime": 1750000000123456,
                    "duration": 66000,
                    "tags": [
                        {"key": "span.kind", "type": "string", "value": "server"},
                        {"key": "gen_ai.request.id", "type": "string", "value": "cmpl-j"},
                        {"key": "gen_ai.usage.prompt_tokens", "type": "int64", "value": 12},
                        {"key": "gen_ai.latency.time_in_queue", "type": "float64", "value": 0.01},
                        {
                            "key": "gen_ai.latency.time_in_model_prefill",
                            "type": "float64",
                            "value": 0.02,
                        },
                        {"key": "otel.status_code", "type": "string", "value": "OK"},
                        {"key": "sampled", "type": "bool", "value": True},
                    ],
                    "logs": [
                        {
                            "timestamp": 1750000000158456,
                            "fields": [
                                {"key": "event", "type": "string", "value": "gen_ai.token"},
                                {"key": "gen_ai.token.count", "type": "int64", "value": 2},
                            ],
                        },
                        {
                            "timestamp": 1750000000189456,
                            "fields": [{"key": "event", "type": "string", "value": "gen_ai.token"}],
                        },
                    ],
                    "processID": "p1",
                    "warnings": None,
                },
                {
                    "traceID": "4bf92f3577b34da6a3ce929d0e0e4736",
                    "spanID": "00f067aa0ba902b8",
                    "operationName": "tokenize",
                    "references": [
                        {
                            "refType": "CHILD_OF",
                            "traceID": "4bf92f3577b34da6a3ce929d0e0e4736",
                            "spanID": "00f067aa0ba902b7",
                        }
                    ],
                    "startTime": 1750000000123456,
                    "duration": 3000,
                    "tags": [],
                    "logs": [],
                    "processID": "p1",
                },
            ],
            "processes": {"p1": {"serviceName": "vllm-server", "tags": []}},
            "warnings": None,
        }
    ],
    "total": 0,
    "limit": 0,
    "offset": 0,
    "errors": None,
}


def test_jaeger_ui_export(tmp_path):
    src = tmp_path / "jaeger.json"
    src.write_text(json.dumps(JAEGER))
    (result,) = traceq.ingest([src], tmp_path / "ds")
    assert result.format == "jaeger-json"
    con = traceq.open(tmp_path / "ds")
    row = con.sql(
        "SELECT request_id, instance, t_arrival, tokenize_ns, queue_ns, prefill_ns, decode_ns, "
        "prompt_tokens, output_tokens FROM request_phases"
    ).fetchall()
    t0 = 1750000000123456 * 1000
    first, last = 1750000000158456 * 1000, 1750000000189456 * 1000
    scheduled = first - 20 * MS
    assert row == [("cmpl-j", "vllm-server", t0, 3 * MS, 10 * MS, 20 * MS, last - first, 12, 3)]
    assert scheduled - 10 * MS - t0 == 5 * MS  # 2 ms between tokenize end and queue: residual
    kinds = con.sql("SELECT name, kind, parent_id FROM spans ORDER BY name").fetchall()
    assert kinds == [("llm_request", "SERVER", None), ("tokenize", "INTERNAL", "00f067aa0ba902b7")]


def test_request_phases_prefers_the_finest_stamps(tmp_path):
    """A request seen by a span (ns) and by vLLM log lines (s) is phased from the span."""
    arrival = 1749981600_123_456_789  # 2025-06-15 10:00:00.123456789 UTC
    spans = make_spans(
        [
            RequestSpec(
                "cmpl-both-0",
                arrival=arrival,
                tokens=[arrival + 40 * MS, arrival + 70 * MS],
                attributes={"gen_ai.request.id": "cmpl-both-0"},
            )
        ]
    )
    log = tmp_path / "vllm.log"
    log.write_text(
        "INFO 06-15 10:00:00 async_llm_engine.py:529] Received request cmpl-both-0: "
        "prompt: 'hi', sampling_params: SamplingParams(n=1, max_tokens=16), "
        "prompt_token_ids: [1, 2, 3], lora_request: None.\n"
        "INFO 06-15 10:00:00 async_llm_engine.py:173] Added request cmpl-both-0.\n"
        "INFO 06-15 10:00:01 async_llm_engine.py:140] Finished request cmpl-both-0.\n"
    )
    traceq.ingest(
        [write_otlp_json(spans, tmp_path / "t.jsonl"), log],
        tmp_path / "ds",
        options=traceq.IngestOptions(year=2025),
    )
    con = traceq.open(tmp_path / "ds")
    resolutions = con.sql("SELECT time_resolution_ns FROM requests ORDER BY 1").fetchall()
    assert resolutions == [(1,), (1_000_000_000,)]
    assert con.sql("SELECT t_arrival, ttft_ns FROM request_phases").fetchall() == [
        (arrival, 40 * MS)
    ]
