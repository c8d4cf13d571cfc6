"""Where a finding puts its incident, on small hand-made runs (10 minutes, 10-s windows):
a full KV cache first seen by the stats line at a window's first instant also marks the
window in which it filled, and warm-up-skew does not call an early window slow when the
steady state is as uneven as that window. And prefill stalls that another failing
finding causes are its warn (synth runs of 8 minutes, as bench/detection.py's windowed)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.playbook_helpers import ingest_folder, run
from traceq.dataset import Dataset
from traceq.playbooks import diagnose, load_catalog
from traceq.session import Session
from traceq.synth import generate
from traceq.writer import SourceWriter

NS = 1_000_000_000
T0 = 1_750_000_000 * NS  # a multiple of the 10-s windows of a 10-minute run
RUN_S = 600


def _dataset(
    root: Path,
    tpot_ms: list[float],
    kv: dict[int, float] | None = None,
    ttft_ms: list[float] | None = None,
    output_tokens: list[int] | None = None,
    preemptions: list[int] | None = None,
) -> Path:
    """One request a second for RUN_S s, output_tokens[second] (60) at tpot_ms[second], the first
    after ttft_ms[second] (60 ms without it); engine stats every 10 s on the window grid
    with KV usage 0.3 except at the seconds in `kv`."""
    ds = Dataset(root / "run.tq", create=True)
    t = [T0 + i * NS for i in range(RUN_S)]
    ttft_ms = ttft_ms or [60.0] * RUN_S
    output_tokens = output_tokens or [60] * RUN_S
    first = [x + int(ms * 1e6) for x, ms in zip(t, ttft_ms, strict=True)]
    requests = pl.DataFrame(
        {
            "request_id": [f"r{i}" for i in range(RUN_S)],
            "view": "server",
            "t_arrival": t,
            "t_tokenized": [x + 1_000_000 for x in t],
            "t_queued": [x + 1_000_000 for x in t],
            "t_scheduled": [x + 2_000_000 for x in t],
            "t_first_token": first,
            "t_last_token": [
                f + int((n - 1) * ms * 1e6)
                for f, ms, n in zip(first, tpot_ms, output_tokens, strict=True)
            ],
            "n_preemptions": preemptions or [0] * RUN_S,
            "prompt_tokens": 500,
            "output_tokens": output_tokens,
        }
    )
    kv = kv or {}
    stats_s = range(0, RUN_S, 10)
    engine = pl.DataFrame(
        {
            "ts": [T0 + s * NS for s in stats_s],
            "running": 2,
            "waiting": [20 if kv.get(s, 0) >= 0.95 else 0 for s in stats_s],
            "kv_usage": [kv.get(s, 0.3) for s in stats_s],
        }
    )
    w = SourceWriter(ds, "windows000000000")
    w.write("requests", requests)
    w.write("engine_stats", engine)
    w.commit({"path": "generated", "format": "test"})
    return root / "run.tq"


def _finding(path: Path, playbook: str):
    with Session(path) as s:
        return diagnose(s, [load_catalog().by_id()[playbook]]).findings[0]


def test_kv_full_first_seen_at_a_window_start_marks_the_window_it_filled_in(tmp_path):
    # 0.6 at 290 s, full at 300-320 s: the cache filled during 290-300 s, and the line at
    # 300 s, the first instant of the next window, is the first to show it.
    path = _dataset(tmp_path, [6.0] * RUN_S, {290: 0.6, 300: 1.0, 310: 1.0, 320: 1.0})
    f = _finding(path, "kv-pressure")
    assert f.status == "fail", f.message
    assert [(w["start"], w["end"]) for w in f.windows] == [(T0 + 290 * NS, T0 + 330 * NS)]


def test_kv_below_full_fires_no_window(tmp_path):
    path = _dataset(tmp_path, [6.0] * RUN_S, {290: 0.6, 300: 0.9, 310: 0.9})
    assert _finding(path, "kv-pressure").status == "pass"


def _tpot(first_10s: float, steady: list[float]) -> list[float]:
    """TPOT per request: `first_10s` in the first window, then `steady` repeated per window."""
    per_window = [first_10s] + [steady[i % len(steady)] for i in range(RUN_S // 10 - 1)]
    return [per_window[i // 10] for i in range(RUN_S)]


@pytest.mark.parametrize(
    ("first", "steady", "status"),
    [
        (16.0, [10.0, 10.5, 9.5, 11.0, 10.0, 9.0], "fail"),  # 1.6× a steady state within ±10 %
        (16.0, [10.0, 4.0, 10.0, 20.0, 10.0, 6.0], "pass"),  # as fast as the steady p90 window
        (30.0, [10.0, 4.0, 10.0, 20.0, 10.0, 6.0], "fail"),  # slower than the uneven steady state
    ],
)
def test_warm_up_is_judged_against_the_steady_state_spread(tmp_path, first, steady, status):
    f = _finding(_dataset(tmp_path, _tpot(first, steady)), "warm-up-skew")
    assert f.status == status, f.message
    if status == "fail":
        assert [(w["start"], w["end"]) for w in f.windows] == [(T0, T0 + 10 * NS)]


@pytest.mark.parametrize(
    ("tokens", "says"),
    [
        (60, "run at 6.0× the steady-state median TTFT (600 ms vs 100 ms; median TPOT 10 ms vs"),
        # one-token answers at first: no TPOT in the early block to compare
        (1, "run at 6.0× the steady-state median TTFT (600 ms vs 100 ms)"),
    ],
)
def test_a_warm_up_seen_in_ttft_alone_is_said_in_ttft(tmp_path, tokens, says):
    """The sentence leads with the metric that is slow, not with a TPOT at 1.0×, nor with
    a TPOT that one-token answers do not have."""
    ttft = _tpot(600.0, [100.0, 105.0, 95.0, 110.0, 100.0, 90.0])
    first_tokens = [tokens] * 10 + [60] * (RUN_S - 10)
    path = _dataset(tmp_path, [10.0] * RUN_S, ttft_ms=ttft, output_tokens=first_tokens)
    f = _finding(path, "warm-up-skew")
    assert f.status == "fail", f.message
    assert f.message.endswith(says if tokens == 1 else "10 ms)") and says in f.message


def test_slow_steps_among_preemptions_are_recompute_though_no_stats_line_saw_a_full_cache(
    tmp_path,
):
    """A stats line every 10 s caught the cache at 30 %, but every request of the slow
    minute was preempted: slow-decode's preemption-recompute cause counts them."""
    tpot = [40.0 if 300 <= s < 360 else 10.0 for s in range(RUN_S)]
    preempted = [1 if 300 <= s < 360 else 0 for s in range(RUN_S)]
    f = _finding(_dataset(tmp_path, tpot, preemptions=preempted), "slow-decode")
    assert f.status == "fail", f.message
    cause = next(c for c in f.causes if c.id == "preemption-recompute")
    assert cause.status == "confirmed", cause
    assert (
        cause.evidence
        == "KV cache full in 0% of stats samples (peak 30%); 60 preemptions inside the window"
    )


# Prefill stalls that are the consequence of another failing finding name it and become a
# warn: during warm-up, in a window that starts after the first one (no long prompt arrived
# in the first); under a full KV cache (recomputes and the released backlog prefill at once).
@pytest.mark.parametrize(
    ("scenario", "seed", "window", "intensity", "root", "cause"),
    [("warm-up-skew", 13, (0, 60), "medium", "warm-up-skew", "warm-up"),
     ("kv-pressure", 12, (240, 300), "mild", "kv-pressure", "kv-recompute")],
)  # fmt: skip
def test_prefill_stalls_caused_by_another_finding_are_secondary(
    tmp_path, scenario, seed, window, intensity, root, cause
):
    folder = tmp_path / scenario
    generate(scenario, folder, seed=seed, duration_s=480, window=window, intensity=intensity)
    by_id = {f.id: f for f in run(ingest_folder(folder, tmp_path / "ds.tq")).findings}
    assert by_id[root].status == "fail"
    f = by_id["prefill-interference"]
    assert (f.status, f.see) == ("warn", root), f.message
    assert cause in {c.id for c in f.causes if c.status == "confirmed" and c.see == root}
