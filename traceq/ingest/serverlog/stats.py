"""Periodic stats lines → `engine_stats`: vLLM V0 / V1 stats and SGLang scheduler lines.

Each function takes the timestamped records of one block and returns (rows, quarantine):
a line that claims to be a stats line but does not parse is quarantined, never dropped.
"""

from __future__ import annotations

import polars as pl

from traceq.ingest.serverlog import patterns as p
from traceq.ingest.serverlog.lines import extract_record

PCT_DECIMALS = 4  # percentages are printed with at most this many decimals (patterns.PCT)


def _f(name: str) -> pl.Expr:
    return pl.col(name).cast(pl.Float64, strict=False)


def _ratio(name: str) -> pl.Expr:
    """A printed percentage as a ratio 0–1: the double nearest to the decimal value / 100
    (decimal arithmetic: float `/ 100` would print 99.4 % as 0.9940000000000001)."""
    exact = pl.col(name).str.to_decimal(scale=PCT_DECIMALS).cast(pl.Decimal(24, PCT_DECIMALS + 2))
    return (exact / 100).cast(pl.Float64)


def _i(name: str) -> pl.Expr:
    return pl.col(name).cast(pl.Int64, strict=False)


def vllm_stats(records: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """vLLM stats records (category `stats`) → engine_stats rows, quarantine rows."""
    cand = records
    if cand.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    cand = extract_record(cand, p.STATS, "running")
    ok = cand.filter(pl.col("running").is_not_null() & pl.col("ts").is_not_null())
    bad = cand.filter(pl.col("running").is_null() | pl.col("ts").is_null())
    rows = ok.select(
        "ts",
        "instance",
        line="line_no",
        engine=_i("engine").fill_null(0),
        prompt_tps=_f("prompt_tps"),
        gen_tps=_f("gen_tps"),
        throughput_tps=_f("throughput_tps"),
        running=_i("running"),
        waiting=pl.coalesce(_i("waiting"), _i("pending")),
        swapped=_i("swapped"),
        kv_usage=_ratio("kv"),
        cpu_kv_usage=_ratio("cpu_kv"),
        prefix_hit_rate=_ratio("prefix"),
        ext_prefix_hit_rate=_ratio("ext_prefix"),
        mm_hit_rate=_ratio("mm_hit"),
        process="process",
    )
    reason = (
        pl.when(pl.col("ts").is_null())
        .then(pl.lit("stats line with an invalid timestamp"))
        .otherwise(pl.lit("stats line does not parse (truncated or unknown variant)"))
    )
    return rows, quarantine_rows(bad, reason)


def sglang_stats(records: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """SGLang `Prefill batch` / `Decode batch` lines → engine_stats rows, quarantine rows."""
    msg = pl.col("msg")
    cand = records.filter(
        msg.str.starts_with("Prefill batch") | msg.str.starts_with("Decode batch")
    )
    if cand.height == 0:
        return pl.DataFrame(), pl.DataFrame()
    pre = cand.filter(msg.str.starts_with("Prefill"))
    dec = cand.filter(msg.str.starts_with("Decode"))
    pre = extract_record(pre, p.SGLANG_PREFILL, "queue")
    dec = extract_record(dec, p.SGLANG_DECODE, "queue")
    both = pl.concat([pre, dec], how="diagonal_relaxed")
    ok = both.filter(pl.col("queue").is_not_null() & pl.col("ts").is_not_null())
    bad = both.filter(pl.col("queue").is_null() | pl.col("ts").is_null())
    ranks = pl.col("ranks")
    rows = ok.select(
        "ts",
        "instance",
        line="line_no",
        engine=ranks.str.extract(r"DP([0-9]+)", 1).cast(pl.Int64).fill_null(0),
        gen_tps=_f("gen_tps") if "gen_tps" in ok.columns else pl.lit(None, pl.Float64),
        running=_i("running") if "running" in ok.columns else pl.lit(None, pl.Int64),
        waiting=_i("queue"),
        kv_usage=_f("usage"),
        batch=pl.when(msg.str.starts_with("Prefill"))
        .then(pl.lit("prefill"))
        .otherwise(pl.lit("decode")),
        new_seqs=_col_i(ok, "new_seqs"),
        new_tokens=_col_i(ok, "new_tokens"),
        cached_tokens=_col_i(ok, "cached_tokens"),
        num_tokens=_col_i(ok, "num_tokens"),
        cuda_graph=(pl.col("cuda_graph") == "True")
        if "cuda_graph" in ok.columns
        else pl.lit(None, pl.Boolean),
        ranks=ranks.str.strip_chars(),
    )
    reason = (
        pl.when(pl.col("ts").is_null())
        .then(pl.lit("SGLang batch line with an invalid timestamp"))
        .otherwise(pl.lit("SGLang batch line does not parse (truncated or unknown variant)"))
    )
    return rows, quarantine_rows(bad, reason)


def _col_i(df: pl.DataFrame, name: str) -> pl.Expr:
    return _i(name) if name in df.columns else pl.lit(None, pl.Int64)


def quarantine_rows(df: pl.DataFrame, reason: pl.Expr | str) -> pl.DataFrame:
    """Quarantine rows (`location`, `reason`, `raw`) for records of `df`."""
    from traceq.schema import RAW_LIMIT

    if df.height == 0:
        return pl.DataFrame()
    return df.select(
        location=pl.format("line {}", "line_no"),
        reason=reason if isinstance(reason, pl.Expr) else pl.lit(reason),
        raw=pl.col("text").str.slice(0, RAW_LIMIT),
    )
