"""GPU state aligned with requests and time windows (traceq/sql/gpu.sql)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import traceq
from tests import gpu_factory as f
from traceq.dataset import Dataset
from traceq.ingest import IngestOptions, ingest
from traceq.writer import SourceWriter

NS, T0 = f.NS, f.T0
MS = 1_000_000


def add_requests(dataset, rows: list[dict]) -> None:
    """Requests as another ingester would have written them."""
    writer = SourceWriter(Dataset(dataset, create=True), "requests0000000")
    writer.write("requests", pl.DataFrame(rows))
    writer.commit({"path": "requests", "format": "test", "clock_domain": "unix_ns"})


def request(rid: str, instance: str | None, first_s: float, last_s: float) -> dict:
    return {
        "request_id": rid,
        "view": "server",
        "instance": instance,
        "t_arrival": T0,
        "t_first_token": T0 + int(first_s * 1000) * MS,
        "t_last_token": T0 + int(last_s * 1000) * MS,
        "output_tokens": 100,
    }


def scrapes(hosts: list[str], n: int = 10) -> str:
    """n scrapes 1 s apart; GPU util = 10 × scrape number (+1 on host b), SM active k/10."""
    parts = []
    for k in range(n):
        parts.append(f"# ts={f.iso(T0 + k * NS)}")
        series = []
        for i, host in enumerate(hosts):
            labs = {"gpu": "0", "UUID": f"GPU-{host}", "Hostname": host}
            series += [
                ("DCGM_FI_DEV_GPU_UTIL", labs, 10 * k + i),
                ("DCGM_FI_PROF_SM_ACTIVE", labs, f"{k / 10:.6f}"),
                ("DCGM_FI_DEV_POWER_USAGE", labs, 300 + k),
                ("DCGM_FI_DEV_SM_CLOCK", labs, 1980 - 10 * k),
            ]
        parts.append(f.exposition(series, help_type=False))
    return "\n".join(parts)


def test_request_decode_gets_the_mean_of_overlapping_samples(tmp_path):
    path = tmp_path / "one_host.prom"
    path.write_text(scrapes(["node-a"]))
    ds = tmp_path / "ds"
    ingest([path], ds)
    # decode 2.5 s → 5.2 s overlaps the samples at 2, 3, 4 and 5 s (each lasts 1 s)
    add_requests(ds, [request("r1", "vllm-pod", 2.5, 5.2), request("r2", None, 0.1, 0.4)])
    con = traceq.open(ds)
    out = con.sql("SELECT * FROM request_gpu ORDER BY request_id").pl()
    r1, r2 = out.rows(named=True)
    assert (r1["n_gpu_samples"], r1["n_gpus"]) == (4, 1)
    assert r1["util_gpu"] == pytest.approx(35.0)  # (20 + 30 + 40 + 50) / 4
    assert r1["sm_active"] == pytest.approx(0.35)
    assert r1["power_w"] == pytest.approx(303.5)
    assert r1["sm_clock_mhz"] == pytest.approx(1945.0)
    assert r1["decode_ms"] == pytest.approx(2700.0)
    # a decode inside one sample interval gets that sample (as-of)
    assert (r2["n_gpu_samples"], r2["util_gpu"]) == (1, 0.0)


def test_requests_match_their_own_host_when_several_hosts_have_gpus(tmp_path):
    path = tmp_path / "two_hosts.prom"
    path.write_text(scrapes(["node-a", "node-b"]))
    ds = tmp_path / "ds"
    ingest([path], ds)
    add_requests(
        ds,
        [
            request("on-a", "node-a", 2.5, 3.5),
            request("on-b", "node-b", 2.5, 3.5),
            request("elsewhere", "node-c", 2.5, 3.5),
        ],
    )
    out = traceq.open(ds).sql("SELECT * FROM request_gpu ORDER BY request_id").pl()
    by_id = {r["request_id"]: r for r in out.rows(named=True)}
    assert by_id["on-a"]["util_gpu"] == pytest.approx(25.0)  # samples 2 and 3 of node-a
    assert by_id["on-b"]["util_gpu"] == pytest.approx(26.0)
    assert by_id["elsewhere"]["n_gpu_samples"] == 0
    assert by_id["elsewhere"]["util_gpu"] is None


def test_gpu_windows_aggregate_per_host_and_ten_seconds(tmp_path):
    path = tmp_path / "scrapes.prom"
    path.write_text(scrapes(["node-a", "node-b"], n=12))
    ds = tmp_path / "ds"
    ingest([path], ds)
    out = traceq.open(ds).sql("SELECT * FROM gpu_windows ORDER BY host, ts").pl()
    assert out.select("host", "n_gpus", "n_samples").rows() == [
        ("node-a", 1, 10),
        ("node-a", 1, 2),
        ("node-b", 1, 10),
        ("node-b", 1, 2),
    ]
    first = out.row(0, named=True)
    assert first["ts"] == T0 // (10 * NS) * 10 * NS
    assert first["util_gpu"] == pytest.approx(45.0)
    assert first["sm_clock_min_mhz"] == 1890


def test_views_are_empty_without_gpu_samples_or_without_requests(tmp_path):
    ds = tmp_path / "ds"
    add_requests(ds, [request("r1", "x", 1, 2)])
    con = traceq.open(ds)
    assert con.sql("SELECT count(*) FROM gpu_windows").fetchall() == [(0,)]
    out = con.sql("SELECT n_gpu_samples, util_gpu FROM request_gpu").fetchall()
    assert out == [(0, None)]
    gpu_only = tmp_path / "gpu_only"
    path = tmp_path / "s.prom"
    path.write_text(scrapes(["node-a"], n=2))
    ingest([path], gpu_only, options=IngestOptions())
    con = traceq.open(gpu_only)
    assert con.sql("SELECT count(*) FROM request_gpu").fetchall() == [(0,)]
    assert con.sql("SELECT count(*) FROM gpu_state").fetchall() == [(2,)]


def test_engine_stats_get_the_gpu_state_in_force(tmp_path):
    path = tmp_path / "scrapes.prom"
    path.write_text(scrapes(["node-a", "node-b"]))
    ds = tmp_path / "ds"
    ingest([path], ds)
    writer = SourceWriter(Dataset(ds), "engine00000000000")
    stats = pl.DataFrame(
        {
            "ts": [T0 + 3_500 * MS, T0 + 7 * NS, T0 - NS],
            "instance": ["node-b", "node-a", "node-a"],
            "engine": [0, 0, 0],
            "running": [4, 8, 0],
            "waiting": [10, 0, 0],
        }
    )
    writer.write("engine_stats", stats)
    writer.commit({"path": "engine", "format": "test", "clock_domain": "unix_ns"})
    out = traceq.open(ds).sql("SELECT * FROM engine_gpu ORDER BY ts").pl()
    assert out.select("instance", "n_gpus", "util_gpu", "waiting").rows() == [
        ("node-a", 0, None, 0),  # before the first GPU sample
        ("node-b", 1, 31.0, 10),  # the sample at 3 s of node-b
        ("node-a", 1, 70.0, 0),  # a stats sample exactly at a GPU sample time
    ]


def test_nvidia_smi_and_dcgm_samples_of_one_gpu_form_one_series(tmp_path):
    """nvidia-smi names no host: its samples take the host DCGM gives the same UUID."""
    ds = tmp_path / "ds"
    prom = tmp_path / "dcgm.prom"
    prom.write_text(scrapes(["node-a", "node-b"], n=1))  # UUIDs GPU-node-a, GPU-node-b
    csv = tmp_path / "smi.csv"
    samples = [
        {"timestamp": T0 + k * NS + 500 * MS, "index": 0, "uuid": "GPU-node-a"} | {"u": k}
        for k in range(3)
    ]
    for s in samples:
        s["utilization.gpu"] = 90 + s.pop("u")
    csv.write_text(f.smi_csv(samples, ["timestamp", "index", "uuid", "utilization.gpu"]))
    ingest([prom, csv], ds)
    add_requests(ds, [request("r", "node-a", 1.2, 1.4)])
    con = traceq.open(ds)
    state = con.sql("SELECT host, ts FROM gpu_state WHERE gpu_key = 'GPU-node-a' ORDER BY ts")
    assert state.fetchall() == [("node-a", T0 + k * 500 * MS) for k in (0, 1, 3, 5)]
    row = con.sql("SELECT n_gpus, n_gpu_samples, util_gpu FROM request_gpu").fetchall()
    assert row == [(1, 1, 90.0)]  # the 0.5 s sample is in force until the next, at 1.5 s


# request_gpu as a plain range join of every decode with every sample (its definition before
# the bucketed join in traceq/sql/gpu.sql): the bucketed view must give the same rows.
RANGE_JOIN = """
WITH hosts AS (
    SELECT count(DISTINCT coalesce(host, '')) AS n_hosts, list(DISTINCT host) AS names
    FROM gpu_state
),
d AS (
    SELECT request_id, t_arrival + ttft_ns AS t0, t_arrival + e2e_ns AS t1, instance
    FROM request_phases
)
SELECT d.request_id, count(g.ts) AS n_gpu_samples, count(DISTINCT g.gpu_key) AS n_gpus,
    avg(g.util_gpu) AS util_gpu, avg(g.power_w) AS power_w, max(g.fb_used_mib) AS fb
FROM d CROSS JOIN hosts AS h
LEFT JOIN gpu_state AS g
    ON g.ts <= d.t1 AND g.ts_end > d.t0
    AND (g.host = d.instance
        OR (h.n_hosts = 1 AND NOT coalesce(list_contains(h.names, d.instance), false)))
GROUP BY d.request_id
"""
BUCKETED = """
SELECT request_id, n_gpu_samples, n_gpus, util_gpu, power_w, fb_used_max_mib AS fb
FROM request_gpu
"""


@pytest.mark.parametrize("hosts", [["node-a", "node-b", None], ["node-a"], [None]])
def test_request_gpu_keeps_exactly_the_pairs_of_the_range_join(tmp_path, hosts):
    """Irregular samples (repeated stamps, long silences) and decodes of every length, some
    shorter than a sample, some spanning many, some reversed, across bucket borders."""
    rng = np.random.default_rng(len(hosts))
    samples = []
    for h, host in enumerate(hosts):
        for gpu in range(2):
            gaps = rng.choice([0, 200, 900, 1000, 1100, 7000], size=60) * MS
            ts = T0 + np.cumsum(gaps) + h * 37 * MS
            samples.append(
                pl.DataFrame(
                    {
                        "ts": ts,
                        "host": [host] * len(ts),
                        "gpu": [gpu] * len(ts),
                        "util_gpu": rng.integers(0, 100, len(ts)).astype(float),
                        "power_w": rng.normal(300, 30, len(ts)),
                        "fb_used_mib": rng.integers(0, 80_000, len(ts)).astype(float),
                    }
                )
            )
    ds = tmp_path / "ds"
    writer = SourceWriter(Dataset(ds, create=True), "gpu0000000000000")
    writer.write("gpu_samples", pl.concat(samples))
    writer.commit({"path": "gpu", "format": "test", "clock_domain": "unix_ns"})
    n = 400
    first = rng.integers(-5_000, 120_000, n)
    length = rng.choice([0, 1, 300, 999, 1000, 2500, 20_000, -400], size=n)
    instances = ["node-a", "node-b", "node-c", None]
    add_requests(
        ds,
        [
            request(f"r{i:03}", instances[i % 4], first[i] / 1000, (first[i] + length[i]) / 1000)
            for i in range(n)
        ],
    )
    con = traceq.open(ds)
    want = con.sql(RANGE_JOIN).pl().sort("request_id")
    got = con.sql(BUCKETED).pl().sort("request_id")
    assert want["n_gpu_samples"].sum() > n  # most decodes matched several samples
    assert_frame_equal(got, want, check_exact=False, rel_tol=1e-12)
