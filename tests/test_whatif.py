"""`traceq whatif` against what the engine does (docs/WHATIF.md): the back-test reproduces a
run's own KPIs, and a prediction at another rate or setting matches a synth run generated at
that rate or setting (the same engine model, traceq/synth/engine.py). Tolerances are the ones
docs/WHATIF.md holds the model to; the errors it measures are far inside them."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

import traceq
from traceq.cli import cli
from traceq.session import Session
from traceq.synth import SCENARIOS, generate, scenario
from traceq.synth.config import Scenario, WorkloadConfig
from traceq.synth.sim import Collect, simulate
from traceq.whatif import SCHEMA_VERSION, whatif
from traceq.whatif.calibrate import FrontFit, fit_front

REQUESTS = 300
NO_TPOT_SLO = {"ttft_ms": 1000.0, "tpot_ms": None}


def _ingest(sc: str | Scenario, root: Path, name: str, seed: int = 1, **kw: object) -> Path:
    folder = root / name
    generate(sc, folder, seed=seed, **kw)  # type: ignore[arg-type]
    dataset = root / f"{name}.tq"
    traceq.ingest([folder], dataset)
    return dataset


@dataclass(frozen=True)
class Engine:
    """What the engine does with a scenario, from its own requests (no ingest): TTFT p99, TPOT
    p50, the longest chunk gap (ms) and the share meeting TTFT ≤ 2 s and TPOT ≤ 100 ms, by
    docs/METRICS.md's definitions (linear-interpolated percentiles)."""

    ttft_p99: float
    tpot_p50: float
    tbt_max: float
    attainment: float


def _engine(sc: Scenario, seed: int = 1) -> Engine:
    run = Collect()
    simulate(sc, seed, [run])
    done = [r for r in run.requests if r.error is None and r.tokens]
    ttft = np.array([(r.tokens[0] - r.t_arrival) / 1e6 for r in done])
    tpot = np.array(
        [(r.tokens[-1] - r.tokens[0]) / 1e6 / (len(r.tokens) - 1) if len(r.tokens) > 1 else 0.0
         for r in done]
    )  # fmt: skip
    gaps = max(max(np.diff(r.tokens), default=0) for r in done) / 1e6
    good = (ttft <= 2000) & (tpot <= 100)
    multi = np.array([len(r.tokens) > 1 for r in done])
    return Engine(
        float(np.quantile(ttft, 0.99)),
        float(np.quantile(tpot[multi], 0.5)),
        float(gaps),
        float(good.sum()) / len(run.requests),
    )


def _whatif(dataset: Path, **kw: object):  # type: ignore[no-untyped-def]
    with Session(dataset) as s:
        return whatif(s, dataset=str(dataset), **kw)  # type: ignore[arg-type]


def _rel(a: float, b: float) -> float:
    return abs(a - b) / b


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("whatif")


@pytest.fixture(scope="module")
def healthy(root: Path) -> Path:
    return _ingest("healthy", root, "healthy", requests=REQUESTS)


@pytest.fixture(scope="module")
def interference(root: Path) -> Path:
    return _ingest("prefill-interference", root, "interference", requests=REQUESTS)


@pytest.fixture(scope="module")
def prefix(root: Path) -> Path:
    return _ingest("low-prefix-reuse", root, "prefix", requests=REQUESTS)


# -- back-test and other rates ------------------------------------------------------------


@pytest.mark.parametrize("name", ["healthy", "interference", "prefix"])
def test_backtest_reproduces_the_runs_own_kpis(name: str, request: pytest.FixtureRequest) -> None:
    result = _whatif(request.getfixturevalue(name))
    errors = result.calibration.backtest.errors()
    for key in ("ttft_p50", "ttft_p99", "tpot_p50"):
        assert abs(errors[key]) <= 0.20, (key, errors[key])
    assert not result.low_confidence
    assert result.to_dict()["calibration"]["backtest"]["low_confidence"] is False


@pytest.mark.parametrize(
    ("name", "scenario_name"), [("healthy", "healthy"), ("prefix", "low-prefix-reuse")]
)
def test_twice_the_rate_matches_what_the_engine_then_does(
    name: str, scenario_name: str, request: pytest.FixtureRequest
) -> None:
    dataset = request.getfixturevalue(name)
    base = scenario(scenario_name, requests=REQUESTS)
    rate_2x = (base.workload.rate_per_s or 1.0) * 2
    doubled = replace(base, workload=replace(base.workload, rate_per_s=rate_2x))
    truth = _engine(doubled)
    rate = _whatif(dataset).calibration.workload.rate_rps
    (predicted,) = _whatif(dataset, rates=[2 * rate]).scenarios
    assert predicted.rate_rps == pytest.approx(2 * rate)
    assert _rel(predicted.ttft_ms.p99, truth.ttft_p99) <= 0.30
    assert _rel(predicted.tpot_ms.p50, truth.tpot_p50) <= 0.15


def test_max_rate_within_15_percent_of_the_engines(healthy: Path) -> None:
    """The engine's own max rate at 95 % of requests with TTFT ≤ 1 s: bisection over synth
    runs of the same traffic at other rates."""
    base = scenario("healthy", requests=REQUESTS)

    def attainment(rate: float) -> float:
        sc = replace(base, workload=replace(base.workload, rate_per_s=rate))
        run = Collect()
        simulate(sc, 1, [run])
        ok = [r for r in run.requests if r.t_first_token and r.t_first_token - r.t_arrival <= 1e9]
        return len(ok) / len(run.requests)

    lo, hi = 1.0, 64.0
    while hi - lo > 0.02 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if attainment(mid) >= 0.95 else (lo, mid)
    result = _whatif(healthy, slo=NO_TPOT_SLO, find_max_rate=True)
    # the synth's rate knob rescales its trace's mean gap; the run's own rate is the measured one
    truth = lo * result.calibration.workload.rate_rps / (base.workload.rate_per_s or 1.0)
    found = result.max_rate
    assert found is not None
    assert _rel(found.rate_rps, truth) <= 0.15
    low, high = found.interval
    assert low <= found.rate_rps <= high and high > low
    assert set(found.per_seed) == {0, 1, 2}


def test_max_num_seqs_48_to_96_at_9_rps(root: Path) -> None:
    """A run at 6 req/s with max_num_seqs 48 predicts 9 req/s at 48 (queues: attainment far
    below 95 %) and at 96 (above it), each against the engine run at that setting."""
    work = WorkloadConfig(
        source="parametric",
        requests=300,
        rate_per_s=6.0,
        output_mean_tokens=550.0,
        output_sigma=0.6,
    )
    base = SCENARIOS["healthy"]
    sc = replace(
        base, engine=replace(base.engine, max_num_seqs=48), workload=work, log_requests=False
    )
    dataset = _ingest(sc, root, "seqs48")
    rate = _whatif(dataset).calibration.workload.rate_rps * 9.0 / 6.0
    at48, at96 = _whatif(dataset, rates=[rate], settings={"max_num_seqs": 96}).scenarios
    assert at48.settings["max_num_seqs"] == 48 and at96.settings["max_num_seqs"] == 96
    fast = replace(work, rate_per_s=9.0)
    for seqs, predicted in ((48, at48), (96, at96)):
        truth = _engine(replace(sc, engine=replace(sc.engine, max_num_seqs=seqs), workload=fast))
        assert _rel(predicted.ttft_ms.p99, truth.ttft_p99) <= 0.35, seqs
        assert (predicted.slo_attainment >= 0.95) == (truth.attainment >= 0.95), seqs
    assert at48.slo_attainment < 0.95 <= at96.slo_attainment


def test_chunked_prefill_on_shortens_the_longest_stall(interference: Path) -> None:
    """Chunked prefill off with 8–16 k prompts stalls decodes behind whole prefills; turned
    on, the step budget falls back to vLLM's default (8,192 here), as in the engine run."""
    result = _whatif(interference, settings={"chunked_prefill": True})
    (on,) = result.scenarios
    budget = result.calibration.limits.with_settings({"chunked_prefill": True})
    assert budget.items["max_num_batched_tokens"].value == 8192
    assert budget.items["max_num_batched_tokens"].source == "default"
    sc = scenario("prefill-interference", requests=REQUESTS)
    engine = replace(
        sc, engine=replace(sc.engine, chunked_prefill=True, max_num_batched_tokens=8192)
    )
    truth = _engine(engine)
    observed = result.calibration.backtest.observed
    assert _rel(on.tbt_ms.max, truth.tbt_max) <= 0.40
    assert on.tbt_ms.max * 2 <= observed.tbt_ms.max


def test_a_preemption_storm_back_tests_and_predicts_a_larger_cache(root: Path) -> None:
    """A 5 k-token cache that thrashes: most of the steps' prefill is the recompute of
    requests preempted before their first token, which no token shows. The rebuild charges
    it (traceq/sql/whatif_steps.sql), so the fit holds, the back-test is within its bound,
    and twice the cache matches the engine run with twice the cache."""
    sc = scenario("kv-pressure", requests=150)
    dataset = _ingest(sc, root, "kv")
    result = _whatif(dataset, settings={"kv_cache_tokens": 10_000})
    steps = result.calibration.steps
    assert steps.r2 is not None and steps.r2 >= 0.9
    errors = result.calibration.backtest.errors()
    for key in ("ttft_p50", "ttft_p99", "tpot_p50"):
        assert abs(errors[key]) <= 0.20, (key, errors[key])
    assert not result.low_confidence
    assert result.calibration.backtest.predicted.preemptions > 0
    (doubled,) = result.scenarios
    truth = _engine(replace(sc, engine=replace(sc.engine, kv_budget_tokens=10_000)))
    assert _rel(doubled.ttft_ms.p99, truth.ttft_p99) <= 0.35
    assert _rel(doubled.tpot_ms.p50, truth.tpot_p50) <= 0.15


def test_a_throttled_gpu_back_tests_on_its_speed_timeline(root: Path) -> None:
    """A GPU whose steps run 3× slower for 40 % of the run: the fit finds the slow windows
    (traceq/whatif/speed.py) and the back-test replays them, so it holds its bound; one step
    cost for the whole run would miss."""
    sc = scenario("gpu-throttle", requests=150)
    sc = replace(sc, faults=replace(sc.faults, throttle_factor=3.0))
    dataset = _ingest(sc, root, "throttle")
    result = _whatif(dataset, rates=[1.0])
    errors = result.calibration.backtest.errors()
    for key in ("ttft_p50", "ttft_p99", "tpot_p50"):
        assert abs(errors[key]) <= 0.20, (key, errors[key])
    speed = result.to_dict()["calibration"]["gpu_speed"]
    assert speed is not None
    assert speed["slowest"] / speed["fastest"] == pytest.approx(3.0, rel=0.1)


@pytest.fixture(scope="module")
def errors(root: Path) -> Path:
    return _ingest("errors", root, "errors", requests=150)


def test_requests_ended_by_a_client_timeout_are_replayed_with_it(errors: Path) -> None:
    """The errors scenario's clients give up 1.5 s after arrival: the aborts are read as that
    timeout and replayed with it, so the back-test holds its bound and its attainment counts
    them as missing the SLO; the text says so."""
    result = _whatif(errors)
    workload = result.to_dict()["calibration"]["workload"]
    assert workload["client_timeout_s"] == pytest.approx(1.5, abs=0.01)
    with Session(errors) as s:
        aborted = s.query(
            "SELECT count(*) AS n FROM request_phases WHERE view = 'server' AND error = 'timeout'"
        )["n"][0]
    assert workload["timed_out_requests"] == aborted > 10
    errs = result.calibration.backtest.errors()
    for key in ("ttft_p50", "ttft_p99", "tpot_p50"):
        assert abs(errs[key]) <= 0.20, (key, errs[key])
    assert not result.low_confidence
    bt = result.calibration.backtest
    assert bt.predicted.slo_attainment == pytest.approx(bt.observed.slo_attainment, abs=0.05)
    assert bt.observed.slo_attainment is not None and bt.observed.slo_attainment < 0.9
    text = CliRunner().invoke(cli, ["whatif", str(errors)]).output
    assert "client timeout: 1.5 s after arrival" in text


def test_a_back_test_outside_its_bound_is_marked_low_confidence(
    errors: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Aborts read as users cancelling at any time (no common duration: the spread allowed is
    0 here) are not replayed; the load they put on the queue is missing, the back-test's TTFT
    p99 misses, and the prediction says so, in text and JSON."""
    monkeypatch.setattr("traceq.whatif.workload.TIMEOUT_SPREAD", 0.0)
    result = _whatif(errors, rates=[1.0])
    assert result.to_dict()["calibration"]["workload"]["client_timeout_s"] is None
    assert result.low_confidence
    doc = result.to_dict()
    assert doc["low_confidence"] and doc["calibration"]["backtest"]["outside_bound"]
    text = CliRunner().invoke(cli, ["whatif", str(errors)]).output
    assert "LOW CONFIDENCE" in text


def test_unlike_instances_are_each_replayed_at_their_own_speed(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two replicas, the second on a GPU whose every step costs 1.4× (two synth runs, one
    dataset): the calibration reads each instance's factor, the back-test replays each
    replica at its own and holds its bound closer than one pooled speed does; a replay with
    another number of replicas says it runs them at the pooled one."""
    base = scenario("healthy", requests=REQUESTS)
    e = base.engine
    terms = ("step_overhead_s", "decode_per_seq_s", "decode_per_kv_token_s",
             "prefill_per_token_s", "prefill_attn_per_token2_s")  # fmt: skip
    slow = replace(
        base,
        engine=replace(e, host="gpu-node-1", **{t: 1.4 * getattr(e, t) for t in terms}),
    )
    generate(base, root / "fleet-a", seed=1)
    generate(slow, root / "fleet-b", seed=2)
    dataset = root / "fleet.tq"
    traceq.ingest([root / "fleet-a", root / "fleet-b"], dataset)
    result = _whatif(dataset)
    speeds = result.to_dict()["calibration"]["instance_speed"]
    assert speeds["gpu-node-1"] / speeds["gpu-node-0"] == pytest.approx(1.4, rel=0.05)
    errors = result.calibration.backtest.errors()
    for key in ("ttft_p50", "ttft_p99", "tpot_p50"):
        assert abs(errors[key]) <= 0.20, (key, errors[key])
    assert "instances not alike" in CliRunner().invoke(cli, ["whatif", str(dataset)]).output
    three = _whatif(dataset, settings={"replicas": 3})
    assert any("not alike" in w for w in three.warnings)
    monkeypatch.setattr("traceq.whatif.speed.INSTANCE_SPREAD", 100.0)
    pooled = _whatif(dataset)
    assert pooled.calibration.instance_speed is None
    worse = pooled.calibration.backtest.errors()
    assert abs(worse["ttft_p99"]) > abs(errors["ttft_p99"])
    assert abs(worse["tpot_p50"]) > abs(errors["tpot_p50"])


def test_a_front_cost_all_per_token_keeps_its_slope() -> None:
    """slow-tokenizer's sample: 150 µs a prompt token fits −11 ms + 162 µs a token; the line
    through the origin keeps what long prompts cost, a constant median would not."""
    row = {"base_ns": -1.1e7, "per_token_ns": 1.62e5, "origin_per_token_ns": 1.556e5,
           "median_ns": 1.676e8}  # fmt: skip
    assert fit_front(row) == FrontFit(0.0, 1.556e-4, 0.1676)
    assert fit_front(row | {"per_token_ns": -1.0}) == FrontFit(0.1676, 0.0, 0.1676)


# -- the command ---------------------------------------------------------------------------


def test_text_and_json(healthy: Path) -> None:
    runner = CliRunner()
    args = ["whatif", str(healthy), "--rate", "1.5", "--set", "max_num_seqs=96"]
    text = runner.invoke(cli, args)
    assert text.exit_code == 0, text.output
    assert "Back-test" in text.output and "max_num_seqs=96" in text.output
    assert "n/a" not in text.output and "vllm.log line" in text.output
    out = runner.invoke(cli, [*args, "--format", "json"])
    assert out.exit_code == 0, out.output
    doc = orjson.loads(out.output)
    assert doc["schema_version"] == SCHEMA_VERSION
    assert [s["label"] for s in doc["scenarios"]] == ["as observed", "with --set"]
    for s in doc["scenarios"]:
        assert s["rate_rps"] == 1.5
        assert set(s["ttft_ms"]) == {"p50", "p90", "p99", "p999", "max"}
        for key in ("tpot_ms", "tbt_ms", "slo_attainment", "goodput_rps", "output_tokens_per_s",
                    "cost_per_1m_tokens", "settings"):  # fmt: skip
            assert s[key] is not None, key
    limits = doc["calibration"]["limits"]
    assert limits["max_num_seqs"]["source"] == "log"
    assert limits["replicas"]["source"] == "dataset"
    assert "max_rate" not in doc


def test_max_rate_from_the_command_line(healthy: Path) -> None:
    out = CliRunner().invoke(
        cli, ["whatif", str(healthy), "--max-rate", "--slo", "ttft_ms=1000,tpot_ms=none",
              "--attainment", "0.95", "--format", "json"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    found = orjson.loads(out.output)["max_rate"]
    assert found["interval"][0] <= found["rate_rps"] <= found["interval"][1]


@pytest.mark.parametrize(
    ("pair", "words"),
    [
        ("max_num_sequences=96", "unknown setting"),
        ("max_num_seqs=0", "out of range"),
        ("kv_cache_tokens=lots", "not a whole number"),
        ("chunked_prefill=maybe", "on or off"),
        ("max_num_batched_tokens=4096", "chunked prefill off"),
    ],
)
def test_a_bad_setting_exits_2_and_lists_the_known_ones(
    pair: str, words: str, interference: Path
) -> None:
    out = CliRunner().invoke(cli, ["whatif", str(interference), "--set", pair])
    assert out.exit_code == 2
    assert words in out.output
    if "unknown" in words or "range" in words:
        assert "max_num_seqs" in out.output and "kv_cache_tokens" in out.output
    assert "Traceback" not in out.output


def test_no_chunk_timing_names_the_missing_input(root: Path, healthy: Path) -> None:
    log_only = root / "log-only.tq"
    traceq.ingest([root / "healthy" / "vllm.log"], log_only)
    out = CliRunner().invoke(cli, ["whatif", str(log_only)])
    assert out.exit_code == 2
    assert "per-token" in out.output or "first-token" in out.output
    assert not any(ch.isdigit() for ch in out.output.split("error:")[-1].split(";")[0])


def test_a_run_where_every_request_failed_says_so(root: Path) -> None:
    """An overloaded L4 behind a 1.5 s client timeout: every request was rejected or timed
    out, none was served. whatif says that, not that the traces lack per-token timing."""
    ds = _ingest("errors", root, "all-failed", requests=30, hardware="l4-8b")
    out = CliRunner().invoke(cli, ["whatif", str(ds)])
    assert out.exit_code == 2, out.output
    assert "no request on the server was served: all 30 failed or were aborted" in out.output
    assert "per-token" not in out.output and "Traceback" not in out.output


def test_traces_without_prompt_lengths_name_the_missing_input(root: Path) -> None:
    """SGLang's traces time every chunk but carry no prompt length: whatif (and the report's
    Headroom) say so, where the replay once failed on an empty workload."""
    sglang = _ingest("healthy", root, "sglang", requests=60, convention="sglang")
    out = CliRunner().invoke(cli, ["whatif", str(sglang)])
    assert out.exit_code == 2, out.output
    assert "prompt length" in out.output and "gen_ai.usage.prompt_tokens" in out.output
    assert "Traceback" not in out.output and out.output.count("\n") <= 2
    report = root / "sglang.md"
    out = CliRunner().invoke(cli, ["report", str(sglang), "-o", str(report), "--no-findings"])
    assert out.exit_code == 0, out.output
    assert "No Headroom figure: no request on the server has its prompt length" in (
        report.read_text()
    )


@pytest.mark.parametrize("convention", ["dynamo", "llmd"])
def test_a_disaggregated_run_is_not_replayed_as_aggregated(root: Path, convention: str) -> None:
    """Prefill and decode on separate workers: replayed as aggregated replicas the back-test
    missed TTFT by half. whatif says why it stops, before asking for engine limits."""
    ds = _ingest("healthy", root, convention, requests=40, convention=convention)
    out = CliRunner().invoke(cli, ["whatif", str(ds)])
    assert out.exit_code == 2, out.output
    said = re.search(r"the run is disaggregated: (\d+) requests prefilled on 2 instances and "
                     r"decoded on 3 instances", out.output)  # fmt: skip
    assert said and 30 <= int(said[1]) <= 40, out.output  # a router refuses a few
    assert "limits" not in out.output and "Traceback" not in out.output


REAL_VLLM = Path(__file__).parent / "data" / "real" / "vllm"


@pytest.mark.parametrize(
    "log",
    ["vllm_v1_0.11.2_full_startup_and_bench_conc1_4_8_llama3_8b_faradawn.log",
     "vllm_v1_0.25.1_dgxspark_startup_fail_kv_too_small_for_262k_after_unpinned_redownload_sostrowsk.log"],
)  # fmt: skip
def test_a_real_vllm_log_alone_names_what_is_missing(tmp_path: Path, log: str) -> None:
    """Real server logs (other people's) carry stats and start-up lines but no per-token
    timing: one clear line, exit 2, never a traceback or a number."""
    ds = tmp_path / "real.tq"
    traceq.ingest([REAL_VLLM / log], ds)
    out = CliRunner().invoke(cli, ["whatif", str(ds)])
    assert out.exit_code == 2, out.output
    assert "Traceback" not in out.output and out.output.count("\n") <= 2
    assert "per-token" in out.output or "first-token" in out.output


def test_no_engine_limits_names_them(root: Path, healthy: Path) -> None:
    traces_only = root / "traces-only.tq"
    traceq.ingest([root / "healthy" / "traces.otlp.jsonl"], traces_only)
    out = CliRunner().invoke(cli, ["whatif", str(traces_only)])
    assert out.exit_code == 2
    assert "engine limits missing" in out.output and "kv_cache_tokens" in out.output
    given = ["--set", "max_num_seqs=256", "--set", "max_num_batched_tokens=8192",
             "--set", "chunked_prefill=on", "--set", "prefix_caching=on",
             "--set", "kv_cache_tokens=400000"]  # fmt: skip
    ok = CliRunner().invoke(cli, ["whatif", str(traces_only), *given, "--format", "json"])
    assert ok.exit_code == 0, ok.output
    limits = orjson.loads(ok.output)["calibration"]["limits"]
    assert limits["kv_cache_tokens"]["source"] == "set"


# -- capacity for a target rate ------------------------------------------------------------


def test_target_rate_plans_replicas_from_one_replicas_max_rate(healthy: Path) -> None:
    out = CliRunner().invoke(cli, ["whatif", str(healthy), "--target-rate", "80", "--format",
                                   "json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    plan = orjson.loads(out.output)["target_rate"]
    per = plan["per_replica"]
    assert per["settings"]["replicas"] == 1 and set(per["per_seed"]) == {"0", "1", "2"}
    assert plan["replicas"] == math.ceil(80 / per["rate_rps"])
    assert plan["replicas_with_headroom"] == math.ceil(80 * 1.2 / per["rate_rps"])
    assert plan["replicas_interval"] == [math.ceil(80 / per["interval"][1]),
                                         math.ceil(80 / per["interval"][0])]  # fmt: skip
    gpus = plan["gpus_per_replica"]
    assert gpus["value"] == 1 and gpus["source"] == "log"
    assert "tensor_parallel_size=1" in gpus["detail"]
    assert plan["gpus"] == plan["replicas"] and plan["usd_per_hour"] == 2.0 * plan["gpus"]
    # the fleet it plans meets the SLO at the target in the model's own replay
    (fleet,) = _whatif(healthy, rates=[80.0], settings={"replicas": plan["replicas"]}).scenarios[1:]
    assert fleet.slo_attainment >= 0.95
    text = CliRunner().invoke(cli, ["whatif", str(healthy), "--target-rate", "80"]).output
    assert f"needed: {plan['replicas']:,} replicas, {plan['gpus']:,} GPUs" in text
    assert "with 20 % headroom (96.00 req/s)" in text


def test_target_rate_counts_every_gpu_of_a_tensor_parallel_replica(root: Path) -> None:
    """Llama-3.1-70B on four H100s (tensor_parallel_size 4): four GPUs per replica."""
    folder = root / "tp4"
    generate("healthy", folder, seed=1, requests=150, hardware="h100x4-70b")
    dataset = root / "tp4.tq"
    traceq.ingest([folder], dataset)
    result = _whatif(dataset, target_rate=20.0)
    plan = result.to_dict()["target_rate"]
    assert plan["gpus_per_replica"]["value"] == 4
    assert plan["gpus"] == 4 * plan["replicas"]
    assert plan["gpus_with_headroom"] == 4 * plan["replicas_with_headroom"]


def test_target_rate_with_set_replicas_is_refused(healthy: Path) -> None:
    out = CliRunner().invoke(
        cli, ["whatif", str(healthy), "--target-rate", "80", "--set", "replicas=3"]
    )
    assert out.exit_code == 2
    assert "--target-rate finds the replicas" in out.output and "Traceback" not in out.output
