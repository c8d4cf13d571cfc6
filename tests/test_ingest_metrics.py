"""Prometheus /metrics scrapes of vLLM and SGLang → engine_stats, on a real
vLLM 0.25.1 scrape taken mid-benchmark (tests/data/real/vllm/PROVENANCE.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from traceq.dataset import Dataset
from traceq.ingest import IngestOptions, ingest
from traceq.session import Session

REAL = next((Path(__file__).parent / "data/real/vllm").glob("vllm_v1_0.25.1_metrics_scrape_*.prom"))
START = 1_750_000_000 * 10**9


def stats(ds: Path) -> list[dict]:
    with Session(ds) as s:
        return s.query("SELECT * EXCLUDE (source_id) FROM engine_stats ORDER BY ts").to_dicts()


def test_one_real_scrape(tmp_path: Path) -> None:
    (result,) = ingest([REAL], tmp_path / "ds", options=IngestOptions(start=START))
    assert result.format == "engine-metrics" and result.quarantined == 0
    (row,) = stats(tmp_path / "ds")
    assert (row["ts"], row["engine"], row["running"], row["waiting"]) == (START, 0, 64, 64)
    assert row["kv_usage"] == pytest.approx(0.11223878211531546)
    assert row["gen_tps"] is None  # one scrape: no interval to take a rate over
    assert (
        result.clock_domain == "assumed_interval" and result.assumptions["start_from"] == "--start"
    )
    entry = Dataset(tmp_path / "ds").sources()[0]
    assert entry["unrecognised"]["vllm:request_success_total"] == 5  # one per finished_reason
    assert entry["unrecognised"]["vllm:time_to_first_token_seconds_bucket"] > 10


def _next_scrape(text: str) -> str:
    """The real scrape 5 s later: 1,000 more generated and 5,000 more prompt tokens, 3 more
    preemptions, 2,000 more prefix queries of which 500 hit, fewer requests running."""
    bumps = {
        "vllm:generation_tokens_total{": 1_000,
        "vllm:prompt_tokens_total{": 5_000,
        "vllm:num_preemptions_total{": 3,
        "vllm:prefix_cache_queries_total{": 2_000,
        "vllm:prefix_cache_hits_total{": 500,
    }
    out = []
    for line in text.splitlines():
        for prefix, add in bumps.items():
            if line.startswith(prefix):
                name, value = line.rsplit(" ", 1)
                line = f"{name} {float(value) + add}"
        if line.startswith("vllm:num_requests_running{"):
            line = line.rsplit(" ", 1)[0] + " 40.0"
        out.append(line)
    return "\n".join(out) + "\n"


def test_concatenated_scrapes_give_rates_and_preemptions(tmp_path: Path) -> None:
    text = REAL.read_text()
    path = tmp_path / "scrapes.prom"
    path.write_text(
        "# ts=2025-06-15T10:00:00Z\n" + text + "# ts=2025-06-15T10:00:05Z\n" + _next_scrape(text)
    )
    (result,) = ingest([path], tmp_path / "ds")
    assert result.clock_domain == "unix_ns" and result.warnings == []
    first, second = stats(tmp_path / "ds")
    assert second["ts"] - first["ts"] == 5 * 10**9
    assert (first["running"], second["running"]) == (64, 40)
    assert second["gen_tps"] == pytest.approx(200.0)
    assert second["prompt_tps"] == pytest.approx(1_000.0)
    assert second["prefix_hit_rate"] == pytest.approx(0.25)
    with Session(tmp_path / "ds") as s:
        events = s.query("SELECT kind, value FROM events").rows()
    assert events == [("preemption", 3.0)]


def test_sglang_scrape_with_sample_stamps_and_a_broken_line(tmp_path: Path) -> None:
    ms = 1_750_000_000_000
    lines = [
        "# HELP sglang:num_running_reqs The number of running requests.",
        "# TYPE sglang:num_running_reqs gauge",
        f'sglang:num_running_reqs{{model_name="m",engine_type="unified"}} 12.0 {ms}',
        f'sglang:num_queue_reqs{{model_name="m",engine_type="unified"}} 3.0 {ms}',
        f'sglang:token_usage{{model_name="m",engine_type="unified"}} 0.42 {ms}',
        'sglang:gen_throughput{model_name="m" 99',  # cut short
        f'sglang:gen_throughput{{model_name="m",engine_type="unified"}} 1234.5 {ms}',
    ]
    path = tmp_path / "sglang.prom"
    path.write_text("\n".join(lines) + "\n")
    (result,) = ingest([path], tmp_path / "ds")
    assert result.format == "engine-metrics" and result.quarantined == 1
    (row,) = stats(tmp_path / "ds")
    assert row["ts"] == ms * 10**6
    assert (row["running"], row["waiting"], row["kv_usage"], row["gen_tps"]) == (
        12,
        3,
        0.42,
        1234.5,
    )
    with Session(tmp_path / "ds") as s:
        assert s.query("SELECT location FROM quarantine").item() == "line 6"
