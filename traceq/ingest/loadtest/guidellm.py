"""guidellm `benchmarks.json`: one benchmark per strategy of the sweep, each with its metric
distributions and the (sampled) request list.

Per request only first / last token times exist (epoch seconds, `time.time()`), so guidellm
gives request-level rows and no `tokens`. 0.8 nests them under `info.timings`
(`request_start`, `first_token_iteration`, `last_token_iteration`, `request_end`); older
versions put `start_time`, `first_token_time`, `last_token_time`, `end_time` on the request.
Definitions (guidellm `request_stats.py`): TPOT = (last token − request start) / output tokens,
so it includes TTFT; ITL = (last − first token) / (output tokens − 1), our TPOT. Its TPOT and
ITL distributions are weighted by tokens (`count` = tokens, not requests).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceq.ingest.loadtest.common import (
    Run,
    client_frame,
    load_json,
    records_frame,
    seconds_to_ns,
)
from traceq.ingest.options import IngestOptions
from traceq.ingest.source import Source

TOOL = "guidellm"
_STATUSES = ("successful", "errored", "incomplete")
_FIELDS = {
    # ours: (0.8 info.timings name, older top-level name)
    "start": ("request_start", "start_time"),
    "first": ("first_token_iteration", "first_token_time"),
    "last": ("last_token_iteration", "last_token_time"),
}


def looks_like(head: bytes) -> bool:
    return b'"benchmarks"' in head and (
        b'"guidellm_version"' in head or b"generative_benchmark" in head or b'"type_"' in head
    )


def _unit(name: str) -> str | None:
    if name.endswith("_ms"):
        return "ms"
    if name in ("request_latency", "request_dispatch_delay", "request_scheduled_latency"):
        return "s"
    if name.endswith("_per_second"):
        return "1/s"
    if name.endswith("_count"):
        return "tokens" if "token" in name else "count"
    return None


def read(data: bytes, options: IngestOptions, source: Source) -> Run:
    run = Run(clock_domain="unix_ns")
    doc = load_json(data, run)
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list):
        if isinstance(doc, dict):
            run.reject("file", "guidellm report without a benchmarks list", doc)
        return run
    benchmarks = doc["benchmarks"]
    several = len(benchmarks) > 1
    n_requests = 0
    for b, bench in enumerate(benchmarks):
        if not isinstance(bench, dict):
            run.reject(f"benchmark {b}", "not a JSON object", bench)
            continue
        label = str(b) if several else None
        for name, groups in (bench.get("metrics") or {}).items():
            stats = groups.get("successful") if isinstance(groups, dict) else None
            if isinstance(stats, dict):
                flat = {k: v for k, v in stats.items() if k != "percentiles"}
                flat |= stats.get("percentiles") or {}
                run.distribution(TOOL, name, flat, _unit(name), label)
            elif isinstance(groups, dict) and groups:
                run.unknown(f"metric {name}")
        for key in ("duration", "warmup_duration", "cooldown_duration"):
            run.metric(TOOL, key, "value", bench.get(key), "s", label)
        frame = _requests(bench.get("requests"), run, source.source_id, label, f"benchmark {b}")
        if frame is not None:
            n_requests += frame.height
            run.client.append(frame)
    run.records = {"benchmarks": len(benchmarks), "requests": n_requests}
    run.assumptions["sampling"] = "guidellm keeps a sample of requests (--output-sampling)"
    return run


_TIMINGS = pl.Struct({new: pl.Float64 for new, _ in _FIELDS.values()})
_REQUEST = pl.Schema(
    {  # type: ignore[arg-type]
        "request_id": pl.String,
        "response_id": pl.String,
        "prompt_tokens": pl.Int64,
        "output_tokens": pl.Int64,
        **{old: pl.Float64 for _, old in _FIELDS.values()},
        "info": pl.Struct({"timings": _TIMINGS, "error": pl.String}),
        "error": pl.String,
    }
)


def _requests(
    groups: Any, run: Run, source_id: str, label: str | None, where: str
) -> pl.DataFrame | None:
    if not isinstance(groups, dict):
        return None
    frames = []
    for status in _STATUSES:
        records = groups.get(status) or []
        if isinstance(records, list) and records:
            frame = records_frame(records, _REQUEST, run, f"{where} {status}")
            frames.append(frame.with_columns(status=pl.lit(status), i=pl.col("i").cast(pl.Int64)))
    if not frames:
        return None
    timings = pl.col("info").struct.field("timings").struct
    raw = pl.concat(frames).select(
        "status",
        "i",
        id=pl.coalesce(
            "response_id", "request_id", pl.format("{}:{}:{}", pl.lit(source_id), "status", "i")
        ),
        prompt="prompt_tokens",
        output="output_tokens",
        error=pl.when(pl.col("status") != "successful").then(
            pl.coalesce(pl.col("info").struct.field("error"), "error", "status").str.slice(0, 500)
        ),
        **{
            ours: pl.coalesce(timings.field(new), pl.col(old))
            for ours, (new, old) in _FIELDS.items()
        },
    )
    bad = raw.filter(
        pl.col("error").is_null()
        & (
            pl.col("start").is_null()
            | pl.col("first").is_null()
            | pl.col("last").is_null()
            | ~pl.col("start").is_finite()
            | (pl.col("first") < pl.col("start"))
            | (pl.col("last") < pl.col("first"))
        )
    )
    for row in bad.iter_rows(named=True):
        run.reject(
            f"{where} {row['status']} {row['i']}",
            "successful request with missing or unordered times",
            {k: row[k] for k in ("id", "start", "first", "last")},
        )
    raw = raw.join(bad.select("status", "i"), on=["status", "i"], how="anti")
    ok = pl.col("error").is_null()
    stamps = raw.select(
        t_arrival=seconds_to_ns("start"),
        t_first_token=pl.when(ok).then(seconds_to_ns("first")),
        t_last_token=pl.when(ok).then(seconds_to_ns("last")),
    )
    return client_frame(
        {
            "request_id": raw["id"],
            "run": [label] * raw.height,
            "prompt_tokens": raw["prompt"],
            "output_tokens": raw["output"],
            "error": raw["error"],
            "streaming": [True] * raw.height,
            "time_resolution_ns": [1000] * raw.height,
        }
    ).with_columns(stamps)
