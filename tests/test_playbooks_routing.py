"""routing-skew on a fleet of two replicas: one overloaded (the synth queue-overload scenario:
a burst and max_num_seqs=4) beside one healthy replica over the same minutes, each ingested
with its own --instance as a load balancer's replicas would be. The skew is the incident's
root and the queueing it made is its consequence; two healthy replicas have no incident."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.playbook_helpers import failing, found, run
from traceq.ingest import IngestOptions, ingest
from traceq.synth import generate


def _fleet(root: Path, runs: dict[str, tuple[str, int, int]]) -> Path:
    """One dataset of several replicas: instance → (scenario, seed, requests)."""
    ds = root / "fleet.tq"
    for instance, (scenario, seed, requests) in runs.items():
        folder = root / instance
        generate(scenario, folder, seed=seed, requests=requests, duration_s=200.0)
        options = IngestOptions(instance=instance)
        ingest([folder / "traces.otlp.jsonl"], ds, options=options)
    return ds


@pytest.fixture(scope="module")
def skewed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("skewed")
    return _fleet(root, {"worker-0": ("queue-overload", 3, 400), "worker-1": ("healthy", 4, 200)})


def test_the_overloaded_replica_is_the_root_and_the_queueing_its_consequence(skewed):
    d = run(skewed)
    assert set(failing(d)) == {"routing-skew"}
    skew = failing(d)["routing-skew"]
    assert skew.message.startswith("worker-0 queued requests for ")
    assert "while its peer queued" in skew.message
    assert found(d)["ttft-queueing"].see == "routing-skew"
    assert d.incidents[0].root == "routing-skew"
    cause = next(c for c in skew.causes if c.id == "uneven-share")
    assert cause.status == "confirmed"
    assert "(a fair share is 50%)" in cause.evidence
    table = next(e for e in skew.evidence if e.id == "workers")
    workers = {row["worker"]: row for row in table.rows}
    assert workers["worker-0"]["queue_p50_ms"] > 100 * max(workers["worker-1"]["queue_p50_ms"], 1)


def test_two_healthy_replicas_have_no_routing_incident(tmp_path):
    ds = _fleet(tmp_path, {"a": ("healthy", 5, 150), "b": ("healthy", 6, 150)})
    d = run(ds)
    assert "routing-skew" not in found(d)
    assert next(f for f in d.findings if f.id == "routing-skew").status == "pass"


def test_one_engine_alone_has_nothing_to_route(tmp_path):
    ds = _fleet(tmp_path, {"only": ("queue-overload", 3, 200)})
    d = run(ds)
    assert next(f for f in d.findings if f.id == "routing-skew").status == "pass"
    assert "ttft-queueing" in failing(d)
