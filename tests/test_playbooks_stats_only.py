"""A run with no request stamps, only the engine's stats lines (a vLLM log, a /metrics
scrape): ttft-queueing reads the queue from the lines' Waiting count. A queue seen line after
line for min_wait_s is a finding, put on what held it (the batch cap, the KV cache or the step
budget); lone lines with a request waiting, and a single scrape, are not."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from tests.playbook_helpers import REAL, run
from tests.serverlog_factory import Stat, v1_stats
from traceq.ingest import IngestOptions, ingest

T0 = dt.datetime(2025, 6, 15, 10, 0, 0, tzinfo=dt.UTC)


def _log(tmp_path: Path, lines: list[tuple[int, int, float]]) -> Path:
    """A V1 log of stats lines 10 s apart, one per (running, waiting, KV %)."""
    text = [
        v1_stats(Stat(T0 + dt.timedelta(seconds=10 * i), 900.0, 1800.0, run_, wait, kv))
        for i, (run_, wait, kv) in enumerate(lines)
    ]
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(text) + "\n")
    target = tmp_path / "run.tq"
    ingest([log], target, options=IngestOptions(year=2025))
    return target


def _queueing(target: Path):
    return {f.id: f for f in run(target).findings}["ttft-queueing"]


def test_a_batch_pinned_at_its_cap_with_kv_room_is_the_concurrency_cap(tmp_path):
    # 64 running throughout, 20-40 waiting for 40 s, a fifth of the cache in use
    lines = [(64, 0, 20.0)] * 3 + [(64, w, 21.0) for w in (20, 35, 40, 30, 25)] + [(64, 0, 20.0)]
    f = _queueing(_log(tmp_path, lines))
    assert f.status == "fail"
    assert f.message == (
        "requests wait in the engine's queue (up to 40 waiting beside 64.0 running on average;"
        " KV cache at most 21%) from 2025-06-15 10:00:30 UTC for 50 s"
    )
    top = f.causes[0]
    assert (top.id, top.status, top.strength) == ("concurrency-cap", "confirmed", 1.0)
    causes = {c.id: c.status for c in f.causes}
    assert causes["prefill-bound"] == causes["kv-saturated"] == "not_confirmed"
    assert causes["arrival-burst"] == "not_applicable"  # no request arrival in the log


def test_a_queue_that_drains_between_lines_is_not_a_finding(tmp_path):
    # the same load, the queue seen in every other line: it drained in between
    lines = [(64, 30 if i % 2 else 0, 21.0) for i in range(12)]
    assert _queueing(_log(tmp_path, lines)).status == "pass"


def test_a_queue_seen_for_less_than_min_wait_s_is_not_a_finding(tmp_path):
    # two lines running, 10 s: under min_wait_s (20 s)
    lines = [(64, 0, 20.0), (64, 30, 21.0), (64, 30, 21.0), (64, 0, 20.0), (64, 0, 20.0)]
    assert _queueing(_log(tmp_path, lines)).status == "pass"


def test_one_metrics_scrape_shows_no_queue_that_lasted(tmp_path):
    """vLLM 0.25.1 scraped mid-benchmark: Running 64, Waiting 64 ('capacity') at 11 % KV. One
    snapshot shows no duration, and the run's own counters put its mean queue at 31 ms."""
    name = "vllm_v1_0.25.1_metrics_scrape_loaded_opt125m_tp2_waiting64_capacity_er0080.prom"
    scrape = REAL / "vllm" / name
    target = tmp_path / "scrape.tq"
    ingest([scrape], target)
    assert _queueing(target).status == "pass"
