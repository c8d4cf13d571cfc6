"""A run with no request stamps, only the engine's stats lines (a vLLM log, a /metrics
scrape): ttft-queueing reads the queue from the lines' Waiting count. A queue seen line after
line for min_wait_s is a finding, put on what held it (the batch cap, the KV cache or the step
budget); lone lines with a request waiting, and a single scrape, are not. error-rate reads
the same lines for its overload cause."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from tests.playbook_helpers import REAL, run
from tests.serverlog_factory import Stat, lifecycle, received, v0_stats, v1_stats
from traceq.ingest import IngestOptions, ingest

T0 = dt.datetime(2025, 6, 15, 10, 0, 0, tzinfo=dt.UTC)
CAP = 64  # the max_num_seqs the logs print


def _log(
    tmp_path: Path,
    lines: list,
    every_s: float = 10,
    v0: bool = False,
    args: str | None = f"'max_num_seqs': {CAP}",
    tps: tuple[float, float] = (900.0, 1800.0),
) -> Path:
    """A log of stats lines `every_s` apart, one per (running, waiting, KV %[, engine]), after
    a start-up line printing `args` (None: no start-up in the log); a line of None is a
    silence (nothing logged then), a str a line as it is."""
    text = [] if args is None else [_args_line(T0 - dt.timedelta(minutes=1), args)]
    for i, line in enumerate(lines):
        if line is None:
            continue
        if isinstance(line, str):
            text.append(line)
            continue
        run_, wait, kv, *engine = line
        at = T0 + dt.timedelta(seconds=every_s * i)
        stat = Stat(at, *tps, run_, wait, kv, engine=engine[0] if engine else 0)
        text.append(v0_stats(stat) if v0 else v1_stats(stat))
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(text) + "\n")
    target = tmp_path / "run.tq"
    ingest([log], target, options=IngestOptions(year=2025))
    return target


def _args_line(at: dt.datetime, args: str, pid: int = 1) -> str:
    stamp = at.strftime("%m-%d %H:%M:%S")
    return f"(APIServer pid={pid}) INFO {stamp} [utils.py:253] non-default args: {{{args}}}"


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


def test_one_metrics_scrape_cannot_show_a_queue_that_lasted(tmp_path):
    """vLLM 0.25.1 scraped mid-benchmark: Running 64, Waiting 64 ('capacity') at 11 % KV. One
    snapshot shows no duration (the run's own counters put its mean queue at 31 ms): the
    playbook does not run, rather than pass."""
    name = "vllm_v1_0.25.1_metrics_scrape_loaded_opt125m_tp2_waiting64_capacity_er0080.prom"
    target = tmp_path / "scrape.tq"
    ingest([REAL / "vllm" / name], target)
    f = _queueing(target)
    assert f.status == "not_applicable"
    assert "engine stats lines (Running / Waiting) over min_wait_s or longer" in f.message


def test_three_lines_over_min_wait_s_are_enough(tmp_path):
    lines = [(64, 0, 20.0), (64, 30, 21.0), (64, 30, 21.0), (64, 30, 21.0), (64, 0, 20.0)]
    assert _queueing(_log(tmp_path, lines)).status == "fail"


def test_a_silence_in_the_log_ends_the_queue(tmp_path):
    # waiting in two lines, half an hour of nothing logged (a restart, an excerpt), one more
    lines = [(64, 0, 20.0), (64, 30, 21.0), (64, 30, 21.0), *[None] * 180, (64, 30, 21.0)]
    assert _queueing(_log(tmp_path, lines)).status == "pass"


def test_v0_pending_lines_every_5_s(tmp_path):
    # V0 logs every 5 s and calls the queue Pending: 25 s of it is five lines
    lines = [(64, 0, 20.0)] + [(64, 12, 21.0)] * 6 + [(64, 0, 20.0)]
    f = _queueing(_log(tmp_path, lines, every_s=5, v0=True))
    assert f.status == "fail"
    assert (f.causes[0].id, f.causes[0].status) == ("concurrency-cap", "confirmed")


def test_an_engine_that_runs_nothing_while_requests_wait_is_stalled(tmp_path):
    # nothing runs, nothing is generated, one request waits for two minutes
    lines = [(8, 0, 5.0)] * 2 + [(0, 1, 0.0)] * 12 + [(8, 0, 5.0)]
    f = _queueing(_log(tmp_path, lines))
    assert f.status == "fail"
    assert f.message.startswith("requests wait in the engine's queue (up to 1 waiting; KV cache")
    assert (f.causes[0].id, f.causes[0].status) == ("nothing-running", "confirmed")
    causes = {c.id: c.status for c in f.causes}
    assert causes["prefill-bound"] == causes["concurrency-cap"] == "not_confirmed"


def test_a_batch_under_its_printed_cap_is_not_the_concurrency_cap(tmp_path):
    # 4 running all run long (the run's peak) beside a queue while prompts are nearly all
    # the tokens processed; max_num_seqs is 64
    lines = [(4, 0, 5.0)] * 2 + [(4, 3, 6.0)] * 6 + [(4, 0, 5.0)]
    f = _queueing(_log(tmp_path, lines, tps=(4000.0, 40.0)))
    assert f.status == "fail"
    assert (f.causes[0].id, f.causes[0].status) == ("prefill-bound", "confirmed")
    assert "under its cap (64)" in f.causes[0].evidence
    assert {c.id: c.status for c in f.causes}["concurrency-cap"] == "not_confirmed"


def test_a_queue_beside_room_in_the_step_budget_is_not_prefill_bound(tmp_path):
    # the same queue while the engine mostly decodes: it waits on something else
    lines = [(4, 0, 5.0)] * 2 + [(4, 3, 6.0)] * 6 + [(4, 0, 5.0)]
    f = _queueing(_log(tmp_path, lines, tps=(900.0, 1800.0)))
    causes = {c.id: c.status for c in f.causes}
    assert causes["prefill-bound"] == causes["concurrency-cap"] == "not_confirmed"


@pytest.mark.parametrize(
    ("args", "cap_from", "status"),
    [
        # a log that printed its arguments without max_num_seqs: vLLM's default holds
        ("'model': 'm'", "the default max_num_seqs (256)", "not_confirmed"),
        # an excerpt without start-up: the engine's own peak stands in
        (None, "its run-wide maximum (64)", "confirmed"),
    ],
)
def test_the_cap_where_the_log_prints_none(tmp_path, args, cap_from, status):
    lines = [(64, 0, 20.0)] * 2 + [(64, 30, 21.0)] * 5 + [(64, 0, 20.0)]
    f = _queueing(_log(tmp_path, lines, args=args))
    (cap,) = [c for c in f.causes if c.id == "concurrency-cap"]
    assert cap.status == status
    assert cap.evidence.startswith(f"running at {cap_from} with KV room"), cap.evidence


def test_a_restart_brings_its_own_cap(tmp_path):
    # started with max_num_seqs 256, restarted (a new process) with 32 and pinned there
    before = [(10, 0, 5.0)] * 3
    restart = [_args_line(T0 + dt.timedelta(seconds=35), "'max_num_seqs': 32", pid=2)]
    after = [
        v1_stats(Stat(T0 + dt.timedelta(seconds=40 + 10 * i), 900.0, 1800.0, 32, w, 9.0),
                 proc="(APIServer pid=2) ")
        for i, w in enumerate([0, 20, 25, 30, 20, 0])
    ]  # fmt: skip
    f = _queueing(_log(tmp_path, before + restart + after, args="'max_num_seqs': 256"))
    assert f.status == "fail"
    assert (f.causes[0].id, f.causes[0].status) == ("concurrency-cap", "confirmed")
    assert "max_num_seqs (32)" in f.causes[0].evidence


def test_scrapes_30_s_apart_show_a_queue_of_minutes(tmp_path):
    # a scrape every 30 s, longer than min_wait_s: six in a row with 40 waiting
    lines = [(64, 0, 20.0)] + [(64, 40, 21.0)] * 6 + [(64, 0, 20.0)]
    assert _queueing(_log(tmp_path, lines, every_s=30)).status == "fail"


def test_the_data_parallel_rank_that_queued_is_the_one_judged(tmp_path):
    # rank 0 pinned at its cap with a queue, ranks 1 and 2 at 20 running with none waiting
    lines = []
    for i in range(9):
        wait = 30 if 2 <= i <= 7 else 0
        lines += [(64, wait, 25.0, 0), (20, 0, 10.0, 1), (20, 0, 10.0, 2)]
    f = _queueing(_log(tmp_path, lines, every_s=10 / 3))
    assert f.status == "fail"
    assert "beside 64.0 running on average" in f.message
    assert (f.causes[0].id, f.causes[0].status) == ("concurrency-cap", "confirmed")


def test_failures_beside_the_engines_queue_are_an_overload(tmp_path):
    """A log with request logging and no spans: requests aborted (client timeouts) while the
    stats lines show a queue. error-rate puts the failures on the overload it reads there."""
    lines: list = [(4, 0, 5.0)] * 2 + [(4, 20, 9.0)] * 6 + [(4, 0, 5.0)]
    for i in range(12):
        at = T0 + dt.timedelta(seconds=15 + 4 * i)
        req = f"cmpl-{i:04d}"
        lines.append(received(at, req, 8, 64, v1=True))
        lines.append(lifecycle(at + dt.timedelta(seconds=1.5), "Aborted", req, v1=True))
    d = run(_log(tmp_path, lines))
    f = {f.id: f for f in d.findings}["error-rate"]
    assert f.status == "fail"
    (overload,) = [c for c in f.causes if c.id == "overload"]
    assert overload.status == "confirmed"
    assert overload.evidence.startswith("requests waited in "), overload.evidence
