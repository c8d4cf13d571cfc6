"""`traceq report` output: one self-contained HTML file that Chromium renders offline with
every chart, Markdown with the same charts, JSON, baselines, findings ordering, --trend and the
exit code 2 on bad input."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import orjson
import pytest
from click.testing import CliRunner
from PIL import Image

from tests.report_factory import make_dataset
from traceq.cli import cli
from traceq.findings import Cause, Diagnosis, Finding
from traceq.ingest import ingest
from traceq.report import build_report
from traceq.report.charts import build as build_charts
from traceq.report.kpis import KPIS
from traceq.report.render_html import render_html
from traceq.report.render_md import render_md
from traceq.report.sample import bounded_sample
from traceq.session import Session

ARTIFACTS = Path(__file__).resolve().parent.parent / ".artifacts" / "report"
SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
CHART_IDS = ("latency", "phases", "profile", "timeline")


@pytest.fixture(scope="module")
def data(report_root):
    root = report_root  # datasets shared with test_report_gate.py (tests/conftest.py)
    healthy = make_dataset(root, "healthy", 1)
    kv = make_dataset(root, "kv-pressure", 1)
    baseline = root / "healthy.json"
    runner = CliRunner()
    r = runner.invoke(cli, ["report", str(healthy), "--save-baseline", str(baseline)])
    assert r.exit_code == 0, r.output
    html = root / "kv.html"
    r = runner.invoke(cli, ["report", str(kv), "--baseline", str(baseline), "-o", str(html)])
    assert r.exit_code == 0, r.output
    return {"root": root, "healthy": healthy, "kv": kv, "baseline": baseline, "html": html}


def test_html_is_one_file_with_no_external_reference(data):
    text = data["html"].read_text()
    assert "<script" not in text.lower()
    assert "<link" not in text.lower()
    assert "@import" not in text and "@font-face" not in text
    refs = re.findall(r"""(?:src|href|xlink:href)\s*=\s*["']([^"']*)["']""", text)
    assert all(ref.startswith("#") for ref in refs), refs
    assert not re.search(r"url\(\s*['\"]?(?!#)", text)  # only url(#clip) inside the SVGs
    assert text.count("<svg") >= len(CHART_IDS)
    for cid in CHART_IDS:
        assert f'id="{cid}"' in text
    # what a reader needs to see first: the verdict with the regressed KPIs
    assert "REGRESSION in" in text and "TTFT p95" in text


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium is required for this test: apt-get install -y chromium")
    return path


def _screenshot(page: Path, png: Path, height: int) -> None:
    """Headless Chromium in a network namespace with no interface (unshare -n): nothing can be
    fetched; where unshare is not allowed, a proxy that refuses every connection."""
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           f"--window-size=1100,{height}", f"--screenshot={png}", page.as_uri()]  # fmt: skip
    offline = ["unshare", "-n", *cmd]
    r = subprocess.run(offline, capture_output=True, timeout=120, check=False)
    if r.returncode != 0 or not png.exists():
        cmd[1:1] = ["--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>"]
        subprocess.run(cmd, capture_output=True, timeout=120, check=True)
    assert png.exists()


def _ink(png: Path) -> tuple[float, int]:
    """Share of non-white pixels, and pixels of the charts' blue (#1f5fa8)."""
    px = np.asarray(Image.open(png).convert("RGB"), dtype=np.int32)
    ink = (px.sum(axis=2) < 720).mean()
    r, g, b = px[..., 0], px[..., 1], px[..., 2]
    blue = int(((abs(r - 0x1F) < 40) & (abs(g - 0x5F) < 40) & (b > 0x80)).sum())
    return float(ink), blue


def test_chromium_shows_every_chart_offline(data):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    full = ARTIFACTS / "report.png"
    _screenshot(data["html"], full, 4000)
    assert _ink(full)[0] > 0.03
    text = data["html"].read_text()
    for cid in CHART_IDS:
        # the same file with everything but one chart hidden: that chart alone must paint
        page = data["root"] / f"only-{cid}.html"
        page.write_text(text.replace(
            "</style>", f"body>*:not(#{cid}){{display:none}}</style>"))  # fmt: skip
        png = ARTIFACTS / f"chart-{cid}.png"
        _screenshot(page, png, 900)
        share, blue = _ink(png)
        assert share > 0.01 and blue > 200, (cid, share, blue)


def test_markdown_embeds_the_same_charts(data):
    md = data["root"] / "kv.md"
    r = CliRunner().invoke(cli, ["report", str(data["kv"]), "--baseline", str(data["baseline"]),
                                 "-o", str(md)])  # fmt: skip
    assert r.exit_code == 0, r.output
    text = md.read_text()
    html = data["html"].read_text()
    for cid in CHART_IDS:
        assert f"](kv_files/{cid}.svg)" in text
        svg = (data["root"] / "kv_files" / f"{cid}.svg").read_text()
        assert svg.startswith("<svg") and svg[:2000] in html
    assert "| TPOT p95 |" in text and "**regressed**" in text


def test_json_report_and_baseline(data):
    out = data["root"] / "kv.json"
    r = CliRunner().invoke(cli, ["report", str(data["kv"]), "--baseline", str(data["baseline"]),
                                 "-o", str(out), "--slo", "ttft_ms=500,tpot_ms=50"])  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["params"]["slo"] == {"ttft_ms": 500.0, "tpot_ms": 50.0, "e2e_ms": None}
    assert set(doc["kpis"]) == {k.name for k in KPIS}
    by_kpi = {c["kpi"]: c for c in doc["comparison"]}
    assert by_kpi["peak_kv_usage"]["verdict"] == "regressed"
    assert "ttft_p95_ms" in doc["regressed"]
    assert doc["kpis"]["peak_kv_usage"] == pytest.approx(1.0)
    assert [p["phase"] for p in doc["phases"]] == ["tokenize", "queue", "prefill", "decode",
                                                   "residual"]  # fmt: skip
    base = orjson.loads(data["baseline"].read_bytes())
    assert base["kind"] == "traceq-baseline"
    assert base["dataset_hash"].startswith("sha256:") and base["traceq_version"]
    assert base["time_range"]["start_ns"] < base["time_range"]["end_ns"]
    assert len(base["samples"]["requests"]["tpot_ms"]) == base["context"]["requests"] == 64


def test_new_findings_are_listed_first(data):
    report = build_report(data["kv"], baseline=data["baseline"], findings=False)
    report.baseline["findings"] = [{"id": "tbt-jitter", "severity": "medium", "title": "x"}]
    kv = Finding(id="kv-pressure", status="fail", severity="high", title="KV-cache pressure",
                 message="KV 100 % for 40 s", causes=[Cause(id="c", title="KV budget too "
                 "small", status="confirmed", strength=0.9, evidence="5 k tokens")],
                 fixes=["lower max_num_seqs"])  # fmt: skip
    jitter = Finding(id="tbt-jitter", status="fail", severity="critical", title="Choppy",
                     message="stalls")  # fmt: skip
    quiet = Finding(id="slow-decode", status="pass", severity="high", title="ok", message="")
    report.diagnosis = Diagnosis([jitter, quiet, kv], "kv", "h", "0.1.0", "now", 0.1)
    report.findings_note = ""
    # a baseline saved while the playbooks did not run: nothing can be new against it
    report.baseline["findings_evaluated"] = False
    assert [new for _, new in report.findings()] == [False, False]
    report.baseline["findings_evaluated"] = True
    assert [(f.id, new) for f, new in report.findings()] == [
        ("kv-pressure", True), ("tbt-jitter", False)]  # fmt: skip
    html = render_html(report, [])
    assert html.index("KV-cache pressure") < html.index("Choppy")
    assert '<span class="tag">NEW</span>KV-cache pressure' in html
    assert "KV budget too small" in html and "lower max_num_seqs" in html
    md = render_md(report, [], None)
    assert "- **NEW** **KV-cache pressure**" in md
    assert json.dumps(report.to_dict()["findings"][0]["new"]) == "true"


def test_without_the_engine_the_report_says_so(data):
    report = build_report(data["healthy"])
    try:
        import traceq.playbooks  # noqa: F401
    except ImportError:
        assert "not installed" in report.findings_note
        assert report.diagnosis.findings == []


def test_trend_of_saved_baselines(data, tmp_path):
    hist = tmp_path / "history"
    hist.mkdir()
    runner = CliRunner()
    for name, ds in (("2025-06-14", data["healthy"]), ("2025-06-15", data["kv"])):
        r = runner.invoke(cli, ["report", str(ds), "--no-findings", "--save-baseline",
                                str(hist / f"{name}.json")])  # fmt: skip
        assert r.exit_code == 0, r.output
    (hist / "notes.json").write_text("{}")  # not a baseline: skipped
    r = runner.invoke(cli, ["report", "--trend", str(hist), "--last", "5"])
    assert r.exit_code == 0, r.output
    lines = [line for line in r.output.splitlines() if line.startswith("| 2025")]
    assert [line.split("|")[1].strip() for line in lines] == ["2025-06-14", "2025-06-15"]
    assert "tpot_p95_ms" in r.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{missing}"], "not a traceq dataset"),
        (["{ds}", "--baseline", "{bad}"], "not a traceq baseline"),
        (["{ds}", "--thresholds", "{thr}"], "unknown KPI"),
        (["{ds}", "-o", "x.pdf"], "-o must end in"),
        (["{ds}", "--slo", "ttft=3"], "--slo expects"),
        ([], "give DATASET"),
        (["{gpu_only}"], "has no requests"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(data, tmp_path, args, message):
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "something else"}')
    thr = tmp_path / "thr.yaml"
    thr.write_text("kpis:\n  tpot_p42_ms: {abs: 1}\n")
    gpu_only = tmp_path / "gpu.tq"
    if "{gpu_only}" in args:  # GPU samples only: nothing a report could be about
        ingest([SAMPLES / "healthy" / "nvidia-smi.csv"], gpu_only)
    fill = {"missing": tmp_path / "nope", "ds": data["healthy"], "bad": bad, "thr": thr,
            "gpu_only": gpu_only}  # fmt: skip
    r = CliRunner().invoke(cli, ["report", *(a.format(**fill) for a in args)])
    assert r.exit_code == 2
    assert message in r.output
    assert "Traceback" not in r.output


def test_charts_render_without_a_baseline(data):
    report = build_report(data["healthy"], findings=False)
    charts = build_charts(report.measurement, None)
    assert [c.id for c in charts] == list(CHART_IDS)
    # ids are prefixed per chart: two charts on one page share no element id
    ids = [re.findall(r'id="([^"]+)"', c.svg) for c in charts]
    flat = [i for group in ids for i in group]
    assert len(flat) == len(set(flat))


@pytest.mark.parametrize(
    ("name", "params", "count"),
    [
        ("report_sample_requests", {"slo_ttft_ms": 2000.0, "slo_tpot_ms": 100.0,
                                    "slo_e2e_ms": None}, "SELECT count(*) FROM request_phases"),
        ("report_sample_gaps", {}, "SELECT count(tbt_ms) FROM token_gaps"),
    ],
)  # fmt: skip
def test_a_sample_is_the_same_whatever_share_of_rows_is_sorted(data, name, params, count):
    """The baseline's samples sort only the rows under a hash threshold (traceq/report/sample.py):
    with a threshold far too low (raised until enough rows pass) or none, the same rows."""
    with Session(data["healthy"]) as s:
        rows = s.query(count).item()
        cap = rows // 3
        args = (s, name, {**params, "seed": 7}, rows, cap)
        tight = bounded_sample(*args, margin=0.01)
        usual = bounded_sample(*args)
        everything = bounded_sample(*args, margin=rows)
    assert tight.height == cap
    assert tight.equals(usual) and tight.equals(everything)
