"""Clocks: no silent guess. The year of a yearless log comes from the other
sources, a guess is printed and warned about, a wrong one is corrected with --replace."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from traceq.dataset import Dataset
from traceq.ingest import IngestOptions, IngestResult, InputError, ingest
from traceq.session import Session

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
TRACES_YEAR = 2025  # sample_traces/*/traces.otlp.jsonl are stamped 2025-06-15


def fresh_copy(scenario: str, dest: Path) -> Path:
    """The scenario's files as a fresh clone has them: mtime now (a later year than 2025)."""
    out = dest / scenario
    shutil.copytree(SAMPLES / scenario, out)
    now = time.time()
    for f in out.iterdir():
        os.utime(f, (now, now))
    return out


def scalar(ds: Path, sql: str) -> object:
    with Session(ds) as session:
        return session.query(sql).item()


def year_of_stats(ds: Path) -> set[int]:
    with Session(ds) as session:
        frame = session.query(
            "SELECT DISTINCT year(make_timestamp(ts // 1000)) AS y FROM engine_stats"
        )
    return set(frame["y"].to_list())


def by_name(results: list[IngestResult]) -> dict[str, IngestResult]:
    return {r.path.name: r for r in results}


@pytest.mark.parametrize("scenario", ["kv-pressure", "healthy"])
def test_sample_log_lands_in_the_traces_year(tmp_path: Path, scenario: str) -> None:
    src = fresh_copy(scenario, tmp_path)
    results = by_name(ingest([src], tmp_path / "ds"))
    log = results["vllm.log"]
    assert log.assumptions["year"] == TRACES_YEAR
    assert log.assumptions["year_from"].startswith("matched to the time range of")
    assert not any(r.warnings for r in results.values())
    assert year_of_stats(tmp_path / "ds") == {TRACES_YEAR}
    # Every stats line finds its GPU samples (a year off, engine_gpu joined none).
    stats = results["vllm.log"].rows["engine_stats"]
    assert scalar(tmp_path / "ds", "SELECT count(*) FROM engine_gpu") == stats > 0


def test_alone_the_log_warns_then_replace_corrects_it(tmp_path: Path) -> None:
    src = fresh_copy("kv-pressure", tmp_path)
    ds = tmp_path / "ds"
    (log,) = ingest([src / "vllm.log"], ds)
    mtime_year = time.gmtime(src.joinpath("vllm.log").stat().st_mtime).tm_year
    assert log.assumptions["year_from"] == "file mtime"
    assert any("taken from the file's mtime" in w for w in log.warnings)
    # The traces come next and share no time with the log's guessed year.
    (traces,) = ingest([src / "traces.otlp.jsonl"], ds)
    assert any("shares no time with the other sources" in w for w in traces.warnings)
    assert "vllm.log" in traces.warnings[0]
    # Plain re-ingest skips the file; --replace reads it again, now matched to the traces.
    (again,) = ingest([src / "vllm.log"], ds)
    assert again.status == "already ingested"
    (fixed,) = ingest([src / "vllm.log"], ds, replace=True)
    assert fixed.status == "replaced" and fixed.assumptions["year"] == TRACES_YEAR
    assert fixed.warnings == []
    assert year_of_stats(ds) == {TRACES_YEAR} != {mtime_year}
    # The old rows are gone in the same commit: one log source, its stats counted once.
    manifest = Dataset(ds).sources()
    assert sum(s["path"].endswith("vllm.log") for s in manifest) == 1
    assert scalar(ds, "SELECT count(*) FROM engine_stats") == fixed.rows["engine_stats"]
    listed = {f for s in manifest for rels in s["files"].values() for f in rels}
    pick = Dataset(ds).manifest().get("request_pick")  # which row stands for each request
    listed |= {pick["file"]} if pick else set()
    on_disk = {str(p.relative_to(ds)) for p in ds.rglob("*.parquet") if ".staging" not in p.parts}
    assert on_disk == listed


def test_replace_with_an_explicit_year(tmp_path: Path) -> None:
    src = fresh_copy("kv-pressure", tmp_path)
    ds = tmp_path / "ds"
    ingest([src], ds)
    (log,) = ingest([src / "vllm.log"], ds, options=IngestOptions(year=2024), replace=True)
    assert log.assumptions == {**log.assumptions, "year": 2024, "year_from": "--year"}
    assert year_of_stats(ds) == {2024}
    assert any("shares no time" in w for w in log.warnings)


def test_stamps_after_the_mtime_warn(tmp_path: Path) -> None:
    src = fresh_copy("kv-pressure", tmp_path)
    old = time.mktime((2020, 1, 1, 0, 0, 0, 0, 0, 0))
    os.utime(src / "traces.otlp.jsonl", (old, old))
    (traces,) = ingest([src / "traces.otlp.jsonl"], tmp_path / "ds")
    assert any("lies after the file's mtime" in w for w in traces.warnings)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"year": 24}, "--year 24: expected a four-digit year"),
        ({"year": 2101}, "--year 2101"),
        ({"t0": 1_749_981_600}, "in seconds: give nanoseconds"),
        ({"start": 1_749_981_600_000}, "in milliseconds: give nanoseconds"),
        ({"start": -5}, "--start -5: not an instant"),
    ],
)
def test_clock_options_are_checked(tmp_path: Path, options: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        ingest(
            [SAMPLES / "kv-pressure" / "vllm.log"],
            tmp_path / "ds",
            options=IngestOptions(**options),
        )
    assert not (tmp_path / "ds").exists()  # refused before a dataset is created


def test_cli_prints_every_clock_assumption(tmp_path: Path) -> None:
    src = fresh_copy("kv-pressure", tmp_path)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "traceq",
            "ingest",
            str(src / "vllm.log"),
            "-o",
            str(tmp_path / "ds"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "clock (log_local_time): year: " in run.stdout and "year_from: file mtime" in run.stdout
    assert "warning: vllm.log: no year in the log's stamps" in run.stderr
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "traceq",
            "ingest",
            str(src),
            "-o",
            str(tmp_path / "x"),
            "--year",
            "24",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "expected a four-digit year" in bad.stderr
    log, ds = str(src / "vllm.log"), str(tmp_path / "ds")
    again = subprocess.run(
        [sys.executable, "-m", "traceq", "ingest", log, "-o", ds, "--year", "2025"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "already ingested" in again.stdout and "--replace reads it again" in again.stdout


def _ns(iso_text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(iso_text).timestamp()) * 10**9


@pytest.mark.parametrize(
    ("first", "last", "refs", "year"),
    [
        # traces in early January; the log began in December the year before
        (
            "12-30 23:00:00",
            "01-02 01:00:00",
            [("2025-01-01T00:00:00+00:00", "2025-01-01T02:00:00+00:00")],
            2024,
        ),
        # the server was up five days before the load test: still within the slack
        (
            "06-10 08:00:00",
            "06-15 11:00:00",
            [("2025-06-15T10:00:00+00:00", "2025-06-15T10:30:00+00:00")],
            2025,
        ),
        # a log a month away from every other source: no year can be claimed
        (
            "05-01 08:00:00",
            "05-02 08:00:00",
            [("2025-06-15T10:00:00+00:00", "2025-06-15T10:30:00+00:00")],
            None,
        ),
        # nothing to match against
        ("06-15 10:00:00", None, [], None),
    ],
)
def test_infer_year(first: str, last: str | None, refs: list, year: int | None) -> None:
    from traceq.ingest.clocks import infer_year

    ranges = [(_ns(a), _ns(b)) for a, b in refs]
    found = infer_year(first, last, "UTC", ranges)
    assert (found[0] if found else None) == year


def test_relative_load_test_clock_warns_and_t0_anchors_it(tmp_path: Path) -> None:
    real = Path(__file__).parent / "data/real/loadtest/vllm_bench"
    path = real / "openai-1.0qps-Qwen3-VL-8B-Instruct-20260722-041843.json"
    (loose,) = ingest([path], tmp_path / "a")
    assert loose.clock_domain == "perf_counter_relative"
    assert any("count from the tool's own zero" in w for w in loose.warnings)
    t0 = 1_749_981_600 * 10**9
    (anchored,) = ingest([path], tmp_path / "b", options=IngestOptions(t0=t0))
    assert str(anchored.clock_domain).startswith("unix_ns")
    assert not any("own zero" in w for w in anchored.warnings)
