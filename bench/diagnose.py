"""Time of all playbooks against one DuckDB scan of the same dataset, side by side.

    python bench/diagnose.py DATASET              # e.g. /tmp/large-ds (make large-dataset)
    python bench/diagnose.py --synth 100000       # generate + ingest `large` cut to N
    python bench/diagnose.py DATASET --repeat 3   # alternate the two runs, report medians
    python bench/diagnose.py DATASET --profile    # also: seconds per playbook and step

The reference is one query computing TBT p99 over every token (`token_gaps`, a projection
of `tokens`); the run is `diagnose()` with every built-in playbook (rollups included). Each
runs in its own process (session opening included in both) so peak RSS (VmHWM) is its own;
both under the Session's default memory limit. The two alternate, so load from other work
on the machine falls on both alike; the ratio of the medians is the figure. Prints one
Markdown row for docs/PERFORMANCE.md, the load average, and every run with where its time
went (Linux): CPU seconds, seconds runnable but waiting for a CPU (other work on the
machine), MiB read from disk (a cold page cache), MiB written (DuckDB spilling), peak RSS
and the two slowest steps, so that an outlier says what it was.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "SELECT quantile_cont(tbt_ms, 0.99) AS tbt_p99_ms FROM token_gaps"


def accounting() -> dict[str, float]:
    """Where this process's time went (Linux; empty elsewhere): CPU seconds and seconds
    spent runnable but waiting for a CPU (summed over its threads, /proc/self/task/*/schedstat),
    bytes read from disk (a cold page cache) and written (DuckDB spilling), MiB."""
    out: dict[str, float] = {}
    try:
        cpu_ns = wait_ns = 0
        for task in Path("/proc/self/task").iterdir():
            fields = (task / "schedstat").read_text().split()
            cpu_ns, wait_ns = cpu_ns + int(fields[0]), wait_ns + int(fields[1])
        io = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    except OSError:
        return out
    out["cpu_s"], out["runq_wait_s"] = cpu_ns / 1e9, wait_ns / 1e9
    out["read_mib"] = int(io["read_bytes"]) / 2**20
    out["spill_mib"] = int(io["write_bytes"]) / 2**20
    return out


def peak_rss_mib() -> float:
    """This process's peak resident set (VmHWM), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource  # not Linux: ru_maxrss (KiB on Linux, bytes on macOS)

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(kind: str, dataset: str, profile: bool) -> None:
    from traceq.playbooks import Options, diagnose, load_catalog
    from traceq.playbooks.steps import Step, summary
    from traceq.session import Session

    steps: list[Step] = []  # cheap (one timing per query), so every run says where it went
    started = time.perf_counter()
    with Session(dataset, time_limit_s=3600) as s:
        if kind == "reference":
            s.query(REFERENCE)
            detail = ""
        else:
            d = diagnose(s, load_catalog().playbooks, Options(profile=steps))
            detail = ", ".join(f"{f.id}:{f.status}" for f in d.findings)
        used = accounting()  # before closing: DuckDB's threads end with the connection
    elapsed = time.perf_counter() - started
    out = {"kind": kind, "s": elapsed, "rss_mib": peak_rss_mib(), "detail": detail, **used}
    slowest = sorted(steps, key=lambda x: -x.seconds)[:2]
    out["slowest"] = ", ".join(f"{x.step} {x.seconds:.2f}" for x in slowest)
    if profile and steps:
        out["profile"] = summary(steps, top=20)
    print(json.dumps(out))


def measure(kind: str, dataset: str, profile: bool = False) -> dict:
    cmd = [sys.executable, __file__, "--child", kind, dataset] + (["--profile"] if profile else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
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
    ap.add_argument("--repeat", type=int, default=1, help="runs of each, alternating")
    ap.add_argument("--profile", action="store_true", help="print seconds per playbook/step")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.dataset, a.profile)
        return
    with tempfile.TemporaryDirectory(prefix="traceq-bench-diag-") as tmp:
        dataset = a.dataset or synth(a.synth or 100_000, Path(tmp))
        load_before = os.getloadavg()
        refs, runs = [], []
        for i in range(a.repeat):
            refs.append(measure("reference", dataset))
            runs.append(measure("diagnose", dataset, a.profile and i == a.repeat - 1))
        load_after = os.getloadavg()
    ref_s = statistics.median(r["s"] for r in refs)
    run_s = statistics.median(r["s"] for r in runs)
    ref_rss = max(r["rss_mib"] for r in refs)
    run_rss = max(r["rss_mib"] for r in runs)
    print("| dataset | TBT p99 scan (s) | all playbooks (s) | ratio | peak RSS (MiB) |")
    print("|---|---|---|---|---|")
    print(f"| {dataset} | {ref_s:.2f} | {run_s:.2f} | {run_s / ref_s:.1f}× | "
          f"{run_rss:.0f} (reference {ref_rss:.0f}) |")  # fmt: skip
    print(f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after; every run:")
    print(f"{'run':>3} {'kind':9} {'wall s':>7} {'ratio':>6} {'cpu s':>6} {'runq s':>6} "
          f"{'read MiB':>8} {'spill MiB':>9} {'RSS MiB':>7}  slowest steps")  # fmt: skip
    for i, (ref, run) in enumerate(zip(refs, runs, strict=True)):
        for r in (ref, run):
            ratio = f"{r['s'] / ref['s']:.1f}×" if r is run else ""
            use = {k: r.get(k, 0.0) for k in ("cpu_s", "runq_wait_s", "read_mib", "spill_mib")}
            print(f"{i + 1:3} {r['kind']:9} {r['s']:7.2f} {ratio:>6} {use['cpu_s']:6.2f} "
                  f"{use['runq_wait_s']:6.2f} {use['read_mib']:8.0f} {use['spill_mib']:9.0f} "
                  f"{r['rss_mib']:7.0f}  {r.get('slowest', '')}")  # fmt: skip
    print(runs[-1]["detail"])
    if "profile" in runs[-1]:
        print(runs[-1]["profile"], end="")


if __name__ == "__main__":
    main()
