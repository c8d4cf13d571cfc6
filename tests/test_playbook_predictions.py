"""A playbook cites a prediction as its check: prefill-interference's incident says what
chunked prefill would do to this run's stalls, replayed by `traceq whatif` on the run's own
calibrated engine model (traceq/whatif/cite.py); a run whose cause is something else, or that
cannot be calibrated, gets no number."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.playbook_helpers import SAMPLES, ingest_folder
from tests.test_playbooks_cli import invoke
from traceq.playbooks import load_catalog


@pytest.fixture(scope="module")
def interference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pi")
    return ingest_folder(SAMPLES / "prefill-interference", folder / "pi.tq")


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


def test_the_prediction_is_in_the_json_finding(interference):
    r = invoke("diagnose", str(interference), "--format", "json")
    finding = next(f for f in json.loads(r.output)["findings"] if f["id"] == "prefill-interference")
    assert finding["prediction"].startswith("with chunked_prefill=on, traceq whatif predicts")
    others = [f for f in json.loads(r.output)["findings"] if f["id"] != "prefill-interference"]
    assert not any(f["prediction"] for f in others)


def test_a_burst_of_arrivals_cites_what_twice_the_replicas_would_do(tmp_path):
    ds = ingest_folder(SAMPLES / "queue-overload", tmp_path / "q.tq")
    r = invoke("diagnose", str(ds), "--format", "json")
    by_id = {f["id"]: f for f in json.loads(r.output)["findings"]}
    found = re.match(
        r"with replicas=2 \(twice the run's\), traceq whatif predicts p99 TTFT at ([\d.]+) s "
        r"\(the run as it was replays at ([\d.]+) s; observed ([\d.]+) s\)",
        by_id["ttft-queueing"]["prediction"],
    )
    assert found, by_id["ttft-queueing"]["prediction"]
    predicted, asis, observed = (float(x) for x in found.groups())
    assert abs(asis - observed) <= 0.2 * observed and predicted * 2 <= asis
    assert not any(f["prediction"] for pid, f in by_id.items() if pid != "ttft-queueing")


def test_no_prediction_where_the_cause_is_not_the_setting(tmp_path):
    # kv-pressure: ttft-queueing is its consequence, queued behind a full cache, not a burst
    ds = ingest_folder(SAMPLES / "kv-pressure", tmp_path / "kv.tq")
    r = invoke("diagnose", str(ds), "--format", "json")
    assert not any(f["prediction"] for f in json.loads(r.output)["findings"])


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
