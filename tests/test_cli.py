"""The traceq command as a user runs it: output formats, read-only SQL, exit codes."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys

import pytest

from tests.otel_factory import MS, T0, RequestSpec, make_spans, write_otlp_json


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    specs = [
        RequestSpec(
            f"r{i}",
            arrival=T0 + i * MS,
            tokens=[T0 + i * MS + 10 * MS, T0 + i * MS + 30 * MS],
            attributes={"gen_ai.request.id": f"r{i}"},
        )
        for i in range(4)
    ]
    src = write_otlp_json(make_spans(specs), tmp / "t.jsonl")
    result = traceq_cli("ingest", str(src), "-o", str(tmp / "ds"))
    assert result.returncode == 0, result.stderr
    assert "4 requests, 8 tokens, 4 spans; 0 quarantined" in result.stdout
    # the make_spans requests are vLLM llm_request spans with traceq's gen_ai.token events
    assert "conventions matched: vllm (4), gen-ai-token-events (4)" in result.stdout
    return tmp / "ds"


def traceq_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "traceq", *args], capture_output=True, text=True, check=False
    )


def test_sql_formats(dataset):
    query = "SELECT request_id, ttft_ms FROM request_phases ORDER BY request_id"
    as_json = traceq_cli("sql", str(dataset), query, "--format", "json")
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert rows == [{"request_id": f"r{i}", "ttft_ms": 10.0} for i in range(4)]
    as_csv = traceq_cli("sql", str(dataset), query, "--format", "csv")
    assert list(csv.reader(io.StringIO(as_csv.stdout)))[0:2] == [
        ["request_id", "ttft_ms"],
        ["r0", "10.0"],
    ]
    table = traceq_cli("sql", str(dataset), query)
    assert table.returncode == 0
    assert "| request_id | ttft_ms |" in table.stdout and "| r3" in table.stdout


def test_sql_join_with_repeated_column_names(dataset):
    """`SELECT a.x, b.x` is valid SQL: the second column is named as DuckDB's shell names
    it, not an internal error."""
    query = (
        "SELECT a.request_id, b.request_id FROM request_phases AS a "
        "JOIN request_phases AS b USING (request_id) ORDER BY 1 LIMIT 1"
    )
    result = traceq_cli("sql", str(dataset), query, "--format", "csv")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:2] == ["request_id,request_id_1", "r0,r0"]


def test_sql_params(dataset):
    result = traceq_cli(
        "sql",
        str(dataset),
        "SELECT count(*) AS n FROM token_gaps WHERE tbt_ms > $floor",
        "--param",
        "floor=15",
        "--format",
        "json",
    )
    assert json.loads(result.stdout) == {"n": 4}


@pytest.mark.parametrize(
    "query",
    [
        "CREATE TABLE x AS SELECT 1",
        "COPY requests TO '/tmp/traceq-escape.csv'",
        "INSTALL httpfs",
        "ATTACH 'other.db'",
        "SELECT * FROM read_text('/etc/hostname')",
        "SELECT 1; SELECT 2",
    ],
)
def test_sql_is_read_only(dataset, query):
    result = traceq_cli("sql", str(dataset), query)
    assert result.returncode == 2
    assert result.stderr.startswith("traceq: error:")
    assert "Traceback" not in result.stderr


def test_sql_on_a_missing_dataset(tmp_path):
    result = traceq_cli("sql", str(tmp_path / "nope"), "SELECT 1")
    assert result.returncode == 2
    assert "is not a traceq dataset" in result.stderr


def test_usage_errors_exit_2(tmp_path):
    assert traceq_cli("ingest").returncode == 2
    assert traceq_cli("sql", str(tmp_path), "SELECT 1", "--param", "oops").returncode == 2
    result = traceq_cli("ingest", str(tmp_path), "-o", str(tmp_path / "d"), "--format", "xml")
    assert result.returncode == 2 and "unknown format" in result.stderr


def test_formats_lists_the_otel_readers():
    out = traceq_cli("formats").stdout
    for name in ("otlp-json", "otlp-proto", "jaeger-json", "sglang", "tensorrt-llm", "vllm-omni"):
        assert name in out


def test_explicit_format_overrides_sniffing(tmp_path, dataset):
    specs = [RequestSpec("x", tokens=[T0 + MS], attributes={"gen_ai.request.id": "x"})]
    src = write_otlp_json(make_spans(specs), tmp_path / "traces.txt")
    result = traceq_cli("ingest", str(src), "-o", str(tmp_path / "d"), "--format", "otlp-json")
    assert result.returncode == 0 and "otlp-json: 1 requests" in result.stdout


def test_demo_runs_on_the_bundled_sample_traces(demo_run):
    # `traceq demo -o DIR`, run once per session (tests/conftest.py)
    result = demo_run.result
    assert result.returncode == 0, result.stderr
    assert "per scenario" in result.stdout and "| healthy " in result.stdout
    ingested = [line for line in result.stdout.splitlines() if "otlp-json:" in line]
    assert len(ingested) >= 12 and all(line.endswith("; 0 quarantined") for line in ingested)
    table = result.stdout.split("per scenario", 1)[1].split("findings per scenario", 1)[0]
    # figures a person reads: no 15639.600 (ms) or 0.799 (share) in the table
    assert not re.search(r"\d{4}|\b0\.\d{3}\b", table), table
    kv_row = next(line for line in table.splitlines() if line.startswith("| kv-pressure "))
    assert re.search(r"\| \d+ s +\|", kv_row) and " %" in kv_row, kv_row
    findings = result.stdout.split("findings per scenario", 1)[1]
    assert any(line.startswith("| kv-pressure") and line.count("kv-pressure") >= 3
               for line in findings.splitlines())  # fmt: skip


def test_sql_from_file_and_stdin(dataset, tmp_path):
    query = tmp_path / "q.sql"
    query.write_text("SELECT count(*) AS n FROM request_phases\n")
    from_file = traceq_cli("sql", str(dataset), "-f", str(query), "--format", "json")
    assert json.loads(from_file.stdout) == {"n": 4}
    from_stdin = subprocess.run(
        [sys.executable, "-m", "traceq", "sql", str(dataset), "-", "--format", "json"],
        input="SELECT count(*) AS n FROM tokens",
        capture_output=True,
        text=True,
        check=False,
    )
    assert json.loads(from_stdin.stdout) == {"n": 8}


def test_sql_error_keeps_the_hint(dataset):
    result = traceq_cli("sql", str(dataset), "SELECT * FROM request_phase")
    assert result.returncode == 2
    assert 'Did you mean "request_phases"' in result.stderr


def test_sql_csv_streams_up_to_max_rows(dataset):
    result = traceq_cli("sql", str(dataset), "SELECT * FROM tokens", "--format", "csv",
                        "--max-rows", "3")  # fmt: skip
    assert result.returncode == 0
    assert len(result.stdout.splitlines()) == 1 + 3


def test_sql_time_limit(dataset):
    result = traceq_cli("sql", str(dataset), "SELECT count(*) FROM range(10000000000) a, "
                        "range(1000) b", "--time-limit", "0.5")  # fmt: skip
    assert result.returncode == 2 and "time limit" in result.stderr


def test_schema_lists_and_describes(dataset):
    listing = traceq_cli("schema", str(dataset))
    assert listing.returncode == 0
    assert "| table | requests" in listing.stdout and "request_phases" in listing.stdout
    assert "_empty_" not in listing.stdout
    one = traceq_cli("schema", str(dataset), "request_phases")
    assert "ttft_ms" in one.stdout and "Time to first token" in one.stdout
    missing = traceq_cli("schema", str(dataset), "nope")
    assert missing.returncode == 2 and "no table or view named 'nope'" in missing.stderr


def test_max_line_bytes_default_matches_the_readers():
    from traceq.cli import ingest
    from traceq.ingest import blocks

    assert ingest.MAX_LINE_BYTES == blocks.MAX_LINE_BYTES
    assert ingest.MAX_DOCUMENT_BYTES == blocks.MAX_DOCUMENT_BYTES
