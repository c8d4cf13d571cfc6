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
from traceq.synth.write_gpu import GpuWriter
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


class _RecordingGpuWriter(GpuWriter):
    """The generator's GPU writer, keeping each nvidia-smi row and DCGM scrape it prints."""

    def __init__(self, *args, **kwargs) -> None:
        self.rows: list[dict] = []
        self.scrapes: list[tuple[int, list[float]]] = []
        super().__init__(*args, **kwargs)

    def _smi_line(self, row: dict, gpu: int) -> str:
        if gpu == 0:  # one GPU per row of samples (tensor parallel repeats it)
            self.rows.append(row)
        return super()._smi_line(row, gpu)

    def _scrape(self, t: int, last: dict) -> None:
        n = len(self.window)
        self.scrapes.append((t, [sum(col) / n for col in zip(*self.window, strict=True)]))
        super()._scrape(t, last)


def test_gpu_files_round_trip(tmp_path):
    sc = scenario("gpu-throttle")
    info, _ = plan(sc, 3)
    gpu = _RecordingGpuWriter(
        tmp_path / "nvidia-smi.csv",
        tmp_path / "dcgm.prom",
        sc.engine,
        3,
        info.t_ready,
        sc.faults.throttle_clock_mhz,
    )
    info = simulate(sc, 3, [gpu])
    gpu.close(info.t_end)
    results = traceq.ingest([tmp_path / "nvidia-smi.csv", tmp_path / "dcgm.prom"], tmp_path / "ds")
    assert [(r.format, r.quarantined) for r in results] == [
        ("nvidia-smi-csv", 0),
        ("dcgm-prom", 0),
    ]
    con = traceq.open(tmp_path / "ds")
    src_csv = results[0].source_id
    smi = con.sql(
        "SELECT ts, util_gpu, util_mem, fb_used_mib, power_w, temp_c, sm_clock_mhz "
        "FROM gpu_samples WHERE source_id = $s ORDER BY ts",
        params={"s": src_csv},
    ).fetchall()
    want = [
        (r["ts"] // 1_000_000 * 1_000_000, r["util_gpu"], r["util_mem"], r["fb_used_mib"],
         r["power_w"], r["temp_c"], r["sm_clock_mhz"])
        for r in gpu.rows
    ]  # fmt: skip
    assert smi == [tuple(float(v) if i else v for i, v in enumerate(w)) for w in want]
    assert {r["sm_clock_mhz"] for r in gpu.rows} > {sc.faults.throttle_clock_mhz}
    dcgm = con.sql(
        "SELECT ts, sm_active, dram_active, tensor_active FROM gpu_samples "
        "WHERE source_id = $s ORDER BY ts",
        params={"s": results[1].source_id},
    ).fetchall()
    assert len(dcgm) == len(gpu.scrapes) > 0
    for (ts, sm, dram, tensor), (t, avg) in zip(dcgm, gpu.scrapes, strict=True):
        assert ts == t
        assert (sm, dram, tensor) == tuple(round(avg[i], 6) for i in (3, 6, 5))
