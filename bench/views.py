"""Public views at scale: time and peak memory of each view query against one raw DuckDB scan
of `tokens.ts`, side by side in one run.

Each query runs in its own process (peak RSS is its own VmHWM, as in
bench/otlp_json_ingest.py) through `traceq.session.Session` with its defaults (2 GB DuckDB
memory limit, 100 k-row cap) except a longer time limit. The references run in the same way
with plain DuckDB over the dataset's `tokens` Parquet files:

  raw_scan   SELECT sum(ts) FROM read_parquet(tokens files)
  raw_p99    SELECT quantile_cont(ts, 0.99) FROM read_parquet(tokens files)

Seconds are the query alone (session opened, imports done, before the clock starts); the
session's opening time is shown apart. `cpu s` is the process's CPU time over the query (all
DuckDB threads): on a shared, loaded machine it moves less than the wall clock.

    python bench/views.py /tmp/traceq-large.tq [more datasets] [--code DIR] [--only kpi_latency]

`--code DIR` imports traceq from another checkout (e.g. `git worktree add /tmp/main main`), so
the same script measures the code before a change; `--as-schema-1 SRC DST` writes the
dataset that code reads (the same rows, schema 1) without a second ingest.
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

CHILD = r"""
import json, sys, time
dataset, kind, sql = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
if kind == "raw":
    import duckdb
    from traceq.dataset import Dataset
    files = [str(p) for p in Dataset(dataset).table_files("tokens")]
    con = duckdb.connect()
    con.execute("SET memory_limit = '2GB'")
    con.read_parquet(files).create_view("tokens")
    opened = time.perf_counter() - t0
    t, c = time.perf_counter(), time.process_time()
    rows = con.sql(sql).fetchall()
    n = len(rows)
else:
    from traceq.session import Session
    s = Session(dataset, time_limit_s=900)
    opened = time.perf_counter() - t0
    t, c = time.perf_counter(), time.process_time()
    n = len(s.execute(sql, truncate=True))
seconds, cpu = time.perf_counter() - t, time.process_time() - c
hwm = [l.split()[1] for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
out = {"seconds": seconds, "cpu_s": cpu, "open_s": opened, "rows": n, "rss_mib": int(hwm) / 1024}
print("\n" + json.dumps(out))
"""

REFERENCES = {
    "raw_scan": "SELECT sum(ts) FROM tokens",
    "raw_p99": "SELECT quantile_cont(ts, 0.99) FROM tokens",
}

QUERIES = {
    "kpi_latency": "SELECT * FROM kpi_latency",
    "tbt_p99": "SELECT quantile_cont(tbt_ms, 0.99) FROM token_gaps",
    "kpi_latency:tbt_p99": "SELECT p99 FROM kpi_latency WHERE metric = 'tbt_ms'",
    "tbt_p99_window": (
        "SELECT quantile_cont(tbt_ms, 0.99) FROM token_gaps WHERE ts BETWEEN "
        "(SELECT min(t_arrival) FROM requests) AND (SELECT min(t_arrival) + 60e9 FROM requests)"
    ),
    "phases_window": (
        "SELECT count(*), avg(ttft_ms) FROM request_phases WHERE t_arrival BETWEEN "
        "(SELECT min(t_arrival) FROM requests) AND (SELECT min(t_arrival) + 60e9 FROM requests)"
    ),
    "kpi_throughput": "SELECT * FROM kpi_throughput",
}
# Every public view: all rows evaluated (count), and the first rows as `traceq sql` shows them.
QUERIES |= {
    "request_phases:count": "SELECT count(*) FROM request_phases",
    "request_phases:rows": "SELECT * FROM request_phases",
    "token_gaps:count": "SELECT count(*) FROM token_gaps",
    "token_gaps:rows": "SELECT * FROM token_gaps",
    "client_token_gaps:count": "SELECT count(*) FROM client_token_gaps",
    "client_token_gaps:rows": "SELECT * FROM client_token_gaps",
    "crosswalk:count": "SELECT count(*) FROM crosswalk",
    "crosswalk:rows": "SELECT * FROM crosswalk",
    "gpu_state:count": "SELECT count(*) FROM gpu_state",
    "gpu_state:rows": "SELECT * FROM gpu_state",
    "gpu_windows:count": "SELECT count(*) FROM gpu_windows",
    "gpu_windows:rows": "SELECT * FROM gpu_windows",
    "request_gpu:count": "SELECT count(*) FROM request_gpu",
    "request_gpu:rows": "SELECT * FROM request_gpu",
    "engine_gpu:count": "SELECT count(*) FROM engine_gpu",
    "engine_gpu:rows": "SELECT * FROM engine_gpu",
    "sources:count": "SELECT count(*) FROM sources",
    "sources:rows": "SELECT * FROM sources",
}


def run(dataset: Path, kind: str, sql: str, code: Path) -> dict:
    """One query in a fresh process importing traceq from `code`."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(dataset), kind, sql],
        capture_output=True,
        text=True,
        cwd=code,
        env=env,
    )
    # DuckDB's progress bar may share stdout (no newline after it): take the last JSON line.
    lines = [line for line in done.stdout.splitlines() if line.startswith('{"seconds"')]
    if done.returncode or not lines:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1][:120]}
    return json.loads(lines[-1])


def as_schema_1(src: Path, dst: Path) -> None:
    """Copy dataset `src` as a schema-1 dataset (traceq/schema.py): the same rows,
    without `tokens.view` / `tokens.gap_ns` and without the request pick. Lets the code
    before the change be measured on the same rows without a second ingest of the 1 M set."""
    import polars as pl

    manifest = json.loads((src / "manifest.json").read_text())
    manifest["schema_version"] = 1
    manifest.pop("request_pick", None)
    for source in manifest["sources"]:
        for table, rel in source.get("files", {}).items():
            (dst / table).mkdir(parents=True, exist_ok=True)
            lazy = pl.scan_parquet(src / rel)
            if table == "tokens":
                lazy = lazy.drop("view", "gap_ns")
            lazy.sink_parquet(dst / rel, compression="zstd", row_group_size=1 << 20)
    (dst / "manifest.json").write_text(json.dumps(manifest, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="*", type=Path)
    parser.add_argument("--as-schema-1", nargs=2, type=Path, metavar=("SRC", "DST"),
                        help="write SRC as a schema-1 dataset DST, then exit")  # fmt: skip
    parser.add_argument("--code", type=Path, default=ROOT, help="traceq checkout to import")
    parser.add_argument("--only", nargs="*", help="query names (default: all)")
    args = parser.parse_args()
    if args.as_schema_1:
        as_schema_1(*args.as_schema_1)
        return
    names = args.only or [*REFERENCES, *QUERIES]
    for dataset in args.datasets:
        print(f"\n{dataset} (code: {args.code})")
        head = f"{'query':28} {'s':>8} {'x raw_scan':>10} {'x raw_p99':>10} {'RSS MiB':>8}"
        print(f"{head} {'cpu s':>7} {'cpu x scan':>10} open s")
        cpu_base: dict[str, float] = {}
        base: dict[str, float] = {}
        for name in names:
            kind = "raw" if name in REFERENCES else "traceq"
            sql = REFERENCES.get(name) or QUERIES[name]
            r = run(dataset, kind, sql, args.code)
            if "error" in r:
                print(f"{name:28} error: {r['error']}")
                continue
            if kind == "raw":
                base[name], cpu_base[name] = r["seconds"], r["cpu_s"]
            cpu_x = r["cpu_s"] / cpu_base["raw_scan"] if cpu_base.get("raw_scan") else float("nan")
            ratios = [
                f"{r['seconds'] / base[ref]:10.2f}" if ref in base else f"{'':10}"
                for ref in REFERENCES
            ]
            print(
                f"{name:28} {r['seconds']:8.4f} {' '.join(ratios)} {r['rss_mib']:8.0f} "
                f"{r['cpu_s']:7.3f} {cpu_x:10.2f} {r['open_s']:.2f}",
                flush=True,
            )
    print(f"\nmeasured {time.strftime('%Y-%m-%d %H:%M')} UTC, load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
