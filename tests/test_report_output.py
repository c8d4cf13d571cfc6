"""`traceq report` output: one self-contained HTML file that Chromium renders offline with
every chart, Markdown with the same charts, JSON, baselines, findings ordering, --trend and the
exit code 2 on bad input, and the findings led by their incidents."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import escape
from pathlib import Path

import numpy as np
import orjson
import pytest
from click.testing import CliRunner
from PIL import Image

from tests.report_factory import make_dataset
from traceq.cli import cli
from traceq.findings import Cause, Diagnosis, Finding, Incident
from traceq.ingest import ingest
from traceq.playbooks.story import worst_tail
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
    # every figure in its unit: value, baseline, change and interval
    tpot = next(line for line in text.splitlines() if line.startswith("| TPOT p95 |"))
    assert re.fullmatch(
        r"\| TPOT p95 \| [\d.,]+ ms \| [\d.,]+ ms \| \+[\d.,]+ ms \(\+[\d.,]+ %\) "
        r"\| \[[-+\d.,]+, [-+\d.,]+\] ms \| \*\*regressed\*\* \|",
        tpot,
    ), tpot
    assert re.search(r"\| Throughput \(requests\) \| [\d.,]+ req/s \|", text)
    # the run's time range to the second, not ISO with µs
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d → [\d:]+ UTC \([\d.]+ (s|min)\)", text)


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


def _diagnosis() -> Diagnosis:
    """Two incidents as the engine reports them, worst first: tbt-jitter (critical) and
    kv-pressure (high) with ttft-queueing as its consequence; one playbook lacked its data."""
    kv = Finding(id="kv-pressure", status="fail", severity="high", title="KV-cache pressure",
                 message="KV 100 % for 40 s", causes=[Cause(id="c", title="KV budget too "
                 "small", status="confirmed", strength=0.9, evidence="5 k tokens")],
                 fixes=["lower max_num_seqs"])  # fmt: skip
    jitter = Finding(id="tbt-jitter", status="fail", severity="critical", title="Choppy",
                     message="stalls")  # fmt: skip
    queueing = Finding(id="ttft-queueing", status="warn", severity="high", see="kv-pressure",
                       title="Queueing", message="queueing is 94% of TTFT")  # fmt: skip
    quiet = Finding(id="slow-decode", status="pass", severity="high", title="ok", message="")
    gpu = Finding(id="gpu-underutilized", status="not_applicable", severity="medium",
                  title="GPU", message="not enough data: needs GPU utilisation samples "
                  "(nvidia-smi or DCGM) (none found)")  # fmt: skip
    t0 = 1_750_000_000_000_000_000
    incidents = [
        Incident(root="tbt-jitter", root_cause=None, title="Choppy", severity="critical",
                 start="", end="", headline="", summary="stalls", start_ns=t0,
                 end_ns=t0 + 20 * 10**9),
        Incident(root="kv-pressure", root_cause="c", title="KV-cache pressure",
                 severity="high", start="", end="", headline="[high] KV-cache pressure — "
                 "from 2025-06-15 15:06:40 UTC for 40 s: 30 of 40 requests (75%) missed an "
                 "SLO or failed", summary="", consequences=["ttft-queueing"], confidence=0.9,
                 fix="lower max_num_seqs", impact={"requests_in": 40, "missed_in": 30}),
    ]  # fmt: skip
    return Diagnosis([jitter, quiet, kv, queueing, gpu], "kv", "h", "0.1.0", "now", 0.1,
                     incidents=incidents)  # fmt: skip


def test_incidents_lead_worst_first_and_new_ones_are_marked(data):
    report = build_report(data["kv"], baseline=data["baseline"], findings=False)
    # saved before the tail was explained: no `tail`, in the diagnosis or in its incidents
    saved = _diagnosis().to_dict()
    del saved["tail"]
    for i in saved["incidents"]:
        del i["tail"]
    report.diagnosis = Diagnosis.from_dict(saved)
    report.findings_note = ""
    report.findings_evaluated = True
    # a baseline saved while the playbooks did not run: nothing can be new against it
    report.baseline["findings_evaluated"] = False
    assert [new for _, new in report.incidents()] == [False, False]
    report.baseline["findings_evaluated"] = True
    report.baseline["incidents"] = [{"root": "tbt-jitter"}]
    assert [(i.root, new) for i, new in report.incidents()] == [
        ("tbt-jitter", False), ("kv-pressure", True)]  # fmt: skip
    # a baseline from before incidents names its failed findings: the same roots are known
    del report.baseline["incidents"]
    report.baseline["findings"] = [{"id": "tbt-jitter", "severity": "medium", "title": "x"}]
    assert [(f.id, new) for f, new in report.findings()] == [
        ("tbt-jitter", False), ("kv-pressure", True)]  # fmt: skip
    html = render_html(report, [])
    assert html.index("Choppy") < html.index("KV-cache pressure")
    assert '<span class="tag">NEW</span><span class="badge b-high">high</span> Incident 2' in html
    assert "KV budget too small — 5 k tokens (confidence 0.90)" in html
    assert "lower max_num_seqs" in html
    md = render_md(report, [], None)
    section = md[md.index("## Incidents") : md.index("## KPIs")]
    assert section.index("### Incident 1 [critical] Choppy") < section.index(
        "### **NEW** Incident 2 [high] KV-cache pressure (`kv-pressure`)")  # fmt: skip
    assert "From 2025-06-15 15:06:40 UTC for 40 s: 30 of 40 requests (75%) missed" in section
    # the consequence is folded under its root, never listed as a failure of its own
    assert [line for line in section.splitlines() if "ttft-queueing" in line] == [
        "  - └ `ttft-queueing` (warn, see `kv-pressure`): queueing is 94% of TTFT"]  # fmt: skip
    assert html.count("ttft-queueing") == 1
    # the playbook without its data: one line naming the input that would enable it
    assert "Not run, for lack of data: GPU utilisation samples (nvidia-smi or DCGM) → " \
           "gpu-underutilized." in section  # fmt: skip
    # no tail in the diagnosis: no tail line under an incident, no section for the run's
    assert "Tail:" not in md and "The run's tail" not in md
    assert ">tail<" not in html and "The run's tail" not in html
    doc = report.to_dict()
    assert doc["tail"] == []
    assert [(i["root"], i["new"]) for i in doc["incidents"]] == [
        ("tbt-jitter", False), ("kv-pressure", True)]  # fmt: skip
    assert [f["id"] for f in doc["findings"]] == ["tbt-jitter", "kv-pressure"]
    assert doc["not_run"] == {"GPU utilisation samples (nvidia-smi or DCGM)": ["gpu-underutilized"]}
    # the baseline keeps the incidents, each with its consequences, and their roots only
    base = report.baseline_doc()
    assert [(i["root"], i["consequences"]) for i in base["incidents"]] == [
        ("tbt-jitter", []), ("kv-pressure", ["ttft-queueing"])]  # fmt: skip
    assert [f["id"] for f in base["findings"]] == ["tbt-jitter", "kv-pressure"]


@pytest.mark.parametrize("fault", ["warm-up-skew", "prefill-interference"])
def test_report_leads_with_the_injected_fault(data, fault):
    """On a generated fault (the datasets test_report_gate.py uses), the report's findings
    open with the incident whose root is the fault; what it explains is folded under it."""
    ds = make_dataset(data["root"], fault, 1)
    report = build_report(ds, baseline=data["baseline"])
    md = render_md(report, [], None)
    section = md[md.index("## Incidents") : md.index("## KPIs")]
    headings = [line for line in section.splitlines() if line.startswith("### ")]
    assert headings[0].startswith("### **NEW** Incident 1 [")
    assert headings[0].endswith(f"(`{fault}`)")
    d = report.diagnosis
    explained = [f.id for f in d.findings if f.see]
    assert d.incidents[0].root == fault and d.incidents[0].consequences
    assert sorted(explained) == sorted(c for i in d.incidents for c in i.consequences)
    for cid in explained:  # each only as a folded line under its root
        lines = [line for line in section.splitlines() if f"`{cid}`" in line]
        assert len(lines) == 1 and lines[0].startswith(f"  - └ `{cid}` (warn, see"), lines
    html = render_html(report, [])
    incidents = html[html.index("<h2>Incidents</h2>") : html.index("<h2>KPIs</h2>")]
    first = incidents[incidents.index("<h3>") : incidents.index("</h3>")]
    assert f"<code>{fault}</code>" in first and "Incident 1 ·" in first
    for cid in explained:
        assert incidents.count(f"<code>{cid}</code>") == 1
        assert f"<li>└ <code>{cid}</code>" in incidents
    assert [f.id for f, _ in report.findings()] == [i.root for i in d.incidents]
    assert [i["root"] for i in report.baseline_doc()["incidents"]] == [i.root for i in d.incidents]
    # the tail: under the incident, the line of the metric it hurt most, as `diagnose` prints it
    worst = worst_tail(d.incidents[0])
    assert worst is not None and worst["line"].startswith("P99 ")
    assert f"- **Tail:** {worst['line']}" in section.split("\n### ")[1].splitlines()
    block = incidents[incidents.index('<div class="incident">') :]
    block = block[: block.index("</div>")]
    assert f"<td class='l'>tail</td><td class='l'>{escape(worst['line'])}</td>" in block
    # ...then the whole run's, one row per metric: p99 in human units and the sentence
    run = md[md.index("## The run's tail") : md.index("## KPIs")]
    rows = [line for line in run.splitlines() if line.startswith("| ") and " P99 " in line]
    assert [r.split(" | ")[0] for r in rows] == ["| TTFT", "| TPOT", "| e2e"]
    assert re.fullmatch(r"\| TTFT \| [\d.,]+ (ms|s) \| P99 TTFT [\d.,]+ (ms|s) \(slowest \d+ "
                        r"of [\d,]+ requests, from .+\): \d+ % .+ \|", rows[0])  # fmt: skip
    assert all(f"| {m['line']} |" in run for m in d.tail)
    tail = html[html.index("<h2>The run's tail</h2>") : html.index("<h2>KPIs</h2>")]
    assert all(f"<td class='l'>{escape(m['line'])}</td>" in tail for m in d.tail)
    assert report.to_dict()["tail"] == d.tail
    # the regression headline speaks in human units
    assert re.search(r"TTFT p95 \+[\d.,]+ (ms|s) \(\+[\d,]+ %\)", md)


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
    assert "TPOT p95" in r.output and "tpot_p95_ms" not in r.output  # labels, not keys
    assert re.search(r"\| [\d.,]+ ms +\|", lines[0]) and " %" in lines[0]  # in their units


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
