"""A dataset read by its URL (traceq/remote.py): the requests and bytes each step asks of the
store, beside the same steps on the local folder and the dataset's own size.

    python bench/remote.py DATASET [--fsspec-defaults] [--repeat 2]

Uploads DATASET to moto's S3 server on localhost (tests/s3_helpers.py: the real S3 client,
s3fs), waits 11 s (DuckDB re-reads the footer of a file modified in the last 10 s, so a fresh
upload would hide its footer cache, which a bucket's older files get), then in this process:

  open     Session(URL)
  minute   TBT p99 over one minute of token_gaps (a time filter the layout prunes)
  kpi      SELECT * FROM kpi_latency (reads every request and every chunk gap)

and prints, per step: seconds on the URL and on the folder, store requests (HEAD, GET) and
the bytes the GETs fetched, also as a share of the dataset's bytes. `--fsspec-defaults` reads
as fsspec would by itself (each file's details asked at every open, s3fs's 50 MB read-ahead),
for the comparison in docs/PERFORMANCE.md, "Object storage: requests and bytes". moto on
localhost answers in ~10 ms: the request counts and bytes carry over to a real bucket, the
seconds do not.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.s3_helpers import moto_s3, store_calls, upload  # noqa: E402
from traceq import remote  # noqa: E402
from traceq.session import Session  # noqa: E402

MINUTE = (
    "SELECT quantile_cont(tbt_ms, 0.99) AS p FROM token_gaps "
    "WHERE ts >= $lo AND ts < $lo + 60000000000"
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset", type=Path)
    ap.add_argument("--fsspec-defaults", action="store_true")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    if args.fsspec_defaults:
        remote._remember_info = lambda filesystem: None
        remote._exact_reads = lambda filesystem: None
    size = sum(p.stat().st_size for p in args.dataset.rglob("*.parquet"))
    with Session(args.dataset) as s:
        lo = s.query("SELECT min(ts) + (max(ts) - min(ts)) // 2 AS t FROM tokens").item()
    steps = {
        "minute": lambda s: s.query(MINUTE, {"lo": lo}),
        "kpi": lambda s: s.query("SELECT * FROM kpi_latency"),
    }
    print(f"dataset {args.dataset}: {size / 1e6:.1f} MB of Parquet")
    print("| step | URL s | folder s | HEAD | GET | MB fetched | × dataset |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with moto_s3() as fs:
        url = upload(fs, args.dataset, "bench.tq")
        time.sleep(11)
        for _ in range(args.repeat):
            t = time.perf_counter()
            ds = remote.RemoteDataset(url)
            calls = store_calls(ds)
            there = Session(ds)
            row("open", time.perf_counter() - t, _local(args.dataset, None), calls, size)
            for name, step in steps.items():
                t = time.perf_counter()
                step(there)
                row(name, time.perf_counter() - t, _local(args.dataset, step), calls, size)
            there.close()


def _local(dataset: Path, step) -> float:
    t = time.perf_counter()
    with Session(dataset) as s:
        if step is None:
            return time.perf_counter() - t
        t = time.perf_counter()
        step(s)
        return time.perf_counter() - t


def row(name: str, seconds: float, local: float, calls: list, size: int) -> None:
    asked = Counter(method for method, _, _ in calls)
    fetched = 0
    for _, _, r in calls:
        if r:
            lo, hi = r.split("=", 1)[1].split("-")
            fetched += int(hi) - int(lo) + 1
    print(
        f"| {name} | {seconds:.2f} | {local:.2f} | {asked['head_object']} "
        f"| {asked['get_object']} | {fetched / 1e6:.2f} | {fetched / size:.2f} |",
        flush=True,
    )
    calls.clear()


if __name__ == "__main__":
    main()
