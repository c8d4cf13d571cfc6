"""The OTel first pass reads its next block on a worker thread (traceq/ingest/read_ahead.py):
what a user sees of it must not change. Quarantine rows keep their lines and order, the
progress bar is told every byte from the caller's own thread (Streamlit's bar is not
thread-safe), a reader's error reaches the caller, and a stop closes the reader before the
stream under it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import closing

import pytest

import traceq
from tests.otel_factory import MS, T0, RequestSpec, make_spans, otlp_json_lines
from traceq.ingest.otel import otlp_json
from traceq.ingest.read_ahead import read_ahead


def _numbers(quarantine: list[dict], progress: Callable[[int], None]) -> Iterator[int]:
    for n in range(3):
        progress(10)
        quarantine.append({"location": f"block {n}"})
        yield n
    quarantine.append({"location": "after the last block"})


def test_rows_and_progress_come_to_the_callers_thread_with_their_block():
    caller = threading.get_ident()
    rows: list[dict] = []
    threads, seen = [], []

    def progress(n: int) -> None:
        threads.append(threading.get_ident())
        seen.append((n, len(rows)))

    got = []
    for item in read_ahead(_numbers, rows, progress):
        got.append((item, [r["location"] for r in rows]))
    assert got == [
        (0, ["block 0"]),
        (1, ["block 0", "block 1"]),
        (2, ["block 0", "block 1", "block 2"]),
    ]
    assert rows[-1] == {"location": "after the last block"}
    assert threads == [caller] * 3 and [n for n, _ in seen] == [10, 10, 10]


def test_a_readers_error_reaches_the_caller_after_the_blocks_before_it():
    def failing(quarantine: list[dict], progress: Callable[[int], None]) -> Iterator[int]:
        yield 1
        raise ValueError("bad block")

    got = []
    with pytest.raises(ValueError, match="bad block"):
        for item in read_ahead(failing, [], lambda n: None):
            got.append(item)
    assert got == [1]


def test_a_stop_waits_for_the_block_in_flight_and_closes_the_reader():
    events: list[str] = []
    started = threading.Event()

    def slow(quarantine: list[dict], progress: Callable[[int], None]) -> Iterator[int]:
        try:
            for n in range(100):
                started.set()
                yield n
                events.append(f"read {n + 1}")
        finally:
            events.append("closed")

    before = threading.active_count()
    with closing(read_ahead(slow, [], lambda n: None)) as items:
        assert next(items) == 0  # block 1 is being read on the worker now
    assert events[-1] == "closed" and events.count("closed") == 1
    assert len(events) <= 3  # at most the block in flight was read after the stop
    assert threading.active_count() == before


def _spans(n: int) -> list[str]:
    specs = [
        RequestSpec(
            f"r{i}",
            arrival=T0 + i * 100 * MS,
            tokens=[T0 + i * 100 * MS + 5 * MS, T0 + i * 100 * MS + 9 * MS],
            attributes={"gen_ai.request.id": f"r{i}"},
        )
        for i in range(n)
    ]
    return otlp_json_lines(make_spans(specs), per_line=1).splitlines()


def test_an_ingest_of_many_blocks_keeps_every_line_number_and_byte(tmp_path, monkeypatch):
    monkeypatch.setattr(otlp_json, "BLOCK_BYTES", 4096)  # a few lines a block
    lines = _spans(60)
    bad = {7, 23, 24, 41, 62}  # 1-based line numbers of the lines replaced below
    text = []
    for no in range(1, len(lines) + len(bad) + 1):
        text.append("{not json" if no in bad else lines.pop(0))
    src = tmp_path / "many.jsonl"
    src.write_text("\n".join(text) + "\n")
    caller, calls = threading.get_ident(), []

    def progress(n: int) -> None:
        calls.append((threading.get_ident(), n))

    traceq.ingest([src], tmp_path / "ds", progress=progress)
    con = traceq.open(tmp_path / "ds")
    assert con.sql("SELECT count(*) FROM requests").fetchall() == [(60,)]
    locations = con.sql("SELECT location FROM quarantine").fetchall()
    assert sorted(int(loc.split()[1]) for (loc,) in locations) == sorted(bad)
    assert {t for t, _ in calls} == {caller}
    assert sum(n for _, n in calls) == src.stat().st_size


def test_a_failure_while_staging_stops_the_read_ahead_and_loses_only_that_file(
    tmp_path, monkeypatch
):
    """The driver fails on the second block while the third is being parsed: the file is
    `failed` with the error's reason, nothing of it is committed, and no reader thread is
    left running on its closed stream."""
    from traceq.ingest import otel

    monkeypatch.setattr(otlp_json, "BLOCK_BYTES", 4096)
    src = tmp_path / "many.jsonl"
    src.write_text("\n".join(_spans(60)) + "\n")
    real, calls = otel.split_spans, []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("disk went away")
        return real(*args, **kwargs)

    monkeypatch.setattr(otel, "split_spans", failing)
    before = threading.active_count()
    (result,) = traceq.ingest([src], tmp_path / "ds")
    assert result.status == "failed" and threading.active_count() == before
    con = traceq.open(tmp_path / "ds")
    assert con.sql("SELECT count(*) FROM requests").fetchall() == [(0,)]
    (reason,) = con.sql("SELECT reason FROM quarantine").fetchall()[0]
    assert reason == "otlp-json reader failed: RuntimeError: disk went away"
