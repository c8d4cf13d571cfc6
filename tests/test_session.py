"""The one query path: read statements only, time limit, row cap, one exception type,
the catalogue with docs, the manifest read once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.otel_factory import MS, T0, RequestSpec, make_spans, write_otlp_json
from traceq.dataset import Dataset
from traceq.ingest import ingest
from traceq.session import QueryError, Session
from traceq.tempdirs import private_temp_dir, sweep_stale


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("session")
    specs = [
        RequestSpec(
            f"r{i}",
            arrival=T0 + i * MS,
            tokens=[T0 + i * MS + 10 * MS + k * MS for k in range(5)],
            attributes={"gen_ai.request.id": f"r{i}"},
        )
        for i in range(30)
    ]
    src = write_otlp_json(make_spans(specs), tmp / "t.jsonl")
    ingest([src], tmp / "ds")
    return tmp / "ds"


def test_query_returns_polars(dataset):
    with Session(dataset) as s:
        frame = s.query("SELECT count(*) AS n FROM request_phases WHERE ttft_ms >= $ms", {"ms": 10})
    assert isinstance(frame, pl.DataFrame)
    assert frame.to_dicts() == [{"n": 30}]


def test_row_cap_truncates_or_fails(dataset):
    with Session(dataset, row_cap=40) as s:
        results = s.execute("SELECT * FROM tokens")
        assert results.truncated and len(results) == 40
        assert not s.execute("SELECT * FROM tokens LIMIT 40").truncated
        with pytest.raises(QueryError, match="more than 40 rows"):
            s.query("SELECT * FROM tokens")
        streamed = list(s.stream("SELECT * FROM tokens ORDER BY ts"))
        assert sum(f.height for f in streamed) == 40


def test_time_limit_stops_a_runaway_query(dataset):
    with Session(dataset, time_limit_s=0.5) as s:
        with pytest.raises(QueryError, match=r"time limit of 0\.5 s"):
            s.query("SELECT count(*) FROM range(10000000000) a, range(1000) b")
        # the session stays usable after an interrupted query
        assert s.query("SELECT 1 AS one").item() == 1


@pytest.mark.parametrize(
    ("sql", "needle"),
    [
        ("CREATE TABLE x AS SELECT 1", "only queries"),
        ("CREATE OR REPLACE VIEW requests AS SELECT 1", "only queries"),
        ("INSERT INTO requests SELECT * FROM requests", "only queries"),
        ("COPY requests TO '/tmp/traceq-escape.csv'", "only queries"),
        ("SELECT * FROM read_csv('/etc/passwd')", "Permission Error"),
        ("SELECT 1; SELECT 2", "one SQL statement"),
        ("SET memory_limit = '100GB'", "only queries"),
    ],
)
def test_only_reads_run(dataset, sql, needle):
    with Session(dataset) as s, pytest.raises(QueryError, match=needle):
        s.query(sql)


def test_pivot_is_a_read(dataset):
    with Session(dataset) as s:
        frame = s.query("PIVOT (SELECT idx, n_tokens FROM tokens) ON idx USING sum(n_tokens)")
    assert frame.to_dicts() == [{str(i): 30 for i in range(5)}]


def test_errors_keep_duckdbs_hints(dataset):
    with Session(dataset) as s, pytest.raises(QueryError) as info:
        s.query("SELECT ttft FROM request_phases")
    assert 'Candidate bindings: "ttft_ms"' in str(info.value) or "ttft_ms" in str(info.value)
    assert "\n" in str(info.value)  # the whole message, not its first line


def test_catalog_documents_every_column(dataset):
    with Session(dataset) as s:
        catalog = s.catalog()
        one = s.catalog("token_gaps")
    assert catalog.filter(pl.col("doc").is_null() | (pl.col("doc") == "")).is_empty()
    names = set(catalog["name"])
    assert {"requests", "tokens", "request_phases", "kpi_latency", "sources"} <= names
    assert not any(n.startswith("_") for n in names)
    assert set(catalog.filter(pl.col("name") == "requests")["kind"]) == {"table"}
    assert one["column"].to_list()[:3] == ["request_id", "source_id", "idx"]


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT comment FROM duckdb_columns() WHERE table_name = 'request_phases' "
        "AND column_name = 'ttft_ms'",
        "SELECT column_comment FROM information_schema.columns "
        "WHERE table_name = 'request_phases' AND column_name = 'ttft_ms'",
    ],
)
def test_a_users_query_of_duckdbs_catalogue_shows_the_docs(dataset, sql):
    # the docs are put in place when first asked for, not at the open
    with Session(dataset) as s:
        s.query("SELECT count(*) FROM request_phases")
        assert s.query(sql).item() == "ttft_ns in milliseconds."


def test_a_diagnose_run_leaves_the_catalogue_as_it_was(dataset):
    # diagnose puts temporary rollup views in front of window_stats and others
    from traceq.playbooks import diagnose, load_catalog

    with Session(dataset) as s:
        diagnose(s, load_catalog().playbooks)
        after = s.catalog()
    with Session(dataset) as s:
        assert after.equals(s.catalog())
    stats = after.filter(pl.col("name") == "window_stats")
    assert stats.height > 10 and stats["doc"].null_count() == 0


def test_sources_view_lists_the_manifest(dataset):
    with Session(dataset) as s:
        sources = s.sources()
    assert sources.select("format", "rows", "quarantined").to_dicts() == [
        {"format": "otlp-json", "rows": 30 + 150 + 30, "quarantined": 0}
    ]
    assert sources["start_at"].dt.to_string("%Y").item() == "2025"


def test_manifest_is_read_once(dataset, monkeypatch):
    reads = []
    original = Dataset.manifest

    def counting(self):
        reads.append(1)
        return original(self)

    monkeypatch.setattr(Dataset, "manifest", counting)
    with Session(dataset) as s:
        for _ in range(3):
            s.query("SELECT count(*) FROM request_phases")
    assert len(reads) == 1


def test_a_missing_dataset_is_a_query_error(tmp_path):
    with pytest.raises(QueryError, match="not a traceq dataset"):
        Session(tmp_path / "nope")


def test_temp_directory_is_removed_on_close(dataset):
    s = Session(dataset)
    temp = s.temp_dir
    assert temp.is_dir()
    s.close()
    assert not temp.exists()


def _spill_dirs(root):
    return sorted(p.name for p in root.glob("traceq-duckdb-*"))


def _wait_for(predicate, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_a_killed_sessions_spill_directory_is_swept_by_the_next(dataset, tmp_path):
    """SIGKILL leaves a spill directory behind; the next session on the host removes it,
    and leaves alone a live session's directory and one it cannot tell the owner of."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    live = private_temp_dir(tmp_path)
    script = (
        "import os, signal, sys; from traceq.session import Session; "
        "s = Session(sys.argv[1]); print(s.temp_dir, flush=True); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(dataset)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL
    dead = Path(done.stdout.strip())
    assert dead.parent == tmp_path and dead.is_dir()
    unknown = tmp_path / "traceq-duckdb-unowned"
    unknown.mkdir()
    assert sweep_stale(tmp_path) == [dead]
    assert _spill_dirs(tmp_path) == sorted([live.name, unknown.name])
    again = private_temp_dir(tmp_path)  # creating one sweeps too
    assert _spill_dirs(tmp_path) == sorted([live.name, unknown.name, again.name])


def test_sigterm_closes_the_session_and_removes_its_spill_directory(dataset, tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    slow = "SELECT sum(hash(i)) FROM range(1000000000000) t(i)"
    proc = subprocess.Popen(
        [sys.executable, "-m", "traceq", "sql", str(dataset), slow, "--time-limit", "0"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert _wait_for(lambda: _spill_dirs(tmp_path))
        time.sleep(0.5)  # the query is running
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    assert "Traceback" not in err
    assert _spill_dirs(tmp_path) == []
