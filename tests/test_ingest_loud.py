"""Wrong answers fail loudly: a forced format that reads garbage exits 2 naming
the likely format; vLLM logs behind syslog / journald prefixes; a wrapped stats line
followed by a foreign line still parses."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from traceq.dataset import Dataset
from traceq.ingest import IngestOptions, ingest
from traceq.session import Session

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "kv-pressure"


def traceq_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "traceq", *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("name", "forced", "likely", "problem"),
    [
        ("vllm.log", "nvidia-smi-csv", "vllm-log", "read 70 rows with no values"),
        ("vllm.log", "dcgm-prom", "vllm-log", "read no rows"),
        ("nvidia-smi.csv", "vllm-log", "nvidia-smi-csv", "read no rows"),
        ("dcgm.prom", "nvidia-smi-csv", "dcgm-prom", "quarantined 195 of 286 records"),
        ("traces.otlp.jsonl", "guidellm", "otlp-json", "read no rows"),
    ],
)
def test_forced_wrong_format_fails_naming_the_likely_one(
    tmp_path: Path, name: str, forced: str, likely: str, problem: str
) -> None:
    ds = tmp_path / "ds"
    run = traceq_cli("ingest", str(SAMPLE / name), "-o", str(ds), "--format", forced)
    assert run.returncode == 2
    assert f"--format {forced} {problem}" in run.stderr
    assert f"it looks like {likely} (--format {likely}" in run.stderr
    assert Dataset(ds).sources() == []  # nothing committed: the next try is not "already"


def test_forced_right_format_still_reads(tmp_path: Path) -> None:
    (result,) = ingest([SAMPLE / "nvidia-smi.csv"], tmp_path / "ds", fmt="nvidia-smi-csv")
    assert result.status == "ingested" and result.rows["gpu_samples"] == 190


STATS = (
    "INFO 06-15 10:00:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: 100.0 tokens/s,"
    " Avg generation throughput: 200.0 tokens/s, Running: 5 reqs, Waiting: 1 reqs,"
    " GPU KV cache usage: 10.0%, Prefix cache hit rate: 20.0%"
)
ACCESS = 'INFO:     127.0.0.1:46928 - "POST /v1/completions HTTP/1.1" 200 OK'
TRACEBACK = ["ERROR 06-15 10:00:20 [engine.py:1] boom", "Traceback (most recent call last):"]


@pytest.mark.parametrize(
    "prefix",
    [
        "Jun 15 10:00:05 gpu-node-0 vllm[1671]: ",  # journalctl -o short, rsyslog
        "2025-06-15T10:00:05+0000 gpu-node-0 vllm[1671]: ",  # journalctl -o short-iso
        "Jun  5 10:00:05 gpu-node-0 python3[88]: ",  # one-digit day, padded
    ],
)
def test_vllm_log_behind_a_syslog_prefix(tmp_path: Path, prefix: str) -> None:
    lines = [STATS.format(s=5), ACCESS, STATS.format(s=15), *TRACEBACK]
    path = tmp_path / "journal.log"
    path.write_text("".join(prefix + line + "\n" for line in lines))
    (result,) = ingest([path], tmp_path / "ds", options=IngestOptions(year=2025))
    assert result.format == "vllm-log"  # detected, not forced
    assert result.rows["engine_stats"] == 2 and result.quarantined == 0
    with Session(tmp_path / "ds") as s:
        stats = s.query("SELECT running, waiting, kv_usage, line FROM engine_stats ORDER BY line")
        http = s.query("SELECT count(*) AS n FROM events WHERE kind = 'http'")
    assert stats.rows() == [(5, 1, 0.1, 1), (5, 1, 0.1, 3)]
    assert http.item() == 1


def test_wrapped_stats_line_before_a_foreign_line(tmp_path: Path) -> None:
    stats = STATS.format(s=5)
    wrapped = [stats[i : i + 80] for i in range(0, len(stats), 80)]  # cut mid-word, once
    foreign = "Throughput: 12.34 requests/s, 5000.00 total tokens/s, 2500.00 output tokens/s"
    lines = ["INFO 06-15 10:00:00 [api_server.py:1] vLLM API server version 0.10.1.1"]
    lines += [*wrapped, foreign, STATS.format(s=15)]
    path = tmp_path / "wrapped.log"
    path.write_text("\n".join(lines) + "\n")
    (result,) = ingest([path], tmp_path / "ds", options=IngestOptions(year=2025))
    assert result.quarantined == 0
    with Session(tmp_path / "ds") as s:
        rows = s.query("SELECT line, prompt_tps, waiting, prefix_hit_rate FROM engine_stats")
    assert rows.sort("line").rows() == [(2, 100.0, 1, 0.2), (len(lines), 100.0, 1, 0.2)]
