"""traceq at 10 k, 100 k and 1 M requests: ingest, views, diagnose and report, each timed with
its own peak RSS, side by side with one plain DuckDB scan of `tokens`.

    python bench/scale.py --requests 10000 100000 [--raw 1000000=/tmp/traceq-large]
                          [--dataset 1000000=/tmp/layout-1m] [--out /tmp/traceq-scale] [--keep]

For each size: `traceq synth large --requests N` (not timed), then in a fresh process each
(bench/harness.py: wall seconds seen by the parent, the child's VmHWM), and the child's own
seconds of work (imports excluded; ratios are taken on these):

  ingest      traceq.ingest([traces.otlp.jsonl, dcgm.prom], DATASET)
  scan        reference: plain DuckDB, `SELECT sum(ts), sum(gap_ns) FROM read_parquet(tokens
              files)` under the same memory limit (one scan of `tokens`)
  kpi         Session: SELECT * FROM kpi_latency
  phases      Session: SELECT count(*) FROM request_phases
  diagnose    traceq.playbooks.diagnose() with every built-in playbook
  report      traceq report DATASET -o report.html --no-findings (the playbooks are `diagnose`)
  pruned      a one-minute `ts` filter on token_gaps, with DuckDB's JSON profile: row groups
              read of those it could read (the layout's pruning, traceq/layout.py)

`--raw N=DIR` ingests pre-generated raw files (DIR/traces.otlp.jsonl and DIR/dcgm.prom, read
only; no synth) into --out/ds-N; `--dataset N=DIR` measures an already ingested dataset (no
synth, no ingest row). `--memory-limit` (default 2GB, the Session's) is the DuckDB limit of
every step but ingest. Prints one
Markdown table (ratios to `scan` of the same size) and the dataset's bytes per request and
per chunk (docs/SCALE.md derives the fleet estimate from them). Writes under --out only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from harness import Child, run_python

ROOT = Path(__file__).resolve().parent.parent

# Every child prints, last, {"s": seconds of the work itself, imports excluded}.
INGEST = r"""
import json, sys, time
import traceq
t = time.perf_counter()
traceq.ingest(sys.argv[1:-1], sys.argv[-1])
print(json.dumps({"s": time.perf_counter() - t}))
"""

SCAN = r"""
import duckdb, json, sys, time
from traceq.dataset import Dataset
t = time.perf_counter()
files = [str(p) for p in Dataset(sys.argv[1]).table_files("tokens")]
con = duckdb.connect()
con.execute("SET memory_limit = ?", [sys.argv[2]])
rows = con.read_parquet(files, hive_partitioning=False).aggregate("sum(ts), sum(gap_ns)")
rows.fetchall()
print(json.dumps({"s": time.perf_counter() - t}))
"""

QUERY = r"""
import json, sys, time
from traceq.session import Session
t = time.perf_counter()
with Session(sys.argv[1], time_limit_s=3600, memory_limit=sys.argv[3]) as s:
    s.query(sys.argv[2])
print(json.dumps({"s": time.perf_counter() - t}))
"""

DIAGNOSE = r"""
import json, sys, time
from traceq.playbooks import diagnose, load_catalog
from traceq.session import Session
t = time.perf_counter()
with Session(sys.argv[1], time_limit_s=3600, memory_limit=sys.argv[2]) as s:
    d = diagnose(s, load_catalog().playbooks)
print(json.dumps({"s": time.perf_counter() - t, "failed": [f.id for f in d.findings
                                                           if f.status == "fail"]}))
"""

REPORT = r"""
import json, sys, time
from traceq.cli import main
sys.argv = ["traceq", "report", sys.argv[1], "-o", sys.argv[2], "--no-findings",
            "--memory-limit", sys.argv[3]]
t = time.perf_counter()
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps({"s": time.perf_counter() - t}))
"""

PRUNED = r"""
import json, sys, tempfile, time
from pathlib import Path
from traceq import db
t = time.perf_counter()
from traceq.dataset import Dataset
ds = Dataset(sys.argv[1])
con = db.connect(ds, ds.manifest(), read_only=False)
[(lo,)] = con.sql("SELECT (min(ts) // 2 + max(ts) // 2) FROM tokens").fetchall()  # midway
with tempfile.TemporaryDirectory() as tmp:
    out = Path(tmp) / "profile.json"
    con.execute("SET enable_profiling = 'json'")
    con.execute("SET profiling_mode = 'detailed'")
    con.execute("SET profiling_output = ?", [str(out)])
    sql = "SELECT quantile_cont(tbt_ms, 0.99) FROM token_gaps WHERE ts >= ? AND ts < ?"
    con.execute(sql, [lo, lo + 60 * 10**9]).fetchall()
    q = json.loads(out.read_text())["query"]
keys = ("total_row_groups_scanned", "total_row_groups_to_scan", "total_rows_scanned")
print(json.dumps({"s": time.perf_counter() - t} | {k: q.get(k) for k in keys}))
"""


def synth(requests: int, out: Path) -> Path:
    raw = out / f"raw-{requests}"
    if not (raw / "traces.otlp.jsonl").is_file():
        shutil.rmtree(raw, ignore_errors=True)
        cmd = [sys.executable, "-m", "traceq", "synth", "large", "--requests", str(requests)]
        subprocess.run([*cmd, "-o", str(raw)], check=True, cwd=ROOT, capture_output=True)
    return raw


def footprint(dataset: Path) -> dict[str, int]:
    """Bytes on disk per table (every listed file) and the row counts of the manifest."""
    from traceq.dataset import Dataset

    ds = Dataset(dataset)
    sizes = {t: sum(p.stat().st_size for p in ds.table_files(t)) for t in ("requests", "tokens")}
    sizes["all"] = sum(p.stat().st_size for p in dataset.rglob("*.parquet"))
    for table in ("requests", "tokens"):
        sizes[f"{table}_rows"] = sum(s.get("rows", {}).get(table, 0) for s in ds.sources())
    return sizes


STEPS = ("scan", "kpi", "phases", "diagnose", "report", "pruned")


def measure(
    dataset: Path,
    raw: Path | None,
    out: Path,
    steps: tuple[str, ...] = STEPS,
    memory_limit: str = "2GB",
) -> tuple[dict[str, Child], dict[str, int], dict[str, int]]:
    runs: dict[str, Child] = {}
    if raw is not None:
        shutil.rmtree(dataset, ignore_errors=True)
        runs["ingest"] = run_python(
            ["-c", INGEST, str(raw / "traces.otlp.jsonl"), str(raw / "dcgm.prom"), str(dataset)]
        )
    ds = str(dataset)
    args = {
        "scan": [SCAN, ds, memory_limit],
        "kpi": [QUERY, ds, "SELECT * FROM kpi_latency", memory_limit],
        "phases": [QUERY, ds, "SELECT count(*) FROM request_phases", memory_limit],
        "diagnose": [DIAGNOSE, ds, memory_limit],
        "report": [REPORT, ds, str(out / "report.html"), memory_limit],
        "pruned": [PRUNED, ds],
    }
    for step in ("scan", *[s for s in steps if s != "scan"]):
        runs[step] = run_python(["-c", *args[step]])
    pruned = json.loads(runs["pruned"].last_line) if "pruned" in runs else {}
    return runs, pruned, footprint(dataset)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, nargs="*", default=[10_000, 100_000])
    ap.add_argument("--raw", nargs="*", default=[], help="N=DIR, raw files already generated")
    ap.add_argument("--dataset", nargs="*", default=[], help="N=DIR, already ingested")
    ap.add_argument("--out", type=Path, default=Path("/tmp/traceq-scale"))
    ap.add_argument("--keep", action="store_true", help="keep the datasets and raw files")
    ap.add_argument("--steps", nargs="*", default=list(STEPS), choices=STEPS)
    ap.add_argument(
        "--memory-limit", default="2GB", help="DuckDB limit of every step but ingest (Session's)"
    )
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    args.out.mkdir(parents=True, exist_ok=True)
    plan: list[tuple[int, Path, Path | None]] = [
        (n, args.out / f"ds-{n}", synth(n, args.out)) for n in args.requests
    ]
    raws = (x.split("=", 1) for x in args.raw)
    plan += [(int(n), args.out / f"ds-{n}", Path(d)) for n, d in raws]
    plan += [(int(n), Path(d), None) for n, d in (x.split("=", 1) for x in args.dataset)]
    print("| requests | step | process s | work s | work × scan | peak RSS MiB |")
    print("|---|---|---:|---:|---:|---:|")
    for n, dataset, raw in sorted(plan):
        runs, p, b = measure(dataset, raw, args.out, tuple(args.steps), args.memory_limit)
        work = {step: json.loads(child.last_line)["s"] for step, child in runs.items()}
        for step, child in runs.items():
            print(
                f"| {n:,} | {step} | {child.seconds:.2f} | {work[step]:.2f} "
                f"| {work[step] / work['scan']:.2f} | {child.peak_rss_mib:,.0f} |",
                flush=True,
            )
        print(
            f"<!-- {n:,}: {json.dumps(b)}; bytes/request {b['requests'] / b['requests_rows']:.1f}, "
            f"bytes/chunk {b['tokens'] / max(b['tokens_rows'], 1):.2f}; one-minute filter read "
            f"{p.get('total_row_groups_scanned')} of {p.get('total_row_groups_to_scan')} row "
            f"groups, {p.get('total_rows_scanned')} rows -->",
            flush=True,
        )
        if raw is not None and not args.keep:
            shutil.rmtree(dataset, ignore_errors=True)
    if not args.keep:
        for raw_dir in args.out.glob("raw-*"):
            shutil.rmtree(raw_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
