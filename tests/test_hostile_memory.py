"""A few megabytes must not take the machine. Each probe runs `traceq ingest` in a fresh
process on a hostile file generated on the fly (scaled down from bench/hostile.py so the
suite stays fast) and bounds its peak RSS; the full-size figures are in docs/RELIABILITY.md."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest
import zstandard

import traceq
from tests.hostile_factory import (
    OTLP_HEAD,
    SMI_HEADER,
    gzip_bomb,
    long_otlp_line,
    run_measured,
    wide_span,
)
from tests.otel_factory import T0, RequestSpec, make_spans, otlp_proto_bytes

# An import of traceq with polars and DuckDB takes about 150 MiB; the probes below read a file
# of 150-200 MB decompressed. Without a bound they need at least twice their size.
PEAK_MIB = 450


def _quarantine(ds: Path) -> list[tuple[str, str]]:
    return traceq.open(ds).sql("SELECT location, reason FROM quarantine ORDER BY 1").fetchall()


def test_gzip_bomb_smi_csv(tmp_path: Path) -> None:
    bomb = gzip_bomb(tmp_path / "smi.csv.gz", SMI_HEADER, 200 << 20)  # 200 KB on disk
    code, out, peak = run_measured("ingest", bomb, "-o", tmp_path / "ds")
    assert code == 0, out
    assert peak < PEAK_MIB, f"peak RSS {peak:.0f} MiB"
    [(location, reason)] = _quarantine(tmp_path / "ds")
    assert location == "line 2"
    assert "longer than 33,554,432 bytes" in reason and "--max-line-bytes" in reason


def test_gzip_bomb_otlp_json(tmp_path: Path) -> None:
    bomb = gzip_bomb(tmp_path / "spans.json.gz", OTLP_HEAD, 200 << 20)
    code, out, peak = run_measured("ingest", bomb, "-o", tmp_path / "ds")
    assert code == 0, out
    assert peak < PEAK_MIB, f"peak RSS {peak:.0f} MiB"
    assert [loc for loc, _ in _quarantine(tmp_path / "ds")] == ["line 1"]


def test_span_with_200k_attributes(tmp_path: Path) -> None:
    src = wide_span(tmp_path / "wide.json", 200_000)  # 11 MB; polars alone needed 1 GB
    code, out, peak = run_measured("ingest", src, "-o", tmp_path / "ds")
    assert code == 0, out
    assert peak < PEAK_MIB, f"peak RSS {peak:.0f} MiB"
    con = traceq.open(tmp_path / "ds")
    assert con.sql("SELECT count(*) FROM spans").fetchall()[0] == (2,)  # the wide span lands
    [(location, reason)] = _quarantine(tmp_path / "ds")
    assert location == "line 1"
    assert reason == "span has 200,000 attributes; the first 4,096 kept"


def test_single_150_mb_otlp_line(tmp_path: Path) -> None:
    src = long_otlp_line(tmp_path / "long.json", 150 << 20, value_bytes=8_000)
    code, out, peak = run_measured("ingest", src, "-o", tmp_path / "ds")
    assert code == 0, out
    assert peak < PEAK_MIB, f"peak RSS {peak:.0f} MiB"
    assert [loc for loc, _ in _quarantine(tmp_path / "ds")] == ["line 1"]
    con = traceq.open(tmp_path / "ds")
    assert con.sql("SELECT count(*) FROM requests").fetchall()[0] == (1,)  # line 2 still lands


def test_raising_the_cap_reads_the_line(tmp_path: Path) -> None:
    """The cap is an option: a 3 MB line over a 1 MB cap is quarantined, with 4 MB it is read
    (in pieces, bounded: traceq/ingest/otel/split.py)."""
    src = long_otlp_line(tmp_path / "long.json", 3 << 20)
    code, out, _ = run_measured(
        "ingest", src, "-o", tmp_path / "a", "--max-line-bytes", str(1 << 20)
    )
    assert code == 0, out
    assert traceq.open(tmp_path / "a").sql("SELECT count(*) FROM requests").fetchall()[0] == (1,)
    code, out, _ = run_measured(
        "ingest", src, "-o", tmp_path / "b", "--max-line-bytes", str(4 << 20)
    )
    assert code == 0, out
    spans = traceq.open(tmp_path / "b").sql("SELECT count(*) FROM spans").fetchall()[0][0]
    assert spans > 10_000 and _quarantine(tmp_path / "b") == []


REAL = Path(__file__).parent / "data" / "real"


def test_long_line_mid_file_costs_that_line_only(tmp_path: Path) -> None:
    """Past the cap in the middle of a real GPU CSV and a real AIPerf NDJSON export: that line
    is one quarantine row at its own line number; every other line lands as before."""
    cases = {
        "gpu_samples": REAL
        / "gpu"
        / "nvidia-smi_query-gpu_noheader_nounits_A5000_custom_header.csv",
        "requests": REAL
        / "loadtest"
        / "aiperf_example"
        / "aiperf_example_run1_profile_export.jsonl",
    }
    options = traceq.IngestOptions(max_line_bytes=64 << 10)
    for table, path in cases.items():
        lines = path.read_bytes().splitlines(keepends=True)
        traceq.ingest([path], tmp_path / f"{table}-plain", options=options)
        hostile = tmp_path / path.name
        hostile.write_bytes(b"".join([*lines[:4], b"9" * (100 << 10) + b"\n", *lines[4:]]))
        traceq.ingest([hostile], tmp_path / table, options=options)
        count = f"SELECT count(*) FROM {table}"
        plain = traceq.open(tmp_path / f"{table}-plain").sql(count).fetchall()
        assert traceq.open(tmp_path / table).sql(count).fetchall() == plain
        [(location, reason)] = _quarantine(tmp_path / table)
        assert location == "line 5" and reason.startswith("line longer than 65,536 bytes")


@pytest.mark.parametrize("block_bytes", [3, 7, 64, 1 << 20])
def test_line_numbers_survive_a_rejected_line(block_bytes: int) -> None:
    """The shared block reader (traceq/ingest/blocks.py) at any read size: over-long lines,
    within a block or across many, are rejected at their own number; the others keep theirs."""
    from traceq.ingest.blocks import LineCap, iter_line_blocks

    data = b"a\n" + b"b" * 50 + b"\nc\n\nee\n" + b"d" * 30
    stream = io.BufferedReader(io.BytesIO(data))
    stream.cap = LineCap(max_bytes=10)  # type: ignore[attr-defined]
    kept = []
    for block, first in iter_line_blocks(stream, lambda _: None, block_bytes):
        kept += [(first + i, line) for i, line in enumerate(block.split(b"\n")) if line]
    assert kept == [(1, b"a"), (3, b"c"), (5, b"ee")]
    assert [r["location"] for r in stream.cap.rejected] == ["line 2", "line 6"]  # type: ignore[attr-defined]


def test_zstd_bomb_in_a_framed_protobuf_stream(tmp_path: Path) -> None:
    """A length-prefixed OTLP stream whose second message is zstd that inflates 1,000-fold:
    decompressed only up to the cap, quarantined; the first message's spans land."""
    specs = [RequestSpec("r0", arrival=T0, attributes={"gen_ai.request.id": "r0"})]
    good = otlp_proto_bytes(make_spans(specs))
    bomb = zstandard.ZstdCompressor().compress(b"\x0a" + b"\0" * (8 << 20))
    src = tmp_path / "spans.pb"
    src.write_bytes(b"".join(struct.pack(">I", len(m)) + m for m in (good, bomb)))
    options = traceq.IngestOptions(max_line_bytes=1 << 20)
    traceq.ingest([src], tmp_path / "ds", options=options)
    con = traceq.open(tmp_path / "ds")
    assert con.sql("SELECT request_id FROM requests").fetchall() == [("r0",)]
    [(location, reason)] = _quarantine(tmp_path / "ds")
    assert location.startswith("offset ") and "past the line cap of 1,048,576 bytes" in reason


def test_document_over_its_cap_is_one_quarantine_row(tmp_path: Path) -> None:
    """A format parsed whole (a real LLMPerf export) past `max_document_bytes`: not read, one
    row that names the option; under the cap it reads as before."""
    src = REAL / "loadtest" / "llmperf" / "llmperf_leaderboard_summary_together_70b.json"
    small = traceq.IngestOptions(max_document_bytes=1000)
    traceq.ingest([src], tmp_path / "capped", options=small)
    [(location, reason)] = _quarantine(tmp_path / "capped")
    assert location == "file"
    assert reason == (
        "document longer than 1,000 bytes, not read (raise --max-document-bytes to read it)"
    )
    traceq.ingest([src], tmp_path / "plain")
    metrics = "SELECT count(*) FROM tool_metrics"
    assert traceq.open(tmp_path / "plain").sql(metrics).fetchall()[0][0] > 0
