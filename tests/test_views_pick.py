"""One row per request in every view: the row that stands for a request is settled when
sources are committed (traceq/pick.py), token_gaps and the KPIs use the same rows as
request_phases, and copies of a request from other sources are counted once."""

from __future__ import annotations

import gzip
import json
import shutil

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import traceq
from tests.otel_factory import MS, T0, RequestSpec, make_spans, write_otlp_json, write_otlp_proto
from traceq.dataset import Dataset
from traceq.session import QueryError, Session
from traceq.synth import generate
from traceq.writer import SourceWriter

SERVER_KPIS = (
    "SELECT * FROM kpi_latency",
    "SELECT * FROM kpi_throughput",
    "SELECT count(*) AS n, sum(n_tokens) AS tokens, sum(tbt_ns) AS tbt FROM token_gaps",
    "SELECT view, count(*) AS n, sum(e2e_ns) AS e2e FROM request_phases GROUP BY view",
)


def kpis(dataset) -> list[pl.DataFrame]:
    with Session(dataset) as s:
        return [s.query(q) for q in SERVER_KPIS]


def assert_same(before: list[pl.DataFrame], after: list[pl.DataFrame]) -> None:
    """Same rows and counts; floating sums may differ in the last bits (summation order)."""
    for b, a in zip(before, after, strict=True):
        assert_frame_equal(a, b, check_exact=False, rel_tol=1e-12)


@pytest.fixture(scope="module")
def jitter(tmp_path_factory):
    """client-jitter: server traces and the client's own export of the same requests."""
    out = tmp_path_factory.mktemp("client-jitter")
    generate("client-jitter", out, seed=3, requests=120)
    return out


def test_client_export_leaves_server_kpis_unchanged(jitter, tmp_path):
    ds = tmp_path / "ds"
    traceq.ingest([jitter / "traces.otlp.jsonl"], ds)
    server_only = kpis(ds)
    traceq.ingest([jitter / "client.otlp.jsonl"], ds)
    assert_same(server_only, kpis(ds))
    with Session(ds) as s:
        tbt = s.query(
            "SELECT (SELECT count(*) FROM token_gaps) AS server_chunks,"
            " (SELECT count(*) FROM client_token_gaps) AS client_chunks,"
            " (SELECT count(*) FROM tokens) AS stored,"
            " (SELECT quantile_cont(tbt_ms, 0.99) FROM token_gaps) AS server_p99,"
            " (SELECT quantile_cont(tbt_ms, 0.99) FROM client_token_gaps) AS client_p99"
        ).row(0, named=True)
        views = s.query("SELECT DISTINCT view FROM token_gaps")["view"].to_list()
    # Both exports are kept; each view reads one of them, and the client's stalls (150–600 ms
    # held chunks, seen only by the client) stay visible in its own twin.
    assert tbt["stored"] == tbt["server_chunks"] + tbt["client_chunks"]
    assert tbt["server_chunks"] == tbt["client_chunks"]
    assert views == ["server"]
    assert tbt["client_p99"] > 100 > tbt["server_p99"]


def _copies(src, tmp_path):
    """The same records from other sources: gzipped, CRLF line ends, and the lines reversed
    (another file carrying the same requests, byte for byte different)."""
    gz = tmp_path / "copy.jsonl.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    crlf = tmp_path / "copy-crlf.jsonl"
    crlf.write_bytes(src.read_bytes().replace(b"\n", b"\r\n"))
    reordered = tmp_path / "reordered.jsonl"
    lines = src.read_text().splitlines()
    reordered.write_text("\n".join(reversed(lines)) + "\n")
    return {"gzip": gz, "crlf": crlf, "second file": reordered}


@pytest.mark.parametrize("case", ["gzip", "crlf", "second file"])
def test_the_same_requests_from_another_source_count_once(jitter, tmp_path, case):
    src = jitter / "traces.otlp.jsonl"
    ds = tmp_path / "ds"
    traceq.ingest([src], ds)
    once = kpis(ds)
    [result] = traceq.ingest([_copies(src, tmp_path)[case]], ds)
    assert result.status == "ingested" and result.rows["requests"] > 0  # really a new source
    assert_same(once, kpis(ds))
    with Session(ds) as s:
        counts = s.query(
            "SELECT (SELECT count(*) FROM requests) AS stored,"
            " (SELECT count(*) FROM request_phases) AS phases,"
            " (SELECT min(copies) FROM request_phases) AS copies"
        ).row(0, named=True)
    assert counts["stored"] == 2 * counts["phases"] and counts["copies"] == 2


def _specs(ids):
    def spec(i: int) -> RequestSpec:
        t = T0 + i * 10 * MS
        chunks = [t + 2 * MS, t + 5 * MS, t + 9 * MS]
        return RequestSpec(f"r{i}", t, tokens=chunks, attributes={"gen_ai.request.id": f"r{i}"})

    return make_spans([spec(i) for i in ids])


def test_overlapping_sources_lend_only_their_new_requests(tmp_path):
    """A second source carrying some known requests and some new ones (its tokens are joined
    to the pick): each request and each chunk is counted once."""
    a = write_otlp_json(_specs(range(0, 6)), tmp_path / "a.jsonl")
    b = write_otlp_proto(_specs(range(3, 9)), tmp_path / "b.pb")
    ds = tmp_path / "ds"
    traceq.ingest([a, b], ds)
    modes = json.loads((ds / "manifest.json").read_text())["request_pick"]["sources"]
    assert sorted(m["primary"] for m in modes.values()) == ["all", "some"]
    with Session(ds) as s:
        per_request = s.query(
            "SELECT request_id, count(*) AS chunks, sum(tbt_ns) AS tbt FROM token_gaps "
            "GROUP BY ALL ORDER BY request_id"
        )
        phases = s.query("SELECT request_id, copies FROM request_phases ORDER BY request_id")
    assert per_request["request_id"].to_list() == [f"r{i}" for i in range(9)]
    assert per_request["chunks"].to_list() == [3] * 9
    assert per_request["tbt"].to_list() == [7 * MS] * 9
    assert phases["copies"].to_list() == [1, 1, 1, 2, 2, 2, 1, 1, 1]


def test_a_pick_out_of_step_with_the_sources_is_settled_in_memory(jitter, tmp_path):
    ds = tmp_path / "ds"
    traceq.ingest([jitter / "traces.otlp.jsonl", jitter / "client.otlp.jsonl"], ds)
    settled = kpis(ds)
    manifest = json.loads((ds / "manifest.json").read_text())
    manifest["sources"].reverse()  # as if another writer changed the list without the pick
    (ds / "manifest.json").write_text(json.dumps(manifest))
    assert_same(settled, kpis(ds))
    shutil.rmtree(ds / "request_pick")
    del manifest["request_pick"]
    (ds / "manifest.json").write_text(json.dumps(manifest))
    assert_same(settled, kpis(ds))


def test_token_gaps_are_stored_at_ingest(jitter, tmp_path):
    """tokens.gap_ns (written by every reader that writes tokens) is the gap a window over the
    chunks of each request row gives; token_gaps only projects it."""
    ds = tmp_path / "ds"
    aiperf = "tests/data/real/loadtest/aiperf_generated/profile_export.jsonl.gz"
    traceq.ingest([jitter / "traces.otlp.jsonl", aiperf], ds)
    with Session(ds) as s:
        check = s.query(
            "SELECT view, count(*) AS n, count(gap_ns) AS gaps,"
            " count(*) FILTER (WHERE gap_ns IS DISTINCT FROM lag_ns) AS wrong FROM ("
            "  SELECT view, gap_ns, ts - lag(ts) OVER"
            "   (PARTITION BY source_id, request_id ORDER BY idx) AS lag_ns FROM tokens)"
            " GROUP BY view ORDER BY view"
        )
    assert check["view"].to_list() == ["client", "server"]
    assert check["wrong"].to_list() == [0, 0]
    assert all(check["gaps"] > 0)


def test_a_schema_version_1_dataset_asks_for_a_reingest(tmp_path):
    ds = tmp_path / "old.tq"
    ds.mkdir()
    (ds / "manifest.json").write_text(json.dumps({"schema_version": 1, "sources": []}))
    with pytest.raises(QueryError, match=r"schema version 1.*re-ingest"):
        Session(ds)


def test_timestamps_beside_the_ns_stamps(jitter, tmp_path):
    ds = tmp_path / "ds"
    traceq.ingest([jitter / "traces.otlp.jsonl"], ds)
    with Session(ds) as s:
        row = s.query(
            "SELECT t_arrival, arrival_at, ts, ts_at FROM request_phases"
            " JOIN token_gaps USING (request_id) LIMIT 1"
        ).row(0, named=True)
    assert row["arrival_at"] == pl.Series([row["t_arrival"]]).cast(pl.Datetime("ns"))[0]
    assert row["ts_at"] == pl.Series([row["ts"]]).cast(pl.Datetime("ns"))[0]


def test_the_pick_file_is_named_by_its_key_not_by_the_manifest(jitter, tmp_path):
    """A manifest whose pick entry names a file elsewhere is not followed."""
    ds = tmp_path / "ds"
    traceq.ingest([jitter / "traces.otlp.jsonl"], ds)
    settled = kpis(ds)
    outside = tmp_path / "outside.parquet"
    pl.DataFrame({"x": [1]}).write_parquet(outside)
    manifest = json.loads((ds / "manifest.json").read_text())
    manifest["request_pick"]["file"] = "../outside.parquet"
    (ds / "manifest.json").write_text(json.dumps(manifest))
    assert_same(settled, kpis(ds))


def _gaps_dataset(path, gaps: list[int]) -> None:
    """One request per gap (two chunks each), so token_gaps holds exactly `gaps` (plus one
    null first gap per request)."""
    n = len(gaps)
    ids = [f"g{i:05}" for i in range(n)]
    t0 = [T0 + i * MS for i in range(n)]
    writer = SourceWriter(Dataset(path, create=True), "gaps000000000000")
    writer.write(
        "requests",
        pl.DataFrame({"request_id": ids, "view": "server", "t_arrival": t0, "output_tokens": 2}),
    )
    writer.write(
        "tokens",
        pl.DataFrame(
            {
                "request_id": ids * 2,
                "view": "server",
                "idx": [0] * n + [1] * n,
                "ts": t0 + [t + g for t, g in zip(t0, gaps, strict=True)],
                "gap_ns": [*([None] * n), *gaps],
            },
            schema_overrides={"gap_ns": pl.Int64},
        ),
    )
    writer.commit({"path": "gaps", "format": "test", "clock_domain": "unix_ns"})


def assert_quantile_cont(ours: pl.DataFrame, duck: pl.DataFrame) -> None:
    """The same counts and maxima, and the same percentiles to the last bit or one unit in
    it: the same two order statistics, interpolated with quantile_cont's lo * (1 - d) + hi * d,
    which DuckDB's build may fuse into one multiply-add (views.sql). Two neighbouring values
    of a ns latency in ms differ by far more than the tolerance, so a wrong rank fails."""
    exact = [c for c in ours.columns if c not in ("mean", "p50", "p90", "p95", "p99")]
    assert_frame_equal(ours.select(exact), duck.select(exact), check_exact=True)
    percentiles = ["p50", "p90", "p95", "p99"]
    assert_frame_equal(
        ours.select(percentiles),
        duck.select(percentiles),
        check_exact=False,
        rel_tol=3e-16,
        abs_tol=1e-12,
    )
    assert_frame_equal(ours.select("mean"), duck.select("mean"), check_exact=False, rel_tol=1e-12)


_RNG = np.random.default_rng(9)
GAP_CASES = {
    # spread over many buckets, with repeats, zeros and a few negative (out-of-order) gaps
    "spread": [
        *(_RNG.lognormal(16, 1.2, 3000).astype(np.int64).tolist()),
        *([0] * 40),
        *([12_345_678] * 300),
        -5,
        -2_000_000,
        -2_000_001,
        3 << 40,
    ],
    "narrow": (20_000_000 + _RNG.integers(-3000, 3000, 2000)).tolist(),  # a few buckets
    "all equal": [7_000_000] * 101,
    "one": [42],
    "two": [1, 2**62],
}


@pytest.mark.parametrize("case", GAP_CASES)
def test_tbt_percentiles_are_quantile_cont(tmp_path, case):
    """kpi_latency's TBT percentiles come from a two-pass bounded-memory method
    (views.sql, _tbt_stats): quantile_cont's over token_gaps."""
    _gaps_dataset(tmp_path / "ds", GAP_CASES[case])
    with Session(tmp_path / "ds") as s:
        ours = s.query(
            "SELECT n, mean, p50, p90, p95, p99, max FROM kpi_latency WHERE metric = 'tbt_ms'"
        )
        duck = s.query(
            "SELECT count(tbt_ms) AS n, avg(tbt_ms) AS mean, q[1] AS p50, q[2] AS p90,"
            " q[3] AS p95, q[4] AS p99, max(tbt_ms) AS max FROM ("
            "  SELECT *, quantile_cont(tbt_ms, [0.5, 0.9, 0.95, 0.99]) OVER () AS q"
            "  FROM token_gaps) GROUP BY q"
        )
    assert ours["n"].item() == len(GAP_CASES[case])
    assert_quantile_cont(ours, duck)


def test_tbt_percentiles_without_any_gap_are_null(tmp_path):
    """Requests of one chunk each: no gap at all, as quantile_cont over no rows."""
    writer = SourceWriter(Dataset(tmp_path / "ds", create=True), "onechunk00000000")
    writer.write("requests", pl.DataFrame({"request_id": ["a"], "view": "server", "t_arrival": T0}))
    writer.write(
        "tokens", pl.DataFrame({"request_id": ["a"], "view": "server", "idx": 0, "ts": T0})
    )
    writer.commit({"path": "one", "format": "test", "clock_domain": "unix_ns"})
    with Session(tmp_path / "ds") as s:
        row = s.query("SELECT n, mean, p50, p99, max FROM kpi_latency WHERE metric = 'tbt_ms'")
    assert row.row(0) == (0, None, None, None, None)


def _requests_dataset(path, stamps: dict[str, list]) -> None:
    """One server request per row of `stamps` (t_* offsets in ns from its arrival, None for a
    missing stamp, and output_tokens), no chunks."""
    n = len(stamps["output_tokens"])
    t0 = [T0 + i * MS for i in range(n)]
    columns = {
        name: [None if d is None else t + d for t, d in zip(t0, offsets, strict=True)]
        for name, offsets in stamps.items()
        if name.startswith("t_")
    }
    writer = SourceWriter(Dataset(path, create=True), "reqs000000000000")
    writer.write(
        "requests",
        pl.DataFrame(
            {
                "request_id": [f"r{i:05}" for i in range(n)],
                "view": "server",
                "t_arrival": t0,
                **columns,
                "output_tokens": stamps["output_tokens"],
            },
            schema_overrides=dict.fromkeys(columns, pl.Int64),
        ),
    )
    writer.commit({"path": "reqs", "format": "test", "clock_domain": "unix_ns"})


def _stamps(rng: np.random.Generator, n: int) -> dict[str, list]:
    """Cumulative phase stamps from lognormal phases, with a missing t_queued (tokenize and
    queue null, the residual the whole of them) in one request of eight and a scheduler stamp
    before the queue stamp (a negative queue) in one of fifty."""
    phases = rng.lognormal([13, 15, 17, 20], 1.3, (n, 4)).astype(np.int64)
    queued, scheduled, first, last = np.cumsum(phases, axis=1).T
    scheduled = np.where(np.arange(n) % 50 == 7, queued - phases[:, 0] // 3, scheduled)
    return {
        "t_queued": [None if i % 8 == 3 else int(q) for i, q in enumerate(queued)],
        "t_scheduled": scheduled.tolist(),
        "t_first_token": first.tolist(),
        "t_last_token": last.tolist(),
        "output_tokens": rng.integers(0, 300, n).tolist(),
    }


REQUEST_CASES = {
    "spread": _stamps(np.random.default_rng(4), 3000),
    "one": _stamps(np.random.default_rng(5), 1),
    # e2e beyond every finer bucket (> 2^40 ns), ties, and no t_queued at all (tokenize_ms and
    # queue_ms without a value)
    "huge, tied, missing": {
        "t_queued": [None] * 6,
        "t_scheduled": [5, 5, 5, 1 << 41, 3 << 40, 1 << 20],
        "t_first_token": [7, 7, 7, (1 << 41) + 9, (3 << 40) + 1, 1 << 21],
        "t_last_token": [9, 9, 9, 1 << 50, 1 << 45, 1 << 22],
        "output_tokens": [3, 3, 3, 7, 2, 1],
    },
}

REQUEST_METRICS = ("ttft", "tpot", "e2e", "tokenize", "queue", "prefill", "decode", "residual")


@pytest.mark.parametrize("case", REQUEST_CASES)
def test_request_percentiles_are_quantile_cont(tmp_path, case):
    """kpi_latency's request columns come from the bounded-memory method too (views.sql,
    _request_stats): quantile_cont's over request_phases, a metric without any value a row of
    n = 0 and nulls."""
    _requests_dataset(tmp_path / "ds", REQUEST_CASES[case])
    with Session(tmp_path / "ds") as s:
        ours = s.query(
            "SELECT metric, n, mean, p50, p90, p95, p99, max FROM kpi_latency"
            " WHERE metric <> 'tbt_ms' ORDER BY metric"
        )
        duck = pl.concat(
            s.query(
                f"SELECT '{m}_ms' AS metric, count({m}_ms) AS n, avg({m}_ms) AS mean,"
                f" quantile_cont({m}_ms, [0.5, 0.9, 0.95, 0.99]) AS q, max({m}_ms) AS max"
                " FROM request_phases"
            )
            for m in REQUEST_METRICS
        ).sort("metric")
    duck = duck.select(
        "metric",
        "n",
        "mean",
        *(pl.col("q").list.get(i).alias(p) for i, p in enumerate(("p50", "p90", "p95", "p99"))),
        "max",
    )
    assert_quantile_cont(ours, duck)
    if case == "huge, tied, missing":
        assert ours.filter(pl.col("n") == 0)["metric"].to_list() == ["queue_ms", "tokenize_ms"]
