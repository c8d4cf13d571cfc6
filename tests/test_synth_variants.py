"""Scenario strength (mild / medium / strong) and windowed variants, measured the way a user
would: generate, ingest with the real ingesters, query the `traceq.open` views."""

from __future__ import annotations

import hashlib
from dataclasses import fields
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

import traceq
from traceq.cli import cli
from traceq.ingest import IngestOptions
from traceq.synth import INTENSITIES, KNOBS, SCENARIOS, generate, scenario
from traceq.synth.config import EngineConfig, FaultConfig, WorkloadConfig
from traceq.synth.faults import FAULTS
from traceq.synth.variants import WINDOWED_KNOBS, with_intensity

CATALOG = {
    "long-request-tail", "tbt-jitter", "prefill-interference", "warm-up-skew", "ttft-queueing",
    "ttft-prefill", "tokenizer-overhead", "slow-decode", "kv-pressure", "gpu-underutilized",
    "unrealistic-load", "error-rate", "slo-goodput",
}  # fmt: skip
EVER = 1 << 62

# Each fault scenario's key figure, over the requests arriving in [$lo, $hi) (ns): it grows
# with the fault's strength. `token_gaps` rows are taken from the view named in the query.
KPI = {
    "long-output-tail": "SELECT quantile_cont(e2e_ms, 0.99) / quantile_cont(e2e_ms, 0.5) "
    "FROM request_phases WHERE t_arrival >= $lo AND t_arrival < $hi",
    "client-jitter": "SELECT quantile_cont(tbt_ms, 0.995) FROM client_token_gaps "
    "WHERE ts >= $lo AND ts < $hi",
    "prefill-interference": "SELECT quantile_cont(tbt_ms, 0.999) FROM token_gaps "
    "WHERE view = 'server' AND ts >= $lo AND ts < $hi",
    "kv-pressure": "SELECT quantile_cont(ttft_ms, 0.9) FROM request_phases "
    "WHERE t_arrival >= $lo AND t_arrival < $hi",
    "queue-overload": "SELECT quantile_cont(queue_ms, 0.99) FROM request_phases "
    "WHERE t_arrival >= $lo AND t_arrival < $hi",
    "slow-tokenizer": "SELECT sum(tokenize_ms) / sum(ttft_ms) FROM request_phases "
    "WHERE t_arrival >= $lo AND t_arrival < $hi",
    "warm-up-skew": "SELECT avg(tpot_ms) FROM request_phases "
    "WHERE t_arrival >= $lo AND t_arrival < $hi",
    "gpu-throttle": "SELECT avg(tpot_ms) FROM request_phases "
    "WHERE t_arrival >= $lo AND t_arrival < $hi",
    # Closer to fixed lengths = stronger: minus the coefficient of variation of prompt lengths.
    "fixed-length": "SELECT -stddev_pop(prompt_tokens) / avg(prompt_tokens) FROM request_phases "
    "WHERE t_arrival >= $lo AND t_arrival < $hi",
    "errors": "SELECT avg((error IS NOT NULL)::INT) FROM request_phases "
    "WHERE t_arrival >= $lo AND t_arrival < $hi",
    # Fewer prompt tokens served from the prefix cache = stronger.
    "low-prefix-reuse": "SELECT -sum(coalesce(cached_tokens, 0)) / sum(prompt_tokens) "
    "FROM request_phases WHERE t_arrival >= $lo AND t_arrival < $hi",
}


def _digest(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def _open(folder: Path):
    labels = orjson.loads((folder / "labels.json").read_bytes())
    files = [folder / f for k, f in labels["files"].items() if k != "labels"]
    traceq.ingest(files, folder / "ds", options=IngestOptions(year=labels["clock"]["log_year"]))
    return traceq.open(folder / "ds"), labels


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    """`healthy` generated and opened once per set of arguments (several scenarios compare
    with the same healthy run): healthy(seed=3, requests=120) → the open dataset."""
    root, opened = tmp_path_factory.mktemp("healthy"), {}

    def get(**kw):
        key = tuple(sorted(kw.items()))
        if key not in opened:
            folder = root / "-".join(f"{k}{v}" for k, v in key)
            generate("healthy", folder, **kw)
            opened[key] = _open(folder)[0]
        return opened[key]

    return get


def _kpi(con, name: str, lo: int = 0, hi: int = EVER) -> float:
    return con.execute(KPI[name], {"lo": lo, "hi": hi}).fetchone()[0]


def test_knob_table_is_complete_and_strong_is_the_committed_scenario():
    sections = {
        "engine": {f.name for f in fields(EngineConfig)},
        "workload": {f.name for f in fields(WorkloadConfig)},
        "faults": {f.name for f in fields(FaultConfig)},
    }
    assert set(KPI) == set(KNOBS) == {n for n in SCENARIOS if n not in ("healthy", "large")}
    for table in (KNOBS, WINDOWED_KNOBS):
        for knobs in table.values():
            for k in knobs:
                section, name = k.path.split(".")
                assert name in sections[section], k.path
                assert k.unit and len(k.reason) > 20, k.path
    for name in KNOBS:
        assert with_intensity(SCENARIOS[name], "strong") == SCENARIOS[name], name
    for spec in FAULTS.values():
        assert set(spec.expected) <= CATALOG and set(spec.tolerated) <= CATALOG
        assert not set(spec.expected) & set(spec.tolerated)


def test_labels_expect_what_the_scenario_says(tmp_path):
    for name in KNOBS:
        labels = generate(name, tmp_path / name, seed=2, requests=24)
        assert labels["expected_playbooks"] == list(SCENARIOS[name].expected_playbooks), name
        assert labels["intensity"] == "strong" and labels["window"] is None
        for f in labels["faults"]:
            spec = FAULTS[f["fault"]]
            assert set(f["causes"]) == set(spec.expected)
            for playbook, ids in f["causes"].items():
                assert set(spec.causes[playbook]) <= set(ids), f
            assert all(w["start"] < w["end"] for w in f["windows"])


def test_default_is_strong_and_each_intensity_is_deterministic(tmp_path):
    generate("errors", tmp_path / "default", seed=4, requests=40)
    generate("errors", tmp_path / "strong", seed=4, requests=40, intensity="strong")
    assert _digest(tmp_path / "default") == _digest(tmp_path / "strong")
    for d in ("a", "b"):
        generate("errors", tmp_path / d, seed=4, duration_s=60, intensity="mild", window=(10, 30))
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")
    generate("errors", tmp_path / "c", seed=5, duration_s=60, intensity="mild", window=(10, 30))
    a, c = _digest(tmp_path / "a"), _digest(tmp_path / "c")
    assert a["traces.otlp.jsonl"] != c["traces.otlp.jsonl"]
    assert a["traces.otlp.jsonl"] != _digest(tmp_path / "strong")["traces.otlp.jsonl"]


@pytest.mark.parametrize("name", sorted(KPI))
def test_key_figure_grows_from_mild_to_strong(tmp_path, name, healthy):
    requests = 200 if name in ("low-prefix-reuse", "long-output-tail", "kv-pressure") else 120
    values = []
    for level in INTENSITIES:
        labels = generate(name, tmp_path / level, seed=3, requests=requests, intensity=level)
        assert labels["intensity"] == level
        con, _ = _open(tmp_path / level)
        values.append(_kpi(con, name))
    assert values[0] < values[1] < values[2], values
    if SCENARIOS[name].workload == SCENARIOS["healthy"].workload and name not in (
        "queue-overload",  # max_num_seqs=4: healthy traffic at 0.8 req/s barely queues
        "errors",
        "client-jitter",  # healthy has no client view; the server view is the healthy one
    ):
        base = _kpi(healthy(seed=3, requests=requests), name)
        # Mild is still a fault: its figure is off the healthy one (whole run, so a fault
        # confined to part of the run, like throttling, moves it less than in its window).
        assert values[0] > base + 0.05 * abs(base), (values, base)


WINDOW = (90.0, 150.0)


@pytest.mark.parametrize("name", sorted(KPI))
def test_windowed_fault_stays_inside_its_window(tmp_path, name, healthy):
    window = (0.0, 60.0) if name == "warm-up-skew" else WINDOW
    labels = generate(name, tmp_path / "w", seed=2, duration_s=240, window=window)
    con, labels = _open(tmp_path / "w")
    first = labels["clock"]["first_arrival_ns"]
    lo, hi = (first + round(s * 1e9) for s in window)
    assert labels["window"] == {"start": lo, "end": hi}
    for f in labels["faults"]:
        (w,) = f["windows"]
        if f["fault"] == "warm-up-skew":  # from engine ready, which is before the first arrival
            assert w["start"] == labels["clock"]["engine_ready_ns"] and w["end"] == hi
        else:
            assert w == labels["window"]
    inside = _kpi(con, name, lo, hi)
    # Outside = before the window (or after a warm-up window): a queue or a preemption storm
    # built in the window drains after it, so later requests still feel it (labels say so).
    before = _kpi(con, name, hi, EVER) if name == "warm-up-skew" else _kpi(con, name, 0, lo)
    assert inside > before + 0.1 * abs(before), (inside, before)
    healthy_base = SCENARIOS[name].workload == SCENARIOS["healthy"].workload
    if (healthy_base or name == "prefill-interference") and name not in (
        "warm-up-skew",  # its "outside" is after the warm-up, not before
        "fixed-length",  # the healthy figure is no fault scale (a CV)
        "errors",  # max_num_seqs=4 and a client timeout: not the healthy engine
        "queue-overload",
        "client-jitter",  # healthy has no client view
    ):
        base = _kpi(healthy(seed=2, duration_s=240), name, 0, lo)
        # Before the window the run is the healthy run: same traffic, same engine.
        assert before == pytest.approx(base, rel=0.05), (before, base)


def test_cli_intensity_and_window(tmp_path):
    runner = CliRunner()
    res = runner.invoke(
        cli,
        ["synth", "gpu-throttle", "-o", str(tmp_path / "a"), "--intensity", "mild",
         "--duration", "120", "--window", "30:60"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "gpu-throttle (mild): 96 requests" in res.output
    labels = orjson.loads((tmp_path / "a" / "labels.json").read_bytes())
    assert labels["intensity"] == "mild"
    assert labels["faults"][0]["params"]["step_cost_factor"] == 1.65
    for args, message in [
        (["healthy", "--intensity", "mild"], "injects no fault"),
        (["gpu-throttle", "--window", "30-60"], "expected START:END"),
        (["gpu-throttle", "--window", "60:30"], "0 <= START < END"),
        (["gpu-throttle", "--window", "30:6000"], "past the arrival span"),
        (["warm-up-skew", "--window", "30:60"], "must start at 0"),
        (["gpu-throttle", "--intensity", "huge"], "huge"),
    ]:
        res = runner.invoke(cli, ["synth", *args, "-o", str(tmp_path / "x")])
        assert res.exit_code == 2 and message in res.output, (args, res.output)
    assert not (tmp_path / "x").exists()


def test_window_on_a_scenario_object_is_the_same_as_by_name(tmp_path):
    sc = scenario("slow-tokenizer", duration_s=120, intensity="medium", window=(30, 60), seed=1)
    generate(sc, tmp_path / "a", seed=1)
    generate("slow-tokenizer", tmp_path / "b", seed=1, duration_s=120, intensity="medium",
             window=(30, 60))  # fmt: skip
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")


def test_docs_show_the_current_knob_table():
    from traceq.synth.variants import markdown

    doc = (Path(__file__).resolve().parent.parent / "docs" / "SYNTH.md").read_text()
    assert f"<!-- knobs:start -->\n{markdown()}<!-- knobs:end -->" in doc


def test_prompt_larger_than_the_kv_cache_is_rejected_not_retried_forever():
    # Seed 1, 200 requests: request 190 has a 7,930-token prompt and the cache holds 5,000.
    from traceq.synth.sim import Collect, simulate

    sink = Collect()
    simulate(scenario("kv-pressure", requests=200), 1, [sink])
    (big,) = [r for r in sink.requests if r.error == "ValueError"]
    assert big.prompt > 5_000 and big.tokens == []
    assert len(sink.requests) == 200
