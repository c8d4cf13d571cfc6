"""`vllm bench serve` result JSON: detailed, non-detailed, `--append-result`, perf_counter
clocks anchored with --t0, and the crosswalk reproducing vLLM's own statistics."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import traceq
from tests.loadtest_factory import vllm_result, workload
from traceq.dataset import Dataset
from traceq.ingest import IngestOptions, ingest

NS = 1_000_000_000


def q(dataset: Path, query: str, params: list | None = None) -> pl.DataFrame:
    con = traceq.open(dataset)
    return pl.from_arrow(con.sql(query, params=params or None).to_arrow_table())  # type: ignore[return-value]


@pytest.fixture
def detailed(tmp_path: Path) -> tuple[Path, list]:
    reqs = workload()
    path = tmp_path / "vllm-infqps-Llama-3.1-8B-Instruct-20261130-044200.json"
    path.write_text(json.dumps(vllm_result(reqs)))
    return path, reqs


def test_detailed_rows_stamps_and_chunks(detailed, tmp_path: Path) -> None:
    path, reqs = detailed
    ds = tmp_path / "d.tq"
    [result] = ingest([path], ds)
    assert result.format == "vllm-bench" and result.quarantined == 0
    rows = q(ds, "SELECT * FROM requests ORDER BY t_arrival")
    assert rows.height == 12 and rows["error"].drop_nulls().to_list() == [
        "ClientConnectorError: connection refused"
    ]
    assert set(rows["view"]) == {"client"}
    first = rows.row(0, named=True)
    assert first["t_arrival"] == round(reqs[0].start * NS)  # perf_counter kept, in ns
    assert first["t_first_token"] == first["t_arrival"] + round(reqs[0].ttft * NS)
    assert first["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    failed = rows.filter(pl.col("error").is_not_null()).row(0, named=True)
    assert failed["t_first_token"] is None and failed["t_last_token"] is None
    tokens = q(ds, "SELECT * FROM tokens WHERE request_id = ? ORDER BY idx", [first["request_id"]])
    assert tokens.height == len(reqs[0].itls) + 1
    expected = first["t_first_token"] + round(sum(reqs[0].itls[:3]) * NS)
    assert abs(tokens["ts"][3] - expected) <= 1
    assert tokens["n_tokens"].to_list() == [1] * tokens.height
    # Request 5 sends two tokens per chunk: the split per chunk is unknown → null.
    multi = rows.filter(pl.col("output_tokens") == reqs[5].output_len)["request_id"][0]
    n_tokens = q(ds, "SELECT n_tokens FROM tokens WHERE request_id = ?", [multi])["n_tokens"]
    assert n_tokens.null_count() == len(reqs[5].itls) + 1
    source = Dataset(ds).sources()[0]
    assert source["clock_domain"] == "perf_counter_relative"


def test_crosswalk_reproduces_vllm_statistics(detailed, tmp_path: Path) -> None:
    path, _ = detailed
    ds = tmp_path / "d.tq"
    ingest([path], ds)
    cw = q(ds, "SELECT * FROM crosswalk")
    assert set(cw["native_metric"]) == {"ttft", "tpot", "itl", "e2el"}
    assert set(cw["statistic"]) == {"mean", "p50", "std", "p90", "p99"}
    assert cw.height == 4 * 6  # mean, median and p50 (same statistic), std, p90, p99
    assert cw["same_definition"].all()
    assert (cw["diff_ms"].abs() < 1e-6).all(), cw.filter(pl.col("diff_ms").abs() >= 1e-6)
    itl = cw.filter((pl.col("native_metric") == "itl") & (pl.col("statistic") == "mean"))
    assert itl["our_metric"][0] == "tbt_ms"
    throughput = q(ds, "SELECT value FROM tool_metrics WHERE metric = 'output_throughput'")["value"]
    assert throughput.len() == 1 and throughput[0] > 0


def test_t0_anchors_the_perf_counter_clock(detailed, tmp_path: Path) -> None:
    path, reqs = detailed
    ds = tmp_path / "d.tq"
    t0 = 1_795_000_000_000_000_000
    ingest([path], ds, options=IngestOptions(t0=t0))
    rows = q(ds, "SELECT t_arrival FROM requests ORDER BY t_arrival")["t_arrival"]
    assert rows[0] == t0
    assert rows[1] - rows[0] == round(reqs[1].start * NS) - round(reqs[0].start * NS)
    source = Dataset(ds).sources()[0]
    assert source["clock_domain"].startswith("unix_ns") and source["assumptions"]["t0"] == t0


def test_non_detailed_result_keeps_summary_only(tmp_path: Path) -> None:
    path = tmp_path / "vllm-nondetailed.json"
    path.write_text(json.dumps(vllm_result(workload(), detailed=False)))
    ds = tmp_path / "d.tq"
    [result] = ingest([path], ds)
    assert result.rows.get("requests", 0) == 0 and result.rows["tool_metrics"] > 20
    cw = q(ds, "SELECT * FROM crosswalk")
    assert cw.height == 24 and cw["ours_ms"].null_count() == 24  # nothing to recompute from


def test_append_result_lines_are_separate_runs(tmp_path: Path) -> None:
    path = tmp_path / "appended.json"
    first, second = vllm_result(workload(seed=1, n=6)), vllm_result(workload(seed=2, n=9))
    path.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    ds = tmp_path / "d.tq"
    [result] = ingest([path], ds)
    assert result.quarantined == 0
    runs = q(ds, "SELECT run, count(*) AS n FROM requests GROUP BY run ORDER BY run")
    assert runs.rows() == [("0", 6), ("1", 9)]
    cw = q(ds, "SELECT * FROM crosswalk WHERE statistic = 'mean' AND native_metric = 'ttft'")
    assert cw.sort("run")["native_ms"].to_list() == pytest.approx(
        [first["mean_ttft_ms"], second["mean_ttft_ms"]]
    )
    assert (cw["diff_ms"].abs() < 1e-6).all()


def test_explicit_format_and_cli(detailed, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from traceq.cli import cli

    path, _ = detailed
    out = CliRunner().invoke(
        cli, ["ingest", str(path), "-o", str(tmp_path / "c.tq"), "--format", "vllm-bench"]
    )
    assert out.exit_code == 0, out.output
    assert "vllm-bench" in out.output


def test_vllm_without_start_times_places_requests_at_zero(tmp_path: Path) -> None:
    """Older results (or other builds) have no `start_times`: durations stay exact."""
    reqs = workload()
    doc = vllm_result(reqs)
    doc.pop("start_times")
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    ds = tmp_path / "d.tq"
    [result] = ingest([path], ds)
    assert result.rows["requests"] == 12 and result.quarantined == 0
    rows = q(ds, "SELECT * FROM requests WHERE error IS NULL ORDER BY request_id")
    assert set(rows["t_arrival"]) == {0}
    cw = q(ds, "SELECT * FROM crosswalk WHERE native_metric IN ('ttft', 'e2el')")
    assert (cw["diff_ms"].abs() < 1e-6).all()
    assert "start_times" in Dataset(ds).sources()[0]["assumptions"]


REAL = Path(__file__).parent / "data" / "real" / "loadtest" / "vllm_bench"


def test_real_appended_results_with_metadata_keys(tmp_path: Path) -> None:
    """Three real `benchmark_serving.py --save-result --metadata …` results, one per line."""
    path = REAL / "llm-d_kgateway_benchmark_serving_results.jsonl"
    ds = tmp_path / "d.tq"
    [result] = ingest([path], ds)
    assert result.format == "vllm-bench" and result.quarantined == 0
    # Per object: 12 latency statistics + 10 numeric scalars (the inf run's request_rate is "inf").
    assert result.rows == {"tool_metrics": 22 + 22 + 21}
    metrics = q(
        ds,
        "SELECT run, metric, statistic, value, unit FROM tool_metrics "
        "ORDER BY run, metric, statistic",
    )
    p99_itl = metrics.filter((pl.col("metric") == "itl") & (pl.col("statistic") == "p99"))
    assert p99_itl["value"].to_list() == [34.210415409961556, 75.82270559991227, 66.37176537940839]
    assert p99_itl["run"].to_list() == ["0", "1", "2"] and set(p99_itl["unit"]) == {"ms"}
    rate = metrics.filter(pl.col("metric") == "request_rate")
    assert rate["value"].to_list() == [10.0, 30.0]  # the third is the string "inf"
    median = metrics.filter((pl.col("metric") == "ttft") & (pl.col("statistic") == "p50"))
    assert median["value"][2] == 877.0819514993491
    entry = Dataset(ds).sources()[0]
    assert entry["unrecognised"] == {"key request_goodput:": 3}
    assert entry["records"] == {"runs": 3}
    cw = q(ds, "SELECT * FROM crosswalk")
    assert cw.height == 3 * 3 * 4  # ttft / tpot / itl × mean, p50, std, p99; no e2el saved
    assert cw["ours_ms"].null_count() == cw.height  # non-detailed: nothing to recompute


def test_real_ascend_non_detailed_result(tmp_path: Path) -> None:
    path = REAL / "openai-1.0qps-Qwen3-VL-8B-Instruct-20260722-041843.json"
    ds = tmp_path / "d.tq"
    [result] = ingest([path], ds)
    assert result.format == "vllm-bench" and result.quarantined == 0
    metrics = q(ds, "SELECT metric, statistic, value, unit, run FROM tool_metrics")
    assert metrics["run"].null_count() == metrics.height
    scalars = dict(
        metrics.filter(pl.col("statistic") == "value").select("metric", "value").iter_rows()
    )
    assert scalars["completed"] == 200 and scalars["failed"] == 0
    assert scalars["max_output_tokens_per_s"] == 313.0 and scalars["duration"] == 203.5104987300001
    assert "unrecognised" not in Dataset(ds).sources()[0]


def test_percentile_pairs_of_some_builds(tmp_path: Path) -> None:
    doc = vllm_result(workload(), detailed=False)
    doc["percentiles_ttft_ms"] = [[99, doc["p99_ttft_ms"]], [99.9, 1234.5]]
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps(doc))
    ds = tmp_path / "d.tq"
    ingest([path], ds)
    rows = q(ds, "SELECT statistic, value FROM tool_metrics WHERE metric = 'ttft' ORDER BY 1")
    assert rows.filter(pl.col("statistic") == "p99").height == 1  # not twice
    assert rows.filter(pl.col("statistic") == "p99.9")["value"].to_list() == [1234.5]
