"""The L4 profile (traceq/synth/hardware.py): a KV-pressure run there is one incident.

On an L4 a step lasts ~0.5 s, so a cache that preemption keeps emptying and refilling reads
80-85 % in the 10-s stats lines while requests wait, and a 1 k-token prompt admitted into
the full cache takes seconds from scheduling to first token (recompute). Both are
kv-pressure's consequences, checked by its `explains:` edges' KV-bound mechanism
(traceq/playbooks/catalog/kv-pressure.yaml), not false leads of their own."""

from __future__ import annotations

from tests.playbook_helpers import failing, found, ingest_folder, run
from traceq.synth import generate


def test_kv_pressure_on_an_l4_explains_its_queue_and_stretched_prefills(tmp_path):
    folder = tmp_path / "kv-l4"
    generate("kv-pressure", folder, seed=13, requests=200, intensity="medium", hardware="l4-8b")
    d = run(ingest_folder(folder, tmp_path / "kv-l4.tq"))
    assert set(failing(d)) == {"kv-pressure"}
    seen = found(d)
    assert seen["ttft-prefill"].see == "kv-pressure"
    assert seen["ttft-queueing"].see == "kv-pressure"
