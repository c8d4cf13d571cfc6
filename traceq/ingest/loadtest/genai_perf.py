"""GenAI-Perf: `profile_export.json` (written by perf_analyzer) and the summaries
`profile_export_genai_perf.json` / `.csv`.

Per request: `timestamp` (send) and `response_timestamps[i]` (ns) with `response_outputs[i]`
holding the raw SSE text of that read (`data: {…}\\n\\n`, sometimes several events glued
together, or Triton's `text_output`). Events without content (the role chunk, a usage-only
chunk, `[DONE]`) are dropped as GenAI-Perf does; a response entry with content is one chunk
whose `n_tokens` is its number of content events. Usage chunks give the output token count
when present. The text itself is never stored.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from traceq.ingest.loadtest import summary_csv
from traceq.ingest.loadtest.common import (
    Run,
    anchor,
    client_frame,
    load_json,
    records_frame,
    sibling_source_id,
)
from traceq.ingest.options import IngestOptions
from traceq.ingest.source import Source

TOOL = "genai-perf"
EPOCH_NS_FLOOR = 10**17  # ns stamps below this (≈ 1973) come from a steady clock, not the epoch
_REQUEST = pl.Schema(
    {  # type: ignore[arg-type]
        "timestamp": pl.Int64,
        "response_timestamps": pl.List(pl.Int64),
        "response_outputs": pl.List(pl.Struct({"response": pl.String, "text_output": pl.String})),
    }
)


def looks_like(head: bytes) -> bool:
    per_request = b'"experiments"' in head and (
        b'"response_timestamps"' in head or b'"service_kind"' in head
    )
    summary = b'"time_to_first_token"' in head and b'"avg"' in head and b'"unit"' in head
    return per_request or summary


def looks_like_csv(text: bytes, name: str) -> bool:
    return summary_csv.looks_like(text) and "aiperf" not in name


def read(data: bytes, options: IngestOptions, source: Source) -> Run:
    run = Run(clock_domain="unix_ns")
    if summary_csv.looks_like(data.lstrip()):
        summary_csv.read(data, TOOL, run)
        run.run_source_id = _sibling(source)
        return run
    doc = load_json(data, run)
    if not isinstance(doc, dict):
        return run
    if not isinstance(doc.get("experiments"), list):
        for name, stats in doc.items():
            if isinstance(stats, dict) and "unit" in stats:
                run.distribution(TOOL, name, stats, stats.get("unit"), None)
        run.run_source_id = _sibling(source)
        return run
    experiments = doc["experiments"]
    several = len(experiments) > 1
    found: list[pl.DataFrame | None] = []
    for e, experiment in enumerate(experiments):
        label = str(e) if several else None
        requests = experiment.get("requests") if isinstance(experiment, dict) else None
        if not isinstance(requests, list):
            run.reject(f"experiment {e}", "experiment without a requests list", experiment)
            continue
        found.append(_requests(requests, run, f"{source.source_id}:{e}", label, f"experiment {e}"))
    frames = [f for f in found if f is not None and f.height]
    if frames:
        lowest = min(f["t_arrival"].min() for f in frames)  # type: ignore[type-var]
        relative = lowest is not None and lowest < EPOCH_NS_FLOOR  # type: ignore[operator]
        if relative:
            run.clock_domain = "steady_clock_ns"
            if options.t0 is not None:
                run.clock_domain = "unix_ns (steady clock anchored with --t0)"
                run.assumptions["t0"] = options.t0
                cols = ["t_arrival", "t_first_token", "t_last_token"]
                frames = [
                    f.with_columns(
                        *[anchor(pl.col(c), lowest, options.t0) for c in cols],  # type: ignore[arg-type]
                        chunk_ts=pl.col("chunk_ts") - lowest + options.t0,
                    )
                    for f in frames
                ]
        run.client = frames
    run.records = {"requests": sum(f.height for f in frames), "experiments": len(experiments)}
    return run


def _sibling(source: Source) -> str | None:
    return sibling_source_id(
        source, r"profile_export_genai_perf\.(json|csv)$", "profile_export.json"
    )


def _requests(
    requests: list[Any], run: Run, prefix: str, label: str | None, where: str
) -> pl.DataFrame | None:
    raw = records_frame(requests, _REQUEST, run, f"{where} request")
    bad = raw.filter(
        pl.col("timestamp").is_null()
        | pl.col("response_timestamps").is_null()
        | (pl.col("response_timestamps").list.len() != pl.col("response_outputs").list.len())
    )
    for i in bad["i"]:
        run.reject(
            f"{where} request {i}",
            "missing timestamp, or response_timestamps and response_outputs differ in length",
            requests[i],
        )
    good = raw.join(bad.select("i"), on="i", how="anti")
    events = (
        good.select("i", ts="response_timestamps", out="response_outputs")
        .explode("ts", "out")
        .with_row_index("entry")
        .select(
            "i",
            "entry",
            "ts",
            text_output=pl.col("out").struct.field("text_output"),
            event=pl.col("out").struct.field("response").str.split("\n\n"),
        )
        .explode("event")
        .with_columns(
            payload=pl.col("event").str.strip_chars().str.strip_prefix("data:").str.strip_chars()
        )
        .filter((pl.col("payload") != "[DONE]") | pl.col("text_output").is_not_null())
        .with_columns(
            content=pl.coalesce(
                pl.col("text_output"),
                pl.col("payload").str.json_path_match("$.choices[0].text"),
                pl.col("payload").str.json_path_match("$.choices[0].delta.content"),
            ),
            rid=pl.col("payload").str.json_path_match("$.id"),
            model=pl.col("payload").str.json_path_match("$.model"),
            finish=pl.col("payload").str.json_path_match("$.choices[0].finish_reason"),
            usage_out=pl.col("payload")
            .str.json_path_match("$.usage.completion_tokens")
            .cast(pl.Int64, strict=False),
            usage_in=pl.col("payload")
            .str.json_path_match("$.usage.prompt_tokens")
            .cast(pl.Int64, strict=False),
            err=pl.col("payload").str.json_path_match("$.error.message"),
        )
    )
    chunks = (
        events.filter(pl.col("content").str.len_chars() > 0)
        .group_by("i", "entry")
        .agg(pl.col("ts").first(), n=pl.len())
        .sort("i", "entry")
        .group_by("i", maintain_order=True)
        .agg(chunk_ts=pl.col("ts"), chunk_tokens=pl.col("n"))
    )
    per_request = events.group_by("i").agg(
        rid=pl.col("rid").drop_nulls().first(),
        model=pl.col("model").drop_nulls().first(),
        finish=pl.col("finish").filter(pl.col("finish") != "null").drop_nulls().last(),
        usage_out=pl.col("usage_out").max(),
        usage_in=pl.col("usage_in").max(),
        err=pl.col("err").drop_nulls().first(),
    )
    frame = (
        good.select("i", "timestamp")
        .join(per_request, on="i", how="left")
        .join(chunks, on="i", how="left")
        .sort("i")
        .with_columns(
            events=pl.col("chunk_tokens").list.sum(),
            t_first_token=pl.col("chunk_ts").list.first(),
            t_last_token=pl.col("chunk_ts").list.last(),
        )
        .with_columns(
            output_tokens=pl.coalesce("usage_out", "events"),
            error=pl.when(pl.col("t_first_token").is_null()).then(
                pl.coalesce("err", pl.lit("no content in the response"))
            ),
        )
        .with_columns(
            # Content events are tokens only when the usage chunk agrees (or there is none).
            chunk_tokens=pl.when(pl.col("events") == pl.col("output_tokens")).then("chunk_tokens")
        )
    )
    base = client_frame(
        {
            "request_id": frame.select(
                pl.coalesce("rid", pl.format("{}:{}", pl.lit(prefix), "i"))
            ).to_series(),
            "run": [label] * frame.height,
            "model": frame["model"],
            "t_arrival": frame["timestamp"],
            "t_first_token": frame["t_first_token"],
            "t_last_token": frame["t_last_token"],
            "prompt_tokens": frame["usage_in"],
            "output_tokens": frame["output_tokens"],
            "finish_reason": frame["finish"],
            "error": frame["error"],
            "streaming": [True] * frame.height,
            "time_resolution_ns": [1] * frame.height,
        }
    )
    return base.with_columns(frame.select("chunk_ts", "chunk_tokens"))
