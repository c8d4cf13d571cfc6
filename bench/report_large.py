"""Benchmark: `traceq report` on a large dataset against the least any report must do.

Runs, each in a fresh process so its peak RSS is its own (`ru_maxrss` of the child):

- `traceq report DATASET -o report.html --save-baseline b.json --no-findings` (every KPI,
  phases, samples, timelines, charts, the HTML and the baseline);
- the same with `--baseline b.json` (adds the bootstrap comparison);
- the reference: `SELECT * FROM kpi_latency` through `traceq sql` — one pass over every request
  and every chunk gap, which the report's TBT percentiles need too.

Reports wall time, peak RSS and the ratio report / reference. Memory is bounded by DuckDB's
memory limit (2 GB by default, `--memory-limit`; beyond it operators spill), not by the data.

    python bench/report_large.py /tmp/traceq-large.tq            # make large-dataset, ingest
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of `traceq ARGS` in a fresh process."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "traceq", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        err = proc.stderr.read().decode() if proc.stderr else ""
        sys.exit(f"traceq {' '.join(args)} failed ({code}): {err.strip()}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset")
    parser.add_argument("--memory-limit", default="2GB")
    opts = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="traceq-report-bench-"))
    mem = ["--memory-limit", opts.memory_limit]
    ref = _run(["sql", opts.dataset, "SELECT * FROM kpi_latency", "--time-limit", "0", *mem])
    report = ["report", opts.dataset, "--no-findings", *mem]
    rep = _run([*report, "-o", str(out / "r.html"), "--save-baseline", str(out / "b.json")])
    cmp_ = _run([*report, "-o", str(out / "c.html"), "--baseline", str(out / "b.json")])
    print("| run | wall s | peak RSS MiB | ratio to kpi_latency |")
    print("|---|---|---|---|")
    for name, (wall, rss) in (("kpi_latency (reference)", ref), ("report → HTML + baseline", rep),
                              ("report --baseline (comparison)", cmp_)):  # fmt: skip
        print(f"| {name} | {wall:.1f} | {rss:.0f} | {wall / ref[0]:.2f}× |")
    sizes = {p.name: p.stat().st_size for p in out.iterdir()}
    print(f"\nfiles: {', '.join(f'{k} {v / 1e6:.2f} MB' for k, v in sorted(sizes.items()))}")


if __name__ == "__main__":
    main()
