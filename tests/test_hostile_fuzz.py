"""Fuzzing every reader family with mutated real samples (docs/RELIABILITY.md).

Hypothesis mutates samples from tests/data/real (and spans from the real OpenTelemetry SDK):
truncate, splice, flip bytes, duplicate and reorder lines, insert a line longer than the cap,
then store the result plain, gzipped, zstd-compressed, with CRLF line ends or as latin-1.
Each case is ingested as a directory (so an unrecognised result is listed, not an error) and
must hold:

- no uncaught exception, and no reader failure (status `failed` is a crash the driver caught);
- the manifest's row counts equal the rows in the tables: nothing half-written;
- a non-blank input leaves a row, a quarantine row, or a count in the manifest (unclaimed
  lines in `unrecognised`, `header_blocks`): nothing vanishes silently;
- server logs: every line is a record, blank or a continuation (the log's own accounting);
- bounded memory: the process stays under PEAK_MIB throughout.

`make test` runs the quick profile (a few seconds per family); `make fuzz` sets
TRACEQ_FUZZ=long for the long run recorded in docs/RELIABILITY.md.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import traceq
from tests.otel_factory import MS, T0, RequestSpec, make_spans, otlp_json_lines, otlp_proto_bytes
from traceq.dataset import Dataset
from traceq.schema import DERIVED, TABLES

settings.register_profile("quick", max_examples=12, deadline=None, derandomize=True)
settings.register_profile(
    "long", max_examples=int(os.environ.get("TRACEQ_FUZZ_EXAMPLES", "500")), deadline=None
)
settings.load_profile(os.environ.get("TRACEQ_FUZZ", "quick"))

REAL = Path(__file__).parent / "data" / "real"
SAMPLE_BYTES = 48 << 10  # each sample is cut to this much, so one case ingests in ~0.1 s
CAP = 1 << 20  # --max-line-bytes of the fuzz runs: a spliced-in long line goes past it
PEAK_MIB = 1024


def _head(path: Path) -> bytes:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data[:SAMPLE_BYTES]


def _otel_samples() -> list[bytes]:
    specs = [
        RequestSpec(
            f"r{i}",
            arrival=T0 + i * 40 * MS,
            tokenize_end=T0 + i * 40 * MS + 2 * MS,
            tokens=[T0 + i * 40 * MS + k * 9 * MS for k in range(1, 5)],
            attributes={"gen_ai.request.id": f"r{i}", "gen_ai.usage.prompt_tokens": 17},
        )
        for i in range(6)
    ]
    spans = make_spans(specs)
    return [otlp_json_lines(spans, per_line=2).encode(), otlp_proto_bytes(spans)]


FAMILIES = {
    "otel": _otel_samples,
    "gpu": lambda: [_head(p) for p in sorted((REAL / "gpu").glob("*")) if p.suffix != ".md"],
    "serverlog": lambda: (
        [
            _head(REAL / "vllm" / name)
            for name in (
                "vllm_v1_0.10.1.1_stats_10conc_1k_4k_A100_dennislee22_excerpt.log",
                "vllm_v0_0.6.3_metrics349_stats_with_http_access_lines.log",
                "vllm_v0_0.6.x_h100_llama405b_preempt_recompute_101_pending_reflowed_rocmblog.log",
            )
        ]
        + [_head(next((REAL / "sglang").glob("*.log")))]
    ),
    "loadtest": lambda: [
        _head(REAL / "loadtest" / "aiperf_example" / "aiperf_example_run1_profile_export.jsonl"),
        _head(REAL / "loadtest" / "vllm_bench" / "llm-d_kgateway_benchmark_serving_results.jsonl"),
        (
            REAL / "loadtest" / "llmperf" / "llmperf_leaderboard_summary_together_70b.json"
        ).read_bytes(),
        _head(REAL / "loadtest" / "genai_perf_generated" / "profile_export.json.gz"),
    ],
}


@st.composite
def mutated(draw: st.DrawFn, samples: list[bytes]) -> tuple[bytes, str]:
    """(mutated bytes, how they are stored)."""
    data = draw(st.sampled_from(samples))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["truncate", "splice", "flip", "duplicate", "reorder", "long"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "truncate":
            data = data[:at]
        elif op == "splice":
            other = draw(st.sampled_from(samples))
            start = draw(st.integers(0, max(len(other) - 1, 0)))
            data = data[:at] + other[start : start + draw(st.integers(1, 4096))] + data[at:]
        elif op == "flip":
            data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
        else:
            lines = data.split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            j = draw(st.integers(0, len(lines) - 1))
            if op == "duplicate":
                lines[i:i] = lines[min(i, j) : max(i, j) + 1]
            elif op == "reorder":
                lines[i], lines[j] = lines[j], lines[i]
            else:  # a line past the cap, with or without its end
                lines.insert(i, b"x" * draw(st.integers(CAP - 2, CAP + 50_000)))
            data = b"\n".join(lines)
    return data, draw(st.sampled_from(["plain", "gzip", "zstd", "crlf", "latin-1"]))


def _store(data: bytes, how: str) -> bytes:
    if how == "gzip":
        return gzip.compress(data, compresslevel=1)
    if how == "zstd":
        return zstandard.ZstdCompressor().compress(data)
    if how == "crlf":
        return data.replace(b"\n", b"\r\n")
    if how == "latin-1":
        return data.decode("utf-8", "replace").encode("latin-1", "replace")
    return data


def _check(data: bytes, how: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="traceq-fuzz-"))
    _reset_peak()
    try:
        (tmp / "in").mkdir()
        (tmp / "in" / "input").write_bytes(_store(data, how))
        options = traceq.IngestOptions(year=2025, max_line_bytes=CAP)
        [result] = traceq.ingest([tmp / "in"], tmp / "ds", options=options)
        assert result.status in ("ingested", "unrecognised"), result
        [entry] = Dataset(tmp / "ds").sources()
        con = traceq.open(tmp / "ds")
        for table in (t for t in TABLES if t not in DERIVED):  # derived: no input record
            n = con.sql(f"SELECT count(*) FROM {table}").fetchall()[0][0]
            listed = entry["quarantined"] if table == "quarantine" else entry["rows"].get(table, 0)
            assert n == listed, (table, n, listed)
        if data.strip():  # something is counted: rows, quarantine rows, unclaimed or headers
            unclaimed = sum(v for v in entry.get("unrecognised", {}).values() if isinstance(v, int))
            headers = entry.get("header_blocks", 0)
            assert sum(entry["rows"].values()) + entry["quarantined"] + unclaimed + headers > 0
        if "lines" in entry:  # server logs account for each line themselves
            lines = entry["lines"]
            assert (
                sum(entry["records"].values()) + lines["blank"] + lines["continuation"]
                == (lines["total"])
            )
        peak = _peak_mib()
        assert peak < PEAK_MIB, f"peak RSS {peak:.0f} MiB"
    finally:
        shutil.rmtree(tmp)


def _reset_peak() -> None:
    """Start this case's peak RSS from the process's RSS now: the worker's peak so far is that
    of whatever test file ran in it before (pytest -n 2 --dist loadfile, Makefile)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def _peak_mib() -> float:
    """The process's peak RSS since `_reset_peak` (VmHWM, as bench/ingest_phases.py reads it)."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM")) / 1024


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fuzz_reader_family(family: str) -> None:
    samples = FAMILIES[family]()

    @settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(mutated(samples))
    def run(case: tuple[bytes, str]) -> None:
        _check(*case)

    run()
