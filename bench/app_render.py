"""Benchmark the app's first render on a large dataset and check what it ships: the overview
and the timeline, each run cold (caches cleared) through `streamlit.testing`, side by side with
a reference run of the one scan the overview cannot avoid (TTFT p99 over request_phases and
TBT p99 over token_gaps) in a fresh Session. Every chart and table on both pages is counted
(traceq/app/shipped.py, the instrumentation tests/test_app.py uses on the samples) and the
run fails when one ships more than --assert-rows rows.

    .venv/bin/python bench/app_render.py /tmp/large-ds [--runs 2] [--assert-rows 5000]

The dataset is only read. Not part of the test suite (the suite cannot build a million-request
dataset); docs/PERFORMANCE.md records the figures.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from traceq.app import shipped  # noqa: E402
from traceq.session import Session  # noqa: E402

REFERENCE_SQL = (
    "SELECT (SELECT quantile_cont(ttft_ms, 0.99) FROM request_phases) AS ttft_p99, "
    "(SELECT quantile_cont(tbt_ms, 0.99) FROM token_gaps) AS tbt_p99"
)
PAGES = {"overview": 1, "timeline": 8}
"""Page → the fewest charts it must draw (a page that drew nothing would ship nothing)."""


def render(dataset: str, page: str) -> tuple[float, AppTest]:
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=1800)
    at.query_params["dataset"] = dataset
    started = time.perf_counter()
    at.run()
    if page != "overview":  # open the page with cold caches again, so only its queries count
        st.cache_data.clear()
        st.cache_resource.clear()
        started = time.perf_counter()
        at.switch_page(f"traceq/app/pages/{page}.py").run()
    elapsed = time.perf_counter() - started
    if at.exception:
        raise SystemExit(f"{page}: {at.exception[0].value}")
    if at.error:
        raise SystemExit(f"{page}: {at.error[0].value}")
    return elapsed, at


def reference(dataset: str) -> float:
    started = time.perf_counter()
    with Session(dataset) as s:
        s.query(REFERENCE_SQL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--assert-rows",
        type=int,
        default=shipped.ROW_BOUND,
        metavar="N",
        help="fail when one chart or table ships more than N rows (default %(default)s)",
    )
    args = parser.parse_args()
    with Session(args.dataset) as s:
        size = s.query(
            "SELECT (SELECT count(*) FROM requests) AS requests, "
            "(SELECT count(*) FROM tokens) AS tokens"
        ).row(0, named=True)
    print(json.dumps(size), flush=True)
    failed = []
    for run in range(1, args.runs + 1):
        ref = reference(args.dataset)
        for page, fewest_charts in PAGES.items():
            seconds, at = render(args.dataset, page)
            items = shipped.rendered(at)
            charts = [i for i in items if i.kind == "chart"]
            print(json.dumps({
                "run": run, "page": page, "seconds": round(seconds, 2),
                "reference_s": round(ref, 2), "ratio": round(seconds / ref, 2),
                "max_rows": max((i.rows for i in items), default=0),
                "shipped": [[i.kind, i.label, i.rows] for i in items],
            }), flush=True)  # fmt: skip
            if len(charts) < fewest_charts:
                failed.append(f"{page}: {len(charts)} charts drawn, expected {fewest_charts}+")
            failed += [f"{page}: {i.kind} '{i.label}' ships {i.rows:,} rows > {args.assert_rows:,}"
                       for i in shipped.over_bound(items, args.assert_rows)]  # fmt: skip
    if failed:
        raise SystemExit("; ".join(failed))
    print(f"OK: no chart or table ships more than {args.assert_rows:,} rows")


if __name__ == "__main__":
    main()
