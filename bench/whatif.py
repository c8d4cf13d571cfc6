"""Benchmark: `traceq whatif` on a large dataset, calibration and five scenarios, beside the
least a calibration must read.

    python bench/whatif.py --synth 100000          # `traceq synth large` cut to N, ingested
    python bench/whatif.py DATASET                 # a dataset written by `traceq ingest`

Each run is a fresh process (bench/harness.py: wall time seen by the parent, the child's own
peak RSS, VmHWM):

- **reference**: `SELECT quantile_cont(tbt_ms, 0.99) FROM token_gaps`, one pass over every
  chunk, which the step rebuild (traceq/sql/whatif_steps.sql) makes too;
- **whatif**: `traceq whatif DATASET --rate …` at 0.5, 1, 1.5, 2 and 3 × the replayed
  requests' rate: calibration, back-test and five scenarios (the target: ≤ 30 s, ≤ 1 GiB);
- **target-rate**: `traceq whatif DATASET --target-rate` 4 × that rate: the same plus the
  max-rate search of one replica over three seeds;
- **report**: `traceq report DATASET --no-findings` with and without its Headroom KPI
  (`--no-headroom`), what the nightly report pays for it.

`--synth N` builds the dataset once into /tmp/traceq-bench-whatif-N/ and reuses it after
(delete the folder to rebuild). Prints the table for docs/PERFORMANCE.md and the load average;
exits 1 when the five-scenario run misses its target.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from diagnose import synth
from harness import Child, run_python

TARGET_S = 30.0
"""Wall seconds the five-scenario run must stay under on 100,000 requests."""

TARGET_MIB = 1024.0
"""Peak RSS (MiB) the five-scenario run must stay under: 1 GiB."""

FACTORS = (0.5, 1.0, 1.5, 2.0, 3.0)
"""The five scenarios: multiples of the replayed requests' own arrival rate."""

REFERENCE = "SELECT quantile_cont(tbt_ms, 0.99) AS tbt_p99_ms FROM token_gaps"

RATE = """
import sys
from traceq.session import Session
from traceq.sql import load
from traceq.whatif.workload import MAX_REPLAY_REQUESTS, Workload
with Session(sys.argv[1]) as s:
    rows = s.query(load("whatif_requests"), {"limit": MAX_REPLAY_REQUESTS})
print(Workload.from_frame(rows, rows.height).rate_rps)
"""

SCAN = f"""
import sys, traceq
with traceq.Session(sys.argv[1]) as s:
    s.query({REFERENCE!r})
"""

CLI = "import sys; from traceq.cli import main; sys.argv = ['traceq', *sys.argv[1:]]; main()"


def traceq(*args: str) -> Child:
    return run_python(["-c", CLI, *args])


def dataset_for(requests: int) -> str:
    """The cached `large` dataset of `requests` requests, built on first use."""
    root = Path(f"/tmp/traceq-bench-whatif-{requests}")
    ds = root / "large.tq"
    if not (ds / "manifest.json").exists():
        root.mkdir(parents=True, exist_ok=True)
        synth(requests, root)
    return str(ds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset", nargs="?")
    ap.add_argument("--synth", type=int, help="generate `large` cut to N requests (cached)")
    a = ap.parse_args()
    if not a.dataset and not a.synth:
        ap.error("give DATASET or --synth N")
    ds = a.dataset or dataset_for(a.synth)
    rate = float(run_python(["-c", RATE, ds]).last_line)
    rates = [f"{rate * f:.3f}" for f in FACTORS]
    load_before = os.getloadavg()
    ref = run_python(["-c", SCAN, ds])
    five = traceq("whatif", ds, *(x for r in rates for x in ("--rate", r)))
    target = traceq("whatif", ds, "--target-rate", f"{4 * rate:.3f}")
    report = traceq("report", ds, "--no-findings")
    bare = traceq("report", ds, "--no-findings", "--no-headroom")
    load_after = os.getloadavg()
    print(f"dataset {ds}, replayed rate {rate:,.2f} req/s; scenarios at {', '.join(rates)} req/s")
    print("| run | wall s | peak RSS MiB | × reference |")
    print("|---|---:|---:|---:|")
    for name, c in (
        ("reference: TBT p99 over every chunk", ref),
        ("`whatif`: calibration, back-test, 5 scenarios", five),
        (f"`whatif --target-rate {4 * rate:.0f}`", target),
        ("`report --no-findings`", report),
        ("`report --no-findings --no-headroom`", bare),
    ):
        print(
            f"| {name} | {c.seconds:.1f} | {c.peak_rss_mib:,.0f} | {c.seconds / ref.seconds:.1f} |"
        )
    print(f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    plan = ("  one replica", "  needed", "  with ")
    print("\n".join(line for line in target.stdout.splitlines() if line.startswith(plan)))
    if five.seconds > TARGET_S or five.peak_rss_mib > TARGET_MIB:
        print(f"MISSED: the five-scenario run's target is ≤ {TARGET_S:.0f} s and "
              f"≤ {TARGET_MIB:,.0f} MiB")  # fmt: skip
        sys.exit(1)


if __name__ == "__main__":
    main()
