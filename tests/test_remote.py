"""A dataset read by its URL where it lies in object storage (traceq/remote.py): the real S3
client (s3fs) against moto's S3 server on localhost (tests/s3_helpers.py)."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import s3fs
from click.testing import CliRunner
from polars.testing import assert_frame_equal

import traceq
from tests.playbook_helpers import SAMPLES, ingest_folder
from tests.s3_helpers import moto_s3, store_calls, upload
from traceq.cli import cli
from traceq.dataset import MANIFEST, DatasetError, listed_files
from traceq.remote import RemoteDataset
from traceq.session import QueryError, Session

QUERIES = (
    "SELECT * FROM kpi_latency",
    "SELECT count(*) AS n, sum(e2e_ns) AS e2e FROM request_phases",
    "SELECT count(*) AS n, sum(tbt_ns) AS tbt FROM token_gaps",
    "SELECT source_id, status FROM sources ORDER BY source_id",
)


@pytest.fixture(scope="module")
def s3() -> Iterator[s3fs.S3FileSystem]:
    with moto_s3() as fs:
        yield fs


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    return ingest_folder(SAMPLES / "kv-pressure", tmp_path_factory.mktemp("remote") / "kv.tq")


def requests(local: Path) -> int:
    with Session(local) as s:
        return int(s.query("SELECT count(*) AS n FROM requests").item())


def test_the_dataset_in_s3_answers_as_the_folder(s3, local):
    url = upload(s3, local, "run.tq")
    with Session(local) as here, Session(url) as there:
        assert there.dataset.root == url
        for sql in QUERIES:
            assert_frame_equal(there.query(sql), here.query(sql))
    con = traceq.open(url + "/")
    assert con.sql("SELECT count(*) FROM requests").fetchall() == [(requests(local),)]


def test_diagnose_report_and_sql_take_the_url(s3, local, tmp_path):
    url = upload(s3, local, "cli.tq")
    runner = CliRunner()
    args = ["--format", "json", "--only", "kv-pressure,error-rate"]
    there = runner.invoke(cli, ["diagnose", url, *args])
    here = runner.invoke(cli, ["diagnose", str(local), *args])
    assert there.exit_code == here.exit_code == 1, there.output
    runs = [json.loads(r.output) for r in (there, here)]
    assert runs[0]["dataset"] == url and runs[1]["dataset"] == str(local)
    findings = [run["findings"] for run in runs]
    for finding in (*findings[0], *findings[1]):
        finding.pop("elapsed_s")
    assert findings[0] == findings[1]
    assert {f["id"]: f["status"] for f in findings[0]}["kv-pressure"] == "fail"
    report = runner.invoke(cli, ["report", url, "-o", str(tmp_path / "r.md"), "--no-findings"])
    assert report.exit_code == 0, report.output
    assert url in (tmp_path / "r.md").read_text()
    sql = runner.invoke(cli, ["sql", url, "SELECT count(*) AS n FROM requests", "--format", "csv"])
    assert sql.exit_code == 0, sql.output
    assert sql.output.split() == ["n", str(requests(local))]


def test_a_session_asks_for_each_file_once(s3, local):
    """DuckDB asks a file's size and modification time at each open, and the views open the
    same files many times: the store is asked once a file, at the session's open."""
    url = upload(s3, local, "asked.tq")
    ds = RemoteDataset(url)
    calls = store_calls(ds)
    with Session(ds) as s:
        asked = Counter(key for method, key, _ in calls if method == "head_object")
        tables = ("requests", "tokens", "spans")
        listed = {rel for table in tables for rel in listed_files(ds.manifest(), table)}
        assert {f"asked.tq/{rel}" for rel in listed} <= set(asked)
        assert max(asked.values()) == 1, asked.most_common(3)
        calls.clear()
        s.query("SELECT * FROM kpi_latency")
        s.query("SELECT count(*) AS n FROM request_phases")
    assert [c for c in calls if c[0] != "get_object"] == []


def test_a_read_fetches_the_bytes_asked_for(s3, local):
    """DuckDB reads the column chunks it planned through the dataset's filesystem: a read of
    100 bytes in the middle of a file fetches those 100 bytes, not a read-ahead block to the
    end of the file (a whole 50 MB block with s3fs's default)."""
    url = upload(s3, local, "ranges.tq")
    ds = RemoteDataset(url)
    path = ds.table_files("tokens")[0]
    size = ds.filesystem.size(path)
    calls = store_calls(ds)
    with ds.filesystem.open(path) as f:
        f.seek(size // 2)
        assert len(f.read(100)) == 100
    assert [(m, r) for m, _, r in calls] == [("get_object", f"bytes={size // 2}-{size // 2 + 99}")]


def test_the_connection_reads_only_the_listed_files(s3, local):
    url = upload(s3, local, "locked.tq")
    s3.pipe_file("traces/elsewhere/secret.csv", b"a\n1\n")
    with Session(url) as s:
        for sql in (
            "SELECT * FROM read_csv('s3://traces/elsewhere/secret.csv')",
            f"SELECT * FROM read_json('{url}/{MANIFEST}')",
            "SELECT * FROM read_csv('/etc/hostname')",
        ):
            with pytest.raises(QueryError):
                s.query(sql)


def test_a_url_that_is_not_a_dataset_is_one_clear_line(s3, local):
    url = upload(s3, local, "bad.tq")
    with pytest.raises(QueryError, match=r"s3://traces/nothing-here\.tq is not a traceq dataset"):
        Session("s3://traces/nothing-here.tq")
    manifest = json.loads((local / MANIFEST).read_text())
    manifest["sources"][0]["files"]["requests"] = ["../../elsewhere/secret.parquet"]
    s3.pipe_file(f"traces/bad.tq/{MANIFEST}", json.dumps(manifest).encode())
    with pytest.raises(DatasetError, match="not inside the dataset"):
        traceq.open(url)
    r = CliRunner().invoke(cli, ["diagnose", "s3://no-such-bucket/run.tq"])
    assert r.exit_code == 2
    assert "no-such-bucket" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["diagnose", "nosuchscheme://x/run.tq"])
    assert r.exit_code == 2 and "cannot read nosuchscheme://x/run.tq" in r.output


def test_local_paths_stay_local(tmp_path):
    """A path, a `file://` URL's look-alike and a Windows-style drive are never URLs."""
    from traceq.remote import is_url

    assert is_url("s3://b/run.tq") and is_url("gs://b/run.tq") and is_url("az://c/run.tq")
    assert not is_url(str(tmp_path)) and not is_url("run.tq") and not is_url("C:\\run.tq")
    assert not is_url("file:///data/run.tq") and not is_url(os.fspath(tmp_path / "a://b"))


def test_the_app_opens_the_url(s3, local):
    """The home page's dataset field takes the URL; the overview then reads the bucket."""
    from streamlit.testing.v1 import AppTest

    from tests.app_helpers import APP

    url = upload(s3, local, "app.tq")
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    at.text_input(key="home_path").input(url)
    at.button(key="home_open_path").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.title[0].value == "Overview"
    assert at.query_params["dataset"] == url
    assert {m.label for m in at.metric} >= {"TTFT p99", "TBT p99"}


def test_ingest_into_a_url_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    """Ingest writes a local folder (atomic renames): `-o s3://…` is one line, exit 2, and no
    `s3:` folder appears where the command ran."""
    monkeypatch.chdir(tmp_path)
    trace = SAMPLES / "kv-pressure" / "traces.otlp.jsonl"
    r = CliRunner().invoke(cli, ["ingest", str(trace), "-o", "s3://traces/new.tq"])
    assert r.exit_code == 2, r.output
    assert "writes a dataset to a local folder" in r.output and "Traceback" not in r.output
    assert list(tmp_path.iterdir()) == []


def test_each_open_reads_the_store_settings_of_that_moment(s3, local, monkeypatch):
    """A dataset opened again after the endpoint changed goes to the new one (no filesystem
    cached with the first settings): the second open here finds nothing listening."""
    url = upload(s3, local, "env.tq")
    Session(url).close()
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    with pytest.raises(QueryError, match=r"cannot read s3://traces/env\.tq/manifest\.json"):
        Session(url)


def test_a_missing_store_library_names_the_extra_to_install(monkeypatch):
    """Without s3fs, fsspec raises ImportError for s3://: the message says what to install."""
    import fsspec.core

    def no_s3fs(url, **options):
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec.core, "url_to_fs", no_s3fs)
    r = CliRunner().invoke(cli, ["sql", "s3://traces/run.tq", "SELECT 1"])
    assert r.exit_code == 2
    assert r.output.strip().endswith("pip install 'traceq[s3]'"), r.output
