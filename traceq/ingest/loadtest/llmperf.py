"""llmperf (ray-project): `*_individual_responses.json` and `*_summary.json`.

The individual file is a JSON list of request-level records (`ttft_s`, `end_to_end_latency_s`,
`inter_token_latency_s`, token counts, `error_code` / `error_msg`) with **no start time**: the
arrival order is lost. Each request is therefore placed at t = 0 (or `--t0`): the clock
domain is `request_relative`, durations are exact, positions on a timeline are not.
llmperf's ITL is e2e / output tokens (it includes TTFT).
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from traceq.ingest.loadtest.common import (
    Run,
    client_frame,
    content_id,
    load_json,
    records_frame,
    seconds_to_ns,
    sibling_source_id,
    valid_latency,
)
from traceq.ingest.options import IngestOptions
from traceq.ingest.source import Source

TOOL = "llmperf"
_SUMMARY_KEY = re.compile(r"^results_(.+?)_(quantiles_p\d+|mean|min|max|stddev)$")
_RECORD = pl.Schema(
    {
        "error_code": pl.Int64,
        "error_msg": pl.String,
        "ttft_s": pl.Float64,
        "end_to_end_latency_s": pl.Float64,
        "inter_token_latency_s": pl.Float64,
        "number_input_tokens": pl.Int64,
        "number_output_tokens": pl.Int64,
    }
)


def looks_like(head: bytes) -> bool:
    individual = head.lstrip().startswith(b"[") and b'"ttft_s"' in head
    summary = b'"results_ttft_s_' in head or (
        b'"num_concurrent_requests"' in head and b'"results_' in head
    )
    return individual or summary


def _unit(metric: str) -> str | None:
    if metric.endswith("_s"):
        return "s"
    if metric.endswith("_per_s"):
        return "tokens/s"
    if "tokens" in metric:
        return "tokens"
    return None


def read(data: bytes, options: IngestOptions, source: Source) -> Run:
    run = Run(clock_domain="request_relative")
    doc = load_json(data, run)
    if isinstance(doc, dict):
        run.clock_domain = "none"
        _summary(doc, run)
        run.run_source_id = sibling_source_id(source, r"summary", "individual_responses")
    elif isinstance(doc, list):
        frame = _requests(doc, run, content_id(TOOL, doc), options)
        if frame is not None:
            run.client.append(frame)
        run.records = {"requests": len(doc)}
        run.assumptions["arrival"] = (
            "llmperf records no start times: every request placed at t=0 (or --t0)"
        )
    return run


def _summary(doc: dict[str, Any], run: Run) -> None:
    for key, value in doc.items():
        m = _SUMMARY_KEY.match(key)
        if m:
            stat = m.group(2).replace("quantiles_", "")
            stat = {"stddev": "std"}.get(stat, stat)
            if stat.startswith("p"):
                stat = f"p{float(stat[1:]):g}"
            run.metric(TOOL, m.group(1), stat, value, _unit(m.group(1)))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            run.metric(TOOL, key, "value", value, _unit(key))


def _requests(
    records: list[Any], run: Run, key: str, options: IngestOptions
) -> pl.DataFrame | None:
    """Request rows; ids `<key>:<index>`, `key` naming the records list by its content (a
    record has no id and no start time, only its figures)."""
    raw = records_frame(records, _RECORD, run, "record")
    failed = pl.col("error_code").is_not_null() | (pl.col("error_msg").str.len_chars() > 0)
    ttft = valid_latency(pl.col("ttft_s"))
    e2e = valid_latency(pl.col("end_to_end_latency_s"))
    bad = raw.filter(~failed & (ttft.is_null() | e2e.is_null() | (e2e < ttft)))
    for i in bad["i"]:
        run.reject(
            f"record {i}", "TTFT / e2e latency missing, NaN, negative or e2e < TTFT", records[i]
        )
    good = raw.join(bad.select("i"), on="i", how="anti")
    t0 = options.t0 or 0
    ok = ~failed
    frame = good.select(
        request_id=pl.format("{}:{}", pl.lit(key), "i"),
        error=pl.when(failed).then(
            pl.format(
                "{} {}", pl.col("error_code").cast(pl.String).fill_null(""), "error_msg"
            ).str.strip_chars()
        ),
        t_arrival=pl.lit(t0, pl.Int64),
        t_first_token=pl.when(ok).then(pl.lit(t0, pl.Int64) + seconds_to_ns("ttft_s")),
        t_last_token=pl.when(ok).then(pl.lit(t0, pl.Int64) + seconds_to_ns("end_to_end_latency_s")),
        prompt_tokens="number_input_tokens",
        output_tokens="number_output_tokens",
    )
    base = client_frame(
        {
            "request_id": frame["request_id"],
            "prompt_tokens": frame["prompt_tokens"],
            "output_tokens": frame["output_tokens"],
            "error": frame["error"],
            "time_resolution_ns": [1000] * frame.height,
        }
    )
    return base.with_columns(frame.select("t_arrival", "t_first_token", "t_last_token"))
