"""Benchmark: peak RSS of `traceq ingest` on the hostile probes, at full size.

Each probe is generated under a temporary folder (never committed), ingested by `traceq ingest`
in a fresh process (so its peak RSS is its own) with the default line cap, and removed:

- nvidia-smi CSV gzip bomb: a CSV header and one 1.5 GB line without a newline, gzipped;
- the same bomb as OTLP/JSON;
- one OTLP span with 1 M attributes (52 MB);
- one 500 MB OTLP/JSON line (spans with an 8 kB attribute each), then an ordinary line.

The promise (docs/RELIABILITY.md): each stays under 1 GiB.

    python bench/hostile.py [--scale 1.0]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.hostile_factory import (
    OTLP_HEAD,
    SMI_HEADER,
    gzip_bomb,
    long_otlp_line,
    run_measured,
    wide_span,
)

LIMIT_MIB = 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="probe size factor")
    args = parser.parse_args()
    s = args.scale
    probes = {
        "gzip bomb, nvidia-smi CSV (1.5 GB line)": lambda d: gzip_bomb(
            d / "smi.csv.gz", SMI_HEADER, int(1536 * s) << 20
        ),
        "gzip bomb, OTLP/JSON (1.5 GB line)": lambda d: gzip_bomb(
            d / "otlp.json.gz", OTLP_HEAD, int(1536 * s) << 20
        ),
        "span with 1 M attributes": lambda d: wide_span(d / "wide.json", int(1_000_000 * s)),
        "single 500 MB OTLP line": lambda d: long_otlp_line(
            d / "long.json", int(500 * s) << 20, value_bytes=8_000
        ),
    }
    print(f"{'probe':44} {'input':>10} {'peak RSS':>10} {'time':>7}  quarantine")
    worst = 0.0
    for name, make in probes.items():
        tmp = Path(tempfile.mkdtemp(prefix="traceq-hostile-"))
        try:
            src = make(tmp)
            t = time.perf_counter()
            code, out, peak = run_measured("ingest", src, "-o", tmp / "ds")
            took = time.perf_counter() - t
            if code != 0:
                raise SystemExit(f"{name}: exit {code}\n{out}")
            quarantined = out.strip().splitlines()[-1].rsplit(";", 1)[-1].strip()
            size = f"{src.stat().st_size / 1e6:.1f} MB"
            print(f"{name:44} {size:>10} {peak:>7.0f} MiB {took:>6.1f}s  {quarantined}")
            worst = max(worst, peak)
        finally:
            shutil.rmtree(tmp)
    verdict = "under" if worst < LIMIT_MIB else "OVER"
    print(f"worst peak RSS {worst:.0f} MiB: {verdict} the {LIMIT_MIB} MiB bound")


if __name__ == "__main__":
    main()
