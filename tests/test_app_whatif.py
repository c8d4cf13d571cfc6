"""The app's What if page (traceq/app/pages/whatif.py) through `streamlit.testing`, on the
bundled kv-pressure scenario: the engine model's TTFT p99 and SLO attainment curves with the
run's own point, a changed setting drawn beside the run's, the slider's figures, a setting
vLLM refuses said in one line, a back-test that misses said first, the calibration done once
per dataset, a dataset the model cannot calibrate said in one line; every chart a few dozen
rows."""

from __future__ import annotations

import json
from dataclasses import replace

import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from tests.app_helpers import APP, ROOT, ingest_sample
from traceq import ingest
from traceq.app import data, shipped, whatif
from traceq.session import Session
from traceq.slo import DEFAULT_GPU_HOUR_USD, DEFAULT_SLO
from traceq.whatif.predict import calibrate, observe

TIMEOUT = 120
PAGE = "traceq/app/pages/whatif.py"


@pytest.fixture(scope="module")
def dataset(app_workdir):
    env = pytest.MonkeyPatch()
    yield ingest_sample(app_workdir, env)  # once per session (tests/conftest.py)
    env.undo()


def open_page(dataset) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["dataset"] = str(dataset)
    at.run()
    at.switch_page(PAGE).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def charts(at: AppTest) -> list:
    """Every chart of the page (drawn in columns)."""
    return [n for n in at.main if getattr(n, "type", "") == "vega_lite_chart"]


def specs(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in charts(at)]


def data_of(chart) -> dict[str, dict[str, list]]:
    """A chart's named datasets as the browser gets them (Arrow): column → values."""
    return {d.name: pa.ipc.open_stream(d.data.data).read_all().to_pydict()
            for d in chart.proto.datasets}  # fmt: skip


def test_curves_of_the_run_with_its_own_point(dataset):
    at = open_page(dataset)
    assert at.title[0].value == "What if"
    titles = [s["title"] for s in specs(at)]
    assert titles == [
        "TTFT p99 against the arrival rate",
        "SLO attainment against the arrival rate",
    ]
    shown = metrics(at)
    assert shown["Max rate, as observed"].endswith(" req/s")
    assert "with the changes" not in " ".join(shown)
    # kv-pressure's preemption storm is in the fit (recompute inferred): the back-test holds
    assert not [w.value for w in at.warning if w.value.startswith("Low confidence")]
    # one row per rate, plus the run's point and the slider's rule: a few dozen, not requests
    items = shipped.rendered(at)
    assert [i.kind for i in items] == ["chart", "chart"]
    assert all(whatif.CURVE_POINTS < i.rows <= whatif.CURVE_POINTS + 3 for i in items), items
    with Session(dataset) as s:
        p99 = s.query(
            "SELECT quantile_cont(ttft_ms, 0.99) FROM request_phases WHERE view = 'server' "
            "AND error IS NULL AND output_tokens > 0"
        ).item()
    chart = charts(at)[0]
    spec = json.loads(chart.proto.spec)
    (diamond,) = [x for x in spec["layer"] if (x.get("mark") or {}).get("shape") == "diamond"]
    point = data_of(chart)[diamond["data"]["name"]]
    assert point["ttft_p99_ms"] == [pytest.approx(p99)]


def test_a_changed_setting_is_drawn_beside_the_runs(dataset):
    at = open_page(dataset)
    at.number_input(key="whatif_max_num_seqs").set_value(4).run()
    assert not at.exception
    shown = metrics(at)
    assert {"Max rate, with the changes", "TTFT p99, with the changes"} <= set(shown)
    items = shipped.rendered(at)
    assert all(2 * whatif.CURVE_POINTS < i.rows <= 2 * whatif.CURVE_POINTS + 3 for i in items)
    # four requests at a time instead of 128: fewer in flight, less KV, fewer preemptions
    assert shown["TPOT p50, with the changes"] != shown["TPOT p50, as observed"]


def test_the_slider_sets_the_rate_of_the_figures(dataset):
    at = open_page(dataset)
    before = metrics(at)
    at.slider(key="whatif_rate").set_value(0.1).run()
    after = metrics(at)

    def pct(label: str, shown: dict[str, str]) -> float:
        return float(shown[label].removesuffix(" %"))

    # at the run's rate most requests miss the SLO; at a trickle nearly all meet it
    label = "SLO attainment, as observed"
    assert pct(label, before) < 50 < 95 <= pct(label, after)


def test_a_setting_vllm_refuses_is_one_warning(dataset):
    at = open_page(dataset)
    at.toggle(key="whatif_chunked_prefill").set_value(False).run()
    assert not at.exception and not at.error
    refused = [w.value for w in at.warning if "cannot run" in w.value]
    assert len(refused) == 1 and "below max_model_len" in refused[0]
    assert "with the changes" not in " ".join(metrics(at))  # only the run's curve


def test_the_calibration_runs_once_per_dataset(dataset, monkeypatch):
    calls = []
    real = data.calibrate

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(data, "calibrate", counted)
    data.engine_model.clear()
    at = open_page(dataset)
    at.number_input(key="whatif_max_num_seqs").set_value(8).run()
    at.slider(key="whatif_rate").set_value(0.5).run()
    open_page(dataset)
    assert len(calls) == 1


def test_a_back_test_that_misses_is_said_first(dataset):
    """A model whose steps cost 3× the run's replays the run far off its own figures: the
    page's warning opens with the low-confidence sentence."""
    with Session(dataset) as s:
        cal = calibrate(s)
        observed = observe(s, DEFAULT_SLO)
    fit = cal.model.steps
    slow = replace(fit, terms={k: 3 * v for k, v in fit.terms.items()})
    off = replace(cal, model=replace(cal.model, steps=slow))
    got = whatif.curves(off, observed, {}, DEFAULT_SLO, DEFAULT_GPU_HOUR_USD)
    assert got.warning.startswith("Low confidence: the back-test misses")


def test_a_dataset_without_chunk_timing_says_why(tmp_path):
    log_only = tmp_path / "log-only.tq"
    ingest([ROOT / "sample_traces" / "kv-pressure" / "vllm.log"], log_only)
    at = open_page(log_only)
    assert at.info[0].value.startswith("No engine model for this dataset: no request has")
    assert "\n" not in at.info[0].value and not specs(at)
