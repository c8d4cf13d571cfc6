"""One simulated incident written in every single-engine OpenTelemetry producer convention
(`traceq synth --convention`) reads back as the same request phases and token gaps. The
disaggregated deployments (`dynamo`, `llmd`) are tests/test_synth_disagg.py's."""

from __future__ import annotations

import orjson
import pytest

import traceq
from traceq.synth import CONVENTIONS, generate
from traceq.synth.write_conventions import DISAGG_CONVENTIONS

PHASES = (
    "SELECT request_id, t_arrival, tokenize_ns, queue_ns, prefill_ns, decode_ns, residual_ns, "
    "ttft_ns, e2e_ns, output_tokens FROM request_phases ORDER BY request_id"
)
GAPS = "SELECT request_id, idx, ts, n_tokens, tbt_ns FROM token_gaps ORDER BY request_id, idx"
SINGLE = [c for c in CONVENTIONS if c not in DISAGG_CONVENTIONS]
ROUNDING_NS = {"alipay-compressed": 50_000}  # 4 decimals of a second: ±50 µs per stamp


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """kv-pressure (preemptions, queueing, long decodes), 150 requests, written once in each
    convention: convention → (its folder, its labels)."""
    root = tmp_path_factory.mktemp("conventions")
    return {
        convention: (root / convention, generate("kv-pressure", root / convention, seed=5,
                                                  requests=150, convention=convention))
        for convention in SINGLE
    }  # fmt: skip


@pytest.fixture(scope="module")
def datasets(generated):
    """Each convention's traces alone, ingested."""
    out = {}
    for convention, (folder, labels) in generated.items():
        root = folder.parent
        (result,) = traceq.ingest(
            [root / convention / "traces.otlp.jsonl"], root / f"ds-{convention}"
        )
        assert result.quarantined == 0
        out[convention] = (traceq.open(root / f"ds-{convention}"), labels, result)
    return out


@pytest.mark.parametrize("convention", [c for c in SINGLE if c != "traceq"])
def test_same_phases_and_gaps_in_every_convention(datasets, convention):
    base = datasets["traceq"][0]
    con, labels, _ = datasets[convention]
    assert labels["otel_convention"] == convention
    want, got = base.sql(PHASES).fetchall(), con.sql(PHASES).fetchall()
    assert len(got) == len(want) == 150
    tolerance = ROUNDING_NS.get(convention, 0)
    if not tolerance:
        assert got == want
        assert con.sql(GAPS).fetchall() == base.sql(GAPS).fetchall()
        return
    for g, w in zip(got, want, strict=True):
        assert g[0] == w[0] and g[-1] == w[-1]
        # each phase is a difference of two stamps, each rounded by the producer
        assert all(abs(a - b) <= 2 * tolerance for a, b in zip(g[1:-1], w[1:-1], strict=True))
    n_gaps = "SELECT count(*) FROM token_gaps"
    assert con.sql(n_gaps).fetchall() == base.sql(n_gaps).fetchall()


def test_preemptions_counted_where_the_convention_carries_them(datasets):
    truth = datasets["traceq"][1]["truth"]["preemptions"]
    assert truth > 0
    for convention in ("vllm-token-events", "sglang"):
        con = datasets[convention][0]
        assert con.sql("SELECT sum(n_preemptions) FROM requests").fetchall() == [(truth,)]
        kinds = con.sql("SELECT count(*) FROM events WHERE kind = 'preemption'").fetchall()
        assert kinds == [(truth,)]
    assert datasets["sglang"][2].conventions["sglang"] == 150


@pytest.fixture(scope="module")
def diagnoses(generated):
    """The same kv-pressure run in every convention, with its vLLM log and GPU samples (the
    evidence an incident leaves), diagnosed by the playbook engine."""
    from tests.playbook_helpers import ingest_folder, run

    out = {}
    for convention, (folder, _) in generated.items():
        out[convention] = run(ingest_folder(folder, folder.parent / f"{convention}.tq"))
    return out


def _statuses(diagnosis):
    return {f.id: f.status for f in diagnosis.findings}


def _causes(diagnosis, *statuses):
    return {
        f.id: {c.id for c in f.causes if c.status in statuses}
        for f in diagnosis.findings
        if f.status == "fail"
    }


@pytest.mark.parametrize("convention", [c for c in SINGLE if c != "traceq"])
def test_same_diagnosis_in_every_convention(diagnoses, convention):
    """Every playbook reaches the same verdict whatever the encoding. Conventions that carry
    more (vLLM's engine-core events and SGLang's retractions count preemptions per request)
    may confirm more causes and rank them differently; one that carries less (SGLang's traces
    hold no prompt token counts) leaves a cause undecided (not_applicable), never refuted,
    and does not run prefill-interference, which weighs other requests' prompts."""
    base, other = diagnoses["traceq"], diagnoses[convention]
    assert _statuses(base)["kv-pressure"] == "fail"
    expected = _statuses(base)
    if convention == "sglang":
        expected["prefill-interference"] = "not_applicable"
    assert _statuses(other) == expected
    decided_or_not = _causes(other, "confirmed", "not_applicable")
    for playbook, causes in _causes(base, "confirmed").items():
        assert causes <= decided_or_not[playbook], (playbook, causes, decided_or_not[playbook])


def test_no_prompt_lengths_no_claim_of_what_requests_hold(diagnoses, tmp_path):
    """kv-pressure sums what requests in service hold from their prompt and output lengths,
    and slow-decode's roofline adds their KV cache to the weights. SGLang's traces carry no
    prompt length: those clauses are left out, not the output alone read as what they hold,
    nor a KV cache of 0 s."""
    from tests.playbook_helpers import ingest_folder, run
    from traceq.playbooks.tail import line

    def message(diagnosis, playbook):
        return next(f.message for f in diagnosis.findings if f.id == playbook)

    assert "requests in service hold ~" in message(diagnoses["traceq"], "kv-pressure")
    assert "hold ~" not in message(diagnoses["sglang"], "kv-pressure")
    # nor "0% of stalls overlap another request's prefill": every prefill would weigh 0 tokens
    jitter = next(f for f in diagnoses["sglang"].findings if f.id == "tbt-jitter")
    behind = next(c for c in jitter.causes if c.id == "prefill-interference")
    assert behind.status == "not_applicable" and "prompt token counts" in behind.needs
    # and the tail claims no "nothing unusual in the engine" it could not weigh
    assert all(m["prompts_seen"] is False for m in diagnoses["sglang"].tail)
    none = {"phase": "decode", "state": "none", "requests": 5}
    tail = {"metric": "tpot", "p99_ms": 99.0, "threshold_ms": 88.0, "tail": 5, "requests": 64}
    for prompts_seen, reads in ((True, "with nothing unusual in the engine"),
                                (False, "(no prompt lengths to say more)")):  # fmt: skip
        told = line({**tail, "prompts_seen": prompts_seen, "groups": [{**none, "share": 1.0}]})
        assert told.endswith(": 100 % decoded " + reads), told
    generate("gpu-throttle", tmp_path / "run", seed=1, requests=150, convention="sglang")
    weights = message(run(ingest_folder(tmp_path / "run", tmp_path / "run.tq")), "slow-decode")
    assert "the roofline floor of" in weights and ": weights " in weights, weights
    assert "KV cache" not in weights and "prefill 0 s" not in weights, weights
    # causes that weigh prompt lengths are undecided and say so, none confirmed on a guess
    # (tokenize time "not following" prompt lengths that are all missing read as a busy CPU)
    generate("slow-tokenizer", tmp_path / "tok", seed=1, requests=80, convention="sglang")
    tok = run(ingest_folder(tmp_path / "tok", tmp_path / "tok.tq"))
    causes = next(f.causes for f in tok.findings if f.id == "tokenizer-overhead")
    assert {c.id: c.status for c in causes} == dict.fromkeys(
        ("slow-tokenizer", "cpu-contention", "long-prompts"), "not_applicable"
    )
    assert all("prompt token counts" in c.needs for c in causes), [c.needs for c in causes]


def _without_token_events(folder):
    """vLLM's own tracing: `llm_request` spans alone, without per-token events or child
    spans (the client's spans, log and GPU files kept)."""
    path = folder / "traces.otlp.jsonl"
    docs = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    for doc in docs:
        for scope in (s for r in doc["resourceSpans"] for s in r["scopeSpans"]):
            scope["spans"] = [
                dict(span, events=[]) for span in scope["spans"] if span["name"] == "llm_request"
            ]
    path.write_bytes(b"\n".join(orjson.dumps(doc) for doc in docs) + b"\n")


def test_spans_without_token_events_read_in_whole_sentences(tmp_path):
    """vLLM's tracing times each request, not each token. A client that received tokens in
    bursts (most of its gaps 0 ms) gives no pace for slow-decode to be slower than, and the
    roofline sentence of a throttled run leaves the chunk gap out without a hole."""
    from tests.playbook_helpers import failing, ingest_folder, run

    for scenario, expected in (("client-jitter", "tbt-jitter"), ("gpu-throttle", "slow-decode")):
        generate(scenario, tmp_path / scenario, seed=1, hardware="a100-8b")
        _without_token_events(tmp_path / scenario)
        fired = failing(run(ingest_folder(tmp_path / scenario, tmp_path / f"{scenario}.tq")))
        assert set(fired) == {expected}, (scenario, {k: f.message for k, f in fired.items()})
        message = fired[expected].message
        assert ",(" not in message and "gap 0 s" not in message, message
    assert message.startswith("median TPOT 16 ms from 20"), message
