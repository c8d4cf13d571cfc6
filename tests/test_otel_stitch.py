"""One request across every hop: Dynamo's and llm-d + vLLM's spans, made by the real
OpenTelemetry SDK in one process per layer and encoded by the real OTLP JSON exporter, come
back as one request each with the prefill worker's, the transfer's and the decode worker's
phases, hops on the reference clock, clock offsets with their bounds, and the requests no
engine served."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import traceq
from tests.disagg_factory import (
    DYNAMO,
    LLMD,
    MS,
    T0,
    Cluster,
    client_only_lost,
    dynamo_lost,
    dynamo_request,
    llmd_lost,
    llmd_request,
)
from tests.otel_factory import write_otlp_json
from tests.playbook_helpers import run
from tests.test_cli import traceq_cli
from traceq.ingest import ingest

TOLERANCE_MS = 0.05
"""What the issue allows between a phase read back and its known stamps, clocks in sync."""
SKEW_NS = 7 * MS + 123
"""The decode hosts' clocks run this far ahead of the gateways' (several ms, odd ns)."""
MAX_BOUND_MS = 2.0


def _build(folder: Path, skew: int) -> tuple[Path, list[dict], set[str]]:
    folder.mkdir(parents=True, exist_ok=True)
    c = Cluster(DYNAMO, skew={"decode-host": skew})
    served = [dynamo_request(c, i, T0 + i * 100 * MS, contradiction=i == 1) for i in range(3)]
    lost = {dynamo_lost(c, 9, T0 + 900 * MS), client_only_lost(c, T0 + 950 * MS)}
    write_otlp_json(c.finished(), folder / "dynamo.otlp.jsonl")
    c = Cluster(LLMD, skew={"decode-host": skew})
    served += [llmd_request(c, f"x-{i}", T0 + i * 100 * MS) for i in range(2)]
    served.append(llmd_request(c, "x-retry", T0 + 400 * MS, retry=True))
    served.append(llmd_request(c, "x-side", T0 + 500 * MS, max_tokens=False))
    served += [llmd_request(c, "x-dup", T0 + t * MS) for t in (600, 700)]
    lost.add(llmd_lost(c, "x-lost", T0 + 800 * MS))
    write_otlp_json(c.finished(), folder / "llmd.otlp.jsonl")
    ds = folder / "run.tq"
    results = ingest([folder / "dynamo.otlp.jsonl", folder / "llmd.otlp.jsonl"], ds)
    assert all(r.status == "ingested" for r in results)
    return ds, served, lost


@pytest.fixture(scope="module")
def in_sync(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict], set[str]]:
    return _build(tmp_path_factory.mktemp("sync"), 0)


@pytest.fixture(scope="module")
def skewed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict], set[str]]:
    return _build(tmp_path_factory.mktemp("skew"), SKEW_NS)


def _phases(ds: Path) -> pl.DataFrame:
    return traceq.open(ds).sql("SELECT * FROM request_phases WHERE view = 'server'").pl()


def _row(phases: pl.DataFrame, request: dict) -> dict:
    rows = phases.filter(pl.col("request_id").str.starts_with(request["request_id"]))
    return rows.row(0, named=True)


def test_each_phase_equals_its_stamps_with_clocks_in_sync(in_sync):
    ds, served, _ = in_sync
    phases = _phases(ds)
    for request in served:
        row = _row(phases, request)
        for column, want in request["phases"].items():
            assert row[column] == pytest.approx(want, abs=TOLERANCE_MS), (row["request_id"], column)
        assert row["prefill_instance"] == request["prefill_instance"]
        assert row["decode_instance"] == request["decode_instance"]
        # the phases add up: e2e = the parts + a residual (proxy and network hops)
        parts = sum(v for c, v in request["phases"].items() if c not in ("ttft_ms", "e2e_ms"))
        assert row["residual_ms"] == pytest.approx(row["e2e_ms"] - parts, abs=TOLERANCE_MS)


def test_one_row_per_served_request_whatever_ids_the_layers_use(in_sync):
    ds, served, _ = in_sync
    phases = _phases(ds)
    assert phases.height == len(served)  # prefill + decode + EPP spans are one request
    con = traceq.open(ds)
    hops = con.sql("SELECT request_id, hop_request_id FROM request_hops").pl()
    dynamo = hops.filter(pl.col("request_id") == "cmpl-d-0")["hop_request_id"].to_list()
    # the decode engine's id, the prefill engine's, the caller's x-request-id, Dynamo's context id
    assert {"cmpl-d-0", "cmpl-p-0", "dyn-x-0", "dyn-ctx-0"} <= set(dynamo)


def test_the_role_signal_is_named(in_sync):
    phases = _phases(in_sync[0])
    signal = dict(zip(phases["request_id"], phases["role_signal"], strict=True))
    assert signal["cmpl-d-0"] == "disagg_role"  # Dynamo engine.generate
    assert signal["chatcmpl-x-0"] == "max_tokens"  # llm-d: the prefill asked for one token
    assert signal["chatcmpl-x-side"] == "sidecar"  # no max_tokens: the sidecar's call spans


def test_hops_are_lanes_on_the_reference_clock(skewed):
    ds, _, _ = skewed
    hops = (
        traceq.open(ds)
        .sql("SELECT * FROM request_hops WHERE request_id = 'cmpl-d-0' ORDER BY t_start")
        .pl()
    )
    assert hops["hop"].to_list() == [
        "client", "gateway", "router", "prefill", "router", "decode", "kv_transfer",
    ]  # fmt: skip
    decode = hops.filter(pl.col("hop") == "decode").row(0, named=True)
    gateway = hops.filter(pl.col("hop") == "gateway").row(0, named=True)
    # true times: decode engine from 21.0 ms to 71.1 ms after the gateway's arrival
    assert (decode["t_start"] - gateway["t_start"]) / MS == pytest.approx(21.0, abs=0.5)
    assert decode["t_end"] <= gateway["t_end"]  # the gateway encloses it once corrected


def test_a_skewed_host_is_found_within_its_bound(skewed):
    ds, served, _ = skewed
    con = traceq.open(ds)
    clocks = con.sql("SELECT * FROM clock_offsets").pl()
    skewed_ms = SKEW_NS / MS
    for instance in ("decode-worker-0", "decode-0", "decode-0-sidecar"):
        row = clocks.filter(pl.col("instance") == instance).row(0, named=True)
        assert abs(row["offset_ms"] - skewed_ms) <= row["bound_ms"] <= MAX_BOUND_MS, row
    for instance in ("prefill-worker-0", "prefill-0", "loadgen"):
        row = clocks.filter(pl.col("instance") == instance).row(0, named=True)
        assert row["offset_ms"] == 0 and row["bound_ms"] <= MAX_BOUND_MS, row
    references = clocks.filter(pl.col("reference"))["instance"].sort().to_list()
    assert references == ["epp-0", "frontend-0"]
    phases = _phases(ds)
    for request in served:
        row = _row(phases, request)
        decode = clocks.filter(pl.col("instance") == request["decode_instance"])
        bound = decode["bound_ms"][0]
        for column, want in request["phases"].items():
            assert abs(row[column] - want) <= bound + 1e-9, (row["request_id"], column)


def test_lost_requests_are_exactly_those_no_engine_served(in_sync):
    ds, _, lost = in_sync
    con = traceq.open(ds)
    rows = con.sql("SELECT * FROM lost_requests ORDER BY ts").pl()
    assert set(rows["request_id"]) == lost
    by_id = {r["request_id"]: r for r in rows.iter_rows(named=True)}
    assert by_id["dyn-lost-9"]["hop"] == "router"
    assert by_id["dyn-lost-9"]["error"] == "503 Service Unavailable"
    assert "dyn-ctx-lost-9" in by_id["dyn-lost-9"]["ids"]
    assert by_id["x-lost"]["error"] == "no healthy upstream"
    assert by_id["client-refused"]["hop"] == "client"
    assert by_id["client-refused"]["error"] == "connection refused"
    served_ids = set(_phases(ds)["request_id"])
    assert not lost & served_ids


def test_routing_lists_each_decision_with_its_worker_and_outcome(in_sync):
    ds, _, lost = in_sync
    rows = traceq.open(ds).sql("SELECT * FROM routing ORDER BY request_id, ts").pl()
    dynamo = rows.filter(pl.col("request_id") == "cmpl-d-0")
    assert dynamo["phase"].to_list() == ["prefill", "decode"]
    assert dynamo["worker"].to_list() == ["7", "7"]
    assert dynamo["overlap_blocks"].to_list() == [3, 3]
    assert dynamo["served_by"].to_list() == ["prefill-worker-0", "decode-worker-0"]
    assert dynamo["queue_ms"].to_list() == pytest.approx([1.9, 0.4], abs=TOLERANCE_MS)
    sidecar = rows.filter((pl.col("request_id") == "chatcmpl-x-0") & (pl.col("phase") == "prefill"))
    assert sidecar["worker"].to_list() == ["10.0.0.7:8000"]
    outcomes = dict(zip(rows["request_id"], rows["outcome"], strict=True))
    assert {r for r, o in outcomes.items() if o == "lost"} == lost - {"client-refused"}
    assert set(outcomes.values()) == {"served", "lost"}


def test_a_dataset_written_before_the_stitched_columns_still_reads(in_sync, tmp_path):
    """Files an older traceq wrote lack `requests`' stitched columns and `request_hops`'
    routing columns: they read as nulls, and every view over them still answers."""
    import shutil

    from traceq.schema_hops import STITCHED

    ds = tmp_path / "old.tq"
    shutil.copytree(in_sync[0], ds)
    stitched_columns = {c.name for c in STITCHED}
    newer = {
        "requests": stitched_columns,
        "request_pick": stitched_columns,  # the pick keeps each request row as written
        "request_hops": {"worker", "overlap_blocks"},
    }
    for path in ds.rglob("*.parquet"):
        table = path.relative_to(ds).parts[0]
        if table in newer:
            frame = pl.read_parquet(path)
            frame.drop([c for c in frame.columns if c in newer[table]]).write_parquet(path)
    con = traceq.open(ds)
    stitched = "SELECT count(*) FROM request_phases WHERE route_ms IS NOT NULL"
    assert con.sql(stitched).fetchall() == [(0,)]
    routing = con.sql("SELECT worker, overlap_blocks, outcome FROM routing").pl()
    assert routing.height > 0 and routing["worker"].null_count() == routing.height
    assert con.sql("SELECT count(*) FROM lost_requests").fetchall()[0][0] > 0


def test_error_rate_counts_the_requests_no_engine_served(in_sync):
    ds, served, lost = in_sync
    error_rate = next(f for f in run(ds).findings if f.id == "error-rate")
    assert error_rate.status == "fail"
    # every lost request is a failure among all the requests any layer saw
    assert error_rate.message.startswith(f"{len(lost)} of {len(served) + len(lost)} requests")
    assert "no healthy upstream ×1" in error_rate.message
    cause = next(c for c in error_rate.causes if c.id == "not-served")
    assert cause.status == "confirmed"
    assert cause.evidence.startswith(f"{len(lost)} requests never reached an engine (100%")


def test_a_span_that_contradicts_its_parent_is_quarantined_and_the_trace_kept(in_sync):
    ds, _, _ = in_sync
    con = traceq.open(ds)
    reasons = con.sql("SELECT reason FROM quarantine").pl()["reason"].to_list()
    assert len(reasons) == 1
    assert "sample.tokens starts 100000 ns after its parent engine.generate ended" in reasons[0]
    assert "prefill-worker-0" in reasons[0]
    assert _phases(ds).filter(pl.col("request_id") == "cmpl-d-1").height == 1


def test_two_decode_engines_keep_both_hops_and_the_one_with_tokens(in_sync):
    ds, _, _ = in_sync
    con = traceq.open(ds)
    hops = con.sql(
        "SELECT * FROM request_hops WHERE request_id = 'chatcmpl-x-retry' AND hop = 'decode'"
    ).pl()
    assert dict(zip(hops["instance"], hops["served"], strict=True)) == {
        "decode-0": True,
        "decode-1": False,
    }
    failed = hops.filter(pl.col("instance") == "decode-1")["detail"][0]
    assert "did not produce the response: KV transfer failed" in failed
    kept = hops.filter(pl.col("instance") == "decode-0")["detail"][0]
    assert "produced the response (of several attempts)" in kept
    row = _phases(ds).filter(pl.col("request_id") == "chatcmpl-x-retry").row(0, named=True)
    assert row["decode_instance"] == "decode-0" and row["error"] is None
    assert row["output_tokens"] == 10
    tokens = con.sql(
        "SELECT count(*) FROM token_gaps WHERE request_id = 'chatcmpl-x-retry'"
    ).fetchall()
    assert tokens == [(10,)]


def test_ids_that_collide_across_traces_never_merge_two_requests(in_sync):
    phases = _phases(in_sync[0])
    dup = phases.filter(pl.col("request_id").str.starts_with("chatcmpl-x-dup"))
    assert dup.height == 2
    assert dup["request_id"].n_unique() == 2
    pairs = dup.select("request_id", "trace_id").rows()
    assert all(rid == f"chatcmpl-x-dup@{tid}" for rid, tid in pairs)


def test_the_ingest_summary_prints_each_offset_with_its_bound(tmp_path, skewed):
    ds, _, _ = skewed
    folder = ds.parent
    result = traceq_cli("ingest", str(folder / "dynamo.otlp.jsonl"), "-o", str(tmp_path / "c.tq"))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "stitched across hops: 3 requests (3 disaggregated), 1 seen by no engine" in out
    assert "clock offset frontend-0: reference clock" in out
    assert "clock offset decode-worker-0: offset +7.050 ms ± 0.350 ms" in out


def test_a_bound_wider_than_the_phases_it_corrects_is_a_warning(tmp_path):
    """One llm-d request whose EPP stream outlives the response by 60 ms: nothing then bounds
    how far behind the decode host's clock may be but that stream's end, a bound wider than
    the TTFT it corrects."""
    c = Cluster(LLMD, skew={"decode-host": SKEW_NS})
    llmd_request(c, "x-only", T0, drain_us=60_000)
    path = write_otlp_json(c.finished(), tmp_path / "one.otlp.jsonl")
    result = traceq_cli("ingest", str(path), "-o", str(tmp_path / "w.tq"))
    assert result.returncode == 0, result.stderr
    assert "warning: one.otlp.jsonl: clock of decode-0: bound ±" in result.stderr
    # uncorrected, the 23 ms TTFT reads 30 ms: the warning says the bound (53 ms) exceeds it
    assert "is wider than the phases it corrects (median 30.000 ms)" in result.stderr


def test_single_engine_traces_are_untouched(tmp_path):
    """A file of vLLM requests alone (one engine per trace) has no stitched column set."""
    from tests.otel_factory import RequestSpec, make_spans, v1_attributes

    spec = RequestSpec(
        "cmpl-solo",
        tokens=[T0 + 30 * MS, T0 + 40 * MS],
        attributes=v1_attributes(
            "cmpl-solo", queue=MS, prefill=MS, decode=10 * MS, ttft=30 * MS, e2e=40 * MS
        ),
    )
    path = write_otlp_json(make_spans([spec]), tmp_path / "solo.otlp.jsonl")
    ds = tmp_path / "solo.tq"
    ingest([path], ds)
    con = traceq.open(ds)
    row = con.sql("SELECT * FROM request_phases").pl().row(0, named=True)
    assert row["route_ms"] is None and row["prefill_instance"] is None
    assert row["ttft_ms"] == pytest.approx(30.0)
    assert con.sql("SELECT count(*) FROM request_hops").fetchall() == [(0,)]
    assert con.sql("SELECT count(*) FROM clock_offsets").fetchall() == [(0,)]


def test_a_prefill_the_sidecar_called_alone_is_the_prefill(tmp_path):
    """llm-d's sidecar calls the decode engine only once the prefill answered: a trace whose
    prefill failed holds the sidecar's prefill call and one engine, which is that prefill (by
    the sidecar's span, as no engine asked for more than one token), and the request is read
    from the gateway's arrival."""
    from tests.disagg_factory import llmd_prefill_failed

    c = Cluster(LLMD)
    want = llmd_prefill_failed(c, "x-bad", T0)
    path = write_otlp_json(c.finished(), tmp_path / "bad.otlp.jsonl")
    ingest([path], tmp_path / "bad.tq")
    row = _phases(tmp_path / "bad.tq").row(0, named=True)
    assert row["request_id"] == want["request_id"]
    assert row["role_signal"] == "sidecar"
    assert row["prefill_instance"] == want["prefill_instance"]
    assert row["decode_instance"] is None
    assert row["error"] == want["error"]
    assert row["t_arrival"] == T0  # the gateway's arrival, not the engine's
    assert row["e2e_ms"] == pytest.approx(3.0, abs=TOLERANCE_MS)
