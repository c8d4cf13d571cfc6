"""The report's Headroom KPI (traceq/report/headroom.py): the max sustainable rate at the
report's SLO, kept in the baseline, so that a release which loses capacity at the same
latency fails the gate; a dataset the engine model cannot calibrate has no Headroom and one
sentence saying why, never an error."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

from tests.report_factory import make_dataset, parametric_healthy
from traceq.cli import cli
from traceq.ingest import ingest

REQUESTS = 400
REAL = Path(__file__).resolve().parent / "data" / "real" / "loadtest"


@pytest.fixture(scope="module")
def root(report_root: Path) -> Path:
    return report_root  # datasets shared with tests/test_report_gate.py (tests/conftest.py)


@pytest.fixture(scope="module")
def baseline(root: Path) -> Path:
    """`healthy` with i.i.d. traffic at seed 1, saved as a baseline by the command."""
    path = root / "headroom-parametric-1.json"
    ds = make_dataset(root, parametric_healthy(REQUESTS), 1)
    result = _report(ds, "--save-baseline", path)
    assert result.exit_code == 0, result.output
    return path


def _report(*args: object) -> Result:
    return CliRunner().invoke(cli, ["report", *map(str, args), "--no-findings"])


def _gate(ds: Path, baseline: Path, out: Path) -> tuple[Result, dict]:
    result = _report(ds, "--baseline", baseline, "--fail-on-regression", "-o", out)
    return result, json.loads(out.read_text())


def test_the_baseline_keeps_the_headroom_and_the_summary_says_it(baseline: Path) -> None:
    doc = orjson.loads(baseline.read_bytes())
    rate = doc["values"]["headroom_rps"]
    observed = doc["context"]["headroom"]["observed_rps"]
    assert rate > 5 * observed  # a healthy run at 2 req/s is far from its limit
    assert doc["context"]["headroom"]["low_confidence"] is False
    ds = make_dataset(baseline.parent, parametric_healthy(REQUESTS), 1)
    out = _report(ds).output
    line = next(x for x in out.splitlines() if "Headroom" in x).strip()
    assert line.startswith(f"Headroom {rate:,.2f} req/s, ")
    assert "95 % of requests would meet TTFT ≤ 2 s, TPOT ≤ 100 ms" in line


def test_another_healthy_run_keeps_its_headroom(root: Path, baseline: Path, tmp_path: Path) -> None:
    ds = make_dataset(root, parametric_healthy(REQUESTS), 3)
    result, doc = _gate(ds, baseline, tmp_path / "r.json")
    assert result.exit_code == 0, doc["regressed"]
    headroom = next(c for c in doc["comparison"] if c["kpi"] == "headroom_rps")
    assert headroom["verdict"] == "unchanged" and abs(headroom["rel"]) < 0.15


def test_lost_capacity_at_the_same_latency_fails_on_headroom_alone(
    root: Path, baseline: Path, tmp_path: Path
) -> None:
    """max_num_seqs 256 → 16: at 2 req/s no batch reaches 16, so no latency KPI moves, but
    the engine now queues at less than half the rate it sustained."""
    sc = parametric_healthy(REQUESTS)
    ds = make_dataset(root, replace(sc, engine=replace(sc.engine, max_num_seqs=16)), 2)
    result, doc = _gate(ds, baseline, tmp_path / "r.json")
    assert result.exit_code == 1, result.output
    assert doc["regressed"] == ["headroom_rps"]
    assert "REGRESSED headroom_rps" in result.output
    change = next(c for c in doc["comparison"] if c["kpi"] == "headroom_rps")
    assert change["rel"] < -0.15
    html = tmp_path / "r.html"
    assert _report(ds, "--baseline", baseline, "-o", html).exit_code == 0
    assert "Headroom (max sustainable rate)" in html.read_text()


def test_without_engine_limits_the_headroom_is_absent_with_a_reason(
    root: Path, baseline: Path, tmp_path: Path
) -> None:
    """Traces without the server log: no start-up line gives the engine's limits."""
    # requests given: a dataset of its own (make_dataset names it by seed and requests, not log)
    ds = make_dataset(root, parametric_healthy(REQUESTS), 5, requests=REQUESTS, log=False)
    result, doc = _gate(ds, baseline, tmp_path / "r.json")
    assert result.exit_code == 0, doc["regressed"]
    assert doc["kpis"]["headroom_rps"] is None
    note = doc["context"]["headroom"]["note"]
    assert note.startswith("No Headroom figure: engine limits missing: ") and note.endswith(".")
    assert note.count(". ") == 0 and "n/a" not in note and "--set" not in note
    assert note in result.output
    headroom = next(c for c in doc["comparison"] if c["kpi"] == "headroom_rps")
    assert headroom["verdict"] == "n/a"
    md = tmp_path / "r.md"
    assert _report(ds, "-o", md).exit_code == 0
    assert note in md.read_text()


def test_without_token_timing_the_headroom_is_absent_with_a_reason(tmp_path: Path) -> None:
    """A load test's client records (llmperf): no server timing to rebuild engine steps."""
    ds = tmp_path / "llmperf.tq"
    ingest([REAL / "llmperf"], ds)
    out = tmp_path / "r.json"
    result = _report(ds, "-o", out)
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["kpis"]["headroom_rps"] is None
    assert doc["context"]["headroom"]["note"].startswith("No Headroom figure: no request has")
    assert "Traceback" not in result.output


def test_no_headroom_skips_the_search(root: Path, tmp_path: Path) -> None:
    ds = make_dataset(root, parametric_healthy(REQUESTS), 1)
    out = tmp_path / "r.json"
    assert _report(ds, "--no-headroom", "-o", out).exit_code == 0
    doc = json.loads(out.read_text())
    assert doc["kpis"]["headroom_rps"] is None
    assert "not requested" in doc["context"]["headroom"]["note"]
