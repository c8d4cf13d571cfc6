r"""Explain the tail: what the slowest requests spent their time on, and what the engine was
doing then (traceq/sql/tail_explain.sql), for the whole run and for each incident.

Each metric (TTFT, TPOT, e2e) gets one line: its p99 and how its slowest requests split by
dominant phase and engine state, largest share first.

>>> text = line({"metric": "ttft", "p99_ms": 3712.0, "threshold_ms": 3100.0, "tail": 12,
...       "requests": 1200, "groups": [
...       {"phase": "queue", "state": "warm-up", "requests": 10, "share": 0.83},
...       {"phase": "queue", "state": "long-prefill", "requests": 2, "share": 0.17,
...        "ahead_tokens": 8192}]})
>>> print(*text.split("; "), sep=";\n")
P99 TTFT 3.7 s (slowest 12 of 1,200 requests, from 3.1 s): 83 % waited in queue during warm-up;
17 % waited in queue behind a prefill of up to 8,192 tokens
"""

from __future__ import annotations

from typing import Any

from traceq.playbooks.executor import Executor
from traceq.playbooks.steps import run_query
from traceq.playbooks.values import bind, plain_rows
from traceq.playbooks.words import count, duration_ms
from traceq.session import QueryError
from traceq.sql import load

PARAMS: dict[str, float] = {
    # share of a metric's requests that make its tail: the slowest 1 %, as p99 reads it
    "tail_share": 0.01,
    # ...but at least this many requests, so a share is not one request's story
    "min_tail": 5,
    # requests with the metric a window needs before its tail is explained
    "min_requests": 20,
    # uncached prompt tokens from which a prefill holds up the batch (chunked prefill
    # budgets are 2-8 k tokens a step; a longer prompt takes several steps of its own)
    "long_prompt_tokens": 4096,
    # seconds after the engine reports ready that count as warm-up (first CUDA graph
    # replays, allocator growth, JIT kernels: tens of seconds on vLLM; warm-up-skew's scale)
    "warmup_s": 60,
    # KV-cache usage from which the cache is full (as kv-pressure reads it)
    "kv_full": 0.95,
    # drop of the busy SM clock below the run's highest from which the GPU counts as
    # throttled (slow-decode's gpu-throttle: boost clocks wander 5-10 %, a cap takes 20 %+)
    "clock_drop": 0.2,
    # a window of at least this many times the run's median arrival rate is a burst (the
    # queue grows while arrivals outrun the engine; ttft-queueing's arrival-burst cause)...
    "burst_factor": 2.0,
    # ...and at least this many arrivals: at a few requests a window, twice the median is
    # Poisson noise, not a burst
    "burst_min_arrivals": 10,
    # seconds between stats lines a request's interval may reach forward (vLLM logs every
    # 5-10 s, so a short request may have no line inside its own interval)
    "stats_lag_s": 10,
}
METRICS = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "e2e"}
_FIGURES = ("ahead_tokens", "kv_max", "clock_mhz", "top_mhz", "rate_rps", "typical_rps")
"""A group's figures (null unless its state has them): the longest prefill ahead (tokens),
the highest KV-cache usage (0-1), the lowest busy SM clock and the run's highest (MHz), the
burst's arrival rate and the run's typical one (requests/s)."""
_PHASES = {
    "queue": "waited in queue",
    "prefill": "were in prefill",
    "decode": "were decoding",
    "tokenize": "were being tokenized",
    "unstamped": "have no phase stamps",
}
_STATES = {
    "preempted": "after being preempted",
    "kv-full": "with the KV cache full",
    "warm-up": "during warm-up",
    "throttled": "on a throttled GPU{clocks}",
    "burst": "during a burst of arrivals{rates}",
    "long-prefill": "behind a prefill of {ahead}",
    "long-prompt": "on a long prompt of their own",
    "long-output": "on a long output of their own",
    "none": "with nothing unusual in the engine",
}

UNSEEN = "(no engine stats to say more)"
"""A group's state when no other state held and the dataset holds nothing of the engine's (a
load test's export or traces alone): "nothing unusual in the engine" would claim what no
input showed."""
UNWEIGHED = "(no prompt lengths to say more)"
"""The same when the engine was seen but no request has a prompt length (SGLang's traces):
no prefill ahead or beside could be weighed."""


def explain(session: Executor, start: int, end: int) -> list[dict[str, Any]]:
    """Per metric with enough requests in [start, end): p99, tail size and its groups
    (phase, state, requests, share), largest first. Empty when the data cannot say."""
    sql = load("tail_explain")
    try:
        frame = run_query(session, "tail", sql, bind(sql, {**PARAMS, "start": start, "end": end}))
    except QueryError:
        return []
    out: dict[str, dict[str, Any]] = {}
    for row in plain_rows(frame.frame):
        m = out.setdefault(
            row["metric"],
            {
                "metric": row["metric"],
                "p99_ms": row["p99_ms"],
                "threshold_ms": row["threshold_ms"],
                "tail": 0,
                "requests": row["metric_requests"],
                "engine_seen": bool(row["engine_seen"]),
                "prompts_seen": bool(row["prompts_seen"]),
                "groups": [],
            },
        )
        m["tail"] += row["requests"]
        m["threshold_ms"] = min(m["threshold_ms"], row["threshold_ms"])
        m["groups"].append({k: row[k] for k in ("phase", "state", "requests", *_FIGURES)})
    for m in out.values():
        for g in m["groups"]:
            g["share"] = round(g["requests"] / m["tail"], 3)
        m["line"] = line(m)
    return [out[k] for k in METRICS if k in out]


def line(m: dict[str, Any], top: int = 3) -> str:
    """One sentence for one metric's tail: p99, then its largest groups."""
    head = (
        f"P99 {METRICS[m['metric']]} {duration_ms(m['p99_ms'])} "
        f"(slowest {count(m['tail'])} of {count(m['requests'])} requests, "
        f"from {duration_ms(m['threshold_ms'])})"
    )
    parts, told = [], set()
    blind = not m.get("engine_seen", True)  # `none` then says nothing of the engine
    unseen = UNSEEN if blind else None if m.get("prompts_seen", True) else UNWEIGHED
    for g in m["groups"][:top]:  # a state's figures once a line, at its first group
        parts.append(_group(m["metric"], g, figures=g["state"] not in told, unseen=unseen))
        told.add(g["state"])
    return head + ": " + "; ".join(parts)


def _group(
    metric: str, g: dict[str, Any], *, figures: bool = True, unseen: str | None = None
) -> str:
    share = f"{g['share'] * 100:.0f} %"
    n = g.get("ahead_tokens")
    ahead = (
        "a long prompt" if not n else f"{'' if g['requests'] == 1 else 'up to '}{count(n)} tokens"
    )
    low, top = g.get("clock_mhz"), g.get("top_mhz")
    clocks = f" (SM clock down to {low:,.0f} MHz from {top:,.0f})" if low and top else ""
    rate, typical = g.get("rate_rps"), g.get("typical_rps")
    rates = f" ({rate:,.1f} req/s against {typical:,.1f} typically)" if rate and typical else ""
    if not figures:
        clocks = rates = ""
    if g["state"] != "none":
        state = _STATES[g["state"]].format(ahead=ahead, clocks=clocks, rates=rates)
    elif g["phase"] == "tokenize":  # before the engine: nothing to add
        state = ""
    else:
        state = unseen or _STATES["none"]
    verb = "decoded" if metric == "tpot" else _PHASES[g["phase"]]
    if g["phase"] == "unstamped" and state and state not in (UNSEEN, UNWEIGHED):
        state = f"and ran {state}"  # no stamp says where the time went; the engine might
    return f"{share} {verb} {state}".rstrip()
