"""Benchmark: GPU telemetry ingest speed against a plain read of the same file.

Generates (under /tmp, never committed) an nvidia-smi --query-gpu CSV and a dcgm-exporter
multi-scrape file, ingests each with traceq, and reads the same file plainly with polars and
DuckDB (CSV cells / whole lines, no parsing of values), each in a fresh process so its peak RSS
is its own. Reports samples per second, peak RSS and the ratio traceq time / plain-read time,
at two or more sizes so linear scaling (and flat memory) shows.

    python bench/gpu_ingest.py --csv-rows 1000000 2000000 --scrape-mb 50 100
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
from harness import run_python

GPUS = 8
T0 = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
DCGM_METRICS = [
    ("DCGM_FI_DEV_SM_CLOCK", "1980"),
    ("DCGM_FI_DEV_MEM_CLOCK", "2619"),
    ("DCGM_FI_DEV_GPU_TEMP", "61"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "55"),
    ("DCGM_FI_DEV_POWER_USAGE", "612.345000"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "15152422938"),
    ("DCGM_FI_DEV_GPU_UTIL", "91"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "73"),
    ("DCGM_FI_DEV_FB_FREE", "9791"),
    ("DCGM_FI_DEV_FB_USED", "70120"),
    ("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "{k}000"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0.156205"),
    ("DCGM_FI_PROF_SM_ACTIVE", "0.412000"),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "0.005822"),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "0.092781"),
    ("DCGM_FI_PROF_PCIE_TX_BYTES", "4791810"),
    ("DCGM_FI_PROF_PCIE_RX_BYTES", "6935930"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "0"),
]


def write_csv(path: Path, rows: int, chunk: int = 1_000_000) -> None:
    """nvidia-smi CSV with units: 8 GPUs per timestamp, 100 ms apart (built in polars, in
    chunks so the generator's own memory stays small)."""
    header = (
        "timestamp, index, utilization.gpu [%], memory.used [MiB], power.draw [W], "
        "temperature.gpu, clocks.current.sm [MHz]\n"
    )
    with open(path, "w") as fh:
        fh.write(header)
        for lo in range(0, rows, chunk):
            n = pl.int_range(lo, min(rows, lo + chunk), eager=True)
            k = n // GPUS
            start = pl.lit(T0.replace(tzinfo=None))
            frame = pl.DataFrame({"n": n}).select(
                timestamp=(start + pl.duration(milliseconds=k * 100)).dt.strftime(  # type: ignore[arg-type]
                    "%Y/%m/%d %H:%M:%S%.3f"
                ),
                index=(n % GPUS).cast(pl.String),
                util=(k % 100).cast(pl.String) + " %",
                mem=(70000 + k % 1000).cast(pl.String) + " MiB",
                power=(300 + (k % 300) / 4).cast(pl.String) + " W",
                temp=(50 + k % 30).cast(pl.String),
                clock=pl.lit("1980 MHz"),
            )
            frame.write_csv(fh, include_header=False, separator=",", quote_style="never")


def write_scrapes(path: Path, megabytes: int) -> int:
    """Concatenated dcgm-exporter scrapes of 8 GPUs, `# ts=` before each; returns scrapes."""
    labels = [
        f'{{gpu="{g}",UUID="GPU-{g:08x}-74d7-3130-46f1-e93ed57f469a",pci_bus_id="00000000:'
        f'{g:02x}:00.0",device="nvidia{g}",modelName="NVIDIA H100 80GB HBM3",'
        f'Hostname="gpu-node-1",DCGM_FI_DRIVER_VERSION="590.48.01"}}'
        for g in range(GPUS)
    ]
    target = megabytes << 20
    scrapes = 0
    with open(path, "w") as fh:
        while fh.tell() < target:
            ts = T0.timestamp() + scrapes * 15
            lines = [f"# ts={datetime.fromtimestamp(ts, UTC).isoformat()}"]
            for name, value in DCGM_METRICS:
                lines.append(f"# HELP {name} {name}.")
                lines.append(f"# TYPE {name} gauge")
                v = value.format(k=scrapes)
                lines += [f"{name}{lab} {v}" for lab in labels]
            fh.write("\n".join(lines) + "\n")
            scrapes += 1
    return scrapes


# Each runner gets argv[1] (the file) and argv[2] (a scratch path) in a fresh process, so the
# peak RSS it prints is its own.
RUNNERS = {
    "traceq": "import traceq,sys; traceq.ingest([sys.argv[1]], sys.argv[2])",
    "polars read_csv": "import polars as pl,sys; pl.read_csv(sys.argv[1])",
    "duckdb read_csv": (
        "import duckdb,sys; duckdb.read_csv(sys.argv[1]).aggregate('count(*)').fetchall()"
    ),
    # every line as one string column: the least any line-based parser must do
    "polars lines": (
        "import polars as pl,sys; pl.read_csv(sys.argv[1], has_header=False, separator=chr(1),"
        " quote_char=None, new_columns=['line'])"
    ),
    "duckdb lines": (
        "import duckdb,sys; duckdb.read_csv(sys.argv[1], header=False, sep=chr(1), "
        "quotechar='', escapechar='', columns={'line': 'VARCHAR'}).aggregate('count(*)')"
        ".fetchall()"
    ),
}


def run_one(name: str, src: Path, scratch: Path) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of one runner in a fresh process (bench/harness.py)."""
    child = run_python(["-c", RUNNERS[name], str(src), str(scratch)])
    return child.seconds, child.peak_rss_mib


def run(label: str, path: Path, samples: int, references: list[str]) -> None:
    size = path.stat().st_size
    work = Path(tempfile.mkdtemp(prefix="traceq-bench-", dir="/tmp"))
    try:
        t_ingest, rss = run_one("traceq", path, work / "ds")
        line = f"| {label} | {size / 2**20:,.0f} MiB | {samples:,} | {t_ingest:.2f} s "
        line += f"({rss:,.0f} MiB) | {samples / t_ingest:,.0f} |"
        for name in references:
            t, ref_rss = run_one(name, path, work / name.replace(" ", "_"))
            line += f" {t:.2f} s ({ref_rss:,.0f} MiB), traceq ×{t_ingest / t:.1f} |"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--csv-rows", type=int, nargs="*", default=[1_000_000, 2_000_000])
    parser.add_argument("--scrape-mb", type=int, nargs="*", default=[50, 100])
    parser.add_argument("--dir", default="/tmp")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="traceq-gpu-bench-", dir=args.dir))
    print(f"cores: {os.cpu_count()}, load average: {os.getloadavg()[0]:.1f}")
    print("| input | size | samples | traceq (peak RSS) | samples/s | polars | DuckDB |")
    print("|---|---|---|---|---|---|---|")
    try:
        for rows in args.csv_rows:
            path = tmp / f"smi_{rows}.csv"
            write_csv(path, rows)
            refs = ["polars read_csv", "duckdb read_csv"]
            run(f"nvidia-smi CSV {rows:,} rows", path, rows, refs)
            path.unlink()
        for mb in args.scrape_mb:
            path = tmp / f"scrapes_{mb}.prom"
            scrapes = write_scrapes(path, mb)
            values = scrapes * GPUS * len(DCGM_METRICS)
            refs = ["polars lines", "duckdb lines"]
            run(f"DCGM multi-scrape {scrapes:,} scrapes", path, values, refs)
            path.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
