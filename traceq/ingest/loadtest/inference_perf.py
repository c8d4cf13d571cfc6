"""kubernetes-sigs/inference-perf: `per_request_lifecycle_metrics.json` (opt-in, a JSON list)
and the lifecycle reports `summary_lifecycle_metrics.json`, `stage_N_lifecycle_metrics.json`,
`summary_prometheus_metrics.json`.

Per request: `start_time` / `end_time` and `info.response_metrics.chunk_times[]` /
`output_token_times[]` (one entry per token, a chunk's time repeated for each of its tokens)
are `time.perf_counter()` seconds: a relative clock, anchored with `--t0` (the epoch time of
the first request's send). A chunk is a run of equal token times; its length is `n_tokens`.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import polars as pl

from traceq.ingest.loadtest.common import (
    Run,
    anchor,
    client_frame,
    load_json,
    records_frame,
    seconds_to_ns,
    sibling_source_id,
    stat_name,
)
from traceq.ingest.options import IngestOptions
from traceq.ingest.source import Source

TOOL = "inference-perf"
_RECORD = pl.Schema(
    {  # type: ignore[arg-type]
        "start_time": pl.Float64,
        "end_time": pl.Float64,
        "stage_id": pl.Int64,
        "info": pl.Struct(
            {
                "input_tokens": pl.Int64,
                "request_metrics": pl.Struct({"text": pl.Struct({"input_tokens": pl.Int64})}),
                "response_metrics": pl.Struct(
                    {
                        "output_tokens": pl.Int64,
                        "response_chunks": pl.List(pl.String),
                        "chunk_times": pl.List(pl.Float64),
                        "output_token_times": pl.List(pl.Float64),
                    }
                ),
            }
        ),
    }
)
_STAGE = re.compile(r"stage_(\d+)_")


def looks_like(head: bytes) -> bool:
    per_request = head.lstrip().startswith(b"[") and (
        b'"output_token_times"' in head
        or b'"chunk_times"' in head
        or (b'"start_time"' in head and b'"response_metrics"' in head)
    )
    return per_request or (b'"load_summary"' in head and b'"successes"' in head)


def read(data: bytes, options: IngestOptions, source: Source) -> Run:
    run = Run(clock_domain="perf_counter_relative")
    doc = load_json(data, run)
    if isinstance(doc, dict):
        run.clock_domain = "none"
        stage = _STAGE.search(source.path.name)
        label = f"stage {stage.group(1)}" if stage else None
        prefix = "prometheus." if "prometheus" in source.path.name else ""
        _flatten(doc, prefix, run, label)
        run.run_source_id = sibling_source_id(
            source,
            r"(summary|stage_\d+)_(lifecycle|prometheus)_metrics\.json$",
            "per_request_lifecycle_metrics.json",
        )
    elif isinstance(doc, list):
        frame = _requests(doc, run, source.source_id, options)
        if frame is not None:
            run.client.append(frame)
        run.records = {"requests": len(doc)}
        if options.t0 is not None:
            run.clock_domain = "unix_ns (perf_counter anchored with --t0)"
            run.assumptions["t0"] = options.t0
    return run


def _unit(path: str) -> str | None:
    if ".latency." in path or path.endswith(("schedule_delay", "send_duration")):
        return "s"
    if "throughput." in path or path.endswith("_rate"):
        return "1/s"
    if path.endswith(("prompt_len", "output_len")):
        return "tokens"
    if path.endswith(".count"):
        return "requests"
    if path.endswith("benchmark_time_seconds"):
        return "s"
    return None


def _flatten(doc: dict[str, Any], path: str, run: Run, label: str | None) -> None:
    """Distributions (dicts with mean / median / pNN) and scalars, named by their key path."""
    stats = {k: v for k, v in doc.items() if stat_name(k) not in (None, "value", "rate", "count")}
    metric = path.rstrip(".")
    if stats:
        run.distribution(TOOL, metric, stats, _unit(metric), label)
    for key, value in doc.items():
        if key in stats:
            continue
        if isinstance(value, dict):
            _flatten(value, f"{path}{key}.", run, label)
        elif key in ("count", "rate") and stats:
            run.metric(TOOL, metric, key, value, _unit(f"{metric}.{key}"), label)
        else:
            run.metric(TOOL, f"{path}{key}", "value", value, _unit(f"{path}{key}"), label)


def _requests(
    records: list[Any], run: Run, source_id: str, options: IngestOptions
) -> pl.DataFrame | None:
    dicts = [r if isinstance(r, dict) else {} for r in records]
    raw = records_frame(records, _RECORD, run, "record")
    errors = pl.Series(
        "error",
        [
            None if dicts[i].get("error") in (None, "") else _text(dicts[i]["error"])
            for i in raw["i"]
        ],
    )
    rm = pl.col("info").struct.field("response_metrics").struct
    frame = raw.with_columns(errors).select(
        "i",
        "start_time",
        "stage_id",
        "error",
        output_tokens=rm.field("output_tokens"),
        prompt_tokens=pl.coalesce(
            pl.col("info").struct.field("input_tokens"),
            pl.col("info")
            .struct.field("request_metrics")
            .struct.field("text")
            .struct.field("input_tokens"),
        ),
        rid=rm.field("response_chunks").list.first().str.json_path_match("$.id"),
        runs=rm.field("output_token_times").list.eval(pl.element().rle()),
        chunk_times=rm.field("chunk_times"),
    )
    bad = frame.filter(
        pl.col("start_time").is_null()
        | ~pl.col("start_time").is_finite()
        | pl.col("chunk_times").list.eval(~pl.element().is_finite()).list.any()
    )
    for i in bad["i"]:
        run.reject(f"record {i}", "start_time missing / not finite, or a NaN chunk time", dicts[i])
    frame = frame.join(bad.select("i"), on="i", how="anti")
    if frame.height == 0:
        return None
    origin = seconds_to_ns(pl.col("start_time").min())
    origin_ns = frame.select(origin).item()
    use_tokens = pl.col("runs").list.len() > 0
    frame = frame.with_columns(
        chunk_s=pl.when(use_tokens)
        .then(pl.col("runs").list.eval(pl.element().struct.field("value")))
        .otherwise("chunk_times"),
        chunk_tokens=pl.when(use_tokens).then(
            pl.col("runs").list.eval(pl.element().struct.field("len").cast(pl.Int64))
        ),
    ).with_columns(
        chunk_ts=pl.when(pl.col("error").is_null()).then(
            pl.col("chunk_s").list.eval(anchor(seconds_to_ns(pl.element()), origin_ns, options.t0))
        ),
        t_arrival=anchor(seconds_to_ns("start_time"), origin_ns, options.t0),
    )
    ok = pl.col("error").is_null()
    base = client_frame(
        {
            "request_id": frame.select(
                pl.coalesce("rid", pl.format("{}:{}", pl.lit(source_id), "i"))
            ).to_series(),
            "run": frame.select(pl.format("stage {}", "stage_id")).to_series(),
            "t_arrival": frame["t_arrival"],
            "prompt_tokens": frame["prompt_tokens"],
            "output_tokens": frame["output_tokens"],
            "error": frame["error"],
            "streaming": [True] * frame.height,
            "time_resolution_ns": [1] * frame.height,
        }
    )
    return base.with_columns(
        frame.select(
            "chunk_ts",
            "chunk_tokens",
            t_first_token=pl.when(ok).then(pl.col("chunk_ts").list.first()),
            t_last_token=pl.when(ok).then(pl.col("chunk_ts").list.last()),
        )
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()[:500]
