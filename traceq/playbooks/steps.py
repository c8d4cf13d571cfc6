"""The one path by which the playbook engine runs a query, timed per step.

Every query of a diagnose run (rollups, requirements, symptom, figures, causes, evidence,
examples) goes through `run_query`, so a run can be profiled (`traceq diagnose --profile`,
`bench/diagnose.py --profile`) and another executor could stand in at one place.

>>> steps = []
>>> with recording(steps), playbook("demo"):
...     note("symptom", 0.25, 3)
>>> [(s.playbook, s.step, s.seconds, s.rows) for s in steps]
[('demo', 'symptom', 0.25, 3)]
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from traceq.playbooks.executor import Executor
from traceq.session import Results


@dataclass(frozen=True)
class Step:
    """One timed query: which playbook (or `rollups`), which step, seconds, rows returned."""

    playbook: str
    step: str
    seconds: float
    rows: int


_SINK: ContextVar[list[Step] | None] = ContextVar("traceq_steps", default=None)
_PLAYBOOK: ContextVar[str] = ContextVar("traceq_playbook", default="")


@contextmanager
def recording(sink: list[Step] | None) -> Iterator[None]:
    """Append a `Step` to `sink` for every query run inside (nothing when `sink` is None)."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


@contextmanager
def playbook(pid: str) -> Iterator[None]:
    """Label the steps run inside with playbook `pid`."""
    token = _PLAYBOOK.set(pid)
    try:
        yield
    finally:
        _PLAYBOOK.reset(token)


def note(step: str, seconds: float, rows: int = 0) -> None:
    """Record one step of the current playbook, when a run is being recorded."""
    sink = _SINK.get()
    if sink is not None:
        sink.append(Step(_PLAYBOOK.get(), step, seconds, rows))


def run_query(
    session: Executor,
    step: str,
    sql: str,
    params: dict[str, Any] | None = None,
    *,
    row_cap: int | None = None,
) -> Results:
    """Run one read statement for `step`: all rows (more than the session's cap is an
    error) or, with `row_cap`, the first `row_cap` rows and whether more were cut."""
    started = time.perf_counter()
    rows = 0
    try:
        if row_cap is None:
            results = session.execute(sql, params, truncate=False)
        else:
            results = session.execute(sql, params, row_cap=row_cap)
        rows = results.frame.height
    finally:
        note(step, time.perf_counter() - started, rows)
    return results


def summary(steps: list[Step], top: int = 15) -> str:
    """A plain-text profile: seconds per playbook, then the slowest steps."""
    total = sum(s.seconds for s in steps) or 1.0
    per: dict[str, float] = {}
    for s in steps:
        per[s.playbook] = per.get(s.playbook, 0.0) + s.seconds
    lines = [f"{'playbook':24} {'seconds':>8} {'share':>6}"]
    lines += [
        f"{pid:24} {sec:8.2f} {sec / total:6.0%}"
        for pid, sec in sorted(per.items(), key=lambda kv: -kv[1])
    ]
    lines += ["", f"slowest steps ({len(steps)} queries, {total:.2f} s in all):"]
    lines += [
        f"{s.seconds:8.2f}  {s.playbook}: {s.step}"
        for s in sorted(steps, key=lambda s: -s.seconds)[:top]
    ]
    return "\n".join(lines) + "\n"
