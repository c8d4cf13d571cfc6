"""The app's parts that need no Streamlit session: queries and their bounds, the Altair chart
builders, the Markdown export of a finding and of an incident, the findings adapter and the
incidents it leads with, URL time stamps, the Perfetto export (`traceq export`) and
`traceq app` serving on loopback."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import time
import urllib.request

import altair as alt
import polars as pl
import pytest

from tests.app_helpers import TTFT_TAIL, ingest_sample, kv_finding, write_findings
from traceq.app import charts, data, export_md, queries, state
from traceq.app.queries import RequestFilter, Window
from traceq.session import Session


@pytest.fixture(scope="module")
def dataset(app_workdir):
    env = pytest.MonkeyPatch()
    yield ingest_sample(app_workdir, env)  # once per session (tests/conftest.py)
    env.undo()


@pytest.fixture(scope="module")
def session(dataset):
    with Session(dataset) as s:
        yield s


@pytest.fixture(scope="module")
def window(session):
    return queries.time_range(session).default


def traceq_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "traceq", *args], capture_output=True, text=True, timeout=300
    )


# -- queries -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("seconds", "step_s"), [(0.05, 0.001), (57.7, 0.5), (3600, 15), (86400 * 30, 21600)]
)
def test_buckets_are_round_and_bounded(seconds, step_s):
    w = Window(0, int(seconds * 1e9))
    step = queries.bucket_ns(w)
    assert step == int(step_s * 1e9)
    assert seconds / (step / 1e9) <= queries.MAX_BUCKETS


def test_series_cover_the_window_in_few_rows(session, window):
    requests = queries.request_series(session, window)
    assert 0 < requests.height <= queries.MAX_BUCKETS + 1
    assert requests["requests"].sum() == 64
    assert requests["time"].min() >= window.since / 1e6
    arrivals = queries.arrival_series(session, window)
    assert arrivals.select("ts", "requests", "ttft_p99_ms").equals(
        requests.drop_nulls("ttft_p99_ms").select("ts", "requests", "ttft_p99_ms")
    )
    for frame in (queries.engine_series(session, window), queries.gpu_series(session, window)):
        assert 0 < frame.height <= queries.MAX_BUCKETS + 1
    markers = queries.event_markers(session, queries.time_range(session).full)
    assert "start-up" in markers["marker"].to_list()


def test_kpis_follow_the_slos(session, window):
    strict = queries.kpis(
        session, window, slo_ttft_ms=1, slo_tpot_ms=1, slo_e2e_ms=1, price_per_gpu_hour=2
    )
    loose = queries.kpis(
        session, window, slo_ttft_ms=1e9, slo_tpot_ms=1e9, slo_e2e_ms=1e9, price_per_gpu_hour=4
    )
    assert strict["slo_attainment"] == 0 and loose["slo_attainment"] == 1
    assert loose["goodput_per_s"] == pytest.approx(loose["requests_per_s"])
    assert loose["cost_per_m_output_tokens"] == pytest.approx(
        2 * strict["cost_per_m_output_tokens"]
    )


def test_requests_page_sorts_filters_and_pages_in_duckdb(session, window):
    flt = RequestFilter(sort="ttft_ms", descending=False)
    first, total = queries.requests_page(session, window, flt, page=0, page_size=25)
    second, _ = queries.requests_page(session, window, flt, page=1, page_size=25)
    assert total == 64 and first.height == second.height == 25
    assert first["ttft_ms"].is_sorted() and first["ttft_ms"].max() <= second["ttft_ms"].min()
    assert not set(first["request_id"]) & set(second["request_id"])
    one = first["request_id"][0]
    found, n = queries.requests_page(
        session, window, RequestFilter(id_like=one[5:20]), page=0, page_size=25
    )
    assert n == 1 and found["request_id"][0] == one
    with pytest.raises(ValueError, match="cannot sort"):
        queries.requests_page(
            session, window, RequestFilter(sort="1; DROP TABLE x"), page=0, page_size=25
        )


def test_request_tokens_mark_stalls(session, window):
    rid = queries.slowest_requests(session, window, 1)["request_id"][0]
    tokens = queries.request_tokens(session, rid, stall_factor=1.0, stall_floor_ms=0.0)
    assert tokens.height == queries.request(session, rid)["output_tokens"]
    assert tokens["stall"].any()  # any gap above the median is a stall at factor 1
    none = queries.request_tokens(session, rid, stall_factor=1e6)
    assert not none["stall"].any()


def test_console_binds_only_the_parameters_a_query_names(session, window):
    assert queries.console_params(session, "SELECT 1", window) == {}
    assert queries.console_params(session, "SELECT $until", window) == {"until": window.until}


# -- charts --------------------------------------------------------------------------------
def test_charts_build_from_frames_and_stay_small(session, window):
    built = [
        charts.rate(queries.request_series(session, window), window=window),
        charts.series(
            queries.gpu_series(session, window),
            ["sm_active", "dram_active"],
            title="GPU",
            unit="ratio",
            window=window,
        ),
        charts.phase_stack_time(queries.phases_by_window(session, window), window=window),
        charts.phase_stack_length(queries.phases_by_length(session, window, "output"), by="output"),
    ]
    for chart in built:
        spec = chart.to_dict()
        assert 0 < charts.row_count(chart) <= 2 * queries.MAX_BUCKETS * 5
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
    x = built[0].to_dict()["encoding"]["x"]
    assert x["scale"]["type"] == "utc" and x["scale"]["domain"][0]["utc"] is True
    assert any(p.get("name") == charts.BRUSH for p in built[0].to_dict()["params"])


def test_waterfall_lays_phases_end_to_end(session, window):
    rid = queries.slowest_requests(session, window, 1)["request_id"][0]
    req = queries.request(session, rid)
    chart = charts.waterfall(req, queries.request_tokens(session, rid))
    assert isinstance(chart, alt.LayerChart)
    bars = next(iter(chart.to_dict()["datasets"].values()))
    ends = {b["phase"]: b["end"] for b in bars}
    assert ends["decode"] == pytest.approx(req["e2e_ms"] - req["residual_ms"], rel=1e-6)


def test_waterfall_draws_a_disaggregated_requests_hops_as_lanes(tmp_path):
    from tests.test_otel_stitch import _build

    ds, _, _ = _build(tmp_path, 0)
    with Session(ds) as s:
        req = queries.request(s, "cmpl-d-0")
        hops = queries.request_hops(s, "cmpl-d-0")
        chart = charts.waterfall(req, queries.request_tokens(s, "cmpl-d-0"), hops)
        assert queries.request_hops(s, "no-such-request").is_empty()
    lanes = chart.to_dict()["layer"][0]["encoding"]["y"]["scale"]["domain"]
    for lane in ("gateway · frontend-0", "prefill · prefill-worker-0", "decode · decode-worker-0"):
        assert lane in lanes
    assert lanes.index("gateway · frontend-0") < lanes.index("queue") < lanes.index("tokens")
    at = {r["lane"]: r for r in hops.iter_rows(named=True)}
    # on the reference clock from the gateway's arrival: prefill ends before decode starts
    assert at["gateway · frontend-0"]["start_ms"] == pytest.approx(0.0, abs=0.01)
    assert at["prefill · prefill-worker-0"]["end_ms"] < at["decode · decode-worker-0"]["start_ms"]


def test_evidence_chart_only_when_there_is_a_shape():
    assert charts.evidence(["a"], []) == []
    assert charts.evidence(["msg"], [{"msg": "x"}]) == []
    t0 = 1_749_981_600_000_000_000
    rows = [{"ts": t0 + i * 10**10, "ts_end": t0 + (i + 1) * 10**10, "kv": 0.5, "ttft_ms": 9e3}
            for i in range(3)]  # fmt: skip
    timed = charts.evidence(["ts", "ts_end", "kv", "ttft_ms"], rows)
    # one chart per figure, each on its own axis; the window's end stamp is no figure
    assert [c.to_dict()["title"] for c in timed] == ["kv", "ttft_ms"]
    labelled = charts.evidence(["kind", "n"], [{"kind": "oom", "n": 3}])
    assert len(labelled) == 1


# -- findings ------------------------------------------------------------------------------
def test_markdown_export_holds_text_sql_tables_and_chart(dataset):
    finding = kv_finding(dataset)
    md = export_md.finding(finding, dataset="inc.tq")
    assert md.startswith("## KV-cache pressure (high, fail)")
    assert "```sql\nSELECT ts, kv_usage" in md
    assert "| ts | kv_usage | running | waiting |" in md
    assert "```vega-lite" in md
    assert "1. **max_num_seqs admits more than the KV budget** (confirmed" in md  # ranked
    assert "- Lower max_num_seqs" in md and "### Next checks" in md
    assert f"- {state.format_ts(finding.windows[0]['start'])} – " in md


def test_markdown_export_of_an_incident_leads_with_it(dataset, tmp_path):
    view = data.findings_for(str(dataset), str(write_findings(dataset, tmp_path / "f.json"))).view
    md = export_md.incident(view.blocks[0], dataset="inc.tq")
    lines = md.splitlines()
    assert lines[0] == "# [high] KV-cache pressure (`kv-pressure`)"
    assert lines[2].startswith("From 2025-06-15 ") and "missed an SLO or failed." in lines[2]
    assert "- **Change:** Lower max_num_seqs" in lines
    assert f"- **Tail:** {TTFT_TAIL}" in lines
    assert "  - └ `ttft-queueing` (warn, see `kv-pressure`): queueing is 94% of TTFT" in lines
    assert md.index("└ `ttft-queueing`") < md.index("## KV-cache pressure (high, fail)")


def test_findings_adapter_without_engine_and_from_a_file(dataset, tmp_path):
    engine = data.findings_for(str(dataset))
    if importlib.util.find_spec("traceq.playbooks") is None:
        assert engine.diagnosis.findings == [] and engine.note == data.ENGINE_MISSING
    else:  # the engine flags the injected fault of this scenario
        assert engine.note is None
        assert "kv-pressure" in [f.id for f in engine.ranked if f.failed]
    f = kv_finding(dataset)
    quiet = f.__class__(id="a", status="pass", severity="critical", title="A", message="ok")
    path = tmp_path / "f.json"
    path.write_text(json.dumps({"findings": [quiet.to_dict(), f.to_dict()]}))
    loaded = data.findings_for(str(dataset), str(path))
    assert [x.id for x in loaded.ranked] == ["kv-pressure", "a"]  # failing first
    # a file from before incidents (schema 1): each failing finding is an incident of its own
    assert [b.incident.root for b in loaded.view.blocks] == ["kv-pressure"]
    assert loaded.view.blocks[0].change == "Lower max_num_seqs"
    assert loaded.view.tail == [] and "tail" not in dict(
        loaded.view.blocks[0].story
    )  # saved before the tail
    # schema 2: the incidents as the engine grouped them, the N/A playbooks on the CLI's line
    v2 = data.findings_for(str(dataset), str(write_findings(dataset, tmp_path / "v2.json")))
    view = v2.view
    assert [(b.incident.root, [c.id for c in b.consequences]) for b in view.blocks] == [
        ("kv-pressure", ["ttft-queueing"])]  # fmt: skip
    assert view.tally == ("4 playbooks: 1 root, 1 consequence folded under it, 1 passed, "
                          "1 not run for lack of data")  # fmt: skip
    assert [(t.metric, t.p99) for t in view.tail] == [("TTFT", "27 s"), ("TPOT", "42 ms"),
                                                      ("e2e", "31 s")]  # fmt: skip
    if importlib.util.find_spec("traceq.playbooks") is not None:
        from traceq.playbooks.render import not_applicable_line

        assert view.not_run_line == not_applicable_line(v2.diagnosis)


@pytest.mark.parametrize("ns", [0, 1_749_981_600_000_000_000, 1_749_981_600_123_456_000])
def test_url_timestamps_round_trip(ns):
    assert state.parse_ts(state.format_ts(ns)) == ns
    assert state.parse_ts(str(ns)) == ns
    assert state.parse_ts("2025-06-15T10:00:00") == 1_749_981_600_000_000_000


# -- Perfetto export -----------------------------------------------------------------------
def test_perfetto_export_of_a_window(dataset, session, tmp_path):
    lo, hi = session.query(
        "SELECT min(t_arrival), quantile_disc(t_arrival, 0.5) FROM request_phases"
    ).row(0)
    out = tmp_path / "trace.json"
    done = traceq_cli(
        "export",
        str(dataset),
        "--format",
        "perfetto",
        "-o",
        str(out),
        "--since",
        state.format_ts(lo),
        "--until",
        str(hi),
    )
    assert done.returncode == 0, done.stderr
    trace = json.loads(out.read_bytes())
    events = trace["traceEvents"]
    expected = session.query(
        "SELECT count(*) FROM request_phases WHERE t_arrival >= $a AND t_arrival < $b",
        {"a": lo, "b": hi},
    ).item()
    requests = [e for e in events if e["ph"] == "X" and e["name"] == "request"]
    assert len(requests) == expected > 0
    assert f"{expected:,} requests" in done.stderr
    by_tid = {e["tid"]: e for e in requests}
    for e in events:
        if e["ph"] == "X" and e["name"] != "request":  # phases nest inside their request
            parent = by_tid[e["tid"]]
            assert e["dur"] >= 0 and e["ts"] >= parent["ts"] - 1e-3
            assert e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] + 1e-3
    tokens = [e for e in events if e["name"] == "token"]
    out_tokens = sum(r["args"]["output_tokens"] for r in requests)
    assert len(tokens) == out_tokens  # one chunk per token in this scenario
    assert {e["pid"] for e in events if e["ph"] == "C"} == {2, 3}
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {r["args"]["request_id"] for r in requests}
    assert trace["otherData"]["origin_ns"] == lo


def test_export_errors_are_one_line(dataset, tmp_path):
    bad = traceq_cli("export", str(dataset), "-o", str(tmp_path / "t.json"), "--since", "x")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    missing = traceq_cli("export", str(tmp_path / "none.tq"), "-o", str(tmp_path / "t.json"))
    assert missing.returncode == 2 and missing.stderr.startswith("traceq: error:")


# -- traceq app ----------------------------------------------------------------------------
def test_traceq_app_serves_on_loopback(dataset):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "traceq", "app", str(dataset), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health") as r:
                    assert r.read() == b"ok"
                    break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("traceq app did not come up")
        listening = subprocess.run(["ss", "-ltn"], capture_output=True, text=True).stdout
        assert f"127.0.0.1:{port}" in listening and f"0.0.0.0:{port}" not in listening
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    # the server was the process itself: stopping it stops serving
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2)


def test_traceq_app_refuses_a_missing_dataset(tmp_path):
    done = traceq_cli("app", str(tmp_path / "none.tq"))
    assert done.returncode == 2 and done.stderr.startswith("traceq: error:")


def test_frames_to_browser_are_polars():
    # the charts take polars frames directly (no pandas round-trip in traceq's own code)
    frame = pl.DataFrame({"time": [0.0], "a": [1.0]})
    assert charts.row_count(charts.series(frame, ["a"], title="", unit="")) == 1


def _page_shipping_raw_rows() -> None:
    import altair as alt
    import polars as pl
    import streamlit as st

    raw = pl.DataFrame({"x": range(6_000), "y": range(6_000)})
    st.altair_chart(alt.Chart(raw).mark_point().encode(x="x", y="y").properties(title="raw"))
    inline = alt.Data(values=[{"x": i} for i in range(5_001)])
    st.altair_chart(alt.Chart(inline).mark_tick().encode(x="x:Q"))
    st.dataframe(raw)
    st.sidebar.dataframe(raw.head(10))


def test_the_row_check_catches_a_page_shipping_raw_rows():
    # the instrumentation behind the row bound (tests/test_app.py on the samples,
    # bench/app_render.py on 1 M requests) sees every chart and table, inline data included
    from streamlit.testing.v1 import AppTest

    from traceq.app import shipped

    at = AppTest.from_function(_page_shipping_raw_rows, default_timeout=60).run()
    items = shipped.rendered(at)
    assert [(i.kind, i.rows) for i in items] == [
        ("chart", 6_000),
        ("chart", 5_001),
        ("dataframe", 6_000),
        ("dataframe", 10),
    ]
    assert items[0].label == "raw" and items[2].label == "x, y"
    assert [i.rows for i in shipped.over_bound(items)] == [6_000, 5_001, 6_000]
