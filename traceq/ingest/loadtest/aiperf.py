"""AIPerf: `profile_export.jsonl` (one record per request) and the aggregates
`profile_export_aiperf.json` / `profile_export_aiperf.csv`.

Every per-request metric is `{value, unit}`; units are normalised here. The request start is
epoch ns (`metadata.request_start_ns`, older versions `timestamp_ns`); chunk times are rebuilt
as start + TTFT + running sum of `inter_chunk_latency`. `output_sequence_length` (which counts
reasoning tokens) is the output token count, as AIPerf's own ITL uses it. Error records carry
`error{code, type, message}` and no latencies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import polars as pl

from traceq.ingest.loadtest import ndjson, summary_csv
from traceq.ingest.loadtest.common import (
    Run,
    client_frame,
    load_json,
    sibling_source_id,
    valid_latency,
)
from traceq.ingest.options import IngestOptions
from traceq.ingest.source import Source

TOOL = "aiperf"
_V = pl.Struct({"value": pl.Float64, "unit": pl.String})
_METRICS = {
    "ttft": _V,
    "time_to_first_token": _V,
    "request_latency": _V,
    "inter_chunk_latency": pl.Struct({"value": pl.List(pl.Float64), "unit": pl.String}),
    "output_sequence_length": _V,
    "output_token_count": _V,
    "input_sequence_length": _V,
}
SCHEMA = pl.Schema(
    {
        "metadata": pl.Struct(
            {
                "x_request_id": pl.String,
                "timestamp_ns": pl.Int64,
                "request_start_ns": pl.Int64,
                "benchmark_phase": pl.String,
                "credit_phase": pl.String,
            }
        ),
        "metrics": pl.Struct(_METRICS),
        "error": pl.Struct({"code": pl.Int64, "type": pl.String, "message": pl.String}),
    }
)
_TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9, "sec": 1e9}


def looks_like(head: bytes) -> bool:
    # profile_export_raw.jsonl (raw SSE per request, `start_perf_ns`) repeats the same requests.
    raw = b'"start_perf_ns"' in head
    per_request = _per_request(head) and not raw
    summary = b'"aiperf_version"' in head or (b'"records"' in head and b'"tag"' in head)
    return per_request or summary


def _per_request(text: bytes) -> bool:
    first = text.lstrip().split(b"\n", 1)[0]
    keys = (b'"metadata"', b'"metrics"', b'"x_request_id"')
    return first.startswith(b"{") and all(k in first for k in keys) and b'"benchmarks"' not in first


def looks_like_csv(text: bytes, name: str) -> bool:
    if not summary_csv.looks_like(text):
        return False
    if "genai_perf" in name:
        return False
    # AIPerf's columns run p1 … p99 upwards; GenAI-Perf's run p99 … p1 downwards.
    header = text.split(b"\n", 1)[0]
    return "aiperf" in name or header.find(b",p1,") < header.find(b",p99,")


def is_jsonl(head: bytes) -> bool:
    """True for the per-request JSON lines (read as a stream by `iter_requests`)."""
    return _per_request(head)


def iter_requests(
    stream: BinaryIO, run: Run, source_id: str, progress: Callable[[int], None]
) -> Iterator[pl.DataFrame]:
    """Client frames of `profile_export.jsonl`, block by block (bounded memory)."""
    for frame, block, first in ndjson.iter_frames(stream, SCHEMA, run, progress):
        yield _requests(frame, run, source_id, block, first)


def read(data: bytes, options: IngestOptions, source: Source) -> Run:
    """The aggregate JSON / CSV (the per-request lines go through `iter_requests`)."""
    run = Run(clock_domain="unix_ns")
    text = data.lstrip()
    if summary_csv.looks_like(text):
        summary_csv.read(data, TOOL, run)
        run.run_source_id = _sibling(source)
        return run
    doc = load_json(data, run)
    if isinstance(doc, dict):
        _summary(doc, run)
        run.run_source_id = _sibling(source)
    return run


def _sibling(source: Source) -> str | None:
    return sibling_source_id(source, r"profile_export_aiperf\.(json|csv)$", "profile_export.jsonl")


def _summary(doc: dict[str, Any], run: Run) -> None:
    records: dict[str, Any] = doc["records"] if isinstance(doc.get("records"), dict) else doc
    for name, stats in records.items():
        if isinstance(stats, dict) and "unit" in stats:
            run.distribution(TOOL, name, stats, stats.get("unit"), None)


def _scaled(name: str) -> pl.Expr:
    field = pl.col("metrics").struct.field(name)
    unit = field.struct.field("unit").replace_strict(_TO_NS, default=None, return_dtype=pl.Float64)
    return field.struct.field("value") * unit


def _requests(
    frame: pl.DataFrame, run: Run, source_id: str, block: bytes, first: int
) -> pl.DataFrame:
    meta = pl.col("metadata").struct
    icl = pl.col("metrics").struct.field("inter_chunk_latency")
    icl_scale = icl.struct.field("unit").replace_strict(
        _TO_NS, default=None, return_dtype=pl.Float64
    )
    err = pl.col("error").struct
    parsed = frame.select(
        "_line",
        request_id=pl.coalesce(
            meta.field("x_request_id"), pl.format("{}:{}", pl.lit(source_id), "_line")
        ),
        t_arrival=pl.coalesce(meta.field("request_start_ns"), meta.field("timestamp_ns")),
        ttft_ns=valid_latency(pl.coalesce(_scaled("time_to_first_token"), _scaled("ttft"))),
        latency_ns=valid_latency(_scaled("request_latency")),
        gaps=icl.struct.field("value").list.eval(pl.element()) * icl_scale,
        output_tokens=pl.coalesce(
            pl.col("metrics").struct.field("output_sequence_length").struct.field("value"),
            pl.col("metrics").struct.field("output_token_count").struct.field("value"),
        ).cast(pl.Int64),
        prompt_tokens=pl.col("metrics")
        .struct.field("input_sequence_length")
        .struct.field("value")
        .cast(pl.Int64),
        error=pl.coalesce(
            err.field("type"), err.field("message"), err.field("code").cast(pl.String)
        ),
    )
    bad = parsed.filter(
        pl.col("error").is_null()
        & (
            pl.col("t_arrival").is_null()
            | pl.col("ttft_ns").is_null()
            | pl.col("latency_ns").is_null()
            | pl.col("gaps").list.eval(~pl.element().is_finite() | (pl.element() < 0)).list.any()
        )
    )
    lines = block.split(b"\n") if bad.height else []
    for line in bad["_line"]:
        run.reject(
            f"line {line}",
            "no error, but start, TTFT, request latency or a chunk gap is missing, NaN, "
            "negative or in an unknown unit",
            lines[line - first],
        )
    good = parsed.join(bad.select("_line"), on="_line", how="anti")
    ok = pl.col("error").is_null()
    stamps = good.select(
        t_arrival="t_arrival",
        t_first_token=pl.when(ok).then(
            pl.col("t_arrival") + pl.col("ttft_ns").round().cast(pl.Int64)
        ),
        t_last_token=pl.when(ok).then(
            pl.col("t_arrival") + pl.col("latency_ns").round().cast(pl.Int64)
        ),
        chunk_offsets_ns=pl.when(ok).then(
            pl.concat_list(pl.lit(0.0), pl.col("gaps")).list.eval(
                pl.element().cum_sum().round().cast(pl.Int64)
            )
        ),
    )
    base = client_frame(
        {
            "request_id": good["request_id"],
            "prompt_tokens": good["prompt_tokens"],
            "output_tokens": good["output_tokens"],
            "error": good["error"],
            "streaming": [True] * good.height,
            "time_resolution_ns": [1] * good.height,
        }
    )
    return base.with_columns(stamps)
