"""Schema of the rollups written at ingest: tables that no reader fills, derived from a
source's `tokens` when they are laid out (traceq/layout_rollups.py), so that the views read
per-request and per-bucket figures instead of every chunk (traceq/sql/rollups.sql
`_request_gaps`, traceq/sql/views.sql `_tbt_stats`). traceq/schema.py puts them in TABLES."""

from __future__ import annotations

import polars as pl

from traceq.schema_types import F64, I64, NS, STR, Column, _c

LONG_GAPS = pl.List(pl.Struct({"ts": pl.Int64(), "tbt_ns": pl.Int64()}))
"""A list of chunk gaps: the chunk's time and the gap before it (ns)."""

ROLLUP_TABLES: dict[str, tuple[Column, ...]] = {
    "request_gaps": (
        _c("request_id", STR, "", "Request (`tokens.request_id`)."),
        _c("source_id", STR, "", "Content hash of the source file."),
        _c("view", STR, "", "`server` or `client` (`tokens.view`)."),
        _c("n_gaps", I64, "count", "Chunk gaps of the request row (`tokens.gap_ns` not null)."),
        _c("tbt_p50_ms", F64, "ms", "Median gap (`quantile_cont`); null without a gap."),
        _c("tbt_p99_ms", F64, "ms", "99th percentile gap (`quantile_cont`); null without a gap."),
        _c("tbt_max_ms", F64, "ms", "Longest gap."),
        _c("t_first", I64, NS, "First chunk."),
        _c("t_last", I64, NS, "Last chunk."),
        _c("long_gaps", LONG_GAPS, "ns", "Every gap of at least 100 ms: chunk time, gap."),
    ),
    "gap_buckets": (
        _c("source_id", STR, "", "Content hash of the source file."),
        _c("view", STR, "", "`server` or `client` (`tokens.view`)."),
        _c(
            "bucket",
            I64,
            "",
            "Order-keeping bucket of `tokens.gap_ns` (`_gap_bucket`, traceq/sql/gap_bucket.sql).",
        ),
        _c("n", I64, "count", "Gaps in the bucket."),
        _c("lo_ns", I64, "ns", "Smallest gap in the bucket."),
        _c("hi_ns", I64, "ns", "Largest gap in the bucket."),
        _c("sum_ns", I64, "ns", "Sum of the bucket's gaps."),
    ),
}

ROLLUP_DOC = [
    "## Rollups (derived at ingest)",
    "",
    "`request_gaps` and `gap_buckets` are read from no source: when a source's `tokens` are",
    "laid out (`traceq/layout_rollups.py`), traceq also writes one `request_gaps` row per",
    "request id and view (its chunk gaps summarised, as `request_tbt` gives them) and one",
    "`gap_buckets` row per view and bucket of `tokens.gap_ns` (count, min, max, sum), flat",
    "files `<table>/<source_id>.parquet` listed in `manifest.json` with the source's other",
    "files. `request_tbt`, `gap_stalls` and `kpi_latency` read them instead of every chunk.",
    "A source has neither when some of its chunks have no `requests` row of the same id and",
    "view, and a dataset written before them has none: the views then compute the same",
    "figures from `tokens`.",
    "",
]
