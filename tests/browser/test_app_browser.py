"""The app in a real browser: `streamlit run app.py` on loopback, driven by headless Chromium
from Debian's `chromium` package through Playwright's Python client (no browser download;
tests/browser/setup.sh installs the package when it is missing). Opens every page, brushes a
window on the timeline, follows a finding to a request's waterfall, and saves a screenshot of
each step under the artefact folder ($TRACEQ_TEST_ARTIFACTS, default test-artifacts/browser/).
Fails on a Streamlit exception, an error box, or a chart that draws no mark.

With TRACEQ_DOC_SCREENSHOTS=docs/img it also writes the README's screenshots there.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from PIL import Image
from playwright.sync_api import Page, expect, sync_playwright

from tests.app_helpers import APP, ROOT, ingest_sample, write_findings

CHROMIUM = "/usr/bin/chromium"
SETUP = Path(__file__).resolve().parent / "setup.sh"
ARTEFACTS = Path(os.environ.get("TRACEQ_TEST_ARTIFACTS") or ROOT / "test-artifacts" / "browser")
DOC_SHOTS = os.environ.get("TRACEQ_DOC_SCREENSHOTS")
PAGES = {"overview": "", "timeline": "timeline", "phases": "phases", "findings": "findings",
         "requests": "requests", "whatif": "whatif", "sql": "sql", "open": "open"}  # fmt: skip
"""Page name → URL path (the default page, the overview, lives at the root)."""
VIEWPORT = {"width": 1400, "height": 2400}
"""Tall, so a screenshot holds a whole page (Streamlit scrolls inside its own container)."""
DOC_CLIP = {"x": 0, "y": 0, "width": 1400, "height": 1000}
START_TIMEOUT_S = 90
RENDER_TIMEOUT_MS = 120_000
"""Wait for a page or a rerun this long: CI machines share their cores with other work."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chromium() -> str:
    if not os.access(CHROMIUM, os.X_OK):
        subprocess.run(["bash", str(SETUP)], check=False)
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} missing and {SETUP} could not install Debian's chromium")
    return CHROMIUM


@pytest.fixture(scope="module")
def server(tmp_path_factory, app_workdir):
    env = pytest.MonkeyPatch()
    work = tmp_path_factory.mktemp("browser")
    dataset = ingest_sample(app_workdir, env)  # once per session (tests/conftest.py)
    findings = write_findings(dataset, work / "findings.json")
    port = _free_port()
    command = [
        sys.executable, "-m", "streamlit", "run", str(APP),
        "--server.address", "127.0.0.1", "--server.port", str(port),
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
        "--server.fileWatcherType", "none", "--client.toolbarMode", "minimal",
        "--", str(dataset), "--findings", str(findings),
    ]  # fmt: skip
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    log_path = ARTEFACTS / "streamlit.log"
    log = log_path.open("w")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(f"{base}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"streamlit did not start: {log_path.read_text()[-2000:]}")
        time.sleep(0.5)
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()
    env.undo()


@pytest.fixture(scope="module")
def page(server):
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=_chromium(), headless=True, args=["--no-sandbox"]
        )
        tab = browser.new_page(viewport=VIEWPORT)
        tab.set_default_timeout(RENDER_TIMEOUT_MS)
        yield tab
        browser.close()


@pytest.fixture(autouse=True)
def last_view(request, page):
    """After each test, whatever happened, the page as it was (to read a failure in CI),
    with the app server's log beside it."""
    yield
    page.screenshot(path=str(ARTEFACTS / f"last-{request.node.name}.png"))


SETTLED = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
    if (document.querySelector('[data-testid="stSkeleton"]')) return false;
    // traceq/app/router.py ends every completed run with a marker naming its page and URL
    // parameters; between a run cut short by st.rerun() (a brush) or st.switch_page() (a
    // link) and the run that follows, no script runs either, but the marker on the page is
    // the previous run's and names another URL
    const marks = document.querySelectorAll('[data-traceq-rendered]');
    if (marks.length === 0) return false;
    const path = location.pathname.split('/').filter(Boolean).pop() || '';
    const url = Object.fromEntries(new URLSearchParams(location.search));
    for (const mark of marks) {
        if (mark.dataset.page !== path) return false;
        const drawn = JSON.parse(mark.dataset.query);
        const keys = new Set([...Object.keys(drawn), ...Object.keys(url)]);
        for (const k of keys) if (drawn[k] !== url[k]) return false;
    }
    const charts = document.querySelectorAll('[data-testid="stVegaLiteChart"]');
    return Array.from(charts).every(c => c.querySelector('svg g.role-mark, canvas'));
}"""
"""True once the page's last run is complete and drawn (no time-based guess)."""
NEXT_PAINT = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"


def settle(page: Page) -> None:
    """Wait until the last run the page asked for has completed and every chart has drawn,
    then for the next paint (screenshots show what the DOM holds)."""
    page.wait_for_selector('[data-testid="stApp"]')
    page.wait_for_function(SETTLED)
    page.evaluate(NEXT_PAINT)


def check(page: Page, name: str) -> int:
    """No exception or error box, no chart without marks; screenshot as `name`. Returns the
    number of charts on the page."""
    dialogs = page.get_by_role("dialog")
    assert dialogs.count() == 0, dialogs.first.inner_text()
    exceptions = page.locator('[data-testid="stException"]')
    assert exceptions.count() == 0, exceptions.first.inner_text()
    errors = page.locator('[data-testid="stAlertContentError"]')
    assert errors.count() == 0, errors.first.inner_text()
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    for i in range(charts.count()):
        marks = charts.nth(i).evaluate(
            """c => Array.from(c.querySelectorAll('g.role-mark'))
                .filter(g => !/brush/.test(g.getAttribute('class')))
                .reduce((n, g) => n + g.childElementCount, 0)"""
        )
        assert marks > 0, f"{name}: chart {i} draws no mark"
    page.screenshot(path=str(ARTEFACTS / f"{name}.png"))
    return charts.count()


def doc_shot(page: Page, name: str) -> None:
    """The README's screenshot (viewport only, 256 colours to stay small)."""
    if not DOC_SHOTS:
        return
    out = Path(DOC_SHOTS) / f"{name}.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out), clip=DOC_CLIP)
    image = Image.open(out).convert("RGB")
    image = image.resize((image.width * 3 // 4, image.height * 3 // 4), Image.LANCZOS)
    image.quantize(colors=256).save(out, optimize=True)


def test_every_page_renders(page, server):
    drawn = {}
    for name, path in PAGES.items():
        page.goto(f"{server}/{path}")
        settle(page)
        expect(page.locator("h1").first).to_be_visible()
        drawn[name] = check(page, f"page-{name}")
        if name == "overview":
            doc_shot(page, "overview")
    assert drawn["timeline"] >= 8 and drawn["phases"] >= 3 and drawn["overview"] >= 1, drawn
    assert drawn["whatif"] == 2, drawn  # TTFT p99 and SLO attainment against the rate


def test_brushing_the_timeline_filters_every_page(page, server):
    page.goto(f"{server}/timeline")
    settle(page)
    plot = page.locator(
        '[data-testid="stVegaLiteChart"] g.role-frame.root > g > path.background'
    ).first
    box = plot.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.05, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.2, y, steps=8)
    page.mouse.move(box["x"] + box["width"] * 0.3, y, steps=8)
    page.mouse.up()
    page.wait_for_url(re.compile(r"since=.*until="))
    settle(page)
    sidebar = page.locator('[data-testid="stSidebar"]')
    expect(sidebar).to_contain_text("Time filter")
    check(page, "timeline-brushed")
    # another page, through the sidebar's navigation: the filter holds there too
    page.locator('[data-testid="stSidebarNav"] a', has_text="Requests").click()
    page.wait_for_url(re.compile(r"/requests\?.*since="))
    settle(page)
    caption = page.get_by_text(re.compile(r"[\d,]+ requests match")).inner_text()
    matched = int(re.search(r"([\d,]+) requests match", caption).group(1).replace(",", ""))
    assert 0 < matched < 64, caption
    check(page, "requests-filtered")
    # the brushed window as a Perfetto trace, from the sidebar
    sidebar.get_by_role("button", name="Prepare Perfetto trace").click()
    with page.expect_download() as download:
        sidebar.get_by_role("button", name=re.compile(r"Download trace\.json")).click()
    trace = json.loads(Path(download.value.path()).read_bytes())
    slices = [e for e in trace["traceEvents"] if e.get("name") == "request"]
    assert len(slices) == matched
    sidebar.get_by_role("button", name="Clear time filter").click()
    page.wait_for_function("() => !location.search.includes('since=')")


def test_a_finding_leads_to_a_request_waterfall(page, server):
    page.goto(f"{server}/findings")
    settle(page)
    expect(page.get_by_text("KV-cache pressure").first).to_be_visible()
    check(page, "findings")
    doc_shot(page, "finding")
    button = page.get_by_role("button", name=re.compile(r"cmpl-")).first
    request_id = button.inner_text().strip().split()[-1]
    button.click()
    page.wait_for_url(re.compile(r"/phases\?.*request="))
    settle(page)
    assert request_id in page.url
    waterfall = page.locator('[data-testid="stVegaLiteChart"]', has_text=f"Request {request_id}")
    expect(waterfall).to_have_count(1)
    check(page, "waterfall")


def test_console_refuses_a_write_in_one_line(page, server):
    page.goto(f"{server}/sql")
    settle(page)
    editor = page.get_by_role("textbox", name="SQL")
    editor.fill("COPY (SELECT * FROM requests) TO '/tmp/traceq-browser-copy.csv'")
    page.get_by_role("button", name="Run").click()
    error = page.locator('[data-testid="stAlertContentError"] [data-testid="stMarkdownContainer"]')
    expect(error).to_contain_text("read-only")
    assert "\n" not in error.inner_text().strip()
    assert not Path("/tmp/traceq-browser-copy.csv").exists()
    page.screenshot(path=str(ARTEFACTS / "console-refused.png"))
    editor.fill("SELECT metric, p50, p99 FROM kpi_latency")
    page.get_by_role("button", name="Run").click()
    expect(page.get_by_text(re.compile(r"9 rows in"))).to_be_visible()
    settle(page)  # the refused COPY's error box stays on the page until this run completes
    check(page, "console")
