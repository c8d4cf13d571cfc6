"""The Streamlit app, page by page, through `streamlit.testing` on a bundled scenario: no
exception, the widgets and figures a user would look for, the time filter honoured, the
console read-only. (tests/browser/ drives the same app in a real browser.)"""

from __future__ import annotations

import importlib.util

import pytest
from streamlit.testing.v1 import AppTest

from tests.app_helpers import (
    APP,
    E2E_TAIL,
    ROOT,
    TPOT_TAIL,
    TTFT_TAIL,
    ingest_sample,
    write_findings,
)
from traceq.app import data, shipped, state
from traceq.session import Session

TIMEOUT = 90


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, app_workdir):
    env = pytest.MonkeyPatch()
    path = ingest_sample(app_workdir, env)  # once per session (tests/conftest.py)
    findings = write_findings(path, tmp_path_factory.mktemp("findings") / "findings.json")
    env.setenv(state.ENV_FINDINGS, str(findings))
    yield path
    env.undo()


def open_app(dataset, page: str | None = None, **params: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.query_params["dataset"] = str(dataset)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(f"traceq/app/pages/{page}.py").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def charts(at: AppTest) -> list:
    return list(at.get("vega_lite_chart"))


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_overview_kpis_match_the_views(dataset):
    at = open_app(dataset)
    assert at.title[0].value == "Overview"
    shown = metrics(at)
    for label in (
        "TTFT p50",
        "TTFT p99",
        "TPOT p99",
        "TBT p99",
        "e2e p99",
        "Throughput (req/s)",
        "Goodput (req/s)",
        "SLO attainment",
        "Error rate",
        "Cost $/1M tokens",
    ):
        assert shown[label] not in ("", "–"), label
    with Session(dataset) as s:
        p99 = s.query("SELECT p99 FROM kpi_latency WHERE metric = 'ttft_ms'").item()
        n = s.query("SELECT count(*) FROM request_phases").item()
    assert shown["TTFT p99"] == f"{p99 / 1000:,.1f} s"
    assert f"{n:,} requests" in at.caption[0].value
    # the incidents, worst first, each naming what it explains (no line of their own), the
    # playbooks that lacked their data on one line, and the sources with quarantined records
    kv = [m.value for m in at.markdown if "KV-cache pressure" in m.value]
    assert len(kv) == 1 and "-badge[high]" in kv[0] and "Explains `ttft-queueing`" in kv[0]
    assert not any("queueing" in m.value for m in at.markdown if m.value not in kv)
    assert "→ gpu-underutilized" in " ".join(c.value for c in at.caption)
    sources = at.dataframe[0].value
    assert {"path", "format", "quarantined"} <= set(sources.columns)
    assert "vllm.log" in " ".join(sources["path"].to_list())
    # what reaches the browser: one chart and the sources table, each within the bound
    items = shipped.rendered(at)
    assert sorted(i.kind for i in items) == ["chart", "dataframe"], items
    assert all(0 < i.rows <= shipped.ROW_BOUND for i in items), items


def test_sidebar_slo_changes_attainment(dataset):
    at = open_app(dataset)
    before = metrics(at)["SLO attainment"]
    at.number_input(key="slo_ttft_ms").set_value(1e7)
    at.number_input(key="slo_e2e_ms").set_value(1e7)
    at.number_input(key="slo_tpot_ms").set_value(1e7).run()
    assert metrics(at)["SLO attainment"] == "100.0 %" != before


def test_timeline_draws_every_series_bounded(dataset):
    at = open_app(dataset, "timeline")
    drawn = charts(at)
    titles = " ".join(c.proto.spec for c in drawn)
    for title in (
        "Requests arriving",
        "TTFT",
        "TBT",
        "KV-cache usage",
        "SM and DRAM",
        "power",
        "SM clock",
    ):
        assert title in titles, title
    # every chart and table on the page, counted as bench/app_render.py counts them on 1 M
    # requests: each within the bound, although this dataset has more token gaps than that
    with Session(dataset) as s:
        assert s.query("SELECT count(*) FROM token_gaps").item() > shipped.ROW_BOUND
    items = shipped.rendered(at)
    assert len(items) == len(drawn)  # the timeline has no table
    assert not shipped.over_bound(items), items
    assert all(0 < i.rows <= 2_000 for i in items), items
    assert all('"name":"window"' in c.proto.spec.replace(" ", "") for c in drawn)


def test_time_filter_from_the_url_is_honoured_everywhere(dataset):
    with Session(dataset) as s:
        lo, hi = s.query("SELECT min(t_arrival), max(t_arrival) FROM request_phases").row(0)
    mid = lo + (hi - lo) // 2
    since, until = state.format_ts(lo), state.format_ts(mid)
    with Session(dataset) as s:
        inside = s.query(
            "SELECT count(*) FROM request_phases WHERE t_arrival >= $a AND t_arrival < $b",
            {"a": state.parse_ts(since), "b": state.parse_ts(until)},
        ).item()
    at = open_app(dataset, since=since, until=until)
    assert f"{inside:,} requests" in at.caption[0].value
    assert any("Time filter" in m.value for m in at.sidebar.markdown)
    at.switch_page("traceq/app/pages/requests.py").run()
    assert f"{inside:,} requests match" in " ".join(c.value for c in at.caption)
    assert at.query_params["since"] == since  # kept in the URL across pages
    at.sidebar.button[0].click().run()  # "Clear time filter"
    assert "since" not in at.query_params


def test_phases_waterfall_of_the_chosen_request(dataset):
    with Session(dataset) as s:
        rid = s.query(
            "SELECT request_id FROM request_phases ORDER BY e2e_ms, request_id LIMIT 1"
        ).item()
    at = open_app(dataset, "phases", request=rid)
    assert at.selectbox[0].value == rid
    assert metrics(at)["TTFT"] not in ("", "–")
    spec = [c.proto.spec for c in charts(at)]
    assert any(f"Request {rid}" in s for s in spec)
    assert any("by prompt length" in s for s in spec)
    assert all(i.rows > 0 for i in shipped.rendered(at))
    at.selectbox[0].select_index(1).run()  # another of the slowest
    assert at.query_params["request"] != rid


def test_findings_page_leads_with_the_incident(dataset):
    at = open_app(dataset, "findings")
    # one card, the incident: severity and root, title, when, what / impact / cause / change
    assert [h.value for h in at.subheader] == ["KV-cache pressure"]
    main = [m.value for m in at.main.markdown]
    assert main[0] == (":red-badge[high] Incident 1 · root `kv-pressure` · explains 1 other "
                       "finding")  # fmt: skip
    assert main[1].startswith("From 2025-06-15 ") and "30 of 40 requests (75%) missed" in main[1]
    story = main[2]
    assert story.startswith("**What:** KV cache full") and "**Impact:** 40 requests" in story
    assert "**Cause:** max_num_seqs admits more than the KV budget — KV 100 % for 30 s " \
           "(confidence 0.90)" in story and "**Change:** Lower max_num_seqs" in story  # fmt: skip
    # what the window's slowest requests waited on, the engine's sentence as it is
    assert story.endswith(f"**Tail:** {TTFT_TAIL}")
    # its consequence folded under it, not a failure of its own
    assert main[3].splitlines() == [
        "**Explained by this incident** (not separate failures)",
        "- └ `ttft-queueing` (warn, see `kv-pressure`): queueing is 94% of TTFT",
    ]
    # after the incidents, the run's tail: one row per metric, its p99 and its sentence
    assert run_tail(at) == [f"| TTFT | 27 s | {TTFT_TAIL} |", f"| TPOT | 42 ms | {TPOT_TAIL} |",
                            f"| e2e | 31 s | {E2E_TAIL} |"]  # fmt: skip
    assert "1 incident in this window" in at.caption[0].value
    assert "1 consequence folded under it" in at.caption[0].value
    # the playbook without its data: one line saying which input would enable it
    assert "Not run, for lack of data: GPU utilisation samples (nvidia-smi or DCGM) → " \
           "gpu-underutilized." in [c.value for c in at.caption]  # fmt: skip
    causes = at.dataframe[0].value
    assert causes["cause"][0].startswith("max_num_seqs")  # ranked by strength
    assert any("kv_usage" in c.value for c in at.code)  # the evidence SQL
    labels = [b.label for b in at.button]
    assert any(label.startswith("Show ") for label in labels)
    export = at.get("download_button")[0]
    assert export.proto.label == "Export as Markdown"
    # an example request opens its waterfall
    rid_button = next(b for b in at.button if b.label.startswith("cmpl-"))
    rid_button.click().run()
    assert at.title[0].value == "Phases"
    assert at.query_params["request"] == rid_button.label


def run_tail(at: AppTest) -> list[str]:
    """The rows of the Findings page's "The run's tail" table ([] when it has none)."""
    text = next((m.value for m in at.main.markdown if "**The run's tail**" in m.value), "")
    return [line for line in text.splitlines() if line.startswith("| ") and " P99 " in line]


def test_findings_come_from_the_engine_without_a_file(dataset, monkeypatch):
    monkeypatch.delenv(state.ENV_FINDINGS)
    at = open_app(dataset, "findings")
    if importlib.util.find_spec("traceq.playbooks") is None:
        assert "playbook engine is not installed" in at.info[0].value
        return
    # the engine's own verdict on this scenario: its injected fault is the first incident,
    # one card per incident, what it explains folded under it
    view = data.findings_for(str(dataset)).view
    assert view.blocks[0].incident.root == "kv-pressure"
    assert [h.value for h in at.subheader] == [b.incident.title for b in view.blocks]
    assert "-badge[" in at.main.markdown[0].value
    assert "] Incident 1 · root `kv-pressure`" in at.main.markdown[0].value
    folded = "\n".join(m.value for m in at.main.markdown if "Explained by" in m.value)
    for c in view.blocks[0].consequences:
        assert f"- └ `{c.id}` (warn, see `kv-pressure`)" in folded
    # the engine's own tail of the run, as the report shows it
    assert view.tail
    assert [row.split(" | ")[0] for row in run_tail(at)] == [f"| {t.metric}" for t in view.tail]
    assert all(f"| {t.line} |" in row for t, row in zip(view.tail, run_tail(at), strict=True))
    assert not at.info


def test_requests_table_pages_in_duckdb(dataset):
    at = open_app(dataset, "requests")
    table = at.dataframe[0].value
    assert len(table) == 50  # rows per page
    assert table["e2e_ms"].is_monotonic_decreasing
    at.selectbox(key="req_sort").select("ttft_ms")
    at.toggle(key="req_desc").set_value(False).run()
    table = at.dataframe[0].value
    assert table["ttft_ms"].is_monotonic_increasing
    at.number_input(key="req_min_e2e").set_value(20_000.0).run()
    assert (at.dataframe[0].value["e2e_ms"] >= 20_000).all()


@pytest.mark.parametrize(
    ("sql", "needle"),
    [
        ("CREATE TABLE t AS SELECT 1", "read-only"),
        ("COPY (SELECT 1) TO '/tmp/traceq-console-out.csv'", "read-only"),
        ("SELECT * FROM read_csv('/etc/passwd')", "Permission Error"),
        ("SELEC 1", "syntax error"),
    ],
)
def test_console_refuses_writes_and_files_in_one_line(dataset, sql, needle):
    at = open_app(dataset, "console")
    at.text_area(key="console_sql").input(sql)
    at.button(key="console_run").click().run()
    assert not at.exception
    message = at.error[0].value
    assert needle in message and "\n" not in message


def test_console_runs_a_query_with_the_time_filter(dataset):
    at = open_app(dataset, "console")
    sql = (
        "SELECT count(*) AS n FROM request_phases WHERE t_arrival >= $since AND t_arrival < $until"
    )
    at.text_area(key="console_sql").input(sql)
    at.button(key="console_run").click().run()
    assert not at.error
    assert at.dataframe[0].value["n"][0] == 64
    assert any(b.label == "Download CSV" for b in at.get("download_button"))
    assert "request_phases" in at.selectbox(key="console_relation").options


def test_without_a_dataset_the_app_offers_samples_path_and_upload(tmp_path):
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    assert not at.exception
    scenarios = at.selectbox(key="home_scenario").options
    assert any(s.startswith("kv-pressure") for s in scenarios)
    assert at.text_input(key="home_path")
    assert at.get("file_uploader")
    at.text_input(key="home_path").input(str(tmp_path / "missing.tq"))
    at.button(key="home_open_path").click().run()
    assert at.error and "\n" not in at.error[0].value


def test_uploaded_raw_files_become_a_new_dataset(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEQ_APP_DIR", str(tmp_path))
    folder = ROOT / "sample_traces" / "kv-pressure"
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    files = [(f, (folder / f).read_bytes(), "application/octet-stream")
             for f in ("traces.otlp.jsonl", "vllm.log", "labels.json")]  # fmt: skip
    at.file_uploader[0].set_value(files).run()
    at.number_input(key="home_year").set_value(2025)
    at.button(key="home_ingest").click().run()
    assert not at.exception
    assert at.title[0].value == "Overview"
    assert "64 requests" in at.caption[0].value
    assert str(tmp_path) in at.query_params["dataset"]
    # the file no reader knows is reported, not dropped silently
    sources = at.dataframe[0].value
    assert "labels.json" in " ".join(sources["path"].to_list())


def test_a_bundled_scenario_opens_with_one_click(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEQ_APP_DIR", str(tmp_path))
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT).run()
    options = at.selectbox(key="home_scenario").options
    at.selectbox(key="home_scenario").set_value("slow-tokenizer")
    at.button(key="home_open_sample").click().run()
    assert not at.exception and len(options) >= 10
    assert at.title[0].value == "Overview"
    assert at.query_params["dataset"].endswith("slow-tokenizer.tq")


def test_findings_outside_the_time_filter_are_set_apart(dataset):
    with Session(dataset) as s:
        lo = s.query("SELECT min(t_arrival) FROM request_phases").item()
    # the first second of the run, before the engine's KV cache filled
    at = open_app(dataset, "findings", since=state.format_ts(lo),
                  until=state.format_ts(lo + 10**9))  # fmt: skip
    assert not at.subheader  # no incident card in this window
    assert "0 incidents in this window, 1 outside the time filter" in at.caption[0].value
    assert at.expander[0].label == "Incidents outside the time filter (1)"
    hidden = at.expander[0].dataframe[0].value
    assert hidden["playbook"].to_list() == ["kv-pressure"]
    assert len(run_tail(at)) == 3  # the whole run's tail, whatever the time filter
