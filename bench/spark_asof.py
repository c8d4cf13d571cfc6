"""Spark local: the as-of join steps of the rollups, this tree against a reference tree.

    python bench/spark_asof.py DATASET --reference /path/to/other/checkout [--whole]

Each tree runs in its own process (its own JVM, `local[2]`, 8 shuffle partitions as
`traceq diagnose --engine spark` uses): register the dataset, cache the rollups in the
engine's order (`SparkExecutor.materialise`, seconds per rollup; `gap_stalls` is the step
with the as-of joins), then read `gap_context` (the other as-of view) for the first 10 s
of the run (`--whole`: all of it too, this tree and DuckDB only). Each child prints the
row count and sum of `prefill_tokens` it read, so the trees' rows can be compared; a DuckDB
child prints the same from `Session` as the ground truth. Prints one JSON line per child
and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WINDOW = (
    "SELECT count(*) AS n, sum(prefill_tokens) AS tokens FROM gap_context "
    "WHERE ts < (SELECT min(ts) FROM chunk_gaps) + 10000000000"
)
STALLS = "SELECT count(*) AS n, sum(prefill_tokens) AS tokens FROM gap_stalls"
WHOLE = "SELECT count(*) AS n, sum(prefill_tokens) AS tokens FROM gap_context"


def spark_child(dataset: str, whole: bool) -> dict:
    from traceq.spark import SparkExecutor
    from traceq.spark.executor import spark_session

    os.environ.setdefault("MASTER", "local[2]")
    spark = spark_session("traceq-bench")
    spark.sparkContext.setLogLevel("FATAL")
    out: dict = {}
    with SparkExecutor(spark, dataset) as ex:
        out["rollups_s"] = {k: round(v, 1) for k, v in ex.materialise().items()}
        out["stalls"] = ex.query(STALLS).row(0)
        started = time.perf_counter()
        out["window"] = ex.query(WINDOW).row(0)
        out["gap_context_10s_s"] = round(time.perf_counter() - started, 1)
        if whole:
            started = time.perf_counter()
            out["whole"] = ex.query(WHOLE).row(0)
            out["gap_context_whole_s"] = round(time.perf_counter() - started, 1)
    return out


def duckdb_child(dataset: str, whole: bool) -> dict:
    from traceq.session import Session

    with Session(dataset, time_limit_s=3600) as s:
        out: dict[str, object] = {
            "stalls": s.query(STALLS).row(0),
            "window": s.query(WINDOW).row(0),
        }
        if whole:
            started = time.perf_counter()
            out["whole"] = s.query(WHOLE).row(0)
            out["gap_context_whole_s"] = round(time.perf_counter() - started, 1)
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("--reference", required=True, help="checkout whose translation is compared")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument(
        "--whole",
        action="store_true",
        help="also read all of gap_context (not on the reference: a nested loop takes hours)",
    )
    ap.add_argument("--child", choices=["spark", "duckdb"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        run = spark_child if args.child == "spark" else duckdb_child
        print(json.dumps(run(args.dataset, args.whole), default=str))
        return
    runs = (("duckdb", ROOT, "duckdb"), ("reference", Path(args.reference), "spark"))
    for name, tree, kind in (*runs, ("this tree", ROOT, "spark")):
        env = {**os.environ, "PYTHONPATH": str(tree)}
        cmd = [sys.executable, __file__, args.dataset, "--reference", "-", "--child", kind]
        if args.whole and name != "reference":
            cmd.append("--whole")
        started = time.perf_counter()
        try:
            done = subprocess.run(
                cmd, env=env, capture_output=True, text=True, timeout=args.timeout, check=True
            )
            result = done.stdout.strip().splitlines()[-1]
        except subprocess.TimeoutExpired:
            result = json.dumps({"timeout_s": args.timeout})
        except subprocess.CalledProcessError as exc:
            result = json.dumps({"failed": exc.stderr.strip().splitlines()[-1:]})
        wall = time.perf_counter() - started
        print(f"{name}: wall {wall:.0f} s {result}", flush=True)
    print("load average", os.getloadavg())


if __name__ == "__main__":
    main()
