"""Generated vLLM logs read back by the same ingester that reads the real samples, to the log's
resolution (seconds, 0.1 token/s, 0.1 %)."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

import traceq
from traceq.ingest import IngestOptions
from traceq.synth import scenario
from traceq.synth.sim import plan, simulate
from traceq.synth.write_vllm_log import VllmLogWriter, expected_engine_stats, expected_log_requests

STATS_COLUMNS = ["ts", "engine", "prompt_tps", "gen_tps", "running", "waiting", "kv_usage",
                 "prefix_hit_rate"]  # fmt: skip


def _simulate_log(tmp_path, name: str, seed: int) -> VllmLogWriter:
    sc = scenario(name)
    info, _ = plan(sc, seed)
    log = VllmLogWriter(tmp_path / "vllm.log", sc, seed, info.t_ready, sc.engine.kv_budget_tokens)
    info = simulate(sc, seed, [log])
    log.close(info.t_end)
    return log


def _ingest(tmp_path, first_ts: int) -> traceq.db.duckdb.DuckDBPyConnection:
    year = dt.datetime.fromtimestamp(first_ts / 1e9, dt.UTC).year
    (result,) = traceq.ingest(
        [tmp_path / "vllm.log"], tmp_path / "ds", options=IngestOptions(year=year)
    )
    assert result.format == "vllm-log"
    assert result.quarantined == 0
    return traceq.open(tmp_path / "ds")


@pytest.mark.parametrize(("name", "seed"), [("kv-pressure", 9), ("healthy", 1)])
def test_engine_stats_round_trip(tmp_path, name, seed):
    log = _simulate_log(tmp_path, name, seed)
    want = expected_engine_stats(log.stats).sort("ts")
    con = _ingest(tmp_path, want["ts"][0])
    got = con.sql("SELECT * FROM engine_stats ORDER BY ts").pl().select(STATS_COLUMNS)
    assert got.height == want.height > 0
    assert (
        got.select(want.columns)
        .with_columns(pl.col(pl.Float64).round(9))
        .equals(want.with_columns(pl.col(pl.Float64).round(9)))
    )


def test_received_requests_round_trip(tmp_path):
    log = _simulate_log(tmp_path, "errors", 2)
    want = expected_log_requests(log.received).sort("ts", "request_id")
    con = _ingest(tmp_path, want["ts"][0])
    got = con.sql(
        "SELECT request_id, ts, CAST(value AS BIGINT) AS prompt_tokens FROM events "
        "WHERE kind = 'request_received' ORDER BY ts, request_id"
    ).pl()
    assert got.equals(want.select("request_id", "ts", "prompt_tokens"))
