"""The ingest's part of counting grown sources once: a source that grew since it was ingested
— a log or collector file still being written — replaces its earlier version in one manifest
commit, so no record is counted twice; the KPIs equal those of a fresh ingest of the grown
file. A gzipped and a CRLF copy of a file ingest cleanly (recognising them as the same records
is the views' job)."""

from __future__ import annotations

import gzip
from pathlib import Path

import traceq
from tests.otel_factory import MS, T0, RequestSpec, make_spans, otlp_json_lines
from traceq.dataset import Dataset

REAL = Path(__file__).parent / "data" / "real"
VLLM_LOG = REAL / "vllm" / "vllm_v1_0.10.1.1_stats_10conc_1k_4k_A100_dennislee22_excerpt.log"


def _otlp_lines(n: int) -> list[str]:
    specs = [
        RequestSpec(
            f"r{i}",
            arrival=T0 + i * 50 * MS,
            tokens=[T0 + i * 50 * MS + k * 7 * MS for k in range(1, 6)],
            attributes={"gen_ai.request.id": f"r{i}"},
        )
        for i in range(n)
    ]
    return otlp_json_lines(make_spans(specs), per_line=1).splitlines(keepends=True)


def _kpis(ds: Path) -> list[tuple]:
    return traceq.open(ds).sql("SELECT * FROM kpi_latency ORDER BY metric").fetchall()


def test_grown_collector_file_replaces_its_earlier_version(tmp_path: Path) -> None:
    lines = _otlp_lines(8)
    src = tmp_path / "collector.jsonl"
    src.write_text("".join(lines[:5]))
    traceq.ingest([src], tmp_path / "ds")
    first_id = Dataset(tmp_path / "ds").sources()[0]["source_id"]
    src.write_text("".join(lines))  # the collector wrote three more lines
    traceq.ingest([src], tmp_path / "ds")
    fresh = tmp_path / "copy.jsonl"
    fresh.write_text("".join(lines))
    traceq.ingest([fresh], tmp_path / "fresh")
    con = traceq.open(tmp_path / "ds")
    assert con.sql("SELECT count(*), count(DISTINCT request_id) FROM requests").fetchall() == [
        (8, 8)
    ]
    assert _kpis(tmp_path / "ds") == _kpis(tmp_path / "fresh")
    [entry] = Dataset(tmp_path / "ds").sources()
    assert entry["supersedes"] == [first_id]
    on_disk = (tmp_path / "ds" / "requests").rglob("*.parquet")
    assert sorted(p.stem for p in on_disk) == [entry["source_id"]]


def test_grown_server_log_replaces_its_earlier_version(tmp_path: Path) -> None:
    text = VLLM_LOG.read_bytes()
    cut = text.index(b"\n", len(text) // 2) + 1
    src = tmp_path / "vllm.log"
    src.write_bytes(text[:cut])
    traceq.ingest([src], tmp_path / "ds", options=traceq.IngestOptions(year=2025))
    src.write_bytes(text)
    traceq.ingest([src], tmp_path / "ds", options=traceq.IngestOptions(year=2025))
    traceq.ingest([VLLM_LOG], tmp_path / "fresh", options=traceq.IngestOptions(year=2025))
    query = "SELECT count(*) FROM engine_stats"
    got = traceq.open(tmp_path / "ds").sql(query).fetchall()
    assert got == traceq.open(tmp_path / "fresh").sql(query).fetchall()
    assert got[0][0] > 0 and len(Dataset(tmp_path / "ds").sources()) == 1


def test_gzip_and_crlf_copies_ingest_cleanly(tmp_path: Path) -> None:
    text = "".join(_otlp_lines(4))
    plain = tmp_path / "plain.jsonl"
    plain.write_text(text)
    (tmp_path / "copy.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "crlf.jsonl").write_bytes(text.replace("\n", "\r\n").encode())
    expected = None
    for name in ("plain.jsonl", "copy.jsonl.gz", "crlf.jsonl"):
        ds = tmp_path / f"ds-{name}"
        traceq.ingest([tmp_path / name], ds)
        con = traceq.open(ds)
        assert con.sql("SELECT count(*) FROM quarantine").fetchall() == [(0,)]
        expected = expected or _kpis(ds)
        assert _kpis(ds) == expected
