"""The synth's labels name causes with the playbooks' own ids, so a detection benchmark can
score "injected cause ranked first" strictly by id, and the two cannot drift apart."""

from __future__ import annotations

from pathlib import Path

import orjson

from traceq.playbooks import load_catalog
from traceq.synth import generate
from traceq.synth.faults import FAULTS

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
CAUSES = {p.id: {c.id for c in p.causes} for p in load_catalog().playbooks}


def _unknown(causes: dict[str, list[str]] | dict[str, tuple[str, ...]]) -> list[str]:
    return [f"{p}: {c}" for p, ids in causes.items() for c in ids if c not in CAUSES.get(p, ())]


def test_every_cause_a_fault_can_label_is_a_cause_of_that_playbook():
    for name, spec in FAULTS.items():
        assert spec.causes and all(spec.causes.values()), name
        assert not _unknown(spec.causes), name
        assert not _unknown(spec.variant_causes), name
        assert set(spec.variant_causes) <= set(spec.expected), name


def test_committed_sample_labels_use_catalog_cause_ids():
    labelled = sorted(SAMPLES.glob("*/labels.json"))
    assert labelled
    for path in labelled:
        labels = orjson.loads(path.read_bytes())
        assert set(labels["expected_causes"]) == set(labels["expected_playbooks"]), path
        assert not _unknown(labels["expected_causes"]), path
        for fault in labels["faults"]:
            assert not _unknown(fault["causes"]), path


def test_variants_label_exactly_what_they_inject(tmp_path):
    whole = generate("prefill-interference", tmp_path / "pi", seed=3, requests=24)
    windowed = generate(
        "prefill-interference", tmp_path / "piw", seed=3, duration_s=40, window=(10, 20)
    )
    assert whole["expected_causes"]["prefill-interference"] == [
        "long-prompts-mixed", "chunked-prefill-off"
    ]  # fmt: skip
    assert windowed["expected_causes"]["prefill-interference"] == ["long-prompts-mixed"]
    kv = generate("kv-pressure", tmp_path / "kvw", seed=3, duration_s=40, window=(10, 20))
    assert kv["expected_causes"] == {"kv-pressure": ["kv-saturated"]}
    errors = generate("errors", tmp_path / "err", seed=3, requests=24)
    assert errors["expected_causes"] == {"error-rate": ["rejected-inputs", "timeouts", "overload"]}
