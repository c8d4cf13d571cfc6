"""The engine's contract: every schema problem reported at once, a broken playbook is an
`error` that stops nothing else, missing data is `not_applicable` naming the data, and a
local incident (20 bad minutes in 8 healthy hours) fires with its window."""

from __future__ import annotations

import textwrap
from pathlib import Path

import polars as pl
import pytest
import yaml

from tests.playbook_helpers import SAMPLES
from traceq.dataset import Dataset
from traceq.findings import Diagnosis
from traceq.ingest import ingest
from traceq.playbooks import Playbook, diagnose, load_catalog, load_dir
from traceq.session import Session
from traceq.writer import SourceWriter

NS = 1_000_000_000
T0 = 1_750_000_000 * NS


def test_schema_reports_every_problem_with_file_and_field():
    doc = yaml.safe_load(
        textwrap.dedent(
            """
            id: Bad_Id
            severity: urgent
            params:
              x: {default: 1, unit: ms}
            symptom: {sql: "SELECT $y AS fired"}
            causes: []
            """
        )
    )
    pb, issues = Playbook.from_dict(doc, source="bad.yaml")
    assert pb is None
    fields = {i.field for i in issues}
    assert {"id", "severity", "title", "doc", "params.x.doc", "params.x.reason", "causes",
            "fixes", "references", "symptom.figures", "requires"} <= fields  # fmt: skip
    assert any("$y is not a declared parameter" in i.message for i in issues)
    assert all(i.file == "bad.yaml" for i in issues)


def test_loader_reports_bad_yaml_and_duplicate_ids(tmp_path):
    builtin = load_catalog().by_id()["kv-pressure"].source
    text = Path(builtin).read_text()
    (tmp_path / "a.yaml").write_text(text)
    (tmp_path / "b.yaml").write_text(text)
    (tmp_path / "c.yaml").write_text("id: [unclosed\n")
    report = load_dir(tmp_path)
    messages = [str(i) for i in report.issues]
    assert any("c.yaml: line" in m and "not valid YAML" in m for m in messages)
    assert any("b.yaml: id: 'kv-pressure' is also defined in" in m for m in messages)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    target = tmp_path_factory.mktemp("h") / "healthy.tq"
    ingest([SAMPLES / "healthy" / "traces.otlp.jsonl"], target)
    return target


def test_broken_playbook_is_an_error_and_the_others_still_run(healthy, tmp_path):
    text = Path(load_catalog().by_id()["ttft-queueing"].source).read_text()
    broken = text.replace("FROM window_stats AS w\n", "FROM no_such_view AS w\n")
    assert broken != text
    (tmp_path / "broken.yaml").write_text(broken)
    report = load_catalog(tmp_path)
    with Session(healthy) as s:
        d = diagnose(s, report.playbooks)
    by_id = {f.id: f for f in d.findings}
    assert by_id["ttft-queueing"].status == "error"
    assert "no_such_view" in by_id["ttft-queueing"].message
    assert len(d.findings) == 15
    assert by_id["tokenizer-overhead"].status == "pass"


def test_missing_data_is_not_applicable_and_names_it(healthy):
    with Session(healthy) as s:
        d = diagnose(s, load_catalog().playbooks)
    by_id = {f.id: f for f in d.findings}
    gpu = by_id["gpu-underutilized"]
    assert gpu.status == "not_applicable"
    assert "GPU utilisation samples" in gpu.message
    assert "error" not in {f.status for f in d.findings}


def _incident_dataset(root) -> Dataset:
    """8 h of one request every 10 s, queue 20 ms; from 3 h on, 20 minutes of 3 s queues
    with the engine reporting requests waiting."""
    ds = Dataset(root / "incident.tq", create=True)
    n = 8 * 360
    t = [T0 + i * 10 * NS for i in range(n)]
    bad = [3 * 3600 * NS <= x - T0 < (3 * 3600 + 1200) * NS for x in t]
    queue = [3 * NS if b else 20_000_000 for b in bad]
    requests = pl.DataFrame(
        {
            "request_id": [f"r{i}" for i in range(n)],
            "view": "server",
            "t_arrival": t,
            "t_tokenized": [x + 2_000_000 for x in t],
            "t_queued": [x + 2_000_000 for x in t],
            "t_scheduled": [x + 2_000_000 + q for x, q in zip(t, queue, strict=True)],
            "t_first_token": [x + 402_000_000 + q for x, q in zip(t, queue, strict=True)],
            "t_last_token": [x + 1_202_000_000 + q for x, q in zip(t, queue, strict=True)],
            "prompt_tokens": 500,
            "output_tokens": 100,
        }
    )
    engine = pl.DataFrame(
        {
            "ts": [x + 5 * NS for x in t],
            "running": 4,
            "waiting": [8 if b else 0 for b in bad],
            "kv_usage": 0.3,
        }
    )
    w = SourceWriter(ds, "incident00000000")
    w.write("requests", requests)
    w.write("engine_stats", engine)
    w.commit({"path": "generated", "format": "test"})
    return ds


def test_twenty_bad_minutes_in_eight_healthy_hours_fire_with_their_window(tmp_path):
    ds = _incident_dataset(tmp_path)
    pb = load_catalog().by_id()["ttft-queueing"]
    with Session(ds) as s:
        whole = s.query("SELECT sum(queue_ms) / sum(ttft_ms) AS share FROM request_phases")
        d: Diagnosis = diagnose(s, [pb])
    assert whole["share"][0] < 0.5  # the whole-run share alone would not fire
    f = d.findings[0]
    assert f.status == "fail", f.message
    assert len(f.windows) == 1
    w = f.windows[0]
    start, end = T0 + 3 * 3600 * NS, T0 + (3 * 3600 + 1200) * NS
    window_ns = 300 * NS
    assert start - window_ns <= w["start"] <= start and end <= w["end"] <= end + window_ns
    assert w["ttft_p99_in_ms"] > 3000 and w["ttft_p99_out_ms"] < 500
    confirmed = {c.id for c in f.causes if c.status == "confirmed"}
    assert {"waiting-requests", "concurrency-cap"} <= confirmed  # 4 running, 8 waiting
    assert "kv-saturated" not in confirmed
    assert f.example_requests and f.evidence[0].rows


def test_the_worst_window_is_reported_when_windows_tie_on_score(healthy, tmp_path):
    """Seven separate windows fire with the same score and the longest one last: the finding
    reports that one as its worst, among the five it keeps (a tie once left it out and
    stopped the playbook)."""
    text = Path(load_catalog().by_id()["ttft-queueing"].source).read_text()
    symptom = text[text.index("  sql: |", text.index("symptom:")) : text.index("  figures: |")]
    ties = (
        "  sql: |\n"
        "    SELECT g * 10000000000000 AS ts,\n"
        "           g * 10000000000000 + CASE WHEN g = 7 THEN 900000000000 ELSE 100000000000 END\n"
        "               AS ts_end,\n"
        "           true AS fired, 1.0 AS score\n"
        "    FROM range(1, 8) AS t(g)\n"
    )
    (tmp_path / "ties.yaml").write_text(text.replace(symptom, ties))
    with Session(healthy) as s:
        d = diagnose(s, load_catalog(tmp_path).playbooks)
    f = {f.id: f for f in d.findings}["ttft-queueing"]
    assert f.status in ("fail", "warn"), f.message
    assert len(f.windows) == 5
    (worst,) = [w for w in f.windows if w.get("worst")]
    assert worst["end"] - worst["start"] == 900 * 10**9
