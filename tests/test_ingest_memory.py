"""`traceq ingest --memory-limit`: the DuckDB limit of the ingest's out-of-core steps, and a
clear one-line error (exit 2, nothing committed) when DuckDB runs out of it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest

import traceq.layout
import traceq.spill
from traceq.dataset import Dataset
from traceq.ingest import IngestOptions, ingest, second_pass

SAMPLE = Path(__file__).resolve().parent.parent / "sample_traces" / "kv-pressure"


def traceq_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "traceq", *args], capture_output=True, text=True, check=False
    )


def test_too_small_a_limit_says_what_to_do_in_one_line(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    run = traceq_cli(
        "ingest", str(SAMPLE / "traces.otlp.jsonl"), "-o", str(ds), "--memory-limit", "1MB"
    )
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("traceq: error: ") and "traces.otlp.jsonl" in line
    assert "out of its DuckDB memory limit (1MB" in line
    assert "larger --memory-limit" in line
    assert Dataset(ds).sources() == []  # nothing committed: the next try reads it again
    assert not list((ds / ".staging").glob("*"))


def test_a_limit_duckdb_cannot_read_is_refused(tmp_path: Path) -> None:
    run = traceq_cli(
        "ingest", str(SAMPLE / "dcgm.prom"), "-o", str(tmp_path / "ds"), "--memory-limit", "lots"
    )
    assert run.returncode == 2
    assert run.stderr.strip() == (
        "traceq: error: --memory-limit 'lots': not a memory size DuckDB reads (e.g. 512MB, 2GB)"
    )


@pytest.mark.parametrize(("given", "used"), [(None, {"512MB", "256MB"}), ("300MB", {"300MB"})])
def test_the_limit_reaches_every_out_of_core_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str | None, used: set[str]
) -> None:
    seen: list[str] = []
    real = traceq.layout.spilling_duckdb

    @contextmanager
    def recording(temp: Path, limit: str, **kw: bool) -> Iterator[duckdb.DuckDBPyConnection]:
        with real(temp, limit, **kw) as con:
            seen.append(con.sql("SELECT current_setting('memory_limit')").fetchall()[0][0])
            yield con

    monkeypatch.setattr(traceq.layout, "spilling_duckdb", recording)
    monkeypatch.setattr(second_pass, "spilling_duckdb", recording)
    files = [SAMPLE / "traces.otlp.jsonl", SAMPLE / "dcgm.prom"]
    results = ingest(files, tmp_path / "ds", options=IngestOptions(memory_limit=given))
    assert [r.status for r in results] == ["ingested", "ingested"]
    # DuckDB prints the limit in MiB: 512MB is 488.2 MiB, 256MB 244.1 MiB, 300MB 286.1 MiB
    mib = {"512MB": "488.2 MiB", "256MB": "244.1 MiB", "300MB": "286.1 MiB"}
    assert set(seen) == {mib[u] for u in used}
    assert len(seen) == 4  # the OTLP and GPU second passes, the two sources' layouts
    assert traceq.spill.INGEST_MEMORY.get() is None  # reset after the ingest


def test_help_documents_the_default() -> None:
    run = traceq_cli("ingest", "--help")
    assert "--memory-limit" in run.stdout and "[default: 512MB; the GPU pivot" in run.stdout
