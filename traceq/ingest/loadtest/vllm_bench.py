"""`vllm bench serve --save-result [--save-detailed] [--append-result]` result JSON.

One JSON object per run; `--append-result` writes several, one per line. Per-request arrays
(`ttfts`, `itls`, `start_times`, `latencies`, `output_lens`, `errors`, …) are index-aligned
over every request, failures included, and only present with `--save-detailed` (older
versions kept `start_times` without it). Stamps are `time.perf_counter()` seconds: a relative
clock, anchored with `--t0` (the epoch time of the first request's send). Chunk times are
rebuilt as start + TTFT + running sum of `itls` (one gap per streamed chunk, not per token).
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from traceq.ingest.blocks import is_json
from traceq.ingest.loadtest.common import (
    Run,
    anchor,
    client_frame,
    content_id,
    gaps_to_offsets,
    load_json,
    seconds_to_ns,
    valid_latency,
)
from traceq.ingest.options import IngestOptions
from traceq.ingest.source import Source

TOOL = "vllm-bench"
CLOCK = "perf_counter_relative"
# mean_ttft_ms, median_tpot_ms, std_itl_ms, p99_e2el_ms, p99.9_ttft_ms, …
_STAT_KEY = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(.+)_ms$")
_PAIRS = re.compile(r"^percentiles_(.+)_ms$")
_SCALARS = {
    "duration": "s",
    "completed": "requests",
    "failed": "requests",
    "num_prompts": "requests",
    "total_input_tokens": "tokens",
    "total_output_tokens": "tokens",
    "request_throughput": "requests/s",
    "request_goodput": "requests/s",
    "output_throughput": "tokens/s",
    "total_token_throughput": "tokens/s",
    "max_output_tokens_per_s": "tokens/s",
    "max_concurrent_requests": "requests",
    "max_concurrency": "requests",
    "request_rate": "requests/s",
    "burstiness": "",
    "rtfx": "",
}
_ARRAYS = (
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "start_times",
    "latencies",
    "errors",
    "generated_texts",
    "queue_times",
)
_INFO = {
    "date",
    "endpoint_type",
    "backend",
    "label",
    "model_id",
    "tokenizer_id",
    "spec_decode_acceptance_rate",
    "rps_change_events",
}
SIGNATURE = (b'"total_input_tokens"', b'"request_throughput"')
# The per-request arrays whose values (with the index) identify a request of a run.
_IDENTITY = ("start_times", "ttfts", "latencies", "output_lens", "input_lens", "errors")


def _identity(arrays: dict[str, list]) -> list:
    return [[name, arrays.get(name)] for name in _IDENTITY]


def looks_like(head: bytes) -> bool:
    return all(key in head for key in SIGNATURE)


def read(data: bytes, options: IngestOptions, source: Source) -> Run:
    run = Run(clock_domain=CLOCK)
    docs = _documents(data, run)
    several = len(docs) > 1
    origin = _origin(docs)
    for index, (line, doc) in enumerate(docs):
        label = str(index) if several else None
        _metrics(doc, run, label)
        frame = _requests(doc, run, f"line {line}", options, origin, label)
        if frame is not None:
            run.client.append(frame)
    run.records = {"runs": len(docs)}
    if options.t0 is not None:
        run.clock_domain = "unix_ns (perf_counter anchored with --t0)"
        run.assumptions["t0"] = options.t0
    return run


def _documents(data: bytes, run: Run) -> list[tuple[int, dict]]:
    """(line number, object) per run: one object, or one per line with --append-result."""
    lines = [ln for ln in enumerate(data.split(b"\n"), 1) if ln[1].strip()]
    docs: list[tuple[int, dict]] = []
    if len(lines) > 1 and not is_json(lines[0][1]):
        whole = load_json(data, run)  # one pretty-printed object
        return [(1, whole)] if isinstance(whole, dict) else []
    for number, line in lines:
        doc = load_json(line, run, f"line {number}")
        if isinstance(doc, dict):
            docs.append((number, doc))
        elif doc is not None:
            run.reject(f"line {number}", "not a JSON object", line)
    return docs


def _origin(docs: list[tuple[int, dict]]) -> int | None:
    starts = [
        min(s for s in doc["start_times"] if isinstance(s, int | float))
        for _, doc in docs
        if isinstance(doc.get("start_times"), list)
        and any(isinstance(s, int | float) for s in doc["start_times"])
    ]
    return round(min(starts) * 1e9) if starts else None


def _metrics(doc: dict[str, Any], run: Run, label: str | None) -> None:
    for key, value in doc.items():
        m = _STAT_KEY.match(key)
        pairs = _PAIRS.match(key)
        if m:
            stat = {"median": "p50"}.get(m.group(1), m.group(1))
            if stat.startswith("p"):
                stat = f"p{float(stat[1:]):g}"
            run.metric(TOOL, m.group(2), stat, value, "ms", label)
        elif pairs and isinstance(value, list):
            _pairs(pairs.group(1), value, doc, run, label)
        elif key in _SCALARS:
            run.metric(TOOL, key, "value", value, _SCALARS[key], label)
        elif key not in _ARRAYS and key not in _INFO and not isinstance(value, int | float | str):
            run.unknown(f"key {key}")


def _pairs(metric: str, value: list, doc: dict[str, Any], run: Run, label: str | None) -> None:
    """`percentiles_ttft_ms: [[99, v], …]` (BenchmarkMetrics dumped whole by some builds),
    unless the same percentile is also a `p99_ttft_ms` key."""
    for pair in value:
        if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int | float):
            p = float(pair[0])
            word = str(int(p)) if int(p) == p else str(p)
            if f"p{word}_{metric}_ms" not in doc:
                run.metric(TOOL, metric, f"p{p:g}", pair[1], "ms", label)


def _requests(
    doc: dict[str, Any],
    run: Run,
    location: str,
    options: IngestOptions,
    origin: int | None,
    label: str | None,
) -> pl.DataFrame | None:
    arrays = {k: doc[k] for k in _ARRAYS if isinstance(doc.get(k), list)}
    if "ttfts" not in arrays:
        return None  # a non-detailed result: summary figures only
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{k} {n}" for k, n in lengths.items())
        run.reject(location, f"per-request arrays have different lengths ({shown})", doc)
        return None
    n = lengths["ttfts"]
    # The run's own per-request figures name it (perf_counter start times, TTFTs, latencies:
    # no two runs share them), whatever file or line carries it.
    key = content_id(TOOL, doc.get("date"), doc.get("model_id"), *_identity(arrays))
    prefix = f"{key}:"
    errors = [e if isinstance(e, str) and e else None for e in arrays.get("errors", [None] * n)]
    raw = pl.DataFrame(
        {
            "request_id": [f"{prefix}{i}" for i in range(n)],
            "ttft": pl.Series(arrays["ttfts"], dtype=pl.Float64, strict=False),
            "latency": pl.Series(
                arrays.get("latencies", [None] * n), dtype=pl.Float64, strict=False
            ),
            "start": pl.Series(
                arrays.get("start_times", [None] * n), dtype=pl.Float64, strict=False
            ),
            "itls": pl.Series(arrays["itls"], dtype=pl.List(pl.Float64), strict=False)
            if "itls" in arrays
            else pl.Series([None] * n, dtype=pl.List(pl.Float64)),
            "error": pl.Series(errors, dtype=pl.String),
        }
    )
    bad = raw.filter(
        pl.col("error").is_null()
        & (
            valid_latency(pl.col("ttft")).is_null()
            | ~pl.col("start").is_finite()
            | pl.col("itls").list.eval(~pl.element().is_finite() | (pl.element() < 0)).list.any()
        )
    )
    for i in bad["request_id"]:
        k = int(i.rsplit(":", 1)[1])
        record = {key: arrays[key][k] for key in ("ttfts", "itls", "start_times") if key in arrays}
        run.reject(f"{location} request {k}", "TTFT / ITL is null, NaN or negative", record)
    has_start = "start_times" in arrays
    if not has_start:
        run.assumptions["start_times"] = "absent: every request placed at t=0 (or --t0)"
    start_ns = seconds_to_ns("start") if has_start else pl.lit(0, pl.Int64)
    t_arrival = anchor(start_ns, origin if has_start else 0, options.t0)
    ok = pl.col("error").is_null()
    frame = (
        raw.join(bad.select("request_id"), on="request_id", how="anti")
        .with_columns(t_arrival=t_arrival)
        .with_columns(
            t_first_token=pl.when(ok).then(pl.col("t_arrival") + seconds_to_ns("ttft")),
            t_last_token=pl.when(ok).then(
                pl.col("t_arrival")
                + seconds_to_ns(pl.coalesce("latency", pl.col("ttft") + pl.col("itls").list.sum()))
            ),
            chunk_offsets_ns=pl.when(ok).then(gaps_to_offsets(pl.col("itls"), 1e9)),
        )
    )
    keep = frame["request_id"].to_list()
    index = [int(i.rsplit(":", 1)[1]) for i in keep]

    def column(name: str) -> list | None:
        values = arrays.get(name)
        return [values[i] for i in index] if values is not None else None

    base = client_frame(
        {
            "request_id": keep,
            "run": [label] * len(keep),
            "model": [doc.get("model_id")] * len(keep),
            "prompt_tokens": column("input_lens"),
            "output_tokens": column("output_lens"),
            "error": frame["error"].to_list(),
            "streaming": [True] * len(keep),
            "time_resolution_ns": [1000] * len(keep),
        }
    )
    return base.with_columns(
        frame.select("t_arrival", "t_first_token", "t_last_token", "chunk_offsets_ns")
    )
