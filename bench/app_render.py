"""Benchmark the app's first render on a large dataset: the overview and the timeline, each run
cold (caches cleared) through `streamlit.testing`, with the rows every chart and table ships to
the browser counted, side by side with a reference run of the one scan the overview cannot
avoid (TTFT p99 over request_phases and TBT p99 over token_gaps) in a fresh Session.

    .venv/bin/python bench/app_render.py /tmp/traceq-large.tq [--runs 2]

The dataset is only read. Not part of the test suite (tests/test_app.py asserts the bounds on
the sample scenarios); docs/PERFORMANCE.md records the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pyarrow as pa
import streamlit as st
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from traceq.session import Session  # noqa: E402

REFERENCE_SQL = (
    "SELECT (SELECT quantile_cont(ttft_ms, 0.99) FROM request_phases) AS ttft_p99, "
    "(SELECT quantile_cont(tbt_ms, 0.99) FROM token_gaps) AS tbt_p99"
)
ROW_BOUND = 5_000
"""Most rows any one chart or table may ship to the browser (issue 12: a few thousand)."""


def rows_of(element) -> int:
    proto = element.proto
    total = sum(pa.ipc.open_stream(d.data.data).read_all().num_rows for d in proto.datasets)
    if proto.data.data:
        total += pa.ipc.open_stream(proto.data.data).read_all().num_rows
    return total


def render(dataset: str, page: str | None) -> dict:
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=1800)
    at.query_params["dataset"] = dataset
    started = time.perf_counter()
    at.run()
    if page:  # open the page with cold caches again, so only its own queries are timed
        st.cache_data.clear()
        st.cache_resource.clear()
        started = time.perf_counter()
        at.switch_page(f"traceq/app/pages/{page}.py").run()
    elapsed = time.perf_counter() - started
    if at.exception:
        raise SystemExit(f"{page or 'overview'}: {at.exception[0].value}")
    charts = [rows_of(c) for c in at.get("vega_lite_chart")]
    tables = [len(d.value) for d in at.dataframe]
    return {"page": page or "overview", "seconds": elapsed, "chart_rows": charts,
            "table_rows": tables}  # fmt: skip


def reference(dataset: str) -> float:
    started = time.perf_counter()
    with Session(dataset) as s:
        s.query(REFERENCE_SQL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with Session(args.dataset) as s:
        size = s.query(
            "SELECT (SELECT count(*) FROM requests) AS requests, "
            "(SELECT count(*) FROM tokens) AS tokens"
        ).row(0, named=True)
    print(json.dumps(size))
    for _ in range(args.runs):
        ref = reference(args.dataset)
        for page in (None, "timeline"):
            r = render(args.dataset, page)
            r["reference_s"] = ref
            r["ratio"] = r["seconds"] / ref
            worst = max(r["chart_rows"] + r["table_rows"], default=0)
            r["max_rows"] = worst
            print(json.dumps(r))
            if worst > ROW_BOUND:
                raise SystemExit(f"{r['page']} ships {worst:,} rows in one element")


if __name__ == "__main__":
    main()
