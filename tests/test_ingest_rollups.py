"""The rollups written at ingest (request_gaps, gap_buckets; traceq/layout_rollups.py) stand
for the chunks they summarise: every view that reads them answers as it does from every chunk,
on a dataset written before them (the views compute them) and on one where only some sources
have them; a source whose chunks the views pick other than by their request rows gets none."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from opentelemetry.sdk.trace import ReadableSpan

import traceq
from tests.otel_factory import MS, T0, RequestSpec, make_spans, write_otlp_json
from tests.playbook_helpers import SAMPLES, ingest_folder
from tests.rollup_helpers import without_rollups
from traceq.dataset import Dataset
from traceq.playbooks.rollups import materialise
from traceq.session import Session
from traceq.writer import SourceWriter

QUERIES = (
    "SELECT * FROM _request_gaps ORDER BY ALL",
    "SELECT * FROM request_tbt ORDER BY ALL",
    "SELECT * FROM gap_stalls ORDER BY ALL",
    "SELECT * FROM kpi_latency",
    "SELECT request_id, source_id, view, req_tbt_p50_ms, count(*) AS n FROM gap_context "
    "GROUP BY ALL ORDER BY ALL",
)


def _answers(dataset: Path) -> list[pl.DataFrame]:
    # one thread: kpi_latency's request means are double sums, whose last bit follows the
    # order of summation (tests/test_sample_views_unchanged.py)
    with Session(dataset, threads=1) as s:
        views = [s.query(q) for q in QUERIES]
        materialise(s)  # what `traceq diagnose` reads
        return views + [s.query(q) for q in QUERIES[:3]]


def _overlapping(tmp_path: Path) -> Path:
    """Two sources sharing three requests: one lends all its rows, one some (joined to the
    pick), and every request has a gap of at least 100 ms."""

    def spans(ids: range) -> list[ReadableSpan]:
        specs = []
        for i in ids:
            t = T0 + i * 10 * MS
            chunks = [t + 2 * MS, t + 5 * MS, t + 9 * MS, t + (150 + i) * MS]
            specs.append(
                RequestSpec(f"r{i}", t, tokens=chunks, attributes={"gen_ai.request.id": f"r{i}"})
            )
        return make_spans(specs)

    a = write_otlp_json(spans(range(0, 6)), tmp_path / "a.jsonl")
    b = write_otlp_json(spans(range(3, 9)), tmp_path / "b.jsonl")
    traceq.ingest([a, b], tmp_path / "ds")
    return tmp_path / "ds"


@pytest.fixture(scope="module")
def jitter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A server and a client source (client-only chunks beside the server's)."""
    return ingest_folder(SAMPLES / "client-jitter", tmp_path_factory.mktemp("r") / "cj.tq")


@pytest.mark.parametrize("case", ["client-jitter", "overlapping sources"])
def test_the_views_answer_the_same_with_and_without_rollups(case, jitter, tmp_path):
    ds = jitter if case == "client-jitter" else _overlapping(tmp_path)
    sources = [s for s in Dataset(ds).sources() if "tokens" in s.get("files", {})]
    assert len(sources) == 2
    assert all({"request_gaps", "gap_buckets"} <= s["files"].keys() for s in sources)
    modes = json.loads((ds / "manifest.json").read_text())["request_pick"]["sources"]
    if case == "overlapping sources":
        assert sorted(m["primary"] for m in modes.values()) == ["all", "some"]
    rolled = _answers(ds)
    assert rolled[0].height > 4 and rolled[2].height > 0
    old = without_rollups(ds, tmp_path / "old.tq")
    mixed = without_rollups(ds, tmp_path / "mixed.tq", [sources[0]["source_id"]])
    for other in (old, mixed):
        for ours, theirs in zip(rolled, _answers(other), strict=True):
            assert ours.equals(theirs)


def test_a_source_with_chunks_of_no_request_row_gets_no_rollups(tmp_path):
    """Chunks of an id with no `requests` row (and of a null id) are read with every chunk of
    a source whose rows all stand for their requests; no stored row per request row can follow
    that, so the source has no rollups and the views compute its figures."""
    ds = tmp_path / "ds"
    writer = SourceWriter(Dataset(ds, create=True), "orphans000000000")
    writer.write("requests", pl.DataFrame({"request_id": ["a"], "view": "server", "t_arrival": T0}))
    ids = ["a", "a", "a", "b", "b", None, None]
    writer.write(
        "tokens",
        pl.DataFrame(
            {
                "request_id": ids,
                "view": "server",
                "idx": [0, 1, 2, 0, 1, 0, 1],
                "ts": [T0 + k * 7 * MS for k in range(len(ids))],
            }
        ),
    )
    writer.commit({"path": "orphans", "format": "test", "clock_domain": "unix_ns"})
    [source] = Dataset(ds).sources()
    assert "tokens" in source["files"] and "request_gaps" not in source["files"]
    with Session(ds) as s:
        tbt = s.query("SELECT request_id, n_gaps FROM request_tbt ORDER BY ALL")
        kpi = s.query("SELECT n FROM kpi_latency WHERE metric = 'tbt_ms'")
    assert tbt.rows() == [("a", 2), ("b", 1), (None, 1)]
    assert kpi["n"].item() == 4


def test_ingesting_the_same_file_again_writes_nothing(jitter, tmp_path):
    src = SAMPLES / "client-jitter" / "traces.otlp.jsonl"
    ds = tmp_path / "ds"
    traceq.ingest([src], ds)
    before = (ds / "manifest.json").read_text()
    files = sorted(p.relative_to(ds) for p in ds.rglob("*.parquet"))
    [result] = traceq.ingest([src], ds)
    assert result.status != "ingested"
    assert (ds / "manifest.json").read_text() == before
    assert sorted(p.relative_to(ds) for p in ds.rglob("*.parquet")) == files
