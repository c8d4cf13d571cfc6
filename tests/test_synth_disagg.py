"""`traceq synth --convention dynamo|llmd`: a routed, disaggregated deployment (a prefill pool,
a decode pool, one skewed decode host, requests the gateway fails) reads back as labels.json
says: one request per served request with the instances that served it, exactly the lost
requests, and the skewed host's clock offset within a tight bound."""

from __future__ import annotations

from pathlib import Path

import duckdb
import orjson
import polars as pl
import pytest
from click.testing import CliRunner

import traceq
from traceq.cli.synth import synth_cmd
from traceq.ingest import IngestOptions
from traceq.synth import generate
from traceq.synth.write_conventions import DISAGG_CONVENTIONS

REQUESTS = 40
MAX_BOUND_MS = 2.0


@pytest.fixture(scope="module", params=DISAGG_CONVENTIONS)
def deployment(request, tmp_path_factory) -> tuple[duckdb.DuckDBPyConnection, dict, Path]:
    """A healthy run of REQUESTS requests in the convention, ingested: (connection, labels,
    folder)."""
    root = tmp_path_factory.mktemp(request.param)
    folder = root / "run"
    labels = generate("healthy", folder, seed=3, requests=REQUESTS, convention=request.param)
    (result,) = traceq.ingest([folder / "traces.otlp.jsonl"], root / "run.tq")
    assert result.status == "ingested" and result.quarantined == 0
    return traceq.open(root / "run.tq"), labels, root / "run.tq"


def _phases(con) -> pl.DataFrame:
    return con.sql("SELECT * FROM request_phases").pl()


def test_the_labels_describe_the_deployment(deployment):
    _, labels, _ = deployment
    truth = labels["disagg"]
    assert labels["files"] == {"otlp": "traces.otlp.jsonl", "labels": "labels.json"}
    assert len(truth["prefill_pool"]) >= 2 and len(truth["decode_pool"]) >= 2
    assert truth["served"] + truth["lost"] == REQUESTS and truth["lost"] >= 2
    assert truth["skew"]["offset_ms"] > 5 and truth["skew"]["instances"]
    assert labels["expected_playbooks"] == ["error-rate"]
    assert labels["expected_causes"] == {"error-rate": ["not-served"]}


def test_one_row_per_served_request_on_the_instances_the_labels_name(deployment):
    con, labels, _ = deployment
    phases = _phases(con)
    truth = labels["disagg"]["requests"]
    assert phases.height == labels["disagg"]["served"] == len(truth)
    got = {
        r["request_id"]: {"prefill": r["prefill_instance"], "decode": r["decode_instance"]}
        for r in phases.iter_rows(named=True)
    }
    assert got == truth
    # every pool member served some of them
    pools = labels["disagg"]["prefill_pool"] + labels["disagg"]["decode_pool"]
    assert {i for route in truth.values() for i in route.values()} == set(pools)
    # prefill, KV transfer and decode are each a phase of the one row
    for column in ("route_ms", "prefill_ms", "kv_transfer_ms", "decode_queue_ms", "decode_ms"):
        assert phases[column].min() > 0, column
    assert phases["residual_ms"].min() >= 0


def test_lost_requests_are_exactly_the_gateway_failures(deployment):
    con, labels, _ = deployment
    lost = con.sql("SELECT request_id, hop, error, ts FROM lost_requests ORDER BY ts").pl()
    assert lost.to_dicts() == labels["disagg"]["lost_requests"]
    assert not set(lost["request_id"]) & set(_phases(con)["request_id"])


def test_the_skewed_host_is_found_within_a_tight_bound(deployment):
    con, labels, _ = deployment
    skew = labels["disagg"]["skew"]
    clocks = {r["instance"]: r for r in con.sql("SELECT * FROM clock_offsets").pl().to_dicts()}
    assert set(clocks) == set(labels["disagg"]["instances"])
    assert [i for i, r in clocks.items() if r["reference"]] == [labels["disagg"]["gateway"]]
    for instance, row in clocks.items():
        true_ms = skew["offset_ms"] if instance in skew["instances"] else 0.0
        assert abs(row["offset_ms"] - true_ms) <= row["bound_ms"] <= MAX_BOUND_MS, row
    # corrected, the skewed decode worker's hops lie inside their gateway span again
    outside = con.sql(
        """
        SELECT count(*) FROM request_hops AS d
        JOIN request_hops AS g ON g.trace_id = d.trace_id AND g.hop = 'gateway'
        WHERE d.hop = 'decode' AND (d.t_start < g.t_start OR d.t_end > g.t_end)
        """
    ).fetchall()
    assert outside == [(0,)]


def test_diagnose_finds_the_gateway_failures(deployment):
    from tests.playbook_helpers import run

    _, labels, ds = deployment
    findings = run(ds).findings
    failing = sorted(f.id for f in findings if f.status == "fail")
    assert failing == labels["expected_playbooks"]
    # every failure is the gateway's: the engine-side causes are none of them (0 %), not
    # "undecided for lack of failed requests" beside a sentence that counts them
    causes = {c.id: c for c in next(f for f in findings if f.id == "error-rate").causes}
    assert causes["not-served"].status == "confirmed"
    for engine_side in ("rejected-inputs", "client-cancelled", "timeouts"):
        assert causes[engine_side].status == "not_confirmed", causes[engine_side]
        assert causes[engine_side].strength == 0


def test_prefills_on_the_prefill_pool_stall_no_decode(tmp_path):
    """Each request prefills on a prefill worker and streams from a decode worker, so no
    decode worker's chunk gap overlaps a prefill of its own (gap_context), and no tail request
    decoded behind one. Read as one engine's, the long prompts of prefill-interference put
    prefill tokens in the decode workers' gaps and decodes "behind a prefill"."""
    from tests.playbook_helpers import run

    folder = tmp_path / "run"
    labels = generate("prefill-interference", folder, seed=3, requests=100, convention="dynamo")
    # labels.json expects no prefill-interference of traces that cannot show it
    assert labels["expected_playbooks"] == ["error-rate"]
    assert "prefill-interference" in labels["tolerated_playbooks"]
    (fault,) = [f for f in labels["faults"] if f["fault"] == "prefill-interference"]
    assert fault["params"]["absent"].startswith("the prefills run on the prefill workers")
    traceq.ingest([folder / "traces.otlp.jsonl"], tmp_path / "run.tq")
    con = traceq.open(tmp_path / "run.tq")
    ((gaps, prefilled),) = con.sql(
        "SELECT count(*), count(*) FILTER (WHERE prefill_tokens > 0) FROM gap_context"
    ).fetchall()
    assert gaps > 1000 and prefilled == 0
    lines = [m["line"] for m in run(tmp_path / "run.tq").tail]
    assert lines and not any("decoded behind" in x or "decoding behind" in x for x in lines)


def test_another_replicas_prefill_holds_up_no_decode(tmp_path):
    """Two replicas: long prompts on one (prefill-interference), a KV-starved engine on the
    other. A slow decode on the second is never put "behind a prefill" that ran on the first
    (read as one engine's, 40 % of its TPOT tail was)."""
    from traceq.playbooks.tail import explain
    from traceq.session import Session

    for name, scenario, seed in (("a", "prefill-interference", 1), ("b", "kv-pressure", 2)):
        generate(scenario, tmp_path / name, seed=seed, requests=120)
        traces = tmp_path / name / "traces.otlp.jsonl"
        options = IngestOptions(instance=f"replica-{name}")
        traceq.ingest([traces], tmp_path / "fleet.tq", options=options)
    with Session(tmp_path / "fleet.tq") as session:
        ((slowest,),) = session.query(
            "SELECT instance FROM request_phases ORDER BY tpot_ns DESC NULLS LAST LIMIT 1"
        ).rows()
        tpot = next(m for m in explain(session, 0, 1 << 62) if m["metric"] == "tpot")
    assert slowest == "replica-b"
    assert tpot["line"].endswith(": 100 % decoded (no engine stats to say more)"), tpot["line"]


def test_same_seed_same_bytes_and_listed(tmp_path):
    for convention in DISAGG_CONVENTIONS:
        a, b = tmp_path / f"{convention}-a", tmp_path / f"{convention}-b"
        for folder in (a, b):
            generate("healthy", folder, seed=7, requests=12, convention=convention)
        for name in ("traces.otlp.jsonl", "labels.json"):
            assert (a / name).read_bytes() == (b / name).read_bytes(), (convention, name)
        assert orjson.loads((a / "labels.json").read_bytes())["otel_convention"] == convention
    listed = CliRunner().invoke(synth_cmd, ["list"]).output
    assert all(f"  {c} " in listed for c in DISAGG_CONVENTIONS)


def test_files_written_per_process_are_named_as_sharing_traces(deployment, tmp_path):
    """A gateway's spans in one file and the workers' in another: each part of a trace reads
    as a request of its own, and the ingest says so, naming the other file; the whole file
    gets no such warning."""
    _, labels, dataset = deployment
    folder = dataset.parent / "run"
    lines = (folder / "traces.otlp.jsonl").read_bytes().splitlines()
    front = [line for line in lines if b"frontend" in line or b"gateway" in line]
    assert 0 < len(front) < len(lines)
    (tmp_path / "frontend.jsonl").write_bytes(b"\n".join(front) + b"\n")
    workers = [line for line in lines if line not in front]
    (tmp_path / "workers.jsonl").write_bytes(b"\n".join(workers) + b"\n")
    results = traceq.ingest(
        [tmp_path / "frontend.jsonl", tmp_path / "workers.jsonl"], tmp_path / "split.tq"
    )
    served = labels["disagg"]["served"]
    for result, other in zip(results, ("workers.jsonl", "frontend.jsonl"), strict=True):
        (warning,) = [w for w in result.warnings if "stitched within one file" in w]
        assert other in warning and f"{served} of its traces" in warning
    (whole,) = traceq.ingest([folder / "traces.otlp.jsonl"], tmp_path / "whole.tq")
    assert not [w for w in whole.warnings if "stitched within one file" in w]
