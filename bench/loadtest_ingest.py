"""Load-test export ingest throughput, side by side with plain readers of the same bytes.

Generates an AIPerf `profile_export.jsonl` and a `vllm bench serve --save-detailed` result of
--requests requests (≈120 streamed chunks each) under a temporary directory, then runs, each in
its own process so peak RSS is its own:

  traceq          traceq.ingest() of the file into a fresh dataset (parse, requests, rebuilt
                  chunk times, Parquet)
  polars          pl.read_ndjson(file) (AIPerf) / orjson.loads + pl.DataFrame of the arrays
                  (vLLM): reading only, no derivation        (reference a)
  python          json.loads per line / per document and a Python loop that rebuilds the chunk
                  times into lists                            (reference b)

and prints MB/s, the ratio traceq / reference (higher is better for traceq) and peak RSS.

    python bench/loadtest_ingest.py --requests 20000
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
import uuid
from pathlib import Path

import harness

T0 = 1_795_000_000_000_000_000


def aiperf_line(rng: random.Random, i: int) -> str:
    n = max(2, int(rng.lognormvariate(4.7, 0.5)))
    gaps = [round(rng.uniform(12, 30), 6) for _ in range(n - 1)]
    ttft = round(rng.uniform(40, 400), 6)
    latency = ttft + sum(gaps)
    start = T0 + i * 50_000_000
    record = {
        "metadata": {
            "x_request_id": str(uuid.UUID(int=rng.getrandbits(128))),
            "request_start_ns": start,
            "request_end_ns": start + int(latency * 1e6),
            "benchmark_phase": "profiling",
        },
        "metrics": {
            "input_sequence_length": {"value": rng.randint(100, 2000), "unit": "tokens"},
            "time_to_first_token": {"value": ttft, "unit": "ms"},
            "request_latency": {"value": latency, "unit": "ms"},
            "inter_chunk_latency": {"value": gaps, "unit": "ms"},
            "output_sequence_length": {"value": n, "unit": "tokens"},
            "inter_token_latency": {"value": (latency - ttft) / (n - 1), "unit": "ms"},
            "http_req_duration": {"value": latency, "unit": "ms"},
        },
    }
    return json.dumps(record, separators=(",", ":"))


def vllm_doc(rng: random.Random, n_requests: int) -> str:
    ttfts, itls, starts, lens = [], [], [], []
    for i in range(n_requests):
        n = max(2, int(rng.lognormvariate(4.7, 0.5)))
        itls.append([rng.uniform(0.012, 0.030) for _ in range(n - 1)])
        ttfts.append(rng.uniform(0.04, 0.4))
        starts.append(1000.0 + i * 0.05)
        lens.append(n)
    doc = {
        "date": "20261130-000000",
        "backend": "vllm",
        "model_id": "m",
        "duration": starts[-1] - starts[0] + 5,
        "completed": n_requests,
        "total_input_tokens": 100 * n_requests,
        "total_output_tokens": sum(lens),
        "request_throughput": 20.0,
        "mean_ttft_ms": 200.0,
        "input_lens": [100] * n_requests,
        "output_lens": lens,
        "ttfts": ttfts,
        "itls": itls,
        "start_times": starts,
        "latencies": [t + sum(g) for t, g in zip(ttfts, itls, strict=True)],
        "errors": [""] * n_requests,
    }
    return json.dumps(doc)


def run_traceq(path: str) -> None:
    from traceq.ingest import ingest

    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        [result] = ingest([path], Path(tmp) / "b.tq")
        assert result.quarantined == 0, result


def run_polars(path: str) -> None:
    import orjson
    import polars as pl

    if path.endswith(".jsonl"):
        pl.read_ndjson(path)
    else:
        doc = orjson.loads(Path(path).read_bytes())
        pl.DataFrame({k: doc[k] for k in ("ttfts", "itls", "start_times", "output_lens")})


def run_python(path: str) -> None:
    chunks = []
    if path.endswith(".jsonl"):
        with open(path) as fh:
            for line in fh:
                r = json.loads(line)
                m = r["metrics"]
                t = r["metadata"]["request_start_ns"] + m["time_to_first_token"]["value"] * 1e6
                ts = [t]
                for g in m["inter_chunk_latency"]["value"]:
                    t += g * 1e6
                    ts.append(t)
                chunks.append(ts)
    else:
        doc = json.loads(Path(path).read_text())
        for start, ttft, gaps in zip(doc["start_times"], doc["ttfts"], doc["itls"], strict=True):
            t = (start + ttft) * 1e9
            ts = [t]
            for g in gaps:
                t += g * 1e9
                ts.append(t)
            chunks.append(ts)


def child(kind: str, path: str) -> None:
    # Imports are not part of the measurement (traceq pulls in duckdb and pyarrow).
    import orjson  # noqa: F401
    import polars  # noqa: F401

    if kind == "traceq":
        import traceq.ingest  # noqa: F401
    t = time.perf_counter()
    {"traceq": run_traceq, "polars": run_polars, "python": run_python}[kind](path)
    wall = time.perf_counter() - t
    print(json.dumps({"wall": wall}))


def measure(kind: str, path: Path) -> dict:
    """The child's wall time (imports excluded) and peak RSS (bench/harness.py)."""
    child = harness.run_python([__file__, "--child", kind, str(path)])
    return json.loads(child.last_line) | {"rss_mb": child.peak_rss_mib}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    rng = random.Random(42)
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        aiperf = Path(tmp) / "profile_export.jsonl"
        aiperf.write_text("\n".join(aiperf_line(rng, i) for i in range(args.requests)) + "\n")
        vllm = Path(tmp) / "vllm-bench-result.json"
        vllm.write_text(vllm_doc(rng, args.requests))
        print(f"{args.requests} requests per file")
        print(f"{'file':<26}{'reader':<8}{'MB':>8}{'s':>8}{'MB/s':>8}{'ratio':>8}{'RSS MB':>9}")
        for path in (aiperf, vllm):
            mb = path.stat().st_size / 1e6
            results = {k: measure(k, path) for k in ("traceq", "polars", "python")}
            ours = results["traceq"]["wall"]
            for kind, r in results.items():
                ratio = r["wall"] / ours
                print(
                    f"{path.name:<26}{kind:<8}{mb:>8.1f}{r['wall']:>8.2f}{mb / r['wall']:>8.1f}"
                    f"{ratio:>8.2f}{r['rss_mb']:>9.0f}"
                )


if __name__ == "__main__":
    main()
