"""Damage in one record of an OTLP line costs that record, not the line."""

from __future__ import annotations

from pathlib import Path

import traceq
from tests.otel_factory import MS, T0, RequestSpec, make_spans, otlp_json_lines


def test_invalid_utf8_quarantines_one_span_of_the_line(tmp_path: Path) -> None:
    specs = [
        RequestSpec(f"r{i}", arrival=T0 + i * MS, attributes={"gen_ai.request.id": f"req-{i}"})
        for i in range(3)
    ]
    line = otlp_json_lines(make_spans(specs), per_line=3).encode()
    assert line.count(b"\n") == 1
    src = tmp_path / "spans.jsonl"
    src.write_bytes(line.replace(b"req-1", b"req-\xff1"))  # a latin-1 byte in one span
    traceq.ingest([src], tmp_path / "ds")
    con = traceq.open(tmp_path / "ds")
    ids = [r for (r,) in con.sql("SELECT request_id FROM requests ORDER BY 1").fetchall()]
    assert ids == ["req-0", "req-2"]
    [(location, reason, raw)] = con.sql("SELECT location, reason, raw FROM quarantine").fetchall()
    assert (location, reason) == ("line 1", "span with invalid UTF-8 (its line's other spans kept)")
    assert "req-\ufffd1" in raw


def test_dmon_header_naming_a_column_twice(tmp_path: Path) -> None:
    """Found by tests/test_hostile_fuzz.py: a real nvidia-smi dmon file whose header names `gpu`
    twice crashed the reader (polars DuplicateError); now its rows are quarantined, and the
    rows under the next, good header land."""
    real = Path(__file__).parent / "data" / "real" / "gpu"
    text = (real / "nvidia-smi_dmon_s_pucvmet_jpg_ofa_doc_example.txt").read_text()
    bad = text.replace("# gpu ", "# gpu gpu ", 1)
    src = tmp_path / "dmon.txt"
    src.write_text(bad + text)
    [result] = traceq.ingest([src], tmp_path / "ds")
    assert result.status == "ingested"
    con = traceq.open(tmp_path / "ds")
    reasons = con.sql("SELECT DISTINCT reason FROM quarantine").fetchall()
    assert reasons == [("the header names 'gpu' twice",)]
    traceq.ingest([real / "nvidia-smi_dmon_s_pucvmet_jpg_ofa_doc_example.txt"], tmp_path / "good")
    count = "SELECT count(*) FROM gpu_samples"
    assert con.sql(count).fetchall() == traceq.open(tmp_path / "good").sql(count).fetchall()
