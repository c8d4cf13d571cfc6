"""Copies of a load-test export count once: tools that print no request id (vLLM
bench, llmperf) get ids from what their requests record, not from the file, so a copy under
another name, re-indented, gzipped or appended to another result gives the same requests,
and the request pick (traceq/pick.py) keeps one row of each."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
from polars.testing import assert_frame_equal

import traceq
from tests.loadtest_factory import vllm_result, workload
from traceq.session import Session

KPIS = (
    "SELECT * FROM kpi_latency",
    "SELECT * FROM kpi_throughput",
    "SELECT count(*) AS n, sum(n_tokens) AS tokens, sum(tbt_ns) AS tbt FROM token_gaps",
    "SELECT view, count(*) AS n, sum(e2e_ns) AS e2e FROM request_phases GROUP BY view",
)
LLMPERF = Path(__file__).parent / "data" / "real" / "loadtest" / "llmperf"


def kpis(dataset: Path) -> list[pl.DataFrame]:
    with Session(dataset) as s:
        return [s.query(q) for q in KPIS]


def stored(dataset: Path) -> tuple[int, int, int]:
    with Session(dataset) as s:
        return s.query(
            "SELECT (SELECT count(*) FROM requests), (SELECT count(*) FROM request_phases),"
            " (SELECT max(copies) FROM request_phases)"
        ).row(0)


def assert_unchanged_by(original: Path, copy: Path, ds: Path) -> None:
    traceq.ingest([original], ds)
    once = kpis(ds)
    n = stored(ds)[0]
    [result] = traceq.ingest([copy], ds)
    assert result.status == "ingested" and result.rows["requests"] == n  # a new source
    for before, after in zip(once, kpis(ds), strict=True):
        assert_frame_equal(after, before, check_exact=False, rel_tol=1e-12)
    assert stored(ds) == (2 * n, n, 2)


def test_a_copy_of_a_vllm_bench_result_leaves_every_kpi_unchanged(tmp_path: Path) -> None:
    """Another name, re-indented and gzipped: other bytes, the same requests."""
    doc = vllm_result(workload())
    original = tmp_path / "vllm-infqps-20261130-044200.json"
    original.write_text(json.dumps(doc))
    copy = tmp_path / "copy-of-the-result.json.gz"
    copy.write_bytes(gzip.compress(json.dumps(doc, indent=2).encode()))
    assert_unchanged_by(original, copy, tmp_path / "ds")


def test_a_run_appended_to_another_result_is_the_same_run(tmp_path: Path) -> None:
    """`--append-result` onto another result: the run already ingested alone is not counted
    again (the file is not a grown copy of the first, which would supersede it)."""
    first, second = vllm_result(workload(seed=1, n=6)), vllm_result(workload(seed=2, n=9))
    alone = tmp_path / "first.json"
    alone.write_text(json.dumps(first))
    appended = tmp_path / "appended.json"
    appended.write_text(json.dumps(second) + "\n" + json.dumps(first) + "\n")
    ds = tmp_path / "ds"
    traceq.ingest([alone, appended], ds)
    assert stored(ds) == (6 + 6 + 9, 6 + 9, 2)


def test_two_different_runs_stay_apart(tmp_path: Path) -> None:
    """Same size, same tool, other figures: other ids."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(vllm_result(workload(seed=1, n=6))))
    b.write_text(json.dumps(vllm_result(workload(seed=2, n=6))))
    ds = tmp_path / "ds"
    traceq.ingest([a, b], ds)
    assert stored(ds) == (12, 12, 1)


def test_a_copy_of_llmperf_responses_leaves_every_kpi_unchanged(tmp_path: Path) -> None:
    original = LLMPERF / "llmperf_leaderboard_individual_responses_together_70b.json"
    copy = tmp_path / "responses.json"
    copy.write_text(json.dumps(json.loads(original.read_text()), indent=2))
    assert_unchanged_by(original, copy, tmp_path / "ds")
