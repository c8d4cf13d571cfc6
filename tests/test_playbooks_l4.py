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


def test_whole_prompt_stalls_on_an_l4_are_measured_against_chunked_prefills_step(tmp_path):
    """With chunked prefill off and no budget printed, the L4's stall line is the step of
    vLLM's 2,048-token default budget there (~0.6 s), not of the H100's 8,192 (~2 s, which
    a 12 k-token prompt's 2.8 s prefill barely passed): the stalls behind whole prompts are
    the incident, and chunked prefill its cause."""
    folder = tmp_path / "pi-l4"
    generate("prefill-interference", folder, seed=5, intensity="medium", hardware="l4-8b")
    d = run(ingest_folder(folder, tmp_path / "pi-l4.tq"))
    assert set(failing(d)) == {"prefill-interference"}
    finding = found(d)["prefill-interference"]
    assert finding.params["stall_ms"] == 590.0
    assert finding.causes[0].id == "chunked-prefill-off"
    assert "stall_ms 590 ms, 2.4× the floor" in finding.message
