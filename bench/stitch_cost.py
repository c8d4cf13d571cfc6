"""What stitching routed / disaggregated traces costs an OTLP/JSON ingest that has none.

Generates bench/otlp_json_ingest.py's file (vLLM-style llm_request spans with gen_ai.token
events; one engine, so nothing to stitch) and runs `traceq.ingest()` on it --runs times, each
in a fresh process, timing every step of the OTel second pass (traceq/ingest/otel/__init__.py
`_SECOND_PASS`, each statement's tables materialised) and every output it writes. The stitch
is `otel_stitch.sql`, `otel_clocks.sql`, `otel_stitched.sql` and the writes of the tables
only it fills (`request_hops`, `clock_offsets`, `unserved`); the ingest warning on files that
share traces (traceq/ingest/split_traces.py) is timed beside it. Prints min / median / max
seconds of the whole ingest and of the stitch, and the stitch's share of the ingest.

    python bench/stitch_cost.py --mb 176 --runs 3
    python bench/stitch_cost.py --file RUN/traces.otlp.jsonl  # traceq synth --convention dynamo
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from harness import run_python
from otlp_json_ingest import generate

STITCH_SQL = ("otel_stitch", "otel_clocks", "otel_stitched")
STITCH_TABLES = ("request_hops", "clock_offsets", "unserved")

CHILD = r"""
import importlib, json, sys, time
import traceq
ingest_pkg = importlib.import_module("traceq.ingest")  # traceq.ingest is also the function
otel = importlib.import_module("traceq.ingest.otel")
from traceq.writer import SourceWriter

marks = []
load = otel.load
def timed_load(name):
    marks.append((name, time.perf_counter()))
    return load(name)
otel.load = timed_load

writes = {}
write_view = SourceWriter.write_view
def timed_write_view(self, table, con, view):
    t = time.perf_counter()
    out = write_view(self, table, con, view)
    writes[table] = writes.get(table, 0.0) + time.perf_counter() - t
    return out
SourceWriter.write_view = timed_write_view

split = ingest_pkg.split_trace_warnings
split_s = []
def timed_split(*args):
    t = time.perf_counter()
    out = split(*args)
    split_s.append(time.perf_counter() - t)
    return out
ingest_pkg.split_trace_warnings = timed_split

t = time.perf_counter()
traceq.ingest([sys.argv[1]], sys.argv[2])
total = time.perf_counter() - t
steps = {}
for (name, start), (_, end) in zip(marks, marks[1:]):
    steps[name] = end - start
print(json.dumps({"total": total, "steps": steps, "writes": writes,
                  "split": sum(split_s)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=176)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--file", type=Path, help="an OTLP/JSON file to ingest instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="traceq-stitch-") as tmp:
        src = args.file or Path(tmp) / "traces.otlp.jsonl"
        if args.file is None:
            generate(src, args.mb)
        rows = []
        for run in range(args.runs):
            child = run_python(["-c", CHILD, str(src), str(Path(tmp) / f"ds{run}")])
            rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
    totals = [r["total"] for r in rows]
    stitch = [
        sum(r["steps"].get(n, 0.0) for n in STITCH_SQL)
        + sum(r["writes"].get(t, 0.0) for t in STITCH_TABLES)
        for r in rows
    ]
    split = [r["split"] for r in rows]
    size = src.stat().st_size / 1e6 if args.file else args.mb
    print(f"file: {size:.0f} MB of OTLP/JSON, {args.runs} runs (min / median / max s)")
    for name, values in (("ingest", totals), ("stitch", stitch), ("split-trace check", split)):
        print(f"{name}: {' / '.join(f'{v:.2f}' for v in _stats(values))}")
    for name in STITCH_SQL:
        print(f"  {name}.sql: {statistics.median(r['steps'].get(name, 0.0) for r in rows):.2f}")
    for table in STITCH_TABLES:
        print(
            f"  write {table}: {statistics.median(r['writes'].get(table, 0.0) for r in rows):.2f}"
        )
    shares = [(s + c) / (t - s - c) for s, c, t in zip(stitch, split, totals, strict=True)]
    share = statistics.median(shares)
    print(f"stitch + check add {share:.1%} to the ingest without them (median of runs)")


def _stats(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


if __name__ == "__main__":
    main()
