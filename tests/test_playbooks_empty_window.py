"""A check that finds no data in its window confirms nothing.

DuckDB's `least()` and `greatest()` skip NULLs, so `least(1.0, avg(x) / k)` over a window
without samples is 1.0, not NULL: "HBM bandwidth saturated" confirmed at full strength with
an empty evidence line. Every cause and every `explains:` mechanism of the built-in catalogue
runs here on a window an hour after the run's last request, on datasets with GPU samples,
engine stats and failures; none may be confirmed, except the causes that read the run's
configuration or its whole span by design (RUN_WIDE).
"""

from __future__ import annotations

import pytest

from traceq.playbooks import gpu, load_catalog
from traceq.playbooks.engine import check_cause
from traceq.playbooks.rollups import materialise_rollups
from traceq.playbooks.values import bind
from traceq.session import Session

# cause → why it may hold whatever the window
RUN_WIDE = {
    ("ttft-prefill", "prefix-cache-off"): "the engine's configuration, printed at start-up",
    ("long-request-tail", "queueing"): "the slowest 5 % of the whole run",
}
SCENARIOS = ["gpu-throttle", "errors", "kv-pressure", "low-prefix-reuse"]
HOUR_NS = 3600 * 10**9


@pytest.fixture(scope="module", params=SCENARIOS)
def empty_window(request, demo_run):
    """(session, GPU figures, a window with no data) for one demo scenario."""
    with Session(demo_run.dataset(request.param)) as session:
        materialise_rollups(session)
        last = session.query("SELECT max(t_arrival + e2e_ns) FROM request_phases").item()
        yield session, gpu.measured(session), (last + HOUR_NS, last + HOUR_NS + 60 * 10**9)


def test_no_cause_is_confirmed_on_an_empty_window(empty_window):
    session, hw, (start, end) = empty_window
    confirmed = []
    for pb in load_catalog().playbooks:
        params, _ = gpu.params_for(pb, hw, {})
        at = {**params, "start": start, "end": end}
        for spec in pb.causes:
            cause = check_cause(session, spec, at)
            if cause.status == "confirmed" and (pb.id, spec.id) not in RUN_WIDE:
                confirmed.append((pb.id, spec.id, cause.strength, cause.evidence))
    assert not confirmed


def test_no_mechanism_holds_on_an_empty_window(empty_window):
    session, hw, (start, end) = empty_window
    held = []
    for pb in load_catalog().playbooks:
        params, _ = gpu.params_for(pb, hw, {})
        values = {**params, "start": start, "end": end, "root_start": start, "root_end": end}
        for edge in pb.explains:
            if not edge.sql:
                continue
            frame = session.query(edge.sql, bind(edge.sql, values))
            strength = frame.item(0, "strength") if frame.height else None
            if strength is not None and strength >= edge.confirm_at:
                held.append((pb.id, edge.playbook, strength))
    assert not held
