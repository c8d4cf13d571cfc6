"""Write a dataset (or a time window of it) as a Chrome JSON trace that the Perfetto UI
(ui.perfetto.dev, or `trace_processor`) opens: `traceq export DATASET --format perfetto`.

Layout (Chrome trace event format, "JSON Array Format" wrapped in an object):

- process 1 "requests": one track per request (thread_name = request id) with a `request`
  slice over its e2e time, its phases (tokenize, queue, prefill, decode) nested inside as
  slices, and each streamed chunk as an instant (`token`, with the gap before it);
- process 2 "engine": running / waiting requests and KV usage as counters;
- process 3 "GPU": SM / DRAM activity, power and SM clock per GPU as counters;
- process 4 "events": start-up, preemption, error … events as instants (HTTP access lines
  are left out: one per request, they add nothing the request tracks lack).

Times are µs since the window's start (`otherData.origin_ns` says when that is). Every event
is built as JSON by DuckDB (traceq/sql/perfetto_*.sql) and streamed to the file in batches, so
memory stays flat whatever the window's size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO

import orjson

from traceq.app.queries import Window
from traceq.session import Session
from traceq.sql import load

PARTS = ("perfetto_requests", "perfetto_tokens", "perfetto_counters")
PROCESSES = {1: "requests", 2: "engine", 3: "GPU", 4: "events"}


@dataclass(frozen=True)
class ExportSummary:
    """What a trace file holds."""

    events: int
    requests: int
    tokens: int


def count(session: Session, window: Window) -> int:
    """Requests that arrived in `window`: the tracks an export of it would hold."""
    return int(session.query(load("perfetto_count"), window.params).item())


def write(
    session: Session, out: BinaryIO, window: Window, *, max_events: int = 10**12
) -> ExportSummary:
    """Write the trace of `window` to `out` (binary); at most `max_events` trace events."""
    requests, tokens = count(session, window), 0
    header = {
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": "traceq export --format perfetto",
            "dataset": str(session.dataset.root),
            "origin_ns": window.since,
            "since_ns": window.since,
            "until_ns": window.until,
        },
    }
    out.write(orjson.dumps(header)[:-1] + b',"traceEvents":[\n')
    meta = [
        orjson.dumps({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}})
        for pid, name in PROCESSES.items()
    ]
    out.write(b",\n".join(meta))
    written = len(meta)
    params = {**window.params, "origin": window.since}
    for part in PARTS:
        for frame in session.stream(load(part), params, row_cap=max_events):
            if frame.height == 0:
                continue
            out.write(b",\n")
            out.write("\n,".join(frame.get_column("event").to_list()).encode())
            written += frame.height
            if part == "perfetto_tokens":
                tokens += frame.height
    out.write(b"\n]}\n")
    return ExportSummary(events=written, requests=requests, tokens=tokens)
