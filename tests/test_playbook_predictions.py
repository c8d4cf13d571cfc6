"""A playbook cites a prediction as its check: prefill-interference's incident says what
chunked prefill would do to this run's stalls, kv-pressure's what twice the KV cache would do
to its preemption storm, replayed by `traceq whatif` on the run's own calibrated engine model
(traceq/whatif/cite.py); a run whose cause is something else, or that cannot be calibrated,
gets no number. `traceq report` shows the same sentence under the incident, in Markdown, HTML
and JSON, and cites nothing where the back-test misses."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from html import escape
from pathlib import Path
from typing import Any

import pytest

from tests.playbook_helpers import SAMPLES, ingest_folder
from tests.report_factory import make_dataset
from tests.test_playbooks_cli import invoke
from traceq.playbooks import load_catalog
from traceq.report import build_report, headroom
from traceq.report.render_html import render_html
from traceq.report.render_md import render_md
from traceq.whatif import cite, predict, speed


@pytest.fixture(scope="module")
def interference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pi")
    return ingest_folder(SAMPLES / "prefill-interference", folder / "pi.tq")


@pytest.fixture(scope="module")
def burst(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("qo")
    return ingest_folder(SAMPLES / "queue-overload", folder / "q.tq")


@pytest.fixture(scope="module")
def kv_findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("kv")
    return _findings(ingest_folder(SAMPLES / "kv-pressure", folder / "kv.tq"))


def _findings(dataset: Path) -> dict[str, dict[str, Any]]:
    """`traceq diagnose --format json`'s findings by playbook id."""
    r = invoke("diagnose", str(dataset), "--format", "json")
    return {f["id"]: f for f in json.loads(r.output)["findings"]}


@pytest.fixture(scope="module")
def interference_findings(interference: Path) -> dict[str, dict[str, Any]]:
    return _findings(interference)


@pytest.fixture(scope="module")
def burst_findings(burst: Path) -> dict[str, dict[str, Any]]:
    return _findings(burst)


def test_the_incident_says_what_chunked_prefill_would_do_to_its_stalls(interference):
    r = invoke("diagnose", str(interference))
    line = next(x for x in r.output.splitlines() if x.startswith("  predict:"))
    found = re.search(
        r"with chunked_prefill=on, traceq whatif predicts the longest chunk gap at (\d+) ms "
        r"\(the run as it was replays at (\d+) ms; observed (\d+) ms\)",
        line,
    )
    assert found, line
    predicted, asis, observed = (int(x) for x in found.groups())
    # the replay of the run as it was matches the run, and chunking at least halves the stall
    assert abs(asis - observed) <= 0.4 * observed
    assert predicted * 2 <= observed


def test_the_prediction_is_in_the_json_finding(interference_findings):
    finding = interference_findings["prefill-interference"]
    assert finding["prediction"].startswith("with chunked_prefill=on, traceq whatif predicts")
    others = [f for pid, f in interference_findings.items() if pid != "prefill-interference"]
    assert not any(f["prediction"] for f in others)


def test_a_burst_of_arrivals_cites_what_twice_the_replicas_would_do(burst_findings):
    by_id = burst_findings
    found = re.match(
        r"with replicas=2 \(twice the run's\), traceq whatif predicts p99 TTFT at ([\d.]+) s "
        r"\(the run as it was replays at ([\d.]+) s; observed ([\d.]+) s\)",
        by_id["ttft-queueing"]["prediction"],
    )
    assert found, by_id["ttft-queueing"]["prediction"]
    predicted, asis, observed = (float(x) for x in found.groups())
    assert abs(asis - observed) <= 0.2 * observed and predicted * 2 <= asis
    assert not any(f["prediction"] for pid, f in by_id.items() if pid != "ttft-queueing")


@pytest.mark.parametrize(
    ("name", "root", "with_headroom"),
    [("interference", "prefill-interference", True), ("burst", "ttft-queueing", False)],
)
def test_the_report_cites_what_diagnose_cites(request, monkeypatch, name, root, with_headroom):
    """The report's incident carries `traceq diagnose`'s predict sentence, in Markdown, HTML
    and JSON; with the Headroom measured, the run is calibrated once for both."""
    said = request.getfixturevalue(f"{name}_findings")[root]["prediction"]
    assert said
    fits: list[object] = []

    def counted(real: Callable[..., Any]) -> Callable[..., Any]:
        def calibrate(session: object, *args: object) -> Any:
            fits.append(session)
            return real(session, *args)

        return calibrate

    for module in (headroom, cite):
        monkeypatch.setattr(module, "calibrate", counted(module.calibrate))
    report = build_report(request.getfixturevalue(name), headroom=with_headroom)
    assert len(fits) == 1
    assert [f.id for f, _ in report.findings()] == [root]
    md = render_md(report, [], None)
    assert [x for x in md.splitlines() if "**Predict:**" in x] == [f"- **Predict:** {said}"]
    html = render_html(report, [])
    assert html.count("<td class='l'>predict</td>") == 1
    assert f"<td class='l'>predict</td><td class='l'>{escape(said)}</td>" in html
    assert [f["prediction"] for f in report.to_dict()["findings"]] == [said]


def test_a_report_cites_nothing_where_the_back_test_misses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The burst again, with a model whose steps cost 3× what the run's did (a calibration
    that missed what the engine does): ttft-queueing's incident holds its arrival burst, but
    the model replays the run's TTFT far from the run's own, so the report cites no number."""

    def slow(sums: Any) -> tuple[Any, None]:
        fit, _ = speed.fit_with_speed(sums)
        assert fit is not None
        return replace(fit, terms={k: 3 * v for k, v in fit.terms.items()}), None

    monkeypatch.setattr(predict, "fit_with_speed", slow)
    report = build_report(make_dataset(tmp_path, "queue-overload", 1))
    root = next(f for f, _ in report.findings() if f.id == "ttft-queueing")
    assert "arrival-burst" in [c.id for c in root.causes if c.status == "confirmed"]
    assert report.measurement.context["headroom"]["low_confidence"]
    assert not any(f.prediction for f in report.diagnosis.findings)
    assert "**Predict:**" not in render_md(report, [], None)
    assert "<td class='l'>predict</td>" not in render_html(report, [])


def test_a_small_kv_cache_cites_what_twice_the_cache_would_do(kv_findings):
    """kv-pressure's 5 k-token cache thrashes (preemption and recompute): the back-test
    holds once the rebuilt steps count the recompute, so its root cites twice the cache."""
    found = re.match(
        r"with kv_cache_tokens=10,000 \(twice the run's KV cache\), traceq whatif predicts "
        r"p99 TTFT at ([\d.]+) (m?s) \(the run as it was replays at ([\d.]+) s; observed "
        r"([\d.]+) s\) and median TPOT at ([\d.]+) ms \(as it was ([\d.]+) ms\)",
        kv_findings["kv-pressure"]["prediction"],
    )
    assert found, kv_findings["kv-pressure"]["prediction"]
    predicted = float(found[1]) / (1000 if found[2] == "ms" else 1)
    asis, observed = float(found[3]), float(found[4])
    assert abs(asis - observed) <= 0.2 * observed
    assert predicted < observed


def test_no_prediction_where_the_cause_is_not_the_setting(kv_findings):
    # kv-pressure: ttft-queueing is its consequence, queued behind a full cache, not a burst
    others = [f for pid, f in kv_findings.items() if pid != "kv-pressure"]
    assert not any(f["prediction"] for f in others)


def test_lint_refuses_a_prediction_on_an_unknown_cause(tmp_path):
    text = Path(load_catalog().by_id()["prefill-interference"].source).read_text()
    bad = text.replace("when: chunked-prefill-off", "when: chunked-prefil-off")
    (tmp_path / "mine.yaml").write_text(bad)
    r = invoke("playbooks", "lint", str(tmp_path))
    assert r.exit_code == 1
    assert re.search(
        r"mine\.yaml:\d+: prediction\.when: 'chunked-prefil-off' is not one of this playbook's",
        r.output,
    )
