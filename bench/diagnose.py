"""Time of all playbooks against one DuckDB scan of the same dataset, side by side.

    python bench/diagnose.py DATASET          # e.g. /tmp/traceq-large (make large-dataset)
    python bench/diagnose.py --synth 100000   # generate + ingest the `large` scenario cut to N

The reference is one query computing TBT p99 over every token (`token_gaps`, a window over
`tokens`); the run is `diagnose()` with every built-in playbook (rollups included). Each
runs in its own process so peak RSS (ru_maxrss) is its own; both under the Session's default
memory limit. Prints one Markdown row for docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "SELECT quantile_cont(tbt_ms, 0.99) AS tbt_p99_ms FROM token_gaps"


def child(kind: str, dataset: str) -> None:
    from traceq.playbooks import diagnose, load_catalog
    from traceq.session import Session

    started = time.perf_counter()
    with Session(dataset, time_limit_s=3600) as s:
        if kind == "reference":
            s.query(REFERENCE)
            detail = ""
        else:
            d = diagnose(s, load_catalog().playbooks)
            detail = ", ".join(f"{f.id}:{f.status}" for f in d.findings)
    elapsed = time.perf_counter() - started
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"kind": kind, "s": elapsed, "rss_mib": rss_mib, "detail": detail}))


def measure(kind: str, dataset: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, dataset],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def synth(requests: int, root: Path) -> str:
    raw, dataset = root / "raw", root / "large.tq"
    cli = [sys.executable, "-m", "traceq"]
    subprocess.run([*cli, "synth", "large", "-o", str(raw), "--requests", str(requests)],
                   check=True, capture_output=True)  # fmt: skip
    labels = json.loads((raw / "labels.json").read_text())["clock"]
    files = [str(p) for p in sorted(raw.iterdir()) if p.name != "labels.json"]
    subprocess.run([*cli, "ingest", *files, "-o", str(dataset), "--year",
                    str(labels["log_year"]), "--tz", labels["log_timezone"]],
                   check=True, capture_output=True)  # fmt: skip
    return str(dataset)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", nargs="?")
    ap.add_argument("--synth", type=int, help="generate the large scenario cut to N requests")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.dataset)
        return
    with tempfile.TemporaryDirectory(prefix="traceq-bench-diag-") as tmp:
        dataset = a.dataset or synth(a.synth or 100_000, Path(tmp))
        ref = measure("reference", dataset)
        run = measure("diagnose", dataset)
        ratio = run["s"] / ref["s"]
        print("| dataset | TBT p99 scan (s) | all playbooks (s) | ratio | peak RSS (MiB) |")
        print("|---|---|---|---|---|")
        print(f"| {dataset} | {ref['s']:.2f} | {run['s']:.2f} | {ratio:.1f}× | "
              f"{run['rss_mib']:.0f} (reference {ref['rss_mib']:.0f}) |")  # fmt: skip
        print(run["detail"])


if __name__ == "__main__":
    main()
