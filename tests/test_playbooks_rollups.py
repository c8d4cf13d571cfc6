"""The shared rollups count what the full per-gap definitions count.

gap_context (every chunk gap with its context) is not materialised: stall counts come from
gap_stalls (gaps of 100 ms and more), gap counts from per-window and per-request passes. These
tests recompute the figures users read (stalls per window and per request, tbt-jitter's
stall rates, p99 and longest gap) from every gap of gap_context and compare."""

from __future__ import annotations

import pytest

from tests.playbook_helpers import SAMPLES, ingest_folder
from tests.rollup_helpers import without_rollups
from traceq.playbooks import Options, diagnose, load_catalog, rollups
from traceq.playbooks.rollups import materialise
from traceq.playbooks.steps import Step, summary
from traceq.session import QueryError, Session

WINDOW = "w.grid_start + (c.ts - w.grid_start) // w.window_ns * w.window_ns"
STALL = "c.tbt_ms > greatest(4 * c.req_tbt_p50_ms, 250)"

# tbt-jitter's figures as they were written over every gap (before gap_stalls).
FIGURES_OVER_EVERY_GAP = """
SELECT
    count(*) FILTER (WHERE inside AND stall) AS stalls,
    1000.0 * count(*) FILTER (WHERE inside AND stall) / nullif(count(*) FILTER (WHERE inside), 0)
        AS per_1k_in,
    1000.0 * count(*) FILTER (WHERE NOT inside AND stall)
        / nullif(count(*) FILTER (WHERE NOT inside), 0) AS per_1k_out,
    quantile_cont(tbt_ms, 0.99) FILTER (WHERE inside) AS tbt_p99_in_ms,
    max(tbt_ms) FILTER (WHERE inside) AS tbt_max_in_ms
FROM (
    SELECT tbt_ms, ts >= $start AND ts < $end AS inside,
           tbt_ms > greatest(4 * req_tbt_p50_ms, 250) AS stall
    FROM gap_context
)
"""


# What the per-request pass feeds, as the playbooks read it: every request's gaps summarised,
# and its long gaps with their context (from the pass's long_gaps), and gap_context's join.
PER_REQUEST = (
    "SELECT * FROM request_tbt ORDER BY ALL",
    "SELECT * FROM gap_stalls ORDER BY ALL",
    "SELECT request_id, source_id, view, req_tbt_p50_ms, count(*) AS n FROM gap_context "
    "GROUP BY ALL ORDER BY ALL",
)


@pytest.fixture(scope="module")
def jitter(tmp_path_factory):
    return ingest_folder(SAMPLES / "client-jitter", tmp_path_factory.mktemp("j") / "cj.tq")


@pytest.fixture(scope="module")
def jitter_unrolled(jitter, tmp_path_factory):
    """The sample as an older traceq wrote it: no rollups of its tokens, so the per-request
    pass reads every chunk, in parts (traceq/playbooks/rollups.py)."""
    return without_rollups(jitter, tmp_path_factory.mktemp("j") / "old.tq")


def test_stall_counts_match_every_gap(jitter):
    with Session(jitter) as s:
        materialise(s)
        cols = "request_id, source_id, view, ts_prev, ts, tbt_ms, req_tbt_p50_ms, prefill_tokens"
        long_gaps = s.query(f"SELECT {cols} FROM gap_context WHERE tbt_ms >= 100 ORDER BY ALL")
        assert long_gaps.height > 0
        assert s.query(f"SELECT {cols} FROM gap_stalls ORDER BY ALL").equals(long_gaps)
        per_window = s.query(
            f"SELECT {WINDOW} AS ts, count(*) AS gaps, count(*) FILTER (WHERE {STALL}) AS stalls "
            "FROM gap_context AS c, diag_window AS w GROUP BY ALL ORDER BY ts"
        )
        rollup = s.query("SELECT ts, gaps, stalls FROM window_stats WHERE gaps > 0 ORDER BY ts")
        assert per_window.sum()["stalls"][0] > 0  # the sample has stalls to count
        assert rollup.to_dicts() == per_window.to_dicts()
        per_request = s.query(
            f"SELECT request_id, source_id, count(*) FILTER (WHERE {STALL}) AS stalls "
            "FROM gap_context AS c GROUP BY ALL ORDER BY ALL"
        )
        tbt = s.query(
            "SELECT request_id, source_id, stalls FROM request_tbt WHERE n_gaps > 0 ORDER BY ALL"
        )
        assert tbt.to_dicts() == per_request.to_dicts()


def test_tbt_jitter_figures_match_every_gap(jitter):
    steps: list[Step] = []
    with Session(jitter) as s:
        pb = load_catalog().by_id()["tbt-jitter"]
        d = diagnose(s, [pb], Options(profile=steps))
        finding = d.findings[0]
        assert finding.status == "fail"
        for w in finding.windows:
            row = s.query(FIGURES_OVER_EVERY_GAP, {"start": w["start"], "end": w["end"]})
            for name, value in row.row(0, named=True).items():
                assert w[name] == pytest.approx(value, abs=1e-4), name  # findings keep 4 decimals
    # the profile names the rollups and the playbook's steps
    assert {"rollups", "tbt-jitter"} <= {x.playbook for x in steps}
    assert any(x.step == "symptom" for x in steps)
    assert "tbt-jitter" in summary(steps)


def test_request_gaps_in_parts_are_the_views_rows(jitter_unrolled, monkeypatch):
    # a million requests run the per-request pass in parts by request-id range; force parts
    # of two requests here: what it feeds must be the views' rows, every request once
    monkeypatch.setattr(rollups, "REQUESTS_PER_PART", 2)
    monkeypatch.setattr(rollups, "_in_request_order", lambda *_: True)  # parts whatever the order
    with Session(jitter_unrolled) as s:
        whole = [s.query(q) for q in PER_REQUEST]
        assert s.query("SELECT count(*) AS n FROM requests")["n"][0] > 4  # so several parts
        materialise(s)
        parts = [s.query(q) for q in PER_REQUEST]
    assert all(w.height > 0 for w in whole)
    assert all(p.equals(w) for p, w in zip(parts, whole, strict=True))


def test_rollups_in_time_parts_are_the_views_rows(jitter_unrolled, monkeypatch):
    # in the day-partitioned layout (tokens in time order) both grouped passes run in parts by
    # time: requests by their first chunk, windows by the grid. Force parts of two requests and
    # of one window: the rows must be the views', the client's own chunks included
    monkeypatch.setattr(rollups, "REQUESTS_PER_PART", 2)
    monkeypatch.setattr(rollups, "GAPS_PER_PART", 1)
    monkeypatch.setattr(rollups, "_in_request_order", lambda *_: False)
    ran: list[bool] = []
    time_parts = rollups._time_parts
    monkeypatch.setattr(rollups, "_time_parts", lambda *a: ran.append(time_parts(*a)) or ran[-1])
    with Session(jitter_unrolled) as s:
        whole = [s.query(q) for q in PER_REQUEST]
        windows = s.query("SELECT * FROM window_stats ORDER BY ts")
        assert s.query("SELECT count(*) AS n FROM client_token_gaps")["n"][0] > 0
        materialise(s)
        assert ran == [True]  # the time parts ran (no chunk without a time)
        assert all(s.query(q).equals(w) for q, w in zip(PER_REQUEST, whole, strict=True))
        assert s.query("SELECT * FROM window_stats ORDER BY ts").equals(windows)
        # every chunk gap again once the parts are done (no part's view left behind)
        left = "SELECT count(*) AS n FROM duckdb_views() WHERE temporary AND view_name LIKE $p"
        assert s.query(left, {"p": "%_chunks"})["n"][0] == 0
    assert whole[0].height > 4 and whole[1].height > 0 and windows["gaps"].sum() > 0


def test_rollups_that_fail_part_way_leave_the_views_to_the_playbooks(jitter, monkeypatch):
    # out of memory in a late rollup (here: the per-window pass) must not leave the earlier
    # rollups' views over their files (one with parts missing) shadowing the views with wrong
    # rows (which read as "not enough data"): the playbooks read the views and find the same
    catalog = load_catalog().playbooks
    with Session(jitter) as s:
        normal = [(f.id, f.status, f.message) for f in diagnose(s, catalog).findings]

    def out_of_memory(*_):
        raise QueryError("rollup _window_tbt: Out of Memory Error: failed to allocate")

    monkeypatch.setattr(rollups, "_fill_window_tbt", out_of_memory)
    with Session(jitter) as s:
        failed = [(f.id, f.status, f.message) for f in diagnose(s, catalog).findings]
        tables = s.query("SELECT count(*) AS n FROM duckdb_tables() WHERE temporary")
        views = s.query("SELECT view_name FROM duckdb_views() WHERE temporary AND NOT internal")
        left = list(s.temp_dir.glob("rollups/*"))
    assert tables["n"][0] == 0
    assert not set(views["view_name"]) & set(rollups.ROLLUPS)
    assert left == []
    assert failed == normal
    assert any(status == "fail" for _, status, _ in normal)


def test_a_prefill_stalls_only_its_own_engines_gaps(tmp_path):
    """On a dataset of two replicas, a long prompt prefilled on pod-a does not count in the
    gaps of a request decoding on pod-b at the same time; pod-b's own prefill does."""
    from tests.otel_factory import MS, T0, RequestSpec, make_spans, write_otlp_json
    from traceq.ingest import ingest

    def request(rid: str, arrival: int, tokens: list[int], prompt: int) -> RequestSpec:
        attrs = {
            "gen_ai.request.id": rid,
            "gen_ai.usage.prompt_tokens": prompt,
            "gen_ai.usage.completion_tokens": len(tokens),
        }
        return RequestSpec(rid, arrival=arrival, tokens=tokens, attributes=attrs)

    decoding = [T0 + k * 10 * MS for k in range(10)] + [
        T0 + 400 * MS + k * 10 * MS for k in range(10)
    ]
    pod_b = [
        request("b-decoding", T0 - 50 * MS, decoding, 100),
        request("b-prefill", T0 + 120 * MS, [T0 + 250 * MS, T0 + 260 * MS], 3000),
    ]
    pod_a = [request("a-prefill", T0 + 150 * MS, [T0 + 200 * MS, T0 + 210 * MS], 5000)]
    files = [
        write_otlp_json(make_spans(pod_b, instance="pod-b"), tmp_path / "b.jsonl"),
        write_otlp_json(make_spans(pod_a, instance="pod-a"), tmp_path / "a.jsonl"),
    ]
    ingest(files, tmp_path / "ds")
    with Session(tmp_path / "ds") as s:
        stall = s.query(
            "SELECT tbt_ms, prefill_tokens FROM gap_context "
            "WHERE request_id = 'b-decoding' AND tbt_ms > 100"
        ).to_dicts()
        long_gaps = s.query(
            "SELECT prefill_tokens FROM gap_stalls WHERE request_id = 'b-decoding'"
        ).to_dicts()
    assert stall == [{"tbt_ms": pytest.approx(310.0), "prefill_tokens": 3000}]
    assert long_gaps == [{"prefill_tokens": 3000}]


def test_rollup_files_go_when_the_session_closes(jitter, tmp_path):
    # diagnose writes its rollups into the session's temp directory; a directory the caller
    # gave keeps nothing of them once the session is closed
    with Session(jitter, temp_dir=tmp_path) as s:
        diagnose(s, load_catalog().playbooks)
        written = sorted(p.name for p in s.rollups_dir.iterdir())
    assert any(name.startswith("_request_gaps-") for name in written)
    assert list(tmp_path.iterdir()) == []
